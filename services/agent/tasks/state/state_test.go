package state

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// ctr is a container c named name in status st; opts adjust it.
func ctr(name, st string, opts ...func(*Container)) *Container {
	c := &Container{Def: &ecsv1.ContainerDefinition{Name: proto.String(name)}, Name: name, ID: "id-" + name, Essential: true, Status: st}
	if st != Pending {
		c.Started = true
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func sidecar(c *Container)  { c.Essential = false }
func neverRan(c *Container) { c.NeverRan, c.Started = true, false }
func health(h string) func(*Container) {
	return func(c *Container) { c.Health = h }
}
func exit(code int32) func(*Container) {
	return func(c *Container) { c.ExitCode = &code }
}
func reason(r string) func(*Container) {
	return func(c *Container) { c.Reason = r }
}
func dependsOn(name, cond string) func(*Container) {
	return func(c *Container) {
		c.Def.DependsOn = append(c.Def.DependsOn, &ecsv1.ContainerDependency{ContainerName: proto.String(name), Condition: proto.String(cond)})
	}
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		status     string // task status before
		stopping   bool
		ctrs       []*Container
		wantStatus string
		wantCode   string
		wantReason string
		wantHealth string
	}{
		{name: "one pending container keeps the task PENDING", status: Pending,
			ctrs: []*Container{ctr("a", Running), ctr("b", Pending)}, wantStatus: Pending, wantHealth: Unknown},
		{name: "no container pending makes it RUNNING", status: Pending,
			ctrs: []*Container{ctr("a", Running), ctr("b", Running)}, wantStatus: Running, wantHealth: Unknown},
		{name: "a stopped sidecar does not stop the task", status: Running,
			ctrs: []*Container{ctr("a", Running), ctr("b", Stopped, sidecar, exit(0))}, wantStatus: Running, wantHealth: Unknown},
		{name: "an essential exit stops the task", status: Running,
			ctrs:       []*Container{ctr("a", Stopped, exit(1)), ctr("b", Running, sidecar)},
			wantStatus: Running, wantCode: StopCodeEssentialContainerExited, wantReason: ReasonEssentialExited, wantHealth: Unknown},
		{name: "an essential container that never ran fails the start with its reason", status: Pending,
			ctrs:       []*Container{ctr("a", Stopped, neverRan, reason("CannotPullContainerError: x")), ctr("b", Pending)},
			wantStatus: Pending, wantCode: StopCodeTaskFailedToStart, wantReason: "CannotPullContainerError: x", wantHealth: Unknown},
		{name: "never ran without a reason", status: Pending,
			ctrs:       []*Container{ctr("a", Stopped, neverRan)},
			wantStatus: Stopped, wantCode: StopCodeTaskFailedToStart, wantReason: reasonNeverStarted, wantHealth: Unknown},
		{name: "all stopped makes it STOPPED", status: Running,
			ctrs:       []*Container{ctr("a", Stopped, exit(0)), ctr("b", Stopped, sidecar, exit(0))},
			wantStatus: Stopped, wantCode: StopCodeEssentialContainerExited, wantReason: ReasonEssentialExited, wantHealth: Unknown},
		{name: "a stop already asked for keeps its code", status: Running, stopping: true,
			ctrs:       []*Container{ctr("a", Stopped, exit(143))},
			wantStatus: Stopped, wantCode: StopCodeUserInitiated, wantReason: "user", wantHealth: Unknown},
		{name: "a stopping task does not become RUNNING", status: Pending, stopping: true,
			ctrs:       []*Container{ctr("a", Running)},
			wantStatus: Pending, wantCode: StopCodeUserInitiated, wantReason: "user", wantHealth: Unknown},
		{name: "healthy essential checks make the task HEALTHY", status: Running,
			ctrs: []*Container{ctr("a", Running, health(Healthy)), ctr("b", Running, health(Healthy))}, wantStatus: Running, wantHealth: Healthy},
		{name: "one UNKNOWN essential check makes it UNKNOWN", status: Running,
			ctrs: []*Container{ctr("a", Running, health(Healthy)), ctr("b", Running, health(Unknown))}, wantStatus: Running, wantHealth: Unknown},
		{name: "one UNHEALTHY essential check wins over UNKNOWN", status: Running,
			ctrs: []*Container{ctr("a", Running, health(Unknown)), ctr("b", Running, health(Unhealthy))}, wantStatus: Running, wantHealth: Unhealthy},
		{name: "a sidecar's health does not count", status: Running,
			ctrs: []*Container{ctr("a", Running, health(Healthy)), ctr("b", Running, sidecar, health(Unhealthy))}, wantStatus: Running, wantHealth: Healthy},
		{name: "containers without checks leave health UNKNOWN", status: Running,
			ctrs: []*Container{ctr("a", Running), ctr("b", Running, sidecar, health(Healthy))}, wantStatus: Running, wantHealth: Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &Task{ARN: "arn", Status: tc.status, Containers: tc.ctrs, Health: Unknown}
			if tc.stopping {
				task.BeginStop(StopCodeUserInitiated, "user", t0.Add(-time.Second))
			}
			task.Evaluate(t0)
			if task.Status != tc.wantStatus || task.StopCode != tc.wantCode || task.StoppedReason != tc.wantReason || task.Health != tc.wantHealth {
				t.Errorf("got status %s code %q reason %q health %s; want %s %q %q %s",
					task.Status, task.StopCode, task.StoppedReason, task.Health, tc.wantStatus, tc.wantCode, tc.wantReason, tc.wantHealth)
			}
			if task.Stopping != (tc.wantCode != "") {
				t.Errorf("Stopping = %v with stop code %q", task.Stopping, tc.wantCode)
			}
			if tc.wantStatus == Running && tc.status == Pending && !task.StartedAt.Equal(t0) {
				t.Errorf("StartedAt = %v, want %v", task.StartedAt, t0)
			}
			if tc.wantStatus == Stopped && (!task.StoppedAt.Equal(t0) || !task.ExecStoppedAt.Equal(t0) || task.StoppingAt.IsZero()) {
				t.Errorf("stop timestamps: stopping %v execStopped %v stopped %v", task.StoppingAt, task.ExecStoppedAt, task.StoppedAt)
			}
		})
	}
}

