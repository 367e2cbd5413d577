package awsapi

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"time"

	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// ErrRetry, returned by Retry's fn, asks for another attempt: fn saw a state another
// writer is about to change (a record it read is stale) and wants to read it again.
var ErrRetry = errors.New("awsapi: retry")

// Retry runs fn until it returns something other than a store revision conflict
// (store.ErrConflict, or store.ErrExists from a create-if-absent race) or ErrRetry, with
// a jittered backoff from 0.5–1 ms doubling to at most 32 ms, and returns fn's last
// result (nil or the other error). When ctx ends between attempts it returns ctx.Err().
// Use it for multi-record transactions store.Mutate cannot express.
func Retry(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !(errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrExists) || errors.Is(err, ErrRetry)) {
			return err
		}
		d := time.Millisecond << min(attempt-1, 5)
		t := time.NewTimer(d/2 + mrand.N(d/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
