package keys

import (
	"strconv"
	"strings"

	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Elastic Load Balancing v2 state. Everything the `berth lb` role serves lives under one
// top-level prefix (ElbConfig), so one watch sees every change to it; the health the lb
// role observes lives under another (elb-health), so its own writes do not wake it.
// Names are unique per account and region on AWS, so records are keyed by name; the ARN
// carries the name and an id, and a lookup by ARN compares the stored ARN.
//
//	elb/lbs/{account}/{region}/{name}                                LoadBalancerRecord
//	elb/tgs/{account}/{region}/{name}                                TargetGroupRecord
//	elb/listeners/{account}/{region}/{lbName}/{listenerId}           ListenerRecord
//	elb/rules/{account}/{region}/{lbName}/{listenerId}/{ruleId}      RuleRecord
//	elb/targets/{account}/{region}/{tgName}/{targetId}:{port}        TargetRecord
//	elb-health/{account}/{region}/{tgName}/{targetId}:{port}         TargetHealthRecord

// ElbConfig returns the prefix of every ELB record the lb role serves (not the health).
func ElbConfig() string { return store.MustKeyPrefix("elb") }

// ElbHealthAll returns the prefix of every target health record.
func ElbHealthAll() string { return store.MustKeyPrefix("elb-health") }

// ElbLoadBalancer returns the key of a load balancer, or with name empty the prefix of
// the scope's load balancers.
func ElbLoadBalancer(s Scope, name string) string {
	if name == "" {
		return store.MustKeyPrefix("elb", "lbs", s.Account, s.Region)
	}
	return store.MustKey("elb", "lbs", s.Account, s.Region, name)
}

// ElbLoadBalancersAll returns the prefix of every scope's load balancers (Cloud Map's DNS
// server watches it to answer their DNS names).
func ElbLoadBalancersAll() string { return store.MustKeyPrefix("elb", "lbs") }

// ElbTargetGroup returns the key of a target group, or with name empty the prefix of the
// scope's target groups.
func ElbTargetGroup(s Scope, name string) string {
	if name == "" {
		return store.MustKeyPrefix("elb", "tgs", s.Account, s.Region)
	}
	return store.MustKey("elb", "tgs", s.Account, s.Region, name)
}

// ElbListener returns the key of a listener, or with id empty the prefix of the load
// balancer's listeners, or with lbName empty too the prefix of the scope's listeners.
func ElbListener(s Scope, lbName, id string) string {
	switch {
	case lbName == "":
		return store.MustKeyPrefix("elb", "listeners", s.Account, s.Region)
	case id == "":
		return store.MustKeyPrefix("elb", "listeners", s.Account, s.Region, lbName)
	}
	return store.MustKey("elb", "listeners", s.Account, s.Region, lbName, id)
}

// ElbRule returns the key of a listener rule, or with id empty the prefix of the
// listener's rules, or with listenerID empty too the prefix of the load balancer's rules.
func ElbRule(s Scope, lbName, listenerID, id string) string {
	switch {
	case listenerID == "":
		return store.MustKeyPrefix("elb", "rules", s.Account, s.Region, lbName)
	case id == "":
		return store.MustKeyPrefix("elb", "rules", s.Account, s.Region, lbName, listenerID)
	}
	return store.MustKey("elb", "rules", s.Account, s.Region, lbName, listenerID, id)
}

// ElbRules returns the prefix of the scope's listener rules.
func ElbRules(s Scope) string {
	return store.MustKeyPrefix("elb", "rules", s.Account, s.Region)
}

// ElbTarget returns the key of a registered target (id escaped), or with id empty the
// prefix of the target group's targets.
func ElbTarget(s Scope, tgName, id string, port int32) string {
	if id == "" {
		return store.MustKeyPrefix("elb", "targets", s.Account, s.Region, tgName)
	}
	return store.MustKey("elb", "targets", s.Account, s.Region, tgName, Escape(id)+":"+strconv.Itoa(int(port)))
}

// ElbTargetHealth returns the key of a target's observed health, or with id empty the
// prefix of the target group's health records.
func ElbTargetHealth(s Scope, tgName, id string, port int32) string {
	if id == "" {
		return store.MustKeyPrefix("elb-health", s.Account, s.Region, tgName)
	}
	return store.MustKey("elb-health", s.Account, s.Region, tgName, Escape(id)+":"+strconv.Itoa(int(port)))
}

// ElbKind returns the prefix of one kind of ELB record ("lbs", "tgs", "listeners",
// "rules", "targets") across every account and region, for the lb role's snapshot.
func ElbKind(kind string) string { return store.MustKeyPrefix("elb", kind) }

// ElbTargetOwner returns, for a target record's key, the key of its target group and
// of its health record; ok is false when targetKey is not a target key.
func ElbTargetOwner(targetKey string) (tgKey, healthKey string, ok bool) {
	rest, ok := strings.CutPrefix(targetKey, ElbKind("targets"))
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 {
		return "", "", false
	}
	return store.MustKey("elb", "tgs", parts[0], parts[1], parts[2]),
		store.MustKey("elb-health", parts[0], parts[1], parts[2], parts[3]), true
}

// InstancesInScope returns the prefix of every container instance of the scope, any
// cluster (instance targets of the ELBv2 API name an instance by its ec2InstanceId).
func InstancesInScope(s Scope) string {
	return store.MustKeyPrefix("instances", s.Account, s.Region)
}
