// Package elbapi serves the Elastic Load Balancing v2 API (berth.elbv2.v1.Elbv2Service,
// generated from the elbv2-2015-12-01 model) in the scheduler: it translates the
// generated request shapes into calls of package elb and its records back into the
// model's shapes. The gateway serves it on the query protocol (form in, XML out) for the
// SigV4 service elasticloadbalancing. Actions Berth does not implement answer
// CodeUnimplemented, which the gateway returns as AWS's UnsupportedOperation.
package elbapi

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	elbv2 "github.com/berthhq/berth/gen/berth/elbv2/v1"
	"github.com/berthhq/berth/gen/berth/elbv2/v1/elbv2v1connect"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Handler implements elbv2v1connect.Elbv2ServiceHandler over an elb.Service.
type Handler struct {
	elbv2v1connect.UnimplementedElbv2ServiceHandler
	// Logger receives the internal faults of its actions (errors that are not AWS
	// exceptions, which the client sees as ServerException); nil discards them.
	Logger *slog.Logger

	svc *elb.Service
}

// New returns the handler on kv; instance targets resolve through host (nil: only ip
// targets can be registered through the API).
func New(kv clientv3.KV, host elb.InstanceHost) *Handler {
	return &Handler{svc: elb.New(kv).WithInstanceHost(host)}
}

// handle runs an ELBv2 action through awsapi.Handle: the model's errors (*elb.Error)
// leave as the AWS exceptions of their query codes, which the gateway writes as AWS's
// XML error.
func handle[Req, Resp any](ctx context.Context, h *Handler, req *connect.Request[Req], fn func(context.Context, keys.Scope, *Req) (*Resp, error)) (*connect.Response[Resp], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, m *Req) (*Resp, error) {
		resp, err := fn(ctx, sc, m)
		var e *elb.Error
		if errors.As(err, &e) {
			return nil, awserr.New(e.Code, "%s", e.Message)
		}
		return resp, err
	})
}

func tagsIn(in []*elbv2.Tag) []elb.Tag {
	out := make([]elb.Tag, 0, len(in))
	for _, t := range in {
		out = append(out, elb.Tag{Key: t.GetKey(), Value: t.GetValue()})
	}
	return out
}

// page returns the page of n items after marker (an offset this package issued) and the
// next marker; pageSize 0 means 400 (AWS's maximum).
func page(n int, marker string, pageSize int32) (int, int, *string, error) {
	start := 0
	if marker != "" {
		v, err := strconv.Atoi(marker)
		if err != nil || v < 0 || v > n {
			return 0, 0, nil, awserr.New(elb.CodeValidation, "The marker '%s' is not valid", marker)
		}
		start = v
	}
	if pageSize < 0 || pageSize > 400 {
		return 0, 0, nil, awserr.New(elb.CodeValidation, "Page size must be between 1 and 400")
	}
	size := 400
	if pageSize > 0 {
		size = int(pageSize)
	}
	end := min(n, start+size)
	if end < n {
		return start, end, proto.String(strconv.Itoa(end)), nil
	}
	return start, end, nil, nil
}

func lbOut(r *storev1.LoadBalancerRecord) *elbv2.LoadBalancer {
	out := &elbv2.LoadBalancer{
		LoadBalancerArn:       proto.String(r.GetLoadBalancerArn()),
		LoadBalancerName:      proto.String(r.GetLoadBalancerName()),
		DnsName:               proto.String(r.GetDnsName()),
		CanonicalHostedZoneId: proto.String("Z35SXDOTRQ7X7K"),
		CreatedTime:           proto.Float64(r.GetCreatedTime()),
		Scheme:                proto.String(r.GetScheme()),
		Type:                  proto.String(r.GetType()),
		VpcId:                 proto.String(r.GetVpcId()),
		IpAddressType:         proto.String(r.GetIpAddressType()),
		State:                 &elbv2.LoadBalancerState{Code: proto.String(r.GetState())},
		SecurityGroups:        r.GetSecurityGroups(),
		AvailabilityZones:     []*elbv2.AvailabilityZone{},
	}
	for i, s := range r.GetSubnets() {
		out.AvailabilityZones = append(out.AvailabilityZones, &elbv2.AvailabilityZone{
			SubnetId: proto.String(s), ZoneName: proto.String(zone(r.GetLoadBalancerArn(), i)),
		})
	}
	return out
}

