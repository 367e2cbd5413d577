package logstore

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var sc = Scope{Account: "123456789012", Region: "us-east-1"}

func open(t testing.TB, now *time.Time) *Store {
	t.Helper()
	cfg := Config{Dir: t.TempDir(), NoSync: true}
	if now != nil {
		cfg.Now = func() time.Time { return *now }
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func wantType(t *testing.T, err error, typ string) {
	t.Helper()
	if !IsType(err, typ) {
		t.Fatalf("err = %v, want %s", err, typ)
	}
}

func TestGroupsAndStreams(t *testing.T) {
	s := open(t, nil)
	if err := s.CreateGroup(sc, "/ecs/web", map[string]string{"team": "a"}); err != nil {
		t.Fatal(err)
	}
	wantType(t, s.CreateGroup(sc, "/ecs/web", nil), ResourceAlreadyExists)
	wantType(t, s.CreateGroup(sc, "bad name", nil), InvalidParameter)
	wantType(t, s.CreateStream(sc, "/ecs/none", "s"), ResourceNotFound)
	wantType(t, s.CreateStream(sc, "/ecs/web", "a:b"), InvalidParameter)
	for i := range 5 {
		if err := s.CreateGroup(sc, fmt.Sprintf("/other/%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Another account sees nothing.
	if gs, _, _ := s.DescribeGroups(Scope{Account: "999999999999", Region: "us-east-1"}, DescribeGroupsInput{}); len(gs) != 0 {
		t.Fatalf("other account sees %v", gs)
	}
	var names []string
	tok := ""
	for {
		gs, next, err := s.DescribeGroups(sc, DescribeGroupsInput{Limit: 2, Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gs {
			names = append(names, g.Name)
		}
		if next == "" {
			break
		}
		tok = next
	}
	if got := strings.Join(names, ","); got != "/ecs/web,/other/0,/other/1,/other/2,/other/3,/other/4" {
		t.Fatalf("paged groups = %s", got)
	}
	gs, _, _ := s.DescribeGroups(sc, DescribeGroupsInput{Prefix: "/ecs"})
	if len(gs) != 1 || gs[0].ARN != "arn:aws:logs:us-east-1:123456789012:log-group:/ecs/web:*" || gs[0].Tags["team"] != "a" {
		t.Fatalf("prefix /ecs = %+v", gs)
	}
	if err := s.CreateStream(sc, "/ecs/web", "web/app/1"); err != nil {
		t.Fatal(err)
	}
	wantType(t, s.CreateStream(sc, "/ecs/web", "web/app/1"), ResourceAlreadyExists)
	wantType(t, s.EnsureStream(sc, "/ecs/missing", "x", false), ResourceNotFound)
	if err := s.EnsureStream(sc, "/ecs/auto", "x", true); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureStream(sc, "/ecs/auto", "x", false); err != nil {
		t.Fatal(err)
	}
	st, _, err := s.DescribeStreams(sc, DescribeStreamsInput{Group: "/ecs/web"})
	if err != nil || len(st) != 1 || st[0].Name != "web/app/1" {
		t.Fatalf("streams = %+v, %v", st, err)
	}
	_, _, err = s.DescribeStreams(sc, DescribeStreamsInput{Group: "/ecs/web", Prefix: "w", OrderByLastEventTime: true})
	wantType(t, err, InvalidParameter)
	if err := s.DeleteGroup(sc, "/ecs/web"); err != nil {
		t.Fatal(err)
	}
	wantType(t, s.DeleteGroup(sc, "/ecs/web"), ResourceNotFound)
}

func TestPutEventsRules(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := open(t, &now)
	must(t, s.CreateGroup(sc, "g", nil))
	must(t, s.CreateStream(sc, "g", "s"))
	ms := now.UnixMilli()
	_, err := s.PutEvents(sc, "g", "s", []InputEvent{{ms, "b"}, {ms - 1, "a"}})
	wantType(t, err, InvalidParameter)
	_, err = s.PutEvents(sc, "g", "nope", []InputEvent{{ms, "a"}})
	wantType(t, err, ResourceNotFound)
	_, err = s.PutEvents(sc, "g", "s", []InputEvent{{ms, strings.Repeat("x", MaxBatchBytes)}})
	wantType(t, err, InvalidParameter)
	rej, err := s.PutEvents(sc, "g", "s", []InputEvent{
		{ms - int64(15*24*time.Hour/time.Millisecond), "old"},
		{ms, "ok"},
		{ms + int64(3*time.Hour/time.Millisecond), "future"},
	})
	must(t, err)
	if rej.TooOldEndIndex != 0 || rej.TooNewStartIndex != 2 || rej.ExpiredEndIndex != -1 {
		t.Fatalf("rejected = %+v", rej)
	}
	must(t, s.PutRetention(sc, "g", 1))
	wantType(t, s.PutRetention(sc, "g", 2), InvalidParameter)
	rej, err = s.PutEvents(sc, "g", "s", []InputEvent{{ms - int64(2*24*time.Hour/time.Millisecond), "expired"}, {ms + 1, "ok2"}})
	must(t, err)
	if rej.ExpiredEndIndex != 0 {
		t.Fatalf("rejected = %+v", rej)
	}
	out, err := s.GetEvents(sc, GetEventsInput{Group: "g", Stream: "s", StartFromHead: true})
	must(t, err)
	if len(out.Events) != 2 || out.Events[0].Message != "ok" || out.Events[1].Message != "ok2" || out.Events[0].IngestionTime != ms {
		t.Fatalf("events = %+v", out.Events)
	}
}

func TestRetentionSweep(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := open(t, &now)
	must(t, s.CreateGroup(sc, "g", nil))
	must(t, s.CreateStream(sc, "g", "s"))
	day := int64(24 * time.Hour / time.Millisecond)
	ms := now.UnixMilli()
	for _, e := range []InputEvent{{ms - 3*day, "three days"}, {ms - 2*day, "two days"}, {ms, "now"}} {
		_, err := s.PutEvents(sc, "g", "s", []InputEvent{e})
		must(t, err)
	}
	must(t, s.PutRetention(sc, "g", 3))
	n, err := s.Sweep(now.Add(time.Hour))
	must(t, err)
	if n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	out, _ := s.GetEvents(sc, GetEventsInput{Group: "g", Stream: "s", StartFromHead: true})
	if len(out.Events) != 2 || out.Events[0].Message != "two days" {
		t.Fatalf("after sweep: %+v", out.Events)
	}
	st, _, _ := s.DescribeStreams(sc, DescribeStreamsInput{Group: "g"})
	if st[0].FirstEventTimestamp != ms-2*day || st[0].StoredBytes != int64(len("two days")+len("now")) {
		t.Fatalf("stream after sweep: %+v", st[0])
	}
}

func TestGetEventsTokens(t *testing.T) {
	s := open(t, nil)
	must(t, s.CreateGroup(sc, "g", nil))
	must(t, s.CreateStream(sc, "g", "s"))
	base := time.Now().UnixMilli() - 10_000
	var evs []InputEvent
	for i := range 25 {
		evs = append(evs, InputEvent{base + int64(i), fmt.Sprint("line ", i)})
	}
	_, err := s.PutEvents(sc, "g", "s", evs)
	must(t, err)
	// From the tail: the last 10, then backward.
	out, err := s.GetEvents(sc, GetEventsInput{Group: "g", Stream: "s", Limit: 10})
	must(t, err)
	if len(out.Events) != 10 || out.Events[0].Message != "line 15" || out.Events[9].Message != "line 24" {
		t.Fatalf("tail page = %v", msgs(out.Events))
	}
	back, err := s.GetEvents(sc, GetEventsInput{Group: "g", Stream: "s", Limit: 10, Token: out.NextBackwardToken})
	must(t, err)
	if back.Events[0].Message != "line 5" || back.Events[9].Message != "line 14" {
		t.Fatalf("backward page = %v", msgs(back.Events))
	}
	// At the end the forward token comes back unchanged; new events appear after it.
	fw, err := s.GetEvents(sc, GetEventsInput{Group: "g", Stream: "s", Token: out.NextForwardToken})
	must(t, err)
	if len(fw.Events) != 0 || fw.NextForwardToken != out.NextForwardToken {
		t.Fatalf("forward at end = %v %q vs %q", msgs(fw.Events), fw.NextForwardToken, out.NextForwardToken)
	}
	_, err = s.PutEvents(sc, "g", "s", []InputEvent{{base + 100, "new"}})
	must(t, err)
	fw, _ = s.GetEvents(sc, GetEventsInput{Group: "g", Stream: "s", Token: out.NextForwardToken})
	if len(fw.Events) != 1 || fw.Events[0].Message != "new" {
		t.Fatalf("forward after put = %v", msgs(fw.Events))
	}
	// Head with a time window.
	st, en := base+3, base+6
	head, _ := s.GetEvents(sc, GetEventsInput{Group: "g", Stream: "s", StartFromHead: true, Start: &st, End: &en})
	if strings.Join(msgs(head.Events), ",") != "line 3,line 4,line 5" {
		t.Fatalf("window = %v", msgs(head.Events))
	}
	_, err = s.GetEvents(sc, GetEventsInput{Group: "g", Stream: "s", Token: "garbage"})
	wantType(t, err, InvalidParameter)
}

func TestFilterEvents(t *testing.T) {
	s := open(t, nil)
	must(t, s.CreateGroup(sc, "g", nil))
	base := time.Now().UnixMilli() - 10_000
	for _, st := range []string{"a", "b"} {
		must(t, s.CreateStream(sc, "g", st))
		var evs []InputEvent
		for i := range 10 {
			evs = append(evs, InputEvent{base + int64(i), fmt.Sprintf("%s ERROR code=%d user logged in", st, i)})
		}
		_, err := s.PutEvents(sc, "g", st, evs)
		must(t, err)
	}
	all, err := s.FilterEvents(sc, FilterInput{Group: "g"})
	must(t, err)
	if len(all.Events) != 20 || all.NextToken != "" || all.Events[0].Stream != "a" || all.Events[1].Stream != "b" || all.Events[1].Timestamp != base {
		t.Fatalf("interleaved = %v", msgs(all.Events))
	}
	// Paging yields every event exactly once.
	seen := map[string]bool{}
	tok := ""
	for {
		p, err := s.FilterEvents(sc, FilterInput{Group: "g", Limit: 3, Token: tok})
		must(t, err)
		for _, e := range p.Events {
			if seen[e.ID] {
				t.Fatalf("event %s twice", e.ID)
			}
			seen[e.ID] = true
		}
		if p.NextToken == "" {
			break
		}
		tok = p.NextToken
	}
	if len(seen) != 20 {
		t.Fatalf("paged %d events, want 20", len(seen))
	}
	for pat, want := range map[string]int{
		`ERROR`:               1 * 20,
		`"code=3 user"`:       2,
		`ERROR code=3`:        2,
		`"logged out"`:        0,
		`?code=1 ?code=2`:     4,
		`ERROR -code=1 -b`:    9,
		`"a ERROR" "code=9"`:  1,
		``:                    20,
		`ERROR "user logged"`: 20,
		`error`:               0, // case-sensitive
	} {
		out, err := s.FilterEvents(sc, FilterInput{Group: "g", Pattern: pat})
		must(t, err)
		if len(out.Events) != want {
			t.Errorf("pattern %q matched %d, want %d", pat, len(out.Events), want)
		}
	}
	_, err = s.FilterEvents(sc, FilterInput{Group: "g", Pattern: `{ $.level = "x" }`})
	wantType(t, err, InvalidParameter)
	_, err = s.FilterEvents(sc, FilterInput{Group: "g", Streams: []string{"a"}, StreamPrefix: "a"})
	wantType(t, err, InvalidParameter)
	one, err := s.FilterEvents(sc, FilterInput{Group: "g", Streams: []string{"b"}})
	must(t, err)
	if len(one.Events) != 10 || one.Events[0].Stream != "b" {
		t.Fatalf("stream b = %v", msgs(one.Events))
	}
}

func TestReopenKeepsEvents(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	must(t, err)
	must(t, s.EnsureStream(sc, "g", "s", true))
	_, err = s.PutEvents(sc, "g", "s", []InputEvent{{time.Now().UnixMilli(), "kept"}})
	must(t, err)
	must(t, s.Close())
	if _, err := Open(Config{Dir: dir, Shards: 8}); err == nil {
		t.Fatal("reopened with another shard count")
	}
	s, err = Open(Config{Dir: dir})
	must(t, err)
	defer s.Close()
	out, err := s.GetEvents(sc, GetEventsInput{Group: "g", Stream: "s"})
	must(t, err)
	if len(out.Events) != 1 || out.Events[0].Message != "kept" {
		t.Fatalf("after reopen: %v", msgs(out.Events))
	}
}

// TestCallsAfterCloseFail: a call that reaches the store after Close (a request in
// flight while the scheduler stops) gets an error, not a panic; Close twice is harmless.
func TestCallsAfterCloseFail(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir()})
	must(t, err)
	must(t, s.EnsureStream(sc, "g", "s", true))
	must(t, s.Close())
	if _, err := s.PutEvents(sc, "g", "s", []InputEvent{{time.Now().UnixMilli(), "late"}}); err == nil {
		t.Error("PutEvents after Close succeeded")
	}
	if _, err := s.GetEvents(sc, GetEventsInput{Group: "g", Stream: "s"}); err == nil {
		t.Error("GetEvents after Close succeeded")
	}
	if _, _, err := s.DescribeGroups(sc, DescribeGroupsInput{}); err == nil {
		t.Error("DescribeGroups after Close succeeded")
	}
	if _, err := s.Sweep(time.Now()); err == nil {
		t.Error("Sweep after Close succeeded")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func msgs(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Message)
	}
	return out
}
