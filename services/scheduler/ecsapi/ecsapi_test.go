package ecsapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecserr"
	"github.com/berthhq/berth/services/scheduler/store"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"web_1-a", true},
		{strings.Repeat("a", 255), true},
		{"", false},
		{strings.Repeat("a", 256), false},
		{"a.b", false},
		{"a/b", false},
		{"a b", false},
	} {
		if got := ValidName(tc.name); got != tc.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}

func TestValidateTags(t *testing.T) {
	tag := func(k, v string) *ecsv1.Tag { return &ecsv1.Tag{Key: proto.String(k), Value: proto.String(v)} }
	many := make([]*ecsv1.Tag, MaxTags+1)
	for i := range many {
		many[i] = tag(fmt.Sprint("k", i), "")
	}
	for _, tc := range []struct {
		name string
		tags []*ecsv1.Tag
		want string // "" for valid; else a part of the message
	}{
		{"none", nil, ""},
		{"limits", []*ecsv1.Tag{tag(strings.Repeat("k", MaxTagKeyLen), strings.Repeat("v", MaxTagValueLen)), tag("e", "")}, ""},
		{"max count", many[:MaxTags], ""},
		{"too many", many, "exceeds the limit of 50"},
		{"empty key", []*ecsv1.Tag{tag("", "v")}, "between 1 and 128"},
		{"long key", []*ecsv1.Tag{tag(strings.Repeat("k", MaxTagKeyLen+1), "")}, "between 1 and 128"},
		{"long value", []*ecsv1.Tag{tag("k", strings.Repeat("v", MaxTagValueLen+1))}, "at most 256"},
		{"reserved", []*ecsv1.Tag{tag("AWS:x", "")}, "reserved"},
		{"duplicate", []*ecsv1.Tag{tag("k", "1"), tag("k", "2")}, `Duplicate tag key "k"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateTags(tc.tags)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("ValidateTags: %v", err)
				}
				return
			}
			var e *ecserr.Error
			if !errors.As(err, &e) || e.Type != "InvalidParameterException" || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("ValidateTags = %v, want InvalidParameterException containing %q", err, tc.want)
			}
		})
	}
}

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
