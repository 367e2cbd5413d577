package cql

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// ErrExpression is returned (wrapped, with the position and what was expected) for a
// cluster query language expression that does not parse or uses an unknown subject or an
// operator the subject does not support.
var ErrExpression = errors.New("invalid cluster query language expression")

// Expr is a parsed cluster query language expression, as used by memberOf placement
// constraints and ListContainerInstances' filter. It is immutable and safe for concurrent
// use.
//
// The grammar follows AWS's "Cluster query language"
// (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/cluster-query-language.html):
//
//	expr    := or
//	or      := and { ("or" | "||") and }
//	and     := unary { ("and" | "&&") unary }
//	unary   := ("not" | "!") unary | "(" expr ")" | term
//	term    := subject op [argument]
//	op      := "==" | "!=" | ">" | ">=" | "<" | "<=" | "=~" | "!~"
//	         | "in" | "!in" | "not_in" | "not in" | "exists" | "!exists" | "not exists"
//	argument:= value | "[" value {"," value} "]" | "(" value {"," value} ")"
//	value   := bare word | 'single quoted' | "double quoted"
//
// Subjects: attribute:{name}, ec2InstanceId, instanceId (Berth's container instance id),
// agentConnected, agentVersion, registeredAt, runningTasksCount and task:group. Matches
// (=~, !~) take a regular expression anchored at both ends or a glob (* for any run of
// characters); a value matches when either does.
type Expr struct {
	src  string
	root node
}

// Subject is what an expression is evaluated against: a container instance as the
// consumer sees it.
type Subject interface {
	// Attribute returns the value of the named attribute ("" for a valueless one) and
	// whether the instance has it.
	Attribute(name string) (value string, ok bool)
	// Builtins returns the values of the built-in subjects.
	Builtins() Builtins
}

// Builtins are the values of the subjects other than attribute:{name}.
type Builtins struct {
	// InstanceID is the container instance id (instanceId, containerInstanceId).
	InstanceID string
	// EC2InstanceID is the ec2InstanceId, "" when there is none.
	EC2InstanceID string
	// AgentConnected is agentConnected.
	AgentConnected bool
	// AgentVersion is agentVersion, compared as a dotted version.
	AgentVersion string
	// RegisteredAt is registeredAt, zero when unknown.
	RegisteredAt time.Time
	// RunningTasksCount is runningTasksCount.
	RunningTasksCount int
	// TaskGroups counts the instance's tasks by group; the groups with a positive count
	// are its task:group values. Nil when unknown (task:group then has no values).
	TaskGroups map[string]int
}

// String returns the expression as written.
func (e *Expr) String() string { return e.src }

// Match reports whether the subject satisfies the expression. A nil Expr matches
// everything.
func (e *Expr) Match(in Subject) bool {
	if e == nil {
		return true
	}
	return e.root.eval(in)
}

// ParseExpr parses a cluster query language expression. It returns an error wrapping
// ErrExpression when the text is malformed.
func ParseExpr(src string) (*Expr, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	root, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errorf(t, "unexpected %q", t.text)
	}
	return &Expr{src: src, root: root}, nil
}

// Lexer.

type tokKind int

const (
	tEOF tokKind = iota
	tWord
	tString
	tSym // operator characters such as == != =~
	tLParen
	tRParen
	tLBrack
	tRBrack
	tComma
)

type token struct {
	kind tokKind
	text string
	pos  int
}

const symChars = "=!<>~&|"

