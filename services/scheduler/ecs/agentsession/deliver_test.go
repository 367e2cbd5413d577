package agentsession

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/tasksecrets"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// captureStream records what a session sends, as the agent decodes it off the wire.
type captureStream struct {
	t    *testing.T
	sent []*agentv1.SessionResponse
}

func (c *captureStream) Send(r *agentv1.SessionResponse) error {
	b, err := proto.Marshal(r)
	if err != nil {
		c.t.Fatal(err)
	}
	got := &agentv1.SessionResponse{}
	if err := proto.Unmarshal(b, got); err != nil {
		c.t.Fatalf("the agent cannot decode %x: %v", b, err)
	}
	c.sent = append(c.sent, got)
	return nil
}

func (c *captureStream) Receive() (*agentv1.SessionRequest, error) { return nil, io.EOF }

// countingResolver resolves every secret to "v" and counts its calls.
type countingResolver struct{ calls int }

func (r *countingResolver) Needs(td *ecsv1.TaskDefinition) bool { return tasksecrets.Needs(td) }

func (r *countingResolver) Resolve(_ context.Context, _ keys.Scope, td *ecsv1.TaskDefinition) ([]*agentv1.ResolvedSecret, error) {
	r.calls++
	var out []*agentv1.ResolvedSecret
	for _, c := range td.GetContainerDefinitions() {
		for _, s := range c.GetSecrets() {
			out = append(out, &agentv1.ResolvedSecret{ContainerName: c.GetName(), Kind: "env", Name: s.GetName(), Value: "v"})
		}
	}
	return out, nil
}

