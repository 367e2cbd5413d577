package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	"github.com/berthhq/berth/services/gateway"
)

// Placement through the production path: the figures issue 13 asks for beside the
// isolated Placer benchmark.
const (
	placeInstances = 1000 // simulated instances (fake agents holding sessions)
	placeCallers   = 64   // concurrent RunTask callers
	placeCount     = 10   // tasks per RunTask
)

// placementPathFigures measures placements per second through the production path:
// RunTask (count 10) as the gateway sends it (Connect over h2c to the scheduler's internal
// listener, the account in the caller header) into control's RunTask, its placement and
// group commit, on placeInstances fake agents that hold sessions and acknowledge their
// assignments (and with reporting, report each task RUNNING, as real agents do: a
// state-change txn a task besides its placement, in a cluster of its own), from
// placeCallers concurrent callers for o.placeDuration, on the stack's embedded etcd.
// With -profile-dir, the window's CPU profile is written there.
func placementPathFigures(ctx context.Context, s *stack, o options, reporting bool) ([]Row, error) {
	cluster, part := "place", "placement-path"
	g := fmt.Sprintf("placement through RunTask: %d instances, embedded etcd", placeInstances)
	if reporting {
		cluster, part = "place-reporting", "placement-path-reporting"
		g = fmt.Sprintf("placement through RunTask, agents reporting RUNNING: %d instances, embedded etcd", placeInstances)
	}
	if _, err := s.ecs.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String(cluster)}); err != nil {
		return nil, err
	}
	fctx, stopFleet := context.WithCancel(ctx)
	defer stopFleet()
	// Capacity enough for every task the window can place: no placement fails for room.
	connected, _, err := fakeFleet(fctx, s.schedURL, account, cluster, cluster, placeInstances, 10*time.Second, 1<<30, 1<<30, reporting)
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(2 * time.Minute); connected.Load() < placeInstances; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d fake agents connected after 2 minutes", connected.Load(), placeInstances)
		}
	}
	td, err := s.registerTaskDef(ctx, "bench-place", s.image, "sleep", "3600")
	if err != nil {
		return nil, err
	}
	client := ecsv1connect.NewEcsServiceClient(gateway.NewH2CClient(), s.schedURL)
	runTask := func(ctx context.Context) (int, error) {
		req := connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String(cluster), TaskDefinition: proto.String(td), Count: proto.Int32(placeCount)})
		req.Header().Set(identity.AccountHeader, account)
		req.Header().Set(identity.RegionHeader, region) // the gateway sends the SigV4 scope's region
		resp, err := client.RunTask(ctx, req)
		if err != nil {
			return 0, err
		}
		if f := resp.Msg.GetFailures(); len(f) > 0 {
			return len(resp.Msg.GetTasks()), fmt.Errorf("RunTask failures: %s %s", f[0].GetArn(), f[0].GetReason())
		}
		return len(resp.Msg.GetTasks()), nil
	}
	// Warm up until every instance counts as connected for placement: a session's hello
	// lands a moment after the fake agent reports it sent.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		n, err := runTask(ctx)
		if err == nil && n == placeCount {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("warm-up RunTask: %d placed: %v", n, err)
		}
	}

	stopProfile, err := startProfile(o, part)
	if err != nil {
		return nil, err
	}
	defer stopProfile()
	var placed, calls atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	wctx, stop := context.WithTimeout(ctx, o.placeDuration)
	defer stop()
	runtime.GC()
	e0 := etcdCounts(s.reg)
	c0, t0 := cpuTime(), time.Now()
	var wg sync.WaitGroup
	for range placeCallers {
		wg.Go(func() {
			for wctx.Err() == nil {
				s0 := time.Now()
				n, err := runTask(ctx) // not wctx: a call in flight at the end completes and counts
				el := time.Since(s0)
				placed.Add(int64(n))
				calls.Add(1)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					lat = append(lat, el)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	cores := (cpuTime() - c0).Seconds() / elapsed.Seconds()
	stopProfile()
	rate := float64(placed.Load()) / elapsed.Seconds()
	fleetDoes := "acknowledging assignments"
	if reporting {
		fleetDoes = "acknowledging assignments and reporting each task RUNNING"
	}
	rows := []Row{
		{g, "placements/s through RunTask", rate, "/s", fmt.Sprintf("RunTask count %d over Connect h2c (as the gateway calls), %d concurrent callers, %s; %d placed in %d calls; the scheduler calls etcd in process, as in berth dev",
			placeCount, placeCallers, o.placeDuration, placed.Load(), calls.Load())},
		{g, "RunTask(10) p50", ms(percentile(lat, 50)), "ms", ""},
		{g, "RunTask(10) p99", ms(percentile(lat, 99)), "ms", ""},
		{g, "CPU during the run", cores, "cores", fmt.Sprintf("this process: scheduler, embedded etcd, %d fake agents %s, callers", placeInstances, fleetDoes)},
	}
	if rate > 0 {
		rows = append(rows, Row{g, "CPU per placement", cores * 1e6 / rate, "µs", "same process"})
		e1, n := etcdCounts(s.reg), float64(placed.Load())
		rows = append(rows,
			Row{g, "etcd txns per placement", (e1.txns - e0.txns) / n, "", "the scheduler's, from its berth_scheduler_etcd_* metrics over the window"},
			Row{g, "etcd txn conflicts per placement", (e1.conflicts - e0.conflicts) / n, "", "failed compares: group commits, state changes and acknowledgements re-read and try again"},
			Row{g, "etcd gets per placement", (e1.gets - e0.gets) / n, "", ""})
	}
	c, cerr := etcdCeiling(ctx)
	if cerr == nil && c["placements/s"] > 0 {
		rows = append(rows,
			Row{g, "etcd ceiling: placements/s", c["placements/s"], "/s", "placement.BenchmarkEtcdTxnCeiling in this run: the same writes, batched per txn, no choosing (over etcd's gRPC port)"},
			Row{g, "ratio RunTask placements/s ÷ etcd ceiling", rate / c["placements/s"], "ratio", ""})
	}
	return rows, errors.Join(firstErr, cerr)
}

// startProfile starts a CPU profile of the part into o.profileDir/<part>.pprof and
// returns the function that stops it (safe to call twice); without -profile-dir it does
// nothing.
func startProfile(o options, part string) (stop func(), err error) {
	if o.profileDir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(o.profileDir, part+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	// Allocation profiles at the start and the end: `go tool pprof -sample_index=alloc_space
	// -base <part>.allocs-start.pprof <part>.allocs-end.pprof` shows what the run allocated.
	writeAllocs := func(suffix string) {
		if a, err := os.Create(filepath.Join(o.profileDir, part+".allocs-"+suffix+".pprof")); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(a, 0)
			_ = a.Close()
		}
	}
	writeAllocs("start")
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
			writeAllocs("end")
		})
	}, nil
}

