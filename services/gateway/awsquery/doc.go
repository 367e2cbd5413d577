// Package awsquery is the AWS query protocol (STS, Elastic Load Balancing) over the same
// generated descriptors awsjson uses: a request's form parameters (Action=…&Version=…&
// Member.Sub=…&List.member.1=…) decode into an operation's request message, and a
// response message encodes as AWS's XML (<ActionResponse><ActionResult>…</ActionResult>
// <ResponseMetadata><RequestId>…</RequestId></ResponseMetadata></ActionResponse>), errors
// as AWS's <ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/></ErrorResponse>.
package awsquery
