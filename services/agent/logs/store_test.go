package logs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/services/agent/logs"
)

const arn = "arn:aws:ecs:us-east-1:000000000000:task/c/abc"

func newStore(t *testing.T, cfg logs.Config) *logs.Store {
	t.Helper()
	cfg.Dir = t.TempDir()
	s, err := logs.NewStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readAll(t *testing.T, s *logs.Store, req logs.ReadRequest) []logs.Line {
	t.Helper()
	var out []logs.Line
	if err := s.Read(t.Context(), req, func(l []logs.Line) error { out = append(out, l...); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func textsOf(lines []logs.Line) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l.Stream+":"+l.Text)
	}
	return out
}

func TestLinesStreamsTailAndSince(t *testing.T) {
	t.Parallel()
	s := newStore(t, logs.Config{})
	out, errw, closeFn, err := s.Open(arn, "web")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(out, "one\ntw")
	fmt.Fprint(errw, "oops\n")
	fmt.Fprint(out, "o\nthree")
	mid := time.Now()
	time.Sleep(5 * time.Millisecond)
	fmt.Fprint(out, "\nfour\n")
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}
	got := textsOf(readAll(t, s, logs.ReadRequest{TaskARN: arn, Container: "web"}))
	want := []string{"stdout:one", "stderr:oops", "stdout:two", "stdout:three", "stdout:four"}
	if !slices.Equal(got, want) {
		t.Errorf("lines = %q, want %q", got, want)
	}
	if got := textsOf(readAll(t, s, logs.ReadRequest{TaskARN: arn, Tail: 2})); !slices.Equal(got, want[3:]) {
		t.Errorf("tail 2 = %q", got)
	}
	if got := textsOf(readAll(t, s, logs.ReadRequest{TaskARN: arn, Since: mid})); !slices.Equal(got, want[3:]) {
		t.Errorf("since = %q", got)
	}
	if err := s.Read(t.Context(), logs.ReadRequest{TaskARN: arn, Container: "nope"}, func([]logs.Line) error { return nil }); err == nil {
		t.Error("reading an unknown container succeeded")
	}
}

// TestReadChecksTheARNsRegion: logs are kept per task id, but a task ARN of another
// region, partition or account with the same id names another task (the trial's
// `berth logs` of an eu-west-1 ARN printed the us-east-1 task's output): Read answers
// ErrNoLogs for it, and still serves the task's own ARN and its bare id.
func TestReadChecksTheARNsRegion(t *testing.T) {
	t.Parallel()
	s := newStore(t, logs.Config{})
	out, _, closeFn, err := s.Open(arn, "web")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(out, "hello\n")
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{
		"arn:aws:ecs:eu-west-1:000000000000:task/c/abc",
		"arn:aws-cn:ecs:us-east-1:000000000000:task/c/abc",
		"arn:aws:ecs:us-east-1:111111111111:task/abc",
	} {
		err := s.Read(t.Context(), logs.ReadRequest{TaskARN: other}, func([]logs.Line) error { return nil })
		if !errors.Is(err, logs.ErrNoLogs) {
			t.Errorf("Read(%s) = %v, want ErrNoLogs", other, err)
		}
	}
	for _, same := range []string{arn, "arn:aws:ecs:us-east-1:000000000000:task/abc", "abc"} {
		if got := textsOf(readAll(t, s, logs.ReadRequest{TaskARN: same})); !slices.Equal(got, []string{"stdout:hello"}) {
			t.Errorf("Read(%s) = %q", same, got)
		}
	}
}

func TestRotationKeepsNewest(t *testing.T) {
	t.Parallel()
	s := newStore(t, logs.Config{MaxFileBytes: 1024, MaxFiles: 2})
	out, _, closeFn, err := s.Open(arn, "web")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		fmt.Fprintf(out, "line %03d\n", i)
	}
	closeFn()
	lines := readAll(t, s, logs.ReadRequest{TaskARN: arn})
	if len(lines) == 0 || len(lines) >= 200 {
		t.Fatalf("%d lines kept, want some but not all 200", len(lines))
	}
	if last := lines[len(lines)-1].Text; last != "line 199" {
		t.Errorf("last line %q", last)
	}
	for i := 1; i < len(lines); i++ {
		if lines[i].Text <= lines[i-1].Text {
			t.Fatalf("lines out of order at %d: %q after %q", i, lines[i].Text, lines[i-1].Text)
		}
	}
}

