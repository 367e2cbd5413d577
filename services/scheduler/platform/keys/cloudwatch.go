package keys

import "github.com/berthhq/berth/services/scheduler/platform/store"

// CloudWatch's keys (values are berth.store.v1 records):
//
//	cw-alarms/{account}/{region}/{escaped name}   CloudWatchAlarmRecord
//
// Metric data is not in etcd (services/scheduler/cloudwatch/metricstore).

// CloudWatchAlarm returns the key of a metric alarm.
func CloudWatchAlarm(s Scope, name string) string {
	return store.MustKey("cw-alarms", s.Account, s.Region, Escape(name))
}

// CloudWatchAlarms returns the prefix of a scope's metric alarms.
func CloudWatchAlarms(s Scope) string {
	return store.MustKeyPrefix("cw-alarms", s.Account, s.Region)
}

// CloudWatchAlarmsAll returns the prefix of every scope's metric alarms (the leader's
// evaluation walks it).
func CloudWatchAlarmsAll() string {
	return store.MustKeyPrefix("cw-alarms")
}
