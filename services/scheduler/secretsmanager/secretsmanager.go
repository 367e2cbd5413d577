package secretsmanager

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	smv1 "github.com/berthhq/berth/gen/berth/secretsmanager/v1"
	"github.com/berthhq/berth/gen/berth/secretsmanager/v1/secretsmanagerv1connect"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Staging labels AWS manages.
const (
	Current  = "AWSCURRENT"
	Previous = "AWSPREVIOUS"
	Pending  = "AWSPENDING"
)

// maxVersions is how many versions a secret keeps: past it, the oldest versions without a
// staging label are removed (AWS removes deprecated versions past 100).
const maxVersions = 100

// Handler implements secretsmanagerv1connect.SecretsManagerServiceHandler.
type Handler struct {
	secretsmanagerv1connect.UnimplementedSecretsManagerServiceHandler
	// Logger receives the internal faults of its actions (errors that are not AWS
	// exceptions, which the client sees as ServerException); nil discards them.
	Logger *slog.Logger

	kv   clientv3.KV
	ring *seal.Keyring
	now  func() time.Time
}

// New returns the handler over kv, sealing values with ring. now is the clock (time.Now
// when nil).
func New(kv clientv3.KV, ring *seal.Keyring, now func() time.Time) *Handler {
	if now == nil {
		now = time.Now
	}
	return &Handler{kv: kv, ring: ring, now: now}
}

// ErrNoKeyring answers every action when the scheduler has no secrets key.
var ErrNoKeyring = awserr.New("InternalServiceError", "Secrets are disabled on this Berth: the scheduler has no secrets key (--secrets-key-file or BERTH_SECRETS_KEY; see docs/secrets.md).")

// Errors, in AWS's wording.
func notFound() *awserr.Error {
	return awserr.New("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
}

func invalidParam(format string, args ...any) *awserr.Error {
	return awserr.New("InvalidParameterException", format, args...)
}

func invalidRequest(format string, args ...any) *awserr.Error {
	return awserr.New("InvalidRequestException", format, args...)
}

func markedForDeletion() *awserr.Error {
	return invalidRequest("You can't perform this operation on the secret because it was marked for deletion.")
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9/_+=.@!-]{1,512}$`)

// handle runs a Secrets Manager action through awsapi.Handle; without the keyring every
// action answers ErrNoKeyring.
func handle[Req, Res any](ctx context.Context, h *Handler, req *connect.Request[Req], fn func(context.Context, keys.Scope, *Req) (*Res, error)) (*connect.Response[Res], error) {
	return awsapi.Handle(ctx, h.Logger, req, awsapi.Requires(h.ring != nil, ErrNoKeyring, fn))
}

const suffixChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// newARN returns a secret's ARN: its name, '-', and 6 random characters, as AWS forms it.
func newARN(s keys.Scope, name string) string {
	var b strings.Builder
	for range 6 {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(suffixChars))))
		b.WriteByte(suffixChars[n.Int64()])
	}
	return fmt.Sprintf("arn:%s:secretsmanager:%s:%s:secret:%s-%s", keys.Partition, s.Region, s.Account, name, b.String())
}

// ad is the additional data a version's value is sealed with: where it is stored.
func ad(s keys.Scope, name, versionID string) []byte {
	return []byte("secretsmanager/" + s.Account + "/" + s.Region + "/" + name + "/" + versionID)
}

// found is a secret read from etcd.
type found struct {
	rec *storev1.SecretRecord
	rev int64
}

// lookup finds the secret a SecretId names (name, full ARN, or partial ARN without the
// suffix), removing it first when its deletion date has passed. ResourceNotFoundException
// when there is none.
func (h *Handler) lookup(ctx context.Context, s keys.Scope, id string) (found, error) {
	if id == "" {
		return found{}, invalidParam("You must provide a SecretId.")
	}
	var candidates []string
	full := false
	if strings.HasPrefix(id, "arn:") {
		parts := strings.SplitN(id, ":", 7)
		if len(parts) != 7 || parts[2] != "secretsmanager" || parts[5] != "secret" {
			return found{}, invalidParam("The ARN %s is not a valid Secrets Manager secret ARN.", id)
		}
		if !s.Owns(parts[1], parts[4], parts[3]) {
			return found{}, notFound()
		}
		rest := parts[6]
		if i := len(rest) - 7; i > 0 && rest[i] == '-' {
			candidates = append(candidates, rest[:i])
			full = true
		}
		candidates = append(candidates, rest)
	} else {
		candidates = []string{id}
	}
	for i, name := range candidates {
		if !namePattern.MatchString(name) {
			continue
		}
		rec, rev, err := store.Get[*storev1.SecretRecord](ctx, h.kv, keys.Secret(s, name))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return found{}, err
		}
		if full && i == 0 && rec.GetArn() != id {
			continue
		}
		if rec.GetDeletedDate() != 0 && awsapi.Epoch(h.now()) >= rec.GetDeleteAfter() {
			if err := h.purge(ctx, s, rec, rev); err != nil {
				return found{}, err
			}
			return found{}, notFound()
		}
		return found{rec: rec, rev: rev}, nil
	}
	return found{}, notFound()
}

// purge deletes a secret and all its values in one txn.
func (h *Handler) purge(ctx context.Context, s keys.Scope, rec *storev1.SecretRecord, rev int64) error {
	t := store.NewTxn(h.kv).IfModRevision(keys.Secret(s, rec.GetName()), rev).Delete(keys.Secret(s, rec.GetName()))
	for _, v := range rec.GetVersions() {
		t.Delete(keys.SecretValue(s, rec.GetName(), v.GetVersionId()))
	}
	_, err := t.Commit(ctx)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		return nil // someone else changed or removed it first
	}
	return err
}

// value is a secret value from a request: exactly one of SecretString and SecretBinary.
type value struct {
	data   []byte
	binary bool
	set    bool
}

func valueOf(str *string, bin []byte) (value, error) {
	switch {
	case str != nil && bin != nil:
		return value{}, invalidParam("You can't specify both a binary secret value and a string secret value in the same secret.")
	case str != nil:
		if len(*str) > 65536 {
			return value{}, invalidParam("The secret value is larger than the maximum of 65536 bytes.")
		}
		return value{data: []byte(*str), set: true}, nil
	case bin != nil:
		if len(bin) > 65536 {
			return value{}, invalidParam("The secret value is larger than the maximum of 65536 bytes.")
		}
		return value{data: bin, binary: true, set: true}, nil
	}
	return value{}, nil
}

var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9-]{32,64}$`)

