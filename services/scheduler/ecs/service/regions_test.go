package service

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// in returns a view of e acting for the same account in another region, with the same
// servers and reconciler (the leader's loop serves every region).
func (e *env) in(region string) *env {
	o := *e
	id := caller.Identity{Account: e.acc, Region: region}
	o.sc, o.ctx = keys.Scope{Account: e.acc, Region: region}, caller.With(context.Background(), id)
	return &o
}

// TestServicesInTwoRegions: a service of the same name in the same cluster name runs in
// us-east-1 and eu-west-1; one reconciler keeps each at its own desired count with tasks
// of its own region on its own region's host, and each region describes only its own.
func TestServicesInTwoRegions(t *testing.T) {
	use := newEnv(t, ReconcilerConfig{})
	euw := use.in("eu-west-1")
	must(euw, euw.ctl.CreateCluster, &ecsv1.CreateClusterRequest{ClusterName: proto.String(euw.cluster)})
	hosts := map[*env]string{use: use.host("h", 2048, 2048), euw: euw.host("h", 2048, 2048)}
	want := map[*env]int32{use: 2, euw: 3}
	for e := range hosts {
		td := e.taskDef("web", "img", 128, 128, false)
		s := e.createService("web", td, want[e], nil)
		if !strings.HasPrefix(s.GetServiceArn(), "arn:aws:ecs:"+e.sc.Region+":"+e.acc+":service/") {
			t.Errorf("service ARN %s", s.GetServiceArn())
		}
	}
	// Each env's fake agent drives its own region's tasks; both get passes.
	for range 10 {
		use.step()
		euw.step()
	}
	for e, host := range hosts {
		s := e.service("web")
		if s.GetRunningCount() != want[e] || s.GetDesiredCount() != want[e] {
			t.Errorf("%s: running %d desired %d, want %d", e.sc.Region, s.GetRunningCount(), s.GetDesiredCount(), want[e])
		}
		for _, rec := range e.tasks() {
			task := rec.GetTask()
			if task.GetLastStatus() == "RUNNING" && (task.GetContainerInstanceArn() != host || !strings.Contains(task.GetTaskArn(), ":"+e.sc.Region+":")) {
				t.Errorf("%s: task %s on %s", e.sc.Region, task.GetTaskArn(), task.GetContainerInstanceArn())
			}
		}
		other := map[string]string{"us-east-1": "eu-west-1", "eu-west-1": "us-east-1"}[e.sc.Region]
		otherARN := strings.Replace(s.GetServiceArn(), ":"+e.sc.Region+":", ":"+other+":", 1)
		d := must(e, e.h.DescribeServices, &ecsv1.DescribeServicesRequest{Cluster: proto.String(e.cluster), Services: []string{otherARN}})
		if len(d.GetServices()) != 0 || len(d.GetFailures()) != 1 || d.GetFailures()[0].GetReason() != "MISSING" {
			t.Errorf("%s: describe %s: %v, failures %v", e.sc.Region, otherARN, d.GetServices(), d.GetFailures())
		}
	}
}
