//go:build !race

package goid

// raceEnabled: see race_test.go.
const raceEnabled = false
