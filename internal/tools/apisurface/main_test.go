package main

import (
	"path/filepath"
	"testing"
)

// The budgets of the public surface: what a service author needs, and no
// machinery.
const (
	libraryBudget = 250
	recipesBudget = 40 // recipePackages together
	zktestBudget  = 110
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
	recipes := 0
	for _, dir := range recipePackages {
		names, err := exported(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			t.Fatalf("%s: no exported names found: the count is not reading the package", dir)
		}
		t.Logf("%-16s %d", dir, len(names))
		recipes += len(names)
	}
	if recipes > recipesBudget {
		t.Errorf("recipe packages %v export %d identifiers, over their budget of %d", recipePackages, recipes, recipesBudget)
	}
	names, err := exported(filepath.Join(root, "zktest"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%-10s %d (library total %d)", "zktest", len(names), total)
	if len(names) > zktestBudget {
		t.Errorf("zktest exports %d identifiers, over the budget of %d", len(names), zktestBudget)
	}
}
