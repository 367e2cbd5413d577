package logs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
)

// ShipClient is the part of the control plane's AgentService the shipper uses
// (agentv1connect.AgentServiceClient satisfies it).
type ShipClient interface {
	// EnsureLogStream creates a destination's stream (and group with create_group).
	EnsureLogStream(context.Context, *connect.Request[agentv1.EnsureLogStreamRequest]) (*connect.Response[agentv1.EnsureLogStreamResponse], error)
	// ShipLogs stores a batch of events.
	ShipLogs(context.Context, *connect.Request[agentv1.ShipLogsRequest]) (*connect.Response[agentv1.ShipLogsResponse], error)
}

// ShipperConfig configures a Shipper.
type ShipperConfig struct {
	// Store holds the captured output and the destinations.
	Store *Store
	// Client reaches the control plane.
	Client ShipClient
	// Interval is the time between shipping passes; default 200 ms.
	Interval time.Duration
	// HoldMultiline is how long the last event of a multiline destination is held for
	// more continuation lines before it is shipped; default 2 s.
	HoldMultiline time.Duration
	// Log receives shipping problems; nil discards them.
	Log *slog.Logger
}

// Shipper is the awslogs driver's delivery: it reads each awslogs container's output
// from the Store's files (the agent's on-disk buffer) from a persisted cursor, ships it
// in PutLogEvents-sized batches and advances the cursor only after the control plane
// stored the batch — so output survives an agent restart and a control-plane outage,
// and the container never waits on shipping. Non-blocking destinations drop the oldest
// unshipped output beyond their max-buffer-size; blocking ones drop only what the
// file rotation removed before it was shipped.
type Shipper struct {
	cfg ShipperConfig

	mu   sync.Mutex
	done map[string]bool // destination files fully shipped
	// Shipped and Dropped count events shipped and bytes dropped, for tests and metrics.
	shipped, dropped int64
}

