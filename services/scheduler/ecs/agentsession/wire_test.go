package agentsession

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

// TestRawAssignment: an assignment passed on raw, with the delivery id and task
// definition appended, decodes on the agent's side as the message deliverEntry builds
// from the decoded entry; entries that are not one plain assignment are left to the full
// decode.
func TestRawAssignment(t *testing.T) {
	const tdArn = "arn:aws:ecs:us-east-1:123456789012:task-definition/web:3"
	task := &ecsv1.Task{
		TaskArn:           proto.String("arn:aws:ecs:us-east-1:123456789012:task/c/0123456789abcdef0123456789abcdef"),
		TaskDefinitionArn: proto.String(tdArn),
		LastStatus:        proto.String("PROVISIONING"),
		Containers:        []*ecsv1.Container{{Name: proto.String("web"), LastStatus: proto.String("PENDING")}},
	}
	td := &ecsv1.TaskDefinition{
		TaskDefinitionArn:    proto.String(tdArn),
		Family:               proto.String("web"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("web"), Image: proto.String("registry.local/web:1"), Memory: proto.Int32(128)}},
	}
	enc := func(m proto.Message) []byte {
		t.Helper()
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tdField := protowire.AppendBytes(protowire.AppendTag(nil, fieldAssignmentTaskDefinition, protowire.BytesType), enc(td))

	for _, tc := range []struct {
		name       string
		deliveryID string
	}{{"default delivery id", ""}, {"own delivery id", "d-7"}} {
		entry := &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{
			DeliveryId: tc.deliveryID, Task: task, TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		}}}
		a, ok := parseRawAssignment(enc(entry))
		if !ok {
			t.Fatalf("%s: not parsed", tc.name)
		}
		if a.deliveryID != tc.deliveryID || a.taskDefinitionArn != tdArn || a.hasTaskDefinition {
			t.Fatalf("%s: parsed %+v", tc.name, a)
		}
		var extra []byte
		id := tc.deliveryID
		if id == "" {
			id = "0123456789abcdef0123456789abcdef"
			extra = protowire.AppendString(protowire.AppendTag(nil, fieldAssignmentDeliveryID, protowire.BytesType), id)
		}
		got := &agentv1.SessionResponse{}
		if err := proto.Unmarshal(appendAssignment(nil, a.fields, extra, tdField), got); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := proto.Clone(entry.GetAssignment()).(*agentv1.Assignment)
		want.DeliveryId, want.TaskDefinition = id, td
		if !proto.Equal(got, &agentv1.SessionResponse{Message: &agentv1.SessionResponse_Assignment{Assignment: want}}) {
			t.Errorf("%s: the agent reads %v, want the assignment %v", tc.name, got, want)
		}
	}

	inline := &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{Task: task, TaskDefinition: td}}}
	if a, ok := parseRawAssignment(enc(inline)); !ok || !a.hasTaskDefinition {
		t.Errorf("an entry carrying its task definition: %+v, %v; want it seen as carrying one", a, ok)
	}
	plain := enc(&storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{Task: task}}})
	for name, b := range map[string][]byte{
		"stop order":        enc(&storev1.InboxEntry{Delivery: &storev1.InboxEntry_Stop{Stop: &agentv1.StopOrder{DeliveryId: "x"}}}),
		"empty":             nil,
		"no task":           enc(&storev1.InboxEntry{Delivery: &storev1.InboxEntry_Assignment{Assignment: &agentv1.Assignment{DeliveryId: "x"}}}),
		"assignment twice":  append(append([]byte{}, plain...), plain...),
		"truncated":         plain[:len(plain)-2],
		"unknown field too": protowire.AppendVarint(protowire.AppendTag(append([]byte{}, plain...), 99, protowire.VarintType), 1),
		"task split in two": protowire.AppendBytes(protowire.AppendTag(nil, fieldInboxAssignment, protowire.BytesType), append(enc(&agentv1.Assignment{Task: task}), enc(&agentv1.Assignment{Task: task})...)),
	} {
		if a, ok := parseRawAssignment(b); ok {
			t.Errorf("%s: parsed as a raw assignment %+v; want it left to the full decode", name, a)
		}
	}
}
