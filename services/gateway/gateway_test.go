package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/smithy-go"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/gateway"
)

func staticCreds(key, secret string) aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}, nil
	})
}

func sdkClient(e *env, key, secret string) *ecs.Client {
	return ecs.New(ecs.Options{
		BaseEndpoint: aws.String(e.url),
		Region:       region,
		Credentials:  staticCreds(key, secret),
		Retryer:      aws.NopRetryer{},
	})
}

// rawResponse is an HTTP answer read whole.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
	errTyp string
	errMsg string
}

// post sends a SigV4-signed ECS request with the given target and body.
func post(t testing.TB, e *env, target, body, key, secret string) rawResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	if key != "" {
		sum := sha256.Sum256([]byte(body))
		if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}, req, hex.EncodeToString(sum[:]), "ecs", region, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	return send(t, e, req)
}

func send(t testing.TB, e *env, req *http.Request) rawResponse {
	t.Helper()
	res, err := e.httpCli.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	r := rawResponse{status: res.StatusCode, header: res.Header, body: data}
	if res.StatusCode != http.StatusOK {
		var eb struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(data, &eb); err != nil {
			t.Fatalf("error body is not AWS JSON: %q", data)
		}
		r.errTyp, r.errMsg = eb.Type, eb.Message
	}
	if res.Header.Get("X-Amzn-RequestId") == "" {
		t.Errorf("response without x-amzn-RequestId")
	}
	return r
}

// TestSDKRegions: the region of the SigV4 scope travels to the scheduler in
// identity.RegionHeader; one outside the allow-list (default: the public AWS regions, or
// Config.Regions) is refused with AWS's InvalidSignatureException before any call.
func TestSDKRegions(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, r := range []string{"us-east-1", "eu-west-1", "ap-southeast-2"} {
		c := ecs.New(ecs.Options{BaseEndpoint: aws.String(e.url), Region: r, Credentials: staticCreds(devKey, devSecret), Retryer: aws.NopRetryer{}})
		if _, err := c.ListClusters(ctx, &ecs.ListClustersInput{}); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		if got := e.ecs.lastHeader().Get(identity.RegionHeader); got != r {
			t.Errorf("%s = %q, want %s", identity.RegionHeader, got, r)
		}
	}
	calls := e.ecs.calls()
	bad := ecs.New(ecs.Options{BaseEndpoint: aws.String(e.url), Region: "xx-nowhere-1", Credentials: staticCreds(devKey, devSecret), Retryer: aws.NopRetryer{}})
	_, err := bad.ListClusters(ctx, &ecs.ListClustersInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSignatureException" || ae.ErrorMessage() != "Credential should be scoped to a valid region, not 'xx-nowhere-1'." {
		t.Errorf("unknown region: %v", err)
	}
	if e.ecs.calls() != calls {
		t.Error("a refused request reached the scheduler")
	}

	// An operator's allow-list replaces the public regions.
	only := newEnv(t, func(c *gateway.Config) { c.Regions = []string{"eu-west-1"} })
	c := ecs.New(ecs.Options{BaseEndpoint: aws.String(only.url), Region: "us-east-1", Credentials: staticCreds(devKey, devSecret), Retryer: aws.NopRetryer{}})
	if _, err := c.ListClusters(ctx, &ecs.ListClustersInput{}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSignatureException" {
		t.Errorf("us-east-1 outside the allow-list: %v", err)
	}
}

