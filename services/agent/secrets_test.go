package agent_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestTaskSecrets: resolved secrets become the container's environment, registry
// credentials authenticate the pull from a registry that demands them, the agent's state
// file never holds a value, and a secrets error fails the task before any pull.
func TestTaskSecrets(t *testing.T) {
	w := newWorld(t)
	// A registry that answers 401 with a Basic challenge without the right credentials.
	target, _ := url.Parse("http://" + w.reg)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var denied, allowed atomic.Int64
	authed := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "puller" || p != "pull-s3cret" {
			denied.Add(1)
			rw.Header().Set("WWW-Authenticate", `Basic realm="berth-test"`)
			http.Error(rw, "unauthorized", http.StatusUnauthorized)
			return
		}
		allowed.Add(1)
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(authed.Close)
	image := strings.TrimPrefix(authed.URL, "http://") + "/berth/testimage:latest"

	cp := newControlPlane(t)
	name := clusterName(t)
	cfg := testConfig(t, w, cp, name)
	cfg.PullBehavior = "always" // every task pulls: the one without credentials must be refused
	ta := startAgent(t, cfg, cp)

	def := containerDef("app", image, "env")
	def.Secrets = []*ecsv1.Secret{{Name: proto.String("DB_PASSWORD"), ValueFrom: proto.String("/db/password")}}
	def.RepositoryCredentials = &ecsv1.RepositoryCredentials{CredentialsParameter: proto.String("registry")}
	td := taskDef("secrets", def)
	arn := taskARN(name)
	cp.push(t, &agentv1.SessionResponse{Message: &agentv1.SessionResponse_Assignment{Assignment: &agentv1.Assignment{
		DeliveryId: "d-secrets", Task: &ecsv1.Task{TaskArn: proto.String(arn), TaskDefinitionArn: td.TaskDefinitionArn}, TaskDefinition: td,
		ResolvedSecrets: []*agentv1.ResolvedSecret{
			{ContainerName: "app", Kind: "env", Name: "DB_PASSWORD", Value: "value-0f-secret"},
			{ContainerName: "app", Kind: "registry", Name: "username", Value: "puller"},
			{ContainerName: "app", Kind: "registry", Name: "password", Value: "pull-s3cret"},
		},
	}}})
	st := cp.waitStatus(t, arn, "STOPPED", 60*time.Second)
	if st.GetStopCode() != "EssentialContainerExited" || st.GetContainers()[0].GetExitCode() != 0 {
		t.Fatalf("task stopped with %s %q, containers %v", st.GetStopCode(), st.GetStoppedReason(), st.GetContainers())
	}
	if denied.Load() == 0 || allowed.Load() == 0 {
		t.Errorf("registry saw %d unauthenticated and %d authenticated requests; want both", denied.Load(), allowed.Load())
	}
	var out []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		out = texts(readLogs(t, ta, &agentv1.ReadLogsRequest{TaskArn: arn}), "stdout")
		if strings.Contains(strings.Join(out, "\n"), "DB_PASSWORD=") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(strings.Join(out, "\n"), "DB_PASSWORD=value-0f-secret") {
		t.Errorf("the container's environment lacks the secret:\n%s", strings.Join(out, "\n"))
	}
	// The agent's data dir (its state file included) never holds a value.
	_ = filepath.WalkDir(cfg.DataDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(path, "/logs/") {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil && (strings.Contains(string(b), "value-0f-secret") || strings.Contains(string(b), "pull-s3cret")) {
			t.Errorf("%s holds a secret value", path)
		}
		return nil
	})

	// Without credentials the pull is refused; with a secrets error nothing is pulled.
	arn2 := taskARN(name)
	cp.assign(t, arn2, taskDef("nocreds", containerDef("app", image, "env")))
	if st := cp.waitStatus(t, arn2, "STOPPED", 60*time.Second); st.GetStopCode() != "TaskFailedToStart" || !strings.HasPrefix(st.GetStoppedReason(), "CannotPullContainerError") {
		t.Errorf("pull without credentials: %s %q", st.GetStopCode(), st.GetStoppedReason())
	}
	before := denied.Load() + allowed.Load()
	arn3 := taskARN(name)
	const reason = "ResourceInitializationError: unable to pull secrets or registry auth: execution resource retrieval failed: unable to retrieve secrets from ssm: invalid parameters: /nope (ParameterNotFound)"
	cp.push(t, &agentv1.SessionResponse{Message: &agentv1.SessionResponse_Assignment{Assignment: &agentv1.Assignment{
		DeliveryId: "d-fail", Task: &ecsv1.Task{TaskArn: proto.String(arn3), TaskDefinitionArn: td.TaskDefinitionArn}, TaskDefinition: td,
		SecretsError: reason,
	}}})
	st = cp.waitStatus(t, arn3, "STOPPED", 60*time.Second)
	if st.GetStopCode() != "TaskFailedToStart" || st.GetStoppedReason() != reason || st.GetContainers()[0].GetReason() != reason {
		t.Errorf("secrets error: %s %q %v", st.GetStopCode(), st.GetStoppedReason(), st.GetContainers())
	}
	if denied.Load()+allowed.Load() != before {
		t.Error("a task whose secrets failed pulled its image")
	}
}
