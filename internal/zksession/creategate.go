package zksession

import "sync/atomic"

// createGateBook: a read pipelined behind a create (the recipes engine reads
// the children right after creating its node, without waiting for the
// create's reply) is useful only if the server gets it after the create;
// if it overtakes the create on its way into go-zookeeper (two goroutines of
// the Session, each with a request), it misses the new node and is sent
// again. go-zookeeper writes requests in the order they reach its send
// loop, one at a time, so a request handed to it after the create's bytes
// were written goes behind the create. The wire tells a CreateGate when it
// writes a create request of the gate's path; the read waits for that (or
// for the create to end, whatever became of it) before it goes.

// CreateGate is told once that the create request it waits for was handed
// to the connection (see GateCreate).
type CreateGate interface{ CreateSent() }

// GateCreate makes the wire call g.CreateSent when it writes a create
// request (opcode 1, a plain create) of exactly path, once, on the send
// loop's goroutine: a request handed to go-zookeeper after that is written
// after the create. It must be called before the create is started.
// UngateCreate takes g back if the create ended without it; of the wire's
// CreateSent and a true UngateCreate, exactly one happens. One gate per
// path at a time (paths of protected creates carry a UUID).
func (s *Session) GateCreate(path string, g CreateGate) {
	s.wire.gateCreate(path, g)
}

// UngateCreate forgets the gate of path and reports whether it was still
// there: if not, the wire has told it (or is telling it) already.
func (s *Session) UngateCreate(path string) bool {
	return s.wire.ungateCreate(path)
}

// createGates holds the gates of the wire (see createGateBook).
type createGates struct {
	n atomic.Int32 // len(m), written under the wire's createdMu
	m map[string]CreateGate
}

func (w *wire) gateCreate(path string, g CreateGate) {
	w.createdMu.Lock()
	if w.gates.m == nil {
		w.gates.m = make(map[string]CreateGate)
	}
	w.gates.m[path] = g
	w.gates.n.Store(int32(len(w.gates.m)))
	w.createdMu.Unlock()
}

func (w *wire) ungateCreate(path string) bool {
	if w.gates.n.Load() == 0 {
		return false
	}
	w.createdMu.Lock()
	_, ok := w.gates.m[path]
	if ok {
		delete(w.gates.m, path)
		w.gates.n.Store(int32(len(w.gates.m)))
	}
	w.createdMu.Unlock()
	return ok
}

// createWritten is called by Write for a create request of path, before its
// bytes go to the socket.
func (w *wire) createWritten(path []byte) {
	if w.gates.n.Load() == 0 {
		return
	}
	w.createdMu.Lock()
	g, ok := w.gates.m[string(path)] // no allocation for the lookup
	if ok {
		delete(w.gates.m, string(path))
		w.gates.n.Store(int32(len(w.gates.m)))
	}
	w.createdMu.Unlock()
	if ok {
		g.CreateSent()
	}
}
