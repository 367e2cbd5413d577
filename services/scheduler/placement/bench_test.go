package placement

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/etcdembed"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/store"
	"google.golang.org/protobuf/proto"
)

// BenchmarkPlace measures placements per second on embedded etcd with 1,000 instances:
// each op is one Place of one task, committing the instance reservation, a task record,
// an index key and an inbox entry; the 64 concurrent calls share txns through the
// Placer's group commit (groupcommit.go). Run with -cpu and the parallelism below.
//
//	go test -run x -bench Place -benchtime 20000x ./placement
func BenchmarkPlace(b *testing.B) {
	for _, strat := range []string{"random", "spread", "binpack"} {
		b.Run(strat, func(b *testing.B) {
			cli := etcdembed.StartForTest(b)
			const n = 1000
			for i := range n {
				putInstance(b, cli, "bench", fmt.Sprintf("i%04d", i), 1<<20, 1<<20, map[string]string{"zone": "z" + strconv.Itoa(i%3)})
			}
			p := NewPlacer(cli, nil)
			defer p.Close()
			var strategy []Strategy
			switch strat {
			case "random":
				strategy = []Strategy{{Type: "random"}}
			case "spread":
				strategy = []Strategy{{Type: "spread", Field: "attribute:zone"}, {Type: "spread", Field: "instanceId"}}
			case "binpack":
				strategy = []Strategy{{Type: "binpack", Field: "memory"}}
			}
			d := Demand{CPU: 1, Memory: 1}
			var seq atomic.Int64
			var conflicts atomic.Int64
			commit := func(_ context.Context, txn *store.Txn, placed []Placed) error {
				for _, pl := range placed {
					id := "t" + strconv.FormatInt(seq.Add(1), 10) + "-" + strconv.Itoa(rand.IntN(1<<30))
					task := &ecsv1.Task{TaskArn: proto.String("arn:aws:ecs:us-east-1:000000000000:task/bench/" + id), LastStatus: proto.String("PENDING")}
					txn.Create(keys.Task(testScope, "bench", id), &storev1.TaskRecord{Task: task, ClusterName: "bench", ContainerInstanceId: pl.InstanceID, ReservedCpu: 1, ReservedMemory: 1})
					txn.PutIndex(keys.TaskList(testScope, "bench", "RUNNING", keys.DimInstance, pl.InstanceID, id))
					txn.Put(keys.Inbox(testScope, pl.InstanceID, id), &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{DeliveryId: id, Task: task}}})
				}
				return nil
			}
			ctx := context.Background()
			// Warm the cache.
			if _, err := p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "bench", Request: Request{Demand: d}}); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(32)
			c0 := cpuTime()
			b.ResetTimer()
			var once sync.Once
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := p.Place(ctx, PlaceRequest{Account: testScope, Cluster: "bench",
						Request: Request{Demand: d, Strategy: strategy}, Commit: commit})
					if err != nil || len(res.Placed) != 1 {
						once.Do(func() { b.Errorf("place: %v %+v", err, res.Failures) })
					}
				}
			})
			b.StopTimer()
			cpu := cpuTime() - c0
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "placements/s")
			// CPU per placement (this process: placer, etcd client and the embedded etcd
			// server) does not depend on what else runs on the machine; 2 cores divided by
			// it is the rate an idle 2-core machine would reach.
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/placement")
			_ = conflicts.Load()
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEngine is the pure engine's cost per placement over 1,000 instances.
func BenchmarkEngine(b *testing.B) {
	var cluster []*Instance
	for i := range 1000 {
		cluster = append(cluster, inst(fmt.Sprintf("i%04d", i), 1<<20, 1<<20, attr("zone", "z"+strconv.Itoa(i%3))))
	}
	eng := NewEngine(rand.New(rand.NewPCG(1, 2)))
	req := Request{Demand: Demand{CPU: 1, Memory: 1}, Strategy: []Strategy{{Type: "spread", Field: "attribute:zone"}, {Type: "binpack", Field: "memory"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := eng.Place(cluster, req); err != nil {
			b.Fatal(err)
		}
	}
}

// testRegion is the region the tests call in.
const testRegion = "us-east-1"
