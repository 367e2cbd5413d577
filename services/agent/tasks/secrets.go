package tasks

import (
	"context"
	"maps"
	"strings"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/runtime"
)

// Kinds of agentv1.ResolvedSecret (the scheduler's tasksecrets package).
const (
	secretEnv      = "env"
	secretRegistry = "registry"
	secretLog      = "log"
)

// reasonSecretsLost is the stoppedReason of a task whose secrets the agent no longer has
// (they are never stored, so an agent restarted between taking the assignment and
// starting the containers cannot start them).
const reasonSecretsLost = "ResourceInitializationError: unable to pull secrets or registry auth: the agent restarted before the task started and resolved secrets are never stored; run the task again"

// secretsFailure returns the stoppedReason when the task cannot start for want of its
// secrets: the scheduler could not resolve them, or (starting containers of a task that
// references secrets) the values are missing.
func (t *task) secretsFailure(starting bool) string {
	if r := t.a.GetSecretsError(); r != "" {
		return r
	}
	if starting && needsSecrets(t.a.GetTaskDefinition()) && len(t.a.GetResolvedSecrets()) == 0 {
		return reasonSecretsLost
	}
	return ""
}

func needsSecrets(td *ecsv1.TaskDefinition) bool {
	for _, c := range td.GetContainerDefinitions() {
		if len(c.GetSecrets()) > 0 || c.GetRepositoryCredentials().GetCredentialsParameter() != "" ||
			len(c.GetLogConfiguration().GetSecretOptions()) > 0 {
			return true
		}
	}
	return false
}

// secretEnv returns the container's secrets[] as environment variables, in the task
// definition's order (they are set after its environment, as ECS does).
func (t *task) secretEnv(container string) []*ecsv1.KeyValuePair {
	var out []*ecsv1.KeyValuePair
	for _, s := range t.a.GetResolvedSecrets() {
		if s.GetContainerName() == container && s.GetKind() == secretEnv {
			out = append(out, &ecsv1.KeyValuePair{Name: new(s.GetName()), Value: new(s.GetValue())})
		}
	}
	return out
}

// pullConfig is the agent's pull configuration, with the container's
// repositoryCredentials (resolved) for the image's registry host.
func (t *task) pullConfig(container, ref string) runtime.PullConfig {
	cfg := t.m.cfg.Pull
	var cred runtime.Credential
	for _, s := range t.a.GetResolvedSecrets() {
		if s.GetContainerName() != container || s.GetKind() != secretRegistry {
			continue
		}
		switch s.GetName() {
		case "username":
			cred.Username = s.GetValue()
		case "password":
			cred.Password = s.GetValue()
		}
	}
	if cred.Username == "" {
		return cfg
	}
	host, _, _ := strings.Cut(ref, "/")
	creds := maps.Clone(cfg.Credentials)
	if creds == nil {
		creds = map[string]runtime.Credential{}
	}
	creds[host] = cred
	cfg.Credentials = creds
	return cfg
}

// secretsHook fails the task's start when its secrets are unavailable (secretsFailure).
type secretsHook struct{ t *task }

func (h *secretsHook) name() string { return "secrets" }

func (h *secretsHook) prestart(_ context.Context, ts *taskStart) error {
	if reason := h.t.secretsFailure(len(ts.missing) > 0); reason != "" {
		return &startFailure{reason: reason}
	}
	return nil
}
