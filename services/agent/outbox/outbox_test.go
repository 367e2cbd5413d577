package outbox_test

import (
	"errors"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/outbox"
)

func TestOutboxSurvivesReopenAndMovesForward(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	o, err := outbox.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := o.Append(&agentv1.TaskStateChange{TaskArn: "t1", LastStatus: "RUNNING"})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := o.Append(&agentv1.TaskStateChange{TaskArn: "t1", LastStatus: "STOPPED"})
	if err != nil || s2 <= s1 {
		t.Fatalf("second append: seq %d after %d, %v", s2, s1, err)
	}
	if _, err := o.Append(&agentv1.TaskStateChange{TaskArn: "t1", LastStatus: "RUNNING"}); !errors.Is(err, outbox.ErrBackward) {
		t.Fatalf("backward append: %v, want ErrBackward", err)
	}
	if fresh, _ := o.TakeDelivery("d1", "t1"); !fresh {
		t.Fatal("first delivery not fresh")
	}
	if err := o.Ack([]uint64{s1}); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	o, err = outbox.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	p, err := o.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 1 || p[0].GetSeq() != s2 || p[0].GetLastStatus() != "STOPPED" {
		t.Fatalf("pending after reopen = %v, want only seq %d STOPPED", p, s2)
	}
	if fresh, _ := o.TakeDelivery("d1", "t1"); fresh {
		t.Fatal("redelivery taken as fresh after reopen")
	}
	a := &agentv1.Assignment{DeliveryId: "d2", Task: &ecsv1.Task{TaskArn: proto.String("t2")}}
	if fresh, err := o.TakeAssignment(a); !fresh || err != nil {
		t.Fatalf("first assignment: fresh %v, %v", fresh, err)
	}
	a.DeliveryId = "d3" // a second delivery of the same task
	if fresh, _ := o.TakeAssignment(a); fresh {
		t.Fatal("second delivery of a stored task taken as fresh")
	}
	if got, _ := o.Assignment("t2"); got.GetDeliveryId() != "d2" {
		t.Fatalf("stored assignment %v", got)
	}
	if st, _ := o.KnownStatus("t1"); st != "STOPPED" {
		t.Fatalf("known status %q", st)
	}
}
