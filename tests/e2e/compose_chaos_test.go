package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// chaosRig drives the fault pass of TestCompose: one fault at a time on the stack's own
// containers, under a steady workload of RunTask calls (a short task each, with a client
// token) and reads of a running service, through the gateway with the AWS SDK.
type chaosRig struct {
	t     *testing.T
	ctx   context.Context
	dc    func(ctx context.Context, args ...string) (string, error)
	ecs   *ecs.Client
	roots *x509.CertPool
	// etcdTLS is the client TLS of etcd's own CA (deploy/build.sh's etcd-tls).
	etcdTLS *tls.Config
	// family is a task definition whose task exits 0 at once; service is the running
	// service (desiredCount) the faults must leave alone.
	family, service string
	desired         int32
	rows            []chaosRow
	ids             map[string]string // compose service → container id
}

// chaosFault is one fault: inject breaks something, heal (may be nil) puts it back once
// the stack has recovered around the break.
type chaosFault struct {
	name         string
	inject, heal func() error
	// agentsDown is how many agents may stay disconnected for the stack to count as
	// recovered before heal (an agent cut off for longer than the heartbeat timeout).
	agentsDown int
	// which, when set, names what inject chose (the leader it killed), for the table.
	which *string
}

// chaosRow is one fault's figures, as the table prints them.
type chaosRow struct {
	fault                 string
	calls, failed         int
	accepted, lost, dup   int
	recovered, healed     time.Duration
	serviceTasksUnchanged bool
}

// chaosCall is one RunTask of the workload: its client token, and the tasks it placed.
type chaosCall struct {
	token string
	arns  []string
	err   error
}

// containerIP returns the address of a compose service's container on the stack's network.
func (r *chaosRig) containerIP(service string) (string, error) {
	id := r.ids[service]
	if id == "" {
		out, err := r.dc(r.ctx, "ps", "-q", service)
		if err != nil {
			return "", err
		}
		if id = strings.TrimSpace(out); id == "" {
			return "", fmt.Errorf("no container for %s", service)
		}
		if r.ids == nil {
			r.ids = map[string]string{}
		}
		r.ids[service] = id // stable across stop, kill and start
	}
	out, err := exec.CommandContext(r.ctx, "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", id).Output()
	if err != nil {
		return "", fmt.Errorf("docker inspect %s: %w", service, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "", fmt.Errorf("%s has no address (not running)", service)
	}
	return f[0], nil
}

// schedulerLeader returns the replica whose /metrics says berth_scheduler_leader 1, and
// how many replicas answered.
func (r *chaosRig) schedulerLeader() (leader string, answered int) {
	for _, s := range []string{"scheduler1", "scheduler2"} {
		ip, err := r.containerIP(s)
		if err != nil {
			continue
		}
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.roots, ServerName: s}}}
		res, err := c.Get("https://" + ip + ":4567/metrics")
		if err != nil {
			continue
		}
		answered++
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if sc.Text() == "berth_scheduler_leader 1" {
				leader = s
			}
		}
		res.Body.Close()
	}
	return leader, answered
}

// etcdLeader returns the name of the etcd member that leads, asked of the members over
// their addresses on the stack's network.
func (r *chaosRig) etcdLeader() (string, error) {
	var eps []string
	for _, m := range []string{"etcd1", "etcd2", "etcd3"} {
		if ip, err := r.containerIP(m); err == nil {
			eps = append(eps, "https://"+ip+":2379")
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 3 * time.Second, TLS: r.etcdTLS})
	if err != nil {
		return "", err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	members, err := cli.MemberList(ctx)
	if err != nil {
		return "", err
	}
	for _, ep := range eps {
		st, err := cli.Status(ctx, ep)
		if err != nil {
			continue
		}
		for _, m := range members.Members {
			if m.ID == st.Leader {
				return m.Name, nil
			}
		}
	}
	return "", fmt.Errorf("no member names a leader (%d endpoints)", len(eps))
}

// etcdHealthy reports whether every one of the 3 members answers a status with the same
// leader.
func (r *chaosRig) etcdHealthy() error {
	leaders := map[uint64]bool{}
	for _, m := range []string{"etcd1", "etcd2", "etcd3"} {
		ip, err := r.containerIP(m)
		if err != nil {
			return err
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + ip + ":2379"}, DialTimeout: 2 * time.Second, TLS: r.etcdTLS})
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(r.ctx, 3*time.Second)
		st, err := cli.Status(ctx, "https://"+ip+":2379")
		cancel()
		cli.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		leaders[st.Leader] = true
	}
	if len(leaders) != 1 {
		return fmt.Errorf("members name %d leaders", len(leaders))
	}
	return nil
}

