package gateway_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/berthhq/berth/pkg/identity"
)

// runAWS runs the AWS CLI against the gateway with the dev credentials and an empty
// configuration, and returns stdout, stderr and whether it succeeded.
func runAWS(t *testing.T, e *env, args ...string) (string, string, bool) {
	t.Helper()
	return runAWSIn(t, e, region, args...)
}

// runAWSIn is runAWS signing for another region (the CLI's --region).
func runAWSIn(t *testing.T, e *env, region string, args ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command("aws", append(args, "--endpoint-url", e.url, "--region", region, "--output", "json")...)
	var environ []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			environ = append(environ, kv)
		}
	}
	cmd.Env = append(environ,
		"AWS_ACCESS_KEY_ID="+devKey, "AWS_SECRET_ACCESS_KEY="+devSecret,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_MAX_ATTEMPTS=1", "AWS_RETRY_MODE=standard",
		"AWS_PAGER=",
	)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

func TestAWSCLI(t *testing.T) {
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; CI installs it")
	}
	e := newEnv(t, nil)

	out, stderr, ok := runAWS(t, e, "ecs", "list-clusters")
	if !ok {
		t.Fatalf("list-clusters: %s", stderr)
	}
	var list struct{ ClusterArns []string }
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.ClusterArns) != 1 || !strings.HasSuffix(list.ClusterArns[0], ":cluster/default") {
		t.Errorf("list-clusters output %q (%v)", out, err)
	}

	out, stderr, ok = runAWS(t, e, "ecs", "create-cluster", "--cluster-name", "web", "--tags", "key=env,value=dev")
	if !ok {
		t.Fatalf("create-cluster: %s", stderr)
	}
	var created struct {
		Cluster struct {
			ClusterName       string
			RunningTasksCount int
			Tags              []struct{ Key, Value string }
		}
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Cluster.ClusterName != "web" || created.Cluster.RunningTasksCount != 2 || len(created.Cluster.Tags) != 1 {
		t.Errorf("create-cluster output %q (%v)", out, err)
	}

	out, stderr, ok = runAWS(t, e, "ecs", "describe-container-instances", "--container-instances", "abc")
	if !ok {
		t.Fatalf("describe-container-instances: %s", stderr)
	}
	var ci struct {
		ContainerInstances []struct {
			RegisteredAt float64 // CLI v1 prints timestamps as received
			Version      int64
		}
		Failures []any
	}
	if err := json.Unmarshal([]byte(out), &ci); err != nil || len(ci.ContainerInstances) != 1 ||
		ci.ContainerInstances[0].RegisteredAt != 1700000000.5 || ci.ContainerInstances[0].Version != 9007199254740993 || ci.Failures == nil {
		t.Errorf("describe-container-instances output %q (%v)", out, err)
	}

	// Errors come back as the CLI prints AWS errors.
	_, stderr, ok = runAWS(t, e, "ecs", "describe-clusters", "--clusters", "missing")
	if ok || !strings.Contains(stderr, "(ClusterNotFoundException)") || !strings.Contains(stderr, "Cluster not found.") {
		t.Errorf("describe-clusters missing: ok=%t stderr=%q", ok, stderr)
	}
	_, stderr, ok = runAWS(t, e, "ecs", "list-services")
	if ok || !strings.Contains(stderr, "(UnsupportedFeatureException)") || !strings.Contains(stderr, "ListServices") {
		t.Errorf("list-services: ok=%t stderr=%q", ok, stderr)
	}
}

// TestAWSCLIRegions: the CLI's --region picks the region the request is served in; a
// name outside the allow-list is refused as AWS refuses it.
func TestAWSCLIRegions(t *testing.T) {
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; CI installs it")
	}
	e := newEnv(t, nil)
	if _, stderr, ok := runAWSIn(t, e, "eu-west-1", "ecs", "list-clusters"); !ok {
		t.Fatalf("list-clusters in eu-west-1: %s", stderr)
	}
	if got := e.ecs.lastHeader().Get(identity.RegionHeader); got != "eu-west-1" {
		t.Errorf("%s = %q, want eu-west-1", identity.RegionHeader, got)
	}
	_, stderr, ok := runAWSIn(t, e, "xx-nowhere-1", "ecs", "list-clusters")
	if ok || !strings.Contains(stderr, "(InvalidSignatureException)") ||
		!strings.Contains(stderr, "Credential should be scoped to a valid region, not 'xx-nowhere-1'.") {
		t.Errorf("unknown region: ok=%v stderr=%s", ok, stderr)
	}
}
