package elb

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// TargetGroupInput is CreateTargetGroup's and ModifyTargetGroup's request; nil pointers
// are members not given.
type TargetGroupInput struct {
	Name, Protocol, TargetType, VpcID, ProtocolVersion, IPAddressType string
	Port                                                              *int32

	HealthCheckEnabled                                    *bool
	HealthCheckProtocol, HealthCheckPort, HealthCheckPath *string
	HealthCheckIntervalSeconds, HealthCheckTimeoutSeconds *int32
	HealthyThresholdCount, UnhealthyThresholdCount        *int32
	MatcherHTTPCode                                       *string
	MatcherGrpcCode                                       *string
	Tags                                                  []Tag
}

var tgName = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?$`)

var matcherRE = regexp.MustCompile(`^[0-9]{3}(-[0-9]{3})?(,[0-9]{3}(-[0-9]{3})?)*$`)

// matcherMax is the highest HTTP code a health check matcher may name (AWS's Matcher
// reference): 499 for Application Load Balancers (HTTP target groups), 599 for Network
// Load Balancers (TCP target groups checking over HTTP). The lowest is 200 for both.
func matcherMax(protocol string) int {
	if protocol == "TCP" {
		return 599
	}
	return 499
}

// matcherOK reports whether m is codes ("200,202") and ascending ranges ("200-299"), each
// from 200 to hi.
func matcherOK(m string, hi int) bool {
	if !matcherRE.MatchString(m) {
		return false
	}
	for part := range strings.SplitSeq(m, ",") {
		from, to, isRange := strings.Cut(part, "-")
		if !isRange {
			to = from
		}
		a, _ := strconv.Atoi(from)
		b, _ := strconv.Atoi(to)
		if a < 200 || b > hi || a > b {
			return false
		}
	}
	return true
}

// CreateTargetGroup creates a target group (target type instance or ip; protocol HTTP or
// TCP) with AWS's health check defaults for its protocol. It is idempotent for the same
// name and settings, as on AWS.
func (s *Service) CreateTargetGroup(ctx context.Context, sc keys.Scope, in TargetGroupInput) (*storev1.TargetGroupRecord, error) {
	if !tgName.MatchString(in.Name) {
		return nil, validation("Target group name '%s' can only contain characters that are alphanumeric characters or hyphens(-), must be 1-32 characters and must not begin or end with a hyphen", in.Name)
	}
	typ := cmpOr(in.TargetType, "instance")
	switch typ {
	case "instance", "ip":
	case "lambda", "alb":
		return nil, errorf(CodeInvalidConfigurationRequest, "Target type '%s' is not supported by Berth: instance and ip are", typ)
	default:
		return nil, validation("Target type '%s' is not valid", typ)
	}
	if in.Protocol == "" {
		return nil, validation("A protocol must be specified")
	}
	switch in.Protocol {
	case "HTTP", "TCP":
	case "HTTPS", "TLS", "UDP", "TCP_UDP", "GENEVE", "QUIC", "TCP_QUIC":
		return nil, errorf(CodeUnsupportedProtocol, "Protocol '%s' is not supported by Berth: HTTP and TCP are", in.Protocol)
	default:
		return nil, validation("Protocol '%s' is not valid", in.Protocol)
	}
	if in.Port == nil {
		return nil, validation("A port must be specified")
	}
	if *in.Port < 1 || *in.Port > 65535 {
		return nil, validation("Port '%d' must be between 1 and 65535", *in.Port)
	}
	if in.ProtocolVersion != "" && in.ProtocolVersion != "HTTP1" {
		return nil, errorf(CodeInvalidConfigurationRequest, "Protocol version '%s' is not supported by Berth: HTTP1 is", in.ProtocolVersion)
	}
	if in.IPAddressType != "" && in.IPAddressType != "ipv4" {
		return nil, errorf(CodeInvalidConfigurationRequest, "IP address type '%s' is not supported by Berth: ipv4 is", in.IPAddressType)
	}
	tags, err := checkTags(in.Tags)
	if err != nil {
		return nil, err
	}
	rec := &storev1.TargetGroupRecord{
		TargetGroupArn:  arnPrefix(sc) + "targetgroup/" + in.Name + "/" + newID(),
		TargetGroupName: in.Name,
		Protocol:        in.Protocol,
		Port:            *in.Port,
		TargetType:      typ,
		VpcId:           cmpOr(in.VpcID, defaultVPC),
		Tags:            tags,
		// AWS's defaults: HTTP groups check HTTP "/" every 30s (timeout 5s, 5 to become
		// healthy, 2 to become unhealthy, code 200); TCP groups check TCP every 30s
		// (timeout 10s, 5 and 2).
		HealthCheckEnabled:         true,
		HealthCheckProtocol:        in.Protocol,
		HealthCheckPort:            "traffic-port",
		HealthCheckIntervalSeconds: 30,
		HealthCheckTimeoutSeconds:  5,
		HealthyThresholdCount:      5,
		UnhealthyThresholdCount:    2,
		Attributes: map[string]string{
			"deregistration_delay.timeout_seconds":                "300",
			"stickiness.enabled":                                  "false",
			"load_balancing.algorithm.type":                       "round_robin",
			"slow_start.duration_seconds":                         "0",
			"deregistration_delay.connection_termination.enabled": "false",
		},
	}
	if in.Protocol == "HTTP" {
		rec.HealthCheckPath = "/"
		rec.MatcherHttpCode = "200"
		rec.Attributes["stickiness.type"] = "lb_cookie"
	} else {
		rec.HealthCheckTimeoutSeconds = 10
		rec.Attributes["stickiness.type"] = "source_ip"
		delete(rec.Attributes, "slow_start.duration_seconds")
		delete(rec.Attributes, "load_balancing.algorithm.type")
	}
	if err := applyHealthCheck(rec, in); err != nil {
		return nil, err
	}
	key := keys.ElbTargetGroup(sc, in.Name)
	_, err = store.Create(ctx, s.kv, key, rec)
	if errors.Is(err, store.ErrExists) {
		cur, _, gerr := store.Get[*storev1.TargetGroupRecord](ctx, s.kv, key)
		if gerr == nil && cur.GetProtocol() == rec.GetProtocol() && cur.GetPort() == rec.GetPort() && cur.GetTargetType() == rec.GetTargetType() {
			return cur, nil
		}
		return nil, errorf(CodeDuplicateTargetGroupName, "A target group with the same name '%s' exists, but with different settings", in.Name)
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// applyHealthCheck sets the health check members given in in on rec and checks the
// result against AWS's ranges.
func applyHealthCheck(rec *storev1.TargetGroupRecord, in TargetGroupInput) error {
	if in.HealthCheckEnabled != nil {
		rec.HealthCheckEnabled = *in.HealthCheckEnabled
	}
	if in.HealthCheckProtocol != nil {
		switch *in.HealthCheckProtocol {
		case "HTTP", "TCP":
		default:
			return errorf(CodeInvalidConfigurationRequest, "Health check protocol '%s' is not supported by Berth: HTTP and TCP are", *in.HealthCheckProtocol)
		}
		if rec.GetProtocol() == "HTTP" && *in.HealthCheckProtocol == "TCP" {
			return errorf(CodeInvalidConfigurationRequest, "Health check protocol 'TCP' is not supported for target groups with the HTTP protocol")
		}
		rec.HealthCheckProtocol = *in.HealthCheckProtocol
		if rec.HealthCheckProtocol == "HTTP" && rec.HealthCheckPath == "" {
			// AWS's default matcher: 200 for an ALB's groups, 200-399 for an NLB's.
			rec.HealthCheckPath, rec.MatcherHttpCode = "/", "200"
			if rec.GetProtocol() == "TCP" {
				rec.MatcherHttpCode = "200-399"
			}
		}
	}
	if in.HealthCheckPort != nil {
		p := *in.HealthCheckPort
		if n, err := strconv.Atoi(p); p != "traffic-port" && (err != nil || n < 1 || n > 65535) {
			return validation("Health check port '%s' must be 'traffic-port' or a port from 1 to 65535", p)
		}
		rec.HealthCheckPort = p
	}
	if in.HealthCheckPath != nil {
		p := *in.HealthCheckPath
		if !strings.HasPrefix(p, "/") || len(p) > 1024 {
			return validation("Health check path '%s' must begin with '/' and be at most 1024 characters", p)
		}
		if rec.HealthCheckProtocol == "TCP" {
			return errorf(CodeInvalidConfigurationRequest, "A health check path cannot be set with the TCP health check protocol")
		}
		rec.HealthCheckPath = p
	}
	if in.MatcherGrpcCode != nil {
		return errorf(CodeInvalidConfigurationRequest, "gRPC matchers are not supported by Berth")
	}
	if in.MatcherHTTPCode != nil {
		m := *in.MatcherHTTPCode
		if hi := matcherMax(rec.GetProtocol()); !matcherOK(m, hi) {
			return validation("Health check matcher HTTP code '%s' must be codes from 200 to %d such as 200, 200,202 or 200-299", m, hi)
		}
		if rec.HealthCheckProtocol == "TCP" {
			return errorf(CodeInvalidConfigurationRequest, "A health check matcher cannot be set with the TCP health check protocol")
		}
		rec.MatcherHttpCode = m
	}
	set := func(dst *int32, v *int32, lo, hi int32, name string) error {
		if v == nil {
			return nil
		}
		if *v < lo || *v > hi {
			return validation("%s '%d' must be between %d and %d", name, *v, lo, hi)
		}
		*dst = *v
		return nil
	}
	for _, f := range []func() error{
		func() error {
			return set(&rec.HealthCheckIntervalSeconds, in.HealthCheckIntervalSeconds, 5, 300, "Health check interval")
		},
		func() error {
			return set(&rec.HealthCheckTimeoutSeconds, in.HealthCheckTimeoutSeconds, 2, 120, "Health check timeout")
		},
		func() error {
			return set(&rec.HealthyThresholdCount, in.HealthyThresholdCount, 2, 10, "Healthy threshold count")
		},
		func() error {
			return set(&rec.UnhealthyThresholdCount, in.UnhealthyThresholdCount, 2, 10, "Unhealthy threshold count")
		},
	} {
		if err := f(); err != nil {
			return err
		}
	}
	if rec.HealthCheckTimeoutSeconds >= rec.HealthCheckIntervalSeconds {
		return errorf(CodeInvalidConfigurationRequest, "Health check interval must be greater than the timeout.")
	}
	return nil
}

// targetGroupByARN returns the target group an ARN names, or TargetGroupNotFound.
func (s *Service) targetGroupByARN(ctx context.Context, sc keys.Scope, arn string) (*storev1.TargetGroupRecord, int64, error) {
	p, ok := parseARN(sc, arn)
	if ok && p.kind == "targetgroup" {
		rec, rev, err := store.Get[*storev1.TargetGroupRecord](ctx, s.kv, keys.ElbTargetGroup(sc, p.segs[0]))
		if err == nil && rec.GetTargetGroupArn() == arn {
			return rec, rev, nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, 0, err
		}
	}
	return nil, 0, errorf(CodeTargetGroupNotFound, "Target groups '%s' not found", arn)
}

// TargetGroup returns the target group an ARN names (TargetGroupNotFound when none):
// for the ECS service scheduler's validation of loadBalancers[].
func (s *Service) TargetGroup(ctx context.Context, sc keys.Scope, arn string) (*storev1.TargetGroupRecord, error) {
	rec, _, err := s.targetGroupByARN(ctx, sc, arn)
	return rec, err
}

// DescribeTargetGroups returns the named target groups (by ARN, by name, or those a load
// balancer forwards to), or every one of the scope, each with the load balancers that
// forward to it.
func (s *Service) DescribeTargetGroups(ctx context.Context, sc keys.Scope, lbArn string, arns, names []string) ([]*storev1.TargetGroupRecord, error) {
	given := 0
	for _, b := range []bool{lbArn != "", len(arns) > 0, len(names) > 0} {
		if b {
			given++
		}
	}
	if given > 1 {
		return nil, validation("Only one of load balancer ARN, target group ARNs and target group names can be specified")
	}
	use, err := s.usage(ctx, sc)
	if err != nil {
		return nil, err
	}
	var out []*storev1.TargetGroupRecord
	switch {
	case len(arns) > 0:
		for _, a := range arns {
			rec, _, err := s.targetGroupByARN(ctx, sc, a)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
	case len(names) > 0:
		for _, n := range names {
			rec, err := byName[*storev1.TargetGroupRecord](ctx, s.kv, n, func(n string) string { return keys.ElbTargetGroup(sc, n) })
			if errors.Is(err, store.ErrNotFound) {
				return nil, errorf(CodeTargetGroupNotFound, "Target groups '[%s]' not found", n)
			}
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
	default:
		if lbArn != "" {
			if _, _, err := s.loadBalancerByARN(ctx, sc, lbArn); err != nil {
				return nil, err
			}
		}
		items, err := store.ListAll[*storev1.TargetGroupRecord](ctx, s.kv, keys.ElbTargetGroup(sc, ""))
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if lbArn == "" || slices.Contains(use[it.Value.GetTargetGroupArn()], lbArn) {
				out = append(out, it.Value)
			}
		}
	}
	for _, tg := range out {
		tg.LoadBalancerArns = use[tg.GetTargetGroupArn()]
	}
	return out, nil
}

// ModifyTargetGroup changes a target group's health check settings.
func (s *Service) ModifyTargetGroup(ctx context.Context, sc keys.Scope, arn string, in TargetGroupInput) (*storev1.TargetGroupRecord, error) {
	cur, _, err := s.targetGroupByARN(ctx, sc, arn)
	if err != nil {
		return nil, err
	}
	rec, _, err := store.Mutate(ctx, s.kv, keys.ElbTargetGroup(sc, cur.GetTargetGroupName()), func(rec *storev1.TargetGroupRecord) error {
		if rec.GetTargetGroupArn() != arn {
			return errorf(CodeTargetGroupNotFound, "Target groups '%s' not found", arn)
		}
		return applyHealthCheck(rec, in)
	})
	if err != nil {
		return nil, err
	}
	use, err := s.usage(ctx, sc)
	if err != nil {
		return nil, err
	}
	rec.LoadBalancerArns = use[arn]
	return rec, nil
}

// DeleteTargetGroup deletes a target group and its targets, in one transaction. A group
// a listener or rule forwards to is ResourceInUse, as on AWS; one that does not exist is
// deleted already.
func (s *Service) DeleteTargetGroup(ctx context.Context, sc keys.Scope, arn string) error {
	cur, rev, err := s.targetGroupByARN(ctx, sc, arn)
	if CodeOf(err) == CodeTargetGroupNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	use, err := s.usage(ctx, sc)
	if err != nil {
		return err
	}
	if lbs := use[arn]; len(lbs) > 0 {
		return errorf(CodeResourceInUse, "Target group '%s' is currently in use by a listener or a rule", arn)
	}
	name := cur.GetTargetGroupName()
	// The group, its targets and the lb role's health records of them go in one txn
	// whatever their number (range deletes: deleteWith).
	err = s.deleteWith(ctx, keys.ElbTargetGroup(sc, name), rev, keys.ElbTarget(sc, name, "", 0), keys.ElbTargetHealth(sc, name, "", 0))
	switch {
	case errors.Is(err, store.ErrConflict):
		return s.DeleteTargetGroup(ctx, sc, arn) // changed meanwhile (tags, health check): again
	case errors.Is(err, store.ErrNotFound):
		return nil // deleted meanwhile
	}
	return err
}

// Target group attributes Berth honours, and the values it accepts.
var tgAttributes = map[string]func(v string) bool{
	"deregistration_delay.timeout_seconds":                func(v string) bool { n, err := strconv.Atoi(v); return err == nil && n >= 0 && n <= 3600 },
	"stickiness.enabled":                                  func(v string) bool { return v == "false" },
	"stickiness.type":                                     func(v string) bool { return v == "lb_cookie" || v == "source_ip" },
	"load_balancing.algorithm.type":                       func(v string) bool { return v == "round_robin" },
	"slow_start.duration_seconds":                         func(v string) bool { return v == "0" },
	"deregistration_delay.connection_termination.enabled": func(v string) bool { return v == "false" },
}

// DescribeTargetGroupAttributes returns the group's attributes, sorted by key.
func (s *Service) DescribeTargetGroupAttributes(ctx context.Context, sc keys.Scope, arn string) (map[string]string, error) {
	cur, _, err := s.targetGroupByARN(ctx, sc, arn)
	if err != nil {
		return nil, err
	}
	return cur.GetAttributes(), nil
}

// ModifyTargetGroupAttributes sets attributes and returns all of them. Berth honours
// deregistration_delay.timeout_seconds (0-3600); the others accept only the behaviour
// Berth has (stickiness off, round robin, no slow start), and an unknown key is refused.
func (s *Service) ModifyTargetGroupAttributes(ctx context.Context, sc keys.Scope, arn string, attrs []Tag) (map[string]string, error) {
	cur, _, err := s.targetGroupByARN(ctx, sc, arn)
	if err != nil {
		return nil, err
	}
	for _, a := range attrs {
		ok, known := tgAttributes[a.Key]
		if !known {
			return nil, validation("Target group attribute key '%s' is not recognized", a.Key)
		}
		if !ok(a.Value) {
			return nil, errorf(CodeInvalidConfigurationRequest, "Target group attribute '%s' value '%s' is not valid or not supported by Berth", a.Key, a.Value)
		}
	}
	rec, _, err := store.Mutate(ctx, s.kv, keys.ElbTargetGroup(sc, cur.GetTargetGroupName()), func(rec *storev1.TargetGroupRecord) error {
		if rec.Attributes == nil {
			rec.Attributes = map[string]string{}
		}
		for _, a := range attrs {
			rec.Attributes[a.Key] = a.Value
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec.GetAttributes(), nil
}
