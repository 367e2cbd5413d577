package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/prometheus/client_golang/prometheus"

	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/pkg/h2c"
	"github.com/berthhq/berth/pkg/sigv4client"
	"github.com/berthhq/berth/services/agent"
	"github.com/berthhq/berth/services/agent/containerdproc"
	"github.com/berthhq/berth/services/agent/ociregistry"
	"github.com/berthhq/berth/services/gateway"
	"github.com/berthhq/berth/services/scheduler/app"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
	"github.com/berthhq/berth/testkit/testimage"
)

const (
	region    = "us-east-1"
	account   = "000000000000"
	accessKey = "BENCHKEY"
	secretKey = "bench-secret"
)

// stack is the in-process Berth the figures are taken on.
type stack struct {
	sched    *app.App
	schedURL string
	gwURL    string
	ecs      *ecs.Client
	image    string
	ctd      *containerdproc.Instance
	reg      *prometheus.Registry
	handled  handlerTimes // the gateway's own time on each DescribeTasks, while on
}

// handlerTimes records how long the gateway's handler took for each DescribeTasks while
// it is on: from ServeHTTP's call to its return (the request body read, SigV4, the
// scheduler's answer, the JSON answer written). Set against the client's latencies it
// tells the server's share of them from the client process's, the loopback's and the
// wait for a CPU.
type handlerTimes struct {
	on atomic.Bool
	mu sync.Mutex
	d  []time.Duration
}

// describeTarget is DescribeTasks' X-Amz-Target.
const describeTarget = "AmazonEC2ContainerServiceV20141113.DescribeTasks"

// wrap returns h recording into ht.
func (ht *handlerTimes) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ht.on.Load() || r.Header.Get("X-Amz-Target") != describeTarget {
			h.ServeHTTP(w, r)
			return
		}
		t0 := time.Now()
		h.ServeHTTP(w, r)
		d := time.Since(t0)
		ht.mu.Lock()
		ht.d = append(ht.d, d)
		ht.mu.Unlock()
	})
}

// take returns what was recorded and forgets it.
func (ht *handlerTimes) take() []time.Duration {
	ht.mu.Lock()
	defer ht.mu.Unlock()
	d := ht.d
	ht.d = nil
	return d
}

func startStack(ctx context.Context, o options, dir string, wg *sync.WaitGroup) (*stack, error) {
	etcd, err := etcdembed.Start(ctx, etcdembed.Config{Dir: filepath.Join(dir, "etcd"), ClientURL: "http://127.0.0.1:0", UnsafeNoFsync: true,
		MaxTxnOps: etcdembed.DevMaxTxnOps}) // as `berth dev`
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	context.AfterFunc(ctx, func() { etcd.Close() })
	s := &stack{reg: prometheus.NewRegistry()}
	cli, err := etcd.InProcessClient() // as `berth dev`'s scheduler
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { cli.Close() })
	s.sched, err = app.New(app.Config{Etcd: cli, Region: region, Registry: s.reg, MaxTxnOps: etcdembed.DevMaxTxnOps, NoTaskCache: o.noTaskCache})
	if err != nil {
		return nil, err
	}
	schedLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.schedURL = "http://" + schedLn.Addr().String()
	wg.Go(func() { _ = h2c.Serve(ctx, schedLn, s.sched.Handler()) })
	wg.Go(func() { _ = s.sched.Run(ctx) })
	if _, err := s.sched.Admin().CreateAccount(ctx, connect.NewRequest(&adminv1.CreateAccountRequest{Id: account, Name: "bench"})); err != nil {
		return nil, fmt.Errorf("account: %w", err)
	}
	if _, err := s.sched.Admin().CreateAccessKey(ctx, connect.NewRequest(&adminv1.CreateAccessKeyRequest{
		AccountId: account, AccessKeyId: accessKey, SecretAccessKey: secretKey, Description: "bench",
	})); err != nil {
		return nil, fmt.Errorf("access key: %w", err)
	}
	gw, err := gateway.New(gateway.Config{
		SchedulerURL: s.schedURL, Rate: -1, LockoutAfter: -1,
		Logger: slog.New(slog.DiscardHandler), Registry: s.reg,
	})
	if err != nil {
		return nil, err
	}
	gwLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.gwURL = "http://" + gwLn.Addr().String()
	wg.Go(func() { _ = h2c.Serve(ctx, gwLn, s.handled.wrap(gw)) })
	s.ecs = newECSClient(s.gwURL)

	reg, err := ociregistry.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	context.AfterFunc(ctx, func() { _ = reg.Close() })
	img, err := testimage.Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("test image: %w", err)
	}
	s.image = reg.Addr() + "/berth/testimage:bench"
	if err := testimage.Push(ctx, img, s.image); err != nil {
		return nil, fmt.Errorf("push test image: %w", err)
	}
	s.ctd, err = containerdproc.StartProcess(ctx, filepath.Join(dir, "containerd"))
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	return s, nil
}