func TestEvaluateKeepsFirstTimes(t *testing.T) {
	t.Parallel()
	task := &Task{Status: Pending, Containers: []*Container{ctr("a", Running)}}
	task.Evaluate(t0)
	task.Evaluate(t0.Add(time.Minute))
	if !task.StartedAt.Equal(t0) {
		t.Errorf("StartedAt moved to %v", task.StartedAt)
	}
	if task.BeginStop("X", "x", t0.Add(time.Hour)) != true || task.BeginStop("Y", "y", t0.Add(2*time.Hour)) != false {
		t.Error("BeginStop: first call must change the task, the second must not")
	}
	if task.StopCode != "X" || !task.StoppingAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("a second stop replaced the first: %s at %v", task.StopCode, task.StoppingAt)
	}
}

func TestDependencies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		dep        *Container // the container "app" depends on, named "dep"
		cond       string
		wantReady  bool
		wantReason string // substring; "" for none
	}{
		{"START waits for a pending container", ctr("dep", Pending), "START", false, ""},
		{"START holds once started", ctr("dep", Running), "START", true, ""},
		{"START fails when it never ran", ctr("dep", Stopped, neverRan), "START", false, "dep never started"},
		{"COMPLETE waits while running", ctr("dep", Running), "COMPLETE", false, ""},
		{"COMPLETE holds after any exit", ctr("dep", Stopped, exit(3)), "COMPLETE", true, ""},
		{"SUCCESS holds after exit 0", ctr("dep", Stopped, exit(0)), "SUCCESS", true, ""},
		{"SUCCESS fails after exit 1", ctr("dep", Stopped, exit(1)), "SUCCESS", false, "dep did not exit successfully"},
		{"SUCCESS fails without an exit code", ctr("dep", Stopped), "SUCCESS", false, "did not exit successfully"},
		{"SUCCESS waits while running", ctr("dep", Running), "SUCCESS", false, ""},
		{"HEALTHY holds when healthy", ctr("dep", Running, health(Healthy)), "HEALTHY", true, ""},
		{"HEALTHY waits while unknown", ctr("dep", Running, health(Unknown)), "HEALTHY", false, ""},
		{"HEALTHY fails when unhealthy", ctr("dep", Running, health(Unhealthy)), "HEALTHY", false, "dep did not become healthy"},
		{"HEALTHY fails without a check", ctr("dep", Running), "HEALTHY", false, "did not become healthy"},
		{"HEALTHY fails once exited", ctr("dep", Stopped, health(Unknown), exit(0)), "HEALTHY", false, "did not become healthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := ctr("app", Pending, dependsOn("dep", tc.cond))
			task := &Task{Containers: []*Container{tc.dep, app}}
			ready, why := task.Dependencies(app)
			if ready != tc.wantReady || (tc.wantReason == "") != (why == "") || !strings.Contains(why, tc.wantReason) {
				t.Errorf("Dependencies = %v, %q; want %v, %q", ready, why, tc.wantReady, tc.wantReason)
			}
			if why != "" && !strings.HasPrefix(why, ReasonDependency) {
				t.Errorf("reason %q lacks the %q prefix", why, ReasonDependency)
			}
		})
	}
	app := ctr("app", Pending, dependsOn("ghost", "START"))
	if ready, why := (&Task{Containers: []*Container{app}}).Dependencies(app); ready || !strings.Contains(why, "unknown container ghost") {
		t.Errorf("unknown dependency: %v, %q", ready, why)
	}
	free := ctr("free", Pending)
	if ready, why := (&Task{Containers: []*Container{free}}).Dependencies(free); !ready || why != "" {
		t.Errorf("no dependsOn: %v, %q", ready, why)
	}
}

