package capacity

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

func TestDistribute(t *testing.T) {
	st := []*ecsv1.CapacityProviderStrategyItem{
		{CapacityProvider: proto.String("a"), Base: 1, Weight: 1},
		{CapacityProvider: proto.String("b"), Weight: 3},
	}
	count := func(ps []string) map[string]int {
		m := map[string]int{}
		for _, p := range ps {
			m[p]++
		}
		return m
	}
	if c := count(Distribute(st, nil, 9)); c["a"] != 3 || c["b"] != 6 {
		t.Fatalf("9 tasks: %v", c)
	}
	if c := count(Distribute(st, nil, 1)); c["a"] != 1 {
		t.Fatalf("1 task: %v", c)
	}
	// Growing a service from a:3 b:6 (1 + 2:6) by 4 keeps 1 + 1:3 of the rest.
	if c := count(Distribute(st, map[string]int{"a": 3, "b": 6}, 4)); c["a"] != 1 || c["b"] != 3 {
		t.Fatalf("grow: %v", c)
	}
}

func item(provider string, base, weight int32) *ecsv1.CapacityProviderStrategyItem {
	return &ecsv1.CapacityProviderStrategyItem{CapacityProvider: proto.String(provider), Base: base, Weight: weight}
}

// TestValidateStrategy checks each rule of the CapacityProviderStrategyItem reference
// against the providers of a cluster, with AWS's messages.
func TestValidateStrategy(t *testing.T) {
	providers := []string{"a", "b", ProviderFargate, ProviderFargateSpot}
	many := make([]*ecsv1.CapacityProviderStrategyItem, 21)
	for i := range many {
		many[i] = item("a", 0, 1)
	}
	for _, tc := range []struct {
		name     string
		strategy []*ecsv1.CapacityProviderStrategyItem
		wantErr  string // "" for valid
	}{
		{"none", nil, ""},
		{"one with base", []*ecsv1.CapacityProviderStrategyItem{item("a", 2, 0)}, ""},
		{"base and weights", []*ecsv1.CapacityProviderStrategyItem{item("a", 1, 1), item("b", 0, 3)}, ""},
		{"fargate pair", []*ecsv1.CapacityProviderStrategyItem{item(ProviderFargate, 1, 1), item(ProviderFargateSpot, 0, 4)}, ""},
		{"too many", many, "at most 20 capacity providers"},
		{"no provider", []*ecsv1.CapacityProviderStrategyItem{{Weight: 1}}, "capacityProviderStrategy.capacityProvider is required."},
		{"not associated", []*ecsv1.CapacityProviderStrategyItem{item("c", 0, 1)}, "not associated with the cluster"},
		{"twice", []*ecsv1.CapacityProviderStrategyItem{item("a", 0, 1), item("a", 0, 1)}, "appears more than once"},
		{"weight too high", []*ecsv1.CapacityProviderStrategyItem{item("a", 0, 1001)}, "weight must be between 0 and 1000"},
		{"negative weight", []*ecsv1.CapacityProviderStrategyItem{item("a", 0, -1)}, "weight must be between 0 and 1000"},
		{"base too high", []*ecsv1.CapacityProviderStrategyItem{item("a", 100001, 1)}, "base must be between 0 and 100000"},
		{"two bases", []*ecsv1.CapacityProviderStrategyItem{item("a", 1, 1), item("b", 1, 1)}, "Only one capacity provider"},
		{"all weights zero", []*ecsv1.CapacityProviderStrategyItem{item("a", 1, 0), item("b", 0, 0)}, "weight greater than zero"},
		{"fargate mixed", []*ecsv1.CapacityProviderStrategyItem{item(ProviderFargate, 0, 1), item("a", 0, 1)}, "both Fargate capacity providers and Auto Scaling group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateStrategy(providers, tc.strategy)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want InvalidParameterException with %q", err, tc.wantErr)
			case tc.wantErr != "" && !strings.HasPrefix(err.Error(), "InvalidParameterException: "):
				t.Fatalf("err = %v, want an InvalidParameterException", err)
			}
		})
	}
}