// startAgent runs the real agent against the gateway (SigV4 with the account's key).
func (s *stack) startAgent(ctx context.Context, dir, cluster string, wg *sync.WaitGroup) error {
	h2c := gateway.NewH2CClient()
	h2c.Transport = sigv4client.New(h2c.Transport, sigv4client.StaticCredentials(accessKey, secretKey), region)
	a, err := agent.New(agent.Config{
		ControlPlaneURL:   s.gwURL,
		HTTPClient:        h2c,
		Cluster:           cluster,
		DataDir:           filepath.Join(dir, "agent"),
		ContainerdAddress: s.ctd.Address(),
		Snapshotter:       s.ctd.Snapshotter(),
		RuncRoot:          s.ctd.RuncRoot(),
		Namespace:         "berth-bench",
		PullBehavior:      "prefer-cached",
		StopTimeout:       2 * time.Second,
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	wg.Go(func() { _ = a.Run(ctx) })
	return nil
}

func (s *stack) registerTaskDef(ctx context.Context, family, image string, command ...string) (string, error) {
	return s.registerTaskDefMode(ctx, ecstypes.NetworkModeHost, nil, family, image, command...)
}

// registerTaskDefMode registers a one-container task definition in network mode mode
// with the given port mappings.
func (s *stack) registerTaskDefMode(ctx context.Context, mode ecstypes.NetworkMode, ports []ecstypes.PortMapping, family, image string, command ...string) (string, error) {
	out, err := s.ecs.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family:      aws.String(family),
		NetworkMode: mode,
		ContainerDefinitions: []ecstypes.ContainerDefinition{{
			Name: aws.String("main"), Image: aws.String(image), Command: command,
			Memory: aws.Int32(8), Essential: aws.Bool(true), PortMappings: ports,
		}},
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.TaskDefinition.TaskDefinitionArn), nil
}

// waitStatus polls DescribeTasks every 5 ms until the task reaches status.
func (s *stack) waitStatus(ctx context.Context, cluster, arn, status string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := s.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(cluster), Tasks: []string{arn}})
		if err != nil {
			return err
		}
		if len(out.Tasks) == 1 {
			got := aws.ToString(out.Tasks[0].LastStatus)
			if got == status {
				return nil
			}
			if got == "STOPPED" {
				return fmt.Errorf("task %s stopped: %s", arn, aws.ToString(out.Tasks[0].StoppedReason))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("task %s not %s after %s", arn, status, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *stack) waitConnected(ctx context.Context, cluster string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		list, err := s.ecs.ListContainerInstances(ctx, &ecs.ListContainerInstancesInput{Cluster: aws.String(cluster)})
		if err == nil && len(list.ContainerInstanceArns) > 0 {
			desc, err := s.ecs.DescribeContainerInstances(ctx, &ecs.DescribeContainerInstancesInput{Cluster: aws.String(cluster), ContainerInstances: list.ContainerInstanceArns})
			if err == nil {
				up := 0
				for _, ci := range desc.ContainerInstances {
					if ci.AgentConnected {
						up++
					}
				}
				if up >= n {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster %s: fewer than %d connected instances after %s", cluster, n, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stackFigures runs the in-process stack and takes its figures.
func stackFigures(ctx context.Context, o options, dir string) ([]Row, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	s, err := startStack(ctx, o, dir, &wg)
	if err != nil {
		return nil, err
	}
	defer func() {
		stop, c := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer c()
		_ = s.ctd.Stop(stop)
	}()
	var rows []Row
	var errs []error
	part := func(name string, f func() ([]Row, error)) {
		if !o.want(name) {
			return
		}
		r, err := f()
		rows = append(rows, r...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	part("runtask", func() ([]Row, error) { return runTaskFigures(ctx, s, o, dir, &wg) })
	part("agent-rss", func() ([]Row, error) { return agentRSSFigures(ctx, s, dir) })
	if o.want("gateway") || o.want("gateway-high") {
		r, err := gatewayFigures(ctx, s, o)
		rows = append(rows, r...)
		if err != nil {
			errs = append(errs, fmt.Errorf("gateway at a fixed rate: %w", err))
		}
	}
	part("sessions", func() ([]Row, error) { return sessionFigures(ctx, s, o) })
	part("placement-path", func() ([]Row, error) { return placementPathFigures(ctx, s, o, false) })
	part("placement-path-reporting", func() ([]Row, error) { return placementPathFigures(ctx, s, o, true) })
	return rows, errors.Join(errs...)
}

// runTaskFigures: RunTask → RUNNING through the gateway with the real agent and a cached
// image, then raw containerd create+start of the same image.
func runTaskFigures(ctx context.Context, s *stack, o options, dir string, wg *sync.WaitGroup) ([]Row, error) {
	const cluster = "bench"
	const g = "RunTask → RUNNING, cached image (gateway + scheduler + agent + containerd)"
	if _, err := s.ecs.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String(cluster)}); err != nil {
		return nil, err
	}
	actx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	if err := s.startAgent(actx, dir, cluster, wg); err != nil {
		return nil, err
	}
	if err := s.waitConnected(ctx, cluster, 1, 60*time.Second); err != nil {
		return nil, err
	}
	td, err := s.registerTaskDef(ctx, "bench-sleep", s.image, "sleep", "3600")
	if err != nil {
		return nil, err
	}
	bridgeTD, err := s.registerTaskDefMode(ctx, ecstypes.NetworkModeBridge, []ecstypes.PortMapping{{ContainerPort: aws.Int32(8080)}}, "bench-bridge", s.image, "serve", "8080")
	if err != nil {
		return nil, err
	}
	vpcTD, err := s.registerTaskDefMode(ctx, ecstypes.NetworkModeAwsvpc, nil, "bench-awsvpc", s.image, "sleep", "3600")
	if err != nil {
		return nil, err
	}
	var arns []string
	var runTask func(string, *ecstypes.NetworkConfiguration) (time.Duration, error)
	runOne := func() (time.Duration, error) { return runTask(td, nil) }
	runTask = func(td string, nc *ecstypes.NetworkConfiguration) (time.Duration, error) {
		t0 := time.Now()
		out, err := s.ecs.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String(cluster), TaskDefinition: aws.String(td), NetworkConfiguration: nc})
		if err != nil {
			return 0, err
		}
		if len(out.Tasks) != 1 {
			return 0, fmt.Errorf("RunTask placed nothing: %s", failures(out.Failures))
		}
		arn := aws.ToString(out.Tasks[0].TaskArn)
		arns = append(arns, arn)
		if err := s.waitStatus(ctx, cluster, arn, "RUNNING", 2*time.Minute); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	vpcConf := &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{"subnet-00000000000000001"}}}
	// Bridge (own namespace, a dynamic host port by portmap) and awsvpc (the task's
	// namespace on the host's task subnet) tasks, one at a time, left running as the
	// host-mode ones are.
	netSamples := func(td string, nc *ecstypes.NetworkConfiguration) ([]time.Duration, error) {
		var ds []time.Duration
		for i := range o.samples + 1 {
			d, err := runTask(td, nc)
			if err != nil {
				return nil, err
			}
			if i > 0 { // the first sets up the bridge and the plugins' chains
				ds = append(ds, d)
			}
		}
		return ds, nil
	}
	if _, err := runOne(); err != nil { // pulls and unpacks the image
		return nil, fmt.Errorf("warm-up task: %w", err)
	}
	var berth []time.Duration
	for range o.samples {
		d, err := runOne()
		if err != nil {
			return nil, err
		}
		berth = append(berth, d)
	}
	bridge, err := netSamples(bridgeTD, nil)
	if err != nil {
		return nil, fmt.Errorf("bridge tasks: %w", err)
	}
	vpc, err := netSamples(vpcTD, vpcConf)
	if err != nil {
		return nil, fmt.Errorf("awsvpc tasks: %w", err)
	}
	for _, arn := range arns {
		_, _ = s.ecs.StopTask(ctx, &ecs.StopTaskInput{Cluster: aws.String(cluster), Task: aws.String(arn)})
	}
	raw, err := rawContainerd(ctx, s, o.samples)
	if err != nil {
		return nil, fmt.Errorf("raw containerd: %w", err)
	}
	for _, arn := range arns {
		_ = s.waitStatus(ctx, cluster, arn, "STOPPED", time.Minute)
	}
	stopAgent()
	rows := []Row{
		{g, "p50", ms(percentile(berth, 50)), "ms", fmt.Sprintf("%d tasks, one at a time; RunTask until DescribeTasks (polled every 5 ms) says RUNNING", len(berth))},
		{g, "p99", ms(percentile(berth, 99)), "ms", ""},
		{g, "raw containerd create+start p50", ms(percentile(raw, 50)), "ms", "same image and containerd, NewContainer + NewTask + Start"},
		{g, "raw containerd create+start p99", ms(percentile(raw, 99)), "ms", ""},
	}
	if p := percentile(raw, 50); p > 0 {
		rows = append(rows, Row{g, "ratio p50 Berth ÷ raw", float64(percentile(berth, 50)) / float64(p), "ratio", ""})
	}
	gn := "RunTask → RUNNING with task networking (CNI), cached image"
	rows = append(rows,
		Row{gn, "bridge p50", ms(percentile(bridge, 50)), "ms", fmt.Sprintf("%d tasks: own namespace on the Berth bridge, one dynamic host port (portmap)", len(bridge))},
		Row{gn, "awsvpc p50", ms(percentile(vpc, 50)), "ms", fmt.Sprintf("%d tasks: the task's namespace on the host's task subnet", len(vpc))})
	if p := percentile(raw, 50); p > 0 {
		rows = append(rows,
			Row{gn, "ratio bridge p50 ÷ raw containerd create+start p50", float64(percentile(bridge, 50)) / float64(p), "ratio", "raw: the same run's figure above"},
			Row{gn, "ratio awsvpc p50 ÷ raw containerd create+start p50", float64(percentile(vpc, 50)) / float64(p), "ratio", ""})
	}
	return rows, nil
}

func rawContainerd(ctx context.Context, s *stack, n int) ([]time.Duration, error) {
	client, err := containerd.New(s.ctd.Address(), containerd.WithDefaultNamespace("bench-raw"))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	ctx = namespaces.WithNamespace(ctx, "bench-raw")
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: docker.ConfigureDefaultRegistries(docker.WithPlainHTTP(docker.MatchLocalhost))})
	img, err := client.Pull(ctx, s.image, containerd.WithResolver(resolver), containerd.WithPullUnpack, containerd.WithPullSnapshotter(s.ctd.Snapshotter()))
	if err != nil {
		return nil, err
	}
	var ds []time.Duration
	var ctrs []containerd.Container
	defer func() {
		for _, c := range ctrs {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if t, err := c.Task(cctx, nil); err == nil {
				_ = t.Kill(cctx, syscall.SIGKILL)
				if ch, err := t.Wait(cctx); err == nil {
					<-ch
				}
				_, _ = t.Delete(cctx)
			}
			_ = c.Delete(cctx, containerd.WithSnapshotCleanup)
			cancel()
		}
	}()
	for i := range n {
		id := fmt.Sprintf("raw-%d-%d", os.Getpid(), i)
		t0 := time.Now()
		ctr, err := client.NewContainer(ctx, id,
			containerd.WithImage(img),
			containerd.WithSnapshotter(s.ctd.Snapshotter()),
			containerd.WithNewSnapshot(id+"-rootfs", img),
			containerd.WithNewSpec(oci.WithImageConfigArgs(img, []string{"sleep", "600"})),
			s.ctd.RuntimeOpt(),
		)
		if err != nil {
			return nil, err
		}
		ctrs = append(ctrs, ctr)
		task, err := ctr.NewTask(ctx, cio.NullIO)
		if err != nil {
			return nil, err
		}
		if err := task.Start(ctx); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}

// gatewayFigures: DescribeTasks(100) and RunTask(1) p50/p99 at a fixed request rate,
// tasks placed on fake agents (nothing runs), through the AWS SDK.
func gatewayFigures(ctx context.Context, s *stack, o options) ([]Row, error) {
	const cluster = "load"
	g := fmt.Sprintf("gateway at a fixed %g requests/s for %s (AWS SDK for Go v2, SigV4)", o.rate, o.duration)
	if _, err := s.ecs.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String(cluster)}); err != nil {
		return nil, err
	}
	fctx, stopFleet := context.WithCancel(ctx)
	defer stopFleet()
	const agents = 20
	_, _, err := fakeFleet(fctx, s.schedURL, account, cluster, "load", agents, 10*time.Second, 1024*64, 1<<20, false)
	if err != nil {
		return nil, err
	}
	if err := s.waitConnected(ctx, cluster, agents, time.Minute); err != nil {
		return nil, err
	}
	td, err := s.registerTaskDef(ctx, "bench-load", s.image, "sleep", "3600")
	if err != nil {
		return nil, err
	}
	var arns []string
	for len(arns) < 100 {
		out, err := s.ecs.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String(cluster), TaskDefinition: aws.String(td), Count: aws.Int32(10)})
		if err != nil {
			return nil, err
		}
		for _, t := range out.Tasks {
			arns = append(arns, aws.ToString(t.TaskArn))
		}
		if len(out.Tasks) == 0 {
			return nil, fmt.Errorf("seeding tasks: nothing placed: %s", failures(out.Failures))
		}
	}
	arns = arns[:100]
	describeTasks := describeAll(s.ecs, cluster, arns)
	var rows []Row
	var errs []error
	if o.want("gateway") {
		describe, derr := fixedRate(ctx, o.rate, o.duration, describeTasks)
		run, rerr := fixedRate(ctx, o.rate, o.duration, func(ctx context.Context) error {
			out, err := s.ecs.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String(cluster), TaskDefinition: aws.String(td)})
			if err == nil && len(out.Tasks) != 1 {
				err = fmt.Errorf("RunTask placed nothing: %s", failures(out.Failures))
			}
			return err
		})
		rows = append(rows,
			Row{g, "DescribeTasks(100) p50", ms(percentile(describe, 50)), "ms", fmt.Sprintf("%d calls", len(describe))},
			Row{g, "DescribeTasks(100) p99", ms(percentile(describe, 99)), "ms", ""},
			Row{g, "RunTask(1) p50", ms(percentile(run, 50)), "ms", fmt.Sprintf("%d calls; placed on %d fake agents", len(run), agents)},
			Row{g, "RunTask(1) p99", ms(percentile(run, 99)), "ms", ""})
		errs = append(errs, derr, rerr)
	}
	if o.want("gateway-high") {
		gh := fmt.Sprintf("gateway DescribeTasks(100) at a fixed %g requests/s for %s (AWS SDK for Go v2, SigV4, client in its own process)", o.highRate, o.duration)
		if o.noTaskCache {
			gh += ", scheduler without its task cache"
		}
		// The client runs in a process of its own (loadclient.go), warms up at the same
		// rate first, unmeasured (the first second after seeding holds the fake agents'
		// RUNNING reports, the task cache filling and new connections), then measures.
		var stopProfile func()
		var c0 time.Duration
		var t0 time.Time
		var wall, cpu time.Duration
		var perr error
		describe, clientCPU, derr := describeLoad(ctx, s.gwURL, cluster, arns, o.highRate, warmUp, o.duration,
			func() {
				stopProfile, perr = startProfile(o, "gateway-high")
				c0, t0 = cpuTime(), time.Now()
				s.handled.take()
				s.handled.on.Store(true)
			},
			func() {
				wall, cpu = time.Since(t0), cpuTime()-c0
				s.handled.on.Store(false)
				if stopProfile != nil {
					stopProfile()
				}
			})
		if perr != nil {
			return rows, perr
		}
		if wall <= 0 {
			return rows, fmt.Errorf("load client: %w", derr)
		}
		cores := cpu.Seconds() / wall.Seconds()
		done := float64(len(describe)) / wall.Seconds()
		keptUp := "kept up with the offered rate"
		if done < 0.95*o.highRate {
			keptUp = "below the offered rate: calls queued (open loop), so the latencies include the queue"
		}
		rows = append(rows,
			Row{gh, "DescribeTasks(100) completed/s", done, "/s", keptUp},
			Row{gh, "DescribeTasks(100) p50", ms(percentile(describe, 50)), "ms", fmt.Sprintf("%d calls succeeded of %d sent, after %s of warm-up at the same rate", len(describe), int(o.highRate*o.duration.Seconds()), warmUp)},
			Row{gh, "DescribeTasks(100) p99", ms(percentile(describe, 99)), "ms", ""})
		if handled := s.handled.take(); len(handled) > 0 {
			rows = append(rows,
				Row{gh, "gateway handler p50", ms(percentile(handled, 50)), "ms", fmt.Sprintf("the same window's %d DescribeTasks, from the gateway's ServeHTTP call to its return (body read, SigV4, scheduler call, JSON written): the server's share of the latencies above", len(handled))},
				Row{gh, "gateway handler p99", ms(percentile(handled, 99)), "ms", ""})
		}
		rows = append(rows,
			Row{gh, "CPU during the run", cores, "cores", "the server process: gateway, scheduler, embedded etcd (the SDK client runs in its own process)"})
		if done > 0 {
			// The figure that stays comparable on a loaded machine, where the latencies
			// measure the queue.
			rows = append(rows, Row{gh, "CPU per DescribeTasks(100)", cores * 1000 / done, "ms", "server process, per completed call"})
			sent := o.highRate * (warmUp + o.duration).Seconds()
			rows = append(rows, Row{gh, "SDK client CPU per DescribeTasks(100)", float64(clientCPU.Microseconds()) / 1000 / sent, "ms", "the client process's CPU (signing, HTTP, decoding the answer) over all its calls, warm-up included"})
		}
		errs = append(errs, derr)
	}
	return rows, errors.Join(errs...)
}

