package service

import "time"

// DefaultBreakerMinThreshold is the circuit breaker's lower bound on the failed-task
// threshold. AWS's developer guide gives the threshold as
// min(max(10, ceil(0.5 × desiredCount)), 200) (the newer API reference lowers the floor
// to 3; ReconcilerConfig.BreakerMinThreshold selects it).
const DefaultBreakerMinThreshold = 10

// BreakerMaxThreshold is the circuit breaker's upper bound on the threshold (AWS: 200).
const BreakerMaxThreshold = 200

// BreakerThreshold returns the number of failed tasks at which the deployment circuit
// breaker marks a deployment FAILED: ceil(desired/2), at least minThreshold, at most 200.
func BreakerThreshold(desired int32, minThreshold int) int {
	half := (int(desired) + 1) / 2
	return min(max(minThreshold, half), BreakerMaxThreshold)
}

// MinHealthy returns the number of tasks that must stay healthy during a deployment:
// desired × minimumHealthyPercent / 100, rounded up as AWS rounds it.
func MinHealthy(desired, minPercent int32) int {
	return int((int64(desired)*int64(minPercent) + 99) / 100)
}

// MaxTotal returns the most tasks (RUNNING or PENDING, stopping ones included) a service
// may have during a deployment: desired × maximumPercent / 100, rounded down as AWS rounds
// it.
func MaxTotal(desired, maxPercent int32) int {
	return int(int64(desired) * int64(maxPercent) / 100)
}

// DefaultBackoffBase and DefaultBackoffCap bound the launch backoff: after n consecutive
// failed launches the next launch waits min(base × 2^(n-1), cap). AWS documents a cap of
// 27 minutes for its task launch throttling.
const (
	DefaultBackoffBase = 10 * time.Second
	DefaultBackoffCap  = 27 * time.Minute
)

// LaunchDelay returns the gap before the next launch after n (≥ 1) consecutive failed
// launches: base doubled n-1 times, at most limit; 0 for n ≤ 0.
func LaunchDelay(n int, base, limit time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	d := base
	for i := 1; i < n; i++ {
		d *= 2
		if d >= limit {
			return limit
		}
	}
	return min(d, limit)
}
