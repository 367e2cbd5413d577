package ssmchannel

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

func TestMarshalLayout(t *testing.T) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	m := &Message{MessageType: OutputStreamData, SchemaVersion: 1, CreatedDate: time.UnixMilli(1700000000123),
		SequenceNumber: 7, Flags: 1, MessageID: id, PayloadType: PayloadOutput, Payload: []byte("hello")}
	b := m.Marshal()
	if got := binary.BigEndian.Uint32(b); got != 116 {
		t.Errorf("header length %d, want 116 (the plugin's PayloadLengthOffset)", got)
	}
	if got := string(b[4:36]); got != OutputStreamData+string(bytes.Repeat([]byte{' '}, 32-len(OutputStreamData))) {
		t.Errorf("message type field %q", got)
	}
	// The plugin writes a UUID's least significant half first.
	if !bytes.Equal(b[64:72], id[8:16]) || !bytes.Equal(b[72:80], id[0:8]) {
		t.Errorf("message id bytes %x, want halves swapped", b[64:80])
	}
	if got := binary.BigEndian.Uint32(b[116:]); got != 5 || string(b[120:]) != "hello" {
		t.Errorf("payload length %d, payload %q", got, b[120:])
	}
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.MessageID != id || back.SequenceNumber != 7 || string(back.Payload) != "hello" || back.CreatedDate.UnixMilli() != 1700000000123 || back.MessageType != OutputStreamData {
		t.Errorf("round trip: %+v", back)
	}
	if back.ID() != "01020304-0506-0708-090a-0b0c0d0e0f10" {
		t.Errorf("ID() = %s", back.ID())
	}
	b[len(b)-1] ^= 1
	if _, err := Unmarshal(b); err == nil {
		t.Error("a changed payload passed the digest check")
	}
	if _, err := Unmarshal(b[:50]); err == nil {
		t.Error("a short message was accepted")
	}
}

// pipeConn is one end of an in-memory message channel.
type pipeConn struct {
	in  chan []byte
	out chan []byte
}

func (p pipeConn) Read(ctx context.Context) ([]byte, error) {
	select {
	case b := <-p.in:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p pipeConn) Write(ctx context.Context, b []byte) error {
	select {
	case p.out <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type recorder struct {
	mu    sync.Mutex
	input []byte
	sizes []SizeData
}

func (r *recorder) Input(p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.input = append(r.input, p...)
	return nil
}

func (r *recorder) Resize(c, rows uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sizes = append(r.sizes, SizeData{c, rows})
	return nil
}

// TestSessionProtocol plays the plugin's side: it answers the handshake, sends input out
// of order and a repeat, acknowledges output, and reads channel_closed.
func TestSessionProtocol(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	toAgent, fromAgent := make(chan []byte, 64), make(chan []byte, 64)
	rec := &recorder{}
	s := New(pipeConn{in: toAgent, out: fromAgent}, Config{SessionID: "ecs-execute-command-x", ResendAfter: 200 * time.Millisecond}, rec)
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()

	next := func() *Message {
		t.Helper()
		select {
		case b := <-fromAgent:
			m, err := Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			return m
		case <-ctx.Done():
			t.Fatal("no message from the agent side")
		}
		return nil
	}
	input := func(seq int64, pt PayloadType, payload []byte) {
		m := &Message{MessageType: InputStreamData, SchemaVersion: 1, CreatedDate: time.Now(), SequenceNumber: seq, MessageID: NewID(), PayloadType: pt, Payload: payload}
		toAgent <- m.Marshal()
	}
	ack := func(m *Message) {
		body, _ := json.Marshal(AcknowledgeContent{MessageType: m.MessageType, MessageID: m.ID(), SequenceNumber: m.SequenceNumber, IsSequentialMessage: true})
		a := &Message{MessageType: Acknowledge, SchemaVersion: 1, CreatedDate: time.Now(), Flags: 3, MessageID: NewID(), Payload: body}
		toAgent <- a.Marshal()
	}

	hs := next()
	if hs.MessageType != OutputStreamData || hs.PayloadType != PayloadHandshakeRequest || hs.SequenceNumber != 0 {
		t.Fatalf("first message %s payload %d seq %d, want the handshake request", hs.MessageType, hs.PayloadType, hs.SequenceNumber)
	}
	var req struct {
		RequestedClientActions []struct {
			ActionType       string
			ActionParameters struct{ SessionType string }
		}
	}
	if err := json.Unmarshal(hs.Payload, &req); err != nil || len(req.RequestedClientActions) != 1 ||
		req.RequestedClientActions[0].ActionType != "SessionType" || req.RequestedClientActions[0].ActionParameters.SessionType != SessionInteractiveCommands {
		t.Fatalf("handshake request %s (%v)", hs.Payload, err)
	}
	ack(hs)
	input(0, PayloadHandshakeResponse, []byte(`{"ClientVersion":"1.3.0.0","ProcessedClientActions":[{"ActionType":"SessionType","ActionStatus":1}],"Errors":null}`))
	if a := next(); a.MessageType != Acknowledge {
		t.Fatalf("want the acknowledgement of the handshake response, got %s", a.MessageType)
	}
	done := next()
	if done.PayloadType != PayloadHandshakeComplete || done.SequenceNumber != 1 {
		t.Fatalf("want handshake complete as seq 1, got payload %d seq %d", done.PayloadType, done.SequenceNumber)
	}
	ack(done)
	<-s.Handshaken()

	input(2, PayloadOutput, []byte("cd"))
	input(1, PayloadSize, []byte(`{"cols":80,"rows":24}`))
	input(3, PayloadOutput, []byte("ef"))
	input(2, PayloadOutput, []byte("cd")) // a resend: acknowledged again, not delivered twice
	for i := 0; i < 4; i++ {
		if a := next(); a.MessageType != Acknowledge {
			t.Fatalf("want acknowledgements, got %s", a.MessageType)
		}
	}
	if err := s.Output(ctx, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	out := next()
	if out.PayloadType != PayloadOutput || out.SequenceNumber != 2 || string(out.Payload) != "hello" {
		t.Fatalf("output: payload %d seq %d %q", out.PayloadType, out.SequenceNumber, out.Payload)
	}
	// Unacknowledged, it is sent again.
	if again := next(); again.SequenceNumber != 2 || string(again.Payload) != "hello" {
		t.Fatalf("resend: seq %d %q", again.SequenceNumber, again.Payload)
	}
	ack(out)
	closed := make(chan error, 1)
	go func() { closed <- s.Close(ctx, "") }()
	var cc *Message
	for cc == nil || cc.MessageType != ChannelClosed {
		cc = next()
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	var content ChannelClosedContent
	if err := json.Unmarshal(cc.Payload, &content); err != nil || content.SessionID != "ecs-execute-command-x" {
		t.Errorf("channel_closed %s (%v)", cc.Payload, err)
	}
	rec.mu.Lock()
	if string(rec.input) != "cdef" || len(rec.sizes) != 1 || rec.sizes[0] != (SizeData{80, 24}) {
		t.Errorf("delivered input %q sizes %v, want \"cdef\" once and 80x24", rec.input, rec.sizes)
	}
	rec.mu.Unlock()
	cancel()
	<-runErr
}
