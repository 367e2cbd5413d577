package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/smithy-go"

	"github.com/berthhq/berth/services/scheduler/platform/leader"
	"github.com/berthhq/berth/tests/e2e/harness"
)

// registerSleeper registers a one-container task definition running `sleep 3600` from the
// demo image with the given container CPU units and task-level MiB, and returns its ARN.
func registerSleeper(t *testing.T, c *harness.Cluster, family string, cpu, mem int) string {
	t.Helper()
	res, err := c.ECS.RegisterTaskDefinition(t.Context(), &ecs.RegisterTaskDefinitionInput{
		Family: aws.String(family),
		Memory: aws.String(fmt.Sprint(mem)),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{
			Name:  aws.String("app"),
			Image: aws.String(c.Image),
			// The container's CPU units reserve them (a task-level cpu must be at least
			// 128 units, AWS's EC2 minimum, which would make these tests need big hosts).
			Cpu:       int32(cpu),
			Command:   []string{"sleep", "3600"},
			Essential: aws.Bool(true),
		}},
	})
	if err != nil {
		t.Fatalf("RegisterTaskDefinition %s: %v", family, err)
	}
	return aws.ToString(res.TaskDefinition.TaskDefinitionArn)
}

// startOn starts n tasks of td on the instance with StartTask and returns their ARNs.
func startOn(t *testing.T, c *harness.Cluster, td, instanceARN string, n int) []string {
	t.Helper()
	var arns []string
	for range n {
		res, err := c.ECS.StartTask(t.Context(), &ecs.StartTaskInput{
			Cluster: aws.String(harness.ClusterName), TaskDefinition: aws.String(td),
			ContainerInstances: []string{instanceARN},
		})
		if err != nil {
			t.Fatalf("StartTask: %v", err)
		}
		if len(res.Failures) > 0 {
			t.Fatalf("StartTask failed: %s %s", aws.ToString(res.Failures[0].Arn), aws.ToString(res.Failures[0].Reason))
		}
		for _, task := range res.Tasks {
			arns = append(arns, aws.ToString(task.TaskArn))
		}
	}
	return arns
}

// quiet checks the invariants, retrying briefly while tasks settle.
func quiet(t *testing.T, c *harness.Cluster) {
	t.Helper()
	if err := harness.Poll(t.Context(), 30*time.Second, func() error { return c.CheckInvariants(t.Context()) }); err != nil {
		t.Fatalf("invariants: %v", err)
	}
}

func census(t *testing.T, c *harness.Cluster) map[string][]harness.Container {
	t.Helper()
	got, err := c.Census(t.Context())
	if err != nil {
		t.Fatalf("containerd census: %v", err)
	}
	return got
}

