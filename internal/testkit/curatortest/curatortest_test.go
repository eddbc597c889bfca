package curatortest_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// nodeName is Curator's protected lock node name.
var nodeName = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-[0-9]{10}$`)

// testContext bounds the Java programs' requests in a test: generous, as a
// loaded machine may be slow to run a JVM and a bound on something that
// should happen is not what these tests check.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestFindInstall(t *testing.T) {
	in, err := curatortest.FindInstall()
	if err != nil {
		t.Fatal(err)
	}
	if in.Java == "" || in.Javac == "" || len(in.Classpath) == 0 {
		t.Fatalf("incomplete install: %+v", in)
	}
}

func TestFindInstallMissing(t *testing.T) {
	t.Setenv(curatortest.EnvClasspath, "/nonexistent/curator-recipes.jar")
	_, err := curatortest.FindInstall()
	if !errors.Is(err, curatortest.ErrNotInstalled) {
		t.Fatalf("FindInstall with a missing jar: %v, want ErrNotInstalled", err)
	}
	for _, want := range []string{curatortest.InstallCommand, "/nonexistent/curator-recipes.jar"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}

	t.Setenv(curatortest.EnvClasspath, "")
	t.Setenv("JAVA_HOME", "")
	t.Setenv("PATH", t.TempDir())
	_, err = curatortest.FindInstall()
	if !errors.Is(err, curatortest.ErrNotInstalled) || !strings.Contains(err.Error(), curatortest.InstallCommand) {
		t.Fatalf("FindInstall without java: %v, want ErrNotInstalled naming the install command", err)
	}
}

// Two Curator contenders exclude each other, and the second queues behind the
// first.
func TestMutexExclusion(t *testing.T) {
	ctx := testContext(t)
	ns := zktest.NewNamespace(t)
	path := ns.Path("lock")
	a := curatortest.StartMutex(t, ns.Servers(), path)
	b := curatortest.StartMutex(t, ns.Servers(), path)

	na, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !nodeName.MatchString(na.Name) {
		t.Errorf("node %q does not have Curator's name format", na.Name)
	}
	if _, ok, err := b.TryAcquire(ctx, 0); err != nil || ok {
		t.Fatalf("b.TryAcquire while a holds: ok=%v err=%v, want a timeout", ok, err)
	}

	if err := b.BeginAcquire(); err != nil {
		t.Fatal(err)
	}
	conn := ns.Conn(t)
	zktest.Eventually(t, 10*time.Second, func() bool {
		children, _, err := conn.Children(path)
		return err == nil && len(children) == 2
	}, "b's node under %s", path)
	parts, err := a.Participants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 || parts[0] != na.Name {
		t.Fatalf("participants %v, want %s first and one waiter", parts, na.Name)
	}
	for _, l := range b.Lines() {
		if l.Word() == "ACQUIRED" {
			t.Fatalf("b acquired while a holds: %v", l)
		}
	}

	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	nb, err := b.WaitAcquired(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if nb.Name != parts[1] || nb.Seq <= na.Seq {
		t.Fatalf("b holds %+v, want the waiting node %s after %+v", nb, parts[1], na)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Curator's release deletes the node before it answers, so nothing is
	// left now. The lock directory is a container: once empty, the server
	// may already have reaped it (zktest checks every 500 ms).
	children, _, err := conn.Children(path)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	if len(children) != 0 {
		t.Fatalf("nodes left under %s after both released: %v", path, children)
	}
}

// A counter written without version checks ends exact only if the lock
// excludes.
func TestMutexCounter(t *testing.T) {
	ctx := testContext(t)
	ns := zktest.NewNamespace(t)
	counter := ns.Path("counter")
	conn := ns.Conn(t)
	if _, err := conn.Create(counter, []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	const cycles = 40
	var ms []*curatortest.Mutex
	for i := 0; i < 2; i++ {
		ms = append(ms, curatortest.StartMutex(t, ns.Servers(), ns.Path("lock")))
	}
	for _, m := range ms {
		if err := m.BeginCycles(cycles, counter); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms {
		if err := m.WaitCycles(ctx); err != nil {
			t.Fatal(err)
		}
	}
	data, _, err := conn.Get(counter)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), strconv.Itoa(2*cycles); got != want {
		t.Fatalf("counter = %s, want %s", got, want)
	}
}

// The leader closes its latch and the other participant leads.
func TestLatchFlip(t *testing.T) {
	ctx := testContext(t)
	ns := zktest.NewNamespace(t)
	path := ns.Path("leader")
	a := curatortest.StartLatch(t, ns.Servers(), path, "java-a")
	b := curatortest.StartLatch(t, ns.Servers(), path, "java-b")

	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	zktest.Eventually(t, 10*time.Second, func() bool {
		_, ids, err := b.Participants(ctx)
		return err == nil && len(ids) == 2
	}, "b's latch node")
	leader, ids, err := b.Participants(ctx)
	if err != nil || leader != "java-a" || strings.Join(ids, ",") != "java-a,java-b" {
		t.Fatalf("participants: leader %q ids %v err %v; want java-a of [java-a java-b]", leader, ids, err)
	}
	if isLeader, _, err := b.Status(ctx); err != nil || isLeader {
		t.Fatalf("b status: leader=%v err=%v, want not leader", isLeader, err)
	}

	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitNotLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	leader, ids, err = b.Participants(ctx)
	if err != nil || leader != "java-b" || strings.Join(ids, ",") != "java-b" {
		t.Fatalf("participants after close: leader %q ids %v err %v; want java-b alone", leader, ids, err)
	}
	if tr := a.Transitions(); len(tr) != 2 || tr[0].Word() != "LEADER" || tr[1].Word() != "NOTLEADER" {
		t.Fatalf("a's transitions %v, want LEADER, NOTLEADER", tr)
	}
}

// An ERR line ends an Expect for something else; Kill ends the process.
func TestErrAndKill(t *testing.T) {
	ctx := testContext(t)
	ns := zktest.NewNamespace(t)
	m := curatortest.StartMutex(t, ns.Servers(), ns.Path("lock"))
	if err := m.Release(ctx); err == nil || !strings.Contains(err.Error(), "ERR release") {
		t.Fatalf("release without a hold: %v, want an ERR line", err)
	}
	m.Kill()
	select {
	case <-m.Exited():
	default:
		t.Fatal("Exited not closed after Kill")
	}
	if _, err := m.Acquire(ctx); err == nil {
		t.Fatal("Acquire after Kill succeeded")
	}
}

// The JVM is gone once the test that started it has finished.
func TestCleanupEndsProcess(t *testing.T) {
	ns := zktest.NewNamespace(t)
	var pid int
	t.Run("sub", func(t *testing.T) {
		m := curatortest.StartMutex(t, ns.Servers(), ns.Path("lock"))
		pid = m.Pid()
		if _, err := m.Acquire(testContext(t)); err != nil {
			t.Fatal(err)
		}
	})
	if pid == 0 {
		t.Fatal("no pid")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d still there after cleanup: kill 0: %v", pid, err)
	}
	// The graceful quit closed the Curator client: the held node is gone at
	// once, not after the session timeout.
	children, _, err := ns.Conn(t).Children(ns.Path("lock"))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	if len(children) != 0 {
		t.Fatalf("nodes left after cleanup: %v", children)
	}
}
