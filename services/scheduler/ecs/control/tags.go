package control

import (
	"context"
	"errors"
	"strings"

	"github.com/berthhq/berth/services/scheduler/ecs/capacity"

	"connectrpc.com/connect"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// mutateTags applies fn to the tags of the resource named by resourceARN under CAS and
// returns the tags as stored. Taggable: clusters, task definitions, container instances,
// tasks, services, capacity providers and task sets (not DRAINING) of the caller's
// account. Errors: InvalidParameterException for an ARN that is not a taggable ECS
// resource; ClusterNotFoundException for an unknown cluster; ResourceNotFoundException for
// another unknown resource.
func (s *Server) mutateTags(ctx context.Context, account keys.Scope, resourceARN string, fn func([]*ecsv1.Tag) ([]*ecsv1.Tag, error)) ([]*ecsv1.Tag, error) {
	if resourceARN == "" {
		return nil, awserr.InvalidParameterf("resourceArn is required.")
	}
	a, err := arn.Parse(resourceARN)
	if err != nil {
		return nil, awserr.InvalidParameterf("The ARN %s is not a valid ECS resource ARN.", resourceARN)
	}
	notFound := awserr.New("ResourceNotFoundException", "The specified resource could not be found.")
	if !account.Owns(a.Partition, a.Account, a.Region) {
		if a.Type == arn.Cluster {
			return nil, awserr.ClusterNotFoundError()
		}
		return nil, notFound
	}
	var tags []*ecsv1.Tag
	switch a.Type {
	case arn.Cluster:
		if !ecsrules.ValidName(a.Name) {
			return nil, awserr.ClusterNotFoundError()
		}
		_, _, err = store.Mutate(ctx, s.kv, keys.Cluster(account, a.Name), func(r *storev1.ClusterRecord) error {
			if r.GetCluster().GetStatus() != statusActive {
				return awserr.ClusterNotFoundError()
			}
			t, err := fn(r.GetCluster().GetTags())
			r.Cluster.Tags, tags = t, t
			return err
		}, store.MaxAttempts(64))
		if isNotFound(err) {
			return nil, awserr.ClusterNotFoundError()
		}
	case arn.TaskDefinition:
		if !ecsrules.ValidName(a.Name) {
			return nil, notFound
		}
		_, _, err = store.Mutate(ctx, s.kv, keys.TaskDefinition(account, a.Name, a.Revision), func(r *storev1.TaskDefinitionRecord) error {
			t, err := fn(r.GetTags())
			r.Tags, tags = t, t
			return err
		}, store.MaxAttempts(64))
	case arn.ContainerInstance, arn.Task:
		cluster, id, ok, lerr := s.locate(ctx, account, a.Type, resourceARN)
		if lerr != nil {
			return nil, lerr
		}
		if !ok {
			return nil, notFound
		}
		if a.Type == arn.Task {
			_, _, err = store.Mutate(ctx, s.kv, keys.Task(account, cluster, id), func(r *storev1.TaskRecord) error {
				t, err := fn(r.GetTask().GetTags())
				r.Task.Tags, tags = t, t
				return err
			}, store.MaxAttempts(64))
		} else {
			_, _, err = store.Mutate(ctx, s.kv, keys.Instance(account, cluster, id), func(r *storev1.ContainerInstanceRecord) error {
				t, err := fn(r.GetTags())
				r.Tags, tags = t, t
				return err
			}, store.MaxAttempts(64))
		}
	case arn.Service:
		if a.Cluster == "" || !ecsrules.ValidName(a.Cluster) || !ecsrules.ValidName(a.Name) {
			return nil, notFound
		}
		_, _, err = store.Mutate(ctx, s.kv, keys.Service(account, a.Cluster, a.Name), func(r *storev1.ServiceRecord) error {
			if r.GetService() == nil {
				return notFound
			}
			t, err := fn(r.GetService().GetTags())
			r.Service.Tags, tags = t, t
			return err
		}, store.MaxAttempts(64))
	case arn.CapacityProvider:
		if !capacity.ValidName(a.Name) || capacity.IsFargateProvider(a.Name) {
			return nil, notFound
		}
		_, _, err = store.Mutate(ctx, s.kv, keys.CapacityProvider(account, a.Name), func(r *ecsv1.CapacityProvider) error {
			if r.GetStatus() != capacity.StatusActive {
				return notFound
			}
			t, err := fn(r.GetTags())
			r.Tags, tags = t, t
			return err
		}, store.MaxAttempts(64))
	case arn.TaskSet:
		// Name is {service}/{task set id}; the task set lives in its service's record.
		svc, id, ok := strings.Cut(a.Name, "/")
		if a.Cluster == "" || !ok || !ecsrules.ValidName(a.Cluster) || !ecsrules.ValidName(svc) {
			return nil, notFound
		}
		_, _, err = store.Mutate(ctx, s.kv, keys.Service(account, a.Cluster, svc), func(r *storev1.ServiceRecord) error {
			for _, set := range r.GetService().GetTaskSets() {
				if set.GetId() == id && set.GetStatus() != "DRAINING" {
					t, err := fn(set.GetTags())
					set.Tags, tags = t, t
					return err
				}
			}
			return notFound
		}, store.MaxAttempts(64))
	default:
		return nil, awserr.InvalidParameterf("Berth cannot tag resources of type %s.", a.Type)
	}
	if isNotFound(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	if tags == nil {
		tags = []*ecsv1.Tag{}
	}
	return tags, nil
}

// TagResource adds tags to a resource (a tag with an existing key replaces its value).
// At most 50 tags per resource; keys 1–128 characters, values up to 256, "aws:"
// reserved. Concurrent tag and untag calls are CAS-serialised, so none is lost. Errors:
// InvalidParameterException, ClusterNotFoundException, ResourceNotFoundException.
// AWS reference: TagResource.
func (s *Server) TagResource(ctx context.Context, req *connect.Request[ecsv1.TagResourceRequest]) (*connect.Response[ecsv1.TagResourceResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.TagResourceRequest) (*ecsv1.TagResourceResponse, error) {
		if len(m.GetTags()) == 0 {
			return nil, awserr.InvalidParameterf("tags is required.")
		}
		if err := ecsrules.ValidateTags(m.GetTags()); err != nil {
			return nil, err
		}
		_, err := s.mutateTags(ctx, account, m.GetResourceArn(), func(cur []*ecsv1.Tag) ([]*ecsv1.Tag, error) {
			out := mergeTags(cur, m.GetTags())
			if len(out) > ecsrules.MaxTags {
				return nil, awserr.InvalidParameterf("The number of tags exceeds the limit of %d.", ecsrules.MaxTags)
			}
			return out, nil
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.TagResourceResponse{}, nil
	})
}

// UntagResource removes tags by key from a resource; absent keys are ignored. Errors as
// TagResource. AWS reference: UntagResource.
func (s *Server) UntagResource(ctx context.Context, req *connect.Request[ecsv1.UntagResourceRequest]) (*connect.Response[ecsv1.UntagResourceResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.UntagResourceRequest) (*ecsv1.UntagResourceResponse, error) {
		if len(m.GetTagKeys()) == 0 {
			return nil, awserr.InvalidParameterf("tagKeys is required.")
		}
		_, err := s.mutateTags(ctx, account, m.GetResourceArn(), func(cur []*ecsv1.Tag) ([]*ecsv1.Tag, error) {
			return removeTags(cur, m.GetTagKeys()), nil
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.UntagResourceResponse{}, nil
	})
}

// ListTagsForResource returns a resource's tags. Errors as TagResource, except that an
// unknown resource other than a cluster is ClientException: the ListTagsForResource
// reference's Errors section lists no ResourceNotFoundException (only ClientException —
// "specifying an identifier that isn't valid" —, ClusterNotFoundException,
// InvalidParameterException and ServerException), so an SDK could not type it.
// AWS reference: ListTagsForResource.
func (s *Server) ListTagsForResource(ctx context.Context, req *connect.Request[ecsv1.ListTagsForResourceRequest]) (*connect.Response[ecsv1.ListTagsForResourceResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListTagsForResourceRequest) (*ecsv1.ListTagsForResourceResponse, error) {
		tags, err := s.mutateTags(ctx, account, m.GetResourceArn(), func(cur []*ecsv1.Tag) ([]*ecsv1.Tag, error) {
			return cur, store.ErrNoChange
		})
		if errors.Is(err, awserr.ResourceNotFound) {
			return nil, awserr.Clientf("The specified resource could not be found.")
		}
		if err != nil {
			return nil, err
		}
		return &ecsv1.ListTagsForResourceResponse{Tags: tags}, nil
	})
}
