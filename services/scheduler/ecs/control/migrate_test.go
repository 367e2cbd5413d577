package control

import (
	"context"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// TestMigrateLayoutFromBuildsWithoutRegions writes state with this build, rewrites its
// keys into layout 1 (no region part, as builds before regions wrote them), and checks
// that keys.MigrateLayout brings all of it back: clusters with their counters, the
// revision counter, instances, tasks and their indexes, inbox entries and settings.
func TestMigrateLayoutFromBuildsWithoutRegions(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	e := (&env{t: t, s: New(Config{KV: cli})}).scoped(newAccount(), "us-east-1")
	e.createCluster("old")
	e.simpleTaskDef("app", 128, 128)
	ci := e.registerHost("old", "h1", 1024, 1024)
	run := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("old"), TaskDefinition: proto.String("app")})
	if len(run.GetTasks()) != 1 {
		t.Fatalf("RunTask: %v", run.GetFailures())
	}
	must(e, e.s.PutAccountSetting, &ecsv1.PutAccountSettingRequest{Name: proto.String("tagResourceAuthorization"), Value: proto.String("off")})

	// Layout 1: drop "/us-east-1" after the account (the inbox had no account either).
	resp, err := cli.Get(ctx, store.Prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		old := strings.Replace(k, "/"+e.acc+"/us-east-1/", "/"+e.acc+"/", 1)
		if strings.HasPrefix(k, store.Prefix+"inbox/") {
			old = strings.Replace(k, "/"+e.acc+"/us-east-1/", "/", 1)
		}
		if k == old {
			continue
		}
		if _, err := cli.Txn(ctx).Then(clientv3.OpPut(old, string(kv.Value)), clientv3.OpDelete(k)).Commit(); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d keys rewritten", n)
	}
	if l := must(e, e.s.ListClusters, &ecsv1.ListClustersRequest{}); len(l.GetClusterArns()) != 0 {
		t.Fatalf("layout-1 data visible before migration: %v", l.GetClusterArns())
	}

	moved, err := keys.MigrateLayout(ctx, cli, "us-east-1")
	if err != nil || moved != n {
		t.Fatalf("MigrateLayout moved %d of %d: %v", moved, n, err)
	}
	if c := e.describeCluster("old"); c.GetPendingTasksCount()+c.GetRunningTasksCount() != 1 || c.GetRegisteredContainerInstancesCount() != 1 {
		t.Errorf("cluster after migration: %v", c)
	}
	if td := e.simpleTaskDef("app", 128, 128); td.GetRevision() != 2 {
		t.Errorf("next revision %d, want 2", td.GetRevision())
	}
	if l := must(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String("old"), ContainerInstance: proto.String(ci.GetContainerInstanceArn())}); len(l.GetTaskArns()) != 1 {
		t.Errorf("tasks of the instance after migration: %v", l.GetTaskArns())
	}
	taskARN := run.GetTasks()[0].GetTaskArn()
	entry, _, err := get[*storev1.InboxEntry](ctx, cli, keys.Inbox(e.sc, instanceID(ci.GetContainerInstanceArn()), taskARN[strings.LastIndexByte(taskARN, '/')+1:]))
	if err != nil || entry.GetAssignment() == nil {
		t.Errorf("the task's assignment was not migrated: %v %v", entry, err)
	}
	if s := must(e, e.s.ListAccountSettings, &ecsv1.ListAccountSettingsRequest{Name: proto.String("tagResourceAuthorization")}); len(s.GetSettings()) != 1 || s.GetSettings()[0].GetValue() != "off" {
		t.Errorf("settings after migration: %v", s.GetSettings())
	}
	// Idempotent: a second run (another replica) moves nothing.
	if moved, err := keys.MigrateLayout(ctx, cli, "us-east-1"); err != nil || moved != 0 {
		t.Errorf("second MigrateLayout: %d %v", moved, err)
	}
}

// TestMigrateCountsFromLayout2 rewrites state of this build into layout 2's counts (each
// instance record storing pendingTasksCount and runningTasksCount, no idx/instance-running
// keys) and checks that keys.MigrateLayout leaves it and task.MigrateCounts brings it
// back: the instance's and the cluster's counts, and a task starting afterwards still
// leaves the instance record alone.
func TestMigrateCountsFromLayout2(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	e, ci, tasks := layout2(t, cli)
	instKey := keys.Instance(e.sc, "two", instanceID(ci.GetContainerInstanceArn()))
	if c := e.describeCluster("two"); c.GetPendingTasksCount() != 0 || c.GetRunningTasksCount() != 0 {
		t.Fatalf("layout-2 counts read as (%d, %d) before migration, want (0, 0): the test did not rewrite them", c.GetPendingTasksCount(), c.GetRunningTasksCount())
	}

	if moved, err := keys.MigrateLayout(ctx, cli, "us-east-1"); err != nil || moved != 0 {
		t.Fatalf("MigrateLayout at layout 2 moved %d: %v", moved, err)
	}
	if n, err := task.MigrateCounts(ctx, cli); err != nil || n != 2 {
		t.Fatalf("MigrateCounts wrote %d, want 2 (the instance record and one running key): %v", n, err)
	}
	counts := func(pending, running int32) {
		t.Helper()
		if c := e.describeCluster("two"); c.GetPendingTasksCount() != pending || c.GetRunningTasksCount() != running {
			t.Errorf("cluster counts (%d, %d), want (%d, %d)", c.GetPendingTasksCount(), c.GetRunningTasksCount(), pending, running)
		}
		if c := e.describeInstance("two", ci.GetContainerInstanceArn()); c.GetPendingTasksCount() != pending || c.GetRunningTasksCount() != running {
			t.Errorf("instance counts (%d, %d), want (%d, %d)", c.GetPendingTasksCount(), c.GetRunningTasksCount(), pending, running)
		}
	}
	counts(2, 1)
	_, before, err := store.Get[*storev1.ContainerInstanceRecord](ctx, cli, instKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.ApplyTaskStateChange(ctx, e.sc, ci.GetContainerInstanceArn(), &agentv1.TaskStateChange{TaskArn: tasks[1].GetTaskArn(), LastStatus: "RUNNING"}); err != nil {
		t.Fatal(err)
	}
	if _, after, err := store.Get[*storev1.ContainerInstanceRecord](ctx, cli, instKey); err != nil || after != before {
		t.Errorf("instance record moved from %d to %d (%v) when a task started after migration", before, after, err)
	}
	counts(1, 2)
	if n, err := task.MigrateCounts(ctx, cli); err != nil || n != 0 {
		t.Errorf("second MigrateCounts wrote %d: %v", n, err)
	}
}
