package zksession_test

import (
	"sort"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/testkit/sessiontest"
	"github.com/zkrecipes/zkrecipes/internal/zksession"
	"github.com/zkrecipes/zkrecipes/session"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// The tracker follows the members a reconfig-enabled ensemble announces
// when the session is connected to one of them; behind a proxy (whose
// address the ensemble does not announce) it keeps the configured servers
// and sets no watch on the config; WithEnsembleTracking(false) turns it off.
// Connect returns after the first read of the config, so each case is
// decided when Connect returns.
func TestTrackerFollowsAnnouncedMembers(t *testing.T) {
	e := zktest.StartEnsembleT(t, 3, zktest.WithConfig("reconfigEnabled", "true"))
	want := e.Servers()
	sort.Strings(want)

	t.Run("direct", func(t *testing.T) {
		s := sessiontest.ConnectTo(t, e.Servers()[:1], "")
		got := zksession.LearnedMembers(sessiontest.Core(s))
		sort.Strings(got)
		if len(got) != len(want) {
			t.Fatalf("followed members %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("followed members %v, want %v", got, want)
			}
		}
		if s.Watches() == 0 {
			t.Errorf("no watch on the ensemble config while following it")
		}
	})
	t.Run("proxy", func(t *testing.T) {
		p := zktest.NewProxyT(t, e.Servers()[0])
		s := sessiontest.ConnectTo(t, p.Servers(), "")
		if got := zksession.LearnedMembers(sessiontest.Core(s)); len(got) != 0 {
			t.Errorf("a session behind a proxy follows %v", got)
		}
		if n := s.Watches(); n != 0 {
			t.Errorf("%d watches on a session that follows nothing", n)
		}
	})
	t.Run("off", func(t *testing.T) {
		s := sessiontest.ConnectTo(t, e.Servers()[:1], "", session.WithEnsembleTracking(false))
		if got := zksession.LearnedMembers(sessiontest.Core(s)); len(got) != 0 {
			t.Errorf("tracking off, yet it follows %v", got)
		}
	})
}