// NewShipper returns a shipper for cfg; Run starts it.
func NewShipper(cfg ShipperConfig) *Shipper {
	if cfg.Interval <= 0 {
		cfg.Interval = 200 * time.Millisecond
	}
	if cfg.HoldMultiline <= 0 {
		cfg.HoldMultiline = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Shipper{cfg: cfg, done: map[string]bool{}}
}

// Stats returns the events shipped and the bytes dropped (non-blocking overflow or
// rotation) since the shipper started.
func (s *Shipper) Stats() (shipped, droppedBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shipped, s.dropped
}

// Run ships until ctx is done, a pass every Interval, on a thread of lowered priority
// (nice 10), so that shipping yields to the containers' output path. It returns nil.
func (s *Shipper) Run(ctx context.Context) error {
	defer lowerThreadPriority()()
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.Pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass ships what every destination has pending, once.
func (s *Shipper) Pass(ctx context.Context) {
	tasks, err := os.ReadDir(s.cfg.Store.cfg.Dir)
	if err != nil {
		return
	}
	for _, td := range tasks {
		if !td.IsDir() {
			continue
		}
		dir := filepath.Join(s.cfg.Store.cfg.Dir, td.Name())
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			name, ok := strings.CutSuffix(e.Name(), destSuffix)
			if !ok {
				continue
			}
			p := filepath.Join(dir, e.Name())
			s.mu.Lock()
			done := s.done[p]
			s.mu.Unlock()
			if done || ctx.Err() != nil {
				continue
			}
			if err := s.shipOne(ctx, dir, name); err != nil && ctx.Err() == nil {
				s.cfg.Log.Warn("awslogs: shipping failed; will retry", "dir", dir, "container", name, "err", err)
			}
		}
	}
}

// cursor is the shipped position of a container's log: the file (by inode) and the
// offset after the last shipped line. Done marks a log fully shipped after its task's
// containers were removed.
type cursor struct {
	Ino  uint64 `json:"ino"`
	Off  int64  `json:"off"`
	Done bool   `json:"done,omitempty"`
}

const cursorSuffix = ".shipped"

// logFile is one of a container's log files, open: what a pass reads is the file it
// identified, whatever rotation renames meanwhile.
type logFile struct {
	f    *os.File
	ino  uint64
	size int64
}

type pendingEvent struct {
	ts    int64
	first time.Time
	msg   strings.Builder
	end   cursor // position after the event's last line
}

// maxEventBytes splits a multiline event before it passes this size (Docker's awslogs
// bound: 256 KiB less the per-event overhead).
const maxEventBytes = 262144 - 26

func (s *Shipper) shipOne(ctx context.Context, dir, container string) error {
	destPath := filepath.Join(dir, container+destSuffix)
	raw, err := os.ReadFile(destPath)
	if err != nil {
		return err
	}
	var d Destination
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	curPath := filepath.Join(dir, container+cursorSuffix)
	var cur cursor
	if b, err := os.ReadFile(curPath); err == nil {
		_ = json.Unmarshal(b, &cur)
	}
	if cur.Done {
		s.markDone(destPath)
		return nil
	}
	base := filepath.Join(dir, container+".log")
	_, removedErr := os.Stat(filepath.Join(dir, removedMarker))
	final := removedErr == nil && !s.cfg.Store.isActive(base)

	files := openLogFiles(base, s.cfg.Store.cfg.MaxFiles)
	defer func() {
		for _, f := range files {
			f.f.Close()
		}
	}()
	if len(files) == 0 {
		return nil
	}
	start := -1
	for i, f := range files {
		if f.ino == cur.Ino {
			start = i
		}
	}
	if start < 0 {
		if cur.Ino != 0 || cur.Off != 0 {
			s.addDropped(-1) // rotated away before it was shipped
			s.cfg.Log.Warn("awslogs: output rotated away before it was shipped", "dir", dir, "container", container)
		}
		start, cur.Off = 0, 0
	}
	if cur.Off > files[start].size {
		cur.Off = 0 // truncated or replaced
	}
	// Non-blocking: keep at most MaxBufferBytes of unshipped output, dropping the oldest.
	if !d.Blocking && d.MaxBufferBytes > 0 {
		backlog := files[start].size - cur.Off
		for _, f := range files[start+1:] {
			backlog += f.size
		}
		for backlog > d.MaxBufferBytes {
			excess := backlog - d.MaxBufferBytes
			rest := files[start].size - cur.Off
			if excess >= rest && start < len(files)-1 {
				backlog -= rest
				s.addDropped(rest)
				start, cur.Off = start+1, 0
				continue
			}
			s.addDropped(excess)
			cur.Off += excess
			backlog -= excess
			cur.Off = alignLine(files[start].f, cur.Off)
			break
		}
	}

	var match *regexp.Regexp
	if d.MultilinePattern != "" {
		match, err = regexp.Compile(d.MultilinePattern)
		if err != nil {
			return err
		}
	}
	var events []*pendingEvent
	lastTS := int64(0)
	for i := start; i < len(files); i++ {
		off := int64(0)
		if i == start {
			off = cur.Off
		}
		err := readLines(files[i].f, off, func(l Line, end int64) {
			ts := l.Time.UnixMilli()
			if ts < lastTS {
				ts = lastTS // stdout and stderr lines can be captured out of order
			}
			lastTS = ts
			pos := cursor{Ino: files[i].ino, Off: end}
			if n := len(events); n > 0 && match != nil && !match.MatchString(l.Text) && events[n-1].msg.Len()+1+len(l.Text) <= maxEventBytes {
				e := events[n-1]
				e.msg.WriteByte('\n')
				e.msg.WriteString(l.Text)
				e.end = pos
				return
			}
			e := &pendingEvent{ts: ts, first: l.Time, end: pos}
			e.msg.WriteString(l.Text)
			events = append(events, e)
		})
		if err != nil {
			return err
		}
	}
	// Hold the last multiline event a moment for its continuation lines.
	if n := len(events); n > 0 && match != nil && !final && time.Since(events[n-1].first) < s.cfg.HoldMultiline {
		events = events[:n-1]
	}
	if err := s.send(ctx, d, events, &cur, curPath); err != nil {
		return err
	}
	if final {
		last := files[len(files)-1]
		if len(events) == 0 || (cur.Ino == last.ino && cur.Off >= last.size) {
			cur.Done = true
			if err := writeCursor(curPath, cur); err != nil {
				return err
			}
			s.markDone(destPath)
		}
	}
	return nil
}

// send ships events in batches within PutLogEvents' limits, advancing and persisting
// the cursor after each stored batch.
func (s *Shipper) send(ctx context.Context, d Destination, events []*pendingEvent, cur *cursor, curPath string) error {
	const maxBatchBytes = 1_048_576
	const overhead = 26
	for len(events) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, size := 0, 0
		var batch []*agentv1.ShippedLogEvent
		for _, e := range events {
			m := e.msg.String()
			if n >= 10_000 || size+len(m)+overhead > maxBatchBytes || (n > 0 && e.ts-events[0].ts > int64(23*time.Hour/time.Millisecond)) {
				break
			}
			n++
			if m == "" {
				continue // CloudWatch Logs takes no empty messages; Docker's driver skips them too
			}
			size += len(m) + overhead
			batch = append(batch, &agentv1.ShippedLogEvent{Timestamp: e.ts, Message: m})
		}
		if len(batch) > 0 {
			if err := s.ship(ctx, d, batch); err != nil {
				return err
			}
		}
		*cur = events[n-1].end
		if err := writeCursor(curPath, *cur); err != nil {
			return err
		}
		s.mu.Lock()
		s.shipped += int64(len(batch))
		s.mu.Unlock()
		events = events[n:]
	}
	return nil
}

