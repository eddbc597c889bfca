package session

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/zksession"
)

// The public constants are the implementation's values: the facade converts
// between them by value.
func TestValuesMatchImplementation(t *testing.T) {
	for _, p := range []struct {
		pub  State
		impl zksession.State
	}{{Connected, zksession.Connected}, {Suspended, zksession.Suspended}, {Reconnected, zksession.Reconnected},
		{Lost, zksession.Lost}, {ReadOnly, zksession.ReadOnly}, {Closed, zksession.Closed}} {
		if int32(p.pub) != int32(p.impl) || p.pub.String() != p.impl.String() {
			t.Errorf("state %v = %d, implementation %v = %d", p.pub, p.pub, p.impl, p.impl)
		}
	}
	for _, p := range []struct {
		pub  LossPolicy
		impl zksession.LossPolicy
	}{{Standard, zksession.Standard}, {SessionOnly, zksession.SessionOnly}, {EndAtDisconnect, zksession.EndAtDisconnect}} {
		if int(p.pub) != int(p.impl) || p.pub.String() != p.impl.String() {
			t.Errorf("loss policy %v = %d, implementation %v = %d", p.pub, p.pub, p.impl, p.impl)
		}
	}
	if DefaultSessionTimeout != zksession.DefaultSessionTimeout || DefaultConnectTimeout != zksession.DefaultConnectTimeout {
		t.Error("default timeouts differ from the implementation's")
	}
	if ErrClosed != zksession.ErrClosed || ErrLost != zksession.ErrLost || ErrSuspended != zksession.ErrSuspended || ErrBadArgument != zksession.ErrBadArgument {
		t.Error("errors differ from the implementation's")
	}
}
