package ssm_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	ssmv1 "github.com/berthhq/berth/gen/berth/ssm/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/ssm"
)

const account = "111122223333"

var (
	scope = keys.Scope{Account: account, Region: "us-east-1"}
	clock = time.Date(2025, 3, 4, 5, 6, 7, 890_000_000, time.UTC)
)

type env struct {
	h   *ssm.Handler
	ctx context.Context
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

// newEnv returns a handler over a fresh embedded etcd with a fixed clock, and a context
// carrying the caller identity of scope's account root.
func newEnv(t *testing.T) env {
	t.Helper()
	h := ssm.New(etcdtest.Start(t), newRing(t), func() time.Time { return clock })
	return env{h: h, ctx: caller.With(t.Context(), caller.Identity{Account: scope.Account, Region: scope.Region})}
}

func str(s string) *string { return &s }

func tag(k, v string) *ssmv1.Tag { return &ssmv1.Tag{Key: str(k), Value: str(v)} }

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

func (e env) put(t *testing.T, req *ssmv1.PutParameterRequest) *ssmv1.PutParameterResponse {
	t.Helper()
	res, err := e.h.PutParameter(e.ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("PutParameter %s: %v", req.GetName(), err)
	}
	return res.Msg
}

func putReq(name, value, typ string) *ssmv1.PutParameterRequest {
	return &ssmv1.PutParameterRequest{Name: str(name), Value: str(value), Type: str(typ)}
}

func (e env) get(t *testing.T, name string, decrypt bool) *ssmv1.Parameter {
	t.Helper()
	res, err := e.h.GetParameter(e.ctx, connect.NewRequest(&ssmv1.GetParameterRequest{Name: str(name), WithDecryption: decrypt}))
	if err != nil {
		t.Fatalf("GetParameter %s: %v", name, err)
	}
	return res.Msg.GetParameter()
}

func (e env) history(t *testing.T, name string, decrypt bool) []*ssmv1.ParameterHistory {
	t.Helper()
	var out []*ssmv1.ParameterHistory
	var token *string
	for page := 0; ; page++ {
		if page == 100 {
			t.Fatal("paging does not end")
		}
		res, err := e.h.GetParameterHistory(e.ctx, connect.NewRequest(&ssmv1.GetParameterHistoryRequest{Name: str(name), WithDecryption: decrypt, NextToken: token}))
		if err != nil {
			t.Fatalf("GetParameterHistory %s: %v", name, err)
		}
		out = append(out, res.Msg.GetParameters()...)
		if token = res.Msg.NextToken; token == nil {
			return out
		}
	}
}

func TestParameterNames(t *testing.T) {
	e := newEnv(t)
	deep := strings.Repeat("/l", 15) // 15 levels: AWS's maximum
	for _, tc := range []struct {
		name    string
		errType string // "" when valid
		msg     string
	}{
		{"plain", "", ""},
		{"/a/b", "", ""},
		{"with.dots-and_under", "", ""},
		{deep, "", ""},
		{deep + "/x", "HierarchyLevelLimitExceededException", "can't have more than 15 levels"},
		{"a/b", "ValidationException", "fully qualified"},
		{"has space", "ValidationException", "only contain letters, numbers, and the symbols"},
		{"star*", "ValidationException", "only contain letters"},
		{"colon:x", "ValidationException", "only contain letters"},
		{"", "ValidationException", "only contain letters"},
		{"aws-thing", "ValidationException", `can't be prefixed with "aws" or "ssm"`},
		{"/AWS/thing", "ValidationException", `can't be prefixed with "aws" or "ssm"`},
		{"SSMconfig", "ValidationException", `can't be prefixed with "aws" or "ssm"`},
		{"/ssm", "ValidationException", `can't be prefixed`},
		{"my-aws-thing", "", ""}, // only the prefix is reserved
		{strings.Repeat("n", 1011), "", ""},
		{strings.Repeat("n", 1012), "ValidationException", "at most 1011 characters"},
	} {
		_, err := e.h.PutParameter(e.ctx, connect.NewRequest(putReq(tc.name, "v", ssm.String)))
		if tc.errType == "" {
			if err != nil {
				t.Errorf("name %q: %v", tc.name, err)
			} else if got := e.get(t, tc.name, false).GetName(); got != tc.name {
				t.Errorf("name %q reads back as %q", tc.name, got)
			}
			continue
		}
		t.Run(tc.name[:min(len(tc.name), 20)], func(t *testing.T) { wantErr(t, err, tc.errType, tc.msg) })
	}
}

func TestPutParameterValidation(t *testing.T) {
	e := newEnv(t)
	e.put(t, putReq("exists", "v", ssm.String))
	manyTags := make([]*ssmv1.Tag, 51)
	for i := range manyTags {
		manyTags[i] = tag(fmt.Sprint("k", i), "v")
	}
	for _, tc := range []struct {
		name    string
		req     *ssmv1.PutParameterRequest
		errType string
		msg     string
	}{
		{"empty value", &ssmv1.PutParameterRequest{Name: str("p"), Value: str(""), Type: str(ssm.String)}, "ValidationException", "Member must have length greater than or equal to 1"},
		{"no type on create", &ssmv1.PutParameterRequest{Name: str("p"), Value: str("v")}, "ValidationException", "A parameter type is required"},
		{"unknown type", putReq("p", "v", "Integer"), "UnsupportedParameterType", "Parameter type Integer is not supported."},
		{"policies", &ssmv1.PutParameterRequest{Name: str("p"), Value: str("v"), Type: str(ssm.String), Policies: str("[]")}, "InvalidPolicyTypeException", ""},
		{"data type", &ssmv1.PutParameterRequest{Name: str("p"), Value: str("v"), Type: str(ssm.String), DataType: str("aws:ec2:image")}, "ValidationException", "aws:ec2:image"},
		{"tier", &ssmv1.PutParameterRequest{Name: str("p"), Value: str("v"), Type: str(ssm.String), Tier: str("Premium")}, "ValidationException", "Tier Premium is not valid."},
		{"overwrite with tags", &ssmv1.PutParameterRequest{Name: str("exists"), Value: str("v"), Overwrite: true, Tags: []*ssmv1.Tag{tag("k", "v")}}, "ValidationException", "tags and overwrite can't be used together"},
		{"bad pattern", &ssmv1.PutParameterRequest{Name: str("p"), Value: str("v"), Type: str(ssm.String), AllowedPattern: str("([")}, "InvalidAllowedPatternException", ""},
		{"pattern mismatch", &ssmv1.PutParameterRequest{Name: str("p"), Value: str("abc"), Type: str(ssm.String), AllowedPattern: str(`^\d+$`)}, "ParameterPatternMismatchException", `allowedPattern: ^\d+$`},
		{"key id on a String", &ssmv1.PutParameterRequest{Name: str("p"), Value: str("v"), Type: str(ssm.String), KeyId: str("alias/mine")}, "ValidationException", "KeyId is only valid for SecureString"},
		{"empty tag key", &ssmv1.PutParameterRequest{Name: str("p"), Value: str("v"), Type: str(ssm.String), Tags: []*ssmv1.Tag{tag("", "v")}}, "ValidationException", "tag key can't be empty"},
		{"reserved tag key", &ssmv1.PutParameterRequest{Name: str("p"), Value: str("v"), Type: str(ssm.String), Tags: []*ssmv1.Tag{tag("AWS:x", "v")}}, "ValidationException", "reserved prefix aws:"},
		{"exists without overwrite", putReq("exists", "v2", ssm.String), "ParameterAlreadyExists", "To overwrite this value, set the overwrite option in the request to true."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.PutParameter(e.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, tc.errType, tc.msg)
		})
	}
	// At most 50 tags (AWS's quota). Berth answers TooManyTagsError, which the model lists
	// for AddTagsToResource but not for PutParameter, so only the refusal is checked.
	if _, err := e.h.PutParameter(e.ctx, connect.NewRequest(&ssmv1.PutParameterRequest{Name: str("p"), Value: str("v"), Type: str(ssm.String), Tags: manyTags})); err == nil {
		t.Fatal("PutParameter with 51 tags succeeded")
	}
	// None of the refused requests created "p" or changed "exists".
	_, err := e.h.GetParameter(e.ctx, connect.NewRequest(&ssmv1.GetParameterRequest{Name: str("p")}))
	wantErr(t, err, "ParameterNotFound", "Parameter p not found.")
	if p := e.get(t, "exists", false); p.GetVersion() != 1 || p.GetValue() != "v" {
		t.Fatalf("exists = v%d %q, want v1 \"v\"", p.GetVersion(), p.GetValue())
	}
	// A value that matches the pattern is accepted.
	e.put(t, &ssmv1.PutParameterRequest{Name: str("digits"), Value: str("123"), Type: str(ssm.String), AllowedPattern: str(`^\d+$`)})
}

