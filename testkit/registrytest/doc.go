// Package registrytest gives a test an OCI registry (the product's
// services/agent/ociregistry, `berth dev`'s embedded registry) on a loopback port for the
// length of the test, and pushes the test image to it.
package registrytest
