package admin

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"regexp"
	"sort"
	"strings"
	"time"

	"connectrpc.com/connect"
	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Options configure the service.
type Options struct {
	// AllowReset enables ResetState (only inside `berth dev`); when false it answers
	// PermissionDenied.
	AllowReset bool
	// ResetPrefixes are the key prefixes ResetState deletes; keys.ECSStatePrefixes() when
	// empty. Each must be a store key prefix (ending in '/').
	ResetPrefixes []string
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Sessions resolves session credentials (access key ids starting "ASIA", a task role's:
	// package taskcreds); nil means there are none.
	Sessions SessionResolver
	// Keyring seals access keys' secrets before they are written to etcd (the cluster's
	// secrets keyring, as Secrets Manager values are sealed); ResolveAccessKey opens them.
	// Nil stores new secrets in the clear (a scheduler started without a keyring) and
	// logs a warning once per key created.
	Keyring *seal.Keyring
}

// SessionResolver resolves session credentials for ResolveAccessKey; it answers NotFound
// for a key that does not exist, has expired or was revoked.
type SessionResolver interface {
	Resolve(ctx context.Context, accessKeyID string) (*adminv1.ResolveAccessKeyResponse, error)
}

// Service implements adminv1connect.AdminServiceHandler.
type Service struct {
	kv   clientv3.KV
	log  *slog.Logger
	opts Options
}

var _ adminv1connect.AdminServiceHandler = (*Service)(nil)

// New returns the service over kv. logger receives one line per change (never a secret);
// slog.Default() when nil.
func New(kv clientv3.KV, logger *slog.Logger, opts Options) *Service {
	if logger == nil {
		logger = slog.Default()
	}
	if len(opts.ResetPrefixes) == 0 {
		opts.ResetPrefixes = keys.ECSStatePrefixes()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{kv: kv, log: logger, opts: opts}
}

var (
	accountPattern   = regexp.MustCompile(`^[0-9]{12}$`)
	keyIDPattern     = regexp.MustCompile(`^[A-Za-z0-9_+=,.@-]{1,128}$`)
	secretPattern    = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)
	instanceARNShape = regexp.MustCompile(`^arn:aws:ecs:[a-z0-9-]+:([0-9]{12}):container-instance/.+$`)
)

func invalid(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

// storeError maps store errors to Connect codes at the RPC boundary.
func storeError(err error, what string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("%s not found", what))
	case errors.Is(err, store.ErrExists):
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s already exists", what))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeCanceled, err)
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: store unavailable", what))
}

// CreateAccount creates an account; the id is generated when empty. It answers
// InvalidArgument for an id that is not 12 digits and AlreadyExists when it is taken.
func (s *Service) CreateAccount(ctx context.Context, req *connect.Request[adminv1.CreateAccountRequest]) (*connect.Response[adminv1.CreateAccountResponse], error) {
	id := req.Msg.GetId()
	generated := id == ""
	if generated {
		id = randomDigits(12)
	}
	if !accountPattern.MatchString(id) {
		return nil, invalid("account id must be 12 digits")
	}
	rec := &storev1.AccountRecord{Id: id, Name: req.Msg.GetName(), CreatedAt: timestamppb.New(s.opts.Now())}
	if _, err := store.Create(ctx, s.kv, keys.Account(id), rec); err != nil {
		return nil, storeError(err, "account "+id)
	}
	s.log.Info("account created", "account", id, "name", rec.GetName())
	return connect.NewResponse(&adminv1.CreateAccountResponse{Account: account(rec)}), nil
}

func account(rec *storev1.AccountRecord) *adminv1.Account {
	return &adminv1.Account{Id: rec.GetId(), Name: rec.GetName(), CreatedAt: rec.GetCreatedAt()}
}

func accessKey(rec *storev1.AccessKeyRecord) *adminv1.AccessKey {
	return &adminv1.AccessKey{
		AccessKeyId:          rec.GetAccessKeyId(),
		AccountId:            rec.GetAccountId(),
		ContainerInstanceArn: rec.GetContainerInstanceArn(),
		Description:          rec.GetDescription(),
		CreatedAt:            rec.GetCreatedAt(),
	}
}

// listAll reads every record under prefix (store.ListAll), values only.
func listAll[T interface {
	*storev1.AccountRecord | *storev1.AccessKeyRecord
	proto.Message
}](ctx context.Context, kv clientv3.KV, prefix string) ([]T, error) {
	items, err := store.ListAll[T](ctx, kv, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out, nil
}

// ListAccounts lists every account, ordered by id.
func (s *Service) ListAccounts(ctx context.Context, _ *connect.Request[adminv1.ListAccountsRequest]) (*connect.Response[adminv1.ListAccountsResponse], error) {
	recs, err := listAll[*storev1.AccountRecord](ctx, s.kv, keys.Accounts())
	if err != nil {
		return nil, storeError(err, "accounts")
	}
	res := &adminv1.ListAccountsResponse{}
	for _, r := range recs {
		res.Accounts = append(res.Accounts, account(r))
	}
	return connect.NewResponse(res), nil
}

// DeleteAccount deletes an account and every access key of it, in one transaction. Its
// ECS resources are left to ResetState or to deletion through the ECS API. NotFound when
// the account does not exist.
func (s *Service) DeleteAccount(ctx context.Context, req *connect.Request[adminv1.DeleteAccountRequest]) (*connect.Response[adminv1.DeleteAccountResponse], error) {
	id := req.Msg.GetId()
	if !accountPattern.MatchString(id) {
		return nil, invalid("account id must be 12 digits")
	}
	_, rev, err := store.Get[*storev1.AccountRecord](ctx, s.kv, keys.Account(id))
	if err != nil {
		return nil, storeError(err, "account "+id)
	}
	recs, err := listAll[*storev1.AccessKeyRecord](ctx, s.kv, keys.AccessKeys())
	if err != nil {
		return nil, storeError(err, "access keys")
	}
	txn := store.NewTxn(s.kv).IfModRevision(keys.Account(id), rev).Delete(keys.Account(id))
	n := 0
	for _, r := range recs {
		if r.GetAccountId() == id {
			txn.Delete(keys.AccessKey(r.GetAccessKeyId()))
			n++
		}
	}
	if _, err := txn.Commit(ctx); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, connect.NewError(connect.CodeAborted, errors.New("account changed during delete; retry"))
		}
		return nil, storeError(err, "account "+id)
	}
	s.log.Info("account deleted", "account", id, "access_keys_deleted", n)
	return connect.NewResponse(&adminv1.DeleteAccountResponse{}), nil
}

