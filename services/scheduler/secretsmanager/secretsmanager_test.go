package secretsmanager_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	smv1 "github.com/berthhq/berth/gen/berth/secretsmanager/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/secretsmanager"
)

const account = "111122223333"

var (
	scope = keys.Scope{Account: account, Region: "us-east-1"}
	start = time.Date(2025, 3, 4, 15, 6, 7, 890_000_000, time.UTC)
)

func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

type env struct {
	h   *secretsmanager.Handler
	ctx context.Context
	now *time.Time // the handler's clock; tests move it
}

func newRing(t *testing.T) *seal.Keyring {
	t.Helper()
	key := make([]byte, seal.KeySize)
	_, _ = rand.Read(key)
	ring, err := seal.New(seal.Key{ID: "t", Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// newEnv returns a handler over a fresh embedded etcd with a clock the test controls, and
// a context carrying the caller identity of scope's account.
func newEnv(t *testing.T) env {
	t.Helper()
	now := start
	h := secretsmanager.New(etcdtest.Start(t), newRing(t), func() time.Time { return now })
	return env{h: h, ctx: caller.With(t.Context(), caller.Identity{Account: scope.Account, Region: scope.Region}), now: &now}
}

func str(s string) *string { return &s }

func tag(k, v string) *smv1.Tag { return &smv1.Tag{Key: str(k), Value: str(v)} }

// wantErr fails unless err carries the AWS error typ whose message contains msg.
func wantErr(t *testing.T, err error, typ, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", typ)
	}
	e, ok := awserr.FromConnect(err)
	if !ok {
		t.Fatalf("error %v carries no AWS exception, want %s", err, typ)
	}
	if e.Type != typ || !strings.Contains(e.Message, msg) {
		t.Fatalf("error = %s: %q, want %s containing %q", e.Type, e.Message, typ, msg)
	}
}

func (e env) create(t *testing.T, req *smv1.CreateSecretRequest) *smv1.CreateSecretResponse {
	t.Helper()
	res, err := e.h.CreateSecret(e.ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("CreateSecret %s: %v", req.GetName(), err)
	}
	return res.Msg
}

func (e env) put(t *testing.T, req *smv1.PutSecretValueRequest) *smv1.PutSecretValueResponse {
	t.Helper()
	res, err := e.h.PutSecretValue(e.ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("PutSecretValue %s: %v", req.GetSecretId(), err)
	}
	return res.Msg
}

func (e env) value(t *testing.T, req *smv1.GetSecretValueRequest) *smv1.GetSecretValueResponse {
	t.Helper()
	res, err := e.h.GetSecretValue(e.ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("GetSecretValue %s: %v", req.GetSecretId(), err)
	}
	return res.Msg
}

func (e env) describe(t *testing.T, id string) *smv1.DescribeSecretResponse {
	t.Helper()
	res, err := e.h.DescribeSecret(e.ctx, connect.NewRequest(&smv1.DescribeSecretRequest{SecretId: str(id)}))
	if err != nil {
		t.Fatalf("DescribeSecret %s: %v", id, err)
	}
	return res.Msg
}

// stages returns a secret's versions with their staging labels, as DescribeSecret answers.
func (e env) stages(t *testing.T, id string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for v, s := range e.describe(t, id).GetVersionIdsToStages() {
		out[v] = slices.Sorted(slices.Values(s.GetValues()))
	}
	return out
}

func token(c byte) string { return strings.Repeat(string(c), 32) }

func TestCreateSecretValidation(t *testing.T) {
	e := newEnv(t)
	e.create(t, &smv1.CreateSecretRequest{Name: str("exists"), SecretString: str("v")})
	many := make([]*smv1.Tag, 51)
	for i := range many {
		many[i] = tag(fmt.Sprint("k", i), "v")
	}
	for _, tc := range []struct {
		name         string
		req          *smv1.CreateSecretRequest
		errType, msg string
	}{
		{"empty name", &smv1.CreateSecretRequest{Name: str("")}, "InvalidParameterException", "Invalid name. Must be a valid name containing alphanumeric characters, or any of the following: -/_+=.@!"},
		{"space", &smv1.CreateSecretRequest{Name: str("my secret")}, "InvalidParameterException", "Invalid name."},
		{"hash", &smv1.CreateSecretRequest{Name: str("a#b")}, "InvalidParameterException", "Invalid name."},
		{"colon", &smv1.CreateSecretRequest{Name: str("a:b")}, "InvalidParameterException", "Invalid name."},
		{"513 characters", &smv1.CreateSecretRequest{Name: str(strings.Repeat("n", 513))}, "InvalidParameterException", "Invalid name."},
		{"both values", &smv1.CreateSecretRequest{Name: str("p"), SecretString: str("s"), SecretBinary: []byte("b")}, "InvalidParameterException", "You can't specify both a binary secret value and a string secret value in the same secret."},
		{"string too large", &smv1.CreateSecretRequest{Name: str("p"), SecretString: str(strings.Repeat("x", 65537))}, "InvalidParameterException", "maximum of 65536 bytes"},
		{"binary too large", &smv1.CreateSecretRequest{Name: str("p"), SecretBinary: bytes.Repeat([]byte{1}, 65537)}, "InvalidParameterException", "maximum of 65536 bytes"},
		{"short token", &smv1.CreateSecretRequest{Name: str("p"), SecretString: str("s"), ClientRequestToken: str(strings.Repeat("a", 31))}, "InvalidParameterException", "ClientRequestToken must be 32 to 64"},
		{"long token", &smv1.CreateSecretRequest{Name: str("p"), SecretString: str("s"), ClientRequestToken: str(strings.Repeat("a", 65))}, "InvalidParameterException", "ClientRequestToken"},
		{"token characters", &smv1.CreateSecretRequest{Name: str("p"), SecretString: str("s"), ClientRequestToken: str(strings.Repeat("a", 31) + "_")}, "InvalidParameterException", "ClientRequestToken"},
		{"reserved tag", &smv1.CreateSecretRequest{Name: str("p"), Tags: []*smv1.Tag{tag("aws:owner", "x")}}, "InvalidParameterException", "reserved prefix aws:"},
		{"empty tag key", &smv1.CreateSecretRequest{Name: str("p"), Tags: []*smv1.Tag{tag("", "x")}}, "InvalidParameterException", "tag key can't be empty"},
		{"51 tags", &smv1.CreateSecretRequest{Name: str("p"), Tags: many}, "InvalidParameterException", "at most 50 tags"},
		{"replica regions", &smv1.CreateSecretRequest{Name: str("p"), AddReplicaRegions: []*smv1.ReplicaRegionType{{Region: str("eu-west-1")}}}, "InvalidParameterException", "AddReplicaRegions"},
		{"force overwrite replica", &smv1.CreateSecretRequest{Name: str("p"), ForceOverwriteReplicaSecret: true}, "InvalidParameterException", "ForceOverwriteReplicaSecret"},
		{"managed type", &smv1.CreateSecretRequest{Name: str("p"), Type: str("aws:external")}, "InvalidParameterException", "Type is not supported"},
		{"exists", &smv1.CreateSecretRequest{Name: str("exists"), SecretString: str("v2")}, "ResourceExistsException", "The operation failed because the secret exists already exists."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.CreateSecret(e.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, tc.errType, tc.msg)
		})
	}
	// None of them created "p".
	_, err := e.h.DescribeSecret(e.ctx, connect.NewRequest(&smv1.DescribeSecretRequest{SecretId: str("p")}))
	wantErr(t, err, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")

	// The edges that are allowed.
	for _, name := range []string{"a", "path/to_x+=.@-!", strings.Repeat("n", 512)} {
		e.create(t, &smv1.CreateSecretRequest{Name: str(name), SecretString: str(strings.Repeat("x", 65536)),
			ClientRequestToken: str(strings.Repeat("A-9", 21) + "z")})
	}
}

var arnRE = regexp.MustCompile(`^arn:aws:secretsmanager:us-east-1:` + account + `:secret:db-[A-Za-z0-9]{6}$`)

func TestCreateAndGet(t *testing.T) {
	e := newEnv(t)
	c := e.create(t, &smv1.CreateSecretRequest{Name: str("db"), SecretString: str(`{"password":"pw"}`), ClientRequestToken: str(token('a')),
		Description: str("the db"), KmsKeyId: str("alias/mine"), Tags: []*smv1.Tag{tag("env", "dev")}})
	if !arnRE.MatchString(c.GetArn()) || c.GetName() != "db" || c.GetVersionId() != token('a') {
		t.Fatalf("CreateSecret = %s %s %s", c.GetArn(), c.GetName(), c.GetVersionId())
	}

	v := e.value(t, &smv1.GetSecretValueRequest{SecretId: str("db")})
	if v.GetSecretString() != `{"password":"pw"}` || v.SecretBinary != nil || v.GetArn() != c.GetArn() || v.GetName() != "db" ||
		v.GetVersionId() != token('a') || !slices.Equal(v.GetVersionStages(), []string{"AWSCURRENT"}) || v.GetCreatedDate() != epoch(start) {
		t.Fatalf("GetSecretValue = %v", v)
	}

	d := e.describe(t, c.GetArn())
	if d.GetDescription() != "the db" || d.GetKmsKeyId() != "alias/mine" || d.GetCreatedDate() != epoch(start) || d.GetLastChangedDate() != epoch(start) ||
		d.RotationEnabled || d.DeletedDate != nil || len(d.GetTags()) != 1 || d.GetTags()[0].GetKey() != "env" {
		t.Fatalf("DescribeSecret = %v", d)
	}
	// Reading recorded the access, to the day (midnight UTC), as AWS does.
	if want := epoch(time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC)); d.GetLastAccessedDate() != want {
		t.Errorf("LastAccessedDate = %v, want %v", d.GetLastAccessedDate(), want)
	}
	res, err := e.h.ListSecretVersionIds(e.ctx, connect.NewRequest(&smv1.ListSecretVersionIdsRequest{SecretId: str("db")}))
	if err != nil {
		t.Fatal(err)
	}
	if vs := res.Msg.GetVersions(); len(vs) != 1 || vs[0].GetLastAccessedDate() != d.GetLastAccessedDate() {
		t.Errorf("version's LastAccessedDate = %v", vs)
	}

	// A binary secret.
	bin := []byte{0, 1, 2, 255}
	e.create(t, &smv1.CreateSecretRequest{Name: str("bin"), SecretBinary: bin})
	if v := e.value(t, &smv1.GetSecretValueRequest{SecretId: str("bin")}); !bytes.Equal(v.GetSecretBinary(), bin) || v.SecretString != nil {
		t.Fatalf("binary secret = %v %v", v.GetSecretBinary(), v.SecretString)
	}

	// A secret without a value has no version and nothing to read.
	empty := e.create(t, &smv1.CreateSecretRequest{Name: str("empty")})
	if empty.VersionId != nil {
		t.Errorf("CreateSecret without a value returned VersionId %s", empty.GetVersionId())
	}
	if got := e.stages(t, "empty"); len(got) != 0 {
		t.Errorf("VersionIdsToStages = %v, want none", got)
	}
	_, err = e.h.GetSecretValue(e.ctx, connect.NewRequest(&smv1.GetSecretValueRequest{SecretId: str("empty")}))
	wantErr(t, err, "ResourceNotFoundException", "Secrets Manager can't find the specified secret value for staging label: AWSCURRENT")

	// Exported Get (ECS task secrets) answers the same.
	sv, err := e.h.Get(t.Context(), scope, c.GetArn(), "", "")
	if err != nil || string(sv.Value) != `{"password":"pw"}` || sv.VersionID != token('a') || sv.Binary {
		t.Fatalf("Get = %+v, %v", sv, err)
	}
}

func TestSecretID(t *testing.T) {
	e := newEnv(t)
	db := e.create(t, &smv1.CreateSecretRequest{Name: str("db"), SecretString: str("db-value")}).GetArn()
	// A name that looks like a name plus an ARN suffix.
	tricky := e.create(t, &smv1.CreateSecretRequest{Name: str("app-abcdef"), SecretString: str("tricky-value")}).GetArn()
	e.create(t, &smv1.CreateSecretRequest{Name: str("app"), SecretString: str("app-value")})
	prefix := "arn:aws:secretsmanager:us-east-1:" + account + ":secret:"
	for _, tc := range []struct{ id, want string }{
		{"db", "db-value"},
		{db, "db-value"},
		{prefix + "db", "db-value"}, // partial ARN: without the random suffix
		{tricky, "tricky-value"},
		{prefix + "app-abcdef", "tricky-value"},
		{"app-abcdef", "tricky-value"},
		{prefix + "app", "app-value"},
	} {
		if got := e.value(t, &smv1.GetSecretValueRequest{SecretId: str(tc.id)}).GetSecretString(); got != tc.want {
			t.Errorf("GetSecretValue(%s) = %q, want %q", tc.id, got, tc.want)
		}
	}
	suffix := db[len(db)-6:]
	other := "AAAAAA"
	if suffix == other {
		other = "BBBBBB"
	}
	for _, tc := range []struct{ id, errType, msg string }{
		{prefix + "db-" + other, "ResourceNotFoundException", "can't find the specified secret."}, // another secret's suffix
		{"arn:aws:secretsmanager:eu-west-1:" + account + ":secret:db", "ResourceNotFoundException", ""},
		{"arn:aws:secretsmanager:us-east-1:999999999999:secret:db", "ResourceNotFoundException", ""},
		{"arn:aws:ssm:us-east-1:" + account + ":secret:db", "InvalidParameterException", "is not a valid Secrets Manager secret ARN"},
		{"arn:aws:secretsmanager:us-east-1:" + account + ":parameter:db", "InvalidParameterException", "is not a valid"},
		{"", "InvalidParameterException", "You must provide a SecretId."},
		{"missing", "ResourceNotFoundException", "Secrets Manager can't find the specified secret."},
	} {
		_, err := e.h.GetSecretValue(e.ctx, connect.NewRequest(&smv1.GetSecretValueRequest{SecretId: str(tc.id)}))
		t.Run(tc.id, func(t *testing.T) { wantErr(t, err, tc.errType, tc.msg) })
	}

	// A secret deleted and created again under the same name has a new ARN; the old
	// full ARN names nothing.
	if _, err := e.h.DeleteSecret(e.ctx, connect.NewRequest(&smv1.DeleteSecretRequest{SecretId: str("db"), ForceDeleteWithoutRecovery: true})); err != nil {
		t.Fatal(err)
	}
	again := e.create(t, &smv1.CreateSecretRequest{Name: str("db"), SecretString: str("new")}).GetArn()
	if again == db {
		t.Fatalf("recreated secret has the old ARN %s", db)
	}
	_, err := e.h.GetSecretValue(e.ctx, connect.NewRequest(&smv1.GetSecretValueRequest{SecretId: str(db)}))
	wantErr(t, err, "ResourceNotFoundException", "")
	if got := e.value(t, &smv1.GetSecretValueRequest{SecretId: str(again)}).GetSecretString(); got != "new" {
		t.Fatalf("new ARN reads %q", got)
	}
}

func TestStagingLabels(t *testing.T) {
	e := newEnv(t)
	e.create(t, &smv1.CreateSecretRequest{Name: str("s"), SecretString: str("one"), ClientRequestToken: str(token('1'))})
	put := func(value string, tok byte, stages ...string) *smv1.PutSecretValueResponse {
		return e.put(t, &smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str(value), ClientRequestToken: str(token(tok)), VersionStages: stages})
	}
	want := func(t *testing.T, want map[string][]string) {
		t.Helper()
		got := e.stages(t, "s")
		if len(got) != len(want) {
			t.Fatalf("stages = %v, want %v", got, want)
		}
		for v, st := range want {
			if !slices.Equal(got[v], st) {
				t.Fatalf("stages = %v, want %v", got, want)
			}
		}
	}
	want(t, map[string][]string{token('1'): {"AWSCURRENT"}})

	// A new value becomes AWSCURRENT; the one it replaces AWSPREVIOUS.
	if r := put("two", '2'); r.GetVersionId() != token('2') || !slices.Equal(r.GetVersionStages(), []string{"AWSCURRENT"}) {
		t.Fatalf("PutSecretValue = %s %v", r.GetVersionId(), r.GetVersionStages())
	}
	want(t, map[string][]string{token('1'): {"AWSPREVIOUS"}, token('2'): {"AWSCURRENT"}})
	// The next one takes AWSPREVIOUS from the oldest, which keeps no label (deprecated).
	put("three", '3')
	want(t, map[string][]string{token('2'): {"AWSPREVIOUS"}, token('3'): {"AWSCURRENT"}})

	for _, tc := range []struct {
		req   *smv1.GetSecretValueRequest
		value string
	}{
		{&smv1.GetSecretValueRequest{SecretId: str("s")}, "three"},
		{&smv1.GetSecretValueRequest{SecretId: str("s"), VersionStage: str("AWSPREVIOUS")}, "two"},
		{&smv1.GetSecretValueRequest{SecretId: str("s"), VersionId: str(token('1'))}, "one"}, // deprecated, still readable by id
		{&smv1.GetSecretValueRequest{SecretId: str("s"), VersionId: str(token('3')), VersionStage: str("AWSCURRENT")}, "three"},
	} {
		if got := e.value(t, tc.req).GetSecretString(); got != tc.value {
			t.Errorf("GetSecretValue(%s/%s) = %q, want %q", tc.req.GetVersionId(), tc.req.GetVersionStage(), got, tc.value)
		}
	}
	for _, tc := range []struct {
		req *smv1.GetSecretValueRequest
		msg string
	}{
		{&smv1.GetSecretValueRequest{SecretId: str("s"), VersionId: str(token('3')), VersionStage: str("AWSPREVIOUS")}, "for VersionId: " + token('3') + " and staging label: AWSPREVIOUS"},
		{&smv1.GetSecretValueRequest{SecretId: str("s"), VersionId: str(token('9'))}, "for VersionId: " + token('9')},
		{&smv1.GetSecretValueRequest{SecretId: str("s"), VersionStage: str("AWSPENDING")}, "for staging label: AWSPENDING"},
	} {
		_, err := e.h.GetSecretValue(e.ctx, connect.NewRequest(tc.req))
		wantErr(t, err, "ResourceNotFoundException", "Secrets Manager can't find the specified secret value "+tc.msg)
	}

	// ListSecretVersionIds: newest first; deprecated versions only when asked.
	list := func(deprecated bool) []string {
		res, err := e.h.ListSecretVersionIds(e.ctx, connect.NewRequest(&smv1.ListSecretVersionIdsRequest{SecretId: str("s"), IncludeDeprecated: deprecated}))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range res.Msg.GetVersions() {
			out = append(out, v.GetVersionId()[:1]+":"+strings.Join(v.GetVersionStages(), ","))
		}
		return out
	}
	if got := list(false); !slices.Equal(got, []string{"3:AWSCURRENT", "2:AWSPREVIOUS"}) {
		t.Errorf("versions = %v", got)
	}
	if got := list(true); !slices.Equal(got, []string{"3:AWSCURRENT", "2:AWSPREVIOUS", "1:"}) {
		t.Errorf("versions with deprecated = %v", got)
	}

	// A version staged AWSPENDING leaves AWSCURRENT where it is; staging it AWSCURRENT
	// later (a new version with the same label) moves the labels as AWS rotation does.
	put("four", '4', "AWSPENDING")
	want(t, map[string][]string{token('2'): {"AWSPREVIOUS"}, token('3'): {"AWSCURRENT"}, token('4'): {"AWSPENDING"}})
	if got := e.value(t, &smv1.GetSecretValueRequest{SecretId: str("s"), VersionStage: str("AWSPENDING")}).GetSecretString(); got != "four" {
		t.Errorf("AWSPENDING = %q", got)
	}
	put("five", '5', "AWSPENDING", "blue")
	want(t, map[string][]string{token('2'): {"AWSPREVIOUS"}, token('3'): {"AWSCURRENT"}, token('5'): {"AWSPENDING", "blue"}})
	put("six", '6', "AWSCURRENT", "blue")
	want(t, map[string][]string{token('3'): {"AWSPREVIOUS"}, token('5'): {"AWSPENDING"}, token('6'): {"AWSCURRENT", "blue"}})

	// At most 20 labels on a version.
	labels := make([]string, 21)
	for i := range labels {
		labels[i] = fmt.Sprint("l", i)
	}
	_, err := e.h.PutSecretValue(e.ctx, connect.NewRequest(&smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str("x"), VersionStages: labels}))
	wantErr(t, err, "InvalidParameterException", "at most 20 staging labels")
}

