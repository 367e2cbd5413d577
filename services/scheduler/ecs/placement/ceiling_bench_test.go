package placement

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	"google.golang.org/protobuf/proto"
)

// BenchmarkEtcdTxnCeiling is etcd's own ceiling for the writes a placement makes, with no
// placement logic at all: each op is one txn of ceilingBatch placements' writes (CAS and
// put of an instance record, task record, index key, inbox entry per task — the shape of
// a group commit), 8 txns in flight on disjoint instances so none conflicts, on the
// same embedded etcd, cluster and 1,000 instance records as BenchmarkPlace, with the same
// task ids (so the same bytes are written, but the reservation). Its placements/s is the
// rate placement could reach if choosing cost nothing and no commit had to wait for
// another (BenchmarkPlace's groups over random instances mostly share one with a group in
// flight, and wait for it to land).
//
//	go test -run x -bench 'Place/random$|EtcdTxnCeiling' -benchtime 10000x ./placement
//
// ceilingBatch is the placements per txn of BenchmarkEtcdTxnCeiling: 24, the size of the
// group commit the ceiling was first measured against (under etcd's 128 operations).
const ceilingBatch = 24

func BenchmarkEtcdTxnCeiling(b *testing.B) { benchCeiling(b, ceilingParallelism) }

// ceilingParallelism is BenchmarkEtcdTxnCeiling's b.SetParallelism: its txns in flight
// are ceilingParallelism × GOMAXPROCS.
const ceilingParallelism = 4

// BenchmarkEtcdTxnCeilingSerial is BenchmarkEtcdTxnCeiling with one txn in flight: the
// ceiling of a Placer whose commits took turns (as before its commits overlapped, see
// Placer).
func BenchmarkEtcdTxnCeilingSerial(b *testing.B) { benchCeiling(b, 0) }

// benchCeiling runs the ceiling with parallelism × GOMAXPROCS txns in flight, or one
// when parallelism is 0.
func benchCeiling(b *testing.B, parallelism int) {
	cli := etcdtest.Start(b)
	const n = 1000
	for i := range n {
		putInstance(b, cli, "bench", fmt.Sprintf("i%04d", i), 1<<20, 1<<20, map[string]string{"zone": "z" + strconv.Itoa(i%3)})
	}
	ctx := context.Background()
	// Each worker owns a disjoint slice of instances and keeps their records and
	// revisions, as the placer's cache does.
	// Workers stride over the instances, so none shares one with another (which would
	// make their compares fail): at least one stride per worker.
	stride := max(16, parallelism*runtime.GOMAXPROCS(0))
	var worker atomic.Int64
	var seq atomic.Int64
	work := func(next func() bool) {
		w := int(worker.Add(1)) - 1
		type inst struct {
			id  string
			rec *storev1.ContainerInstanceRecord
			rev int64
		}
		var mine []*inst
		for i := w; i < n; i += stride {
			id := fmt.Sprintf("i%04d", i)
			rec, rev, err := store.Get[*storev1.ContainerInstanceRecord](ctx, cli, keys.Instance(testScope, "bench", id))
			if err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, &inst{id: id, rec: rec, rev: rev})
		}
		at := 0
		for next() {
			txn := store.NewTxn(cli)
			used := map[*inst]bool{}
			for range ceilingBatch {
				in := mine[at%len(mine)]
				at++
				id := "t" + strconv.FormatInt(seq.Add(1), 10)
				task := &ecsv1.Task{TaskArn: proto.String("arn:aws:ecs:us-east-1:000000000000:task/bench/" + id), LastStatus: proto.String("PENDING")}
				txn.Create(keys.Task(testScope, "bench", id), &storev1.TaskRecord{Task: task, ClusterName: "bench", ContainerInstanceId: in.id, ReservedCpu: 1, ReservedMemory: 1})
				txn.PutIndex(keys.TaskList(testScope, "bench", "RUNNING", keys.DimInstance, in.id, id))
				txn.Put(keys.Inbox(testScope, in.id, id), &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{DeliveryId: id, Task: task}}})
				used[in] = true
			}
			for in := range used {
				txn.Update(keys.Instance(testScope, "bench", in.id), in.rev, in.rec)
			}
			rev, err := txn.Commit(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			for in := range used {
				in.rev = rev
			}
		}
	}
	c0 := cpuTime()
	b.ResetTimer()
	if parallelism > 0 {
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) { work(pb.Next) })
	} else {
		i := 0
		work(func() bool { i++; return i <= b.N })
	}
	b.StopTimer()
	cpu := cpuTime() - c0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "txns/s")
	b.ReportMetric(float64(b.N*ceilingBatch)/b.Elapsed().Seconds(), "placements/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*ceilingBatch), "cpu-µs/placement")
}
