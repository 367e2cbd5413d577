package keys

// Scope is the (account, region) pair every ECS resource belongs to. AWS serves each
// region of an account independently — a cluster named "default" in us-east-1 and one in
// eu-west-1 are two clusters with two ARNs — so every key of ECS state starts with both
// parts (see the package comment). Accounts and access keys are not scoped by region
// (IAM is global on AWS too).
type Scope struct {
	// Account is the 12-digit account id.
	Account string
	// Region is the region name from the request's SigV4 credential scope, e.g.
	// "eu-west-1"; the gateway has checked it against its allow-list.
	Region string
}

// Partition is the only ARN partition Berth issues ARNs in ("arn:aws:ecs:…").
const Partition = "aws"

// Owns reports whether an ARN's partition, account and region (as parsed from it) name
// this scope: an ARN of another region names a resource that does not exist here, as on
// AWS, and so does one of another partition ("aws-cn", "aws-us-gov"): Berth issues only
// "aws" ARNs, and partitions are separate on AWS too (a China-region ARN is never a
// us-east-1 resource).
func (s Scope) Owns(partition, account, region string) bool {
	return partition == Partition && account == s.Account && region == s.Region
}

// String returns "{account}/{region}", for logs.
func (s Scope) String() string { return s.Account + "/" + s.Region }
