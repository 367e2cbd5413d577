package logstore

import (
	"bytes"
	"strings"
)

// ParsePattern compiles a CloudWatch Logs filter pattern for unstructured events into a
// matcher over an event's message. It supports what the filter-pattern syntax documents
// for plain text: terms separated by spaces must all appear (case-sensitive), a quoted
// "phrase" must appear as written, ?term alternatives match when any of them appears,
// -term excludes events containing it, and an empty pattern (or "") matches every
// event. JSON ({ $.field = … }) and space-delimited ([a, b]) patterns and regular
// expressions (%…%) are refused with InvalidParameter.
func ParsePattern(p string) (func(msg []byte) bool, error) {
	p = strings.TrimSpace(p)
	if p == "" || p == `""` {
		return func([]byte) bool { return true }, nil
	}
	if strings.HasPrefix(p, "{") || strings.HasPrefix(p, "[") || strings.HasPrefix(p, "%") {
		return nil, errf(InvalidParameter, "Invalid filter pattern %q: Berth supports terms, quoted phrases, ?alternatives and -exclusions; JSON, space-delimited and regular-expression patterns are not supported.", p)
	}
	var all, any, none [][]byte
	for len(p) > 0 {
		p = strings.TrimLeft(p, " \t")
		if p == "" {
			break
		}
		kind := byte(0)
		if p[0] == '?' || p[0] == '-' {
			kind, p = p[0], p[1:]
		}
		var term string
		if strings.HasPrefix(p, `"`) {
			end := strings.IndexByte(p[1:], '"')
			if end < 0 {
				return nil, errf(InvalidParameter, "Invalid filter pattern: unbalanced quotes.")
			}
			term, p = p[1:end+1], p[end+2:]
		} else {
			end := strings.IndexAny(p, " \t")
			if end < 0 {
				end = len(p)
			}
			term, p = p[:end], p[end:]
		}
		if term == "" {
			continue
		}
		switch kind {
		case '?':
			any = append(any, []byte(term))
		case '-':
			none = append(none, []byte(term))
		default:
			all = append(all, []byte(term))
		}
	}
	return func(msg []byte) bool {
		for _, t := range none {
			if bytes.Contains(msg, t) {
				return false
			}
		}
		for _, t := range all {
			if !bytes.Contains(msg, t) {
				return false
			}
		}
		if len(any) == 0 {
			return true
		}
		for _, t := range any {
			if bytes.Contains(msg, t) {
				return true
			}
		}
		return false
	}, nil
}
