package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Line is one captured line.
type Line struct {
	// Container is the container's name in its task definition.
	Container string `json:"-"`
	// Stream is "stdout" or "stderr".
	Stream string `json:"s"`
	// Time is when the agent captured the line.
	Time time.Time `json:"t"`
	// Text is the line without its newline.
	Text string `json:"l"`
}

// Config configures a Store.
type Config struct {
	// Dir holds one directory per task.
	Dir string
	// MaxFileBytes rotates a container's log when it grows past this
	// size; default 10 MiB.
	MaxFileBytes int64
	// MaxFiles is how many files (current plus rotated) are kept per
	// container; default 3.
	MaxFiles int
	// Retention is how long logs are kept after their task's containers
	// are removed; default 3 h.
	Retention time.Duration
	// FollowPoll is how often a follow checks for new lines; default 200 ms.
	FollowPoll time.Duration
}

// Store writes and reads container logs. Methods are safe for concurrent
// use.
type Store struct {
	cfg Config

	mu     sync.Mutex
	active map[string]int // path of a current log → open writers
}

// NewStore returns a store over cfg.Dir, created if missing.
func NewStore(cfg Config) (*Store, error) {
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = 10 << 20
	}
	if cfg.MaxFiles <= 0 {
		cfg.MaxFiles = 3
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 3 * time.Hour
	}
	if cfg.FollowPoll <= 0 {
		cfg.FollowPoll = 200 * time.Millisecond
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("logs: create %s: %w", cfg.Dir, err)
	}
	return &Store{cfg: cfg, active: map[string]int{}}, nil
}

// TaskID returns the directory name for a task ARN: its last path segment.
func TaskID(taskARN string) string {
	id := taskARN[strings.LastIndex(taskARN, "/")+1:]
	id = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, id)
	if id == "" || id == "." || id == ".." {
		id = "_"
	}
	return id
}

func (s *Store) path(taskARN, container string) string {
	return filepath.Join(s.cfg.Dir, TaskID(taskARN), container+".log")
}

// Open returns writers for a container's stdout and stderr, which append
// lines to its log, and a close function that flushes partial lines and
// marks the log complete for followers. It returns an error if the log
// cannot be opened.
func (s *Store) Open(taskARN, container string) (stdout, stderr io.Writer, closeFn func() error, err error) {
	p := s.path(taskARN, container)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, nil, nil, fmt.Errorf("logs: create dir for %s: %w", p, err)
	}
	_ = os.Remove(filepath.Join(filepath.Dir(p), removedMarker))
	if err := os.WriteFile(filepath.Join(filepath.Dir(p), arnFile), []byte(taskARN), 0o600); err != nil {
		return nil, nil, nil, fmt.Errorf("logs: record ARN of %s: %w", taskARN, err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("logs: open %s: %w", p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, nil, fmt.Errorf("logs: stat %s: %w", p, err)
	}
	s.mu.Lock()
	s.active[p]++
	s.mu.Unlock()
	fw := &fileWriter{store: s, path: p, f: f, size: fi.Size()}
	out, errw := &lineWriter{fw: fw, stream: "stdout"}, &lineWriter{fw: fw, stream: "stderr"}
	var once sync.Once
	closeFn = func() error {
		var cerr error
		once.Do(func() {
			out.flush()
			errw.flush()
			fw.mu.Lock()
			cerr = fw.f.Close()
			fw.mu.Unlock()
			s.mu.Lock()
			if s.active[p]--; s.active[p] <= 0 {
				delete(s.active, p)
			}
			s.mu.Unlock()
		})
		return cerr
	}
	return out, errw, closeFn, nil
}

func (s *Store) isActive(p string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[p] > 0
}

// fileWriter appends encoded lines to a container's current log file and
// rotates it by size.
type fileWriter struct {
	store *Store
	path  string

	mu   sync.Mutex
	f    *os.File
	size int64
}

func (w *fileWriter) writeLine(l Line) {
	b, err := json.Marshal(l)
	if err != nil {
		return
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.size > 0 && w.size+int64(len(b)) > w.store.cfg.MaxFileBytes {
		w.rotate()
	}
	n, _ := w.f.Write(b)
	w.size += int64(n)
}

// rotate shifts path.N to path.N+1 (dropping the oldest) and starts a new
// current file. Errors leave the current file in use.
func (w *fileWriter) rotate() {
	max := w.store.cfg.MaxFiles
	_ = os.Remove(w.path + "." + strconv.Itoa(max-1))
	for i := max - 2; i >= 1; i-- {
		_ = os.Rename(w.path+"."+strconv.Itoa(i), w.path+"."+strconv.Itoa(i+1))
	}
	if max > 1 {
		if err := os.Rename(w.path, w.path+".1"); err != nil {
			return
		}
	}
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	w.f.Close()
	w.f, w.size = f, 0
}

// lineWriter splits one stream's output into lines.
type lineWriter struct {
	fw     *fileWriter
	stream string

	mu  sync.Mutex
	buf []byte
}

// maxLine bounds a line; longer output is split, as Docker splits at 16 KiB.
const maxLine = 16 << 10

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) >= maxLine {
				w.emit(w.buf[:maxLine])
				w.buf = w.buf[maxLine:]
				continue
			}
			break
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) == 0 {
		w.buf = nil
	}
	return len(p), nil
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
}