func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(src) {
		c := rune(src[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '(':
			toks = append(toks, token{tLParen, "(", i})
			i++
		case c == ')':
			toks = append(toks, token{tRParen, ")", i})
			i++
		case c == '[':
			toks = append(toks, token{tLBrack, "[", i})
			i++
		case c == ']':
			toks = append(toks, token{tRBrack, "]", i})
			i++
		case c == ',':
			toks = append(toks, token{tComma, ",", i})
			i++
		case c == '\'' || c == '"':
			end := strings.IndexByte(src[i+1:], byte(c))
			if end < 0 {
				return nil, fmt.Errorf("%w: unterminated quote at %d in %q", ErrExpression, i, src)
			}
			toks = append(toks, token{tString, src[i+1 : i+1+end], i})
			i += end + 2
		case strings.ContainsRune(symChars, c):
			j := i
			for j < len(src) && strings.ContainsRune(symChars, rune(src[j])) {
				j++
			}
			toks = append(toks, token{tSym, src[i:j], i})
			i = j
		default:
			j := i
			for j < len(src) {
				r := rune(src[j])
				if unicode.IsSpace(r) || strings.ContainsRune("()[],'\""+symChars, r) {
					break
				}
				j++
			}
			toks = append(toks, token{tWord, src[i:j], i})
			i = j
		}
	}
	return append(toks, token{tEOF, "", len(src)}), nil
}

// Parser.

type parser struct {
	src  string
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) peekAt(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) errorf(t token, format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d in %q", ErrExpression, fmt.Sprintf(format, args...), t.pos, p.src)
}

func isWord(t token, words ...string) bool {
	if t.kind != tWord {
		return false
	}
	for _, w := range words {
		if strings.EqualFold(t.text, w) {
			return true
		}
	}
	return false
}

func (p *parser) parseOr() (node, error) {
	left, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if !isWord(t, "or") && !(t.kind == tSym && t.text == "||") {
			return left, nil
		}
		p.next()
		right, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		left = orNode{left, right}
	}
}

func (p *parser) parseAnd() (node, error) {
	left, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if !isWord(t, "and") && !(t.kind == tSym && t.text == "&&") {
			return left, nil
		}
		p.next()
		right, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		left = andNode{left, right}
	}
}

func (p *parser) parseUnary() (node, error) {
	t := p.peek()
	switch {
	case isWord(t, "not") || (t.kind == tSym && t.text == "!"):
		p.next()
		inner, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return notNode{inner}, nil
	case t.kind == tLParen:
		p.next()
		inner, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tRParen {
			return nil, p.errorf(c, "expected ')'")
		}
		return inner, nil
	case t.kind == tWord:
		return p.parseTerm()
	case t.kind == tEOF:
		return nil, p.errorf(t, "unexpected end of expression")
	}
	return nil, p.errorf(t, "unexpected %q", t.text)
}

// Operators after normalisation.
const (
	opEq        = "=="
	opNe        = "!="
	opGt        = ">"
	opGe        = ">="
	opLt        = "<"
	opLe        = "<="
	opMatch     = "=~"
	opNotMatch  = "!~"
	opIn        = "in"
	opNotIn     = "!in"
	opExists    = "exists"
	opNotExists = "!exists"
)

func (p *parser) parseOp() (string, error) {
	t := p.next()
	switch {
	case t.kind == tSym:
		switch t.text {
		case opEq, opNe, opGt, opGe, opLt, opLe, opMatch, opNotMatch:
			return t.text, nil
		case "=":
			return opEq, nil
		case "!":
			w := p.next()
			switch {
			case isWord(w, "in"):
				return opNotIn, nil
			case isWord(w, "exists"):
				return opNotExists, nil
			}
			return "", p.errorf(w, "expected 'in' or 'exists' after '!'")
		}
	case isWord(t, "in"):
		return opIn, nil
	case isWord(t, "not_in"):
		return opNotIn, nil
	case isWord(t, "exists"):
		return opExists, nil
	case isWord(t, "not_exists"):
		return opNotExists, nil
	case isWord(t, "not"):
		w := p.next()
		switch {
		case isWord(w, "in"):
			return opNotIn, nil
		case isWord(w, "exists"):
			return opNotExists, nil
		}
		return "", p.errorf(w, "expected 'in' or 'exists' after 'not'")
	}
	return "", p.errorf(t, "expected an operator, got %q", t.text)
}