func versionID(token *string) (string, error) {
	if token == nil {
		return uuid.NewString(), nil
	}
	if !tokenPattern.MatchString(*token) {
		return "", invalidParam("ClientRequestToken must be 32 to 64 letters, digits or hyphens.")
	}
	return *token, nil
}

func tagsOf(in []*smv1.Tag) ([]*storev1.SecretTag, error) {
	out := make([]*storev1.SecretTag, 0, len(in))
	for _, t := range in {
		if t.GetKey() == "" {
			return nil, invalidParam("A tag key can't be empty.")
		}
		if strings.HasPrefix(strings.ToLower(t.GetKey()), "aws:") {
			return nil, invalidParam("A tag key can't start with the reserved prefix aws:.")
		}
		out = append(out, &storev1.SecretTag{Key: t.GetKey(), Value: t.GetValue()})
	}
	return out, nil
}

func mergeTags(have, add []*storev1.SecretTag) ([]*storev1.SecretTag, error) {
	for _, t := range add {
		i := slices.IndexFunc(have, func(h *storev1.SecretTag) bool { return h.GetKey() == t.GetKey() })
		if i >= 0 {
			have[i].Value = t.GetValue()
			continue
		}
		have = append(have, t)
	}
	if len(have) > 50 {
		return nil, invalidParam("A secret can have at most 50 tags.")
	}
	return have, nil
}

// CreateSecret creates a secret, with a first version (AWSCURRENT) when a value is given.
func (h *Handler) CreateSecret(ctx context.Context, req *connect.Request[smv1.CreateSecretRequest]) (*connect.Response[smv1.CreateSecretResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *smv1.CreateSecretRequest) (*smv1.CreateSecretResponse, error) {
		name := in.GetName()
		if !namePattern.MatchString(name) {
			return nil, invalidParam("Invalid name. Must be a valid name containing alphanumeric characters, or any of the following: -/_+=.@!")
		}
		if len(in.GetAddReplicaRegions()) > 0 || in.GetForceOverwriteReplicaSecret() {
			return nil, invalidParam("Berth does not replicate secrets across regions: AddReplicaRegions and ForceOverwriteReplicaSecret are not supported.")
		}
		if in.Type != nil {
			return nil, invalidParam("Berth does not support managed external secrets: Type is not supported.")
		}
		v, err := valueOf(in.SecretString, in.SecretBinary)
		if err != nil {
			return nil, err
		}
		vid, err := versionID(in.ClientRequestToken)
		if err != nil {
			return nil, err
		}
		tags, err := tagsOf(in.GetTags())
		if err != nil {
			return nil, err
		}
		if _, err := mergeTags(nil, tags); err != nil {
			return nil, err
		}
		// A secret whose deletion date has passed is removed by lookup first.
		if f, err := h.lookup(ctx, s, name); err == nil {
			if f.rec.GetDeletedDate() != 0 {
				return nil, invalidRequest("You can't create this secret because a secret with this name is already scheduled for deletion.")
			}
			return nil, awserr.New("ResourceExistsException", "The operation failed because the secret %s already exists.", name)
		} else if !errors.Is(err, &awserr.Error{Type: "ResourceNotFoundException"}) {
			return nil, err
		}
		now := awsapi.Epoch(h.now())
		rec := &storev1.SecretRecord{
			Name: name, Arn: newARN(s, name), Description: in.GetDescription(), KmsKeyId: in.GetKmsKeyId(),
			Tags: tags, CreatedDate: now, LastChangedDate: now,
		}
		t := store.NewTxn(h.kv)
		out := &smv1.CreateSecretResponse{Arn: proto.String(rec.Arn), Name: proto.String(name)}
		if v.set {
			rec.Versions = []*storev1.SecretVersionMeta{{VersionId: vid, Stages: []string{Current}, CreatedDate: now}}
			t.Create(keys.SecretValue(s, name, vid), &storev1.SecretValueRecord{Sealed: h.ring.Seal(v.data, ad(s, name, vid)), Binary: v.binary})
			out.VersionId = proto.String(vid)
		}
		t.Create(keys.Secret(s, name), rec)
		if _, err := t.Commit(ctx); err != nil {
			if errors.Is(err, store.ErrExists) {
				return nil, awserr.New("ResourceExistsException", "The operation failed because the secret %s already exists.", name)
			}
			return nil, err
		}
		out.ReplicationStatus = []*smv1.ReplicationStatusType{}
		return out, nil
	})
}

