// Package sigv4client signs outgoing HTTP requests with AWS Signature Version 4 over their
// headers only (X-Amz-Content-Sha256: UNSIGNED-PAYLOAD), the form Berth's gateway accepts
// for the agent's streaming Connect calls, where the body is a stream that cannot be hashed
// up front. It depends on nothing heavier than the AWS SDK for Go v2's core module, so the
// agent can import it.
package sigv4client
