package logs

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
)

// Service serves LogService.ReadLogs from a Store.
type Service struct {
	store *Store
}

var _ agentv1connect.LogServiceHandler = (*Service)(nil)

// NewService returns the LogService handler over store.
func NewService(store *Store) *Service { return &Service{store: store} }

// ReadLogs streams the lines req selects; see Store.Read. It returns
// CodeNotFound when the task or container has no logs — also for a task ARN
// whose partition, region or account is not that of the task this agent ran
// with its id — and CodeInvalidArgument without a task ARN.
func (s *Service) ReadLogs(ctx context.Context, req *connect.Request[agentv1.ReadLogsRequest], stream *connect.ServerStream[agentv1.ReadLogsResponse]) error {
	m := req.Msg
	if m.GetTaskArn() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("task_arn is required"))
	}
	rr := ReadRequest{TaskARN: m.GetTaskArn(), Container: m.GetContainerName(), Tail: int(m.GetTail()), Follow: m.GetFollow()}
	if m.GetSince() != nil {
		rr.Since = m.GetSince().AsTime()
	}
	err := s.store.Read(ctx, rr, func(lines []Line) error {
		resp := &agentv1.ReadLogsResponse{Lines: make([]*agentv1.LogLine, len(lines))}
		for i, l := range lines {
			resp.Lines[i] = &agentv1.LogLine{ContainerName: l.Container, Stream: l.Stream, Time: timestamppb.New(l.Time), Text: l.Text}
		}
		return stream.Send(resp)
	})
	if errors.Is(err, ErrNoLogs) {
		return connect.NewError(connect.CodeNotFound, err)
	}
	return err
}
