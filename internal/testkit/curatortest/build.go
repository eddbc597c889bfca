package curatortest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

//go:embed java/*.java
var sources embed.FS

// compileTimeout bounds one javac run (about a second on an idle machine).
const compileTimeout = 2 * time.Minute

// javacFlags are the compiler flags (besides -d and -cp).
var javacFlags = []string{"-encoding", "UTF-8", "-Xlint:all,-path"}

// okMarker is written last into a finished class directory.
const okMarker = "ok"

// build holds the result of the one compilation per test binary.
var build struct {
	once    sync.Once
	inst    *Install
	classes string
	err     error
}

// compiled finds the install and compiles the embedded Java programs, once per
// test binary. The classes go to a directory under os.TempDir named after a
// hash of the sources, javac and the class path, so test binaries running at
// the same time (or later) share one compilation; a directory becomes visible
// only complete (compiled elsewhere, then renamed), so a concurrent or
// interrupted compile is never picked up half done.
func compiled() (*Install, string, error) {
	build.once.Do(func() {
		build.inst, build.err = FindInstall()
		if build.err != nil {
			return
		}
		build.classes, build.err = compile(build.inst)
	})
	return build.inst, build.classes, build.err
}

func compile(inst *Install) (string, error) {
	names, err := fs.Glob(sources, "java/*.java")
	if err != nil {
		return "", fmt.Errorf("curatortest: %w", err)
	}
	sort.Strings(names)
	key, err := cacheKey(inst, names)
	if err != nil {
		return "", err
	}
	final := filepath.Join(os.TempDir(), "zkrecipes-curatortest-"+key)
	if fileExists(filepath.Join(final, okMarker)) {
		return final, nil
	}

	work, err := os.MkdirTemp(os.TempDir(), "zkrecipes-curatortest-build-")
	if err != nil {
		return "", fmt.Errorf("curatortest: %w", err)
	}
	defer os.RemoveAll(work) // after a successful rename this is a no-op
	src := filepath.Join(work, "src")
	out := filepath.Join(work, "classes")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", fmt.Errorf("curatortest: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("curatortest: %w", err)
	}
	args := append(append([]string(nil), javacFlags...), "-d", out, "-cp", inst.classpath())
	for _, n := range names {
		b, err := sources.ReadFile(n)
		if err != nil {
			return "", fmt.Errorf("curatortest: %w", err)
		}
		p := filepath.Join(src, filepath.Base(n))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", fmt.Errorf("curatortest: %w", err)
		}
		args = append(args, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), compileTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, inst.Javac, args...)
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("curatortest: javac %s: %w\n%s", inst.Javac, err, output.String())
	}
	if err := os.WriteFile(filepath.Join(out, okMarker), nil, 0o644); err != nil {
		return "", fmt.Errorf("curatortest: %w", err)
	}
	if err := os.Rename(out, final); err != nil {
		// Another test binary finished the same compilation first.
		if fileExists(filepath.Join(final, okMarker)) {
			return final, nil
		}
		return "", fmt.Errorf("curatortest: %w", err)
	}
	return final, nil
}

// cacheKey hashes what the compiled classes depend on: the sources, the javac
// binary (path, size, modification time), its flags and the class path.
func cacheKey(inst *Install, names []string) (string, error) {
	h := sha256.New()
	for _, n := range names {
		b, err := sources.ReadFile(n)
		if err != nil {
			return "", fmt.Errorf("curatortest: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", n, len(b))
		h.Write(b)
	}
	javac, err := filepath.EvalSymlinks(inst.Javac)
	if err != nil {
		return "", fmt.Errorf("curatortest: %w", err)
	}
	st, err := os.Stat(javac)
	if err != nil {
		return "", fmt.Errorf("curatortest: %w", err)
	}
	fmt.Fprintf(h, "javac %s %d %d\n", javac, st.Size(), st.ModTime().UnixNano())
	fmt.Fprintf(h, "flags %q\n", javacFlags)
	fmt.Fprintf(h, "cp %s\n", inst.classpath())
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:8]), nil
}
