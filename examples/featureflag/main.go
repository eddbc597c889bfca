// Command featureflag shows the node cache (package recipes/cache): a
// service reads a feature flag through a cache, so that no request waits
// for ZooKeeper, and reacts when an operator changes the flag.
//
// A service session caches the flag's node; an operator session writes it.
// The operator turns the flag on, off, deletes it (the service falls back
// to its default, off) and creates it again; for each change the service
// prints the event it got, how long after the write, and answers a request
// under the new setting. Then the service's connection is cut (through a
// fault proxy) and kept away while the operator writes the flag twice: the
// service answers from its stale copy meanwhile, and when it is back it
// reports the one change it finds. It exits 0 when the service saw every
// change in order and its copy ends equal to the server's node.
//
// Run it on an embedded ZooKeeper (started from the local install, stopped
// on exit, Ctrl-C included):
//
//	go run ./examples/featureflag
//
// or on your own ensemble:
//
//	go run ./examples/featureflag -zk 10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181
//
// Flags: -path; -v; -timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/examples/internal/demo"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var flagPath = flag.String("path", "/zkrecipes-demo/featureflag/new-checkout", "the flag's node")

func main() { demo.Main("featureflag", 2*time.Minute, run) }

// service answers requests under the flag, read from its cache.
type service struct {
	flag *cache.NodeCache
}

// enabled reads the cached flag: it never waits for the network. A missing
// node means off.
func (s *service) enabled() bool {
	n, ok := s.flag.Get()
	return ok && string(n.Data) == "on"
}

// handle is a request.
func (s *service) handle() string {
	if s.enabled() {
		return "new checkout"
	}
	return "old checkout"
}

func run(ctx context.Context, env *demo.Env) error {
	out := env.Out
	proxy, err := zktest.NewProxy(env.Servers...)
	if err != nil {
		return err
	}
	defer proxy.Close()
	connect := func(name string, servers []string) (*session.Session, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		opts := append([]session.Option{session.WithLogger(env.Logger.Named(name)), session.WithSessionTimeout(10 * time.Second)}, env.Options...)
		return session.Connect(cctx, servers, opts...)
	}
	svcSess, err := connect("service", proxy.Servers())
	if err != nil {
		return err
	}
	defer svcSess.Close()
	opSess, err := connect("operator", env.Servers)
	if err != nil {
		return err
	}
	defer opSess.Close()
	op := &operator{conn: opSess.Conn(), path: *flagPath}
	if err := op.reset(); err != nil {
		return err
	}
	defer op.remove() //nolint:errcheck // best effort: the demo's node

	states := demo.NewJournal[session.State]()
	followed := demo.FollowSession(out, "service", svcSess, func(ev session.Event) { states.Add(ev.State) })

	fc, err := cache.NewNode(svcSess, *flagPath)
	if err != nil {
		return err
	}
	defer fc.Close()
	svc := &service{flag: fc}
	events := demo.NewJournal[cache.Event]()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range fc.Events() {
			events.Add(ev)
		}
	}()
	defer func() { fc.Close(); <-done; svcSess.Close(); <-followed }()

	_, cursor, err := events.WaitFor(ctx, 0, "the flag's first load", func(ev cache.Event) bool { return ev.Type == cache.Initialized })
	if err != nil {
		return err
	}
	if cursor != 1 {
		return fmt.Errorf("events before Initialized of a flag that does not exist: %v", events.All())
	}
	out.Printf("service: flag %s loaded (absent: off); a request → %s", *flagPath, svc.handle())

	check := func(what string, t0 time.Time, since string, want cache.EventType, data string) error {
		ev, next, err := events.WaitFor(ctx, cursor, what, func(ev cache.Event) bool { return true })
		if err != nil {
			return err
		}
		cursor = next
		if ev.Type != want || (want != cache.Removed && string(ev.Node.Data) != data) {
			return fmt.Errorf("%s: the service got %v %q, want %v %q", what, ev.Type, ev.Node.Data, want, data)
		}
		out.Printf("service: %v %q, %s after %s; a request → %s", ev.Type, ev.Node.Data, demo.Ms(time.Since(t0)), since, svc.handle())
		return nil
	}
	steps := []struct {
		what string
		do   func() error
		want cache.EventType
		data string
	}{
		{"operator: flag on", func() error { return op.set("on") }, cache.Added, "on"},
		{"operator: flag off", func() error { return op.set("off") }, cache.Updated, "off"},
		{"operator: flag deleted", op.remove, cache.Removed, ""},
		{"operator: flag on again", func() error { return op.set("on") }, cache.Added, "on"},
	}
	for _, s := range steps {
		out.Printf("%s", s.what)
		t0 := time.Now()
		if err := s.do(); err != nil {
			return err
		}
		if err := check(s.what, t0, "the write", s.want, s.data); err != nil {
			return err
		}
	}

	// Away: the service's connection is cut and kept down while the
	// operator writes twice.
	from := states.Len()
	proxy.Refuse(true)
	proxy.Cut()
	if _, _, err := states.WaitFor(ctx, from, "the service's suspension", func(st session.State) bool { return st == session.Suspended }); err != nil {
		return err
	}
	for _, v := range []string{"off", "off for good"} {
		out.Printf("operator: flag %q (the service is away)", v)
		if err := op.set(v); err != nil {
			return err
		}
	}
	out.Printf("service, while away: a request → %s (its copy is stale, and the request does not wait)", svc.handle())
	t0 := time.Now()
	proxy.Refuse(false)
	if err := check("the change made while away", t0, "the connection was let back", cache.Updated, "off for good"); err != nil {
		return err
	}

	// The end: the service's copy is the server's node, and nothing else
	// was reported.
	data, st, err := op.conn.Get(*flagPath)
	if err != nil {
		return err
	}
	n, ok := fc.Get()
	if !ok || string(n.Data) != string(data) || n.Stat.Mzxid != st.Mzxid {
		return fmt.Errorf("the service's copy %q (mzxid %s) is not the server's %q (mzxid %s)", n.Data, demo.Hex(n.Stat.Mzxid), data, demo.Hex(st.Mzxid))
	}
	if extra := events.Len() - cursor; extra != 0 {
		return fmt.Errorf("%d events more than the changes: %v", extra, events.All()[cursor:])
	}
	out.Printf("done: the service saw every change in order, one event for the writes made while it was away, and its copy is the server's (mzxid %s)", demo.Hex(st.Mzxid))
	return nil
}

// operator writes the flag on its own session, as an admin tool would.
type operator struct {
	conn *zk.Conn
	path string
}

// reset makes the flag's parents and deletes the flag.
func (o *operator) reset() error {
	dir := path.Dir(o.path)
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		if _, err := o.conn.Create(dir[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return o.remove()
}

func (o *operator) set(v string) error {
	_, err := o.conn.Set(o.path, []byte(v), -1)
	if errors.Is(err, zk.ErrNoNode) {
		_, err = o.conn.Create(o.path, []byte(v), 0, zk.WorldACL(zk.PermAll))
	}
	return err
}

func (o *operator) remove() error {
	if err := o.conn.Delete(o.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}
