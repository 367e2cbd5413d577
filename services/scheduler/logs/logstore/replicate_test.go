package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

// pair opens two stores whose changes are copied to each other through Apply, as
// logpeers does over the network; fail makes the copy to b fail.
func pair(t *testing.T, fail *bool) (a, b *Store) {
	t.Helper()
	mk := func(tag uint16, other **Store, failing *bool) *Store {
		s, err := Open(Config{Dir: t.TempDir(), NoSync: true, SeqTag: tag, Replicate: func(op Op) error {
			if failing != nil && *failing {
				return errors.New("peer unreachable")
			}
			return (*other).Apply(op)
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a = mk(1, &b, fail)
	b = mk(2, &a, nil)
	return a, b
}

func messages(t *testing.T, s *Store, group, stream string) []string {
	t.Helper()
	out, err := s.GetEvents(sc, GetEventsInput{Group: group, Stream: stream, StartFromHead: true, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, e := range out.Events {
		msgs = append(msgs, e.Message)
	}
	return msgs
}

// TestReplicatedWrites: changes made through either store reach the other with the same
// keys (the same event ids and tokens), applying a change twice stores it once, writes to
// one stream through both replicas at the same millisecond never collide, and a change
// the other replica did not take answers ServiceUnavailable.
func TestReplicatedWrites(t *testing.T) {
	fail := false
	a, b := pair(t, &fail)
	if err := a.CreateGroup(sc, "/g", map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if err := b.EnsureStream(sc, "/g", "s", false); err != nil {
		t.Fatal(err)
	}
	ts := time.Now().UnixMilli()
	for i := range 5 {
		for _, s := range []*Store{a, b} {
			if _, err := s.PutEvents(sc, "/g", "s", []InputEvent{{Timestamp: ts, Message: fmt.Sprintf("m%d-%p", i, s)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ea, _ := a.GetEvents(sc, GetEventsInput{Group: "/g", Stream: "s", StartFromHead: true})
	eb, _ := b.GetEvents(sc, GetEventsInput{Group: "/g", Stream: "s", StartFromHead: true})
	if len(ea.Events) != 10 || len(eb.Events) != 10 {
		t.Fatalf("a has %d events, b %d; want 10 each", len(ea.Events), len(eb.Events))
	}
	for i := range ea.Events {
		if ea.Events[i].ID != eb.Events[i].ID || ea.Events[i].Message != eb.Events[i].Message {
			t.Fatalf("event %d differs: %+v vs %+v", i, ea.Events[i], eb.Events[i])
		}
	}
	if ea.NextForwardToken != eb.NextForwardToken {
		t.Errorf("tokens differ: %s vs %s", ea.NextForwardToken, eb.NextForwardToken)
	}
	// An op applied again changes nothing.
	op := Op{Kind: OpEvents, Account: sc.Account, Region: sc.Region, Group: "/g", Stream: "s"}
	for _, e := range ea.Events {
		op.Events = append(op.Events, KeyedEvent{Key: e.key, Value: append(make([]byte, 8), e.Message...)})
	}
	if err := b.Apply(op); err != nil {
		t.Fatal(err)
	}
	if got := messages(t, b, "/g", "s"); len(got) != 10 {
		t.Fatalf("re-applied op: %d events", len(got))
	}
	if g, _ := b.DescribeGroup(sc, "/g"); g.Tags["k"] != "v" {
		t.Errorf("tags not copied: %v", g.Tags)
	}
	if err := b.PutRetention(sc, "/g", 7); err != nil {
		t.Fatal(err)
	}
	if g, _ := a.DescribeGroup(sc, "/g"); g.RetentionInDays != 7 {
		t.Errorf("retention not copied: %v", g.RetentionInDays)
	}
	fail = true
	_, err := a.PutEvents(sc, "/g", "s", []InputEvent{{Timestamp: ts, Message: "unreplicated"}})
	wantType(t, err, ServiceUnavailable)
	fail = false
	if err := a.DeleteStream(sc, "/g", "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetEvents(sc, GetEventsInput{Group: "/g", Stream: "s"}); !IsType(err, ResourceNotFound) {
		t.Errorf("deleted stream still on b: %v", err)
	}
}

// TestMergeShard: a replica that missed writes (down, or a new disk) gets every group,
// stream and event from another replica's shard copies, once, and refuses reads while it
// is not ready.
func TestMergeShard(t *testing.T) {
	src := open(t, nil)
	dst := open(t, nil)
	ts := time.Now().UnixMilli()
	for g := range 6 {
		name := fmt.Sprintf("/g%d", g)
		if err := src.EnsureStream(sc, name, "s", true); err != nil {
			t.Fatal(err)
		}
		if err := src.TagGroup(sc, name, map[string]string{"n": name}); err != nil {
			t.Fatal(err)
		}
		if _, err := src.PutEvents(sc, name, "s", []InputEvent{{Timestamp: ts, Message: "a"}, {Timestamp: ts + 1, Message: "b"}}); err != nil {
			t.Fatal(err)
		}
	}
	// dst already has one of the events (it was live for it) and one of its own.
	if err := dst.EnsureStream(sc, "/g0", "s", true); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.PutEvents(sc, "/g0", "s", []InputEvent{{Timestamp: ts + 2, Message: "own"}}); err != nil {
		t.Fatal(err)
	}
	dst.SetReady("test")
	_, err := dst.GetEvents(sc, GetEventsInput{Group: "/g0", Stream: "s"})
	wantType(t, err, ServiceUnavailable)
	var added int64
	for round := range 2 { // the second round adds nothing
		for i := range src.Shards() {
			var buf bytes.Buffer
			if _, err := src.WriteShard(i, &buf); err != nil {
				t.Fatal(err)
			}
			n, err := dst.MergeFrom(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if round == 0 {
				added += n
			} else if n != 0 {
				t.Errorf("second merge added %d", n)
			}
		}
	}
	dst.SetReady("")
	if added != 12 {
		t.Errorf("merged %d events, want 12", added)
	}
	for g := range 6 {
		name := fmt.Sprintf("/g%d", g)
		want := "[a b]"
		if g == 0 {
			want = "[a b own]"
		}
		if got := fmt.Sprint(messages(t, dst, name, "s")); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
		if gr, _ := dst.DescribeGroup(sc, name); gr.Tags["n"] != name || gr.StoredBytes == 0 {
			t.Errorf("%s: group %+v", name, gr)
		}
	}
	// New events on dst get keys after the merged ones.
	if _, err := dst.PutEvents(sc, "/g1", "s", []InputEvent{{Timestamp: ts + 1, Message: "c"}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(messages(t, dst, "/g1", "s")); got != "[a b c]" {
		t.Errorf("after merge: %s", got)
	}
}
