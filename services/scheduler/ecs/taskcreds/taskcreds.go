// Package taskcreds issues and resolves the session credentials of ECS task roles: what
// the ECS agent serves a task on its credentials endpoint (AWS_CONTAINER_CREDENTIALS_*)
// and what the gateway then accepts, SigV4-signed with X-Amz-Security-Token.
//
// Credentials are issued by the scheduler when the agent starts a task with a taskRoleArn
// (or executionRoleArn) and again before they expire; they act for the task's account as
// the principal arn:aws:sts::{account}:assumed-role/{role-name}/{task-id}. The record
// (store.v1.TaskCredentialRecord at /berth/v1/task-credentials/{access-key-id}) holds the
// secret sealed with the scheduler's keyring and only the SHA-256 of the session token;
// it is attached to an etcd lease, so expired records disappear on their own. A resolve
// refuses credentials whose task is STOPPED or gone: stopping a task revokes them.
package taskcreds

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Role types of GetTaskCredentialsRequest.role_type, as the ECS agent names them.
const (
	RoleTypeTask      = "TaskRole"
	RoleTypeExecution = "TaskExecutionRole"
)

// DefaultLifetime is how long issued credentials are accepted. The agent asks for new ones
// when half of it has passed (the ECS agent's credentials are also short-lived and
// refreshed before they expire).
const DefaultLifetime = time.Hour

// KeyPrefix is the access key id prefix of session credentials, as AWS's temporary keys.
const KeyPrefix = "ASIA"

// leaseSlack keeps a record past its expiration so a resolve can still tell "expired".
const leaseSlack = 5 * time.Minute

// Config configures an Issuer.
type Config struct {
	// KV reads tasks and writes credential records; Lease grants the records' leases.
	KV    clientv3.KV
	Lease clientv3.Lease
	// Keyring seals the secret access keys; nil disables the issuer (FailedPrecondition).
	Keyring *seal.Keyring
	// Lifetime of issued credentials; DefaultLifetime when zero.
	Lifetime time.Duration
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
}

// Issuer issues task credentials (for the agent session service) and resolves them (for
// the admin service's ResolveAccessKey, which the gateway calls).
type Issuer struct{ cfg Config }

// New returns an Issuer for cfg.
func New(cfg Config) *Issuer {
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = DefaultLifetime
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Issuer{cfg: cfg}
}

// Key returns the etcd key of a credential record.
func Key(accessKeyID string) string { return store.MustKey("task-credentials", accessKeyID) }

// Issue issues credentials for the role of task taskARN, which must belong to the caller's
// account and region and, for an instance-scoped caller, run on its instance. Errors are
// Connect errors: NotFound (no such task of the caller's), FailedPrecondition (stopped,
// no role of that type, no keyring), InvalidArgument (bad role type or ARN).
func (i *Issuer) Issue(ctx context.Context, id caller.Identity, taskARN, roleType string) (*agentv1.GetTaskCredentialsResponse, error) {
	if i.cfg.Keyring == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("task credentials need the scheduler's keyring"))
	}
	a, err := arn.Parse(taskARN)
	if err != nil || a.Type != arn.Task || a.Cluster == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("task_arn %q is not a long-format task ARN", taskARN))
	}
	if a.Account != id.Account || a.Region != id.Region {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("task not found"))
	}
	scope := keys.Scope{Account: a.Account, Region: a.Region}
	rec, _, err := store.Get[*storev1.TaskRecord](ctx, i.cfg.KV, keys.Task(scope, a.Cluster, a.Name))
	if err != nil {
		return nil, storeError(err, "task")
	}
	if id.ContainerInstanceARN != "" && !strings.HasSuffix(id.ContainerInstanceARN, "/"+rec.GetContainerInstanceId()) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("task not found"))
	}
	task := rec.GetTask()
	if task.GetLastStatus() == "STOPPED" {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("task is stopped"))
	}
	role, err := i.roleARN(ctx, scope, task.GetTaskDefinitionArn(), rec, roleType)
	if err != nil {
		return nil, err
	}
	if role == "" {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("task has no %s", roleType))
	}
	return i.issue(ctx, a.Account, a.Region, taskARN, "", role, i.cfg.Lifetime)
}

