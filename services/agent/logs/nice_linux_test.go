package logs

import (
	"runtime"
	"syscall"
	"testing"
)

// TestLowerThreadPriorityRestores: the shipper's thread runs at nice shipNice and gets its
// old priority back when the shipper returns, so Go can reuse the thread instead of ending
// it (ending it would signal a Pdeathsig child forked from it).
func TestLowerThreadPriorityRestores(t *testing.T) {
	runtime.LockOSThread() // keep this test on one thread around the call
	defer runtime.UnlockOSThread()
	tid := syscall.Gettid()
	before, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		t.Fatal(err)
	}
	restore := lowerThreadPriority()
	during, _ := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	restore()
	after, _ := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if 20-during != shipNice && before != during { // unprivileged callers may be unable to lower: then it stays
		t.Errorf("nice while shipping = %d, want %d", 20-during, shipNice)
	}
	if after != before {
		if syscall.Geteuid() == 0 {
			t.Errorf("nice after restore = %d, want %d", 20-after, 20-before)
		}
	}
}
