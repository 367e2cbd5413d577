package task

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// TestID: the id is the ARN's last part, in the long and the short format.
func TestID(t *testing.T) {
	for arn, want := range map[string]string{
		"arn:aws:ecs:us-east-1:000000000000:task/c/0123abcd": "0123abcd",
		"arn:aws:ecs:us-east-1:000000000000:task/0123abcd":   "0123abcd",
	} {
		if got := ID(&storev1.TaskRecord{Task: &ecsv1.Task{TaskArn: proto.String(arn)}}); got != want {
			t.Errorf("ID(%s) = %q, want %q", arn, got, want)
		}
	}
}

// TestIndexKeys: a task has the DimAll key under its desiredStatus, plus one key for
// each dimension it has a value for (instance, family, service, startedBy), none for
// the others.
func TestIndexKeys(t *testing.T) {
	sc := keys.Scope{Account: "000000000000", Region: "us-east-1"}
	const id = "0123"
	base := func() *storev1.TaskRecord {
		return &storev1.TaskRecord{ClusterName: "c", Task: &ecsv1.Task{
			TaskArn:       proto.String("arn:aws:ecs:us-east-1:000000000000:task/c/" + id),
			DesiredStatus: proto.String(DesiredRunning),
		}}
	}
	all := func(desired string) string { return keys.TaskList(sc, "c", desired, keys.DimAll, "-", id) }
	for _, tc := range []struct {
		name string
		edit func(r *storev1.TaskRecord)
		want []string
	}{
		{"unplaced, no family", func(*storev1.TaskRecord) {}, []string{all(DesiredRunning)}},
		{"instance", func(r *storev1.TaskRecord) { r.ContainerInstanceId = "ci1" },
			[]string{all(DesiredRunning), keys.TaskList(sc, "c", DesiredRunning, keys.DimInstance, "ci1", id)}},
		{"family", func(r *storev1.TaskRecord) {
			r.Task.TaskDefinitionArn = proto.String("arn:aws:ecs:us-east-1:000000000000:task-definition/web:3")
		}, []string{all(DesiredRunning), keys.TaskList(sc, "c", DesiredRunning, keys.DimFamily, "web", id)}},
		{"bad task definition ARN has no family key", func(r *storev1.TaskRecord) {
			r.Task.TaskDefinitionArn = proto.String("web:3")
		}, []string{all(DesiredRunning)}},
		{"service", func(r *storev1.TaskRecord) { r.ServiceName = "svc" },
			[]string{all(DesiredRunning), keys.TaskList(sc, "c", DesiredRunning, keys.DimService, "svc", id)}},
		{"startedBy", func(r *storev1.TaskRecord) { r.Task.StartedBy = proto.String("ecs-svc/1") },
			[]string{all(DesiredRunning), keys.TaskList(sc, "c", DesiredRunning, keys.DimStartedBy, "ecs-svc/1", id)}},
		{"stopped, every dimension", func(r *storev1.TaskRecord) {
			r.Task.DesiredStatus = proto.String(DesiredStopped)
			r.ContainerInstanceId, r.ServiceName = "ci1", "svc"
			r.Task.TaskDefinitionArn = proto.String("arn:aws:ecs:us-east-1:000000000000:task-definition/web:3")
			r.Task.StartedBy = proto.String("me")
		}, []string{
			all(DesiredStopped),
			keys.TaskList(sc, "c", DesiredStopped, keys.DimInstance, "ci1", id),
			keys.TaskList(sc, "c", DesiredStopped, keys.DimFamily, "web", id),
			keys.TaskList(sc, "c", DesiredStopped, keys.DimService, "svc", id),
			keys.TaskList(sc, "c", DesiredStopped, keys.DimStartedBy, "me", id),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base()
			tc.edit(r)
			if got := IndexKeys(sc, r); !slices.Equal(got, tc.want) {
				t.Errorf("IndexKeys = %q, want %q", got, tc.want)
			}
		})
	}
}
