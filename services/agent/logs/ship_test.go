package logs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
)

// fakePlane records shipped batches; fail makes ShipLogs fail with Unavailable.
type fakePlane struct {
	mu      sync.Mutex
	streams map[string]bool
	events  map[string][]string
	fail    bool
}

func (f *fakePlane) EnsureLogStream(_ context.Context, r *connect.Request[agentv1.EnsureLogStreamRequest]) (*connect.Response[agentv1.EnsureLogStreamResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams[r.Msg.GetLogGroup()+"|"+r.Msg.GetLogStream()] = true
	return connect.NewResponse(&agentv1.EnsureLogStreamResponse{}), nil
}

func (f *fakePlane) ShipLogs(_ context.Context, r *connect.Request[agentv1.ShipLogsRequest]) (*connect.Response[agentv1.ShipLogsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("down"))
	}
	k := r.Msg.GetLogGroup() + "|" + r.Msg.GetLogStream()
	if !f.streams[k] {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("ResourceNotFoundException: The specified log stream does not exist."))
	}
	for i, e := range r.Msg.GetEvents() {
		if i > 0 && e.GetTimestamp() < r.Msg.GetEvents()[i-1].GetTimestamp() {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("out of order"))
		}
		f.events[k] = append(f.events[k], e.GetMessage())
	}
	return connect.NewResponse(&agentv1.ShipLogsResponse{TooNewStartIndex: -1, TooOldEndIndex: -1, ExpiredEndIndex: -1}), nil
}

func (f *fakePlane) got(k string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events[k]...)
}

const taskARN = "arn:aws:ecs:us-east-1:123456789012:task/default/abc"

