package logs

import (
	"runtime"
	"syscall"
)

// shipNice is the nice value of the shipper's thread: under CPU contention the
// container's own output path (capture) wins over shipping, which only delays delivery.
const shipNice = 10

// lowerThreadPriority pins the calling goroutine to its OS thread and lowers that
// thread's priority to shipNice. The thread is never unlocked, so Go ends it when the
// goroutine returns instead of reusing a lowered thread for other goroutines. Errors
// (no permission to change the priority) leave the priority as it was.
func lowerThreadPriority() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), shipNice)
}
