// Package goid returns the id of the calling goroutine.
//
// The id is parsed from the header line of runtime.Stack ("goroutine 18
// [running]:"). It exists for one purpose: reentrant locks that, like
// Curator's InterProcessMutex keys its holders by thread, key theirs by
// goroutine. Nothing else in the module should depend on goroutine identity.
package goid

import (
	"math"
	"runtime"
	"sync"
)

// bufs holds the buffers runtime.Stack writes the header into. A buffer
// passed to runtime.Stack escapes to the heap, so one on ID's stack would be
// allocated at every call; reentrant locks call ID several times a cycle.
var bufs = sync.Pool{New: func() any { return new([64]byte) }}

// ID returns the id of the calling goroutine. Ids are unique among live
// goroutines, never reused within a process, and never 0. It returns 0 only
// if the runtime's stack header has an unexpected format, which the tests
// rule out for the supported Go versions; callers must refuse to key
// anything by 0 (every goroutine would share it).
func ID() uint64 {
	buf := bufs.Get().(*[64]byte)
	n := runtime.Stack(buf[:], false)
	id := parse(buf[:n])
	bufs.Put(buf)
	return id
}

// parse reads the decimal id in "goroutine <id> [...": it returns 0 unless b
// starts with "goroutine ", then 1 to 20 digits that fit in a uint64 and are
// not all zero, then a space.
func parse(b []byte) uint64 {
	const prefix = "goroutine "
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return 0
	}
	var id uint64
	rest := b[len(prefix):]
	for i, c := range rest {
		if c == ' ' && i > 0 {
			return id
		}
		if c < '0' || c > '9' {
			return 0
		}
		d := uint64(c - '0')
		if id > (math.MaxUint64-d)/10 {
			return 0 // overflow: not a runtime header
		}
		id = id*10 + d
	}
	return 0 // no space after the digits: truncated or unexpected
}
