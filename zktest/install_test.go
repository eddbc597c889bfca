package zktest_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestFindInstallOrder(t *testing.T) {
	_, origCP, err := zktest.FindInstallPaths()
	if err != nil {
		t.Fatal(err)
	}

	cpDir := t.TempDir()
	a, b := filepath.Join(cpDir, "a.jar"), filepath.Join(cpDir, "b.jar")
	for _, f := range []string{a, b} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("ZKTEST_CLASSPATH", a+string(os.PathListSeparator)+b)
	t.Setenv("ZOOKEEPER_HOME", "/nowhere")
	_, cp, err := zktest.FindInstallPaths()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{a, b}; !reflect.DeepEqual(cp, want) {
		t.Fatalf("classpath %v, want %v", cp, want)
	}
	t.Setenv("ZKTEST_CLASSPATH", a+string(os.PathListSeparator)+filepath.Join(cpDir, "missing.jar"))
	if err := zktest.FindInstall(); !errors.Is(err, zktest.ErrNotInstalled) {
		t.Fatalf("classpath naming a missing jar: err = %v", err)
	}

	home := t.TempDir()
	for _, f := range []string{"zookeeper-3.9.jar", "lib/a.jar", "lib/b.jar", "lib/notes.txt"} {
		p := filepath.Join(home, f)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("ZKTEST_CLASSPATH", "")
	t.Setenv("ZOOKEEPER_HOME", home)
	_, cp, err = zktest.FindInstallPaths()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(home, "zookeeper-3.9.jar"), filepath.Join(home, "lib/a.jar"), filepath.Join(home, "lib/b.jar")}
	if !reflect.DeepEqual(cp, want) {
		t.Fatalf("classpath %v, want %v", cp, want)
	}

	t.Setenv("ZOOKEEPER_HOME", t.TempDir())
	err = zktest.FindInstall()
	if !errors.Is(err, zktest.ErrNotInstalled) || !strings.Contains(err.Error(), zktest.InstallCommand) {
		t.Fatalf("empty ZOOKEEPER_HOME: err = %v", err)
	}

	t.Setenv("ZOOKEEPER_HOME", "")
	javaHome := t.TempDir()
	_ = os.MkdirAll(filepath.Join(javaHome, "bin"), 0o755)
	if err := os.WriteFile(filepath.Join(javaHome, "bin", "java"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JAVA_HOME", javaHome)
	java, cp, err := zktest.FindInstallPaths()
	if err != nil {
		t.Fatal(err)
	}
	if java != filepath.Join(javaHome, "bin", "java") || !reflect.DeepEqual(cp, origCP) {
		t.Fatalf("install: java %s, classpath %v", java, cp)
	}

	t.Setenv("JAVA_HOME", "")
	t.Setenv("PATH", "")
	err = zktest.FindInstall()
	if !errors.Is(err, zktest.ErrNotInstalled) || !strings.Contains(err.Error(), zktest.InstallCommand) {
		t.Fatalf("no java: err = %v", err)
	}
}

func TestStartFailsFastWithLogTail(t *testing.T) {
	java, _, err := zktest.FindInstallPaths()
	if err != nil {
		t.Fatal(err)
	}
	s, err := zktest.StartServer(zktest.WithInstallPaths(java, []string{filepath.Join(t.TempDir(), "missing.jar")}))
	if err == nil {
		s.Stop()
		t.Fatal("server without ZooKeeper on its classpath started")
	}
	if !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "ZooKeeperServerMain") {
		t.Fatalf("error does not carry the log tail: %v", err)
	}
}
