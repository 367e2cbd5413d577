package agent_test

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
)

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkTaskStart compares the agent's task start latency (assignment
// pushed by the control plane → RUNNING reported back, image cached) with
// raw containerd create+start of the same image in the same run. It
// reports both p50s and their ratio; b.N samples of each.
//
//	go test -run '^$' -bench TaskStart -benchtime 20x ./
func BenchmarkTaskStart(b *testing.B) {
	w := newWorld(b)
	cp := newControlPlane(b)
	cfg := testConfig(b, w, cp, "bench")
	if os.Getenv("BERTH_BENCH_LOG") == "" {
		cfg.Logger = nil
	}
	startAgent(b, cfg, cp)

	// Warm the image cache with one task.
	warm := taskARN("bench")
	cp.assign(b, warm, taskDef("warm", containerDef("main", w.image, "exit", "0")))
	cp.waitStatus(b, warm, "STOPPED", 60*time.Second)

	var agentD, rawD []time.Duration
	for i := 0; i < b.N; i++ {
		arn := taskARN("bench")
		t0 := time.Now()
		cp.assign(b, arn, taskDef("bench", containerDef("main", w.image, "sleep", "600")))
		cp.waitStatus(b, arn, "RUNNING", 60*time.Second)
		agentD = append(agentD, time.Since(t0))
	}

	client := w.ctd.Client(b, "bench-raw")
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: docker.ConfigureDefaultRegistries(docker.WithPlainHTTP(docker.MatchLocalhost))})
	img, err := client.Pull(b.Context(), w.image, containerd.WithResolver(resolver), containerd.WithPullUnpack, containerd.WithPullSnapshotter(w.ctd.Snapshotter()))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("raw-%d", i)
		t0 := time.Now()
		ctr, err := client.NewContainer(b.Context(), id,
			containerd.WithImage(img),
			containerd.WithSnapshotter(w.ctd.Snapshotter()),
			containerd.WithNewSnapshot(id+"-rootfs", img),
			containerd.WithNewSpec(oci.WithImageConfigArgs(img, []string{"sleep", "600"})),
			w.ctd.RuntimeOpt(),
		)
		if err != nil {
			b.Fatal(err)
		}
		task, err := ctr.NewTask(b.Context(), cio.NullIO)
		if err != nil {
			b.Fatal(err)
		}
		if err := task.Start(b.Context()); err != nil {
			b.Fatal(err)
		}
		rawD = append(rawD, time.Since(t0))
	}
	b.ReportMetric(float64(p50(agentD).Microseconds())/1000, "agent-p50-ms")
	b.ReportMetric(float64(p50(rawD).Microseconds())/1000, "raw-p50-ms")
	b.ReportMetric(float64(p50(agentD))/float64(p50(rawD)), "ratio")
	b.ReportMetric(0, "ns/op")
}

// rssMiB returns this process's resident set size in MiB.
func rssMiB(b *testing.B) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.Fields(rest)[0])
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkAgentRSS reports the resident memory of the process running an
// agent idle and with 50 running tasks. The agent runs in the test binary,
// so the figures include the test's fake control plane, registry (which
// holds the test image in memory) and harness: an upper bound on the
// agent's own RSS.
//
//	go test -run '^$' -bench AgentRSS -benchtime 1x ./
func BenchmarkAgentRSS(b *testing.B) {
	w := newWorld(b)
	cp := newControlPlane(b)
	cfg := testConfig(b, w, cp, "rss")
	startAgent(b, cfg, cp)
	cp.waitFor(b, 30*time.Second, "hello", func() bool { return len(cp.hellos) > 0 })
	time.Sleep(time.Second)
	idle := rssMiB(b)
	var arns []string
	for range 50 {
		arn := taskARN("rss")
		arns = append(arns, arn)
		cp.assign(b, arn, taskDef("rss", containerDef("main", w.image, "sleep", "600")))
	}
	cp.waitFor(b, 120*time.Second, "50 tasks RUNNING", func() bool {
		for _, a := range arns {
			if s := cp.latestLocked(a); s == nil || s.GetLastStatus() != "RUNNING" {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second)
	busy := rssMiB(b)
	b.ReportMetric(idle, "idle-RSS-MiB")
	b.ReportMetric(busy, "50tasks-RSS-MiB")
	b.ReportMetric(0, "ns/op")
}
