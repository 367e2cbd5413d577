package app

import (
	"context"
	"encoding/json"
	cwv1 "github.com/berthhq/berth/gen/berth/cloudwatch/v1"
	"github.com/berthhq/berth/gen/berth/cloudwatch/v1/cloudwatchv1connect"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	"github.com/berthhq/berth/gen/berth/ecr/v1/ecrv1connect"
	elbv2 "github.com/berthhq/berth/gen/berth/elbv2/v1"
	"github.com/berthhq/berth/gen/berth/elbv2/v1/elbv2v1connect"
	eventsv1 "github.com/berthhq/berth/gen/berth/events/v1"
	"github.com/berthhq/berth/gen/berth/events/v1/eventsv1connect"
	smv1 "github.com/berthhq/berth/gen/berth/secretsmanager/v1"
	"github.com/berthhq/berth/gen/berth/secretsmanager/v1/secretsmanagerv1connect"
	sdv1 "github.com/berthhq/berth/gen/berth/servicediscovery/v1"
	"github.com/berthhq/berth/gen/berth/servicediscovery/v1/servicediscoveryv1connect"
	ssmv1 "github.com/berthhq/berth/gen/berth/ssm/v1"
	"github.com/berthhq/berth/gen/berth/ssm/v1/ssmv1connect"
	stsv1 "github.com/berthhq/berth/gen/berth/sts/v1"
	"github.com/berthhq/berth/gen/berth/sts/v1/stsv1connect"
	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/secretsmanager"
	"github.com/berthhq/berth/services/scheduler/ssm"
)

// identityHeaders is a client interceptor that sends the identity headers the gateway
// sends (caller.Interceptor requires the account and region).
func identityHeaders(account, region string, extra map[string]string) connect.ClientOption {
	return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set(identity.AccountHeader, account)
			req.Header().Set(identity.RegionHeader, region)
			for k, v := range extra {
				req.Header().Set(k, v)
			}
			return next(ctx, req)
		}
	}))
}

// wantException checks that err carries the AWS exception typ (and message, when not
// empty), as the gateway reads it.
func wantException(t *testing.T, what string, err error, typ, message string) {
	t.Helper()
	e, ok := awserr.FromConnect(err)
	if !ok || e.Type != typ || (message != "" && e.Message != message) {
		t.Errorf("%s: %v; want %s %q", what, err, typ, message)
	}
}

