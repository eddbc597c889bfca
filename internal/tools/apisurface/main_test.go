package main

import (
	"path/filepath"
	"testing"
)

// The budgets of the public surface: what a service author needs, and no
// machinery.
const (
	libraryBudget = 250
	zktestBudget  = 110
	groupBudget   = 30
)

func TestSurfaceWithinBudget(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	total := 0
	for _, dir := range libraryPackages {
		names, err := exported(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			t.Fatalf("%s: no exported names found: the count is not reading the package", dir)
		}
		t.Logf("%-10s %d", dir, len(names))
		total += len(names)
	}
	if total > libraryBudget {
		t.Errorf("library packages export %d identifiers, over the budget of %d", total, libraryBudget)
	}
	names, err := exported(filepath.Join(root, "zktest"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%-10s %d (library total %d)", "zktest", len(names), total)
	if len(names) > zktestBudget {
		t.Errorf("zktest exports %d identifiers, over the budget of %d", len(names), zktestBudget)
	}
	groupTotal := 0
	for _, dir := range groupPackages {
		names, err := exported(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			t.Fatalf("%s: no exported names found: the count is not reading the package", dir)
		}
		t.Logf("%-13s %d", dir, len(names))
		groupTotal += len(names)
	}
	if groupTotal > groupBudget {
		t.Errorf("%v export %d identifiers, over the budget of %d", groupPackages, groupTotal, groupBudget)
	}
}
