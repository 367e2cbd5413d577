package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	"github.com/berthhq/berth/services/agent/outbox"
)

// Host is what the session asks of the rest of the agent about the host.
type Host interface {
	// Registration returns the request to register with now; its
	// resources reflect the runtime's current readiness.
	Registration() *agentv1.RegisterRequest
	// Heartbeat returns the heartbeat to send now.
	Heartbeat() *agentv1.Heartbeat
	// CapacityChanged returns a channel closed when readiness (and so the
	// advertised capacity) changes next; the session heartbeats at once.
	CapacityChanged() <-chan struct{}
}

// Handler acts on what the control plane sends.
type Handler interface {
	// Registered is called after every successful registration, before
	// the session opens; an error aborts this connection attempt.
	Registered(ctx context.Context, resp *agentv1.RegisterResponse) error
	// RunningTasks lists the tasks the agent runs, for Hello.
	RunningTasks() []string
	// Assign durably takes an assignment (or recognises a redelivery);
	// the delivery is acked when it returns nil.
	Assign(ctx context.Context, a *agentv1.Assignment) error
	// Stop durably takes a stop order; acked when it returns nil.
	Stop(ctx context.Context, o *agentv1.StopOrder) error
	// Expected handles the list of tasks the control plane expects.
	Expected(ctx context.Context, e *agentv1.ExpectedTasks)
}

// Reregisterer is implemented by a Host whose registration can change while a session
// is open (what the host can run: task networking found after the agent started).
type Reregisterer interface {
	// Reregister returns a channel signalled when the host must register again: the
	// session then ends and the agent registers anew (same instance, its tasks kept).
	Reregister() <-chan struct{}
}

// ErrReregister ends a session whose host asked to register again.
var ErrReregister = errors.New("the host's capabilities changed: registering again")

// RouteHandler is implemented by a Handler that keeps routes to the other instances'
// awsvpc task subnets; a Handler without it ignores TaskSubnetRoutes.
type RouteHandler interface {
	// TaskSubnetRoutes handles the cluster's full list of peer task subnets.
	TaskSubnetRoutes(ctx context.Context, r *agentv1.TaskSubnetRoutes)
}

// Config configures a Session.
type Config struct {
	// BaseURL is the control plane's (gateway's) URL; http:// uses h2c.
	BaseURL string
	// HTTPClient carries the calls; it must speak HTTP/2 (h2c for
	// http://). A signing transport (SigV4) plugs in here. Default: an
	// h2c-capable client.
	HTTPClient *http.Client
	// Outbox holds the state changes to send.
	Outbox *outbox.Outbox
	// Reports is signalled after a change is appended to the outbox.
	Reports <-chan struct{}
	// HeartbeatInterval is the time between heartbeats; default 10 s.
	HeartbeatInterval time.Duration
	// ResendInterval resends changes unacknowledged this long; default 15 s.
	ResendInterval time.Duration
	// BackoffMin and BackoffMax bound the reconnect delay, which doubles
	// per failed attempt with jitter; defaults 250 ms and 30 s.
	BackoffMin, BackoffMax time.Duration
	// Log receives connection events; nil discards them.
	Log *slog.Logger
	// Stats, when set, samples the running tasks' resource use; the session sends its
	// answer (when it has tasks or the instance's capacity) every StatsInterval, for the
	// control plane's AWS/ECS CloudWatch metrics.
	Stats func(ctx context.Context) *agentv1.TaskStats
	// StatsInterval is the time between Stats samples; default 15 s.
	StatsInterval time.Duration
}

// DefaultHTTPClient returns a client that speaks only HTTP/2: over TLS for
// https:// URLs and cleartext (h2c) for http:// URLs, as Connect bidi
// streams need. (With HTTP/1 enabled, Go would use it for http://.)
func DefaultHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	tr.Protocols = &p
	return &http.Client{Transport: tr}
}

// Session is the control-plane link.
type Session struct {
	cfg     Config
	host    Host
	handler Handler
	client  agentv1connect.AgentServiceClient
	log     *slog.Logger
}

// New returns a session for cfg; Run connects it.
func New(cfg Config, host Host, handler Handler) *Session {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = DefaultHTTPClient()
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 10 * time.Second
	}
	if cfg.ResendInterval <= 0 {
		cfg.ResendInterval = 15 * time.Second
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 250 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Session{
		cfg: cfg, host: host, handler: handler, log: cfg.Log,
		client: agentv1connect.NewAgentServiceClient(cfg.HTTPClient, cfg.BaseURL),
	}
}

// Backoff returns the delay before reconnect attempt n (0-based): min·2ⁿ
// capped at max, with jitter drawing it uniformly from [d/2, d].
func Backoff(n int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	half := d / 2
	return half + rand.N(d-half+1)
}