func instanceARN(t *testing.T, c *harness.Cluster, agent int) string {
	t.Helper()
	cis, err := c.Instances(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ci, ok := cis[c.Agents[agent].Namespace]
	if !ok {
		t.Fatalf("%s has no instance", c.Agents[agent].Name)
	}
	return aws.ToString(ci.ContainerInstanceArn)
}

// stillRunning fails the test unless every task in arns is RUNNING with desiredStatus
// RUNNING.
func stillRunning(t *testing.T, c *harness.Cluster, arns []string) {
	t.Helper()
	ts, err := c.DescribeTasks(t.Context(), arns)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range ts {
		if aws.ToString(task.LastStatus) != "RUNNING" || aws.ToString(task.DesiredStatus) != "RUNNING" {
			t.Errorf("task %s is %s/%s (%s)", aws.ToString(task.TaskArn), aws.ToString(task.LastStatus), aws.ToString(task.DesiredStatus), aws.ToString(task.StoppedReason))
		}
	}
}

// TestAgentKill9 kills -9 an agent running 20 tasks and restarts it: it adopts the same
// containers (same ids, creation times and pids; none restarted), and still controls them.
func TestAgentKill9(t *testing.T) {
	c := harness.Start(t, harness.Options{})
	td := registerSleeper(t, c, "kill9", 10, 32)
	victim := startOn(t, c, td, instanceARN(t, c, 0), 20)
	bystanders := startOn(t, c, td, instanceARN(t, c, 1), 2)
	all := append(slices.Clone(victim), bystanders...)
	c.WaitRunning(t.Context(), all, 3*time.Minute)
	quiet(t, c)
	before := census(t, c)
	if n := len(before); n != 22 {
		t.Fatalf("census has %d tasks, want 22", n)
	}

	c.Agents[0].Kill()
	time.Sleep(2 * time.Second)
	// The containers do not depend on the agent: still running, untouched.
	if err := harness.SameContainers(before, census(t, c)); err != nil {
		t.Fatalf("with the agent dead: %v", err)
	}
	stillRunning(t, c, all)

	if err := c.Agents[0].Start(); err != nil {
		t.Fatal(err)
	}
	c.WaitAgentsConnected(t.Context())
	// Give the restarted agent time to reconcile, then nothing may have changed.
	time.Sleep(3 * time.Second)
	if err := harness.SameContainers(before, census(t, c)); err != nil {
		t.Fatalf("after the agent restarted: %v", err)
	}
	stillRunning(t, c, all)
	quiet(t, c)

	// The restarted agent controls what it adopted: a stop order reaches the container.
	stop := victim[0]
	if _, err := c.ECS.StopTask(t.Context(), &ecs.StopTaskInput{Cluster: aws.String(harness.ClusterName), Task: aws.String(stop), Reason: aws.String("e2e")}); err != nil {
		t.Fatal(err)
	}
	c.Eventually(t.Context(), 60*time.Second, "the adopted task STOPPED", func() error {
		ts, err := c.DescribeTasks(t.Context(), []string{stop})
		if err != nil {
			return err
		}
		if s := aws.ToString(ts[0].LastStatus); s != "STOPPED" {
			return fmt.Errorf("lastStatus %s", s)
		}
		if x := census(t, c)[stop]; len(x) != 1 || x[0].Status == "running" {
			return fmt.Errorf("container %+v still running", x)
		}
		return nil
	})
	stillRunning(t, c, all[1:])
	quiet(t, c)
	// By now the agent has surely reconciled: still the same containers.
	delete(before, stop)
	if err := harness.SameContainers(before, census(t, c)); err != nil {
		t.Fatalf("after the restarted agent settled: %v", err)
	}
}

// TestContainerdRestart stops containerd under running agents: their instances show the
// involuntary drain (DRAINING, agentConnected false, zero registered CPU and MEMORY) and
// take no tasks; started again, the agents recover by themselves with the same containers.
func TestContainerdRestart(t *testing.T) {
	c := harness.Start(t, harness.Options{})
	td := registerSleeper(t, c, "ctrd", 10, 32)
	arns := append(startOn(t, c, td, instanceARN(t, c, 0), 3), startOn(t, c, td, instanceARN(t, c, 1), 3)...)
	c.WaitRunning(t.Context(), arns, 2*time.Minute)
	quiet(t, c)
	before := census(t, c)

	if err := c.Containerd.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.Eventually(t.Context(), 60*time.Second, "involuntary drain of both instances", func() error {
		cis, err := c.Instances(t.Context())
		if err != nil {
			return err
		}
		for _, a := range c.Agents {
			ci := cis[a.Namespace]
			cpu, mem := harness.Resource(ci.RegisteredResources, "CPU"), harness.Resource(ci.RegisteredResources, "MEMORY")
			if aws.ToString(ci.Status) != "DRAINING" || ci.AgentConnected || cpu != 0 || mem != 0 {
				return fmt.Errorf("%s: status %s agentConnected %v CPU %d MEMORY %d", a.Name, aws.ToString(ci.Status), ci.AgentConnected, cpu, mem)
			}
		}
		return nil
	})
	// Tasks are not lost while the runtime is away, and nothing is placed on a drained
	// instance.
	stillRunning(t, c, arns)
	res, err := c.ECS.RunTask(t.Context(), &ecs.RunTaskInput{Cluster: aws.String(harness.ClusterName), TaskDefinition: aws.String(td)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tasks) != 0 {
		t.Fatalf("RunTask with every instance drained placed %d tasks", len(res.Tasks))
	}
	// With every instance drained each one is reported with its status (control's placement
	// contract), not an empty failures list.
	reasons := map[string]string{}
	for _, f := range res.Failures {
		reasons[aws.ToString(f.Arn)] = aws.ToString(f.Reason)
	}
	for i := range c.Agents {
		if a := instanceARN(t, c, i); reasons[a] != "DRAINING" {
			t.Errorf("RunTask while drained: failures %v, want DRAINING for %s", reasons, a)
		}
	}

	if err := c.Containerd.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.WaitAgentsConnected(t.Context())
	if err := harness.SameContainers(before, census(t, c)); err != nil {
		t.Fatalf("after containerd came back: %v", err)
	}
	stillRunning(t, c, arns)
	quiet(t, c)
	// And the agents run new work again.
	more := startOn(t, c, td, instanceARN(t, c, 0), 1)
	c.WaitRunning(t.Context(), more, 2*time.Minute)
	quiet(t, c)
	if err := harness.SameContainers(before, census(t, c)); err != nil {
		t.Fatalf("after the agents settled: %v", err)
	}
}

// TestLeaderKillDuringBurst kills -9 the scheduler leader, which serves the gateway's
// calls, in the middle of 200 RunTask calls: the other replica takes over, and every task a
// RunTask call returned is placed exactly once and reaches RUNNING.
func TestLeaderKillDuringBurst(t *testing.T) {
	// 100 calls: the burst outlasts the kill (a third of the calls in) by a second or
	// more, and starting their containers is most of the test's time (200 took 170 s in
	// CI).
	const calls = 100
	c := harness.Start(t, harness.Options{})
	// 100 x 40 CPU units nearly fills the two instances (2 x 1024 per core): placement
	// must count every reservation to stay within them.
	td := registerSleeper(t, c, "burst", 40, 32)
	obs := leader.New(leader.Config{Client: c.EtcdClient, Identity: "e2e-observer"})
	var lead string
	c.Eventually(t.Context(), 30*time.Second, "a scheduler leader", func() error {
		var err error
		lead, err = obs.Leader(t.Context())
		if err == nil && lead == "" {
			err = errors.New("no leader")
		}
		return err
	})
	li := slices.Index([]string{"s0", "s1"}, lead)
	if li < 0 {
		t.Fatalf("leader %q is not a replica of this test", lead)
	}
	// The gateway's connections go to the leader, so the kill hits calls in flight.
	c.LB.Prefer(li)

	type result struct {
		arns     []string
		failures []string
		err      error
	}
	once := c.NewECSClient(1)
	results := make([]result, calls)
	var started atomic.Int32
	killed := make(chan struct{})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	begin := time.Now()
	for i := range calls {
		wg.Add(1)
		sem <- struct{}{}
		if i == calls/3 {
			go func() {
				c.Schedulers[li].Kill()
				t.Logf("killed leader %s after %d calls started (%s)", lead, started.Load(), time.Since(begin).Round(time.Millisecond))
				close(killed)
			}()
		}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			started.Add(1)
			// Even calls carry a clientToken and retry (idempotent); odd ones carry none
			// (the group-commit path) and make one attempt, so a call whose answer was
			// lost shows as an error rather than as a hidden duplicate.
			in := &ecs.RunTaskInput{
				Cluster: aws.String(harness.ClusterName), TaskDefinition: aws.String(td),
				StartedBy: aws.String("burst"),
			}
			client := once
			if i%2 == 0 {
				in.ClientToken = aws.String(fmt.Sprintf("burst-%03d", i))
				client = c.ECS
			}
			res, err := client.RunTask(t.Context(), in)
			r := result{err: err}
			if err == nil {
				for _, task := range res.Tasks {
					r.arns = append(r.arns, aws.ToString(task.TaskArn))
				}
				for _, f := range res.Failures {
					r.failures = append(r.failures, aws.ToString(f.Reason))
				}
			}
			results[i] = r
		}()
	}
	wg.Wait()
	<-killed
	t.Logf("burst of %d RunTask calls took %s", calls, time.Since(begin).Round(time.Millisecond))

	var accepted []string
	seen := map[string]int{}
	nErr, nFail := 0, 0
	for i, r := range results {
		switch {
		case r.err != nil:
			nErr++
			t.Logf("call %d: %v", i, r.err)
		case len(r.failures) > 0:
			nFail++
			t.Logf("call %d: failures %v", i, r.failures)
		}
		for _, a := range r.arns {
			seen[a]++
			accepted = append(accepted, a)
		}
	}
	for a, n := range seen {
		if n > 1 {
			t.Errorf("task %s returned by %d RunTask calls", a, n)
		}
	}
	t.Logf("%d tasks accepted, %d calls answered with failures, %d calls errored", len(accepted), nFail, nErr)
	if len(accepted) < calls*3/4 {
		t.Fatalf("only %d of %d RunTask calls were accepted", len(accepted), calls)
	}

	other := "s" + fmt.Sprint(1-li)
	c.Eventually(t.Context(), 30*time.Second, "the other replica leading", func() error {
		l, err := obs.Leader(t.Context())
		if err != nil {
			return err
		}
		if l != other {
			return fmt.Errorf("leader is %q", l)
		}
		return nil
	})

	c.WaitRunning(t.Context(), accepted, 5*time.Minute)
	all, err := c.Tasks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// A call that errored may still have placed its task; nothing else may exist.
	extra := len(all) - len(accepted)
	if extra < 0 || extra > nErr {
		t.Errorf("the cluster holds %d tasks for %d accepted and %d errored calls", len(all), len(accepted), nErr)
	}
	t.Logf("%d tasks placed by calls that errored", extra)
	quiet(t, c)
}

// TestEtcdQuorum stops etcd members under the running system: with one of three gone the
// API keeps serving; with two gone calls end in a clear ServerException, not a hang;
// with both back it resumes and nothing is lost or corrupted.
func TestEtcdQuorum(t *testing.T) {
	c := harness.Start(t, harness.Options{})
	ctx := t.Context()
	td := registerSleeper(t, c, "quorum", 10, 32)
	arns := startOn(t, c, td, instanceARN(t, c, 0), 2)
	c.WaitRunning(ctx, arns, 2*time.Minute)

	if err := c.Etcd[2].Stop(); err != nil {
		t.Fatal(err)
	}
	// One member down: reads, writes and placement keep working.
	if _, err := c.ECS.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("two-of-three")}); err != nil {
		t.Fatalf("CreateCluster with 2 of 3 etcd members: %v", err)
	}
	more := startOn(t, c, td, instanceARN(t, c, 1), 1)
	c.WaitRunning(ctx, more, 2*time.Minute)
	arns = append(arns, more...)

	if err := c.Etcd[1].Stop(); err != nil {
		t.Fatal(err)
	}
	// No quorum: every call fails as ServerException within 5 s: the scheduler's etcd
	// requests require a leader and carry a 4 s deadline (store.RequireQuorum), well
	// inside the gateway's 60 s request timeout.
	const maxNoQuorum = 5 * time.Second
	once := c.NewECSClient(1)
	probe := func(name string, call func(context.Context) error) {
		t.Helper()
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		err := call(cctx)
		took := time.Since(start)
		var api smithy.APIError
		switch {
		case err == nil:
			t.Errorf("%s without etcd quorum succeeded", name)
		case cctx.Err() != nil:
			t.Errorf("%s without etcd quorum hung for %s: %v", name, took, err)
		case !errors.As(err, &api) || api.ErrorCode() != "ServerException":
			t.Errorf("%s without etcd quorum: want a ServerException, got %T %v", name, err, err)
		case took > maxNoQuorum:
			t.Errorf("%s without etcd quorum: ServerException only after %s", name, took)
		default:
			t.Logf("%s without quorum: %s after %s: %s", name, api.ErrorCode(), took.Round(time.Millisecond), api.ErrorMessage())
		}
	}
	probe("ListClusters", func(ctx context.Context) error {
		_, err := once.ListClusters(ctx, &ecs.ListClustersInput{})
		return err
	})
	probe("CreateCluster", func(ctx context.Context) error {
		_, err := once.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("no-quorum")})
		return err
	})

	for _, m := range c.Etcd[1:] {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitEtcdHealthy(ctx, 3)
	c.Eventually(ctx, 60*time.Second, "the API serving again", func() error {
		_, err := c.ECS.ListClusters(ctx, &ecs.ListClustersInput{})
		return err
	})
	res, err := c.ECS.DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{harness.ClusterName, "two-of-three", "no-quorum"}})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, cl := range res.Clusters {
		status[aws.ToString(cl.ClusterName)] = aws.ToString(cl.Status)
	}
	if status[harness.ClusterName] != "ACTIVE" || status["two-of-three"] != "ACTIVE" {
		t.Errorf("clusters after the outage: %v", status)
	}
	// The write that timed out either happened whole or not at all.
	if s, ok := status["no-quorum"]; ok && s != "ACTIVE" {
		t.Errorf("cluster created during the outage is %q", s)
	}
	c.WaitAgentsConnected(ctx)
	stillRunning(t, c, arns)
	after := startOn(t, c, td, instanceARN(t, c, 0), 1)
	c.WaitRunning(ctx, after, 2*time.Minute)
	quiet(t, c)
	checkEtcdConsistent(t, c)
}

