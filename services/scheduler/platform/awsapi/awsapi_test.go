package awsapi

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/services/scheduler/platform/store"
)

func TestEpoch(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.UTC)
	if got := Epoch(at); got != float64(at.Unix())+0.678 {
		t.Fatalf("Epoch = %v, want seconds to the millisecond", got)
	}
	if got := FromEpoch(Epoch(at)); !got.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("FromEpoch(Epoch(t)) = %v, want %v", got, at.Truncate(time.Millisecond))
	}
	// 1.001 s is 1000.9999… ms as a float64; FromEpoch rounds instead of truncating.
	if got := FromEpoch(1.001); got.UnixMilli() != 1001 {
		t.Fatalf("FromEpoch(1.001) = %d ms, want 1001", got.UnixMilli())
	}
}

func TestRetry(t *testing.T) {
	ctx := context.Background()
	n := 0
	err := Retry(ctx, func() error {
		n++
		switch n {
		case 1:
			return store.ErrConflict
		case 2:
			return fmt.Errorf("create: %w", store.ErrExists)
		case 3:
			return ErrRetry
		}
		return nil
	})
	if err != nil || n != 4 {
		t.Fatalf("Retry = %v after %d calls, want nil after 4", err, n)
	}
	other := errors.New("boom")
	n = 0
	if err := Retry(ctx, func() error { n++; return other }); err != other || n != 1 {
		t.Fatalf("Retry = %v after %d calls, want the other error after 1", err, n)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := Retry(cctx, func() error { return store.ErrConflict }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Retry on an ended context = %v, want context.Canceled", err)
	}
}