// ship sends one batch. A batch the store refuses for good (its group or stream gone
// without awslogs-create-group, an invalid batch) is dropped with a warning, as
// Docker's driver drops what CloudWatch Logs refuses; a missing stream is recreated
// first. Other errors are returned, to retry.
func (s *Shipper) ship(ctx context.Context, d Destination, batch []*agentv1.ShippedLogEvent) error {
	// A batch in flight finishes (and its cursor is written) even when the agent is
	// shutting down, so a restart does not ship it twice.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req := &agentv1.ShipLogsRequest{Region: d.Region, LogGroup: d.Group, LogStream: d.Stream, Events: batch}
	_, err := s.cfg.Client.ShipLogs(ctx, connect.NewRequest(req))
	if connect.CodeOf(err) == connect.CodeNotFound {
		_, eerr := s.cfg.Client.EnsureLogStream(ctx, connect.NewRequest(&agentv1.EnsureLogStreamRequest{Region: d.Region, LogGroup: d.Group, LogStream: d.Stream, CreateGroup: d.CreateGroup}))
		if eerr == nil {
			_, err = s.cfg.Client.ShipLogs(ctx, connect.NewRequest(req))
		}
	}
	switch connect.CodeOf(err) {
	case connect.CodeNotFound, connect.CodeInvalidArgument:
		group, stream := d.Group, d.Stream
		if d.Redacted {
			group, stream = "(from secretOptions)", "(from secretOptions)"
		}
		s.cfg.Log.Warn("awslogs: batch refused; dropped", "group", group, "stream", stream, "events", len(batch), "err", err)
		return nil
	}
	return err
}

func (s *Shipper) markDone(p string) {
	s.mu.Lock()
	s.done[p] = true
	s.mu.Unlock()
}

func (s *Shipper) addDropped(n int64) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.dropped += n
	s.mu.Unlock()
}

func writeCursor(p string, c cursor) error {
	b, _ := json.Marshal(c)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// alignLine returns the offset after the first newline at or after off (the start of
// the next whole line).
func alignLine(f *os.File, off int64) int64 {
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return off
	}
	r := bufio.NewReader(f)
	b, err := r.ReadBytes('\n')
	if err != nil {
		return off
	}
	return off + int64(len(b))
}

// openLogFiles opens a container's log files, oldest first: base.N … base.1, base (N =
// maxFiles-1), each once (by inode), with the inode and size of what was opened; it
// skips a file it cannot open or stat. A listing by path and reads by path later read
// whatever file a rotation had renamed into the path, from the other file's offset, so
// the files are opened, and read from what was opened.
//
// The listing's order is its age order only if no rotation completed while it was
// taken: after two rotations between two opens, base.1 holds a file newer than the one
// already opened from base, and the two were read in the wrong order (lines shipped out
// of order, then again from the older file's cursor). A rotation renames the file of
// every path (MaxFiles 1 truncates base instead, which keeps the order), so a listing
// whose newest path still holds the file it opened is in order; one that is not is
// taken again. After openAttempts listings it opens the files oldest first instead: that
// order is never wrong, but a rotation meanwhile makes it miss a file (a writer rotating
// faster than a listing can open its files).
func openLogFiles(base string, maxFiles int) []logFile {
	for attempt := 1; attempt < openAttempts; attempt++ {
		files, inOrder := openLogFilesOnce(base, maxFiles)
		if inOrder {
			return files
		}
		for _, f := range files {
			f.f.Close()
		}
	}
	return openLogFilesOldestFirst(base, maxFiles)
}

