package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ServiceUnavailable is the AWS error type of a store that cannot serve now: a read
// while it catches up with the other replicas, or a change another replica did not
// take. AWS SDKs retry it.
const ServiceUnavailable = "ServiceUnavailableException"

// Kinds of Op.
const (
	OpCreateGroup     = "createGroup"
	OpDeleteGroup     = "deleteGroup"
	OpPutRetention    = "putRetention"
	OpDeleteRetention = "deleteRetention"
	OpTagGroup        = "tagGroup"
	OpUntagGroup      = "untagGroup"
	OpCreateStream    = "createStream"
	OpEnsureStream    = "ensureStream"
	OpDeleteStream    = "deleteStream"
	OpEvents          = "events"
)

// KeyedEvent is a stored event as the replica that took it keyed it: Key is timestamp
// (8 bytes, sign-flipped) and sequence (8 bytes, the low 16 bits the replica's SeqTag);
// Value is ingestion time (8 bytes) and the message. Copies keep the key, so a copy
// applied twice is stored once and reads page the same on every replica.
type KeyedEvent struct {
	Key   []byte `json:"k"`
	Value []byte `json:"v"`
}

// Op is one committed change of a Store, as Config.Replicate receives it and Apply
// takes it on another replica.
type Op struct {
	// Kind is one of the Op* constants.
	Kind string `json:"kind"`
	// Account and Region are the group's Scope.
	Account string `json:"account"`
	Region  string `json:"region"`
	// Group and Stream name the log group and (for stream and event changes) stream.
	Group  string `json:"group"`
	Stream string `json:"stream,omitempty"`
	// Tags are the tags of OpCreateGroup and OpTagGroup.
	Tags map[string]string `json:"tags,omitempty"`
	// Keys are the tag keys of OpUntagGroup.
	Keys []string `json:"keys,omitempty"`
	// Days is OpPutRetention's retentionInDays.
	Days int32 `json:"days,omitempty"`
	// CreateGroup is OpEnsureStream's createGroup.
	CreateGroup bool `json:"createGroup,omitempty"`
	// Events are OpEvents' events, keyed.
	Events []KeyedEvent `json:"events,omitempty"`
}

func (s *Store) replicate(op Op) error {
	if s.cfg.Replicate == nil {
		return nil
	}
	if err := s.cfg.Replicate(op); err != nil {
		return errf(ServiceUnavailable, "The change was stored on this replica but not copied to the other log store replicas (%v); retry it.", err)
	}
	return nil
}

// CreateGroup creates a log group with tags. It returns ResourceAlreadyExists if it
// exists and InvalidParameter for a bad name or more than 50 tags.
func (s *Store) CreateGroup(sc Scope, name string, tags map[string]string) error {
	if err := s.createGroupLocal(sc, name, tags); err != nil {
		return err
	}
	return s.replicate(Op{Kind: OpCreateGroup, Account: sc.Account, Region: sc.Region, Group: name, Tags: tags})
}

// DeleteGroup deletes a group with its streams and events. It returns ResourceNotFound
// for a missing group.
func (s *Store) DeleteGroup(sc Scope, name string) error {
	if err := s.deleteGroupLocal(sc, name); err != nil {
		return err
	}
	return s.replicate(Op{Kind: OpDeleteGroup, Account: sc.Account, Region: sc.Region, Group: name})
}

// PutRetention sets a group's retention in days (one of RetentionDays, else
// InvalidParameter); events older are deleted by Sweep and refused by PutEvents. It
// returns ResourceNotFound for a missing group.
func (s *Store) PutRetention(sc Scope, name string, days int32) error {
	if err := s.putRetentionLocal(sc, name, days); err != nil {
		return err
	}
	return s.replicate(Op{Kind: OpPutRetention, Account: sc.Account, Region: sc.Region, Group: name, Days: days})
}

// DeleteRetention makes a group's events never expire. It returns ResourceNotFound for
// a missing group.
func (s *Store) DeleteRetention(sc Scope, name string) error {
	if err := s.deleteRetentionLocal(sc, name); err != nil {
		return err
	}
	return s.replicate(Op{Kind: OpDeleteRetention, Account: sc.Account, Region: sc.Region, Group: name})
}

