package semaphore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestTrySetLostThenOverwritten: TrySet's first write applies and its answer
// is lost; another client writes after it before the retry, which the server
// refuses. The refusal does not say whether the first write applied, so
// TrySet must say recipes.ErrUnknownOutcome, not "someone else changed it".
func TestTrySetLostThenOverwritten(t *testing.T) {
	ns := zktest.NewNamespace(t)
	raw := ns.Conn(t)
	s, p := sessiontest.ConnectProxy(t, ns, session.WithSessionTimeout(10*time.Second))
	c, err := semaphore.NewSharedCount(s, "/count", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prev, err := c.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	full := ns.Path("/count")
	var hit atomic.Int32
	p.OnRequest(func(r zktest.Request) zktest.Action {
		if zktest.OpName(r.Op) == "setData" && r.Path == full && hit.Add(1) == 1 {
			p.Refuse(true)
			return zktest.SwallowReply
		}
		return zktest.Forward
	})
	type result struct {
		v   semaphore.CountValue
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, ok, err := c.TrySet(ctx, prev, 7)
		done <- result{v, ok, err}
	}()
	zktest.Eventually(t, 15*time.Second, func() bool {
		_, st, err := raw.Get(full)
		return err == nil && st.Version == prev.Version+1
	}, "TrySet's first write applied on the server")
	if _, err := raw.Set(full, []byte{0, 0, 0, 9}, prev.Version+1); err != nil {
		t.Fatal(err)
	}
	p.OnRequest(nil)
	p.Refuse(false)
	r := <-done
	if r.ok || !errors.Is(r.err, recipes.ErrUnknownOutcome) {
		t.Fatalf("TrySet whose write applied and was then overwritten: %+v, %v, %v; want an error matching recipes.ErrUnknownOutcome", r.v, r.ok, r.err)
	}
	if r.v.Count != 9 || r.v.Version != prev.Version+2 {
		t.Errorf("TrySet returned %+v, want the current value {9 %d}", r.v, prev.Version+2)
	}
}
