package control_test

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
)

// BenchmarkRunTaskPlacement is issue 13's production path: RunTask (count 10) into
// control's placement and group commit, 64 concurrent callers, 1,000 instances, embedded
// etcd. It reports placements (tasks placed) per second and CPU per placement; set
// BERTH_PROFILE=file for a CPU profile of the timed part.
//
//	go test -run x -bench RunTaskPlacement -benchtime 500x ./control
func BenchmarkRunTaskPlacement(b *testing.B) {
	srv, _, ctx := placingServerOps(b, false, etcdembed.DevMaxTxnOps, etcdembed.DevMaxTxnOps) // as `berth dev`
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range 1000 {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			resp, err := srv.RegisterInstance(ctx, testScope, &agentv1.RegisterRequest{
				Cluster: "c", HostId: fmt.Sprintf("h%04d", i), RuntimeReady: true, Resources: control.Resources(1<<20, 1<<20, nil, nil),
			})
			if err == nil {
				err = srv.SetAgentConnected(ctx, testScope, resp.GetContainerInstance().GetContainerInstanceArn(), true)
			}
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := srv.RegisterTaskDefinition(ctx, connect.NewRequest(&ecsv1.RegisterTaskDefinitionRequest{
		Family:               proto.String("web"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("busybox"), Cpu: 1, Memory: proto.Int32(8)}},
	})); err != nil {
		b.Fatal(err)
	}
	c0 := cpuTime()
	if f := os.Getenv("BERTH_PROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		_ = pprof.StartCPUProfile(out)
		defer pprof.StopCPUProfile()
	}
	b.SetParallelism(32) // × GOMAXPROCS 2 = 64 callers
	b.ResetTimer()
	var once sync.Once
	var mu sync.Mutex
	placed := 0
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := srv.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String("web"), Count: proto.Int32(10)}))
			if err != nil || len(r.Msg.GetTasks()) != 10 {
				once.Do(func() { b.Errorf("RunTask: %v", err) })
				continue
			}
			mu.Lock()
			placed += 10
			mu.Unlock()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
	b.ReportMetric(float64((cpuTime()-c0).Microseconds())/float64(max(placed, 1)), "cpu-µs/placement")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
