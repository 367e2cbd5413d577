package agentsession

import (
	"context"
	"slices"
	"strings"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/keys"
	"github.com/berthhq/berth/services/scheduler/store"
	"google.golang.org/protobuf/proto"
)

// watchRoutes keeps the agent's list of peer task subnets current: it watches the
// cluster's container instance records and sends TaskSubnetRoutes (every other instance
// that is not INACTIVE and has a task subnet and a host address) when the session opens
// with a non-empty list and whenever the list changes. It returns when ctx ends or a send fails.
func (ss *session) watchRoutes(ctx context.Context) error {
	recs := map[string]*storev1.ContainerInstanceRecord{}
	// Nothing is sent while the list is empty (a cluster without peers, every session of
	// the tests that read the stream message by message): an agent whose last peer went
	// away while it was disconnected removes that route with the next change.
	last := &agentv1.TaskSubnetRoutes{}
	return store.Watch(ctx, ss.srv.cfg.Etcd, keys.Instances(ss.account, ss.cluster), 0, func(ev store.Event[*storev1.ContainerInstanceRecord]) error {
		switch ev.Type {
		case store.EventResync:
			clear(recs)
			for _, it := range ev.Items {
				recs[it.Key] = it.Value
			}
		case store.EventPut:
			prev, had := recs[ev.Item.Key]
			recs[ev.Item.Key] = ev.Item.Value
			// Most puts are resource or status bookkeeping (every placement updates its
			// instance): only a change of what a route is made of rebuilds the list.
			if had && routeKey(prev) == routeKey(ev.Item.Value) {
				return nil
			}
		case store.EventDelete:
			delete(recs, ev.Item.Key)
		}
		routes := peerRoutes(ss.instance, recs)
		if proto.Equal(last, routes) {
			return nil
		}
		if err := ss.send(&agentv1.SessionResponse{Message: &agentv1.SessionResponse_TaskSubnetRoutes{TaskSubnetRoutes: routes}}); err != nil {
			return err
		}
		last = routes
		return nil
	})
}

// peerRoutes lists the routes to the task subnets of the instances in recs other than
// self (an instance id), sorted by subnet.
func peerRoutes(self string, recs map[string]*storev1.ContainerInstanceRecord) *agentv1.TaskSubnetRoutes {
	out := &agentv1.TaskSubnetRoutes{}
	for _, rec := range recs {
		ci := rec.GetContainerInstance()
		if sameInstance(ci.GetContainerInstanceArn(), self) || ci.GetStatus() == "INACTIVE" ||
			rec.GetTaskSubnet() == "" || rec.GetHostAddress() == "" {
			continue
		}
		out.Routes = append(out.Routes, &agentv1.TaskSubnetRoute{
			ContainerInstanceArn: ci.GetContainerInstanceArn(),
			Subnet:               rec.GetTaskSubnet(),
			HostAddress:          rec.GetHostAddress(),
		})
	}
	slices.SortFunc(out.Routes, func(a, b *agentv1.TaskSubnetRoute) int { return strings.Compare(a.GetSubnet(), b.GetSubnet()) })
	return out
}

// routeKey is what of an instance record peerRoutes reads.
func routeKey(rec *storev1.ContainerInstanceRecord) [4]string {
	ci := rec.GetContainerInstance()
	inactive := ""
	if ci.GetStatus() == "INACTIVE" {
		inactive = "INACTIVE"
	}
	return [4]string{ci.GetContainerInstanceArn(), inactive, rec.GetTaskSubnet(), rec.GetHostAddress()}
}
