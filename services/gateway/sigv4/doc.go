// Package sigv4 verifies AWS Signature Version 4 header-signed requests on the server
// side. It parses the Authorization header, checks the credential scope (date, region,
// service, terminator) and the clock skew AWS allows (15 minutes), resolves the access key
// through a Resolver, recomputes the signature over the received request with the AWS SDK
// for Go v2's signer (no hand-rolled canonicalisation) and compares it in constant time.
//
// The scope may name any region of an allow-list (Options.Regions, PublicRegions by
// default); Verify returns it in Credential.Region, since AWS serves each region on its
// own and the request is served in the region it was signed for.
//
// Failures are *awsjson.Error values with the codes and messages AWS answers with:
// MissingAuthenticationTokenException, IncompleteSignatureException,
// UnrecognizedClientException and InvalidSignatureException (including "Signature
// expired"). See https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-troubleshooting.html
package sigv4
