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

// Owns reports whether an ARN's account and region (as parsed from it) name this scope:
// an ARN of another region names a resource that does not exist here, as on AWS.
func (s Scope) Owns(account, region string) bool {
	return account == s.Account && region == s.Region
}

// String returns "{account}/{region}", for logs.
func (s Scope) String() string { return s.Account + "/" + s.Region }
