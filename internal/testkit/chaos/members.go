package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// members holds one raw connection per ensemble member, each given that
// member's address alone, to compare what the members serve: after a sync,
// every member must show the same nodes, up to the churn between the reads.
type members struct {
	conns []*zk.Conn
	wg    sync.WaitGroup
}

// dialMembers connects to each of servers alone, dialed with dial (which
// follows members that move).
func dialMembers(ctx context.Context, servers []string, dial zk.Dialer) (*members, error) {
	m := &members{}
	for _, addr := range servers {
		conn, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogger(nopLogger{}), zk.WithDialer(dial))
		if err != nil {
			m.close()
			return nil, fmt.Errorf("chaos: member observer %s: %w", addr, err)
		}
		m.conns = append(m.conns, conn)
	wait:
		for {
			select {
			case ev := <-events:
				if ev.State == zk.StateHasSession {
					break wait
				}
			case <-ctx.Done():
				m.close()
				return nil, fmt.Errorf("chaos: member observer %s: no session: %w", addr, ctx.Err())
			}
		}
	}
	return m, nil
}

// close closes the connections (which fails their pending requests) and
// waits for the reads still running.
func (m *members) close() {
	for _, c := range m.conns {
		c.Close()
	}
	m.wg.Wait()
}

// view syncs path on every member and lists its children there; a member that
// does not answer within timeout (or fails) gives nil.
func (m *members) view(path string, timeout time.Duration) [][]string {
	type res struct {
		i    int
		kids []string
	}
	ch := make(chan res, len(m.conns))
	for i, c := range m.conns {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			if _, err := c.Sync(path); err != nil {
				ch <- res{i, nil}
				return
			}
			kids, _, err := c.Children(path)
			if err != nil {
				kids = nil
			} else if kids == nil {
				kids = []string{}
			}
			ch <- res{i, kids}
		}()
	}
	out := make([][]string, len(m.conns))
	t := time.NewTimer(timeout)
	defer t.Stop()
	for n := 0; n < len(m.conns); n++ {
		select {
		case r := <-ch:
			out[r.i] = r.kids
		case <-t.C:
			return out
		}
	}
	return out
}

// Divergence is a node that one member showed, after a sync, in several
// rounds while the other members (those that answered) did not.
type Divergence struct {
	Member      int
	Node        string
	First, Last time.Duration
	Rounds      int
}

// divergences tracks nodes seen on one member only.
type divergences struct {
	seen map[string]*Divergence // key: member + node
}

// observe records one round's views of path.
func (d *divergences) observe(at time.Duration, path string, views [][]string) {
	answered := 0
	for _, v := range views {
		if v != nil {
			answered++
		}
	}
	if answered < 2 {
		return
	}
	sets := make([]map[string]bool, len(views))
	for i, v := range views {
		if v != nil {
			sets[i] = map[string]bool{}
			for _, n := range v {
				sets[i][n] = true
			}
		}
	}
	for i, v := range views {
		for _, n := range v {
			alone := true
			for j, s := range sets {
				if j != i && s != nil && s[n] {
					alone = false
				}
			}
			if !alone {
				continue
			}
			key := fmt.Sprintf("%d %s/%s", i, path, n)
			if d.seen[key] == nil {
				d.seen[key] = &Divergence{Member: i, Node: path + "/" + n, First: at}
			}
			d.seen[key].Last = at
			d.seen[key].Rounds++
		}
	}
}

// persistent returns the nodes seen on one member alone in 3 rounds or more
// spanning at least orphanAfter.
func (d *divergences) persistent() []Divergence {
	var out []Divergence
	for _, v := range d.seen {
		if v.Rounds >= 3 && v.Last-v.First >= orphanAfter {
			out = append(out, *v)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].First != out[j].First {
			return out[i].First < out[j].First
		}
		return strings.Compare(out[i].Node, out[j].Node) < 0
	})
	return out
}