func TestPutSecretValue(t *testing.T) {
	e := newEnv(t)
	e.create(t, &smv1.CreateSecretRequest{Name: str("s"), SecretString: str("one")})
	later := start.Add(time.Hour)
	*e.now = later

	// A retry with the same token and value changes nothing and answers the same.
	first := e.put(t, &smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str("two"), ClientRequestToken: str(token('t'))})
	retry := e.put(t, &smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str("two"), ClientRequestToken: str(token('t'))})
	if retry.GetVersionId() != first.GetVersionId() || !slices.Equal(retry.GetVersionStages(), []string{"AWSCURRENT"}) {
		t.Fatalf("retry = %s %v, want %s [AWSCURRENT]", retry.GetVersionId(), retry.GetVersionStages(), first.GetVersionId())
	}
	if n := len(e.stages(t, "s")); n != 2 {
		t.Fatalf("%d labelled versions after a retried put, want 2", n)
	}
	if d := e.describe(t, "s"); d.GetLastChangedDate() != epoch(later) || d.GetCreatedDate() != epoch(start) {
		t.Errorf("dates = created %v changed %v, want %v %v", d.GetCreatedDate(), d.GetLastChangedDate(), epoch(start), epoch(later))
	}
	// The same token with another value cannot change the version.
	for _, req := range []*smv1.PutSecretValueRequest{
		{SecretId: str("s"), SecretString: str("other"), ClientRequestToken: str(token('t'))},
		{SecretId: str("s"), SecretBinary: []byte("two"), ClientRequestToken: str(token('t'))}, // same bytes, but binary
	} {
		_, err := e.h.PutSecretValue(e.ctx, connect.NewRequest(req))
		wantErr(t, err, "ResourceExistsException", "You can't modify an existing version, you can only create a new version.")
	}

	for _, tc := range []struct {
		name string
		req  *smv1.PutSecretValueRequest
		msg  string
	}{
		{"no value", &smv1.PutSecretValueRequest{SecretId: str("s")}, "You must provide either SecretString or SecretBinary."},
		{"both", &smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str("a"), SecretBinary: []byte("b")}, "You can't specify both"},
		{"rotation token", &smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str("a"), RotationToken: str("t")}, "RotationToken is not supported"},
		{"token", &smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str("a"), ClientRequestToken: str("short")}, "ClientRequestToken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.PutSecretValue(e.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, "InvalidParameterException", tc.msg)
		})
	}
	_, err := e.h.PutSecretValue(e.ctx, connect.NewRequest(&smv1.PutSecretValueRequest{SecretId: str("missing"), SecretString: str("a")}))
	wantErr(t, err, "ResourceNotFoundException", "")
}

