package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// TestScopeOfUncancelableCtx: an acquire whose ctx cannot be canceled gets
// the closing context with the caller's values (scopeCtx, no allocation),
// and Close ends it, and a context derived from it, with the same cause as
// an acquire's context of its own: one that matches ErrClosed.
func TestScopeOfUncancelableCtx(t *testing.T) {
	type key struct{}
	e := &Engine{cfg: defaultConfig(), userPath: "/p"}
	user := context.WithValue(context.Background(), key{}, "v")
	var held, own scope
	if err := e.begin(user, &held); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(user)
	defer cancel()
	if err := e.begin(cctx, &own); err != nil {
		t.Fatal(err)
	}
	if held.cancel != nil || held.ctx != &held.held {
		t.Fatal("an uncancelable ctx got a context of its own")
	}
	if own.cancel == nil {
		t.Fatal("a cancelable ctx got the closing context")
	}
	if got := held.ctx.Value(key{}); got != "v" {
		t.Fatalf("Value = %v, want the caller's", got)
	}
	if _, ok := held.ctx.Deadline(); ok || held.ctx.Err() != nil {
		t.Fatal("the scope has a deadline or has ended before Close")
	}
	child, cancelChild := context.WithCancel(held.ctx)
	defer cancelChild()

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		e.Close() // waits for the acquires (end below)
	}()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"scope", held.ctx}, {"derived", child}, {"own", own.ctx}} {
		select {
		case <-c.ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not ended by Close", c.name)
		}
		if !errors.Is(c.ctx.Err(), context.Canceled) || !errors.Is(context.Cause(c.ctx), zksession.ErrClosed) {
			t.Fatalf("%s: Err %v, cause %v; want Canceled, ErrClosed", c.name, c.ctx.Err(), context.Cause(c.ctx))
		}
	}
	e.end(&held)
	e.end(&own)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the acquires ended")
	}
	if err := e.begin(user, &held); err == nil {
		t.Fatal("begin after Close succeeded")
	}
}
