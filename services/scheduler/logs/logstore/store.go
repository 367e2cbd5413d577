package logstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Scope is the account and region a log group belongs to; groups of one scope are
// invisible to every other.
type Scope struct {
	// Account is the 12-digit AWS account id.
	Account string
	// Region is the region, e.g. "us-east-1".
	Region string
}

// AWS error types the store answers, as CloudWatch Logs names them.
const (
	ResourceNotFound      = "ResourceNotFoundException"
	ResourceAlreadyExists = "ResourceAlreadyExistsException"
	InvalidParameter      = "InvalidParameterException"
)

// Error is a CloudWatch Logs error: Type is the AWS error type (ResourceNotFound,
// ResourceAlreadyExists, InvalidParameter) and Message its text.
type Error struct {
	// Type is the AWS exception name.
	Type string
	// Message says what is wrong, naming the parameter or resource.
	Message string
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

func errf(typ, format string, args ...any) *Error {
	return &Error{Type: typ, Message: fmt.Sprintf(format, args...)}
}

// IsType reports whether err is an *Error of type typ.
func IsType(err error, typ string) bool {
	var e *Error
	return errors.As(err, &e) && e.Type == typ
}

var (
	errGroupNotFound  = func() *Error { return errf(ResourceNotFound, "The specified log group does not exist.") }
	errStreamNotFound = func() *Error { return errf(ResourceNotFound, "The specified log stream does not exist.") }
)

// Config configures a Store.
type Config struct {
	// Dir holds the shard files (logs-NN.db), created if missing.
	Dir string
	// Shards is how many bbolt files log groups are spread over (by a hash of
	// account, region and group name); default 4. It must not change for an existing
	// Dir: Open refuses a Dir written with another count.
	Shards int
	// Now returns the current time; default time.Now. Tests set it.
	Now func() time.Time
	// Replicate, when set, is called after each change this store commits (an Op) and
	// must copy it to the other replicas of the store before returning; its error is the
	// caller's (the change stays here and the caller retries). Changes applied with
	// Apply are not replicated again. Nil keeps the store to itself (one replica).
	Replicate func(Op) error
	// SeqTag is this replica's 16-bit tag in the low bits of the event keys it assigns,
	// so keys assigned by two replicas to one stream never collide. Default 0.
	SeqTag uint16
	// NoSync skips fsync on commit (benchmarks and tests only: a crash may lose the
	// last batches).
	NoSync bool
}

// Store holds log groups, streams and events. Methods are safe for concurrent use.
type Store struct {
	cfg    Config
	shards []*bolt.DB

	// unready, when set, is the reason reads are refused (ServiceUnavailable): the
	// store is catching up with the other replicas (SetReady).
	unready atomic.Pointer[string]

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every put, for followers
}

// Open opens (or creates) the store in cfg.Dir. It returns an error if a shard file
// cannot be opened (for example, another process holds it) or Dir was created with a
// different shard count.
func Open(cfg Config) (*Store, error) {
	if cfg.Shards <= 0 {
		cfg.Shards = 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("logstore: create %s: %w", cfg.Dir, err)
	}
	marker := filepath.Join(cfg.Dir, "SHARDS")
	if b, err := os.ReadFile(marker); err == nil {
		if strings.TrimSpace(string(b)) != fmt.Sprint(cfg.Shards) {
			return nil, fmt.Errorf("logstore: %s was created with %s shards, not %d", cfg.Dir, strings.TrimSpace(string(b)), cfg.Shards)
		}
	} else if err := os.WriteFile(marker, []byte(fmt.Sprintln(cfg.Shards)), 0o600); err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	s := &Store{cfg: cfg, changed: make(chan struct{})}
	for i := range cfg.Shards {
		db, err := bolt.Open(filepath.Join(cfg.Dir, fmt.Sprintf("logs-%02d.db", i)), 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: cfg.NoSync, NoFreelistSync: true})
		if errors.Is(err, bolt.ErrTimeout) {
			s.Close()
			return nil, fmt.Errorf("logstore: %s is held by another process (a second scheduler replica on this host needs its own --log-dir): %w", cfg.Dir, err)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("logstore: open shard %d: %w", i, err)
		}
		if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bGroups); return err }); err != nil {
			db.Close()
			s.Close()
			return nil, fmt.Errorf("logstore: init shard %d: %w", i, err)
		}
		s.shards = append(s.shards, db)
	}
	return s, nil
}