func TestUpdateSecret(t *testing.T) {
	e := newEnv(t)
	e.create(t, &smv1.CreateSecretRequest{Name: str("s"), SecretString: str("one"), Description: str("old"), ClientRequestToken: str(token('1'))})
	update := func(req *smv1.UpdateSecretRequest) *smv1.UpdateSecretResponse {
		t.Helper()
		req.SecretId = str("s")
		res, err := e.h.UpdateSecret(e.ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg
	}
	*e.now = start.Add(time.Minute)
	// Metadata only: no new version.
	if r := update(&smv1.UpdateSecretRequest{Description: str("new"), KmsKeyId: str("alias/k")}); r.VersionId != nil || r.GetName() != "s" {
		t.Fatalf("UpdateSecret without a value = %v", r)
	}
	d := e.describe(t, "s")
	if d.GetDescription() != "new" || d.GetKmsKeyId() != "alias/k" || d.GetLastChangedDate() != epoch(start.Add(time.Minute)) || len(d.GetVersionIdsToStages()) != 1 {
		t.Fatalf("after the metadata update: %v", d)
	}
	// With a value: a new AWSCURRENT version.
	*e.now = start.Add(2 * time.Minute)
	r := update(&smv1.UpdateSecretRequest{SecretString: str("two"), ClientRequestToken: str(token('2'))})
	if r.GetVersionId() != token('2') {
		t.Fatalf("VersionId = %s", r.GetVersionId())
	}
	if got := e.stages(t, "s"); !slices.Equal(got[token('1')], []string{"AWSPREVIOUS"}) || !slices.Equal(got[token('2')], []string{"AWSCURRENT"}) {
		t.Fatalf("stages = %v", got)
	}
	if d := e.describe(t, "s"); d.GetLastChangedDate() != epoch(start.Add(2*time.Minute)) || d.GetDescription() != "new" {
		t.Fatalf("after the value update: %v", d)
	}
	_, err := e.h.UpdateSecret(e.ctx, connect.NewRequest(&smv1.UpdateSecretRequest{SecretId: str("s"), Type: str("x")}))
	wantErr(t, err, "InvalidParameterException", "Type is not supported")
	_, err = e.h.UpdateSecret(e.ctx, connect.NewRequest(&smv1.UpdateSecretRequest{SecretId: str("s"), SecretString: str("a"), SecretBinary: []byte("b")}))
	wantErr(t, err, "InvalidParameterException", "You can't specify both")
	_, err = e.h.UpdateSecret(e.ctx, connect.NewRequest(&smv1.UpdateSecretRequest{SecretId: str("missing"), Description: str("d")}))
	wantErr(t, err, "ResourceNotFoundException", "")
}

func TestDeletionWindow(t *testing.T) {
	e := newEnv(t)
	arn := e.create(t, &smv1.CreateSecretRequest{Name: str("s"), SecretString: str("v")}).GetArn()
	del := func(req *smv1.DeleteSecretRequest) (*smv1.DeleteSecretResponse, error) {
		res, err := e.h.DeleteSecret(e.ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	for _, tc := range []struct {
		req *smv1.DeleteSecretRequest
		msg string
	}{
		{&smv1.DeleteSecretRequest{SecretId: str("s"), RecoveryWindowInDays: 6}, "The RecoveryWindowInDays value must be between 7 and 30 days (inclusive)."},
		{&smv1.DeleteSecretRequest{SecretId: str("s"), RecoveryWindowInDays: 31}, "between 7 and 30 days"},
		{&smv1.DeleteSecretRequest{SecretId: str("s"), RecoveryWindowInDays: 7, ForceDeleteWithoutRecovery: true}, "You can't use ForceDeleteWithoutRecovery in conjunction with RecoveryWindowInDays."},
	} {
		_, err := del(tc.req)
		wantErr(t, err, "InvalidParameterException", tc.msg)
	}
	_, err := del(&smv1.DeleteSecretRequest{SecretId: str("missing")})
	wantErr(t, err, "ResourceNotFoundException", "")

	// Scheduled: deletion in 7 days.
	d, err := del(&smv1.DeleteSecretRequest{SecretId: str("s"), RecoveryWindowInDays: 7})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetArn() != arn || d.GetName() != "s" || d.GetDeletionDate() != epoch(start.Add(7*24*time.Hour)) {
		t.Fatalf("DeleteSecret = %v, want DeletionDate %v", d, epoch(start.Add(7*24*time.Hour)))
	}
	assertMarked(t, e, "s")

	// Restored: readable and writable again.
	r, err := e.h.RestoreSecret(e.ctx, connect.NewRequest(&smv1.RestoreSecretRequest{SecretId: str("s")}))
	if err != nil || r.Msg.GetArn() != arn || r.Msg.GetName() != "s" {
		t.Fatalf("RestoreSecret = %v, %v", r, err)
	}
	if ds := e.describe(t, "s"); ds.DeletedDate != nil {
		t.Fatalf("DeletedDate after restore = %v", ds.GetDeletedDate())
	}
	if got := e.value(t, &smv1.GetSecretValueRequest{SecretId: str("s")}).GetSecretString(); got != "v" {
		t.Fatalf("value after restore = %q", got)
	}
	e.put(t, &smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str("v2")})

	// The default window is 30 days; the secret is gone once it has passed.
	d, err = del(&smv1.DeleteSecretRequest{SecretId: str("s")})
	if err != nil {
		t.Fatal(err)
	}
	deadline := start.Add(30 * 24 * time.Hour)
	if d.GetDeletionDate() != epoch(deadline) {
		t.Fatalf("DeletionDate = %v, want %v (30 days)", d.GetDeletionDate(), epoch(deadline))
	}
	*e.now = deadline.Add(-time.Millisecond)
	assertMarked(t, e, "s")
	*e.now = deadline
	_, err = e.h.DescribeSecret(e.ctx, connect.NewRequest(&smv1.DescribeSecretRequest{SecretId: str("s")}))
	wantErr(t, err, "ResourceNotFoundException", "")
	_, err = e.h.RestoreSecret(e.ctx, connect.NewRequest(&smv1.RestoreSecretRequest{SecretId: str("s")}))
	wantErr(t, err, "ResourceNotFoundException", "")
	if names := listNames(t, e, &smv1.ListSecretsRequest{IncludePlannedDeletion: true}); len(names) != 0 {
		t.Fatalf("ListSecrets after the deletion date = %v", names)
	}
	// The name is free again, under a new ARN.
	if again := e.create(t, &smv1.CreateSecretRequest{Name: str("s"), SecretString: str("new")}); again.GetArn() == arn {
		t.Fatal("recreated secret has the deleted one's ARN")
	}
}

// assertMarked checks what AWS allows on a secret scheduled for deletion: describe it
// (with DeletedDate), list it only with IncludePlannedDeletion; not read it, change its
// value, delete it again, or create one of its name.
func assertMarked(t *testing.T, e env, name string) {
	t.Helper()
	if d := e.describe(t, name); d.DeletedDate == nil {
		t.Fatal("DeletedDate not set on a secret scheduled for deletion")
	}
	const marked = "You can't perform this operation on the secret because it was marked for deletion."
	_, err := e.h.GetSecretValue(e.ctx, connect.NewRequest(&smv1.GetSecretValueRequest{SecretId: str(name)}))
	wantErr(t, err, "InvalidRequestException", marked)
	_, err = e.h.PutSecretValue(e.ctx, connect.NewRequest(&smv1.PutSecretValueRequest{SecretId: str(name), SecretString: str("x")}))
	wantErr(t, err, "InvalidRequestException", marked)
	_, err = e.h.UpdateSecret(e.ctx, connect.NewRequest(&smv1.UpdateSecretRequest{SecretId: str(name), Description: str("x")}))
	wantErr(t, err, "InvalidRequestException", marked)
	_, err = e.h.DeleteSecret(e.ctx, connect.NewRequest(&smv1.DeleteSecretRequest{SecretId: str(name)}))
	wantErr(t, err, "InvalidRequestException", marked)
	_, err = e.h.CreateSecret(e.ctx, connect.NewRequest(&smv1.CreateSecretRequest{Name: str(name)}))
	wantErr(t, err, "InvalidRequestException", "You can't create this secret because a secret with this name is already scheduled for deletion.")
	if _, err := e.h.Get(t.Context(), scope, name, "", ""); err == nil || !strings.Contains(err.Error(), "marked for deletion") {
		t.Fatalf("Get of a secret marked for deletion = %v", err)
	}
	if names := listNames(t, e, &smv1.ListSecretsRequest{}); slices.Contains(names, name) {
		t.Fatalf("ListSecrets lists %s scheduled for deletion", name)
	}
	if names := listNames(t, e, &smv1.ListSecretsRequest{IncludePlannedDeletion: true}); !slices.Contains(names, name) {
		t.Fatalf("ListSecrets with IncludePlannedDeletion misses %s", name)
	}
}

func TestForceDelete(t *testing.T) {
	e := newEnv(t)
	e.create(t, &smv1.CreateSecretRequest{Name: str("s"), SecretString: str("v")})
	// Also allowed on a secret already scheduled for deletion.
	if _, err := e.h.DeleteSecret(e.ctx, connect.NewRequest(&smv1.DeleteSecretRequest{SecretId: str("s")})); err != nil {
		t.Fatal(err)
	}
	res, err := e.h.DeleteSecret(e.ctx, connect.NewRequest(&smv1.DeleteSecretRequest{SecretId: str("s"), ForceDeleteWithoutRecovery: true}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.GetDeletionDate() != epoch(start) {
		t.Errorf("DeletionDate = %v, want now %v", res.Msg.GetDeletionDate(), epoch(start))
	}
	_, err = e.h.DescribeSecret(e.ctx, connect.NewRequest(&smv1.DescribeSecretRequest{SecretId: str("s")}))
	wantErr(t, err, "ResourceNotFoundException", "")
	// At once: the name can be used again.
	e.create(t, &smv1.CreateSecretRequest{Name: str("s"), SecretString: str("v2")})
	if got := e.value(t, &smv1.GetSecretValueRequest{SecretId: str("s")}); got.GetSecretString() != "v2" || len(e.stages(t, "s")) != 1 {
		t.Fatalf("recreated secret = %q with %v", got.GetSecretString(), e.stages(t, "s"))
	}
}

func listNames(t *testing.T, e env, req *smv1.ListSecretsRequest) []string {
	t.Helper()
	var out []string
	for page := 0; ; page++ {
		if page == 100 {
			t.Fatal("paging does not end")
		}
		res, err := e.h.ListSecrets(e.ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Msg.GetSecretList() {
			out = append(out, s.GetName())
		}
		if res.Msg.NextToken == nil {
			return out
		}
		req.NextToken = res.Msg.NextToken
	}
}

func filter(key string, values ...string) *smv1.Filter {
	return &smv1.Filter{Key: str(key), Values: values}
}

func TestListSecrets(t *testing.T) {
	e := newEnv(t)
	for i, s := range []struct {
		name, desc string
		tags       []*smv1.Tag
	}{
		{"prod/db", "database password", []*smv1.Tag{tag("env", "prod"), tag("team", "data")}},
		{"prod/api", "api key", []*smv1.Tag{tag("env", "prod")}},
		{"dev/db", "database password", []*smv1.Tag{tag("env", "dev")}},
		{"Prod/legacy", "old", nil},
	} {
		*e.now = start.Add(time.Duration(i) * time.Minute) // created in this order
		e.create(t, &smv1.CreateSecretRequest{Name: str(s.name), Description: str(s.desc), Tags: s.tags, SecretString: str("v")})
	}
	*e.now = start.Add(time.Hour)
	e.put(t, &smv1.PutSecretValueRequest{SecretId: str("dev/db"), SecretString: str("v2")}) // changed last

	for _, tc := range []struct {
		name string
		req  *smv1.ListSecretsRequest
		want []string
	}{
		{"newest first by default", &smv1.ListSecretsRequest{}, []string{"Prod/legacy", "dev/db", "prod/api", "prod/db"}},
		{"created asc", &smv1.ListSecretsRequest{SortBy: str("created-date"), SortOrder: str("asc")}, []string{"prod/db", "prod/api", "dev/db", "Prod/legacy"}},
		{"name asc", &smv1.ListSecretsRequest{SortBy: str("name"), SortOrder: str("asc")}, []string{"Prod/legacy", "dev/db", "prod/api", "prod/db"}},
		{"name desc", &smv1.ListSecretsRequest{SortBy: str("name"), SortOrder: str("desc")}, []string{"prod/db", "prod/api", "dev/db", "Prod/legacy"}},
		{"last changed", &smv1.ListSecretsRequest{SortBy: str("last-changed-date")}, []string{"dev/db", "Prod/legacy", "prod/api", "prod/db"}},
		{"name prefix is case-sensitive", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("name", "prod/")}, SortBy: str("name"), SortOrder: str("asc")}, []string{"prod/api", "prod/db"}},
		{"negated name", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("name", "!prod/")}, SortBy: str("name"), SortOrder: str("asc")}, []string{"Prod/legacy", "dev/db"}},
		{"values are ORed", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("name", "dev/", "Prod/")}, SortBy: str("name"), SortOrder: str("asc")}, []string{"Prod/legacy", "dev/db"}},
		{"filters are ANDed", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("name", "prod/"), filter("tag-key", "team")}}, []string{"prod/db"}},
		{"tag value", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("tag-value", "dev")}}, []string{"dev/db"}},
		{"description prefix", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("description", "database")}, SortBy: str("name"), SortOrder: str("asc")}, []string{"dev/db", "prod/db"}},
		{"all", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("all", "data")}, SortBy: str("name"), SortOrder: str("asc")}, []string{"dev/db", "prod/db"}},
		// AWS's Filter reference: description is a prefix match, not case-sensitive; name,
		// tag-key and tag-value are case-sensitive prefixes; all breaks the value into
		// words and searches every attribute for them, not case-sensitive.
		{"description prefix is not case-sensitive", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("description", "DataBase P")}, SortBy: str("name"), SortOrder: str("asc")}, []string{"dev/db", "prod/db"}},
		{"description is a prefix, not a word", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("description", "password")}}, nil},
		{"tag key is case-sensitive", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("tag-key", "Env")}}, nil},
		{"tag value is case-sensitive", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("tag-value", "Dev")}}, nil},
		{"all is not case-sensitive", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("all", "PROD")}, SortBy: str("name"), SortOrder: str("asc")}, []string{"Prod/legacy", "prod/api", "prod/db"}},
		{"all matches words inside attributes", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("all", "key")}}, []string{"prod/api"}},
		{"all breaks the value into words", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("all", "oldPassword")}, SortBy: str("name"), SortOrder: str("asc")}, []string{"Prod/legacy", "dev/db", "prod/db"}},
		{"all negated", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("all", "!prod")}}, []string{"dev/db"}},
		{"primary region: nothing is replicated", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("primary-region", "us-east-1")}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := listNames(t, e, tc.req); !slices.Equal(got, tc.want) {
				t.Fatalf("names = %v, want %v", got, tc.want)
			}
		})
	}

	// Pages of MaxResults, in order, covering every secret once.
	var pages int
	req := &smv1.ListSecretsRequest{MaxResults: 3, SortBy: str("name"), SortOrder: str("asc")}
	var names []string
	for page := 0; ; page++ {
		if page == 100 {
			t.Fatal("paging does not end")
		}
		res, err := e.h.ListSecrets(e.ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, s := range res.Msg.GetSecretList() {
			names = append(names, s.GetName())
		}
		if res.Msg.NextToken == nil {
			break
		}
		req.NextToken = res.Msg.NextToken
	}
	if pages != 2 || !slices.Equal(names, []string{"Prod/legacy", "dev/db", "prod/api", "prod/db"}) {
		t.Fatalf("paged: %v in %d pages", names, pages)
	}

	// An entry carries the secret's metadata and its labelled versions, never a value.
	res, err := e.h.ListSecrets(e.ctx, connect.NewRequest(&smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("name", "dev/db")}}))
	if err != nil {
		t.Fatal(err)
	}
	entry := res.Msg.GetSecretList()[0]
	if entry.GetDescription() != "database password" || len(entry.GetSecretVersionsToStages()) != 2 || entry.GetCreatedDate() != epoch(start.Add(2*time.Minute)) ||
		entry.GetLastChangedDate() != epoch(start.Add(time.Hour)) || len(entry.GetTags()) != 1 || !arnPattern("dev/db").MatchString(entry.GetArn()) {
		t.Fatalf("entry = %v", entry)
	}

	for _, tc := range []struct {
		name         string
		req          *smv1.ListSecretsRequest
		errType, msg string
	}{
		{"unknown filter key", &smv1.ListSecretsRequest{Filters: []*smv1.Filter{filter("color", "red")}}, "InvalidParameterException", "Invalid filter key color."},
		{"max results", &smv1.ListSecretsRequest{MaxResults: 101}, "InvalidParameterException", "MaxResults must be between 1 and 100."},
		{"negative max results", &smv1.ListSecretsRequest{MaxResults: -1}, "InvalidParameterException", "MaxResults"},
		{"token", &smv1.ListSecretsRequest{NextToken: str("bogus!")}, "InvalidNextTokenException", "The NextToken value is invalid."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.ListSecrets(e.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, tc.errType, tc.msg)
		})
	}
}

