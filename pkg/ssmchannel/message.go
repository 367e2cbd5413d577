// Package ssmchannel is the agent's side of the AWS Session Manager data channel: the
// binary message framing and the session protocol (handshake, acknowledgements,
// resends, ordered delivery, channel_closed) that AWS's session-manager-plugin speaks
// over its WebSocket, as implemented by github.com/aws/session-manager-plugin
// (src/message, src/datachannel; Apache-2.0), which this package was written against,
// not copied from. Berth's gateway serves it to the plugin for ECS Exec (docs/exec.md).
package ssmchannel

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Message types (the 32-byte MessageType field).
const (
	InputStreamData  = "input_stream_data"
	OutputStreamData = "output_stream_data"
	Acknowledge      = "acknowledge"
	ChannelClosed    = "channel_closed"
	StartPublication = "start_publication"
	PausePublication = "pause_publication"
)

// PayloadType says what a stream message's payload holds.
type PayloadType uint32

// Payload types of stream messages.
const (
	PayloadOutput            PayloadType = 1  // terminal bytes (both directions)
	PayloadError             PayloadType = 2  // error text
	PayloadSize              PayloadType = 3  // {"cols":N,"rows":N} (client → agent)
	PayloadParameter         PayloadType = 4  // unused by ECS Exec
	PayloadHandshakeRequest  PayloadType = 5  // agent → client
	PayloadHandshakeResponse PayloadType = 6  // client → agent
	PayloadHandshakeComplete PayloadType = 7  // agent → client
	PayloadEncChallengeReq   PayloadType = 8  // KMS encryption: not offered
	PayloadEncChallengeResp  PayloadType = 9  // KMS encryption: not offered
	PayloadFlag              PayloadType = 10 // a 4-byte flag (client → agent)
	PayloadStdErr            PayloadType = 11 // non-interactive stderr
	PayloadExitCode          PayloadType = 12 // non-interactive exit code
)

// Flag values of a PayloadFlag message.
const (
	FlagDisconnectToPort   uint32 = 1
	FlagTerminateSession   uint32 = 2
	FlagConnectToPortError uint32 = 3
)

// Field sizes and the header length: HeaderLength counts the bytes from MessageType up
// to and including PayloadType (the plugin's ClientMessage_PayloadLengthOffset).
const (
	typeLen      = 32
	headerLength = 4 + typeLen + 4 + 8 + 8 + 8 + 16 + 32 + 4
	// MinLength is the size of a message with an empty payload.
	MinLength = headerLength + 4
)

// Message is one data channel message.
type Message struct {
	MessageType    string
	SchemaVersion  uint32
	CreatedDate    time.Time // millisecond precision on the wire
	SequenceNumber int64
	Flags          uint64
	MessageID      [16]byte // a UUID, most significant byte first
	PayloadType    PayloadType
	Payload        []byte
}