// Close closes the shard files.
//
// The shards stay in place, closed: a call after Close (a request still in flight while
// the scheduler stops) gets bolt's "database not open" error instead of a panic, and a
// second Close is harmless.
func (s *Store) Close() error {
	var errs []error
	for _, db := range s.shards {
		errs = append(errs, db.Close())
	}
	return errors.Join(errs...)
}

// Changed returns a channel closed at the next successful PutEvents, for readers that
// follow a stream (`berth logs --follow`).
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Store) notify() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// Bucket layout of a shard:
//
//	groups/                          bucket
//	  {account}\x00{region}\x00{name}/ bucket, one per log group
//	    meta                         JSON groupMeta
//	    streams/                     bucket
//	      {stream}/                  bucket
//	        meta                     JSON streamMeta
//	        ev/                      bucket: key = timestamp (8, sign-flipped) + seq (8);
//	                                 value = ingestion time (8) + message
var (
	bGroups  = []byte("groups")
	bStreams = []byte("streams")
	bEvents  = []byte("ev")
	kMeta    = []byte("meta")
)

func groupKey(sc Scope, name string) []byte {
	return []byte(sc.Account + "\x00" + sc.Region + "\x00" + name)
}

func (s *Store) shard(sc Scope, name string) *bolt.DB {
	h := fnv.New32a()
	h.Write(groupKey(sc, name))
	return s.shards[int(h.Sum32()%uint32(len(s.shards)))]
}

type groupMeta struct {
	CreationTime    int64             `json:"c"`
	RetentionInDays int32             `json:"r,omitempty"`
	Tags            map[string]string `json:"t,omitempty"`
	StoredBytes     int64             `json:"b,omitempty"`
}

type streamMeta struct {
	CreationTime        int64 `json:"c"`
	FirstEventTimestamp int64 `json:"f,omitempty"`
	LastEventTimestamp  int64 `json:"l,omitempty"`
	LastIngestionTime   int64 `json:"i,omitempty"`
	StoredBytes         int64 `json:"b,omitempty"`
	Events              int64 `json:"n,omitempty"`
}

func getJSON(b *bolt.Bucket, v any) error {
	raw := b.Get(kMeta)
	if raw == nil {
		return errors.New("logstore: record without meta")
	}
	return json.Unmarshal(raw, v)
}

func putJSON(b *bolt.Bucket, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(kMeta, raw)
}

// Group is a log group as DescribeLogGroups answers it.
type Group struct {
	// Name is the log group name.
	Name string
	// ARN is the group's ARN ending in ":*" (the `arn` field of LogGroup).
	ARN string
	// GroupARN is the group's ARN without ":*" (the `logGroupArn` field).
	GroupARN string
	// CreationTime is in milliseconds since the epoch.
	CreationTime int64
	// RetentionInDays is 0 when events never expire.
	RetentionInDays int32
	// StoredBytes is the size of the messages stored.
	StoredBytes int64
	// Tags are the group's tags.
	Tags map[string]string
}

// Stream is a log stream as DescribeLogStreams answers it. Event times are 0 until
// the stream has events.
type Stream struct {
	// Name is the log stream name.
	Name string
	// ARN is the stream's ARN.
	ARN string
	// CreationTime, FirstEventTimestamp, LastEventTimestamp and LastIngestionTime are
	// milliseconds since the epoch.
	CreationTime, FirstEventTimestamp, LastEventTimestamp, LastIngestionTime int64
	// StoredBytes is the size of the messages stored.
	StoredBytes int64
}

// GroupARN returns the ARN of a log group without the trailing ":*".
func GroupARN(sc Scope, name string) string {
	return fmt.Sprintf("arn:aws:logs:%s:%s:log-group:%s", sc.Region, sc.Account, name)
}

