package keys

import "testing"

func TestParseRoundTrips(t *testing.T) {
	s := Scope{Account: "123456789012", Region: "eu-west-1"}
	want := ClusterRef{Scope: s, Cluster: "prod"}
	for _, tc := range []struct {
		name  string
		parse func(string) (ClusterRef, string, bool)
		key   string
		last  string
	}{
		{"instance", ParseInstance, Instance(s, "prod", "i-1"), "i-1"},
		{"task", ParseTask, Task(s, "prod", "t1"), "t1"},
		{"service", ParseService, Service(s, "prod", "web"), "web"},
	} {
		c, last, ok := tc.parse(tc.key)
		if !ok || c != want || last != tc.last {
			t.Errorf("%s %s: %v %q %v, want %v %q", tc.name, tc.key, c, last, ok, want, tc.last)
		}
	}
	if got := want.String(); got != "123456789012/eu-west-1/prod" {
		t.Errorf("String: %q", got)
	}
	for _, bad := range []string{
		Task(s, "prod", "t1"),              // a task key is no service key
		Services(s, "prod"),                // a prefix
		Service(s, "prod", "web") + "/x",   // too deep
		"/berth/v1/services/123/eu/prod",   // no name
		"/berth/v1/services/123//prod/web", // empty region
		Cluster(s, "prod"),
	} {
		if c, n, ok := ParseService(bad); ok {
			t.Errorf("ParseService(%q) = %v %q, want not ok", bad, c, n)
		}
	}
	if id, ok := TaskListID(TaskList(s, "prod", "RUNNING", DimService, "a/b", "t9")); !ok || id != "t9" {
		t.Errorf("TaskListID: %q %v", id, ok)
	}
	for _, bad := range []string{TaskList(s, "prod", "RUNNING", DimService, "web", ""), Task(s, "prod", "t9")} {
		if id, ok := TaskListID(bad); ok {
			t.Errorf("TaskListID(%q) = %q, want not ok", bad, id)
		}
	}
	if AllServices() != "/berth/v1/services/" || AllTasks() != "/berth/v1/tasks/" || AllInstances() != "/berth/v1/instances/" {
		t.Errorf("prefixes: %s %s %s", AllServices(), AllTasks(), AllInstances())
	}
}
