package containerdproc_test

import (
	"context"
	"log"

	containerd "github.com/containerd/containerd/v2/client"

	"github.com/berthhq/berth/services/agent/containerdproc"
)

// Running a private containerd under a data directory, as `berth dev` does
// when no system containerd answers.
func ExampleStartProcess() {
	ctx := context.Background()
	inst, err := containerdproc.StartProcess(ctx, ".berth/containerd")
	if err != nil {
		log.Fatal(err)
	}
	defer inst.Stop(context.WithoutCancel(ctx))

	client, err := containerd.New(inst.Address(), containerd.WithDefaultNamespace("berth"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// Pull with containerd.WithPullSnapshotter(inst.Snapshotter()), …
}