// CreateAccessKey issues a key for an existing account, generating the id ("AKIA" and 16
// characters) and the 40-character secret unless given. It answers NotFound when the
// account does not exist, AlreadyExists when the id is taken, and InvalidArgument for a
// malformed id, secret or container instance ARN (which must belong to the account).
func (s *Service) CreateAccessKey(ctx context.Context, req *connect.Request[adminv1.CreateAccessKeyRequest]) (*connect.Response[adminv1.CreateAccessKeyResponse], error) {
	m := req.Msg
	acct := m.GetAccountId()
	if !accountPattern.MatchString(acct) {
		return nil, invalid("account id must be 12 digits")
	}
	id, secret := m.GetAccessKeyId(), m.GetSecretAccessKey()
	if id == "" {
		id = "AKIA" + randomString(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
	}
	if secret == "" {
		secret = randomString(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
	}
	if !keyIDPattern.MatchString(id) {
		return nil, invalid("access key id must be 1-128 characters of [A-Za-z0-9_+=,.@-]")
	}
	if !secretPattern.MatchString(secret) {
		return nil, invalid("secret access key must be 1-128 printable ASCII characters without spaces")
	}
	if arn := m.GetContainerInstanceArn(); arn != "" {
		sub := instanceARNShape.FindStringSubmatch(arn)
		if sub == nil || sub[1] != acct {
			return nil, invalid("container instance ARN must be a container instance of account %s", acct)
		}
	}
	rec := &storev1.AccessKeyRecord{
		AccessKeyId:          id,
		AccountId:            acct,
		ContainerInstanceArn: m.GetContainerInstanceArn(),
		Description:          m.GetDescription(),
		CreatedAt:            timestamppb.New(s.opts.Now()),
	}
	if s.opts.Keyring != nil {
		rec.SealedSecretAccessKey = s.opts.Keyring.Seal([]byte(secret), accessKeyAD(id))
	} else {
		rec.SecretAccessKey = secret
		s.log.Warn("access key secret stored in the clear: the scheduler has no secrets keyring (--secrets-key-file or BERTH_SECRETS_KEY)", "access_key_id", id)
	}
	// The account must exist when the key is written.
	guard := clientv3.Compare(clientv3.CreateRevision(keys.Account(acct)), ">", 0)
	if _, err := store.Create(ctx, s.kv, keys.AccessKey(id), rec, store.If(guard)); err != nil {
		if errors.Is(err, store.ErrPreconditionFailed) {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("account %s not found", acct))
		}
		return nil, storeError(err, "access key "+id)
	}
	s.log.Info("access key created", "account", acct, "access_key_id", id, "container_instance", rec.GetContainerInstanceArn())
	return connect.NewResponse(&adminv1.CreateAccessKeyResponse{AccessKey: accessKey(rec), SecretAccessKey: secret}), nil
}

// ListAccessKeys lists an account's keys, ordered by id, without secrets.
func (s *Service) ListAccessKeys(ctx context.Context, req *connect.Request[adminv1.ListAccessKeysRequest]) (*connect.Response[adminv1.ListAccessKeysResponse], error) {
	acct := req.Msg.GetAccountId()
	if !accountPattern.MatchString(acct) {
		return nil, invalid("account id must be 12 digits")
	}
	recs, err := listAll[*storev1.AccessKeyRecord](ctx, s.kv, keys.AccessKeys())
	if err != nil {
		return nil, storeError(err, "access keys")
	}
	res := &adminv1.ListAccessKeysResponse{}
	for _, r := range recs {
		if r.GetAccountId() == acct {
			res.AccessKeys = append(res.AccessKeys, accessKey(r))
		}
	}
	sort.Slice(res.AccessKeys, func(i, j int) bool { return res.AccessKeys[i].AccessKeyId < res.AccessKeys[j].AccessKeyId })
	return connect.NewResponse(res), nil
}

// DeleteAccessKey deletes a key; NotFound when there is none.
func (s *Service) DeleteAccessKey(ctx context.Context, req *connect.Request[adminv1.DeleteAccessKeyRequest]) (*connect.Response[adminv1.DeleteAccessKeyResponse], error) {
	id := req.Msg.GetAccessKeyId()
	if !keyIDPattern.MatchString(id) {
		return nil, invalid("malformed access key id")
	}
	if _, err := store.Delete(ctx, s.kv, keys.AccessKey(id), 0); err != nil {
		return nil, storeError(err, "access key "+id)
	}
	s.log.Info("access key deleted", "access_key_id", id)
	return connect.NewResponse(&adminv1.DeleteAccessKeyResponse{}), nil
}

// ResolveAccessKey returns a key with its secret for SigV4 verification; NotFound when
// there is none (also for a malformed id, so the gateway answers UnrecognizedClient).
func (s *Service) ResolveAccessKey(ctx context.Context, req *connect.Request[adminv1.ResolveAccessKeyRequest]) (*connect.Response[adminv1.ResolveAccessKeyResponse], error) {
	id := req.Msg.GetAccessKeyId()
	if !keyIDPattern.MatchString(id) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("access key not found"))
	}
	if strings.HasPrefix(id, "ASIA") && s.opts.Sessions != nil {
		res, err := s.opts.Sessions.Resolve(ctx, id)
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(res), nil
	}
	rec, _, err := store.Get[*storev1.AccessKeyRecord](ctx, s.kv, keys.AccessKey(id))
	if err != nil {
		return nil, storeError(err, "access key")
	}
	secret, err := s.secretOf(rec)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&adminv1.ResolveAccessKeyResponse{AccessKey: accessKey(rec), SecretAccessKey: secret}), nil
}