// warmUp is how long the high-rate run calls at its rate before it measures.
const warmUp = 2 * time.Second

// fixedRate calls f at rate per second for d (open loop: a slow call does not delay the
// next) and returns the latencies of the calls that succeeded, and the first error.
func fixedRate(ctx context.Context, rate float64, d time.Duration, f func(context.Context) error) ([]time.Duration, error) {
	interval := time.Duration(float64(time.Second) / rate)
	n := int(d / interval)
	var mu sync.Mutex
	var lat []time.Duration
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() {
			t0 := time.Now()
			err := f(ctx)
			el := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			lat = append(lat, el)
		})
	}
	wg.Wait()
	return lat, first
}

// sessionFigures: fake agents in a child process open sessions over h2c against this
// process's scheduler replica; once all are up, the replica's CPU is measured over a
// window of several heartbeat intervals.
func sessionFigures(ctx context.Context, s *stack, o options) ([]Row, error) {
	const cluster = "sessions"
	g := fmt.Sprintf("agent sessions on one scheduler replica (fake agents over h2c, heartbeat every %s)", o.heartbeat)
	if _, err := s.ecs.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String(cluster)}); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	before := s.sched.Sessions()
	cmd := exec.CommandContext(ctx, exe, "-fake-agents", fmt.Sprint(o.sessions), "-fake-url", s.schedURL,
		"-fake-account", account, "-fake-cluster", cluster, "-fake-heartbeat", o.heartbeat.String())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var registered time.Duration
	deadline := time.After(5 * time.Minute)
	for up := false; !up; {
		select {
		case l, ok := <-lines:
			if !ok {
				return nil, errors.New("fake agent process exited early")
			}
			if l == "registered" {
				registered = time.Since(t0)
			}
		case <-deadline:
			if s.sched.Sessions()-before < o.sessions*9/10 {
				return nil, fmt.Errorf("only %d of %d sessions after 5 minutes", s.sched.Sessions()-before, o.sessions)
			}
			up = true // measure what is held; the row says how many
			continue
		case <-time.After(200 * time.Millisecond):
		}
		up = s.sched.Sessions()-before >= o.sessions
	}
	allUp := time.Since(t0)
	// Let the session set-up settle, then measure over several heartbeat intervals.
	time.Sleep(min(o.heartbeat, 5*time.Second))
	window := 2 * o.heartbeat
	runtime.GC()
	c0, w0 := cpuTime(), time.Now()
	time.Sleep(window)
	cores := (cpuTime() - c0).Seconds() / time.Since(w0).Seconds()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	held := s.sched.Sessions() - before
	rows := []Row{
		{g, "sessions held", float64(held), "count", fmt.Sprintf("registered in %s, all sessions up after %s", registered.Round(time.Second), allUp.Round(time.Second))},
		{g, "CPU holding them", cores, "cores", fmt.Sprintf("this process (scheduler + embedded etcd + gateway) over %s; under 1 core: %v", window, cores < 1)},
		{g, "heap in use", float64(ms.HeapInuse) / (1 << 20), "MiB", "whole process"},
		{g, "goroutines", float64(runtime.NumGoroutine()), "count", "whole process"},
	}
	return rows, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// failures renders RunTask's failures as "reason (detail)" strings, which %+v prints as
