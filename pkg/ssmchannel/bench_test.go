package ssmchannel

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkOutput10MiB measures the data channel's own cost of sending 10 MiB of output
// (framing, digests, acknowledgement bookkeeping) to a client that acknowledges each
// message, over an in-memory connection: the ceiling the protocol puts on an ECS Exec
// session's output throughput, before the network and the relay.
func BenchmarkOutput10MiB(b *testing.B) {
	payload := make([]byte, 10<<20)
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		toAgent, fromAgent := make(chan []byte, 1024), make(chan []byte, 1024)
		s := New(pipeConn{in: toAgent, out: fromAgent}, Config{SessionID: "bench", ResendAfter: time.Minute}, &recorder{})
		go func() { _ = s.Run(ctx) }()
		go func() { // the client: answer the handshake, acknowledge everything
			for {
				var raw []byte
				select {
				case raw = <-fromAgent:
				case <-ctx.Done():
					return
				}
				m, err := Unmarshal(raw)
				if err != nil || m.MessageType != OutputStreamData {
					continue
				}
				if m.PayloadType == PayloadHandshakeRequest {
					r := &Message{MessageType: InputStreamData, SchemaVersion: 1, CreatedDate: time.Now(), MessageID: NewID(), PayloadType: PayloadHandshakeResponse, Payload: []byte(`{}`)}
					toAgent <- r.Marshal()
				}
				body, _ := json.Marshal(AcknowledgeContent{MessageType: m.MessageType, MessageID: m.ID(), SequenceNumber: m.SequenceNumber})
				a := &Message{MessageType: Acknowledge, SchemaVersion: 1, CreatedDate: time.Now(), MessageID: NewID(), Payload: body}
				select {
				case toAgent <- a.Marshal():
				case <-ctx.Done():
					return
				}
			}
		}()
		if err := s.Output(ctx, payload); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(ctx, ""); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}
