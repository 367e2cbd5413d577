package control

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// TestDescribeTasksCacheReadsEveryWrite: a replica whose DescribeTasks answers from its
// task cache sees each write another replica made just before (tags, a stop, a record
// deleted as the garbage collector does) on the very next call, answered by the cache
// and not by the fallback read; TAGS and untagged answers stay apart.
func TestDescribeTasksCacheReadsEveryWrite(t *testing.T) {
	w := newEnvWith(t, Config{}) // the other replica: no cache
	r := newEnvWith(t, Config{Watcher: sharedEtcd}).as(w.acc)
	w.createCluster("c")
	td := w.simpleTaskDef("web", 10, 16)
	w.registerHost("c", "h1", 4096, 8192)
	run := must(w, w.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: td.TaskDefinitionArn, Count: proto.Int32(2),
		Tags: []*ecsv1.Tag{{Key: proto.String("k"), Value: proto.String("v")}}})
	if len(run.GetTasks()) != 2 {
		t.Fatalf("RunTask: %v", run.GetFailures())
	}
	a, b := run.GetTasks()[0].GetTaskArn(), run.GetTasks()[1].GetTaskArn()
	describe := func(include ...string) *ecsv1.DescribeTasksResponse {
		t.Helper()
		return must(r, r.s.DescribeTasks, &ecsv1.DescribeTasksRequest{Cluster: proto.String("c"), Tasks: []string{a, b}, Include: include})
	}
	// The first call starts the cache (and may read etcd while it loads).
	deadline := time.Now().Add(10 * time.Second)
	for r.s.taskCache.served.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the cache never answered")
		}
		describe()
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 20 {
		served := r.s.taskCache.served.Load()
		v := strconv.Itoa(i)
		must(w, w.s.TagResource, &ecsv1.TagResourceRequest{ResourceArn: proto.String(a), Tags: []*ecsv1.Tag{{Key: proto.String("n"), Value: proto.String(v)}}})
		d := describe("TAGS")
		if got := tagValue(d.GetTasks()[0], "n"); got != v {
			t.Fatalf("write %d: tag n = %q after TagResource on the other replica", i, got)
		}
		if len(d.GetTasks()[1].GetTags()) != 1 {
			t.Fatalf("write %d: untouched task's tags %v", i, d.GetTasks()[1].GetTags())
		}
		if u := describe(); u.GetTasks()[0].Tags != nil || u.GetTasks()[1].Tags != nil {
			t.Fatalf("write %d: tags without include TAGS", i)
		}
		if r.s.taskCache.served.Load() != served+2 {
			t.Fatalf("write %d: the cache answered %d of 2 calls", i, r.s.taskCache.served.Load()-served)
		}
	}
	must(w, w.s.StopTask, &ecsv1.StopTaskRequest{Cluster: proto.String("c"), Task: proto.String(b), Reason: proto.String("bye")})
	d := describe()
	if got := d.GetTasks()[1]; got.GetDesiredStatus() != "STOPPED" || got.GetStoppedReason() != "bye" {
		t.Fatalf("after StopTask: desired %s, reason %q", got.GetDesiredStatus(), got.GetStoppedReason())
	}
	// A record deleted (the garbage collector's delete of a long-stopped task).
	if _, err := sharedEtcd.Delete(w.ctx, keys.Task(w.sc, "c", b[len(b)-32:])); err != nil {
		t.Fatal(err)
	}
	d = describe()
	if len(d.GetTasks()) != 1 || d.GetTasks()[0].GetTaskArn() != a || len(d.GetFailures()) != 1 || d.GetFailures()[0].GetArn() != b || d.GetFailures()[0].GetReason() != "MISSING" {
		t.Fatalf("after the delete: tasks %v, failures %v", d.GetTasks(), d.GetFailures())
	}
	// The same again, from the cache.
	served := r.s.taskCache.served.Load()
	if d := describe(); r.s.taskCache.served.Load() != served+1 || len(d.GetTasks()) != 1 {
		t.Fatalf("cache did not answer: %v", d)
	}
}

// TestDescribeTasksCacheClosed: after Close, DescribeTasks reads etcd and answers the same.
func TestDescribeTasksCacheClosed(t *testing.T) {
	e := newEnvWith(t, Config{Watcher: sharedEtcd})
	e.createCluster("c")
	td := e.simpleTaskDef("web", 10, 16)
	e.registerHost("c", "h1", 4096, 8192)
	run := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: td.TaskDefinitionArn})
	arn := run.GetTasks()[0].GetTaskArn()
	e.describeTask("c", arn)
	e.s.Close()
	served := e.s.taskCache.served.Load()
	must(e, e.s.StopTask, &ecsv1.StopTaskRequest{Cluster: proto.String("c"), Task: proto.String(arn)})
	if got := e.describeTask("c", arn); got.GetDesiredStatus() != "STOPPED" {
		t.Fatalf("desired %s after StopTask", got.GetDesiredStatus())
	}
	if e.s.taskCache.served.Load() != served {
		t.Fatal("a closed cache answered")
	}
	_, err := call(e, e.s.DescribeTasks, &ecsv1.DescribeTasksRequest{Cluster: proto.String("nope"), Tasks: []string{arn}})
	wantErr(t, err, "ClusterNotFoundException")
}

func tagValue(t *ecsv1.Task, key string) string {
	for _, tag := range t.GetTags() {
		if tag.GetKey() == key {
			return tag.GetValue()
		}
	}
	return ""
}