func TestSDKClient(t *testing.T) {
	e := newEnv(t, nil)
	c := sdkClient(e, devKey, devSecret)
	ctx := context.Background()

	list, err := c.ListClusters(ctx, &ecs.ListClustersInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.ClusterArns) != 1 || list.ClusterArns[0] != "arn:aws:ecs:us-east-1:"+devAccount+":cluster/default" {
		t.Errorf("clusterArns = %v", list.ClusterArns)
	}
	h := e.ecs.lastHeader()
	if h.Get(identity.AccountHeader) != devAccount || h.Get(identity.RequestIDHeader) == "" || h.Get(identity.ContainerInstanceHeader) != "" {
		t.Errorf("identity headers = %v", h)
	}

	created, err := c.CreateCluster(ctx, &ecs.CreateClusterInput{
		ClusterName: aws.String("web"),
		Tags:        []types.Tag{{Key: aws.String("env"), Value: aws.String("dev")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cl := created.Cluster
	if aws.ToString(cl.ClusterName) != "web" || aws.ToString(cl.Status) != "ACTIVE" || cl.RunningTasksCount != 2 ||
		len(cl.Tags) != 1 || aws.ToString(cl.Tags[0].Value) != "dev" {
		t.Errorf("cluster = %+v", cl)
	}

	ci, err := c.DescribeContainerInstances(ctx, &ecs.DescribeContainerInstancesInput{ContainerInstances: []string{"abc"}})
	if err != nil {
		t.Fatal(err)
	}
	if ci.Failures == nil || len(ci.Failures) != 0 {
		t.Errorf("failures = %#v, want empty non-nil list", ci.Failures)
	}
	inst := ci.ContainerInstances[0]
	if inst.RegisteredAt == nil || !inst.RegisteredAt.Equal(time.Unix(1700000000, 5e8)) {
		t.Errorf("registeredAt = %v", inst.RegisteredAt)
	}
	if inst.Version != 9007199254740993 || !inst.AgentConnected {
		t.Errorf("version = %d, agentConnected = %t", inst.Version, inst.AgentConnected)
	}
	if len(inst.RegisteredResources) != 2 || inst.RegisteredResources[0].IntegerValue != 2048 || inst.RegisteredResources[1].StringSetValue[0] != "22" {
		t.Errorf("resources = %+v", inst.RegisteredResources)
	}

	// Modelled exception from the scheduler's detail.
	_, err = c.DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{"missing"}})
	var nf *types.ClusterNotFoundException
	if !errors.As(err, &nf) || nf.ErrorMessage() != "Cluster not found." {
		t.Errorf("DescribeClusters(missing) err = %v, want ClusterNotFoundException", err)
	}

	// An internal failure is a ServerException with a generic message.
	_, err = c.DeleteCluster(ctx, &ecs.DeleteClusterInput{Cluster: aws.String("web")})
	var se *types.ServerException
	if !errors.As(err, &se) || strings.Contains(err.Error(), "secret-internal-detail") {
		t.Errorf("DeleteCluster err = %v, want generic ServerException", err)
	}

	// An action the scheduler does not implement names the action.
	_, err = c.ListAccountSettings(ctx, &ecs.ListAccountSettingsInput{})
	var uf *types.UnsupportedFeatureException
	if !errors.As(err, &uf) || !strings.Contains(uf.ErrorMessage(), "ListAccountSettings") {
		t.Errorf("ListAccountSettings err = %v, want UnsupportedFeatureException naming it", err)
	}

	// A wrong secret is refused before the scheduler sees anything.
	_, err = sdkClient(e, devKey, "wrong").ListClusters(ctx, &ecs.ListClustersInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSignatureException" {
		t.Errorf("wrong secret err = %v", err)
	}
	// An unknown key.
	_, err = sdkClient(e, "AKIANOBODY", "x").ListClusters(ctx, &ecs.ListClustersInput{})
	if !errors.As(err, &ae) || ae.ErrorCode() != "UnrecognizedClientException" {
		t.Errorf("unknown key err = %v", err)
	}
	// The account comes from the key.
	list, err = sdkClient(e, otherKey, otherSecret).ListClusters(ctx, &ecs.ListClustersInput{})
	if err != nil || !strings.Contains(list.ClusterArns[0], otherAccount) {
		t.Errorf("other account: %v %v", list, err)
	}
}

func TestEveryOperationIsRouted(t *testing.T) {
	e := newEnv(t, nil)
	ops := e.gw.Operations()
	if want := ecsv1.File_berth_ecs_v1_ecs_service_proto.Services().ByName("EcsService").Methods().Len(); len(ops) != want || want < 77 {
		t.Errorf("%d operations routed, want every one of the %d EcsService methods", len(ops), want)
	}
	implemented := map[string]bool{"ListClusters": true, "CreateCluster": true, "DescribeClusters": true, "DescribeContainerInstances": true, "DeleteCluster": true, "SubmitTaskStateChange": true}
	for _, op := range ops {
		if implemented[op] {
			continue
		}
		// Unimplemented actions with an empty body: either a validation error (required
		// members) or UnsupportedFeatureException naming the action; never a 500 or 404.
		r := post(t, e, gateway.TargetPrefix+op, `{}`, devKey, devSecret)
		switch r.errTyp {
		case "InvalidParameterException":
		case "UnsupportedFeatureException":
			if !strings.Contains(r.errMsg, op) {
				t.Errorf("%s: message %q does not name the action", op, r.errMsg)
			}
		default:
			t.Errorf("%s: %d %s %s", op, r.status, r.errTyp, r.errMsg)
		}
	}
}

func TestProtocolErrors(t *testing.T) {
	e := newEnv(t, func(c *gateway.Config) { c.MaxBodyBytes = 1024 })
	list := gateway.TargetPrefix + "ListClusters"
	for _, tc := range []struct {
		name, target, body string
		status             int
		typ, contains      string
	}{
		{"malformed json", list, `{"maxResults":`, 400, "SerializationException", "not valid JSON"},
		{"wrong type", list, `{"maxResults":"ten"}`, 400, "SerializationException", "'maxResults'"},
		{"missing required", gateway.TargetPrefix + "DeleteCluster", `{}`, 400, "InvalidParameterException", "Value null at 'cluster'"},
		{"bad enum", gateway.TargetPrefix + "ListTasks", `{"desiredStatus":"SLEEPING"}`, 400, "InvalidParameterException", "desiredStatus"},
		{"unknown target", gateway.TargetPrefix + "LaunchRocket", `{}`, 400, "UnknownOperationException", "LaunchRocket"},
		{"other service", "DynamoDB_20120810.ListTables", `{}`, 400, "UnknownOperationException", ""},
		{"no target", "", `{}`, 400, "UnknownOperationException", ""},
		{"too large", list, `{"nextToken":"` + strings.Repeat("x", 2000) + `"}`, 413, "RequestEntityTooLargeException", "1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, e, tc.target, tc.body, devKey, devSecret)
			if r.status != tc.status || r.errTyp != tc.typ || !strings.Contains(r.errMsg, tc.contains) {
				t.Errorf("got %d %s %q, want %d %s containing %q", r.status, r.errTyp, r.errMsg, tc.status, tc.typ, tc.contains)
			}
			if r.header.Get("Content-Type") != "application/x-amz-json-1.1" {
				t.Errorf("content-type %q", r.header.Get("Content-Type"))
			}
		})
	}
	// Unsigned requests and other routes never get HTML or a Go error string.
	r := post(t, e, list, `{}`, "", "")
	if r.status != 400 || r.errTyp != "MissingAuthenticationTokenException" {
		t.Errorf("unsigned: %d %s", r.status, r.errTyp)
	}
	for _, m := range []struct{ method, path string }{{"GET", "/"}, {"GET", "/favicon.ico"}, {"POST", "/x"}} {
		req, _ := http.NewRequest(m.method, e.url+m.path, nil)
		r := send(t, e, req)
		if r.errTyp != "UnknownOperationException" {
			t.Errorf("%s %s: %d %s", m.method, m.path, r.status, r.errTyp)
		}
	}
}

func TestInstanceCredentialScope(t *testing.T) {
	e := newEnv(t, nil)
	r := post(t, e, gateway.TargetPrefix+"SubmitTaskStateChange", `{"cluster":"default","task":"t1","status":"RUNNING"}`, agentKey, agentSecret)
	if r.status != 200 || !strings.Contains(string(r.body), `"acknowledgment":"ACK"`) {
		t.Fatalf("SubmitTaskStateChange: %d %s", r.status, r.body)
	}
	h := e.ecs.lastHeader()
	if h.Get(identity.ContainerInstanceHeader) != instanceARN || h.Get(identity.AccountHeader) != devAccount {
		t.Errorf("identity = %v", h)
	}
	r = post(t, e, gateway.TargetPrefix+"ListClusters", `{}`, agentKey, agentSecret)
	if r.errTyp != "AccessDeniedException" {
		t.Errorf("instance key on ListClusters: %d %s", r.status, r.errTyp)
	}
}

func TestClientIdentityHeadersIgnored(t *testing.T) {
	e := newEnv(t, nil)
	req, _ := http.NewRequest(http.MethodPost, e.url+"/", strings.NewReader(`{}`))
	req.Header.Set("X-Amz-Target", gateway.TargetPrefix+"ListClusters")
	req.Header.Set(identity.AccountHeader, otherAccount)
	req.Header.Set(identity.ContainerInstanceHeader, instanceARN)
	sum := sha256.Sum256([]byte(`{}`))
	_ = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: devKey, SecretAccessKey: devSecret}, req, hex.EncodeToString(sum[:]), "ecs", region, time.Now())
	r := send(t, e, req)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	h := e.ecs.lastHeader()
	if h.Get(identity.AccountHeader) != devAccount || h.Get(identity.ContainerInstanceHeader) != "" {
		t.Errorf("client-sent identity reached the scheduler: %v", h)
	}
}

