package daemon

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

func TestBuildTaskDefinitionValidation(t *testing.T) {
	ok := func() *ecsv1.RegisterDaemonTaskDefinitionRequest {
		return &ecsv1.RegisterDaemonTaskDefinitionRequest{
			Family:               proto.String("agents"),
			ContainerDefinitions: []*ecsv1.DaemonContainerDefinition{{Name: proto.String("a"), Image: proto.String("img"), Memory: proto.Int32(32)}},
			Volumes:              []*ecsv1.DaemonVolume{{Name: proto.String("logs"), Host: &ecsv1.HostVolumeProperties{SourcePath: proto.String("/var/log")}}},
		}
	}
	td, dtd, err := BuildTaskDefinition(ok())
	if err != nil {
		t.Fatalf("valid request refused: %v", err)
	}
	if td.GetNetworkMode() != NetworkMode || len(td.GetContainerDefinitions()) != 1 || len(td.GetVolumes()) != 1 {
		t.Fatalf("task definition = %v", td)
	}
	if dtd.GetFamily() != "agents" || dtd.GetStatus() != StatusActive || len(dtd.GetVolumes()) != 1 {
		t.Fatalf("daemon task definition = %v", dtd)
	}
	cases := []struct {
		name   string
		change func(*ecsv1.RegisterDaemonTaskDefinitionRequest)
		typ    string
		msg    string
	}{
		{"no family", func(m *ecsv1.RegisterDaemonTaskDefinitionRequest) { m.Family = nil }, "ClientException", "Family"},
		{"bad family", func(m *ecsv1.RegisterDaemonTaskDefinitionRequest) { m.Family = proto.String("a/b") }, "ClientException", "Family"},
		{"no containers", func(m *ecsv1.RegisterDaemonTaskDefinitionRequest) { m.ContainerDefinitions = nil }, "ClientException", "Container list"},
		{"refused member named", func(m *ecsv1.RegisterDaemonTaskDefinitionRequest) {
			m.ContainerDefinitions[0].FirelensConfiguration = &ecsv1.FirelensConfiguration{Type: proto.String("fluentbit")}
		}, "ClientException", "containerDefinitions[0].firelensConfiguration"},
		{"no image", func(m *ecsv1.RegisterDaemonTaskDefinitionRequest) { m.ContainerDefinitions[0].Image = nil }, "ClientException", "image"},
		{"volume unknown to mount", func(m *ecsv1.RegisterDaemonTaskDefinitionRequest) {
			m.ContainerDefinitions[0].MountPoints = []*ecsv1.MountPoint{{SourceVolume: proto.String("nope"), ContainerPath: proto.String("/x")}}
		}, "ClientException", "nope"},
		{"bad tag", func(m *ecsv1.RegisterDaemonTaskDefinitionRequest) { m.Tags = []*ecsv1.Tag{{Key: proto.String("")}} }, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := ok()
			c.change(m)
			_, _, err := BuildTaskDefinition(m)
			if err == nil {
				t.Fatal("accepted")
			}
			e, isAWS := err.(*awserr.Error)
			if !isAWS {
				t.Fatalf("error %v is not an AWS error", err)
			}
			if c.typ != "" && e.Type != c.typ {
				t.Fatalf("type %s (%s), want %s", e.Type, e.Message, c.typ)
			}
			if !strings.Contains(e.Message, c.msg) {
				t.Fatalf("message %q does not name %q", e.Message, c.msg)
			}
		})
	}
}

func TestMinHealthyPercent(t *testing.T) {
	for _, c := range []struct {
		hosts int
		drain float64
		want  int32
	}{
		{0, 25, 0}, {1, 25, 0}, {3, 25, 66}, {4, 25, 75}, {4, 50, 50}, {10, 0, 90}, {10, 100, 0}, {3, 100, 0},
	} {
		if got := MinHealthyPercent(c.hosts, c.drain); got != c.want {
			t.Errorf("MinHealthyPercent(%d, %v) = %d, want %d", c.hosts, c.drain, got, c.want)
		}
	}
}

