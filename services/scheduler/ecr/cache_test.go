package ecr_test

import (
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	"github.com/berthhq/berth/services/scheduler/ecr"
)

// CreatePullThroughCacheRule's validation, each refusal naming its field, and which
// rule a repository name falls under.
func TestPullThroughCacheRules(t *testing.T) {
	e := newEnv(t)
	s := proto.String
	create := func(in *ecrv1.CreatePullThroughCacheRuleRequest) error {
		_, err := e.h.CreatePullThroughCacheRule(e.ctx, connect.NewRequest(in))
		return err
	}
	for _, tc := range []struct {
		name string
		in   *ecrv1.CreatePullThroughCacheRuleRequest
		typ  string
		msg  string
	}{
		{"upper case prefix", &ecrv1.CreatePullThroughCacheRuleRequest{EcrRepositoryPrefix: s("Hub"), UpstreamRegistryUrl: s("127.0.0.1:5000")}, "InvalidParameterException", "ecrRepositoryPrefix"},
		{"long prefix", &ecrv1.CreatePullThroughCacheRuleRequest{EcrRepositoryPrefix: s("abcdefghijklmnopqrstuvwxyz01234"), UpstreamRegistryUrl: s("127.0.0.1:5000")}, "InvalidParameterException", "ecrRepositoryPrefix"},
		{"url path", &ecrv1.CreatePullThroughCacheRuleRequest{EcrRepositoryPrefix: s("hub"), UpstreamRegistryUrl: s("https://registry.example/v2/x")}, "InvalidParameterException", "upstreamRegistryUrl"},
		{"empty url", &ecrv1.CreatePullThroughCacheRuleRequest{EcrRepositoryPrefix: s("hub"), UpstreamRegistryUrl: s("")}, "InvalidParameterException", "upstreamRegistryUrl"},
		{"upstream registry", &ecrv1.CreatePullThroughCacheRuleRequest{EcrRepositoryPrefix: s("hub"), UpstreamRegistryUrl: s("r.example"), UpstreamRegistry: s("my-registry")}, "UnsupportedUpstreamRegistryException", "my-registry"},
		{"role", &ecrv1.CreatePullThroughCacheRuleRequest{EcrRepositoryPrefix: s("hub"), UpstreamRegistryUrl: s("r.example"), CustomRoleArn: s("arn:aws:iam::111122223333:role/x")}, "InvalidParameterException", "customRoleArn"},
		{"upstream prefix", &ecrv1.CreatePullThroughCacheRuleRequest{EcrRepositoryPrefix: s("hub"), UpstreamRegistryUrl: s("r.example"), UpstreamRepositoryPrefix: s("A")}, "InvalidParameterException", "upstreamRepositoryPrefix"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, create(tc.in), tc.typ, tc.msg) })
	}
	for _, in := range []*ecrv1.CreatePullThroughCacheRuleRequest{
		{EcrRepositoryPrefix: s("hub/"), UpstreamRegistryUrl: s("registry-1.docker.io")},
		{EcrRepositoryPrefix: s("hub/team"), UpstreamRegistryUrl: s("http://127.0.0.1:5000"), UpstreamRepositoryPrefix: s("mirror")},
		{EcrRepositoryPrefix: s("ROOT"), UpstreamRegistryUrl: s("quay.io")},
	} {
		if err := create(in); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string][2]string{
		"hub/library/nginx": {"hub", "library/nginx"},
		"hub/team/app":      {"hub/team", "mirror/app"},
		"other/app":         {"ROOT", "other/app"},
	} {
		rule, up, ok, err := e.h.CacheRule(e.ctx, scope, name)
		if err != nil || !ok || rule.GetEcrRepositoryPrefix() != want[0] || up != want[1] {
			t.Errorf("CacheRule(%s) = %s %s %v %v, want %v", name, rule.GetEcrRepositoryPrefix(), up, ok, err, want)
		}
	}
	for raw, want := range map[string]struct {
		host  string
		plain bool
	}{
		"127.0.0.1:5000": {"127.0.0.1:5000", true}, "localhost:5000": {"localhost:5000", true},
		"quay.io": {"quay.io", false}, "http://mirror:5000": {"mirror:5000", true}, "https://127.0.0.1:5000": {"127.0.0.1:5000", false},
	} {
		if h, p := ecr.UpstreamHost(raw); h != want.host || p != want.plain {
			t.Errorf("UpstreamHost(%s) = %s %v, want %+v", raw, h, p, want)
		}
	}
}