// GetSecretValue returns a version's value: VersionId, else VersionStage, else AWSCURRENT.
func (h *Handler) GetSecretValue(ctx context.Context, req *connect.Request[smv1.GetSecretValueRequest]) (*connect.Response[smv1.GetSecretValueResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *smv1.GetSecretValueRequest) (*smv1.GetSecretValueResponse, error) {
		sv, err := h.Get(ctx, s, in.GetSecretId(), in.GetVersionId(), in.GetVersionStage())
		if err != nil {
			return nil, err
		}
		out := &smv1.GetSecretValueResponse{
			Arn: proto.String(sv.ARN), Name: proto.String(sv.Name), VersionId: proto.String(sv.VersionID), VersionStages: sv.Stages,
			CreatedDate: proto.Float64(sv.CreatedDate),
		}
		if sv.Binary {
			out.SecretBinary = sv.Value
		} else {
			out.SecretString = proto.String(string(sv.Value))
		}
		return out, nil
	})
}

// SecretValue is one version of a secret with its value in plaintext.
type SecretValue struct {
	// ARN and Name are the secret's.
	ARN, Name string
	// VersionID and Stages are the version's.
	VersionID string
	Stages    []string
	// CreatedDate is the version's creation time (epoch seconds).
	CreatedDate float64
	// Value is the plaintext; Binary says whether it was a SecretBinary.
	Value  []byte
	Binary bool
}

// Get returns the value of the version of secret id (name or ARN) that versionID names,
// else the one labelled stage, else AWSCURRENT. Errors are AWS's (ResourceNotFound,
// InvalidRequest for a secret marked for deletion); none carries a value. It records the
// access date (day precision, as AWS) when it changes.
func (h *Handler) Get(ctx context.Context, s keys.Scope, id, versionID, stage string) (*SecretValue, error) {
	if h.ring == nil {
		return nil, ErrNoKeyring
	}
	f, err := h.lookup(ctx, s, id)
	if err != nil {
		return nil, err
	}
	if f.rec.GetDeletedDate() != 0 {
		return nil, markedForDeletion()
	}
	var meta *storev1.SecretVersionMeta
	for _, v := range f.rec.GetVersions() {
		switch {
		case versionID != "":
			if v.GetVersionId() == versionID && (stage == "" || slices.Contains(v.GetStages(), stage)) {
				meta = v
			}
		default:
			want := stage
			if want == "" {
				want = Current
			}
			if slices.Contains(v.GetStages(), want) {
				meta = v
			}
		}
	}
	if meta == nil {
		switch {
		case versionID != "" && stage != "":
			return nil, notFoundf("Secrets Manager can't find the specified secret value for VersionId: %s and staging label: %s", versionID, stage)
		case versionID != "":
			return nil, notFoundf("Secrets Manager can't find the specified secret value for VersionId: %s", versionID)
		case stage != "":
			return nil, notFoundf("Secrets Manager can't find the specified secret value for staging label: %s", stage)
		}
		return nil, notFoundf("Secrets Manager can't find the specified secret value for staging label: %s", Current)
	}
	val, _, err := store.Get[*storev1.SecretValueRecord](ctx, h.kv, keys.SecretValue(s, f.rec.GetName(), meta.GetVersionId()))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, notFoundf("Secrets Manager can't find the specified secret value for VersionId: %s", meta.GetVersionId())
		}
		return nil, err
	}
	plain, err := h.ring.Open(val.GetSealed(), ad(s, f.rec.GetName(), meta.GetVersionId()))
	if err != nil {
		return nil, awserr.New("DecryptionFailure", "Secrets Manager can't decrypt the protected secret text using the provided KMS key.")
	}
	h.touch(ctx, s, f, meta.GetVersionId())
	return &SecretValue{
		ARN: f.rec.GetArn(), Name: f.rec.GetName(), VersionID: meta.GetVersionId(),
		Stages: slices.Clone(meta.GetStages()), CreatedDate: meta.GetCreatedDate(), Value: plain, Binary: val.GetBinary(),
	}, nil
}