func TestThrottling(t *testing.T) {
	e := newEnv(t, func(c *gateway.Config) { c.Rate = 1; c.Burst = 3 })
	e.clock.Set(time.Now())
	list := gateway.TargetPrefix + "ListClusters"
	for i := 0; i < 3; i++ {
		if r := post(t, e, list, `{}`, devKey, devSecret); r.status != 200 {
			t.Fatalf("request %d: %d %s", i, r.status, r.errTyp)
		}
	}
	r := post(t, e, list, `{}`, devKey, devSecret)
	if r.status != 400 || r.errTyp != "ThrottlingException" || r.errMsg != "Rate exceeded" {
		t.Fatalf("4th request: %d %s %q", r.status, r.errTyp, r.errMsg)
	}
	// Another account has its own bucket.
	if r := post(t, e, list, `{}`, otherKey, otherSecret); r.status != 200 {
		t.Errorf("other account throttled: %s", r.errTyp)
	}
	// A second later one token is back.
	e.clock.Set(e.clock.Now().Add(time.Second))
	if r := post(t, e, list, `{}`, devKey, devSecret); r.status != 200 {
		t.Errorf("after refill: %s", r.errTyp)
	}
	// The SDK sees a throttling error it can retry.
	_, err := sdkClient(e, devKey, devSecret).ListClusters(context.Background(), &ecs.ListClustersInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" {
		t.Errorf("SDK err = %v", err)
	}
}