func TestMarkStopped(t *testing.T) {
	t.Parallel()
	task := &Task{}
	c := ctr("a", Running, health(Healthy), reason("earlier"))
	code := int32(137)
	if !task.MarkStopped(c, &code, "", false) {
		t.Fatal("first MarkStopped reported no change")
	}
	if c.Status != Stopped || c.ExitCode == nil || *c.ExitCode != 137 || c.Reason != "earlier" || c.Health != Unknown || c.NeverRan {
		t.Errorf("after MarkStopped: %+v", c)
	}
	if task.MarkStopped(c, nil, "again", true) || c.Reason != "earlier" || c.NeverRan {
		t.Errorf("a second MarkStopped changed the container: %+v", c)
	}
	u := ctr("u", Running, health(Unhealthy))
	task.MarkStopped(u, nil, "gone", true)
	if u.Health != Unhealthy || u.Reason != "gone" || !u.NeverRan {
		t.Errorf("unhealthy container after MarkStopped: %+v", u)
	}
}

// TestMarkVanished: after an agent restart, a container an earlier agent ran and the
// runtime no longer has is settled from the stored report and never created again;
// one no earlier agent started is left to be created.
func TestMarkVanished(t *testing.T) {
	t.Parallel()
	a := &agentv1.Assignment{
		Task: &ecsv1.Task{TaskArn: proto.String("arn:t")},
		TaskDefinition: &ecsv1.TaskDefinition{ContainerDefinitions: []*ecsv1.ContainerDefinition{
			{Name: proto.String("web")}, {Name: proto.String("exited"), Essential: proto.Bool(false)},
			{Name: proto.String("pending"), Essential: proto.Bool(false)}, {Name: proto.String("unreported"), Essential: proto.Bool(false)},
		}},
	}
	task := New(a, func(arn, name string) string { return name })
	task.Restore(&agentv1.TaskStateChange{LastStatus: Running, StartedAt: timestamppb.New(t0), Containers: []*agentv1.ContainerState{
		{Name: "web", LastStatus: Running},
		{Name: "exited", LastStatus: Stopped, ExitCode: proto.Int32(3), Reason: "boom"},
		{Name: "pending", LastStatus: Pending},
	}})
	web, exited, pending, unreported := task.Containers[0], task.Containers[1], task.Containers[2], task.Containers[3]
	if !task.MarkVanished(web) || web.Status != Stopped || web.ExitCode != nil || web.Reason != ReasonVanished || web.NeverRan {
		t.Errorf("a container reported RUNNING: %+v", web)
	}
	if !task.MarkVanished(exited) || exited.Status != Stopped || exited.ExitCode == nil || *exited.ExitCode != 3 || exited.Reason != "boom" {
		t.Errorf("a container reported STOPPED: %+v", exited)
	}
	if task.MarkVanished(pending) || pending.Status != Pending {
		t.Errorf("a container reported PENDING: %+v", pending)
	}
	if task.MarkVanished(unreported) || unreported.Status != Pending {
		t.Errorf("a container without a report: %+v", unreported)
	}
	// The essential container that vanished stops the task as an exit would.
	task.Evaluate(t0)
	if !task.Stopping || task.StopCode != StopCodeEssentialContainerExited {
		t.Errorf("task after its essential container vanished: stopping %v code %q reason %q", task.Stopping, task.StopCode, task.StoppedReason)
	}
}