// agentsConnected counts the cluster's instances with agentConnected true and false.
func (r *chaosRig) agentsConnected(ctx context.Context) (up, down int, err error) {
	l, err := r.ecs.ListContainerInstances(ctx, &ecs.ListContainerInstancesInput{Cluster: aws.String("default")})
	if err != nil || len(l.ContainerInstanceArns) == 0 {
		return 0, 0, err
	}
	d, err := r.ecs.DescribeContainerInstances(ctx, &ecs.DescribeContainerInstancesInput{Cluster: aws.String("default"), ContainerInstances: l.ContainerInstanceArns})
	if err != nil {
		return 0, 0, err
	}
	for _, ci := range d.ContainerInstances {
		if ci.AgentConnected {
			up++
		} else {
			down++
		}
	}
	return up, down, nil
}

// serviceTasks lists the service's tasks desired RUNNING, sorted.
func (r *chaosRig) serviceTasks(ctx context.Context) ([]string, error) {
	l, err := r.ecs.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String("default"), ServiceName: aws.String(r.service)})
	if err != nil {
		return nil, err
	}
	slices.Sort(l.TaskArns)
	return l.TaskArns, nil
}

// runOnEveryInstance starts a task of the rig's family on each container instance
// (StartTask) and waits (with wait) until each has run to completion with exit code 0.
func (r *chaosRig) runOnEveryInstance(wait func(what string, f func() error) error) error {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	l, err := r.ecs.ListContainerInstances(ctx, &ecs.ListContainerInstancesInput{Cluster: aws.String("default")})
	cancel()
	if err != nil {
		return err
	}
	if len(l.ContainerInstanceArns) < 2 {
		return fmt.Errorf("%d container instances", len(l.ContainerInstanceArns))
	}
	var arns []string
	for _, ci := range l.ContainerInstanceArns {
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		out, err := r.ecs.StartTask(ctx, &ecs.StartTaskInput{Cluster: aws.String("default"), TaskDefinition: aws.String(r.family),
			ContainerInstances: []string{ci}, StartedBy: aws.String("chaos-every-instance")})
		cancel()
		if err != nil {
			return fmt.Errorf("StartTask on %s: %w", ci, err)
		}
		if len(out.Failures) > 0 || len(out.Tasks) != 1 {
			return fmt.Errorf("StartTask on %s: %d tasks, failures %v", ci, len(out.Tasks), out.Failures)
		}
		arns = append(arns, aws.ToString(out.Tasks[0].TaskArn))
	}
	return wait("a task run to completion on every instance", func() error {
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		defer cancel()
		d, err := r.ecs.DescribeTasks(ctx, &ecs.DescribeTasksInput{Cluster: aws.String("default"), Tasks: arns})
		if err != nil {
			return err
		}
		for _, t := range d.Tasks {
			if aws.ToString(t.LastStatus) != "STOPPED" {
				return fmt.Errorf("task %s is %s", aws.ToString(t.TaskArn), aws.ToString(t.LastStatus))
			}
			if len(t.Containers) != 1 || t.Containers[0].ExitCode == nil || *t.Containers[0].ExitCode != 0 {
				return fmt.Errorf("task %s stopped: %s", aws.ToString(t.TaskArn), aws.ToString(t.StoppedReason))
			}
		}
		if len(d.Tasks) != len(arns) {
			return fmt.Errorf("%d of %d tasks described", len(d.Tasks), len(arns))
		}
		return nil
	})
}

