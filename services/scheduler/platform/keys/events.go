package keys

import "github.com/berthhq/berth/services/scheduler/platform/store"

// EventBridge's keys (values are berth.store.v1 records):
//
//	event-rules/{account}/{region}/{bus}/{name}      EventRuleRecord (targets and tags inside)

// EventRule returns the key of an EventBridge rule on an event bus.
func EventRule(s Scope, bus, name string) string {
	return store.MustKey("event-rules", s.Account, s.Region, bus, name)
}

// EventRules returns the prefix of a bus's rules.
func EventRules(s Scope, bus string) string {
	return store.MustKeyPrefix("event-rules", s.Account, s.Region, bus)
}

// AllEventRules returns the prefix of every account's rules, which the leader's schedule
// loop reads.
func AllEventRules() string { return store.MustKeyPrefix("event-rules") }
