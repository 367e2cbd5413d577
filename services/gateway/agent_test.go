package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	"github.com/berthhq/berth/pkg/sigv4client"
	"github.com/berthhq/berth/services/gateway"
)

func agentClient(e *env, key, secret string, extra http.Header) agentv1connect.AgentServiceClient {
	base := gateway.NewH2CClient().Transport
	var rt http.RoundTripper = sigv4client.New(base, sigv4client.StaticCredentials(key, secret), region)
	if extra != nil {
		rt = headerAdder{rt, extra}
	}
	return agentv1connect.NewAgentServiceClient(&http.Client{Transport: rt}, e.url)
}

// headerAdder adds headers before signing, as a client forging identity would.
type headerAdder struct {
	next http.RoundTripper
	h    http.Header
}

func (a headerAdder) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range a.h {
		r.Header[k] = v
	}
	return a.next.RoundTrip(r)
}

func TestAgentRelay(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()

	// The relay replaces client-sent identity with the credential's, and strips the
	// signature.
	forged := http.Header{identity.AccountHeader: {otherAccount}, identity.ContainerInstanceHeader: {"arn:forged"}}
	c := agentClient(e, agentKey, agentSecret, forged)
	res, err := c.Register(ctx, connect.NewRequest(&agentv1.RegisterRequest{Cluster: "default", HostId: "h1"}))
	if err != nil {
		t.Fatal(err)
	}
	want := "account=" + devAccount + " instance=" + instanceARN + " rid=true auth=false"
	if res.Msg.GetClusterArn() != want {
		t.Errorf("scheduler saw %q, want %q", res.Msg.GetClusterArn(), want)
	}

	// A bidi stream works through the relay, message by message.
	stream := c.Session(ctx)
	for i := uint64(1); i <= 3; i++ {
		if err := stream.Send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Hello{Hello: &agentv1.Hello{ContainerInstanceArn: instanceARN}}}); err != nil {
			t.Fatal(err)
		}
		got, err := stream.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if seqs := got.GetStateAck().GetSeqs(); len(seqs) != 1 || seqs[0] != i {
			t.Fatalf("ack %d = %v", i, seqs)
		}
	}
	_ = stream.CloseRequest()
	_ = stream.CloseResponse()

	// Bad credentials are refused with a Connect error the agent understands.
	_, err = agentClient(e, agentKey, "wrong", nil).Register(ctx, connect.NewRequest(&agentv1.RegisterRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "InvalidSignatureException") {
		t.Errorf("wrong secret: %v", err)
	}
	bad := agentClient(e, "AKIANOBODY", "x", nil).Session(ctx)
	_ = bad.Send(&agentv1.SessionRequest{})
	if _, err := bad.Receive(); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("unknown key stream: %v", err)
	}
	_ = bad.CloseRequest()
	_ = bad.CloseResponse()

	// Unsigned requests too.
	plain := agentv1connect.NewAgentServiceClient(gateway.NewH2CClient(), e.url)
	_, err = plain.Register(ctx, connect.NewRequest(&agentv1.RegisterRequest{}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnauthenticated {
		t.Errorf("unsigned: %v", err)
	}
}

// TestAgentRelayRefusesSessionCredentials: a task role's session credentials, valid for
// the AWS APIs, never act as an agent (else a task could ask for other tasks' credentials).
func TestAgentRelayRefusesSessionCredentials(t *testing.T) {
	e := newEnv(t, nil)
	rt := sigv4client.New(gateway.NewH2CClient().Transport, aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: sessionKey, SecretAccessKey: sessionSecret, SessionToken: sessionToken}, nil
	}), region)
	c := agentv1connect.NewAgentServiceClient(&http.Client{Transport: rt}, e.url)
	_, err := c.GetTaskCredentials(context.Background(), connect.NewRequest(&agentv1.GetTaskCredentialsRequest{TaskArn: "arn:aws:ecs:us-east-1:000000000000:task/default/x"}))
	if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "AccessDeniedException") {
		t.Fatalf("GetTaskCredentials with session credentials: %v, want permission_denied AccessDeniedException", err)
	}
}

// TestSessionCredentialsExpire: session credentials (SigV4 with X-Amz-Security-Token) are
// accepted until their Expiration and refused after it by the gateway's clock, although
// their resolution is cached for longer; a wrong token is refused before.
func TestSessionCredentialsExpire(t *testing.T) {
	e := newEnv(t, func(c *gateway.Config) { c.KeyCacheTTL = time.Hour })
	call := func(token string) rawResponse {
		t.Helper()
		const body = `{}`
		req, _ := http.NewRequest(http.MethodPost, e.url+"/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", gateway.TargetPrefix+"ListClusters")
		sum := sha256.Sum256([]byte(body))
		creds := aws.Credentials{AccessKeyID: expiringKey, SecretAccessKey: sessionSecret, SessionToken: token}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "ecs", region, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if req.Header.Get("X-Amz-Security-Token") != token {
			t.Fatalf("the signer sent no X-Amz-Security-Token")
		}
		return send(t, e, req)
	}
	e.clock.Set(expiringAt.Add(-time.Minute))
	if r := call(sessionToken); r.status != http.StatusOK {
		t.Fatalf("a minute before expiry: %d %s", r.status, r.body)
	}
	if r := call("not-the-token"); r.errTyp != "UnrecognizedClientException" {
		t.Errorf("a wrong session token: %d %s", r.status, r.body)
	}
	e.clock.Set(expiringAt.Add(-time.Second))
	if r := call(sessionToken); r.status != http.StatusOK {
		t.Fatalf("a second before expiry (cached): %d %s", r.status, r.body)
	}
	resolves := e.admin.resolves.Load()
	e.clock.Set(expiringAt)
	if r := call(sessionToken); r.errTyp != "UnrecognizedClientException" {
		t.Errorf("at expiry: %d %s; want UnrecognizedClientException", r.status, r.body)
	}
	e.clock.Set(expiringAt.Add(time.Hour))
	if r := call(sessionToken); r.errTyp != "UnrecognizedClientException" {
		t.Errorf("an hour after expiry: %d %s", r.status, r.body)
	}
	if e.admin.resolves.Load() == resolves {
		t.Error("the cached resolution outlived the credentials' expiration (no resolve after it)")
	}
}
