package keys

import "github.com/berthhq/berth/services/scheduler/platform/store"

// The secret stores' keys (values are berth.store.v1 records; every value sealed):
//
//	secrets/{account}/{region}/{escaped name}                         SecretRecord
//	secret-values/{account}/{region}/{escaped name}/{versionId}       SecretValueRecord
//	parameters/{account}/{region}/{escaped name}                      ParameterRecord
//
// Names go through Escape, which keeps prefixes: the parameters under path "/a/b/" are the
// keys under Parameters(s) + Escape("/a/b/").

// Secret returns the key of a Secrets Manager secret.
func Secret(s Scope, name string) string {
	return store.MustKey("secrets", s.Account, s.Region, Escape(name))
}

// Secrets returns the prefix of a scope's secrets.
func Secrets(s Scope) string { return store.MustKeyPrefix("secrets", s.Account, s.Region) }

// SecretValue returns the key of one version's value of a secret.
func SecretValue(s Scope, name, versionID string) string {
	return store.MustKey("secret-values", s.Account, s.Region, Escape(name), versionID)
}

// SecretValues returns the prefix of a secret's version values.
func SecretValues(s Scope, name string) string {
	return store.MustKeyPrefix("secret-values", s.Account, s.Region, Escape(name))
}

// Parameter returns the key of an SSM parameter.
func Parameter(s Scope, name string) string {
	return store.MustKey("parameters", s.Account, s.Region, Escape(name))
}

// Parameters returns the prefix of a scope's SSM parameters.
func Parameters(s Scope) string { return store.MustKeyPrefix("parameters", s.Account, s.Region) }
