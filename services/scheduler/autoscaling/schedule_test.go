package autoscaling

import (
	"strings"
	"testing"
	"time"
)

func TestScheduleNext(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC) // a Sunday
	for _, tc := range []struct {
		expr  string
		loc   *time.Location
		after time.Time
		want  []string // the next fire times, RFC 3339 in UTC
	}{
		{"at(2026-03-01T10:00:30)", time.UTC, base, []string{"2026-03-01T10:00:30Z", ""}},
		{"at(2026-03-01T05:01:00)", ny, base, []string{"2026-03-01T10:01:00Z", ""}},
		{"rate(1 minute)", time.UTC, base, []string{"2026-03-01T10:01:00Z", "2026-03-01T10:02:00Z"}},
		{"rate(2 hours)", time.UTC, base, []string{"2026-03-01T12:00:00Z", "2026-03-01T14:00:00Z"}},
		// Every weekday (MON-FRI = 2-6) at 08:30 in New York: Monday 2 March, EST.
		{"cron(30 8 ? * 2-6 *)", ny, base, []string{"2026-03-02T13:30:00Z", "2026-03-03T13:30:00Z"}},
		{"cron(30 8 ? * MON-FRI *)", ny, base, []string{"2026-03-02T13:30:00Z", "2026-03-03T13:30:00Z"}},
		// Sunday is 1 in AWS's day of week.
		{"cron(0 12 ? * 1 *)", time.UTC, base, []string{"2026-03-01T12:00:00Z", "2026-03-08T12:00:00Z"}},
		{"cron(0/15 * * * ? *)", time.UTC, base, []string{"2026-03-01T10:15:00Z", "2026-03-01T10:30:00Z"}},
		{"cron(0 0 1 1 ? 2028)", time.UTC, base, []string{"2028-01-01T00:00:00Z", ""}},
		{"cron(0 0 L * ? *)", time.UTC, base, []string{"2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"}},
		// 15W: the weekday nearest the 15th (15 March 2026 is a Sunday → Monday 16th;
		// 15 April is a Wednesday).
		{"cron(0 9 15W * ? *)", time.UTC, base, []string{"2026-03-16T09:00:00Z", "2026-04-15T09:00:00Z"}},
		{"cron(0 9 LW * ? *)", time.UTC, base, []string{"2026-03-31T09:00:00Z", "2026-04-30T09:00:00Z"}},
		// 6#3: the third Friday; 6L: the last Friday.
		{"cron(0 18 ? * 6#3 *)", time.UTC, base, []string{"2026-03-20T18:00:00Z", "2026-04-17T18:00:00Z"}},
		{"cron(0 18 ? * 6L *)", time.UTC, base, []string{"2026-03-27T18:00:00Z", "2026-04-24T18:00:00Z"}},
		{"cron(0 0 1 JAN ? 2027-2029/2)", time.UTC, base, []string{"2027-01-01T00:00:00Z", "2029-01-01T00:00:00Z"}},
	} {
		s, err := parseSchedule(tc.expr, tc.loc, base, false)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		at := tc.after
		for i, want := range tc.want {
			got := s.next(at)
			g := ""
			if !got.IsZero() {
				g = got.UTC().Format(time.RFC3339)
			}
			if g != want {
				t.Errorf("%s: fire %d = %q, want %q", tc.expr, i+1, g, want)
				break
			}
			at = got
		}
	}
}

func TestScheduleRateFromStartTime(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	s, err := parseSchedule("rate(5 minutes)", time.UTC, start, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.next(start.Add(-time.Hour)); !got.Equal(start) {
		t.Errorf("first fire %v, want the StartTime %v", got, start)
	}
	if got := s.next(start.Add(7 * time.Minute)); !got.Equal(start.Add(10 * time.Minute)) {
		t.Errorf("after 7m: %v", got)
	}
}

func TestScheduleInvalid(t *testing.T) {
	for expr, want := range map[string]string{
		"cron(0 12 * * ? )":        "6",
		"cron(0 12 * * * *)":       "?",
		"cron(0 12 ? * ? *)":       "?",
		"cron(61 12 * * ? *)":      "cron",
		"cron(0 12 ? * 8 *)":       "day of week",
		"cron(0 12 ? * 0 *)":       "day of week",
		"cron(0 12 32W * ? *)":     "W",
		"cron(0 12 ? * 6#6 *)":     "#",
		"cron(0 12 * * ? 1969)":    "year",
		"cron(0 12 * * ? 2030-20)": "year",
		"rate(0 minutes)":          "positive",
		"rate(5 weeks)":            "rate",
		"rate(five minutes)":       "rate",
		"at(2026-02-30T10:00:00)":  "valid date",
		"at(2026-03-01 10:00:00)":  "at(",
		"every 5 minutes":          "at(...), rate(...) or cron(...)",
	} {
		_, err := parseSchedule(expr, time.UTC, time.Now(), false)
		if err == nil {
			t.Errorf("%s: accepted", expr)
			continue
		}
		if e := err.Error(); !strings.HasPrefix(e, "ValidationException: ") || !strings.Contains(e, want) {
			t.Errorf("%s: %v, want a ValidationException mentioning %q", expr, err, want)
		}
	}
}