func TestShipperResumesAfterRestartAndOutage(t *testing.T) {
	ctx := context.Background()
	st, err := NewStore(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	plane := &fakePlane{streams: map[string]bool{}, events: map[string][]string{}}
	d, err := ParseAWSLogs(map[string]string{"awslogs-group": "/ecs/app", "awslogs-stream-prefix": "web"}, taskARN, "app", "ctr-id")
	if err != nil || d.Stream != "web/app/abc" || d.Blocking || d.MaxBufferBytes != DefaultMaxBufferBytes {
		t.Fatalf("destination = %+v, %v", d, err)
	}
	if err := st.SetDestination(taskARN, "app", d); err != nil {
		t.Fatal(err)
	}
	out, errw, closeFn, err := st.Open(taskARN, "app")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(out, "one")
	fmt.Fprintln(errw, "two")
	sh := NewShipper(ShipperConfig{Store: st, Client: plane})
	sh.Pass(ctx) // stream missing: recreated, then shipped
	if got := strings.Join(plane.got("/ecs/app|web/app/abc"), ","); got != "one,two" {
		t.Fatalf("shipped %q", got)
	}
	// The control plane is down: nothing is lost, nothing shipped twice.
	plane.fail = true
	fmt.Fprintln(out, "three")
	sh.Pass(ctx)
	plane.fail = false
	// A new shipper (agent restart) resumes from the cursor on disk.
	sh2 := NewShipper(ShipperConfig{Store: st, Client: plane})
	fmt.Fprintln(out, "") // empty lines are not events
	fmt.Fprintln(out, "four")
	sh2.Pass(ctx)
	if got := strings.Join(plane.got("/ecs/app|web/app/abc"), ","); got != "one,two,three,four" {
		t.Fatalf("after restart shipped %q", got)
	}
	// Removed and fully shipped: the destination is done.
	closeFn()
	if err := st.MarkRemoved(taskARN); err != nil {
		t.Fatal(err)
	}
	sh2.Pass(ctx)
	sh2.mu.Lock()
	done := len(sh2.done)
	sh2.mu.Unlock()
	if done != 1 {
		t.Fatalf("done = %d, want 1", done)
	}
}

func TestShipperMultilineAndNonBlockingDrop(t *testing.T) {
	ctx := context.Background()
	st, err := NewStore(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	plane := &fakePlane{streams: map[string]bool{}, events: map[string][]string{}}
	d, err := ParseAWSLogs(map[string]string{"awslogs-group": "g", "awslogs-datetime-format": "%Y-%m-%d %H:%M:%S"}, taskARN, "app", "ctr-id")
	if err != nil || d.Stream != "ctr-id" {
		t.Fatalf("destination = %+v, %v", d, err)
	}
	must(t, st.SetDestination(taskARN, "app", d))
	out, _, closeFn, err := st.Open(taskARN, "app")
	must(t, err)
	fmt.Fprint(out, "2026-12-01 10:00:00 panic: boom\n\tat main.go:1\n\tat main.go:2\n2026-12-01 10:00:01 next\n")
	sh := NewShipper(ShipperConfig{Store: st, Client: plane, HoldMultiline: time.Hour})
	sh.Pass(ctx)
	// The last event is held for its continuation lines.
	if got := plane.got("g|ctr-id"); len(got) != 1 || got[0] != "2026-12-01 10:00:00 panic: boom\n\tat main.go:1\n\tat main.go:2" {
		t.Fatalf("multiline shipped %q", got)
	}
	closeFn()
	must(t, st.MarkRemoved(taskARN))
	sh.Pass(ctx)
	if got := plane.got("g|ctr-id"); len(got) != 2 || got[1] != "2026-12-01 10:00:01 next" {
		t.Fatalf("after close shipped %q", got)
	}

	// Non-blocking with a 1 KiB buffer: with the plane down, only the newest output is
	// kept.
	arn2 := taskARN + "2"
	d2, err := ParseAWSLogs(map[string]string{"awslogs-group": "g", "awslogs-stream-prefix": "p", "mode": "non-blocking", "max-buffer-size": "1k"}, arn2, "app", "x")
	must(t, err)
	must(t, st.SetDestination(arn2, "app", d2))
	out2, _, close2, err := st.Open(arn2, "app")
	must(t, err)
	defer close2()
	for i := range 200 {
		fmt.Fprintf(out2, "line %03d\n", i)
	}
	sh.Pass(ctx)
	got := plane.got("g|p/app/abc2")
	if len(got) == 0 || len(got) > 30 || got[len(got)-1] != "line 199" {
		t.Fatalf("non-blocking shipped %d lines: %q", len(got), got)
	}
	if _, dropped := sh.Stats(); dropped == 0 {
		t.Fatal("no bytes counted as dropped")
	}
}

func TestParseAWSLogsRefuses(t *testing.T) {
	for _, opts := range []map[string]string{
		{},
		{"awslogs-group": "g", "mode": "x"},
		{"awslogs-group": "g", "max-buffer-size": "x"},
		{"awslogs-group": "g", "awslogs-create-group": "maybe"},
		{"awslogs-group": "g", "awslogs-multiline-pattern": "("},
		{"awslogs-group": "g", "awslogs-multiline-pattern": "x", "awslogs-datetime-format": "%Y"},
	} {
		if _, err := ParseAWSLogs(opts, taskARN, "c", "id"); err == nil {
			t.Errorf("%v accepted", opts)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestParseLine(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	for _, text := range []string{"plain", "", `with "quotes" and \ backslash`, "<html>&", "tab\there", "ünï"} {
		b, err := json.Marshal(Line{Stream: "stderr", Time: now, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		l, ok := parseLine(append(b, '\n'))
		if !ok || l.Text != text || l.Stream != "stderr" || !l.Time.Equal(now) {
			t.Errorf("%q → %+v %v", text, l, ok)
		}
	}
	if _, ok := parseLine([]byte("not json\n")); ok {
		t.Error("garbage parsed")
	}
}

// TestShipperAcrossRotations: output written while the shipper runs, rotating its files
// many times a pass, is shipped whole, in order and once, when the rotation keeps every
// file (blocking mode promises to drop only what rotation removed). A pass that listed
// the files and then read one by its path after a rotation renamed another file into
// that path read the wrong file from the cursor's offset: lines were lost (agent's
// BenchmarkAWSLogsShipping lost 73 to 5,607 of 100,000).
func TestShipperAcrossRotations(t *testing.T) {
	ctx := context.Background()
	st, err := NewStore(Config{Dir: t.TempDir(), MaxFileBytes: 16 << 10, MaxFiles: 400})
	if err != nil {
		t.Fatal(err)
	}
	plane := &fakePlane{streams: map[string]bool{}, events: map[string][]string{}}
	d, err := ParseAWSLogs(map[string]string{"awslogs-group": "/ecs/rot", "awslogs-stream-prefix": "r", "mode": "blocking"}, taskARN, "app", "ctr-id")
	must(t, err)
	must(t, st.SetDestination(taskARN, "app", d))
	out, _, closeFn, err := st.Open(taskARN, "app")
	must(t, err)
	const lines = 30_000
	written := make(chan struct{})
	go func() {
		defer close(written)
		for i := range lines {
			fmt.Fprintf(out, "line %06d %s\n", i, strings.Repeat("x", 40))
		}
	}()
	sh := NewShipper(ShipperConfig{Store: st, Client: plane})
	for running := true; running; {
		select {
		case <-written:
			running = false
		default:
		}
		sh.Pass(ctx)
	}
	must(t, closeFn())
	must(t, st.MarkRemoved(taskARN))
	sh.Pass(ctx)
	got := plane.got("/ecs/rot|r/app/abc")
	if len(got) != lines {
		t.Errorf("shipped %d lines of %d", len(got), lines)
	}
	for i, m := range got {
		if want := fmt.Sprintf("line %06d ", i); !strings.HasPrefix(m, want) {
			t.Fatalf("event %d is %.20q, want it to start %q (lost or repeated lines)", i, m, want)
		}
	}
}

// TestOpenLogFilesRotatedTwiceWhileListing: two rotations between the listing's first
// open and its second put a newer file at base.1 than the one opened from base; the
// files must still come back oldest first (they were read newest-before-older, which
// shipped lines out of order and then again: TestShipperAcrossRotations on a busy
// machine shipped 30,147 lines of 30,000). When every listing is disturbed so, the
// files still come back in age order (some may be missed).
func TestOpenLogFilesRotatedTwiceWhileListing(t *testing.T) {
	const maxFiles = 6
	for _, tc := range []struct {
		name    string
		times   int // listings whose first open is followed by two rotations
		exactly []string
	}{
		{"once", 1, []string{"0", "1", "2", "3", "4"}},
		{"every listing", openAttempts * 2, nil},
	} {
		base := filepath.Join(t.TempDir(), "app.log")
		next := 0
		// rotate does what fileWriter.rotate does, then writes the new current file's
		// content: its sequence number.
		rotate := func() {
			_ = os.Remove(base + "." + strconv.Itoa(maxFiles-1))
			for i := maxFiles - 2; i >= 1; i-- {
				_ = os.Rename(base+"."+strconv.Itoa(i), base+"."+strconv.Itoa(i+1))
			}
			if next > 0 {
				must(t, os.Rename(base, base+".1"))
			}
			must(t, os.WriteFile(base, []byte(strconv.Itoa(next)), 0o600))
			next++
		}
		for range 3 {
			rotate()
		}
		left := tc.times
		afterOpen = func(p string) {
			if p == base && left > 0 {
				left--
				rotate()
				rotate()
			}
		}
		t.Cleanup(func() { afterOpen = nil })

		files := openLogFiles(base, maxFiles)
		afterOpen = nil
		var order []int
		for _, f := range files {
			b, err := io.ReadAll(f.f)
			must(t, err)
			n, err := strconv.Atoi(string(b))
			must(t, err)
			order = append(order, n)
			f.f.Close()
		}
		if left == tc.times {
			t.Fatalf("%s: the listing never opened base", tc.name)
		}
		if !slices.IsSorted(order) || len(order) == 0 {
			t.Errorf("%s: files read in the order %v, want oldest first", tc.name, order)
		}
		if tc.exactly != nil && fmt.Sprint(order) != fmt.Sprint(tc.exactly) {
			t.Errorf("%s: files read %v, want %v", tc.name, order, tc.exactly)
		}
	}
}

// TestFollowWhileListingsAreDisturbed: a follow whose listings rotations keep disturbing
// sends every line once, in order. The follow used openLogFiles, whose last listing
// (oldest path first, after nine disturbed ones) may miss a file: missing the one the
// follow was reading, it read the older files again (L00 L01 L02 L00 L01 L03 …). A
// follow now takes one listing a poll, newest path first, and lists again at the next
// poll when a rotation disturbed it.
func TestFollowWhileListingsAreDisturbed(t *testing.T) {
	s, err := NewStore(Config{Dir: t.TempDir(), MaxFileBytes: 10, MaxFiles: 30, FollowPoll: 10 * time.Millisecond})
	must(t, err)
	out, _, closeFn, err := s.Open(taskARN, "web")
	must(t, err)
	var wmu sync.Mutex
	n := 0
	write := func() {
		wmu.Lock()
		defer wmu.Unlock()
		fmt.Fprintf(out, "L%02d\n", n)
		n++
	}
	for range 3 {
		write()
	}
	base := s.path(taskARN, "web")
	// Armed, the hook writes (and so rotates) after the first openAttempts-1 opens of
	// base, then once between two opens of an oldest-first listing: what made the
	// fallback listing miss the file being followed.
	var armed atomic.Bool
	baseWrites, prev, fallbackWrote := 0, "", false
	afterOpen = func(p string) {
		if !armed.Load() {
			return
		}
		defer func() { prev = p }()
		if p == base && baseWrites < openAttempts-1 {
			baseWrites++
			write()
			return
		}
		if baseWrites == openAttempts-1 && !fallbackWrote && p == base+".11" && prev == base+".12" {
			fallbackWrote = true
			write()
		}
	}
	t.Cleanup(func() { afterOpen = nil })

	var mu sync.Mutex
	var got []string
	done := make(chan error, 1)
	go func() {
		done <- s.Read(context.Background(), ReadRequest{TaskARN: taskARN, Container: "web", Follow: true}, func(l []Line) error {
			mu.Lock()
			defer mu.Unlock()
			for _, x := range l {
				got = append(got, x.Text)
			}
			return nil
		})
	}()
	received := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	for deadline := time.Now().Add(10 * time.Second); received() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the follow sent nothing")
		}
	}
	armed.Store(true)
	write()
	time.Sleep(200 * time.Millisecond)
	armed.Store(false)
	must(t, closeFn())
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end after the writer closed")
	}
	wmu.Lock()
	total := n
	wmu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != total {
		t.Errorf("followed %d lines of %d: %v", len(got), total, got)
	}
	for i, m := range got {
		if want := fmt.Sprintf("L%02d", i); m != want {
			t.Fatalf("line %d is %q, want %q (lost or repeated lines): %v", i, m, want, got)
		}
	}
}
