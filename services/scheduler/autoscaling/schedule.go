package autoscaling

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // Timezone names resolve on hosts without a zoneinfo database too.

	"github.com/robfig/cron/v3"
)

// schedule is a parsed Schedule of a scheduled action.
type schedule interface {
	// next returns the first time the schedule fires strictly after t, or the zero time
	// when it never does again.
	next(t time.Time) time.Time
}

var (
	atPattern   = regexp.MustCompile(`^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$`)
	ratePattern = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)
	cronPattern = regexp.MustCompile(`^cron\((.*)\)$`)
)

// parseSchedule parses a Schedule as Application Auto Scaling does (PutScheduledAction's
// Schedule: "at(yyyy-mm-ddThh:mm:ss)", "rate(value unit)" with unit minute(s), hour(s) or
// day(s), "cron(fields)" with AWS's six fields), in loc. base is when a rate schedule
// counts from: its StartTime (which it fires at) or, without one, the time it was put
// (which it does not). Errors are ValidationException naming the expression.
func parseSchedule(expr string, loc *time.Location, base time.Time, hasStart bool) (schedule, error) {
	switch {
	case strings.HasPrefix(expr, "at("):
		m := atPattern.FindStringSubmatch(expr)
		if m == nil {
			return nil, validation("Invalid at expression %s: use at(yyyy-mm-ddThh:mm:ss).", expr)
		}
		t, err := time.ParseInLocation("2006-01-02T15:04:05", m[1], loc)
		if err != nil {
			return nil, validation("Invalid at expression %s: %s is not a valid date and time.", expr, m[1])
		}
		return atSchedule(t), nil
	case strings.HasPrefix(expr, "rate("):
		m := ratePattern.FindStringSubmatch(expr)
		if m == nil {
			return nil, validation("Invalid rate expression %s: use rate(value unit) with unit minute, minutes, hour, hours, day or days.", expr)
		}
		n, err := strconv.Atoi(m[1])
		if err != nil || n <= 0 {
			return nil, validation("Invalid rate expression %s: the value must be a positive integer.", expr)
		}
		unit := map[byte]time.Duration{'m': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[m[2][0]]
		return rateSchedule{base: base, every: time.Duration(n) * unit, fromBase: hasStart}, nil
	case strings.HasPrefix(expr, "cron("):
		m := cronPattern.FindStringSubmatch(expr)
		if m == nil {
			return nil, validation("Invalid cron expression %s: use cron(Minutes Hours Day-of-month Month Day-of-week Year).", expr)
		}
		c, err := parseCron(m[1], loc)
		if err != nil {
			return nil, validation("Invalid cron expression %s: %s", expr, err)
		}
		return c, nil
	}
	return nil, validation("Invalid schedule expression %s: it must be at(...), rate(...) or cron(...).", expr)
}

type atSchedule time.Time

func (a atSchedule) next(t time.Time) time.Time {
	if time.Time(a).After(t) {
		return time.Time(a)
	}
	return time.Time{}
}

type rateSchedule struct {
	base     time.Time
	every    time.Duration
	fromBase bool // the schedule fires at base itself (a StartTime), not only after it
}

func (r rateSchedule) next(t time.Time) time.Time {
	if t.Before(r.base) {
		if r.fromBase {
			return r.base
		}
		return r.base.Add(r.every)
	}
	k := t.Sub(r.base)/r.every + 1
	return r.base.Add(k * r.every)
}

// cronSchedule is an AWS cron expression: robfig/cron matches minutes, hours, months
// and the plain day fields; what AWS's dialect adds (the year field, L, W and #) is
// matched here on the candidates robfig yields.
type cronSchedule struct {
	base  cron.Schedule
	loc   *time.Location
	years []yearRange
	// day is the extra day-of-month / day-of-week test (L, W, #); nil when robfig's
	// fields say everything.
	day func(time.Time) bool
}

type yearRange struct{ from, to, step int }

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

var dayNames = map[string]int{"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}

// parseCron parses AWS's six cron fields (Minutes Hours Day-of-month Month Day-of-week
// Year). Day-of-week is 1-7 (SUN-SAT); one of the two day fields must be "?".
func parseCron(spec string, loc *time.Location) (*cronSchedule, error) {
	f := strings.Fields(spec)
	if len(f) != 6 {
		return nil, fmt.Errorf("it has %d fields; AWS's cron takes 6 (Minutes Hours Day-of-month Month Day-of-week Year)", len(f))
	}
	dom, dow := strings.ToUpper(f[2]), strings.ToUpper(f[4])
	if (dom == "?") == (dow == "?") {
		return nil, fmt.Errorf("one of Day-of-month and Day-of-week must be ? (and only one)")
	}
	c := &cronSchedule{loc: loc}
	var err error
	if c.years, err = parseYears(f[5]); err != nil {
		return nil, err
	}
	robDom, robDow := dom, "?"
	switch {
	case dom == "?":
		robDom = "?"
		if strings.ContainsAny(dow, "L#") {
			if c.day, err = parseDowSpecial(dow); err != nil {
				return nil, err
			}
		} else if robDow, err = translateDow(dow); err != nil {
			return nil, err
		}
	case strings.ContainsAny(dom, "LW"):
		robDom = "*"
		if c.day, err = parseDomSpecial(dom); err != nil {
			return nil, err
		}
	}
	if c.base, err = cronParser.Parse(strings.Join([]string{f[0], f[1], robDom, f[3], robDow}, " ")); err != nil {
		return nil, err
	}
	return c, nil
}

func parseYears(field string) ([]yearRange, error) {
	var out []yearRange
	for _, part := range strings.Split(field, ",") {
		r := yearRange{from: 1970, to: 2199, step: 1}
		rng, step, hasStep := strings.Cut(part, "/")
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("year step %q is not a positive number", step)
			}
			r.step = n
		}
		if rng != "*" {
			lo, hi, isRange := strings.Cut(rng, "-")
			a, err := strconv.Atoi(lo)
			if err != nil || a < 1970 || a > 2199 {
				return nil, fmt.Errorf("year %q is not in 1970-2199", lo)
			}
			r.from, r.to = a, a
			if hasStep {
				r.to = 2199
			}
			if isRange {
				b, err := strconv.Atoi(hi)
				if err != nil || b < a || b > 2199 {
					return nil, fmt.Errorf("year range %q is not valid", rng)
				}
				r.to = b
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func (c *cronSchedule) yearOK(y int) bool {
	for _, r := range c.years {
		if y >= r.from && y <= r.to && (y-r.from)%r.step == 0 {
			return true
		}
	}
	return false
}

// dowNumber parses an AWS day of week (1-7 or SUN-SAT).
func dowNumber(v string) (int, error) {
	if n, ok := dayNames[v]; ok {
		return n, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 7 {
		return 0, fmt.Errorf("day of week %q is not 1-7 or SUN-SAT", v)
	}
	return n, nil
}

// translateDow turns AWS's Day-of-week (1-7 = SUN-SAT) into robfig's (0-6).
func translateDow(field string) (string, error) {
	if field == "*" {
		return field, nil
	}
	var parts []string
	for _, part := range strings.Split(field, ",") {
		rng, step, hasStep := strings.Cut(part, "/")
		var ends []string
		for _, v := range strings.SplitN(rng, "-", 2) {
			if v == "*" {
				ends = append(ends, v)
				continue
			}
			n, err := dowNumber(v)
			if err != nil {
				return "", err
			}
			ends = append(ends, strconv.Itoa(n-1))
		}
		p := strings.Join(ends, "-")
		if hasStep {
			p += "/" + step
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ","), nil
}

func lastDay(t time.Time) int {
	return time.Date(t.Year(), t.Month()+1, 0, 0, 0, 0, 0, t.Location()).Day()
}

// nearestWeekday is the weekday (Mon-Fri) of t's month nearest to day d, not leaving the
// month (Quartz's and AWS's W).
func nearestWeekday(t time.Time, d int) int {
	if last := lastDay(t); d > last {
		d = last
	}
	wd := time.Date(t.Year(), t.Month(), d, 0, 0, 0, 0, t.Location()).Weekday()
	switch {
	case wd == time.Saturday && d == 1:
		return 3
	case wd == time.Saturday:
		return d - 1
	case wd == time.Sunday && d == lastDay(t):
		return d - 2
	case wd == time.Sunday:
		return d + 1
	}
	return d
}

func parseDomSpecial(dom string) (func(time.Time) bool, error) {
	switch {
	case dom == "L":
		return func(t time.Time) bool { return t.Day() == lastDay(t) }, nil
	case dom == "LW":
		return func(t time.Time) bool { return t.Day() == nearestWeekday(t, lastDay(t)) }, nil
	case strings.HasSuffix(dom, "W"):
		d, err := strconv.Atoi(strings.TrimSuffix(dom, "W"))
		if err != nil || d < 1 || d > 31 {
			return nil, fmt.Errorf("day of month %q: W takes one day 1-31 (e.g. 15W)", dom)
		}
		return func(t time.Time) bool { return t.Day() == nearestWeekday(t, d) }, nil
	}
	return nil, fmt.Errorf("day of month %q: L and W stand alone (L, LW, nW)", dom)
}

func parseDowSpecial(dow string) (func(time.Time) bool, error) {
	if dow == "L" {
		dow = "7L"
	}
	if v, ok := strings.CutSuffix(dow, "L"); ok {
		n, err := dowNumber(v)
		if err != nil {
			return nil, err
		}
		return func(t time.Time) bool {
			return int(t.Weekday()) == n-1 && t.Day()+7 > lastDay(t)
		}, nil
	}
	v, k, _ := strings.Cut(dow, "#")
	n, err := dowNumber(v)
	if err != nil {
		return nil, err
	}
	nth, err := strconv.Atoi(k)
	if err != nil || nth < 1 || nth > 5 {
		return nil, fmt.Errorf("day of week %q: # takes an occurrence 1-5 (e.g. 6#3)", dow)
	}
	return func(t time.Time) bool {
		return int(t.Weekday()) == n-1 && (t.Day()-1)/7+1 == nth
	}, nil
}

func (c *cronSchedule) next(t time.Time) time.Time {
	t = t.In(c.loc)
	for range 20000 {
		n := c.base.Next(t)
		if n.IsZero() {
			return n
		}
		if !c.yearOK(n.Year()) {
			y := n.Year() + 1
			for ; y <= 2199 && !c.yearOK(y); y++ {
			}
			if y > 2199 {
				return time.Time{}
			}
			t = time.Date(y, 1, 1, 0, 0, 0, 0, c.loc).Add(-time.Second)
			continue
		}
		if c.day != nil && !c.day(n) {
			t = time.Date(n.Year(), n.Month(), n.Day()+1, 0, 0, 0, 0, c.loc).Add(-time.Second)
			continue
		}
		return n
	}
	return time.Time{}
}
