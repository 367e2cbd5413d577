package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/gateway"
)

// fakeAgent is a scripted agent: it registers an instance with a fixed capacity, holds a
// session (hello, heartbeats with the registered capacity), and acknowledges every
// assignment and stop order without running anything; with reportRunning it also reports
// each assigned task RUNNING, as a real agent does once the task's containers start.
type fakeAgent struct {
	reportRunning bool

	client  agentv1connect.AgentServiceClient
	account string
	cluster string
	hostID  string
	cpu     int32
	mem     int32
	arn     string
}

func res(name string, v int32) *ecsv1.Resource {
	return &ecsv1.Resource{Name: proto.String(name), Type: proto.String("INTEGER"), IntegerValue: v}
}

func (f *fakeAgent) register(ctx context.Context) error {
	req := connect.NewRequest(&agentv1.RegisterRequest{
		Cluster: f.cluster,
		HostId:  f.hostID,
		Resources: []*ecsv1.Resource{res("CPU", f.cpu), res("MEMORY", f.mem),
			{Name: proto.String("PORTS"), Type: proto.String("STRINGSET"), StringSetValue: []string{}},
			{Name: proto.String("PORTS_UDP"), Type: proto.String("STRINGSET"), StringSetValue: []string{}}},
		VersionInfo:  &ecsv1.VersionInfo{AgentVersion: proto.String("bench"), DockerVersion: proto.String("none")},
		RuntimeReady: true,
	})
	req.Header().Set(identity.AccountHeader, f.account)
	req.Header().Set(identity.RegionHeader, region)
	resp, err := f.client.Register(ctx, req)
	if err != nil {
		return fmt.Errorf("register %s: %w", f.hostID, err)
	}
	f.arn = resp.Msg.GetContainerInstance().GetContainerInstanceArn()
	return nil
}

// run holds the session until ctx ends or the stream fails; it calls up once the
// scheduler has opened the session (its first message, the expected tasks, arrived): a
// session the scheduler is still opening (presence, agentConnected, the listing of the
// instance's tasks) would otherwise spend its opening inside a part's measured window.
func (f *fakeAgent) run(ctx context.Context, heartbeat time.Duration, up func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := f.client.Session(ctx)
	st.RequestHeader().Set(identity.AccountHeader, f.account)
	st.RequestHeader().Set(identity.RegionHeader, region)
	var mu sync.Mutex
	send := func(m *agentv1.SessionRequest) error {
		mu.Lock()
		defer mu.Unlock()
		return st.Send(m)
	}
	if err := send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Hello{Hello: &agentv1.Hello{ContainerInstanceArn: f.arn}}}); err != nil {
		return err
	}
	go func() {
		// Spread the heartbeats over the interval, as independent agents would.
		t := time.NewTimer(rand.N(heartbeat))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				_ = st.CloseRequest()
				return
			case <-t.C:
			}
			t.Reset(heartbeat)
			if send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{
				RuntimeReady: true, Cpu: f.cpu, Memory: f.mem, SentAt: timestamppb.Now(),
			}}}) != nil {
				cancel()
				return
			}
		}
	}()
	var seq uint64
	for {
		m, err := st.Receive()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if m.GetExpectedTasks() != nil && up != nil {
			up()
			up = nil
		}
		var id string
		switch x := m.GetMessage().(type) {
		case *agentv1.SessionResponse_Assignment:
			id = x.Assignment.GetDeliveryId()
		case *agentv1.SessionResponse_Stop:
			id = x.Stop.GetDeliveryId()
		}
		if id != "" {
			if err := send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_Ack{Ack: &agentv1.Ack{DeliveryIds: []string{id}}}}); err != nil {
				return err
			}
		}
		if a := m.GetAssignment(); a != nil && f.reportRunning {
			seq++
			if err := send(&agentv1.SessionRequest{Message: &agentv1.SessionRequest_TaskState{TaskState: &agentv1.TaskStateChange{
				Seq: seq, TaskArn: a.GetTask().GetTaskArn(), LastStatus: "RUNNING", StartedAt: timestamppb.Now(),
			}}}); err != nil {
				return err
			}
		}
	}
}