func (r *chaosRig) runTask(ctx context.Context, tag, token string) ([]string, error) {
	out, err := r.ecs.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("default"), TaskDefinition: aws.String(r.family),
		StartedBy: aws.String(tag), ClientToken: aws.String(token)})
	if err != nil {
		return nil, err
	}
	if len(out.Failures) > 0 {
		return nil, fmt.Errorf("RunTask failures: %s %s", aws.ToString(out.Failures[0].Arn), aws.ToString(out.Failures[0].Reason))
	}
	var arns []string
	for _, t := range out.Tasks {
		arns = append(arns, aws.ToString(t.TaskArn))
	}
	return arns, nil
}

// healthy says whether the stack serves as before the fault: a leader, the service at its
// desired count, and every agent connected but allowedDown.
func (r *chaosRig) healthy(ctx context.Context, allowedDown int) error {
	if l, _ := r.schedulerLeader(); l == "" {
		return fmt.Errorf("no scheduler leads")
	}
	d, err := r.ecs.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String("default"), Services: []string{r.service}})
	if err != nil {
		return err
	}
	if len(d.Services) != 1 || d.Services[0].RunningCount != r.desired {
		return fmt.Errorf("service %v", d.Services)
	}
	up, _, err := r.agentsConnected(ctx)
	if err != nil {
		return err
	}
	if up < 2-allowedDown {
		return fmt.Errorf("%d agents connected", up)
	}
	return nil
}

