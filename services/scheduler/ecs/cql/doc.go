// Package cql parses and evaluates ECS's cluster query language, the expressions of
// memberOf placement constraints and of ListContainerInstances' filter:
// https://docs.aws.amazon.com/AmazonECS/latest/developerguide/cluster-query-language.html
//
// ParseExpr turns the text into an immutable Expr; Expr.Match evaluates it against a
// Subject, the small view of a container instance the consumer provides (placement's
// Instance, control's stored ContainerInstance). The package imports neither, so both
// can use it.
//
// Berth accepts the documented grammar (see Expr) and, for =~ and !~, both a regular
// expression anchored at both ends and a glob whose * matches any run of characters: a
// value matches when either reading does.
package cql
