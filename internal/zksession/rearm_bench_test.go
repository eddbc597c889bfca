package zksession_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// BenchmarkRearm measures how long the session takes to set 10,000
// server-only watches again after a reconnect (one getData each, a bounded
// number in flight), from the round's own log line: b.N reconnects, each
// reported as ms/rearm (the median).
func BenchmarkRearm(b *testing.B) {
	const n = 10000
	ns := zktest.NewNamespace(b)
	p := ns.Proxy(b)
	obs, logs := observer.New(zapcore.DebugLevel)
	s := sessiontest.ConnectTo(b, times3(p.Addr()), ns.Root, session.WithSessionTimeout(20*time.Second),
		session.WithLogger(zap.New(obs)))
	core := sessiontest.Core(s)
	rec := sessiontest.Record(b, s)
	raw := ns.Conn(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ep := core.Epoch()
	target := make(nodeEvents, 1)
	subs := make([]zksession.NodeSub, n)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				node := ns.Path(fmt.Sprintf("/n%05d", i))
				if _, err := raw.Create(node, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
					errs <- err
					return
				}
				if err := core.WatchNode(ctx, ep, &subs[i], node, target); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if got := core.NodeSubs(); got != n {
		b.Fatalf("%d subscriptions, want %d", got, n)
	}
	const msg = "server-only watches set again"
	var took []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.Cut()
		rec.Wait(b, time.Minute, session.Suspended)
		rec.Wait(b, time.Minute, session.Reconnected)
		zktest.Eventually(b, time.Minute, func() bool { return logs.FilterMessage(msg).Len() > i }, "round %d", i)
		e := logs.FilterMessage(msg).All()[i]
		m := e.ContextMap()
		if m["paths"] != int64(n) || m["interrupted"] != false {
			b.Fatalf("round %d: %v", i, m)
		}
		took = append(took, m["took"].(time.Duration))
	}
	b.StopTimer()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)/2])/float64(time.Millisecond), "ms/rearm")
	b.Logf("re-arm of %d watches: %v", n, took)
}
