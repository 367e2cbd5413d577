package elb_test

import (
	"strings"
	"testing"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const account = "111122223333"

var scope = keys.Scope{Account: account, Region: "us-east-1"}

// arnPrefix is every ELBv2 ARN's start in scope.
const arnPrefix = "arn:aws:elasticloadbalancing:us-east-1:" + account + ":"

type env struct {
	s  *elb.Service
	kv *clientv3.Client
}

func newEnv(t *testing.T) env {
	t.Helper()
	kv := etcdtest.Start(t)
	return env{s: elb.New(kv), kv: kv}
}

func port(p int32) *int32 { return &p }

func ptr[T any](v T) *T { return &v }

// wantCode fails unless err is an *elb.Error of code whose message contains msg. An
// empty code accepts any: for refusals whose code Berth chose outside the model's list
// for the operation, which the tests do not pin.
func wantCode(t *testing.T, err error, code, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	if got := elb.CodeOf(err); got == "" || (code != "" && got != code) {
		t.Fatalf("error = %v (code %q), want %s", err, got, code)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("error = %v, want a message containing %q", err, msg)
	}
}

func (e env) lb(t *testing.T, name, typ string) *storev1.LoadBalancerRecord {
	t.Helper()
	r, err := e.s.CreateLoadBalancer(t.Context(), scope, elb.CreateLoadBalancerInput{Name: name, Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e env) tg(t *testing.T, name, protocol string) *storev1.TargetGroupRecord {
	t.Helper()
	r, err := e.s.CreateTargetGroup(t.Context(), scope, elb.TargetGroupInput{Name: name, Protocol: protocol, Port: port(8080), TargetType: "ip"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func forward(arn string) []elb.ActionInput {
	return []elb.ActionInput{{Type: "forward", TargetGroupArn: arn}}
}

func (e env) listener(t *testing.T, lb *storev1.LoadBalancerRecord, p int32, tgArn string) *storev1.ListenerRecord {
	t.Helper()
	l, err := e.s.CreateListener(t.Context(), scope, elb.ListenerInput{LoadBalancerArn: lb.GetLoadBalancerArn(), Port: port(p), DefaultActions: forward(tgArn)})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
