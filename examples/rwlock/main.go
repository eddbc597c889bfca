// Command rwlock shows the distributed read-write lock (package rwlock) and
// measures it.
//
// The demo: two readers, each with its own ZooKeeper session, hold the read
// lock at once; a writer queues behind them, and a reader arriving after the
// writer waits for it (writers are not starved). One reader's connection is
// cut through its fault proxy: its lease's Done fires (session.ErrSuspended)
// before the writer can get the lock. The writer updates a config znode,
// then downgrades to a read lease (its read node takes the write node's
// sequence, as Curator 5.5+ does) while a second writer is queued: that
// writer gets the lock only after the downgraded reader unlocks.
//
// The load: 8 sessions, each with its own lock on one path, 20 % writes
// (client c's cycle k writes iff (k+3c) mod 5 == 0), empty critical
// sections; it prints lock cycles per second, the acquire time of each side
// (p50, p99), and the ZooKeeper requests and watch notifications per cycle,
// counted on the client side of the wire (zktest.Tap). Every grant is checked
// against the others: the program fails if a writer ever held the lock
// beside anyone.
//
// Run it on an embedded ZooKeeper (started from the local install and
// stopped on exit, Ctrl-C included):
//
//	go run ./examples/rwlock
//
// or on your own ensemble:
//
//	go run ./examples/rwlock -zk 10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181
//
// Flags: -only (demo, load), -clients, -cycles (per client), -nodewatch,
// -path, -session-timeout, -v (library log on stderr), -timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/examples/internal/demo"
	"github.com/zkrecipes/zkrecipes/recipes"
	"github.com/zkrecipes/zkrecipes/rwlock"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

var (
	only           = flag.String("only", "demo,load", "sections to run, comma-separated: demo, load")
	nClients       = flag.Int("clients", 8, "(load) sessions, each with its own lock")
	cycles         = flag.Int("cycles", 250, "(load) lock cycles per client")
	nodeWatch      = flag.Bool("nodewatch", true, "(load) leases watch their own node (rwlock.WithNodeWatch)")
	sessionTimeout = flag.Duration("session-timeout", 2*time.Second, "ZooKeeper session timeout of each session")
	root           = flag.String("path", "/zkrecipes-demo/rwlock", "parent of the paths used")
)

func main() { demo.Main("rwlock", 3*time.Minute, run) }

func run(ctx context.Context, env *demo.Env) error {
	sections := map[string]func(context.Context, *demo.Env) error{"demo": runDemo, "load": runLoad}
	want := strings.Split(*only, ",")
	for _, s := range want {
		if sections[strings.TrimSpace(s)] == nil {
			return fmt.Errorf("-only %q: sections are demo and load", *only)
		}
	}
	for _, s := range want {
		if err := sections[strings.TrimSpace(s)](ctx, env); err != nil {
			return fmt.Errorf("%s: %w", strings.TrimSpace(s), err)
		}
	}
	env.Out.Printf("done")
	return nil
}

// member is one participant of the demo: a session (through its own fault
// proxy) and a lock on the demo's path.
type member struct {
	name  string
	proxy *zktest.Proxy
	sess  *session.Session
	lk    *rwlock.RWMutex
}

func (m *member) close() {
	m.proxy.Heal()
	_ = m.lk.Close()
	_ = m.sess.Close()
	m.proxy.Close()
}

func join(ctx context.Context, env *demo.Env, name, path string) (*member, error) {
	p, err := zktest.NewProxy(env.Servers...)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sess, err := session.Connect(cctx, p.Servers(),
		session.WithSessionTimeout(*sessionTimeout),
		session.WithLogger(env.Logger.Named(name)))
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	lk, err := rwlock.New(sess, path, rwlock.WithID(name))
	if err != nil {
		_ = sess.Close()
		p.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &member{name: name, proxy: p, sess: sess, lk: lk}, nil
}

// acquired is the outcome of an acquire run in the background.
type acquired struct {
	lease *rwlock.WriteLease
	err   error
	at    time.Time
}

func lockAsync(ctx context.Context, m *member) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := m.lk.Lock(ctx)
		ch <- acquired{l, err, time.Now()}
	}()
	return ch
}

// queue prints the lock's participants in queue order.
func queue(ctx context.Context, out *demo.Printer, m *member) ([]recipes.Participant, error) {
	ps, err := m.lk.Participants(ctx)
	if err != nil {
		return nil, err
	}
	var parts []string
	for _, p := range ps {
		state := "waits"
		if p.Holds {
			state = "holds"
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", p.ID, state, p.Kind))
	}
	out.Printf("    queue: %s", strings.Join(parts, ", "))
	return ps, nil
}

// waitQueue polls Participants until it lists n nodes (a demo shows the
// queue; a program would not poll).
func waitQueue(ctx context.Context, m *member, n int) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		ps, err := m.lk.Participants(ctx)
		if err == nil && len(ps) == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d participants: %w", n, context.Cause(ctx))
		case <-t.C:
		}
	}
}

