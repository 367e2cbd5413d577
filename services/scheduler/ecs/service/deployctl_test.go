package service

import (
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestStopServiceDeployment: a deployment stuck in progress (its tasks never start) is
// stopped with ROLLBACK — the service returns to the previous task definition and the
// deployment listing shows STOPPED and then ROLLBACK_SUCCESSFUL — and with ABORT — no new
// task starts and the old ones keep running; finished and unknown deployments answer
// AWS's errors, and ContinueServiceDeployment finds no hook awaiting action.
func TestStopServiceDeployment(t *testing.T) {
	e := newEnv(t, ReconcilerConfig{})
	e.host("h1", 4096, 4096)
	td1 := e.taskDef("stop", "img:1", 128, 128, false)
	td2 := e.taskDef("stop", "img:2", 128, 128, false)
	e.behave = func(t *ecsv1.Task) string {
		if t.GetTaskDefinitionArn() == td2 {
			return "hold"
		}
		return "run"
	}
	e.createService("web", td1, 2, nil)
	first := e.settle("web", 10).GetCurrentServiceDeployment()
	stop := func(arn, typ string) *ecsv1.StopServiceDeploymentResponse {
		t.Helper()
		req := &ecsv1.StopServiceDeploymentRequest{ServiceDeploymentArn: proto.String(arn)}
		if typ != "" {
			req.StopType = proto.String(typ)
		}
		return must(e, e.h.StopServiceDeployment, req)
	}
	_, err := call(e, e.h.StopServiceDeployment, &ecsv1.StopServiceDeploymentRequest{ServiceDeploymentArn: proto.String(first)})
	wantErr(t, err, "ConflictException") // finished
	_, err = call(e, e.h.StopServiceDeployment, &ecsv1.StopServiceDeploymentRequest{ServiceDeploymentArn: proto.String(first + "9")})
	wantErr(t, err, "ServiceDeploymentNotFoundException")
	_, err = call(e, e.h.StopServiceDeployment, &ecsv1.StopServiceDeploymentRequest{ServiceDeploymentArn: proto.String(first), StopType: proto.String("LATER")})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.h.ContinueServiceDeployment, &ecsv1.ContinueServiceDeploymentRequest{ServiceDeploymentArn: proto.String(first), HookId: proto.String("h")})
	wantErr(t, err, "InvalidParameterException")
	_, err = call(e, e.h.ContinueServiceDeployment, &ecsv1.ContinueServiceDeploymentRequest{ServiceDeploymentArn: proto.String(first + "9"), HookId: proto.String("h")})
	wantErr(t, err, "ServiceDeploymentNotFoundException")

	// ROLLBACK.
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskDefinition: proto.String(td2)})
	e.step()
	e.step()
	stuck := e.service("web").GetCurrentServiceDeployment()
	if got := stop(stuck, "").GetServiceDeploymentArn(); got != stuck {
		t.Fatalf("answered %s", got)
	}
	s := e.settle("web", 10)
	if s.GetTaskDefinition() != td1 || e.count("web").byTD[td2] != 0 || e.count("web").byTD[td1] != 2 {
		t.Fatalf("after rollback: td %s tasks %v", s.GetTaskDefinition(), e.count("web").byTD)
	}
	list := must(e, e.h.ListServiceDeployments, &ecsv1.ListServiceDeploymentsRequest{Cluster: proto.String("c1"), Service: proto.String("web")})
	got := map[string]string{}
	for _, b := range list.GetServiceDeployments() {
		got[b.GetServiceDeploymentArn()] = b.GetStatus()
	}
	if got[stuck] != "STOPPED" || got[s.GetCurrentServiceDeployment()] != "ROLLBACK_SUCCESSFUL" || got[first] != "SUCCESSFUL" {
		t.Fatalf("deployments %v (stopped %s, rollback %s)", got, stuck, s.GetCurrentServiceDeployment())
	}
	if !hasEvent(s, "deployment stopped by the user (ROLLBACK)") {
		t.Fatalf("events %v", s.GetEvents())
	}

	// ABORT: the new deployment launches no more; the old tasks stay.
	must(e, e.h.UpdateService, &ecsv1.UpdateServiceRequest{Cluster: proto.String("c1"), Service: proto.String("web"), TaskDefinition: proto.String(td2)})
	e.step()
	aborted := e.service("web").GetCurrentServiceDeployment()
	stop(aborted, StopAbort)
	for range 4 {
		e.step()
	}
	if c := e.count("web"); c.byTD[td1] < 1 {
		t.Fatalf("after abort: %v", c.byTD)
	}
	d := must(e, e.h.DescribeServiceDeployments, &ecsv1.DescribeServiceDeploymentsRequest{ServiceDeploymentArns: []string{aborted}})
	if len(d.GetServiceDeployments()) != 1 || d.GetServiceDeployments()[0].GetStatus() != "STOPPED" {
		t.Fatalf("aborted deployment %v", d)
	}
	_, err = call(e, e.h.StopServiceDeployment, &ecsv1.StopServiceDeploymentRequest{ServiceDeploymentArn: proto.String(aborted)})
	wantErr(t, err, "ConflictException")
}
