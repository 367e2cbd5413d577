package placement

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// The harness plays the planner (as Nomad's scheduler/tests does): a cluster is a list
// of in-memory instances, a case asks for a placement and checks the plan. No etcd.

type instOpt func(*Instance)

func attr(k, v string) instOpt { return func(in *Instance) { in.Attributes[k] = v } }
func ports(ps ...int32) instOpt {
	return func(in *Instance) {
		for _, p := range ps {
			in.Ports[p] = true
		}
	}
}
func tasks(n int) instOpt     { return func(in *Instance) { in.RunningTasks = n } }
func disconnected() instOpt   { return func(in *Instance) { in.AgentConnected = false } }
func status(s string) instOpt { return func(in *Instance) { in.Status = s } }
func ec2(id string) instOpt   { return func(in *Instance) { in.EC2InstanceID = id } }
func group(g string, n int) instOpt {
	return func(in *Instance) {
		if in.Groups == nil {
			in.Groups = map[string]int{}
		}
		in.Groups[g] = n
	}
}

func inst(id string, cpu, mem int64, opts ...instOpt) *Instance {
	in := &Instance{
		ID: id, ARN: "arn:aws:ecs:us-east-1:000000000000:container-instance/c/" + id,
		Status: "ACTIVE", AgentConnected: true, CPU: cpu, Memory: mem,
		Attributes: map[string]string{}, Ports: map[int32]bool{}, UDPPorts: map[int32]bool{},
	}
	for _, o := range opts {
		o(in)
	}
	return in
}

func chosen(p Plan) []string {
	var ids []string
	for _, c := range p.Choices {
		ids = append(ids, c.Instance.ID)
	}
	return ids
}

func reasons(p Plan) map[string]string {
	m := map[string]string{}
	for _, f := range p.Failures {
		m[lastSegment(f.Arn)] = f.Reason
	}
	return m
}

