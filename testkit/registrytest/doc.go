// Package registrytest serves an in-memory OCI distribution registry
// (go-containerregistry's pkg/registry) over plain HTTP: on a loopback port
// for a test, or as `berth dev`'s embedded registry.
package registrytest
