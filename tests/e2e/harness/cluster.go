package harness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/testkit/containerdtest"
	"github.com/berthhq/berth/testkit/registrytest"
	"github.com/berthhq/berth/testkit/shapecheck"
)

// Defaults of the system under test.
const (
	Region      = "us-east-1"
	AccountID   = "111122223333"
	ClusterName = "e2e"
	// LeaderTTL is the schedulers' election TTL: short, so a killed leader is replaced
	// within seconds.
	LeaderTTL = 3 * time.Second
	// AdminToken is the schedulers' admin bootstrap token (BERTH_ADMIN_TOKEN), which
	// `berth admin --token` presents.
	AdminToken = "berth-admin-e2e-harness"
)

// Options shape the system under test.
type Options struct {
	// Agents is the number of agents (default 2), all on one private containerd, each
	// with its own namespace and data dir.
	Agents int
	// GatewayReplicas gives the gateway every scheduler replica's URL (--scheduler-url
	// a,b) instead of the in-test TCP load balancer, so the gateway's own balancing and
	// failover (package failover) are what is tested.
	GatewayReplicas bool
	// LoadBalancer also runs the ELB data plane (`berth lb`) on etcd, its listeners
	// bound on loopback: Cluster.ELB.
	LoadBalancer bool
}

// EtcdMember is one member of the etcd cluster.
type EtcdMember struct {
	*Proc
	ClientURL string
}

// Agent is one agent process.
type Agent struct {
	*Proc
	// Namespace is its containerd namespace; its instance's ec2InstanceId ends in
	// "-"+Namespace.
	Namespace string
	DataDir   string
}

// Cluster is the whole system under test, as real processes: three etcd members, two
// scheduler replicas behind an in-test TCP load balancer, one gateway, and agents on one
// private containerd; plus an in-process OCI registry holding the demo image. It is
// stopped when the test ends, and on failure the end of every process's log is printed.
type Cluster struct {
	t    *testing.T
	Dir  string
	Bins Binaries

	Etcd       []*EtcdMember
	Schedulers []*Proc
	// SchedulerAddrs are the replicas' listen addresses, index-aligned with Schedulers.
	SchedulerAddrs []string
	LB             *LB
	Gateway        *Proc
	GatewayURL     string
	Agents         []*Agent
	// ELB is the `berth lb` process (Options.LoadBalancer), nil without it.
	ELB *Proc

	Containerd *containerdtest.Instance
	Registry   *registrytest.Server
	// Image is the demo image's reference in Registry.
	Image string

	AccessKeyID, SecretAccessKey string
	// ECS is an AWS SDK ECS client for the gateway with the account's key.
	ECS *ecs.Client
	// EtcdClient talks to all members (for leader lookups and consistency checks).
	EtcdClient *clientv3.Client
	// Shapes checks every response the cluster's ECS clients receive against the ECS
	// model's required members; the test fails at its end on any violation.
	Shapes *shapecheck.Recorder
}

