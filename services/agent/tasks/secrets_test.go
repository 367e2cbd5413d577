package tasks

import (
	"testing"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/runtime"
)

func TestTaskSecrets(t *testing.T) {
	str := func(s string) *string { return &s }
	td := &ecsv1.TaskDefinition{ContainerDefinitions: []*ecsv1.ContainerDefinition{
		{Name: str("app"), Secrets: []*ecsv1.Secret{{Name: str("A"), ValueFrom: str("/a")}}},
		{Name: str("side")},
	}}
	a := &agentv1.Assignment{TaskDefinition: td, ResolvedSecrets: []*agentv1.ResolvedSecret{
		{ContainerName: "app", Kind: "env", Name: "A", Value: "va"},
		{ContainerName: "app", Kind: "registry", Name: "username", Value: "u"},
		{ContainerName: "app", Kind: "registry", Name: "password", Value: "p"},
		{ContainerName: "app", Kind: "log", Name: "opt", Value: "x"},
	}}
	base := runtime.PullConfig{Credentials: map[string]runtime.Credential{"other:5000": {Username: "o"}}}
	tk := &task{m: &Manager{cfg: Config{Pull: base}}, a: a}

	if env := tk.secretEnv("app"); len(env) != 1 || env[0].GetName() != "A" || env[0].GetValue() != "va" {
		t.Errorf("secretEnv(app) = %v", env)
	}
	if env := tk.secretEnv("side"); len(env) != 0 {
		t.Errorf("secretEnv(side) = %v", env)
	}
	cfg := tk.pullConfig("app", "127.0.0.1:5000/berth/demo:latest")
	if c := cfg.Credentials["127.0.0.1:5000"]; c.Username != "u" || c.Password != "p" || cfg.Credentials["other:5000"].Username != "o" {
		t.Errorf("pull credentials %v", cfg.Credentials)
	}
	if _, leaked := base.Credentials["127.0.0.1:5000"]; leaked {
		t.Error("the agent-wide pull config was changed")
	}
	if cfg := tk.pullConfig("side", "127.0.0.1:5000/x"); len(cfg.Credentials) != 1 {
		t.Errorf("side container got credentials: %v", cfg.Credentials)
	}
	if r := tk.secretsFailure(true); r != "" {
		t.Errorf("secretsFailure with values = %q", r)
	}
	// After an agent restart the stored assignment has no values: the task cannot start.
	lost := &task{a: &agentv1.Assignment{TaskDefinition: td}}
	if r := lost.secretsFailure(true); r != reasonSecretsLost {
		t.Errorf("secretsFailure without values = %q", r)
	}
	if r := lost.secretsFailure(false); r != "" {
		t.Errorf("adopted task: %q", r)
	}
	failed := &task{a: &agentv1.Assignment{TaskDefinition: td, SecretsError: "ResourceInitializationError: x"}}
	if r := failed.secretsFailure(false); r != "ResourceInitializationError: x" {
		t.Errorf("secretsFailure = %q", r)
	}
}
