package logstore

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// PutLogEvents limits, from the CloudWatch Logs API reference.
const (
	// MaxBatchBytes bounds a batch: the sum of its messages' UTF-8 bytes plus
	// EventOverhead per event.
	MaxBatchBytes = 1_048_576
	// EventOverhead is the bytes counted per event on top of its message.
	EventOverhead = 26
	// MaxBatchEvents bounds the number of events in a batch.
	MaxBatchEvents = 10_000
	// MaxEventBytes bounds one event's message.
	MaxEventBytes = 1 << 20
	// MaxFuture is how far ahead of now an event may be; later ones are rejected.
	MaxFuture = 2 * time.Hour
	// MaxPast is how far behind now an event may be; older ones are rejected.
	MaxPast = 14 * 24 * time.Hour
	// MaxSpan bounds the time between the first and last accepted event of a batch.
	MaxSpan = 24 * time.Hour
	// MaxReadBytes bounds the messages GetLogEvents and FilterLogEvents answer in one page.
	MaxReadBytes = 1 << 20
	// MaxReadEvents bounds the events of one read page (and is the default limit).
	MaxReadEvents = 10_000
)

// InputEvent is one event to put: Timestamp in milliseconds since the epoch.
type InputEvent struct {
	// Timestamp is when the event happened, in milliseconds since the epoch.
	Timestamp int64
	// Message is the event's text, at least one character.
	Message string
}

// Rejected says which events of a batch PutEvents did not store, as PutLogEvents'
// rejectedLogEventsInfo: indexes into the batch, -1 when none.
type Rejected struct {
	// TooNewStartIndex is the first event more than MaxFuture ahead; the rest of the
	// batch from it on was rejected.
	TooNewStartIndex int
	// TooOldEndIndex is the last event older than MaxPast.
	TooOldEndIndex int
	// ExpiredEndIndex is the last event older than the group's retention.
	ExpiredEndIndex int
}

// Any reports whether any event was rejected.
func (r Rejected) Any() bool {
	return r.TooNewStartIndex >= 0 || r.TooOldEndIndex >= 0 || r.ExpiredEndIndex >= 0
}

// PutEvents appends a batch to a stream under PutLogEvents' rules: at most
// MaxBatchEvents events and MaxBatchBytes, each message non-empty and at most
// MaxEventBytes, in chronological order (InvalidParameter otherwise); events too far
// in the future, older than 14 days or than the group's retention are skipped and
// reported in Rejected. A missing group or stream is ResourceNotFound.
func (s *Store) PutEvents(sc Scope, group, stream string, events []InputEvent) (Rejected, error) {
	var op *Op
	if s.cfg.Replicate != nil {
		op = &Op{Kind: OpEvents, Account: sc.Account, Region: sc.Region, Group: group, Stream: stream}
	}
	rej, err := s.putEvents(sc, group, stream, events, op)
	if err != nil || op == nil || len(op.Events) == 0 {
		return rej, err
	}
	return rej, s.replicate(*op)
}