// run injects one fault under the workload and records its row: the workload runs until
// the stack is healthy again (at most 2 minutes), then the fault is healed and the
// workload goes on until it is healthy with every agent; then every failed RunTask is
// sent again with its client token (an idempotent retry, as an SDK's), and every task the
// calls placed must run to completion exactly once.
func (r *chaosRig) run(f chaosFault) {
	t := r.t
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tag := "chaos-" + hex.EncodeToString(rnd[:])
	before, err := r.serviceTasks(r.ctx)
	if err != nil {
		t.Fatalf("%s: service tasks before: %v", f.name, err)
	}
	row := chaosRow{fault: f.name}
	var calls []chaosCall
	call := func() error {
		ctx, cancel := context.WithTimeout(r.ctx, 15*time.Second)
		defer cancel()
		c := chaosCall{token: fmt.Sprintf("%s-%d", tag, len(calls))}
		c.arns, c.err = r.runTask(ctx, tag, c.token)
		calls = append(calls, c)
		row.calls++
		if c.err != nil {
			row.failed++
			return c.err
		}
		return nil
	}
	// A steady second of workload before the fault.
	for range 2 {
		if err := call(); err != nil {
			t.Fatalf("%s: the workload fails before the fault: %v", f.name, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	start := time.Now()
	if err := f.inject(); err != nil {
		t.Fatalf("%s: %v", f.name, err)
	}
	if f.which != nil {
		row.fault += " (" + *f.which + ")"
	}
	until := func(allowedDown int, what string) time.Duration {
		var last error
		for time.Since(start) < 2*time.Minute && r.ctx.Err() == nil {
			callErr := call()
			ctx, cancel := context.WithTimeout(r.ctx, 15*time.Second)
			last = r.healthy(ctx, allowedDown)
			cancel()
			if callErr == nil && last == nil {
				return time.Since(start)
			}
			if last == nil {
				last = callErr
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Fatalf("%s: %s not within 2 min (%d of %d calls failed): %v", f.name, what, row.failed, row.calls, last)
		return 0
	}
	row.recovered = until(f.agentsDown, "recovery")
	if f.heal != nil {
		if err := f.heal(); err != nil {
			t.Fatalf("%s: heal: %v", f.name, err)
		}
		row.healed = until(0, "recovery after healing")
	}
	// A failed call may or may not have placed its tasks: sent again with the same token
	// it answers those tasks, or places them now, never twice.
	for i := range calls {
		if calls[i].err == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(r.ctx, 15*time.Second)
		calls[i].arns, calls[i].err = r.runTask(ctx, tag, calls[i].token)
		cancel()
		if calls[i].err != nil {
			t.Errorf("%s: RunTask %s retried after recovery: %v", f.name, calls[i].token, calls[i].err)
		}
	}
	want := map[string]bool{}
	for _, c := range calls {
		for _, a := range c.arns {
			if want[a] {
				row.dup++ // two calls answered the same task
			}
			want[a] = true
		}
	}
	row.accepted = len(want)
	// Every placed task runs to completion (exit 0); nothing else was started by the tag.
	var pending []string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pending = pending[:0]
		var bad []string
		arns := make([]string, 0, len(want))
		for a := range want {
			arns = append(arns, a)
		}
		for chunk := range slices.Chunk(arns, 100) {
			d, err := r.ecs.DescribeTasks(r.ctx, &ecs.DescribeTasksInput{Cluster: aws.String("default"), Tasks: chunk})
			if err != nil {
				t.Fatalf("%s: describe tasks: %v", f.name, err)
			}
			for _, fl := range d.Failures {
				bad = append(bad, aws.ToString(fl.Arn)+" "+aws.ToString(fl.Reason))
			}
			for _, tk := range d.Tasks {
				if aws.ToString(tk.LastStatus) != "STOPPED" {
					pending = append(pending, aws.ToString(tk.TaskArn)+" "+aws.ToString(tk.LastStatus))
					continue
				}
				if tk.StopCode != types.TaskStopCodeEssentialContainerExited || len(tk.Containers) != 1 || aws.ToInt32(tk.Containers[0].ExitCode) != 0 {
					bad = append(bad, fmt.Sprintf("%s %s %s", aws.ToString(tk.TaskArn), tk.StopCode, aws.ToString(tk.StoppedReason)))
				}
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) {
			row.lost = len(bad) + len(pending)
			for _, b := range append(bad, pending...) {
				t.Errorf("%s: task lost (not run to completion): %s", f.name, b)
			}
			break
		}
		time.Sleep(time.Second)
	}
	seen := map[string]bool{}
	for _, status := range []types.DesiredStatus{types.DesiredStatusRunning, types.DesiredStatusStopped} {
		p := ecs.NewListTasksPaginator(r.ecs, &ecs.ListTasksInput{Cluster: aws.String("default"), StartedBy: aws.String(tag), DesiredStatus: status})
		for p.HasMorePages() {
			page, err := p.NextPage(r.ctx)
			if err != nil {
				t.Fatalf("%s: list tasks: %v", f.name, err)
			}
			for _, a := range page.TaskArns {
				seen[a] = true
				if !want[a] {
					row.dup++ // a task no answer named: placed twice by a retry
					t.Errorf("%s: task %s placed by no call's answer (duplicate)", f.name, a)
				}
			}
		}
	}
	for a := range want {
		if !seen[a] {
			row.lost++
			t.Errorf("%s: task %s not listed", f.name, a)
		}
	}
	after, err := r.serviceTasks(r.ctx)
	if err != nil {
		t.Fatalf("%s: service tasks after: %v", f.name, err)
	}
	row.serviceTasksUnchanged = slices.Equal(before, after)
	if !row.serviceTasksUnchanged {
		t.Errorf("%s: the service's tasks changed: %v → %v", f.name, before, after)
	}
	if row.dup > 0 {
		t.Errorf("%s: %d duplicated tasks", f.name, row.dup)
	}
	r.rows = append(r.rows, row)
	t.Logf("chaos %s: %d of %d RunTask calls failed, %d tasks placed, %d lost, %d duplicated, recovered in %s",
		f.name, row.failed, row.calls, row.accepted, row.lost, row.dup, row.recovered.Round(100*time.Millisecond))
}

// table renders the rows for the test log.
func (r *chaosRig) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-44s %6s %6s %6s %5s %5s %10s %10s %s\n", "fault", "calls", "failed", "tasks", "lost", "dup", "recovered", "healed", "service tasks")
	for _, row := range r.rows {
		healed := "-"
		if row.healed > 0 {
			healed = row.healed.Round(100 * time.Millisecond).String()
		}
		svc := "unchanged"
		if !row.serviceTasksUnchanged {
			svc = "CHANGED"
		}
		fmt.Fprintf(&b, "%-44s %6d %6d %6d %5d %5d %10s %10s %s\n", row.fault, row.calls, row.failed, row.accepted, row.lost, row.dup,
			row.recovered.Round(100*time.Millisecond), healed, svc)
	}
	return b.String()
}

// chaosClient returns an ECS client of the gateways at addrs (host:port, HTTPS with roots)
// that does not retry: every failed call is counted. It signs for the first and connects
// to the first that accepts a connection, as a client of a DNS name with every gateway's
// address does (Go's dialer, like most, tries the next address when one refuses): the
// Host header, which SigV4 covers, stays the same whichever gateway answers.
func chaosClient(addrs []string, roots *x509.CertPool, keyID, secret string) *ecs.Client {
	d := &net.Dialer{Timeout: 3 * time.Second}
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var last error
		for _, a := range addrs {
			c, err := d.DialContext(ctx, network, a)
			if err == nil {
				return c, nil
			}
			last = err
		}
		return nil, last
	}
	return ecs.New(ecs.Options{Region: "us-east-1", BaseEndpoint: aws.String("https://" + addrs[0]), RetryMaxAttempts: 1,
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DialContext: dial}},
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: keyID, SecretAccessKey: secret}, nil
		})})
}

