package lb

import (
	"regexp"
	"strings"
)

// wildcard compiles an ELBv2 condition value into a matcher: '*' matches zero or more
// characters (a '/' included) and '?' exactly one, as the path-pattern and host-header
// conditions define them. Host names compare case-insensitively, paths exactly.
func wildcard(pattern string, foldCase bool) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	if foldCase {
		b.WriteString("(?i)")
	}
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// condition is one compiled rule condition: any of its patterns matches.
type condition struct {
	field    string // "path-pattern" or "host-header"
	patterns []*regexp.Regexp
}

func compileCondition(field string, values []string) condition {
	c := condition{field: field}
	for _, v := range values {
		c.patterns = append(c.patterns, wildcard(v, field == "host-header"))
	}
	return c
}

// match reports whether the request's host (port stripped) or path matches.
func (c condition) match(host, path string) bool {
	subject := path
	if c.field == "host-header" {
		subject = host
	}
	for _, p := range c.patterns {
		if p.MatchString(subject) {
			return true
		}
	}
	return false
}
