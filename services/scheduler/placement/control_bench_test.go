package placement

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"testing"

	"connectrpc.com/connect"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/caller"
	"github.com/berthhq/berth/services/scheduler/control"
	"github.com/berthhq/berth/services/scheduler/etcdembed"
	"google.golang.org/protobuf/proto"
)

// BenchmarkControlPlace is RunTask's placement path: ControlPlacer with control.PlaceTxn
// writing tasks, reservations, inbox entries and the cluster's counters (one cluster
// record, so commits of a cluster take turns), on 1,000 instances.
//
//	go test -run x -bench ControlPlace -benchtime 5000x ./placement
func BenchmarkControlPlace(b *testing.B) {
	for _, batch := range []bool{false, true} {
		b.Run(map[bool]string{false: "single", true: "batched"}[batch], func(b *testing.B) { benchControlPlace(b, batch) })
	}
}

func benchControlPlace(b *testing.B, batch bool) {
	cli := etcdembed.StartForTest(b)
	p := NewPlacer(cli, nil)
	defer p.Close()
	srv := control.New(control.Config{KV: cli, Placer: &ControlPlacer{Placer: p}})
	ctx := caller.With(context.Background(), caller.Identity{Account: testAccount, Region: testRegion})
	if _, err := srv.CreateCluster(ctx, connect.NewRequest(&ecsv1.CreateClusterRequest{ClusterName: proto.String("c")})); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range 1000 {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := srv.RegisterInstance(ctx, testScope, &agentv1.RegisterRequest{
				Cluster: "c", HostId: fmt.Sprintf("h%04d", i), RuntimeReady: true, Resources: control.Resources(1<<20, 1<<20, nil, nil),
			}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	td := &ecsv1.TaskDefinition{Family: proto.String("web"), TaskDefinitionArn: proto.String("arn:aws:ecs:us-east-1:" + testAccount + ":task-definition/web:1"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Cpu: 1, Memory: proto.Int32(1)}}}
	cp := &ControlPlacer{Placer: p, Batch: batch}
	var seq sync.Mutex
	n := 0
	newTask := func() *storev1.TaskRecord {
		seq.Lock()
		n++
		id := fmt.Sprintf("%032d", n)
		seq.Unlock()
		return &storev1.TaskRecord{ClusterName: "c", ReservedCpu: 1, ReservedMemory: 1, Task: &ecsv1.Task{
			TaskArn: proto.String("arn:aws:ecs:us-east-1:" + testAccount + ":task/c/" + id), TaskDefinitionArn: td.TaskDefinitionArn,
			LastStatus: proto.String("PENDING"), DesiredStatus: proto.String("RUNNING"),
		}}
	}
	c0 := cpuTime()
	if f := os.Getenv("BERTH_PROFILE"); f != "" {
		out, _ := os.Create(f)
		_ = pprof.StartCPUProfile(out)
		defer pprof.StopCPUProfile()
	}
	b.SetParallelism(32)
	b.ResetTimer()
	var once sync.Once
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := cp.Place(context.Background(), control.PlaceRequest{Account: testScope, Cluster: "c", Tasks: []*storev1.TaskRecord{newTask()}, TaskDefinition: td})
			if err != nil || len(res.Placed) != 1 {
				once.Do(func() { b.Errorf("place: %v %v", err, res.Failures) })
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "placements/s")
	b.ReportMetric(float64((cpuTime()-c0).Microseconds())/float64(b.N), "cpu-µs/placement")
}
