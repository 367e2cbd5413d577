package keys

import "github.com/berthhq/berth/services/scheduler/platform/store"

// AWS Cloud Map state. Everything the DNS role serves lives under one top-level prefix
// (CloudMapAll), so one watch sees every change to it. Namespaces and services are
// keyed by id; their names are claimed by empty index keys written in the same txn, so
// two creates of one name cannot both succeed.
//
//	cloudmap/ns/{account}/{region}/{namespaceId}                       CloudMapNamespaceRecord
//	cloudmap/ns-names/{account}/{region}/{type}/{name}                 (index)
//	cloudmap/svc/{account}/{region}/{serviceId}                        CloudMapServiceRecord
//	cloudmap/svc-names/{account}/{region}/{namespaceId}/{name}         (index)
//	cloudmap/inst/{account}/{region}/{serviceId}/{instanceId}          CloudMapInstanceRecord
//	cloudmap-ops/{account}/{region}/{operationId}                      CloudMapOperationRecord

// CloudMapAll returns the prefix of every Cloud Map record the DNS role serves.
func CloudMapAll() string { return store.MustKeyPrefix("cloudmap") }

// CloudMapKind returns the prefix of one kind of record ("ns", "svc", "inst") across
// every account and region.
func CloudMapKind(kind string) string { return store.MustKeyPrefix("cloudmap", kind) }

// CloudMapNamespace returns the key of a namespace, or with id empty the prefix of the
// scope's namespaces.
func CloudMapNamespace(s Scope, id string) string {
	if id == "" {
		return store.MustKeyPrefix("cloudmap", "ns", s.Account, s.Region)
	}
	return store.MustKey("cloudmap", "ns", s.Account, s.Region, id)
}

// CloudMapNamespaceName returns the index key claiming a namespace name of a type.
func CloudMapNamespaceName(s Scope, typ, name string) string {
	return store.MustKey("cloudmap", "ns-names", s.Account, s.Region, typ, Escape(name))
}

// CloudMapService returns the key of a service, or with id empty the prefix of the
// scope's services.
func CloudMapService(s Scope, id string) string {
	if id == "" {
		return store.MustKeyPrefix("cloudmap", "svc", s.Account, s.Region)
	}
	return store.MustKey("cloudmap", "svc", s.Account, s.Region, id)
}

// CloudMapServiceName returns the index key claiming a service name in a namespace, or
// with name empty the prefix of the namespace's claimed names.
func CloudMapServiceName(s Scope, namespaceID, name string) string {
	if name == "" {
		return store.MustKeyPrefix("cloudmap", "svc-names", s.Account, s.Region, namespaceID)
	}
	return store.MustKey("cloudmap", "svc-names", s.Account, s.Region, namespaceID, Escape(name))
}

// CloudMapInstance returns the key of a registered instance (id escaped), or with id
// empty the prefix of the service's instances.
func CloudMapInstance(s Scope, serviceID, id string) string {
	if id == "" {
		return store.MustKeyPrefix("cloudmap", "inst", s.Account, s.Region, serviceID)
	}
	return store.MustKey("cloudmap", "inst", s.Account, s.Region, serviceID, Escape(id))
}

// CloudMapOperation returns the key of an operation, or with id empty the prefix of the
// scope's operations.
func CloudMapOperation(s Scope, id string) string {
	if id == "" {
		return store.MustKeyPrefix("cloudmap-ops", s.Account, s.Region)
	}
	return store.MustKey("cloudmap-ops", s.Account, s.Region, id)
}

// CloudMapRevision returns the key every register and deregister of a service's
// instances rewrites: its ModRevision is the service's InstancesRevision.
func CloudMapRevision(s Scope, serviceID string) string {
	return store.MustKey("cloudmap-rev", s.Account, s.Region, serviceID)
}

// CloudMapInstancesInScope returns the prefix of every instance of the scope.
func CloudMapInstancesInScope(s Scope) string {
	return store.MustKeyPrefix("cloudmap", "inst", s.Account, s.Region)
}
