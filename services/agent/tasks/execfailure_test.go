package tasks

import (
	"testing"
	"time"
)

// TestExecFailure: runc's "exec PATH: ERROR" as a process's only output, with status 1
// soon after the start, is the runtime's failure to execute argv0 (also when runc found it
// on PATH); anything else is the program's own exit.
func TestExecFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		argv0 string
		code  uint32
		ran   time.Duration
		head  string
		want  bool
	}{
		{"missing loader", "/berth-testimage", 1, 50 * time.Millisecond, "exec /berth-testimage: no such file or directory\n", true},
		{"found on PATH", "app", 1, time.Second, "exec /usr/bin/app: exec format error\n", true},
		{"no newline", "/app", 1, 0, "exec /app: permission denied", true},
		{"status 0", "/app", 0, 0, "exec /app: no such file or directory\n", false},
		{"another program", "/app", 1, 0, "exec /other: no such file or directory\n", false},
		{"more output", "/app", 1, 0, "starting\nexec /app: no such file or directory\n", false},
		{"no message", "/app", 1, 0, "exec /app: \n", false},
		{"late", "/app", 1, time.Minute, "exec /app: no such file or directory\n", false},
		{"adopted", "", 1, 0, "exec /app: no such file or directory\n", false},
		{"silent", "/app", 1, 0, "", false},
	} {
		msg, ok := execFailure(tc.argv0, tc.code, tc.ran, []byte(tc.head))
		if ok != tc.want {
			t.Errorf("%s: execFailure = %q, %v; want %v", tc.name, msg, ok, tc.want)
		}
		if ok && msg+"\n" != tc.head && msg != tc.head {
			t.Errorf("%s: message %q, want the runtime's line %q", tc.name, msg, tc.head)
		}
	}
	var h headWriter
	big := make([]byte, 3*headMax)
	if n, err := h.Write(big); n != len(big) || err != nil {
		t.Errorf("headWriter.Write = %d, %v", n, err)
	}
	if got := len(h.Bytes()); got != headMax {
		t.Errorf("headWriter kept %d bytes, want %d", got, headMax)
	}
}