// TestDaemonOnEveryHost: a daemon runs exactly one task on each host of its capacity
// provider (none elsewhere), a joining host gets one, a stopped one is replaced, a
// draining host keeps it until its other tasks have left, an update rolls every host to
// the new revision, and a deleted daemon's tasks stop and its records go.
func TestDaemonOnEveryHost(t *testing.T) {
	e := newEnv(t)
	hosts := []string{e.host("h1", true), e.host("h2", true), e.host("h3", true)}
	outside := e.host("h-out", false)
	td1 := e.daemonTD("agents", "agent:1")
	created := must(e, e.d.CreateDaemon, &ecsv1.CreateDaemonRequest{
		DaemonName: proto.String("monitor"), ClusterArn: proto.String(e.cluster), DaemonTaskDefinitionArn: proto.String(td1),
		CapacityProviderArns: []string{"pool"},
	})
	if created.GetStatus() != StatusActive || !strings.Contains(created.GetDaemonArn(), ":daemon/c1/monitor") || created.GetDeploymentArn() == "" {
		t.Fatalf("CreateDaemon = %v", created)
	}
	e.step()
	e.step()
	live := e.live("monitor")
	if len(live) != 3 || live[outside] != "" {
		t.Fatalf("daemon tasks on %v, want one on each of %v", live, hosts)
	}
	for _, h := range hosts {
		if live[h] != td1 {
			t.Fatalf("host %s runs %q, want %s", h, live[h], td1)
		}
	}
	// A host joins the pool.
	h4 := e.host("h4", true)
	e.step()
	if live = e.live("monitor"); len(live) != 4 || live[h4] == "" {
		t.Fatalf("after a 4th host joined: %v", live)
	}
	// A daemon task that stops by itself is replaced on its host.
	for _, rec := range e.tasks() {
		if rec.GetTask().GetContainerInstanceArn() == hosts[0] && rec.GetServiceName() == ServicePrefix+"monitor" && rec.GetTask().GetLastStatus() == "RUNNING" {
			if err := e.ctl.ApplyTaskStateChange(e.ctx, e.sc, hosts[0], &agentv1.TaskStateChange{TaskArn: rec.GetTask().GetTaskArn(), LastStatus: "STOPPED", StopCode: "EssentialContainerExited"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.step()
	if live = e.live("monitor"); len(live) != 4 || live[hosts[0]] == "" {
		t.Fatalf("stopped daemon task not replaced: %v", live)
	}
	// Describe: one current revision with 4 running tasks on the pool.
	e.step()
	desc := must(e, e.d.DescribeDaemon, &ecsv1.DescribeDaemonRequest{DaemonArn: created.DaemonArn}).GetDaemon()
	if cr := desc.GetCurrentRevisions(); len(cr) != 1 || cr[0].GetTotalRunningCount() != 4 || len(cr[0].GetCapacityProviders()) != 1 || !strings.HasSuffix(cr[0].GetCapacityProviders()[0].GetArn(), ":capacity-provider/pool") {
		t.Fatalf("currentRevisions = %v", cr)
	}
	dd := must(e, e.d.DescribeDaemonDeployments, &ecsv1.DescribeDaemonDeploymentsRequest{DaemonDeploymentArns: []string{created.GetDeploymentArn()}})
	if len(dd.GetDaemonDeployments()) != 1 || dd.GetDaemonDeployments()[0].GetStatus() != DeploymentSuccessful {
		t.Fatalf("first deployment = %v", dd)
	}

	// Draining a host that still runs another task: the daemon task stays until that one
	// has stopped.
	other := must(e, e.ctl.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
		Family: proto.String("app"), NetworkMode: proto.String("host"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("app"), Memory: proto.Int32(32)}},
	}).GetTaskDefinition().GetTaskDefinitionArn()
	must(e, e.ctl.StartTask, &ecsv1.StartTaskRequest{Cluster: proto.String(e.cluster), TaskDefinition: proto.String(other), ContainerInstances: []string{hosts[1]}})
	e.agent()
	must(e, e.ctl.UpdateContainerInstancesState, &ecsv1.UpdateContainerInstancesStateRequest{
		Cluster: proto.String(e.cluster), ContainerInstances: []string{hosts[1]}, Status: proto.String("DRAINING"),
	})
	e.step()
	if live = e.live("monitor"); live[hosts[1]] == "" {
		t.Fatalf("daemon task left the draining host before its other task: %v", live)
	}
	for _, rec := range e.tasks() {
		if rec.GetTask().GetTaskDefinitionArn() == other && rec.GetTask().GetLastStatus() != "STOPPED" {
			must(e, e.ctl.StopTask, &ecsv1.StopTaskRequest{Cluster: proto.String(e.cluster), Task: rec.GetTask().TaskArn})
		}
	}
	e.agent()
	e.step()
	e.step()
	if live = e.live("monitor"); live[hosts[1]] != "" || len(live) != 3 {
		t.Fatalf("drained host kept its daemon task after its other task stopped: %v", live)
	}

	// UpdateDaemon rolls every host to the new revision.
	td2 := e.daemonTD("agents", "agent:2")
	upd := must(e, e.d.UpdateDaemon, &ecsv1.UpdateDaemonRequest{
		DaemonArn: created.DaemonArn, DaemonTaskDefinitionArn: proto.String(td2), CapacityProviderArns: []string{"pool"},
		DeploymentConfiguration: &ecsv1.DaemonDeploymentConfiguration{DrainPercent: proto.Float64(34)},
	})
	if upd.GetDeploymentArn() == created.GetDeploymentArn() {
		t.Fatal("UpdateDaemon started no new deployment")
	}
	for range 12 {
		e.step()
		// Never more than one host (34% of 3) without its daemon task.
		if n := len(e.live("monitor")); n < 2 {
			t.Fatalf("the rollout took %d hosts down at once", 3-n)
		}
	}
	live = e.live("monitor")
	for h, td := range live {
		if td != td2 {
			t.Fatalf("host %s still runs %s after the rollout", h, td)
		}
	}
	if len(live) != 3 {
		t.Fatalf("after the rollout: %v", live)
	}
	dep := must(e, e.d.DescribeDaemonDeployments, &ecsv1.DescribeDaemonDeploymentsRequest{DaemonDeploymentArns: []string{upd.GetDeploymentArn(), "arn:aws:ecs:us-east-1:" + e.sc.Account + ":daemon-deployment/c1/monitor/nope"}})
	if len(dep.GetDaemonDeployments()) != 1 || dep.GetDaemonDeployments()[0].GetStatus() != DeploymentSuccessful || len(dep.GetFailures()) != 1 || dep.GetFailures()[0].GetReason() != "MISSING" {
		t.Fatalf("update deployment = %v", dep)
	}
	target := dep.GetDaemonDeployments()[0].GetTargetDaemonRevision().GetArn()
	revs := must(e, e.d.DescribeDaemonRevisions, &ecsv1.DescribeDaemonRevisionsRequest{DaemonRevisionArns: []string{target}})
	if len(revs.GetDaemonRevisions()) != 1 || revs.GetDaemonRevisions()[0].GetDaemonTaskDefinitionArn() != td2 || revs.GetDaemonRevisions()[0].GetContainerImages()[0].GetImage() != "agent:2" {
		t.Fatalf("revision = %v", revs)
	}
	list := must(e, e.d.ListDaemonDeployments, &ecsv1.ListDaemonDeploymentsRequest{DaemonArn: created.DaemonArn})
	if len(list.GetDaemonDeployments()) != 2 || list.GetDaemonDeployments()[0].GetDaemonDeploymentArn() != upd.GetDeploymentArn() {
		t.Fatalf("ListDaemonDeployments = %v", list)
	}
	if ls := must(e, e.d.ListDaemons, &ecsv1.ListDaemonsRequest{ClusterArn: proto.String(e.cluster)}); len(ls.GetDaemonSummariesList()) != 1 {
		t.Fatalf("ListDaemons = %v", ls)
	}

	// DeleteDaemon: the tasks stop, then the daemon is gone.
	del := must(e, e.d.DeleteDaemon, &ecsv1.DeleteDaemonRequest{DaemonArn: created.DaemonArn})
	if del.GetStatus() != StatusDeleteInProgress {
		t.Fatalf("DeleteDaemon = %v", del)
	}
	_, err := call(e, e.d.UpdateDaemon, &ecsv1.UpdateDaemonRequest{DaemonArn: created.DaemonArn, DaemonTaskDefinitionArn: proto.String(td2), CapacityProviderArns: []string{"pool"}})
	wantErr(t, err, "DaemonNotActiveException")
	for range 4 {
		e.step()
	}
	if live = e.live("monitor"); len(live) != 0 {
		t.Fatalf("deleted daemon still runs %v", live)
	}
	_, err = call(e, e.d.DescribeDaemon, &ecsv1.DescribeDaemonRequest{DaemonArn: created.DaemonArn})
	wantErr(t, err, "DaemonNotFoundException")
}

// TestDaemonRollsBack: a deployment whose tasks fail to start trips the circuit breaker
// and rolls back to the last successful revision.
func TestDaemonRollsBack(t *testing.T) {
	e := newEnv(t)
	for i := range 2 {
		e.host("h"+string(rune('a'+i)), true)
	}
	td1 := e.daemonTD("agents", "good")
	created := must(e, e.d.CreateDaemon, &ecsv1.CreateDaemonRequest{
		DaemonName: proto.String("d"), ClusterArn: proto.String(e.cluster), DaemonTaskDefinitionArn: proto.String(td1), CapacityProviderArns: []string{"pool"},
	})
	for range 3 {
		e.step()
	}
	d0 := must(e, e.d.DescribeDaemonDeployments, &ecsv1.DescribeDaemonDeploymentsRequest{DaemonDeploymentArns: []string{created.GetDeploymentArn()}}).GetDaemonDeployments()[0]
	if d0.GetStatus() != DeploymentSuccessful {
		t.Fatalf("first deployment = %v", d0)
	}
	td2 := e.daemonTD("agents", "bad")
	e.crash = td2
	upd := must(e, e.d.UpdateDaemon, &ecsv1.UpdateDaemonRequest{DaemonArn: created.DaemonArn, DaemonTaskDefinitionArn: proto.String(td2), CapacityProviderArns: []string{"pool"}})
	e.r.cfg.BreakerMinThreshold = 3
	e.r.pol.BreakerMinThreshold = 3
	e.r.pol.BackoffAfter = 1000 // no launch backoff: the breaker decides
	var st string
	for range 30 {
		e.step()
		d := must(e, e.d.DescribeDaemonDeployments, &ecsv1.DescribeDaemonDeploymentsRequest{DaemonDeploymentArns: []string{upd.GetDeploymentArn()}}).GetDaemonDeployments()[0]
		if st = d.GetStatus(); st == DeploymentRollbackSuccessful {
			if d.GetRollback().GetRollbackTargetDaemonRevisionArn() == "" || d.GetCircuitBreaker().GetStatus() != "TRIGGERED" {
				t.Fatalf("rolled back deployment = %v", d)
			}
			break
		}
	}
	if st != DeploymentRollbackSuccessful {
		rec, _, _ := get[*storev1.DaemonRecord](context.Background(), sharedEtcd, keys.Daemon(e.sc, e.cluster, "d"))
		for _, d := range rec.GetService().GetService().GetDeployments() {
			t.Logf("svc deployment %s %s %s %s", d.GetId(), d.GetStatus(), d.GetRolloutState(), d.GetTaskDefinition())
		}
		t.Fatalf("deployment status %s, want %s", st, DeploymentRollbackSuccessful)
	}
	for h, td := range e.live("d") {
		if td != td1 {
			t.Fatalf("host %s runs %s after the rollback, want %s", h, td, td1)
		}
	}
}

func TestDaemonErrors(t *testing.T) {
	e := newEnv(t)
	td := e.daemonTD("agents", "img")
	create := func(m *ecsv1.CreateDaemonRequest) *awserr.Error {
		if m.DaemonName == nil {
			m.DaemonName = proto.String("d")
		}
		if m.DaemonTaskDefinitionArn == nil {
			m.DaemonTaskDefinitionArn = proto.String(td)
		}
		if m.CapacityProviderArns == nil {
			m.CapacityProviderArns = []string{"pool"}
		}
		if m.ClusterArn == nil {
			m.ClusterArn = proto.String(e.cluster)
		}
		_, err := call(e, e.d.CreateDaemon, m)
		return err
	}
	wantErr(t, create(&ecsv1.CreateDaemonRequest{ClusterArn: proto.String("nope")}), "ClusterNotFoundException")
	wantErr(t, create(&ecsv1.CreateDaemonRequest{DaemonName: proto.String("bad name")}), "InvalidParameterException")
	wantErr(t, create(&ecsv1.CreateDaemonRequest{DaemonTaskDefinitionArn: proto.String("missing:1")}), "ClientException")
	wantErr(t, create(&ecsv1.CreateDaemonRequest{CapacityProviderArns: []string{"FARGATE"}}), "InvalidParameterException")
	wantErr(t, create(&ecsv1.CreateDaemonRequest{CapacityProviderArns: []string{"unknown"}}), "InvalidParameterException")
	wantErr(t, create(&ecsv1.CreateDaemonRequest{CapacityProviderArns: []string{}}), "InvalidParameterException")
	wantErr(t, create(&ecsv1.CreateDaemonRequest{DeploymentConfiguration: &ecsv1.DaemonDeploymentConfiguration{DrainPercent: proto.Float64(101)}}), "InvalidParameterException")
	wantErr(t, create(&ecsv1.CreateDaemonRequest{DeploymentConfiguration: &ecsv1.DaemonDeploymentConfiguration{Alarms: &ecsv1.DaemonAlarmConfiguration{Enable: true, AlarmNames: []string{"a"}}}}), "InvalidParameterException")
	wantErr(t, create(&ecsv1.CreateDaemonRequest{EnableExecuteCommand: true}), "InvalidParameterException")
	wantErr(t, create(&ecsv1.CreateDaemonRequest{PropagateTags: proto.String("SERVICE")}), "InvalidParameterException")
	if err := create(&ecsv1.CreateDaemonRequest{ClientToken: proto.String("tok")}); err != nil {
		t.Fatal(err)
	}
	if err := create(&ecsv1.CreateDaemonRequest{ClientToken: proto.String("tok")}); err != nil {
		t.Fatalf("repeated CreateDaemon with its clientToken: %v", err)
	}
	wantErr(t, create(&ecsv1.CreateDaemonRequest{}), "InvalidParameterException")
	arn := "arn:aws:ecs:us-east-1:" + e.sc.Account + ":daemon/c1/"
	_, err := call(e, e.d.DescribeDaemon, &ecsv1.DescribeDaemonRequest{DaemonArn: proto.String(arn + "other")})
	wantErr(t, err, "DaemonNotFoundException")
	_, err = call(e, e.d.DescribeDaemon, &ecsv1.DescribeDaemonRequest{DaemonArn: proto.String("arn:aws:ecs:us-east-1:" + e.sc.Account + ":daemon/nocluster/d")})
	wantErr(t, err, "ClusterNotFoundException")
	_, err = call(e, e.d.DescribeDaemon, &ecsv1.DescribeDaemonRequest{DaemonArn: proto.String("d")})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.d.DeleteDaemon, &ecsv1.DeleteDaemonRequest{DaemonArn: proto.String(arn + "other")})
	wantErr(t, err, "DaemonNotFoundException")
	_, err = call(e, e.d.DescribeDaemonTaskDefinition, &ecsv1.DescribeDaemonTaskDefinitionRequest{DaemonTaskDefinition: proto.String("missing")})
	wantErr(t, err, "ClientException")
	_, err = call(e, e.d.DescribeDaemonDeployments, &ecsv1.DescribeDaemonDeploymentsRequest{})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.d.DeleteDaemonTaskDefinition, &ecsv1.DeleteDaemonTaskDefinitionRequest{DaemonTaskDefinition: proto.String("agents")})
	wantErr(t, err, "ClientException")

	// Task definitions: revisions, latest ACTIVE, listing, deletion while in use.
	td2 := e.daemonTD("agents", "img2")
	if got := must(e, e.d.DescribeDaemonTaskDefinition, &ecsv1.DescribeDaemonTaskDefinitionRequest{DaemonTaskDefinition: proto.String("agents")}).GetDaemonTaskDefinition(); got.GetDaemonTaskDefinitionArn() != td2 || got.GetRevision() != 2 {
		t.Fatalf("latest = %v", got)
	}
	if got := must(e, e.d.DeleteDaemonTaskDefinition, &ecsv1.DeleteDaemonTaskDefinitionRequest{DaemonTaskDefinition: proto.String(td)}); got.GetDaemonTaskDefinitionArn() != td {
		t.Fatalf("delete = %v", got)
	}
	if got := must(e, e.d.DescribeDaemonTaskDefinition, &ecsv1.DescribeDaemonTaskDefinitionRequest{DaemonTaskDefinition: proto.String(td)}).GetDaemonTaskDefinition(); got.GetStatus() != StatusDeleteInProgress || got.DeleteRequestedAt == nil {
		t.Fatalf("deleted revision in use = %v", got)
	}
	must(e, e.d.DeleteDaemonTaskDefinition, &ecsv1.DeleteDaemonTaskDefinitionRequest{DaemonTaskDefinition: proto.String("agents:2")})
	if got := must(e, e.d.DescribeDaemonTaskDefinition, &ecsv1.DescribeDaemonTaskDefinitionRequest{DaemonTaskDefinition: proto.String(td2)}).GetDaemonTaskDefinition(); got.GetStatus() != StatusDeleted {
		t.Fatalf("deleted revision not in use = %v", got)
	}
	_, err = call(e, e.d.UpdateDaemon, &ecsv1.UpdateDaemonRequest{DaemonArn: proto.String(arn + "d"), DaemonTaskDefinitionArn: proto.String(td2), CapacityProviderArns: []string{"pool"}})
	wantErr(t, err, "InvalidParameterException")
	all := must(e, e.d.ListDaemonTaskDefinitions, &ecsv1.ListDaemonTaskDefinitionsRequest{Status: proto.String("ALL"), Sort: proto.String("DESC")})
	if n := len(all.GetDaemonTaskDefinitions()); n != 2 || all.GetDaemonTaskDefinitions()[0].GetArn() != td2 {
		t.Fatalf("ListDaemonTaskDefinitions ALL DESC = %v", all)
	}
	if act := must(e, e.d.ListDaemonTaskDefinitions, &ecsv1.ListDaemonTaskDefinitionsRequest{}); len(act.GetDaemonTaskDefinitions()) != 0 {
		t.Fatalf("ListDaemonTaskDefinitions ACTIVE = %v", act)
	}
}
