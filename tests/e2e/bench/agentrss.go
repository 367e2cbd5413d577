package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// rssTasks is how many tasks the loaded agent runs.
const rssTasks = 50

// agentBinary is one way to run the agent: a binary built from pkg, run with args before
// the agent's flags.
type agentBinary struct {
	name, pkg string
	args      []string
}

// agentRSSFigures measures the agent's resident memory as a process of its own (not this
// process), run as berth-agent and as the all-in-one `berth agent`.
func agentRSSFigures(ctx context.Context, s *stack, dir string) ([]Row, error) {
	var rows []Row
	for i, b := range []agentBinary{
		{name: "berth-agent", pkg: "./cmd/berth/berth-agent"},
		{name: "berth agent (all-in-one binary)", pkg: "./cmd/berth", args: []string{"agent"}},
	} {
		r, err := agentRSS(ctx, s, dir, fmt.Sprintf("rss%d", i), b)
		rows = append(rows, r...)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", b.name, err)
		}
	}
	return rows, nil
}

// agentRSS runs the agent binary b joined to the stack's gateway (cluster, with the
// account's key) and driving the stack's containerd. It reads VmRSS from /proc once the
// agent is connected and idle, then with rssTasks tasks RUNNING, each after the agent
// has settled (the highest of 5 one-second samples), then stops the tasks and the agent.
func agentRSS(ctx context.Context, s *stack, dir, cluster string, b agentBinary) ([]Row, error) {
	g := "agent RSS: " + b.name + " (its process alone, VmRSS)"
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, cluster+"-agent")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, b.pkg)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build berth-agent: %w\n%s", err, out)
	}
	if _, err := s.ecs.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String(cluster)}); err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	agent := exec.Command(bin, append(b.args, "--gateway", s.gwURL, "--cluster", cluster, "--data-dir", filepath.Join(dir, cluster+"-agent-data"),
		"--containerd", s.ctd.Address(), "--snapshotter", s.ctd.Snapshotter(), "--runc-root", s.ctd.RuncRoot(), "--namespace", "berth-"+cluster, "--log-addr", "127.0.0.1:0")...)
	agent.Env = append(os.Environ(), "BERTH_ACCESS_KEY_ID="+accessKey, "BERTH_SECRET_ACCESS_KEY="+secretKey, "BERTH_REGION="+region)
	if extra := os.Getenv("BERTH_BENCH_AGENT_ENV"); extra != "" {
		// One more NAME=VALUE for the measured agents, to compare settings (GOGC=100).
		agent.Env = append(agent.Env, extra)
	}
	agent.Stderr = &stderr
	if err := agent.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = agent.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = agent.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = agent.Process.Kill()
			<-done
		}
	}()
	fail := func(err error) ([]Row, error) {
		tail := stderr.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return nil, fmt.Errorf("%w\nberth-agent stderr ends:\n%s", err, tail)
	}
	if err := s.waitConnected(ctx, cluster, 1, time.Minute); err != nil {
		return fail(err)
	}
	idle, err := settledRSS(ctx, agent.Process.Pid)
	if err != nil {
		return fail(err)
	}

	out, err := s.ecs.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family:      aws.String("bench-" + cluster),
		NetworkMode: ecstypes.NetworkModeHost,
		ContainerDefinitions: []ecstypes.ContainerDefinition{{
			Name: aws.String("main"), Image: aws.String(s.image), Command: []string{"sleep", "3600"},
			Memory: aws.Int32(8), Essential: aws.Bool(true), StopTimeout: aws.Int32(2),
		}},
	})
	if err != nil {
		return fail(err)
	}
	td := aws.ToString(out.TaskDefinition.TaskDefinitionArn)
	var arns []string
	defer func() {
		for _, arn := range arns {
			_, _ = s.ecs.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String(cluster), Task: aws.String(arn)})
		}
		for _, arn := range arns {
			_ = s.waitStatus(ctx, cluster, arn, "STOPPED", time.Minute)
		}
	}()
	for len(arns) < rssTasks {
		run, err := s.ecs.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String(cluster), TaskDefinition: aws.String(td), Count: aws.Int32(10)})
		if err != nil {
			return fail(err)
		}
		if len(run.Tasks) == 0 {
			return fail(fmt.Errorf("RunTask placed nothing: %s", failures(run.Failures)))
		}
		for _, t := range run.Tasks {
			arns = append(arns, aws.ToString(t.TaskArn))
		}
	}
	for _, arn := range arns {
		if err := s.waitStatus(ctx, cluster, arn, "RUNNING", 2*time.Minute); err != nil {
			return fail(err)
		}
	}
	loaded, err := settledRSS(ctx, agent.Process.Pid)
	if err != nil {
		return fail(err)
	}
	return []Row{
		{g, "idle", idle.total, "MiB", "registered, session up, no task; after 5 s"},
		{g, "idle: anonymous (heap, stacks)", idle.anon, "MiB", "RssAnon of the same sample"},
		{g, "idle: file-backed (the binary's pages)", idle.file, "MiB", "RssFile: text and read-only data touched, shared with the page cache"},
		{g, fmt.Sprintf("%d tasks RUNNING", len(arns)), loaded.total, "MiB", "the same agent once every task is RUNNING; after 5 s"},
		{g, fmt.Sprintf("%d tasks RUNNING: anonymous", len(arns)), loaded.anon, "MiB", ""},
		{g, fmt.Sprintf("%d tasks RUNNING: file-backed", len(arns)), loaded.file, "MiB", ""},
	}, nil
}

// rss is one VmRSS sample and its split, in MiB.
type rss struct{ total, anon, file float64 }

// settledRSS waits 5 s for the process to settle and returns the highest VmRSS of five
// one-second samples (with that sample's anonymous and file-backed parts), in MiB.
func settledRSS(ctx context.Context, pid int) (rss, error) {
	select {
	case <-ctx.Done():
		return rss{}, ctx.Err()
	case <-time.After(5 * time.Second):
	}
	var peak rss
	for range 5 {
		r, err := vmRSS(pid)
		if err != nil {
			return rss{}, err
		}
		if r.total > peak.total {
			peak = r
		}
		time.Sleep(time.Second)
	}
	return peak, nil
}

// vmRSS returns the VmRSS, RssAnon and RssFile lines of /proc/pid/status, in MiB.
func vmRSS(pid int) (rss, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return rss{}, err
	}
	var r rss
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		f := strings.Fields(rest)
		if !ok || len(f) < 1 {
			continue
		}
		kib, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			r.total, found = float64(kib)/1024, true
		case "RssAnon":
			r.anon = float64(kib) / 1024
		case "RssFile":
			r.file = float64(kib) / 1024
		}
	}
	if !found {
		return rss{}, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
	}
	return r, nil
}
