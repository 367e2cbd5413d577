package daemon

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/capacity"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
)

// TestChooseHosts is the per-host decision without etcd: the daemon runs on the ACTIVE
// instances of its pools (the first pool named wins an instance's provider), not on
// other pools' or pool-less instances nor on draining ones, except a draining instance
// that still runs both the daemon's task and other tasks (its daemon task leaves last).
func TestChooseHosts(t *testing.T) {
	td, _, err := BuildTaskDefinition(&ecsv1.RegisterDaemonTaskDefinitionRequest{
		Family:               proto.String("agents"),
		ContainerDefinitions: []*ecsv1.DaemonContainerDefinition{{Name: proto.String("a"), Image: proto.String("img"), Memory: proto.Int32(32)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	in := func(id, status, pool string) *placement.Instance {
		attrs := map[string]string{"ecs.os-type": "linux"}
		if pool != "" {
			attrs[capacity.PoolAttribute] = pool
		}
		return &placement.Instance{ID: id, Status: status, AgentConnected: true, Attributes: attrs}
	}
	snapshot := []*placement.Instance{
		in("a", "ACTIVE", "blue"), in("b", "ACTIVE", "green"), in("c", "ACTIVE", ""), in("d", "ACTIVE", "red"),
		in("e", "DRAINING", "blue"), in("f", "DRAINING", "blue"), in("g", "DRAINING", "blue"), in("h", "INACTIVE", "blue"),
	}
	daemonOn := map[string]bool{"a": true, "e": true, "f": true}
	othersOn := map[string]bool{"e": true, "g": true}
	h, err := ChooseHosts(snapshot, []string{"blue", "green"}, td, daemonOn, othersOn)
	if err != nil {
		t.Fatal(err)
	}
	// a, b: ACTIVE in the pools; e: draining, keeps its daemon task while another task
	// runs there; f: draining with only the daemon's task (it goes); g: draining without
	// the daemon's task (none is started); c, d: outside the pools; h: inactive.
	if want := []string{"a", "b", "e"}; !slices.Equal(h.Eligible, want) {
		t.Fatalf("eligible %v, want %v", h.Eligible, want)
	}
	if h.ProviderOf["a"] != "blue" || h.ProviderOf["b"] != "green" || h.ProviderOf["e"] != "blue" {
		t.Fatalf("providers %v", h.ProviderOf)
	}
	if len(h.Held) != 1 || !h.Held["e"] {
		t.Fatalf("held %v, want only e", h.Held)
	}
	// No pool named: no host.
	if h, _ := ChooseHosts(snapshot, nil, td, daemonOn, othersOn); len(h.Eligible) != 0 {
		t.Fatalf("without capacity providers: %v", h.Eligible)
	}
}