// TagGroup adds or replaces tags on a group. It returns ResourceNotFound for a missing
// group and InvalidParameter when the group would have more than 50 tags.
func (s *Store) TagGroup(sc Scope, name string, tags map[string]string) error {
	if err := s.tagGroupLocal(sc, name, tags); err != nil {
		return err
	}
	return s.replicate(Op{Kind: OpTagGroup, Account: sc.Account, Region: sc.Region, Group: name, Tags: tags})
}

// UntagGroup removes tags by key (absent keys are ignored, as AWS does). It returns
// ResourceNotFound for a missing group.
func (s *Store) UntagGroup(sc Scope, name string, keys []string) error {
	if err := s.untagGroupLocal(sc, name, keys); err != nil {
		return err
	}
	return s.replicate(Op{Kind: OpUntagGroup, Account: sc.Account, Region: sc.Region, Group: name, Keys: keys})
}

// CreateStream creates a stream in a group. It returns ResourceNotFound for a missing
// group, ResourceAlreadyExists for an existing stream and InvalidParameter for a bad
// name.
func (s *Store) CreateStream(sc Scope, group, stream string) error {
	if err := s.createStreamLocal(sc, group, stream); err != nil {
		return err
	}
	return s.replicate(Op{Kind: OpCreateStream, Account: sc.Account, Region: sc.Region, Group: group, Stream: stream})
}

// EnsureStream makes sure a stream exists, as the awslogs driver does before a
// container starts: it creates the stream if missing and, with createGroup, the group
// too. Without createGroup a missing group is ResourceNotFound ("The specified log
// group does not exist.").
func (s *Store) EnsureStream(sc Scope, group, stream string, createGroup bool) error {
	if err := s.ensureStreamLocal(sc, group, stream, createGroup); err != nil {
		return err
	}
	return s.replicate(Op{Kind: OpEnsureStream, Account: sc.Account, Region: sc.Region, Group: group, Stream: stream, CreateGroup: createGroup})
}

// DeleteStream deletes a stream and its events. It returns ResourceNotFound for a
// missing group or stream.
func (s *Store) DeleteStream(sc Scope, group, stream string) error {
	if err := s.deleteStreamLocal(sc, group, stream); err != nil {
		return err
	}
	return s.replicate(Op{Kind: OpDeleteStream, Account: sc.Account, Region: sc.Region, Group: group, Stream: stream})
}

// Apply applies a change another replica committed (its Config.Replicate's Op) without
// replicating it again. It is idempotent: a group or stream that already exists or is
// already gone, and events already stored under their keys, are no error. It returns an
// error for an unknown Kind or a failure of the disk.
func (s *Store) Apply(op Op) error {
	sc := Scope{Account: op.Account, Region: op.Region}
	var err error
	switch op.Kind {
	case OpCreateGroup:
		err = s.createGroupLocal(sc, op.Group, op.Tags)
	case OpDeleteGroup:
		err = s.deleteGroupLocal(sc, op.Group)
	case OpPutRetention:
		err = s.putRetentionLocal(sc, op.Group, op.Days)
	case OpDeleteRetention:
		err = s.deleteRetentionLocal(sc, op.Group)
	case OpTagGroup:
		err = s.tagGroupLocal(sc, op.Group, op.Tags)
	case OpUntagGroup:
		err = s.untagGroupLocal(sc, op.Group, op.Keys)
	case OpCreateStream:
		err = s.ensureStreamLocal(sc, op.Group, op.Stream, true)
	case OpEnsureStream:
		err = s.ensureStreamLocal(sc, op.Group, op.Stream, true)
	case OpDeleteStream:
		err = s.deleteStreamLocal(sc, op.Group, op.Stream)
	case OpEvents:
		err = s.applyEvents(sc, op.Group, op.Stream, op.Events)
	default:
		return fmt.Errorf("logstore: unknown op %q", op.Kind)
	}
	if IsType(err, ResourceAlreadyExists) || IsType(err, ResourceNotFound) {
		return nil // already applied, or the group was deleted since
	}
	return err
}

