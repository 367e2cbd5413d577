package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"google.golang.org/protobuf/proto"
)

// maxListed bounds how many items of one kind a page lists (one page of the List action
// per 100, at most this many).
const maxListed = 300

// listAll follows a List action's nextToken up to maxListed results.
func listAll[T proto.Message](c *Console, r *http.Request, rq *request, action string, req func(token *string) T, arns func(any) ([]string, string)) ([]string, error) {
	var out []string
	var token *string
	for len(out) < maxListed {
		res, err := c.call(r, rq, action, req(token))
		if err != nil {
			return nil, err
		}
		got, next := arns(res)
		out = append(out, got...)
		if next == "" {
			break
		}
		token = &next
	}
	return out, nil
}

// capacity is a cluster's or instance's CPU and memory, registered and in use.
type capacity struct {
	CPU, CPUUsed, Mem, MemUsed int64
}

func (k *capacity) add(ci *ecsv1.ContainerInstance) {
	reg, rem := resources(ci.GetRegisteredResources()), resources(ci.GetRemainingResources())
	k.CPU += reg["CPU"]
	k.Mem += reg["MEMORY"]
	k.CPUUsed += reg["CPU"] - rem["CPU"]
	k.MemUsed += reg["MEMORY"] - rem["MEMORY"]
}

func resources(rs []*ecsv1.Resource) map[string]int64 {
	m := map[string]int64{}
	for _, r := range rs {
		m[r.GetName()] = int64(r.GetIntegerValue()) + r.GetLongValue() + int64(r.GetDoubleValue())
	}
	return m
}

// instances lists and describes a cluster's container instances.
func (c *Console) instances(r *http.Request, rq *request, cluster string) ([]*ecsv1.ContainerInstance, error) {
	arns, err := listAll(c, r, rq, "ListContainerInstances", func(tok *string) *ecsv1.ListContainerInstancesRequest {
		return &ecsv1.ListContainerInstancesRequest{Cluster: &cluster, NextToken: tok}
	}, func(m any) ([]string, string) {
		o := m.(*ecsv1.ListContainerInstancesResponse)
		return o.GetContainerInstanceArns(), o.GetNextToken()
	})
	if err != nil || len(arns) == 0 {
		return nil, err
	}
	var all []*ecsv1.ContainerInstance
	for chunk := range slices.Chunk(arns, 100) {
		out, err := c.call(r, rq, "DescribeContainerInstances", &ecsv1.DescribeContainerInstancesRequest{Cluster: &cluster, ContainerInstances: chunk})
		if err != nil {
			return nil, err
		}
		all = append(all, out.(*ecsv1.DescribeContainerInstancesResponse).GetContainerInstances()...)
	}
	return all, nil
}

// clusterRow is one line of the clusters page.
type clusterRow struct {
	*ecsv1.Cluster
	capacity
}

