package ecr_test

import (
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// SetRepositoryPolicy refuses what is not a policy Berth evaluates, naming why.
func TestRepositoryPolicyValidation(t *testing.T) {
	e := newEnv(t)
	if _, err := e.create(t, &ecrv1.CreateRepositoryRequest{RepositoryName: proto.String("app")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, text, msg string }{
		{"not JSON", `{"Version":`, "Invalid repository policy"},
		{"version", `{"Version":"2020-01-01","Statement":[{"Effect":"Allow","Principal":"*","Action":"ecr:*"}]}`, "Version"},
		{"no statement", `{"Version":"2012-10-17","Statement":[]}`, "no Statement"},
		{"effect", `{"Version":"2012-10-17","Statement":[{"Effect":"Maybe","Principal":"*","Action":"ecr:*"}]}`, "Effect"},
		{"no action", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*"}]}`, "Action"},
		{"s3 action", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject"}]}`, "s3:GetObject"},
		{"condition", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"ecr:*","Condition":{}}]}`, "Condition"},
		{"not principal", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","NotPrincipal":"*","Action":"ecr:*"}]}`, "NotPrincipal"},
		{"service principal", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"x"},"Action":"ecr:*"}]}`, "Service"},
		{"bad account", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"12345"},"Action":"ecr:*"}]}`, "12345"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.SetRepositoryPolicy(e.ctx, connect.NewRequest(&ecrv1.SetRepositoryPolicyRequest{RepositoryName: proto.String("app"), PolicyText: proto.String(tc.text)}))
			wantErr(t, err, "InvalidParameterException", tc.msg)
		})
	}
	_, err := e.h.GetRepositoryPolicy(e.ctx, connect.NewRequest(&ecrv1.GetRepositoryPolicyRequest{RepositoryName: proto.String("app")}))
	wantErr(t, err, "RepositoryPolicyNotFoundException", "app")
}

// PolicyAllows: an Allow naming the account (by ID, root ARN or any of its principals,
// or "*") and the action (globs included), unless a Deny names them too.
func TestPolicyAllows(t *testing.T) {
	const p = `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Principal":{"AWS":["222222222222","arn:aws:iam::333333333333:role/ci"]},"Action":["ecr:BatchGetImage","ecr:Get*"]},
		{"Effect":"Allow","Principal":"*","Action":"ecr:ListImages"},
		{"Effect":"Deny","Principal":{"AWS":"arn:aws:iam::333333333333:root"},"Action":"ecr:GetDownloadUrlForLayer"}]}`
	for _, tc := range []struct {
		account, action string
		want            bool
	}{
		{"222222222222", "ecr:BatchGetImage", true},
		{"222222222222", "ecr:GetDownloadUrlForLayer", true},
		{"222222222222", "ecr:PutImage", false},
		{"333333333333", "ecr:BatchGetImage", true},
		{"333333333333", "ecr:GetDownloadUrlForLayer", false},
		{"444444444444", "ecr:ListImages", true},
		{"444444444444", "ecr:BatchGetImage", false},
	} {
		if got := ecr.PolicyAllows(p, tc.account, tc.action); got != tc.want {
			t.Errorf("PolicyAllows(%s, %s) = %v, want %v", tc.account, tc.action, got, tc.want)
		}
	}
	if ecr.PolicyAllows("", "222222222222", "ecr:BatchGetImage") {
		t.Error("an empty policy allows")
	}
	sc := keys.Scope{Account: "111111111111", Region: "us-east-1"}
	if o, r, ok := ecr.CrossAccount(sc, "222222222222/team/web"); !ok || o.Account != "222222222222" || o.Region != "us-east-1" || r != "team/web" {
		t.Errorf("CrossAccount = %v %s %v", o, r, ok)
	}
	for _, n := range []string{"team/web", "111111111111/web", "222222222222"} {
		if _, _, ok := ecr.CrossAccount(sc, n); ok {
			t.Errorf("CrossAccount(%s) ok", n)
		}
	}
}
