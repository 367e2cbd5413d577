package keys

import "github.com/berthhq/berth/services/scheduler/platform/store"

// Application Auto Scaling's keys (values are berth.store.v1 records):
//
//	autoscaling-targets/{account}/{region}/{namespace}/{escaped resource id}/{dimension}   ScalableTargetRecord
//
// A resource id ("service/{cluster}/{service}") holds '/', which Escape turns into one
// segment.

// ScalableTarget returns the key of a scalable target.
func ScalableTarget(s Scope, namespace, resourceID, dimension string) string {
	return store.MustKey("autoscaling-targets", s.Account, s.Region, namespace, Escape(resourceID), dimension)
}

// ScalableTargets returns the prefix of a scope's scalable targets of one service
// namespace.
func ScalableTargets(s Scope, namespace string) string {
	return store.MustKeyPrefix("autoscaling-targets", s.Account, s.Region, namespace)
}

// AllScalableTargets returns the prefix of every scope's scalable targets (the leader's
// scaling loop reads them all).
func AllScalableTargets() string { return store.MustKeyPrefix("autoscaling-targets") }