// TestRefName resolves names and ARNs of the caller's providers, and refuses another
// account's or region's ARN and names outside the rule.
func TestRefName(t *testing.T) {
	account := keys.Scope{Account: "123456789012", Region: "us-east-1"}
	for _, tc := range []struct {
		ref    string
		want   string
		wantOK bool
	}{
		{"pool-a", "pool-a", true},
		{"arn:aws:ecs:us-east-1:123456789012:capacity-provider/pool-a", "pool-a", true},
		{"arn:aws:ecs:eu-west-1:123456789012:capacity-provider/pool-a", "", false},
		{"arn:aws:ecs:us-east-1:210987654321:capacity-provider/pool-a", "", false},
		{"arn:aws:ecs:us-east-1:123456789012:cluster/pool-a", "", false},
		{"pool a", "pool a", false},
		{strings.Repeat("p", 256), strings.Repeat("p", 256), false},
	} {
		got, ok := RefName(account, tc.ref)
		if ok != tc.wantOK || (ok && got != tc.want) {
			t.Errorf("RefName(%q) = %q, %v; want %q, %v", tc.ref, got, ok, tc.want, tc.wantOK)
		}
	}
	if got := ARN(account, "pool-a"); got != "arn:aws:ecs:us-east-1:123456789012:capacity-provider/pool-a" {
		t.Errorf("ARN = %s", got)
	}
	if b := Builtin(account, ProviderFargateSpot); b.GetStatus() != StatusActive || b.GetType() != ProviderFargateSpot || b.GetTags() == nil {
		t.Errorf("Builtin(FARGATE_SPOT) = %v", b)
	}
}

// TestPoolConstraint checks the memberOf expression of each kind of pool.
func TestPoolConstraint(t *testing.T) {
	if c := PoolConstraint(ProviderFargate); c.Expression != "attribute:berth.fargate != false" {
		t.Errorf("FARGATE: %q", c.Expression)
	}
	if c := PoolConstraint("pool-a"); c.Expression != "attribute:berth.capacity-provider == 'pool-a'" {
		t.Errorf("pool-a: %q", c.Expression)
	}
	if got := StrategyLaunchType([]*ecsv1.CapacityProviderStrategyItem{item(ProviderFargateSpot, 0, 1)}); got != "FARGATE" {
		t.Errorf("StrategyLaunchType(FARGATE_SPOT) = %s", got)
	}
	if got := StrategyLaunchType([]*ecsv1.CapacityProviderStrategyItem{item("pool-a", 0, 1)}); got != "EC2" {
		t.Errorf("StrategyLaunchType(pool-a) = %s", got)
	}
}

// TestNames: capacity provider names follow CreateCapacityProvider's rule (letters,
// digits, '_' and '-', up to 255), Auto Scaling group names CreateAutoScalingGroup's
// (ASCII 33–126 except ':', up to 255), given alone or in an ARN.
func TestNames(t *testing.T) {
	for name, want := range map[string]bool{
		"pool-a_1": true, strings.Repeat("p", 255): true,
		"": false, strings.Repeat("p", 256): false, "pool.a": false, "pool/a": false, "pool a": false, "pool:a": false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
	for v, want := range map[string]bool{
		"web-asg": true, "web.asg/blue@2024+1": true, `!"#$%&'()*+,-./;<=>?@[\]^_{|}~`: true, strings.Repeat("g", 255): true,
		"arn:aws:autoscaling:us-east-1:111122223333:autoScalingGroup:1b2c3d4e-0000-0000-0000-000000000000:autoScalingGroupName/web.asg": true,
		"": false, "web:asg": false, "web asg": false, "wéb": false, "web\tasg": false, strings.Repeat("g", 256): false,
		"arn:aws:ecs:us-east-1:111122223333:cluster/x": false,
	} {
		if got := ValidASGARN(v); got != want {
			t.Errorf("ValidASGARN(%q) = %v, want %v", v, got, want)
		}
	}
}