func notFoundf(format string, args ...any) *awserr.Error {
	return awserr.New("ResourceNotFoundException", format, args...)
}

// touch records LastAccessedDate (midnight UTC of today, as AWS rounds it) on the secret and
// the version when the day changed; a failure is ignored (it is bookkeeping).
func (h *Handler) touch(ctx context.Context, s keys.Scope, f found, versionID string) {
	day := awsapi.Epoch(h.now().UTC().Truncate(24 * time.Hour))
	if f.rec.GetLastAccessedDate() == day {
		return
	}
	_, _, _ = store.Mutate(ctx, h.kv, keys.Secret(s, f.rec.GetName()), func(r *storev1.SecretRecord) error {
		r.LastAccessedDate = day
		for _, v := range r.GetVersions() {
			if v.GetVersionId() == versionID {
				v.LastAccessedDate = day
			}
		}
		return nil
	})
}

// addVersion adds version vid with value v to rec in t: stages (default AWSCURRENT) move
// to it; when AWSCURRENT moves, the version losing it becomes AWSPREVIOUS. An existing
// vid with the same value is a no-op (idempotent retry) and with another value
// ResourceExistsException. It returns whether anything changed and the stages of vid.
func (h *Handler) addVersion(ctx context.Context, s keys.Scope, rec *storev1.SecretRecord, t *store.Txn, vid string, v value, stages []string) (bool, []string, error) {
	name := rec.GetName()
	for _, have := range rec.GetVersions() {
		if have.GetVersionId() != vid {
			continue
		}
		old, _, err := store.Get[*storev1.SecretValueRecord](ctx, h.kv, keys.SecretValue(s, name, vid))
		if err == nil {
			if plain, oerr := h.ring.Open(old.GetSealed(), ad(s, name, vid)); oerr == nil && bytes.Equal(plain, v.data) && old.GetBinary() == v.binary {
				return false, have.GetStages(), nil
			}
		}
		return false, nil, awserr.New("ResourceExistsException", "You can't modify an existing version, you can only create a new version.")
	}
	if len(stages) == 0 {
		stages = []string{Current}
	}
	if len(stages) > 20 {
		return false, nil, invalidParam("A version can have at most 20 staging labels.")
	}
	now := awsapi.Epoch(h.now())
	moveCurrent := slices.Contains(stages, Current)
	for _, have := range rec.GetVersions() {
		wasCurrent := slices.Contains(have.GetStages(), Current)
		have.Stages = slices.DeleteFunc(have.Stages, func(st string) bool {
			return slices.Contains(stages, st) || (moveCurrent && st == Previous)
		})
		if moveCurrent && wasCurrent {
			have.Stages = append(have.Stages, Previous)
		}
	}
	rec.Versions = append(rec.Versions, &storev1.SecretVersionMeta{VersionId: vid, Stages: slices.Clone(stages), CreatedDate: now})
	// Past maxVersions, drop the oldest versions without a label (deprecated ones).
	for len(rec.Versions) > maxVersions {
		i := slices.IndexFunc(rec.Versions, func(v *storev1.SecretVersionMeta) bool { return len(v.GetStages()) == 0 })
		if i < 0 {
			return false, nil, awserr.New("LimitExceededException", "The secret has %d versions with staging labels; remove labels from old versions first.", maxVersions)
		}
		t.Delete(keys.SecretValue(s, name, rec.Versions[i].GetVersionId()))
		rec.Versions = slices.Delete(rec.Versions, i, i+1)
	}
	t.Create(keys.SecretValue(s, name, vid), &storev1.SecretValueRecord{Sealed: h.ring.Seal(v.data, ad(s, name, vid)), Binary: v.binary})
	rec.LastChangedDate = now
	return true, stages, nil
}

// PutSecretValue adds a version with a new value.
func (h *Handler) PutSecretValue(ctx context.Context, req *connect.Request[smv1.PutSecretValueRequest]) (*connect.Response[smv1.PutSecretValueResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *smv1.PutSecretValueRequest) (*smv1.PutSecretValueResponse, error) {
		if in.RotationToken != nil {
			return nil, invalidParam("Berth does not rotate secrets: RotationToken is not supported.")
		}
		v, err := valueOf(in.SecretString, in.SecretBinary)
		if err != nil {
			return nil, err
		}
		if !v.set {
			return nil, invalidParam("You must provide either SecretString or SecretBinary.")
		}
		vid, err := versionID(in.ClientRequestToken)
		if err != nil {
			return nil, err
		}
		var out *smv1.PutSecretValueResponse
		err = h.update(ctx, s, in.GetSecretId(), func(rec *storev1.SecretRecord, t *store.Txn) (bool, error) {
			changed, stages, err := h.addVersion(ctx, s, rec, t, vid, v, in.GetVersionStages())
			out = &smv1.PutSecretValueResponse{Arn: proto.String(rec.GetArn()), Name: proto.String(rec.GetName()), VersionId: proto.String(vid), VersionStages: stages}
			return changed, err
		})
		return out, err
	})
}

