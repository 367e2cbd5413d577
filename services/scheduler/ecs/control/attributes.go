package control

import (
	"context"
	"regexp"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Attribute syntax from the ECS Attribute reference: names up to 128 letters, numbers,
// hyphens, underscores, periods, slashes and backslashes; values up to 128 of those plus
// @, colons and spaces, not starting or ending with a space.
var (
	attrNamePattern  = regexp.MustCompile(`^[a-zA-Z0-9_./\\-]{1,128}$`)
	attrValuePattern = regexp.MustCompile(`^[a-zA-Z0-9_./\\@: -]{0,128}$`)
)

const targetContainerInstance = "container-instance"

func isCustomAttribute(name string) bool {
	return !strings.HasPrefix(name, "ecs.") && !strings.HasPrefix(name, "com.amazonaws.")
}

func targetNotFound(id string) error {
	return awserr.New("TargetNotFoundException", "Could not find target %s.", id)
}

// attributeTargets validates attributes and groups them by target instance id.
func (s *Server) attributeTargets(ctx context.Context, account keys.Scope, cluster string, attrs []*ecsv1.Attribute, withValues bool) (map[string][]*ecsv1.Attribute, []string, error) {
	if len(attrs) == 0 || len(attrs) > 10 {
		return nil, nil, awserr.InvalidParameterf("attributes must list between 1 and 10 attributes.")
	}
	by := map[string][]*ecsv1.Attribute{}
	var order []string
	for _, a := range attrs {
		if a == nil || !attrNamePattern.MatchString(a.GetName()) {
			return nil, nil, awserr.InvalidParameterf("Attribute names can have up to 128 letters, numbers, hyphens, underscores, periods, slashes and backslashes.")
		}
		if withValues && (!attrValuePattern.MatchString(a.GetValue()) || strings.TrimSpace(a.GetValue()) != a.GetValue()) {
			return nil, nil, awserr.InvalidParameterf("Invalid value for attribute %s.", a.GetName())
		}
		if a.TargetType != nil && a.GetTargetType() != targetContainerInstance {
			return nil, nil, awserr.InvalidParameterf("Invalid targetType %q: the only target type is container-instance.", a.GetTargetType())
		}
		if a.GetTargetId() == "" {
			return nil, nil, awserr.InvalidParameterf("targetId is required for attribute %s.", a.GetName())
		}
		id, ok, err := s.idRef(ctx, account, cluster, arn.ContainerInstance, a.GetTargetId())
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, targetNotFound(a.GetTargetId())
		}
		if _, seen := by[id]; !seen {
			order = append(order, id)
		}
		by[id] = append(by[id], a)
	}
	return by, order, nil
}