// openAttempts bounds openLogFiles' listings of one container's files in one pass.
const openAttempts = 10

// afterOpen, when set (tests that do not run in parallel), is called after each file a
// listing opened, with its path.
var afterOpen func(path string)

// openLogFilesOnce is one listing of openLogFiles, newest path first; inOrder is false
// when a rotation completed while it was taken (the newest path opened holds another
// file now, or none).
func openLogFilesOnce(base string, maxFiles int) (files []logFile, inOrder bool) {
	seen := map[uint64]bool{}
	newest := ""
	for i := 0; i < maxFiles; i++ {
		p := logPath(base, i)
		if lf, ok := openLogFile(p, seen); ok {
			if newest == "" {
				newest = p
			}
			files = append(files, lf)
		}
	}
	slices.Reverse(files)
	if newest == "" {
		return files, true
	}
	return files, inode(newest) == files[len(files)-1].ino
}

// openLogFilesOldestFirst lists base.N … base in that order: files only move to higher
// numbers, so each file opened is newer than the ones before it.
func openLogFilesOldestFirst(base string, maxFiles int) []logFile {
	var files []logFile
	seen := map[uint64]bool{}
	for i := maxFiles - 1; i >= 0; i-- {
		if lf, ok := openLogFile(logPath(base, i), seen); ok {
			files = append(files, lf)
		}
	}
	return files
}

// logPath is the path of a container's log file i: base for 0, else base.i.
func logPath(base string, i int) string {
	if i == 0 {
		return base
	}
	return base + "." + strconv.Itoa(i)
}

// openLogFile opens p unless it is gone or unreadable, or holds a file in seen (by inode,
// which it adds).
func openLogFile(p string, seen map[uint64]bool) (logFile, bool) {
	f, err := os.Open(p)
	if err != nil {
		return logFile{}, false // gone (rotated away), or unreadable: skipped, as a failed stat was
	}
	if afterOpen != nil {
		afterOpen(p)
	}
	if fi, err := f.Stat(); err == nil && !seen[statIno(fi)] {
		seen[statIno(fi)] = true
		return logFile{f: f, ino: statIno(fi), size: fi.Size()}, true
	}
	f.Close()
	return logFile{}, false
}

// readLines calls fn with each complete line of f from off on and the offset after it.
func readLines(f *os.File, off int64, fn func(Line, int64)) error {
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(f, 256<<10)
	for {
		b, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: read the rest of it.
			rest, rerr := r.ReadBytes('\n')
			b, err = append(append([]byte(nil), b...), rest...), rerr
		}
		if err != nil {
			return nil // a partial last line is read next time
		}
		off += int64(len(b))
		l, ok := parseLine(b)
		if !ok {
			continue
		}
		fn(l, off)
	}
}

// parseLine decodes one line of a log file. Lines are written by json.Marshal of Line,
// so the common case ({"s":"…","t":"…","l":"…"} with nothing escaped in the text) is
// sliced out directly — the shipper's main cost otherwise; anything else goes through
// encoding/json.
func parseLine(b []byte) (Line, bool) {
	b = bytes.TrimSuffix(b, []byte("\n"))
	rest, ok := bytes.CutPrefix(b, []byte(`{"s":"`))
	if ok && bytes.HasSuffix(rest, []byte(`"}`)) {
		if i := bytes.IndexByte(rest, '"'); i > 0 {
			stream := rest[:i]
			if r, ok := bytes.CutPrefix(rest[i+1:], []byte(`,"t":"`)); ok {
				if j := bytes.IndexByte(r, '"'); j > 0 {
					ts, err := time.Parse(time.RFC3339Nano, string(r[:j]))
					if text, ok := bytes.CutPrefix(r[j+1:], []byte(`,"l":"`)); ok && err == nil {
						text = text[:len(text)-2]
						if bytes.IndexByte(text, '\\') < 0 && bytes.IndexByte(text, '"') < 0 {
							return Line{Stream: string(stream), Time: ts, Text: string(text)}, true
						}
					}
				}
			}
		}
	}
	var l Line
	if json.Unmarshal(b, &l) != nil {
		return l, false
	}
	return l, true
}
