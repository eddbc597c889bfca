package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goBlock matches a fenced Go code block of README.md, capturing its body.
var goBlock = regexp.MustCompile("(?ms)^```go\n(.*?)^```\n")

// readmeBlocks returns the bodies of README.md's Go code blocks, in order.
func readmeBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range goBlock.FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go blocks")
	}
	return blocks
}

// snippetBody returns the text of file after its package clause.
func snippetBody(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const clause = "package readme\n\n"
	_, body, ok := strings.Cut(string(b), clause)
	if !ok {
		t.Fatalf("%s: no %q", file, clause)
	}
	return body
}

// firstDiff describes where got stops matching want.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range w {
		if i >= len(g) {
			return "the file ends before README's line " + strings.TrimSpace(w[i])
		}
		if g[i] != w[i] {
			return "README: " + strings.TrimSpace(w[i]) + "\n  file: " + strings.TrimSpace(g[i])
		}
	}
	return "(no difference within the block)"
}

// Every Go block of README.md is in readme.go verbatim, in README's order,
// and the file holds nothing else after its package clause: README's snippets
// are exactly what the suite compiles and runs.
func TestREADMESnippetsAreCompiled(t *testing.T) {
	files := []string{"readme.go"}
	rest := make([]string, len(files))
	for i, f := range files {
		rest[i] = snippetBody(t, f)
	}
	for n, block := range readmeBlocks(t) {
		found := false
		for i := range files {
			s := strings.TrimPrefix(rest[i], "\n") // one blank line between snippets
			if strings.HasPrefix(s, block) {
				rest[i] = s[len(block):]
				found = true
				break
			}
		}
		if !found {
			first, _, _ := strings.Cut(block, "\n")
			var diffs []string
			for i, f := range files {
				diffs = append(diffs, f+":\n  "+firstDiff(strings.TrimPrefix(rest[i], "\n"), block))
			}
			t.Fatalf("README.md Go block %d (%q) is not next in %v; first difference:\n%s",
				n+1, first, files, strings.Join(diffs, "\n"))
		}
	}
	for i, f := range files {
		if s := strings.TrimSpace(rest[i]); s != "" {
			first, _, _ := strings.Cut(s, "\n")
			t.Errorf("%s has code that is not in README.md, from %q", f, first)
		}
	}
}
