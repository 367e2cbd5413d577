// Package depcheck holds the scheduler module's layering rules and the helpers that check
// them with the go tool's own import graph (`go list`). The rules (see
// docs/architecture.md, "The scheduler's layout"):
//
//   - services/scheduler has one folder per AWS service (ecs, elbv2, logs, cloudmap,
//     secretsmanager, ssm, sts, ecr, events), platform (what every service shares: the store, keys,
//     ARNs, the caller's identity, the leader lease, AWS errors and handler plumbing),
//     admin (Berth's own API), app (the wiring) and internal;
//   - platform imports no service, nor admin or app;
//   - a service imports platform, its own packages and another service only through that
//     service's model package (Models): ECS is a client of ELBv2, Cloud Map, CloudWatch
//     Logs and Secrets Manager as it is on AWS, but never of their API handlers or data
//     planes;
//   - a model never imports a data plane (DataPlanes), its own service's included: the
//     data plane builds on the model's vocabulary, not the reverse;
//   - only app imports admin, and nothing imports app.
package depcheck

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Module is the import path of the scheduler module; the rules speak of its packages
// relative to it ("ecs/control").
const Module = "github.com/berthhq/berth/services/scheduler"

// scheduler is Module with the separator its packages' paths continue with.
const scheduler = Module + "/"

// Services are the folders of the AWS services the scheduler serves, one each.
var Services = []string{"ecs", "elbv2", "logs", "cloudmap", "secretsmanager", "ssm", "sts", "ecr", "autoscaling", "events", "cloudwatch"}

// TopLevel is every folder allowed at the top of the module: the services, then the
// shared and the wiring folders.
var TopLevel = append([]string{"platform", "admin", "app", "internal"}, Services...)

// Models are the packages another service may import: each service's model, the Go API
// of its state (never its Connect handler nor its data plane).
var Models = []string{"elbv2/elb", "cloudmap", "logs/logstore", "secretsmanager", "ssm", "ecr", "autoscaling"}

// DataPlanes are the packages that serve traffic or data outside the control plane's
// API: the load balancer's proxy, Cloud Map's DNS server, the log store's replication
// between replicas.
// Only app (and the commands outside this module) wire them.
var DataPlanes = []string{"elbv2/lb", "cloudmap/cloudmapdns", "logs/logpeers", "ecr/registry"}

// DomainPackages are the ECS packages that the lower ECS packages (placement, task)
// must not import, directly or not: they build on those.
var DomainPackages = []string{"ecs/control", "ecs/service", "ecs/reaper", "ecs/agentsession", "app", "admin", "platform/leader", "ecs/daemon"}

// Package is one package of the module as `go list -json` describes it: its path
// relative to Module and the module's packages it imports (relative too), tests left out.
type Package struct {
	Rel     string
	Imports []string
}

// List returns the module's packages below dir (a path the go tool accepts, such as
// "../..") with their imports inside the module. It fails t when go list fails or lists
// nothing, and skips t when the go tool is not on PATH.
func List(t *testing.T, dir string) []Package {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go tool (go list): not on PATH")
	}
	cmd := exec.Command(gobin, "list", "-json=ImportPath,Imports", dir+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s/...: %v", dir, err)
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		rel, ok := strings.CutPrefix(p.ImportPath, scheduler)
		if !ok {
			continue
		}
		pkg := Package{Rel: rel}
		for _, imp := range p.Imports {
			if r, ok := strings.CutPrefix(imp, scheduler); ok {
				pkg.Imports = append(pkg.Imports, r)
			}
		}
		pkgs = append(pkgs, pkg)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list %s/... listed %d packages: too few to be the module", dir, len(pkgs))
	}
	return pkgs
}

// Room returns the top-level folder of a package path relative to Module ("ecs" for
// "ecs/control", "sts" for "sts").
func Room(rel string) string {
	room, _, _ := strings.Cut(rel, "/")
	return room
}

// within reports whether rel is pkg or a package below it.
func within(rel, pkg string) bool { return rel == pkg || strings.HasPrefix(rel, pkg+"/") }

// Violations returns one line for each import of pkgs that breaks the rules of the
// package doc, naming the importer, the imported package and the rule.
func Violations(pkgs []Package) []string {
	var bad []string
	for _, p := range pkgs {
		from := Room(p.Rel)
		for _, imp := range p.Imports {
			to := Room(imp)
			switch {
			case to == "app":
				bad = append(bad, p.Rel+" imports "+imp+": nothing imports app, the wiring")
			case to == "admin" && from != "admin" && from != "app":
				bad = append(bad, p.Rel+" imports "+imp+": only app wires admin")
			case from == "platform" && to != "platform":
				bad = append(bad, p.Rel+" imports "+imp+": platform imports no service")
			case from == "admin" && to != "platform" && to != "admin":
				bad = append(bad, p.Rel+" imports "+imp+": admin builds on platform only")
			case slices.Contains(Services, from) && slices.Contains(Services, to) && from != to && !slices.Contains(Models, imp):
				bad = append(bad, p.Rel+" imports "+imp+": a service reaches another only through its model ("+strings.Join(Models, ", ")+")")
			}
			if slices.Contains(Models, p.Rel) && slices.Contains(DataPlanes, imp) {
				bad = append(bad, p.Rel+" imports "+imp+": a model never imports a data plane")
			}
			if slices.Contains(DataPlanes, imp) && from != "app" && !within(p.Rel, imp) {
				bad = append(bad, p.Rel+" imports "+imp+": only app wires a data plane")
			}
		}
	}
	return bad
}

// NoDomainDeps fails t for every package of DomainPackages (or below one) that the
// package in the test's working directory depends on, by its whole import graph
// (`go list -deps .`); name names that package in the messages. It skips t when the go
// tool is not on PATH, and fails it when go list fails or lists too few packages to be
// the real graph.
func NoDomainDeps(t *testing.T, name string) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go tool (go list -deps): not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 2 {
		t.Fatalf("go list -deps listed %q: too few packages to be the real graph", deps)
	}
	for _, d := range deps {
		for _, f := range DomainPackages {
			if d == scheduler+f || strings.HasPrefix(d, scheduler+f+"/") {
				t.Errorf("%s depends on %s", name, d)
			}
		}
	}
}
