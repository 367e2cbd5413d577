package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// The 200 requests/s DescribeTasks row runs its AWS SDK client in a child process of
// this binary, as a user's client runs apart from the gateway: in one process the
// client's own allocations (the SDK decodes each ~150 KB answer into ~2 MB of Go
// values) drive the garbage collector that the gateway and scheduler share, and its
// pauses and assists showed up in their latencies.

// loadFlags are the child mode's flags (internal: set by describeLoad).
type loadFlags struct {
	// url is the gateway's base URL; the child runs when it is set.
	url      string
	cluster  string
	rate     float64
	warmUp   time.Duration
	duration time.Duration
}

func (f *loadFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "load-url", "", "internal: gateway URL for the DescribeTasks load client (child process mode; task ARNs on stdin, one JSON array)")
	fs.StringVar(&f.cluster, "load-cluster", "", "internal: cluster of the load client's tasks")
	fs.Float64Var(&f.rate, "load-rate", 200, "internal: the load client's requests/s")
	fs.DurationVar(&f.warmUp, "load-warm-up", 2*time.Second, "internal: the load client's unmeasured warm-up at the same rate")
	fs.DurationVar(&f.duration, "load-duration", 10*time.Second, "internal: how long the load client measures")
}

// loadResult is the child's answer, one JSON line after its "measuring" line.
type loadResult struct {
	// Latencies are the measured calls that succeeded, in nanoseconds.
	Latencies []time.Duration `json:"latencies"`
	// Err is the first failed call's error ("" when none failed).
	Err string `json:"err,omitempty"`
}

// runLoadClient is the child: it reads the task ARNs from stdin, calls
// DescribeTasks(arns) at f.rate for f.warmUp unmeasured, prints "measuring", calls for
// f.duration and prints a loadResult.
func runLoadClient(ctx context.Context, f loadFlags) error {
	var arns []string
	if err := json.NewDecoder(os.Stdin).Decode(&arns); err != nil {
		return fmt.Errorf("reading task ARNs: %w", err)
	}
	describe := describeAll(newECSClient(f.url), f.cluster, arns)
	if _, err := fixedRate(ctx, f.rate, f.warmUp, describe); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	fmt.Println("measuring")
	lat, err := fixedRate(ctx, f.rate, f.duration, describe)
	res := loadResult{Latencies: lat}
	if err != nil {
		res.Err = err.Error()
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// describeLoad runs the load client in a child process against the gateway at url and
// returns its measured latencies. onMeasuring is called when the child's warm-up ends
// and onDone when its last call returned; clientCPU is the child's whole CPU time
// (user + system, warm-up included). The error is the child's failure or its first
// failed call.
func describeLoad(ctx context.Context, url, cluster string, arns []string, rate float64, warmUp, d time.Duration, onMeasuring, onDone func()) (lat []time.Duration, clientCPU time.Duration, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.CommandContext(ctx, exe, "-load-url", url, "-load-cluster", cluster,
		"-load-rate", fmt.Sprint(rate), "-load-warm-up", warmUp.String(), "-load-duration", d.String())
	cmd.Stderr = os.Stderr
	in, err := json.Marshal(arns)
	if err != nil {
		return nil, 0, err
	}
	cmd.Stdin = bytes.NewReader(in)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	var res loadResult
	var readErr error
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if string(line) == "measuring" {
			onMeasuring()
			continue
		}
		onDone()
		if readErr = json.Unmarshal(line, &res); readErr != nil {
			readErr = fmt.Errorf("load client's result: %w", readErr)
		}
	}
	waitErr := cmd.Wait()
	if cmd.ProcessState != nil {
		clientCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if waitErr != nil {
		return nil, clientCPU, fmt.Errorf("load client: %w", waitErr)
	}
	if readErr != nil {
		return nil, clientCPU, readErr
	}
	if res.Err != "" {
		err = errors.New(res.Err)
	}
	return res.Latencies, clientCPU, err
}
