package service

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// TestComputeInvariants runs Compute over random REPLICA services — up to three
// deployments, tasks of every state and age on ACTIVE and DRAINING instances, random
// minimumHealthyPercent and maximumPercent — and checks what must hold whatever the
// state (as Nomad's reconciler property tests do):
//   - the tasks that count toward minimumHealthyPercent do not fall below the minimum
//     because of the plan (nor below what there was, when there was less);
//   - a launch never takes the tasks above maximumPercent, nor beyond the desired count;
//   - only live tasks are stopped, each once; launches are for the PRIMARY deployment.
func TestComputeInvariants(t *testing.T) {
	// A new seed every run; BERTH_PROP_SEED replays the one a failure names.
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("BERTH_PROP_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("BERTH_PROP_SEED: %v", err)
		}
		seed = n
	}
	rng := rand.New(rand.NewPCG(seed, 13))
	t.Logf("seed %d", seed)
	for i := range 2000 {
		desired := int32(rng.IntN(8))
		minPct := []int32{0, 50, 100}[rng.IntN(3)]
		maxPct := []int32{100, 150, 200}[rng.IntN(3)]
		w := newWorld(t, desired, minPct, maxPct)
		deps := []string{dep1}
		if rng.IntN(2) == 0 {
			w.deploy(dep2, tdV2)
			deps = append(deps, dep2)
		}
		if rng.IntN(3) == 0 {
			w.deploy(dep3, tdV3)
			deps = append(deps, dep3)
		}
		if rng.IntN(4) == 0 {
			w.drain("i2")
		}
		for range rng.IntN(12) {
			dep := deps[rng.IntN(len(deps))]
			age := []time.Duration{time.Second, 30 * time.Second, time.Hour}[rng.IntN(3)]
			switch rng.IntN(5) {
			case 0:
				w.task(dep, "PENDING", age)
			case 1:
				w.failed(1, dep, age)
			case 2: // being stopped
				w.task(dep, "RUNNING", age).Task.DesiredStatus = proto.String("STOPPED")
			default:
				w.task(dep, "RUNNING", age)
			}
		}
		before := w.countedLive(nil)
		total := 0
		for _, it := range w.st.Tasks {
			if it.Value.GetTask().GetLastStatus() != "STOPPED" {
				total++
			}
		}
		name := fmt.Sprintf("case %d (seed %d): desired %d min %d%% max %d%%, %d tasks", i, seed, desired, minPct, maxPct, len(w.st.Tasks))
		p := w.compute()
		minHealthy := MinHealthy(desired, minPct)
		if after := w.countedLive(stopIDs(p)); after < min(minHealthy, before) {
			t.Fatalf("%s: counted tasks %d → %d after stopping %v, minimum %d", name, before, after, stopIDs(p), minHealthy)
		}
		if p.Launch.Count > 0 {
			if total+p.Launch.Count > MaxTotal(desired, maxPct) {
				t.Fatalf("%s: %d tasks + %d launched above maximumPercent (%d)", name, total, p.Launch.Count, MaxTotal(desired, maxPct))
			}
			if p.Launch.Count > int(desired) || p.Launch.Deployment != primary(w.svc()).GetId() {
				t.Fatalf("%s: launch %+v", name, p.Launch)
			}
		}
		seen := map[string]bool{}
		for _, s := range p.Stop {
			task := s.Task.Value.GetTask()
			if seen[s.ID] || task.GetLastStatus() == "STOPPED" || task.GetDesiredStatus() != "RUNNING" {
				t.Fatalf("%s: stop %s (%s/%s) twice or not live", name, s.ID, task.GetLastStatus(), task.GetDesiredStatus())
			}
			seen[s.ID] = true
		}
	}
}
