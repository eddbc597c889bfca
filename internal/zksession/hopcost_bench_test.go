package zksession_test

import (
	"context"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// nopOp is an Op that sends nothing.
type nopOp struct{}

func (nopOp) Run(*zk.Conn) error { return nil }
func (nopOp) Late(error)         {}

// BenchmarkHandOff measures the hand-off alone: a request that sends
// nothing, run on a worker of the Session and waited for by its caller
// (Call with a closure, CallOp with an Op), one caller at a time. It is what
// bounding a request by its ctx costs beyond the request itself (see
// BenchmarkWorkerHop for its share of a contended lock).
func BenchmarkHandOff(b *testing.B) {
	ns := zktest.NewNamespace(b)
	zs := sessiontest.Core(sessiontest.Connect(b, ns))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Run("Call", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := zksession.Call(ctx, zs, func(*zk.Conn) (struct{}, error) { return struct{}{}, nil }, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CallOp", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err, _ := zksession.CallOp(ctx, zs, nopOp{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
