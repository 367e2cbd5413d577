// Package containerdtest gives a test a private containerd daemon (the product's
// services/agent/containerdproc, which `berth dev` runs too): Start(t) starts one under
// t.TempDir() and, when the test ends, removes what the test left in it and stops it.
package containerdtest