// update applies fn to the secret id names (not one marked for deletion) and commits the
// record with fn's writes in one txn, retrying on conflict.
func (h *Handler) update(ctx context.Context, s keys.Scope, id string, fn func(*storev1.SecretRecord, *store.Txn) (bool, error)) error {
	for attempt := 1; ; attempt++ {
		f, err := h.lookup(ctx, s, id)
		if err != nil {
			return err
		}
		if f.rec.GetDeletedDate() != 0 {
			return markedForDeletion()
		}
		t := store.NewTxn(h.kv)
		changed, err := fn(f.rec, t)
		if err != nil || !changed {
			return err
		}
		t.Update(keys.Secret(s, f.rec.GetName()), f.rev, f.rec)
		_, err = t.Commit(ctx)
		if !errors.Is(err, store.ErrConflict) || attempt >= 10 {
			return err
		}
		if err := store.Sleep(ctx, store.Backoff(attempt)); err != nil {
			return err
		}
	}
}

// UpdateSecret changes the description or KMS key id and, with a value, adds a version.
func (h *Handler) UpdateSecret(ctx context.Context, req *connect.Request[smv1.UpdateSecretRequest]) (*connect.Response[smv1.UpdateSecretResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *smv1.UpdateSecretRequest) (*smv1.UpdateSecretResponse, error) {
		if in.Type != nil {
			return nil, invalidParam("Berth does not support managed external secrets: Type is not supported.")
		}
		v, err := valueOf(in.SecretString, in.SecretBinary)
		if err != nil {
			return nil, err
		}
		vid, err := versionID(in.ClientRequestToken)
		if err != nil {
			return nil, err
		}
		out := &smv1.UpdateSecretResponse{}
		err = h.update(ctx, s, in.GetSecretId(), func(rec *storev1.SecretRecord, t *store.Txn) (bool, error) {
			out.Arn, out.Name, out.VersionId = proto.String(rec.GetArn()), proto.String(rec.GetName()), nil
			changed := false
			if in.Description != nil && in.GetDescription() != rec.GetDescription() {
				rec.Description, changed = in.GetDescription(), true
			}
			if in.KmsKeyId != nil && in.GetKmsKeyId() != rec.GetKmsKeyId() {
				rec.KmsKeyId, changed = in.GetKmsKeyId(), true
			}
			if changed {
				rec.LastChangedDate = awsapi.Epoch(h.now())
			}
			if v.set {
				added, _, err := h.addVersion(ctx, s, rec, t, vid, v, nil)
				if err != nil {
					return false, err
				}
				out.VersionId = proto.String(vid)
				changed = changed || added
			}
			return changed, nil
		})
		return out, err
	})
}

func describe(rec *storev1.SecretRecord, entry bool) *smv1.DescribeSecretResponse {
	out := &smv1.DescribeSecretResponse{
		Arn: proto.String(rec.GetArn()), Name: proto.String(rec.GetName()), CreatedDate: proto.Float64(rec.GetCreatedDate()),
		LastChangedDate: proto.Float64(rec.GetLastChangedDate()), RotationEnabled: false,
		VersionIdsToStages: map[string]*smv1.SecretVersionStagesType{},
	}
	if rec.GetDescription() != "" {
		out.Description = proto.String(rec.GetDescription())
	}
	if rec.GetKmsKeyId() != "" {
		out.KmsKeyId = proto.String(rec.GetKmsKeyId())
	}
	if rec.GetLastAccessedDate() != 0 {
		out.LastAccessedDate = proto.Float64(rec.GetLastAccessedDate())
	}
	if rec.GetDeletedDate() != 0 {
		out.DeletedDate = proto.Float64(rec.GetDeletedDate())
	}
	if len(rec.GetTags()) > 0 || !entry {
		out.Tags = []*smv1.Tag{}
	}
	for _, t := range rec.GetTags() {
		out.Tags = append(out.Tags, &smv1.Tag{Key: proto.String(t.GetKey()), Value: proto.String(t.GetValue())})
	}
	for _, v := range rec.GetVersions() {
		if len(v.GetStages()) > 0 {
			out.VersionIdsToStages[v.GetVersionId()] = &smv1.SecretVersionStagesType{Values: slices.Clone(v.GetStages())}
		}
	}
	return out
}

// DescribeSecret returns a secret's metadata (no value).
func (h *Handler) DescribeSecret(ctx context.Context, req *connect.Request[smv1.DescribeSecretRequest]) (*connect.Response[smv1.DescribeSecretResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *smv1.DescribeSecretRequest) (*smv1.DescribeSecretResponse, error) {
		f, err := h.lookup(ctx, s, in.GetSecretId())
		if err != nil {
			return nil, err
		}
		return describe(f.rec, false), nil
	})
}

