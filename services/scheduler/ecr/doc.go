// Package ecr serves Amazon ECR (berth.ecr.v1) in the scheduler: the model of
// repositories, images and tags per (account, region) in etcd (platform/keys' ecr-*
// keys), the authorization tokens the registry accepts, and the Connect handler of the
// API. Its data plane, the OCI registry that docker and containerd push to and pull
// from, is package registry below it, which builds on this model (Store).
//
// Served: CreateRepository, DescribeRepositories, DeleteRepository,
// GetAuthorizationToken, DescribeImages, ListImages, BatchGetImage, BatchDeleteImage,
// PutImage, BatchCheckLayerAvailability, PutLifecyclePolicy, GetLifecyclePolicy,
// DeleteLifecyclePolicy (applied by ApplyLifecyclePolicies, which the registry's
// background pass runs), StartLifecyclePolicyPreview, GetLifecyclePolicyPreview,
// InitiateLayerUpload, UploadLayerPart, CompleteLayerUpload, GetDownloadUrlForLayer
// (served by the registry), SetRepositoryPolicy, GetRepositoryPolicy,
// DeleteRepositoryPolicy (enforced by the registry on other accounts' pulls),
// CreatePullThroughCacheRule, DescribePullThroughCacheRules, DeletePullThroughCacheRule,
// UpdatePullThroughCacheRule, ValidatePullThroughCacheRule (the cache is the
// registry's).
// Other actions answer UnsupportedOperationException. See docs/ecr.md.
package ecr
