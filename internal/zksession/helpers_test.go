package zksession_test

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/session"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// wait is the generous bound for transitions in these tests; assertions are
// about order, except where a test says otherwise.
const wait = 30 * time.Second

// observed returns a logger option that records entries at debug level (and
// shows info and above in the test log) plus the recorded entries.
func observed(t *testing.T) (session.Option, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	tl := zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel))
	return session.WithLogger(zap.New(zapcore.NewTee(core, tl.Core()))), logs
}

// times3 repeats addr three times: go-zookeeper then reconnects to the "next"
// server at once instead of sleeping a second after each full round.
func times3(addr string) []string { return []string{addr, addr, addr} }

// states returns the states of events.
func states(evs []session.Event) []session.State {
	out := make([]session.State, len(evs))
	for i, ev := range evs {
		out[i] = ev.State
	}
	return out
}

// logged reports whether logs hold an entry with message msg and a field
// key=value.
func logged(logs *observer.ObservedLogs, msg, key, value string) bool {
	for _, e := range logs.FilterMessage(msg).All() {
		if v, ok := e.ContextMap()[key]; ok && v == value {
			return true
		}
	}
	return false
}
