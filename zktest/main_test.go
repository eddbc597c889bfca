package zktest_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) {
	if runChildIfAsked() {
		return
	}
	zktest.Main(m)
}
