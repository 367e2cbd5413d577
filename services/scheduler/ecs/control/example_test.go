package control_test

import (
	"context"
	"fmt"
	"os"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
)

// A scheduler wires the Server with its etcd client; the gateway's identity headers
// become the caller in ctx (caller.Interceptor), and the agent session server calls the
// exported entry points directly.
func Example() {
	ctx := context.Background()
	dir := exampleDir()
	defer os.RemoveAll(dir)
	srv, err := etcdembed.Start(ctx, etcdembed.Config{Dir: dir, ClientURL: "http://127.0.0.1:0", UnsafeNoFsync: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	s := control.New(control.Config{KV: srv.Client()})
	// The gateway sends the account of the access key and the region of the SigV4 scope.
	id := caller.Identity{Account: "123456789012", Region: "us-east-1"}
	ctx = caller.With(ctx, id)
	account := id.Scope()

	// The agent registers its host; "default" is created as the ECS agent does.
	reg, _ := s.RegisterInstance(ctx, account, &agentv1.RegisterRequest{
		HostId: "host-1", RuntimeReady: true, Resources: control.Resources(2048, 4096, nil, nil),
	})
	fmt.Println(reg.GetClusterArn())

	_, _ = s.RegisterTaskDefinition(ctx, connect.NewRequest(&ecsv1.RegisterTaskDefinitionRequest{
		Family: proto.String("web"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{{
			Name: proto.String("app"), Image: proto.String("nginx"), Memory: proto.Int32(128),
		}},
	}))
	run, _ := s.RunTask(ctx, connect.NewRequest(&ecsv1.RunTaskRequest{TaskDefinition: proto.String("web")}))
	task := run.Msg.GetTasks()[0]
	fmt.Println(task.GetLastStatus(), task.GetDesiredStatus())

	// The agent reports the task running.
	_ = s.ApplyTaskStateChange(ctx, account, reg.GetContainerInstance().GetContainerInstanceArn(),
		&agentv1.TaskStateChange{TaskArn: task.GetTaskArn(), LastStatus: "RUNNING"})
	c, _ := s.DescribeClusters(ctx, connect.NewRequest(&ecsv1.DescribeClustersRequest{}))
	fmt.Println(c.Msg.GetClusters()[0].GetRunningTasksCount(), c.Msg.GetClusters()[0].GetPendingTasksCount())
	// Output:
	// arn:aws:ecs:us-east-1:123456789012:cluster/default
	// PENDING RUNNING
	// 1 0
}

func exampleDir() string {
	dir, err := os.MkdirTemp("", "control-example-")
	if err != nil {
		panic(err)
	}
	return dir
}
