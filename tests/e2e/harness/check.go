package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/berthhq/berth/services/agent/tasks"
)

// Container is one container the agents created, as containerd sees it.
type Container struct {
	Namespace string
	ID        string
	TaskARN   string
	Name      string // container name in the task definition
	Instance  string // container instance ARN label
	CreatedAt time.Time
	// Pid and Status are the containerd task's; Status is "" when the container has no
	// task.
	Pid    uint32
	Status string
}

// Census lists every container of every agent's namespace, by task ARN.
func (c *Cluster) Census(ctx context.Context) (map[string][]Container, error) {
	client, err := containerd.New(c.Containerd.Address())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	out := map[string][]Container{}
	for _, a := range c.Agents {
		nctx := namespaces.WithNamespace(ctx, a.Namespace)
		ctrs, err := client.Containers(nctx)
		if err != nil {
			return nil, fmt.Errorf("list containers in %s: %w", a.Namespace, err)
		}
		for _, ctr := range ctrs {
			info, err := ctr.Info(nctx)
			if errdefs.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("container %s: %w", ctr.ID(), err)
			}
			x := Container{
				Namespace: a.Namespace,
				ID:        ctr.ID(),
				TaskARN:   info.Labels[tasks.LabelTaskARN],
				Name:      info.Labels[tasks.LabelContainerName],
				Instance:  info.Labels[tasks.LabelInstance],
				CreatedAt: info.CreatedAt,
			}
			task, err := ctr.Task(nctx, nil)
			switch {
			case errdefs.IsNotFound(err):
			case err != nil:
				return nil, fmt.Errorf("task of %s: %w", ctr.ID(), err)
			default:
				x.Pid = task.Pid()
				st, err := task.Status(nctx)
				if err != nil && !errdefs.IsNotFound(err) {
					return nil, fmt.Errorf("task status of %s: %w", ctr.ID(), err)
				}
				x.Status = string(st.Status)
			}
			out[x.TaskARN] = append(out[x.TaskARN], x)
		}
	}
	return out, nil
}

// Tasks lists and describes every task of the cluster (desired RUNNING and STOPPED).
func (c *Cluster) Tasks(ctx context.Context) ([]ecstypes.Task, error) {
	var arns []string
	for _, desired := range []ecstypes.DesiredStatus{ecstypes.DesiredStatusRunning, ecstypes.DesiredStatusStopped} {
		p := ecs.NewListTasksPaginator(c.ECS, &ecs.ListTasksInput{Cluster: aws.String(ClusterName), DesiredStatus: desired, MaxResults: aws.Int32(100)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			arns = append(arns, page.TaskArns...)
		}
	}
	return c.DescribeTasks(ctx, arns)
}

// DescribeTasks describes tasks in batches of 100; a task the API does not know is an
// error.
func (c *Cluster) DescribeTasks(ctx context.Context, arns []string) ([]ecstypes.Task, error) {
	var out []ecstypes.Task
	for chunk := range slices.Chunk(arns, 100) {
		res, err := c.ECS.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String(ClusterName), Tasks: chunk})
		if err != nil {
			return nil, err
		}
		if len(res.Failures) > 0 {
			f := res.Failures[0]
			return nil, fmt.Errorf("DescribeTasks: %d failures, first %s: %s", len(res.Failures), aws.ToString(f.Arn), aws.ToString(f.Reason))
		}
		out = append(out, res.Tasks...)
	}
	return out, nil
}

// WaitRunning waits until every task in arns is RUNNING.
func (c *Cluster) WaitRunning(ctx context.Context, arns []string, timeout time.Duration) []ecstypes.Task {
	c.t.Helper()
	var ts []ecstypes.Task
	var stopped error
	c.Eventually(ctx, timeout, fmt.Sprintf("%d tasks RUNNING", len(arns)), func() error {
		var err error
		ts, err = c.DescribeTasks(ctx, arns)
		if err != nil {
			return err
		}
		n := 0
		var other []string
		for _, task := range ts {
			last := aws.ToString(task.LastStatus)
			if last == "RUNNING" {
				n++
				continue
			}
			if last == "STOPPED" && stopped == nil {
				stopped = fmt.Errorf("task %s STOPPED: %s (%s)", aws.ToString(task.TaskArn), aws.ToString(task.StoppedReason), describeContainers(task))
			}
			if len(other) < 3 {
				other = append(other, fmt.Sprintf("%s is %s", aws.ToString(task.TaskArn), last))
			}
		}
		if stopped != nil {
			return nil // fail at once below: a STOPPED task never runs again
		}
		if n != len(arns) {
			return fmt.Errorf("%d of %d RUNNING; e.g. %s", n, len(arns), strings.Join(other, "; "))
		}
		return nil
	})
	if stopped != nil {
		c.t.Fatalf("waiting for %d tasks RUNNING: %v", len(arns), stopped)
	}
	return ts
}

