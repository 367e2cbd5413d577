package control

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// seedTasks writes n RUNNING tasks of family "bench" into cluster c of e's account, in
// batched transactions (20 tasks each, below etcd's 128 operations per txn), and
// returns their ARNs.
func seedTasks(b *testing.B, e *env, n int) []string {
	b.Helper()
	e.createCluster("c")
	td := e.simpleTaskDef("bench", 1, 6)
	ci := e.registerHost("c", "h", 1<<30, 1<<30)
	var arns []string
	for lo := 0; lo < n; lo += 20 {
		txn := store.NewTxn(sharedEtcd)
		for i := lo; i < min(lo+20, n); i++ {
			id := NewID()
			a := "arn:aws:ecs:us-east-1:" + e.acc + ":task/c/" + id
			rec := &storev1.TaskRecord{ClusterName: "c", ContainerInstanceId: instanceID(ci.GetContainerInstanceArn()), Task: &ecsv1.Task{
				TaskArn: proto.String(a), ClusterArn: proto.String("arn:aws:ecs:us-east-1:" + e.acc + ":cluster/c"),
				TaskDefinitionArn: td.TaskDefinitionArn, LastStatus: proto.String("RUNNING"), DesiredStatus: proto.String("RUNNING"),
				Containers: []*ecsv1.Container{{Name: proto.String("app"), Image: proto.String("busybox"), LastStatus: proto.String("RUNNING")}},
				LaunchType: proto.String("EC2"), Version: 2,
			}}
			task.WriteTxn(txn, e.sc, nil, 0, rec)
			arns = append(arns, a)
		}
		if _, err := txn.Commit(e.ctx); err != nil {
			b.Fatal(err)
		}
	}
	return arns
}

// BenchmarkDescribeTasks100 describes 100 tasks of a cluster of n, reading the records
// from etcd (cache=off) and from the watch-fed task cache (cache=on, after a
// linearizable read of the cluster key).
func BenchmarkDescribeTasks100(b *testing.B) {
	for _, n := range benchSizes {
		for _, cached := range []bool{false, true} {
			name := fmt.Sprintf("tasks=%d/cache=off", n)
			cfg := Config{}
			if cached {
				name = fmt.Sprintf("tasks=%d/cache=on", n)
				cfg.Watcher = sharedEtcd
			}
			b.Run(name, func(b *testing.B) { benchDescribeTasks100(b, newEnvWith(b, cfg), n) })
		}
	}
}

func benchDescribeTasks100(b *testing.B, e *env, n int) {
	arns := seedTasks(b, e, n)
	refs := make([]string, 100)
	for i := range refs {
		refs[i] = arns[(i*97)%len(arns)]
	}
	req := &ecsv1.DescribeTasksRequest{Cluster: proto.String("c"), Tasks: refs}
	describe := func() {
		resp, err := e.s.DescribeTasks(e.ctx, connect.NewRequest(req))
		if err != nil || len(resp.Msg.GetTasks()) != 100 {
			b.Fatalf("describe: %v", err)
		}
	}
	describe() // starts and fills the cache when there is one
	b.ReportAllocs()
	c0 := cpuTime()
	for b.Loop() {
		describe()
	}
	// The process's CPU: handler, etcd client and the embedded etcd server.
	b.ReportMetric(float64((cpuTime()-c0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkListTasksPage(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			e := newEnv(b)
			seedTasks(b, e, n)
			// A page in the middle of the cluster when there is one.
			first, err := e.s.ListTasks(e.ctx, connect.NewRequest(&ecsv1.ListTasksRequest{Cluster: proto.String("c"), MaxResults: proto.Int32(int32(min(n/2, 100)))}))
			if err != nil {
				b.Fatal(err)
			}
			req := &ecsv1.ListTasksRequest{Cluster: proto.String("c"), MaxResults: proto.Int32(5), NextToken: first.Msg.NextToken}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				resp, err := e.s.ListTasks(e.ctx, connect.NewRequest(req))
				if err != nil || len(resp.Msg.GetTaskArns()) != 5 {
					b.Fatalf("list: %v %d", err, len(resp.Msg.GetTaskArns()))
				}
			}
		})
	}
}

// BenchmarkIndexPage compares one page of 5 keys of a task index read with a plain
// limited etcd range (which visits every later key to count it) and with the windowed
// read ListTasks uses.
func BenchmarkIndexPage(b *testing.B) {
	for _, n := range benchSizes {
		e := newEnv(b)
		seedTasks(b, e, n)
		prefix := keys.TaskList(e.sc, "c", "RUNNING", keys.DimAll, "-", "")
		b.Run(fmt.Sprintf("plain/tasks=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := pageKeys(e.ctx, sharedEtcd, prefix, 5, "", false); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("windowed/tasks=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := pageIDKeys(e.ctx, sharedEtcd, prefix, 5, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchSizes are the cluster sizes the benchmarks compare.
var benchSizes = []int{10, 10000}