func (w *lineWriter) emit(b []byte) {
	w.fw.writeLine(Line{Stream: w.stream, Time: time.Now().UTC(), Text: string(b)})
}

// removedMarker, in a task's log directory, records when the task's
// containers were removed; Sweep deletes the directory a retention period
// later.
const removedMarker = ".removed"

// arnFile, in a task's log directory, holds the full task ARN the logs were written
// for. The directory is named by the task id alone, so Read checks an ARN it is asked
// for against this file: an ARN of another partition, region or account with the same
// id is another task, whose logs this agent does not have.
const arnFile = ".arn"

// ownerPrefix returns "arn:{partition}:ecs:{region}:{account}:" of an ARN, or "" for
// a string that is not one (a bare task id).
func ownerPrefix(a string) string {
	parts := strings.SplitN(a, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return ""
	}
	return strings.Join(parts[:5], ":") + ":"
}

// sameTask reports whether the task ARN (or id) a reader asked for names the task whose
// logs are in dir: a bare id matches by id (the directory name); an ARN must also have
// the partition, region and account of the recorded ARN. Logs written before the ARN
// was recorded match by id.
func sameTask(dir, asked string) bool {
	want := ownerPrefix(asked)
	if want == "" {
		return true
	}
	rec, err := os.ReadFile(filepath.Join(dir, arnFile))
	if err != nil {
		return true
	}
	return ownerPrefix(string(rec)) == want
}

// MarkRemoved records that the task's containers were removed, starting
// its logs' retention period.
func (s *Store) MarkRemoved(taskARN string) error {
	dir := filepath.Join(s.cfg.Dir, TaskID(taskARN))
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, removedMarker), nil, 0o600); err != nil {
		return fmt.Errorf("logs: mark %s removed: %w", taskARN, err)
	}
	return nil
}

