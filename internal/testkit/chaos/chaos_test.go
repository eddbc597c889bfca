// The chaos run is built without the race detector: it slows every
// goroutine several times over, and the run's checks are about time (a call
// back within its ctx, a holder told before the next one acquires). `make
// test` runs this test in a separate step without -race; every other package
// runs under -race.

//go:build !race

package chaos_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/testkit/chaos"
	"github.com/zkrecipes/zkrecipes/zktest"
	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines after the tests (the run starts its
// own ensemble: no shared server is needed).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestChaos is the short form of the chaos run (see the package
// documentation): 50 rounds of random faults against every recipe at once,
// failing on any violation of the invariants. ZKRECIPES_CHAOS_ROUNDS and
// ZKRECIPES_CHAOS_SEED override the rounds and the seed (default: the time).
// Skipped with -short.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run")
	}
	if err := zktest.FindInstall(); err != nil {
		t.Fatalf("%v", err)
	}
	cfg := chaos.Config{
		Rounds:   50,
		Sessions: 8,
		// Shorter rounds than the program's: the short form must finish in
		// about two minutes under -race on two cores.
		DwellMin: 300 * time.Millisecond,
		DwellMax: 800 * time.Millisecond,
		Logf:     t.Logf,
	}
	if v, err := strconv.Atoi(os.Getenv("ZKRECIPES_CHAOS_ROUNDS")); err == nil && v > 0 {
		cfg.Rounds = v
	}
	if v, err := strconv.ParseInt(os.Getenv("ZKRECIPES_CHAOS_SEED"), 10, 64); err == nil && v != 0 {
		cfg.Seed = v
	}
	rep, err := chaos.Run(context.Background(), cfg)
	if rep != nil {
		t.Logf("report:\n%s", rep)
	}
	if err != nil {
		t.Fatalf("chaos run: %v", err)
	}
	if rep.Rounds != cfg.Rounds {
		t.Errorf("ran %d rounds, want %d", rep.Rounds, cfg.Rounds)
	}
	total := 0
	for _, n := range rep.Acquisitions {
		total += n
	}
	for _, recipe := range chaos.Recipes() {
		key := recipe
		if recipe == chaos.RecipeRWLock {
			key += " (write)"
		}
		if rep.Acquisitions[key] == 0 {
			t.Errorf("no acquisition of %s: the run did not exercise it", key)
		}
		if recipe != chaos.RecipeSemaphore && recipe != chaos.RecipeNonFair && rep.Writes[recipe+"+commit"].Accepted == 0 {
			t.Errorf("no guarded commit of %s was accepted: the run did not exercise Commit", recipe)
		}
	}
	if rep.CacheRounds != rep.Rounds {
		t.Errorf("the caches were compared with the server at the end of %d rounds of %d", rep.CacheRounds, rep.Rounds)
	}
	if rep.Registrations.Rounds != rep.Rounds || rep.Trees.Rounds != rep.Rounds {
		t.Errorf("the registrations were compared with the server at the end of %d rounds, the tree caches %d, of %d",
			rep.Registrations.Rounds, rep.Trees.Rounds, rep.Rounds)
	}
	if rep.Registrations.Updates == 0 || rep.Trees.Changes == 0 || rep.Trees.Events == 0 {
		t.Errorf("%d registration updates, %d tree changes, %d tree cache events: the run did not exercise them",
			rep.Registrations.Updates, rep.Trees.Changes, rep.Trees.Events)
	}
	if len(rep.Violations) > 0 {
		t.Errorf("%d violations (seed %d, replay with ZKRECIPES_CHAOS_SEED=%d); see the report", len(rep.Violations), rep.Seed, rep.Seed)
	}
	t.Logf("%d rounds, %d acquisitions, %d violations, seed %d, wall %v", rep.Rounds, total, len(rep.Violations), rep.Seed, rep.Wall.Round(time.Second))
}
