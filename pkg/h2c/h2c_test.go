package h2c

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestClientReadsLargeFrames reads the SETTINGS frame NewClient opens a connection with
// and checks it lets the server send DATA frames of 256 KiB (SETTINGS_MAX_FRAME_SIZE, id
// 0x5; HTTP/2's default is 16 KiB), so a large answer is not cut into 16 KiB writes.
func TestClientReadsLargeFrames(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan map[uint16]uint32, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		preface := make([]byte, len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
		header := make([]byte, 9)
		if _, err := io.ReadFull(conn, preface); err != nil || !bytes.HasPrefix(preface, []byte("PRI * HTTP/2.0")) {
			got <- nil
			return
		}
		if _, err := io.ReadFull(conn, header); err != nil || header[3] != 0x4 {
			got <- nil // not a SETTINGS frame
			return
		}
		payload := make([]byte, int(header[0])<<16|int(header[1])<<8|int(header[2]))
		if _, err := io.ReadFull(conn, payload); err != nil {
			got <- nil
			return
		}
		settings := map[uint16]uint32{}
		for p := payload; len(p) >= 6; p = p[6:] {
			settings[binary.BigEndian.Uint16(p)] = binary.BigEndian.Uint32(p[2:])
		}
		got <- settings
	}()
	req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if resp, err := NewClient().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	settings := <-got
	if settings == nil {
		t.Fatal("the client's connection did not open with an HTTP/2 preface and SETTINGS frame")
	}
	if v := settings[0x5]; v != 256<<10 {
		t.Fatalf("SETTINGS_MAX_FRAME_SIZE = %d (settings %v), want %d", v, settings, 256<<10)
	}
}