// Start brings the whole system up and returns once every agent has registered and is
// connected. It fails the test on any error.
func Start(t *testing.T, opts Options) *Cluster {
	t.Helper()
	if opts.Agents == 0 {
		opts.Agents = 2
	}
	c := &Cluster{t: t, Dir: t.TempDir(), Bins: FindBinaries(t), Shapes: ShapeRecorder(t)}
	if err := os.MkdirAll(filepath.Join(c.Dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Containerd = containerdtest.Start(t)
	c.Registry = registrytest.Start(t)
	// Registered after containerdtest's cleanup, so it runs before it: processes stop
	// first, then the daemon's leftovers are removed. Logs are printed last.
	t.Cleanup(c.printLogsOnFailure)
	t.Cleanup(c.stopAll)

	c.Image = c.Registry.Addr() + "/berth/demo:e2e"
	if _, err := run(c.Bins.Berth, nil, "image", "demo", c.Image, "--binary", c.Bins.TestImage); err != nil {
		t.Fatalf("push the demo image: %v", err)
	}

	ports := freePorts(t, 6+2+1)
	var initial []string
	for i := range 3 {
		initial = append(initial, fmt.Sprintf("e%d=http://127.0.0.1:%d", i, ports[3+i]))
	}
	for i := range 3 {
		name := fmt.Sprintf("e%d", i)
		clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[i])
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[3+i])
		c.Etcd = append(c.Etcd, &EtcdMember{ClientURL: clientURL, Proc: &Proc{
			Name: "etcd-" + name,
			Path: c.Bins.Etcd,
			Args: []string{
				"--name", name,
				"--data-dir", filepath.Join(c.Dir, "etcd-"+name),
				"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
				"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
				"--initial-cluster", strings.Join(initial, ","),
				"--initial-cluster-state", "new", "--initial-cluster-token", "berth-e2e",
				// Page-cache durability is enough here: processes die, the machine does not.
				"--unsafe-no-fsync",
				"--log-level", "warn",
			},
			LogPath: filepath.Join(c.Dir, "logs", "etcd-"+name+".log"),
		}})
	}
	var endpoints []string
	for _, m := range c.Etcd {
		endpoints = append(endpoints, m.ClientURL)
	}
	for i := range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[6+i])
		c.SchedulerAddrs = append(c.SchedulerAddrs, addr)
		c.Schedulers = append(c.Schedulers, &Proc{
			Name: fmt.Sprintf("scheduler-%d", i),
			Path: c.Bins.Berth,
			Args: []string{"scheduler",
				"--etcd-endpoints", strings.Join(endpoints, ","),
				"--listen", addr,
				"--replica", fmt.Sprintf("s%d", i),
				"--region", Region,
				"--leader-ttl", LeaderTTL.String(),
				// Each replica its own CloudWatch Logs store: bbolt locks its files, so
				// two replicas cannot share the default ./.berth/cwlogs.
				"--log-dir", filepath.Join(c.Dir, fmt.Sprintf("cwlogs-%d", i)),
				// and its own CloudWatch metric store: tsdb locks its directory too.
				"--metrics-dir", filepath.Join(c.Dir, fmt.Sprintf("cwmetrics-%d", i)),
			},
			// The admin bootstrap token is fixed, not printed: `berth admin --token` below.
			Env:     []string{"BERTH_ADMIN_TOKEN=" + AdminToken},
			LogPath: filepath.Join(c.Dir, "logs", fmt.Sprintf("scheduler-%d.log", i)),
		})
	}
	lb, err := NewLB(c.SchedulerAddrs)
	if err != nil {
		t.Fatal(err)
	}
	c.LB = lb
	gwAddr := fmt.Sprintf("127.0.0.1:%d", ports[8])
	c.GatewayURL = "http://" + gwAddr
	c.Gateway = &Proc{
		Name: "gateway",
		Path: c.Bins.Berth,
		Args: []string{"gateway",
			"--scheduler-url", "http://" + lb.Addr(),
			"--listen", gwAddr,
		},
		LogPath: filepath.Join(c.Dir, "logs", "gateway.log"),
	}
	if opts.GatewayReplicas {
		c.Gateway.Args[2] = "http://" + c.SchedulerAddrs[0] + ",http://" + c.SchedulerAddrs[1]
	}
	if opts.LoadBalancer {
		c.ELB = &Proc{
			Name:    "lb",
			Path:    c.Bins.Berth,
			Args:    []string{"lb", "--etcd-endpoints", strings.Join(endpoints, ","), "--listen-host", "127.0.0.1"},
			LogPath: filepath.Join(c.Dir, "logs", "lb.log"),
		}
	}
	for i := range opts.Agents {
		ns := fmt.Sprintf("berth-a%d", i)
		dataDir := filepath.Join(c.Dir, fmt.Sprintf("agent-%d", i))
		c.Agents = append(c.Agents, &Agent{Namespace: ns, DataDir: dataDir, Proc: &Proc{
			Name: fmt.Sprintf("agent-%d", i),
			// The agent-only binary, as hosts that only run tasks deploy it.
			Path: c.Bins.Agent,
			Args: []string{
				"--gateway", c.GatewayURL,
				"--cluster", ClusterName,
				"--data-dir", dataDir,
				"--containerd", c.Containerd.Address(),
				"--snapshotter", c.Containerd.Snapshotter(),
				"--runc-root", c.Containerd.RuncRoot(),
				"--namespace", ns,
				"--region", Region,
				"--credentials-file", filepath.Join(c.Dir, "agent.env"),
			},
			LogPath: filepath.Join(c.Dir, "logs", fmt.Sprintf("agent-%d.log", i)),
		}})
	}

	ctx := t.Context()
	for _, m := range c.Etcd {
		c.must(m.Start())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.EtcdClient = cli
	c.WaitEtcdHealthy(ctx, 3)
	for _, s := range c.Schedulers {
		c.must(s.Start())
	}
	for _, a := range c.SchedulerAddrs {
		c.waitListening(ctx, a)
	}

	// Seed the account and its key through a scheduler replica, as an operator would.
	admin := []string{"admin", "--scheduler-url", "http://" + c.SchedulerAddrs[0], "--token", AdminToken}
	if _, err := run(c.Bins.Berth, nil, append(admin, "account", "create", AccountID, "--name", "e2e")...); err != nil {
		t.Fatalf("berth admin account create: %v", err)
	}
	keyEnv, err := run(c.Bins.Berth, nil, append(admin, "key", "create", AccountID, "--output", "env", "--description", "e2e")...)
	if err != nil {
		t.Fatalf("berth admin key create: %v", err)
	}
	for _, line := range strings.Split(keyEnv, "\n") {
		if v, ok := strings.CutPrefix(line, "BERTH_ACCESS_KEY_ID="); ok {
			c.AccessKeyID = v
		}
		if v, ok := strings.CutPrefix(line, "BERTH_SECRET_ACCESS_KEY="); ok {
			c.SecretAccessKey = v
		}
	}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		t.Fatalf("berth admin key create --output env printed no key: %q", keyEnv)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "agent.env"), []byte(keyEnv), 0o600); err != nil {
		t.Fatal(err)
	}

	c.must(c.Gateway.Start())
	c.waitListening(ctx, gwAddr)
	if c.ELB != nil {
		c.must(c.ELB.Start())
	}
	c.ECS = c.NewECSClient(5)
	if _, err := c.ECS.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String(ClusterName)}); err != nil {
		t.Fatalf("CreateCluster: %v", err)
	}
	for _, a := range c.Agents {
		c.must(a.Start())
	}
	c.WaitAgentsConnected(ctx)
	t.Logf("e2e: system up in %s (etcd x3, schedulers x2, gateway, agents x%d, containerd %s)",
		time.Since(start).Round(time.Millisecond), len(c.Agents), c.Containerd.Snapshotter())
	return c
}