// zone names the i-th availability zone of the load balancer's region ("us-east-1a", ...).
func zone(arn string, i int) string {
	// arn:aws:elasticloadbalancing:{region}:...
	parts := splitN(arn, ':', 5)
	region := ""
	if len(parts) > 3 {
		region = parts[3]
	}
	return region + string(rune('a'+i%6))
}

func splitN(s string, sep byte, n int) []string {
	var out []string
	for len(out) < n-1 {
		i := indexByte(s, sep)
		if i < 0 {
			break
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
	return append(out, s)
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}

func tgOut(r *storev1.TargetGroupRecord) *elbv2.TargetGroup {
	out := &elbv2.TargetGroup{
		TargetGroupArn:             proto.String(r.GetTargetGroupArn()),
		TargetGroupName:            proto.String(r.GetTargetGroupName()),
		Protocol:                   proto.String(r.GetProtocol()),
		Port:                       r.GetPort(),
		VpcId:                      proto.String(r.GetVpcId()),
		TargetType:                 proto.String(r.GetTargetType()),
		HealthCheckEnabled:         r.GetHealthCheckEnabled(),
		HealthCheckProtocol:        proto.String(r.GetHealthCheckProtocol()),
		HealthCheckPort:            proto.String(r.GetHealthCheckPort()),
		HealthCheckIntervalSeconds: r.GetHealthCheckIntervalSeconds(),
		HealthCheckTimeoutSeconds:  r.GetHealthCheckTimeoutSeconds(),
		HealthyThresholdCount:      r.GetHealthyThresholdCount(),
		UnhealthyThresholdCount:    r.GetUnhealthyThresholdCount(),
		LoadBalancerArns:           nonNil(r.GetLoadBalancerArns()),
		IpAddressType:              proto.String("ipv4"),
	}
	if r.GetHealthCheckPath() != "" {
		out.HealthCheckPath = proto.String(r.GetHealthCheckPath())
	}
	if r.GetMatcherHttpCode() != "" {
		out.Matcher = &elbv2.Matcher{HttpCode: proto.String(r.GetMatcherHttpCode())}
	}
	if r.GetProtocol() == "HTTP" {
		out.ProtocolVersion = proto.String("HTTP1")
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func actionsOut(in []*storev1.ElbAction) []*elbv2.Action {
	out := []*elbv2.Action{}
	for _, a := range in {
		act := &elbv2.Action{Type: proto.String(a.GetType()), Order: a.GetOrder()}
		if a.GetPlainTargetGroupArn() && len(a.GetTargetGroups()) == 1 {
			act.TargetGroupArn = proto.String(a.GetTargetGroups()[0].GetTargetGroupArn())
		}
		fc := &elbv2.ForwardActionConfig{TargetGroupStickinessConfig: &elbv2.TargetGroupStickinessConfig{Enabled: a.GetStickinessEnabled(), DurationSeconds: a.GetStickinessDurationSeconds()}}
		for _, g := range a.GetTargetGroups() {
			fc.TargetGroups = append(fc.TargetGroups, &elbv2.TargetGroupTuple{TargetGroupArn: proto.String(g.GetTargetGroupArn()), Weight: g.GetWeight()})
		}
		act.ForwardConfig = fc
		out = append(out, act)
	}
	return out
}

func actionsIn(in []*elbv2.Action) []elb.ActionInput {
	var out []elb.ActionInput
	for _, a := range in {
		ai := elb.ActionInput{Type: a.GetType(), Order: a.GetOrder(), TargetGroupArn: a.GetTargetGroupArn()}
		switch {
		case a.RedirectConfig != nil:
			ai.Other = "redirect"
		case a.FixedResponseConfig != nil:
			ai.Other = "fixed-response"
		case a.AuthenticateOidcConfig != nil, a.AuthenticateCognitoConfig != nil, a.JwtValidationConfig != nil:
			ai.Other = "authenticate"
		}
		if fc := a.GetForwardConfig(); fc != nil {
			ai.ForwardGroups = []elb.WeightedInput{}
			for _, g := range fc.GetTargetGroups() {
				w := g.GetWeight()
				ai.ForwardGroups = append(ai.ForwardGroups, elb.WeightedInput{TargetGroupArn: g.GetTargetGroupArn(), Weight: &w})
			}
			if sc := fc.GetTargetGroupStickinessConfig(); sc != nil {
				ai.StickinessEnabled, ai.StickinessDuration = sc.GetEnabled(), sc.GetDurationSeconds()
			}
		}
		out = append(out, ai)
	}
	return out
}

func listenerOut(r *storev1.ListenerRecord) *elbv2.Listener {
	return &elbv2.Listener{
		ListenerArn: proto.String(r.GetListenerArn()), LoadBalancerArn: proto.String(r.GetLoadBalancerArn()),
		Protocol: proto.String(r.GetProtocol()), Port: r.GetPort(), DefaultActions: actionsOut(r.GetDefaultActions()),
	}
}

func ruleOut(r elb.Rule) *elbv2.Rule {
	out := &elbv2.Rule{RuleArn: proto.String(r.Record.GetRuleArn()), IsDefault: r.IsDefault, Actions: actionsOut(r.Record.GetActions()), Conditions: []*elbv2.RuleCondition{}}
	if r.IsDefault {
		out.Priority = proto.String("default")
	} else {
		out.Priority = proto.String(strconv.Itoa(int(r.Record.GetPriority())))
	}
	for _, c := range r.Record.GetConditions() {
		rc := &elbv2.RuleCondition{Field: proto.String(c.GetField()), Values: c.GetValues()}
		switch c.GetField() {
		case "path-pattern":
			rc.PathPatternConfig = &elbv2.PathPatternConditionConfig{Values: c.GetValues()}
		case "host-header":
			rc.HostHeaderConfig = &elbv2.HostHeaderConditionConfig{Values: c.GetValues()}
		}
		out.Conditions = append(out.Conditions, rc)
	}
	return out
}

func targetsIn(in []*elbv2.TargetDescription) []elb.TargetInput {
	var out []elb.TargetInput
	for _, t := range in {
		ti := elb.TargetInput{ID: t.GetId(), AvailabilityZone: t.GetAvailabilityZone()}
		if t.GetPort() != 0 { // unboxed: 0 is "not given", the group's port
			p := t.GetPort()
			ti.Port = &p
		}
		out = append(out, ti)
	}
	return out
}

func attrsOut(m map[string]string) []*elbv2.TargetGroupAttribute {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := []*elbv2.TargetGroupAttribute{}
	for _, k := range keys {
		out = append(out, &elbv2.TargetGroupAttribute{Key: proto.String(k), Value: proto.String(m[k])})
	}
	return out
}

// tgInput maps the health check members common to Create and ModifyTargetGroup. The
// model's unboxed members have no presence: 0 (and HealthCheckEnabled false) read as not
// given, so the group keeps its value.
func tgInput(enabled bool, interval, timeout, healthy, unhealthy int32, path, port, protocol *string, m *elbv2.Matcher) elb.TargetGroupInput {
	in := elb.TargetGroupInput{HealthCheckPath: path, HealthCheckPort: port, HealthCheckProtocol: protocol}
	if enabled {
		in.HealthCheckEnabled = proto.Bool(true)
	}
	opt := func(v int32) *int32 {
		if v == 0 {
			return nil
		}
		return &v
	}
	in.HealthCheckIntervalSeconds, in.HealthCheckTimeoutSeconds = opt(interval), opt(timeout)
	in.HealthyThresholdCount, in.UnhealthyThresholdCount = opt(healthy), opt(unhealthy)
	if m != nil {
		in.MatcherHTTPCode, in.MatcherGrpcCode = m.HttpCode, m.GrpcCode
	}
	return in
}

// CreateLoadBalancer implements the action.
func (h *Handler) CreateLoadBalancer(ctx context.Context, req *connect.Request[elbv2.CreateLoadBalancerRequest]) (*connect.Response[elbv2.CreateLoadBalancerResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.CreateLoadBalancerRequest) (*elbv2.CreateLoadBalancerResponse, error) {
		if len(m.GetSubnetMappings()) > 0 || m.CustomerOwnedIpv4Pool != nil || m.IpamPools != nil || m.EnablePrefixForIpv6SourceNat != nil {
			return nil, &elb.Error{Code: elb.CodeInvalidConfigurationRequest, Message: "SubnetMappings, CustomerOwnedIpv4Pool, IpamPools and EnablePrefixForIpv6SourceNat are not supported by Berth"}
		}
		r, err := h.svc.CreateLoadBalancer(ctx, sc, elb.CreateLoadBalancerInput{
			Name: m.GetName(), Type: m.GetType(), Scheme: m.GetScheme(), IPAddressType: m.GetIpAddressType(),
			Subnets: m.GetSubnets(), SecurityGroups: m.GetSecurityGroups(), Tags: tagsIn(m.GetTags()),
		})
		if err != nil {
			return nil, err
		}
		return &elbv2.CreateLoadBalancerResponse{LoadBalancers: []*elbv2.LoadBalancer{lbOut(r)}}, nil
	})
}

// DescribeLoadBalancers implements the action.
func (h *Handler) DescribeLoadBalancers(ctx context.Context, req *connect.Request[elbv2.DescribeLoadBalancersRequest]) (*connect.Response[elbv2.DescribeLoadBalancersResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DescribeLoadBalancersRequest) (*elbv2.DescribeLoadBalancersResponse, error) {
		rs, err := h.svc.DescribeLoadBalancers(ctx, sc, m.GetLoadBalancerArns(), m.GetNames())
		if err != nil {
			return nil, err
		}
		start, end, next, err := page(len(rs), m.GetMarker(), m.GetPageSize())
		if err != nil {
			return nil, err
		}
		out := &elbv2.DescribeLoadBalancersResponse{LoadBalancers: []*elbv2.LoadBalancer{}, NextMarker: next}
		for _, r := range rs[start:end] {
			out.LoadBalancers = append(out.LoadBalancers, lbOut(r))
		}
		return out, nil
	})
}

// DeleteLoadBalancer implements the action.
func (h *Handler) DeleteLoadBalancer(ctx context.Context, req *connect.Request[elbv2.DeleteLoadBalancerRequest]) (*connect.Response[elbv2.DeleteLoadBalancerResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DeleteLoadBalancerRequest) (*elbv2.DeleteLoadBalancerResponse, error) {
		if err := h.svc.DeleteLoadBalancer(ctx, sc, m.GetLoadBalancerArn()); err != nil {
			return nil, err
		}
		return &elbv2.DeleteLoadBalancerResponse{}, nil
	})
}

// CreateTargetGroup implements the action.
func (h *Handler) CreateTargetGroup(ctx context.Context, req *connect.Request[elbv2.CreateTargetGroupRequest]) (*connect.Response[elbv2.CreateTargetGroupResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.CreateTargetGroupRequest) (*elbv2.CreateTargetGroupResponse, error) {
		if m.GetTargetControlPort() != 0 {
			return nil, &elb.Error{Code: elb.CodeInvalidConfigurationRequest, Message: "TargetControlPort is not supported by Berth"}
		}
		in := tgInput(m.GetHealthCheckEnabled(), m.GetHealthCheckIntervalSeconds(), m.GetHealthCheckTimeoutSeconds(), m.GetHealthyThresholdCount(),
			m.GetUnhealthyThresholdCount(), m.HealthCheckPath, m.HealthCheckPort, m.HealthCheckProtocol, m.GetMatcher())
		in.Name, in.Protocol, in.TargetType, in.VpcID = m.GetName(), m.GetProtocol(), m.GetTargetType(), m.GetVpcId()
		in.ProtocolVersion, in.IPAddressType, in.Tags = m.GetProtocolVersion(), m.GetIpAddressType(), tagsIn(m.GetTags())
		if m.GetPort() != 0 {
			p := m.GetPort()
			in.Port = &p
		}
		r, err := h.svc.CreateTargetGroup(ctx, sc, in)
		if err != nil {
			return nil, err
		}
		return &elbv2.CreateTargetGroupResponse{TargetGroups: []*elbv2.TargetGroup{tgOut(r)}}, nil
	})
}

