package tasks

import (
	"bytes"
	"path"
	"strings"
	"sync"
	"time"
)

// headMax is how much of a process's first output headWriter keeps: more than runc's
// exec error line.
const headMax = 1024

// headWriter keeps the first headMax bytes written to it (a container's stdout and
// stderr, both) and discards the rest; it never fails.
type headWriter struct {
	mu  sync.Mutex
	buf []byte
}

// Write implements io.Writer.
func (h *headWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := headMax - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Bytes returns what was kept; nil for a nil headWriter.
func (h *headWriter) Bytes() []byte {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return bytes.Clone(h.buf)
}

// execFailureWindow bounds how long after its start a process's exit can be the
// runtime's failure to execute it.
const execFailureWindow = 10 * time.Second

// execFailure reports whether a process that exited with code after running for ran,
// having written head, is one the runtime could not execute, and returns the runtime's
// message. runc checks the program exists before the start (an error NewTask returns);
// an execve that fails after it — a dynamically linked program whose loader the image
// lacks, an interpreter line naming a missing interpreter — ends the process with status
// 1 and "exec PATH: ERROR" as its only output, PATH being argv0 or where runc found it
// on PATH. Anything else (other output, status 0, a late exit, another program) is the
// program's own failure.
func execFailure(argv0 string, code uint32, ran time.Duration, head []byte) (string, bool) {
	if argv0 == "" || code == 0 || ran > execFailureWindow {
		return "", false
	}
	line := strings.TrimSuffix(string(head), "\n")
	if line == "" || strings.Contains(line, "\n") {
		return "", false
	}
	rest, ok := strings.CutPrefix(line, "exec ")
	if !ok {
		return "", false
	}
	prog, msg, ok := strings.Cut(rest, ": ")
	if !ok || msg == "" || (prog != argv0 && path.Base(prog) != path.Base(argv0)) {
		return "", false
	}
	return line, true
}