func (c *Cluster) must(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

// NewECSClient returns an ECS client for the gateway making at most attempts attempts per
// call (the SDK's standard retryer, without its client-side retry quota).
func (c *Cluster) NewECSClient(attempts int) *ecs.Client {
	keyID, secret := c.AccessKeyID, c.SecretAccessKey
	return ecs.New(ecs.Options{
		HTTPClient:   &http.Client{Transport: c.Shapes.Transport(nil)},
		BaseEndpoint: aws.String(c.GatewayURL),
		Region:       Region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: keyID, SecretAccessKey: secret, Source: "e2e"}, nil
		}),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = attempts
			o.RateLimiter = ratelimit.None
			o.MaxBackoff = 2 * time.Second
		}),
	})
}

// AWSConfig returns an AWS SDK configuration for the gateway with the account's key,
// for the clients of the other services the gateway serves (ELBv2, STS, …).
func (c *Cluster) AWSConfig() aws.Config {
	keyID, secret := c.AccessKeyID, c.SecretAccessKey
	return aws.Config{
		HTTPClient:   &http.Client{},
		BaseEndpoint: aws.String(c.GatewayURL),
		Region:       Region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: keyID, SecretAccessKey: secret, Source: "e2e"}, nil
		}),
		RetryMaxAttempts: 5,
	}
}

