package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipes/cache"
)

// The tree caches: every session keeps a cache.TreeCache of Root+"-tree",
// session 1's bounded by WithMaxDepth(treeMaxDepth). While each round's
// fault is held the observer changes a tree up to treeDepth levels below
// that root (treeKeys names per level): writes (creating the node and any
// missing parent), creates, deletes of leaves, deletes of inner nodes with
// their children (bottom-up one at a time, or all in one multi), a delete
// and a create again at once, writes of the root. At the end of every round,
// after the heal and the pause, every tree cache must match the server's
// subtree (read by the observer after a sync, down to the cache's maximum
// depth: the same paths, data, czxid and mzxid) and skip nothing, within
// cacheConverge. At the end of the run the events of every tree cache,
// replayed from nothing, must be consistent (as the other caches'), in tree
// order (no Added below a node not held, no Removed of a node that still
// holds children) and give the cache's copy.

const (
	treeKeys     = 3 // names per level: k0, k1, k2
	treeDepth    = 3 // levels below the root the observer writes
	treeMaxDepth = 2 // session 1's cache's WithMaxDepth
)

// TreeStats is what the run found of the tree caches.
type TreeStats struct {
	// Rounds is the number of rounds at whose end the tree caches were
	// compared with the server, and Converge how long they took to match
	// it; Mismatches counts the caches that differed at the rounds' first
	// looks.
	Rounds     int
	Converge   Dist
	Mismatches int
	// MaxNodes is the largest tree on the server at a round's end, Changes
	// the observer's changes, Events the events the caches delivered.
	MaxNodes, Changes, Events int
}

// String formats the figures for the report.
func (s TreeStats) String() string {
	return fmt.Sprintf("tree caches (one per session, session 1's with max depth %d): compared with the server at the end of %d rounds; time to match: %s\n"+
		"  %d differing at the first look; %d changes by the observer, trees of up to %d nodes; %d events delivered and replayed",
		treeMaxDepth, s.Rounds, s.Converge, s.Mismatches, s.Changes, s.MaxNodes, s.Events)
}

type treeSet struct {
	rec   *recorder
	root  string
	rng   *rand.Rand
	per   []*sessTree
	stats TreeStats
	took  []time.Duration
	bad   []Violation
}

// sessTree is one session's tree cache and the events it delivered.
type sessTree struct {
	idx      int
	maxDepth int // -1: no bound
	tree     *cache.TreeCache

	mu   sync.Mutex
	evs  []cache.Event
	done sync.WaitGroup
}

// startTrees creates the tree's root and one tree cache per client.
func (r *run) startTrees() (*treeSet, error) {
	ts := &treeSet{rec: r.rec, root: r.cfg.Root + "-tree", rng: rand.New(rand.NewSource(r.cfg.Seed + 2))}
	if err := r.obs.ensure(ts.root, []byte("root")); err != nil {
		return nil, err
	}
	for _, c := range r.clients {
		st := &sessTree{idx: c.idx, maxDepth: -1}
		var opts []cache.Option
		if c.idx == 1 {
			st.maxDepth = treeMaxDepth
			opts = append(opts, cache.WithMaxDepth(treeMaxDepth))
		}
		t, err := cache.NewTree(c.sess, ts.root, opts...)
		if err != nil {
			ts.close()
			return nil, fmt.Errorf("chaos: session %d: %w", c.idx, err)
		}
		st.tree = t
		st.done.Add(1)
		go func() {
			defer st.done.Done()
			for ev := range t.Events() {
				st.mu.Lock()
				st.evs = append(st.evs, ev)
				st.mu.Unlock()
			}
		}()
		ts.per = append(ts.per, st)
	}
	return ts, nil
}

// close closes every tree cache and waits for their event readers.
func (ts *treeSet) close() {
	for _, st := range ts.per {
		st.tree.Close()
		st.done.Wait()
	}
}

