package zktest_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// childEnv switches the test binary into "start a server, print its pid and
// wait to be killed" mode (see TestMain).
const childEnv = "ZKTEST_SIGKILL_CHILD"

// runChildIfAsked runs the child side of TestJVMDiesWithSIGKILLedParent and
// never returns when asked to.
func runChildIfAsked() bool {
	if os.Getenv(childEnv) != "1" {
		return false
	}
	s, err := zktest.StartServer()
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("PID %d\n", s.Pid())
	for {
		time.Sleep(time.Hour) // until SIGKILL
	}
}

func TestJVMDiesWithSIGKILLedParent(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		<-readerDone
	})
	var line string
	select {
	case line = <-lines:
	case <-time.After(60 * time.Second):
		t.Fatal("child printed nothing within 60 s")
	}
	pidText, ok := strings.CutPrefix(line, "PID ")
	if !ok {
		t.Fatalf("child said %q", line)
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		t.Fatalf("child said %q", line)
	}
	if !alive(pid) {
		t.Fatalf("JVM %d is not running before the child is killed", pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	zktest.Eventually(t, 20*time.Second, func() bool { return !alive(pid) },
		"JVM %d survived its parent's SIGKILL", pid)
}

// alive reports whether pid exists and is not a zombie (an orphaned zombie
// may wait for a PID 1 that does not reap).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func TestMainWithoutInstall(t *testing.T) {
	empty := t.TempDir()
	run := func(args ...string) (string, int) {
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$"}, args...)...)
		cmd.Env = append(os.Environ(), "ZKTEST_CLASSPATH=", "ZOOKEEPER_HOME="+empty)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run()
	if code != 1 || !strings.Contains(out, zktest.InstallCommand) {
		t.Fatalf("without ZooKeeper: exit %d, output %q; want exit 1 naming the install command", code, out)
	}
	out, code = run("-test.short")
	if code != 0 || !strings.Contains(out, "SKIP") || !strings.Contains(out, zktest.InstallCommand) {
		t.Fatalf("without ZooKeeper, -short: exit %d, output %q; want exit 0 and a SKIP note", code, out)
	}
}