// clustersPage lists the account's clusters in the region with counts and capacity bars.
func (c *Console) clustersPage(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	arns, err := listAll(c, r, rq, "ListClusters", func(tok *string) *ecsv1.ListClustersRequest {
		return &ecsv1.ListClustersRequest{NextToken: tok}
	}, func(m any) ([]string, string) {
		o := m.(*ecsv1.ListClustersResponse)
		return o.GetClusterArns(), o.GetNextToken()
	})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	var rows []clusterRow
	for chunk := range slices.Chunk(arns, 100) {
		out, err := c.call(r, rq, "DescribeClusters", &ecsv1.DescribeClustersRequest{Clusters: chunk})
		if err != nil {
			c.fail(w, r, err)
			return
		}
		for _, cl := range out.(*ecsv1.DescribeClustersResponse).GetClusters() {
			row := clusterRow{Cluster: cl}
			cis, err := c.instances(r, rq, cl.GetClusterName())
			if err != nil {
				c.fail(w, r, err)
				return
			}
			for _, ci := range cis {
				row.add(ci)
			}
			rows = append(rows, row)
		}
	}
	slices.SortFunc(rows, func(a, b clusterRow) int { return compare(a.GetClusterName(), b.GetClusterName()) })
	c.page(w, r, "clusters", "Clusters", map[string]any{"Clusters": rows})
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// tasks lists and describes tasks selected by req (RUNNING then STOPPED).
func (c *Console) tasks(r *http.Request, rq *request, cluster string, req func(desired string, tok *string) *ecsv1.ListTasksRequest) ([]*ecsv1.Task, error) {
	var arns []string
	for _, desired := range []string{"RUNNING", "STOPPED"} {
		got, err := listAll(c, r, rq, "ListTasks", func(tok *string) *ecsv1.ListTasksRequest { return req(desired, tok) },
			func(m any) ([]string, string) {
				o := m.(*ecsv1.ListTasksResponse)
				return o.GetTaskArns(), o.GetNextToken()
			})
		if err != nil {
			return nil, err
		}
		arns = append(arns, got...)
	}
	var all []*ecsv1.Task
	for chunk := range slices.Chunk(arns, 100) {
		out, err := c.call(r, rq, "DescribeTasks", &ecsv1.DescribeTasksRequest{Cluster: &cluster, Tasks: chunk})
		if err != nil {
			return nil, err
		}
		all = append(all, out.(*ecsv1.DescribeTasksResponse).GetTasks()...)
	}
	// Newest first.
	slices.SortStableFunc(all, func(a, b *ecsv1.Task) int {
		switch {
		case a.GetCreatedAt() > b.GetCreatedAt():
			return -1
		case a.GetCreatedAt() < b.GetCreatedAt():
			return 1
		}
		return 0
	})
	return all, nil
}

// services lists and describes a cluster's services.
func (c *Console) services(r *http.Request, rq *request, cluster string) ([]*ecsv1.Service, error) {
	arns, err := listAll(c, r, rq, "ListServices", func(tok *string) *ecsv1.ListServicesRequest {
		return &ecsv1.ListServicesRequest{Cluster: &cluster, NextToken: tok}
	}, func(m any) ([]string, string) {
		o := m.(*ecsv1.ListServicesResponse)
		return o.GetServiceArns(), o.GetNextToken()
	})
	if err != nil {
		return nil, err
	}
	var all []*ecsv1.Service
	for chunk := range slices.Chunk(arns, 10) {
		out, err := c.call(r, rq, "DescribeServices", &ecsv1.DescribeServicesRequest{Cluster: &cluster, Services: chunk})
		if err != nil {
			return nil, err
		}
		all = append(all, out.(*ecsv1.DescribeServicesResponse).GetServices()...)
	}
	slices.SortFunc(all, func(a, b *ecsv1.Service) int { return compare(a.GetServiceName(), b.GetServiceName()) })
	return all, nil
}

// instanceRow is an instance with its capacity.
type instanceRow struct {
	*ecsv1.ContainerInstance
	capacity
}

// clusterPage shows one cluster: its services, tasks and container instances.
func (c *Console) clusterPage(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	name := r.PathValue("cluster")
	out, err := c.call(r, rq, "DescribeClusters", &ecsv1.DescribeClustersRequest{Clusters: []string{name}})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	cls := out.(*ecsv1.DescribeClustersResponse).GetClusters()
	if len(cls) == 0 {
		c.fail(w, r, &APIError{Type: "ClusterNotFoundException", Message: "Cluster not found."})
		return
	}
	svcs, err := c.services(r, rq, name)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	tasks, err := c.tasks(r, rq, name, func(desired string, tok *string) *ecsv1.ListTasksRequest {
		return &ecsv1.ListTasksRequest{Cluster: &name, DesiredStatus: &desired, NextToken: tok}
	})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	cis, err := c.instances(r, rq, name)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	rows := make([]instanceRow, len(cis))
	var total capacity
	for i, ci := range cis {
		rows[i].ContainerInstance = ci
		rows[i].add(ci)
		total.add(ci)
	}
	c.page(w, r, "cluster", "Cluster "+name, map[string]any{
		"Cluster": cls[0], "Name": name, "Services": svcs, "Tasks": tasks, "Instances": rows, "Capacity": total,
	})
}

// servicePage shows a service's counts, deployments, tasks and events, with the scale and
// force-new-deployment actions.
func (c *Console) servicePage(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	cluster, name := r.PathValue("cluster"), r.PathValue("service")
	out, err := c.call(r, rq, "DescribeServices", &ecsv1.DescribeServicesRequest{Cluster: &cluster, Services: []string{name}})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	svcs := out.(*ecsv1.DescribeServicesResponse).GetServices()
	if len(svcs) == 0 {
		c.fail(w, r, &APIError{Type: "ServiceNotFoundException", Message: "Service not found."})
		return
	}
	tasks, err := c.tasks(r, rq, cluster, func(desired string, tok *string) *ecsv1.ListTasksRequest {
		return &ecsv1.ListTasksRequest{Cluster: &cluster, ServiceName: &name, DesiredStatus: &desired, NextToken: tok}
	})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	events := svcs[0].GetEvents()
	if len(events) > 30 {
		events = events[:30]
	}
	c.page(w, r, "service", "Service "+name, map[string]any{
		"Cluster": cluster, "Service": svcs[0], "Tasks": tasks, "Events": events, "Done": r.URL.Query().Get("done"),
	})
}

// step is one entry of a task's status timeline.
type step struct {
	Status string
	At     float64
}

// taskPage shows a task: its status timeline, containers and network, with Stop.
func (c *Console) taskPage(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	t, ok := c.describeTask(w, r, rq)
	if !ok {
		return
	}
	timeline := []step{
		{"PROVISIONING", t.GetCreatedAt()},
		{"PENDING (pull started)", t.GetPullStartedAt()},
		{"PENDING (pull stopped)", t.GetPullStoppedAt()},
		{"RUNNING", t.GetStartedAt()},
		{"STOPPING", t.GetStoppingAt()},
		{"DEPROVISIONING (containers exited)", t.GetExecutionStoppedAt()},
		{"STOPPED", t.GetStoppedAt()},
	}
	c.page(w, r, "task", "Task "+taskID(t.GetTaskArn()), map[string]any{
		"Cluster": r.PathValue("cluster"), "Task": t, "ID": taskID(t.GetTaskArn()), "Timeline": timeline, "Done": r.URL.Query().Get("done"),
	})
}

// instancePage shows a container instance's resources, attributes and tasks, with
// drain and activate.
func (c *Console) instancePage(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	cluster := r.PathValue("cluster")
	out, err := c.call(r, rq, "DescribeContainerInstances", &ecsv1.DescribeContainerInstancesRequest{
		Cluster: &cluster, ContainerInstances: []string{r.PathValue("instance")}})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	cis := out.(*ecsv1.DescribeContainerInstancesResponse).GetContainerInstances()
	if len(cis) == 0 {
		c.fail(w, r, &APIError{Type: "ClientException", Message: "Container instance not found."})
		return
	}
	row := instanceRow{ContainerInstance: cis[0]}
	row.add(cis[0])
	arn := cis[0].GetContainerInstanceArn()
	tasks, err := c.tasks(r, rq, cluster, func(desired string, tok *string) *ecsv1.ListTasksRequest {
		return &ecsv1.ListTasksRequest{Cluster: &cluster, ContainerInstance: &arn, DesiredStatus: &desired, NextToken: tok}
	})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.page(w, r, "instance", "Container instance "+shortID(arn), map[string]any{
		"Cluster": cluster, "Instance": row, "ID": lastPart(arn), "Tasks": tasks, "Done": r.URL.Query().Get("done"),
	})
}

// family is one task definition family and its revisions, newest first.
type family struct {
	Name      string
	Revisions []string
}

// taskDefinitionsPage lists families and their ACTIVE revisions.
func (c *Console) taskDefinitionsPage(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	fams, err := listAll(c, r, rq, "ListTaskDefinitionFamilies", func(tok *string) *ecsv1.ListTaskDefinitionFamiliesRequest {
		return &ecsv1.ListTaskDefinitionFamiliesRequest{NextToken: tok, Status: ptr("ACTIVE")}
	}, func(m any) ([]string, string) {
		o := m.(*ecsv1.ListTaskDefinitionFamiliesResponse)
		return o.GetFamilies(), o.GetNextToken()
	})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	var list []family
	for _, f := range fams {
		arns, err := listAll(c, r, rq, "ListTaskDefinitions", func(tok *string) *ecsv1.ListTaskDefinitionsRequest {
			return &ecsv1.ListTaskDefinitionsRequest{FamilyPrefix: &f, Sort: ptr("DESC"), NextToken: tok}
		}, func(m any) ([]string, string) {
			o := m.(*ecsv1.ListTaskDefinitionsResponse)
			return o.GetTaskDefinitionArns(), o.GetNextToken()
		})
		if err != nil {
			c.fail(w, r, err)
			return
		}
		fam := family{Name: f}
		for _, a := range arns {
			name := lastPart(a) // family:revision
			if i := lastColon(name); i >= 0 && name[:i] == f {
				fam.Revisions = append(fam.Revisions, name[i+1:])
			}
		}
		list = append(list, fam)
	}
	c.page(w, r, "taskdefs", "Task definitions", map[string]any{"Families": list})
}

func lastColon(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ':' {
			return i
		}
	}
	return -1
}

