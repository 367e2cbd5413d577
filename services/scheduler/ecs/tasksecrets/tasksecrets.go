// Package tasksecrets resolves an ECS task's secrets at task start: containerDefinitions'
// secrets[].valueFrom (a Secrets Manager secret ARN, optionally
// ":json-key:version-stage:version-id", or an SSM parameter name or ARN),
// repositoryCredentials.credentialsParameter (a secret holding {"username","password"}),
// and logConfiguration.secretOptions; and, for a container whose image is in this
// Berth's ECR registry and that names no repositoryCredentials, an ECR authorization
// token of the task's account (as the ECS agent pulls ECR images with the task's
// execution role). The delivering scheduler replica calls it when it
// sends an assignment to the agent (agentsession): the values travel on the agent's
// session only, never into etcd, the task record or DescribeTasks. A reference that does
// not resolve fails the task with AWS's stoppedReason form,
// "ResourceInitializationError: unable to pull secrets or registry auth: ...", naming the
// reference and never a value.
package tasksecrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/secretsmanager"
)

// Kinds of ResolvedSecret.
const (
	KindEnv      = "env"
	KindLog      = "log"
	KindRegistry = "registry"
)

// ReasonPrefix starts the stoppedReason of a task whose secrets did not resolve, as AWS
// words it.
const ReasonPrefix = "ResourceInitializationError: unable to pull secrets or registry auth: "

// Secrets reads Secrets Manager secret values (secretsmanager.Handler).
type Secrets interface {
	Get(ctx context.Context, s keys.Scope, id, versionID, stage string) (*secretsmanager.SecretValue, error)
}

// Parameters reads SSM parameter values, decrypted (ssm.Handler).
type Parameters interface {
	Resolve(ctx context.Context, s keys.Scope, id string) (string, error)
}

// ECRTokens issues ECR authorization tokens (ecr.Store).
type ECRTokens interface {
	// Host is the ECR registry's host[:port] ("" when none runs).
	Host() string
	// IssueToken returns the password of a token for user AWS in scope s.
	IssueToken(s keys.Scope) (string, time.Time, error)
}

// Resolver resolves task secrets from the two stores, and ECR registry auth.
type Resolver struct {
	Secrets    Secrets
	Parameters Parameters
	// ECR, when set, gives containers whose image is in its registry a token.
	ECR ECRTokens
}

// Needs reports whether td references any secret or pulls from the ECR registry, so
// callers resolve only then.
func (r Resolver) Needs(td *ecsv1.TaskDefinition) bool {
	if Needs(td) {
		return true
	}
	for _, c := range td.GetContainerDefinitions() {
		if r.ecrImage(c) {
			return true
		}
	}
	return false
}

// ecrImage reports whether c's image is in the ECR registry and c names no
// repositoryCredentials of its own (which win, as on ECS).
func (r Resolver) ecrImage(c *ecsv1.ContainerDefinition) bool {
	if r.ECR == nil || r.ECR.Host() == "" || c.GetRepositoryCredentials().GetCredentialsParameter() != "" {
		return false
	}
	host, _, ok := strings.Cut(c.GetImage(), "/")
	return ok && host == r.ECR.Host()
}

// Needs reports whether td references any secret.
func Needs(td *ecsv1.TaskDefinition) bool {
	for _, c := range td.GetContainerDefinitions() {
		if len(c.GetSecrets()) > 0 || c.GetRepositoryCredentials().GetCredentialsParameter() != "" ||
			len(c.GetLogConfiguration().GetSecretOptions()) > 0 {
			return true
		}
	}
	return false
}

// Resolve returns the values td's containers reference, read in scope s. The error, when
// not nil, is the task's stoppedReason (ReasonPrefix + what failed); an error of etcd
// itself is returned as is (retry the delivery).
func (r Resolver) Resolve(ctx context.Context, s keys.Scope, td *ecsv1.TaskDefinition) ([]*agentv1.ResolvedSecret, error) {
	var out []*agentv1.ResolvedSecret
	for _, c := range td.GetContainerDefinitions() {
		name := c.GetName()
		for _, sec := range c.GetSecrets() {
			v, err := r.value(ctx, s, sec.GetValueFrom())
			if err != nil {
				return nil, err
			}
			out = append(out, &agentv1.ResolvedSecret{ContainerName: name, Kind: KindEnv, Name: sec.GetName(), Value: v})
		}
		for _, sec := range c.GetLogConfiguration().GetSecretOptions() {
			v, err := r.value(ctx, s, sec.GetValueFrom())
			if err != nil {
				return nil, err
			}
			out = append(out, &agentv1.ResolvedSecret{ContainerName: name, Kind: KindLog, Name: sec.GetName(), Value: v})
		}
		if ref := c.GetRepositoryCredentials().GetCredentialsParameter(); ref != "" {
			user, pass, err := r.registry(ctx, s, ref)
			if err != nil {
				return nil, err
			}
			out = append(out,
				&agentv1.ResolvedSecret{ContainerName: name, Kind: KindRegistry, Name: "username", Value: user},
				&agentv1.ResolvedSecret{ContainerName: name, Kind: KindRegistry, Name: "password", Value: pass})
		}
		if r.ecrImage(c) {
			pass, _, err := r.ECR.IssueToken(s)
			if err != nil {
				if e, ok := domain(err); ok {
					return nil, fail("ecr authorization token: %s: %s", e.Type, e.Message)
				}
				return nil, err
			}
			out = append(out,
				&agentv1.ResolvedSecret{ContainerName: name, Kind: KindRegistry, Name: "username", Value: "AWS"},
				&agentv1.ResolvedSecret{ContainerName: name, Kind: KindRegistry, Name: "password", Value: pass})
		}
	}
	return out, nil
}

