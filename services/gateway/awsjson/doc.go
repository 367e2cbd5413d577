// Package awsjson is the AWS JSON 1.1 codec of Berth's gateway, driven by protobuf
// descriptors: every ECS shape is a message of berth.ecs.v1 whose fields' JSON names are the
// AWS member names. Unmarshal decodes a request body into the operation's request message
// and answers errors as AWS does (SerializationException for malformed JSON and wrong member
// types, InvalidParameterException for missing required members and values outside an
// enum); Marshal encodes a response with AWS's conventions (numbers as JSON numbers,
// timestamps as epoch seconds, unboxed scalars always written, empty lists omitted except at
// the top level of a response and where the Defaults table says AWS returns them, e.g.
// "volumes": [] in a task definition).
//
// The wire format followed is the awsJson1_1 protocol:
// https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html
package awsjson
