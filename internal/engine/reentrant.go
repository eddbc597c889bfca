package engine

import (
	"fmt"
	"sync"

	"github.com/zkrecipes/zkrecipes/internal/goid"
)

// GoroutineHolds keeps per-goroutine hold counts for a reentrant recipe, as
// Curator's InterProcessMutex keeps per-thread ones: the owner of a lease is
// the goroutine that acquired it; the same goroutine may enter again (the
// count grows), each entry needs an exit, and the last exit tells the caller
// to release the lease. Work handed to another goroutine does not carry the
// ownership with it: that goroutine's Enter finds nothing (and would queue
// behind the holder), and its Exit fails with ErrNotOwner.
//
// Goroutine ids are parsed from runtime.Stack (internal/goid). Should that
// ever fail (an unexpected runtime), every goroutine would look like the same
// owner; Enter, Add and Exit then refuse with an error matching
// ErrNoGoroutineID instead of sharing a hold between goroutines.
//
// The zero value is ready to use; a GoroutineHolds is safe for concurrent use.
type GoroutineHolds struct {
	mu sync.Mutex
	// One entry per holding goroutine: a lock excludes the other goroutines
	// of its process too, so there is rarely more than one (a slice costs a
	// per-key lock a few words where a map would cost a few hundred bytes).
	holds []hold
}

type hold struct {
	id    uint64
	lease *Lease
	count int
}

// find returns the hold of goroutine id, or nil. r.mu held.
func (r *GoroutineHolds) find(id uint64) *hold {
	for i := range r.holds {
		if r.holds[i].id == id {
			return &r.holds[i]
		}
	}
	return nil
}

// Enter re-enters the lease the calling goroutine holds, if any: it
// increments the hold count and returns the lease and the new count. It
// returns (nil, 0, nil) when the goroutine holds nothing. If the goroutine's
// lease has already ended (lost, closed), Enter does not re-enter and returns
// the lease with an error wrapping its cause: the caller must release its
// outer holds before it can acquire again. If the goroutine cannot be
// identified it returns (nil, 0, err) with err matching ErrNoGoroutineID.
func (r *GoroutineHolds) Enter() (*Lease, int, error) { return r.enter(goid.ID()) }

func (r *GoroutineHolds) enter(id uint64) (*Lease, int, error) {
	if id == 0 {
		return nil, 0, ErrNoGoroutineID
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.find(id)
	if h == nil {
		return nil, 0, nil
	}
	if err := h.lease.Err(); err != nil {
		return h.lease, h.count, fmt.Errorf("held lease ended: %w", err)
	}
	h.count++
	return h.lease, h.count, nil
}

// Add records l as held by the calling goroutine, with a count of 1. If l is
// nil (ErrBadArgument), the goroutine already holds a lease, or it cannot be
// identified (ErrNoGoroutineID), it returns an error and records nothing.
func (r *GoroutineHolds) Add(l *Lease) error { return r.add(goid.ID(), l) }

func (r *GoroutineHolds) add(id uint64, l *Lease) error {
	if l == nil {
		return fmt.Errorf("%w: nil lease", ErrBadArgument)
	}
	if id == 0 {
		return ErrNoGoroutineID
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.find(id); h != nil {
		return fmt.Errorf("%w: goroutine %d already holds %s", ErrBadArgument, id, h.lease.Node())
	}
	r.holds = append(r.holds, hold{id: id, lease: l, count: 1})
	return nil
}

// Exit decrements the calling goroutine's hold count on l. It returns
// last == true when the count reached zero (the record is gone; the caller
// releases l), and an error matching ErrNotOwner if the calling goroutine does
// not hold l (nothing changes then), or ErrNoGoroutineID.
func (r *GoroutineHolds) Exit(l *Lease) (last bool, err error) { return r.exit(goid.ID(), l) }

func (r *GoroutineHolds) exit(id uint64, l *Lease) (last bool, err error) {
	if id == 0 {
		return false, ErrNoGoroutineID
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.find(id)
	if h == nil || h.lease != l {
		return false, ErrNotOwner
	}
	h.count--
	if h.count > 0 {
		return false, nil
	}
	end := len(r.holds) - 1
	*h = r.holds[end]
	r.holds[end] = hold{}
	r.holds = r.holds[:end]
	return true, nil
}

// Count returns the calling goroutine's hold count (0 if it holds nothing or
// cannot be identified).
func (r *GoroutineHolds) Count() int { return r.countOf(goid.ID()) }

func (r *GoroutineHolds) countOf(id uint64) int {
	if id == 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.find(id); h != nil {
		return h.count
	}
	return 0
}

// Holds returns how many goroutines hold a lease.
func (r *GoroutineHolds) Holds() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.holds)
}