// all returns every secret of the scope, removing those whose deletion date passed.
func (h *Handler) all(ctx context.Context, s keys.Scope) ([]*storev1.SecretRecord, error) {
	var out []*storev1.SecretRecord
	token := ""
	for {
		items, next, err := store.List[*storev1.SecretRecord](ctx, h.kv, keys.Secrets(s), 500, token)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if it.Value.GetDeletedDate() != 0 && awsapi.Epoch(h.now()) >= it.Value.GetDeleteAfter() {
				if err := h.purge(ctx, s, it.Value, it.ModRevision); err != nil {
					return nil, err
				}
				continue
			}
			out = append(out, it.Value)
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
}

// matches applies one ListSecrets filter as AWS's Filter reference says: description is
// a prefix match, not case-sensitive; name, tag-key and tag-value are prefix matches,
// case-sensitive; all breaks the value into words and searches every attribute (name,
// description, tag keys and values) for them, not case-sensitive. A leading '!' negates
// a value; any value of the filter may match.
func matches(rec *storev1.SecretRecord, f *smv1.Filter) (bool, error) {
	var fields []string
	match := strings.HasPrefix
	switch f.GetKey() {
	case "name":
		fields = []string{rec.GetName()}
	case "description":
		fields = []string{rec.GetDescription()}
		match = func(s, v string) bool { return strings.HasPrefix(strings.ToLower(s), strings.ToLower(v)) }
	case "tag-key":
		for _, t := range rec.GetTags() {
			fields = append(fields, t.GetKey())
		}
	case "tag-value":
		for _, t := range rec.GetTags() {
			fields = append(fields, t.GetValue())
		}
	case "primary-region", "owning-service":
		return false, nil // Berth's secrets are not replicated or owned by a service
	case "all":
		attrs := []string{rec.GetName(), rec.GetDescription()}
		for _, t := range rec.GetTags() {
			attrs = append(attrs, t.GetKey(), t.GetValue())
		}
		for _, a := range attrs {
			fields = append(fields, searchWords(a)...)
		}
		// Some word of the value begins some word of an attribute.
		match = func(word, v string) bool {
			return slices.ContainsFunc(searchWords(v), func(w string) bool { return strings.HasPrefix(word, w) })
		}
	default:
		return false, invalidParam("Invalid filter key %s.", f.GetKey())
	}
	for _, v := range f.GetValues() {
		neg := strings.HasPrefix(v, "!")
		v = strings.TrimPrefix(v, "!")
		hit := slices.ContainsFunc(fields, func(s string) bool { return match(s, v) })
		if hit != neg {
			return true, nil
		}
	}
	return false, nil
}

// searchWords breaks s into the lower-cased words the all filter searches, as Secrets
// Manager's search does: letters and digits only (space, '/', '_', '=', '#', … separate
// words), and a new word at each change from a lower-case letter to an upper-case one
// and between letters and digits ("credsDatabase#892" is creds, database, 892).
func searchWords(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case len(cur) > 0 && (unicode.IsLower(prev) && unicode.IsUpper(r) || unicode.IsDigit(prev) != unicode.IsDigit(r)):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// ListSecrets lists the scope's secrets (without values), filtered, sorted and paged.
func (h *Handler) ListSecrets(ctx context.Context, req *connect.Request[smv1.ListSecretsRequest]) (*connect.Response[smv1.ListSecretsResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *smv1.ListSecretsRequest) (*smv1.ListSecretsResponse, error) {
		limit := 100
		if in.GetMaxResults() != 0 {
			if in.GetMaxResults() < 1 || in.GetMaxResults() > 100 {
				return nil, invalidParam("MaxResults must be between 1 and 100.")
			}
			limit = int(in.GetMaxResults())
		}
		offset := 0
		if in.NextToken != nil {
			raw, err := base64.RawURLEncoding.DecodeString(in.GetNextToken())
			n, cerr := strconv.Atoi(strings.TrimPrefix(string(raw), "o:"))
			if err != nil || cerr != nil || n < 0 || !strings.HasPrefix(string(raw), "o:") {
				return nil, awserr.New("InvalidNextTokenException", "The NextToken value is invalid.")
			}
			offset = n
		}
		recs, err := h.all(ctx, s)
		if err != nil {
			return nil, err
		}
		var list []*storev1.SecretRecord
	next:
		for _, r := range recs {
			if r.GetDeletedDate() != 0 && !in.GetIncludePlannedDeletion() {
				continue
			}
			for _, f := range in.GetFilters() {
				ok, err := matches(r, f)
				if err != nil {
					return nil, err
				}
				if !ok {
					continue next
				}
			}
			list = append(list, r)
		}
		key := func(r *storev1.SecretRecord) string { return fmt.Sprintf("%020.3f", r.GetCreatedDate()) }
		switch in.GetSortBy() {
		case "name":
			key = func(r *storev1.SecretRecord) string { return r.GetName() }
		case "last-changed-date":
			key = func(r *storev1.SecretRecord) string { return fmt.Sprintf("%020.3f", r.GetLastChangedDate()) }
		case "last-accessed-date":
			key = func(r *storev1.SecretRecord) string { return fmt.Sprintf("%020.3f", r.GetLastAccessedDate()) }
		}
		sort.SliceStable(list, func(i, j int) bool {
			if in.GetSortOrder() == "asc" {
				return key(list[i]) < key(list[j])
			}
			return key(list[i]) > key(list[j])
		})
		out := &smv1.ListSecretsResponse{SecretList: []*smv1.SecretListEntry{}}
		for i := offset; i < len(list) && i < offset+limit; i++ {
			d := describe(list[i], true)
			out.SecretList = append(out.SecretList, &smv1.SecretListEntry{
				Arn: d.Arn, Name: d.Name, Description: d.Description, KmsKeyId: d.KmsKeyId, CreatedDate: d.CreatedDate,
				LastChangedDate: d.LastChangedDate, LastAccessedDate: d.LastAccessedDate, DeletedDate: d.DeletedDate,
				Tags: d.Tags, SecretVersionsToStages: d.VersionIdsToStages, RotationEnabled: d.RotationEnabled,
			})
		}
		if offset+limit < len(list) {
			out.NextToken = proto.String(base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(offset+limit))))
		}
		return out, nil
	})
}

