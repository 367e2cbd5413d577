package control

import (
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// RunTask's reads (readForRun, one txn) resolve every form of task definition reference
// as LookupTaskDefinition does: a family to its latest ACTIVE revision (read after the
// txn), family:revision and an ARN directly, and a reference that names nothing (another
// account's ARN, an unknown revision, a family with no ACTIVE revision) as not found.
func TestRunTaskReads(t *testing.T) {
	e := newEnv(t)
	e.createCluster("c")
	e.registerHost("c", "h", 4096, 4096)
	e.simpleTaskDef("app", 1, 6)
	e.simpleTaskDef("app", 1, 6)
	e.simpleTaskDef("app", 1, 6)
	must(e, e.s.DeregisterTaskDefinition, &ecsv1.DeregisterTaskDefinitionRequest{TaskDefinition: proto.String("app:3")})
	e.simpleTaskDef("gone", 1, 6)
	must(e, e.s.DeregisterTaskDefinition, &ecsv1.DeregisterTaskDefinitionRequest{TaskDefinition: proto.String("gone:1")})
	tdARN := func(acc, ref string) string { return "arn:aws:ecs:us-east-1:" + acc + ":task-definition/" + ref }

	for ref, want := range map[string]string{
		"app":                 tdARN(e.acc, "app:2"), // 3 is INACTIVE
		"app:1":               tdARN(e.acc, "app:1"),
		tdARN(e.acc, "app:2"): tdARN(e.acc, "app:2"),
	} {
		r := must(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String(ref)})
		if len(r.GetTasks()) != 1 || r.GetTasks()[0].GetTaskDefinitionArn() != want {
			t.Errorf("RunTask %s: %v, want a task of %s", ref, r, want)
		}
	}
	for ref, typ := range map[string]string{
		"app:3":                        "InvalidParameterException", // inactive
		"app:9":                        "ClientException",
		"gone":                         "ClientException", // no ACTIVE revision
		tdARN("111111111111", "app:1"): "ClientException",
		"bad ref!":                     "ClientException",
	} {
		_, err := call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("c"), TaskDefinition: proto.String(ref)})
		wantErr(t, err, typ)
	}
	// The cluster is checked first, whatever the definition.
	_, err := call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("nope"), TaskDefinition: proto.String("app:9")})
	wantErr(t, err, "ClusterNotFoundException")
}
