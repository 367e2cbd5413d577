package placement

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	"google.golang.org/protobuf/proto"
)

// BenchmarkPlace measures placements per second on embedded etcd with 1,000 instances,
// in the shape of production's RunTask path (control's placement queue): groups of
// ceilingBatch one-task requests placed with PlaceGroup, benchGroupsInFlight groups at
// once (as the queue keeps them), each committing the instance reservations, a task
// record, an index key and an inbox entry per task. Compare it with
// BenchmarkEtcdTxnCeiling (the same writes, 8 txns in flight, nothing chosen) and
// BenchmarkEtcdTxnCeilingSerial (one in flight).
//
//	go test -run x -bench 'Place$|EtcdTxnCeiling' -benchtime 20000x ./placement
func BenchmarkPlace(b *testing.B) { benchPlace(b, benchGroupsInFlight) }

// BenchmarkPlaceEightInFlight is BenchmarkPlace with as many groups at once as
// BenchmarkEtcdTxnCeiling keeps txns in flight (4 × GOMAXPROCS: 8 on the 2-core machine
// the name is from), so that the two differ only in what placing adds to the same
// writes (choosing, the cache and its watch, the chaining of commits). Its ratio to the
// ceiling is the Placer's own cost; BenchmarkPlace's ratio adds the cost of keeping only
// 2 commits in flight.
func BenchmarkPlaceEightInFlight(b *testing.B) {
	benchPlace(b, ceilingParallelism*runtime.GOMAXPROCS(0))
}

// benchPlace runs BenchmarkPlace with inFlight groups placing at once.
func benchPlace(b *testing.B, inFlight int) {
	for _, strat := range []string{"random", "spread", "binpack"} {
		b.Run(strat, func(b *testing.B) {
			cli := etcdtest.Start(b)
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
			commit := func(_ context.Context, txn *store.Txn, placed [][]Placed) error {
				var all []Placed
				for _, pl := range placed {
					for _, p := range pl {
						// The ids, keys and records are those BenchmarkEtcdTxnCeiling writes (each run
						// has an etcd of its own, so a counter is unique).
						id := "t" + strconv.FormatInt(seq.Add(1), 10)
						task := &ecsv1.Task{TaskArn: proto.String("arn:aws:ecs:us-east-1:000000000000:task/bench/" + id), LastStatus: proto.String("PENDING")}
						txn.Create(keys.Task(testScope, "bench", id), &storev1.TaskRecord{Task: task, ClusterName: "bench", ContainerInstanceId: p.InstanceID, ReservedCpu: 1, ReservedMemory: 1})
						txn.PutIndex(keys.TaskList(testScope, "bench", "RUNNING", keys.DimInstance, p.InstanceID, id))
						txn.Put(keys.Inbox(testScope, p.InstanceID, id), &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{DeliveryId: id, Task: task}}})
					}
					all = append(all, pl...)
				}
				return writeInstances(txn, "bench", d, all)
			}
			group := func(size int) {
				reqs := make([]Request, size)
				for i := range reqs {
					reqs[i] = Request{Demand: d, Strategy: strategy}
				}
				res, err := p.PlaceGroup(context.Background(), nil, testScope, "bench", reqs, commit)
				if err != nil {
					b.Error(err) // not Fatal: it runs on the group goroutines
					return
				}
				for _, r := range res {
					if len(r.Placed) != 1 {
						b.Errorf("placed %d: %+v", len(r.Placed), r.Failures)
						return
					}
				}
			}
			group(1) // warm the cache
			c0 := cpuTime()
			b.ResetTimer()
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			for range inFlight {
				wg.Go(func() {
					for {
						n := min(left.Add(-ceilingBatch)+ceilingBatch, ceilingBatch)
						if n <= 0 {
							return
						}
						group(int(n))
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			cpu := cpuTime() - c0
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "placements/s")
			// CPU per placement (this process: placer, etcd client and the embedded etcd
			// server) does not depend on what else runs on the machine.
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/placement")
		})
	}
}

// benchGroupsInFlight is how many groups BenchmarkPlace places at once: control's
// RunTask queue keeps up to 2 group commits of a queue in flight.
const benchGroupsInFlight = 2

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