func TestFollowUntilClosed(t *testing.T) {
	t.Parallel()
	s := newStore(t, logs.Config{FollowPoll: 10 * time.Millisecond})
	out, _, closeFn, err := s.Open(arn, "web")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(out, "before")
	var mu sync.Mutex
	var got []string
	done := make(chan error, 1)
	go func() {
		done <- s.Read(context.Background(), logs.ReadRequest{TaskARN: arn, Container: "web", Follow: true}, func(l []logs.Line) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, textsOf(l)...)
			return nil
		})
	}()
	time.Sleep(50 * time.Millisecond)
	fmt.Fprintln(out, "after")
	time.Sleep(50 * time.Millisecond)
	closeFn()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not end after the writer closed")
	}
	if !slices.Equal(got, []string{"stdout:before", "stdout:after"}) {
		t.Errorf("followed %q", got)
	}
}

func TestSweepAfterRetention(t *testing.T) {
	t.Parallel()
	s := newStore(t, logs.Config{Retention: time.Hour})
	out, _, closeFn, _ := s.Open(arn, "web")
	fmt.Fprintln(out, "x")
	closeFn()
	if n, _ := s.Sweep(time.Now().Add(2 * time.Hour)); n != 0 {
		t.Fatalf("swept %d tasks whose containers were not removed", n)
	}
	if err := s.MarkRemoved(arn); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Sweep(time.Now()); n != 0 {
		t.Fatalf("swept %d tasks within retention", n)
	}
	if len(readAll(t, s, logs.ReadRequest{TaskARN: arn})) != 1 {
		t.Fatal("logs gone within retention")
	}
	if n, _ := s.Sweep(time.Now().Add(2 * time.Hour)); n != 1 {
		t.Fatalf("swept %d tasks after retention, want 1", n)
	}
}

// TestFollowAcrossRotations: a follow while the writer rotates its files many times
// between two polls (every rotated file kept) sends every line once, in order. It read
// the newest path after each poll: a rotation in between skipped the rest of the old
// file and, read by path, mixed one file's offset with another's.
func TestFollowAcrossRotations(t *testing.T) {
	t.Parallel()
	s := newStore(t, logs.Config{MaxFileBytes: 16 << 10, MaxFiles: 400, FollowPoll: 20 * time.Millisecond})
	out, _, closeFn, err := s.Open(arn, "web")
	if err != nil {
		t.Fatal(err)
	}
	const lines = 20_000
	fmt.Fprintf(out, "line %06d %s\n", 0, strings.Repeat("x", 40))
	var mu sync.Mutex
	var got []string
	done := make(chan error, 1)
	go func() {
		done <- s.Read(context.Background(), logs.ReadRequest{TaskARN: arn, Container: "web", Follow: true}, func(l []logs.Line) error {
			mu.Lock()
			defer mu.Unlock()
			for _, x := range l {
				got = append(got, x.Text)
			}
			return nil
		})
	}()
	for i := 1; i < lines; i++ {
		fmt.Fprintf(out, "line %06d %s\n", i, strings.Repeat("x", 40))
		if i%2000 == 0 {
			time.Sleep(5 * time.Millisecond) // let some polls fall between rotations
		}
	}
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("follow did not end after the writer closed")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != lines {
		t.Errorf("followed %d lines of %d", len(got), lines)
	}
	for i, m := range got {
		if want := fmt.Sprintf("line %06d ", i); !strings.HasPrefix(m, want) {
			t.Fatalf("line %d is %.20q, want it to start %q (lost or repeated lines)", i, m, want)
		}
	}
}
