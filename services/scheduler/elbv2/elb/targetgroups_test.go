package elb_test

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
)

var tgARN = regexp.MustCompile(`^` + arnPrefix + `targetgroup/([a-zA-Z0-9-]+)/[0-9a-f]{16}$`)

func TestTargetGroupValidation(t *testing.T) {
	e := newEnv(t)
	base := func(mod func(*elb.TargetGroupInput)) elb.TargetGroupInput {
		in := elb.TargetGroupInput{Name: "tg", Protocol: "HTTP", Port: port(80)}
		mod(&in)
		return in
	}
	// HTTPS, UDP, … are refused with UnsupportedProtocol, a code the model does not list
	// for CreateTargetGroup, so those rows leave the code open.
	for _, tc := range []struct {
		name      string
		in        elb.TargetGroupInput
		code, msg string
	}{
		{"empty name", base(func(in *elb.TargetGroupInput) { in.Name = "" }), elb.CodeValidation, "can only contain characters that are alphanumeric characters or hyphens(-), must be 1-32 characters and must not begin or end with a hyphen"},
		{"33 characters", base(func(in *elb.TargetGroupInput) { in.Name = strings.Repeat("t", 33) }), elb.CodeValidation, "must be 1-32 characters"},
		{"leading hyphen", base(func(in *elb.TargetGroupInput) { in.Name = "-tg" }), elb.CodeValidation, "must not begin or end with a hyphen"},
		{"trailing hyphen", base(func(in *elb.TargetGroupInput) { in.Name = "tg-" }), elb.CodeValidation, "must not begin or end with a hyphen"},
		{"underscore", base(func(in *elb.TargetGroupInput) { in.Name = "t_g" }), elb.CodeValidation, "alphanumeric"},
		{"lambda", base(func(in *elb.TargetGroupInput) { in.TargetType = "lambda" }), elb.CodeInvalidConfigurationRequest, "Target type 'lambda' is not supported by Berth"},
		{"alb", base(func(in *elb.TargetGroupInput) { in.TargetType = "alb" }), elb.CodeInvalidConfigurationRequest, "Target type 'alb'"},
		{"unknown target type", base(func(in *elb.TargetGroupInput) { in.TargetType = "pod" }), elb.CodeValidation, "Target type 'pod' is not valid"},
		{"no protocol", base(func(in *elb.TargetGroupInput) { in.Protocol = "" }), elb.CodeValidation, "A protocol must be specified"},
		{"HTTPS", base(func(in *elb.TargetGroupInput) { in.Protocol = "HTTPS" }), "", "Protocol 'HTTPS' is not supported by Berth: HTTP and TCP are"},
		{"UDP", base(func(in *elb.TargetGroupInput) { in.Protocol = "UDP" }), "", "UDP"},
		{"unknown protocol", base(func(in *elb.TargetGroupInput) { in.Protocol = "FTP" }), elb.CodeValidation, "Protocol 'FTP' is not valid"},
		{"no port", base(func(in *elb.TargetGroupInput) { in.Port = nil }), elb.CodeValidation, "A port must be specified"},
		{"port 0", base(func(in *elb.TargetGroupInput) { in.Port = port(0) }), elb.CodeValidation, "Port '0' must be between 1 and 65535"},
		{"port 65536", base(func(in *elb.TargetGroupInput) { in.Port = port(65536) }), elb.CodeValidation, "Port '65536' must be between 1 and 65535"},
		{"GRPC", base(func(in *elb.TargetGroupInput) { in.ProtocolVersion = "GRPC" }), elb.CodeInvalidConfigurationRequest, "Protocol version 'GRPC' is not supported"},
		{"ipv6", base(func(in *elb.TargetGroupInput) { in.IPAddressType = "ipv6" }), elb.CodeInvalidConfigurationRequest, "IP address type 'ipv6'"},
		// Health checks (AWS's ranges).
		{"interval 4", base(func(in *elb.TargetGroupInput) { in.HealthCheckIntervalSeconds = port(4) }), elb.CodeValidation, "Health check interval '4' must be between 5 and 300"},
		{"interval 301", base(func(in *elb.TargetGroupInput) { in.HealthCheckIntervalSeconds = port(301) }), elb.CodeValidation, "between 5 and 300"},
		{"timeout 1", base(func(in *elb.TargetGroupInput) { in.HealthCheckTimeoutSeconds = port(1) }), elb.CodeValidation, "Health check timeout '1' must be between 2 and 120"},
		{"timeout 121", base(func(in *elb.TargetGroupInput) {
			in.HealthCheckTimeoutSeconds, in.HealthCheckIntervalSeconds = port(121), port(300)
		}), elb.CodeValidation, "between 2 and 120"},
		{"healthy 1", base(func(in *elb.TargetGroupInput) { in.HealthyThresholdCount = port(1) }), elb.CodeValidation, "Healthy threshold count '1' must be between 2 and 10"},
		{"healthy 11", base(func(in *elb.TargetGroupInput) { in.HealthyThresholdCount = port(11) }), elb.CodeValidation, "between 2 and 10"},
		{"unhealthy 1", base(func(in *elb.TargetGroupInput) { in.UnhealthyThresholdCount = port(1) }), elb.CodeValidation, "Unhealthy threshold count '1' must be between 2 and 10"},
		{"unhealthy 11", base(func(in *elb.TargetGroupInput) { in.UnhealthyThresholdCount = port(11) }), elb.CodeValidation, "between 2 and 10"},
		{"timeout not below interval", base(func(in *elb.TargetGroupInput) {
			in.HealthCheckTimeoutSeconds, in.HealthCheckIntervalSeconds = port(10), port(10)
		}), elb.CodeInvalidConfigurationRequest, "Health check interval must be greater than the timeout."},
		{"HTTPS health check", base(func(in *elb.TargetGroupInput) { in.HealthCheckProtocol = ptr("HTTPS") }), elb.CodeInvalidConfigurationRequest, "Health check protocol 'HTTPS' is not supported"},
		{"TCP health check of an HTTP group", base(func(in *elb.TargetGroupInput) { in.HealthCheckProtocol = ptr("TCP") }), elb.CodeInvalidConfigurationRequest, "Health check protocol 'TCP' is not supported for target groups with the HTTP protocol"},
		{"health check port 0", base(func(in *elb.TargetGroupInput) { in.HealthCheckPort = ptr("0") }), elb.CodeValidation, "Health check port '0' must be 'traffic-port' or a port from 1 to 65535"},
		{"health check port 65536", base(func(in *elb.TargetGroupInput) { in.HealthCheckPort = ptr("65536") }), elb.CodeValidation, "Health check port"},
		{"health check port name", base(func(in *elb.TargetGroupInput) { in.HealthCheckPort = ptr("http") }), elb.CodeValidation, "Health check port"},
		{"relative path", base(func(in *elb.TargetGroupInput) { in.HealthCheckPath = ptr("health") }), elb.CodeValidation, "must begin with '/'"},
		{"long path", base(func(in *elb.TargetGroupInput) { in.HealthCheckPath = ptr("/" + strings.Repeat("p", 1024)) }), elb.CodeValidation, "at most 1024 characters"},
		{"path on a TCP check", func() elb.TargetGroupInput {
			return elb.TargetGroupInput{Name: "tg", Protocol: "TCP", Port: port(80), HealthCheckPath: ptr("/")}
		}(), elb.CodeInvalidConfigurationRequest, "A health check path cannot be set with the TCP health check protocol"},
		{"matcher on a TCP check", func() elb.TargetGroupInput {
			return elb.TargetGroupInput{Name: "tg", Protocol: "TCP", Port: port(80), MatcherHTTPCode: ptr("200")}
		}(), elb.CodeInvalidConfigurationRequest, "A health check matcher cannot be set with the TCP health check protocol"},
		{"matcher words", base(func(in *elb.TargetGroupInput) { in.MatcherHTTPCode = ptr("ok") }), elb.CodeValidation, "Health check matcher HTTP code 'ok'"},
		{"matcher open range", base(func(in *elb.TargetGroupInput) { in.MatcherHTTPCode = ptr("200-") }), elb.CodeValidation, "matcher HTTP code"},
		{"matcher spaces", base(func(in *elb.TargetGroupInput) { in.MatcherHTTPCode = ptr("200, 202") }), elb.CodeValidation, "matcher HTTP code"},
		{"gRPC matcher", base(func(in *elb.TargetGroupInput) { in.MatcherGrpcCode = ptr("0") }), elb.CodeInvalidConfigurationRequest, "gRPC matchers are not supported by Berth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.CreateTargetGroup(t.Context(), scope, tc.in)
			wantCode(t, err, tc.code, tc.msg)
		})
	}
	if tgs, err := e.s.DescribeTargetGroups(t.Context(), scope, "", nil, nil); err != nil || len(tgs) != 0 {
		t.Fatalf("refused creates left %d target groups (%v)", len(tgs), err)
	}
}