var ceiling struct {
	once    sync.Once
	metrics map[string]float64
	err     error
}

// etcdCeiling runs placement.BenchmarkEtcdTxnCeiling and BenchmarkEtcdTxnCeilingSerial
// once per bench run, each over 20,016 placements (as many as BenchmarkPlace's, so both
// see an etcd of the same size), and returns their metrics: placements/s, txns/s and
// cpu-µs/placement of the first, and the same names prefixed "serial " of the second. The
// placement figures of the run are compared with ceilings measured on the machine at the
// same time.
func etcdCeiling(ctx context.Context) (map[string]float64, error) {
	ceiling.once.Do(func() { ceiling.metrics, ceiling.err = measureCeiling(ctx) })
	return ceiling.metrics, ceiling.err
}

// measureCeiling is one run of etcdCeiling's benchmarks, not kept.
func measureCeiling(ctx context.Context) (map[string]float64, error) {
	lines, err := goBench(ctx, "services/scheduler/ecs/placement", "^BenchmarkEtcdTxnCeiling(Serial)?$", "834x")
	if err != nil {
		return nil, err
	}
	m, ok := find(lines, "BenchmarkEtcdTxnCeiling")
	serial, okS := find(lines, "BenchmarkEtcdTxnCeilingSerial")
	if !ok || !okS {
		return nil, errors.New("BenchmarkEtcdTxnCeiling or BenchmarkEtcdTxnCeilingSerial printed no result")
	}
	for k, v := range serial {
		m["serial "+k] = v
	}
	return m, nil
}

// etcdTotals are the scheduler's etcd request counts so far.
type etcdTotals struct{ gets, txns, conflicts float64 }

// etcdCounts reads the scheduler's etcd request counts from reg
// (berth_scheduler_etcd_request_duration_seconds by op, berth_scheduler_etcd_txn_conflicts_total);
// zeros when reg cannot be gathered.
func etcdCounts(reg *prometheus.Registry) etcdTotals {
	var t etcdTotals
	mfs, err := reg.Gather()
	if err != nil {
		return t
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "berth_scheduler_etcd_request_duration_seconds":
				for _, l := range m.GetLabel() {
					if l.GetName() != "op" {
						continue
					}
					switch l.GetValue() {
					case "get":
						t.gets += float64(m.GetHistogram().GetSampleCount())
					case "txn":
						t.txns += float64(m.GetHistogram().GetSampleCount())
					}
				}
			case "berth_scheduler_etcd_txn_conflicts_total":
				t.conflicts += m.GetCounter().GetValue()
			}
		}
	}
	return t
}
