package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// observer is a raw go-zookeeper connection straight to the ensemble's
// members (no proxy, no session package): it creates the run's fixed nodes,
// counts the semaphore's lease nodes, deletes holders' nodes as a third party
// and checks that nothing is left behind.
type observer struct {
	conn *zk.Conn
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// dialObserver connects to servers, each dialed with dial (which follows
// members that move).
func dialObserver(ctx context.Context, servers []string, dial zk.Dialer) (*observer, error) {
	conn, events, err := zk.Connect(servers, 4*time.Second, zk.WithLogger(nopLogger{}), zk.WithDialer(dial))
	if err != nil {
		return nil, fmt.Errorf("chaos: observer: %w", err)
	}
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return &observer{conn: conn}, nil
			}
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("chaos: observer: no session: %w", ctx.Err())
		}
	}
}

func (o *observer) close() { o.conn.Close() }

// ensure creates a persistent node with data if it does not exist.
func (o *observer) ensure(path string, data []byte) error {
	_, err := o.conn.Create(path, data, 0, zk.WorldACL(zk.PermAll))
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("chaos: create %s: %w", path, err)
	}
	return nil
}

// watchCount records the number of children of path after every change
// (a child watch, read again at each notification) until stop closes.
func (o *observer) watchCount(stop <-chan struct{}, path string, max int, rec *recorder) {
	retry := func() bool {
		t := time.NewTimer(50 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-stop:
			return false
		}
	}
	for {
		children, _, ch, err := o.conn.ChildrenW(path)
		if errors.Is(err, zk.ErrNoNode) {
			ok, _, ech, err := o.conn.ExistsW(path)
			if err != nil {
				if !retry() {
					return
				}
				continue
			}
			if !ok {
				select {
				case <-ech:
				case <-stop:
					return
				}
			}
			continue
		}
		if err != nil {
			if !retry() {
				return
			}
			continue
		}
		rec.serverCount(path, children, max)
		select {
		case <-ch:
		case <-stop:
			return
		}
	}
}

// seqOf returns the sequence suffix of a recipe node name (its last ten
// characters), or the name itself for a node without one.
func seqOf(name string) string {
	if len(name) >= 10 {
		return name[len(name)-10:]
	}
	return name
}

// sortBySeq sorts node names by their sequence suffix (creation order under
// one parent).
func sortBySeq(names []string) {
	sort.Slice(names, func(i, j int) bool {
		a, b := seqOf(names[i]), seqOf(names[j])
		if a != b {
			return a < b
		}
		return names[i] < names[j]
	})
}

// sortedChildren lists dir's children in sequence order.
func (o *observer) sortedChildren(dir string) ([]string, error) {
	children, _, err := o.conn.Children(dir)
	if err != nil {
		return nil, err
	}
	sortBySeq(children)
	return children, nil
}

// leftovers lists every node below the recipe paths (recursively), which
// must be none once every session has closed.
func (o *observer) leftovers(paths []string) ([]string, error) {
	var out []string
	var walk func(p string) error
	walk = func(p string) error {
		children, _, err := o.conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, c := range children {
			child := p + "/" + c
			if strings.HasSuffix(p, "/"+RecipeSemaphore) && (c == "locks" || c == "leases") {
				if err := walk(child); err != nil {
					return err
				}
				continue
			}
			out = append(out, child)
		}
		return nil
	}
	for _, p := range paths {
		if err := walk(p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// FirstSeen is the node first in line of a recipe, as the observer saw it at
// the end of a round.
type FirstSeen struct {
	At    time.Duration
	Node  string
	Owner int64  // the session that owns it
	Czxid int64  // its creation zxid: a hold's token
	Data  string // participant id (for the non-fair lock: "<uuid> <id>")
	// Server is the member the observer's connection read from.
	Server string
}

// first reads the node first in line under dir, if any.
func (o *observer) first(dir string, at time.Duration) (FirstSeen, bool) {
	children, err := o.sortedChildren(dir)
	if err != nil || len(children) == 0 {
		return FirstSeen{}, false
	}
	node := dir + "/" + children[0]
	data, st, err := o.conn.Get(node)
	if err != nil {
		return FirstSeen{}, false
	}
	return FirstSeen{At: at, Node: node, Owner: st.EphemeralOwner, Czxid: st.Czxid, Data: string(data)}, true
}
