package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/berthhq/berth/tests/e2e/harness"
)

// lbLoad is a bounded load generator through a listener: workers send GETs over
// keep-alive connections until stopped (or the cap is reached), counting answers that
// are 200 and every other outcome.
type lbLoad struct {
	ok, failed atomic.Int64
	stop       chan struct{}
	wg         sync.WaitGroup
	mu         sync.Mutex
	failures   []string // the first few, for the log
}

// startLoad starts workers GET loops against url, at most limit requests in all.
func startLoad(url string, workers int, limit int64) *lbLoad {
	l := &lbLoad{stop: make(chan struct{})}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: workers}}
	for range workers {
		l.wg.Go(func() {
			for l.ok.Load()+l.failed.Load() < limit {
				select {
				case <-l.stop:
					return
				default:
				}
				t0 := time.Now()
				resp, err := client.Get(url)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.failures) < 20 {
						l.failures = append(l.failures, fmt.Sprintf("%s after %s: %v", time.Now().Format("15:04:05.000"), time.Since(t0).Round(time.Millisecond), err))
					}
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	return l
}

// end stops the workers and waits for their last requests.
func (l *lbLoad) end() {
	close(l.stop)
	l.wg.Wait()
}

// lbService is a load-balanced ECS service of the e2e cluster and its target group.
type lbService struct {
	t     *testing.T
	c     *harness.Cluster
	elb   *elbv2.Client
	tgArn string
	name  string
}

// serviceTargets returns the service's RUNNING tasks (desired RUNNING) by ARN with their
// task definition ARN, and the target group's targets by task ARN with their states
// (a target is matched to a task by its instance's id and the task's host port); other
// counts targets that belong to no such task.
func (s *lbService) serviceTargets(ctx context.Context) (tasks map[string]string, states map[string]string, other []string, err error) {
	c := s.c
	lt, err := c.ECS.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String(harness.ClusterName), ServiceName: aws.String(s.name)})
	if err != nil {
		return nil, nil, nil, err
	}
	var described []ecstypes.Task
	if len(lt.TaskArns) > 0 {
		if described, err = c.DescribeTasks(ctx, lt.TaskArns); err != nil {
			return nil, nil, nil, err
		}
	}
	cis, err := c.Instances(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	ec2ID := map[string]string{}
	for _, ci := range cis {
		ec2ID[aws.ToString(ci.ContainerInstanceArn)] = aws.ToString(ci.Ec2InstanceId)
	}
	byTarget := map[string]string{} // "id:port" -> task ARN
	tasks = map[string]string{}
	for _, task := range described {
		arn := aws.ToString(task.TaskArn)
		if aws.ToString(task.LastStatus) == "RUNNING" && aws.ToString(task.DesiredStatus) == "RUNNING" {
			tasks[arn] = aws.ToString(task.TaskDefinitionArn)
		}
		for _, ctr := range task.Containers {
			for _, b := range ctr.NetworkBindings {
				byTarget[ec2ID[aws.ToString(task.ContainerInstanceArn)]+":"+strconv.Itoa(int(aws.ToInt32(b.HostPort)))] = arn
			}
		}
	}
	h, err := s.elb.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String(s.tgArn)})
	if err != nil {
		return nil, nil, nil, err
	}
	states = map[string]string{}
	for _, d := range h.TargetHealthDescriptions {
		k := aws.ToString(d.Target.Id) + ":" + strconv.Itoa(int(aws.ToInt32(d.Target.Port)))
		if arn, ok := byTarget[k]; ok {
			states[arn] = string(d.TargetHealth.State)
		} else {
			other = append(other, k+"="+string(d.TargetHealth.State))
		}
	}
	return tasks, states, other, nil
}

