package control

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestRegionsAreIndependent: one account in two regions, with the same cluster, family
// and host names in both. Each region sees only its own resources, counts its own
// task definition revisions, writes its own region in every ARN, and answers an ARN of
// the other region as a resource that does not exist (MISSING / not found), as AWS does.
func TestRegionsAreIndependent(t *testing.T) {
	use := newEnv(t)
	euw := use.in("eu-west-1")

	for _, e := range []*env{use, euw} {
		c := e.createCluster("web")
		if want := "arn:aws:ecs:" + e.sc.Region + ":" + e.acc + ":cluster/web"; c.GetClusterArn() != want {
			t.Errorf("clusterArn = %s, want %s", c.GetClusterArn(), want)
		}
	}
	// Revision counters are per region: two revisions in us-east-1, the first in eu-west-1.
	use.simpleTaskDef("app", 128, 128)
	td2 := use.simpleTaskDef("app", 128, 128)
	tdEU := euw.simpleTaskDef("app", 128, 128)
	if td2.GetRevision() != 2 || tdEU.GetRevision() != 1 {
		t.Fatalf("revisions us-east-1 %d, eu-west-1 %d; want 2 and 1", td2.GetRevision(), tdEU.GetRevision())
	}
	if !strings.HasPrefix(tdEU.GetTaskDefinitionArn(), "arn:aws:ecs:eu-west-1:"+euw.acc+":task-definition/app:1") {
		t.Errorf("eu-west-1 task definition ARN %s", tdEU.GetTaskDefinitionArn())
	}

	// One host per region, same host id and cluster name.
	ciUS := use.registerHost("web", "host-1", 1024, 1024)
	ciEU := euw.registerHost("web", "host-1", 1024, 1024)
	if ciUS.GetContainerInstanceArn() == ciEU.GetContainerInstanceArn() || !strings.Contains(ciEU.GetContainerInstanceArn(), ":eu-west-1:") {
		t.Fatalf("instances %s and %s", ciUS.GetContainerInstanceArn(), ciEU.GetContainerInstanceArn())
	}

	// RunTask in each region lands on that region's host only.
	for _, tc := range []struct {
		e    *env
		td   string
		inst string
	}{{use, "app:2", ciUS.GetContainerInstanceArn()}, {euw, "app:1", ciEU.GetContainerInstanceArn()}} {
		run := must(tc.e, tc.e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String("web"), TaskDefinition: proto.String(tc.td), Count: proto.Int32(2)})
		if len(run.GetTasks()) != 2 {
			t.Fatalf("%s: RunTask placed %d tasks (failures %v)", tc.e.sc.Region, len(run.GetTasks()), run.GetFailures())
		}
		for _, task := range run.GetTasks() {
			if task.GetContainerInstanceArn() != tc.inst || !strings.Contains(task.GetTaskArn(), ":"+tc.e.sc.Region+":") {
				t.Errorf("%s: task %s on %s, want on %s", tc.e.sc.Region, task.GetTaskArn(), task.GetContainerInstanceArn(), tc.inst)
			}
		}
	}

	// Lists never show the other region.
	for _, e := range []*env{use, euw} {
		other := "us-east-1"
		if e.sc.Region == other {
			other = "eu-west-1"
		}
		lists := [][]string{
			must(e, e.s.ListClusters, &ecsv1.ListClustersRequest{}).GetClusterArns(),
			must(e, e.s.ListTaskDefinitions, &ecsv1.ListTaskDefinitionsRequest{}).GetTaskDefinitionArns(),
			must(e, e.s.ListContainerInstances, &ecsv1.ListContainerInstancesRequest{Cluster: proto.String("web")}).GetContainerInstanceArns(),
			must(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String("web")}).GetTaskArns(),
		}
		for i, l := range lists {
			if len(l) == 0 {
				t.Errorf("%s: list %d is empty", e.sc.Region, i)
			}
			for _, a := range l {
				if !strings.Contains(a, ":"+e.sc.Region+":") || strings.Contains(a, ":"+other+":") {
					t.Errorf("%s: list %d shows %s", e.sc.Region, i, a)
				}
			}
		}
		if n := e.describeCluster("web").GetRunningTasksCount() + e.describeCluster("web").GetPendingTasksCount(); n != 2 {
			t.Errorf("%s: cluster counts %d tasks, want its own 2", e.sc.Region, n)
		}
	}

	// An ARN of the other region names nothing here.
	d := must(use, use.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{"arn:aws:ecs:eu-west-1:" + use.acc + ":cluster/web"}})
	if len(d.GetClusters()) != 0 || len(d.GetFailures()) != 1 || d.GetFailures()[0].GetReason() != "MISSING" {
		t.Errorf("describe eu-west-1 cluster ARN in us-east-1: %v, failures %v", d.GetClusters(), d.GetFailures())
	}
	di := must(use, use.s.DescribeContainerInstances, &ecsv1.DescribeContainerInstancesRequest{Cluster: proto.String("web"), ContainerInstances: []string{ciEU.GetContainerInstanceArn()}})
	if len(di.GetContainerInstances()) != 0 || len(di.GetFailures()) != 1 || di.GetFailures()[0].GetReason() != "MISSING" {
		t.Errorf("describe eu-west-1 instance in us-east-1: %v, failures %v", di.GetContainerInstances(), di.GetFailures())
	}
	_, err := call(use, use.s.DescribeTaskDefinition, &ecsv1.DescribeTaskDefinitionRequest{TaskDefinition: proto.String(tdEU.GetTaskDefinitionArn())})
	wantErr(t, err, "ClientException")
	_, err = call(use, use.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String("arn:aws:ecs:eu-west-1:" + use.acc + ":cluster/web")})
	wantErr(t, err, "ClusterNotFoundException")

	// Deleting in one region leaves the other's cluster alone.
	euw.createCluster("solo")
	_, err = call(use, use.s.DeleteCluster, &ecsv1.DeleteClusterRequest{Cluster: proto.String("solo")})
	wantErr(t, err, "ClusterNotFoundException")
	if euw.describeCluster("solo").GetStatus() != "ACTIVE" {
		t.Error("eu-west-1 cluster solo is gone")
	}
}

