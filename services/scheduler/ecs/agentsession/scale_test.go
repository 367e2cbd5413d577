package agentsession

import (
	"context"
	"fmt"
	"io"
	"os"
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
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	"google.golang.org/protobuf/proto"
)

// memStream is an in-memory session stream: the benchmark plays the agent.
type memStream struct {
	in       chan *agentv1.SessionRequest
	received atomic.Int64
	assigned atomic.Int64
}

func (m *memStream) Send(r *agentv1.SessionResponse) error {
	m.received.Add(1)
	if r.GetAssignment() != nil {
		m.assigned.Add(1)
	}
	return nil
}

func (m *memStream) Receive() (*agentv1.SessionRequest, error) {
	r, ok := <-m.in
	if !ok {
		return nil, io.EOF
	}
	return r, nil
}

type nopControl struct{}

func (nopControl) RegisterInstance(context.Context, keys.Scope, *agentv1.RegisterRequest) (*agentv1.RegisterResponse, error) {
	return nil, nil
}
func (nopControl) ApplyTaskStateChange(context.Context, keys.Scope, string, *agentv1.TaskStateChange) error {
	return nil
}
func (nopControl) SetAgentConnected(context.Context, keys.Scope, string, bool) error { return nil }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestManySessions measures how many agent sessions one replica holds: goroutines and
// heap per session, CPU while every agent heartbeats, and inbox delivery latency. The
// sessions run the real handler (presence, expected tasks, inbox watch) against embedded
// etcd, over in-memory streams instead of HTTP/2. CI runs 200 sessions; for the figures:
//
//	BERTH_SESSIONS=10000 go test -run ManySessions -v -timeout 20m ./agentsession
func TestManySessions(t *testing.T) {
	// CI runs a small count so the path is always exercised; BERTH_SESSIONS scales it up.
	n, _ := strconv.Atoi(os.Getenv("BERTH_SESSIONS"))
	if n <= 0 {
		n = 200
	}
	cli := etcdtest.Start(t)
	ctx := context.Background()
	const cl = "scale"
	arnOf := func(i int) string {
		return fmt.Sprintf("arn:aws:ecs:us-east-1:%s:container-instance/%s/i%05d", acct, cl, i)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ci := &ecsv1.ContainerInstance{ContainerInstanceArn: proto.String(arnOf(i)), Status: proto.String("ACTIVE")}
			if _, err := store.Create(ctx, cli, keys.Instance(testScope, cl, fmt.Sprintf("i%05d", i)), &storev1.ContainerInstanceRecord{ContainerInstance: ci}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	srv := New(Config{Etcd: cli, Control: nopControl{}, HeartbeatTimeout: time.Minute, ReassertEvery: time.Hour})
	defer srv.Close()
	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	g0 := runtime.NumGoroutine()

	sctx, cancel := context.WithCancel(caller.With(ctx, caller.Identity{Account: acct, Region: testRegion}))
	defer cancel()
	streams := make([]*memStream, n)
	start := time.Now()
	for i := range n {
		st := &memStream{in: make(chan *agentv1.SessionRequest, 4)}
		st.in <- &agentv1.SessionRequest{Message: &agentv1.SessionRequest_Hello{Hello: &agentv1.Hello{ContainerInstanceArn: arnOf(i)}}}
		streams[i] = st
		go func() { _ = srv.serve(sctx, caller.Identity{Account: acct, Region: testRegion}, st) }()
	}
	for {
		ready := 0
		for _, st := range streams {
			if st.received.Load() > 0 {
				ready++
			}
		}
		if ready == n {
			break
		}
		if time.Since(start) > 10*time.Minute {
			t.Fatalf("only %d of %d sessions opened", ready, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d sessions open in %v", n, time.Since(start))
	time.Sleep(2 * time.Second) // let the watches settle
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	g1 := runtime.NumGoroutine()
	t.Logf("goroutines: %d total, %.1f per session", g1, float64(g1-g0)/float64(n))
	t.Logf("goroutine stacks: %.1f MiB, %.1f KiB per session",
		float64(ms1.StackInuse)/(1<<20), float64(int64(ms1.StackInuse)-int64(ms0.StackInuse))/float64(n)/1024)
	t.Logf("heap in use: %.1f MiB, %.1f KiB per session (etcd server in the same process included)",
		float64(ms1.HeapInuse)/(1<<20), float64(int64(ms1.HeapInuse)-int64(ms0.HeapInuse))/float64(n)/1024)

	// Steady state: every agent heartbeats every 5s (2,000/s for 10,000 agents).
	const interval = 5 * time.Second
	const window = 10 * time.Second
	hb := &agentv1.SessionRequest{Message: &agentv1.SessionRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{RuntimeReady: true}}}
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(interval / time.Duration(max(n/100, 1)))
		defer tick.Stop()
		i := 0
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				for range 100 {
					streams[i%n].in <- hb
					i++
				}
			}
		}
	}()
	c0 := cpuTime()
	time.Sleep(window)
	used := cpuTime() - c0
	close(stop)
	t.Logf("CPU while %d agents heartbeat every %v: %.3f cores", n, interval, used.Seconds()/window.Seconds())

	// Deliveries: one assignment to each of 1,000 agents; time until all arrived.
	m := min(n, 1000)
	d0 := time.Now()
	for i := range m {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e := &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{DeliveryId: "t", Task: &ecsv1.Task{TaskArn: proto.String("x")}}}}
			if _, err := store.NewTxn(cli).Put(keys.Inbox(testScope, fmt.Sprintf("i%05d", i), "t"), e).Commit(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for {
		got := 0
		for i := range m {
			if streams[i].assigned.Load() > 0 {
				got++
			}
		}
		if got == m {
			break
		}
		if time.Since(d0) > time.Minute {
			t.Fatalf("%d of %d assignments delivered", got, m)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d assignments written and delivered in %v", m, time.Since(d0))
	if srv.Sessions() != n {
		t.Fatalf("sessions %d", srv.Sessions())
	}
}