// mutateAttributes runs PutAttributes and DeleteAttributes: it checks the cluster
// (ActiveCluster) and attrs (attributeTargets; withValues checks values too) and then,
// for each target instance in the order attrs name them, replaces the instance's
// attributes with what fn returns from the current ones and that instance's share of
// attrs (fn may return store.ErrNoChange to leave the instance as it is, or an ECS
// error), bumping its version. A target that is gone is TargetNotFoundException.
func (s *Server) mutateAttributes(ctx context.Context, account keys.Scope, clusterRef string, attrs []*ecsv1.Attribute, withValues bool, fn func(cur, change []*ecsv1.Attribute) ([]*ecsv1.Attribute, error)) error {
	name, _, _, err := s.activeCluster(ctx, account, clusterRef)
	if err != nil {
		return err
	}
	by, order, err := s.attributeTargets(ctx, account, name, attrs, withValues)
	if err != nil {
		return err
	}
	for _, id := range order {
		_, _, err := store.Mutate(ctx, s.kv, keys.Instance(account, name, id), func(r *storev1.ContainerInstanceRecord) error {
			ci := r.GetContainerInstance()
			out, err := fn(ci.GetAttributes(), by[id])
			if err != nil {
				return err
			}
			ci.Attributes = out
			ci.Version++
			return nil
		}, store.MaxAttempts(64))
		if isNotFound(err) {
			return targetNotFound(id)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// PutAttributes creates or replaces custom attributes on container instances (up to 10 per
// call, targetId an instance id or ARN). An instance holds at most 10 custom attributes.
// Errors: ClusterNotFoundException, TargetNotFoundException, AttributeLimitExceededException,
// InvalidParameterException. AWS reference: PutAttributes.
func (s *Server) PutAttributes(ctx context.Context, req *connect.Request[ecsv1.PutAttributesRequest]) (*connect.Response[ecsv1.PutAttributesResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.PutAttributesRequest) (*ecsv1.PutAttributesResponse, error) {
		err := s.mutateAttributes(ctx, account, m.GetCluster(), m.GetAttributes(), true, func(cur, add []*ecsv1.Attribute) ([]*ecsv1.Attribute, error) {
			attrs := mergeAttributeValues(cur, add)
			n := 0
			for _, a := range attrs {
				if isCustomAttribute(a.GetName()) {
					n++
				}
			}
			if n > maxCustomAttributes {
				return nil, awserr.New("AttributeLimitExceededException", "You can apply up to %d custom attributes for each resource.", maxCustomAttributes)
			}
			return attrs, nil
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.PutAttributesResponse{Attributes: m.GetAttributes()}, nil
	})
}

// mergeAttributeValues sets each attribute of add on cur (by name).
func mergeAttributeValues(cur, add []*ecsv1.Attribute) []*ecsv1.Attribute {
	out := append([]*ecsv1.Attribute{}, cur...)
	for _, a := range add {
		na := &ecsv1.Attribute{Name: proto.String(a.GetName()), Value: a.Value}
		replaced := false
		for i, c := range out {
			if c.GetName() == a.GetName() {
				out[i], replaced = na, true
			}
		}
		if !replaced {
			out = append(out, na)
		}
	}
	return out
}

// DeleteAttributes removes custom attributes from container instances and returns the
// attributes deleted. Errors as PutAttributes. AWS reference: DeleteAttributes.
func (s *Server) DeleteAttributes(ctx context.Context, req *connect.Request[ecsv1.DeleteAttributesRequest]) (*connect.Response[ecsv1.DeleteAttributesResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DeleteAttributesRequest) (*ecsv1.DeleteAttributesResponse, error) {
		err := s.mutateAttributes(ctx, account, m.GetCluster(), m.GetAttributes(), false, func(cur, del []*ecsv1.Attribute) ([]*ecsv1.Attribute, error) {
			var kept []*ecsv1.Attribute
			for _, a := range cur {
				drop := false
				for _, d := range del {
					drop = drop || d.GetName() == a.GetName()
				}
				if !drop {
					kept = append(kept, a)
				}
			}
			if len(kept) == len(cur) {
				return nil, store.ErrNoChange
			}
			return kept, nil
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.DeleteAttributesResponse{Attributes: m.GetAttributes()}, nil
	})
}

// ListAttributes lists the attributes of a cluster's container instances (targetType
// container-instance, required), optionally only those named attributeName and, with it,
// of value attributeValue. A page covers maxResults (1–100) instances in id order;
// nextToken continues. Errors: ClusterNotFoundException, InvalidParameterException.
// AWS reference: ListAttributes.
func (s *Server) ListAttributes(ctx context.Context, req *connect.Request[ecsv1.ListAttributesRequest]) (*connect.Response[ecsv1.ListAttributesResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListAttributesRequest) (*ecsv1.ListAttributesResponse, error) {
		if m.GetTargetType() != targetContainerInstance {
			return nil, awserr.InvalidParameterf("targetType must be container-instance.")
		}
		if m.AttributeValue != nil && m.AttributeName == nil {
			return nil, awserr.InvalidParameterf("attributeValue requires attributeName.")
		}
		limit, err := maxResults(m.MaxResults)
		if err != nil {
			return nil, err
		}
		name, _, _, err := s.activeCluster(ctx, account, m.GetCluster())
		if err != nil {
			return nil, err
		}
		recs, next, err := s.instancePage(ctx, account, name, limit, m.GetNextToken())
		if err != nil {
			return nil, err
		}
		resp := &ecsv1.ListAttributesResponse{Attributes: []*ecsv1.Attribute{}}
		for _, r := range recs {
			ci := r.GetContainerInstance()
			if ci.GetStatus() == statusInactive {
				continue
			}
			for _, a := range ci.GetAttributes() {
				if (m.AttributeName != nil && a.GetName() != m.GetAttributeName()) ||
					(m.AttributeValue != nil && a.GetValue() != m.GetAttributeValue()) {
					continue
				}
				resp.Attributes = append(resp.Attributes, &ecsv1.Attribute{
					Name: a.Name, Value: a.Value, TargetType: proto.String(targetContainerInstance), TargetId: ci.ContainerInstanceArn,
				})
			}
		}
		if next != "" {
			resp.NextToken = proto.String(next)
		}
		return resp, nil
	})
}
