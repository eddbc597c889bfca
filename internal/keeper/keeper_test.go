package keeper_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/internal/keeper"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestUntil: Until returns nil once cond is true after a broadcast, cond's
// error as it is, and ctx's error (reported as ctx's) when ctx ends first.
func TestUntil(t *testing.T) {
	var mu sync.Mutex
	c := keeper.NewChanges(&mu)
	ready := false
	done := make(chan error, 1)
	go func() {
		err, _ := c.Until(context.Background(), func() (bool, error) { return ready, nil })
		done <- err
	}()
	mu.Lock()
	ready = true
	c.BroadcastLocked()
	mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Until: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Until did not return after the broadcast")
	}

	stop := errors.New("stopped")
	if err, ctxEnded := c.Until(context.Background(), func() (bool, error) { return false, stop }); err != stop || ctxEnded {
		t.Fatalf("Until: %v, %v; want cond's error, false", err, ctxEnded)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err, ctxEnded := c.Until(ctx, func() (bool, error) { return false, nil }); !errors.Is(err, context.Canceled) || !ctxEnded {
		t.Fatalf("Until: %v, %v; want context.Canceled, true", err, ctxEnded)
	}
}

// TestNewBackOffStartsAtFirst: the first pause is first (±50 %), not the
// backoff constructor's default of 500 ms.
func TestNewBackOffStartsAtFirst(t *testing.T) {
	for i := 0; i < 20; i++ {
		if d := keeper.NewBackOff(100*time.Millisecond, 5*time.Second).NextBackOff(); d < 50*time.Millisecond || d > 150*time.Millisecond {
			t.Fatalf("first pause %v, want 50 to 150 ms", d)
		}
	}
}
