package events

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule is a rule's ScheduleExpression, parsed.
type Schedule interface {
	// Next returns the first time the schedule fires strictly after t (UTC), or the zero
	// time when it never fires again (a cron() whose years have passed).
	Next(t time.Time) time.Time
}

// errSchedule is EventBridge's answer to any ScheduleExpression it cannot parse
// (PutRule's ValidationException; the message is AWS's own).
var errSchedule = validation("Parameter ScheduleExpression is not valid.")

// ParseSchedule parses a ScheduleExpression in EventBridge's dialect
// (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-scheduled-rule-pattern.html):
//
//   - rate(value unit): value a positive integer, unit minute|hour|day, singular for 1 and
//     plural (minutes|hours|days) otherwise. It fires at base + k·period, k ≥ 1.
//   - cron(minutes hours day-of-month month day-of-week year), in UTC: six fields;
//     day-of-week 1–7 is SUN–SAT (names accepted); one of day-of-month and day-of-week
//     must be ? and the other not; day-of-month also takes L (last day), LW (last
//     weekday), nW (the weekday nearest day n, within the month); day-of-week takes L
//     (Saturday), nL (the last day n of the month) and n#k (the k-th day n); year is
//     1970–2199.
//
// Minutes, hours, month and the plain day fields are parsed by robfig/cron (five-field
// standard syntax; day-of-week shifted to its 0–6); the L/W/# forms and the year field,
// which it lacks, are evaluated here. Any other form answers ValidationException
// "Parameter ScheduleExpression is not valid.".
func ParseSchedule(expr string, base time.Time) (Schedule, error) {
	expr = strings.TrimSpace(expr)
	switch {
	case strings.HasPrefix(expr, "rate(") && strings.HasSuffix(expr, ")"):
		return parseRate(expr[len("rate("):len(expr)-1], base)
	case strings.HasPrefix(expr, "cron(") && strings.HasSuffix(expr, ")"):
		return parseCron(expr[len("cron(") : len(expr)-1])
	}
	return nil, errSchedule
}

// rate is a rate() schedule: base + k·every, k ≥ 1.
type rate struct {
	base  time.Time
	every time.Duration
}

func parseRate(body string, base time.Time) (Schedule, error) {
	f := strings.Fields(body)
	if len(f) != 2 {
		return nil, errSchedule
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 || f[0][0] == '+' || n > 1_000_000 {
		return nil, errSchedule
	}
	units := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}
	unit, ok := strings.CutSuffix(f[1], "s")
	if ok == (n == 1) { // "1 minutes" and "5 minute" are both refused, as AWS does
		return nil, errSchedule
	}
	d, ok := units[unit]
	if !ok {
		return nil, errSchedule
	}
	return rate{base: base.UTC().Truncate(time.Second), every: time.Duration(n) * d}, nil
}

func (r rate) Next(t time.Time) time.Time {
	if t.Before(r.base) {
		return r.base.Add(r.every)
	}
	k := t.Sub(r.base)/r.every + 1
	return r.base.Add(k * r.every)
}

// cronSchedule is a cron() schedule. spec holds robfig/cron's bit sets of the minutes,
// hours and months, and of the days of month and week when they are plain; dom and dow,
// when set, are the L/W/# forms instead.
type cronSchedule struct {
	spec     *cron.SpecSchedule
	dom, dow func(time.Time) bool
	years    []bool // index year-minYear
}

const minYear, maxYear = 1970, 2199

var stdParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

func parseCron(body string) (Schedule, error) {
	f := strings.Fields(body)
	if len(f) != 6 {
		return nil, errSchedule
	}
	minute, hour, dom, month, dow, year := f[0], f[1], strings.ToUpper(f[2]), f[3], strings.ToUpper(f[4]), f[5]
	// Exactly one of the day fields is "?": AWS refuses both given and both "?".
	if (dom == "?") == (dow == "?") {
		return nil, errSchedule
	}
	c := &cronSchedule{}
	domStd, dowStd := dom, "*"
	if dom == "?" {
		domStd = "*"
		var err error
		if dowStd, c.dow, err = parseDow(dow); err != nil {
			return nil, err
		}
	} else if special, err := parseDomSpecial(dom); err != nil {
		return nil, err
	} else if special != nil {
		c.dom, domStd = special, "*"
	}
	if strings.ContainsAny(minute+hour+month+domStd+dowStd, "?LW#") {
		return nil, errSchedule
	}
	sched, err := stdParser.Parse(strings.Join([]string{minute, hour, domStd, month, dowStd}, " "))
	if err != nil {
		return nil, errSchedule
	}
	c.spec = sched.(*cron.SpecSchedule)
	if c.years, err = parseYears(year); err != nil {
		return nil, err
	}
	return c, nil
}

// parseDomSpecial returns the day-of-month test of L, LW and nW, or nil for a plain
// field (left to robfig/cron).
func parseDomSpecial(f string) (func(time.Time) bool, error) {
	switch {
	case f == "L":
		return func(d time.Time) bool { return d.Day() == daysIn(d) }, nil
	case f == "LW":
		return func(d time.Time) bool { return d.Day() == nearestWeekday(d, daysIn(d)) }, nil
	case strings.HasSuffix(f, "W"):
		n, err := strconv.Atoi(f[:len(f)-1])
		if err != nil || n < 1 || n > 31 {
			return nil, errSchedule
		}
		return func(d time.Time) bool { return n <= daysIn(d) && d.Day() == nearestWeekday(d, n) }, nil
	case strings.ContainsAny(f, "LW#"):
		return nil, errSchedule
	}
	return nil, nil
}

