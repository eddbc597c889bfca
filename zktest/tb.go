package zktest

// TB is the part of testing.TB that zktest calls; *testing.T, *testing.B and
// *testing.F satisfy it. The helpers take it rather than testing.TB so that a
// program importing zktest (a demo, a development server) does not link the
// testing package. Call the helpers that take a TB from the test's goroutine:
// they may call Fatalf.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Failed() bool
	Name() string
}