// applyEvents stores keyed events absent from the stream (creating the group and stream
// if this replica lacks them) and updates the stream's and group's counters.
func (s *Store) applyEvents(sc Scope, group, stream string, events []KeyedEvent) error {
	if len(events) == 0 {
		return nil
	}
	err := s.shard(sc, group).Update(func(tx *bolt.Tx) error {
		g := tx.Bucket(bGroups).Bucket(groupKey(sc, group))
		if g == nil {
			var err error
			if g, err = s.createGroupTx(tx, sc, group, nil); err != nil {
				return err
			}
		}
		st := g.Bucket(bStreams).Bucket([]byte(stream))
		if st == nil {
			var err error
			if st, err = s.createStreamTx(g, stream); err != nil {
				return err
			}
		}
		_, err := mergeEvents(g, st, func(yield func(k, v []byte) error) error {
			for _, e := range events {
				if err := yield(e.Key, e.Value); err != nil {
					return err
				}
			}
			return nil
		})
		return err
	})
	if err != nil {
		return err
	}
	s.notify()
	return nil
}

// mergeEvents puts the events each yields into stream bucket st of group g where their
// key is absent, moves the stream's sequence past every one (so the keys this replica
// assigns later never repeat them) and adds them to the counters.
func mergeEvents(g, st *bolt.Bucket, each func(yield func(k, v []byte) error) error) (int64, error) {
	var sm streamMeta
	var gm groupMeta
	if err := getJSON(st, &sm); err != nil {
		return 0, err
	}
	if err := getJSON(g, &gm); err != nil {
		return 0, err
	}
	ev := st.Bucket(bEvents)
	ev.FillPercent = 0.95
	var added, n int64
	maxSeq := ev.Sequence()
	err := each(func(k, v []byte) error {
		if len(k) != 16 || len(v) < 8 {
			return fmt.Errorf("logstore: malformed event key or value")
		}
		if seq := binary.BigEndian.Uint64(k[8:]) >> 16; seq > maxSeq {
			maxSeq = seq
		}
		if ev.Get(k) != nil {
			return nil
		}
		if err := ev.Put(append([]byte(nil), k...), append([]byte(nil), v...)); err != nil {
			return err
		}
		ts := keyTime(k)
		if sm.FirstEventTimestamp == 0 || ts < sm.FirstEventTimestamp {
			sm.FirstEventTimestamp = ts
		}
		sm.LastEventTimestamp = max(sm.LastEventTimestamp, ts)
		sm.LastIngestionTime = max(sm.LastIngestionTime, int64(binary.BigEndian.Uint64(v[:8])))
		added += int64(len(v) - 8)
		n++
		return nil
	})
	if err != nil {
		return 0, err
	}
	if maxSeq > ev.Sequence() {
		if err := ev.SetSequence(maxSeq); err != nil {
			return 0, err
		}
	}
	if n == 0 {
		return 0, nil
	}
	sm.StoredBytes += added
	sm.Events += n
	gm.StoredBytes += added
	if err := putJSON(st, &sm); err != nil {
		return 0, err
	}
	return n, putJSON(g, &gm)
}

// SetReplication sets Config.Replicate and Config.SeqTag (logpeers.New calls it). Call
// it before the store serves.
func (s *Store) SetReplication(replicate func(Op) error, tag uint16) {
	s.cfg.Replicate, s.cfg.SeqTag = replicate, tag
}

// SetReady makes reads answer (reason "") or refuse with ServiceUnavailable naming
// reason, for a replica catching up with the others.
func (s *Store) SetReady(reason string) {
	if reason == "" {
		s.unready.Store(nil)
		return
	}
	s.unready.Store(&reason)
}

// readable returns ServiceUnavailable while the store catches up (SetReady).
func (s *Store) readable() error {
	if r := s.unready.Load(); r != nil {
		return errf(ServiceUnavailable, "This replica's log store is catching up with the other replicas (%s); retry.", *r)
	}
	return nil
}

// Shards returns how many shard files the store has (Config.Shards).
func (s *Store) Shards() int { return len(s.shards) }

