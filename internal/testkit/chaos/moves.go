package chaos

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// book follows the members across moves. Sessions reach member i by the
// name zk-i.chaos.test, which names resolves to the member's address of the
// moment, as a Kubernetes headless service does for a pod; the observer's
// raw connections (go-zookeeper, which resolves once) are given each
// member's first address and dialed to where the member serves now.
type book struct {
	names zktest.Resolver

	mu    sync.Mutex
	first []string          // each member's address at the start
	now   map[string]string // first address -> current address
}

func newBook(servers []string) *book {
	b := &book{first: append([]string(nil), servers...), now: make(map[string]string)}
	for i, addr := range servers {
		b.now[addr] = addr
		b.names.Set(memberName(i), addr)
	}
	return b
}

// memberName is the host name of member i.
func memberName(i int) string { return fmt.Sprintf("zk-%d.chaos.test", i) }

// sessionServers returns the server list the sessions connect with: each
// member's name and client port.
func (b *book) sessionServers() ([]string, error) {
	var out []string
	for i, addr := range b.first {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("chaos: member %d: %w", i, err)
		}
		out = append(out, net.JoinHostPort(memberName(i), port))
	}
	return out, nil
}

// moved records that member i serves at addr now, for the names and the
// raw connections.
func (b *book) moved(i int, addr string) {
	b.mu.Lock()
	b.now[b.first[i]] = addr
	b.mu.Unlock()
	b.names.Set(memberName(i), addr)
}

// dial is the dialer of the raw connections: addr is a member's first
// address.
func (b *book) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	b.mu.Lock()
	to, ok := b.now[addr]
	b.mu.Unlock()
	if !ok {
		to = addr
	}
	return net.DialTimeout(network, to, timeout)
}

// move moves member m (3: the ensemble leader) to a new address, like a
// pod that comes back with a new IP: zktest's Server.Move, then every
// session gets a proxy in front of the new address (its old one is closed)
// and the member's name resolves there. Until then, a session that dials
// the name reaches the old address and is refused; a session that never
// resolved the name again would be cut off from the member for good.
func (r *run) move(f *FaultEvent, round, m int) error {
	f.Kind = FaultMove
	leader := m == 3
	if leader {
		l, err := r.ens.Leader()
		if err != nil {
			return fmt.Errorf("chaos: round %d: %w", round, err)
		}
		m = l
	}
	srv := r.ens.Member(m)
	from := srv.Addr()
	to, err := srv.Move()
	if err != nil {
		return fmt.Errorf("chaos: round %d: move member %d: %w", round, m, err)
	}
	f.Detail = fmt.Sprintf("member %d from %s to %s", m, from, to)
	if leader {
		f.Detail = fmt.Sprintf("member %d (the leader) from %s to %s", m, from, to)
	}
	_, p0, _ := net.SplitHostPort(from)
	if _, p1, _ := net.SplitHostPort(to); p1 != p0 {
		// Without loopback addresses of its own a member moves to a new
		// port, which a name cannot follow.
		return fmt.Errorf("chaos: round %d: member %d moved to a new port (%s to %s): names cannot follow it", round, m, from, to)
	}
	for _, c := range r.clients {
		px, err := zktest.NewProxy(to)
		if err != nil {
			return fmt.Errorf("chaos: round %d: %w", round, err)
		}
		r.proxies = append(r.proxies, px)
		if old := c.setProxy(m, to, px); old != nil {
			old.Close()
		}
	}
	r.book.moved(m, to)
	if err := r.ready(); err != nil {
		return fmt.Errorf("chaos: round %d: after moving member %d: %w", round, m, err)
	}
	return nil
}
