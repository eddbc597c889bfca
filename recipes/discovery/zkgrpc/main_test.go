package zkgrpc_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestMain runs the tests against zktest's shared server and checks, when
// they pass, that they left no goroutine behind: no resolver, cache, gRPC
// client or server of theirs.
func TestMain(m *testing.M) { zktest.Main(m) }