func arnPattern(name string) *regexp.Regexp {
	return regexp.MustCompile(`^arn:aws:secretsmanager:us-east-1:` + account + `:secret:` + regexp.QuoteMeta(name) + `-[A-Za-z0-9]{6}$`)
}

func TestListSecretVersionIdsPaging(t *testing.T) {
	e := newEnv(t)
	e.create(t, &smv1.CreateSecretRequest{Name: str("s"), SecretString: str("1")})
	e.put(t, &smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str("2")})
	res, err := e.h.ListSecretVersionIds(e.ctx, connect.NewRequest(&smv1.ListSecretVersionIdsRequest{SecretId: str("s"), MaxResults: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if vs := res.Msg.GetVersions(); len(vs) != 1 || !slices.Equal(vs[0].GetVersionStages(), []string{"AWSCURRENT"}) {
		t.Fatalf("MaxResults 1 = %v", vs)
	}
	if !arnPattern("s").MatchString(res.Msg.GetArn()) || res.Msg.GetName() != "s" {
		t.Errorf("Arn, Name = %s, %s", res.Msg.GetArn(), res.Msg.GetName())
	}
	if res.Msg.NextToken == nil {
		t.Fatal("MaxResults 1 of 2 versions: no NextToken")
	}

	// Paging goes through every version once, newest first, as one unpaged list does.
	for i := 3; i <= 7; i++ {
		e.put(t, &smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str(fmt.Sprint(i))})
	}
	all, err := e.h.ListSecretVersionIds(e.ctx, connect.NewRequest(&smv1.ListSecretVersionIdsRequest{SecretId: str("s"), IncludeDeprecated: true}))
	if err != nil {
		t.Fatal(err)
	}
	if all.Msg.NextToken != nil || len(all.Msg.GetVersions()) != 7 {
		t.Fatalf("unpaged: %d versions, NextToken %v; want 7 and none", len(all.Msg.GetVersions()), all.Msg.NextToken)
	}
	var want, got []string
	for _, v := range all.Msg.GetVersions() {
		want = append(want, v.GetVersionId())
	}
	req := &smv1.ListSecretVersionIdsRequest{SecretId: str("s"), IncludeDeprecated: true, MaxResults: 3}
	var sizes []int
	for page := 0; ; page++ {
		if page == 10 {
			t.Fatal("paging does not end")
		}
		res, err := e.h.ListSecretVersionIds(e.ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(res.Msg.GetVersions()))
		for _, v := range res.Msg.GetVersions() {
			got = append(got, v.GetVersionId())
		}
		if res.Msg.NextToken == nil {
			break
		}
		req.NextToken = res.Msg.NextToken
	}
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Fatalf("pages of 3 = %v (sizes %v), want %v", got, sizes, want)
	}
	// A page that ends exactly at the last version has no NextToken.
	res, err = e.h.ListSecretVersionIds(e.ctx, connect.NewRequest(&smv1.ListSecretVersionIdsRequest{SecretId: str("s"), IncludeDeprecated: true, MaxResults: 7}))
	if err != nil || res.Msg.NextToken != nil || len(res.Msg.GetVersions()) != 7 {
		t.Fatalf("MaxResults 7 of 7: %v", err)
	}

	_, err = e.h.ListSecretVersionIds(e.ctx, connect.NewRequest(&smv1.ListSecretVersionIdsRequest{SecretId: str("s"), MaxResults: 101}))
	wantErr(t, err, "InvalidParameterException", "MaxResults must be between 1 and 100.")
	_, err = e.h.ListSecretVersionIds(e.ctx, connect.NewRequest(&smv1.ListSecretVersionIdsRequest{SecretId: str("s"), NextToken: str("x")}))
	wantErr(t, err, "InvalidNextTokenException", "")
	_, err = e.h.ListSecretVersionIds(e.ctx, connect.NewRequest(&smv1.ListSecretVersionIdsRequest{SecretId: str("missing")}))
	wantErr(t, err, "ResourceNotFoundException", "")
}

