package elb

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Load balancer types (LoadBalancerTypeEnum) Berth serves.
const (
	TypeApplication = "application"
	TypeNetwork     = "network"
)

// Service is the ELBv2 control plane: it validates requests as AWS does and keeps the
// records in etcd that the `berth lb` role serves. Every method takes the caller's
// scope (account and region) and returns *Error for client errors.
type Service struct {
	kv           clientv3.KV
	now          func() time.Time
	instanceHost InstanceHost
}

// New returns a Service on kv.
func New(kv clientv3.KV) *Service { return &Service{kv: kv, now: time.Now} }

// Tag is one ELBv2 tag.
type Tag struct{ Key, Value string }

// CreateLoadBalancerInput is CreateLoadBalancer's request.
type CreateLoadBalancerInput struct {
	Name, Type, Scheme, IPAddressType string
	Subnets, SecurityGroups           []string
	Tags                              []Tag
}

var lbName = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?$`)

// CreateLoadBalancer creates an application or network load balancer, active at once
// (the lb role binds its listeners as they are created). As on AWS it is idempotent: the
// same name with the same settings returns the existing load balancer.
func (s *Service) CreateLoadBalancer(ctx context.Context, sc keys.Scope, in CreateLoadBalancerInput) (*storev1.LoadBalancerRecord, error) {
	if !lbName.MatchString(in.Name) || strings.HasPrefix(in.Name, "internal-") {
		return nil, validation("The load balancer name '%s' is not valid: up to 32 alphanumeric characters or hyphens, not beginning or ending with a hyphen, and not beginning with 'internal-'", in.Name)
	}
	typ := cmpOr(in.Type, TypeApplication)
	if typ != TypeApplication && typ != TypeNetwork {
		return nil, errorf(CodeOperationNotPermitted, "Load balancer type '%s' is not supported by Berth: application and network are", typ)
	}
	scheme := cmpOr(in.Scheme, "internet-facing")
	if scheme != "internet-facing" && scheme != "internal" {
		return nil, validation("Scheme '%s' is not valid: internet-facing or internal", scheme)
	}
	ipType := cmpOr(in.IPAddressType, "ipv4")
	if ipType != "ipv4" {
		return nil, errorf(CodeInvalidConfigurationRequest, "IP address type '%s' is not supported by Berth: ipv4 is", ipType)
	}
	tags, err := checkTags(in.Tags)
	if err != nil {
		return nil, err
	}
	id := newID()
	dnsPrefix := in.Name
	if scheme == "internal" {
		dnsPrefix = "internal-" + in.Name
	}
	dns := fmt.Sprintf("%s-%s.%s.elb.amazonaws.com", dnsPrefix, id[:10], sc.Region)
	if typ == TypeNetwork {
		dns = fmt.Sprintf("%s-%s.elb.%s.amazonaws.com", dnsPrefix, id[:10], sc.Region)
	}
	rec := &storev1.LoadBalancerRecord{
		LoadBalancerArn:  arnPrefix(sc) + "loadbalancer/" + lbShort(typ) + "/" + in.Name + "/" + id,
		LoadBalancerName: in.Name,
		Type:             typ,
		Scheme:           scheme,
		DnsName:          dns,
		State:            "active",
		CreatedTime:      awsapi.Epoch(s.now()),
		IpAddressType:    ipType,
		VpcId:            defaultVPC,
		Tags:             tags,
		Attributes:       map[string]string{"deletion_protection.enabled": "false"},
		Subnets:          in.Subnets,
		SecurityGroups:   in.SecurityGroups,
	}
	key := keys.ElbLoadBalancer(sc, in.Name)
	_, err = store.Create(ctx, s.kv, key, rec)
	if errors.Is(err, store.ErrExists) {
		cur, _, gerr := store.Get[*storev1.LoadBalancerRecord](ctx, s.kv, key)
		if gerr == nil && cur.GetType() == typ && cur.GetScheme() == scheme {
			return cur, nil
		}
		return nil, errorf(CodeDuplicateLoadBalancerName, "A load balancer with the same name '%s' exists, but with different settings", in.Name)
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// defaultVPC is the VPC id Berth reports: each region is one flat network.
const defaultVPC = "vpc-berth"

// loadBalancerByARN returns the load balancer an ARN names, or LoadBalancerNotFound.
func (s *Service) loadBalancerByARN(ctx context.Context, sc keys.Scope, arn string) (*storev1.LoadBalancerRecord, int64, error) {
	p, ok := parseARN(sc, arn)
	if ok && p.kind == "loadbalancer" {
		rec, rev, err := store.Get[*storev1.LoadBalancerRecord](ctx, s.kv, keys.ElbLoadBalancer(sc, p.segs[1]))
		if err == nil && rec.GetLoadBalancerArn() == arn {
			return rec, rev, nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, 0, err
		}
	}
	return nil, 0, errorf(CodeLoadBalancerNotFound, "Load balancer '%s' not found", arn)
}

// DescribeLoadBalancers returns the named load balancers (by ARN or by name; at most one
// of the two lists), or every one of the scope, in name order. A name or ARN that does
// not exist fails the call with LoadBalancerNotFound, as on AWS.
func (s *Service) DescribeLoadBalancers(ctx context.Context, sc keys.Scope, arns, names []string) ([]*storev1.LoadBalancerRecord, error) {
	if len(arns) > 0 && len(names) > 0 {
		return nil, validation("Load balancer names and load balancer ARNs cannot be specified at the same time")
	}
	var out []*storev1.LoadBalancerRecord
	switch {
	case len(arns) > 0:
		for _, a := range arns {
			rec, _, err := s.loadBalancerByARN(ctx, sc, a)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
	case len(names) > 0:
		for _, n := range names {
			rec, err := byName[*storev1.LoadBalancerRecord](ctx, s.kv, n, func(n string) string { return keys.ElbLoadBalancer(sc, n) })
			if errors.Is(err, store.ErrNotFound) {
				return nil, errorf(CodeLoadBalancerNotFound, "Load balancers '[%s]' not found", n)
			}
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
	default:
		items, err := store.ListAll[*storev1.LoadBalancerRecord](ctx, s.kv, keys.ElbLoadBalancer(sc, ""))
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			out = append(out, it.Value)
		}
	}
	return out, nil
}

// DeleteLoadBalancer deletes a load balancer with its listeners and rules in one
// transaction; the lb role closes the listeners (in-flight requests finish). Deleting a
// load balancer that does not exist succeeds, as on AWS.
func (s *Service) DeleteLoadBalancer(ctx context.Context, sc keys.Scope, arn string) error {
	rec, rev, err := s.loadBalancerByARN(ctx, sc, arn)
	if CodeOf(err) == CodeLoadBalancerNotFound {
		if _, ok := parseARN(sc, arn); !ok {
			return validation("'%s' is not a valid load balancer ARN", arn)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if rec.GetAttributes()["deletion_protection.enabled"] == "true" {
		return errorf(CodeOperationNotPermitted, "Load balancer '%s' cannot be deleted because deletion protection is enabled", arn)
	}
	name := rec.GetLoadBalancerName()
	err = s.deleteWith(ctx, keys.ElbLoadBalancer(sc, name), rev, keys.ElbListener(sc, name, ""), keys.ElbRule(sc, name, "", ""))
	switch {
	case errors.Is(err, store.ErrConflict):
		return s.DeleteLoadBalancer(ctx, sc, arn) // changed meanwhile (tags, attributes): again
	case errors.Is(err, store.ErrNotFound):
		return nil // deleted meanwhile
	}
	return err
}

// deleteWith deletes the record at key, if its ModRevision is still rev, together with
// every key under prefixes (the records that hang off it), in one etcd txn. A prefix is
// one range delete, one of etcd's --max-txn-ops (128 by default) however many keys it
// holds, so the record and its dependents go atomically at any size (50 listeners of 100
// rules, 1,000 targets and their health). It fails wrapping store.ErrNotFound when the
// record is gone and store.ErrConflict when it changed; nothing is deleted then.
func (s *Service) deleteWith(ctx context.Context, key string, rev int64, prefixes ...string) error {
	ops := []clientv3.Op{clientv3.OpDelete(key)}
	for _, p := range prefixes {
		elbOwn := strings.HasPrefix(p, keys.ElbConfig()) || strings.HasPrefix(p, keys.ElbHealthAll())
		if !elbOwn || !strings.HasSuffix(p, "/") {
			return fmt.Errorf("elb: delete %s: %q is not a key prefix of ELBv2's", key, p)
		}
		ops = append(ops, clientv3.OpDelete(p, clientv3.WithPrefix()))
	}
	resp, err := s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(ops...).
		Else(clientv3.OpGet(key, clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return fmt.Errorf("elb: delete %s: %w", key, err)
	}
	if resp.Succeeded {
		return nil
	}
	if len(resp.Responses) == 1 && resp.Responses[0].GetResponseRange().GetCount() == 0 {
		return fmt.Errorf("elb: delete %s: %w", key, store.ErrNotFound)
	}
	return fmt.Errorf("elb: delete %s: %w", key, store.ErrConflict)
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// checkTags validates tags as AWS does (at most 50, unique keys, 1-128 character keys,
// no "aws:" prefix, values up to 256) and converts them.
func checkTags(in []Tag) ([]*storev1.ElbTag, error) {
	if len(in) > 50 {
		return nil, errorf(CodeTooManyTags, "You've reached the limit on the number of tags for this resource (50)")
	}
	seen := map[string]bool{}
	var out []*storev1.ElbTag
	for _, t := range in {
		if t.Key == "" || len(t.Key) > 128 || len(t.Value) > 256 {
			return nil, validation("Tag key '%s' must be 1-128 characters and its value up to 256", t.Key)
		}
		if strings.HasPrefix(strings.ToLower(t.Key), "aws:") {
			return nil, validation("Tag keys starting with 'aws:' are reserved for internal use")
		}
		if seen[t.Key] {
			return nil, errorf(CodeDuplicateTagKeys, "Tag key '%s' is duplicated", t.Key)
		}
		seen[t.Key] = true
		out = append(out, &storev1.ElbTag{Key: t.Key, Value: t.Value})
	}
	return out, nil
}

// byName reads the record of a load balancer or target group given by name, whose key is
// key(name). A name no key can hold ("", "a/b": the keys package panics on it) names
// nothing and is store.ErrNotFound, as an unknown name is on AWS.
func byName[T proto.Message](ctx context.Context, kv clientv3.KV, name string, key func(string) string) (T, error) {
	if name == "" || strings.Contains(name, "/") {
		var zero T
		return zero, store.ErrNotFound
	}
	rec, _, err := store.Get[T](ctx, kv, key(name))
	return rec, err
}