// Run registers and holds the session until ctx is done, reconnecting with
// backoff after every failure. It returns ctx's error.
func (s *Session) Run(ctx context.Context) error {
	attempt := 0
	for {
		connected, err := s.connect(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if connected {
			attempt = 0
		}
		d := Backoff(attempt, s.cfg.BackoffMin, s.cfg.BackoffMax)
		attempt++
		s.log.Warn("control plane session ended; reconnecting", "err", err, "in", d)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// connect runs one register + session; connected reports whether the
// session got as far as its hello.
func (s *Session) connect(ctx context.Context) (connected bool, err error) {
	reg, err := s.client.Register(ctx, connect.NewRequest(s.host.Registration()))
	if err != nil {
		return false, fmt.Errorf("register: %w", err)
	}
	arn := reg.Msg.GetContainerInstance().GetContainerInstanceArn()
	s.log.Info("registered", "containerInstance", arn)
	if err := s.handler.Registered(ctx, reg.Msg); err != nil {
		return false, fmt.Errorf("after register: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := s.client.Session(ctx)
	defer stream.CloseRequest()
	send := func(m *agentv1.SessionRequest) error {
		if err := stream.Send(m); err != nil {
			return fmt.Errorf("session send: %w", err)
		}
		return nil
	}
	hello := &agentv1.Hello{ContainerInstanceArn: arn, RunningTaskArns: s.handler.RunningTasks()}
	if err := send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Hello{Hello: hello}}); err != nil {
		return false, err
	}

	recv := make(chan *agentv1.SessionResponse)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Receive()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case recv <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	sent := map[uint64]time.Time{}
	flush := func(resendOlder bool) error {
		pending, err := s.cfg.Outbox.Pending()
		if err != nil {
			return err
		}
		now := time.Now()
		for _, c := range pending {
			at, ok := sent[c.GetSeq()]
			if ok && (!resendOlder || now.Sub(at) < s.cfg.ResendInterval) {
				continue
			}
			if err := send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_TaskState{TaskState: c}}); err != nil {
				return err
			}
			s.log.Debug("sent task state", "seq", c.GetSeq(), "task", c.GetTaskArn(), "status", c.GetLastStatus())
			sent[c.GetSeq()] = now
		}
		return nil
	}
	heartbeat := func() error {
		hb := s.host.Heartbeat()
		hb.SentAt = timestamppb.Now()
		return send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Heartbeat{Heartbeat: hb}})
	}
	if err := heartbeat(); err != nil {
		return true, err
	}
	if err := flush(false); err != nil {
		return true, err
	}

	hbTick := time.NewTicker(s.cfg.HeartbeatInterval)
	defer hbTick.Stop()
	resendTick := time.NewTicker(s.cfg.ResendInterval)
	defer resendTick.Stop()
	var statsC <-chan time.Time
	if s.cfg.Stats != nil {
		iv := s.cfg.StatsInterval
		if iv <= 0 {
			iv = 15 * time.Second
		}
		statsTick := time.NewTicker(iv)
		defer statsTick.Stop()
		statsC = statsTick.C
	}
	capChanged := s.host.CapacityChanged()
	var rereg <-chan struct{}
	if r, ok := s.host.(Reregisterer); ok {
		rereg = r.Reregister()
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case err = <-recvErr:
			if errors.Is(err, context.Canceled) {
				return true, err
			}
			return true, fmt.Errorf("session receive: %w", err)
		case <-hbTick.C:
			err = heartbeat()
		case <-capChanged:
			capChanged = s.host.CapacityChanged()
			err = heartbeat()
		case <-rereg:
			return true, ErrReregister
		case <-s.cfg.Reports:
			err = flush(false)
		case <-resendTick.C:
			err = flush(true)
		case <-statsC:
			if st := s.cfg.Stats(ctx); st != nil {
				err = send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_TaskStats{TaskStats: st}})
			}
		case m := <-recv:
			err = s.handle(ctx, m, send, sent)
		}
		if err != nil {
			return true, err
		}
	}
}

func (s *Session) handle(ctx context.Context, m *agentv1.SessionResponse, send func(*agentv1.SessionRequest) error, sent map[uint64]time.Time) error {
	ack := func(id string) error {
		return send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Ack{Ack: &agentv1.Ack{DeliveryIds: []string{id}}}})
	}
	switch msg := m.GetMessage().(type) {
	case *agentv1.SessionResponse_Assignment:
		s.log.Debug("assignment received", "task", msg.Assignment.GetTask().GetTaskArn())
		if err := s.handler.Assign(ctx, msg.Assignment); err != nil {
			s.log.Error("assignment not taken", "task", msg.Assignment.GetTask().GetTaskArn(), "err", err)
			return nil // not acked: redelivered
		}
		return ack(msg.Assignment.GetDeliveryId())
	case *agentv1.SessionResponse_Stop:
		if err := s.handler.Stop(ctx, msg.Stop); err != nil {
			s.log.Error("stop order not taken", "task", msg.Stop.GetTaskArn(), "err", err)
			return nil
		}
		return ack(msg.Stop.GetDeliveryId())
	case *agentv1.SessionResponse_StateAck:
		if err := s.cfg.Outbox.Ack(msg.StateAck.GetSeqs()); err != nil {
			return err
		}
		for _, seq := range msg.StateAck.GetSeqs() {
			delete(sent, seq)
		}
	case *agentv1.SessionResponse_ExpectedTasks:
		s.handler.Expected(ctx, msg.ExpectedTasks)
	case *agentv1.SessionResponse_ExecStart:
		go s.exec(context.WithoutCancel(ctx), msg.ExecStart)
	case *agentv1.SessionResponse_TaskSubnetRoutes:
		if rh, ok := s.handler.(RouteHandler); ok {
			rh.TaskSubnetRoutes(ctx, msg.TaskSubnetRoutes)
		}
	}
	return nil
}
