// Package goid returns the id of the calling goroutine.
//
// The id is parsed from the header line of runtime.Stack ("goroutine 18
// [running]:"). It exists for one purpose: reentrant locks that, like
// Curator's InterProcessMutex keys its holders by thread, key theirs by
// goroutine. Nothing else in the module should depend on goroutine identity.
package goid

import "runtime"

// ID returns the id of the calling goroutine. Ids are unique among live
// goroutines and never reused within a process. It returns 0 only if the
// runtime's stack header has an unexpected format, which the tests rule out for
// the supported Go versions.
func ID() uint64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	return parse(buf[:n])
}

// parse reads the decimal id after "goroutine " at the start of b.
func parse(b []byte) uint64 {
	const prefix = "goroutine "
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return 0
	}
	var id uint64
	digits := 0
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
		digits++
	}
	if digits == 0 {
		return 0
	}
	return id
}
