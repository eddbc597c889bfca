package zksession_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestCreatedZxid: CreatedZxid gives, for each create, the czxid of
// the node it created, read from the create's reply header (go-zookeeper
// does not return it): on one server and on a three-member ensemble (each
// session on another member, so that replies come from followers and from
// the leader), with four sessions creating and deleting at once so that
// other transactions commit between a create and its reply. It is handed
// out once, and a create that fails gives none.
func TestCreatedZxid(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		ns := zktest.NewNamespace(t)
		checkCreatedZxid(t, func(i int) *session.Session { return sessiontest.Connect(t, ns) }, ns.Conn(t), ns.Path("/czxid"))
	})
	t.Run("ensemble", func(t *testing.T) {
		ens := zktest.StartEnsembleT(t, 3)
		raw, _, err := zk.Connect(ens.Servers(), 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		connect := func(i int) *session.Session {
			return sessiontest.ConnectTo(t, []string{ens.Servers()[i%3]}, "")
		}
		checkCreatedZxid(t, connect, raw, "/czxid")
	})
}

func checkCreatedZxid(t *testing.T, connect func(i int) *session.Session, raw *zk.Conn, dir string) {
	if _, err := raw.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	const sessions, creates = 4, 150
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := 0; i < sessions; i++ {
		s := connect(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, tk := s.Conn(), sessiontest.Core(s)
			for k := 0; k < creates; k++ {
				// Sequential nodes under one prefix per create, as the
				// recipes create them, and plain nodes.
				asked := fmt.Sprintf("%s/s%d-%d-", dir, i, k)
				flags := int32(zk.FlagEphemeral | zk.FlagSequence)
				if k%3 == 0 {
					asked, flags = fmt.Sprintf("%s/p%d-%d", dir, i, k), zk.FlagEphemeral
				}
				node, err := c.Create(asked, nil, flags, zk.WorldACL(zk.PermAll))
				if err != nil {
					errs <- err
					return
				}
				z := tk.CreatedZxid(asked)
				_, st, err := c.Get(node)
				if err != nil {
					errs <- err
					return
				}
				if z != st.Czxid {
					errs <- fmt.Errorf("create %d of session %d: CreatedZxid %#x, the node's czxid %#x", k, i, z, st.Czxid)
					return
				}
				if again := tk.CreatedZxid(asked); again != 0 {
					errs <- fmt.Errorf("create %d of session %d: handed out twice (%#x)", k, i, again)
					return
				}
				if k%5 == 0 {
					// A create that fails records nothing.
					if _, err := c.Create(node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNodeExists) {
						errs <- fmt.Errorf("create of an existing node: %v", err)
						return
					}
					if z := tk.CreatedZxid(node); z != 0 {
						errs <- fmt.Errorf("a failed create recorded %#x", z)
						return
					}
				}
				if err := c.Delete(node, -1); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCreatedZxidKeepsTheLast: the Session keeps the last CreatedKept
// creates; an older one not asked for is forgotten (0), the newest still
// known.
func TestCreatedZxidKeepsTheLast(t *testing.T) {
	ns := zktest.NewNamespace(t)
	s := sessiontest.Connect(t, ns)
	c, tk := s.Conn(), sessiontest.Core(s)
	dir := ns.Path("/kept")
	if _, err := c.Create(dir, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	n := zksession.CreatedKept + 1
	nodes := make([]string, n)
	create := func(i int) error {
		node, err := c.Create(fmt.Sprintf("%s/n%d", dir, i), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		nodes[i] = node
		return err
	}
	// The first and the last one by one; those between, in parallel.
	if err := create(0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 1 + w; i < n-1; i += 32 {
				if err := create(i); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := create(n - 1); err != nil {
		t.Fatal(err)
	}
	if z := tk.CreatedZxid(nodes[0]); z != 0 {
		t.Fatalf("the first of %d creates: CreatedZxid %#x, want 0 (forgotten)", n, z)
	}
	_, st, err := c.Get(nodes[n-1])
	if err != nil {
		t.Fatal(err)
	}
	if z := tk.CreatedZxid(nodes[n-1]); z != st.Czxid {
		t.Fatalf("the newest create: CreatedZxid %#x, czxid %#x", z, st.Czxid)
	}
	_, st, err = c.Get(nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	if z := tk.CreatedZxid(nodes[1]); z != st.Czxid {
		t.Fatalf("the 64th create before the newest: CreatedZxid %#x, czxid %#x", z, st.Czxid)
	}
}