// DescribeTargetGroups implements the action.
func (h *Handler) DescribeTargetGroups(ctx context.Context, req *connect.Request[elbv2.DescribeTargetGroupsRequest]) (*connect.Response[elbv2.DescribeTargetGroupsResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DescribeTargetGroupsRequest) (*elbv2.DescribeTargetGroupsResponse, error) {
		rs, err := h.svc.DescribeTargetGroups(ctx, sc, m.GetLoadBalancerArn(), m.GetTargetGroupArns(), m.GetNames())
		if err != nil {
			return nil, err
		}
		start, end, next, err := page(len(rs), m.GetMarker(), m.GetPageSize())
		if err != nil {
			return nil, err
		}
		out := &elbv2.DescribeTargetGroupsResponse{TargetGroups: []*elbv2.TargetGroup{}, NextMarker: next}
		for _, r := range rs[start:end] {
			out.TargetGroups = append(out.TargetGroups, tgOut(r))
		}
		return out, nil
	})
}

// ModifyTargetGroup implements the action.
func (h *Handler) ModifyTargetGroup(ctx context.Context, req *connect.Request[elbv2.ModifyTargetGroupRequest]) (*connect.Response[elbv2.ModifyTargetGroupResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.ModifyTargetGroupRequest) (*elbv2.ModifyTargetGroupResponse, error) {
		in := tgInput(m.GetHealthCheckEnabled(), m.GetHealthCheckIntervalSeconds(), m.GetHealthCheckTimeoutSeconds(), m.GetHealthyThresholdCount(),
			m.GetUnhealthyThresholdCount(), m.HealthCheckPath, m.HealthCheckPort, m.HealthCheckProtocol, m.GetMatcher())
		r, err := h.svc.ModifyTargetGroup(ctx, sc, m.GetTargetGroupArn(), in)
		if err != nil {
			return nil, err
		}
		return &elbv2.ModifyTargetGroupResponse{TargetGroups: []*elbv2.TargetGroup{tgOut(r)}}, nil
	})
}