func TestTargetGroupDefaults(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	http, err := e.s.CreateTargetGroup(ctx, scope, elb.TargetGroupInput{Name: "web", Protocol: "HTTP", Port: port(8080)})
	if err != nil {
		t.Fatal(err)
	}
	if m := tgARN.FindStringSubmatch(http.GetTargetGroupArn()); m == nil || m[1] != "web" {
		t.Fatalf("ARN = %s", http.GetTargetGroupArn())
	}
	// AWS's defaults for an HTTP group: instance targets; HTTP checks of "/" on the
	// traffic port every 30 s, healthy after 5, unhealthy after 2, code 200.
	if http.GetTargetType() != "instance" || http.GetVpcId() != "vpc-berth" || !http.GetHealthCheckEnabled() || http.GetHealthCheckProtocol() != "HTTP" ||
		http.GetHealthCheckPort() != "traffic-port" || http.GetHealthCheckPath() != "/" || http.GetMatcherHttpCode() != "200" ||
		http.GetHealthCheckIntervalSeconds() != 30 || http.GetHealthyThresholdCount() != 5 || http.GetUnhealthyThresholdCount() != 2 ||
		http.GetHealthCheckTimeoutSeconds() >= http.GetHealthCheckIntervalSeconds() {
		t.Fatalf("HTTP target group = %v", http)
	}
	if want := map[string]string{
		"deregistration_delay.timeout_seconds": "300", "stickiness.enabled": "false", "stickiness.type": "lb_cookie",
		"load_balancing.algorithm.type": "round_robin", "slow_start.duration_seconds": "0", "deregistration_delay.connection_termination.enabled": "false",
	}; !maps.Equal(http.GetAttributes(), want) {
		t.Errorf("HTTP attributes = %v, want %v", http.GetAttributes(), want)
	}

	// A TCP group: TCP checks, 10 s timeout, no path or matcher; source_ip stickiness
	// and no ALB-only attributes.
	tcp, err := e.s.CreateTargetGroup(ctx, scope, elb.TargetGroupInput{Name: "tcp", Protocol: "TCP", Port: port(5432), TargetType: "ip", VpcID: "vpc-x"})
	if err != nil {
		t.Fatal(err)
	}
	if tcp.GetHealthCheckProtocol() != "TCP" || tcp.GetHealthCheckTimeoutSeconds() != 10 || tcp.GetHealthCheckPath() != "" || tcp.GetMatcherHttpCode() != "" ||
		tcp.GetTargetType() != "ip" || tcp.GetVpcId() != "vpc-x" {
		t.Fatalf("TCP target group = %v", tcp)
	}
	if want := map[string]string{
		"deregistration_delay.timeout_seconds": "300", "stickiness.enabled": "false", "stickiness.type": "source_ip",
		"deregistration_delay.connection_termination.enabled": "false",
	}; !maps.Equal(tcp.GetAttributes(), want) {
		t.Errorf("TCP attributes = %v, want %v", tcp.GetAttributes(), want)
	}
	// A TCP group may check over HTTP: it then gets a path and a matcher.
	tcpHTTP, err := e.s.CreateTargetGroup(ctx, scope, elb.TargetGroupInput{Name: "tcp-http", Protocol: "TCP", Port: port(80), HealthCheckProtocol: ptr("HTTP"),
		HealthCheckPort: ptr("8081"), MatcherHTTPCode: ptr("200-299,302"), HealthCheckIntervalSeconds: ptr(int32(10)), HealthCheckTimeoutSeconds: ptr(int32(2))})
	if err != nil {
		t.Fatal(err)
	}
	if tcpHTTP.GetHealthCheckProtocol() != "HTTP" || tcpHTTP.GetHealthCheckPath() != "/" || tcpHTTP.GetMatcherHttpCode() != "200-299,302" ||
		tcpHTTP.GetHealthCheckPort() != "8081" || tcpHTTP.GetHealthCheckIntervalSeconds() != 10 || tcpHTTP.GetHealthCheckTimeoutSeconds() != 2 {
		t.Fatalf("TCP group with an HTTP check = %v", tcpHTTP)
	}

	// Idempotent for the same settings; another port or protocol is a duplicate name.
	again, err := e.s.CreateTargetGroup(ctx, scope, elb.TargetGroupInput{Name: "web", Protocol: "HTTP", Port: port(8080)})
	if err != nil || again.GetTargetGroupArn() != http.GetTargetGroupArn() {
		t.Fatalf("repeat = %s, %v; want %s", again.GetTargetGroupArn(), err, http.GetTargetGroupArn())
	}
	for _, in := range []elb.TargetGroupInput{
		{Name: "web", Protocol: "HTTP", Port: port(9090)},
		{Name: "web", Protocol: "TCP", Port: port(8080)},
		{Name: "web", Protocol: "HTTP", Port: port(8080), TargetType: "ip"},
	} {
		_, err := e.s.CreateTargetGroup(ctx, scope, in)
		wantCode(t, err, elb.CodeDuplicateTargetGroupName, "A target group with the same name 'web' exists, but with different settings")
	}
}

