package zktest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestEnsembleFailover(t *testing.T) {
	e := zktest.StartEnsembleT(t, 3)
	if len(e.Servers()) != 3 {
		t.Fatalf("servers %v", e.Servers())
	}
	c := zktest.Conn(t, e.Servers(), 4*time.Second)
	if _, err := c.Create("/x", []byte("0"), 0, acl); err != nil {
		t.Fatalf("write to a fresh ensemble: %v", err)
	}
	li, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	old := e.Member(li)
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	n := 0
	zktest.Eventually(t, 30*time.Second, func() bool {
		n++
		_, err := c.Set("/x", []byte(fmt.Sprint(n)), -1)
		return err == nil
	}, "writes did not resume after the leader was killed")
	zktest.Eventually(t, 30*time.Second, func() bool {
		nl, err := e.Leader()
		return err == nil && nl != li
	}, "no new leader")

	if err := old.Restart(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := zktest.Srvr(ctx, old.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != "follower" {
		t.Fatalf("restarted former leader has mode %q, want follower", st.Mode)
	}
	// It serves the data written while it was down.
	direct := zktest.Conn(t, old.Servers(), 4*time.Second)
	if _, err := direct.Sync("/x"); err != nil {
		t.Fatal(err)
	}
	data, _, err := direct.Get("/x")
	if err != nil || string(data) != fmt.Sprint(n) {
		t.Fatalf("restarted member reads %q, %v; want %q", data, err, fmt.Sprint(n))
	}

	// Freeze a follower: the other two still form a quorum.
	fi := (li + 1) % 3
	if nl, _ := e.Leader(); nl == fi {
		fi = (fi + 1) % 3
	}
	f := e.Member(fi)
	if err := f.Freeze(); err != nil {
		t.Fatal(err)
	}
	if !f.Frozen() {
		t.Fatal("Frozen() = false after Freeze")
	}
	zktest.Eventually(t, 30*time.Second, func() bool {
		_, err := c.Create(fmt.Sprintf("/frozen-%d", time.Now().UnixNano()), nil, 0, acl)
		return err == nil || err == zk.ErrNodeExists
	}, "no writes with one follower frozen")
	if err := f.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}
