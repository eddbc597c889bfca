package discovery

import (
	"testing"
	"time"
)

// TestRetryBackOffStartsAt100ms: a keeper's first pause after a failed
// round is about 100 ms (±50 %), not the backoff constructor's default of
// 500 ms, which it used to take because the intervals were set after it had
// started.
func TestRetryBackOffStartsAt100ms(t *testing.T) {
	for i := 0; i < 20; i++ {
		if d := retryBackOff().NextBackOff(); d < 50*time.Millisecond || d > 150*time.Millisecond {
			t.Fatalf("first pause %v, want 50 to 150 ms", d)
		}
	}
}