// taskDefinitionPage shows one revision as the JSON DescribeTaskDefinition answers.
func (c *Console) taskDefinitionPage(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	ref := r.PathValue("family") + ":" + r.PathValue("revision")
	out, err := c.call(r, rq, "DescribeTaskDefinition", &ecsv1.DescribeTaskDefinitionRequest{TaskDefinition: &ref})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	td := out.(*ecsv1.DescribeTaskDefinitionResponse).GetTaskDefinition()
	raw, err := awsjson.Marshal(td)
	var pretty bytes.Buffer
	if err == nil {
		err = json.Indent(&pretty, raw, "", "  ")
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.page(w, r, "taskdef", "Task definition "+ref, map[string]any{"TaskDefinition": td, "JSON": pretty.String(), "Ref": ref})
}

// confirm renders the confirmation page of an action: the same form posted again with
// confirm=yes.
func (c *Console) confirm(w http.ResponseWriter, r *http.Request, question, back string, fields url.Values) {
	c.render(w, r, http.StatusOK, "confirm", map[string]any{
		"Title": "Confirm", "Question": question, "Action": r.URL.Path, "Back": back, "Fields": fields,
	})
}

// scaleService sets a service's desiredCount (UpdateService).
func (c *Console) scaleService(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	cluster, name := r.PathValue("cluster"), r.PathValue("service")
	back := "/console/clusters/" + url.PathEscape(cluster) + "/services/" + url.PathEscape(name)
	n, err := strconv.ParseInt(r.PostFormValue("desired_count"), 10, 32)
	if err != nil || n < 0 {
		c.fail(w, r, &APIError{Type: "InvalidParameterException", Message: "desiredCount must be a whole number of 0 or more."})
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		c.confirm(w, r, "Scale service "+name+" to "+strconv.FormatInt(n, 10)+" tasks?", back,
			url.Values{"desired_count": {strconv.FormatInt(n, 10)}})
		return
	}
	d := int32(n)
	if _, err := c.call(r, rq, "UpdateService", &ecsv1.UpdateServiceRequest{Cluster: &cluster, Service: &name, DesiredCount: &d}); err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, back+"?done=scaled", http.StatusSeeOther)
}

