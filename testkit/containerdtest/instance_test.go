package containerdtest_test

import (
	"testing"

	"github.com/berthhq/berth/testkit/containerdtest"
)

func TestStartServes(t *testing.T) {
	inst := containerdtest.Start(t)
	client := inst.Client(t, "berth-test")
	v, err := client.Version(t.Context())
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	t.Logf("containerd %s (%s), snapshotter %s, address %s", v.Version, v.Revision, inst.Snapshotter(), inst.Address())
}
