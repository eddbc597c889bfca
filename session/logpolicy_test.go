package session_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/semaphore"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestNothingLoggedPerCycleAtInfo: the documented log policy says that
// lock, read-write lock and semaphore cycles (acquired, busy, waited,
// released) log nothing at info or above. Two sessions with loggers at
// info contend for each recipe; after their connect lines, nothing is
// logged.
func TestNothingLoggedPerCycleAtInfo(t *testing.T) {
	ns := zktest.NewNamespace(t)
	core, logs := observer.New(zapcore.InfoLevel)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var sessions []*session.Session
	for i := 0; i < 2; i++ {
		s, err := session.Connect(ctx, ns.Servers(), session.WithNamespace(ns.Root), session.WithLogger(zap.New(core)))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sessions = append(sessions, s)
	}
	logs.TakeAll() // the sessions' connect lines

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, s := range sessions {
		m, err := mutex.New(s, "/m")
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		rw, err := rwlock.New(s, "/rw")
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Close()
		sem, err := semaphore.New(s, "/sem", 1)
		if err != nil {
			t.Fatal(err)
		}
		defer sem.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if l, err := m.TryLock(ctx); err == nil {
					_ = l.Release(ctx)
				}
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				_ = l.Release(ctx)
				r, err := rw.RLock(ctx)
				if err != nil {
					errs <- err
					return
				}
				_ = r.Release(ctx)
				w, err := rw.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				_ = w.Release(ctx)
				sl, err := sem.Acquire(ctx)
				if err != nil {
					errs <- err
					return
				}
				_ = sl.Release(ctx)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, e := range logs.All() {
		t.Errorf("logged at %v during lock cycles: %q %v", e.Level, e.Message, e.ContextMap())
	}
}

// slogRecorder is a slog.Handler that keeps the records at or above a level.
type slogRecorder struct {
	mu      sync.Mutex
	level   slog.Level
	records []slog.Record
}

func (h *slogRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *slogRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *slogRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *slogRecorder) WithGroup(string) slog.Handler      { return h }

// TestWithSlog: a Session given a slog logger logs its transitions through
// it, at info, with their fields as attributes, and nothing below the
// handler's level.
func TestWithSlog(t *testing.T) {
	ns := zktest.NewNamespace(t)
	h := &slogRecorder{level: slog.LevelInfo}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, err := session.Connect(ctx, ns.Servers(), session.WithSlog(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	var connected, closed bool
	for _, r := range h.records {
		if r.Level < slog.LevelInfo {
			t.Errorf("record below the handler's level: %v %q", r.Level, r.Message)
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "state" {
				connected = connected || a.Value.String() == "Connected" && r.Level == slog.LevelInfo
				closed = closed || a.Value.String() == "Closed"
			}
			return true
		})
	}
	if !connected || !closed {
		t.Fatalf("no Connected (at info) or Closed record with a state attribute among %d records", len(h.records))
	}
	if _, err := session.Connect(ctx, ns.Servers(), session.WithSlog(nil)); err == nil {
		t.Fatal("WithSlog(nil) accepted")
	}
}