// WriteShard writes a consistent copy of shard i (a bbolt file) to w, for a replica
// catching up (MergeShard). It returns the bytes written.
func (s *Store) WriteShard(i int, w io.Writer) (int64, error) {
	if i < 0 || i >= len(s.shards) {
		return 0, fmt.Errorf("logstore: no shard %d", i)
	}
	var n int64
	err := s.shards[i].View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// MergeShard adds what the shard file at path (another replica's WriteShard) holds and
// this store lacks: groups and streams (with their retention and tags: the other
// replica's are newer), and events by key. Nothing is deleted: a group or stream
// deleted while this replica was away stays here (docs/logs.md). Groups are hashed to
// this store's shards, so the counts need not match. It returns the events added.
func (s *Store) MergeShard(path string) (int64, error) {
	src, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, fmt.Errorf("logstore: open copy: %w", err)
	}
	defer src.Close()
	var total int64
	err = src.View(func(stx *bolt.Tx) error {
		gs := stx.Bucket(bGroups)
		if gs == nil {
			return errors.New("logstore: the copy has no groups bucket")
		}
		return gs.ForEachBucket(func(gk []byte) error {
			n, err := s.mergeGroup(gk, gs.Bucket(gk))
			total += n
			return err
		})
	})
	if total > 0 {
		s.notify()
	}
	return total, err
}

func (s *Store) mergeGroup(gk []byte, sg *bolt.Bucket) (int64, error) {
	var sc Scope
	var name string
	if parts := splitGroupKey(gk); len(parts) == 3 {
		sc, name = Scope{Account: parts[0], Region: parts[1]}, parts[2]
	} else {
		return 0, fmt.Errorf("logstore: malformed group key %q", gk)
	}
	var sgm groupMeta
	if err := getJSON(sg, &sgm); err != nil {
		return 0, err
	}
	var total int64
	err := s.shard(sc, name).Update(func(tx *bolt.Tx) error {
		gs := tx.Bucket(bGroups)
		g := gs.Bucket(gk)
		if g == nil {
			var err error
			if g, err = gs.CreateBucket(append([]byte(nil), gk...)); err != nil {
				return err
			}
			if _, err := g.CreateBucket(bStreams); err != nil {
				return err
			}
			if err := putJSON(g, &groupMeta{CreationTime: sgm.CreationTime}); err != nil {
				return err
			}
		}
		var gm groupMeta
		if err := getJSON(g, &gm); err != nil {
			return err
		}
		gm.RetentionInDays, gm.Tags = sgm.RetentionInDays, sgm.Tags
		if err := putJSON(g, &gm); err != nil {
			return err
		}
		return sg.Bucket(bStreams).ForEachBucket(func(name []byte) error {
			sst := sg.Bucket(bStreams).Bucket(name)
			st := g.Bucket(bStreams).Bucket(name)
			if st == nil {
				var ssm streamMeta
				if err := getJSON(sst, &ssm); err != nil {
					return err
				}
				var err error
				if st, err = g.Bucket(bStreams).CreateBucket(append([]byte(nil), name...)); err != nil {
					return err
				}
				if _, err := st.CreateBucket(bEvents); err != nil {
					return err
				}
				if err := putJSON(st, &streamMeta{CreationTime: ssm.CreationTime}); err != nil {
					return err
				}
			}
			n, err := mergeEvents(g, st, func(yield func(k, v []byte) error) error {
				return sst.Bucket(bEvents).ForEach(yield)
			})
			total += n
			return err
		})
	})
	return total, err
}

func splitGroupKey(k []byte) []string {
	var out []string
	start := 0
	for i, b := range k {
		if b == 0 && len(out) < 2 {
			out = append(out, string(k[start:i]))
			start = i + 1
		}
	}
	return append(out, string(k[start:]))
}

// MergeFrom reads a shard copy from r (another replica's WriteShard) into a temporary
// file under the store's directory and merges it (MergeShard). It returns the events
// added.
func (s *Store) MergeFrom(r io.Reader) (int64, error) {
	f, err := os.CreateTemp(s.cfg.Dir, "merge-*.db")
	if err != nil {
		return 0, fmt.Errorf("logstore: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return 0, fmt.Errorf("logstore: receive copy: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("logstore: %w", err)
	}
	return s.MergeShard(f.Name())
}
