// Package testimage builds Berth's test image: the static berth-testimage
// program (see cmd/berth-testimage), compiled with the local Go toolchain and
// packed as a single-layer OCI image with go-containerregistry, plus a push
// to a registry. No image is fetched from outside.
package testimage
