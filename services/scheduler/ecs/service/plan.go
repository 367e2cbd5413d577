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

// Launch backoff defaults: after DefaultBackoffAfter consecutive failed launches the next
// launch waits DefaultBackoffBase, doubling with every further failure up to
// DefaultBackoffCap (AWS documents 27 minutes as the most its task launch throttling
// waits). With them a task that never starts is launched 10 times in about 10 minutes, in
// step with the circuit breaker's smallest threshold, then every 27 minutes.
const (
	DefaultBackoffAfter = 3
	DefaultBackoffBase  = 5 * time.Second
	DefaultBackoffCap   = 27 * time.Minute
)

// LaunchDelay returns the gap before the next launch after n consecutive failed launches:
// 0 while n < after, then base doubled n-after times, at most limit.
func LaunchDelay(n, after int, base, limit time.Duration) time.Duration {
	if n < after || n <= 0 {
		return 0
	}
	d := base
	for i := after; i < n; i++ {
		d *= 2
		if d >= limit {
			return limit
		}
	}
	return min(d, limit)
}

// DefaultStableAfter is how long a service task without health-checked essential
// containers must stay RUNNING before the scheduler counts it as started: toward
// minimumHealthyPercent (so old tasks may be stopped for it), and toward its deployment's
// completion and the service's steady state; a task that exits right after starting (a
// crash loop) is a failed task, never a success that resets the launch backoff. 40 s is
// AWS's wait ("the service scheduler will wait for 40 seconds after a task reaches a
// RUNNING state before the task is counted towards the minimum healthy percent total",
// DeploymentConfiguration in the ECS API reference). ReconcilerConfig.StableAfter shortens
// it (berth dev: BERTH_TASK_STABLE_AFTER). A task with health-checked essential containers
// counts once they are HEALTHY, as on AWS.
const DefaultStableAfter = 40 * time.Second