func TestVersionLimit(t *testing.T) {
	e := newEnv(t)
	first := e.create(t, &smv1.CreateSecretRequest{Name: str("s"), SecretString: str("v0")}).GetVersionId()
	for i := 1; i <= 100; i++ {
		e.put(t, &smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str(fmt.Sprint("v", i))})
	}
	// 101 versions were written; the oldest deprecated one is gone.
	res, err := e.h.ListSecretVersionIds(e.ctx, connect.NewRequest(&smv1.ListSecretVersionIdsRequest{SecretId: str("s"), IncludeDeprecated: true}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Msg.GetVersions()); n != 100 {
		t.Fatalf("%d versions kept, want 100", n)
	}
	_, err = e.h.GetSecretValue(e.ctx, connect.NewRequest(&smv1.GetSecretValueRequest{SecretId: str("s"), VersionId: str(first)}))
	wantErr(t, err, "ResourceNotFoundException", "for VersionId: "+first)
	if got := e.value(t, &smv1.GetSecretValueRequest{SecretId: str("s")}).GetSecretString(); got != "v100" {
		t.Fatalf("AWSCURRENT = %q", got)
	}

	// When every version has a label, none can make room.
	e2 := newEnv(t)
	e2.create(t, &smv1.CreateSecretRequest{Name: str("s"), SecretString: str("v0")})
	for i := 1; i < 100; i++ {
		e2.put(t, &smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str(fmt.Sprint("v", i)), VersionStages: []string{fmt.Sprint("L", i)}})
	}
	_, err = e2.h.PutSecretValue(e2.ctx, connect.NewRequest(&smv1.PutSecretValueRequest{SecretId: str("s"), SecretString: str("v100"), VersionStages: []string{"L100"}}))
	wantErr(t, err, "LimitExceededException", "remove labels from old versions first")
}

