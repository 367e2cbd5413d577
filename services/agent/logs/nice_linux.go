package logs

import (
	"runtime"
	"syscall"
)

// shipNice is the nice value of the shipper's thread: under CPU contention the
// container's own output path (capture) wins over shipping, which only delays delivery.
const shipNice = 10

// lowerThreadPriority pins the calling goroutine to its OS thread and lowers that
// thread's priority to shipNice. It returns the function that undoes both: the thread's
// priority restored, then unpinned, so Go reuses it rather than ending it. Ending it is
// not harmless: a child started from that thread with Pdeathsig (the private containerd
// of `berth dev` and of the tests) would be signalled. Only when the old priority cannot
// be restored (no permission to raise it) does the thread stay pinned, and end with the
// goroutine, so no other goroutine runs at the lowered priority. Errors lowering the
// priority leave it as it was.
func lowerThreadPriority() (restore func()) {
	runtime.LockOSThread()
	tid := syscall.Gettid()
	// Getpriority returns 20-nice for threads (the raw syscall's bias).
	old, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		return runtime.UnlockOSThread
	}
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, shipNice); err != nil {
		return runtime.UnlockOSThread
	}
	return func() {
		if syscall.Setpriority(syscall.PRIO_PROCESS, tid, 20-old) == nil {
			runtime.UnlockOSThread()
		}
	}
}
