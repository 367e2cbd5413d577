package service

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

// The task watch reads only serviceName from the encoded record (read as Empty): it must
// find what a full decode finds, whatever else the record holds.
func TestTaskServiceName(t *testing.T) {
	for _, rec := range []*storev1.TaskRecord{
		{ServiceName: "web", ClusterName: "c", ContainerInstanceId: "i1",
			Task: &ecsv1.Task{TaskArn: proto.String("arn:aws:ecs:us-east-1:000000000000:task/c/t1"), Group: proto.String("service:web"),
				Containers: []*ecsv1.Container{{Name: proto.String("app")}}}, ReservedCpu: 256, GpuIds: []string{"g0"}},
		{ClusterName: "c", Task: &ecsv1.Task{StartedBy: proto.String("me")}},
		{},
	} {
		b, err := proto.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var e emptypb.Empty
		if err := proto.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		if got := taskServiceName(e.ProtoReflect().GetUnknown()); got != rec.GetServiceName() {
			t.Errorf("taskServiceName = %q, want %q", got, rec.GetServiceName())
		}
	}
	if got := taskServiceName([]byte{0x4a, 0x05, 'a'}); got != "" {
		t.Errorf("truncated record: %q, want \"\"", got)
	}
}