// TestDeliverRawAsDecoded: whatever path deliver takes for an inbox entry (raw or
// decoded), the agent receives what deliverEntry builds from the decoded entry: the
// default delivery id or the entry's own, the task definition added by ARN or carried,
// secrets resolved, a task definition that cannot be found left out; and an entry
// delivered again at the same revision is sent once.
func TestDeliverRawAsDecoded(t *testing.T) {
	const (
		taskID   = "0123456789abcdef0123456789abcdef"
		plainArn = "arn:aws:ecs:us-east-1:000000000000:task-definition/web:1"
		secArn   = "arn:aws:ecs:us-east-1:000000000000:task-definition/sec:1"
	)
	plainTD := &ecsv1.TaskDefinition{TaskDefinitionArn: proto.String(plainArn), Family: proto.String("web"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("web"), Image: proto.String("img"), Environment: []*ecsv1.KeyValuePair{{Name: proto.String("A"), Value: proto.String("1")}}}}}
	secTD := &ecsv1.TaskDefinition{TaskDefinitionArn: proto.String(secArn), Family: proto.String("sec"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("app"), Image: proto.String("img"), Secrets: []*ecsv1.Secret{{Name: proto.String("S"), ValueFrom: proto.String("arn:aws:ssm:us-east-1:000000000000:parameter/p")}}}}}
	resolver := &countingResolver{}
	srv := &Server{cfg: Config{Secrets: resolver}}
	for _, td := range []*ecsv1.TaskDefinition{plainTD, secTD} {
		c, err := newCachedTaskDef(td)
		if err != nil {
			t.Fatal(err)
		}
		if srv.tds.defs == nil {
			srv.tds.defs = map[string]cachedTaskDef{}
		}
		srv.tds.defs[testScope.String()+"/"+td.GetTaskDefinitionArn()] = c
	}
	newSession := func() (*session, *captureStream) {
		cs := &captureStream{t: t}
		return &session{srv: srv, account: testScope, cluster: cluster, instance: instID, stream: cs,
			log: slog.New(slog.DiscardHandler), pending: map[string]*delivery{}, byKey: map[string]string{}}, cs
	}
	task := func(tdArn string) *ecsv1.Task {
		return &ecsv1.Task{TaskArn: proto.String("arn:aws:ecs:us-east-1:000000000000:task/c1/" + taskID), TaskDefinitionArn: proto.String(tdArn),
			Containers: []*ecsv1.Container{{Name: proto.String("web"), LastStatus: proto.String("PENDING")}}}
	}
	assign := func(a *agentv1.Assignment) *storev1.InboxEntry {
		return &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: a}}
	}
	key := keys.Inbox(testScope, instID, taskID)

	for _, tc := range []struct {
		name    string
		entry   *storev1.InboxEntry
		check   func(*agentv1.SessionResponse) bool
		resolve int // Resolve calls for the two deliveries
	}{
		{"raw, default delivery id", assign(&agentv1.Assignment{Task: task(plainArn), TraceParent: "tp"}),
			func(r *agentv1.SessionResponse) bool {
				return r.GetAssignment().GetDeliveryId() == taskID && proto.Equal(r.GetAssignment().GetTaskDefinition(), plainTD)
			}, 0},
		{"raw, own delivery id", assign(&agentv1.Assignment{DeliveryId: "d-1", Task: task(plainArn)}),
			func(r *agentv1.SessionResponse) bool {
				return r.GetAssignment().GetDeliveryId() == "d-1" && proto.Equal(r.GetAssignment().GetTaskDefinition(), plainTD)
			}, 0},
		{"carried task definition", assign(&agentv1.Assignment{DeliveryId: "d-2", Task: task(plainArn), TaskDefinition: plainTD}),
			func(r *agentv1.SessionResponse) bool {
				return len(r.GetAssignment().GetTaskDefinition().GetContainerDefinitions()) == 1
			}, 0},
		{"secrets resolved", assign(&agentv1.Assignment{DeliveryId: "d-3", Task: task(secArn)}),
			func(r *agentv1.SessionResponse) bool {
				return len(r.GetAssignment().GetResolvedSecrets()) == 1 && proto.Equal(r.GetAssignment().GetTaskDefinition(), secTD)
			}, 2},
		{"task definition not found", assign(&agentv1.Assignment{DeliveryId: "d-4", Task: task("not-an-arn")}),
			func(r *agentv1.SessionResponse) bool {
				return r.GetAssignment().GetTaskDefinition() == nil && r.GetAssignment().GetTask() != nil
			}, 0},
		{"stop order", &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Stop{Stop: &agentv1.StopOrder{TaskArn: "t"}}},
			func(r *agentv1.SessionResponse) bool { return r.GetStop().GetDeliveryId() == taskID+StopDeliverySuffix }, 0},
	} {
		resolver.calls = 0
		raw, err := proto.Marshal(tc.entry)
		if err != nil {
			t.Fatal(err)
		}
		item := store.Item[*emptypb.Empty]{Key: key, ModRevision: 7, Value: &emptypb.Empty{}}
		item.Value.ProtoReflect().SetUnknown(raw)

		viaDeliver, got := newSession()
		for range 2 { // the second time at the same revision sends nothing
			if err := viaDeliver.deliver(item); err != nil {
				t.Fatalf("%s: deliver: %v", tc.name, err)
			}
		}
		viaEntry, want := newSession()
		if err := viaEntry.deliverEntry(key, 7, proto.Clone(tc.entry).(*storev1.InboxEntry), nil); err != nil {
			t.Fatalf("%s: deliverEntry: %v", tc.name, err)
		}
		if len(got.sent) != 1 || len(want.sent) != 1 {
			t.Fatalf("%s: deliver sent %d messages for two deliveries at one revision, deliverEntry %d; want 1 and 1", tc.name, len(got.sent), len(want.sent))
		}
		if !proto.Equal(got.sent[0], want.sent[0]) {
			t.Errorf("%s: the agent receives\n%v\nwant, as deliverEntry sends it,\n%v", tc.name, got.sent[0], want.sent[0])
		}
		if !tc.check(got.sent[0]) {
			t.Errorf("%s: unexpected message %v", tc.name, got.sent[0])
		}
		if resolver.calls != tc.resolve {
			t.Errorf("%s: %d secret resolutions, want %d", tc.name, resolver.calls, tc.resolve)
		}
		if id := viaDeliver.byKey[key]; viaDeliver.pending[id] == nil || viaDeliver.pending[id].rev != 7 {
			t.Errorf("%s: delivery not tracked: byKey %v", tc.name, viaDeliver.byKey)
		}
	}
}