// DeleteTargetGroup implements the action.
func (h *Handler) DeleteTargetGroup(ctx context.Context, req *connect.Request[elbv2.DeleteTargetGroupRequest]) (*connect.Response[elbv2.DeleteTargetGroupResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DeleteTargetGroupRequest) (*elbv2.DeleteTargetGroupResponse, error) {
		if err := h.svc.DeleteTargetGroup(ctx, sc, m.GetTargetGroupArn()); err != nil {
			return nil, err
		}
		return &elbv2.DeleteTargetGroupResponse{}, nil
	})
}

func listenerIn(lbArn string, protocol *string, port int32, acts []*elbv2.Action, certs []*elbv2.Certificate, ssl *string, alpn []string, mtls *elbv2.MutualAuthenticationAttributes, tags []*elbv2.Tag) (elb.ListenerInput, error) {
	if mtls != nil {
		return elb.ListenerInput{}, &elb.Error{Code: elb.CodeInvalidConfigurationRequest, Message: "MutualAuthentication is not supported by Berth"}
	}
	in := elb.ListenerInput{LoadBalancerArn: lbArn, Protocol: protoString(protocol), SslPolicy: protoString(ssl), AlpnPolicy: alpn, Tags: tagsIn(tags)}
	if acts != nil {
		in.DefaultActions = actionsIn(acts)
	}
	for _, c := range certs {
		in.Certificates = append(in.Certificates, c.GetCertificateArn())
	}
	if port != 0 {
		in.Port = &port
	}
	return in, nil
}