func TestTags(t *testing.T) {
	e := newEnv(t)
	e.create(t, &smv1.CreateSecretRequest{Name: str("s"), Tags: []*smv1.Tag{tag("env", "dev")}})
	tags := func() map[string]string {
		out := map[string]string{}
		for _, tg := range e.describe(t, "s").GetTags() {
			out[tg.GetKey()] = tg.GetValue()
		}
		return out
	}
	tagRes := func(tags ...*smv1.Tag) error {
		_, err := e.h.TagResource(e.ctx, connect.NewRequest(&smv1.TagResourceRequest{SecretId: str("s"), Tags: tags}))
		return err
	}
	if err := tagRes(tag("env", "prod"), tag("team", "red")); err != nil {
		t.Fatal(err)
	}
	if got := tags(); len(got) != 2 || got["env"] != "prod" || got["team"] != "red" {
		t.Fatalf("tags = %v", got)
	}
	if _, err := e.h.UntagResource(e.ctx, connect.NewRequest(&smv1.UntagResourceRequest{SecretId: str("s"), TagKeys: []string{"env", "nope"}})); err != nil {
		t.Fatal(err)
	}
	if got := tags(); len(got) != 1 || got["team"] != "red" {
		t.Fatalf("tags after untag = %v", got)
	}
	wantErr(t, tagRes(tag("aws:x", "v")), "InvalidParameterException", "reserved prefix aws:")
	var many []*smv1.Tag
	for i := range 50 {
		many = append(many, tag(fmt.Sprint("k", i), "v"))
	}
	wantErr(t, tagRes(many...), "InvalidParameterException", "at most 50 tags")
	if got := tags(); len(got) != 1 {
		t.Fatalf("a refused TagResource changed the tags: %v", got)
	}
	// A secret without tags describes with an empty list, not none.
	e.create(t, &smv1.CreateSecretRequest{Name: str("bare")})
	if d := e.describe(t, "bare"); d.Tags == nil || len(d.Tags) != 0 {
		t.Errorf("Tags of an untagged secret = %#v, want []", d.Tags)
	}
	_, err := e.h.TagResource(e.ctx, connect.NewRequest(&smv1.TagResourceRequest{SecretId: str("missing"), Tags: []*smv1.Tag{tag("k", "v")}}))
	wantErr(t, err, "ResourceNotFoundException", "")
}

