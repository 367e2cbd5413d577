package autoscaling

import (
	"testing"
	"time"
)

// BenchmarkCronNext measures the next fire time of AWS cron expressions, the plain kind
// and the kinds robfig/cron does not know (L, W, #, a year list), which skip days.
func BenchmarkCronNext(b *testing.B) {
	ny, _ := time.LoadLocation("America/New_York")
	for _, expr := range []string{"cron(30 8 ? * MON-FRI *)", "cron(0 9 15W * ? *)", "cron(0 18 ? * 6#3 *)", "cron(0 0 1 1 ? 2030,2040)"} {
		s, err := parseSchedule(expr, ny, time.Time{}, false)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(expr, func(b *testing.B) {
			t := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
			for b.Loop() {
				if s.next(t).IsZero() {
					b.Fatal("no next")
				}
			}
		})
	}
}
