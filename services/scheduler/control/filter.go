package control

import (
	"regexp"
	"strings"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecserr"
)

// Expr is a parsed expression of the ECS cluster query language
// (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/cluster-query-language.html),
// the subset Berth evaluates: subjects attribute:NAME and ec2InstanceId; operators ==,
// !=, exists, !exists, in [..], not_in [..], =~ (with * wildcards); terms joined with
// "and" / "&&" (binding tighter) and "or" / "||".
type Expr struct {
	any [][]term // OR of ANDs
}

type term struct {
	subject string // "attribute:NAME" or "ec2InstanceId"
	op      string
	values  []string
	re      *regexp.Regexp
}

var (
	orSplit  = regexp.MustCompile(`\s+(?:or|\|\|)\s+`)
	andSplit = regexp.MustCompile(`\s+(?:and|&&)\s+`)
)

// ParseExpr parses a cluster query language expression; an empty one matches everything.
// It returns InvalidParameterException for what it cannot parse.
func ParseExpr(s string) (*Expr, error) {
	e := &Expr{}
	s = strings.TrimSpace(s)
	if s == "" {
		return e, nil
	}
	for _, alt := range orSplit.Split(s, -1) {
		var all []term
		for _, t := range andSplit.Split(alt, -1) {
			pt, err := parseTerm(strings.Trim(strings.TrimSpace(t), "()"))
			if err != nil {
				return nil, err
			}
			all = append(all, pt)
		}
		e.any = append(e.any, all)
	}
	return e, nil
}

func parseTerm(t string) (term, error) {
	bad := ecserr.InvalidParameterf("Invalid expression %q.", t)
	fields := strings.Fields(t)
	if len(fields) < 2 {
		return term{}, bad
	}
	tm := term{subject: fields[0], op: fields[1]}
	if !strings.HasPrefix(tm.subject, "attribute:") && tm.subject != "ec2InstanceId" {
		return term{}, bad
	}
	rest := strings.TrimSpace(strings.Join(fields[2:], " "))
	switch tm.op {
	case "exists", "!exists":
		if rest != "" {
			return term{}, bad
		}
	case "==", "!=":
		if rest == "" {
			return term{}, bad
		}
		tm.values = []string{strings.Trim(rest, `'"`)}
	case "=~":
		pat := "^" + strings.ReplaceAll(regexp.QuoteMeta(strings.Trim(rest, `'"`)), `\*`, ".*") + "$"
		tm.re = regexp.MustCompile(pat)
	case "in", "not_in":
		if !strings.HasPrefix(rest, "[") || !strings.HasSuffix(rest, "]") {
			return term{}, bad
		}
		for v := range strings.SplitSeq(strings.Trim(rest, "[]"), ",") {
			tm.values = append(tm.values, strings.Trim(strings.TrimSpace(v), `'"`))
		}
	default:
		return term{}, bad
	}
	return tm, nil
}

// Match reports whether a container instance satisfies the expression.
func (e *Expr) Match(ci *ecsv1.ContainerInstance) bool {
	if e == nil || len(e.any) == 0 {
		return true
	}
	for _, all := range e.any {
		ok := true
		for _, t := range all {
			if !t.match(ci) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func (t term) match(ci *ecsv1.ContainerInstance) bool {
	val, has := "", false
	if name, ok := strings.CutPrefix(t.subject, "attribute:"); ok {
		for _, a := range ci.GetAttributes() {
			if a.GetName() == name {
				val, has = a.GetValue(), true
				break
			}
		}
	} else {
		val, has = ci.GetEc2InstanceId(), ci.Ec2InstanceId != nil
	}
	switch t.op {
	case "exists":
		return has
	case "!exists":
		return !has
	case "==":
		return has && val == t.values[0]
	case "!=":
		return !has || val != t.values[0]
	case "=~":
		return has && t.re.MatchString(val)
	case "in":
		return has && oneOf(val, t.values...)
	case "not_in":
		return !has || !oneOf(val, t.values...)
	}
	return false
}
