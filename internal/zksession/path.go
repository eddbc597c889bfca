package zksession

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ValidatePath reports whether p is a valid path for a recipe: absolute, not
// the root "/", no trailing '/', no empty, "." or ".." segments, valid UTF-8
// without NUL or the characters ZooKeeper rejects (control characters,
// U+007F–U+009F, U+D800–U+F8FF, U+FFF0–U+FFFF). The error is a *PathError: it
// wraps ErrBadArgument and names the path and the reason.
func ValidatePath(p string) error {
	if reason := pathProblem(p); reason != "" {
		return &PathError{Path: p, Reason: reason}
	}
	return nil
}

// PathError is a bad path: it matches ErrBadArgument and says why.
type PathError struct {
	// Path is the path as given.
	Path string
	// Reason says what is wrong with it, e.g. "empty".
	Reason string
}

// Error returns `bad path "<path>": <reason>`.
func (e *PathError) Error() string { return fmt.Sprintf("bad path %q: %s", e.Path, e.Reason) }

// Unwrap returns ErrBadArgument.
func (e *PathError) Unwrap() error { return ErrBadArgument }

func pathProblem(p string) string {
	switch {
	case p == "":
		return "empty"
	case p[0] != '/':
		return "must start with '/'"
	case p == "/":
		return "the root is not allowed here"
	case p[len(p)-1] == '/':
		return "trailing '/'"
	case !utf8.ValidString(p):
		return "not valid UTF-8"
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return "empty segment"
		case ".", "..":
			return fmt.Sprintf("%q segment", seg)
		}
	}
	for _, r := range p {
		switch {
		case r == 0:
			return "contains NUL"
		case r < 0x20, r >= 0x7f && r <= 0x9f:
			return fmt.Sprintf("contains control character %U", r)
		case r >= 0xd800 && r <= 0xf8ff, r >= 0xfff0 && r <= 0xffff:
			return fmt.Sprintf("contains character %U that ZooKeeper rejects", r)
		}
	}
	return ""
}

// Namespace returns the namespace given with WithNamespace, or "" for none.
func (s *Session) Namespace() string { return s.cfg.namespace }

// Path validates the recipe path p and returns the full server path, the
// namespace followed by p. Every ZooKeeper call uses full paths.
func (s *Session) Path(p string) (string, error) {
	if err := ValidatePath(p); err != nil {
		return "", err
	}
	return s.cfg.namespace + p, nil
}
