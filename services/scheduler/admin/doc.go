// Package admin implements the AdminService (proto/berth/admin/v1) over etcd: accounts and
// their SigV4 access keys, stored as berth.store.v1 AccountRecord and AccessKeyRecord
// under the keys package's layout, the gateway's key resolution, and the dev-only reset of
// every account's ECS state. Secrets are returned only by CreateAccessKey and
// ResolveAccessKey and never logged.
package admin
