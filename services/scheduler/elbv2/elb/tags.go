package elb

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/protobuf/proto"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// tagged is a record with tags.
type tagged interface {
	proto.Message
	GetTags() []*storev1.ElbTag
}

// resourceKey returns the key of the record an ARN names and the not-found error for
// its kind.
func resourceKey(sc keys.Scope, arn string) (string, error) {
	p, ok := parseARN(sc, arn)
	switch {
	case !ok:
		return "", validation("'%s' is not a valid resource ARN", arn)
	case p.kind == "loadbalancer":
		return keys.ElbLoadBalancer(sc, p.segs[1]), nil
	case p.kind == "targetgroup":
		return keys.ElbTargetGroup(sc, p.segs[0]), nil
	case p.kind == "listener":
		return keys.ElbListener(sc, p.segs[1], p.segs[3]), nil
	}
	return keys.ElbRule(sc, p.segs[1], p.segs[3], p.segs[4]), nil
}

func notFound(sc keys.Scope, arn string) error {
	p, _ := parseARN(sc, arn)
	switch p.kind {
	case "loadbalancer":
		return errorf(CodeLoadBalancerNotFound, "Load balancer '%s' not found", arn)
	case "targetgroup":
		return errorf(CodeTargetGroupNotFound, "Target groups '%s' not found", arn)
	case "listener":
		return errorf(CodeListenerNotFound, "Listener '%s' not found", arn)
	}
	return errorf(CodeRuleNotFound, "One or more rules not found")
}

// arnOf returns the ARN a record carries.
func arnOf(m proto.Message) string {
	switch r := m.(type) {
	case *storev1.LoadBalancerRecord:
		return r.GetLoadBalancerArn()
	case *storev1.TargetGroupRecord:
		return r.GetTargetGroupArn()
	case *storev1.ListenerRecord:
		return r.GetListenerArn()
	case *storev1.RuleRecord:
		return r.GetRuleArn()
	}
	return ""
}

func setTags(m proto.Message, tags []*storev1.ElbTag) {
	switch r := m.(type) {
	case *storev1.LoadBalancerRecord:
		r.Tags = tags
	case *storev1.TargetGroupRecord:
		r.Tags = tags
	case *storev1.ListenerRecord:
		r.Tags = tags
	case *storev1.RuleRecord:
		r.Tags = tags
	}
}

// mutateTags applies fn to the tags of the resource arn names.
func (s *Service) mutateTags(ctx context.Context, sc keys.Scope, arn string, fn func([]*storev1.ElbTag) ([]*storev1.ElbTag, error)) error {
	key, err := resourceKey(sc, arn)
	if err != nil {
		return err
	}
	p, _ := parseARN(sc, arn)
	apply := func(m tagged) error {
		if arnOf(m) != arn {
			return notFound(sc, arn)
		}
		tags, err := fn(m.GetTags())
		if err != nil {
			return err
		}
		setTags(m, tags)
		return nil
	}
	switch p.kind {
	case "loadbalancer":
		_, _, err = store.Mutate(ctx, s.kv, key, func(m *storev1.LoadBalancerRecord) error { return apply(m) })
	case "targetgroup":
		_, _, err = store.Mutate(ctx, s.kv, key, func(m *storev1.TargetGroupRecord) error { return apply(m) })
	case "listener":
		_, _, err = store.Mutate(ctx, s.kv, key, func(m *storev1.ListenerRecord) error { return apply(m) })
	default:
		_, _, err = store.Mutate(ctx, s.kv, key, func(m *storev1.RuleRecord) error { return apply(m) })
	}
	if errors.Is(err, store.ErrNotFound) {
		return notFound(sc, arn)
	}
	return err
}

// AddTags adds or overwrites tags on each resource (at most 50 tags per resource).
func (s *Service) AddTags(ctx context.Context, sc keys.Scope, arns []string, tags []Tag) error {
	add, err := checkTags(tags)
	if err != nil {
		return err
	}
	for _, arn := range arns {
		err := s.mutateTags(ctx, sc, arn, func(cur []*storev1.ElbTag) ([]*storev1.ElbTag, error) {
			for _, t := range add {
				i := slices.IndexFunc(cur, func(c *storev1.ElbTag) bool { return c.GetKey() == t.GetKey() })
				if i >= 0 {
					cur[i].Value = t.GetValue()
				} else {
					cur = append(cur, t)
				}
			}
			if len(cur) > 50 {
				return nil, errorf(CodeTooManyTags, "You've reached the limit on the number of tags for this resource (50)")
			}
			return cur, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// RemoveTags removes the tag keys from each resource.
func (s *Service) RemoveTags(ctx context.Context, sc keys.Scope, arns, tagKeys []string) error {
	for _, arn := range arns {
		err := s.mutateTags(ctx, sc, arn, func(cur []*storev1.ElbTag) ([]*storev1.ElbTag, error) {
			return slices.DeleteFunc(cur, func(t *storev1.ElbTag) bool { return slices.Contains(tagKeys, t.GetKey()) }), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// DescribeTags returns each resource's tags, in the order of arns (at most 20).
func (s *Service) DescribeTags(ctx context.Context, sc keys.Scope, arns []string) (map[string][]Tag, error) {
	if len(arns) > 20 {
		return nil, validation("At most 20 resource ARNs can be specified")
	}
	out := map[string][]Tag{}
	for _, arn := range arns {
		var err error
		err = s.mutateTags(ctx, sc, arn, func(cur []*storev1.ElbTag) ([]*storev1.ElbTag, error) {
			list := []Tag{}
			for _, t := range cur {
				list = append(list, Tag{Key: t.GetKey(), Value: t.GetValue()})
			}
			out[arn] = list
			return nil, store.ErrNoChange
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
