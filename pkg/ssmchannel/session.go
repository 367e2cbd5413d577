package ssmchannel

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Conn is the WebSocket as a session uses it: whole messages. Read returns binary
// messages' bytes; Write sends one binary message. Write may be called from several
// goroutines (the session serializes its own writes anyway).
type Conn interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, b []byte) error
}

// Handler receives what the client sends once the handshake is done.
type Handler interface {
	// Input is keystrokes (or piped input) for the process, in order.
	Input(p []byte) error
	// Resize is the client's terminal size.
	Resize(cols, rows uint32) error
}

// Session types the handshake may announce; the plugin runs a terminal for the first
// two, a port forwarder for Port.
const (
	SessionInteractiveCommands = "InteractiveCommands"
	SessionStandardStream      = "Standard_Stream"
	SessionPort                = "Port"
)

// Config configures a Session.
type Config struct {
	// SessionID is the session's id (printed by the plugin when the channel closes).
	SessionID string
	// SessionType is announced in the handshake; default SessionInteractiveCommands.
	SessionType string
	// AgentVersion is announced in the handshake; default "3.3.0.0-berth".
	AgentVersion string
	// ResendAfter is how long an output message waits for its acknowledgement before it is
	// sent again; default 2 s. MaxResends bounds the resends of one message (default 15):
	// past it the session fails, as the plugin fails past its own bound.
	ResendAfter time.Duration
	MaxResends  int
	// Window is how many output messages may await acknowledgement; Output blocks beyond
	// it. Default 512.
	Window int
	// ChunkSize is the largest output payload in bytes; default 16 KiB.
	ChunkSize int
	// Log receives protocol events; nil discards them.
	Log *slog.Logger
}

// ErrTerminated is returned by Run when the client asked to end the session (a
// TerminateSession flag).
var ErrTerminated = errors.New("ssmchannel: the client terminated the session")

type pending struct {
	seq      int64
	raw      []byte
	lastSent time.Time
	resends  int
}

// Session is the agent's side of one data channel: it sends the handshake request,
// acknowledges and orders the client's messages, and numbers, buffers and resends its
// own until acknowledged.
type Session struct {
	cfg  Config
	conn Conn
	h    Handler
	log  *slog.Logger

	writeMu sync.Mutex

	mu       sync.Mutex
	cond     *sync.Cond
	nextSeq  int64
	unacked  []*pending // in sequence order
	failed   error
	done     bool
	expected int64
	early    map[int64]*Message

	handshaken chan struct{}
	hsOnce     sync.Once
	started    time.Time
}