// Procs returns every process in start order.
func (c *Cluster) Procs() []*Proc {
	var ps []*Proc
	for _, m := range c.Etcd {
		ps = append(ps, m.Proc)
	}
	ps = append(ps, c.Schedulers...)
	ps = append(ps, c.Gateway)
	if c.ELB != nil {
		ps = append(ps, c.ELB)
	}
	for _, a := range c.Agents {
		ps = append(ps, a.Proc)
	}
	return ps
}

// StopAll stops every process, agents first and etcd last (SIGTERM, then SIGKILL). The
// private containerd and the containers are left running.
func (c *Cluster) StopAll() {
	ps := c.Procs()
	for i := len(ps) - 1; i >= 0; i-- {
		if err := ps[i].Stop(); err != nil {
			c.t.Errorf("stop: %v", err)
		}
	}
}

// StartAll starts every process again on the same addresses and data and waits until
// the agents are connected.
func (c *Cluster) StartAll(ctx context.Context) {
	c.t.Helper()
	for _, m := range c.Etcd {
		c.must(m.Start())
	}
	c.WaitEtcdHealthy(ctx, 3)
	for _, s := range c.Schedulers {
		c.must(s.Start())
	}
	for _, a := range c.SchedulerAddrs {
		c.waitListening(ctx, a)
	}
	c.must(c.Gateway.Start())
	c.waitListening(ctx, strings.TrimPrefix(c.GatewayURL, "http://"))
	if c.ELB != nil {
		c.must(c.ELB.Start())
	}
	for _, a := range c.Agents {
		c.must(a.Start())
	}
	c.WaitAgentsConnected(ctx)
}

func (c *Cluster) stopAll() {
	// Agents stop gracefully, all at once and while the control plane still runs: one
	// killed while it deletes a containerd task can leave containerd without the task and
	// its shim running on, where containerdtest's purge cannot reach it and the shim
	// writes into the bundle while the test's directory is removed ("directory not
	// empty"). A graceful stop lets the delete finish.
	var wg sync.WaitGroup
	for _, a := range c.Agents {
		wg.Go(func() {
			if err := a.Stop(); err != nil {
				c.t.Logf("%v", err)
			}
		})
	}
	wg.Wait()
	ps := c.Procs()
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i] != nil {
			// Schedulers, the gateway and etcd hold nothing worth a graceful stop.
			ps[i].Kill()
		}
	}
	if c.LB != nil {
		c.LB.Close()
	}
	if c.EtcdClient != nil {
		_ = c.EtcdClient.Close()
	}
}

func (c *Cluster) printLogsOnFailure() {
	if !c.t.Failed() {
		return
	}
	for _, p := range c.Procs() {
		if p != nil {
			c.t.Logf("---- %s log (%s) ends:\n%s", p.Name, p.LogPath, p.LogTail(6<<10))
		}
	}
}

// freePorts returns n distinct free loopback TCP ports (FreePort).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = FreePort(t)
	}
	return ports
}