// TestAWSServicesAnswerThroughHandle calls each AWS service besides ECS through the
// replica's Connect handler, as the gateway does, and checks what its one handler path
// (awsapi.Handle) answers: each service's own exceptions with their types and messages
// (the keyring precondition of Secrets Manager and SSM, the ELBv2 model's query codes,
// Cloud Map's and STS's validation), the principal STS derives from the identity
// headers, a bare CodeUnimplemented for an action a service lacks (which the gateway
// answers with that service's unsupported error: only ECS's are turned into
// UnsupportedFeatureException), and a fault that is no AWS exception logged and answered
// as ServerException.
func TestAWSServicesAnswerThroughHandle(t *testing.T) {
	var logs syncBuffer
	etcd := etcdtest.StartServer(t)
	a, err := New(Config{Etcd: etcd.Client(), EtcdRequestTimeout: 500 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	const account = "123456789012"
	id := identityHeaders(account, "us-east-1", nil)

	sm := secretsmanagerv1connect.NewSecretsManagerServiceClient(srv.Client(), srv.URL, id)
	_, err = sm.ListSecrets(ctx, connect.NewRequest(&smv1.ListSecretsRequest{}))
	wantException(t, "secretsmanager without a keyring", err, "InternalServiceError", secretsmanager.ErrNoKeyring.Message)
	_, err = sm.RotateSecret(ctx, connect.NewRequest(&smv1.RotateSecretRequest{}))
	if _, ok := awserr.FromConnect(err); ok || connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("secretsmanager RotateSecret: %v; want a bare CodeUnimplemented", err)
	}

	params := ssmv1connect.NewSsmServiceClient(srv.Client(), srv.URL, id)
	_, err = params.GetParameter(ctx, connect.NewRequest(&ssmv1.GetParameterRequest{Name: proto.String("p")}))
	wantException(t, "ssm without a keyring", err, "InternalServerError", ssm.ErrNoKeyring.Message)

	registry := ecrv1connect.NewEcrServiceClient(srv.Client(), srv.URL, id)
	_, err = registry.DescribeRepositories(ctx, connect.NewRequest(&ecrv1.DescribeRepositoriesRequest{}))
	wantException(t, "ecr without a registry", err, "ServerException", ecr.ErrNoRegistry.Message)
	_, err = registry.StartImageScan(ctx, connect.NewRequest(&ecrv1.StartImageScanRequest{}))
	if _, ok := awserr.FromConnect(err); ok || connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("ecr StartImageScan: %v; want a bare CodeUnimplemented", err)
	}

	lb := elbv2v1connect.NewElbv2ServiceClient(srv.Client(), srv.URL, id)
	_, err = lb.DescribeLoadBalancers(ctx, connect.NewRequest(&elbv2.DescribeLoadBalancersRequest{Marker: proto.String("x")}))
	wantException(t, "elbv2 bad marker", err, "ValidationError", "The marker 'x' is not valid")
	_, err = lb.CreateLoadBalancer(ctx, connect.NewRequest(&elbv2.CreateLoadBalancerRequest{Name: proto.String("lb"), CustomerOwnedIpv4Pool: proto.String("p")}))
	wantException(t, "elbv2 model error", err, "InvalidConfigurationRequest", "")

	cw := cloudwatchv1connect.NewCloudwatchServiceClient(srv.Client(), srv.URL, id)
	_, err = cw.ListMetrics(ctx, connect.NewRequest(&cwv1.ListMetricsRequest{}))
	wantException(t, "cloudwatch without a metric store", err, "InternalServiceError", "This scheduler has no metric store.")
	_, err = cw.PutMetricAlarm(ctx, connect.NewRequest(&cwv1.PutMetricAlarmRequest{AlarmName: proto.String("a")}))
	wantException(t, "cloudwatch alarm validation", err, "MissingParameter", "The parameter EvaluationPeriods is required.")
	_, err = cw.PutDashboard(ctx, connect.NewRequest(&cwv1.PutDashboardRequest{}))
	if _, ok := awserr.FromConnect(err); ok || connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("cloudwatch PutDashboard: %v; want a bare CodeUnimplemented", err)
	}

	sd := servicediscoveryv1connect.NewServicediscoveryServiceClient(srv.Client(), srv.URL, id)
	_, err = sd.CreatePublicDnsNamespace(ctx, connect.NewRequest(&sdv1.CreatePublicDnsNamespaceRequest{Name: proto.String("example.com")}))
	wantException(t, "cloudmap public namespace", err, "InvalidInput", "")

	eb := eventsv1connect.NewEventsServiceClient(srv.Client(), srv.URL, id)
	_, err = eb.DescribeRule(ctx, connect.NewRequest(&eventsv1.DescribeRuleRequest{Name: proto.String("nope")}))
	wantException(t, "events unknown rule", err, "ResourceNotFoundException", "Rule nope does not exist on EventBus default.")
	_, err = eb.PutRule(ctx, connect.NewRequest(&eventsv1.PutRuleRequest{Name: proto.String("r"), ScheduleExpression: proto.String("cron(0 12 * * * *)")}))
	wantException(t, "events bad cron", err, "ValidationException", "Parameter ScheduleExpression is not valid.")
	_, err = eb.CreateEventBus(ctx, connect.NewRequest(&eventsv1.CreateEventBusRequest{}))
	if _, ok := awserr.FromConnect(err); ok || connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("events CreateEventBus: %v; want a bare CodeUnimplemented", err)
	}

	for _, tc := range []struct {
		headers       map[string]string
		arn, uniqueID string
	}{
		{nil, "arn:aws:iam::" + account + ":root", account},
		{map[string]string{identity.PrincipalARNHeader: "arn:aws:sts::" + account + ":assumed-role/r/s", identity.PrincipalIDHeader: "AROAX:s"},
			"arn:aws:sts::" + account + ":assumed-role/r/s", "AROAX:s"},
	} {
		st := stsv1connect.NewStsServiceClient(srv.Client(), srv.URL, identityHeaders(account, "us-east-1", tc.headers))
		who, err := st.GetCallerIdentity(ctx, connect.NewRequest(&stsv1.GetCallerIdentityRequest{}))
		if err != nil || who.Msg.GetAccount() != account || who.Msg.GetArn() != tc.arn || who.Msg.GetUserId() != tc.uniqueID {
			t.Errorf("GetCallerIdentity = %v, %v; want %s, %s, %s", who, err, account, tc.arn, tc.uniqueID)
		}
	}
	st := stsv1connect.NewStsServiceClient(srv.Client(), srv.URL, id)
	_, err = st.AssumeRole(ctx, connect.NewRequest(&stsv1.AssumeRoleRequest{RoleArn: proto.String("arn:aws:iam::210987654321:role/r"), RoleSessionName: proto.String("s1")}))
	wantException(t, "sts AssumeRole of another account's role", err, "AccessDenied",
		"User: arn:aws:iam::"+account+":root is not authorized to perform: sts:AssumeRole on resource: arn:aws:iam::210987654321:role/r")

	// A fault that is no AWS exception: etcd gone, the call times out.
	etcd.Stop()
	_, err = sd.ListNamespaces(ctx, connect.NewRequest(&sdv1.ListNamespacesRequest{}))
	wantException(t, "cloudmap without etcd", err, "ServerException", awserr.StoreUnavailableMessage)
	logged := false
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "aws call failed" && rec["component"] == "cloudmap" &&
			strings.HasSuffix(rec["procedure"].(string), "/ListNamespaces") && rec["err"] != nil {
			logged = true
		}
	}
	if !logged {
		t.Errorf("the fault was not logged with its procedure:\n%s", logs.String())
	}
}
