package session_test

import (
	"testing"
	"time"

	"github.com/berthhq/berth/services/agent/session"
)

func TestBackoffCappedWithJitter(t *testing.T) {
	t.Parallel()
	lo, hi := 100*time.Millisecond, 2*time.Second
	for n := range 12 {
		want := min(lo<<n, hi)
		for range 50 {
			d := session.Backoff(n, lo, hi)
			if d < want/2 || d > want {
				t.Fatalf("Backoff(%d) = %s, want in [%s, %s]", n, d, want/2, want)
			}
		}
	}
}
