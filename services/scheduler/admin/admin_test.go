package admin_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"
	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	"github.com/berthhq/berth/services/scheduler/admin"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// newClient serves the admin service over HTTP, as the gateway and `berth admin` reach it.
func newClient(t *testing.T, opts admin.Options) (adminv1connect.AdminServiceClient, *bytes.Buffer, *admin.Service) {
	t.Helper()
	kv := etcdtest.Start(t)
	var logs bytes.Buffer
	svc := admin.New(kv, slog.New(slog.NewTextHandler(&logs, nil)), opts)
	mux := http.NewServeMux()
	mux.Handle(adminv1connect.NewAdminServiceHandler(svc))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return adminv1connect.NewAdminServiceClient(srv.Client(), srv.URL), &logs, svc
}

func code(err error) connect.Code { return connect.CodeOf(err) }

func TestAccountsAndKeys(t *testing.T) {
	ctx := context.Background()
	c, logs, _ := newClient(t, admin.Options{})

	acct, err := c.CreateAccount(ctx, connect.NewRequest(&adminv1.CreateAccountRequest{Id: "000000000000", Name: "dev"}))
	if err != nil {
		t.Fatal(err)
	}
	if acct.Msg.GetAccount().GetCreatedAt() == nil {
		t.Error("account without created_at")
	}
	if _, err := c.CreateAccount(ctx, connect.NewRequest(&adminv1.CreateAccountRequest{Id: "000000000000"})); code(err) != connect.CodeAlreadyExists {
		t.Errorf("duplicate account: %v", err)
	}
	if _, err := c.CreateAccount(ctx, connect.NewRequest(&adminv1.CreateAccountRequest{Id: "12ab"})); code(err) != connect.CodeInvalidArgument {
		t.Errorf("bad id: %v", err)
	}
	gen, err := c.CreateAccount(ctx, connect.NewRequest(&adminv1.CreateAccountRequest{Name: "generated"}))
	if err != nil || !regexp.MustCompile(`^[1-9][0-9]{11}$`).MatchString(gen.Msg.GetAccount().GetId()) {
		t.Fatalf("generated account: %v %v", gen, err)
	}
	list, err := c.ListAccounts(ctx, connect.NewRequest(&adminv1.ListAccountsRequest{}))
	if err != nil || len(list.Msg.GetAccounts()) != 2 || list.Msg.GetAccounts()[0].GetId() != "000000000000" {
		t.Fatalf("ListAccounts: %v %v", list, err)
	}

	// Keys: seeded, generated, instance-scoped; the account must exist.
	if _, err := c.CreateAccessKey(ctx, connect.NewRequest(&adminv1.CreateAccessKeyRequest{AccountId: "999999999999"})); code(err) != connect.CodeNotFound {
		t.Errorf("key for missing account: %v", err)
	}
	seeded, err := c.CreateAccessKey(ctx, connect.NewRequest(&adminv1.CreateAccessKeyRequest{AccountId: "000000000000", AccessKeyId: "test", SecretAccessKey: "test"}))
	if err != nil || seeded.Msg.GetSecretAccessKey() != "test" {
		t.Fatalf("seeded key: %v %v", seeded, err)
	}
	if _, err := c.CreateAccessKey(ctx, connect.NewRequest(&adminv1.CreateAccessKeyRequest{AccountId: "000000000000", AccessKeyId: "test"})); code(err) != connect.CodeAlreadyExists {
		t.Errorf("duplicate key: %v", err)
	}
	generated, err := c.CreateAccessKey(ctx, connect.NewRequest(&adminv1.CreateAccessKeyRequest{AccountId: "000000000000", Description: "ci"}))
	if err != nil {
		t.Fatal(err)
	}
	if id := generated.Msg.GetAccessKey().GetAccessKeyId(); !regexp.MustCompile(`^AKIA[A-Z2-7]{16}$`).MatchString(id) || len(generated.Msg.GetSecretAccessKey()) != 40 {
		t.Errorf("generated key %q secret length %d", id, len(generated.Msg.GetSecretAccessKey()))
	}
	inst := "arn:aws:ecs:us-east-1:000000000000:container-instance/default/abc"
	if _, err := c.CreateAccessKey(ctx, connect.NewRequest(&adminv1.CreateAccessKeyRequest{AccountId: "000000000000", ContainerInstanceArn: "arn:aws:ecs:us-east-1:111111111111:container-instance/default/abc"})); code(err) != connect.CodeInvalidArgument {
		t.Errorf("other account's instance: %v", err)
	}
	agent, err := c.CreateAccessKey(ctx, connect.NewRequest(&adminv1.CreateAccessKeyRequest{AccountId: "000000000000", ContainerInstanceArn: inst}))
	if err != nil {
		t.Fatal(err)
	}

	res, err := c.ResolveAccessKey(ctx, connect.NewRequest(&adminv1.ResolveAccessKeyRequest{AccessKeyId: agent.Msg.GetAccessKey().GetAccessKeyId()}))
	if err != nil || res.Msg.GetSecretAccessKey() != agent.Msg.GetSecretAccessKey() || res.Msg.GetAccessKey().GetContainerInstanceArn() != inst || res.Msg.GetAccessKey().GetAccountId() != "000000000000" {
		t.Fatalf("resolve: %v %v", res, err)
	}
	for _, id := range []string{"nobody", "", "bad/id"} {
		if _, err := c.ResolveAccessKey(ctx, connect.NewRequest(&adminv1.ResolveAccessKeyRequest{AccessKeyId: id})); code(err) != connect.CodeNotFound {
			t.Errorf("resolve %q: %v", id, err)
		}
	}
	keysList, err := c.ListAccessKeys(ctx, connect.NewRequest(&adminv1.ListAccessKeysRequest{AccountId: "000000000000"}))
	if err != nil || len(keysList.Msg.GetAccessKeys()) != 3 {
		t.Fatalf("ListAccessKeys: %v %v", keysList, err)
	}

	if _, err := c.DeleteAccessKey(ctx, connect.NewRequest(&adminv1.DeleteAccessKeyRequest{AccessKeyId: "test"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteAccessKey(ctx, connect.NewRequest(&adminv1.DeleteAccessKeyRequest{AccessKeyId: "test"})); code(err) != connect.CodeNotFound {
		t.Errorf("second delete: %v", err)
	}
	// Deleting the account deletes its keys.
	if _, err := c.DeleteAccount(ctx, connect.NewRequest(&adminv1.DeleteAccountRequest{Id: "000000000000"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResolveAccessKey(ctx, connect.NewRequest(&adminv1.ResolveAccessKeyRequest{AccessKeyId: agent.Msg.GetAccessKey().GetAccessKeyId()})); code(err) != connect.CodeNotFound {
		t.Errorf("key of deleted account resolves: %v", err)
	}
	if _, err := c.DeleteAccount(ctx, connect.NewRequest(&adminv1.DeleteAccountRequest{Id: "000000000000"})); code(err) != connect.CodeNotFound {
		t.Errorf("second account delete: %v", err)
	}

	// Secrets are never logged.
	for _, secret := range []string{generated.Msg.GetSecretAccessKey(), agent.Msg.GetSecretAccessKey()} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("a secret appears in the logs")
		}
	}
}

func TestResetState(t *testing.T) {
	ctx := context.Background()
	kv := etcdtest.Start(t)
	put := func(k string) {
		if _, err := kv.Put(ctx, k, "x"); err != nil {
			t.Fatal(err)
		}
	}
	ecsKeys := []string{
		keys.Cluster(keys.Scope{Account: "000000000000", Region: testRegion}, "default"),
		keys.Task(keys.Scope{Account: "000000000000", Region: testRegion}, "default", "t1"),
		keys.Task(keys.Scope{Account: "111111111111", Region: testRegion}, "other", "t2"),
		keys.InstanceByHost(keys.Scope{Account: "000000000000", Region: testRegion}, "default", "h1"),
		keys.Inbox(keys.Scope{Account: "000000000000", Region: testRegion}, "i1", "t1"),
		keys.TaskDefinition(keys.Scope{Account: "000000000000", Region: testRegion}, "web", 1),
		keys.Family(keys.Scope{Account: "000000000000", Region: testRegion}, "web"),
		keys.Instance(keys.Scope{Account: "000000000000", Region: testRegion}, "default", "i1"),
		keys.Service(keys.Scope{Account: "000000000000", Region: testRegion}, "default", "s"),
	}
	kept := []string{keys.Account("000000000000"), keys.AccessKey("test"), store.Prefix + "election/leader/1"}
	for _, k := range append(append([]string{}, ecsKeys...), kept...) {
		put(k)
	}

	refused := admin.New(kv, nil, admin.Options{})
	if _, err := refused.ResetState(ctx, connect.NewRequest(&adminv1.ResetStateRequest{})); code(err) != connect.CodePermissionDenied {
		t.Fatalf("reset without AllowReset: %v", err)
	}
	svc := admin.New(kv, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)), admin.Options{AllowReset: true})
	if _, err := svc.ResetState(ctx, connect.NewRequest(&adminv1.ResetStateRequest{})); err != nil {
		t.Fatal(err)
	}
	for _, k := range ecsKeys {
		if r, _ := kv.Get(ctx, k); len(r.Kvs) != 0 {
			t.Errorf("%s survived the reset", k)
		}
	}
	for _, k := range kept {
		if r, _ := kv.Get(ctx, k); len(r.Kvs) != 1 {
			t.Errorf("%s was deleted by the reset", k)
		}
	}
}

// testRegion is the region the tests call in.
const testRegion = "us-east-1"
