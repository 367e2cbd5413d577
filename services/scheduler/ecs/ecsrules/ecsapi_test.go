package ecsrules

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
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
			var e *awserr.Error
			if !errors.As(err, &e) || e.Type != "InvalidParameterException" || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("ValidateTags = %v, want InvalidParameterException containing %q", err, tc.want)
			}
		})
	}
}