func (p *parser) parseValue() (string, error) {
	t := p.next()
	if t.kind == tWord || t.kind == tString {
		return t.text, nil
	}
	return "", p.errorf(t, "expected a value, got %q", t.text)
}

func (p *parser) parseList() ([]string, error) {
	open := p.peek()
	if open.kind != tLBrack && open.kind != tLParen {
		v, err := p.parseValue()
		if err != nil {
			return nil, err
		}
		return []string{v}, nil
	}
	p.next()
	closer := tRBrack
	if open.kind == tLParen {
		closer = tRParen
	}
	var vals []string
	for {
		v, err := p.parseValue()
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
		t := p.next()
		if t.kind == closer {
			return vals, nil
		}
		if t.kind != tComma {
			return nil, p.errorf(t, "expected ',' or closing bracket in list")
		}
	}
}

func (p *parser) parseTerm() (node, error) {
	st := p.next()
	subj, err := parseSubject(st.text)
	if err != nil {
		return nil, p.errorf(st, "%v", err)
	}
	op, err := p.parseOp()
	if err != nil {
		return nil, err
	}
	term := termNode{subj: subj, op: op}
	switch op {
	case opExists, opNotExists:
		if subj.kind != subjAttribute {
			return nil, p.errorf(st, "%s supports only attribute subjects", op)
		}
	case opIn, opNotIn:
		if term.args, err = p.parseList(); err != nil {
			return nil, err
		}
	default:
		v, err := p.parseValue()
		if err != nil {
			return nil, err
		}
		term.args = []string{v}
		if op == opMatch || op == opNotMatch {
			// Both readings: the regular expression when v is one, and the glob.
			term.re, _ = regexp.Compile("^(?:" + v + ")$")
			term.glob = regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(v), `\*`, ".*") + "$")
		}
	}
	if !subj.allows(op) {
		return nil, p.errorf(st, "operator %s is not valid for %s", op, st.text)
	}
	return term, nil
}

// Subjects.

type subjKind int

const (
	subjAttribute subjKind = iota
	subjEC2InstanceID
	subjInstanceID
	subjAgentConnected
	subjAgentVersion
	subjRegisteredAt
	subjRunningTasks
	subjTaskGroup
)

type subject struct {
	kind subjKind
	attr string
}

func parseSubject(s string) (subject, error) {
	if name, ok := strings.CutPrefix(s, "attribute:"); ok {
		if name == "" {
			return subject{}, errors.New("attribute name is empty")
		}
		return subject{kind: subjAttribute, attr: name}, nil
	}
	switch s {
	case "ec2InstanceId":
		return subject{kind: subjEC2InstanceID}, nil
	case "instanceId", "containerInstanceId":
		return subject{kind: subjInstanceID}, nil
	case "agentConnected":
		return subject{kind: subjAgentConnected}, nil
	case "agentVersion":
		return subject{kind: subjAgentVersion}, nil
	case "registeredAt":
		return subject{kind: subjRegisteredAt}, nil
	case "runningTasksCount":
		return subject{kind: subjRunningTasks}, nil
	case "task:group":
		return subject{kind: subjTaskGroup}, nil
	}
	return subject{}, fmt.Errorf("unknown subject %q", s)
}

func (s subject) allows(op string) bool {
	ordered := op == opGt || op == opGe || op == opLt || op == opLe
	switch s.kind {
	case subjAgentVersion, subjRegisteredAt, subjRunningTasks:
		return op == opEq || op == opNe || ordered
	case subjEC2InstanceID, subjInstanceID, subjAgentConnected, subjTaskGroup:
		return !ordered && op != opExists && op != opNotExists
	}
	return true // attributes take every operator
}

