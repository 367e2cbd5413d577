// Package buildinfo holds the version a release build stamps into every Berth binary
// (`make release`: go build -ldflags "-X github.com/berthhq/berth/pkg/buildinfo.Version=…
// -X github.com/berthhq/berth/pkg/buildinfo.Commit=…"). `berth version` prints it, the
// console shows it and /metrics exports it as berth_build_info.
package buildinfo

import "runtime"

// Version is the release version ("v0.3.0"); "dev" for a build that did not stamp one
// (go build, make build).
var Version = "dev"

// Commit is the git commit the release was built from; "" when not stamped.
var Commit = ""

// GoVersion is the Go toolchain the binary was built with (runtime.Version()).
func GoVersion() string { return runtime.Version() }

// String is the one-line form `berth version` prints: "berth v0.3.0 (commit abc123,
// go1.26.0 linux/amd64)".
func String(program string) string {
	commit := Commit
	if commit == "" {
		commit = "unknown"
	}
	return program + " " + Version + " (commit " + commit + ", " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
}
