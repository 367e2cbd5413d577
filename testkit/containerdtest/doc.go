// Package containerdtest runs a private containerd daemon for tests and for
// `berth dev`: its own root, state, config and socket under one directory,
// started, probed until it serves, restarted and stopped by this package.
package containerdtest