// CheckInvariants checks what no fault may break, and returns every violation:
//
//   - no task run twice: each task has exactly one container per container name, in one
//     namespace, labelled with the instance the API places it on;
//   - no task lost: each task the API reports RUNNING has its container running, and every
//     container belongs to a task the API knows;
//   - no instance over-committed: the CPU and memory of the tasks on an instance that are
//     not STOPPED fit in what it registered (when it is connected), and registered minus
//     remaining is exactly their sum.
//
// Call it when the system is quiet (no task in transition).
func (c *Cluster) CheckInvariants(ctx context.Context) error {
	census, err := c.Census(ctx)
	if err != nil {
		return err
	}
	tasksList, err := c.Tasks(ctx)
	if err != nil {
		return err
	}
	instances, err := c.Instances(ctx)
	if err != nil {
		return err
	}
	var errs []error
	known := map[string]ecstypes.Task{}
	type use struct{ cpu, mem int64 }
	used := map[string]*use{}
	for _, task := range tasksList {
		arn := aws.ToString(task.TaskArn)
		known[arn] = task
		last := aws.ToString(task.LastStatus)
		ci := aws.ToString(task.ContainerInstanceArn)
		if last != "STOPPED" {
			u := used[ci]
			if u == nil {
				u = &use{}
				used[ci] = u
			}
			u.cpu += atoi(task.Cpu)
			u.mem += atoi(task.Memory)
		}
		ctrs := census[arn]
		byName := map[string]int{}
		for _, x := range ctrs {
			byName[x.Name]++
			if x.Instance != ci {
				errs = append(errs, fmt.Errorf("task %s is on %s per the API but its container %s/%s is labelled %s", arn, ci, x.Namespace, x.ID, x.Instance))
			}
		}
		for name, n := range byName {
			if n > 1 {
				errs = append(errs, fmt.Errorf("task %s runs container %q %d times: %v", arn, name, n, ctrs))
			}
		}
		if last == "RUNNING" {
			for _, want := range task.Containers {
				if byName[aws.ToString(want.Name)] == 0 {
					errs = append(errs, fmt.Errorf("task %s is RUNNING but has no container %q", arn, aws.ToString(want.Name)))
				}
			}
			for _, x := range ctrs {
				if x.Status != string(containerd.Running) {
					errs = append(errs, fmt.Errorf("task %s is RUNNING but container %s/%s is %q", arn, x.Namespace, x.ID, x.Status))
				}
			}
		}
	}
	for arn, ctrs := range census {
		if _, ok := known[arn]; !ok {
			errs = append(errs, fmt.Errorf("containers of a task the API does not know (%q): %v", arn, ctrs))
		}
	}
	for ns, ci := range instances {
		arn := aws.ToString(ci.ContainerInstanceArn)
		u := used[arn]
		if u == nil {
			u = &use{}
		}
		regCPU, regMem := Resource(ci.RegisteredResources, "CPU"), Resource(ci.RegisteredResources, "MEMORY")
		remCPU, remMem := Resource(ci.RemainingResources, "CPU"), Resource(ci.RemainingResources, "MEMORY")
		if ci.AgentConnected && (u.cpu > regCPU || u.mem > regMem) {
			errs = append(errs, fmt.Errorf("instance of %s over-committed: tasks hold CPU %d MEMORY %d of registered %d/%d", ns, u.cpu, u.mem, regCPU, regMem))
		}
		if regCPU-remCPU != u.cpu || regMem-remMem != u.mem {
			errs = append(errs, fmt.Errorf("instance of %s: registered-remaining is CPU %d MEMORY %d but its tasks hold %d/%d",
				ns, regCPU-remCPU, regMem-remMem, u.cpu, u.mem))
		}
		if int(ci.RunningTasksCount+ci.PendingTasksCount) < 0 {
			errs = append(errs, fmt.Errorf("instance of %s: negative task counts", ns))
		}
	}
	return errors.Join(errs...)
}

// SameContainers reports every container of before that is not, in after, the same
// container still running the same process (same id, creation time and pid).
func SameContainers(before, after map[string][]Container) error {
	var errs []error
	for arn, bs := range before {
		as := after[arn]
		for _, b := range bs {
			i := slices.IndexFunc(as, func(a Container) bool { return a.Namespace == b.Namespace && a.ID == b.ID })
			if i < 0 {
				errs = append(errs, fmt.Errorf("container %s/%s of %s is gone", b.Namespace, b.ID, arn))
				continue
			}
			a := as[i]
			if !a.CreatedAt.Equal(b.CreatedAt) || a.Pid != b.Pid || a.Status != b.Status {
				errs = append(errs, fmt.Errorf("container %s/%s of %s changed: created %s pid %d %s → created %s pid %d %s",
					b.Namespace, b.ID, arn, b.CreatedAt.Format(time.RFC3339Nano), b.Pid, b.Status, a.CreatedAt.Format(time.RFC3339Nano), a.Pid, a.Status))
			}
		}
	}
	return errors.Join(errs...)
}

func describeContainers(task ecstypes.Task) string {
	var parts []string
	for _, x := range task.Containers {
		code := "none"
		if x.ExitCode != nil {
			code = fmt.Sprint(*x.ExitCode)
		}
		parts = append(parts, fmt.Sprintf("%s: %s exit %s %s", aws.ToString(x.Name), aws.ToString(x.LastStatus), code, aws.ToString(x.Reason)))
	}
	return strings.Join(parts, "; ")
}
