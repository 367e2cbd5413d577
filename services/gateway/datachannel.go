package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	"github.com/berthhq/berth/pkg/identity"
	"github.com/berthhq/berth/pkg/ssmchannel"
	"github.com/coder/websocket"
)

// DataChannelPath is the prefix of ECS Exec streamUrls: the session id follows it, as in
// AWS's wss://ssmmessages.{region}.amazonaws.com/v1/data-channel/{sessionId}.
const DataChannelPath = "/v1/data-channel/"

// openTimeout bounds the wait for the plugin's token message and for the scheduler to
// pair the session with the task's agent.
const openTimeout = 60 * time.Second

// wsConn adapts a WebSocket to ssmchannel.Conn: text messages (the plugin sends only its
// token as text) are skipped after the first.
type wsConn struct{ c *websocket.Conn }

func (w wsConn) Read(ctx context.Context) ([]byte, error) {
	for {
		typ, b, err := w.c.Read(ctx)
		if err != nil {
			return nil, err
		}
		if typ == websocket.MessageBinary {
			return b, nil
		}
	}
}

func (w wsConn) Write(ctx context.Context, b []byte) error {
	return w.c.Write(ctx, websocket.MessageBinary, b)
}

// execInput passes what the plugin types and its terminal size to the scheduler.
type execInput struct {
	stream *connect.BidiStreamForClient[agentv1.OpenRequest, agentv1.OpenResponse]
}

func (e execInput) Input(p []byte) error {
	return e.stream.Send(&agentv1.OpenRequest{Frame: &agentv1.ExecFrame{Frame: &agentv1.ExecFrame_Stdin{Stdin: p}}})
}

func (e execInput) Resize(cols, rows uint32) error {
	return e.stream.Send(&agentv1.OpenRequest{Frame: &agentv1.ExecFrame{Frame: &agentv1.ExecFrame_Resize{Resize: &agentv1.ExecResize{Cols: cols, Rows: rows}}}})
}

// serveDataChannel serves an ECS Exec session's streamUrl to AWS's session-manager-plugin:
// it accepts the WebSocket, reads the plugin's open-data-channel message (the session's
// tokenValue), opens the session's client half on the scheduler (ExecChannelService.Open,
// which checks the token and pairs it with the task's agent) and speaks the Session
// Manager data channel protocol to the plugin (ssmchannel) for the bytes the two halves
// exchange. A failure before the command runs is told to the plugin as channel_closed
// with the reason, which it prints before it exits.
func (g *Gateway) serveDataChannel(w http.ResponseWriter, r *http.Request, x *exchange) {
	sessionID := strings.TrimPrefix(r.URL.Path, DataChannelPath)
	x.action = "ssmmessages:OpenDataChannel"
	if sessionID == "" || strings.Contains(sessionID, "/") {
		x.errType = "ValidationException"
		writeError(w, http.StatusBadRequest, "ValidationException", "The data channel path names no session.")
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		x.errType = "ValidationException"
		return // Accept wrote the HTTP error
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	octx, ocancel := context.WithTimeout(ctx, openTimeout)
	typ, b, err := c.Read(octx)
	ocancel()
	if err != nil {
		x.errType = "ClientError"
		return
	}
	var open ssmchannel.OpenDataChannelInput
	if typ != websocket.MessageText || json.Unmarshal(b, &open) != nil || open.TokenValue == "" {
		x.errType = "ValidationException"
		_ = c.Close(websocket.StatusPolicyViolation, "the first message must be the open data channel request with the session token")
		return
	}
	sess := ssmchannel.New(wsConn{c}, ssmchannel.Config{SessionID: sessionID, Log: g.log.With("session", sessionID)}, nil)
	closeWith := func(reason string) {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer ccancel()
		_ = sess.Close(cctx, reason)
		_ = c.Close(websocket.StatusNormalClosure, "")
	}
	account, region, ok := tokenScope(open.TokenValue)
	if !ok {
		x.errType = "InvalidToken"
		closeWith("The session token is not valid.")
		return
	}
	x.account = account

	stream, first, err := g.openExec(ctx, account, region, x.id, sessionID, open.TokenValue)
	if err != nil {
		x.errType = connect.CodeOf(err).String()
		closeWith(execFailure(err))
		return
	}
	if first.GetFrame().GetReady() == nil {
		x.errType = "ServerException"
		closeWith("The session could not be opened.")
		return
	}
	sess = ssmchannel.New(wsConn{c}, ssmchannel.Config{SessionID: sessionID, Log: g.log.With("session", sessionID)}, execInput{stream})
	runErr := make(chan error, 1)
	go func() {
		err := sess.Run(ctx)
		runErr <- err
		cancel()
	}()
	for {
		r, err := stream.Receive()
		f := r.GetFrame()
		if err != nil {
			if ctx.Err() == nil {
				closeWith(execFailure(err))
			}
			break
		}
		if out := f.GetOutput(); out != nil {
			if err := sess.Output(ctx, out); err != nil {
				break
			}
		}
		if ex := f.GetExit(); ex != nil {
			closeWith(ex.GetReason())
			break
		}
	}
	_ = stream.CloseRequest()
	cancel()
	if err := <-runErr; errors.Is(err, ssmchannel.ErrTerminated) {
		x.errType = ""
	}
}

// agentElsewhere is the scheduler's message (agentsession.ErrAgentElsewhere) when the
// task's agent holds its session on another replica; the token is then not used up.
const agentElsewhere = "The task's container instance agent is connected to another scheduler replica."

// execOpenAttempts bounds how many times a join is sent again to reach the replica that
// holds the task's agent: the scheduler client sends each call to the next replica.
const execOpenAttempts = 8

// openExec opens the session's client half on the scheduler and returns the stream with
// its first answer (ready), opening it again while a replica answers agentElsewhere.
func (g *Gateway) openExec(ctx context.Context, account, region, requestID, sessionID, token string) (*connect.BidiStreamForClient[agentv1.OpenRequest, agentv1.OpenResponse], *agentv1.OpenResponse, error) {
	client := agentv1connect.NewExecChannelServiceClient(g.cfg.HTTPClient, g.cfg.SchedulerURL)
	for attempt := 1; ; attempt++ {
		stream := client.Open(ctx)
		h := stream.RequestHeader()
		h.Set(identity.AccountHeader, account)
		h.Set(identity.RegionHeader, region)
		h.Set(identity.RequestIDHeader, requestID)
		if err := stream.Send(&agentv1.OpenRequest{Frame: &agentv1.ExecFrame{Frame: &agentv1.ExecFrame_Open{Open: &agentv1.ExecOpen{SessionId: sessionID, Token: token}}}}); err != nil && !errors.Is(err, io.EOF) {
			g.log.Warn("exec: opening the session on the scheduler", "session", sessionID, "err", err)
		}
		first, err := stream.Receive()
		if err == nil {
			return stream, first, nil
		}
		_ = stream.CloseRequest()
		var ce *connect.Error
		if attempt >= execOpenAttempts || !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable || ce.Message() != agentElsewhere {
			return nil, nil, err
		}
	}
}

// execFailure is the text the plugin prints for a session that failed: the scheduler's
// message without Connect's code prefix.
func execFailure(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return "The session ended: the control plane is unavailable."
}

// tokenScope reads the account and region a session token was issued in (its first two
// dot-separated parts; see ExecuteCommand), which the scheduler needs to find the session.
// The token is checked there, against the SHA-256 it stored.
func tokenScope(token string) (account, region string, ok bool) {
	parts := strings.SplitN(token, ".", 3)
	if len(parts) != 3 || len(parts[0]) != 12 || parts[1] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}
