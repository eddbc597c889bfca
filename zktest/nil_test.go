package zktest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// nilCtx is a nil context.Context, as a careless caller passes it.
var nilCtx context.Context

// catchPanic calls f and returns what it panicked with, or its error.
func catchPanic(f func() error) (p any, err error) {
	defer func() { p = recover() }()
	return nil, f()
}

// TestNilInputs: the helpers that take a ctx refuse a nil one with an error
// naming it, without a panic and without starting anything.
func TestNilInputs(t *testing.T) {
	addr := "127.0.0.1:1" // never dialed: the ctx is checked first
	creds := zktest.SessionCreds{ID: 1}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"FourLetterWord", func() error { _, err := zktest.FourLetterWord(nilCtx, addr, "srvr"); return err }},
		{"Mntr", func() error { _, err := zktest.Mntr(nilCtx, addr); return err }},
		{"WatchNotifications", func() error { _, err := zktest.WatchNotifications(nilCtx, addr); return err }},
		{"ExpireSession", func() error { return zktest.ExpireSession(nilCtx, []string{addr}, creds) }},
		{"HoldSession", func() error { _, err := zktest.HoldSessionCtx(nilCtx, []string{addr}, creds); return err }},
		{"Ensemble.WaitReady", func() error { return new(zktest.Ensemble).WaitReady(nilCtx) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			running := zktest.SnapshotGoroutines()
			p, err := catchPanic(c.call)
			if p != nil {
				t.Fatalf("panic: %v", p)
			}
			if !errors.Is(err, zktest.ErrBadArgument) || !strings.Contains(err.Error(), "nil context") {
				t.Errorf("err = %v, want one matching ErrBadArgument naming the nil context", err)
			}
			if leaked := zktest.FindLeaks(running, time.Second); leaked != "" {
				t.Errorf("the call left goroutines running: %s", leaked)
			}
		})
	}
}

// fatalTB records Fatalf instead of ending the test, so that a helper's
// refusal can be observed.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

// TestNilTestHelpers: Eventually with a nil condition and NewNamespaceOn
// with a nil server fail the test with a message naming the argument instead
// of panicking.
func TestNilTestHelpers(t *testing.T) {
	ft := &fatalTB{TB: t}
	if p, _ := catchPanic(func() error { zktest.Eventually(ft, time.Second, nil); return nil }); p != nil {
		t.Fatalf("Eventually(nil cond): panic: %v", p)
	}
	if !strings.Contains(ft.msg, "nil cond") {
		t.Errorf("Eventually(nil cond) failed with %q", ft.msg)
	}
	ft = &fatalTB{TB: t}
	var ns *zktest.Namespace
	if p, _ := catchPanic(func() error { ns = zktest.NewNamespaceOn(ft, nil); return nil }); p != nil {
		t.Fatalf("NewNamespaceOn(nil server): panic: %v", p)
	}
	if ns != nil || !strings.Contains(ft.msg, "nil server") {
		t.Errorf("NewNamespaceOn(nil server) = %v, failed with %q", ns, ft.msg)
	}
}
