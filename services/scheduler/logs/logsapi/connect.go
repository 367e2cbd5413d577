package logsapi

import (
	"context"
	"encoding/json"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	logsv1 "github.com/berthhq/berth/gen/berth/logs/v1"
	"github.com/berthhq/berth/gen/berth/logs/v1/logsv1connect"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
)

// Service serves logsv1connect.LogsServiceHandler (what the gateway calls for the
// SigV4 service "logs") over a Handler. Operations Berth does not serve are the
// embedded Unimplemented handler's, which the gateway answers as
// UnsupportedOperationException.
type Service struct {
	logsv1connect.UnimplementedLogsServiceHandler
	h *Handler
}

var _ logsv1connect.LogsServiceHandler = (*Service)(nil)

// NewService returns the Connect service over store.
func NewService(store *logstore.Store) *Service { return &Service{h: New(store)} }

// call runs action for the caller in ctx: req is turned into the AWS JSON the model
// gives it (names from json_name, numbers as numbers), served by the Handler, and the
// answer decoded into a Resp. Errors carry the AWS type (awserr).
func call[Resp any, PResp interface {
	*Resp
	proto.Message
}](ctx context.Context, s *Service, action string, req proto.Message) (*connect.Response[Resp], error) {
	id, ok := caller.From(ctx)
	if !ok {
		return nil, awserr.ToConnect(awserr.New("AccessDeniedException", "The request carries no account."))
	}
	body, err := json.Marshal(toJSON(req.ProtoReflect()))
	if err != nil {
		return nil, awserr.ToConnect(err)
	}
	out, err := s.h.Serve(logstore.Scope{Account: id.Account, Region: id.Region}, action, body)
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) {
			return nil, awserr.ToConnect(awserr.New(ae.Type, "%s", ae.Message))
		}
		return nil, awserr.ToConnect(err)
	}
	resp := new(Resp)
	if err := protojson.Unmarshal(out, PResp(resp)); err != nil {
		return nil, awserr.ToConnect(err)
	}
	return connect.NewResponse(resp), nil
}

// toJSON renders a message as the AWS JSON object of its shape: keys are the json_names
// (the model's member names), 64-bit integers stay numbers (protojson would quote them),
// unset and zero scalars are left out (the generated messages have no presence for
// them, so 0 means absent, as the gateway's codec reads it).
func toJSON(m protoreflect.Message) map[string]any {
	out := map[string]any{}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		out[fd.JSONName()] = valueJSON(fd, v)
		return true
	})
	return out
}

func valueJSON(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch {
	case fd.IsList():
		l := v.List()
		arr := make([]any, l.Len())
		for i := range l.Len() {
			arr[i] = scalarJSON(fd, l.Get(i))
		}
		return arr
	case fd.IsMap():
		mm := map[string]any{}
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			mm[k.String()] = scalarJSON(fd.MapValue(), mv)
			return true
		})
		return mm
	}
	return scalarJSON(fd, v)
}

func scalarJSON(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	if fd.Kind() == protoreflect.MessageKind {
		return toJSON(v.Message())
	}
	return v.Interface()
}

// CreateLogGroup implements the AWS operation of the same name (see Handler).
func (s *Service) CreateLogGroup(ctx context.Context, r *connect.Request[logsv1.CreateLogGroupRequest]) (*connect.Response[logsv1.CreateLogGroupResponse], error) {
	return call[logsv1.CreateLogGroupResponse](ctx, s, "CreateLogGroup", r.Msg)
}

// DeleteLogGroup implements the AWS operation of the same name (see Handler).
func (s *Service) DeleteLogGroup(ctx context.Context, r *connect.Request[logsv1.DeleteLogGroupRequest]) (*connect.Response[logsv1.DeleteLogGroupResponse], error) {
	return call[logsv1.DeleteLogGroupResponse](ctx, s, "DeleteLogGroup", r.Msg)
}

// DescribeLogGroups implements the AWS operation of the same name (see Handler).
func (s *Service) DescribeLogGroups(ctx context.Context, r *connect.Request[logsv1.DescribeLogGroupsRequest]) (*connect.Response[logsv1.DescribeLogGroupsResponse], error) {
	return call[logsv1.DescribeLogGroupsResponse](ctx, s, "DescribeLogGroups", r.Msg)
}

// CreateLogStream implements the AWS operation of the same name (see Handler).
func (s *Service) CreateLogStream(ctx context.Context, r *connect.Request[logsv1.CreateLogStreamRequest]) (*connect.Response[logsv1.CreateLogStreamResponse], error) {
	return call[logsv1.CreateLogStreamResponse](ctx, s, "CreateLogStream", r.Msg)
}