// churn changes the tree every 20 to 80 ms until stop. Errors are ignored:
// the observer's connection goes down with ensemble faults, and the check
// compares with what the server holds.
func (ts *treeSet) churn(o *observer, stop <-chan struct{}) {
	t := time.NewTimer(0)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		p := ts.root
		for d := 1 + ts.rng.Intn(treeDepth); d > 0; d-- {
			p += fmt.Sprintf("/k%d", ts.rng.Intn(treeKeys))
		}
		data := []byte(fmt.Sprintf("v%d", n))
		oneMulti := ts.rng.Intn(2) == 0
		switch op := ts.rng.Intn(20); {
		case op == 0:
			o.conn.Set(ts.root, data, -1) //nolint:errcheck // see above
		case op < 8:
			if _, err := o.conn.Set(p, data, -1); errors.Is(err, zk.ErrNoNode) {
				ts.create(o, p, data)
			}
		case op < 12:
			ts.create(o, p, data)
		case op < 14:
			o.conn.Delete(p, -1) //nolint:errcheck // a node with children stays: see above
		case op < 18:
			ts.deleteTree(o, p, oneMulti)
		default:
			ts.deleteTree(o, p, oneMulti)
			ts.create(o, p, data)
		}
		ts.stats.Changes++
		t.Reset(20*time.Millisecond + time.Duration(ts.rng.Int63n(int64(60*time.Millisecond))))
	}
}

// create creates p, and first each of its missing parents below the root,
// all with data.
func (ts *treeSet) create(o *observer, p string, data []byte) {
	acl := zk.WorldACL(zk.PermAll)
	rest := strings.Split(strings.TrimPrefix(p, ts.root+"/"), "/")
	at := ts.root
	for _, name := range rest {
		at += "/" + name
		if _, err := o.conn.Create(at, data, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return
		}
	}
}

// deleteTree deletes p with everything below it: children first, one
// request at a time, or all in one multi (the caches see the subtree go at
// once).
func (ts *treeSet) deleteTree(o *observer, p string, oneMulti bool) {
	var order []string // children before their parent
	var walk func(p string) bool
	walk = func(p string) bool {
		names, _, err := o.conn.Children(p)
		if err != nil {
			return false
		}
		for _, n := range names {
			if !walk(p + "/" + n) {
				return false
			}
		}
		order = append(order, p)
		return true
	}
	if !walk(p) {
		return
	}
	if oneMulti {
		ops := make([]any, 0, len(order))
		for _, q := range order {
			ops = append(ops, &zk.DeleteRequest{Path: q, Version: -1})
		}
		o.conn.Multi(ops...) //nolint:errcheck // see churn
		return
	}
	for _, q := range order {
		o.conn.Delete(q, -1) //nolint:errcheck // see churn
	}
}

// treeNode is a node of the server's tree and its depth below the root.
type treeNode struct {
	cacheNode
	depth int
}

// serverTree reads the whole tree after a sync, by the caches' paths: the
// reads of a node and of its children's list go out at once, and the
// subtrees of its children in parallel (so a round's end waits for a few
// round trips, not one per node).
func (ts *treeSet) serverTree(o *observer) (map[string]treeNode, error) {
	out := map[string]treeNode{}
	if _, err := o.conn.Sync(ts.root); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	var walk func(p string, depth int)
	walk = func(p string, depth int) {
		defer wg.Done()
		type got struct {
			data []byte
			st   *zk.Stat
			err  error
		}
		ch := make(chan got, 1)
		go func() {
			data, st, err := o.conn.Get(p)
			ch <- got{data, st, err}
		}()
		names, _, lerr := o.conn.Children(p)
		g := <-ch
		err := g.err
		if err == nil {
			err = lerr
		}
		if errors.Is(err, zk.ErrNoNode) {
			return // gone between the reads
		}
		mu.Lock()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
			return
		}
		out[p] = treeNode{cacheNode{g.data, g.st.Czxid, g.st.Mzxid}, depth}
		mu.Unlock()
		for _, n := range names {
			wg.Add(1)
			go walk(p+"/"+n, depth+1)
		}
	}
	wg.Add(1)
	walk(ts.root, 0)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// within returns the nodes of tree at most maxDepth below the root (-1:
// all of them).
func within(tree map[string]treeNode, maxDepth int) map[string]cacheNode {
	out := map[string]cacheNode{}
	for p, n := range tree {
		if maxDepth < 0 || n.depth <= maxDepth {
			out[p] = n.cacheNode
		}
	}
	return out
}

// cachedTree lists a tree cache's copy from p down, walking it with Get and
// Children.
func cachedTree(t *cache.TreeCache, p string) []cache.Node {
	n, ok := t.Get(p)
	if !ok {
		return nil
	}
	out := []cache.Node{n}
	kids, _ := t.Children(p)
	for _, k := range kids {
		out = append(out, cachedTree(t, k.Path)...)
	}
	return out
}

