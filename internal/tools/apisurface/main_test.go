package main

import (
	"path/filepath"
	"testing"
)

// The budgets of the public surface: what a service author needs, and no
// machinery. The recipes beyond the core have theirs in recipePackages.
const (
	// 260: recipes.ErrUnknownOutcome, the one sentinel for a write sent
	// whose answer was lost, shared by every recipe that writes. 261:
	// mutex.WithLookAhead, the choice between a lock that costs the server
	// what its peers' cost and one whose handoff is a round trip shorter.
	libraryBudget = 261
	zktestBudget  = 110
)

func TestSurfaceWithinBudget(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	count := func(dir string) int {
		t.Helper()
		names, err := exported(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			t.Fatalf("%s: no exported names found: the count is not reading the package", dir)
		}
		t.Logf("%-16s %d", dir, len(names))
		return len(names)
	}
	total := 0
	for _, dir := range libraryPackages {
		total += count(dir)
	}
	if total > libraryBudget {
		t.Errorf("core packages export %d identifiers, over the budget of %d", total, libraryBudget)
	}
	for _, rp := range recipePackages {
		if n := count(rp.dir); n > rp.budget {
			t.Errorf("%s exports %d identifiers, over its budget of %d", rp.dir, n, rp.budget)
		}
	}
	if n := count("zktest"); n > zktestBudget {
		t.Errorf("zktest exports %d identifiers, over the budget of %d", n, zktestBudget)
	}
}
