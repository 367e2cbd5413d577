package daemon

import (
	"slices"

	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// slicesSort sorts ids in place.
func slicesSort(ids []string) { slices.Sort(ids) }

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// parseScope returns the account and region of an ECS ARN.
func parseScope(a string) (keys.Scope, error) {
	p, err := arn.Parse(a)
	if err != nil {
		return keys.Scope{}, err
	}
	return keys.Scope{Account: p.Account, Region: p.Region}, nil
}
