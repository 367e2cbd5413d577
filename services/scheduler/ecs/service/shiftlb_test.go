package service

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// TestAdvancedConfigurationValidated checks CreateService's checks of
// loadBalancers[].advancedConfiguration against Berth's load balancer, and that
// syncWeights moves a production rule's weights to the PRIMARY deployment's side.
func TestAdvancedConfigurationValidated(t *testing.T) {
	w := newLBWorld(t, 1)
	ctx := context.Background()
	td := w.webTaskDef("web")
	port := int32(80)
	green, err := w.elb.CreateTargetGroup(ctx, w.sc, elb.TargetGroupInput{Name: "green", Protocol: "HTTP", Port: &port})
	if err != nil {
		t.Fatal(err)
	}
	lbs, err := w.elb.DescribeLoadBalancers(ctx, w.sc, nil, nil)
	if err != nil || len(lbs) != 1 {
		t.Fatalf("load balancers %v %v", lbs, err)
	}
	one := int32(1)
	zero := int32(0)
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port for the test listener
	if err != nil {
		t.Fatal(err)
	}
	lport := int32(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	l, err := w.elb.CreateListener(ctx, w.sc, elb.ListenerInput{LoadBalancerArn: lbs[0].GetLoadBalancerArn(), Protocol: "HTTP", Port: &lport,
		DefaultActions: []elb.ActionInput{{Type: "forward", ForwardGroups: []elb.WeightedInput{{TargetGroupArn: w.tgArn, Weight: &one}, {TargetGroupArn: green.GetTargetGroupArn(), Weight: &zero}}}}})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := w.elb.DescribeRules(ctx, w.sc, l.GetListenerArn(), nil)
	if err != nil {
		t.Fatal(err)
	}
	prodRule := rules[len(rules)-1].Record.GetRuleArn()
	// The first listener of newLBWorld forwards to blue only.
	others, err := w.elb.DescribeListeners(ctx, w.sc, lbs[0].GetLoadBalancerArn(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var blueOnly string
	for _, o := range others {
		if o.GetListenerArn() != l.GetListenerArn() {
			rs, _ := w.elb.DescribeRules(ctx, w.sc, o.GetListenerArn(), nil)
			blueOnly = rs[len(rs)-1].Record.GetRuleArn()
		}
	}
	lb := func(ac *ecsv1.AdvancedConfiguration) *ecsv1.LoadBalancer {
		return &ecsv1.LoadBalancer{TargetGroupArn: proto.String(w.tgArn), ContainerName: proto.String("app"), ContainerPort: proto.Int32(80), AdvancedConfiguration: ac}
	}
	bg := &ecsv1.DeploymentConfiguration{Strategy: proto.String(DeployBlueGreen)}
	create := func(name string, dc *ecsv1.DeploymentConfiguration, l *ecsv1.LoadBalancer) string {
		_, err := call(w.env, w.h.CreateService, &ecsv1.CreateServiceRequest{
			Cluster: proto.String(w.cluster), ServiceName: proto.String(name), TaskDefinition: proto.String(td),
			DesiredCount: proto.Int32(0), LoadBalancers: []*ecsv1.LoadBalancer{l}, DeploymentConfiguration: dc,
		})
		if err == nil {
			return ""
		}
		return err.Type + ": " + err.Message
	}
	missingTG := strings.Replace(w.tgArn, "targetgroup/web/", "targetgroup/nope/", 1)
	for _, c := range []struct {
		dc   *ecsv1.DeploymentConfiguration
		ac   *ecsv1.AdvancedConfiguration
		want string
	}{
		{bg, nil, "advancedConfiguration is required"},
		{nil, &ecsv1.AdvancedConfiguration{AlternateTargetGroupArn: proto.String(green.GetTargetGroupArn()), ProductionListenerRule: proto.String(prodRule)}, "only supported for the BLUE_GREEN"},
		{bg, &ecsv1.AdvancedConfiguration{AlternateTargetGroupArn: proto.String(missingTG), ProductionListenerRule: proto.String(prodRule)}, "alternateTargetGroupArn " + missingTG},
		{bg, &ecsv1.AdvancedConfiguration{AlternateTargetGroupArn: proto.String(w.tgArn), ProductionListenerRule: proto.String(prodRule)}, "must differ from targetGroupArn"},
		{bg, &ecsv1.AdvancedConfiguration{AlternateTargetGroupArn: proto.String(green.GetTargetGroupArn())}, "productionListenerRule are required"},
		{bg, &ecsv1.AdvancedConfiguration{AlternateTargetGroupArn: proto.String(green.GetTargetGroupArn()), ProductionListenerRule: proto.String(prodRule + "0")}, "the listener rule does not exist"},
		{bg, &ecsv1.AdvancedConfiguration{AlternateTargetGroupArn: proto.String(green.GetTargetGroupArn()), ProductionListenerRule: proto.String(blueOnly)}, "must have one forward action to exactly the target groups"},
	} {
		if got := create("v", c.dc, lb(c.ac)); !strings.Contains(got, "InvalidParameterException") || !strings.Contains(got, c.want) {
			t.Errorf("%v: got %q, want InvalidParameterException with %q", c.ac, got, c.want)
		}
	}
	ok := &ecsv1.AdvancedConfiguration{AlternateTargetGroupArn: proto.String(green.GetTargetGroupArn()), ProductionListenerRule: proto.String(prodRule), RoleArn: proto.String("arn:aws:iam::000000000001:role/r")}
	if got := create("bg", bg, lb(ok)); got != "" {
		t.Fatalf("valid blue/green service refused: %s", got)
	}
	// The service's only deployment is PRIMARY on the targetGroupArn side: the weights
	// become 100/0 (the listener had 1/0).
	rec, _, err := get[*storev1.ServiceRecord](ctx, sharedEtcd, keys.Service(w.sc, w.cluster, "bg"))
	if err != nil || rec == nil {
		t.Fatalf("service record: %v", err)
	}
	w.r.syncWeights(ctx, w.sc, rec)
	r, err := w.elb.RuleByARN(ctx, w.sc, prodRule)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := elb.ForwardGroups(r); g[w.tgArn] != 100 || g[green.GetTargetGroupArn()] != 0 {
		t.Fatalf("weights %v", g)
	}
	// DescribeServiceRevisions resolves the revision's target group and production rule.
	revArn := strings.Replace(rec.GetService().GetCurrentServiceDeployment(), ":service-deployment/", ":service-revision/", 1)
	revs := must(w.env, w.h.DescribeServiceRevisions, &ecsv1.DescribeServiceRevisionsRequest{ServiceRevisionArns: []string{revArn}})
	if rc := revs.GetServiceRevisions()[0].GetResolvedConfiguration().GetLoadBalancers(); len(rc) != 1 || rc[0].GetTargetGroupArn() != w.tgArn || rc[0].GetProductionListenerRule() != prodRule {
		t.Fatalf("resolvedConfiguration %v", rc)
	}
	findRecord(rec, primary(rec.GetService()).GetId()).Alternate = true
	w.r.syncWeights(ctx, w.sc, rec)
	r, _ = w.elb.RuleByARN(ctx, w.sc, prodRule)
	if g, _ := elb.ForwardGroups(r); g[w.tgArn] != 0 || g[green.GetTargetGroupArn()] != 100 {
		t.Fatalf("weights on the alternate side %v", g)
	}
}