// parseDow returns the robfig/cron form of a plain day-of-week field (AWS's 1–7 moved to
// 0–6), or "*" and the test of an L or # form.
func parseDow(f string) (string, func(time.Time) bool, error) {
	switch {
	case f == "L":
		return "*", func(d time.Time) bool { return d.Weekday() == time.Saturday }, nil
	case strings.HasSuffix(f, "L"):
		wd, err := weekday(f[:len(f)-1])
		if err != nil {
			return "", nil, err
		}
		return "*", func(d time.Time) bool { return d.Weekday() == wd && d.Day()+7 > daysIn(d) }, nil
	case strings.Contains(f, "#"):
		day, nth, _ := strings.Cut(f, "#")
		wd, err := weekday(day)
		if err != nil {
			return "", nil, err
		}
		k, err := strconv.Atoi(nth)
		if err != nil || k < 1 || k > 5 {
			return "", nil, errSchedule
		}
		return "*", func(d time.Time) bool { return d.Weekday() == wd && (d.Day()-1)/7+1 == k }, nil
	case strings.ContainsAny(f, "LW?"):
		return "", nil, errSchedule
	}
	// Plain: shift every number down by one; names (SUN–SAT) robfig/cron knows.
	var out []string
	for _, item := range strings.Split(f, ",") {
		rng, step, hasStep := strings.Cut(item, "/")
		var parts []string
		for _, p := range strings.Split(rng, "-") {
			if p == "*" {
				parts = append(parts, p)
				continue
			}
			if n, err := strconv.Atoi(p); err == nil {
				if n < 1 || n > 7 {
					return "", nil, errSchedule
				}
				p = strconv.Itoa(n - 1)
			}
			parts = append(parts, p)
		}
		s := strings.Join(parts, "-")
		if hasStep {
			s += "/" + step
		}
		out = append(out, s)
	}
	return strings.Join(out, ","), nil, nil
}

var dayNames = map[string]time.Weekday{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

// weekday parses one AWS day of week: 1–7 (SUN–SAT) or a name.
func weekday(s string) (time.Weekday, error) {
	if wd, ok := dayNames[s]; ok {
		return wd, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 7 {
		return 0, errSchedule
	}
	return time.Weekday(n - 1), nil
}

// parseYears parses the year field: *, n, a-b, each with an optional /step, in lists.
func parseYears(f string) ([]bool, error) {
	years := make([]bool, maxYear-minYear+1)
	for _, item := range strings.Split(f, ",") {
		rng, stepStr, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			var err error
			if step, err = strconv.Atoi(stepStr); err != nil || step < 1 {
				return nil, errSchedule
			}
		}
		lo, hi := minYear, maxYear
		if rng != "*" {
			a, b, isRange := strings.Cut(rng, "-")
			var err1, err2 error
			lo, err1 = strconv.Atoi(a)
			hi = lo
			if isRange {
				hi, err2 = strconv.Atoi(b)
			} else if hasStep {
				hi = maxYear
			}
			if err1 != nil || err2 != nil || lo < minYear || hi > maxYear || lo > hi {
				return nil, errSchedule
			}
		}
		for y := lo; y <= hi; y += step {
			years[y-minYear] = true
		}
	}
	return years, nil
}

func daysIn(d time.Time) int {
	return time.Date(d.Year(), d.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// nearestWeekday returns the day of d's month that is the weekday nearest to day n
// without leaving the month (Quartz's nW, which EventBridge follows).
func nearestWeekday(d time.Time, n int) int {
	t := time.Date(d.Year(), d.Month(), n, 0, 0, 0, 0, time.UTC)
	switch t.Weekday() {
	case time.Saturday:
		if n == 1 {
			return 3
		}
		return n - 1
	case time.Sunday:
		if n == daysIn(d) {
			return n - 2
		}
		return n + 1
	}
	return n
}

func bit(set uint64, n int) bool { return set&(1<<uint(n)) != 0 }

func (c *cronSchedule) dayOK(d time.Time) bool {
	if c.dom != nil {
		if !c.dom(d) {
			return false
		}
	} else if !bit(c.spec.Dom, d.Day()) {
		return false
	}
	if c.dow != nil {
		return c.dow(d)
	}
	return bit(c.spec.Dow, int(d.Weekday()))
}

func (c *cronSchedule) Next(t time.Time) time.Time {
	t = t.UTC().Truncate(time.Minute).Add(time.Minute)
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	first := true
	for day.Year() <= maxYear {
		switch {
		case day.Year() < minYear || !c.years[day.Year()-minYear]:
			day, first = time.Date(day.Year()+1, 1, 1, 0, 0, 0, 0, time.UTC), false
			continue
		case !bit(c.spec.Month, int(day.Month())):
			day, first = time.Date(day.Year(), day.Month()+1, 1, 0, 0, 0, 0, time.UTC), false
			continue
		}
		if c.dayOK(day) {
			h0, m0 := 0, 0
			if first {
				h0, m0 = t.Hour(), t.Minute()
			}
			for h := h0; h < 24; h++ {
				if !bit(c.spec.Hour, h) {
					continue
				}
				start := 0
				if h == h0 {
					start = m0
				}
				for m := start; m < 60; m++ {
					if bit(c.spec.Minute, m) {
						return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
					}
				}
			}
		}
		day, first = day.AddDate(0, 0, 1), false
	}
	return time.Time{}
}

// String is for logs.
func (r rate) String() string {
	return fmt.Sprintf("every %s from %s", r.every, r.base.Format(time.RFC3339))
}