func TestKeyring(t *testing.T) {
	kv := etcdtest.Start(t)
	ctx := caller.With(t.Context(), caller.Identity{Account: account, Region: scope.Region})
	writer, reader := secretsmanager.New(kv, newRing(t), nil), secretsmanager.New(kv, newRing(t), nil)
	if _, err := writer.CreateSecret(ctx, connect.NewRequest(&smv1.CreateSecretRequest{Name: str("s"), SecretString: str("v")})); err != nil {
		t.Fatal(err)
	}
	_, err := reader.GetSecretValue(ctx, connect.NewRequest(&smv1.GetSecretValueRequest{SecretId: str("s")}))
	wantErr(t, err, "DecryptionFailure", "Secrets Manager can't decrypt the protected secret text using the provided KMS key.")

	none := secretsmanager.New(kv, nil, nil)
	_, err = none.DescribeSecret(ctx, connect.NewRequest(&smv1.DescribeSecretRequest{SecretId: str("s")}))
	wantErr(t, err, "InternalServiceError", "no secrets key")
	if _, err := none.Get(t.Context(), scope, "s", "", ""); err != secretsmanager.ErrNoKeyring {
		t.Fatalf("Get without a keyring = %v, want ErrNoKeyring", err)
	}
}

func TestCallerScope(t *testing.T) {
	e := newEnv(t)
	e.create(t, &smv1.CreateSecretRequest{Name: str("s"), SecretString: str("v")})
	// Another region and another account have secrets of their own.
	for _, id := range []caller.Identity{{Account: account, Region: "eu-west-1"}, {Account: "999999999999", Region: scope.Region}} {
		_, err := e.h.DescribeSecret(caller.With(t.Context(), id), connect.NewRequest(&smv1.DescribeSecretRequest{SecretId: str("s")}))
		wantErr(t, err, "ResourceNotFoundException", "")
	}
	_, err := e.h.DescribeSecret(t.Context(), connect.NewRequest(&smv1.DescribeSecretRequest{SecretId: str("s")}))
	wantErr(t, err, "AccessDeniedException", "")
	_, err = e.h.RotateSecret(e.ctx, connect.NewRequest(&smv1.RotateSecretRequest{SecretId: str("s")}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("RotateSecret err = %v, want CodeUnimplemented", err)
	}
}
