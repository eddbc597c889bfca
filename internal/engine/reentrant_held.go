package engine

import "github.com/zkrecipes/zkrecipes/internal/goid"

// Held returns the lease the calling goroutine holds, without entering it
// again (its hold count does not change), or nil if it holds none or cannot
// be identified. The lease may have ended; check its Err. A read-write lock
// uses it to find the write lease a goroutine holds when that goroutine asks
// for the read lock (a downgrade).
func (r *GoroutineHolds) Held() *Lease { return r.held(goid.ID()) }

func (r *GoroutineHolds) held(id uint64) *Lease {
	if id == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.find(id); h != nil {
		return h.lease
	}
	return nil
}