func runDemo(ctx context.Context, env *demo.Env) error {
	out := env.Out
	path := *root + "/config-lock"
	names := []string{"reader-1", "reader-2", "writer-1", "writer-2"}
	ms := map[string]*member{}
	defer func() {
		for _, m := range ms {
			m.close()
		}
	}()
	for _, n := range names {
		m, err := join(ctx, env, n, path)
		if err != nil {
			return err
		}
		ms[n] = m
	}
	r1, r2, w1, w2 := ms["reader-1"], ms["reader-2"], ms["writer-1"], ms["writer-2"]
	out.Printf("--- readers share, a writer waits for them, later readers wait for the writer ---")
	l1, err := r1.lk.RLock(ctx)
	if err != nil {
		return err
	}
	l2, err := r2.lk.RLock(ctx)
	if err != nil {
		return err
	}
	out.Printf("reader-1 and reader-2 both hold the read lock (tokens %s, %s)", demo.Hex(l1.Token()), demo.Hex(l2.Token()))
	wctx, cancelW := context.WithCancel(ctx)
	defer cancelW()
	w1got := lockAsync(wctx, w1)
	if err := waitQueue(ctx, w1, 3); err != nil {
		return err
	}
	if _, err := queue(ctx, out, w1); err != nil {
		return err
	}
	if _, err := r1.lk.TryRLock(ctx); errors.Is(err, recipes.ErrBusy) {
		out.Printf("reader-1's second TryRLock: %v (it would queue behind writer-1: no starvation)", err)
	} else {
		return fmt.Errorf("a reader arriving after a queued writer: %v, want recipes.ErrBusy", err)
	}

	out.Printf("--- reader-2's connection is cut and kept out: its lease ends at its deadline, before anyone can take its place ---")
	cut := time.Now()
	r2.proxy.Refuse(true)
	r2.proxy.Cut()
	<-l2.Done()
	lostAt := time.Now()
	r2.proxy.Refuse(false)
	out.Printf("reader-2 was told %s after the cut: lease.Err() = %v", demo.Ms(lostAt.Sub(cut)), l2.Err())
	select {
	case a := <-w1got:
		return fmt.Errorf("writer-1 got the lock while reader-1 still reads (err %v)", a.err)
	default:
	}
	unlocked := time.Now()
	if err := l1.Release(ctx); err != nil {
		return err
	}
	out.Printf("reader-1 unlocks; writer-1 still waits for reader-2's node, which reader-2 deletes when it reconnects")
	out.Printf("    (or the server does, if reader-2's session expires)")
	a, err := demo.Wait(ctx, w1got, "writer-1's lock")
	if err != nil {
		return err
	}
	if a.err != nil {
		return a.err
	}
	if !a.at.After(unlocked) || !a.at.After(lostAt) {
		return errors.New("writer-1 got the lock before both read leases had ended")
	}
	wl := a.lease
	out.Printf("writer-1 holds the write lock %s after reader-1's unlock, once both read leases had ended (token %s)", demo.Ms(a.at.Sub(unlocked)), demo.Hex(wl.Token()))
	_ = l2.Release(ctx) // nil: the library deletes reader-2's node once it is back

	out.Printf("--- writer-1 writes, then downgrades while writer-2 waits ---")
	cfg := *root + "/config"
	if err := writeConfig(wl.Context(), w1.sess, cfg, wl.Token()); err != nil {
		return err
	}
	out.Printf("writer-1 wrote %s under lease.Context()", cfg)
	w2got := lockAsync(wctx, w2)
	if err := waitQueue(ctx, w2, 2); err != nil {
		return err
	}
	rl, err := wl.Downgrade(ctx)
	if err != nil {
		return err
	}
	out.Printf("writer-1 downgraded; its nodes (write, then read) carry one sequence:")
	out.Printf("    %s", wl.Node())
	out.Printf("    %s", rl.Node())
	if _, err := queue(ctx, out, w2); err != nil {
		return err
	}
	select {
	case a := <-w2got:
		return fmt.Errorf("writer-2 got the lock while writer-1 reads after its downgrade (err %v)", a.err)
	default:
	}
	full, err := w1.sess.Path(cfg)
	if err != nil {
		return err
	}
	data, _, err := w1.sess.Conn().Get(full)
	if err != nil {
		return err
	}
	out.Printf("writer-1 reads back %q under its read lease; writer-2 still waits", data)
	unlocked = time.Now()
	if err := rl.Release(ctx); err != nil {
		return err
	}
	a, err = demo.Wait(ctx, w2got, "writer-2's lock")
	if err != nil {
		return err
	}
	if a.err != nil {
		return a.err
	}
	if !a.at.After(unlocked) {
		return errors.New("writer-2 got the lock before the downgraded reader unlocked")
	}
	out.Printf("writer-2 holds the write lock %s after writer-1's read unlock", demo.Ms(a.at.Sub(unlocked)))
	return a.lease.Release(ctx)
}

// writeConfig writes the config under the lease's context, creating it on
// first use (EPHEMERAL, so that the demo leaves nothing behind); the token
// goes with the data, as a fenced resource would take it.
func writeConfig(ctx context.Context, s *session.Session, p string, token int64) error {
	full, err := s.Path(p)
	if err != nil {
		return err
	}
	data := []byte(fmt.Sprintf("version written under token %s", demo.Hex(token)))
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lost the write lock before writing: %w", context.Cause(ctx))
	}
	_, err = s.Conn().Set(full, data, -1)
	if errors.Is(err, zk.ErrNoNode) {
		// The demo's sessions use the default ACL (no session.WithACL).
		_, err = s.Conn().Create(full, data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	}
	return err
}
