package agentsession

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
)

// logScope returns the log store scope of an agent's call: the caller's account, and
// region (awslogs-region) or else the caller's region.
func (s *Server) logScope(ctx context.Context, region string) (logstore.Scope, error) {
	if s.cfg.Logs == nil {
		return logstore.Scope{}, connect.NewError(connect.CodeUnavailable, errors.New("this scheduler has no log store"))
	}
	id, ok := caller.From(ctx)
	if !ok {
		return logstore.Scope{}, connect.NewError(connect.CodeUnauthenticated, errors.New("no caller identity"))
	}
	if region == "" {
		region = id.Region
	}
	if !caller.ValidRegion(region) {
		return logstore.Scope{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("InvalidParameterException: awslogs-region %q is not a region name", region))
	}
	return logstore.Scope{Account: id.Account, Region: region}, nil
}

// logError maps a log store error to a Connect error whose message starts with the AWS
// error type, as the awslogs driver reports it in a task's stoppedReason.
func logError(err error) error {
	var le *logstore.Error
	if !errors.As(err, &le) {
		return connect.NewError(connect.CodeInternal, err)
	}
	code := connect.CodeInvalidArgument
	switch le.Type {
	case logstore.ResourceNotFound:
		code = connect.CodeNotFound
	case logstore.ResourceAlreadyExists:
		code = connect.CodeAlreadyExists
	}
	return connect.NewError(code, le)
}

// EnsureLogStream creates an awslogs container's stream (and group, with create_group)
// in the caller's account. A missing group without create_group is NOT_FOUND with
// "ResourceNotFoundException: The specified log group does not exist.".
func (s *Server) EnsureLogStream(ctx context.Context, req *connect.Request[agentv1.EnsureLogStreamRequest]) (*connect.Response[agentv1.EnsureLogStreamResponse], error) {
	sc, err := s.logScope(ctx, req.Msg.GetRegion())
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Logs.EnsureStream(sc, req.Msg.GetLogGroup(), req.Msg.GetLogStream(), req.Msg.GetCreateGroup()); err != nil {
		return nil, logError(err)
	}
	return connect.NewResponse(&agentv1.EnsureLogStreamResponse{}), nil
}

// ShipLogs stores a batch of events under PutLogEvents' rules (see logstore.PutEvents).
func (s *Server) ShipLogs(ctx context.Context, req *connect.Request[agentv1.ShipLogsRequest]) (*connect.Response[agentv1.ShipLogsResponse], error) {
	sc, err := s.logScope(ctx, req.Msg.GetRegion())
	if err != nil {
		return nil, err
	}
	evs := make([]logstore.InputEvent, len(req.Msg.GetEvents()))
	for i, e := range req.Msg.GetEvents() {
		evs[i] = logstore.InputEvent{Timestamp: e.GetTimestamp(), Message: e.GetMessage()}
	}
	rej, err := s.cfg.Logs.PutEvents(sc, req.Msg.GetLogGroup(), req.Msg.GetLogStream(), evs)
	if err != nil {
		return nil, logError(err)
	}
	return connect.NewResponse(&agentv1.ShipLogsResponse{
		TooNewStartIndex: int32(rej.TooNewStartIndex),
		TooOldEndIndex:   int32(rej.TooOldEndIndex),
		ExpiredEndIndex:  int32(rej.ExpiredEndIndex),
	}), nil
}