func protoString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// CreateListener implements the action.
func (h *Handler) CreateListener(ctx context.Context, req *connect.Request[elbv2.CreateListenerRequest]) (*connect.Response[elbv2.CreateListenerResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.CreateListenerRequest) (*elbv2.CreateListenerResponse, error) {
		in, err := listenerIn(m.GetLoadBalancerArn(), m.Protocol, m.GetPort(), m.GetDefaultActions(), m.GetCertificates(), m.SslPolicy, m.GetAlpnPolicy(), m.GetMutualAuthentication(), m.GetTags())
		if err != nil {
			return nil, err
		}
		r, err := h.svc.CreateListener(ctx, sc, in)
		if err != nil {
			return nil, err
		}
		return &elbv2.CreateListenerResponse{Listeners: []*elbv2.Listener{listenerOut(r)}}, nil
	})
}

// DescribeListeners implements the action.
func (h *Handler) DescribeListeners(ctx context.Context, req *connect.Request[elbv2.DescribeListenersRequest]) (*connect.Response[elbv2.DescribeListenersResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DescribeListenersRequest) (*elbv2.DescribeListenersResponse, error) {
		rs, err := h.svc.DescribeListeners(ctx, sc, m.GetLoadBalancerArn(), m.GetListenerArns())
		if err != nil {
			return nil, err
		}
		start, end, next, err := page(len(rs), m.GetMarker(), m.GetPageSize())
		if err != nil {
			return nil, err
		}
		out := &elbv2.DescribeListenersResponse{Listeners: []*elbv2.Listener{}, NextMarker: next}
		for _, r := range rs[start:end] {
			out.Listeners = append(out.Listeners, listenerOut(r))
		}
		return out, nil
	})
}

