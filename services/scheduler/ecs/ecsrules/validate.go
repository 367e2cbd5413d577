package ecsrules

import (
	"regexp"
	"strings"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// namePattern is what ECS accepts for cluster names, task definition families, container
// names, service names and task set external ids: up to 255 letters, numbers,
// underscores and hyphens.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,255}$`)

// ValidName reports whether s is a valid ECS name: 1–255 letters, numbers, underscores
// and hyphens (the rule CreateCluster, RegisterTaskDefinition and CreateService state in
// the Amazon ECS API reference).
func ValidName(s string) bool { return namePattern.MatchString(s) }

// Tag limits from the ECS TagResource reference: at most MaxTags tags on a resource, keys
// of 1–MaxTagKeyLen and values of 0–MaxTagValueLen characters, "aws:" reserved.
const (
	MaxTags        = 50
	MaxTagKeyLen   = 128
	MaxTagValueLen = 256
)

// ValidateTags checks user tags as ECS TagResource does (count, key and value lengths,
// the reserved "aws:" prefix in any case, duplicate keys) and returns nil or an
// InvalidParameterException naming the first problem.
func ValidateTags(tags []*ecsv1.Tag) error {
	if len(tags) > MaxTags {
		return awserr.InvalidParameterf("The number of tags exceeds the limit of %d.", MaxTags)
	}
	seen := map[string]bool{}
	for _, t := range tags {
		k := t.GetKey()
		if k == "" || len(k) > MaxTagKeyLen {
			return awserr.InvalidParameterf("Tag keys must be between 1 and %d characters.", MaxTagKeyLen)
		}
		if len(t.GetValue()) > MaxTagValueLen {
			return awserr.InvalidParameterf("Tag values must be at most %d characters.", MaxTagValueLen)
		}
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return awserr.InvalidParameterf("Tag keys may not begin with 'aws:'; it is reserved for AWS use.")
		}
		if seen[k] {
			return awserr.InvalidParameterf("Duplicate tag key %q.", k)
		}
		seen[k] = true
	}
	return nil
}