func TestEngine(t *testing.T) {
	small := Demand{CPU: 256, Memory: 256}
	cases := []struct {
		name      string
		cluster   []*Instance
		req       Request
		want      []string          // exact choices, in order; nil = don't check
		wantCount int               // number placed when want is nil
		fails     map[string]string // instance id → reason
	}{
		{
			name:    "binpack memory picks the fullest instance that fits",
			cluster: []*Instance{inst("a", 4096, 4096), inst("b", 4096, 1024), inst("c", 4096, 200)},
			req:     Request{Demand: small, Strategy: []Strategy{{Type: "binpack", Field: "memory"}}},
			want:    []string{"b"},
		},
		{
			name:    "binpack cpu keeps packing the same instance",
			cluster: []*Instance{inst("a", 1024, 4096), inst("b", 2048, 4096)},
			req:     Request{Demand: small, Count: 3, Strategy: []Strategy{{Type: "binpack", Field: "cpu"}}},
			want:    []string{"a", "a", "a"},
		},
		{
			name:    "spread instanceId balances task counts",
			cluster: []*Instance{inst("a", 4096, 4096, tasks(2)), inst("b", 4096, 4096), inst("c", 4096, 4096, tasks(1))},
			req:     Request{Demand: small, Count: 3, Strategy: []Strategy{{Type: "spread", Field: "instanceId"}}},
			want:    []string{"b", "b", "c"}, // b:0→1, then b=1,c=1 tie... resolved below
		},
		{
			name: "spread over a zone attribute then binpack memory",
			cluster: []*Instance{
				inst("a1", 4096, 4096, attr("zone", "a"), tasks(3)),
				inst("b1", 4096, 2048, attr("zone", "b")),
				inst("b2", 4096, 1024, attr("zone", "b")),
			},
			req: Request{Demand: small, Strategy: []Strategy{
				{Type: "spread", Field: "attribute:zone"}, {Type: "binpack", Field: "memory"},
			}},
			want: []string{"b2"},
		},
		{
			name:    "CPU and MEMORY failures per instance",
			cluster: []*Instance{inst("a", 100, 4096), inst("b", 4096, 100)},
			req:     Request{Demand: small},
			fails:   map[string]string{"a": ReasonCPU, "b": ReasonMemory},
		},
		{
			name:    "taken host port",
			cluster: []*Instance{inst("a", 4096, 4096, ports(80)), inst("b", 4096, 4096)},
			req:     Request{Demand: Demand{CPU: 1, Memory: 1, Ports: []int32{80}}, Count: 2},
			want:    []string{"b"},
			fails:   map[string]string{"a": ReasonPorts, "b": ReasonPorts},
		},
		{
			name:    "disconnected agent and draining instance",
			cluster: []*Instance{inst("a", 4096, 4096, disconnected()), inst("b", 4096, 4096, status("DRAINING"))},
			req:     Request{Demand: small},
			fails:   map[string]string{"a": ReasonAgent}, // RunTask does not report inactive instances
		},
		{
			name:      "distinctInstance places each task on its own instance",
			cluster:   []*Instance{inst("a", 4096, 4096), inst("b", 4096, 4096)},
			req:       Request{Demand: small, Count: 3, Constraints: []Constraint{{Type: "distinctInstance"}}},
			wantCount: 2,
			fails:     map[string]string{"a": ReasonAttribute, "b": ReasonAttribute},
		},
		{
			name: "memberOf with the cluster query language",
			cluster: []*Instance{
				inst("a", 4096, 4096, attr("ecs.instance-type", "t2.small"), attr("zone", "us-east-1a")),
				inst("b", 4096, 4096, attr("ecs.instance-type", "m5.large"), attr("zone", "us-east-1b")),
				inst("c", 4096, 4096, attr("ecs.instance-type", "t2.micro"), attr("zone", "us-east-1d")),
			},
			req: Request{Demand: small, Count: 2, Constraints: []Constraint{{
				Type: "memberOf", Expression: "attribute:ecs.instance-type =~ t2.* and attribute:zone != us-east-1d",
			}}},
			want: []string{"a", "a"},
		},
		{
			name:    "StartTask on named instances, one missing",
			cluster: []*Instance{inst("a", 4096, 4096), inst("b", 100, 4096)},
			req:     Request{Demand: small, Count: 2, Instances: []string{"b", "nope"}},
			fails:   map[string]string{"b": ReasonCPU, "nope": ReasonMissing},
		},
		{
			name:    "StartTask reports an inactive named instance",
			cluster: []*Instance{inst("a", 4096, 4096, status("DRAINING"))},
			req:     Request{Demand: small, Instances: []string{"a"}},
			fails:   map[string]string{"a": ReasonInactive},
		},
		{
			name:    "capacity runs out part-way",
			cluster: []*Instance{inst("a", 600, 4096)},
			req:     Request{Demand: small, Count: 3},
			want:    []string{"a", "a"},
			fails:   map[string]string{"a": ReasonCPU},
		},
		{
			name:    "task:group and ec2InstanceId built-ins",
			cluster: []*Instance{inst("a", 4096, 4096, group("service:db", 1), ec2("i-1")), inst("b", 4096, 4096, ec2("i-2")), inst("c", 4096, 4096, ec2("i-3"))},
			req: Request{Demand: small, Constraints: []Constraint{{
				Type: "memberOf", Expression: "not(task:group == service:db) and ec2InstanceId in ['i-1', 'i-2']",
			}}},
			want: []string{"b"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := make([]Instance, len(tc.cluster))
			for i, in := range tc.cluster {
				before[i] = *in
			}
			plan, err := NewEngine(rand.New(rand.NewPCG(1, 2))).Place(tc.cluster, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			got := chosen(plan)
			if tc.name == "spread instanceId balances task counts" {
				// b first (0 tasks); then b and c tie at 1, so the third lands on
				// whichever the second did not.
				if got[0] != "b" || len(got) != 3 || slices.Contains(got, "a") || !slices.Contains(got, "c") {
					t.Fatalf("choices %v", got)
				}
			} else if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Fatalf("choices %v, want %v", got, tc.want)
			}
			if tc.want == nil && tc.wantCount > 0 && len(got) != tc.wantCount {
				t.Fatalf("placed %d (%v), want %d", len(got), got, tc.wantCount)
			}
			if r := reasons(plan); len(tc.fails) > 0 || len(r) > 0 {
				if len(r) != len(tc.fails) {
					t.Fatalf("failures %v, want %v", plan.Failures, tc.fails)
				}
				for k, v := range tc.fails {
					if r[k] != v {
						t.Fatalf("failure for %s = %q, want %q (all %v)", k, r[k], v, plan.Failures)
					}
				}
			}
			for i, in := range tc.cluster {
				if in.CPU != before[i].CPU || in.Memory != before[i].Memory || in.RunningTasks != before[i].RunningTasks {
					t.Fatalf("snapshot instance %s modified", in.ID)
				}
			}
		})
	}
}

