package sessiontest

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The ACL tests of every package share these helpers: a
// credentialed raw connection that can read and remove protected nodes, a
// check of the ACL of every node of a subtree, a record of the requests a
// proxy relays, and the check of a refusal (which error, which path, how
// fast, how many requests).

// RefusalCtx is the ctx an ACL test gives a call that ZooKeeper refuses, and
// RefusalBound the time within which the call must have returned: "at once"
// (a few milliseconds on an idle machine) with room for a loaded one, and
// far from RefusalCtx, which a retry loop would run into.
const (
	RefusalCtx   = 10 * time.Second
	RefusalBound = 3 * time.Second
)

// DigestConn connects a raw client to ns's server and adds the digest
// credentials user:password, so that it can read and delete the nodes a
// creator-only ACL of that user protects. It is closed in t.Cleanup; before
// that (cleanups run last-in first-out) it deletes everything below ns.Root,
// which the namespace's own cleanup, without credentials, could not. Call it
// right after zktest.NewNamespace, before the sessions whose nodes it
// removes are connected: their cleanups then run first.
func DigestConn(t testing.TB, ns *zktest.Namespace, user, password string) *zk.Conn {
	t.Helper()
	conn := zktest.Conn(t, ns.Servers(), 0)
	if err := conn.AddAuth("digest", []byte(user+":"+password)); err != nil {
		t.Fatalf("sessiontest: add digest credentials: %v", err)
	}
	t.Cleanup(func() {
		var err error
		for i := 0; i < 5; i++ { // a node may appear while we delete
			if err = deleteBelow(conn, ns.Root); err == nil {
				return
			}
		}
		t.Logf("sessiontest: could not empty %s: %v", ns.Root, err)
	})
	return conn
}

// deleteBelow deletes every node below p (not p). A node whose children it
// may not list (another user's) is left to its own delete, which succeeds
// once it is empty (its parent's ACL decides).
func deleteBelow(conn *zk.Conn, p string) error {
	kids, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNoAuth) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		c := p + "/" + k
		if err := deleteBelow(conn, c); err != nil {
			return err
		}
		if err := conn.Delete(c, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return nil
}

// CheckTreeACL reads, with conn, the ACL of root and of every node below it,
// fails the test (not fatally) for each whose ACL is not want (compared in
// any order), and returns the paths it read, root first.
func CheckTreeACL(t testing.TB, conn *zk.Conn, root string, want []zk.ACL) []string {
	t.Helper()
	var out []string
	var walk func(p string)
	walk = func(p string) {
		got, _, err := conn.GetACL(p)
		if errors.Is(err, zk.ErrNoNode) {
			return // went away meanwhile
		}
		if err != nil {
			t.Errorf("GetACL %s: %v", p, err)
			return
		}
		out = append(out, p)
		if !SameACL(got, want) {
			t.Errorf("ACL of %s = %v, want the session's %v", p, got, want)
		}
		kids, _, err := conn.Children(p)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Errorf("children of %s: %v", p, err)
		}
		sort.Strings(kids)
		for _, k := range kids {
			walk(p + "/" + k)
		}
	}
	walk(root)
	return out
}

// SameACL reports whether a and b hold the same entries, in any order.
func SameACL(a, b []zk.ACL) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(acl []zk.ACL) []string {
		out := make([]string, len(acl))
		for i, e := range acl {
			out[i] = fmt.Sprintf("%s:%s:%d", e.Scheme, e.ID, e.Perms)
		}
		sort.Strings(out)
		return out
	}
	ka, kb := key(a), key(b)
	for i := range ka {
		if ka[i] != kb[i] {
			return false
		}
	}
	return true
}

// RequestLog records the requests a Proxy relays (operation and path).
type RequestLog struct {
	mu   sync.Mutex
	reqs []zktest.Request
}

// LogRequests installs a hook on p that records every request it relays
// (and forwards it), and returns the record.
func LogRequests(p *zktest.Proxy) *RequestLog {
	l := &RequestLog{}
	p.OnRequest(func(r zktest.Request) zktest.Action {
		l.mu.Lock()
		l.reqs = append(l.reqs, r)
		l.mu.Unlock()
		return zktest.Forward
	})
	return l
}

// Mark returns the number of requests recorded so far, for Since.
func (l *RequestLog) Mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// Since returns the requests recorded after mark.
func (l *RequestLog) Since(mark int) []zktest.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]zktest.Request(nil), l.reqs[mark:]...)
}

