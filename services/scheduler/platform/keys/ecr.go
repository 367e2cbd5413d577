package keys

import "github.com/berthhq/berth/services/scheduler/platform/store"

// ECR's keys (values are berth.store.v1 records):
//
//	ecr-repositories/{account}/{region}/{escaped name}             EcrRepositoryRecord
//	ecr-images/{account}/{region}/{escaped name}/{digest}          EcrImageRecord
//	ecr-tags/{account}/{region}/{escaped name}/{tag}               EcrTagRecord
//	ecr-blobs/{account}/{region}/{digest}                          (empty: index)
//	ecr-cache-rules/{account}/{region}/{escaped prefix}            berth.ecr.v1.PullThroughCacheRule
//
// Repository names hold '/', which Escape turns into a single segment.

// EcrRepository returns the key of an ECR repository.
func EcrRepository(s Scope, name string) string {
	return store.MustKey("ecr-repositories", s.Account, s.Region, Escape(name))
}

// EcrRepositories returns the prefix of a scope's ECR repositories.
func EcrRepositories(s Scope) string {
	return store.MustKeyPrefix("ecr-repositories", s.Account, s.Region)
}

// EcrImage returns the key of one image (by manifest digest) of a repository.
func EcrImage(s Scope, repo, digest string) string {
	return store.MustKey("ecr-images", s.Account, s.Region, Escape(repo), digest)
}

// EcrImages returns the prefix of a repository's images.
func EcrImages(s Scope, repo string) string {
	return store.MustKeyPrefix("ecr-images", s.Account, s.Region, Escape(repo))
}

// EcrTag returns the key of one tag of a repository.
func EcrTag(s Scope, repo, tag string) string {
	return store.MustKey("ecr-tags", s.Account, s.Region, Escape(repo), tag)
}

// EcrTags returns the prefix of a repository's tags.
func EcrTags(s Scope, repo string) string {
	return store.MustKeyPrefix("ecr-tags", s.Account, s.Region, Escape(repo))
}

// EcrAllImages returns the prefix of every scope's ECR images (the registry's garbage
// collection reads them all).
func EcrAllImages() string { return store.MustKeyPrefix("ecr-images") }

// EcrBlob returns the index key of a blob (layer or config) pushed in a scope: the
// registry serves a blob only to the scopes that pushed it (an empty value).
//
//	ecr-blobs/{account}/{region}/{digest}
func EcrBlob(s Scope, digest string) string {
	return store.MustKey("ecr-blobs", s.Account, s.Region, digest)
}

// EcrAllBlobs returns the prefix of every scope's blob index keys.
func EcrAllBlobs() string { return store.MustKeyPrefix("ecr-blobs") }

// EcrCacheRule returns the key of a pull-through cache rule (by ecrRepositoryPrefix).
func EcrCacheRule(s Scope, prefix string) string {
	return store.MustKey("ecr-cache-rules", s.Account, s.Region, Escape(prefix))
}

// EcrCacheRules returns the prefix of a scope's pull-through cache rules.
func EcrCacheRules(s Scope) string {
	return store.MustKeyPrefix("ecr-cache-rules", s.Account, s.Region)
}
