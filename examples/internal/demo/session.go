package demo

import (
	"github.com/zkrecipes/zkrecipes/session"
)

// FollowSession prints every state change of sess after now, as
// "<name>'s session 0x…: Suspended", and then hands it to fn (if not nil).
// Closed is neither printed nor handed on. The returned channel is closed
// once the session has been closed and every change delivered.
func FollowSession(out *Printer, name string, sess *session.Session, fn func(session.Event)) <-chan struct{} {
	sub := sess.Subscribe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range sub.C() {
			if ev.State == session.Closed {
				continue
			}
			out.Printf("%s's session %s: %s", name, Hex(ev.SessionID), ev.State)
			if fn != nil {
				fn(ev)
			}
		}
	}()
	return done
}