func (s *Store) putEvents(sc Scope, group, stream string, events []InputEvent, op *Op) (Rejected, error) {
	rej := Rejected{TooNewStartIndex: -1, TooOldEndIndex: -1, ExpiredEndIndex: -1}
	if len(events) == 0 {
		return rej, errf(InvalidParameter, "1 validation error detected: Value '[]' at 'logEvents' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	if len(events) > MaxBatchEvents {
		return rej, errf(InvalidParameter, "1 validation error detected: Value at 'logEvents' failed to satisfy constraint: Member must have length less than or equal to %d", MaxBatchEvents)
	}
	size := 0
	for i, e := range events {
		if e.Message == "" {
			return rej, errf(InvalidParameter, "1 validation error detected: Value '' at 'logEvents.%d.member.message' failed to satisfy constraint: Member must have length greater than or equal to 1", i+1)
		}
		if len(e.Message) > MaxEventBytes {
			return rej, errf(InvalidParameter, "Log event too large: event %d is %d bytes; the maximum is %d.", i, len(e.Message), MaxEventBytes)
		}
		if i > 0 && e.Timestamp < events[i-1].Timestamp {
			return rej, errf(InvalidParameter, "Log events in a single PutLogEvents request must be in chronological order.")
		}
		size += len(e.Message) + EventOverhead
	}
	if size > MaxBatchBytes {
		return rej, errf(InvalidParameter, "Upload too large: %d bytes exceeds limit of %d", size, MaxBatchBytes)
	}
	now := s.cfg.Now()
	ingest := now.UnixMilli()
	err := s.shard(sc, group).Update(func(tx *bolt.Tx) error {
		g := tx.Bucket(bGroups).Bucket(groupKey(sc, group))
		if g == nil {
			return errGroupNotFound()
		}
		st := g.Bucket(bStreams).Bucket([]byte(stream))
		if st == nil {
			return errStreamNotFound()
		}
		var gm groupMeta
		var sm streamMeta
		if err := getJSON(g, &gm); err != nil {
			return err
		}
		if err := getJSON(st, &sm); err != nil {
			return err
		}
		tooNew := now.Add(MaxFuture).UnixMilli()
		tooOld := now.Add(-MaxPast).UnixMilli()
		expired := int64(-1 << 63)
		if gm.RetentionInDays > 0 {
			expired = now.Add(-time.Duration(gm.RetentionInDays) * 24 * time.Hour).UnixMilli()
		}
		lo, hi := 0, len(events)
		for i, e := range events {
			if e.Timestamp > tooNew {
				rej.TooNewStartIndex, hi = i, i
				break
			}
			if e.Timestamp < expired {
				rej.ExpiredEndIndex, lo = i, i+1
			} else if e.Timestamp < tooOld {
				rej.TooOldEndIndex, lo = i, i+1
			}
		}
		if lo >= hi {
			return nil
		}
		if time.Duration(events[hi-1].Timestamp-events[lo].Timestamp)*time.Millisecond > MaxSpan {
			return errf(InvalidParameter, "The batch of log events in a single PutLogEvents request cannot span more than 24 hours.")
		}
		ev := st.Bucket(bEvents)
		ev.FillPercent = 0.95 // appends are mostly in key order
		var added int64
		// bbolt keeps the slices given to Put until the commit: one arena holds them all.
		arena := make([]byte, 0, size+len(events)*(8-EventOverhead+16))
		for _, e := range events[lo:hi] {
			seq, err := ev.NextSequence()
			if err != nil {
				return err
			}
			seq = seq<<16 | uint64(s.cfg.SeqTag)
			k := len(arena)
			arena = append(arena, eventKey(e.Timestamp, seq)...)
			v := len(arena)
			arena = binary.BigEndian.AppendUint64(arena, uint64(ingest))
			arena = append(arena, e.Message...)
			if err := ev.Put(arena[k:v:v], arena[v:len(arena):len(arena)]); err != nil {
				return err
			}
			if op != nil {
				op.Events = append(op.Events, KeyedEvent{Key: arena[k:v:v], Value: arena[v:len(arena):len(arena)]})
			}
			added += int64(len(e.Message))
		}
		if sm.FirstEventTimestamp == 0 || events[lo].Timestamp < sm.FirstEventTimestamp {
			sm.FirstEventTimestamp = events[lo].Timestamp
		}
		sm.LastEventTimestamp = max(sm.LastEventTimestamp, events[hi-1].Timestamp)
		sm.LastIngestionTime = ingest
		sm.StoredBytes += added
		sm.Events += int64(hi - lo)
		gm.StoredBytes += added
		if err := putJSON(st, &sm); err != nil {
			return err
		}
		return putJSON(g, &gm)
	})
	if err != nil {
		return rej, err
	}
	s.notify()
	return rej, nil
}

// eventKey orders events by timestamp, then by arrival in the stream.
func eventKey(ts int64, seq uint64) []byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], uint64(ts)^(1<<63))
	binary.BigEndian.PutUint64(k[8:], seq)
	return k[:]
}

func keyTime(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[:8]) ^ (1 << 63)) }

