package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Row is one figure in the table and in results.json.
type Row struct {
	// Group is the comparison the figure belongs to.
	Group string `json:"group"`
	// Metric names the figure within its group.
	Metric string `json:"metric"`
	// Value is the figure, in Unit.
	Value float64 `json:"value"`
	// Unit is the figure's unit (ms, µs, /s, cores, ratio, count).
	Unit string `json:"unit"`
	// Note says how it was measured, where the group does not.
	Note string `json:"note,omitempty"`
}

// Results is what results.json holds.
type Results struct {
	// Commit is the git commit measured ("" when unknown).
	Commit string `json:"commit"`
	// Time is when the run started (RFC 3339, UTC).
	Time string `json:"time"`
	// CPUs is runtime.NumCPU of the machine.
	CPUs int `json:"cpus"`
	// LoadAverage is /proc/loadavg at the start: other work on the machine skews figures.
	LoadAverage string `json:"loadAverage"`
	// Seconds is the run's wall time.
	Seconds float64 `json:"seconds"`
	// Rows are the figures.
	Rows []Row `json:"rows"`
	// Errors are the parts that failed, so a partial run is visible as such.
	Errors []string `json:"errors,omitempty"`
}

type options struct {
	out           string
	samples       int
	rate          float64
	highRate      float64
	duration      time.Duration
	placeDuration time.Duration
	profileDir    string
	only          map[string]bool
	sessions      int
	heartbeat     time.Duration
	noTaskCache   bool
	skipStack     bool
	skipGoTest    bool
	workDir       string
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "bench/results.json", "where to write the figures as JSON")
	flag.IntVar(&o.samples, "samples", 30, "RunTask → RUNNING samples (and as many raw containerd starts)")
	flag.Float64Var(&o.rate, "rate", 10, "fixed request rate (requests/s) for the gateway figures")
	flag.Float64Var(&o.highRate, "high-rate", 200, "the second, higher fixed rate (requests/s) of DescribeTasks(100)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long each fixed-rate run lasts")
	flag.DurationVar(&o.placeDuration, "place-duration", 10*time.Second, "how long the RunTask placement run lasts")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write CPU profiles of the placement-path, placement-path-reporting and gateway-high runs (<part>.pprof) and allocation profiles at their start and end (<part>.allocs-start.pprof, <part>.allocs-end.pprof) into this directory")
	onlyFlag := flag.String("only", "", "run only these parts, comma-separated: "+strings.Join(parts, ", ")+" (default: all)")
	flag.IntVar(&o.sessions, "sessions", 5000, "fake agent sessions to open against one scheduler replica")
	flag.DurationVar(&o.heartbeat, "heartbeat", 10*time.Second, "fake agents' heartbeat interval (the agent's default)")
	flag.BoolVar(&o.noTaskCache, "no-task-cache", false, "run the scheduler without its DescribeTasks task cache (every call reads the records from etcd), to compare")
	flag.BoolVar(&o.skipStack, "skip-stack", false, "skip the in-process stack figures")
	flag.BoolVar(&o.skipGoTest, "skip-go-test", false, "skip the figures taken from `go test -bench`")
	flag.StringVar(&o.workDir, "dir", "", "scratch directory (default: a new temporary one)")
	var fake fakeFlags
	fake.register(flag.CommandLine)
	var load loadFlags
	load.register(flag.CommandLine)
	flag.Parse()
	if *onlyFlag != "" {
		o.only = map[string]bool{}
		for _, p := range strings.Split(*onlyFlag, ",") {
			if !slices.Contains(parts, p) {
				fmt.Fprintf(os.Stderr, "bench: -only: unknown part %q (parts: %s)\n", p, strings.Join(parts, ", "))
				os.Exit(2)
			}
			o.only[p] = true
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if load.url != "" { // child mode: the DescribeTasks load client
		if err := runLoadClient(ctx, load); err != nil {
			fmt.Fprintln(os.Stderr, "load client:", err)
			os.Exit(1)
		}
		return
	}
	if fake.n > 0 { // child mode: hold fake agent sessions until killed
		if err := runFakeAgents(ctx, fake); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "fake agents:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parts are the bench's parts, in the order they run, as -only names them.
var parts = []string{"runtask", "agent-rss", "gateway", "gateway-high", "sessions", "placement-path", "placement-path-reporting", "go-test"}

// want reports whether part runs: every part unless -only names some.
func (o options) want(part string) bool { return o.only == nil || o.only[part] }

func run(ctx context.Context, o options) error {
	start := time.Now()
	res := &Results{Time: start.UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), Commit: gitCommit()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.LoadAverage = strings.TrimSpace(string(b))
	}
	dir := o.workDir
	if dir == "" {
		d, err := os.MkdirTemp("", "berth-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	step := func(name string, f func() ([]Row, error)) {
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "bench: %s ...\n", name)
		rows, err := f()
		res.Rows = append(res.Rows, rows...)
		if err != nil {
			res.Errors = append(res.Errors, name+": "+err.Error())
			fmt.Fprintf(os.Stderr, "bench: %s failed: %v\n", name, err)
		}
		fmt.Fprintf(os.Stderr, "bench: %s done in %s\n", name, time.Since(t0).Round(time.Second))
	}
	if !o.skipStack && (o.want("runtask") || o.want("agent-rss") || o.want("gateway") || o.want("gateway-high") || o.want("sessions") || o.want("placement-path") || o.want("placement-path-reporting")) {
		step("stack", func() ([]Row, error) { return stackFigures(ctx, o, dir) })
	}
	if !o.skipGoTest && o.want("go-test") {
		step("go test -bench", func() ([]Row, error) { return goTestFigures(ctx) })
	}
	res.Seconds = time.Since(start).Seconds()
	printTable(os.Stdout, res)
	if o.out != "" {
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return err
		}
		data, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding the results: %w", err)
		}
		if err := os.WriteFile(o.out, append(data, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Printf("\nwrote %s (%d figures) in %s\n", o.out, len(res.Rows), time.Since(start).Round(time.Second))
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("%d part(s) failed: %s", len(res.Errors), strings.Join(res.Errors, "; "))
	}
	return nil
}

func printTable(w io.Writer, res *Results) {
	fmt.Fprintf(w, "Berth bench — commit %s, %d CPUs, load average %s\n\n", cmpOr(res.Commit, "unknown"), res.CPUs, res.LoadAverage)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "group\tmetric\tvalue\tunit\tnote")
	last := ""
	for _, r := range res.Rows {
		g := r.Group
		if g == last {
			g = ""
		} else if last != "" {
			fmt.Fprintln(tw, "\t\t\t\t")
		}
		last = r.Group
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g, r.Metric, format(r.Value), r.Unit, r.Note)
	}
	_ = tw.Flush()
	for _, e := range res.Errors {
		fmt.Fprintln(w, "FAILED:", e)
	}
}

func format(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// percentile returns the p-th percentile (0 < p ≤ 100) of ds by nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