// Failure is a reference that did not resolve: its Error is the stoppedReason.
type Failure struct{ Reason string }

// Error returns the stoppedReason.
func (f *Failure) Error() string { return f.Reason }

func fail(format string, args ...any) error {
	return &Failure{Reason: ReasonPrefix + fmt.Sprintf(format, args...)}
}

// domain reports whether err is an AWS error of a store (the reference is wrong), as
// opposed to a fault of etcd.
func domain(err error) (*awserr.Error, bool) {
	var e *awserr.Error
	return e, errors.As(err, &e) && e.Type != "ServerException"
}

// secretRef is a parsed Secrets Manager valueFrom.
type secretRef struct {
	id, jsonKey, stage, versionID string
}

// parseSecret splits "arn:aws:secretsmanager:region:account:secret:name-abcdef[:json-key[:version-stage[:version-id]]]".
func parseSecret(valueFrom string) (secretRef, bool) {
	parts := strings.Split(valueFrom, ":")
	if len(parts) < 7 || parts[0] != "arn" || parts[2] != "secretsmanager" || parts[5] != "secret" || len(parts) > 10 {
		return secretRef{}, false
	}
	ref := secretRef{id: strings.Join(parts[:7], ":")}
	for i, p := range parts[7:] {
		switch i {
		case 0:
			ref.jsonKey = p
		case 1:
			ref.stage = p
		case 2:
			ref.versionID = p
		}
	}
	return ref, true
}

// value resolves one valueFrom: a Secrets Manager ARN (with its optional json key, stage
// and version), an SSM parameter ARN, or a name, which is an SSM parameter (as on AWS)
// or, when no parameter has it, a Secrets Manager secret of that name.
func (r Resolver) value(ctx context.Context, s keys.Scope, valueFrom string) (string, error) {
	if ref, ok := parseSecret(valueFrom); ok {
		return r.secret(ctx, s, valueFrom, ref)
	}
	v, err := r.Parameters.Resolve(ctx, s, valueFrom)
	if err == nil {
		return v, nil
	}
	e, isDomain := domain(err)
	if !isDomain {
		return "", err
	}
	if !strings.HasPrefix(valueFrom, "arn:") && e.Type == "ParameterNotFound" {
		if v, serr := r.secret(ctx, s, valueFrom, secretRef{id: valueFrom}); serr == nil {
			return v, nil
		}
	}
	return "", fail("execution resource retrieval failed: unable to retrieve secrets from ssm: invalid parameters: %s (%s)", valueFrom, e.Type)
}

func (r Resolver) secret(ctx context.Context, s keys.Scope, valueFrom string, ref secretRef) (string, error) {
	sv, err := r.Secrets.Get(ctx, s, ref.id, ref.versionID, ref.stage)
	if err != nil {
		if e, ok := domain(err); ok {
			return "", fail("execution resource retrieval failed: unable to retrieve secret from asm: failed to fetch secret %s: %s: %s", valueFrom, e.Type, e.Message)
		}
		return "", err
	}
	if ref.jsonKey == "" {
		return string(sv.Value), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(sv.Value, &obj); err != nil {
		return "", fail("execution resource retrieval failed: unable to retrieve secret from asm: secret %s is not a JSON object, so json key %s cannot be read", valueFrom, ref.jsonKey)
	}
	raw, ok := obj[ref.jsonKey]
	if !ok {
		return "", fail("execution resource retrieval failed: unable to retrieve secret from asm: retrieved secret from Secrets Manager did not contain json key %s", ref.jsonKey)
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str, nil
	}
	return string(raw), nil // a number, boolean or nested JSON, as written
}

// registry resolves repositoryCredentials.credentialsParameter: a Secrets Manager secret
// (ARN or name) whose value is {"username": ..., "password": ...}.
func (r Resolver) registry(ctx context.Context, s keys.Scope, ref string) (string, string, error) {
	sv, err := r.Secrets.Get(ctx, s, ref, "", "")
	if err != nil {
		if e, ok := domain(err); ok {
			return "", "", fail("execution resource retrieval failed: unable to retrieve secret from asm: failed to fetch secret %s: %s: %s", ref, e.Type, e.Message)
		}
		return "", "", err
	}
	var cred struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if json.Unmarshal(sv.Value, &cred) != nil || cred.Username == "" || cred.Password == "" {
		return "", "", fail("registry auth: the secret %s does not hold {\"username\": ..., \"password\": ...}", ref)
	}
	return cred.Username, cred.Password, nil
}