// issue stores and returns new session credentials of account for role, bound to taskARN
// (or, when empty, to the AssumeRole session name session), valid for lifetime.
func (i *Issuer) issue(ctx context.Context, account, region, taskARN, session, role string, lifetime time.Duration) (*agentv1.GetTaskCredentialsResponse, error) {
	now := i.cfg.Now()
	exp := now.Add(lifetime)
	keyID := KeyPrefix + randomBase32(16)
	secret := randomBase64(30)
	token := randomBase64(96)
	sum := sha256.Sum256([]byte(token))
	cr := &storev1.TaskCredentialRecord{
		AccessKeyId:           keyID,
		SealedSecretAccessKey: i.cfg.Keyring.Seal([]byte(secret), []byte(keyID)),
		SessionTokenSha256:    sum[:],
		AccountId:             account,
		Region:                region,
		TaskArn:               taskARN,
		SessionName:           session,
		RoleArn:               role,
		Expiration:            timestamppb.New(exp),
		CreatedAt:             timestamppb.New(now),
	}
	val, err := proto.Marshal(cr)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	lease, err := i.cfg.Lease.Grant(ctx, int64((lifetime+leaseSlack)/time.Second))
	if err != nil {
		return nil, storeError(err, "task credentials")
	}
	k := Key(keyID)
	resp, err := i.cfg.KV.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(val), clientv3.WithLease(lease.ID))).Commit()
	if err != nil {
		return nil, storeError(err, "task credentials")
	}
	if !resp.Succeeded {
		return nil, connect.NewError(connect.CodeAborted, errors.New("access key id collision; retry"))
	}
	return &agentv1.GetTaskCredentialsResponse{
		AccessKeyId: keyID, SecretAccessKey: secret, SessionToken: token,
		Expiration: timestamppb.New(exp), RoleArn: role,
	}, nil
}

// roleARN returns the task's role of roleType: the override's, else the definition's.
func (i *Issuer) roleARN(ctx context.Context, scope keys.Scope, defARN string, rec *storev1.TaskRecord, roleType string) (string, error) {
	o := rec.GetTask().GetOverrides()
	var role string
	switch roleType {
	case "", RoleTypeTask:
		role = o.GetTaskRoleArn()
	case RoleTypeExecution:
		role = o.GetExecutionRoleArn()
	default:
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("role_type %q is not %s or %s", roleType, RoleTypeTask, RoleTypeExecution))
	}
	if role != "" {
		return role, nil
	}
	d, err := arn.Parse(defARN)
	if err != nil || (d.Type != arn.TaskDefinition && d.Type != arn.DaemonTaskDefinition) {
		return "", connect.NewError(connect.CodeInternal, fmt.Errorf("task has no valid task definition ARN"))
	}
	var def interface{ GetTaskDefinition() *ecsv1.TaskDefinition }
	if d.Type == arn.DaemonTaskDefinition {
		// A managed daemon's task: its roles are its daemon task definition's.
		def, _, err = store.Get[*storev1.DaemonTaskDefinitionRecord](ctx, i.cfg.KV, keys.DaemonTaskDefinition(scope, d.Name, d.Revision))
	} else {
		def, _, err = store.Get[*storev1.TaskDefinitionRecord](ctx, i.cfg.KV, keys.TaskDefinition(scope, d.Name, d.Revision))
	}
	if err != nil {
		return "", storeError(err, "task definition")
	}
	if roleType == RoleTypeExecution {
		return def.GetTaskDefinition().GetExecutionRoleArn(), nil
	}
	return def.GetTaskDefinition().GetTaskRoleArn(), nil
}

