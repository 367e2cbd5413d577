package admin_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"testing"

	"connectrpc.com/connect"
	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/admin"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func testKeyring(t *testing.T) *seal.Keyring {
	t.Helper()
	k := make([]byte, seal.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	ring, err := seal.New(seal.Key{ID: "k1", Secret: k})
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// etcdHolds reports whether any key's value, at any revision etcd still keeps, contains
// needle.
func etcdHolds(t *testing.T, kv clientv3.KV, needle string) bool {
	t.Helper()
	res, err := kv.Get(context.Background(), keys.AccessKeys(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range res.Kvs {
		if bytes.Contains(it.Value, []byte(needle)) {
			return true
		}
	}
	return false
}

// TestAccessKeySecretsSealed: with a keyring, CreateAccessKey stores the secret sealed
// (not in the record's bytes), ResolveAccessKey returns it opened; a key written in the
// clear by an earlier build still resolves and SealAccessKeys seals it in place; a
// sealed secret copied into another key's record does not open; a scheduler without the
// keyring answers Internal for a sealed key instead of an empty secret.
func TestAccessKeySecretsSealed(t *testing.T) {
	ctx := context.Background()
	kv := etcdtest.Start(t)
	ring := testKeyring(t)
	var logs bytes.Buffer
	svc := admin.New(kv, slog.New(slog.NewTextHandler(&logs, nil)), admin.Options{Keyring: ring})
	if _, err := svc.CreateAccount(ctx, connect.NewRequest(&adminv1.CreateAccountRequest{Id: "111111111111"})); err != nil {
		t.Fatal(err)
	}
	const secret = "sealed-secret-0123456789abcdefghijklmnop"
	if _, err := svc.CreateAccessKey(ctx, connect.NewRequest(&adminv1.CreateAccessKeyRequest{
		AccountId: "111111111111", AccessKeyId: "AKIASEALED", SecretAccessKey: secret})); err != nil {
		t.Fatal(err)
	}
	if etcdHolds(t, kv, secret) {
		t.Fatal("the access key's secret is in etcd in the clear")
	}
	rec, _, err := store.Get[*storev1.AccessKeyRecord](ctx, kv, keys.AccessKey("AKIASEALED"))
	if err != nil || rec.GetSecretAccessKey() != "" || seal.KeyID(rec.GetSealedSecretAccessKey()) != "k1" {
		t.Fatalf("stored record: %v %v", rec, err)
	}
	res, err := svc.ResolveAccessKey(ctx, connect.NewRequest(&adminv1.ResolveAccessKeyRequest{AccessKeyId: "AKIASEALED"}))
	if err != nil || res.Msg.GetSecretAccessKey() != secret || res.Msg.GetAccessKey().GetAccountId() != "111111111111" {
		t.Fatalf("ResolveAccessKey: %v %v", res, err)
	}

	// A record from a build before sealing: clear secret, still resolves, then sealed.
	const old = "clear-secret-from-an-earlier-build-0000"
	if _, err := store.Create(ctx, kv, keys.AccessKey("AKIAOLD"), &storev1.AccessKeyRecord{
		AccessKeyId: "AKIAOLD", AccountId: "111111111111", SecretAccessKey: old}); err != nil {
		t.Fatal(err)
	}
	if res, err := svc.ResolveAccessKey(ctx, connect.NewRequest(&adminv1.ResolveAccessKeyRequest{AccessKeyId: "AKIAOLD"})); err != nil || res.Msg.GetSecretAccessKey() != old {
		t.Fatalf("clear record: %v %v", res, err)
	}
	n, err := admin.SealAccessKeys(ctx, kv, ring)
	if err != nil || n != 1 {
		t.Fatalf("SealAccessKeys = %d, %v; want 1 key sealed", n, err)
	}
	if n, err := admin.SealAccessKeys(ctx, kv, ring); err != nil || n != 0 {
		t.Fatalf("second SealAccessKeys = %d, %v; want 0", n, err)
	}
	if etcdHolds(t, kv, old) {
		t.Fatal("the migrated secret is still in the clear")
	}
	if res, err := svc.ResolveAccessKey(ctx, connect.NewRequest(&adminv1.ResolveAccessKeyRequest{AccessKeyId: "AKIAOLD"})); err != nil || res.Msg.GetSecretAccessKey() != old {
		t.Fatalf("migrated record: %v %v", res, err)
	}

	// A sealed secret moved to another key's record does not open there.
	moved, _, _ := store.Get[*storev1.AccessKeyRecord](ctx, kv, keys.AccessKey("AKIASEALED"))
	moved.AccessKeyId = "AKIAMOVED"
	if _, err := store.Create(ctx, kv, keys.AccessKey("AKIAMOVED"), moved); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ResolveAccessKey(ctx, connect.NewRequest(&adminv1.ResolveAccessKeyRequest{AccessKeyId: "AKIAMOVED"})); connect.CodeOf(err) != connect.CodeInternal {
		t.Errorf("moved sealed secret: %v; want Internal", err)
	}
	if bytes.Contains(logs.Bytes(), []byte(secret)) || bytes.Contains(logs.Bytes(), []byte(old)) {
		t.Error("the log holds a secret")
	}

	// Without the keyring a sealed key is an error, never an empty secret.
	bare := admin.New(kv, slog.New(slog.DiscardHandler), admin.Options{})
	if _, err := bare.ResolveAccessKey(ctx, connect.NewRequest(&adminv1.ResolveAccessKeyRequest{AccessKeyId: "AKIASEALED"})); connect.CodeOf(err) != connect.CodeInternal {
		t.Errorf("sealed key without keyring: %v; want Internal", err)
	}
}