// settled waits until the service runs exactly n tasks of taskDef, one deployment,
// COMPLETED, each task's target healthy and no other target in the group, and returns
// the tasks.
func (s *lbService) settled(ctx context.Context, n int, taskDef string, timeout time.Duration) map[string]string {
	s.t.Helper()
	var tasks map[string]string
	s.c.Eventually(ctx, timeout, fmt.Sprintf("%d healthy targets of %s and nothing else", n, taskDef), func() error {
		var states map[string]string
		var other []string
		var err error
		tasks, states, other, err = s.serviceTargets(ctx)
		if err != nil {
			return err
		}
		if len(tasks) != n || len(states) != n || len(other) > 0 {
			return fmt.Errorf("tasks %v, targets %v, other targets %v", tasks, states, other)
		}
		for arn, td := range tasks {
			if td != taskDef || states[arn] != string(elbtypes.TargetHealthStateEnumHealthy) {
				return fmt.Errorf("task %s of %s target %q", arn, td, states[arn])
			}
		}
		ds, err := s.c.ECS.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(harness.ClusterName), Services: []string{s.name}})
		if err != nil {
			return err
		}
		if d := ds.Services[0].Deployments; len(d) != 1 || d[0].RolloutState != ecstypes.DeploymentRolloutStateCompleted {
			return fmt.Errorf("deployments %d, first %s", len(d), d[0].RolloutState)
		}
		return nil
	})
	return tasks
}

