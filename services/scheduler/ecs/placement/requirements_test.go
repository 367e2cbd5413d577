package placement

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

// host is an ACTIVE, connected instance with room for anything, of the given attributes
// and missing capabilities.
func host(id string, attrs, missing map[string]string) *Instance {
	return &Instance{ID: id, ARN: "arn:aws:ecs:us-east-1:000000000000:container-instance/c/" + id, Status: "ACTIVE",
		AgentConnected: true, Attributes: attrs, Missing: missing, CPU: 4096, Memory: 4096}
}

// linuxAgent is what a Berth agent with the CNI plugins registers.
func linuxAgent(arch string) map[string]string {
	return map[string]string{AttrOSType: "linux", AttrCPUArchitecture: arch, AttrCNIPluginVersion: "v1.1.1", AttrTaskENI: "",
		AttrLoggingDriverPrefix + "json-file": "", AttrLoggingDriverPrefix + "awslogs": "", AttrTaskIAMRole: "", AttrTaskIAMRoleNetworkHost: ""}
}

// TestPlatformRequirements derives a task's needs from its definition as ECS derives
// required attributes: runtimePlatform, networkMode, log drivers, task role.
func TestPlatformRequirements(t *testing.T) {
	names := func(td *ecsv1.TaskDefinition) []string {
		var out []string
		for _, r := range PlatformRequirements(td) {
			s := r.Attribute
			if r.Value != "" {
				s += "=" + r.Value
			}
			out = append(out, s)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		td   *ecsv1.TaskDefinition
		want []string
	}{
		{"default bridge", &ecsv1.TaskDefinition{}, []string{AttrCNIPluginVersion}},
		{"none", &ecsv1.TaskDefinition{NetworkMode: proto.String("none")}, []string{AttrCNIPluginVersion}},
		{"host", &ecsv1.TaskDefinition{NetworkMode: proto.String("host")}, nil},
		{"awsvpc arm64 linux", &ecsv1.TaskDefinition{NetworkMode: proto.String("awsvpc"),
			RuntimePlatform: &ecsv1.RuntimePlatform{CpuArchitecture: proto.String("ARM64"), OperatingSystemFamily: proto.String("LINUX")}},
			[]string{"ecs.cpu-architecture=arm64", "ecs.os-type=linux", AttrTaskENI}},
		{"windows", &ecsv1.TaskDefinition{NetworkMode: proto.String("host"),
			RuntimePlatform: &ecsv1.RuntimePlatform{OperatingSystemFamily: proto.String("WINDOWS_SERVER_2022_CORE")}},
			[]string{"ecs.os-type=windows"}},
		{"awslogs twice, role in host mode", &ecsv1.TaskDefinition{NetworkMode: proto.String("host"), TaskRoleArn: proto.String("arn:aws:iam::000000000000:role/r"),
			ContainerDefinitions: []*ecsv1.ContainerDefinition{
				{LogConfiguration: &ecsv1.LogConfiguration{LogDriver: proto.String("awslogs")}},
				{LogConfiguration: &ecsv1.LogConfiguration{LogDriver: proto.String("awslogs")}, LinuxParameters: &ecsv1.LinuxParameters{InitProcessEnabled: proto.Bool(true)}},
			}},
			[]string{AttrLoggingDriverPrefix + "awslogs", AttrDockerAPI125, AttrTaskIAMRole, AttrTaskIAMRoleNetworkHost}},
	} {
		if got := names(tc.td); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestPlaceMatchesPlatform places tasks by what their hosts registered: an ARM64 task
// only on the arm64 host, a WINDOWS task nowhere (ATTRIBUTE naming ecs.os-type), a bridge
// task not on the host whose agent reported the CNI plugins missing (the detail names
// the attribute and the plugin), an awsvpc task not where the scheduler had no task
// subnet; an instance registered without capability reports (an older agent) is taken
// to have the capabilities but not an architecture it does not register.
func TestPlaceMatchesPlatform(t *testing.T) {
	noCNI := linuxAgent("x86_64")
	delete(noCNI, AttrCNIPluginVersion)
	delete(noCNI, AttrTaskENI)
	missing := map[string]string{
		AttrCNIPluginVersion: `networkMode bridge unavailable: CNI plugin "bridge" not found in /tmp/empty (apt-get install containernetworking-plugins)`,
		AttrTaskENI:          `networkMode awsvpc unavailable: CNI plugin "bridge" not found in /tmp/empty (apt-get install containernetworking-plugins)`,
	}
	amd := host("amd", linuxAgent("x86_64"), nil)
	arm := host("arm", linuxAgent("arm64"), nil)
	bare := host("bare", noCNI, missing)
	old := host("old", map[string]string{}, nil)
	td := func(mode, arch, os string) *ecsv1.TaskDefinition {
		td := &ecsv1.TaskDefinition{}
		if mode != "" {
			td.NetworkMode = proto.String(mode)
		}
		if arch != "" || os != "" {
			td.RuntimePlatform = &ecsv1.RuntimePlatform{}
			if arch != "" {
				td.RuntimePlatform.CpuArchitecture = proto.String(arch)
			}
			if os != "" {
				td.RuntimePlatform.OperatingSystemFamily = proto.String(os)
			}
		}
		return td
	}
	for _, tc := range []struct {
		name     string
		snapshot []*Instance
		td       *ecsv1.TaskDefinition
		want     []string // ids the task may land on; nil: refused
		detail   []string // with the failures' details containing these, in instance order
	}{
		{"arm64 lands on arm64 only", []*Instance{amd, arm, old}, td("host", "ARM64", "LINUX"), []string{"arm"}, nil},
		{"x86_64 linux", []*Instance{amd, arm}, td("host", "X86_64", "LINUX"), []string{"amd"}, nil},
		{"arm64 nowhere", []*Instance{amd, old}, td("host", "ARM64", ""), nil,
			[]string{"Attribute ecs.cpu-architecture is x86_64; runtimePlatform cpuArchitecture ARM64 needs arm64", "Missing attribute ecs.cpu-architecture (arm64), which runtimePlatform cpuArchitecture ARM64 needs"}},
		{"windows refused", []*Instance{amd}, td("host", "", "WINDOWS_SERVER_2019_CORE"), nil,
			[]string{"Attribute ecs.os-type is linux; runtimePlatform operatingSystemFamily WINDOWS_SERVER_2019_CORE needs windows"}},
		{"bridge not on the host without CNI", []*Instance{bare, amd, old}, td("", "", ""), []string{"amd", "old"}, nil},
		{"bridge nowhere", []*Instance{bare}, td("bridge", "", ""), nil,
			[]string{`Missing attribute ecs.capability.cni-plugin-version, which networkMode bridge needs: networkMode bridge unavailable: CNI plugin "bridge" not found in /tmp/empty`}},
		{"awsvpc nowhere", []*Instance{bare}, td("awsvpc", "", ""), nil,
			[]string{"Missing attribute ecs.capability.task-eni, which networkMode awsvpc needs"}},
		{"host runs without CNI", []*Instance{bare}, td("host", "X86_64", "LINUX"), []string{"bare"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEngine(rand.New(rand.NewPCG(1, 2)))
			seen := map[string]bool{}
			for range 20 {
				plan, err := e.Place(tc.snapshot, Request{Demand: Demand{CPU: 1, Memory: 1}, Constraints: RequiresAttributes(tc.td)})
				if err != nil {
					t.Fatal(err)
				}
				if tc.want == nil {
					if len(plan.Choices) != 0 || len(plan.Failures) != len(tc.detail) {
						t.Fatalf("placed %d, failures %+v; want refused with %d failures", len(plan.Choices), plan.Failures, len(tc.detail))
					}
					for i, f := range plan.Failures {
						if f.Reason != ReasonAttribute || !strings.Contains(f.Detail, tc.detail[i]) {
							t.Errorf("failure %d: %s %q, want ATTRIBUTE containing %q", i, f.Reason, f.Detail, tc.detail[i])
						}
					}
					return
				}
				if len(plan.Choices) != 1 {
					t.Fatalf("not placed: %+v", plan.Failures)
				}
				seen[plan.Choices[0].Instance.ID] = true
			}
			for id := range seen {
				if !slices.Contains(tc.want, id) {
					t.Errorf("placed on %s, want one of %v", id, tc.want)
				}
			}
		})
	}
	// A DAEMON service runs only where its tasks can run.
	ids, err := DaemonInstances([]*Instance{amd, arm, bare}, RequiresAttributes(td("", "ARM64", "")))
	if err != nil || !slices.Equal(ids, []string{"arm"}) {
		t.Errorf("DaemonInstances = %v, %v; want [arm]", ids, err)
	}
	ids, _ = DaemonInstances([]*Instance{amd, arm, bare}, RequiresAttributes(td("bridge", "", "")))
	if !slices.Equal(ids, []string{"amd", "arm"}) {
		t.Errorf("DaemonInstances of a bridge task = %v, want [amd arm]", ids)
	}
}

// TestFromRecordMissing carries the record's missing attributes into the view.
func TestFromRecordMissing(t *testing.T) {
	rec := &storev1.ContainerInstanceRecord{ContainerInstance: &ecsv1.ContainerInstance{Status: proto.String("ACTIVE")},
		MissingAttributes: map[string]string{AttrTaskENI: "no task subnet"}}
	if got := FromRecord("i", rec, 1).Missing[AttrTaskENI]; got != "no task subnet" {
		t.Errorf("Missing = %q", got)
	}
}
