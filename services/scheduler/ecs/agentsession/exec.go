package agentsession

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ECS Exec sessions (docs/exec.md). The gateway opens a session's client half
// (ExecChannelService.Open) when the session-manager-plugin joins; this replica checks
// the token against the record ExecuteCommand stored, sends the task's agent an ExecStart
// on its session stream and waits for the agent's half (AgentExecService.Attach), then
// relays frames between the two until the command exits or either side goes.

// Timeouts of an exec session's pairing.
const (
	// ExecSessionTTL is how long after ExecuteCommand its token can join the session
	// (control.ExecSessionTTL).
	ExecSessionTTL = 10 * time.Minute
	// ExecAttachTimeout is how long the client half waits for the agent's half.
	ExecAttachTimeout = 30 * time.Second
)

// execNotRunning is AWS's text for a task that cannot take a command (control's
// ExecNotEnabledMessage): here, one that stopped between ExecuteCommand and the join.
const execNotRunning = "The execute command failed because execute command was not enabled when the task was run or the execute command agent isn’t running. Wait and try the command again or run a new task with execute command enabled and try again."

// ErrAgentElsewhere is the message of the Unavailable error Open answers, without using
// up the token, when the task's agent holds its session on another replica: the gateway
// opens the session again (its calls go to the replicas in turn), as the agent attaches
// again when its Attach reaches a replica where the session does not wait.
const ErrAgentElsewhere = "The task's container instance agent is connected to another scheduler replica."

type (
	clientStream = connect.BidiStream[agentv1.OpenRequest, agentv1.OpenResponse]
	agentStream  = connect.BidiStream[agentv1.AttachRequest, agentv1.AttachResponse]
)

// execPair is a session waiting for, then relaying to, its agent half.
type execPair struct {
	instance string // container instance id of the task
	agent    chan *agentStream
	done     chan struct{} // closed when the relay ends; the agent's handler returns then
}

// execHub holds the sessions of this replica whose client half joined.
type execHub struct {
	mu    sync.Mutex
	pairs map[string]*execPair // by session id
}

func (h *execHub) add(id string, p *execPair) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pairs == nil {
		h.pairs = map[string]*execPair{}
	}
	if _, dup := h.pairs[id]; dup {
		return false
	}
	h.pairs[id] = p
	return true
}

func (h *execHub) take(id string) *execPair {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.pairs[id]
	delete(h.pairs, id)
	return p
}

func (h *execHub) drop(id string, p *execPair) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pairs[id] == p {
		delete(h.pairs, id)
	}
}

// ExecHandlers returns the Connect handlers of the exec session's two halves: the
// gateway's (ExecChannelService) and the agent's (AgentExecService), both served on the
// scheduler's internal listener with the caller interceptor.
func (s *Server) ExecHandlers(opts ...connect.HandlerOption) map[string]http.Handler {
	p1, h1 := agentv1connect.NewExecChannelServiceHandler(execChannel{s}, opts...)
	p2, h2 := agentv1connect.NewAgentExecServiceHandler(agentExec{s}, opts...)
	return map[string]http.Handler{p1: h1, p2: h2}
}

type execChannel struct{ s *Server }
type agentExec struct{ s *Server }