func TestLockout(t *testing.T) {
	e := newEnv(t, func(c *gateway.Config) {
		c.LockoutAfter = 3
		c.LockoutBase = 10 * time.Second
		c.LockoutMax = 40 * time.Second
	})
	start := time.Now()
	e.clock.Set(start)
	list := gateway.TargetPrefix + "ListClusters"
	for i := 0; i < 3; i++ {
		if r := post(t, e, list, `{}`, devKey, "wrong"); r.errTyp != "InvalidSignatureException" {
			t.Fatalf("failure %d: %s", i, r.errTyp)
		}
	}
	resolves := e.admin.resolves.Load()
	// Locked: even a valid request is refused, without touching the key store.
	r := post(t, e, list, `{}`, devKey, devSecret)
	if r.errTyp != "ThrottlingException" || r.header.Get("Retry-After") != "10" {
		t.Fatalf("locked: %d %s retry-after=%q", r.status, r.errTyp, r.header.Get("Retry-After"))
	}
	if e.admin.resolves.Load() != resolves {
		t.Errorf("locked request resolved a key")
	}
	// After the lock, three more failures lock for twice as long.
	e.clock.Set(start.Add(11 * time.Second))
	for i := 0; i < 3; i++ {
		post(t, e, list, `{}`, "AKIANOBODY", "x")
	}
	r = post(t, e, list, `{}`, devKey, devSecret)
	if r.errTyp != "ThrottlingException" || r.header.Get("Retry-After") != "20" {
		t.Fatalf("second lock: %s retry-after=%q", r.errTyp, r.header.Get("Retry-After"))
	}
	// Once it expires, a valid request passes and clears the record.
	e.clock.Set(start.Add(32 * time.Second))
	if r := post(t, e, list, `{}`, devKey, devSecret); r.status != 200 {
		t.Fatalf("after lock: %d %s", r.status, r.errTyp)
	}
}

