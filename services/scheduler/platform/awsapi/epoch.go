package awsapi

import (
	"math"
	"time"
)

// Epoch returns t as ECS writes timestamps (createdAt, startedAt, …): seconds since the
// Unix epoch as a float64, to the millisecond.
func Epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// FromEpoch returns the time an ECS timestamp v (seconds since the Unix epoch) stands
// for, rounded to the millisecond so that FromEpoch(Epoch(t)) is t truncated to the
// millisecond despite float error.
func FromEpoch(v float64) time.Time { return time.UnixMilli(int64(math.Round(v * 1000))) }