// Timed runs call with a ctx of RefusalCtx and returns its error, how long
// it took, and the ctx's error at its return (nil if it returned first).
func Timed(call func(ctx context.Context) error) (err error, took time.Duration, ctxErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), RefusalCtx)
	defer cancel()
	start := time.Now()
	err = call(ctx)
	return err, time.Since(start), ctx.Err()
}

// CheckRefused runs call (see Timed) on a session connected through the
// proxy whose requests log records, and checks that ZooKeeper's ACL refused
// it at once: it returned within RefusalBound, before its ctx ended, with an
// error matching zk.ErrNoAuth that carries a *zksession.OpError; the message
// names the request's path and the node whose ACL refused it; that node is
// under (or is) the path under, and conn (with the owner's credentials)
// reads want as its ACL; and the refused request was sent exactly once (no
// retry loop). It logs the time taken and returns the OpError (nil after a
// failed check).
func CheckRefused(t testing.TB, name string, log *RequestLog, conn *zk.Conn, under string, want []zk.ACL, call func(ctx context.Context) error) *zksession.OpError {
	t.Helper()
	mark := log.Mark()
	err, took, ctxErr := Timed(call)
	t.Logf("%s: refused after %v: %v", name, took.Round(10*time.Microsecond), err)
	if ctxErr != nil || took > RefusalBound {
		t.Errorf("%s returned after %v (ctx %v), want at once (within %v)", name, took, ctxErr, RefusalBound)
	}
	if !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("%s = %v, want an error matching zk.ErrNoAuth", name, err)
		return nil
	}
	var oe *zksession.OpError
	if !errors.As(err, &oe) {
		t.Errorf("%s = %v: no *zksession.OpError naming the path", name, err)
		return nil
	}
	msg, aclPath := err.Error(), oe.ACLPath()
	if !strings.Contains(msg, oe.Op+" "+oe.Path+":") || !strings.Contains(msg, aclPath) {
		t.Errorf("%s: message %q does not name the request %s %s and the ACL of %s", name, msg, oe.Op, oe.Path, aclPath)
	}
	if aclPath != under && !strings.HasPrefix(aclPath, under+"/") {
		t.Errorf("%s: refused by the ACL of %s, want %s or a node below it", name, aclPath, under)
	}
	got, _, aerr := conn.GetACL(aclPath)
	if errors.Is(aerr, zk.ErrNoNode) && aclPath != under {
		// A container directory (the recipes' lock directories are) that
		// refused and was reaped by the server since, being empty: the
		// message named it; there is no ACL left to compare.
		t.Logf("%s: %s, which refused, has been reaped since", name, aclPath)
	} else if aerr != nil || !SameACL(got, want) {
		t.Errorf("%s: the ACL of %s, which refused, is %v (%v), want the owner's %v", name, aclPath, got, aerr, want)
	}
	sent := 0
	for _, r := range log.Since(mark) {
		if refusedRequest(r, oe) {
			sent++
		}
	}
	if sent != 1 {
		t.Errorf("%s: the refused request (%s %s) was sent %d times, want once (no retry)", name, oe.Op, oe.Path, sent)
	}
	return oe
}

// refusedRequest reports whether r is a request of the kind oe refused: for
// a create, any create into the same parent (a retry uses a new name); for
// other operations, one on the same path.
func refusedRequest(r zktest.Request, oe *zksession.OpError) bool {
	op := zktest.OpName(r.Op)
	switch oe.Op {
	case "create":
		switch op {
		case "create", "create2", "createContainer", "createTTL", "multi":
			return path.Dir(r.Path) == path.Dir(oe.Path)
		}
		return false
	case "delete":
		return (op == "delete" || op == "multi") && r.Path == oe.Path
	case "set":
		return (op == "setData" || op == "multi") && r.Path == oe.Path
	}
	return r.Path == oe.Path && op != "exists"
}

// ConnectIntruder connects a Session through a proxy whose requests it
// records: with no credentials when user is "", else with user's digest
// credentials and a creator-only ACL of its own.
func ConnectIntruder(t testing.TB, ns *zktest.Namespace, user string) (*session.Session, *RequestLog) {
	t.Helper()
	var opts []session.Option
	if user != "" {
		opts = append(opts, session.WithDigestAuth(user, "other"), session.WithACL(zk.AuthACL(zk.PermAll)))
	}
	s, p := ConnectProxy(t, ns, opts...)
	return s, LogRequests(p)
}
