package logs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Destination is where the awslogs driver ships a container's output: a CloudWatch
// Logs stream in Berth's log store, with the driver's delivery options. The agent
// records it beside the container's log file, so shipping resumes after a restart.
type Destination struct {
	// Region is awslogs-region; empty means the agent's region.
	Region string `json:"region,omitempty"`
	// Group is awslogs-group.
	Group string `json:"group"`
	// Stream is prefix/container-name/task-id, or the container id without a prefix (as
	// ECS names streams on EC2).
	Stream string `json:"stream"`
	// CreateGroup is awslogs-create-group.
	CreateGroup bool `json:"createGroup,omitempty"`
	// Blocking is mode blocking: output is kept on the agent's disk until shipped.
	// Non-blocking (the default) drops the oldest unshipped output beyond MaxBufferBytes.
	Blocking bool `json:"blocking,omitempty"`
	// MaxBufferBytes is max-buffer-size for non-blocking mode; default 10 MiB.
	MaxBufferBytes int64 `json:"maxBufferBytes,omitempty"`
	// Redacted is set when an option came from logConfiguration.secretOptions: the
	// agent's log then names neither the group nor the stream.
	Redacted bool `json:"redacted,omitempty"`
	// MultilinePattern is a regular expression that starts an event (from
	// awslogs-multiline-pattern, or awslogs-datetime-format converted); lines that do not
	// match are appended to the event before them. Empty: one event per line.
	MultilinePattern string `json:"multilinePattern,omitempty"`
}

// DefaultMaxBufferBytes is max-buffer-size when the option is absent.
const DefaultMaxBufferBytes = 10 << 20

// ParseAWSLogs returns the destination of a container whose logConfiguration uses the
// awslogs driver with opts. containerID names the stream when there is no
// awslogs-stream-prefix. It returns an error naming the option for a value the
// driver refuses (the control plane checks them at registration too).
func ParseAWSLogs(opts map[string]string, taskARN, container, containerID string) (Destination, error) {
	d := Destination{Region: opts["awslogs-region"], Group: opts["awslogs-group"], MaxBufferBytes: DefaultMaxBufferBytes}
	if d.Group == "" {
		return d, fmt.Errorf("awslogs-group is required")
	}
	d.Stream = containerID
	if p := opts["awslogs-stream-prefix"]; p != "" {
		d.Stream = p + "/" + container + "/" + TaskID(taskARN)
	}
	if v, ok := opts["awslogs-create-group"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return d, fmt.Errorf("awslogs-create-group %q: %w", v, err)
		}
		d.CreateGroup = b
	}
	switch opts["mode"] {
	case "", "non-blocking":
	case "blocking":
		d.Blocking = true
	default:
		return d, fmt.Errorf("mode %q: must be blocking or non-blocking", opts["mode"])
	}
	if v, ok := opts["max-buffer-size"]; ok {
		n, err := parseSize(v)
		if err != nil {
			return d, fmt.Errorf("max-buffer-size: %w", err)
		}
		d.MaxBufferBytes = n
	}
	if p, ok := opts["awslogs-multiline-pattern"]; ok {
		if _, err := regexp.Compile(p); err != nil {
			return d, fmt.Errorf("awslogs-multiline-pattern: %w", err)
		}
		d.MultilinePattern = p
	}
	if f, ok := opts["awslogs-datetime-format"]; ok {
		if d.MultilinePattern != "" {
			return d, fmt.Errorf("you cannot configure log opt 'awslogs-datetime-format' and 'awslogs-multiline-pattern' at the same time")
		}
		d.MultilinePattern = "^" + strftimeRegexp(f)
	}
	return d, nil
}

// parseSize parses a size such as 25m, 512k or 1g (powers of 1024, as Docker's
// RAMInBytes); a bare number is bytes.
func parseSize(v string) (int64, error) {
	m := regexp.MustCompile(`^([0-9]+)([kKmMgG]?)[bB]?$`).FindStringSubmatch(v)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size such as 25m", v)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive size", v)
	}
	switch strings.ToLower(m[2]) {
	case "k":
		n <<= 10
	case "m":
		n <<= 20
	case "g":
		n <<= 30
	}
	return n, nil
}

// strftimeRegexp converts a strftime format to a regular expression with the
// directives Docker's awslogs driver documents (%a %A %b %B %d %f %H %I %j %m %M %p %S
// %U %w %W %y %Y %z %Z %%); other text is matched literally.
func strftimeRegexp(f string) string {
	dir := map[byte]string{
		'a': `(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)`, 'A': `(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)`,
		'b': `(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)`, 'B': `(?:January|February|March|April|May|June|July|August|September|October|November|December)`,
		'd': `(?:0[1-9]|[1,2][0-9]|3[0,1])`, 'f': `[0-9]{1,6}`, 'H': `(?:[0,1][0-9]|2[0-3])`, 'I': `(?:0[0-9]|1[0-2])`,
		'j': `(?:0[0-9][1-9]|[1,2][0-9][0-9]|3[0-5][0-9]|36[0-6])`, 'm': `(?:0[1-9]|1[0-2])`, 'M': `[0-5][0-9]`,
		'p': `[A,P]M`, 'S': `[0-5][0-9]`, 'U': `(?:[0-4][0-9]|5[0-3])`, 'w': `[0-6]`, 'W': `(?:[0-4][0-9]|5[0-3])`,
		'y': `[0-9]{2}`, 'Y': `[0-9]{4}`, 'z': `[+-][0-9]{4}`, 'Z': `[A-Z]{3}`, '%': `%`,
	}
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] == '%' && i+1 < len(f) {
			if r, ok := dir[f[i+1]]; ok {
				b.WriteString(r)
				i++
				continue
			}
		}
		b.WriteString(regexp.QuoteMeta(string(f[i])))
	}
	return b.String()
}

// destSuffix names a container's destination file beside its log.
const destSuffix = ".awslogs"

// SetDestination records that a container's output is shipped to d. It returns an
// error if the record cannot be written.
func (s *Store) SetDestination(taskARN, container string, d Destination) error {
	p := s.path(taskARN, container)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("logs: create dir for %s: %w", p, err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	tmp := p + destSuffix + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("logs: record destination of %s: %w", p, err)
	}
	return os.Rename(tmp, strings.TrimSuffix(p, ".log")+destSuffix)
}