func TestOverwriteAddsVersions(t *testing.T) {
	e := newEnv(t)
	if r := e.put(t, &ssmv1.PutParameterRequest{Name: str("/app/db"), Value: str("one"), Type: str(ssm.String),
		Description: str("the db"), AllowedPattern: str(`^[a-z,]+$`)}); r.GetVersion() != 1 || r.GetTier() != "Standard" {
		t.Fatalf("first put = v%d %s, want v1 Standard", r.GetVersion(), r.GetTier())
	}
	// Overwrite without Type keeps the type; without Description or AllowedPattern keeps
	// those.
	r := e.put(t, &ssmv1.PutParameterRequest{Name: str("/app/db"), Value: str("two"), Overwrite: true})
	if r.GetVersion() != 2 {
		t.Fatalf("overwrite version = %d, want 2", r.GetVersion())
	}
	// Another principal writes version 3 and changes the type.
	other := caller.With(t.Context(), caller.Identity{Account: account, Region: scope.Region, PrincipalARN: "arn:aws:sts::" + account + ":assumed-role/ci/job"})
	if _, err := e.h.PutParameter(other, connect.NewRequest(&ssmv1.PutParameterRequest{Name: str("/app/db"), Value: str("a,b"), Type: str(ssm.StringList), Overwrite: true, Description: str("list")})); err != nil {
		t.Fatal(err)
	}

	p := e.get(t, "/app/db", false)
	if p.GetVersion() != 3 || p.GetValue() != "a,b" || p.GetType() != ssm.StringList || p.GetDataType() != "text" {
		t.Fatalf("latest = v%d %q %s %s, want v3 \"a,b\" StringList text", p.GetVersion(), p.GetValue(), p.GetType(), p.GetDataType())
	}
	if p.GetArn() != "arn:aws:ssm:us-east-1:"+account+":parameter/app/db" || p.GetArn() != ssm.ARN(scope, "/app/db") {
		t.Errorf("Arn = %s", p.GetArn())
	}
	if want := float64(clock.UnixMilli()) / 1000; p.GetLastModifiedDate() != want {
		t.Errorf("LastModifiedDate = %v, want %v", p.GetLastModifiedDate(), want)
	}

	hist := e.history(t, "/app/db", false)
	type row struct {
		version           int64
		value, desc, user string
		pattern           string
	}
	var got []row
	for _, h := range hist {
		got = append(got, row{h.GetVersion(), h.GetValue(), h.GetDescription(), h.GetLastModifiedUser(), h.GetAllowedPattern()})
	}
	root := "arn:aws:iam::" + account + ":root"
	want := []row{
		{1, "one", "the db", root, `^[a-z,]+$`},
		{2, "two", "the db", root, `^[a-z,]+$`},
		{3, "a,b", "list", "arn:aws:sts::" + account + ":assumed-role/ci/job", `^[a-z,]+$`},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("history =\n%v\nwant\n%v", got, want)
	}
}

