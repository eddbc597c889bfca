package discovery_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/recipes/cache"
	"github.com/zkrecipes/zkrecipes/recipes/discovery"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// providerOver registers the instances (name "svc") and returns a cache
// holding them all.
func providerSetup(t *testing.T, ins ...discovery.Instance) (*session.Session, *discovery.Cache) {
	t.Helper()
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	c := newCache(t, s, "svc", discovery.WithEvents(false))
	for _, in := range ins {
		in.Name = "svc"
		register(t, s, in)
	}
	zktest.Eventually(t, wait, func() bool { return len(c.Instances()) == len(ins) }, "%d instances cached", len(ins))
	return s, c
}

func newProvider(t *testing.T, c *discovery.Cache, opts ...discovery.Option) *discovery.Provider {
	t.Helper()
	p, err := discovery.NewProvider(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func picks(t *testing.T, p *discovery.Provider, n int) []string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		in, err := p.Pick()
		if err != nil {
			t.Fatalf("Pick %d: %v", i, err)
		}
		out = append(out, in.ID)
	}
	return out
}

// TestProviderStrategies: RoundRobin takes the instances in turn (in node
// order), Random reaches each, Sticky keeps one until it may no longer be
// picked; a disabled instance is never picked.
func TestProviderStrategies(t *testing.T) {
	_, c := providerSetup(t, discovery.Instance{ID: "a"}, discovery.Instance{ID: "b"}, discovery.Instance{ID: "c"},
		discovery.Instance{ID: "d", Disabled: true})
	got := fmt.Sprint(picks(t, newProvider(t, c), 7))
	if got != "[a b c a b c a]" {
		t.Fatalf("RoundRobin picked %s", got)
	}
	seen := map[string]int{}
	for _, id := range picks(t, newProvider(t, c, discovery.WithStrategy(discovery.Random)), 300) {
		seen[id]++
	}
	if len(seen) != 3 || seen["d"] != 0 {
		t.Fatalf("Random picked %v", seen)
	}
	sp := newProvider(t, c, discovery.WithStrategy(discovery.Sticky), discovery.WithDownPolicy(1, time.Hour))
	first := picks(t, sp, 10)
	for _, id := range first {
		if id != first[0] {
			t.Fatalf("Sticky picked %v", first)
		}
	}
	in, _ := sp.Pick()
	sp.ReportDown(in)
	next := picks(t, sp, 10)
	for _, id := range next {
		if id != next[0] || id == first[0] || id == "d" {
			t.Fatalf("Sticky after %s went down picked %v", first[0], next)
		}
	}
}

// TestProviderDownPolicy: an instance reported down as often as the policy
// says is skipped until the policy's timeout has passed since its first
// report; fewer reports change nothing; when every instance is down (or
// disabled) Pick says ErrNoInstances.
func TestProviderDownPolicy(t *testing.T) {
	_, c := providerSetup(t, discovery.Instance{ID: "a"}, discovery.Instance{ID: "b"})
	list := c.Instances()
	a, b := list[0], list[1]
	p := newProvider(t, c, discovery.WithDownPolicy(2, time.Second))
	p.ReportDown(a)
	if got := fmt.Sprint(picks(t, p, 4)); got != "[a b a b]" {
		t.Fatalf("after one report of a: %s", got)
	}
	p.ReportDown(a)
	downAt := time.Now()
	for _, id := range picks(t, p, 4) {
		if id == "a" {
			t.Fatal("a picked after two reports")
		}
	}
	p.ReportDown(b)
	p.ReportDown(b)
	if _, err := p.Pick(); !errors.Is(err, discovery.ErrNoInstances) {
		t.Fatalf("Pick with every instance down: %v, want ErrNoInstances", err)
	}
	zktest.Eventually(t, wait, func() bool {
		in, err := p.Pick()
		return err == nil && in.ID == "a"
	}, "a picked again after the timeout")
	if d := time.Since(downAt); d < time.Second-50*time.Millisecond {
		t.Fatalf("a back after %v, before the policy's second", d)
	}
	// Curator's defaults: 2 errors, 30 s.
	p = newProvider(t, c)
	p.ReportDown(a)
	p.ReportDown(a)
	for _, id := range picks(t, p, 4) {
		if id == "a" {
			t.Fatal("a picked after two reports under the default policy")
		}
	}
}

// TestProviderEmpty: no instance, or the cache closed.
func TestProviderEmpty(t *testing.T) {
	_, c := providerSetup(t, discovery.Instance{ID: "off", Disabled: true})
	p := newProvider(t, c)
	if _, err := p.Pick(); !errors.Is(err, discovery.ErrNoInstances) {
		t.Fatalf("Pick with only a disabled instance: %v", err)
	}
	c.Close()
	if _, err := p.Pick(); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Pick after the cache's Close: %v", err)
	}
}

// TestProviderNeverHandsOutRemoved: while instances are unregistered one
// by one, pickers on several goroutines never get an instance whose
// Removed event the cache had delivered before the Pick began.
func TestProviderNeverHandsOutRemoved(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	c := newCache(t, sessiontest.Connect(t, ns), "svc")
	rec := record(c.Events())
	const n = 20
	var regs []*discovery.Registration
	for i := 0; i < n; i++ {
		regs = append(regs, register(t, s, discovery.Instance{Name: "svc", ID: fmt.Sprintf("i%02d", i)}))
	}
	rec.WaitFor(t, wait, "all Added", func(evs []recorded) bool { return countType(evs, cache.Added) == n })
	p := newProvider(t, c)
	type pick struct {
		start time.Time
		id    string
	}
	var mu sync.Mutex
	var got []pick
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				in, err := p.Pick()
				if err != nil {
					continue // ErrNoInstances at the end
				}
				mu.Lock()
				got = append(got, pick{start, in.ID})
				mu.Unlock()
			}
		}()
	}
	for i, r := range regs {
		r.Close()
		rec.WaitFor(t, wait, "Removed", func(evs []recorded) bool { return countType(evs, cache.Removed) == i+1 })
	}
	close(stop)
	wg.Wait()
	removed := map[string]time.Time{}
	for _, ev := range rec.Events() {
		if ev.Type == cache.Removed {
			removed[ev.Instance.ID] = ev.at
		}
	}
	for _, pk := range got {
		if at, ok := removed[pk.id]; ok && at.Before(pk.start) {
			t.Fatalf("%s picked by a Pick that began %v after its Removed event", pk.id, pk.start.Sub(at))
		}
	}
	t.Logf("%d picks checked against %d removals", len(got), len(removed))
	if _, err := p.Pick(); !errors.Is(err, discovery.ErrNoInstances) {
		t.Fatalf("Pick after every removal: %v", err)
	}
}
