//go:build race

package goid

// raceEnabled: the race detector makes sync.Pool drop some of what is put
// back, so ID may allocate now and then.
const raceEnabled = true