// pointers.
func failures(fs []ecstypes.Failure) string {
	var out []string
	for _, f := range fs {
		s := aws.ToString(f.Reason)
		if d := aws.ToString(f.Detail); d != "" {
			s += " (" + d + ")"
		}
		out = append(out, s)
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// newECSClient returns the bench's ECS client of the gateway at url: the bench's
// credentials, retrying only what closedConnRetryer retries.
func newECSClient(url string) *ecs.Client {
	return ecs.New(ecs.Options{
		Region:       region,
		BaseEndpoint: aws.String(url),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey}, nil
		}),
		Retryer: closedConnRetryer(),
	})
}

// describeAll returns a call of DescribeTasks(arns) in cluster that fails unless every
// task is described.
func describeAll(client *ecs.Client, cluster string, arns []string) func(context.Context) error {
	return func(ctx context.Context) error {
		out, err := client.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(cluster), Tasks: arns})
		if err == nil && len(out.Tasks) != len(arns) {
			err = fmt.Errorf("DescribeTasks returned %d tasks of %d", len(out.Tasks), len(arns))
		}
		return err
	}
}

// closedConnRetryer retries a call only when the SDK's own HTTP transport closed the
// connection under it (net.ErrClosed while reading a 200 response: aws-sdk-go-v2#2737,
// which the SDK's default retryer retries since #2949), at once and at most twice. Every
// other error fails the call, so a figure never hides a Berth error behind retries; a
// retried call's latency includes its retry.
func closedConnRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 3
		o.Retryables = []retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
			return aws.BoolTernary(errors.Is(err, net.ErrClosed))
		})}
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		o.RateLimiter = ratelimit.None
	})
}
