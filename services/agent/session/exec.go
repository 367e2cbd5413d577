package session

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
)

// ExecRunner runs ECS Exec commands (docs/exec.md); a Handler without it refuses them.
type ExecRunner interface {
	// Exec runs start's command in its container with a terminal, reading input from stdin
	// and terminal sizes (columns, rows) from resize, writing the terminal's output to
	// stdout, until the process exits (its exit status) or ctx ends (it is killed). An
	// error means it never started (no such task or container, container not running).
	Exec(ctx context.Context, start *agentv1.ExecStart, stdin io.Reader, stdout io.Writer, resize <-chan [2]uint32) (int, error)
}

// execAttachAttempts bounds the Attach calls of one session (see exec).
const execAttachAttempts = 8

// frameWriter sends what is written to it as output frames.
type frameWriter struct {
	mu     sync.Mutex
	stream *connect.BidiStreamForClient[agentv1.AttachRequest, agentv1.AttachResponse]
}

func (w *frameWriter) Write(p []byte) (int, error) {
	return len(p), w.send(&agentv1.ExecFrame{Frame: &agentv1.ExecFrame_Output{Output: append([]byte(nil), p...)}})
}

func (w *frameWriter) send(f *agentv1.ExecFrame) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stream.Send(&agentv1.AttachRequest{Frame: f})
}

// exec joins an ECS Exec session through AgentExecService.Attach and runs its command
// with the handler's ExecRunner, relaying input, terminal sizes and output, and the exit
// status at the end. Joining a session refused by the control plane (it timed out, the
// client left) ends quietly.
func (s *Session) exec(ctx context.Context, start *agentv1.ExecStart) {
	log := s.log.With("session", start.GetSessionId(), "task", start.GetTaskArn(), "container", start.GetContainerName())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := agentv1connect.NewAgentExecServiceClient(s.cfg.HTTPClient, s.cfg.BaseURL)
	var (
		stream *connect.BidiStreamForClient[agentv1.AttachRequest, agentv1.AttachResponse]
		out    *frameWriter
	)
	// The session waits on the scheduler replica that holds this agent's session stream;
	// an Attach that reached another one (NotFound) is sent again, to the next replica.
	for attempt := 1; ; attempt++ {
		stream = client.Attach(ctx)
		out = &frameWriter{stream: stream}
		if err := out.send(&agentv1.ExecFrame{Frame: &agentv1.ExecFrame_Open{Open: &agentv1.ExecOpen{SessionId: start.GetSessionId()}}}); err != nil && !errors.Is(err, io.EOF) {
			log.Warn("exec: joining the session", "err", err)
		}
		first, err := stream.Receive()
		if err == nil && first.GetFrame().GetReady() != nil {
			break
		}
		_ = stream.CloseRequest()
		if attempt < execAttachAttempts && connect.CodeOf(err) == connect.CodeNotFound {
			continue
		}
		log.Warn("exec: the session was not joined", "err", err)
		return
	}
	defer stream.CloseRequest()
	runner, ok := s.handler.(ExecRunner)
	if !ok {
		_ = out.send(&agentv1.ExecFrame{Frame: &agentv1.ExecFrame_Exit{Exit: &agentv1.ExecExit{ExitCode: -1, Reason: "This agent does not run ECS Exec commands."}}})
		return
	}
	stdinR, stdinW := io.Pipe()
	resize := make(chan [2]uint32, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer stdinW.Close()
		for {
			r, err := stream.Receive()
			f := r.GetFrame()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					log.Debug("exec: session input ended", "err", err)
				}
				cancel() // the client is gone: end the process
				return
			}
			if b := f.GetStdin(); b != nil {
				if _, err := stdinW.Write(b); err != nil {
					return
				}
			}
			if r := f.GetResize(); r != nil {
				select { // keep only the latest size
				case <-resize:
				default:
				}
				resize <- [2]uint32{r.GetCols(), r.GetRows()}
			}
		}
	}()
	code, err := runner.Exec(ctx, start, stdinR, out, resize)
	exit := &agentv1.ExecExit{ExitCode: int32(code)}
	if err != nil {
		exit = &agentv1.ExecExit{ExitCode: -1, Reason: err.Error()}
		log.Info("exec: command not run", "err", err)
	} else {
		log.Info("exec: command ended", "exit_code", code)
	}
	_ = out.send(&agentv1.ExecFrame{Frame: &agentv1.ExecFrame_Exit{Exit: exit}})
	// Let the control plane end the stream: cancelling it now would reset it, and the
	// exit (and output still in flight) would be lost on the way.
	_ = stream.CloseRequest()
	select {
	case <-readDone:
	case <-time.After(30 * time.Second):
	}
}