// checkEtcdConsistent compares the members' KV hashes at one revision.
func checkEtcdConsistent(t *testing.T, c *harness.Cluster) {
	t.Helper()
	ctx := t.Context()
	err := harness.Poll(ctx, 30*time.Second, func() error {
		st, err := c.EtcdClient.Status(ctx, c.Etcd[0].ClientURL)
		if err != nil {
			return err
		}
		rev := st.Header.Revision
		hashes := map[string]uint32{}
		distinct := map[uint32]bool{}
		for _, m := range c.Etcd {
			h, err := c.EtcdClient.HashKV(ctx, m.ClientURL, rev)
			if err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			hashes[m.Name] = h.Hash
			distinct[h.Hash] = true
		}
		if len(distinct) != 1 {
			return fmt.Errorf("members disagree at revision %d: %v", rev, hashes)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("etcd consistency: %v", err)
	}
}

// TestStopStartEverything stops every process (and containerd) and starts them again:
// clusters, task definitions, services and tasks are all back, and the running containers
// are re-adopted, not restarted.
func TestStopStartEverything(t *testing.T) {
	c := harness.Start(t, harness.Options{})
	ctx := t.Context()
	if _, err := c.ECS.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("extra")}); err != nil {
		t.Fatal(err)
	}
	registerSleeper(t, c, "everything", 10, 32)
	td := registerSleeper(t, c, "everything", 10, 64) // revision 2
	arns := append(startOn(t, c, td, instanceARN(t, c, 0), 2), startOn(t, c, td, instanceARN(t, c, 1), 2)...)
	if _, err := c.ECS.CreateService(ctx, &ecs.CreateServiceInput{
		Cluster: aws.String(harness.ClusterName), ServiceName: aws.String("web"),
		TaskDefinition: aws.String(td), DesiredCount: aws.Int32(2),
	}); err != nil {
		t.Fatal(err)
	}
	var svcTasks []string
	c.Eventually(ctx, 2*time.Minute, "service web steady at 2", func() error {
		var err error
		svcTasks, err = serviceSteady(ctx, c, "web", 2)
		return err
	})
	c.WaitRunning(ctx, append(slices.Clone(arns), svcTasks...), 2*time.Minute)
	quiet(t, c)
	before := census(t, c)
	instancesBefore := instanceARNs(t, c)
	clustersBefore := listClusters(t, c)
	tdsBefore := listTaskDefinitions(t, c)

	c.StopAll()
	if err := c.Containerd.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Containerd.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.StartAll(ctx)

	if got := listClusters(t, c); !slices.Equal(got, clustersBefore) {
		t.Errorf("clusters after restart %v, before %v", got, clustersBefore)
	}
	if got := listTaskDefinitions(t, c); !slices.Equal(got, tdsBefore) {
		t.Errorf("task definitions after restart %v, before %v", got, tdsBefore)
	}
	if got := instanceARNs(t, c); !slices.Equal(got, instancesBefore) {
		t.Errorf("container instances after restart %v, before %v (the agents must rejoin as themselves)", got, instancesBefore)
	}
	time.Sleep(3 * time.Second)
	if err := harness.SameContainers(before, census(t, c)); err != nil {
		t.Fatalf("after restarting everything: %v", err)
	}
	stillRunning(t, c, append(slices.Clone(arns), svcTasks...))
	got, err := serviceSteady(ctx, c, "web", 2)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(svcTasks)
	if !slices.Equal(got, svcTasks) {
		t.Errorf("service tasks after restart %v, before %v", got, svcTasks)
	}
	quiet(t, c)
	if err := harness.SameContainers(before, census(t, c)); err != nil {
		t.Fatalf("after the restarted system settled: %v", err)
	}
}