// accessKeyAD is the additional data an access key's secret is sealed with: a sealed
// secret copied into another key's record does not open.
func accessKeyAD(accessKeyID string) []byte { return []byte("access-key/" + accessKeyID) }

// secretOf returns rec's secret: opened when sealed, else the clear field of records
// written before sealing (or without a keyring). A sealed secret and no keyring, or one
// that does not open, is an Internal error naming the key (never the secret).
func (s *Service) secretOf(rec *storev1.AccessKeyRecord) (string, error) {
	sealed := rec.GetSealedSecretAccessKey()
	if len(sealed) == 0 {
		return rec.GetSecretAccessKey(), nil
	}
	if s.opts.Keyring == nil {
		s.log.Error("access key secret is sealed but the scheduler has no secrets keyring", "access_key_id", rec.GetAccessKeyId())
		return "", connect.NewError(connect.CodeInternal, errors.New("access key secret is sealed and this scheduler has no secrets keyring"))
	}
	plain, err := s.opts.Keyring.Open(sealed, accessKeyAD(rec.GetAccessKeyId()))
	if err != nil {
		s.log.Error("access key secret does not open with the keyring", "access_key_id", rec.GetAccessKeyId(), "key_id", seal.KeyID(sealed))
		return "", connect.NewError(connect.CodeInternal, fmt.Errorf("access key secret does not open with the keyring (sealed with key %q)", seal.KeyID(sealed)))
	}
	return string(plain), nil
}

