package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Pattern is a compiled EventBridge event pattern
// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html and
// eb-create-pattern-operators.html). An event matches when every field the pattern
// names matches: a nested object descends into the event's object (into each element
// of an array of objects, any of which may match); an array lists the values the
// event's field may take, any one sufficing (against an array in the event, any
// element). A value is a literal (string, number compared numerically, true, false,
// null) or one of the operators prefix, suffix, equals-ignore-case, wildcard,
// anything-but (of literals, or of a prefix, suffix, equals-ignore-case or wildcard),
// numeric (=, <, <=, >, >= with up to two comparisons), exists and cidr; "$or" takes a
// list of patterns of which one must match beside the other fields.
type Pattern struct{ root *node }

// node is one object level of a pattern.
type node struct {
	fields []field
	or     [][]*node // each $or at this level: one of its alternatives must match
}

type field struct {
	name  string
	sub   *node   // nested object
	conds []*cond // leaf
}

type condKind int

const (
	condExact condKind = iota
	condPrefix
	condSuffix
	condIgnoreCase
	condWildcard
	condAnythingBut
	condNumeric
	condExists
	condCIDR
)

type cond struct {
	kind   condKind
	value  any       // condExact: string, float64, bool or nil; text operators: string
	fold   bool      // prefix/suffix with equals-ignore-case
	but    []*cond   // anything-but: the conditions none may match
	ranges []numComp // numeric
	exists bool
	prefix netip.Prefix
}

type numComp struct {
	op string
	v  float64
}

// patternError is InvalidEventPatternException with AWS's message prefix.
func patternError(format string, args ...any) error {
	return newError("InvalidEventPatternException", "Event pattern is not valid. Reason: "+format, args...)
}

// CompilePattern parses an EventPattern; a malformed one answers
// InvalidEventPatternException naming what is wrong.
func CompilePattern(text string) (*Pattern, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, patternError("Filter is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, patternError("Filter is not valid JSON: data after the pattern")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, patternError("Filter is not an object")
	}
	n, err := compileNode(obj, "")
	if err != nil {
		return nil, err
	}
	return &Pattern{root: n}, nil
}