var (
	groupNameRE  = regexp.MustCompile(`^[\.\-_/#A-Za-z0-9]+$`)
	streamNameRE = regexp.MustCompile(`^[^:*]*$`)
)

// ValidGroupName returns an InvalidParameter error naming param unless name is a valid
// log group name (1–512 of letters, digits, '.', '-', '_', '/', '#').
func ValidGroupName(param, name string) error {
	if name == "" || len(name) > 512 || !groupNameRE.MatchString(name) {
		return errf(InvalidParameter, "1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_/#A-Za-z0-9]+ and have length between 1 and 512", name, param)
	}
	return nil
}

// ValidStreamName returns an InvalidParameter error naming param unless name is a valid
// log stream name (1–512 characters, no ':' or '*').
func ValidStreamName(param, name string) error {
	if name == "" || len(name) > 512 || !streamNameRE.MatchString(name) {
		return errf(InvalidParameter, "1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [^:*]* and have length between 1 and 512", name, param)
	}
	return nil
}

// GroupName returns the log group a logGroupName or logGroupIdentifier names: a name
// as is, or the name inside a log group ARN (with or without ":*"). An ARN of another
// account or region names no group here (ResourceNotFound).
func GroupName(sc Scope, ident string) (string, error) {
	if !strings.HasPrefix(ident, "arn:") {
		return ident, nil
	}
	p := strings.SplitN(ident, ":", 7)
	if len(p) != 7 || p[2] != "logs" || p[5] != "log-group" {
		return "", errf(InvalidParameter, "Invalid logGroupIdentifier: %s is not a log group ARN.", ident)
	}
	if p[1] != "aws" || p[3] != sc.Region || p[4] != sc.Account {
		return "", errGroupNotFound()
	}
	return strings.TrimSuffix(p[6], ":*"), nil
}

// CreateGroup creates a log group with tags. It returns ResourceAlreadyExists if the
// group exists and InvalidParameter for an invalid name or tags.
func (s *Store) createGroupLocal(sc Scope, name string, tags map[string]string) error {
	if err := ValidGroupName("logGroupName", name); err != nil {
		return err
	}
	if err := validTags(tags); err != nil {
		return err
	}
	return s.shard(sc, name).Update(func(tx *bolt.Tx) error {
		_, err := s.createGroupTx(tx, sc, name, tags)
		return err
	})
}

func (s *Store) createGroupTx(tx *bolt.Tx, sc Scope, name string, tags map[string]string) (*bolt.Bucket, error) {
	gs := tx.Bucket(bGroups)
	if gs.Bucket(groupKey(sc, name)) != nil {
		return nil, errf(ResourceAlreadyExists, "The specified log group already exists")
	}
	g, err := gs.CreateBucket(groupKey(sc, name))
	if err != nil {
		return nil, err
	}
	if _, err := g.CreateBucket(bStreams); err != nil {
		return nil, err
	}
	return g, putJSON(g, &groupMeta{CreationTime: s.cfg.Now().UnixMilli(), Tags: tags})
}

func validTags(tags map[string]string) error {
	if len(tags) > 50 {
		return errf(InvalidParameter, "A log group can have at most 50 tags.")
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 || len(v) > 256 || strings.HasPrefix(k, "aws:") {
			return errf(InvalidParameter, "Invalid tag: key '%s' must be 1-128 characters and not start with 'aws:', its value at most 256 characters.", k)
		}
	}
	return nil
}

// DeleteGroup deletes a log group with its streams and events. It returns
// ResourceNotFound if there is no such group.
func (s *Store) deleteGroupLocal(sc Scope, name string) error {
	return s.shard(sc, name).Update(func(tx *bolt.Tx) error {
		gs := tx.Bucket(bGroups)
		if gs.Bucket(groupKey(sc, name)) == nil {
			return errGroupNotFound()
		}
		return gs.DeleteBucket(groupKey(sc, name))
	})
}

