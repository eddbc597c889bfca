//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/curatortest"
)

// javaInstallCommand installs what the Java side needs on Debian or Ubuntu.
const javaInstallCommand = curatortest.InstallCommand

//go:embed java/RegisterInstance.java
var javaSource []byte

// javaInstance is a running RegisterInstance program: a JVM whose Curator
// ServiceDiscovery keeps one instance registered until stop.
type javaInstance struct {
	pid    int
	path   string // the instance's node, as the program printed it
	stdin  io.WriteCloser
	lines  chan string   // its stdout, line by line; closed at EOF
	exited chan struct{} // closed when the JVM has exited
	err    error         // its exit error, once exited is closed
	stderr *tailBuffer
	once   sync.Once
}

// startJava compiles RegisterInstance (once: the classes are kept under
// os.TempDir, keyed by its source, javac and the class path), starts it
// and waits until it has registered the instance.
func startJava(ctx context.Context, servers []string, base, service, id, address string, port int) (*javaInstance, error) {
	inst, err := curatortest.FindInstall()
	if err != nil {
		return nil, err
	}
	classes, err := compileJava(inst)
	if err != nil {
		return nil, err
	}
	cp := strings.Join(append([]string{classes}, inst.Classpath...), string(os.PathListSeparator))
	cmd := exec.Command(inst.Java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, "RegisterInstance",
		strings.Join(servers, ","), base, service, id, address, strconv.Itoa(port))
	j := &javaInstance{lines: make(chan string, 16), exited: make(chan struct{}), stderr: &tailBuffer{max: 16 << 10}}
	cmd.Stderr = j.stderr
	// Its own process group, killed with the example: SIGKILL when the
	// thread that started it exits, so that thread lives as long as the JVM.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if j.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the JVM
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		j.pid = cmd.Process.Pid
		started <- nil
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			j.lines <- sc.Text()
		}
		close(j.lines)
		j.err = cmd.Wait()
		close(j.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", inst.Java, err)
	}
	wait := time.NewTimer(60 * time.Second)
	defer wait.Stop()
	for {
		select {
		case line, ok := <-j.lines:
			if !ok {
				<-j.exited
				return nil, fmt.Errorf("the Curator program exited before registering (%v): %s", j.err, j.stderr.String())
			}
			if path, found := strings.CutPrefix(line, "REGISTERED "); found {
				j.path = path
				return j, nil
			}
		case <-wait.C:
			j.kill()
			return nil, fmt.Errorf("the Curator program did not register within 60 s: %s", j.stderr.String())
		case <-ctx.Done():
			j.kill()
			return nil, context.Cause(ctx)
		}
	}
}

// stop closes the program's stdin: it unregisters the instance, closes its
// Curator client and exits. After 15 s it is killed. stop returns when the
// JVM has exited; it is idempotent.
func (j *javaInstance) stop() error {
	var err error
	j.once.Do(func() {
		_ = j.stdin.Close()
		t := time.NewTimer(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case _, ok := <-j.lines:
				if ok {
					continue
				}
				<-j.exited
				if j.err != nil {
					err = fmt.Errorf("the Curator program: %v: %s", j.err, j.stderr.String())
				}
				return
			case <-t.C:
				j.kill()
				err = errors.New("the Curator program did not exit within 15 s of its stdin closing: killed")
				return
			}
		}
	})
	return err
}

// kill kills the program's process group and waits for it.
func (j *javaInstance) kill() {
	_ = syscall.Kill(-j.pid, syscall.SIGKILL)
	for range j.lines {
	}
	<-j.exited
}

// compileJava compiles RegisterInstance.java into a directory under
// os.TempDir named after what it depends on, unless it is there already.
func compileJava(inst *curatortest.Install) (string, error) {
	h := sha256.New()
	h.Write(javaSource)
	fmt.Fprintf(h, "\x00%s\x00%s", inst.Javac, strings.Join(inst.Classpath, "\x00"))
	dir := filepath.Join(os.TempDir(), "zkgrpc-example-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "RegisterInstance.class")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "zkgrpc-example-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "RegisterInstance.java")
	if err := os.WriteFile(src, javaSource, 0o644); err != nil {
		return "", err
	}
	out, err := exec.Command(inst.Javac, "-cp", strings.Join(inst.Classpath, string(os.PathListSeparator)), "-d", tmp, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("javac: %v: %s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "RegisterInstance.class")); serr == nil {
			return dir, nil // another run compiled it meanwhile
		}
		return "", err
	}
	return dir, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if extra := b.buf.Len() - b.max; extra > 0 {
		b.buf.Next(extra)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.buf.String())
}