// ListSecretVersionIds lists a secret's versions (with staging labels, or all with
// IncludeDeprecated), newest first, MaxResults (1-100) a page; as on AWS a NextToken
// comes back while more versions are available. The token names the last version
// returned (its creation date and id): the next page starts after it, or, when it was
// removed meanwhile (past maxVersions), with the versions created before it.
func (h *Handler) ListSecretVersionIds(ctx context.Context, req *connect.Request[smv1.ListSecretVersionIdsRequest]) (*connect.Response[smv1.ListSecretVersionIdsResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *smv1.ListSecretVersionIdsRequest) (*smv1.ListSecretVersionIdsResponse, error) {
		limit := maxVersions
		if in.GetMaxResults() != 0 {
			if in.GetMaxResults() < 1 || in.GetMaxResults() > 100 {
				return nil, invalidParam("MaxResults must be between 1 and 100.")
			}
			limit = int(in.GetMaxResults())
		}
		var after *versionToken
		if in.NextToken != nil {
			t, ok := parseVersionToken(in.GetNextToken())
			if !ok {
				return nil, awserr.New("InvalidNextTokenException", "The NextToken value is invalid.")
			}
			after = &t
		}
		f, err := h.lookup(ctx, s, in.GetSecretId())
		if err != nil {
			return nil, err
		}
		versions := f.rec.GetVersions() // oldest first
		end := len(versions)            // the page starts at end-1 and goes backward
		if after != nil {
			i := slices.IndexFunc(versions, func(v *storev1.SecretVersionMeta) bool { return v.GetVersionId() == after.id })
			if i < 0 {
				i = slices.IndexFunc(versions, func(v *storev1.SecretVersionMeta) bool { return v.GetCreatedDate() >= after.created })
				if i < 0 {
					i = len(versions)
				}
			}
			end = i
		}
		out := &smv1.ListSecretVersionIdsResponse{Arn: proto.String(f.rec.GetArn()), Name: proto.String(f.rec.GetName()), Versions: []*smv1.SecretVersionsListEntry{}}
		for i := end - 1; i >= 0; i-- {
			v := versions[i]
			if len(v.GetStages()) == 0 && !in.GetIncludeDeprecated() {
				continue
			}
			if len(out.Versions) == limit {
				// More is available: the token names the last version returned.
				last := out.Versions[len(out.Versions)-1]
				out.NextToken = proto.String(versionToken{created: last.GetCreatedDate(), id: last.GetVersionId()}.String())
				break
			}
			e := &smv1.SecretVersionsListEntry{VersionId: proto.String(v.GetVersionId()), VersionStages: slices.Clone(v.GetStages()), CreatedDate: proto.Float64(v.GetCreatedDate())}
			if v.GetLastAccessedDate() != 0 {
				e.LastAccessedDate = proto.Float64(v.GetLastAccessedDate())
			}
			out.Versions = append(out.Versions, e)
		}
		return out, nil
	})
}

// versionToken is ListSecretVersionIds' NextToken: the last version a page returned.
type versionToken struct {
	created float64
	id      string
}

func (t versionToken) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte("v:" + strconv.FormatFloat(t.created, 'f', -1, 64) + ":" + t.id))
}

func parseVersionToken(s string) (versionToken, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return versionToken{}, false
	}
	rest, ok := strings.CutPrefix(string(raw), "v:")
	created, id, ok2 := strings.Cut(rest, ":")
	c, cerr := strconv.ParseFloat(created, 64)
	if !ok || !ok2 || cerr != nil || id == "" {
		return versionToken{}, false
	}
	return versionToken{created: c, id: id}, true
}