// instanceARNs lists the cluster's container instances (every status).
func instanceARNs(t *testing.T, c *harness.Cluster) []string {
	t.Helper()
	cis, err := c.Instances(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ci := range cis {
		out = append(out, aws.ToString(ci.ContainerInstanceArn))
	}
	slices.Sort(out)
	return out
}

// serviceSteady returns the service's RUNNING tasks when it is ACTIVE with n of n running.
func serviceSteady(ctx context.Context, c *harness.Cluster, name string, n int32) ([]string, error) {
	res, err := c.ECS.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(harness.ClusterName), Services: []string{name}})
	if err != nil {
		return nil, err
	}
	if len(res.Services) != 1 {
		return nil, fmt.Errorf("DescribeServices: %v", res.Failures)
	}
	s := res.Services[0]
	if aws.ToString(s.Status) != "ACTIVE" || s.RunningCount != n || s.DesiredCount != n || s.PendingCount != 0 {
		return nil, fmt.Errorf("service %s: %s desired %d running %d pending %d", name, aws.ToString(s.Status), s.DesiredCount, s.RunningCount, s.PendingCount)
	}
	lt, err := c.ECS.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String(harness.ClusterName), ServiceName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	if len(lt.TaskArns) != int(n) {
		return nil, fmt.Errorf("service %s lists %d tasks", name, len(lt.TaskArns))
	}
	return lt.TaskArns, nil
}

func listClusters(t *testing.T, c *harness.Cluster) []string {
	t.Helper()
	res, err := c.ECS.ListClusters(t.Context(), &ecs.ListClustersInput{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(res.ClusterArns)
	return res.ClusterArns
}

func listTaskDefinitions(t *testing.T, c *harness.Cluster) []string {
	t.Helper()
	res, err := c.ECS.ListTaskDefinitions(t.Context(), &ecs.ListTaskDefinitionsInput{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(res.TaskDefinitionArns)
	return res.TaskDefinitionArns
}