// values returns the subject's values on the instance; none when it has no value.
func (s subject) values(in Subject) []string {
	if s.kind == subjAttribute {
		if v, ok := in.Attribute(s.attr); ok {
			return []string{v}
		}
		return nil
	}
	b := in.Builtins()
	switch s.kind {
	case subjEC2InstanceID:
		if b.EC2InstanceID == "" {
			return nil
		}
		return []string{b.EC2InstanceID}
	case subjInstanceID:
		return []string{b.InstanceID}
	case subjAgentConnected:
		return []string{strconv.FormatBool(b.AgentConnected)}
	case subjAgentVersion:
		return []string{b.AgentVersion}
	case subjRegisteredAt:
		if b.RegisteredAt.IsZero() {
			return nil
		}
		return []string{b.RegisteredAt.UTC().Format(time.RFC3339)}
	case subjRunningTasks:
		return []string{strconv.Itoa(b.RunningTasksCount)}
	case subjTaskGroup:
		vals := make([]string, 0, len(b.TaskGroups))
		for g, n := range b.TaskGroups {
			if n > 0 {
				vals = append(vals, g)
			}
		}
		return vals
	}
	return nil
}

// Evaluation.

type node interface{ eval(Subject) bool }

type andNode struct{ l, r node }

func (n andNode) eval(in Subject) bool { return n.l.eval(in) && n.r.eval(in) }

type orNode struct{ l, r node }

func (n orNode) eval(in Subject) bool { return n.l.eval(in) || n.r.eval(in) }

type notNode struct{ n node }

func (n notNode) eval(in Subject) bool { return !n.n.eval(in) }

type termNode struct {
	subj subject
	op   string
	args []string
	re   *regexp.Regexp // =~ and !~ read as a regular expression; nil when not one
	glob *regexp.Regexp // =~ and !~ read as a glob
}

// eval applies the operator. A subject with several values (task:group) matches a
// positive operator when any value does, and a negative one when no value matches the
// positive form. A missing attribute fails every operator but !=, !in, !~ and !exists.
func (n termNode) eval(in Subject) bool {
	vals := n.subj.values(in)
	switch n.op {
	case opExists:
		return len(vals) > 0
	case opNotExists:
		return len(vals) == 0
	case opNe:
		return !n.any(vals, opEq)
	case opNotIn:
		return !n.any(vals, opIn)
	case opNotMatch:
		return !n.any(vals, opMatch)
	}
	return n.any(vals, n.op)
}

func (n termNode) any(vals []string, op string) bool {
	for _, v := range vals {
		if n.one(v, op) {
			return true
		}
	}
	return false
}

func (n termNode) one(v, op string) bool {
	switch op {
	case opEq:
		return v == n.args[0]
	case opIn:
		for _, a := range n.args {
			if v == a {
				return true
			}
		}
		return false
	case opMatch:
		return (n.re != nil && n.re.MatchString(v)) || n.glob.MatchString(v)
	}
	c, ok := n.compare(v, n.args[0])
	if !ok {
		return false
	}
	switch op {
	case opGt:
		return c > 0
	case opGe:
		return c >= 0
	case opLt:
		return c < 0
	case opLe:
		return c <= 0
	}
	return false
}

// compare orders v against arg: numerically for runningTasksCount and numeric
// attributes, as instants for registeredAt, by dotted version for agentVersion, and as
// strings otherwise.
func (n termNode) compare(v, arg string) (int, bool) {
	switch n.subj.kind {
	case subjRegisteredAt:
		a, err1 := parseTime(v)
		b, err2 := parseTime(arg)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		return a.Compare(b), true
	case subjAgentVersion:
		return compareVersions(v, arg), true
	}
	a, err1 := strconv.ParseFloat(v, 64)
	b, err2 := strconv.ParseFloat(arg, 64)
	if err1 == nil && err2 == nil {
		switch {
		case a < b:
			return -1, true
		case a > b:
			return 1, true
		}
		return 0, true
	}
	if n.subj.kind == subjRunningTasks {
		return 0, false
	}
	return strings.Compare(v, arg), true
}

// parseTime accepts the date formats AWS lists for registeredAt.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("bad time %q", s)
}

func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