// updateGroup runs f on the group's meta and stores it. It returns ResourceNotFound if
// there is no such group.
func (s *Store) updateGroup(sc Scope, name string, f func(*groupMeta) error) error {
	return s.shard(sc, name).Update(func(tx *bolt.Tx) error {
		g := tx.Bucket(bGroups).Bucket(groupKey(sc, name))
		if g == nil {
			return errGroupNotFound()
		}
		var m groupMeta
		if err := getJSON(g, &m); err != nil {
			return err
		}
		if err := f(&m); err != nil {
			return err
		}
		return putJSON(g, &m)
	})
}

// RetentionDays are the values PutRetentionPolicy accepts.
var RetentionDays = []int32{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}

// PutRetention sets how many days a group's events are kept; older ones are deleted by
// Sweep and refused by PutEvents. It returns InvalidParameter for a value not in
// RetentionDays and ResourceNotFound for a missing group.
func (s *Store) putRetentionLocal(sc Scope, name string, days int32) error {
	ok := false
	for _, d := range RetentionDays {
		ok = ok || d == days
	}
	if !ok {
		return errf(InvalidParameter, "1 validation error detected: Value '%d' at 'retentionInDays' failed to satisfy constraint: Member must satisfy enum value set: %v", days, RetentionDays)
	}
	return s.updateGroup(sc, name, func(m *groupMeta) error { m.RetentionInDays = days; return nil })
}

// DeleteRetention makes a group's events never expire. It returns ResourceNotFound for
// a missing group.
func (s *Store) deleteRetentionLocal(sc Scope, name string) error {
	return s.updateGroup(sc, name, func(m *groupMeta) error { m.RetentionInDays = 0; return nil })
}

// TagGroup adds or replaces tags on a group. It returns ResourceNotFound for a missing
// group and InvalidParameter when the group would have more than 50 tags.
func (s *Store) tagGroupLocal(sc Scope, name string, tags map[string]string) error {
	return s.updateGroup(sc, name, func(m *groupMeta) error {
		if m.Tags == nil {
			m.Tags = map[string]string{}
		}
		for k, v := range tags {
			m.Tags[k] = v
		}
		return validTags(m.Tags)
	})
}

// UntagGroup removes tags by key (absent keys are ignored, as AWS does). It returns
// ResourceNotFound for a missing group.
func (s *Store) untagGroupLocal(sc Scope, name string, keys []string) error {
	return s.updateGroup(sc, name, func(m *groupMeta) error {
		for _, k := range keys {
			delete(m.Tags, k)
		}
		return nil
	})
}

// DescribeGroup returns one group. It returns ResourceNotFound for a missing group.
func (s *Store) DescribeGroup(sc Scope, name string) (Group, error) {
	if err := s.readable(); err != nil {
		return Group{}, err
	}
	var out Group
	err := s.shard(sc, name).View(func(tx *bolt.Tx) error {
		g := tx.Bucket(bGroups).Bucket(groupKey(sc, name))
		if g == nil {
			return errGroupNotFound()
		}
		var m groupMeta
		if err := getJSON(g, &m); err != nil {
			return err
		}
		out = groupOf(sc, name, m)
		return nil
	})
	return out, err
}

func groupOf(sc Scope, name string, m groupMeta) Group {
	a := GroupARN(sc, name)
	return Group{Name: name, ARN: a + ":*", GroupARN: a, CreationTime: m.CreationTime, RetentionInDays: m.RetentionInDays, StoredBytes: m.StoredBytes, Tags: m.Tags}
}

// DescribeGroupsInput selects groups.
type DescribeGroupsInput struct {
	// Prefix keeps groups whose name starts with it.
	Prefix string
	// Pattern keeps groups whose name contains it, case-insensitively; it excludes
	// Prefix.
	Pattern string
	// Token is the NextToken of the previous page.
	Token string
	// Limit is 1–50; 0 means 50.
	Limit int
}