func TestModifyTargetGroup(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tg := e.tg(t, "web", "HTTP")
	r, err := e.s.ModifyTargetGroup(ctx, scope, tg.GetTargetGroupArn(), elb.TargetGroupInput{HealthCheckPath: ptr("/healthz"),
		HealthCheckIntervalSeconds: ptr(int32(10)), HealthCheckTimeoutSeconds: ptr(int32(3)), HealthyThresholdCount: ptr(int32(2)),
		UnhealthyThresholdCount: ptr(int32(10)), MatcherHTTPCode: ptr("200,204"), HealthCheckPort: ptr("9000"), HealthCheckEnabled: ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetHealthCheckPath() != "/healthz" || r.GetHealthCheckIntervalSeconds() != 10 || r.GetHealthCheckTimeoutSeconds() != 3 ||
		r.GetHealthyThresholdCount() != 2 || r.GetUnhealthyThresholdCount() != 10 || r.GetMatcherHttpCode() != "200,204" ||
		r.GetHealthCheckPort() != "9000" || r.GetHealthCheckEnabled() {
		t.Fatalf("modified = %v", r)
	}
	// A refused change leaves the group as it was.
	_, err = e.s.ModifyTargetGroup(ctx, scope, tg.GetTargetGroupArn(), elb.TargetGroupInput{HealthCheckPath: ptr("/other"), HealthCheckTimeoutSeconds: ptr(int32(10))})
	wantCode(t, err, elb.CodeInvalidConfigurationRequest, "Health check interval must be greater than the timeout.")
	cur, err := e.s.TargetGroup(ctx, scope, tg.GetTargetGroupArn())
	if err != nil || cur.GetHealthCheckPath() != "/healthz" || cur.GetHealthCheckTimeoutSeconds() != 3 {
		t.Fatalf("after a refused modify: %v, %v", cur, err)
	}
	_, err = e.s.ModifyTargetGroup(ctx, scope, arnPrefix+"targetgroup/nope/0123456789abcdef", elb.TargetGroupInput{})
	wantCode(t, err, elb.CodeTargetGroupNotFound, "Target groups '"+arnPrefix+"targetgroup/nope/0123456789abcdef' not found")
}

func TestTargetGroupAttributes(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tg := e.tg(t, "web", "HTTP")
	got, err := e.s.ModifyTargetGroupAttributes(ctx, scope, tg.GetTargetGroupArn(), []elb.Tag{
		{Key: "deregistration_delay.timeout_seconds", Value: "0"}, {Key: "stickiness.type", Value: "source_ip"}})
	if err != nil {
		t.Fatal(err)
	}
	if got["deregistration_delay.timeout_seconds"] != "0" || got["stickiness.type"] != "source_ip" || got["load_balancing.algorithm.type"] != "round_robin" {
		t.Fatalf("attributes = %v", got)
	}
	read, err := e.s.DescribeTargetGroupAttributes(ctx, scope, tg.GetTargetGroupArn())
	if err != nil || !maps.Equal(read, got) {
		t.Fatalf("DescribeTargetGroupAttributes = %v, %v; want %v", read, err, got)
	}
	for _, tc := range []struct {
		key, value, code, msg string
	}{
		{"deregistration_delay.timeout_seconds", "3601", elb.CodeInvalidConfigurationRequest, "value '3601' is not valid or not supported by Berth"},
		{"deregistration_delay.timeout_seconds", "-1", elb.CodeInvalidConfigurationRequest, ""},
		{"deregistration_delay.timeout_seconds", "soon", elb.CodeInvalidConfigurationRequest, ""},
		{"stickiness.enabled", "true", elb.CodeInvalidConfigurationRequest, "'stickiness.enabled' value 'true'"},
		{"load_balancing.algorithm.type", "least_outstanding_requests", elb.CodeInvalidConfigurationRequest, ""},
		{"slow_start.duration_seconds", "30", elb.CodeInvalidConfigurationRequest, ""},
		{"stickiness.type", "app_cookie", elb.CodeInvalidConfigurationRequest, ""},
		{"proxy_protocol_v2.enabled", "true", elb.CodeValidation, "Target group attribute key 'proxy_protocol_v2.enabled' is not recognized"},
	} {
		_, err := e.s.ModifyTargetGroupAttributes(ctx, scope, tg.GetTargetGroupArn(), []elb.Tag{{Key: "deregistration_delay.timeout_seconds", Value: "3600"}, {Key: tc.key, Value: tc.value}})
		wantCode(t, err, tc.code, tc.msg)
	}
	// None of the refused requests changed anything, not even their valid part.
	if read, _ := e.s.DescribeTargetGroupAttributes(ctx, scope, tg.GetTargetGroupArn()); read["deregistration_delay.timeout_seconds"] != "0" {
		t.Fatalf("a refused request changed the attributes: %v", read)
	}
	_, err = e.s.DescribeTargetGroupAttributes(ctx, scope, arnPrefix+"targetgroup/nope/0123456789abcdef")
	wantCode(t, err, elb.CodeTargetGroupNotFound, "")
}

func TestDescribeAndDeleteTargetGroups(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	lb := e.lb(t, "web", "")
	used, free := e.tg(t, "used", "HTTP"), e.tg(t, "free", "HTTP")
	e.listener(t, lb, 80, used.GetTargetGroupArn())

	names := func(rs []*storev1.TargetGroupRecord) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.GetTargetGroupName())
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		lb          string
		arns, names []string
		want        []string
	}{
		{"all", "", nil, nil, []string{"free", "used"}},
		{"by load balancer", lb.GetLoadBalancerArn(), nil, nil, []string{"used"}},
		{"by name", "", nil, []string{"used", "free"}, []string{"used", "free"}},
		{"by ARN", "", []string{free.GetTargetGroupArn()}, nil, []string{"free"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := e.s.DescribeTargetGroups(ctx, scope, tc.lb, tc.arns, tc.names)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(rs); !slices.Equal(got, tc.want) {
				t.Fatalf("target groups = %v, want %v", got, tc.want)
			}
			for _, r := range rs {
				wantLBs := []string(nil)
				if r.GetTargetGroupName() == "used" {
					wantLBs = []string{lb.GetLoadBalancerArn()}
				}
				if !slices.Equal(r.GetLoadBalancerArns(), wantLBs) {
					t.Errorf("%s: LoadBalancerArns = %v, want %v", r.GetTargetGroupName(), r.GetLoadBalancerArns(), wantLBs)
				}
			}
		})
	}
	for _, tc := range []struct {
		name        string
		lb          string
		arns, names []string
		code, msg   string
	}{
		{"two selectors", lb.GetLoadBalancerArn(), nil, []string{"used"}, elb.CodeValidation, "Only one of load balancer ARN, target group ARNs and target group names can be specified"},
		{"missing name", "", nil, []string{"nope"}, elb.CodeTargetGroupNotFound, "Target groups '[nope]' not found"},
		{"name with a slash", "", nil, []string{"a/b"}, elb.CodeTargetGroupNotFound, "Target groups '[a/b]' not found"},
		{"missing ARN", "", []string{arnPrefix + "targetgroup/used/0123456789abcdef"}, nil, elb.CodeTargetGroupNotFound, ""},
		{"missing load balancer", arnPrefix + "loadbalancer/app/nope/0123456789abcdef", nil, nil, elb.CodeLoadBalancerNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.DescribeTargetGroups(ctx, scope, tc.lb, tc.arns, tc.names)
			wantCode(t, err, tc.code, tc.msg)
		})
	}

	// A group a listener forwards to cannot be deleted.
	wantCode(t, e.s.DeleteTargetGroup(ctx, scope, used.GetTargetGroupArn()), elb.CodeResourceInUse, "is currently in use by a listener or a rule")
	if err := e.s.RegisterTargets(ctx, scope, free.GetTargetGroupArn(), []elb.TargetInput{{ID: "10.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.DeleteTargetGroup(ctx, scope, free.GetTargetGroupArn()); err != nil {
		t.Fatal(err)
	}
	_, err := e.s.TargetGroup(ctx, scope, free.GetTargetGroupArn())
	wantCode(t, err, elb.CodeTargetGroupNotFound, "")
	// Deleting it again succeeds; a new group of the name starts without targets.
	if err := e.s.DeleteTargetGroup(ctx, scope, free.GetTargetGroupArn()); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	again := e.tg(t, "free", "HTTP")
	if again.GetTargetGroupArn() == free.GetTargetGroupArn() {
		t.Fatal("recreated target group kept the old ARN")
	}
	if hs, err := e.s.DescribeTargetHealth(ctx, scope, again.GetTargetGroupArn(), nil); err != nil || len(hs) != 0 {
		t.Fatalf("recreated group's targets = %v, %v", hs, err)
	}
}
