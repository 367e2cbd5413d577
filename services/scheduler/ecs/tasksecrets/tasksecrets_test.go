package tasksecrets_test

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	smv1 "github.com/berthhq/berth/gen/berth/secretsmanager/v1"
	ssmv1 "github.com/berthhq/berth/gen/berth/ssm/v1"
	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/ecs/tasksecrets"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/secretsmanager"
	"github.com/berthhq/berth/services/scheduler/ssm"
)

func TestResolve(t *testing.T) {
	kv := etcdtest.Start(t)
	key := make([]byte, seal.KeySize)
	_, _ = rand.Read(key)
	ring, err := seal.New(seal.Key{ID: "t", Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	sm, params := secretsmanager.New(kv, ring, nil), ssm.New(kv, ring, nil)
	scope := keys.Scope{Account: "111111111111", Region: "us-east-1"}
	ctx := caller.With(t.Context(), caller.Identity{Account: scope.Account, Region: scope.Region})
	str := func(s string) *string { return &s }
	db, err := sm.CreateSecret(ctx, connect.NewRequest(&smv1.CreateSecretRequest{Name: str("db"), SecretString: str(`{"password":"pw","port":5432}`)}))
	if err != nil {
		t.Fatal(err)
	}
	dbARN := db.Msg.GetArn()
	if _, err := sm.PutSecretValue(ctx, connect.NewRequest(&smv1.PutSecretValueRequest{SecretId: str("db"), SecretString: str(`{"password":"pw2"}`)})); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateSecret(ctx, connect.NewRequest(&smv1.CreateSecretRequest{Name: str("reg"), SecretString: str(`{"username":"u","password":"p"}`)})); err != nil {
		t.Fatal(err)
	}
	if _, err := params.PutParameter(ctx, connect.NewRequest(&ssmv1.PutParameterRequest{Name: str("/p"), Value: str("param"), Type: str("SecureString")})); err != nil {
		t.Fatal(err)
	}
	r := tasksecrets.Resolver{Secrets: sm, Parameters: params}

	td := &ecsv1.TaskDefinition{ContainerDefinitions: []*ecsv1.ContainerDefinition{{
		Name: str("app"),
		Secrets: []*ecsv1.Secret{
			{Name: str("CUR"), ValueFrom: str(dbARN + ":password::")},
			{Name: str("PREV"), ValueFrom: str(dbARN + ":password:AWSPREVIOUS:")},
			{Name: str("PORT"), ValueFrom: str(dbARN + ":port:AWSPREVIOUS:")},
			{Name: str("P"), ValueFrom: str("/p")},
			{Name: str("BYNAME"), ValueFrom: str("reg")}, // no parameter "reg": the secret of that name
		},
		RepositoryCredentials: &ecsv1.RepositoryCredentials{CredentialsParameter: str("reg")},
		LogConfiguration:      &ecsv1.LogConfiguration{SecretOptions: []*ecsv1.Secret{{Name: str("token"), ValueFrom: str("arn:aws:ssm:us-east-1:111111111111:parameter/p")}}},
	}}}
	if !tasksecrets.Needs(td) {
		t.Fatal("Needs = false")
	}
	vals, err := r.Resolve(t.Context(), scope, td)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range vals {
		got[v.GetKind()+":"+v.GetName()] = v.GetValue()
	}
	want := map[string]string{
		"env:CUR": "pw2", "env:PREV": "pw", "env:PORT": "5432", "env:P": "param", "env:BYNAME": `{"username":"u","password":"p"}`,
		"registry:username": "u", "registry:password": "p", "log:token": "param",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}

	for ref, wantIn := range map[string]string{
		"arn:aws:secretsmanager:us-east-1:111111111111:secret:nope-AbCdEf": "ResourceNotFoundException",
		dbARN + ":missing::":    "did not contain json key missing",
		"/nope":                 "unable to retrieve secrets from ssm: invalid parameters: /nope",
		dbARN + "::AWSPENDING:": "staging label: AWSPENDING",
		"arn:aws:secretsmanager:eu-west-1:111111111111:secret:db-AbCdEf": "ResourceNotFoundException",
	} {
		_, err := r.Resolve(t.Context(), scope, &ecsv1.TaskDefinition{ContainerDefinitions: []*ecsv1.ContainerDefinition{{
			Name: str("app"), Secrets: []*ecsv1.Secret{{Name: str("X"), ValueFrom: str(ref)}},
		}}})
		var f *tasksecrets.Failure
		if !errors.As(err, &f) || !strings.HasPrefix(f.Reason, tasksecrets.ReasonPrefix) || !strings.Contains(f.Reason, wantIn) {
			t.Errorf("%s: %v, want a Failure containing %q", ref, err, wantIn)
		}
		if err != nil && (strings.Contains(err.Error(), "pw2") || strings.Contains(err.Error(), `"pw"`)) {
			t.Errorf("%s: the reason carries a value: %v", ref, err)
		}
	}
}

// A container whose image is in the ECR registry gets a token of the task's account for
// user AWS, unless it names repositoryCredentials (which win); other images get none.
func TestResolveECRImage(t *testing.T) {
	kv := etcdtest.Start(t)
	key := make([]byte, seal.KeySize)
	ring, err := seal.New(seal.Key{ID: "t", Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	st := ecr.NewStore(kv, ring, "127.0.0.1:5001", nil)
	r := tasksecrets.Resolver{Secrets: secretsmanager.New(kv, ring, nil), ECR: st}
	scope := keys.Scope{Account: "111111111111", Region: "eu-west-1"}
	str := func(s string) *string { return &s }
	td := &ecsv1.TaskDefinition{ContainerDefinitions: []*ecsv1.ContainerDefinition{
		{Name: str("ecr"), Image: str("127.0.0.1:5001/team/web:v1")},
		{Name: str("other"), Image: str("127.0.0.1:5000/berth/demo:latest")},
		{Name: str("hub"), Image: str("busybox")},
	}}
	if !r.Needs(td) || tasksecrets.Needs(td) {
		t.Fatalf("Resolver.Needs = %v, Needs = %v: want true, false", r.Needs(td), tasksecrets.Needs(td))
	}
	vals, err := r.Resolve(t.Context(), scope, td)
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != 2 || vals[0].GetContainerName() != "ecr" || vals[0].GetKind() != tasksecrets.KindRegistry ||
		vals[0].GetName() != "username" || vals[0].GetValue() != "AWS" || vals[1].GetName() != "password" {
		t.Fatalf("resolved %v", vals)
	}
	if got, err := st.VerifyToken(vals[1].GetValue()); err != nil || got != scope {
		t.Fatalf("token verifies to %v, %v; want %v", got, err, scope)
	}
	// Without the ECR image, nothing to resolve.
	plain := &ecsv1.TaskDefinition{ContainerDefinitions: td.ContainerDefinitions[1:]}
	if r.Needs(plain) {
		t.Fatal("Needs of a task without ECR images")
	}
}
