package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// benchLine is one parsed `go test -bench` result: the benchmark's name without the -N
// GOMAXPROCS suffix and its metrics by unit.
type benchLine struct {
	name    string
	metrics map[string]float64
}

// goBench runs `go test -run ^$ -bench pattern -benchtime benchtime` in pkg (a directory
// relative to the repository root) and returns the parsed result lines.
func goBench(ctx context.Context, pkg, pattern, benchtime string) ([]benchLine, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^$", "-bench", pattern, "-benchtime", benchtime, "-timeout", "8m", ".")
	cmd.Dir = filepath.Join(root, pkg)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go test -bench %s in %s: %w\n%s", pattern, pkg, err, out.String())
	}
	var lines []benchLine
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		bl := benchLine{name: name, metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			bl.metrics[f[i+1]] = v
		}
		lines = append(lines, bl)
	}
	return lines, nil
}

func find(lines []benchLine, name string) (map[string]float64, bool) {
	for _, l := range lines {
		if l.name == name {
			return l.metrics, true
		}
	}
	return nil, false
}

func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// goTestFigures runs the services' own benchmarks and turns their metrics into rows.
func goTestFigures(ctx context.Context) ([]Row, error) {
	var rows []Row
	var errs []string

	// Placements per second (1,000 instances, embedded etcd) with PlaceGroup in the shape
	// control's RunTask queue uses it, beside etcd's ceiling for the same writes. On a
	// shared machine one measure minutes away (the placement-path part's) can differ by
	// half, and back-to-back runs by a tenth: placeRounds rounds each run the Placer
	// between two ceilings and take its ratio to their mean; the rows are the medians.
	const gPlace = "placement: 1,000 instances, embedded etcd"
	rounds, err := placementRounds(ctx)
	if err != nil {
		errs = append(errs, err.Error())
	}
	place := func(r placeRound) map[string]float64 { return r.place }
	place8 := func(r placeRound) map[string]float64 { return r.place8 }
	p, nP := medianOf(rounds, place)
	p8, nP8 := medianOf(rounds, place8)
	c, nC := medianOf(rounds, func(r placeRound) map[string]float64 { return r.ceiling })
	// ratio is the median over the rounds of num's metric ÷ the round's ceiling's den
	// metric, with the count of rounds that had both (a missing or zero figure is
	// skipped: a ratio of it would be no figure at all).
	ratio := func(num func(placeRound) map[string]float64, den string) (float64, int) {
		var v []float64
		for _, r := range rounds {
			if n, d := num(r)["placements/s"], r.ceiling[den]; n > 0 && d > 0 {
				v = append(v, n/d)
			}
		}
		return median(v), len(v)
	}
	of := func(n int) string { return fmt.Sprintf("median of %d rounds", n) }
	if nP > 0 {
		rows = append(rows,
			Row{gPlace, "placements/s (Placer, random strategy)", p["placements/s"], "/s", "placement.BenchmarkPlace/random: PlaceGroup of 24 one-task requests, 2 groups at once (as control's RunTask queue), 20,000 placements; " + of(nP)},
			Row{gPlace, "CPU per placement", p["cpu-µs/placement"], "µs", "placer + etcd client + embedded etcd server"})
	}
	if nP8 > 0 {
		rows = append(rows,
			Row{gPlace, "placements/s (Placer, 8 groups in flight)", p8["placements/s"], "/s", "placement.BenchmarkPlaceEightInFlight/random: the same with as many groups at once as the ceiling's txns (8 on 2 cores); " + of(nP8)},
			Row{gPlace, "CPU per placement, 8 groups in flight", p8["cpu-µs/placement"], "µs", ""})
	}
	if nC > 0 {
		rows = append(rows,
			Row{gPlace, "etcd ceiling: placements/s", c["placements/s"], "/s", "placement.BenchmarkEtcdTxnCeiling: the same writes, 24 per txn, no choosing, 4 × GOMAXPROCS txns in flight; " + of(nC) + ", each the mean of a run just before and one just after the Placer's"},
			Row{gPlace, "etcd ceiling, one txn in flight: placements/s", c["serial placements/s"], "/s", "placement.BenchmarkEtcdTxnCeilingSerial: as if a cluster's commits took turns"})
	}
	if v, n := ratio(place, "placements/s"); n > 0 {
		rows = append(rows, Row{gPlace, "ratio placements/s ÷ etcd ceiling", v, "ratio", "2 groups in flight against the ceiling's 8 txns; " + of(n) + "' ratios"})
	}
	if v, n := ratio(place, "serial placements/s"); n > 0 {
		rows = append(rows, Row{gPlace, "ratio placements/s ÷ etcd ceiling, one txn in flight", v, "ratio", ""})
	}
	if v, n := ratio(place8, "placements/s"); n > 0 {
		rows = append(rows, Row{gPlace, "ratio placements/s, 8 groups in flight ÷ etcd ceiling", v, "ratio", "like for like: the same writes, 24 per txn, as many in flight; what the Placer adds (issue 13's ≥ 0.8); " + of(n) + "' ratios"})
	}
	// RunTask through control's validation, placement and group commit in process: the
	// production path without the RPC and the agent sessions (the stack's
	// "placement through RunTask" rows have those), in the same run as the ceiling above.
	prod, err := goBench(ctx, "services/scheduler/ecs/control", "^BenchmarkRunTaskPlacement$", "500x")
	if err != nil {
		errs = append(errs, err.Error())
	}
	if m, ok := find(prod, "BenchmarkRunTaskPlacement"); ok {
		rows = append(rows,
			Row{gPlace, "RunTask placements/s (control in process, no RPC or agent sessions)", m["placements/s"], "/s", "control.BenchmarkRunTaskPlacement: RunTask count 10, 64 concurrent callers, 5,000 placements"},
			Row{gPlace, "RunTask CPU per placement", m["cpu-µs/placement"], "µs", "control + placement + etcd client + embedded etcd server"})
		if nC > 0 && c["placements/s"] > 0 {
			rows = append(rows, Row{gPlace, "ratio RunTask placements/s ÷ etcd ceiling", m["placements/s"] / c["placements/s"], "ratio", ""})
		}
	}

	// Service reconcile passes over 1,000 services × 10 tasks in steady state (issue 13's
	// goals: unchanged pass ≤ 5 ms, full pass ≤ 0.5 s).
	const gSvc = "service reconcile: 1,000 services × 10 tasks, 100 instances, embedded etcd"
	if pass, err := goBench(ctx, "services/scheduler/ecs/service", "^BenchmarkPass$", "20x"); err != nil {
		errs = append(errs, err.Error())
	} else {
		for _, f := range []struct{ sub, metric, note string }{
			{"full", "full pass (goal ≤ 500 ms)", "mean of 20 (service.BenchmarkPass/full: every service's counts and deployments recomputed, nothing written)"},
			{"unchanged", "unchanged pass (goal ≤ 5 ms)", "mean of 20 (service.BenchmarkPass/unchanged: what Run does when nothing changed)"},
			{"one-service-changed", "pass after one service's task changed", "mean of 20 (service.BenchmarkPass/one-service-changed)"},
		} {
			if m, ok := find(pass, "BenchmarkPass/"+f.sub); ok {
				rows = append(rows, Row{gSvc, f.metric, m["ns/op"] / 1e6, "ms", f.note})
			}
		}
	}

	// List/Describe latency at 10 and 10,000 tasks (control package, in-process).
	const gList = "List*/Describe* (control, in-process, embedded etcd)"
	ctl, err := goBench(ctx, "services/scheduler/ecs/control", "^(BenchmarkDescribeTasks100|BenchmarkListTasksPage)$", "300x")
	if err != nil {
		errs = append(errs, err.Error())
	}
	for _, n := range []string{"10", "10000"} {
		if m, ok := find(ctl, "BenchmarkDescribeTasks100/tasks="+n+"/cache=on"); ok {
			rows = append(rows, Row{gList, "DescribeTasks(100) at " + n + " tasks", m["ns/op"] / 1e6, "ms", "mean of 300 (control.BenchmarkDescribeTasks100, the watch-fed task cache)"})
		}
		if m, ok := find(ctl, "BenchmarkDescribeTasks100/tasks="+n+"/cache=off"); ok {
			rows = append(rows, Row{gList, "DescribeTasks(100) at " + n + " tasks, records read from etcd", m["ns/op"] / 1e6, "ms", "mean of 300, same run (no task cache)"})
		}
		if m, ok := find(ctl, "BenchmarkListTasksPage/tasks="+n); ok {
			rows = append(rows, Row{gList, "ListTasks page at " + n + " tasks", m["ns/op"] / 1e6, "ms", "mean of 300 (control.BenchmarkListTasksPage)"})
		}
	}
	rows = append(rows, logsFigures(ctx, &errs)...)
	rows = append(rows, ecrFigures(ctx, &errs)...)
	// The load balancer's HTTP listener against the same target directly, in one run.
	const gLB = "load balancer: HTTP listener vs direct (lb.BenchmarkProxy, loopback)"
	lbb, err := goBench(ctx, "services/scheduler/elbv2/lb", "^BenchmarkProxy$", "5000x")
	if err != nil {
		errs = append(errs, err.Error())
	}
	if m, ok := find(lbb, "BenchmarkProxy"); ok {
		rows = append(rows,
			Row{gLB, "direct p50", m["direct-p50-µs"], "µs", "5,000 sequential keep-alive GETs to the target"},
			Row{gLB, "direct p99", m["direct-p99-µs"], "µs", ""},
			Row{gLB, "through the listener p50", m["lb-p50-µs"], "µs", "interleaved with the direct ones"},
			Row{gLB, "through the listener p99", m["lb-p99-µs"], "µs", ""},
			Row{gLB, "p50 ratio listener ÷ direct, zero-work target", m["p50-ratio"], "ratio", "two HTTP exchanges for one: ≈ 2 for any proxy"},
			Row{gLB, "listener's added p50, zero-work target", m["lb-added-p50-µs"], "µs", "listener p50 − direct p50"},
			Row{gLB, "bare httputil.ReverseProxy p50", m["bare-p50-µs"], "µs", "the floor of a net/http proxy, interleaved"},
			Row{gLB, "p50 ratio listener ÷ bare proxy", m["p50-ratio-vs-bare"], "ratio", "what Berth adds over the floor"},
			Row{gLB, "CPU per request, direct", m["direct-cpu-µs/req"], "µs", "getrusage of client + target, 2,500 sequential GETs"},
			Row{gLB, "CPU per request, through the listener", m["lb-cpu-µs/req"], "µs", "client + listener + target"},
			Row{gLB, "CPU per request, bare httputil.ReverseProxy", m["bare-cpu-µs/req"], "µs", "client + bare proxy + target"},
			Row{gLB, "CPU ratio listener ÷ direct", m["cpu-ratio"], "ratio", "zero-work target"},
			Row{gLB, "direct p50, target taking 1 ms", m["work-direct-p50-µs"], "µs", "500 sequential GETs, the target sleeps 1 ms each"},
			Row{gLB, "through the listener p50, target taking 1 ms", m["work-lb-p50-µs"], "µs", "interleaved with the direct ones"},
			Row{gLB, "through the listener p99, target taking 1 ms", m["work-lb-p99-µs"], "µs", ""},
			Row{gLB, "p50 ratio listener ÷ direct, target taking 1 ms", m["work-p50-ratio"], "ratio", "goal ≤ 1.2 (issue 17), on a request that does work"},
			Row{gLB, "listener's added p50, target taking 1 ms", m["work-lb-added-p50-µs"], "µs", "listener p50 − direct p50"},
			Row{gLB, "requests/s through one listener", m["req/s"], "/s", "16 keep-alive clients for 1 s"})
	}
	if len(errs) > 0 {
		return rows, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return rows, nil
}

// logsFigures are the CloudWatch Logs goals: ingest ≥ 20,000 lines/s from one host with
// the task's runtime ratio (awslogs ÷ json-file) ≤ 1.1, and GetLogEvents of the last
// 1,000 lines ≤ 50 ms.
func logsFigures(ctx context.Context, errs *[]string) []Row {
	const g = "CloudWatch Logs (awslogs shipping, log store)"
	var rows []Row
	if ship, err := goBench(ctx, "services/agent", "^BenchmarkAWSLogsShipping$", "3x"); err != nil {
		*errs = append(*errs, err.Error())
	} else if m, ok := find(ship, "BenchmarkAWSLogsShipping"); ok {
		rows = append(rows,
			Row{g, "log-heavy task runtime, json-file", m["json-file-ms"], "ms", "100,000 lines of 100 B, real containerd, mean of 3 (agent.BenchmarkAWSLogsShipping)"},
			Row{g, "log-heavy task runtime, awslogs", m["awslogs-ms"], "ms", "same task shipping as it runs (mode blocking)"},
			Row{g, "runtime ratio awslogs ÷ json-file (goal ≤ 1.1)", m["runtime-ratio"], "ratio", ""},
			Row{g, "lines shipped per second from one host (goal ≥ 20,000)", m["shipped-lines/s"], "/s", "assignment → every line at the control plane"})
	}
	if sh, err := goBench(ctx, "services/agent/logs", "^BenchmarkShipper$", "5x"); err != nil {
		*errs = append(*errs, err.Error())
	} else if m, ok := find(sh, "BenchmarkShipper"); ok {
		rows = append(rows, Row{g, "shipper alone: lines/s", m["lines/s"], "/s", "logs.BenchmarkShipper: file → batches → in-memory control plane"})
	}
	if st, err := goBench(ctx, "services/scheduler/logs/logstore", "^(BenchmarkPutEvents|BenchmarkGetLast1000)$", "2s"); err != nil {
		*errs = append(*errs, err.Error())
	} else {
		if m, ok := find(st, "BenchmarkPutEvents"); ok {
			rows = append(rows, Row{g, "log store ingest: lines/s", m["lines/s"], "/s", "logstore.BenchmarkPutEvents: batches of 1,000 lines of 100 B, fsync on"})
		}
		if m, ok := find(st, "BenchmarkGetLast1000"); ok {
			rows = append(rows, Row{g, "GetLogEvents of the last 1,000 of 200,000 lines (goal ≤ 50 ms)", m["ms/read"], "ms", "logstore.BenchmarkGetLast1000"})
		}
	}
	return rows
}

// placeRounds is how many rounds placementRounds runs.
const placeRounds = 5

// placeRound is one round of placementRounds: the Placer's metrics with 2 and with 8
// groups in flight (nil when that benchmark failed), and the ceiling's (the mean of a run
// just before and one just after; the one that ran when the other failed).
type placeRound struct{ place, place8, ceiling map[string]float64 }

// placementRounds runs placeRounds rounds of placement.BenchmarkPlace/random and
// BenchmarkPlaceEightInFlight/random (each its own go test, so that one failing leaves
// the other's figures), with measureCeiling before the first and after each. It returns
// the rounds that have a ceiling and a Placer figure, and the errors met.
func placementRounds(ctx context.Context) ([]placeRound, error) {
	var rounds []placeRound
	var errs []error
	before, err := measureCeiling(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	bench := func(pattern, name string) map[string]float64 {
		lines, err := goBench(ctx, "services/scheduler/ecs/placement", pattern, "20000x")
		if err != nil {
			errs = append(errs, err)
		}
		m, _ := find(lines, name)
		return m
	}
	for range placeRounds {
		p := bench("^BenchmarkPlace$/^random$", "BenchmarkPlace/random")
		p8 := bench("^BenchmarkPlaceEightInFlight$/^random$", "BenchmarkPlaceEightInFlight/random")
		after, err := measureCeiling(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		c := meanOf(before, after)
		if c != nil && (p != nil || p8 != nil) {
			rounds = append(rounds, placeRound{place: p, place8: p8, ceiling: c})
		}
		if after != nil {
			before = after
		}
	}
	return rounds, errors.Join(errs...)
}

// meanOf returns the mean of a's and b's metrics, the one given when the other is nil,
// or nil when both are.
func meanOf(a, b map[string]float64) map[string]float64 {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	out := map[string]float64{}
	for k, v := range a {
		out[k] = (v + b[k]) / 2
	}
	return out
}

// medianOf returns, for each metric of pick(round) over the rounds where it is not nil,
// its median, and how many rounds that was.
func medianOf(rounds []placeRound, pick func(placeRound) map[string]float64) (map[string]float64, int) {
	vals := map[string][]float64{}
	n := 0
	for _, r := range rounds {
		m := pick(r)
		if m == nil {
			continue
		}
		n++
		for k, v := range m {
			vals[k] = append(vals[k], v)
		}
	}
	out := map[string]float64{}
	for k, v := range vals {
		out[k] = median(v)
	}
	return out, n
}

// median returns the median of v (the mean of the middle two when len(v) is even; 0 when
// v is empty).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// ecrFigures is the ECR registry's row: the push then pull of a new 200 MiB image (four
// layers) through Berth's registry (disk blobs, etcd images, token auth) against
// go-containerregistry's in-memory registry on the same machine (issue 36's goal: ≤ 1.3×;
// printed, not asserted).
func ecrFigures(ctx context.Context, errs *[]string) []Row {
	const g = "ECR registry: push + pull of a new 200 MiB image (4 layers)"
	lines, err := goBench(ctx, "services/scheduler/ecr/registry", "^BenchmarkPushPull200$", "3x")
	if err != nil {
		*errs = append(*errs, err.Error())
		return nil
	}
	mem, ok1 := find(lines, "BenchmarkPushPull200/memory")
	reg, ok2 := find(lines, "BenchmarkPushPull200/ecr")
	if !ok1 || !ok2 || mem["ns/op"] == 0 {
		*errs = append(*errs, "registry.BenchmarkPushPull200: no result lines")
		return nil
	}
	return []Row{
		{g, "go-containerregistry in-memory registry", mem["ns/op"] / 1e6, "ms", "mean of 3 (registry.BenchmarkPushPull200/memory), remote.Write then remote.Image with every layer read"},
		{g, "Berth's ECR registry", reg["ns/op"] / 1e6, "ms", "mean of 3 (registry.BenchmarkPushPull200/ecr): blobs fsynced to disk, images in embedded etcd, token auth"},
		{g, "ratio ECR ÷ in-memory", reg["ns/op"] / mem["ns/op"], "ratio", "goal ≤ 1.3 (issue 36)"},
	}
}
