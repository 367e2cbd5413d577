package e2e

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/berthhq/berth/services/scheduler/platform/leader"
	"github.com/berthhq/berth/tests/e2e/harness"
)

// TestGatewayFailover gives the gateway both scheduler replicas (no load balancer) and
// kills -9 the leader in the middle of a 1,000-call mixed workload, each call made once
// (no SDK retry): reads never fail (the gateway sends them again to the live replica),
// a write fails only when it was in flight on the dead replica (at most the workload's
// concurrency), no write is lost or done twice (each family has exactly one revision per
// successful RegisterTaskDefinition, each RunTask's startedBy exactly one task), and the
// agents' streams come back through the live replica.
func TestGatewayFailover(t *testing.T) {
	const calls, concurrency = 1000, 8
	c := harness.Start(t, harness.Options{GatewayReplicas: true})
	td := registerSleeper(t, c, "fo-sleeper", 20, 32)
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

	type kind int
	const (
		read kind = iota
		register
		runTask
	)
	type result struct {
		kind kind
		name string
		err  error
	}
	once := c.NewECSClient(1)
	results := make([]result, calls)
	var started atomic.Int32
	var wg sync.WaitGroup
	sem := make(chan struct{}, concurrency)
	killed := make(chan time.Time, 1)
	begin := time.Now()
	// Paced below the gateway's per-account rate (200/s) so throttling never answers.
	pace := time.NewTicker(6 * time.Millisecond)
	defer pace.Stop()
	for i := range calls {
		<-pace.C
		sem <- struct{}{}
		wg.Add(1)
		if i == calls*3/10 {
			go func() {
				c.Schedulers[li].Kill()
				killed <- time.Now()
				t.Logf("killed -9 leader %s after %d calls started", lead, started.Load())
			}()
		}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			started.Add(1)
			ctx := t.Context()
			r := result{name: fmt.Sprintf("fo-%04d", i)}
			switch {
			case i%25 == 0:
				r.kind = runTask
				var res *ecs.RunTaskOutput
				res, r.err = once.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String(harness.ClusterName),
					TaskDefinition: aws.String(td), StartedBy: aws.String(r.name)})
				if r.err == nil && len(res.Failures) > 0 {
					r.err = fmt.Errorf("failure %s", aws.ToString(res.Failures[0].Reason))
				}
			case i%3 == 0:
				r.kind = register
				_, r.err = once.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
					Family: aws.String(r.name),
					ContainerDefinitions: []ecstypes.ContainerDefinition{{
						Name: aws.String("app"), Image: aws.String(c.Image), Memory: aws.Int32(16),
					}},
				})
			case i%3 == 1:
				_, r.err = once.ListClusters(ctx, &ecs.ListClustersInput{})
			default:
				_, r.err = once.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(td)})
			}
			results[i] = r
		}()
	}
	wg.Wait()
	killAt := <-killed
	t.Logf("%d calls in %s", calls, time.Since(begin).Round(time.Millisecond))

	all, err := c.Tasks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tasksBy := map[string][]string{}
	for _, task := range all {
		tasksBy[aws.ToString(task.StartedBy)] = append(tasksBy[aws.ToString(task.StartedBy)], aws.ToString(task.TaskArn))
	}
	failed := 0
	var runs []string
	for i, r := range results {
		if r.err != nil {
			failed++
			t.Logf("call %d (%s): %v", i, r.name, r.err)
			if r.kind == read {
				t.Errorf("read %d failed: %v", i, r.err)
			}
		}
		switch r.kind {
		case register:
			res, err := c.ECS.ListTaskDefinitions(t.Context(), &ecs.ListTaskDefinitionsInput{FamilyPrefix: aws.String(r.name)})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, arn := range res.TaskDefinitionArns {
				if strings.Contains(arn, ":task-definition/"+r.name+":") {
					n++
				}
			}
			if (r.err == nil && n != 1) || n > 1 {
				t.Errorf("family %s (call error %v) has %d revisions: %v", r.name, r.err, n, res.TaskDefinitionArns)
			}
		case runTask:
			arns := tasksBy[r.name]
			if n := len(arns); (r.err == nil && n != 1) || n > 1 {
				t.Errorf("RunTask %s (call error %v) made %d tasks", r.name, r.err, n)
			}
			if r.err == nil {
				runs = append(runs, arns...)
			}
		}
	}
	t.Logf("failover figures: %d of %d calls failed (all in flight on the killed replica: at most %d)", failed, calls, concurrency)
	if failed > concurrency {
		t.Errorf("%d calls failed; only the %d in flight on the killed replica may", failed, concurrency)
	}
	c.WaitAgentsConnected(t.Context())
	t.Logf("agents connected again %s after the kill", time.Since(killAt).Round(time.Millisecond))
	t.Logf("%d RunTask calls placed exactly one task each", len(runs))
}