func TestEngineRandomSpreadsOverTime(t *testing.T) {
	cluster := []*Instance{inst("a", 1<<20, 1<<20), inst("b", 1<<20, 1<<20), inst("c", 1<<20, 1<<20)}
	eng := NewEngine(rand.New(rand.NewPCG(3, 4)))
	seen := map[string]int{}
	for range 300 {
		plan, err := eng.Place(cluster, Request{Demand: Demand{CPU: 1, Memory: 1}, Strategy: []Strategy{{Type: "random"}}})
		if err != nil {
			t.Fatal(err)
		}
		seen[plan.Choices[0].Instance.ID]++
	}
	for _, id := range []string{"a", "b", "c"} {
		if seen[id] < 50 {
			t.Fatalf("random placement skewed: %v", seen)
		}
	}
}

func busy() instOpt { return func(in *Instance) { in.Busy = true } }

// Where the strategy leaves a choice, an instance a commit in flight writes (Busy) loses
// it: random takes another feasible instance, and a busy instance loses every tie of
// spread and binpack; a busy instance still takes a task no other instance can, and a
// strategy's order is never overridden.
func TestEngineAvoidsBusyInstances(t *testing.T) {
	eng := NewEngine(rand.New(rand.NewPCG(5, 6)))
	d := Demand{CPU: 1, Memory: 1}
	place := func(cluster []*Instance, st ...Strategy) string {
		t.Helper()
		plan, err := eng.Place(cluster, Request{Demand: d, Strategy: st})
		if err != nil || len(plan.Choices) != 1 {
			t.Fatalf("plan %+v, %v", plan, err)
		}
		return plan.Choices[0].Instance.ID
	}
	var ten []*Instance
	for i := range 10 {
		opts := []instOpt{busy()}
		if i == 7 {
			opts = nil
		}
		ten = append(ten, inst("i"+strconv.Itoa(i), 1<<20, 1<<20, opts...))
	}
	for range 50 {
		if got := place(ten, Strategy{Type: "random"}); got != "i7" {
			t.Fatalf("random chose busy %s over the one idle instance i7", got)
		}
		if got := place(ten, Strategy{Type: "spread", Field: "instanceId"}); got != "i7" {
			t.Fatalf("spread (all tied) chose busy %s over i7", got)
		}
		if got := place(ten, Strategy{Type: "binpack", Field: "memory"}); got != "i7" {
			t.Fatalf("binpack (all tied) chose busy %s over i7", got)
		}
	}
	// The idle instance is full: the busy ones are the only choice.
	full := append(slices.Clone(ten[:7]), inst("i7", 0, 0))
	if got := place(full, Strategy{Type: "random"}); got == "i7" {
		t.Fatal("random chose the full instance")
	}
	// Binpack's order comes first: the busy instance with less memory left wins.
	if got := place([]*Instance{inst("roomy", 1<<20, 1<<20), inst("tight", 1<<20, 1<<10, busy())}, Strategy{Type: "binpack", Field: "memory"}); got != "tight" {
		t.Fatalf("binpack chose %s, want the busy but tighter instance", got)
	}
}

func TestEngineRejectsBadRequests(t *testing.T) {
	for _, req := range []Request{
		{Constraints: []Constraint{{Type: "memberOf", Expression: "attribute:x =="}}},
		{Constraints: []Constraint{{Type: "sameZone"}}},
		{Strategy: []Strategy{{Type: "binpack", Field: "disk"}}},
		{Strategy: []Strategy{{Type: "spread"}}},
	} {
		if _, err := NewEngine(rand.New(rand.NewPCG(1, 1))).Place(nil, req); err == nil {
			t.Errorf("%+v: no error", req)
		}
	}
}