// ModifyListener implements the action.
func (h *Handler) ModifyListener(ctx context.Context, req *connect.Request[elbv2.ModifyListenerRequest]) (*connect.Response[elbv2.ModifyListenerResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.ModifyListenerRequest) (*elbv2.ModifyListenerResponse, error) {
		in, err := listenerIn("", m.Protocol, m.GetPort(), m.GetDefaultActions(), m.GetCertificates(), m.SslPolicy, m.GetAlpnPolicy(), m.GetMutualAuthentication(), nil)
		if err != nil {
			return nil, err
		}
		r, err := h.svc.ModifyListener(ctx, sc, m.GetListenerArn(), in)
		if err != nil {
			return nil, err
		}
		return &elbv2.ModifyListenerResponse{Listeners: []*elbv2.Listener{listenerOut(r)}}, nil
	})
}

// DeleteListener implements the action.
func (h *Handler) DeleteListener(ctx context.Context, req *connect.Request[elbv2.DeleteListenerRequest]) (*connect.Response[elbv2.DeleteListenerResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DeleteListenerRequest) (*elbv2.DeleteListenerResponse, error) {
		if err := h.svc.DeleteListener(ctx, sc, m.GetListenerArn()); err != nil {
			return nil, err
		}
		return &elbv2.DeleteListenerResponse{}, nil
	})
}

// CreateRule implements the action.
func (h *Handler) CreateRule(ctx context.Context, req *connect.Request[elbv2.CreateRuleRequest]) (*connect.Response[elbv2.CreateRuleResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.CreateRuleRequest) (*elbv2.CreateRuleResponse, error) {
		if len(m.GetTransforms()) > 0 {
			return nil, &elb.Error{Code: elb.CodeInvalidConfigurationRequest, Message: "Rule transforms are not supported by Berth"}
		}
		in := elb.RuleInput{ListenerArn: m.GetListenerArn(), Priority: m.GetPriority(), Actions: actionsIn(m.GetActions()), Tags: tagsIn(m.GetTags())}
		for _, c := range m.GetConditions() {
			ci := elb.ConditionInput{Field: c.GetField(), Values: c.GetValues()}
			switch {
			case c.GetPathPatternConfig() != nil:
				ci.Values = append(ci.Values, c.GetPathPatternConfig().GetValues()...)
				if len(c.GetPathPatternConfig().GetRegexValues()) > 0 {
					ci.Other = "path-pattern regex values"
				}
			case c.GetHostHeaderConfig() != nil:
				ci.Values = append(ci.Values, c.GetHostHeaderConfig().GetValues()...)
				if len(c.GetHostHeaderConfig().GetRegexValues()) > 0 {
					ci.Other = "host-header regex values"
				}
			case c.HttpHeaderConfig != nil, c.HttpRequestMethodConfig != nil, c.QueryStringConfig != nil, c.SourceIpConfig != nil, len(c.GetRegexValues()) > 0:
				ci.Other = "http-header, http-request-method, query-string, source-ip and regex"
			}
			in.Conditions = append(in.Conditions, ci)
		}
		r, err := h.svc.CreateRule(ctx, sc, in)
		if err != nil {
			return nil, err
		}
		return &elbv2.CreateRuleResponse{Rules: []*elbv2.Rule{ruleOut(elb.Rule{Record: r})}}, nil
	})
}

// DescribeRules implements the action.
func (h *Handler) DescribeRules(ctx context.Context, req *connect.Request[elbv2.DescribeRulesRequest]) (*connect.Response[elbv2.DescribeRulesResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DescribeRulesRequest) (*elbv2.DescribeRulesResponse, error) {
		rs, err := h.svc.DescribeRules(ctx, sc, m.GetListenerArn(), m.GetRuleArns())
		if err != nil {
			return nil, err
		}
		start, end, next, err := page(len(rs), m.GetMarker(), m.GetPageSize())
		if err != nil {
			return nil, err
		}
		out := &elbv2.DescribeRulesResponse{Rules: []*elbv2.Rule{}, NextMarker: next}
		for _, r := range rs[start:end] {
			out.Rules = append(out.Rules, ruleOut(r))
		}
		return out, nil
	})
}

