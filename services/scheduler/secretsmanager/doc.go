// Package secretsmanager serves the Secrets Manager API (berth.secretsmanager.v1) in the
// scheduler: secrets per (account, region) in etcd through store and keys, each version's
// value sealed with the seal keyring (a key that is not in etcd) and bound to its key.
//
// Served: CreateSecret, GetSecretValue (by name, full ARN or partial ARN; VersionId or
// VersionStage), PutSecretValue, UpdateSecret, DescribeSecret, ListSecrets (filters,
// sorting, paging), ListSecretVersionIds, DeleteSecret (recovery window 7-30 days or
// ForceDeleteWithoutRecovery), RestoreSecret, TagResource, UntagResource. Other actions
// answer CodeUnimplemented (the gateway's UnsupportedOperationException). ARNs carry AWS's
// random 6-character suffix; errors are AWS's types and messages.
//
// A secret scheduled for deletion is removed when its DeletionDate has passed, the next
// time anything reads it (there is no background sweep): until then it is describable and
// restorable, and its values cannot be read, as on AWS.
//
// Values never leave this package except in GetSecretValue's answer and Resolve's (the
// ECS task-start resolution): they are not logged and no error carries them.
package secretsmanager
