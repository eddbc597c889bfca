package zksession

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
)

// tableResolver resolves the names of its table; block, if set, holds every
// lookup until it is closed.
type tableResolver struct {
	mu      sync.Mutex
	hosts   map[string][]string
	block   chan struct{}
	lookups int
}

func (r *tableResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	r.mu.Lock()
	r.lookups++
	block := r.block
	addrs := r.hosts[host]
	r.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// An address that a configured name gives keeps that name when the ensemble
// announces it too (by IP): TLS verifies the configured name, which the
// certificate carries.
func TestProviderKeepsConfiguredName(t *testing.T) {
	r := &tableResolver{hosts: map[string][]string{"zk-0.example": {"127.0.0.11"}}}
	h := newHostProvider(zap.NewNop(), r)
	defer h.close()
	if err := h.Init([]string{"zk-0.example:2181"}); err != nil {
		t.Fatal(err)
	}
	h.setLearned([]string{"127.0.0.11:2181", "127.0.0.12:2181"})
	for i := 0; i < 4; i++ {
		server, _ := h.Next()
		addr, name, err := h.target(server)
		if err != nil {
			t.Fatal(err)
		}
		if addr == "127.0.0.11:2181" && name != "zk-0.example:2181" {
			t.Fatalf("%s is dialed under the name %q, want the configured zk-0.example:2181", addr, name)
		}
	}
}

// When the learned members change (a reconfig removed the member the
// session is on), the next address is one of the new members, not the
// configured server that was removed.
func TestProviderStartsWithNewMembers(t *testing.T) {
	for seed := 0; seed < 50; seed++ {
		h := newHostProvider(zap.NewNop(), &tableResolver{})
		configured := []string{"127.0.0.11:2181", "127.0.0.12:2181", "127.0.0.13:2181"}
		if err := h.Init(configured); err != nil {
			t.Fatal(err)
		}
		h.setLearned(configured)
		var removed string
		for removed == "" || removed == "127.0.0.13:2181" {
			removed, _ = h.Next()
		}
		h.Connected()
		var stay []string
		for _, a := range configured {
			if a != removed {
				stay = append(stay, a)
			}
		}
		h.setLearned(stay)
		if next, _ := h.Next(); next == removed {
			t.Fatalf("seed %d: the first address after %s was removed is %s again", seed, removed, next)
		}
		h.close()
	}
}

// A setLearned while a pass's lookups are in flight is not lost: the next
// attempt resolves again with the new members.
func TestProviderSetLearnedDuringResolve(t *testing.T) {
	r := &tableResolver{hosts: map[string][]string{"zk-0.example": {"127.0.0.11"}}, block: make(chan struct{})}
	h := newHostProvider(zap.NewNop(), r)
	defer h.close()
	if err := h.Init([]string{"zk-0.example:2181"}); err != nil {
		t.Fatal(err)
	}
	first := make(chan string, 1)
	go func() {
		s, _ := h.Next()
		first <- s
	}()
	for {
		r.mu.Lock()
		n := r.lookups
		r.mu.Unlock()
		if n > 0 {
			break
		}
		select {
		case s := <-first:
			t.Fatalf("Next returned %s before its lookup", s)
		default:
		}
	}
	h.setLearned([]string{"127.0.0.12:2181"})
	r.mu.Lock()
	close(r.block)
	r.block = nil
	r.mu.Unlock()
	<-first
	next, _ := h.Next()
	if next != "127.0.0.12:2181" {
		t.Fatalf("the attempt after the learned member came is %s, want 127.0.0.12:2181", next)
	}
}

// No name resolves: every address is the name itself, failed at once with
// its lookup error, and the report names each.
func TestProviderNoNameResolves(t *testing.T) {
	h := newHostProvider(zap.NewNop(), &tableResolver{})
	defer h.close()
	names := []string{"a.example:2181", "b.example:2182"}
	if err := h.Init(names); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		server, retry := h.Next()
		if retry {
			t.Fatalf("attempt %d: retryStart within the first pass", i)
		}
		_, _, err := h.target(server)
		if err == nil || !strings.Contains(err.Error(), "no such host") {
			t.Fatalf("target(%s) = %v, want the lookup error", server, err)
		}
		h.noteFailure(server, err)
	}
	if _, retry := h.Next(); !retry {
		t.Fatal("no retryStart after a pass in which nothing answered")
	}
	report := h.failureReport(names)
	for _, n := range names {
		if !strings.Contains(report, n+": lookup") {
			t.Errorf("report %q does not name %s's lookup error", report, n)
		}
	}
}