// DeleteRule implements the action.
func (h *Handler) DeleteRule(ctx context.Context, req *connect.Request[elbv2.DeleteRuleRequest]) (*connect.Response[elbv2.DeleteRuleResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DeleteRuleRequest) (*elbv2.DeleteRuleResponse, error) {
		if err := h.svc.DeleteRule(ctx, sc, m.GetRuleArn()); err != nil {
			return nil, err
		}
		return &elbv2.DeleteRuleResponse{}, nil
	})
}

// RegisterTargets implements the action.
func (h *Handler) RegisterTargets(ctx context.Context, req *connect.Request[elbv2.RegisterTargetsRequest]) (*connect.Response[elbv2.RegisterTargetsResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.RegisterTargetsRequest) (*elbv2.RegisterTargetsResponse, error) {
		for _, t := range m.GetTargets() {
			if t.QuicServerId != nil {
				return nil, &elb.Error{Code: elb.CodeInvalidTarget, Message: "QuicServerId is not supported by Berth"}
			}
		}
		if err := h.svc.RegisterTargets(ctx, sc, m.GetTargetGroupArn(), targetsIn(m.GetTargets())); err != nil {
			return nil, err
		}
		return &elbv2.RegisterTargetsResponse{}, nil
	})
}

// DeregisterTargets implements the action.
func (h *Handler) DeregisterTargets(ctx context.Context, req *connect.Request[elbv2.DeregisterTargetsRequest]) (*connect.Response[elbv2.DeregisterTargetsResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DeregisterTargetsRequest) (*elbv2.DeregisterTargetsResponse, error) {
		if err := h.svc.DeregisterTargets(ctx, sc, m.GetTargetGroupArn(), targetsIn(m.GetTargets())); err != nil {
			return nil, err
		}
		return &elbv2.DeregisterTargetsResponse{}, nil
	})
}

// DescribeTargetHealth implements the action.
func (h *Handler) DescribeTargetHealth(ctx context.Context, req *connect.Request[elbv2.DescribeTargetHealthRequest]) (*connect.Response[elbv2.DescribeTargetHealthResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DescribeTargetHealthRequest) (*elbv2.DescribeTargetHealthResponse, error) {
		for _, inc := range m.GetInclude() {
			if inc != "All" && inc != "AnomalyDetection" {
				return nil, &elb.Error{Code: elb.CodeValidation, Message: "Include value '" + inc + "' is not valid"}
			}
		}
		hs, err := h.svc.DescribeTargetHealth(ctx, sc, m.GetTargetGroupArn(), targetsIn(m.GetTargets()))
		if err != nil {
			return nil, err
		}
		out := &elbv2.DescribeTargetHealthResponse{TargetHealthDescriptions: []*elbv2.TargetHealthDescription{}}
		for _, th := range hs {
			d := &elbv2.TargetHealthDescription{
				Target:          &elbv2.TargetDescription{Id: proto.String(th.ID), Port: th.Port},
				HealthCheckPort: proto.String(th.HealthCheckPort),
				TargetHealth:    &elbv2.TargetHealth{State: proto.String(th.State)},
			}
			if th.AvailabilityZone != "" {
				d.Target.AvailabilityZone = proto.String(th.AvailabilityZone)
			}
			if th.Reason != "" {
				d.TargetHealth.Reason = proto.String(th.Reason)
				d.TargetHealth.Description = proto.String(th.Description)
			}
			out.TargetHealthDescriptions = append(out.TargetHealthDescriptions, d)
		}
		return out, nil
	})
}

// DescribeTargetGroupAttributes implements the action.
func (h *Handler) DescribeTargetGroupAttributes(ctx context.Context, req *connect.Request[elbv2.DescribeTargetGroupAttributesRequest]) (*connect.Response[elbv2.DescribeTargetGroupAttributesResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DescribeTargetGroupAttributesRequest) (*elbv2.DescribeTargetGroupAttributesResponse, error) {
		attrs, err := h.svc.DescribeTargetGroupAttributes(ctx, sc, m.GetTargetGroupArn())
		if err != nil {
			return nil, err
		}
		return &elbv2.DescribeTargetGroupAttributesResponse{Attributes: attrsOut(attrs)}, nil
	})
}