func compileNode(obj map[string]any, path string) (*node, error) {
	if len(obj) == 0 {
		return nil, patternError("Empty objects are not allowed at %q", path)
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	n := &node{}
	for _, k := range names {
		p := k
		if path != "" {
			p = path + "." + k
		}
		switch v := obj[k].(type) {
		case map[string]any:
			sub, err := compileNode(v, p)
			if err != nil {
				return nil, err
			}
			n.fields = append(n.fields, field{name: k, sub: sub})
		case []any:
			if k == "$or" {
				if len(v) < 2 {
					return nil, patternError("$or must list at least two patterns at %q", path)
				}
				var alts []*node
				for _, a := range v {
					ao, ok := a.(map[string]any)
					if !ok {
						return nil, patternError("$or must list objects at %q", path)
					}
					an, err := compileNode(ao, path)
					if err != nil {
						return nil, err
					}
					alts = append(alts, an)
				}
				n.or = append(n.or, alts)
				continue
			}
			if len(v) == 0 {
				return nil, patternError("Empty arrays are not allowed at %q", p)
			}
			f := field{name: k}
			for _, item := range v {
				c, err := compileCond(item, p)
				if err != nil {
					return nil, err
				}
				f.conds = append(f.conds, c)
			}
			n.fields = append(n.fields, f)
		default:
			return nil, patternError("Match value must be String, number, true, false, or null at %q", p)
		}
	}
	return n, nil
}

func literal(v any) (any, bool) {
	switch x := v.(type) {
	case nil, string, bool:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return nil, false
}

func compileCond(item any, path string) (*cond, error) {
	if lit, ok := literal(item); ok {
		return &cond{kind: condExact, value: lit}, nil
	}
	obj, ok := item.(map[string]any)
	if !ok || len(obj) != 1 {
		return nil, patternError("Match value must be String, number, true, false, null or an object with one operator at %q", path)
	}
	for op, arg := range obj {
		switch op {
		case "prefix", "suffix":
			kind := condPrefix
			if op == "suffix" {
				kind = condSuffix
			}
			if s, ok := arg.(string); ok {
				return &cond{kind: kind, value: s}, nil
			}
			if m, ok := arg.(map[string]any); ok && len(m) == 1 {
				if s, ok := m["equals-ignore-case"].(string); ok {
					return &cond{kind: kind, value: strings.ToLower(s), fold: true}, nil
				}
			}
			return nil, patternError("%s match pattern must be a string at %q", op, path)
		case "equals-ignore-case":
			s, ok := arg.(string)
			if !ok {
				return nil, patternError("equals-ignore-case match pattern must be a string at %q", path)
			}
			return &cond{kind: condIgnoreCase, value: strings.ToLower(s)}, nil
		case "wildcard":
			s, ok := arg.(string)
			if !ok || strings.Contains(s, "**") {
				return nil, patternError("wildcard match pattern must be a string without consecutive '*' at %q", path)
			}
			return &cond{kind: condWildcard, value: s}, nil
		case "exists":
			b, ok := arg.(bool)
			if !ok {
				return nil, patternError("exists match pattern must be either true or false at %q", path)
			}
			return &cond{kind: condExists, exists: b}, nil
		case "cidr":
			s, ok := arg.(string)
			pfx, err := netip.ParsePrefix(s)
			if !ok || err != nil {
				return nil, patternError("Malformed CIDR at %q", path)
			}
			return &cond{kind: condCIDR, prefix: pfx.Masked()}, nil
		case "numeric":
			return compileNumeric(arg, path)
		case "anything-but":
			return compileAnythingBut(arg, path)
		default:
			return nil, patternError("Unrecognized match type %s at %q", op, path)
		}
	}
	return nil, nil // unreachable: obj has one key
}

func compileNumeric(arg any, path string) (*cond, error) {
	list, ok := arg.([]any)
	if !ok || (len(list) != 2 && len(list) != 4) {
		return nil, patternError("Value of numeric must be an array of one or two comparisons at %q", path)
	}
	c := &cond{kind: condNumeric}
	for i := 0; i < len(list); i += 2 {
		op, ok := list[i].(string)
		num, isNum := list[i+1].(json.Number)
		if !ok || !isNum {
			return nil, patternError("Value of numeric must be an array of operators and numbers at %q", path)
		}
		switch op {
		case "=", "<", "<=", ">", ">=":
		default:
			return nil, patternError("Unrecognized numeric range operator: %s at %q", op, path)
		}
		f, err := num.Float64()
		if err != nil {
			return nil, patternError("Bad number %s at %q", num, path)
		}
		c.ranges = append(c.ranges, numComp{op: op, v: f})
	}
	if len(c.ranges) == 2 && (c.ranges[0].op == "=" || c.ranges[1].op == "=") {
		return nil, patternError("numeric = takes no second comparison at %q", path)
	}
	return c, nil
}

func compileAnythingBut(arg any, path string) (*cond, error) {
	c := &cond{kind: condAnythingBut}
	switch a := arg.(type) {
	case []any:
		if len(a) == 0 {
			return nil, patternError("Empty arrays are not allowed at %q", path)
		}
		for _, x := range a {
			lit, ok := literal(x)
			if !ok || lit == nil {
				return nil, patternError("Inside anything-but list, only strings and numbers are allowed at %q", path)
			}
			c.but = append(c.but, &cond{kind: condExact, value: lit})
		}
	case map[string]any:
		if len(a) != 1 {
			return nil, patternError("Value of anything-but must be one operator at %q", path)
		}
		for op := range a {
			switch op {
			case "prefix", "suffix", "wildcard":
			case "equals-ignore-case":
				if list, ok := a[op].([]any); ok {
					for _, x := range list {
						s, ok := x.(string)
						if !ok {
							return nil, patternError("Inside anything-but/equals-ignore-case list, only strings are allowed at %q", path)
						}
						c.but = append(c.but, &cond{kind: condIgnoreCase, value: strings.ToLower(s)})
					}
					return c, nil
				}
			default:
				return nil, patternError("Unsupported anything-but pattern: %s at %q", op, path)
			}
		}
		inner, err := compileCond(a, path)
		if err != nil {
			return nil, err
		}
		c.but = []*cond{inner}
	default:
		lit, ok := literal(arg)
		if !ok || lit == nil {
			return nil, patternError("Value of anything-but must be a string, number, array or operator at %q", path)
		}
		c.but = []*cond{{kind: condExact, value: lit}}
	}
	return c, nil
}

// Match reports whether the event (a JSON object) matches p; an event that is not a
// JSON object matches nothing.
func (p *Pattern) Match(event []byte) bool {
	v, err := decodeEvent(event)
	if err != nil {
		return false
	}
	return p.MatchValue(v)
}

// MatchValue is Match for an event already decoded with json.Decoder.UseNumber.
func (p *Pattern) MatchValue(event any) bool {
	obj, ok := event.(map[string]any)
	return ok && p.root.match(obj)
}

func decodeEvent(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func (n *node) match(obj map[string]any) bool {
	for _, f := range n.fields {
		v, present := obj[f.name]
		if f.sub != nil {
			if !f.sub.matchValue(v, present) {
				return false
			}
			continue
		}
		if !matchLeaf(f.conds, v, present) {
			return false
		}
	}
	for _, alts := range n.or {
		any := false
		for _, a := range alts {
			if a.match(obj) {
				any = true
				break
			}
		}
		if !any {
			return false
		}
	}
	return true
}

// matchValue matches a nested pattern against an event value: an object, an array of
// which any object element may match, or nothing (which only exists:false satisfies).
func (n *node) matchValue(v any, present bool) bool {
	switch x := v.(type) {
	case map[string]any:
		return n.match(x)
	case []any:
		for _, e := range x {
			if o, ok := e.(map[string]any); ok && n.match(o) {
				return true
			}
		}
		return false
	}
	if present {
		return false
	}
	return n.match(map[string]any{})
}

func matchLeaf(conds []*cond, v any, present bool) bool {
	for _, c := range conds {
		if c.kind == condExists {
			if c.exists == (present && isLeaf(v)) {
				return true
			}
			continue
		}
		if !present {
			continue
		}
		if list, ok := v.([]any); ok {
			for _, e := range list {
				if c.matchScalar(e) {
					return true
				}
			}
			continue
		}
		if c.matchScalar(v) {
			return true
		}
	}
	return false
}

// isLeaf reports whether v is a value exists:true accepts: a scalar or an array of
// scalars (AWS's exists works on leaf nodes only).
func isLeaf(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return false
	case []any:
		for _, e := range x {
			if !isLeaf(e) {
				return false
			}
		}
	}
	return true
}

func (c *cond) matchScalar(v any) bool {
	if _, isObj := v.(map[string]any); isObj {
		return false
	}
	s, isStr := v.(string)
	switch c.kind {
	case condExact:
		lit, ok := literal(v)
		return ok && lit == c.value
	case condPrefix:
		if c.fold {
			s = strings.ToLower(s)
		}
		return isStr && strings.HasPrefix(s, c.value.(string))
	case condSuffix:
		if c.fold {
			s = strings.ToLower(s)
		}
		return isStr && strings.HasSuffix(s, c.value.(string))
	case condIgnoreCase:
		return isStr && strings.ToLower(s) == c.value.(string)
	case condWildcard:
		return isStr && wildcard(c.value.(string), s)
	case condCIDR:
		addr, err := netip.ParseAddr(s)
		return isStr && err == nil && c.prefix.Contains(addr)
	case condNumeric:
		num, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := num.Float64()
		if err != nil {
			return false
		}
		for _, r := range c.ranges {
			if !r.holds(f) {
				return false
			}
		}
		return true
	case condAnythingBut:
		if _, ok := literal(v); !ok {
			return false
		}
		for _, b := range c.but {
			if b.matchScalar(v) {
				return false
			}
		}
		return true
	}
	return false
}

func (r numComp) holds(f float64) bool {
	switch r.op {
	case "=":
		return f == r.v
	case "<":
		return f < r.v
	case "<=":
		return f <= r.v
	case ">":
		return f > r.v
	case ">=":
		return f >= r.v
	}
	return false
}

// wildcard matches s against a pattern where '*' stands for any run of characters.
func wildcard(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

// String is for logs.
func (p *Pattern) String() string { return fmt.Sprintf("pattern(%d fields)", len(p.root.fields)) }