// Sweep deletes the logs of tasks whose containers were removed longer
// than the retention period before now. It returns the number of tasks
// whose logs it deleted.
func (s *Store) Sweep(now time.Time) (int, error) {
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return 0, fmt.Errorf("logs: sweep: %w", err)
	}
	n := 0
	var errs []error
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(s.cfg.Dir, e.Name())
		fi, err := os.Stat(filepath.Join(dir, removedMarker))
		if err != nil || now.Sub(fi.ModTime()) < s.cfg.Retention {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// ReadRequest selects lines.
type ReadRequest struct {
	// TaskARN is the task whose logs to read.
	TaskARN string
	// Container is one container's name; empty reads all the task's
	// containers, one after another.
	Container string
	// Tail keeps only the last N lines (per container); 0 keeps all.
	Tail int
	// Since skips lines captured before it; zero keeps all.
	Since time.Time
	// Follow keeps reading new lines until the container's writers close
	// and ctx is done.
	Follow bool
}

// ErrNoLogs is returned by Read when the task (or container) has no logs.
var ErrNoLogs = errors.New("logs: no logs for task")

// Read sends the selected lines to send in batches, oldest first. With
// Follow it polls for new lines until every selected container's log is
// complete or ctx is done. It returns ErrNoLogs if nothing matches — also for
// a task ARN whose partition, region or account is not that of the task with
// its id — or send's error.
func (s *Store) Read(ctx context.Context, req ReadRequest, send func([]Line) error) error {
	dir := filepath.Join(s.cfg.Dir, TaskID(req.TaskARN))
	if !sameTask(dir, req.TaskARN) {
		return fmt.Errorf("%w %s: this agent ran no task with that ARN (its partition, region or account differs)", ErrNoLogs, req.TaskARN)
	}
	var names []string
	if req.Container != "" {
		names = []string{req.Container}
		// A rotation renames the log to .1 before it creates the next: between the two,
		// only the rotated file says the container has logs.
		base := filepath.Join(dir, req.Container+".log")
		if _, err := os.Stat(base); err != nil {
			if _, err := os.Stat(base + ".1"); err != nil {
				return fmt.Errorf("%w %s container %s", ErrNoLogs, req.TaskARN, req.Container)
			}
		}
	} else {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("%w %s", ErrNoLogs, req.TaskARN)
		}
		for _, e := range ents {
			if n, ok := strings.CutSuffix(e.Name(), ".log"); ok && !e.IsDir() {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return fmt.Errorf("%w %s", ErrNoLogs, req.TaskARN)
		}
	}
	if !req.Follow {
		for _, n := range names {
			if err := s.readOne(ctx, dir, n, req, send); err != nil {
				return err
			}
		}
		return nil
	}
	var mu sync.Mutex // serialises send across containers
	locked := func(l []Line) error { mu.Lock(); defer mu.Unlock(); return send(l) }
	errc := make(chan error, len(names))
	for _, n := range names {
		go func() { errc <- s.readOne(ctx, dir, n, req, locked) }()
	}
	var errs []error
	for range names {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readOne sends one container's lines (see Read). It reads the files it opened, never
// a path again: a rotation renames every file to the next path, so reading by path
// after a listing, or the newest path after a poll, skipped a file, mixed one file's
// offset with another's, or read a file twice. The files come from openLogFiles (in
// order, each once); a follow keeps the newest open, reads it to its end, then the files
// rotated in after it, from a listing taken newest path first and used only when it is
// in order (such a listing misses no file: one it lacks was deleted), else left to the
// next poll. Lines of files rotated past MaxFiles between two polls are lost, as they
// are for every reader. With MaxFiles 1 a rotation truncates the file in place: a
// follow reads it again from 0 when it finds it shorter than its offset, and misses what
// was written past that offset before the truncation.
func (s *Store) readOne(ctx context.Context, dir, container string, req ReadRequest, send func([]Line) error) error {
	base := filepath.Join(dir, container+".log")
	files := openLogFiles(base, s.cfg.MaxFiles)
	var lines []Line
	var cur logFile // the newest file read, kept open to follow it
	var off int64   // cur's offset after its last complete line
	for i, f := range files {
		l, next := readOpen(f.f, 0, container, req.Since)
		lines = append(lines, l...)
		if i < len(files)-1 {
			f.f.Close()
			continue
		}
		cur, off = f, next
	}
	defer func() {
		if cur.f != nil {
			cur.f.Close()
		}
	}()
	if req.Tail > 0 && len(lines) > req.Tail {
		lines = lines[len(lines)-req.Tail:]
	}
	if err := sendBatches(lines, send); err != nil {
		return err
	}
	if !req.Follow {
		return nil
	}
	t := time.NewTicker(s.cfg.FollowPoll)
	defer t.Stop()
	for {
		active := s.isActive(base)
		// base's file before cur's rest: once base holds another file, the writer has
		// finished with cur (it rotates before it writes to the next file).
		n := inode(base)
		var l []Line
		if cur.f != nil {
			if fi, err := cur.f.Stat(); err == nil && fi.Size() < off {
				off = 0 // truncated in place (MaxFiles 1 rotates so)
			}
			l, off = readOpen(cur.f, off, container, req.Since)
		}
		if n != 0 && n != cur.ino {
			// Rotated (or created) since: the files after cur, oldest first (all of them
			// when cur was deleted, rotated past MaxFiles, or there was none); the newest
			// becomes cur. A listing a rotation disturbed is left to the next poll.
			files, inOrder := openLogFilesOnce(base, s.cfg.MaxFiles)
			if !inOrder {
				for _, f := range files {
					f.f.Close()
				}
				files = nil
			}
			from := 0
			for i, f := range files {
				if f.ino == cur.ino {
					from = i + 1
				}
			}
			for i, f := range files {
				if i >= from {
					more, next := readOpen(f.f, 0, container, req.Since)
					l = append(l, more...)
					if i == len(files)-1 {
						if cur.f != nil {
							cur.f.Close()
						}
						cur, off = f, next
						continue
					}
				}
				f.f.Close()
			}
		}
		if err := sendBatches(l, send); err != nil {
			return err
		}
		if !active {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func sendBatches(lines []Line, send func([]Line) error) error {
	const batch = 500
	for len(lines) > 0 {
		n := min(batch, len(lines))
		if err := send(lines[:n]); err != nil {
			return err
		}
		lines = lines[n:]
	}
	return nil
}

func inode(path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return statIno(fi)
}

// readOpen reads f's complete lines from offset on (lines before since left out; see
// readLines) and returns them with the offset after the last complete line.
func readOpen(f *os.File, offset int64, container string, since time.Time) ([]Line, int64) {
	var out []Line
	_ = readLines(f, offset, func(l Line, end int64) {
		offset = end
		if !since.IsZero() && l.Time.Before(since) {
			return
		}
		l.Container = container
		out = append(out, l)
	})
	return out, offset
}