// TestRegionsAccountSettingsAndTags: account settings and tags are per region, as on AWS.
func TestRegionsAccountSettingsAndTags(t *testing.T) {
	use := newEnv(t)
	euw := use.in("eu-west-1")
	must(use, use.s.PutAccountSetting, &ecsv1.PutAccountSettingRequest{Name: proto.String("tagResourceAuthorization"), Value: proto.String("off")})
	get := func(e *env) string {
		r := must(e, e.s.ListAccountSettings, &ecsv1.ListAccountSettingsRequest{Name: proto.String("tagResourceAuthorization"), EffectiveSettings: true})
		if len(r.GetSettings()) != 1 {
			t.Fatalf("%s: settings %v", e.sc.Region, r.GetSettings())
		}
		return r.GetSettings()[0].GetValue()
	}
	if us, eu := get(use), get(euw); us != "off" || eu == "off" {
		t.Errorf("tagResourceAuthorization us-east-1 %q, eu-west-1 %q; want off only in us-east-1", us, eu)
	}

	a := use.createCluster("tagged").GetClusterArn()
	euw.createCluster("tagged")
	must(use, use.s.TagResource, &ecsv1.TagResourceRequest{ResourceArn: proto.String(a), Tags: []*ecsv1.Tag{{Key: proto.String("k"), Value: proto.String("v")}}})
	euARN := strings.Replace(a, ":us-east-1:", ":eu-west-1:", 1)
	if tags := must(euw, euw.s.ListTagsForResource, &ecsv1.ListTagsForResourceRequest{ResourceArn: proto.String(euARN)}).GetTags(); len(tags) != 0 {
		t.Errorf("eu-west-1 cluster has tags %v", tags)
	}
	// The us-east-1 ARN, asked in eu-west-1, names nothing there.
	_, err := call(euw, euw.s.ListTagsForResource, &ecsv1.ListTagsForResourceRequest{ResourceArn: proto.String(a)})
	if err == nil {
		t.Error("eu-west-1 answered tags of a us-east-1 ARN")
	}
}

// TestOtherPartitionARNsNameNothing: Berth issues only "aws" ARNs, so an ARN of another
// partition ("aws-cn", "aws-us-gov") with this scope's account, region and names answers
// as an ARN of another region does — MISSING in DescribeClusters and
// DescribeContainerInstances, ClusterNotFoundException for RunTask and ListTasks,
// ClientException for DescribeTaskDefinition — instead of resolving to the "aws" resource.
func TestOtherPartitionARNsNameNothing(t *testing.T) {
	e := newEnv(t)
	e.createCluster("web")
	ci := e.registerHost("web", "host-1", 1024, 1024)
	td := e.simpleTaskDef("app", 128, 128)
	for _, part := range []string{"aws-cn", "aws-us-gov"} {
		swap := func(a string) string { return strings.Replace(a, "arn:aws:", "arn:"+part+":", 1) }
		clusterARN := swap("arn:aws:ecs:" + e.sc.Region + ":" + e.acc + ":cluster/web")
		d := must(e, e.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{clusterARN}})
		if len(d.GetClusters()) != 0 || len(d.GetFailures()) != 1 || d.GetFailures()[0].GetReason() != "MISSING" {
			t.Errorf("%s: DescribeClusters %v, failures %v", part, d.GetClusters(), d.GetFailures())
		}
		_, err := call(e, e.s.RunTask, &ecsv1.RunTaskRequest{Cluster: proto.String(clusterARN), TaskDefinition: proto.String("app")})
		wantErr(t, err, "ClusterNotFoundException")
		_, err = call(e, e.s.ListTasks, &ecsv1.ListTasksRequest{Cluster: proto.String(clusterARN)})
		wantErr(t, err, "ClusterNotFoundException")
		di := must(e, e.s.DescribeContainerInstances, &ecsv1.DescribeContainerInstancesRequest{Cluster: proto.String("web"), ContainerInstances: []string{swap(ci.GetContainerInstanceArn())}})
		if len(di.GetContainerInstances()) != 0 || len(di.GetFailures()) != 1 || di.GetFailures()[0].GetReason() != "MISSING" {
			t.Errorf("%s: DescribeContainerInstances %v, failures %v", part, di.GetContainerInstances(), di.GetFailures())
		}
		_, err = call(e, e.s.DescribeTaskDefinition, &ecsv1.DescribeTaskDefinitionRequest{TaskDefinition: proto.String(swap(td.GetTaskDefinitionArn()))})
		wantErr(t, err, "ClientException")
	}
	// The "aws" ARN still resolves.
	if d := must(e, e.s.DescribeClusters, &ecsv1.DescribeClustersRequest{Clusters: []string{"arn:aws:ecs:" + e.sc.Region + ":" + e.acc + ":cluster/web"}}); len(d.GetClusters()) != 1 {
		t.Fatalf("aws ARN: %v", d.GetFailures())
	}
}