// DeleteLogStream implements the AWS operation of the same name (see Handler).
func (s *Service) DeleteLogStream(ctx context.Context, r *connect.Request[logsv1.DeleteLogStreamRequest]) (*connect.Response[logsv1.DeleteLogStreamResponse], error) {
	return call[logsv1.DeleteLogStreamResponse](ctx, s, "DeleteLogStream", r.Msg)
}

// DescribeLogStreams implements the AWS operation of the same name (see Handler).
func (s *Service) DescribeLogStreams(ctx context.Context, r *connect.Request[logsv1.DescribeLogStreamsRequest]) (*connect.Response[logsv1.DescribeLogStreamsResponse], error) {
	return call[logsv1.DescribeLogStreamsResponse](ctx, s, "DescribeLogStreams", r.Msg)
}

// PutLogEvents implements the AWS operation of the same name (see Handler).
func (s *Service) PutLogEvents(ctx context.Context, r *connect.Request[logsv1.PutLogEventsRequest]) (*connect.Response[logsv1.PutLogEventsResponse], error) {
	return call[logsv1.PutLogEventsResponse](ctx, s, "PutLogEvents", r.Msg)
}

// GetLogEvents implements the AWS operation of the same name (see Handler).
func (s *Service) GetLogEvents(ctx context.Context, r *connect.Request[logsv1.GetLogEventsRequest]) (*connect.Response[logsv1.GetLogEventsResponse], error) {
	return call[logsv1.GetLogEventsResponse](ctx, s, "GetLogEvents", r.Msg)
}

// FilterLogEvents implements the AWS operation of the same name (see Handler).
func (s *Service) FilterLogEvents(ctx context.Context, r *connect.Request[logsv1.FilterLogEventsRequest]) (*connect.Response[logsv1.FilterLogEventsResponse], error) {
	return call[logsv1.FilterLogEventsResponse](ctx, s, "FilterLogEvents", r.Msg)
}

// PutRetentionPolicy implements the AWS operation of the same name (see Handler).
func (s *Service) PutRetentionPolicy(ctx context.Context, r *connect.Request[logsv1.PutRetentionPolicyRequest]) (*connect.Response[logsv1.PutRetentionPolicyResponse], error) {
	return call[logsv1.PutRetentionPolicyResponse](ctx, s, "PutRetentionPolicy", r.Msg)
}

// DeleteRetentionPolicy implements the AWS operation of the same name (see Handler).
func (s *Service) DeleteRetentionPolicy(ctx context.Context, r *connect.Request[logsv1.DeleteRetentionPolicyRequest]) (*connect.Response[logsv1.DeleteRetentionPolicyResponse], error) {
	return call[logsv1.DeleteRetentionPolicyResponse](ctx, s, "DeleteRetentionPolicy", r.Msg)
}

// TagResource implements the AWS operation of the same name (see Handler).
func (s *Service) TagResource(ctx context.Context, r *connect.Request[logsv1.TagResourceRequest]) (*connect.Response[logsv1.TagResourceResponse], error) {
	return call[logsv1.TagResourceResponse](ctx, s, "TagResource", r.Msg)
}

// UntagResource implements the AWS operation of the same name (see Handler).
func (s *Service) UntagResource(ctx context.Context, r *connect.Request[logsv1.UntagResourceRequest]) (*connect.Response[logsv1.UntagResourceResponse], error) {
	return call[logsv1.UntagResourceResponse](ctx, s, "UntagResource", r.Msg)
}

// ListTagsForResource implements the AWS operation of the same name (see Handler).
func (s *Service) ListTagsForResource(ctx context.Context, r *connect.Request[logsv1.ListTagsForResourceRequest]) (*connect.Response[logsv1.ListTagsForResourceResponse], error) {
	return call[logsv1.ListTagsForResourceResponse](ctx, s, "ListTagsForResource", r.Msg)
}

// TagLogGroup implements the (deprecated) AWS operation of the same name.
func (s *Service) TagLogGroup(ctx context.Context, r *connect.Request[logsv1.TagLogGroupRequest]) (*connect.Response[logsv1.TagLogGroupResponse], error) {
	return call[logsv1.TagLogGroupResponse](ctx, s, "TagLogGroup", r.Msg)
}

// UntagLogGroup implements the (deprecated) AWS operation of the same name.
func (s *Service) UntagLogGroup(ctx context.Context, r *connect.Request[logsv1.UntagLogGroupRequest]) (*connect.Response[logsv1.UntagLogGroupResponse], error) {
	return call[logsv1.UntagLogGroupResponse](ctx, s, "UntagLogGroup", r.Msg)
}

// ListTagsLogGroup implements the (deprecated) AWS operation of the same name.
func (s *Service) ListTagsLogGroup(ctx context.Context, r *connect.Request[logsv1.ListTagsLogGroupRequest]) (*connect.Response[logsv1.ListTagsLogGroupResponse], error) {
	return call[logsv1.ListTagsLogGroupResponse](ctx, s, "ListTagsLogGroup", r.Msg)
}