func TestDevRoutes(t *testing.T) {
	ready := false
	e := newEnv(t, func(c *gateway.Config) {
		c.Health = func(context.Context) (any, bool) { return map[string]any{"etcd": "ok", "agents": 1}, ready }
	})
	get := func() rawResponse {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/_berth/health", nil)
		res, err := e.httpCli.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return rawResponse{status: res.StatusCode, body: b}
	}
	if r := get(); r.status != 503 || !strings.Contains(string(r.body), `"etcd":"ok"`) {
		t.Errorf("not ready: %d %s", r.status, r.body)
	}
	ready = true
	if r := get(); r.status != 200 {
		t.Errorf("ready: %d %s", r.status, r.body)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/_berth/reset", nil)
	res, err := e.httpCli.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || e.admin.resets.Load() != 1 {
		t.Errorf("reset: %d, resets=%d", res.StatusCode, e.admin.resets.Load())
	}

	// Without Dev the routes do not exist.
	prod := newEnv(t, func(c *gateway.Config) { c.Dev = false })
	req, _ = http.NewRequest(http.MethodPost, prod.url+"/_berth/reset", nil)
	if r := send(t, prod, req); r.status != 404 || prod.admin.resets.Load() != 0 {
		t.Errorf("prod reset: %d", r.status)
	}
}

func TestLockoutPerClientAddress(t *testing.T) {
	e := newEnv(t, func(c *gateway.Config) {
		c.LockoutAfter = 2
		c.ClientAddress = func(r *http.Request) string { return r.Header.Get("X-Test-Client") }
	})
	call := func(client, secret string) string {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/", strings.NewReader(`{}`))
		req.Header.Set("X-Amz-Target", gateway.TargetPrefix+"ListClusters")
		req.Header.Set("X-Test-Client", client)
		sum := sha256.Sum256([]byte(`{}`))
		_ = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: devKey, SecretAccessKey: secret}, req, hex.EncodeToString(sum[:]), "ecs", region, time.Now())
		return send(t, e, req).errTyp
	}
	call("a", "wrong")
	call("a", "wrong")
	if got := call("a", devSecret); got != "ThrottlingException" {
		t.Errorf("client a after 2 failures: %q", got)
	}
	if got := call("b", devSecret); got != "" {
		t.Errorf("client b: %q", got)
	}
}

func TestSchedulerDown(t *testing.T) {
	e := newEnv(t, nil)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	gw, err := gateway.New(gateway.Config{SchedulerURL: downURL, Logger: e.cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	e.url = h2cServer(t, gw).URL
	r := post(t, e, gateway.TargetPrefix+"ListClusters", `{}`, devKey, devSecret)
	if r.status != 500 || r.errTyp != "ServerException" || r.errMsg != "An internal error occurred." {
		t.Errorf("ECS call with the scheduler down: %d %s %q", r.status, r.errTyp, r.errMsg)
	}
	_, err = agentClient(e, agentKey, agentSecret, nil).Register(context.Background(), connect.NewRequest(&agentv1.RegisterRequest{}))
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("agent call with the scheduler down: %v", err)
	}
}