// ID returns the message id as the plugin prints UUIDs (lowercase, hyphenated).
func (m *Message) ID() string {
	h := hex.EncodeToString(m.MessageID[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// NewID returns a random (version 4) message id.
func NewID() [16]byte {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// Marshal encodes m: big-endian integers, the message type padded with spaces, the
// message id's two 8-byte halves least significant first (as the plugin writes a UUID),
// and the SHA-256 of the payload.
func (m *Message) Marshal() []byte {
	b := make([]byte, MinLength+len(m.Payload))
	binary.BigEndian.PutUint32(b[0:], headerLength)
	copy(b[4:4+typeLen], bytes.Repeat([]byte{' '}, typeLen))
	copy(b[4:4+typeLen], m.MessageType)
	o := 4 + typeLen
	binary.BigEndian.PutUint32(b[o:], m.SchemaVersion)
	binary.BigEndian.PutUint64(b[o+4:], uint64(m.CreatedDate.UnixMilli()))
	binary.BigEndian.PutUint64(b[o+12:], uint64(m.SequenceNumber))
	binary.BigEndian.PutUint64(b[o+20:], m.Flags)
	copy(b[o+28:o+36], m.MessageID[8:16])
	copy(b[o+36:o+44], m.MessageID[0:8])
	sum := sha256.Sum256(m.Payload)
	copy(b[o+44:o+76], sum[:])
	binary.BigEndian.PutUint32(b[o+76:], uint32(m.PayloadType))
	binary.BigEndian.PutUint32(b[o+80:], uint32(len(m.Payload)))
	copy(b[MinLength:], m.Payload)
	return b
}

// Unmarshal decodes a message, checking its lengths and, when it has a payload, its
// digest (as the plugin's Validate does).
func Unmarshal(b []byte) (*Message, error) {
	if len(b) < MinLength {
		return nil, fmt.Errorf("ssmchannel: message of %d bytes is shorter than a header", len(b))
	}
	hl := binary.BigEndian.Uint32(b[0:])
	if hl < headerLength || int(hl)+4 > len(b) {
		return nil, fmt.Errorf("ssmchannel: bad header length %d", hl)
	}
	o := 4 + typeLen
	m := &Message{
		MessageType:    strings.TrimSpace(string(bytes.Trim(b[4:4+typeLen], "\x00"))),
		SchemaVersion:  binary.BigEndian.Uint32(b[o:]),
		CreatedDate:    time.UnixMilli(int64(binary.BigEndian.Uint64(b[o+4:]))),
		SequenceNumber: int64(binary.BigEndian.Uint64(b[o+12:])),
		Flags:          binary.BigEndian.Uint64(b[o+20:]),
		PayloadType:    PayloadType(binary.BigEndian.Uint32(b[o+76:])),
	}
	copy(m.MessageID[8:16], b[o+28:o+36])
	copy(m.MessageID[0:8], b[o+36:o+44])
	n := binary.BigEndian.Uint32(b[o+80:])
	m.Payload = b[hl+4:]
	if int(n) != len(m.Payload) {
		return nil, fmt.Errorf("ssmchannel: payload length %d, but %d bytes follow the header", n, len(m.Payload))
	}
	if m.MessageType == "" {
		return nil, errors.New("ssmchannel: message type is missing")
	}
	if n > 0 {
		sum := sha256.Sum256(m.Payload)
		if !bytes.Equal(sum[:], b[o+44:o+76]) {
			return nil, errors.New("ssmchannel: payload digest does not match")
		}
	}
	return m, nil
}

// AcknowledgeContent is an acknowledge message's JSON payload.
type AcknowledgeContent struct {
	MessageType         string `json:"AcknowledgedMessageType"`
	MessageID           string `json:"AcknowledgedMessageId"`
	SequenceNumber      int64  `json:"AcknowledgedMessageSequenceNumber"`
	IsSequentialMessage bool   `json:"IsSequentialMessage"`
}

// ChannelClosedContent is a channel_closed message's JSON payload; Output is what the
// plugin prints when it exits.
type ChannelClosedContent struct {
	MessageID     string `json:"MessageId"`
	CreatedDate   string `json:"CreatedDate"`
	DestinationID string `json:"DestinationId"`
	SessionID     string `json:"SessionId"`
	MessageType   string `json:"MessageType"`
	SchemaVersion int    `json:"SchemaVersion"`
	Output        string `json:"Output"`
}

// OpenDataChannelInput is the first (text) message the plugin sends after dialing: the
// session token it got from ExecuteCommand or StartSession.
type OpenDataChannelInput struct {
	MessageSchemaVersion string `json:"MessageSchemaVersion"`
	RequestID            string `json:"RequestId"`
	TokenValue           string `json:"TokenValue"`
	ClientID             string `json:"ClientId"`
	ClientVersion        string `json:"ClientVersion"`
}

// SizeData is a PayloadSize payload.
type SizeData struct {
	Cols uint32 `json:"cols"`
	Rows uint32 `json:"rows"`
}