// converge waits until every tree cache matches the server, at most
// cacheConverge, and records how long that took or what still differed.
func (ts *treeSet) converge(ctx context.Context, o *observer, round int, kind string) {
	start := time.Now()
	deadline := start.Add(cacheConverge)
	var tree map[string]treeNode
	for {
		var err error
		if tree, err = ts.serverTree(o); err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			ts.stats.Rounds++
			ts.took = append(ts.took, time.Since(start))
			ts.bad = append(ts.bad, Violation{Kind: "tree cache not converged", Recipe: "tree cache", At: ts.rec.now(),
				Detail: fmt.Sprintf("round %d (%s): the observer could not read the tree: %v", round, kind, err)})
			return
		}
		wait(ctx, 50*time.Millisecond)
	}
	ts.stats.MaxNodes = max(ts.stats.MaxNodes, len(tree))
	for first := true; ; first = false {
		var bad []string
		for _, st := range ts.per {
			d := differs(cachedTree(st.tree, ts.root), within(tree, st.maxDepth))
			if sk := st.tree.Skipped(); d == "" && len(sk) > 0 {
				d = fmt.Sprintf("skips %v, which every session may read", sortedKeys(sk))
			}
			if d != "" {
				bad = append(bad, fmt.Sprintf("session %d, tree cache: %s", st.idx, d))
				if first {
					ts.stats.Mismatches++
				}
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			ts.stats.Rounds++
			ts.took = append(ts.took, time.Since(start))
			for _, b := range bad {
				ts.bad = append(ts.bad, Violation{Kind: "tree cache not converged", Recipe: "tree cache", At: ts.rec.now(),
					Detail: fmt.Sprintf("round %d (%s): %s, %v after the round", round, kind, b, cacheConverge)})
			}
			return
		}
		wait(ctx, 20*time.Millisecond)
	}
}

// replayCheck waits (at most cacheConverge) until every tree cache's
// events, replayed from nothing, are in tree order and give its copy, and
// records what is wrong otherwise.
func (ts *treeSet) replayCheck() {
	deadline := time.Now().Add(cacheConverge)
	for {
		var bad []string
		events := 0
		for _, st := range ts.per {
			st.mu.Lock()
			evs := st.evs
			st.mu.Unlock()
			events += len(evs)
			cp, err := replay(evs)
			if err == nil {
				err = treeOrdered(evs, ts.root)
			}
			if err != nil {
				bad = append(bad, fmt.Sprintf("session %d, tree cache: %v", st.idx, err))
				continue
			}
			want := map[string]cacheNode{}
			for _, n := range cachedTree(st.tree, ts.root) {
				want[n.Path] = cacheNode{n.Data, n.Stat.Czxid, n.Stat.Mzxid}
			}
			if d := differs(cp, want); d != "" {
				bad = append(bad, fmt.Sprintf("session %d, tree cache: the events replayed differ from the copy: %s", st.idx, d))
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			ts.stats.Events = events
			for _, b := range bad {
				ts.bad = append(ts.bad, Violation{Kind: "tree cache events", Recipe: "tree cache", At: ts.rec.now(), Detail: b})
			}
			return
		}
		wait(context.Background(), 20*time.Millisecond)
	}
}

// treeOrdered checks that no event adds a node whose parent is not held
// (the root excepted) and none removes a node that still holds children.
func treeOrdered(evs []cache.Event, root string) error {
	held := map[string]bool{}
	kids := map[string]int{}
	for i, ev := range evs {
		p := ev.Node.Path
		if ev.Type == cache.Initialized || p == root {
			continue
		}
		parent := p[:strings.LastIndexByte(p, '/')]
		switch ev.Type {
		case cache.Added:
			if parent != root && !held[parent] {
				return fmt.Errorf("event %d: Added %s before its parent", i, p)
			}
			held[p] = true
			kids[parent]++
		case cache.Removed:
			if kids[p] > 0 {
				return fmt.Errorf("event %d: Removed %s before its %d children", i, p, kids[p])
			}
			delete(held, p)
			kids[parent]--
		}
	}
	return nil
}

// fill adds the tree caches' figures and violations to rep.
func (ts *treeSet) fill(rep *Report) {
	ts.stats.Converge = distOf(ts.took)
	rep.Trees = ts.stats
	rep.Violations = append(rep.Violations, ts.bad...)
}
