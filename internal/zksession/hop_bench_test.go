package zksession_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// BenchmarkWorkerHop measures what bounding every request by a ctx costs a
// contended lock: go-zookeeper's calls block with no context, so this
// module runs each request on a worker of the Session (Call) and waits for
// it within the caller's ctx. The same plain lock loop (go-zookeeper's
// recipe: create, list, watch the predecessor, list again after its
// deletion, delete) runs on 8 sessions, its requests made directly on the
// connection or through Call, alternating 1 s rounds; and, as a third
// variant, directly but with each create sent as a multi with an empty
// setData on the directory (the recipes engine's former way to learn the
// fencing token). b.N is the number of round pairs. It reports each
// variant's rate over the direct one's (the median of the rounds).
func BenchmarkWorkerHop(b *testing.B) {
	ns := zktest.NewNamespace(b)
	var ss []*session.Session
	for i := 0; i < 8; i++ {
		ss = append(ss, sessiontest.Connect(b, ns, session.WithSessionTimeout(20*time.Second)))
	}
	dir := ns.Path("/hop")
	if _, err := ss[0].Conn().Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		b.Fatal(err)
	}
	direct := func(s *session.Session, op func(*zk.Conn) error) error { return op(s.Conn()) }
	worker := func(s *session.Session, op func(*zk.Conn) error) error {
		_, err := zksession.Call(context.Background(), sessiontest.Core(s), func(c *zk.Conn) (struct{}, error) { return struct{}{}, op(c) }, nil)
		return err
	}
	type variant struct {
		name  string
		call  hopCaller
		multi bool
	}
	vs := []variant{{"direct", direct, false}, {"worker", worker, false}, {"multi", direct, true}}
	ratios := map[string][]float64{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rates := map[string]float64{}
		for k := range vs {
			v := vs[(k+i)%len(vs)] // rotate the order
			r, err := hopRound(ss, dir, v.call, v.multi, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			rates[v.name] = r
		}
		for _, v := range vs[1:] {
			ratios[v.name] = append(ratios[v.name], rates[v.name]/rates["direct"])
		}
	}
	b.StopTimer()
	for _, v := range vs[1:] {
		rs := ratios[v.name]
		sort.Float64s(rs)
		b.ReportMetric(rs[len(rs)/2], "x-direct-"+v.name)
	}
	b.ReportMetric(0, "ns/op")
}

type hopCaller func(s *session.Session, op func(*zk.Conn) error) error

// hopRound runs the lock loop on every session for d and returns locks per
// second.
func hopRound(ss []*session.Session, dir string, call hopCaller, multi bool, d time.Duration) (float64, error) {
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(ss))
	stop := time.Now().Add(d)
	t0 := time.Now()
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				node, err := hopLock(s, dir, call, multi)
				if err != nil {
					errs <- err
					return
				}
				n.Add(1)
				if err := call(s, func(c *zk.Conn) error { return c.Delete(node, -1) }); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return 0, err
	}
	return float64(n.Load()) / time.Since(t0).Seconds(), nil
}

// hopLock is go-zookeeper's lock recipe, each request made through call.
func hopLock(s *session.Session, dir string, call hopCaller, multi bool) (string, error) {
	acl := zk.WorldACL(zk.PermAll)
	var node string
	err := call(s, func(c *zk.Conn) error {
		if multi {
			res, err := c.Multi(&zk.CreateRequest{Path: dir + "/lock-", Acl: acl, Flags: zk.FlagEphemeral | zk.FlagSequence},
				&zk.SetDataRequest{Path: dir, Version: -1})
			if err == nil {
				node = res[0].String
			}
			return err
		}
		var err error
		node, err = c.Create(dir+"/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
		return err
	})
	if err != nil {
		return "", err
	}
	name := node[len(dir)+1:]
	seq := func(n string) string { return n[strings.LastIndex(n, "-")+1:] }
	for {
		var kids []string
		if err := call(s, func(c *zk.Conn) error {
			var err error
			kids, _, err = c.Children(dir)
			return err
		}); err != nil {
			return "", err
		}
		sort.Slice(kids, func(i, j int) bool { return seq(kids[i]) < seq(kids[j]) })
		i := 0
		for i < len(kids) && kids[i] != name {
			i++
		}
		if i == len(kids) {
			return "", fmt.Errorf("our node %s is gone", name)
		}
		if i == 0 {
			return node, nil
		}
		var ok bool
		var ch <-chan zk.Event
		if err := call(s, func(c *zk.Conn) error {
			var err error
			ok, _, ch, err = c.ExistsW(dir + "/" + kids[i-1])
			return err
		}); err != nil {
			return "", err
		}
		if ok {
			<-ch
		}
	}
}