// chaos runs the faults in turn: the scheduler leader killed, the etcd leader member
// stopped, the gateway restarted, the schedulers restarted one at a time, the gateway killed (gateway2 serving), agent2 partitioned shorter and longer than the
// heartbeat timeout.
func (r *chaosRig) chaos() {
	waitHealthy := func(what string, f func() error) error {
		var err error
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			if err = f(); err == nil {
				return nil
			}
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	var leader, member string
	faults := []chaosFault{
		{name: "kill -9 the scheduler leader",
			inject: func() error {
				var n int
				if leader, n = r.schedulerLeader(); leader == "" || n != 2 {
					return fmt.Errorf("leader %q of %d replicas answering", leader, n)
				}
				_, err := r.dc(r.ctx, "kill", "-s", "SIGKILL", leader)
				return err
			}, which: &leader,
			heal: func() error {
				if _, err := r.dc(r.ctx, "start", leader); err != nil {
					return err
				}
				return waitHealthy(leader+" back", func() error {
					if _, n := r.schedulerLeader(); n != 2 {
						return fmt.Errorf("%d replicas answer", n)
					}
					return nil
				})
			}},
		{name: "stop the etcd leader member, start it again",
			inject: func() error {
				var err error
				if member, err = r.etcdLeader(); err != nil {
					return err
				}
				_, err = r.dc(r.ctx, "stop", "--timeout", "5", member)
				return err
			}, which: &member,
			heal: func() error {
				if _, err := r.dc(r.ctx, "start", member); err != nil {
					return err
				}
				return waitHealthy(member+" back in the cluster", r.etcdHealthy)
			}},
		{name: "restart the gateway",
			inject: func() error {
				_, err := r.dc(r.ctx, "restart", "--timeout", "5", "gateway")
				return err
			}},
		// An upgrade of the control plane, one replica at a time (docs/install.md): each
		// scheduler restarted in turn (a new binary would be the same steps), the next only
		// once the first answers again, under the workload.
		{name: "rolling restart of scheduler1 then scheduler2",
			inject: func() error {
				for _, s := range []string{"scheduler1", "scheduler2"} {
					if _, err := r.dc(r.ctx, "restart", "--timeout", "10", s); err != nil {
						return err
					}
					if err := waitHealthy(s+" back", func() error {
						if _, n := r.schedulerLeader(); n != 2 {
							return fmt.Errorf("%d replicas answer", n)
						}
						return nil
					}); err != nil {
						return err
					}
				}
				return nil
			}},
		// Two gateways: one killed, clients connect to the other (chaosClient) and the
		// agents' sessions move to it (--gateway lists both); recovery counts both agents
		// connected again before the gateway comes back.
		{name: "kill -9 the gateway, gateway2 serves",
			inject: func() error {
				if _, err := r.dc(r.ctx, "kill", "-s", "SIGKILL", "gateway"); err != nil {
					return err
				}
				// With the gateway dead, both agents still take and run tasks: a task
				// pinned to each instance runs to completion, assigned and reported over
				// sessions that can only go through gateway2.
				return r.runOnEveryInstance(waitHealthy)
			},
			heal: func() error {
				_, err := r.dc(r.ctx, "start", "gateway")
				return err
			}},
		// agent2 cut off from the stack's network for less than the heartbeat timeout
		// (30 s): its session survives or comes back, nothing is rescheduled.
		{name: "partition agent2 for 10 s",
			inject: func() error {
				if err := r.partition("agent2", true); err != nil {
					return err
				}
				time.Sleep(10 * time.Second)
				return r.partition("agent2", false)
			}},
		// ... and for longer: the control plane sees it disconnected (its tasks stay
		// RUNNING, as ECS keeps a disconnected instance's tasks), then it reconnects and
		// reports again.
		{name: "partition agent2 past the heartbeat timeout",
			inject: func() error {
				if err := r.partition("agent2", true); err != nil {
					return err
				}
				return waitHealthy("agent2 seen disconnected", func() error {
					ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
					defer cancel()
					up, down, err := r.agentsConnected(ctx)
					if err == nil && (up != 1 || down != 1) {
						err = fmt.Errorf("%d connected, %d disconnected", up, down)
					}
					return err
				})
			},
			agentsDown: 1,
			heal:       func() error { return r.partition("agent2", false) }},
	}
	for _, f := range faults {
		r.run(f)
		if r.t.Failed() {
			return
		}
	}
}

// partition cuts service's container off the stack's network (cut) or joins it again: every
// packet in or out of its eth0 is dropped in its network namespace, so its address, its
// routes and its TCP connections stay as they were, as when a switch port goes dark.
// (`docker network disconnect` would give it a new address when it comes back.)
func (r *chaosRig) partition(service string, cut bool) error {
	if _, err := r.containerIP(service); err != nil {
		return err
	}
	out, err := exec.CommandContext(r.ctx, "docker", "inspect", "-f", "{{.State.Pid}}", r.ids[service]).Output()
	if err != nil {
		return fmt.Errorf("docker inspect %s: %w", service, err)
	}
	pid := strings.TrimSpace(string(out))
	op := "-I"
	if !cut {
		op = "-D"
	}
	for _, rule := range [][]string{{"INPUT", "-i", "eth0"}, {"OUTPUT", "-o", "eth0"}} {
		args := append([]string{"-t", pid, "-n", "iptables", "-w", op, rule[0]}, append(rule[1:], "-j", "DROP")...)
		if out, err := exec.CommandContext(r.ctx, "nsenter", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("partition %s (%v): nsenter %v: %w: %s", service, cut, args, err, out)
		}
	}
	return nil
}