// Resolve answers the gateway's ResolveAccessKey for session credentials: the account,
// secret, token hash and principal. NotFound when the key does not exist, has expired, or
// its task is STOPPED or gone (the record is then deleted).
func (i *Issuer) Resolve(ctx context.Context, accessKeyID string) (*adminv1.ResolveAccessKeyResponse, error) {
	if i.cfg.Keyring == nil {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("access key not found"))
	}
	k := Key(accessKeyID)
	cr, rev, err := store.Get[*storev1.TaskCredentialRecord](ctx, i.cfg.KV, k)
	if err != nil {
		return nil, storeError(err, "access key")
	}
	if !i.cfg.Now().Before(cr.GetExpiration().AsTime()) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("access key expired"))
	}
	if cr.GetTaskArn() != "" && !i.taskLive(ctx, cr.GetTaskArn()) {
		_, _ = i.cfg.KV.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).Then(clientv3.OpDelete(k)).Commit()
		return nil, connect.NewError(connect.CodeNotFound, errors.New("access key revoked: its task stopped"))
	}
	secret, err := i.cfg.Keyring.Open(cr.GetSealedSecretAccessKey(), []byte(accessKeyID))
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, errors.New("cannot open the sealed secret (keyring rotated away?)"))
	}
	session := cr.GetSessionName()
	if session == "" {
		session = cr.GetTaskArn()
	}
	arnStr, uid := Principal(cr.GetAccountId(), cr.GetRoleArn(), session)
	return &adminv1.ResolveAccessKeyResponse{
		AccessKey: &adminv1.AccessKey{
			AccessKeyId: accessKeyID, AccountId: cr.GetAccountId(),
			Description: "session credentials of " + session, CreatedAt: cr.GetCreatedAt(),
		},
		SecretAccessKey:    string(secret),
		SessionTokenSha256: cr.GetSessionTokenSha256(),
		PrincipalArn:       arnStr,
		PrincipalId:        uid,
		Expiration:         cr.GetExpiration(),
	}, nil
}

// taskLive reports whether the task exists and is not STOPPED; a store error counts as
// live so an etcd hiccup does not look like a revocation (the gateway then retries).
func (i *Issuer) taskLive(ctx context.Context, taskARN string) bool {
	a, err := arn.Parse(taskARN)
	if err != nil {
		return false
	}
	rec, _, err := store.Get[*storev1.TaskRecord](ctx, i.cfg.KV, keys.Task(keys.Scope{Account: a.Account, Region: a.Region}, a.Cluster, a.Name))
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		return true
	}
	return rec.GetTask().GetLastStatus() != "STOPPED"
}

// Principal returns the STS assumed-role ARN and unique id of a role session, as AWS
// names them: arn:aws:sts::{account}:assumed-role/{role name}/{session} and
// "AROA…:{session}" (the role id derived from the role ARN). For ECS task credentials
// taskARN is the task's ARN and the session its id; an AssumeRole session name is used
// as is.
func Principal(account, roleARN, taskARN string) (principalARN, userID string) {
	role := roleARN
	if j := strings.LastIndex(role, "/"); j >= 0 {
		role = role[j+1:]
	}
	session := taskARN
	if j := strings.LastIndex(session, "/"); j >= 0 {
		session = session[j+1:]
	}
	sum := sha256.Sum256([]byte(roleARN))
	roleID := "AROA" + base32.StdEncoding.EncodeToString(sum[:])[:17]
	return "arn:aws:sts::" + account + ":assumed-role/" + role + "/" + session, roleID + ":" + session
}

func storeError(err error, what string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("%s not found", what))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeCanceled, err)
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: store unavailable", what))
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return b
}

func randomBase32(n int) string {
	return base32.StdEncoding.EncodeToString(randomBytes(n))[:n]
}

func randomBase64(n int) string { return base64.StdEncoding.EncodeToString(randomBytes(n)) }

// AssumeRole issues credentials for role (an IAM role ARN of the caller's own account:
// Berth has no IAM, so any role of the account may be assumed and the credentials act with
// the account's permissions) under session name session, valid for duration. It returns the
// credentials and the assumed role's ARN and id. Errors are awserr-style Connect errors:
// AccessDenied for a role of another account, ValidationError for a malformed role ARN or
// session name.
func (i *Issuer) AssumeRole(ctx context.Context, id caller.Identity, role, session string, duration time.Duration) (*agentv1.GetTaskCredentialsResponse, string, string, error) {
	if i.cfg.Keyring == nil {
		return nil, "", "", connect.NewError(connect.CodeFailedPrecondition, errors.New("AssumeRole needs the scheduler's keyring"))
	}
	res, err := i.issue(ctx, id.Account, id.Region, "", session, role, duration)
	if err != nil {
		return nil, "", "", err
	}
	arnStr, uid := Principal(id.Account, role, session)
	return res, arnStr, uid, nil
}
