package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
)

// TestPlatformMatchingDev runs `berth dev` with an empty CNI plugin directory (a host
// without containernetworking-plugins) and drives it with the AWS CLI (issues 35 and
// 39): the instance registers its OS, architecture and log drivers but not the network
// capabilities; runtimePlatform is registered and described back; RunTask and StartTask
// refuse a bridge task (the default mode) and an awsvpc one with failures[] ATTRIBUTE
// naming the attribute and the missing plugins, an ARM64 task on this x86_64 host (or the
// reverse) naming ecs.cpu-architecture, a WINDOWS task naming ecs.os-type — nothing is
// accepted then STOPPED; a service of the bridge task places nothing and says why in its
// events; a host-mode task of this host's platform runs. The plugins installed, the
// agent registers ecs.capability.cni-plugin-version and ecs.capability.task-eni without a
// restart.
func TestPlatformMatchingDev(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	plugins := filepath.Join(dir, "cni")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(devEnv(t, filepath.Join(dir, "data")), "BERTH_CNI_PLUGIN_DIR="+plugins)
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	cli(t, root, env, "bin/berth", "image", "demo")
	aws := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }
	native, foreign := "X86_64", "ARM64"
	nativeAttr := "x86_64"
	if goruntime.GOARCH == "arm64" {
		native, foreign, nativeAttr = "ARM64", "X86_64", "arm64"
	}

	// The instance's attributes.
	ci := aws("ecs", "list-container-instances", "--query", "containerInstanceArns[0]", "--output", "text")
	attrs := func() map[string]string {
		t.Helper()
		var out []struct{ Name, Value string }
		if err := json.Unmarshal([]byte(aws("ecs", "describe-container-instances", "--container-instances", ci, "--query", "containerInstances[0].attributes", "--output", "json")), &out); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, a := range out {
			m[a.Name] = a.Value
		}
		return m
	}
	got := attrs()
	if got["ecs.os-type"] != "linux" || got["ecs.cpu-architecture"] != nativeAttr {
		t.Errorf("os-type %q, cpu-architecture %q; want linux, %s", got["ecs.os-type"], got["ecs.cpu-architecture"], nativeAttr)
	}
	for _, name := range []string{"com.amazonaws.ecs.capability.logging-driver.awslogs", "com.amazonaws.ecs.capability.logging-driver.json-file", "com.amazonaws.ecs.capability.task-iam-role"} {
		if _, ok := got[name]; !ok {
			t.Errorf("instance lacks %s: %v", name, got)
		}
	}
	for _, name := range []string{"ecs.capability.cni-plugin-version", "ecs.capability.task-eni"} {
		if _, ok := got[name]; ok {
			t.Errorf("instance has %s with an empty CNI plugin directory", name)
		}
	}
	// ListAttributes finds the same.
	if arns := aws("ecs", "list-attributes", "--target-type", "container-instance", "--attribute-name", "ecs.cpu-architecture", "--attribute-value", nativeAttr, "--query", "attributes[0].targetId", "--output", "text"); arns != ci {
		t.Errorf("list-attributes ecs.cpu-architecture=%s: %q, want %s", nativeAttr, arns, ci)
	}

	register := func(family, mode, arch, os string) {
		t.Helper()
		def, _ := json.Marshal([]map[string]any{{"name": "app", "image": image, "memory": 32, "command": []string{"sleep", "600"}, "essential": true}})
		args := []string{"ecs", "register-task-definition", "--family", family, "--container-definitions", string(def)}
		if mode != "" {
			args = append(args, "--network-mode", mode)
		}
		if arch != "" || os != "" {
			rp := map[string]string{}
			if arch != "" {
				rp["cpuArchitecture"] = arch
			}
			if os != "" {
				rp["operatingSystemFamily"] = os
			}
			b, _ := json.Marshal(rp)
			args = append(args, "--runtime-platform", string(b))
		}
		aws(args...)
	}
	type failure struct{ Arn, Reason, Detail string }
	type runOut struct {
		Tasks    []struct{ TaskArn string }
		Failures []failure
	}
	run := func(args ...string) runOut {
		t.Helper()
		var out runOut
		if err := json.Unmarshal([]byte(aws(append(args, "--output", "json")...)), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	refused := func(what string, out runOut, want ...string) {
		t.Helper()
		if len(out.Tasks) != 0 || len(out.Failures) != 1 {
			t.Fatalf("%s: %d tasks, failures %+v; want refused with one failure", what, len(out.Tasks), out.Failures)
		}
		f := out.Failures[0]
		t.Logf("%s: %s %s", what, f.Reason, f.Detail)
		if f.Reason != "ATTRIBUTE" || f.Arn != ci {
			t.Errorf("%s: failure %+v, want reason ATTRIBUTE on %s", what, f, ci)
		}
		for _, w := range want {
			if !strings.Contains(f.Detail, w) {
				t.Errorf("%s: detail %q does not name %q", what, f.Detail, w)
			}
		}
	}

	// runtimePlatform is stored and described back.
	register("plat-bridge", "", native, "LINUX")
	var rp struct{ CpuArchitecture, OperatingSystemFamily string }
	if err := json.Unmarshal([]byte(aws("ecs", "describe-task-definition", "--task-definition", "plat-bridge", "--query", "taskDefinition.runtimePlatform", "--output", "json")), &rp); err != nil {
		t.Fatal(err)
	}
	if rp.CpuArchitecture != native || rp.OperatingSystemFamily != "LINUX" {
		t.Errorf("runtimePlatform described as %+v, want %s LINUX", rp, native)
	}

	// Refused at RunTask and StartTask, naming the attribute and what the host lacks.
	refused("bridge run-task", run("ecs", "run-task", "--task-definition", "plat-bridge"),
		"ecs.capability.cni-plugin-version", "networkMode bridge", `"bridge"`, plugins)
	refused("bridge start-task", run("ecs", "start-task", "--task-definition", "plat-bridge", "--container-instances", ci),
		"ecs.capability.cni-plugin-version", plugins)
	register("plat-awsvpc", "awsvpc", "", "")
	refused("awsvpc run-task", run("ecs", "run-task", "--task-definition", "plat-awsvpc", "--network-configuration", "awsvpcConfiguration={subnets=[subnet-1]}"),
		"ecs.capability.task-eni", "networkMode awsvpc", plugins)
	register("plat-foreign", "host", foreign, "LINUX")
	refused("foreign architecture", run("ecs", "run-task", "--task-definition", "plat-foreign"),
		"ecs.cpu-architecture is "+nativeAttr, "needs "+strings.ToLower(foreign))
	register("plat-windows", "host", "", "WINDOWS_SERVER_2019_FULL")
	refused("windows", run("ecs", "run-task", "--task-definition", "plat-windows"), "ecs.os-type is linux", "WINDOWS_SERVER_2019_FULL needs windows", "Linux containers only")

	// A service of the bridge task places nothing and says why.
	aws("ecs", "create-service", "--service-name", "plat-svc", "--task-definition", "plat-bridge", "--desired-count", "1")
	waitFor(t, func() (string, bool) {
		ev := aws("ecs", "describe-services", "--services", "plat-svc", "--query", "services[0].events[].message", "--output", "text")
		return ev, strings.Contains(ev, "was unable to place a task because no container instance met all of its requirements") && strings.Contains(ev, "is missing an attribute required by your task")
	})
	if n := aws("ecs", "list-tasks", "--service-name", "plat-svc", "--query", "length(taskArns)"); n != "0" {
		t.Errorf("service started %s tasks on a host that cannot run them", n)
	}
	aws("ecs", "delete-service", "--service", "plat-svc", "--force")

	// A host task of this host's platform runs.
	register("plat-host", "host", native, "LINUX")
	out := run("ecs", "run-task", "--task-definition", "plat-host")
	if len(out.Tasks) != 1 || len(out.Failures) != 0 {
		t.Fatalf("host task of the native platform: %+v", out)
	}
	task := out.Tasks[0].TaskArn
	defer aws("ecs", "stop-task", "--task", task)
	waitFor(t, func() (string, bool) {
		s := aws("ecs", "describe-tasks", "--tasks", task, "--query", "tasks[0].lastStatus", "--output", "text")
		return s, s == "RUNNING"
	})

	// The plugins appear (executables of their names; nothing here runs them but the
	// version probe): the agent registers the capabilities again, no restart.
	for _, p := range []string{"bridge", "host-local", "portmap", "firewall", "loopback"} {
		if err := os.WriteFile(filepath.Join(plugins, p), []byte("#!/bin/sh\necho 'CNI "+p+" plugin v1.2.3'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() (string, bool) {
		got := attrs()
		_, eni := got["ecs.capability.task-eni"]
		return got["ecs.capability.cni-plugin-version"], eni && got["ecs.capability.cni-plugin-version"] == "v1.2.3"
	})
	if got := attrs(); got["ecs.cpu-architecture"] != nativeAttr || got["ecs.os-type"] != "linux" {
		t.Errorf("after registering again: cpu-architecture %q, os-type %q", got["ecs.cpu-architecture"], got["ecs.os-type"])
	}
}