// fakeFleet starts n fake agents against the scheduler at url: registers them (with
// limited concurrency), then holds their sessions until ctx ends. Each client carries at
// most perConn sessions, so no HTTP/2 connection hits its stream limit.
func fakeFleet(ctx context.Context, url, account, cluster, prefix string, n int, heartbeat time.Duration, cpu, mem int32, reportRunning bool) (connected *atomic.Int64, wait func() error, err error) {
	const perConn = 200
	var clients []agentv1connect.AgentServiceClient
	for i := 0; i < n; i += perConn {
		clients = append(clients, agentv1connect.NewAgentServiceClient(gateway.NewH2CClient(), url))
	}
	agents := make([]*fakeAgent, n)
	sem := make(chan struct{}, 32)
	var regErr atomic.Value
	var wg sync.WaitGroup
	for i := range n {
		agents[i] = &fakeAgent{client: clients[i/perConn], account: account, cluster: cluster,
			hostID: fmt.Sprintf("%s-%05d", prefix, i), cpu: cpu, mem: mem, reportRunning: reportRunning}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for attempt := 0; ; attempt++ {
				err := agents[i].register(ctx)
				if err == nil || attempt == 5 || ctx.Err() != nil {
					if err != nil {
						regErr.CompareAndSwap(nil, err)
					}
					return
				}
				time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if e, _ := regErr.Load().(error); e != nil {
		return nil, nil, e
	}
	connected = new(atomic.Int64)
	errc := make(chan error, n)
	var sessions sync.WaitGroup
	for _, a := range agents {
		sessions.Go(func() {
			// Reconnect after a failed or dropped session, as the real agent does. An
			// agent counts once, when its first session opens (on any attempt).
			var up sync.Once
			for ctx.Err() == nil {
				err := a.run(ctx, heartbeat, func() { up.Do(func() { connected.Add(1) }) })
				if err != nil && ctx.Err() == nil {
					select {
					case errc <- err:
					default:
					}
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Second + rand.N(time.Second)):
				}
			}
		})
	}
	wait = func() error {
		sessions.Wait()
		select {
		case err := <-errc:
			return fmt.Errorf("a session failed (and reconnected): %w", err)
		default:
			return nil
		}
	}
	return connected, wait, nil
}

// fakeFlags configure the child process that holds fake agent sessions.
type fakeFlags struct {
	n         int
	url       string
	account   string
	cluster   string
	heartbeat time.Duration
}

func (f *fakeFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.n, "fake-agents", 0, "internal: run this many fake agents (child process mode)")
	fs.StringVar(&f.url, "fake-url", "", "internal: scheduler URL for the fake agents")
	fs.StringVar(&f.account, "fake-account", "", "internal: account of the fake agents")
	fs.StringVar(&f.cluster, "fake-cluster", "", "internal: cluster of the fake agents")
	fs.DurationVar(&f.heartbeat, "fake-heartbeat", 10*time.Second, "internal: heartbeat interval")
}

// runFakeAgents is the child process: it prints "registered" when every instance is
// registered and "up N" when N sessions said hello, then holds them until killed.
func runFakeAgents(ctx context.Context, f fakeFlags) error {
	connected, wait, err := fakeFleet(ctx, f.url, f.account, f.cluster, "sess", f.n, f.heartbeat, 1024, 1024, false)
	if err != nil {
		return err
	}
	fmt.Println("registered")
	go func() {
		for ctx.Err() == nil {
			time.Sleep(time.Second)
			fmt.Fprintf(os.Stderr, "fake agents: %d up\n", connected.Load())
			if connected.Load() == int64(f.n) {
				fmt.Printf("up %d\n", f.n)
				return
			}
		}
	}()
	if err := wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
