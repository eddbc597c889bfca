package curatortest

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// BarrierProgram is CuratorBarrier.java: a DistributedDoubleBarrier member
// or a DistributedBarrier client.
const BarrierProgram Program = "CuratorBarrier"

// Barrier drives a CuratorBarrier program: one Curator client with one
// DistributedDoubleBarrier (StartDoubleBarrier) or DistributedBarrier
// (StartBarrier) on one full server path. Its commands run one at a time on
// one Java thread, so a command sent while one blocks runs after it.
type Barrier struct {
	*Process
	// Path is the barrier path (full server path).
	Path string
}

// StartDoubleBarrier starts a DistributedDoubleBarrier member of a barrier
// of members on the full server path and waits until its Curator client is
// connected (READY). It fails the test on error, so it must be called from
// the test's goroutine.
func StartDoubleBarrier(t testing.TB, servers []string, path string, members int, opts ...Option) *Barrier {
	t.Helper()
	return startBarrier(t, servers, path, "double", strconv.Itoa(members), opts)
}

// StartBarrier starts a DistributedBarrier client on the full server path,
// as StartDoubleBarrier does.
func StartBarrier(t testing.TB, servers []string, path string, opts ...Option) *Barrier {
	t.Helper()
	return startBarrier(t, servers, path, "single", "-", opts)
}

func startBarrier(t testing.TB, servers []string, path, mode, arg string, opts []Option) *Barrier {
	t.Helper()
	c := buildConfig(t, opts)
	p := Start(t, BarrierProgram, strings.Join(servers, ","), path, mode, arg, msText(c.sessionTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if _, err := p.Expect(ctx, "READY"); err != nil {
		t.Fatal(err)
	}
	return &Barrier{Process: p, Path: path}
}

// BeginEnter asks the member to enter (DistributedDoubleBarrier.enter) and
// returns at once; the ENTERED line comes when it has: Expect(ctx, "ENTERED").
func (b *Barrier) BeginEnter() error { return b.Send("enter") }

// BeginLeave asks the member to leave (DistributedDoubleBarrier.leave) and
// returns at once; the LEFT line comes when every member has left.
func (b *Barrier) BeginLeave() error { return b.Send("leave") }

// Set runs DistributedBarrier.setBarrier.
func (b *Barrier) Set(ctx context.Context) error {
	_, err := b.Call(ctx, "set", "SET")
	return err
}

// Remove runs DistributedBarrier.removeBarrier.
func (b *Barrier) Remove(ctx context.Context) error {
	_, err := b.Call(ctx, "remove", "REMOVED")
	return err
}

// BeginWait starts DistributedBarrier.waitOnBarrier and returns at once; the
// WAITED line comes when the barrier is removed.
func (b *Barrier) BeginWait() error { return b.Send("wait") }