func TestTiers(t *testing.T) {
	e := newEnv(t)
	big, huge := strings.Repeat("x", 4097), strings.Repeat("x", 8193)
	for _, tc := range []struct {
		name, value, tier string
		wantTier          string
		errMsg            string
	}{
		{"std-max", strings.Repeat("x", 4096), "", "Standard", ""},
		{"std-over", big, "", "", "Standard tier parameters support a maximum parameter value of 4096 characters"},
		{"std-explicit-over", big, "Standard", "", "Standard tier parameters support a maximum parameter value of 4096 characters"},
		{"adv", big, "Advanced", "Advanced", ""},
		{"adv-small", "x", "Advanced", "Advanced", ""},
		{"adv-over", huge, "Advanced", "", "Advanced tier parameters support a maximum parameter value of 8192 characters."},
		{"it-small", "x", "Intelligent-Tiering", "Standard", ""},
		{"it-big", big, "Intelligent-Tiering", "Advanced", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := putReq(tc.name, tc.value, ssm.String)
			if tc.tier != "" {
				req.Tier = str(tc.tier)
			}
			res, err := e.h.PutParameter(e.ctx, connect.NewRequest(req))
			if tc.errMsg != "" {
				wantErr(t, err, "ValidationException", tc.errMsg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Msg.GetTier() != tc.wantTier {
				t.Fatalf("Tier = %s, want %s", res.Msg.GetTier(), tc.wantTier)
			}
		})
	}

	// An advanced parameter stays advanced and cannot be downgraded.
	r := e.put(t, &ssmv1.PutParameterRequest{Name: str("adv"), Value: str("small"), Overwrite: true})
	if r.GetTier() != "Advanced" {
		t.Errorf("overwrite of an advanced parameter: Tier = %s, want Advanced", r.GetTier())
	}
	_, err := e.h.PutParameter(e.ctx, connect.NewRequest(&ssmv1.PutParameterRequest{Name: str("adv"), Value: str("small"), Overwrite: true, Tier: str("Standard")}))
	wantErr(t, err, "ValidationException", "You can't downgrade a parameter from the advanced-parameter tier to the standard-parameter tier.")
	// A standard one is upgraded by a value that needs it (Intelligent-Tiering) or by
	// asking.
	if r := e.put(t, &ssmv1.PutParameterRequest{Name: str("it-small"), Value: str(big), Overwrite: true, Tier: str("Intelligent-Tiering")}); r.GetTier() != "Advanced" {
		t.Errorf("Intelligent-Tiering with a large value: Tier = %s, want Advanced", r.GetTier())
	}
}

func TestSecureString(t *testing.T) {
	e := newEnv(t)
	e.put(t, putReq("/db/password", "hunter2", ssm.SecureString))
	e.put(t, &ssmv1.PutParameterRequest{Name: str("/db/token"), Value: str("tok"), Type: str(ssm.SecureString), KeyId: str("alias/mine")})
	e.put(t, putReq("/db/host", "db.local", ssm.String))

	// Without WithDecryption the value is an opaque base64 ciphertext.
	p := e.get(t, "/db/password", false)
	raw, err := base64.StdEncoding.DecodeString(p.GetValue())
	if err != nil || p.GetValue() == "hunter2" || strings.Contains(string(raw), "hunter2") {
		t.Fatalf("undecrypted value = %q: want base64 ciphertext without the plaintext", p.GetValue())
	}
	if p := e.get(t, "/db/password", true); p.GetValue() != "hunter2" || p.GetType() != ssm.SecureString {
		t.Fatalf("decrypted = %q %s", p.GetValue(), p.GetType())
	}
	// String values are plaintext either way.
	if p := e.get(t, "/db/host", false); p.GetValue() != "db.local" {
		t.Fatalf("String value = %q", p.GetValue())
	}
	if h := e.history(t, "/db/password", false); len(h) != 1 || h[0].GetValue() == "hunter2" {
		t.Fatalf("history without decryption shows %q", h[0].GetValue())
	}
	if h := e.history(t, "/db/password", true); h[0].GetValue() != "hunter2" || h[0].GetKeyId() != "alias/aws/ssm" {
		t.Fatalf("history with decryption = %q key %q", h[0].GetValue(), h[0].GetKeyId())
	}

	// KeyId: AWS's default key for SecureString, the caller's when given, none for String.
	res, err := e.h.DescribeParameters(e.ctx, connect.NewRequest(&ssmv1.DescribeParametersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	keyIDs := map[string]string{}
	for _, m := range res.Msg.GetParameters() {
		keyIDs[m.GetName()] = m.GetKeyId()
	}
	if want := map[string]string{"/db/password": "alias/aws/ssm", "/db/token": "alias/mine", "/db/host": ""}; !mapsEqual(keyIDs, want) {
		t.Fatalf("KeyIds = %v, want %v", keyIDs, want)
	}

	// Changing a SecureString to a String drops its key.
	e.put(t, &ssmv1.PutParameterRequest{Name: str("/db/token"), Value: str("plain"), Type: str(ssm.String), Overwrite: true})
	if h := e.history(t, "/db/token", false); h[1].GetKeyId() != "" || h[1].GetValue() != "plain" {
		t.Fatalf("after the change to String: KeyId %q value %q", h[1].GetKeyId(), h[1].GetValue())
	}

	// Resolve (ECS task secrets) always decrypts.
	for id, want := range map[string]string{
		"/db/password": "hunter2",
		"arn:aws:ssm:us-east-1:" + account + ":parameter/db/password": "hunter2",
		"/db/token:1": "tok",
		"/db/token":   "plain",
	} {
		got, err := e.h.Resolve(t.Context(), scope, id)
		if err != nil || got != want {
			t.Errorf("Resolve(%s) = %q, %v; want %q", id, got, err, want)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestSelectorsAndARNs(t *testing.T) {
	e := newEnv(t)
	e.put(t, putReq("/a/b", "v1", ssm.String))
	e.put(t, &ssmv1.PutParameterRequest{Name: str("/a/b"), Value: str("v2"), Overwrite: true})
	e.put(t, putReq("plain", "p", ssm.String))
	if _, err := e.h.LabelParameterVersion(e.ctx, connect.NewRequest(&ssmv1.LabelParameterVersionRequest{Name: str("/a/b"), ParameterVersion: 1, Labels: []string{"prod"}})); err != nil {
		t.Fatal(err)
	}
	arn := "arn:aws:ssm:us-east-1:" + account + ":parameter/a/b"
	for _, tc := range []struct {
		id                  string
		wantValue, selector string
		wantVersion         int64
	}{
		{"/a/b", "v2", "", 2},
		{"/a/b:1", "v1", ":1", 1},
		{"/a/b:2", "v2", ":2", 2},
		{"/a/b:prod", "v1", ":prod", 1},
		{arn, "v2", "", 2},
		{arn + ":1", "v1", ":1", 1},
		{arn + ":prod", "v1", ":prod", 1},
		{"arn:aws:ssm:us-east-1:" + account + ":parameter/plain", "p", "", 1},
	} {
		p := e.get(t, tc.id, false)
		if p.GetValue() != tc.wantValue || p.GetVersion() != tc.wantVersion || p.GetSelector() != tc.selector {
			t.Errorf("GetParameter(%s) = %q v%d selector %q; want %q v%d %q", tc.id, p.GetValue(), p.GetVersion(), p.GetSelector(), tc.wantValue, tc.wantVersion, tc.selector)
		}
	}
	for _, tc := range []struct{ id, errType, msg string }{
		{"/a/b:3", "ParameterVersionNotFound", "could not find version 3 of /a/b"},
		{"/a/b:staging", "ParameterVersionNotFound", "could not find label staging of /a/b"},
		{"/a/c", "ParameterNotFound", "Parameter /a/c not found."},
		{"arn:aws:ssm:eu-west-1:" + account + ":parameter/a/b", "ParameterNotFound", ""}, // another region's
		{"arn:aws:ssm:us-east-1:999999999999:parameter/a/b", "ParameterNotFound", ""},    // another account's
		{"arn:aws:ssm:us-east-1:" + account + ":document/a/b", "ValidationException", "is not valid"},
		{"arn:aws:s3:us-east-1:" + account + ":parameter/a/b", "ValidationException", "is not valid"},
	} {
		_, err := e.h.GetParameter(e.ctx, connect.NewRequest(&ssmv1.GetParameterRequest{Name: str(tc.id)}))
		t.Run(tc.id, func(t *testing.T) { wantErr(t, err, tc.errType, tc.msg) })
	}
	// Another region of the same account sees nothing.
	other := caller.With(t.Context(), caller.Identity{Account: account, Region: "eu-west-1"})
	_, err := e.h.GetParameter(other, connect.NewRequest(&ssmv1.GetParameterRequest{Name: str("/a/b")}))
	wantErr(t, err, "ParameterNotFound", "")
}

func TestGetParameters(t *testing.T) {
	e := newEnv(t)
	e.put(t, putReq("/x", "1", ssm.String))
	e.put(t, putReq("/y", "2", ssm.SecureString))
	res, err := e.h.GetParameters(e.ctx, connect.NewRequest(&ssmv1.GetParametersRequest{
		Names: []string{"/x", "/missing", "/y", "/x:9", "arn:aws:ssm:us-east-1:" + account + ":nope/x"}, WithDecryption: true,
	}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range res.Msg.GetParameters() {
		got = append(got, p.GetName()+"="+p.GetValue())
	}
	if want := []string{"/x=1", "/y=2"}; !slices.Equal(got, want) {
		t.Errorf("Parameters = %v, want %v", got, want)
	}
	if want := []string{"/missing", "/x:9", "arn:aws:ssm:us-east-1:" + account + ":nope/x"}; !slices.Equal(res.Msg.GetInvalidParameters(), want) {
		t.Errorf("InvalidParameters = %v, want %v", res.Msg.GetInvalidParameters(), want)
	}
	for _, n := range []int{0, 11} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprint("/p", i)
		}
		_, err := e.h.GetParameters(e.ctx, connect.NewRequest(&ssmv1.GetParametersRequest{Names: names}))
		wantErr(t, err, "ValidationException", "at 'names' failed to satisfy constraint")
	}
}

func filter(key, option string, values ...string) *ssmv1.ParameterStringFilter {
	f := &ssmv1.ParameterStringFilter{Key: str(key), Values: values}
	if option != "" {
		f.Option = str(option)
	}
	return f
}

func TestGetParametersByPath(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"/app/a", "/app/b", "/app/sub/c", "/app/sub/deep/d", "/apple", "/other/x"} {
		e.put(t, putReq(n, "v"+n, ssm.String))
	}
	e.put(t, putReq("/app/s", "secret", ssm.SecureString))
	if _, err := e.h.LabelParameterVersion(e.ctx, connect.NewRequest(&ssmv1.LabelParameterVersionRequest{Name: str("/app/b"), Labels: []string{"live"}})); err != nil {
		t.Fatal(err)
	}

	byPath := func(t *testing.T, req *ssmv1.GetParametersByPathRequest) []string {
		t.Helper()
		var names []string
		pages := 0
		for page := 0; ; page++ {
			if page == 100 {
				t.Fatal("paging does not end")
			}
			res, err := e.h.GetParametersByPath(e.ctx, connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, p := range res.Msg.GetParameters() {
				names = append(names, p.GetName())
			}
			if res.Msg.NextToken == nil {
				break
			}
			req.NextToken = res.Msg.NextToken
		}
		if req.MaxResults == 1 && pages != len(names) {
			t.Errorf("MaxResults 1: %d pages for %d parameters", pages, len(names))
		}
		return names
	}
	for _, tc := range []struct {
		name string
		req  *ssmv1.GetParametersByPathRequest
		want []string
	}{
		{"one level", &ssmv1.GetParametersByPathRequest{Path: str("/app")}, []string{"/app/a", "/app/b", "/app/s"}},
		{"trailing slash", &ssmv1.GetParametersByPathRequest{Path: str("/app/")}, []string{"/app/a", "/app/b", "/app/s"}},
		{"recursive", &ssmv1.GetParametersByPathRequest{Path: str("/app"), Recursive: true}, []string{"/app/a", "/app/b", "/app/s", "/app/sub/c", "/app/sub/deep/d"}},
		{"paged", &ssmv1.GetParametersByPathRequest{Path: str("/app"), Recursive: true, MaxResults: 1}, []string{"/app/a", "/app/b", "/app/s", "/app/sub/c", "/app/sub/deep/d"}},
		{"root", &ssmv1.GetParametersByPathRequest{Path: str("/")}, []string{"/apple"}},
		{"type", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Type", "Equals", ssm.SecureString)}}, []string{"/app/s"}},
		{"label", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Label", "", "live")}}, []string{"/app/b"}},
		{"type begins with", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Type", "BeginsWith", "Secure")}}, []string{"/app/s"}},
		{"no match", &ssmv1.GetParametersByPathRequest{Path: str("/none")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := byPath(t, tc.req); !slices.Equal(got, tc.want) {
				t.Fatalf("names = %v, want %v", got, tc.want)
			}
		})
	}

	// A SecureString is opaque unless WithDecryption.
	res, err := e.h.GetParametersByPath(e.ctx, connect.NewRequest(&ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Type", "", ssm.SecureString)}, WithDecryption: true}))
	if err != nil || res.Msg.GetParameters()[0].GetValue() != "secret" {
		t.Fatalf("decrypted by path: %v %v", res, err)
	}

	for _, tc := range []struct {
		name         string
		req          *ssmv1.GetParametersByPathRequest
		errType, msg string
	}{
		{"relative path", &ssmv1.GetParametersByPathRequest{Path: str("app")}, "ValidationException", `must begin with a forward slash "/"`},
		{"Name filter", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Name", "", "/app/a")}}, "InvalidFilterKey", "Name"},
		{"Path filter", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Path", "", "/app")}}, "InvalidFilterKey", "Path"},
		{"Tier filter", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Tier", "", "Standard")}}, "InvalidFilterKey", "Tier"},
		{"unknown key", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Color", "", "red")}}, "InvalidFilterKey", "Color"},
		{"bad option", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Label", "BeginsWith", "l")}}, "InvalidFilterOption", "The following filter option is not valid: BeginsWith. Valid options include: [Equals]."},
		// AWS's ParameterStringFilter reference: GetParametersByPath takes no tag, DataType,
		// Name, Path or Tier key.
		{"tag filter", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("tag:team", "", "red")}}, "InvalidFilterKey", "The following filter key is not valid: tag:team. Valid filter keys include: [Type, KeyId, Label]."},
		{"DataType filter", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("DataType", "", "text")}}, "InvalidFilterKey", "The following filter key is not valid: DataType."},
		{"Contains option", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Type", "Contains", "S")}}, "InvalidFilterOption", "Valid options include: [Equals, BeginsWith]."},
		{"no values", &ssmv1.GetParametersByPathRequest{Path: str("/app"), ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Type", "")}}, "InvalidFilterValue", ""},
		{"max results", &ssmv1.GetParametersByPathRequest{Path: str("/app"), MaxResults: 11}, "ValidationException", "Member must have value between 1 and 10"},
		{"negative max results", &ssmv1.GetParametersByPathRequest{Path: str("/app"), MaxResults: -1}, "ValidationException", "Member must have value between 1 and 10"},
		{"bad token", &ssmv1.GetParametersByPathRequest{Path: str("/app"), NextToken: str("not-a-token")}, "InvalidNextToken", "The specified token isn't valid."},
		{"forged token", &ssmv1.GetParametersByPathRequest{Path: str("/app"), NextToken: str(base64.RawURLEncoding.EncodeToString([]byte("o:-5")))}, "InvalidNextToken", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.GetParametersByPath(e.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, tc.errType, tc.msg)
		})
	}
}

func TestDescribeParameters(t *testing.T) {
	e := newEnv(t)
	e.put(t, &ssmv1.PutParameterRequest{Name: str("/svc/api/url"), Value: str("u"), Type: str(ssm.String), Description: str("the url"), AllowedPattern: str(".*")})
	e.put(t, &ssmv1.PutParameterRequest{Name: str("/svc/api/key"), Value: str("k"), Type: str(ssm.SecureString), Tier: str("Advanced")})
	e.put(t, &ssmv1.PutParameterRequest{Name: str("/svc/web"), Value: str("w"), Type: str(ssm.StringList), Tags: []*ssmv1.Tag{tag("team", "red")}})
	e.put(t, putReq("plain", "p", ssm.String))
	e.put(t, &ssmv1.PutParameterRequest{Name: str("plain"), Value: str("p2"), Overwrite: true})

	describe := func(t *testing.T, req *ssmv1.DescribeParametersRequest) ([]*ssmv1.ParameterMetadata, int) {
		t.Helper()
		var out []*ssmv1.ParameterMetadata
		pages := 0
		for page := 0; ; page++ {
			if page == 100 {
				t.Fatal("paging does not end")
			}
			res, err := e.h.DescribeParameters(e.ctx, connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			pages++
			out = append(out, res.Msg.GetParameters()...)
			if res.Msg.NextToken == nil {
				return out, pages
			}
			req.NextToken = res.Msg.NextToken
		}
	}
	names := func(ms []*ssmv1.ParameterMetadata) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.GetName())
		}
		return out
	}
	for _, tc := range []struct {
		name string
		req  *ssmv1.DescribeParametersRequest
		want []string
	}{
		{"all", &ssmv1.DescribeParametersRequest{}, []string{"/svc/api/key", "/svc/api/url", "/svc/web", "plain"}},
		{"name begins with", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Name", "BeginsWith", "/svc/api")}}, []string{"/svc/api/key", "/svc/api/url"}},
		{"name contains", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Name", "Contains", "web", "plain")}}, []string{"/svc/web", "plain"}},
		{"name equals", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Name", "", "/svc/web")}}, []string{"/svc/web"}},
		{"type", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Type", "", ssm.StringList, ssm.SecureString)}}, []string{"/svc/api/key", "/svc/web"}},
		{"tier", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Tier", "", "Advanced")}}, []string{"/svc/api/key"}},
		{"key id", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("KeyId", "", "alias/aws/ssm")}}, []string{"/svc/api/key"}},
		{"tag", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("tag:team", "", "red")}}, []string{"/svc/web"}},
		// BeginsWith is valid for every key but Path (AWS's ParameterStringFilter reference).
		{"tag begins with", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("tag:team", "BeginsWith", "r")}}, []string{"/svc/web"}},
		{"type begins with", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Type", "BeginsWith", "Secure")}}, []string{"/svc/api/key"}},
		{"tier begins with", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Tier", "BeginsWith", "Adv")}}, []string{"/svc/api/key"}},
		{"key id begins with", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("KeyId", "BeginsWith", "alias/")}}, []string{"/svc/api/key"}},
		{"data type begins with", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("DataType", "BeginsWith", "te")}}, []string{"/svc/api/key", "/svc/api/url", "/svc/web", "plain"}},
		{"path one level", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Path", "OneLevel", "/svc")}}, []string{"/svc/web"}},
		{"path recursive", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Path", "Recursive", "/svc")}}, []string{"/svc/api/key", "/svc/api/url", "/svc/web"}},
		{"two filters AND", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Path", "Recursive", "/svc"), filter("Type", "", ssm.String)}}, []string{"/svc/api/url"}},
		{"legacy Name filter is a prefix", &ssmv1.DescribeParametersRequest{Filters: []*ssmv1.ParametersFilter{{Key: str("Name"), Values: []string{"/svc/a"}}}}, []string{"/svc/api/key", "/svc/api/url"}},
		{"legacy Type filter", &ssmv1.DescribeParametersRequest{Filters: []*ssmv1.ParametersFilter{{Key: str("Type"), Values: []string{ssm.StringList}}}}, []string{"/svc/web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := describe(t, tc.req)
			if !slices.Equal(names(got), tc.want) {
				t.Fatalf("names = %v, want %v", names(got), tc.want)
			}
		})
	}

	all, pages := describe(t, &ssmv1.DescribeParametersRequest{MaxResults: 3})
	if pages != 2 || len(all) != 4 {
		t.Fatalf("MaxResults 3: %d parameters in %d pages, want 4 in 2", len(all), pages)
	}
	byName := map[string]*ssmv1.ParameterMetadata{}
	for _, m := range all {
		byName[m.GetName()] = m
	}
	url := byName["/svc/api/url"]
	if url.GetDescription() != "the url" || url.GetAllowedPattern() != ".*" || url.GetType() != ssm.String || url.GetTier() != "Standard" ||
		url.GetDataType() != "text" || url.GetVersion() != 1 || url.GetArn() != ssm.ARN(scope, "/svc/api/url") || url.GetLastModifiedUser() != "arn:aws:iam::"+account+":root" {
		t.Errorf("metadata of /svc/api/url = %v", url)
	}
	if p := byName["plain"]; p.GetVersion() != 2 || p.GetArn() != "arn:aws:ssm:us-east-1:"+account+":parameter/plain" {
		t.Errorf("metadata of plain = v%d %s", p.GetVersion(), p.GetArn())
	}

	for _, tc := range []struct {
		name         string
		req          *ssmv1.DescribeParametersRequest
		errType, msg string
	}{
		{"both filter kinds", &ssmv1.DescribeParametersRequest{Filters: []*ssmv1.ParametersFilter{{Key: str("Name"), Values: []string{"x"}}}, ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Type", "", ssm.String)}}, "ValidationException", "either Filters or ParameterFilters"},
		{"shared", &ssmv1.DescribeParametersRequest{Shared: true}, "ValidationException", "Shared is not supported"},
		{"path option", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Path", "Equals", "/svc")}}, "InvalidFilterOption", "Recursive, OneLevel"},
		{"type option", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Type", "Contains", "S")}}, "InvalidFilterOption", "The following filter option is not valid: Contains. Valid options include: [Equals, BeginsWith]."},
		{"label", &ssmv1.DescribeParametersRequest{ParameterFilters: []*ssmv1.ParameterStringFilter{filter("Label", "", "live")}}, "InvalidFilterKey", "The following filter key is not valid: Label. Valid filter keys include: [Path, Name, Type, KeyId, Tier, DataType, tag:]."},
		{"max results", &ssmv1.DescribeParametersRequest{MaxResults: 51}, "ValidationException", "between 1 and 50"},
		{"token", &ssmv1.DescribeParametersRequest{NextToken: str("!!")}, "InvalidNextToken", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.DescribeParameters(e.ctx, connect.NewRequest(tc.req))
			wantErr(t, err, tc.errType, tc.msg)
		})
	}
}

func (e env) label(t *testing.T, name string, version int64, labels ...string) *ssmv1.LabelParameterVersionResponse {
	t.Helper()
	res, err := e.h.LabelParameterVersion(e.ctx, connect.NewRequest(&ssmv1.LabelParameterVersionRequest{Name: str(name), ParameterVersion: version, Labels: labels}))
	if err != nil {
		t.Fatalf("LabelParameterVersion %s:%d %v: %v", name, version, labels, err)
	}
	return res.Msg
}

func labelsByVersion(t *testing.T, e env, name string) map[int64][]string {
	t.Helper()
	out := map[int64][]string{}
	for _, h := range e.history(t, name, false) {
		out[h.GetVersion()] = h.GetLabels()
	}
	return out
}

func TestLabels(t *testing.T) {
	e := newEnv(t)
	e.put(t, putReq("p", "1", ssm.String))
	e.put(t, &ssmv1.PutParameterRequest{Name: str("p"), Value: str("2"), Overwrite: true})

	// Without ParameterVersion the latest version is labelled.
	if r := e.label(t, "p", 0, "prod", "blue"); r.GetParameterVersion() != 2 || len(r.GetInvalidLabels()) != 0 {
		t.Fatalf("label latest = v%d invalid %v", r.GetParameterVersion(), r.GetInvalidLabels())
	}
	// A label moves: attaching it to version 1 takes it from version 2.
	e.label(t, "p", 1, "prod")
	got := labelsByVersion(t, e, "p")
	if !slices.Equal(got[1], []string{"prod"}) || !slices.Equal(got[2], []string{"blue"}) {
		t.Fatalf("labels = %v, want 1:[prod] 2:[blue]", got)
	}
	if p := e.get(t, "p:prod", false); p.GetValue() != "1" {
		t.Fatalf("p:prod = %q, want version 1's value", p.GetValue())
	}

	// Invalid labels are returned, valid ones in the same call attached.
	long := "l" + strings.Repeat("x", 100)
	r := e.label(t, "p", 2, "ok-label_1.x", "1starts-with-digit", "awsLabel", "SSM-label", "has space", "slash/no", long)
	if want := []string{"1starts-with-digit", "awsLabel", "SSM-label", "has space", "slash/no", long}; !slices.Equal(r.GetInvalidLabels(), want) {
		t.Errorf("InvalidLabels = %v, want %v", r.GetInvalidLabels(), want)
	}
	if got := labelsByVersion(t, e, "p")[2]; !slices.Equal(got, []string{"blue", "ok-label_1.x"}) {
		t.Errorf("version 2 labels = %v, want [blue ok-label_1.x]", got)
	}

	// Limits: 1 to 10 labels a call; 10 labels a version.
	for _, n := range []int{0, 11} {
		labels := make([]string, n)
		for i := range labels {
			labels[i] = fmt.Sprint("l", i)
		}
		_, err := e.h.LabelParameterVersion(e.ctx, connect.NewRequest(&ssmv1.LabelParameterVersionRequest{Name: str("p"), Labels: labels}))
		wantErr(t, err, "ValidationException", "Member must have length between 1 and 10")
	}
	e.label(t, "p", 2, "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8") // 10 now
	_, err := e.h.LabelParameterVersion(e.ctx, connect.NewRequest(&ssmv1.LabelParameterVersionRequest{Name: str("p"), ParameterVersion: 2, Labels: []string{"eleven"}}))
	wantErr(t, err, "ParameterVersionLabelLimitExceeded", "maximum of 10 labels")
	if got := labelsByVersion(t, e, "p")[2]; len(got) != 10 || slices.Contains(got, "eleven") {
		t.Errorf("a refused label changed version 2: %v", got)
	}
	_, err = e.h.LabelParameterVersion(e.ctx, connect.NewRequest(&ssmv1.LabelParameterVersionRequest{Name: str("p"), ParameterVersion: 7, Labels: []string{"x"}}))
	wantErr(t, err, "ParameterVersionNotFound", "could not find version 7 of p")
	_, err = e.h.LabelParameterVersion(e.ctx, connect.NewRequest(&ssmv1.LabelParameterVersionRequest{Name: str("nope"), Labels: []string{"x"}}))
	wantErr(t, err, "ParameterNotFound", "")

	// Unlabel reports what it removed and what the version did not have.
	res, err := e.h.UnlabelParameterVersion(e.ctx, connect.NewRequest(&ssmv1.UnlabelParameterVersionRequest{Name: str("p"), ParameterVersion: 1, Labels: []string{"prod", "blue"}}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Msg.GetRemovedLabels(), []string{"prod"}) || !slices.Equal(res.Msg.GetInvalidLabels(), []string{"blue"}) {
		t.Fatalf("unlabel = removed %v invalid %v, want [prod] [blue]", res.Msg.GetRemovedLabels(), res.Msg.GetInvalidLabels())
	}
	if got := labelsByVersion(t, e, "p")[1]; len(got) != 0 {
		t.Errorf("version 1 labels after unlabel = %v", got)
	}
	_, err = e.h.GetParameter(e.ctx, connect.NewRequest(&ssmv1.GetParameterRequest{Name: str("p:prod")}))
	wantErr(t, err, "ParameterVersionNotFound", "label prod")
	_, err = e.h.UnlabelParameterVersion(e.ctx, connect.NewRequest(&ssmv1.UnlabelParameterVersionRequest{Name: str("p"), ParameterVersion: 5, Labels: []string{"x"}}))
	wantErr(t, err, "ParameterVersionNotFound", "")
}

func TestVersionLimit(t *testing.T) {
	e := newEnv(t)
	e.put(t, putReq("p", "v1", ssm.String))
	for i := 2; i <= 100; i++ {
		e.put(t, &ssmv1.PutParameterRequest{Name: str("p"), Value: str(fmt.Sprint("v", i)), Overwrite: true})
	}
	if h := e.history(t, "p", false); len(h) != 100 || h[0].GetVersion() != 1 || h[99].GetVersion() != 100 {
		t.Fatalf("history has %d versions, want 1..100", len(h))
	}
	// The 101st version drops the oldest.
	if r := e.put(t, &ssmv1.PutParameterRequest{Name: str("p"), Value: str("v101"), Overwrite: true}); r.GetVersion() != 101 {
		t.Fatalf("version = %d, want 101", r.GetVersion())
	}
	h := e.history(t, "p", false)
	if len(h) != 100 || h[0].GetVersion() != 2 || h[99].GetValue() != "v101" {
		t.Fatalf("history after 101 puts: %d versions from %d, want 100 from 2", len(h), h[0].GetVersion())
	}
	_, err := e.h.GetParameter(e.ctx, connect.NewRequest(&ssmv1.GetParameterRequest{Name: str("p:1")}))
	wantErr(t, err, "ParameterVersionNotFound", "")
	// The oldest cannot be dropped while it has a label.
	e.label(t, "p", 2, "keep")
	_, err = e.h.PutParameter(e.ctx, connect.NewRequest(&ssmv1.PutParameterRequest{Name: str("p"), Value: str("v102"), Overwrite: true}))
	wantErr(t, err, "ParameterMaxVersionLimitExceeded", "Version 2, the oldest version, can't be deleted because it has a label associated with it.")
	if p := e.get(t, "p", false); p.GetVersion() != 101 {
		t.Fatalf("latest after the refused put = v%d, want 101", p.GetVersion())
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"/a", "/b", "/c"} {
		e.put(t, putReq(n, "v", ssm.String))
	}
	if _, err := e.h.DeleteParameter(e.ctx, connect.NewRequest(&ssmv1.DeleteParameterRequest{Name: str("/a")})); err != nil {
		t.Fatal(err)
	}
	_, err := e.h.DeleteParameter(e.ctx, connect.NewRequest(&ssmv1.DeleteParameterRequest{Name: str("/a")}))
	wantErr(t, err, "ParameterNotFound", "Parameter /a not found.")
	// A deleted name can be created again, from version 1.
	if r := e.put(t, putReq("/a", "again", ssm.String)); r.GetVersion() != 1 {
		t.Fatalf("recreated version = %d", r.GetVersion())
	}

	res, err := e.h.DeleteParameters(e.ctx, connect.NewRequest(&ssmv1.DeleteParametersRequest{Names: []string{"/b", "/missing", "arn:aws:ssm:us-east-1:" + account + ":parameter/c"}}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Msg.GetDeletedParameters(), []string{"/b", "arn:aws:ssm:us-east-1:" + account + ":parameter/c"}) || !slices.Equal(res.Msg.GetInvalidParameters(), []string{"/missing"}) {
		t.Fatalf("DeleteParameters = deleted %v invalid %v", res.Msg.GetDeletedParameters(), res.Msg.GetInvalidParameters())
	}
	_, err = e.h.GetParameter(e.ctx, connect.NewRequest(&ssmv1.GetParameterRequest{Name: str("/c")}))
	wantErr(t, err, "ParameterNotFound", "")
	for _, n := range []int{0, 11} {
		_, err := e.h.DeleteParameters(e.ctx, connect.NewRequest(&ssmv1.DeleteParametersRequest{Names: make([]string, n)}))
		wantErr(t, err, "ValidationException", "'names'")
	}
}

func TestTags(t *testing.T) {
	e := newEnv(t)
	e.put(t, &ssmv1.PutParameterRequest{Name: str("/p"), Value: str("v"), Type: str(ssm.String), Tags: []*ssmv1.Tag{tag("env", "dev")}})
	list := func(t *testing.T) map[string]string {
		t.Helper()
		res, err := e.h.ListTagsForResource(e.ctx, connect.NewRequest(&ssmv1.ListTagsForResourceRequest{ResourceType: str("Parameter"), ResourceId: str("/p")}))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, tg := range res.Msg.GetTagList() {
			out[tg.GetKey()] = tg.GetValue()
		}
		return out
	}
	if got := list(t); !mapsEqual(got, map[string]string{"env": "dev"}) {
		t.Fatalf("tags at creation = %v", got)
	}
	add := func(tags ...*ssmv1.Tag) error {
		_, err := e.h.AddTagsToResource(e.ctx, connect.NewRequest(&ssmv1.AddTagsToResourceRequest{ResourceType: str("Parameter"), ResourceId: str("/p"), Tags: tags}))
		return err
	}
	if err := add(tag("env", "prod"), tag("team", "red")); err != nil {
		t.Fatal(err)
	}
	if got := list(t); !mapsEqual(got, map[string]string{"env": "prod", "team": "red"}) {
		t.Fatalf("tags after add = %v", got)
	}
	if _, err := e.h.RemoveTagsFromResource(e.ctx, connect.NewRequest(&ssmv1.RemoveTagsFromResourceRequest{ResourceType: str("Parameter"), ResourceId: str("/p"), TagKeys: []string{"env", "absent"}})); err != nil {
		t.Fatal(err)
	}
	if got := list(t); !mapsEqual(got, map[string]string{"team": "red"}) {
		t.Fatalf("tags after remove = %v", got)
	}

	wantErr(t, add(tag("aws:x", "v")), "ValidationException", "reserved prefix aws:")
	var many []*ssmv1.Tag
	for i := range 50 {
		many = append(many, tag(fmt.Sprint("k", i), "v"))
	}
	wantErr(t, add(many...), "TooManyTagsError", "at most 50 tags") // 50 new + "team"
	if got := list(t); len(got) != 1 {
		t.Fatalf("a refused AddTags changed the tags: %v", got)
	}
	_, err := e.h.AddTagsToResource(e.ctx, connect.NewRequest(&ssmv1.AddTagsToResourceRequest{ResourceType: str("Document"), ResourceId: str("/p"), Tags: []*ssmv1.Tag{tag("k", "v")}}))
	wantErr(t, err, "InvalidResourceType", "Document")
	_, err = e.h.ListTagsForResource(e.ctx, connect.NewRequest(&ssmv1.ListTagsForResourceRequest{ResourceType: str("Parameter"), ResourceId: str("/missing")}))
	wantErr(t, err, "InvalidResourceId", `The resource ID "/missing" is not valid.`)
}

func TestWithoutKeyring(t *testing.T) {
	h := ssm.New(etcdtest.Start(t), nil, nil)
	ctx := caller.With(t.Context(), caller.Identity{Account: account, Region: scope.Region})
	_, err := h.PutParameter(ctx, connect.NewRequest(putReq("p", "v", ssm.String)))
	wantErr(t, err, "InternalServerError", "no secrets key")
	if _, err := h.Resolve(t.Context(), scope, "p"); err != ssm.ErrNoKeyring {
		t.Fatalf("Resolve err = %v, want ErrNoKeyring", err)
	}
}

func TestNoIdentity(t *testing.T) {
	e := newEnv(t)
	_, err := e.h.GetParameter(t.Context(), connect.NewRequest(&ssmv1.GetParameterRequest{Name: str("p")}))
	wantErr(t, err, "AccessDeniedException", "")
}

func TestUnservedActionsAreUnimplemented(t *testing.T) {
	e := newEnv(t)
	_, err := e.h.GetParameter(e.ctx, connect.NewRequest(&ssmv1.GetParameterRequest{Name: str("p")}))
	wantErr(t, err, "ParameterNotFound", "")
	_, err = e.h.DescribeDocument(e.ctx, connect.NewRequest(&ssmv1.DescribeDocumentRequest{}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("DescribeDocument err = %v, want CodeUnimplemented", err)
	}
}

func TestValueSealedWithAnotherKeyring(t *testing.T) {
	kv := etcdtest.Start(t)
	ctx := caller.With(t.Context(), caller.Identity{Account: account, Region: scope.Region})
	writer, reader := ssm.New(kv, newRing(t), nil), ssm.New(kv, newRing(t), nil)
	if _, err := writer.PutParameter(ctx, connect.NewRequest(putReq("/s", "secret", ssm.SecureString))); err != nil {
		t.Fatal(err)
	}
	_, err := reader.GetParameter(ctx, connect.NewRequest(&ssmv1.GetParameterRequest{Name: str("/s"), WithDecryption: true}))
	wantErr(t, err, "InvalidKeyId", "can't be decrypted with the keyring of this deployment")
	if _, err := reader.Resolve(t.Context(), scope, "/s"); err == nil {
		t.Fatal("Resolve with another keyring succeeded")
	}
	// Undecrypted reads need no key.
	if _, err := reader.GetParameter(ctx, connect.NewRequest(&ssmv1.GetParameterRequest{Name: str("/s")})); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Resolve(t.Context(), scope, "/missing"); err == nil || !strings.Contains(err.Error(), "ParameterNotFound") {
		t.Fatalf("Resolve of a missing parameter = %v", err)
	}
}
