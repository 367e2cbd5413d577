package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	stsv1 "github.com/berthhq/berth/gen/berth/sts/v1"
	"github.com/berthhq/berth/gen/berth/sts/v1/stsv1connect"
	"github.com/berthhq/berth/services/gateway"
)

// stubSTS answers GetCallerIdentity from the identity headers the gateway sets, as the
// scheduler's sts package does.
type stubSTS struct {
	stsv1connect.UnimplementedStsServiceHandler
}

func (stubSTS) GetCallerIdentity(_ context.Context, r *connect.Request[stsv1.GetCallerIdentityRequest]) (*connect.Response[stsv1.GetCallerIdentityResponse], error) {
	h := r.Header()
	return connect.NewResponse(&stsv1.GetCallerIdentityResponse{
		Account: aws.String(h.Get(identity.AccountHeader)),
		Arn:     aws.String(h.Get(identity.PrincipalARNHeader)),
		UserId:  aws.String(h.Get(identity.PrincipalIDHeader)),
	}), nil
}

func sdkConfig(e *env, key, secret string) aws.Config {
	return aws.Config{
		Region:       region,
		BaseEndpoint: aws.String(e.url),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}, nil
		}),
		RetryMaxAttempts: 1,
	}
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestServicesRoutedByScope: the SDK clients of STS (query protocol, XML), Secrets Manager
// and SSM (JSON 1.1) reach the gateway's one endpoint and are routed by their credential
// scope; actions the scheduler does not serve answer the service's unsupported error.
func TestServicesRoutedByScope(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	cfg := sdkConfig(e, devKey, devSecret)

	id, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(id.Account) != devAccount || aws.ToString(id.Arn) != "arn:aws:iam::"+devAccount+":root" || aws.ToString(id.UserId) != devAccount {
		t.Errorf("GetCallerIdentity = %s %s %s", aws.ToString(id.Account), aws.ToString(id.Arn), aws.ToString(id.UserId))
	}
	other, err := sts.NewFromConfig(sdkConfig(e, otherKey, otherSecret)).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil || aws.ToString(other.Account) != otherAccount {
		t.Errorf("other account: %v %v", other, err)
	}

	// Query protocol errors are XML the SDK parses: an unknown key, an action not served.
	_, err = sts.NewFromConfig(sdkConfig(e, "AKIANOBODY", "x")).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if errorCode(err) != "InvalidClientTokenId" {
		t.Errorf("unknown key: %v", err)
	}
	_, err = sts.NewFromConfig(cfg).GetSessionToken(ctx, &sts.GetSessionTokenInput{})
	if errorCode(err) != "UnsupportedOperation" || !strings.Contains(err.Error(), "sts:GetSessionToken") {
		t.Errorf("GetSessionToken: %v", err)
	}

	// JSON services the scheduler of this test does not serve: a clear unsupported error.
	_, err = secretsmanager.NewFromConfig(cfg).ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
	if errorCode(err) != "UnsupportedOperationException" || !strings.Contains(err.Error(), "secretsmanager:ListSecrets") {
		t.Errorf("ListSecrets: %v", err)
	}
	_, err = ssm.NewFromConfig(cfg).DescribeParameters(ctx, &ssm.DescribeParametersInput{})
	if errorCode(err) != "UnsupportedOperationException" || !strings.Contains(err.Error(), "ssm:DescribeParameters") {
		t.Errorf("DescribeParameters: %v", err)
	}
	// Validation against each model happens in the gateway.
	_, err = secretsmanager.NewFromConfig(cfg).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{})
	if err == nil {
		t.Error("GetSecretValue without SecretId: no error")
	}

	// An instance-scoped (agent) credential may call only the agent's ECS actions.
	_, err = sts.NewFromConfig(sdkConfig(e, agentKey, agentSecret)).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if errorCode(err) != "AccessDeniedException" {
		t.Errorf("agent credential on STS: %v", err)
	}
}