// waitListening waits until addr accepts TCP connections.
func (c *Cluster) waitListening(ctx context.Context, addr string) {
	c.t.Helper()
	c.Eventually(ctx, 60*time.Second, "listening on "+addr, func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// WaitEtcdHealthy waits until n members answer and agree on a leader.
func (c *Cluster) WaitEtcdHealthy(ctx context.Context, n int) {
	c.t.Helper()
	c.Eventually(ctx, 60*time.Second, fmt.Sprintf("%d healthy etcd members", n), func() error {
		healthy := 0
		var errs []string
		for _, m := range c.Etcd {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := c.EtcdClient.Status(sctx, m.ClientURL)
			cancel()
			if err != nil {
				errs = append(errs, m.Name+": "+err.Error())
				continue
			}
			if st.Leader != 0 {
				healthy++
			}
		}
		if healthy < n {
			return fmt.Errorf("%d of %d healthy: %s", healthy, n, strings.Join(errs, "; "))
		}
		return nil
	})
}

// Eventually polls f every 250 ms until it returns nil, failing the test with f's last
// error after timeout.
func (c *Cluster) Eventually(ctx context.Context, timeout time.Duration, what string, f func() error) {
	c.t.Helper()
	if err := Poll(ctx, timeout, f); err != nil {
		c.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Poll calls f every 250 ms until it returns nil or timeout passes, and returns f's last
// error then.
func Poll(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Instances describes the cluster's container instances, keyed by the namespace of the
// agent that registered each (from the ec2InstanceId suffix).
func (c *Cluster) Instances(ctx context.Context) (map[string]ecstypes.ContainerInstance, error) {
	out := map[string]ecstypes.ContainerInstance{}
	var arns []string
	p := ecs.NewListContainerInstancesPaginator(c.ECS, &ecs.ListContainerInstancesInput{Cluster: aws.String(ClusterName)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		arns = append(arns, page.ContainerInstanceArns...)
	}
	if len(arns) == 0 {
		return out, nil
	}
	res, err := c.ECS.DescribeContainerInstances(ctx, &ecs.DescribeContainerInstancesInput{
		Cluster: aws.String(ClusterName), ContainerInstances: arns,
	})
	if err != nil {
		return nil, err
	}
	for _, ci := range res.ContainerInstances {
		id := aws.ToString(ci.Ec2InstanceId)
		for _, a := range c.Agents {
			if strings.HasSuffix(id, "-"+a.Namespace) {
				out[a.Namespace] = ci
			}
		}
	}
	return out, nil
}

// WaitAgentsConnected waits until every agent's instance is ACTIVE, connected and
// advertises CPU and memory.
func (c *Cluster) WaitAgentsConnected(ctx context.Context) map[string]ecstypes.ContainerInstance {
	c.t.Helper()
	var got map[string]ecstypes.ContainerInstance
	c.Eventually(ctx, 90*time.Second, "agents registered and connected", func() error {
		var err error
		got, err = c.Instances(ctx)
		if err != nil {
			return err
		}
		for _, a := range c.Agents {
			ci, ok := got[a.Namespace]
			if !ok {
				return fmt.Errorf("%s has not registered", a.Name)
			}
			if !ci.AgentConnected || aws.ToString(ci.Status) != "ACTIVE" || Resource(ci.RegisteredResources, "CPU") == 0 {
				return fmt.Errorf("%s: status %s, agentConnected %v, CPU %d", a.Name, aws.ToString(ci.Status), ci.AgentConnected, Resource(ci.RegisteredResources, "CPU"))
			}
		}
		return nil
	})
	return got
}

// Resource returns the integer value of the named resource (CPU, MEMORY).
func Resource(rs []ecstypes.Resource, name string) int64 {
	for _, r := range rs {
		if aws.ToString(r.Name) == name {
			if r.IntegerValue != 0 {
				return int64(r.IntegerValue)
			}
			if r.LongValue != 0 {
				return r.LongValue
			}
			if r.DoubleValue != 0 {
				return int64(r.DoubleValue)
			}
		}
	}
	return 0
}

// atoi parses a task's cpu/memory string ("" is 0).
func atoi(s *string) int64 {
	n, _ := strconv.ParseInt(aws.ToString(s), 10, 64)
	return n
}
