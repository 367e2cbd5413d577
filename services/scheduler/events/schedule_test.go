package events

import (
	"errors"
	"testing"
	"time"

	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestScheduleNext table-tests EventBridge's cron and rate dialect: each expression's
// next firing after a given time (dates checked against a calendar: 2026-03-01 is a
// Sunday).
func TestScheduleNext(t *testing.T) {
	base := at("2026-03-01T10:00:30Z")
	for _, tc := range []struct {
		expr, after string
		want        []string // successive firings
	}{
		{"rate(1 minute)", "2026-03-01T10:00:30Z", []string{"2026-03-01T10:01:30Z", "2026-03-01T10:02:30Z"}},
		{"rate(5 minutes)", "2026-03-01T10:07:00Z", []string{"2026-03-01T10:10:30Z"}},
		{"rate(2 hours)", "2026-03-01T09:00:00Z", []string{"2026-03-01T12:00:30Z"}},
		{"rate(1 day)", "2026-03-01T10:00:30Z", []string{"2026-03-02T10:00:30Z"}},
		{"cron(0 12 * * ? *)", "2026-03-01T10:00:00Z", []string{"2026-03-01T12:00:00Z", "2026-03-02T12:00:00Z"}},
		{"cron(0/15 * * * ? *)", "2026-03-01T10:01:00Z", []string{"2026-03-01T10:15:00Z", "2026-03-01T10:30:00Z"}},
		// Day-of-week 2-6 is MON-FRI (AWS's 1 is Sunday).
		{"cron(0 18 ? * 2-6 *)", "2026-03-01T00:00:00Z", []string{"2026-03-02T18:00:00Z", "2026-03-03T18:00:00Z"}},
		{"cron(0 18 ? * MON-FRI *)", "2026-03-06T19:00:00Z", []string{"2026-03-09T18:00:00Z"}},
		{"cron(0 8 ? * 1 *)", "2026-03-02T00:00:00Z", []string{"2026-03-08T08:00:00Z"}},
		{"cron(15 10 ? * 7 *)", "2026-03-01T00:00:00Z", []string{"2026-03-07T10:15:00Z"}},
		// Last day of the month, and of February.
		{"cron(0 0 L * ? *)", "2026-02-01T00:00:00Z", []string{"2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z"}},
		// Last weekday of May 2026 (the 31st is a Sunday): Friday the 29th.
		{"cron(0 9 LW 5 ? *)", "2026-05-01T00:00:00Z", []string{"2026-05-29T09:00:00Z"}},
		// Weekday nearest the 1st of August 2026 (a Saturday): Monday the 3rd, not July.
		{"cron(0 9 1W 8 ? 2026)", "2026-07-01T00:00:00Z", []string{"2026-08-03T09:00:00Z"}},
		// The 15th of March 2026 is a Sunday: the nearest weekday is Monday the 16th.
		{"cron(0 9 15W * ? *)", "2026-03-01T00:00:00Z", []string{"2026-03-16T09:00:00Z", "2026-04-15T09:00:00Z"}},
		// Last Friday (6L) and second Tuesday (3#2) of the month.
		{"cron(0 17 ? * 6L *)", "2026-03-01T00:00:00Z", []string{"2026-03-27T17:00:00Z", "2026-04-24T17:00:00Z"}},
		{"cron(30 6 ? * 3#2 *)", "2026-03-01T00:00:00Z", []string{"2026-03-10T06:30:00Z", "2026-04-14T06:30:00Z"}},
		{"cron(0 0 ? * L *)", "2026-03-01T00:00:00Z", []string{"2026-03-07T00:00:00Z"}},
		// The year field: only 2028 and later.
		{"cron(0 0 1 1 ? 2028/2)", "2026-03-01T00:00:00Z", []string{"2028-01-01T00:00:00Z", "2030-01-01T00:00:00Z"}},
		{"cron(0 10 29 FEB ? *)", "2026-03-01T00:00:00Z", []string{"2028-02-29T10:00:00Z"}},
		{"cron(5,10 1 1 JAN-MAR ? 2026)", "2026-03-01T01:06:00Z", []string{"2026-03-01T01:10:00Z", ""}},
		{"cron(5,10 1 1 JAN-MAR ? 2026-2027)", "2026-03-01T01:06:00Z", []string{"2026-03-01T01:10:00Z", "2027-01-01T01:05:00Z"}},
		// Passed years fire never again.
		{"cron(0 0 1 1 ? 2020)", "2026-03-01T00:00:00Z", []string{""}},
	} {
		s, err := ParseSchedule(tc.expr, base)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		cur := at(tc.after)
		for _, w := range tc.want {
			got := s.Next(cur)
			var want time.Time
			if w != "" {
				want = at(w)
			}
			if !got.Equal(want) {
				t.Errorf("%s after %s = %s, want %s", tc.expr, cur.Format(time.RFC3339), got.Format(time.RFC3339), w)
				break
			}
			cur = got
		}
	}
}

// TestScheduleInvalid checks that every expression AWS refuses answers
// ValidationException "Parameter ScheduleExpression is not valid.".
func TestScheduleInvalid(t *testing.T) {
	for _, expr := range []string{
		"", "rate()", "rate(1 minutes)", "rate(5 minute)", "rate(0 minutes)", "rate(-1 minutes)", "rate(1 week)",
		"rate(1.5 hours)", "rate(1 minute", "every(1 minute)",
		"cron(0 12 * * *)",           // five fields
		"cron(0 12 * * * *)",         // both day fields given
		"cron(0 12 ? * ? *)",         // both ?
		"cron(60 12 * * ? *)",        // minute out of range
		"cron(0 24 * * ? *)",         // hour out of range
		"cron(0 12 32 * ? *)",        // day out of range
		"cron(0 12 * 13 ? *)",        // month out of range
		"cron(0 12 ? * 8 *)",         // AWS's day of week is 1-7
		"cron(0 12 ? * 0 *)",         // …not 0
		"cron(0 12 * * ? 1969)",      // year out of range
		"cron(0 12 * * ? 2200)",      //
		"cron(0 12 1W,2 * ? *)",      // W is alone in its field
		"cron(0 12 ? * 3#6 *)",       // no sixth week
		"cron(0 12 ? * 2#1,3 *)",     //
		"cron(0 12 L-2 * ? *)",       // not in EventBridge rules' dialect
		"cron(0 L * * ? *)",          //
		"cron(0 12 * * ? * extra)",   //
		"cron(a 12 * * ? *)",         //
		"cron(0 12 * * ? 2030-2026)", // empty range
	} {
		_, err := ParseSchedule(expr, time.Now())
		var ae *awserr.Error
		if !errors.As(err, &ae) || ae.Type != "ValidationException" || ae.Message != "Parameter ScheduleExpression is not valid." {
			t.Errorf("%q: err = %v, want ValidationException Parameter ScheduleExpression is not valid.", expr, err)
		}
	}
}

// TestStartedBy checks the startedBy of a rule's tasks: "events-rule/{name}" cut to the
// 36 characters ECS keeps.
func TestStartedBy(t *testing.T) {
	if got := StartedBy("nightly"); got != "events-rule/nightly" {
		t.Errorf("StartedBy(nightly) = %q", got)
	}
	if got := StartedBy("a-very-long-rule-name-for-the-nightly-report"); got != "events-rule/a-very-long-rule-name-fo" || len(got) != 36 {
		t.Errorf("StartedBy(long) = %q (%d)", got, len(got))
	}
}