// signed returns a request to the gateway signed for service.
func signed(t *testing.T, e *env, service, contentType, body string, header map[string]string) *http.Request {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/", strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	sum := sha256Hex(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: devKey, SecretAccessKey: devSecret}, req, sum, service, region, time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestQueryProtocol(t *testing.T) {
	e := newEnv(t, nil)
	do := func(req *http.Request) (int, string, string) {
		res, err := e.httpCli.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Content-Type"), string(b)
	}
	form := "application/x-www-form-urlencoded; charset=utf-8"
	status, ctype, body := do(signed(t, e, "sts", form, "Action=GetCallerIdentity&Version=2011-06-15", nil))
	if status != 200 || ctype != "text/xml" ||
		!strings.Contains(body, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">`) ||
		!strings.Contains(body, "<Account>"+devAccount+"</Account>") ||
		!strings.Contains(body, "<Arn>arn:aws:iam::"+devAccount+":root</Arn>") ||
		!strings.Contains(body, "<ResponseMetadata>") {
		t.Errorf("GetCallerIdentity: %d %s %s", status, ctype, body)
	}
	for _, tc := range []struct{ body, code, contains string }{
		{"Action=LaunchRocket&Version=2011-06-15", "InvalidAction", "LaunchRocket"},
		{"Version=2011-06-15", "MissingAction", "Action"},
		{"Action=GetCallerIdentity&Version=2011-06-15&Bogus=1", "ValidationError", "Bogus"},
		{"Action=AssumeRole&Version=2011-06-15", "ValidationError", "Value null at 'roleArn'"},
		{"Action=GetCallerIdentity&Version=1999-01-01", "InvalidAction", "1999-01-01"},
	} {
		status, _, body := do(signed(t, e, "sts", form, tc.body, nil))
		if status != 400 || !strings.Contains(body, "<Code>"+tc.code+"</Code>") || !strings.Contains(body, tc.contains) ||
			!strings.Contains(body, "<Type>Sender</Type>") || !strings.Contains(body, "<ErrorResponse") {
			t.Errorf("%s: %d %s", tc.body, status, body)
		}
	}
	// GET with the parameters in the query string, as AWS accepts for query services.
	req, _ := http.NewRequest(http.MethodGet, e.url+"/?"+url.Values{"Action": {"GetCallerIdentity"}, "Version": {"2011-06-15"}}.Encode(), nil)
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: devKey, SecretAccessKey: devSecret}, req, sha256Hex(""), "sts", region, time.Now()); err != nil {
		t.Fatal(err)
	}
	if status, _, body := do(req); status != 200 || !strings.Contains(body, "<Account>"+devAccount+"</Account>") {
		t.Errorf("GET GetCallerIdentity: %d %s", status, body)
	}
	// A scope naming a service the gateway does not serve.
	status, _, body = do(signed(t, e, "dynamodb", "application/x-amz-json-1.0", `{}`, map[string]string{"X-Amz-Target": "DynamoDB_20120810.ListTables"}))
	var je struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal([]byte(body), &je)
	if status != 400 || je.Type != "InvalidSignatureException" || !strings.Contains(je.Message, "not 'dynamodb'") {
		t.Errorf("dynamodb scope: %d %s", status, body)
	}
	// A JSON service's target under another service's scope is unknown there.
	status, _, body = do(signed(t, e, "secretsmanager", "application/x-amz-json-1.1", `{}`, map[string]string{"X-Amz-Target": gateway.TargetPrefix + "ListClusters"}))
	if status != 400 || !strings.Contains(body, "UnknownOperationException") {
		t.Errorf("ECS target signed for secretsmanager: %d %s", status, body)
	}
}

func TestAWSCLIServices(t *testing.T) {
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; CI installs it")
	}
	e := newEnv(t, nil)
	out, stderr, ok := runAWS(t, e, "sts", "get-caller-identity")
	var id struct{ UserId, Account, Arn string }
	if !ok || json.Unmarshal([]byte(out), &id) != nil || id.Account != devAccount || id.Arn != "arn:aws:iam::"+devAccount+":root" {
		t.Errorf("sts get-caller-identity: %q %s", out, stderr)
	}
	_, stderr, ok = runAWS(t, e, "secretsmanager", "list-secrets")
	if ok || !strings.Contains(stderr, "(UnsupportedOperationException)") {
		t.Errorf("secretsmanager list-secrets: ok=%v %s", ok, stderr)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestServiceThrottling: every service shares the account's rate, and a throttled query
// request gets the query protocol's Throttling error.
func TestServiceThrottling(t *testing.T) {
	e := newEnv(t, func(c *gateway.Config) { c.Rate, c.Burst = 0.001, 1 })
	cfg := sdkConfig(e, devKey, devSecret)
	if _, err := sts.NewFromConfig(cfg).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{}); err != nil {
		t.Fatal(err)
	}
	_, err := sts.NewFromConfig(cfg).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
	if errorCode(err) != "Throttling" {
		t.Errorf("second call: %v, want Throttling", err)
	}
	_, err = secretsmanager.NewFromConfig(cfg).ListSecrets(t.Context(), &secretsmanager.ListSecretsInput{})
	if errorCode(err) != "ThrottlingException" {
		t.Errorf("other service, same account: %v, want ThrottlingException", err)
	}
}