// Open is the client half (see ExecChannelService.Open).
func (e execChannel) Open(ctx context.Context, client *clientStream) error {
	s := e.s
	id, err := callerOf(ctx)
	if err != nil {
		return err
	}
	first, err := client.Receive()
	if err != nil {
		return err
	}
	open := first.GetFrame().GetOpen()
	if open == nil || open.GetSessionId() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("the first frame must open a session"))
	}
	scope := id.Scope()
	key := keys.ExecSession(scope, open.GetSessionId())
	rec, rev, err := store.Get[*storev1.ExecSessionRecord](ctx, s.cfg.Etcd, key)
	badToken := connect.NewError(connect.CodeUnauthenticated, errors.New("The session token is not valid or has expired."))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return badToken
	case err != nil:
		return connect.NewError(connect.CodeUnavailable, err)
	}
	sum := sha256.Sum256([]byte(open.GetToken()))
	if subtle.ConstantTimeCompare(sum[:], rec.GetTokenSha256()) != 1 || time.Since(time.Unix(rec.GetCreatedAt(), 0)) > ExecSessionTTL {
		return badToken
	}
	taskID := rec.GetTaskArn()[strings.LastIndex(rec.GetTaskArn(), "/")+1:]
	trec, _, err := store.Get[*storev1.TaskRecord](ctx, s.cfg.Etcd, keys.Task(scope, rec.GetCluster(), taskID))
	if err != nil || trec.GetTask().GetLastStatus() != "RUNNING" || trec.GetTask().GetDesiredStatus() != "RUNNING" {
		return connect.NewError(connect.CodeFailedPrecondition, errors.New(execNotRunning))
	}
	inst := instanceID(rec.GetContainerInstanceArn())
	s.mu.Lock()
	ss := s.sessions[inst]
	s.mu.Unlock()
	if ss == nil {
		if resp, err := s.cfg.Etcd.Get(ctx, keys.Presence(scope, rec.GetCluster(), inst), clientv3.WithCountOnly()); err == nil && resp.Count == 0 {
			// No replica holds the agent's session: its agent is not running.
			return connect.NewError(connect.CodeFailedPrecondition, errors.New(execNotRunning))
		}
		// The token is not used up: the gateway opens the session again, and its calls go
		// to the replicas in turn (ErrAgentElsewhere).
		return connect.NewError(connect.CodeUnavailable, errors.New(ErrAgentElsewhere))
	}
	// A token joins one session: the record goes as it is used.
	if _, err := store.Delete(ctx, s.cfg.Etcd, key, rev); err != nil {
		return badToken
	}
	pair := &execPair{instance: inst, agent: make(chan *agentStream, 1), done: make(chan struct{})}
	if !s.exec.add(rec.GetSessionId(), pair) {
		return badToken
	}
	defer s.exec.drop(rec.GetSessionId(), pair)
	defer close(pair.done)
	start := &agentv1.ExecStart{SessionId: rec.GetSessionId(), TaskArn: rec.GetTaskArn(), ContainerName: rec.GetContainerName(), Args: rec.GetArgs(), Tty: true}
	if err := ss.send(&agentv1.SessionResponse{Message: &agentv1.SessionResponse_ExecStart{ExecStart: start}}); err != nil {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("The task's agent could not be reached: %v", err))
	}
	var agent *agentStream
	select {
	case agent = <-pair.agent:
	case <-time.After(ExecAttachTimeout):
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("The execute command agent did not join the session in time."))
	case <-ctx.Done():
		return ctx.Err()
	}
	s.log.Info("ecs:ExecuteCommand session joined", "session", rec.GetSessionId(), "principal", rec.GetPrincipalArn(),
		"task", rec.GetTaskArn(), "container", rec.GetContainerName(), "command", rec.GetCommand())
	ready := &agentv1.ExecFrame{Frame: &agentv1.ExecFrame_Ready{Ready: &agentv1.ExecReady{}}}
	if err := agent.Send(&agentv1.AttachResponse{Frame: ready}); err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	if err := client.Send(&agentv1.OpenResponse{Frame: ready}); err != nil {
		return err
	}
	ended := make(chan error, 2)
	go func() { // client → agent: input and terminal size only
		for {
			r, err := client.Receive()
			if err != nil {
				ended <- err
				return
			}
			f := r.GetFrame()
			if f.GetStdin() == nil && f.GetResize() == nil {
				continue
			}
			if err := agent.Send(&agentv1.AttachResponse{Frame: f}); err != nil {
				ended <- err
				return
			}
		}
	}()
	go func() { // agent → client: output, then the exit
		for {
			r, err := agent.Receive()
			if err != nil {
				ended <- err
				return
			}
			f := r.GetFrame()
			if f.GetOutput() == nil && f.GetExit() == nil {
				continue
			}
			if err := client.Send(&agentv1.OpenResponse{Frame: f}); err != nil {
				ended <- err
				return
			}
			if f.GetExit() != nil {
				ended <- nil
				return
			}
		}
	}()
	select {
	case err = <-ended:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.log.Info("ecs:ExecuteCommand session ended", "session", rec.GetSessionId(), "err", err)
	return nil
}

// Attach is the agent half (see AgentExecService.Attach): the agent must be the one the
// session's task runs on.
func (e agentExec) Attach(ctx context.Context, agent *agentStream) error {
	s := e.s
	id, err := callerOf(ctx)
	if err != nil {
		return err
	}
	first, err := agent.Receive()
	if err != nil {
		return err
	}
	sid := first.GetFrame().GetOpen().GetSessionId()
	s.exec.mu.Lock()
	pair := s.exec.pairs[sid]
	s.exec.mu.Unlock()
	if pair == nil {
		return connect.NewError(connect.CodeNotFound, errors.New("no such exec session waits on this replica"))
	}
	if id.ContainerInstanceARN != "" && instanceID(id.ContainerInstanceARN) != pair.instance {
		return connect.NewError(connect.CodePermissionDenied, errScope)
	}
	if s.exec.take(sid) != pair {
		return connect.NewError(connect.CodeNotFound, errors.New("the exec session was joined already"))
	}
	pair.agent <- agent
	select {
	case <-pair.done:
	case <-ctx.Done():
	}
	return nil
}