// DeleteSecret schedules the deletion after RecoveryWindowInDays (7-30, default 30), or
// deletes at once with ForceDeleteWithoutRecovery.
func (h *Handler) DeleteSecret(ctx context.Context, req *connect.Request[smv1.DeleteSecretRequest]) (*connect.Response[smv1.DeleteSecretResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *smv1.DeleteSecretRequest) (*smv1.DeleteSecretResponse, error) {
		if in.GetRecoveryWindowInDays() != 0 && in.GetForceDeleteWithoutRecovery() {
			return nil, invalidParam("You can't use ForceDeleteWithoutRecovery in conjunction with RecoveryWindowInDays.")
		}
		days := int64(30)
		if in.GetRecoveryWindowInDays() != 0 {
			days = in.GetRecoveryWindowInDays()
			if days < 7 || days > 30 {
				return nil, invalidParam("The RecoveryWindowInDays value must be between 7 and 30 days (inclusive).")
			}
		}
		f, err := h.lookup(ctx, s, in.GetSecretId())
		if err != nil {
			return nil, err
		}
		now := h.now()
		if in.GetForceDeleteWithoutRecovery() {
			if err := h.purge(ctx, s, f.rec, f.rev); err != nil {
				return nil, err
			}
			return &smv1.DeleteSecretResponse{Arn: proto.String(f.rec.GetArn()), Name: proto.String(f.rec.GetName()), DeletionDate: proto.Float64(awsapi.Epoch(now))}, nil
		}
		if f.rec.GetDeletedDate() != 0 {
			return nil, markedForDeletion()
		}
		f.rec.DeletedDate = awsapi.Epoch(now)
		f.rec.DeleteAfter = awsapi.Epoch(now.Add(time.Duration(days) * 24 * time.Hour))
		if _, err := store.Update(ctx, h.kv, keys.Secret(s, f.rec.GetName()), f.rev, f.rec); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return nil, invalidRequest("The secret was changed while it was being deleted; try again.")
			}
			return nil, err
		}
		return &smv1.DeleteSecretResponse{Arn: proto.String(f.rec.GetArn()), Name: proto.String(f.rec.GetName()), DeletionDate: proto.Float64(f.rec.GetDeleteAfter())}, nil
	})
}

// RestoreSecret cancels a scheduled deletion.
func (h *Handler) RestoreSecret(ctx context.Context, req *connect.Request[smv1.RestoreSecretRequest]) (*connect.Response[smv1.RestoreSecretResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *smv1.RestoreSecretRequest) (*smv1.RestoreSecretResponse, error) {
		var out *smv1.RestoreSecretResponse
		_, _, err := h.mutateAny(ctx, s, in.GetSecretId(), func(r *storev1.SecretRecord) error {
			out = &smv1.RestoreSecretResponse{Arn: proto.String(r.GetArn()), Name: proto.String(r.GetName())}
			r.DeletedDate, r.DeleteAfter = 0, 0
			return nil
		})
		return out, err
	})
}

// mutateAny is store.Mutate of the secret id names, whether or not it is marked for
// deletion.
func (h *Handler) mutateAny(ctx context.Context, s keys.Scope, id string, fn func(*storev1.SecretRecord) error) (*storev1.SecretRecord, int64, error) {
	f, err := h.lookup(ctx, s, id)
	if err != nil {
		return nil, 0, err
	}
	r, rev, err := store.Mutate(ctx, h.kv, keys.Secret(s, f.rec.GetName()), fn)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, notFound()
	}
	return r, rev, err
}

// TagResource adds or overwrites tags.
func (h *Handler) TagResource(ctx context.Context, req *connect.Request[smv1.TagResourceRequest]) (*connect.Response[smv1.TagResourceResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *smv1.TagResourceRequest) (*smv1.TagResourceResponse, error) {
		tags, err := tagsOf(in.GetTags())
		if err != nil {
			return nil, err
		}
		_, _, err = h.mutateAny(ctx, s, in.GetSecretId(), func(r *storev1.SecretRecord) error {
			merged, err := mergeTags(r.Tags, tags)
			r.Tags = merged
			return err
		})
		return &smv1.TagResourceResponse{}, err
	})
}

// UntagResource removes tags by key.
func (h *Handler) UntagResource(ctx context.Context, req *connect.Request[smv1.UntagResourceRequest]) (*connect.Response[smv1.UntagResourceResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *smv1.UntagResourceRequest) (*smv1.UntagResourceResponse, error) {
		_, _, err := h.mutateAny(ctx, s, in.GetSecretId(), func(r *storev1.SecretRecord) error {
			r.Tags = slices.DeleteFunc(r.Tags, func(t *storev1.SecretTag) bool { return slices.Contains(in.GetTagKeys(), t.GetKey()) })
			return nil
		})
		return &smv1.UntagResourceResponse{}, err
	})
}