// forceDeployment starts a new deployment of the service's task definition.
func (c *Console) forceDeployment(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	cluster, name := r.PathValue("cluster"), r.PathValue("service")
	back := "/console/clusters/" + url.PathEscape(cluster) + "/services/" + url.PathEscape(name)
	if r.PostFormValue("confirm") != "yes" {
		c.confirm(w, r, "Force a new deployment of service "+name+"? Every task is replaced.", back, nil)
		return
	}
	if _, err := c.call(r, rq, "UpdateService", &ecsv1.UpdateServiceRequest{Cluster: &cluster, Service: &name, ForceNewDeployment: true}); err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, back+"?done=deployed", http.StatusSeeOther)
}

// stopTask stops a task (StopTask, with the reason given).
func (c *Console) stopTask(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	cluster, task := r.PathValue("cluster"), r.PathValue("task")
	back := "/console/clusters/" + url.PathEscape(cluster) + "/tasks/" + url.PathEscape(task)
	reason := r.PostFormValue("reason")
	if reason == "" {
		reason = "Stopped from the Berth console"
	}
	if r.PostFormValue("confirm") != "yes" {
		c.confirm(w, r, "Stop task "+task+"?", back, url.Values{"reason": {reason}})
		return
	}
	if _, err := c.call(r, rq, "StopTask", &ecsv1.StopTaskRequest{Cluster: &cluster, Task: &task, Reason: &reason}); err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, back+"?done=stopped", http.StatusSeeOther)
}

// instanceState drains or activates a container instance (UpdateContainerInstancesState).
func (c *Console) instanceState(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	cluster, inst := r.PathValue("cluster"), r.PathValue("instance")
	back := "/console/clusters/" + url.PathEscape(cluster) + "/instances/" + url.PathEscape(inst)
	status := r.PostFormValue("status")
	if status != "DRAINING" && status != "ACTIVE" {
		c.fail(w, r, &APIError{Type: "InvalidParameterException", Message: "status must be DRAINING or ACTIVE."})
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		verb := "Drain"
		if status == "ACTIVE" {
			verb = "Activate"
		}
		c.confirm(w, r, verb+" container instance "+inst+"?", back, url.Values{"status": {status}})
		return
	}
	out, err := c.call(r, rq, "UpdateContainerInstancesState", &ecsv1.UpdateContainerInstancesStateRequest{
		Cluster: &cluster, ContainerInstances: []string{inst}, Status: &status})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if f := out.(*ecsv1.UpdateContainerInstancesStateResponse).GetFailures(); len(f) > 0 {
		c.fail(w, r, &APIError{Type: "ClientException", Message: f[0].GetReason() + ": " + f[0].GetDetail()})
		return
	}
	http.Redirect(w, r, back+"?done="+strings.ToLower(status), http.StatusSeeOther)
}
