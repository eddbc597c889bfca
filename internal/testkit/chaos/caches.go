package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/recipes/cache"
)

// The caches: every session keeps a cache.ChildrenCache of the children of
// Root+"-cache" and a cache.NodeCache of Root+"-cache-flag". The observer
// changes them (creates, writes, deletes, a delete and a create at once)
// while each round's fault is held; at the end of every round, after the
// fault is healed and the round's pause, every cache must match the server
// (the observer's read after a sync) within cacheConverge. At the end of the
// run the events of every cache, replayed from nothing, must be consistent
// (an Added of a node not held, an Updated of the same incarnation with a
// later write, a Removed of the node held) and give the cache's copy.

// cacheConverge bounds how long after a round's pause every cache may take
// to match the server: a reconnect (about 1 s, or a new session after a
// partition past the timeout) and one reload, widened for a busy machine.
const cacheConverge = 15 * time.Second

// cacheKeys is how many children names the observer uses.
const cacheKeys = 5

type cacheSet struct {
	dir, flag string
	per       []*sessCaches
}

// sessCaches are one session's caches and the events they delivered.
type sessCaches struct {
	idx      int
	children *cache.ChildrenCache
	node     *cache.NodeCache

	mu   sync.Mutex
	evs  [2][]cache.Event // children's, node's
	done sync.WaitGroup
}

// startCaches creates the cached paths and one cache of each kind per
// client.
func startCaches(o *observer, clients []*client, root string) (*cacheSet, error) {
	cs := &cacheSet{dir: root + "-cache", flag: root + "-cache-flag"}
	if err := o.ensure(cs.dir, nil); err != nil {
		return nil, err
	}
	for _, c := range clients {
		cc, err := cache.NewChildren(c.sess, cs.dir)
		if err != nil {
			cs.close()
			return nil, fmt.Errorf("chaos: session %d: %w", c.idx, err)
		}
		nc, err := cache.NewNode(c.sess, cs.flag)
		if err != nil {
			cc.Close()
			cs.close()
			return nil, fmt.Errorf("chaos: session %d: %w", c.idx, err)
		}
		sc := &sessCaches{idx: c.idx, children: cc, node: nc}
		for i, ch := range []<-chan cache.Event{cc.Events(), nc.Events()} {
			sc.done.Add(1)
			go func() {
				defer sc.done.Done()
				for ev := range ch {
					sc.mu.Lock()
					sc.evs[i] = append(sc.evs[i], ev)
					sc.mu.Unlock()
				}
			}()
		}
		cs.per = append(cs.per, sc)
	}
	return cs, nil
}

// close closes every cache and waits for their event readers.
func (cs *cacheSet) close() {
	for _, sc := range cs.per {
		sc.children.Close()
		sc.node.Close()
		sc.done.Wait()
	}
}

// churn changes the cached nodes every 10 to 60 ms until stop.
func (cs *cacheSet) churn(o *observer, rng *rand.Rand, stop <-chan struct{}) {
	t := time.NewTimer(0)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		p := fmt.Sprintf("%s/k%d", cs.dir, rng.Intn(cacheKeys))
		if rng.Intn(3) == 0 {
			p = cs.flag
		}
		data := []byte(fmt.Sprintf("v%d", n))
		acl := zk.WorldACL(zk.PermAll)
		// Errors are ignored: the observer's connection goes down with
		// ensemble faults, and the check compares with what the server holds.
		switch op := rng.Intn(10); {
		case op < 5:
			if _, err := o.conn.Set(p, data, -1); errors.Is(err, zk.ErrNoNode) {
				o.conn.Create(p, data, 0, acl) //nolint:errcheck // see above
			}
		case op < 8:
			o.conn.Delete(p, -1) //nolint:errcheck // see above
		default:
			if err := o.conn.Delete(p, -1); err == nil || errors.Is(err, zk.ErrNoNode) {
				o.conn.Create(p, data, 0, acl) //nolint:errcheck // see above
			}
		}
		t.Reset(10*time.Millisecond + time.Duration(rng.Int63n(int64(50*time.Millisecond))))
	}
}

// cacheNode is a node as compared: data, czxid and mzxid.
type cacheNode struct {
	data         []byte
	czxid, mzxid int64
}

// serverState reads the cached paths after a sync, by the caches' paths.
func (cs *cacheSet) serverState(o *observer) (children, flag map[string]cacheNode, err error) {
	children, flag = map[string]cacheNode{}, map[string]cacheNode{}
	if _, err := o.conn.Sync(cs.dir); err != nil {
		return nil, nil, err
	}
	names, _, err := o.conn.Children(cs.dir)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		data, st, err := o.conn.Get(cs.dir + "/" + name)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		children[cs.dir+"/"+name] = cacheNode{data, st.Czxid, st.Mzxid}
	}
	data, st, err := o.conn.Get(cs.flag)
	if err == nil {
		flag[cs.flag] = cacheNode{data, st.Czxid, st.Mzxid}
	} else if !errors.Is(err, zk.ErrNoNode) {
		return nil, nil, err
	}
	return children, flag, nil
}

