package zktest

import (
	"context"
	"net"
	"strings"
	"sync"
)

// Resolver maps host names to addresses for a test, so that a client can
// reach servers by name (and follow a name to a server's new address after
// Server.Move) without /etc/hosts. Its LookupHost has the shape of
// net.Resolver's. The zero value resolves no name; it is safe for concurrent
// use.
type Resolver struct {
	mu    sync.Mutex
	hosts map[string][]string
}

// Set makes name (case-insensitive) resolve to addrs, in that order, from
// the next lookup on; with no addrs the name no longer resolves. An address
// may be given as "host:port" (Server.Addr()): only the host is kept.
func (r *Resolver) Set(name string, addrs ...string) {
	var hosts []string
	for _, a := range addrs {
		if h, _, err := net.SplitHostPort(a); err == nil {
			a = h
		}
		hosts = append(hosts, a)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hosts == nil {
		r.hosts = make(map[string][]string)
	}
	if len(hosts) == 0 {
		delete(r.hosts, hostKey(name))
		return
	}
	r.hosts[hostKey(name)] = hosts
}

// hostKey is the map key of a name: lower case, without a trailing dot.
func hostKey(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// LookupHost returns the addresses last Set for host. An IP literal resolves
// to itself; any other unknown name gives a *net.DNSError that, like the
// system resolver's, says "no such host" and has IsNotFound set. It never
// blocks; if ctx is already done it returns ctx.Err().
func (r *Resolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ip, _, _ := strings.Cut(host, "%"); net.ParseIP(ip) != nil {
		return []string{host}, nil
	}
	r.mu.Lock()
	addrs := r.hosts[hostKey(host)]
	r.mu.Unlock()
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return append([]string(nil), addrs...), nil
}