// ModifyTargetGroupAttributes implements the action.
func (h *Handler) ModifyTargetGroupAttributes(ctx context.Context, req *connect.Request[elbv2.ModifyTargetGroupAttributesRequest]) (*connect.Response[elbv2.ModifyTargetGroupAttributesResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.ModifyTargetGroupAttributesRequest) (*elbv2.ModifyTargetGroupAttributesResponse, error) {
		var in []elb.Tag
		for _, a := range m.GetAttributes() {
			in = append(in, elb.Tag{Key: a.GetKey(), Value: a.GetValue()})
		}
		attrs, err := h.svc.ModifyTargetGroupAttributes(ctx, sc, m.GetTargetGroupArn(), in)
		if err != nil {
			return nil, err
		}
		return &elbv2.ModifyTargetGroupAttributesResponse{Attributes: attrsOut(attrs)}, nil
	})
}

// AddTags implements the action.
func (h *Handler) AddTags(ctx context.Context, req *connect.Request[elbv2.AddTagsRequest]) (*connect.Response[elbv2.AddTagsResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.AddTagsRequest) (*elbv2.AddTagsResponse, error) {
		if err := h.svc.AddTags(ctx, sc, m.GetResourceArns(), tagsIn(m.GetTags())); err != nil {
			return nil, err
		}
		return &elbv2.AddTagsResponse{}, nil
	})
}

// RemoveTags implements the action.
func (h *Handler) RemoveTags(ctx context.Context, req *connect.Request[elbv2.RemoveTagsRequest]) (*connect.Response[elbv2.RemoveTagsResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.RemoveTagsRequest) (*elbv2.RemoveTagsResponse, error) {
		if err := h.svc.RemoveTags(ctx, sc, m.GetResourceArns(), m.GetTagKeys()); err != nil {
			return nil, err
		}
		return &elbv2.RemoveTagsResponse{}, nil
	})
}

// DescribeTags implements the action.
func (h *Handler) DescribeTags(ctx context.Context, req *connect.Request[elbv2.DescribeTagsRequest]) (*connect.Response[elbv2.DescribeTagsResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, sc keys.Scope, m *elbv2.DescribeTagsRequest) (*elbv2.DescribeTagsResponse, error) {
		tags, err := h.svc.DescribeTags(ctx, sc, m.GetResourceArns())
		if err != nil {
			return nil, err
		}
		out := &elbv2.DescribeTagsResponse{TagDescriptions: []*elbv2.TagDescription{}}
		for _, arn := range m.GetResourceArns() {
			td := &elbv2.TagDescription{ResourceArn: proto.String(arn), Tags: []*elbv2.Tag{}}
			for _, t := range tags[arn] {
				td.Tags = append(td.Tags, &elbv2.Tag{Key: proto.String(t.Key), Value: proto.String(t.Value)})
			}
			out.TagDescriptions = append(out.TagDescriptions, td)
		}
		return out, nil
	})
}

// InstanceHost resolves an instance target's id — the ec2InstanceId of a container
// instance of the caller's scope — to the address the lb role reaches its host ports at.
// Berth records no host address per instance yet, so it is loopback, which is right for
// `berth dev` (the lb role runs beside the one agent); an unknown id is InvalidTarget.
func InstanceHost(kv clientv3.KV) elb.InstanceHost {
	return func(ctx context.Context, sc keys.Scope, id string) (string, error) {
		token := ""
		for {
			items, next, err := store.List[*storev1.ContainerInstanceRecord](ctx, kv, keys.InstancesInScope(sc), store.MaxListLimit, token)
			if err != nil {
				return "", err
			}
			for _, it := range items {
				if ci := it.Value.GetContainerInstance(); ci.GetEc2InstanceId() == id && ci.GetStatus() != "INACTIVE" {
					return "127.0.0.1", nil
				}
			}
			if next == "" {
				return "", &elb.Error{Code: elb.CodeInvalidTarget, Message: "The following targets are not valid instances: '" + id + "'", Status: 400}
			}
			token = next
		}
	}
}