// DescribeGroups lists the scope's groups in name order, a page at a time; next is ""
// on the last page. It returns InvalidParameter for a bad limit or both Prefix and
// Pattern.
func (s *Store) DescribeGroups(sc Scope, in DescribeGroupsInput) (groups []Group, next string, err error) {
	if err := s.readable(); err != nil {
		return nil, "", err
	}
	if in.Limit == 0 {
		in.Limit = 50
	}
	if in.Limit < 1 || in.Limit > 50 {
		return nil, "", errf(InvalidParameter, "1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 50", in.Limit)
	}
	if in.Prefix != "" && in.Pattern != "" {
		return nil, "", errf(InvalidParameter, "LogGroup name prefix and LogGroup name pattern are mutually exclusive parameters.")
	}
	after := ""
	if in.Token != "" {
		b, ok := decodeToken(in.Token, "g")
		if !ok {
			return nil, "", errf(InvalidParameter, "The specified nextToken is invalid.")
		}
		after = string(b)
	}
	pfx := groupKey(sc, "")
	seek := groupKey(sc, in.Prefix)
	if after != "" && after >= in.Prefix {
		seek = groupKey(sc, after)
	}
	pat := strings.ToLower(in.Pattern)
	for _, db := range s.shards {
		err := db.View(func(tx *bolt.Tx) error {
			gs := tx.Bucket(bGroups)
			c := gs.Cursor()
			n := 0
			for k, _ := c.Seek(seek); k != nil && strings.HasPrefix(string(k), string(pfx)) && n <= in.Limit; k, _ = c.Next() {
				name := string(k[len(pfx):])
				if !strings.HasPrefix(name, in.Prefix) {
					break
				}
				if name <= after || (pat != "" && !strings.Contains(strings.ToLower(name), pat)) {
					continue
				}
				var m groupMeta
				if err := getJSON(gs.Bucket(k), &m); err != nil {
					return err
				}
				groups = append(groups, groupOf(sc, name, m))
				n++
			}
			return nil
		})
		if err != nil {
			return nil, "", err
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	if len(groups) > in.Limit {
		groups = groups[:in.Limit]
		next = encodeToken("g", []byte(groups[len(groups)-1].Name))
	}
	return groups, next, nil
}

// StreamARN returns the ARN of a log stream.
func StreamARN(sc Scope, group, stream string) string {
	return GroupARN(sc, group) + ":log-stream:" + stream
}

// CreateStream creates a log stream in a group. It returns ResourceNotFound for a
// missing group, ResourceAlreadyExists for an existing stream and InvalidParameter for
// a bad name.
func (s *Store) createStreamLocal(sc Scope, group, stream string) error {
	if err := ValidStreamName("logStreamName", stream); err != nil {
		return err
	}
	return s.shard(sc, group).Update(func(tx *bolt.Tx) error {
		g := tx.Bucket(bGroups).Bucket(groupKey(sc, group))
		if g == nil {
			return errGroupNotFound()
		}
		_, err := s.createStreamTx(g, stream)
		return err
	})
}

func (s *Store) createStreamTx(g *bolt.Bucket, stream string) (*bolt.Bucket, error) {
	ss := g.Bucket(bStreams)
	if ss.Bucket([]byte(stream)) != nil {
		return nil, errf(ResourceAlreadyExists, "The specified log stream already exists")
	}
	st, err := ss.CreateBucket([]byte(stream))
	if err != nil {
		return nil, err
	}
	if _, err := st.CreateBucket(bEvents); err != nil {
		return nil, err
	}
	return st, putJSON(st, &streamMeta{CreationTime: s.cfg.Now().UnixMilli()})
}

// EnsureStream makes sure a stream exists, as the awslogs driver does before a
// container starts: it creates the stream if missing and, with createGroup, the group
// too. Without createGroup a missing group is ResourceNotFound ("The specified log
// group does not exist.").
func (s *Store) ensureStreamLocal(sc Scope, group, stream string, createGroup bool) error {
	if err := ValidGroupName("awslogs-group", group); err != nil {
		return err
	}
	if err := ValidStreamName("logStreamName", stream); err != nil {
		return err
	}
	return s.shard(sc, group).Update(func(tx *bolt.Tx) error {
		g := tx.Bucket(bGroups).Bucket(groupKey(sc, group))
		if g == nil {
			if !createGroup {
				return errGroupNotFound()
			}
			var err error
			if g, err = s.createGroupTx(tx, sc, group, nil); err != nil {
				return err
			}
		}
		if g.Bucket(bStreams).Bucket([]byte(stream)) != nil {
			return nil
		}
		_, err := s.createStreamTx(g, stream)
		return err
	})
}

// DeleteStream deletes a stream and its events. It returns ResourceNotFound for a
// missing group or stream.
func (s *Store) deleteStreamLocal(sc Scope, group, stream string) error {
	return s.shard(sc, group).Update(func(tx *bolt.Tx) error {
		g := tx.Bucket(bGroups).Bucket(groupKey(sc, group))
		if g == nil {
			return errGroupNotFound()
		}
		ss := g.Bucket(bStreams)
		st := ss.Bucket([]byte(stream))
		if st == nil {
			return errStreamNotFound()
		}
		var sm streamMeta
		var gm groupMeta
		if getJSON(st, &sm) == nil && getJSON(g, &gm) == nil {
			gm.StoredBytes -= sm.StoredBytes
			if err := putJSON(g, &gm); err != nil {
				return err
			}
		}
		return ss.DeleteBucket([]byte(stream))
	})
}

// DescribeStreamsInput selects streams of a group.
type DescribeStreamsInput struct {
	// Group is the log group name.
	Group string
	// Prefix keeps streams whose name starts with it; not with OrderByLastEventTime.
	Prefix string
	// OrderByLastEventTime orders by last event time instead of name.
	OrderByLastEventTime bool
	// Descending reverses the order.
	Descending bool
	// Token is the NextToken of the previous page.
	Token string
	// Limit is 1–50; 0 means 50.
	Limit int
}

// DescribeStreams lists a group's streams a page at a time; next is "" on the last
// page. It returns ResourceNotFound for a missing group and InvalidParameter for a bad
// limit, token, or a prefix with OrderByLastEventTime.
func (s *Store) DescribeStreams(sc Scope, in DescribeStreamsInput) (streams []Stream, next string, err error) {
	if err := s.readable(); err != nil {
		return nil, "", err
	}
	if in.Limit == 0 {
		in.Limit = 50
	}
	if in.Limit < 1 || in.Limit > 50 {
		return nil, "", errf(InvalidParameter, "1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 50", in.Limit)
	}
	if in.Prefix != "" && in.OrderByLastEventTime {
		return nil, "", errf(InvalidParameter, "Cannot order by LastEventTime with a logStreamNamePrefix.")
	}
	offset := 0
	if in.Token != "" {
		b, ok := decodeToken(in.Token, "s")
		if !ok || len(b) != 8 {
			return nil, "", errf(InvalidParameter, "The specified nextToken is invalid.")
		}
		offset = int(binary.BigEndian.Uint64(b))
	}
	err = s.shard(sc, in.Group).View(func(tx *bolt.Tx) error {
		g := tx.Bucket(bGroups).Bucket(groupKey(sc, in.Group))
		if g == nil {
			return errGroupNotFound()
		}
		c := g.Bucket(bStreams).Cursor()
		for k, _ := c.Seek([]byte(in.Prefix)); k != nil && strings.HasPrefix(string(k), in.Prefix); k, _ = c.Next() {
			var m streamMeta
			if err := getJSON(g.Bucket(bStreams).Bucket(k), &m); err != nil {
				return err
			}
			streams = append(streams, Stream{Name: string(k), ARN: StreamARN(sc, in.Group, string(k)), CreationTime: m.CreationTime,
				FirstEventTimestamp: m.FirstEventTimestamp, LastEventTimestamp: m.LastEventTimestamp, LastIngestionTime: m.LastIngestionTime, StoredBytes: m.StoredBytes})
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	if in.OrderByLastEventTime {
		sort.SliceStable(streams, func(i, j int) bool { return streams[i].LastEventTimestamp < streams[j].LastEventTimestamp })
	}
	if in.Descending {
		for i, j := 0, len(streams)-1; i < j; i, j = i+1, j-1 {
			streams[i], streams[j] = streams[j], streams[i]
		}
	}
	if offset > len(streams) {
		offset = len(streams)
	}
	streams = streams[offset:]
	if len(streams) > in.Limit {
		streams = streams[:in.Limit]
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(offset+in.Limit))
		next = encodeToken("s", b[:])
	}
	return streams, next, nil
}
