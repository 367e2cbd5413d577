package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
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

// lbService is a load-balanced ECS service and its target group, reached through any
// ECS and ELBv2 endpoint (the in-process harness's or the compose stack's gateway).
type lbService struct {
	t       *testing.T
	ecs     *ecs.Client
	elb     *elbv2.Client
	cluster string
	tgArn   string
	name    string
}

// describeTasks describes arns, 100 at a time.
func (s *lbService) describeTasks(ctx context.Context, arns []string) ([]ecstypes.Task, error) {
	var out []ecstypes.Task
	for chunk := range slices.Chunk(arns, 100) {
		res, err := s.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(s.cluster), Tasks: chunk})
		if err != nil {
			return nil, err
		}
		if len(res.Failures) > 0 {
			return nil, fmt.Errorf("DescribeTasks: %d failures, first %s: %s", len(res.Failures), aws.ToString(res.Failures[0].Arn), aws.ToString(res.Failures[0].Reason))
		}
		out = append(out, res.Tasks...)
	}
	return out, nil
}

// eventually polls f every 250 ms until it returns nil, failing the test after timeout.
func (s *lbService) eventually(ctx context.Context, timeout time.Duration, what string, f func() error) {
	s.t.Helper()
	if err := harness.Poll(ctx, timeout, f); err != nil {
		s.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// serviceTargets returns the service's RUNNING tasks (desired RUNNING) by ARN with their
// task definition ARN, and the target group's targets by task ARN with their states
// (a target is matched to a task by its instance's id and the task's host port); other
// counts targets that belong to no such task.
func (s *lbService) serviceTargets(ctx context.Context) (tasks map[string]string, states map[string]string, other []string, err error) {
	lt, err := s.ecs.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String(s.cluster), ServiceName: aws.String(s.name)})
	if err != nil {
		return nil, nil, nil, err
	}
	var described []ecstypes.Task
	if len(lt.TaskArns) > 0 {
		if described, err = s.describeTasks(ctx, lt.TaskArns); err != nil {
			return nil, nil, nil, err
		}
	}
	ec2ID := map[string]string{}
	if lci, err := s.ecs.ListContainerInstances(ctx, &ecs.ListContainerInstancesInput{Cluster: aws.String(s.cluster)}); err != nil {
		return nil, nil, nil, err
	} else if len(lci.ContainerInstanceArns) > 0 {
		dci, err := s.ecs.DescribeContainerInstances(ctx, &ecs.DescribeContainerInstancesInput{Cluster: aws.String(s.cluster), ContainerInstances: lci.ContainerInstanceArns})
		if err != nil {
			return nil, nil, nil, err
		}
		for _, ci := range dci.ContainerInstances {
			ec2ID[aws.ToString(ci.ContainerInstanceArn)] = aws.ToString(ci.Ec2InstanceId)
		}
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
	s.eventually(ctx, timeout, fmt.Sprintf("%d healthy targets of %s and nothing else", n, taskDef), func() error {
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
		ds, err := s.ecs.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(s.cluster), Services: []string{s.name}})
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

// lbZeroFailures is issue 17's zero-failure scenario, on any cluster with two agents and
// the `berth lb` data plane binding listeners on listenHost: an ALB listener forwards
// to a 3-task bridge service (image serving HTTP on 8080) spread over both agents; a
// bounded keep-alive load generator sends GETs through the listener while the service
// rolls to a new task definition revision and while kill SIGKILLs the container process
// of one of the tasks it is given (it returns the task it killed). Not one request may
// fail; the counts are logged; the targets come and go in DescribeTargetHealth with the
// tasks (new ones registered and healthy, old and dead ones deregistered). The service
// is left running; the caller deletes it.
func (s *lbService) lbZeroFailures(ctx context.Context, image, listenHost string, kill func(tasks map[string]string) string) {
	t, ec := s.t, s.elb
	t.Helper()
	lbOut, err := ec.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String(s.name), Subnets: []string{"subnet-a", "subnet-b"}})
	if err != nil {
		t.Fatal(err)
	}
	tgOut, err := ec.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{
		Name: aws.String(s.name), Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(8080), VpcId: aws.String("vpc-1"),
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
	lport := harness.FreePort(t)
	if _, err := ec.CreateListener(ctx, &elbv2.CreateListenerInput{
		LoadBalancerArn: lbOut.LoadBalancers[0].LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(int32(lport)),
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(s.tgArn)}},
	}); err != nil {
		t.Fatal(err)
	}

	register := func(version string) string {
		t.Helper()
		res, err := s.ecs.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
			Family: aws.String(s.name), NetworkMode: ecstypes.NetworkModeBridge,
			ContainerDefinitions: []ecstypes.ContainerDefinition{{
				Name: aws.String("web"), Image: aws.String(image), Memory: aws.Int32(32), Essential: aws.Bool(true),
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
	if _, err := s.ecs.CreateService(ctx, &ecs.CreateServiceInput{
		Cluster: aws.String(s.cluster), ServiceName: aws.String(s.name), TaskDefinition: aws.String(td1), DesiredCount: aws.Int32(3),
		DeploymentConfiguration: &ecstypes.DeploymentConfiguration{MinimumHealthyPercent: aws.Int32(100), MaximumPercent: aws.Int32(200)},
		PlacementStrategy:       []ecstypes.PlacementStrategy{{Type: ecstypes.PlacementStrategyTypeSpread, Field: aws.String("instanceId")}},
		LoadBalancers:           []ecstypes.LoadBalancer{{TargetGroupArn: aws.String(s.tgArn), ContainerName: aws.String("web"), ContainerPort: aws.Int32(8080)}},
	}); err != nil {
		t.Fatal(err)
	}
	first := s.settled(ctx, 3, td1, 3*time.Minute)
	instances := map[string]bool{}
	if ts, err := s.describeTasks(ctx, slices.Collect(maps.Keys(first))); err == nil {
		for _, task := range ts {
			instances[aws.ToString(task.ContainerInstanceArn)] = true
		}
	}
	if len(instances) != 2 {
		t.Errorf("the service's 3 tasks run on %d instances, want both agents'", len(instances))
	}
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(listenHost, strconv.Itoa(lport)))
	s.eventually(ctx, 30*time.Second, "the listener answering 200", func() error {
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
	if _, err := s.ecs.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String(s.cluster), Service: aws.String(s.name), TaskDefinition: aws.String(td2)}); err != nil {
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
	victim := kill(second)
	s.eventually(ctx, 2*time.Minute, "the killed task STOPPED and its target gone", func() error {
		ts, err := s.describeTasks(ctx, []string{victim})
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
	fmt.Printf("lb zero-failure (%s, 2 agents, bridge): %d ok, %d failed\n", t.Name(), ok, failed)
	if failed > 0 {
		t.Errorf("%d requests failed through the listener; first ones:\n%v", failed, load.failures)
	}
	if ok < 500 || ok-afterRollout < 100 {
		t.Errorf("only %d requests (%d after the rollout) went through: the load did not cover the deployment and the kill", ok, ok-afterRollout)
	}
}

// TestLoadBalancedBridgeServiceZeroFailures is issue 17's "done" test on real processes:
// three etcd members, two schedulers, the gateway, two agents running real bridge-mode
// containers (dynamic host ports) and the `berth lb` data plane, through
// lbZeroFailures; the task is killed by the pid containerd reports for its container.
func TestLoadBalancedBridgeServiceZeroFailures(t *testing.T) {
	c := harness.Start(t, harness.Options{Agents: 2, LoadBalancer: true})
	ctx := t.Context()
	s := &lbService{t: t, ecs: c.ECS, elb: elbv2.NewFromConfig(c.AWSConfig()), cluster: harness.ClusterName, name: "web"}
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
	s.lbZeroFailures(ctx, c.Image, "127.0.0.1", func(tasks map[string]string) string {
		census, err := c.Census(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for arn := range tasks {
			for _, x := range census[arn] {
				if x.Status == "running" && x.Pid != 0 {
					if err := syscall.Kill(int(x.Pid), syscall.SIGKILL); err != nil {
						t.Fatalf("kill -9 %d: %v", x.Pid, err)
					}
					t.Logf("killed task %s (pid %d)", arn, x.Pid)
					return arn
				}
			}
		}
		t.Fatalf("no running container of the service's tasks in the census")
		return ""
	})
}
