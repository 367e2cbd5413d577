// Package ssm serves SSM Parameter Store (berth.ssm.v1) in the scheduler: parameters per
// (account, region) in etcd through store and keys, with up to 100 versions each, every
// version's value sealed with the seal keyring (a key that is not in etcd; String and
// StringList values too, not only SecureString).
//
// Served: PutParameter (String, StringList, SecureString; Overwrite; AllowedPattern; tiers
// by value size), GetParameter and GetParameters (WithDecryption; name:version and
// name:label selectors), GetParametersByPath (Recursive, ParameterFilters), DeleteParameter,
// DeleteParameters, DescribeParameters, GetParameterHistory, LabelParameterVersion,
// UnlabelParameterVersion, AddTagsToResource / RemoveTagsFromResource /
// ListTagsForResource for parameters. Other actions answer CodeUnimplemented.
//
// Without WithDecryption a SecureString's value is returned as AWS does, as an opaque
// base64 ciphertext; values are never logged and no error carries them.
package ssm
