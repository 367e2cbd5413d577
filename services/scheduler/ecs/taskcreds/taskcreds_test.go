package taskcreds_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/taskcreds"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

const (
	acct    = "123456789012"
	region  = "eu-west-1"
	role    = "arn:aws:iam::123456789012:role/path/app-role"
	taskARN = "arn:aws:ecs:eu-west-1:123456789012:task/prod/0123456789abcdef0123456789abcdef"
	defARN  = "arn:aws:ecs:eu-west-1:123456789012:task-definition/web:3"
	ciARN   = "arn:aws:ecs:eu-west-1:123456789012:container-instance/prod/ci1"
)

func keyring(t *testing.T) *seal.Keyring {
	secret := make([]byte, seal.KeySize)
	_, _ = rand.Read(secret)
	k, err := seal.New(seal.Key{ID: "t", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// put stores a record at key.
func put(t *testing.T, kv interface {
	Put(context.Context, string, string) error
}, key string, m proto.Message) {
	t.Helper()
	b, _ := proto.Marshal(m)
	if err := kv.Put(context.Background(), key, string(b)); err != nil {
		t.Fatal(err)
	}
}

type putter struct {
	f func(ctx context.Context, k, v string) error
}

func (p putter) Put(ctx context.Context, k, v string) error { return p.f(ctx, k, v) }

func TestIssueResolveRevoke(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Start(t)
	p := putter{func(ctx context.Context, k, v string) error { _, err := cli.Put(ctx, k, v); return err }}
	scope := keys.Scope{Account: acct, Region: region}
	task := &storev1.TaskRecord{ClusterName: "prod", ContainerInstanceId: "ci1", Task: &ecsv1.Task{
		TaskArn: proto.String(taskARN), TaskDefinitionArn: proto.String(defARN), LastStatus: proto.String("RUNNING")}}
	put(t, p, keys.Task(scope, "prod", "0123456789abcdef0123456789abcdef"), task)
	put(t, p, keys.TaskDefinition(scope, "web", 3), &storev1.TaskDefinitionRecord{TaskDefinition: &ecsv1.TaskDefinition{TaskRoleArn: proto.String(role)}})

	now := time.Now()
	iss := taskcreds.New(taskcreds.Config{KV: cli, Lease: cli, Keyring: keyring(t), Lifetime: time.Hour, Now: func() time.Time { return now }})
	id := caller.Identity{Account: acct, Region: region, ContainerInstanceARN: ciARN}

	c, err := iss.Issue(ctx, id, taskARN, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.GetAccessKeyId(), "ASIA") || len(c.GetAccessKeyId()) != 20 || c.GetRoleArn() != role ||
		!c.GetExpiration().AsTime().Equal(now.Add(time.Hour).Truncate(time.Nanosecond)) || len(c.GetSecretAccessKey()) < 40 || len(c.GetSessionToken()) < 100 {
		t.Fatalf("issued %s %s exp %v", c.GetAccessKeyId(), c.GetRoleArn(), c.GetExpiration().AsTime())
	}
	// Neither the secret nor the token is in etcd in plaintext.
	all, err := cli.Get(ctx, store.Prefix, clientWithPrefix()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range all.Kvs {
		if strings.Contains(string(kv.Value), c.GetSecretAccessKey()) || strings.Contains(string(kv.Value), c.GetSessionToken()) {
			t.Fatalf("%s holds a credential in plaintext", kv.Key)
		}
	}

	res, err := iss.Resolve(ctx, c.GetAccessKeyId())
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(c.GetSessionToken()))
	if res.GetSecretAccessKey() != c.GetSecretAccessKey() || string(res.GetSessionTokenSha256()) != string(sum[:]) ||
		res.GetAccessKey().GetAccountId() != acct ||
		res.GetPrincipalArn() != "arn:aws:sts::"+acct+":assumed-role/app-role/0123456789abcdef0123456789abcdef" ||
		!strings.HasPrefix(res.GetPrincipalId(), "AROA") || !strings.HasSuffix(res.GetPrincipalId(), ":0123456789abcdef0123456789abcdef") {
		t.Fatalf("resolved %+v", res)
	}

	// Another account's caller, another instance's agent, or a task without a role of the
	// type asked get nothing.
	for name, tc := range map[string]struct {
		id       caller.Identity
		roleType string
		want     connect.Code
	}{
		"other account":  {caller.Identity{Account: "999999999999", Region: region}, "", connect.CodeNotFound},
		"other region":   {caller.Identity{Account: acct, Region: "us-east-1"}, "", connect.CodeNotFound},
		"other instance": {caller.Identity{Account: acct, Region: region, ContainerInstanceARN: ciARN + "x"}, "", connect.CodeNotFound},
		"no exec role":   {id, taskcreds.RoleTypeExecution, connect.CodeFailedPrecondition},
		"bad role type":  {id, "Admin", connect.CodeInvalidArgument},
	} {
		if _, err := iss.Issue(ctx, tc.id, taskARN, tc.roleType); connect.CodeOf(err) != tc.want {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}

	// Expired: refused.
	later := taskcreds.New(taskcreds.Config{KV: cli, Lease: cli, Keyring: keyring(t), Now: func() time.Time { return now.Add(2 * time.Hour) }})
	if _, err := later.Resolve(ctx, c.GetAccessKeyId()); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("expired credentials resolved: %v", err)
	}

	// The task stops: refused, and the record is gone; no new credentials either.
	task.Task.LastStatus = proto.String("STOPPED")
	put(t, p, keys.Task(scope, "prod", "0123456789abcdef0123456789abcdef"), task)
	if _, err := iss.Resolve(ctx, c.GetAccessKeyId()); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("a stopped task's credentials resolved: %v", err)
	}
	if g, _ := cli.Get(ctx, taskcreds.Key(c.GetAccessKeyId())); len(g.Kvs) != 0 {
		t.Error("the revoked record is still in etcd")
	}
	if _, err := iss.Issue(ctx, id, taskARN, ""); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("issue for a stopped task: %v", err)
	}
}

func TestOverrideRoleAndNoKeyring(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Start(t)
	p := putter{func(ctx context.Context, k, v string) error { _, err := cli.Put(ctx, k, v); return err }}
	scope := keys.Scope{Account: acct, Region: region}
	put(t, p, keys.Task(scope, "prod", "0123456789abcdef0123456789abcdef"), &storev1.TaskRecord{ClusterName: "prod", Task: &ecsv1.Task{
		TaskArn: proto.String(taskARN), TaskDefinitionArn: proto.String(defARN), LastStatus: proto.String("PENDING"),
		Overrides: &ecsv1.TaskOverride{TaskRoleArn: proto.String("arn:aws:iam::123456789012:role/other")}}})
	id := caller.Identity{Account: acct, Region: region}
	c, err := taskcreds.New(taskcreds.Config{KV: cli, Lease: cli, Keyring: keyring(t)}).Issue(ctx, id, taskARN, taskcreds.RoleTypeTask)
	if err != nil || c.GetRoleArn() != "arn:aws:iam::123456789012:role/other" {
		t.Fatalf("override role: %v %v", c.GetRoleArn(), err)
	}
	if _, err := taskcreds.New(taskcreds.Config{KV: cli, Lease: cli}).Issue(ctx, id, taskARN, ""); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("without a keyring: %v", err)
	}
}

func clientWithPrefix() []clientv3.OpOption { return []clientv3.OpOption{clientv3.WithPrefix()} }