// SealAccessKeys seals the secret of every access key stored in the clear (by builds
// before sealing, or by a scheduler without a keyring) with keyring, each record by a CAS
// write of its own, and returns how many it sealed. Run it at start, before serving; it
// is idempotent and safe beside other replicas (a record changed meanwhile is read again).
// The clear values stay in etcd's history until etcd compacts it (and its snapshots and
// WAL files roll over); docs/secrets.md says how to hasten that.
func SealAccessKeys(ctx context.Context, kv clientv3.KV, keyring *seal.Keyring) (int, error) {
	if keyring == nil {
		return 0, nil
	}
	items, err := store.ListAll[*storev1.AccessKeyRecord](ctx, kv, keys.AccessKeys())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, it := range items {
		if it.Value.GetSecretAccessKey() == "" {
			continue
		}
		sealed := false
		_, _, err := store.Mutate(ctx, kv, it.Key, func(rec *storev1.AccessKeyRecord) error {
			sealed = false
			if rec.GetSecretAccessKey() == "" {
				return store.ErrNoChange
			}
			sealed = true
			rec.SealedSecretAccessKey = keyring.Seal([]byte(rec.GetSecretAccessKey()), accessKeyAD(rec.GetAccessKeyId()))
			rec.SecretAccessKey = ""
			return nil
		})
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return n, fmt.Errorf("seal access key %s: %w", it.Value.GetAccessKeyId(), err)
		case sealed:
			n++
		}
	}
	return n, nil
}

// ResetState deletes every key under the reset prefixes (every account's ECS state) in
// one transaction, keeping accounts and access keys. PermissionDenied unless AllowReset.
func (s *Service) ResetState(ctx context.Context, _ *connect.Request[adminv1.ResetStateRequest]) (*connect.Response[adminv1.ResetStateResponse], error) {
	if !s.opts.AllowReset {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("ResetState is only available in berth dev"))
	}
	ops := make([]clientv3.Op, 0, len(s.opts.ResetPrefixes))
	for _, p := range s.opts.ResetPrefixes {
		if !strings.HasPrefix(p, store.Prefix) || !strings.HasSuffix(p, "/") || p == store.Prefix {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("reset prefix %q is not a key prefix below %s", p, store.Prefix))
		}
		ops = append(ops, clientv3.OpDelete(p, clientv3.WithPrefix()))
	}
	resp, err := s.kv.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, storeError(err, "reset")
	}
	var deleted int64
	for _, r := range resp.Responses {
		deleted += r.GetResponseDeleteRange().GetDeleted()
	}
	s.log.Info("ECS state reset", "keys_deleted", deleted, "revision", resp.Header.Revision)
	return connect.NewResponse(&adminv1.ResetStateResponse{}), nil
}

func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	max := big.NewInt(int64(len(alphabet)))
	for i := range b {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(err) // crypto/rand does not fail on supported platforms
		}
		b[i] = alphabet[v.Int64()]
	}
	return string(b)
}

func randomDigits(n int) string {
	s := randomString(n, "0123456789")
	if s[0] == '0' {
		s = "1" + s[1:]
	}
	return s
}