// New returns a session over conn; Run drives it.
func New(conn Conn, cfg Config, h Handler) *Session {
	if cfg.SessionType == "" {
		cfg.SessionType = SessionInteractiveCommands
	}
	if cfg.AgentVersion == "" {
		cfg.AgentVersion = "3.3.0.0-berth"
	}
	if cfg.ResendAfter <= 0 {
		cfg.ResendAfter = 2 * time.Second
	}
	if cfg.MaxResends <= 0 {
		cfg.MaxResends = 15
	}
	if cfg.Window <= 0 {
		cfg.Window = 512
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = 16 << 10
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Session{cfg: cfg, conn: conn, h: h, log: cfg.Log, early: map[int64]*Message{}, handshaken: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Handshaken is closed once the client answered the handshake; input flows after it.
func (s *Session) Handshaken() <-chan struct{} { return s.handshaken }

// Run sends the handshake request and reads the client's messages until ctx ends, the
// connection fails, the client terminates the session (ErrTerminated) or a message
// cannot be delivered (too many resends). Output and Close may be called meanwhile.
func (s *Session) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.fail(errEnded)
	s.started = time.Now()
	req, _ := json.Marshal(map[string]any{
		"AgentVersion": s.cfg.AgentVersion,
		"RequestedClientActions": []any{map[string]any{
			"ActionType":       "SessionType",
			"ActionParameters": map[string]any{"SessionType": s.cfg.SessionType, "Properties": map[string]any{}},
		}},
	})
	if err := s.send(ctx, PayloadHandshakeRequest, req, false); err != nil {
		return err
	}
	go s.resendLoop(ctx)
	for {
		b, err := s.conn.Read(ctx)
		if err != nil {
			return err
		}
		m, err := Unmarshal(b)
		if err != nil {
			s.log.Warn("ssmchannel: bad message from client", "err", err)
			continue
		}
		switch m.MessageType {
		case Acknowledge:
			var ack AcknowledgeContent
			if err := json.Unmarshal(m.Payload, &ack); err != nil {
				s.log.Warn("ssmchannel: bad acknowledgement", "err", err)
				continue
			}
			s.acked(ack.SequenceNumber)
		case InputStreamData:
			if err := s.ack(ctx, m); err != nil {
				return err
			}
			if err := s.deliver(ctx, m); err != nil {
				return err
			}
		case StartPublication, PausePublication:
		default:
			s.log.Debug("ssmchannel: message ignored", "type", m.MessageType)
		}
		if err := s.err(); err != nil {
			return err
		}
	}
}

// deliver hands the client's stream messages to the handler in sequence order, keeping
// early ones until the gap is filled and dropping repeats (already acknowledged again).
func (s *Session) deliver(ctx context.Context, m *Message) error {
	s.mu.Lock()
	switch {
	case m.SequenceNumber < s.expected:
		s.mu.Unlock()
		return nil
	case m.SequenceNumber > s.expected:
		if len(s.early) < 10000 {
			s.early[m.SequenceNumber] = m
		}
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	for m != nil {
		if err := s.handle(ctx, m); err != nil {
			return err
		}
		s.mu.Lock()
		s.expected++
		m = s.early[s.expected]
		delete(s.early, s.expected)
		s.mu.Unlock()
	}
	return nil
}

func (s *Session) handle(ctx context.Context, m *Message) error {
	switch m.PayloadType {
	case PayloadHandshakeResponse:
		var resp struct {
			ClientVersion string   `json:"ClientVersion"`
			Errors        []string `json:"Errors"`
		}
		_ = json.Unmarshal(m.Payload, &resp)
		if len(resp.Errors) > 0 {
			return fmt.Errorf("ssmchannel: the client refused the handshake: %v", resp.Errors)
		}
		s.log.Debug("ssmchannel: handshake answered", "client", resp.ClientVersion)
		done, _ := json.Marshal(map[string]any{"HandshakeTimeToComplete": time.Since(s.started).Nanoseconds(), "CustomerMessage": ""})
		if err := s.send(ctx, PayloadHandshakeComplete, done, false); err != nil {
			return err
		}
		s.hsOnce.Do(func() { close(s.handshaken) })
	case PayloadOutput:
		return s.h.Input(m.Payload)
	case PayloadSize:
		var sz SizeData
		if err := json.Unmarshal(m.Payload, &sz); err != nil {
			s.log.Warn("ssmchannel: bad size payload", "err", err)
			return nil
		}
		return s.h.Resize(sz.Cols, sz.Rows)
	case PayloadFlag:
		if len(m.Payload) >= 4 && binary.BigEndian.Uint32(m.Payload) == FlagTerminateSession {
			return ErrTerminated
		}
	}
	return nil
}

// Output sends the process's output, in chunks of at most ChunkSize, once the handshake
// is done; it blocks while Window messages await acknowledgement.
func (s *Session) Output(ctx context.Context, p []byte) error {
	select {
	case <-s.handshaken:
	case <-ctx.Done():
		return ctx.Err()
	}
	for len(p) > 0 {
		n := min(len(p), s.cfg.ChunkSize)
		if err := s.send(ctx, PayloadOutput, p[:n], true); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Close waits (until ctx ends) for the client to acknowledge every output message, then
// sends channel_closed with output, which the plugin prints before it exits.
func (s *Session) Close(ctx context.Context, output string) error {
	s.mu.Lock()
	for len(s.unacked) > 0 && s.failed == nil && ctx.Err() == nil {
		s.waitLocked(ctx)
	}
	s.mu.Unlock()
	id := NewID()
	now := time.Now()
	body, _ := json.Marshal(ChannelClosedContent{
		MessageID: (&Message{MessageID: id}).ID(), CreatedDate: now.UTC().Format(time.RFC3339),
		SessionID: s.cfg.SessionID, MessageType: ChannelClosed, SchemaVersion: 1, Output: output,
	})
	m := &Message{MessageType: ChannelClosed, SchemaVersion: 1, CreatedDate: now, MessageID: id, PayloadType: PayloadOutput, Payload: body}
	return s.write(ctx, m.Marshal())
}

// waitLocked waits on cond, woken when ctx ends too. Called with s.mu held.
func (s *Session) waitLocked(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	s.cond.Wait()
	stop()
}

// send numbers, writes and keeps a stream message until acknowledged; with window it
// first waits for room.
func (s *Session) send(ctx context.Context, pt PayloadType, payload []byte, window bool) error {
	s.mu.Lock()
	for window && len(s.unacked) >= s.cfg.Window && s.failed == nil && ctx.Err() == nil {
		s.waitLocked(ctx)
	}
	if s.failed != nil {
		s.mu.Unlock()
		return s.failed
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return err
	}
	m := &Message{MessageType: OutputStreamData, SchemaVersion: 1, CreatedDate: time.Now(), SequenceNumber: s.nextSeq,
		MessageID: NewID(), PayloadType: pt, Payload: append([]byte(nil), payload...)}
	if s.nextSeq == 0 {
		m.Flags = 1 // SYN: the first message of the stream, as the SSM agent marks it
	}
	p := &pending{seq: s.nextSeq, raw: m.Marshal(), lastSent: time.Now()}
	s.nextSeq++
	s.unacked = append(s.unacked, p)
	s.mu.Unlock()
	return s.write(ctx, p.raw)
}

func (s *Session) write(ctx context.Context, b []byte) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.conn.Write(ctx, b); err != nil {
		s.fail(err)
		return err
	}
	return nil
}

// ack acknowledges one of the client's stream messages.
func (s *Session) ack(ctx context.Context, m *Message) error {
	body, _ := json.Marshal(AcknowledgeContent{MessageType: m.MessageType, MessageID: m.ID(), SequenceNumber: m.SequenceNumber, IsSequentialMessage: true})
	a := &Message{MessageType: Acknowledge, SchemaVersion: 1, CreatedDate: time.Now(), Flags: 3, MessageID: NewID(), Payload: body}
	return s.write(ctx, a.Marshal())
}

func (s *Session) acked(seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.unacked {
		if p.seq == seq {
			s.unacked = append(s.unacked[:i], s.unacked[i+1:]...)
			s.cond.Broadcast()
			return
		}
	}
}

// resendLoop sends again every message unacknowledged for ResendAfter.
func (s *Session) resendLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.ResendAfter / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var again [][]byte
		s.mu.Lock()
		for _, p := range s.unacked {
			if time.Since(p.lastSent) < s.cfg.ResendAfter {
				continue
			}
			if p.resends >= s.cfg.MaxResends {
				s.failLocked(fmt.Errorf("ssmchannel: message %d unacknowledged after %d resends", p.seq, p.resends))
				s.mu.Unlock()
				return
			}
			p.resends++
			p.lastSent = time.Now()
			again = append(again, p.raw)
		}
		s.mu.Unlock()
		for _, b := range again {
			if s.write(ctx, b) != nil {
				return
			}
		}
	}
}

func (s *Session) fail(err error) {
	s.mu.Lock()
	s.failLocked(err)
	s.mu.Unlock()
}

func (s *Session) failLocked(err error) {
	if s.failed == nil {
		s.failed = err
	}
	s.cond.Broadcast()
}

func (s *Session) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil && !errors.Is(s.failed, errEnded) {
		return s.failed
	}
	return nil
}

var errEnded = errors.New("ssmchannel: session ended")