// differs says how nodes differ from want ("" if they match).
func differs(nodes []cache.Node, want map[string]cacheNode) string {
	if len(nodes) != len(want) {
		return fmt.Sprintf("%d nodes cached, %d on the server", len(nodes), len(want))
	}
	for _, n := range nodes {
		w, ok := want[n.Path]
		if !ok {
			return n.Path + " cached, not on the server"
		}
		if !bytes.Equal(w.data, n.Data) || w.czxid != n.Stat.Czxid || w.mzxid != n.Stat.Mzxid {
			return fmt.Sprintf("%s cached as %q (czxid %d, mzxid %d), %q (czxid %d, mzxid %d) on the server",
				n.Path, n.Data, n.Stat.Czxid, n.Stat.Mzxid, w.data, w.czxid, w.mzxid)
		}
	}
	return ""
}

func nodeList(nc *cache.NodeCache) []cache.Node {
	if n, ok := nc.Get(); ok {
		return []cache.Node{n}
	}
	return nil
}

// converge waits until every cache matches the server, at most
// cacheConverge; it returns how long that took, and what still differed if
// it did not happen.
func (cs *cacheSet) converge(ctx context.Context, o *observer) (time.Duration, []string) {
	start := time.Now()
	deadline := start.Add(cacheConverge)
	var children, flag map[string]cacheNode
	var lastErr error
	for {
		var err error
		if children, flag, err = cs.serverState(o); err == nil {
			break
		}
		lastErr = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(start), []string{fmt.Sprintf("the observer could not read the cached paths: %v", lastErr)}
		}
		wait(ctx, 50*time.Millisecond)
	}
	for {
		var bad []string
		for _, sc := range cs.per {
			if d := differs(sc.children.List(), children); d != "" {
				bad = append(bad, fmt.Sprintf("session %d, children cache: %s", sc.idx, d))
			}
			if d := differs(nodeList(sc.node), flag); d != "" {
				bad = append(bad, fmt.Sprintf("session %d, node cache: %s", sc.idx, d))
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(start), bad
		}
		wait(ctx, 20*time.Millisecond)
	}
}

// replayCheck waits (at most cacheConverge) until every cache's events,
// replayed from nothing, give its copy, and returns what is wrong
// otherwise: an event that does not follow from the copy so far, or a
// replay that does not end at the cache's copy.
func (cs *cacheSet) replayCheck() []string {
	deadline := time.Now().Add(cacheConverge)
	for {
		var bad []string
		for _, sc := range cs.per {
			sc.mu.Lock()
			evs := sc.evs
			sc.mu.Unlock()
			for i, cached := range [][]cache.Node{sc.children.List(), nodeList(sc.node)} {
				kind := [2]string{"children cache", "node cache"}[i]
				cp, err := replay(evs[i])
				if err != nil {
					bad = append(bad, fmt.Sprintf("session %d, %s: %v", sc.idx, kind, err))
					continue
				}
				want := map[string]cacheNode{}
				for _, n := range cached {
					want[n.Path] = cacheNode{n.Data, n.Stat.Czxid, n.Stat.Mzxid}
				}
				if d := differs(cp, want); d != "" {
					bad = append(bad, fmt.Sprintf("session %d, %s: the events replayed differ from the copy: %s", sc.idx, kind, d))
				}
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			return bad
		}
		wait(context.Background(), 20*time.Millisecond)
	}
}

// replay applies evs to an empty copy, checking each event against it.
func replay(evs []cache.Event) ([]cache.Node, error) {
	cp := map[string]cache.Node{}
	inits := 0
	for i, ev := range evs {
		n := ev.Node
		old, had := cp[n.Path]
		switch ev.Type {
		case cache.Initialized:
			inits++
		case cache.Added:
			if had {
				return nil, fmt.Errorf("event %d: Added %s, held already", i, n.Path)
			}
			cp[n.Path] = n
		case cache.Updated:
			if !had || n.Stat.Czxid != old.Stat.Czxid || n.Stat.Mzxid <= old.Stat.Mzxid {
				return nil, fmt.Errorf("event %d: Updated %s (mzxid %d) does not follow the copy (held %v, mzxid %d)", i, n.Path, n.Stat.Mzxid, had, old.Stat.Mzxid)
			}
			cp[n.Path] = n
		case cache.Removed:
			if !had || n.Stat != old.Stat {
				return nil, fmt.Errorf("event %d: Removed %s is not the node held (held %v)", i, n.Path, had)
			}
			delete(cp, n.Path)
		}
	}
	if inits != 1 {
		return nil, fmt.Errorf("%d Initialized events, want 1", inits)
	}
	out := make([]cache.Node, 0, len(cp))
	for _, n := range cp {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
