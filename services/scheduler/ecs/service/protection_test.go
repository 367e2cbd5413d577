package service

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Scale-in keeps protected tasks and stops unprotected ones first; with too few
// unprotected tasks it stops what it may and says why; expired protection protects
// nothing.
func TestComputeScaleInSkipsProtectedTasks(t *testing.T) {
	w := newWorld(t, 1, 100, 200)
	ids := w.running(4, dep1, time.Hour) // oldest first: scale-in would keep ids[0]
	w.st.Protected = map[string]time.Time{ids[2]: t0.Add(time.Hour), ids[3]: t0.Add(time.Hour)}
	p := w.compute()
	stopped := stopIDs(p)
	slices.Sort(stopped)
	want := []string{ids[0], ids[1]}
	slices.Sort(want)
	// desired 1: one protected task is kept, the other is held, both unprotected go.
	if !slices.Equal(stopped, want) {
		t.Fatalf("stopped %v, want the unprotected %v", stopped, want)
	}
	if !strings.Contains(planEvents(p), "was unable to scale in due to (reason: 1 tasks under protection)") {
		t.Fatalf("events %q", planEvents(p))
	}

	w.st.Protected = map[string]time.Time{ids[2]: t0.Add(-time.Second), ids[3]: t0.Add(-time.Second)} // expired
	if p := w.compute(); len(p.Stop) != 3 {
		t.Fatalf("expired protection: stopped %v", stopIDs(p))
	}
}

// A deployment does not replace a protected task of the old deployment until its
// protection expires.
func TestComputeDeploymentWaitsForProtection(t *testing.T) {
	w := newWorld(t, 2, 50, 100)
	old := w.running(2, dep1, time.Hour)
	w.deploy(dep2, tdV2)
	w.running(2, dep2, time.Hour) // the new tasks are up and stable
	w.st.Protected = map[string]time.Time{old[0]: t0.Add(time.Hour)}
	p := w.compute()
	if ids := stopIDs(p); len(ids) != 1 || ids[0] != old[1] {
		t.Fatalf("stopped %v, want only the unprotected %s", ids, old[1])
	}
	w.st.Now = t0.Add(2 * time.Hour)
	if ids := stopIDs(w.compute()); !slices.Contains(ids, old[0]) {
		t.Fatalf("after expiry stopped %v, want %s", ids, old[0])
	}
}