// Event is one stored event as the read APIs answer it.
type Event struct {
	// Stream is the log stream the event is in (FilterLogEvents' logStreamName).
	Stream string
	// Timestamp and IngestionTime are milliseconds since the epoch.
	Timestamp, IngestionTime int64
	// Message is the event's text.
	Message string
	// ID is the event's id, unique in its group (FilterLogEvents' eventId).
	ID string

	key []byte
}

func eventOf(stream string, k, v []byte) Event {
	seq := binary.BigEndian.Uint64(k[8:])
	ts := keyTime(k)
	return Event{
		Stream:        stream,
		Timestamp:     ts,
		IngestionTime: int64(binary.BigEndian.Uint64(v[:8])),
		Message:       string(v[8:]),
		ID:            fmt.Sprintf("%020d%010d%020d", uint64(ts)^(1<<63), crc32.ChecksumIEEE([]byte(stream)), seq),
		key:           append([]byte(nil), k...),
	}
}

func encodeToken(kind string, b []byte) string {
	return kind + "/" + base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(tok, kind string) ([]byte, bool) {
	rest, ok := strings.CutPrefix(tok, kind+"/")
	if !ok {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	return b, err == nil
}

// GetEventsInput selects events of one stream, as GetLogEvents does.
type GetEventsInput struct {
	// Group and Stream name the log stream.
	Group, Stream string
	// Start (inclusive) and End (exclusive) bound the timestamps, in milliseconds; nil
	// means unbounded.
	Start, End *int64
	// Token is a NextForwardToken or NextBackwardToken of an earlier answer.
	Token string
	// Limit is 1–10,000; 0 means as many as fit in 1 MB, up to 10,000.
	Limit int
	// StartFromHead reads from the oldest events when Token is empty; else from the
	// newest.
	StartFromHead bool
}

// GetEventsOutput is a page of events, oldest first, with the tokens to page on.
type GetEventsOutput struct {
	// Events are in timestamp order.
	Events []Event
	// NextForwardToken continues after the last event (the token given back when
	// there is nothing newer yet); NextBackwardToken continues before the first.
	NextForwardToken, NextBackwardToken string
}

// GetEvents reads a page of a stream's events. It returns ResourceNotFound for a
// missing group or stream and InvalidParameter for a bad limit or token.
func (s *Store) GetEvents(sc Scope, in GetEventsInput) (GetEventsOutput, error) {
	if err := s.readable(); err != nil {
		return GetEventsOutput{}, err
	}
	var out GetEventsOutput
	if in.Limit == 0 {
		in.Limit = MaxReadEvents
	}
	if in.Limit < 1 || in.Limit > MaxReadEvents {
		return out, errf(InvalidParameter, "1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 10000", in.Limit)
	}
	lo, hi := eventKey(-1<<63, 0), eventKey(1<<63-1, 1<<64-1)
	if in.Start != nil {
		lo = eventKey(*in.Start, 0)
	}
	if in.End != nil {
		hi = eventKey(*in.End, 0)
	}
	forward := in.StartFromHead
	pos := lo // forward: keys > pos; backward: keys < pos
	if !forward {
		pos = hi
	}
	if in.Token != "" {
		if b, ok := decodeToken(in.Token, "f"); ok && len(b) == 16 {
			forward, pos = true, b
		} else if b, ok := decodeToken(in.Token, "b"); ok && len(b) == 16 {
			forward, pos = false, b
		} else {
			return out, errf(InvalidParameter, "The specified nextToken is invalid.")
		}
	}
	err := s.shard(sc, in.Group).View(func(tx *bolt.Tx) error {
		g := tx.Bucket(bGroups).Bucket(groupKey(sc, in.Group))
		if g == nil {
			return errGroupNotFound()
		}
		st := g.Bucket(bStreams).Bucket([]byte(in.Stream))
		if st == nil {
			return errStreamNotFound()
		}
		c := st.Bucket(bEvents).Cursor()
		size := 0
		if forward {
			k, v := c.Seek(pos)
			if k != nil && bytes.Equal(k, pos) {
				k, v = c.Next()
			}
			for ; k != nil && bytes.Compare(k, hi) < 0 && len(out.Events) < in.Limit; k, v = c.Next() {
				if bytes.Compare(k, lo) <= 0 {
					continue
				}
				if size += len(v) - 8 + EventOverhead; size > MaxReadBytes {
					break
				}
				out.Events = append(out.Events, eventOf(in.Stream, k, v))
			}
		} else {
			k, v := c.Seek(pos)
			if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
			for ; k != nil && bytes.Compare(k, lo) > 0 && len(out.Events) < in.Limit; k, v = c.Prev() {
				if bytes.Compare(k, hi) >= 0 {
					continue
				}
				if size += len(v) - 8 + EventOverhead; size > MaxReadBytes {
					break
				}
				out.Events = append(out.Events, eventOf(in.Stream, k, v))
			}
			for i, j := 0, len(out.Events)-1; i < j; i, j = i+1, j-1 {
				out.Events[i], out.Events[j] = out.Events[j], out.Events[i]
			}
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	if n := len(out.Events); n > 0 {
		first, last := out.Events[0], out.Events[n-1]
		out.NextForwardToken = encodeToken("f", last.key)
		out.NextBackwardToken = encodeToken("b", first.key)
	} else {
		out.NextForwardToken = encodeToken("f", pos)
		out.NextBackwardToken = encodeToken("b", pos)
	}
	return out, nil
}

// FilterInput selects events across a group's streams, as FilterLogEvents does.
type FilterInput struct {
	// Group is the log group name.
	Group string
	// Streams limits the search to these streams (1–100); it excludes StreamPrefix.
	Streams []string
	// StreamPrefix limits the search to streams whose name starts with it.
	StreamPrefix string
	// Start (inclusive) and End (exclusive) bound the timestamps, in milliseconds.
	Start, End *int64
	// Pattern is a filter pattern (see ParsePattern); empty matches every event.
	Pattern string
	// Token is the NextToken of an earlier answer.
	Token string
	// Limit is 1–10,000; 0 means 10,000.
	Limit int
}

// FilterOutput is a page of matching events in timestamp order; NextToken is "" when
// the search is complete.
type FilterOutput struct {
	// Events match the pattern.
	Events []Event
	// NextToken continues the search.
	NextToken string
	// Searched are the streams searched.
	Searched []string
}

// FilterEvents searches a group's streams for events matching a pattern, interleaved
// by timestamp. It returns ResourceNotFound for a missing group and InvalidParameter
// for a bad limit, token, pattern or both Streams and StreamPrefix.
func (s *Store) FilterEvents(sc Scope, in FilterInput) (FilterOutput, error) {
	if err := s.readable(); err != nil {
		return FilterOutput{}, err
	}
	var out FilterOutput
	if in.Limit == 0 {
		in.Limit = MaxReadEvents
	}
	if in.Limit < 1 || in.Limit > MaxReadEvents {
		return out, errf(InvalidParameter, "1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 10000", in.Limit)
	}
	if len(in.Streams) > 0 && in.StreamPrefix != "" {
		return out, errf(InvalidParameter, "Cannot specify both logStreamNamePrefix and logStreamNames")
	}
	if len(in.Streams) > 100 {
		return out, errf(InvalidParameter, "1 validation error detected: Value at 'logStreamNames' failed to satisfy constraint: Member must have length less than or equal to 100")
	}
	match, err := ParsePattern(in.Pattern)
	if err != nil {
		return out, err
	}
	lo, hi := eventKey(-1<<63, 0), eventKey(1<<63-1, 1<<64-1)
	if in.Start != nil {
		lo = eventKey(*in.Start, 0)
	}
	if in.End != nil {
		hi = eventKey(*in.End, 0)
	}
	// Position: the last (key, stream) returned; events order by (timestamp, stream,
	// seq).
	var afterKey []byte
	var afterStream string
	if in.Token != "" {
		b, ok := decodeToken(in.Token, "n")
		if !ok || len(b) < 16 {
			return out, errf(InvalidParameter, "The specified nextToken is invalid.")
		}
		afterKey, afterStream = b[:16], string(b[16:])
	}
	err = s.shard(sc, in.Group).View(func(tx *bolt.Tx) error {
		g := tx.Bucket(bGroups).Bucket(groupKey(sc, in.Group))
		if g == nil {
			return errGroupNotFound()
		}
		ss := g.Bucket(bStreams)
		var names []string
		if len(in.Streams) > 0 {
			for _, n := range in.Streams {
				if ss.Bucket([]byte(n)) == nil {
					return errStreamNotFound()
				}
			}
			names = append(names, in.Streams...)
			sort.Strings(names)
		} else {
			c := ss.Cursor()
			for k, _ := c.Seek([]byte(in.StreamPrefix)); k != nil && strings.HasPrefix(string(k), in.StreamPrefix); k, _ = c.Next() {
				names = append(names, string(k))
			}
		}
		out.Searched = names
		type head struct {
			name string
			c    *bolt.Cursor
			k, v []byte
		}
		var heads []*head
		for _, n := range names {
			h := &head{name: n, c: ss.Bucket([]byte(n)).Bucket(bEvents).Cursor()}
			start := lo
			if afterKey != nil {
				ts := keyTime(afterKey)
				switch {
				case n < afterStream:
					start = eventKey(ts, 1<<64-1)
				case n == afterStream:
					start = afterKey
				default:
					start = eventKey(ts, 0)
				}
				if bytes.Compare(start, lo) < 0 {
					start = lo
				}
			}
			h.k, h.v = h.c.Seek(start)
			if h.k != nil && bytes.Equal(h.k, start) {
				h.k, h.v = h.c.Next()
			}
			heads = append(heads, h)
		}
		size, scanned := 0, 0
		for {
			var best *head
			for _, h := range heads {
				if h.k == nil || bytes.Compare(h.k, hi) >= 0 {
					continue
				}
				if best == nil || keyTime(h.k) < keyTime(best.k) || (keyTime(h.k) == keyTime(best.k) && h.name < best.name) {
					best = h
				}
			}
			if best == nil {
				return nil
			}
			if len(out.Events) >= in.Limit || size > MaxReadBytes || scanned >= 100*MaxReadEvents {
				// More may match: hand back the position of the last event looked at.
				out.NextToken = encodeToken("n", append(append([]byte{}, afterKey...), afterStream...))
				return nil
			}
			k, v := best.k, best.v
			afterKey, afterStream = append([]byte{}, k...), best.name
			scanned++
			if match(v[8:]) {
				size += len(v) - 8 + EventOverhead
				out.Events = append(out.Events, eventOf(best.name, k, v))
			}
			best.k, best.v = best.c.Next()
		}
	})
	return out, err
}

// Sweep deletes events older than their group's retention period before now and
// returns how many it deleted. Streams are kept (AWS keeps empty streams too).
func (s *Store) Sweep(now time.Time) (int, error) {
	total := 0
	for _, db := range s.shards {
		err := db.Update(func(tx *bolt.Tx) error {
			gs := tx.Bucket(bGroups)
			return gs.ForEachBucket(func(gk []byte) error {
				g := gs.Bucket(gk)
				var gm groupMeta
				if err := getJSON(g, &gm); err != nil || gm.RetentionInDays == 0 {
					return err
				}
				cut := eventKey(now.Add(-time.Duration(gm.RetentionInDays)*24*time.Hour).UnixMilli(), 0)
				ss := g.Bucket(bStreams)
				var freed int64
				err := ss.ForEachBucket(func(sk []byte) error {
					st := ss.Bucket(sk)
					ev := st.Bucket(bEvents)
					c := ev.Cursor()
					var n, b int64
					for k, v := c.First(); k != nil && bytes.Compare(k, cut) < 0; k, v = c.First() {
						b += int64(len(v) - 8)
						n++
						if err := c.Delete(); err != nil {
							return err
						}
					}
					if n == 0 {
						return nil
					}
					total += int(n)
					freed += b
					var sm streamMeta
					if err := getJSON(st, &sm); err != nil {
						return err
					}
					sm.StoredBytes -= b
					sm.Events -= n
					if k, _ := c.First(); k != nil {
						sm.FirstEventTimestamp = keyTime(k)
					}
					return putJSON(st, &sm)
				})
				if err != nil || freed == 0 {
					return err
				}
				gm.StoredBytes -= freed
				return putJSON(g, &gm)
			})
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