func TestNewAndChange(t *testing.T) {
	t.Parallel()
	a := &agentv1.Assignment{
		Task: &ecsv1.Task{TaskArn: proto.String("arn:t")},
		TaskDefinition: &ecsv1.TaskDefinition{ContainerDefinitions: []*ecsv1.ContainerDefinition{
			{Name: proto.String("web"), PortMappings: []*ecsv1.PortMapping{{ContainerPort: proto.Int32(80)}, {HostPort: proto.Int32(53), Protocol: proto.String("udp")}, {}},
				HealthCheck: &ecsv1.HealthCheck{Command: []string{"CMD", "true"}}},
			{Name: proto.String("log"), Essential: proto.Bool(false)},
		}},
	}
	task := New(a, func(arn, name string) string { return arn + "/" + name })
	if task.Status != Pending || task.Health != Unknown || len(task.Containers) != 2 {
		t.Fatalf("New: %+v", task)
	}
	web, log := task.Containers[0], task.Containers[1]
	if web.ID != "arn:t/web" || !web.Essential || web.Health != Unknown || log.Essential || log.Health != "" {
		t.Errorf("New containers: %+v %+v", web, log)
	}

	web.Status, log.Status = Running, Running
	task.Evaluate(t0)
	c := task.Change()
	if c.GetLastStatus() != Running || c.GetStopCode() != "" || !c.GetStartedAt().AsTime().Equal(t0) || c.GetStoppedAt() != nil {
		t.Errorf("running change: %v", c)
	}
	b := c.GetContainers()[0].GetNetworkBindings()
	if len(b) != 2 || b[0].GetHostPort() != 80 || b[0].GetProtocol() != "tcp" || b[0].GetBindIp() != "0.0.0.0" ||
		b[1].GetContainerPort() != 53 || b[1].GetProtocol() != "udp" {
		t.Errorf("bindings %v", b)
	}
	if c.GetContainers()[1].GetHealthStatus() != Unknown {
		t.Errorf("a container without a check reports health %q", c.GetContainers()[1].GetHealthStatus())
	}

	task.BeginStop(StopCodeUserInitiated, "bye", t0)
	if c := task.Change(); c.GetStopCode() != "" || c.GetStoppedReason() != "" {
		t.Errorf("stop code reported before STOPPED: %v", c)
	}
	code := int32(0)
	task.MarkStopped(web, &code, "", false)
	task.MarkStopped(log, &code, "", false)
	task.Evaluate(t0)
	c = task.Change()
	if c.GetLastStatus() != Stopped || c.GetStopCode() != StopCodeUserInitiated || c.GetStoppedReason() != "bye" ||
		len(c.GetContainers()[0].GetNetworkBindings()) != 0 || c.GetContainers()[0].ExitCode == nil {
		t.Errorf("stopped change: %v", c)
	}

	again := New(a, func(arn, name string) string { return name })
	again.Restore(c)
	if !again.StartedAt.Equal(t0) || again.Containers[0].Health != Unknown {
		t.Errorf("Restore: %+v", again)
	}
	again.Restore(&agentv1.TaskStateChange{PullStartedAt: timestamppb.New(t0),
		Containers: []*agentv1.ContainerState{{Name: "web", HealthStatus: Healthy, ImageDigest: "sha256:x"}, {Name: "log", HealthStatus: Healthy}}})
	if again.Containers[0].Health != Healthy || again.Containers[0].ImageDigest != "sha256:x" || again.Containers[1].Health != "" || !again.PullStarted.Equal(t0) {
		t.Errorf("Restore health: %+v %+v", again.Containers[0], again.Containers[1])
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := func() *agentv1.TaskStateChange {
		return &agentv1.TaskStateChange{TaskArn: "a", LastStatus: Running, HealthStatus: Unknown,
			StartedAt:  timestamppb.New(t0),
			Containers: []*agentv1.ContainerState{{Name: "web", LastStatus: Running, HealthStatus: Unknown}}}
	}
	stopped := func(code int32) *agentv1.TaskStateChange {
		c := base()
		c.Containers[0].LastStatus, c.Containers[0].ExitCode = Stopped, &code
		return c
	}
	for _, tc := range []struct {
		name string
		a, b *agentv1.TaskStateChange
		same bool
	}{
		{"equal states", base(), base(), true},
		{"equal exit codes in different allocations", stopped(1), stopped(1), true},
		{"a timestamp alone does not count", base(), func() *agentv1.TaskStateChange {
			c := base()
			c.StartedAt = timestamppb.New(t0.Add(time.Second))
			return c
		}(), true},
		{"different exit codes", stopped(1), stopped(2), false},
		{"exit code 0 vs none", stopped(0), func() *agentv1.TaskStateChange { c := stopped(0); c.Containers[0].ExitCode = nil; return c }(), false},
		{"task status", base(), func() *agentv1.TaskStateChange { c := base(); c.LastStatus = Stopped; return c }(), false},
		{"task health", base(), func() *agentv1.TaskStateChange { c := base(); c.HealthStatus = Healthy; return c }(), false},
		{"stop code", base(), func() *agentv1.TaskStateChange { c := base(); c.StopCode = "X"; return c }(), false},
		{"pull finished", base(), func() *agentv1.TaskStateChange { c := base(); c.PullStoppedAt = timestamppb.New(t0); return c }(), false},
		{"container health", base(), func() *agentv1.TaskStateChange { c := base(); c.Containers[0].HealthStatus = Healthy; return c }(), false},
		{"container reason", base(), func() *agentv1.TaskStateChange { c := base(); c.Containers[0].Reason = "r"; return c }(), false},
	} {
		if got := Fingerprint(tc.a) == Fingerprint(tc.b); got != tc.same {
			t.Errorf("%s: same fingerprint = %v, want %v (%q vs %q)", tc.name, got, tc.same, Fingerprint(tc.a), Fingerprint(tc.b))
		}
	}
}

// TestShouldRestart is the restart tracker's decision on plain values: enabled, not
// stopping, exit code not ignored, and ran at least the period (default 300 s).
func TestShouldRestart(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ctr := func(rp *ecsv1.ContainerRestartPolicy, ranFor time.Duration) *Container {
		return &Container{Def: &ecsv1.ContainerDefinition{RestartPolicy: rp}, RunningSince: now.Add(-ranFor)}
	}
	on := func(period int32, ignored ...int32) *ecsv1.ContainerRestartPolicy {
		rp := &ecsv1.ContainerRestartPolicy{Enabled: proto.Bool(true), IgnoredExitCodes: ignored}
		if period > 0 {
			rp.RestartAttemptPeriod = proto.Int32(period)
		}
		return rp
	}
	for _, tc := range []struct {
		name     string
		c        *Container
		code     int32
		stopping bool
		want     bool
	}{
		{"no policy", ctr(nil, time.Hour), 1, false, false},
		{"disabled", ctr(&ecsv1.ContainerRestartPolicy{Enabled: proto.Bool(false)}, time.Hour), 1, false, false},
		{"enabled, ran the period", ctr(on(60), time.Minute), 1, false, true},
		{"exit 0 restarts too", ctr(on(60), time.Minute), 0, false, true},
		{"ignored code", ctr(on(60, 0, 3), time.Hour), 3, false, false},
		{"exited early", ctr(on(60), 59*time.Second), 1, false, false},
		{"default period 300 s, early", ctr(on(0), 299*time.Second), 1, false, false},
		{"default period 300 s, ran it", ctr(on(0), 300*time.Second), 1, false, true},
		{"task stopping", ctr(on(60), time.Hour), 1, true, false},
		{"adopted (start unknown)", &Container{Def: &ecsv1.ContainerDefinition{RestartPolicy: on(60)}}, 1, false, true},
	} {
		task := &Task{Stopping: tc.stopping}
		if got := task.ShouldRestart(tc.c, tc.code, now); got != tc.want {
			t.Errorf("%s: ShouldRestart = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestChangeNetwork: a RUNNING container reports the bindings its network gave it (host
// mode: HostBindings of its definition), its network interfaces, and the task its
// attachments; an attachment's status change is a change to report.
func TestChangeNetwork(t *testing.T) {
	dyn := []*ecsv1.NetworkBinding{{BindIp: proto.String("0.0.0.0"), ContainerPort: proto.Int32(80), HostPort: proto.Int32(40001), Protocol: proto.String("tcp")}}
	web := ctr("web", Running, func(c *Container) {
		c.Def.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(80)}}
		c.Bindings = dyn
		c.Interfaces = []*ecsv1.NetworkInterface{{AttachmentId: proto.String("a1"), PrivateIpv4Address: proto.String("10.240.0.2")}}
	})
	host := ctr("host", Running, func(c *Container) { c.Def.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(8080)}} })
	task := &Task{ARN: "arn", Status: Running, Containers: []*Container{web, host},
		Attachments: []*ecsv1.Attachment{{Id: proto.String("a1"), Status: proto.String("ATTACHED")}}}
	c := task.Change()
	if got := c.GetContainers()[0].GetNetworkBindings(); len(got) != 1 || got[0].GetHostPort() != 40001 {
		t.Errorf("bridge bindings = %v", got)
	}
	if got := c.GetContainers()[0].GetNetworkInterfaces(); len(got) != 1 || got[0].GetPrivateIpv4Address() != "10.240.0.2" {
		t.Errorf("interfaces = %v", got)
	}
	if got := c.GetContainers()[1].GetNetworkBindings(); len(got) != 1 || got[0].GetHostPort() != 8080 {
		t.Errorf("host-mode bindings = %v", got)
	}
	before := Fingerprint(c)
	task.Attachments[0].Status = proto.String("DELETED")
	if Fingerprint(task.Change()) == before {
		t.Errorf("an attachment's status change does not change the fingerprint")
	}
}