// TestLoadBalancedBridgeServiceZeroFailures is issue 17's "done" test on real processes:
// three etcd members, two schedulers, the gateway, two agents running real bridge-mode
// containers (dynamic host ports) and the `berth lb` data plane. An ALB listener forwards
// to a 3-task service spread over both agents; a bounded keep-alive load generator on
// loopback sends GETs through the listener while the service rolls to a new task
// definition revision and while one task's container process is killed with SIGKILL. Not
// one request may fail; the counts are printed; the targets come and go in
// DescribeTargetHealth with the tasks (new ones registered and healthy, old and dead
// ones deregistered).
func TestLoadBalancedBridgeServiceZeroFailures(t *testing.T) {
	c := harness.Start(t, harness.Options{Agents: 2, LoadBalancer: true})
	ctx := t.Context()
	ec := elbv2.NewFromConfig(c.AWSConfig())
	s := &lbService{t: t, c: c, elb: ec, name: "web"}

	lbOut, err := ec.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("web"), Subnets: []string{"subnet-a", "subnet-b"}})
	if err != nil {
		t.Fatal(err)
	}
	tgOut, err := ec.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{
		Name: aws.String("web"), Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(8080), VpcId: aws.String("vpc-1"),
		HealthCheckPath: aws.String("/health"), HealthCheckIntervalSeconds: aws.Int32(5), HealthCheckTimeoutSeconds: aws.Int32(2),
		HealthyThresholdCount: aws.Int32(2), UnhealthyThresholdCount: aws.Int32(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.tgArn = aws.ToString(tgOut.TargetGroups[0].TargetGroupArn)
	if _, err := ec.ModifyTargetGroupAttributes(ctx, &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: aws.String(s.tgArn),
		Attributes: []elbtypes.TargetGroupAttribute{{Key: aws.String("deregistration_delay.timeout_seconds"), Value: aws.String("5")}}}); err != nil {
		t.Fatal(err)
	}
	lport := freeTCPPort(t)
	if _, err := ec.CreateListener(ctx, &elbv2.CreateListenerInput{
		LoadBalancerArn: lbOut.LoadBalancers[0].LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(int32(lport)),
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(s.tgArn)}},
	}); err != nil {
		t.Fatal(err)
	}

	register := func(version string) string {
		t.Helper()
		res, err := c.ECS.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
			Family: aws.String("web"), NetworkMode: ecstypes.NetworkModeBridge,
			ContainerDefinitions: []ecstypes.ContainerDefinition{{
				Name: aws.String("web"), Image: aws.String(c.Image), Memory: aws.Int32(32), Essential: aws.Bool(true),
				Command:      []string{"serve", "8080"},
				Environment:  []ecstypes.KeyValuePair{{Name: aws.String("VERSION"), Value: aws.String(version)}},
				PortMappings: []ecstypes.PortMapping{{ContainerPort: aws.Int32(8080), Protocol: ecstypes.TransportProtocolTcp}},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(res.TaskDefinition.TaskDefinitionArn)
	}
	td1 := register("1")
	if _, err := c.ECS.CreateService(ctx, &ecs.CreateServiceInput{
		Cluster: aws.String(harness.ClusterName), ServiceName: aws.String("web"), TaskDefinition: aws.String(td1), DesiredCount: aws.Int32(3),
		DeploymentConfiguration: &ecstypes.DeploymentConfiguration{MinimumHealthyPercent: aws.Int32(100), MaximumPercent: aws.Int32(200)},
		PlacementStrategy:       []ecstypes.PlacementStrategy{{Type: ecstypes.PlacementStrategyTypeSpread, Field: aws.String("instanceId")}},
		LoadBalancers:           []ecstypes.LoadBalancer{{TargetGroupArn: aws.String(s.tgArn), ContainerName: aws.String("web"), ContainerPort: aws.Int32(8080)}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No container outlives the test.
		ctx := context.WithoutCancel(ctx)
		_, _ = c.ECS.DeleteService(ctx, &ecs.DeleteServiceInput{Cluster: aws.String(harness.ClusterName), Service: aws.String("web"), Force: aws.Bool(true)})
		_ = harness.Poll(ctx, 60*time.Second, func() error {
			n, err := c.Census(ctx)
			if err != nil {
				return err
			}
			for _, ctrs := range n {
				for _, x := range ctrs {
					if x.Status == "running" {
						return fmt.Errorf("container %s still running", x.ID)
					}
				}
			}
			return nil
		})
	})
	first := s.settled(ctx, 3, td1, 3*time.Minute)
	instances := map[string]bool{}
	if ts, err := c.DescribeTasks(ctx, slices.Collect(maps.Keys(first))); err == nil {
		for _, task := range ts {
			instances[aws.ToString(task.ContainerInstanceArn)] = true
		}
	}
	if len(instances) != 2 {
		t.Errorf("the service's 3 tasks run on %d instances, want both agents'", len(instances))
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", lport)
	c.Eventually(ctx, 30*time.Second, "the listener answering 200", func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})

	load := startLoad(url, 4, 200000)
	stopped := false
	defer func() {
		if !stopped {
			load.end()
		}
	}()
	time.Sleep(time.Second)

	// A rolling deployment to a new revision: three new tasks registered and healthy
	// before the old ones are deregistered, drained and stopped.
	td2 := register("2")
	if _, err := c.ECS.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String(harness.ClusterName), Service: aws.String("web"), TaskDefinition: aws.String(td2)}); err != nil {
		t.Fatal(err)
	}
	second := s.settled(ctx, 3, td2, 4*time.Minute)
	for arn := range first {
		if _, ok := second[arn]; ok {
			t.Errorf("task %s of the first revision still serves", arn)
		}
	}
	afterRollout := load.ok.Load()
	t.Logf("rolling deployment done: %d requests answered, %d failed", afterRollout, load.failed.Load())

	// A task's container process killed with SIGKILL.
	census, err := c.Census(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	var pid uint32
	for arn := range second {
		for _, x := range census[arn] {
			if x.Status == "running" && x.Pid != 0 {
				victim, pid = arn, x.Pid
			}
		}
		if victim != "" {
			break
		}
	}
	if victim == "" {
		t.Fatalf("no running container of the service's tasks in the census")
	}
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	t.Logf("killed task %s (pid %d)", victim, pid)
	c.Eventually(ctx, 2*time.Minute, "the killed task STOPPED and its target gone", func() error {
		ts, err := c.DescribeTasks(ctx, []string{victim})
		if err != nil {
			return err
		}
		if len(ts) != 1 || aws.ToString(ts[0].LastStatus) != "STOPPED" {
			return fmt.Errorf("victim not stopped yet")
		}
		_, states, _, err := s.serviceTargets(ctx)
		if err != nil {
			return err
		}
		if st, ok := states[victim]; ok {
			return fmt.Errorf("the killed task's target is still %s", st)
		}
		return nil
	})
	third := s.settled(ctx, 3, td2, 3*time.Minute)
	if _, ok := third[victim]; ok {
		t.Errorf("the killed task %s still counts", victim)
	}
	time.Sleep(time.Second)
	load.end()
	stopped = true

	ok, failed := load.ok.Load(), load.failed.Load()
	t.Logf("load through the listener: %d requests answered 200 (%d during the kill and its replacement), %d failed", ok, ok-afterRollout, failed)
	fmt.Printf("lb zero-failure (e2e, 2 agents, bridge): %d ok, %d failed\n", ok, failed)
	if failed > 0 {
		t.Errorf("%d requests failed through the listener; first ones:\n%v", failed, load.failures)
	}
	if ok < 500 || ok-afterRollout < 100 {
		t.Errorf("only %d requests (%d after the rollout) went through: the load did not cover the deployment and the kill", ok, ok-afterRollout)
	}
}
