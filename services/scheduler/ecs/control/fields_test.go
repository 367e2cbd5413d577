package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

var updateFieldTable = flag.Bool("update-fields", false, "rewrite docs/task-definition-fields.md from FieldRules")

const (
	fieldTablePath = "../../../../docs/task-definition-fields.md"
	modelPath      = "../../../../api/ecs/ecs-2014-11-13.json"
)

// requiredFieldShapes are the shapes issue 15 names; FieldShapes may add nested ones.
var requiredFieldShapes = []string{
	"RegisterTaskDefinitionRequest", "ContainerDefinition", "Volume", "TaskOverride", "ContainerOverride",
	"RunTaskRequest", "StartTaskRequest", "CreateServiceRequest", "UpdateServiceRequest",
}

// modelMembers reads the ECS model and returns each shape's member names.
func modelMembers(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(modelPath)
	if err != nil {
		t.Fatalf("read the ECS model: %v", err)
	}
	var model struct {
		Shapes map[string]struct {
			Members map[string]json.RawMessage `json:"members"`
		} `json:"shapes"`
	}
	if err := json.Unmarshal(b, &model); err != nil {
		t.Fatalf("parse the ECS model: %v", err)
	}
	out := map[string][]string{}
	for name, s := range model.Shapes {
		for m := range s.Members {
			out[name] = append(out[name], m)
		}
		sort.Strings(out[name])
	}
	return out
}

// tableRow is one row of the docs table.
type tableRow struct{ status, note, issue string }

// renderFieldTable writes the docs page from FieldRules.
func renderFieldTable() string {
	var b strings.Builder
	b.WriteString(`# Task definition, task and service fields: what Berth does with each

Every member of the request shapes a task definition, a task or a service is made from is
listed here with what Berth does with it:

- **honoured** — it changes what runs, and a test observes it;
- **refused** — the call fails with ` + "`ClientException`" + ` (RegisterTaskDefinition) or
  ` + "`InvalidParameterException`" + ` (RunTask, StartTask, CreateService, UpdateService) naming the
  member by its path (` + "`containerDefinitions[0].environmentFiles`" + `) and saying what Berth supports;
  where the note names values (only false, only json-file, …) those values are accepted and
  honoured and the others refused;
- **stored-only** — recorded and described back, used for nothing, as AWS itself only records
  it in that situation.

A member set to its zero value where the model has no presence (an unboxed ` + "`false`" + ` or
` + "`0`" + `, an empty list) is not set. A member a newer ECS model adds is refused until it is
classified here. The issue column names the Berth issue that will flip a refused member.

The table is ` + "`FieldRules`" + ` in services/scheduler/ecs/control/fields.go — the same data refuses
the calls. ` + "`TestFieldTableCoversModel`" + ` fails when a member of these shapes in
api/ecs/ecs-2014-11-13.json is missing here or this page drifts from the code; regenerate it
with ` + "`go test ./services/scheduler/ecs/control -run TestFieldTableCoversModel -update-fields`" + `.

`)
	counts := FieldCounts()
	fmt.Fprintf(&b, "Totals: %d honoured, %d refused, %d stored-only (%d members).\n",
		counts[Honoured], counts[Refused], counts[StoredOnly], len(FieldRules))
	for _, shape := range fieldShapes {
		fmt.Fprintf(&b, "\n## %s\n\n| Member | Status | Berth's answer | Issue |\n|---|---|---|---|\n", shape)
		for _, k := range FieldKeys() {
			s, member, _ := strings.Cut(k, ".")
			if s != shape {
				continue
			}
			r := FieldRules[k]
			issue := ""
			if r.Issue != 0 {
				issue = fmt.Sprintf("#%d", r.Issue)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", member, r.Status, strings.ReplaceAll(r.Supports, "|", `\|`), issue)
		}
	}
	return b.String()
}

// parseFieldTable reads the docs page back: "Shape.member" → row.
func parseFieldTable(t *testing.T, text string) map[string]tableRow {
	t.Helper()
	out := map[string]tableRow{}
	shape := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if s, ok := strings.CutPrefix(line, "## "); ok {
			shape = strings.TrimSpace(s)
			continue
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 4 {
			t.Fatalf("table row of %s has %d cells: %q", shape, len(cells), line)
		}
		member := strings.Trim(strings.TrimSpace(cells[0]), "`")
		key := shape + "." + member
		if _, dup := out[key]; dup {
			t.Errorf("%s is listed twice", key)
		}
		out[key] = tableRow{status: strings.TrimSpace(cells[1]), note: strings.TrimSpace(cells[2]), issue: strings.TrimSpace(cells[3])}
	}
	return out
}

func TestFieldTableCoversModel(t *testing.T) {
	if *updateFieldTable {
		if err := os.WriteFile(fieldTablePath, []byte(renderFieldTable()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(fieldTablePath)
	if err != nil {
		t.Fatalf("read the field table: %v", err)
	}
	rows := parseFieldTable(t, string(b))
	members := modelMembers(t)
	for _, s := range requiredFieldShapes {
		if !slices.Contains(fieldShapes, s) {
			t.Errorf("shape %s is not covered by FieldShapes", s)
		}
	}
	total := 0
	for _, shape := range fieldShapes {
		ms, ok := members[shape]
		if !ok {
			t.Errorf("shape %s is not in the ECS model", shape)
			continue
		}
		for _, m := range ms {
			total++
			key := shape + "." + m
			row, ok := rows[key]
			if !ok {
				t.Errorf("%s is in the ECS model but not in %s", key, fieldTablePath)
			}
			r, ok := FieldRules[key]
			if !ok {
				t.Errorf("%s is in the ECS model but not in FieldRules", key)
				continue
			}
			if row.status != string(r.Status) {
				t.Errorf("%s: the table says %q, FieldRules %q", key, row.status, r.Status)
			}
			if r.Status == Refused && r.Supports == "" {
				t.Errorf("%s is refused without saying what Berth supports", key)
			}
		}
	}
	for key := range rows {
		if _, ok := FieldRules[key]; !ok {
			t.Errorf("%s is in the table but not in FieldRules", key)
		}
	}
	if total != len(FieldRules) {
		t.Errorf("FieldRules has %d members, the model's shapes %d: some rule names no member", len(FieldRules), total)
	}
	if got := renderFieldTable(); got != string(b) {
		t.Errorf("%s differs from FieldRules; regenerate it with -update-fields", fieldTablePath)
	}
	c := FieldCounts()
	t.Logf("%d members: %d honoured, %d refused, %d stored-only", len(FieldRules), c[Honoured], c[Refused], c[StoredOnly])
}

// refusedCase is a request and the member CheckFields must name.
type refusedCase struct {
	name   string
	msg    proto.Message
	errTyp string
	want   string // the message's start
}

func ctr(mod func(*ecsv1.ContainerDefinition)) *ecsv1.ContainerDefinition {
	c := &ecsv1.ContainerDefinition{Name: proto.String("app"), Image: proto.String("img"), Memory: proto.Int32(32)}
	if mod != nil {
		mod(c)
	}
	return c
}

func regTD(mod func(*ecsv1.RegisterTaskDefinitionRequest)) *ecsv1.RegisterTaskDefinitionRequest {
	m := &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{ctr(nil)}}
	if mod != nil {
		mod(m)
	}
	return m
}

func TestCheckFields(t *testing.T) {
	t.Parallel()
	ok := []proto.Message{
		regTD(nil),
		regTD(func(m *ecsv1.RegisterTaskDefinitionRequest) {
			m.NetworkMode = proto.String("host")
			m.EnableFaultInjection = proto.Bool(false)
			m.ExecutionRoleArn = proto.String("arn:aws:iam::000000000000:role/x")
			m.Volumes = []*ecsv1.Volume{{Name: proto.String("v"), Host: &ecsv1.HostVolumeProperties{SourcePath: proto.String("/tmp")}}}
			m.ContainerDefinitions[0].Privileged = proto.Bool(false)
			m.ContainerDefinitions[0].LogConfiguration = &ecsv1.LogConfiguration{LogDriver: proto.String("json-file")}
			m.ContainerDefinitions[0].MountPoints = []*ecsv1.MountPoint{{SourceVolume: proto.String("v"), ContainerPath: proto.String("/v"), ReadOnly: proto.Bool(true)}}
			m.ContainerDefinitions[0].RestartPolicy = &ecsv1.ContainerRestartPolicy{Enabled: proto.Bool(false)}
		}),
		&ecsv1.RunTaskRequest{TaskDefinition: proto.String("f"), EnableExecuteCommand: false, ClientToken: proto.String("t")},
		&ecsv1.CreateServiceRequest{ServiceName: proto.String("s"), DeploymentController: &ecsv1.DeploymentController{Type: proto.String("ECS")}, LoadBalancers: []*ecsv1.LoadBalancer{},
			DeploymentConfiguration: &ecsv1.DeploymentConfiguration{MaximumPercent: proto.Int32(200), Alarms: &ecsv1.DeploymentAlarms{AlarmNames: []string{}},
				DeploymentCircuitBreaker: &ecsv1.DeploymentCircuitBreaker{Enable: true, Rollback: true}}},
	}
	for i, m := range ok {
		if err := CheckFields(ClientErr, m); err != nil {
			t.Errorf("accepted case %d refused: %v", i, err)
		}
	}
	for _, tc := range []refusedCase{
		{"environmentFiles", regTD(func(m *ecsv1.RegisterTaskDefinitionRequest) {
			m.ContainerDefinitions = append(m.ContainerDefinitions, ctr(func(c *ecsv1.ContainerDefinition) {
				c.EnvironmentFiles = []*ecsv1.EnvironmentFile{{Type: proto.String("s3"), Value: proto.String("arn:aws:s3:::b/x.env")}}
			}))
		}), ClientErr, "containerDefinitions[1].environmentFiles is not supported by Berth. Berth has no object store"},
		{"splunk", regTD(func(m *ecsv1.RegisterTaskDefinitionRequest) {
			m.ContainerDefinitions[0].LogConfiguration = &ecsv1.LogConfiguration{LogDriver: proto.String("splunk")}
		}), ClientErr, `containerDefinitions[0].logConfiguration.logDriver "splunk" is not supported by Berth.`},
		{"dockerSecurityOptions after honoured members", regTD(func(m *ecsv1.RegisterTaskDefinitionRequest) {
			m.ContainerDefinitions[0].LinuxParameters = &ecsv1.LinuxParameters{InitProcessEnabled: proto.Bool(true), Swappiness: proto.Int32(10), Tmpfs: []*ecsv1.Tmpfs{{ContainerPath: proto.String("/t"), Size: 1}}}
			m.ContainerDefinitions[0].StartTimeout = proto.Int32(30)
			m.ContainerDefinitions[0].DockerSecurityOptions = []string{"no-new-privileges"}
		}), ClientErr, "containerDefinitions[0].dockerSecurityOptions is not supported"},
		{"env files override", &ecsv1.RunTaskRequest{Overrides: &ecsv1.TaskOverride{ContainerOverrides: []*ecsv1.ContainerOverride{{Name: proto.String("a")}, {Name: proto.String("b"), EnvironmentFiles: []*ecsv1.EnvironmentFile{{Type: proto.String("s3"), Value: proto.String("arn:aws:s3:::b/k.env")}}}}}}, InvalidParamErr, "overrides.containerOverrides[1].environmentFiles is not supported"},
		{"service connect", &ecsv1.CreateServiceRequest{ServiceConnectConfiguration: &ecsv1.ServiceConnectConfiguration{Enabled: true}}, InvalidParamErr, "serviceConnectConfiguration is not supported"},
		{"blue/green", &ecsv1.UpdateServiceRequest{DeploymentController: &ecsv1.DeploymentController{Type: proto.String("CODE_DEPLOY")}}, InvalidParamErr, "deploymentController is not supported"},
	} {
		err := CheckFields(tc.errTyp, tc.msg)
		var e *awserr.Error
		if !errors.As(err, &e) {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.errTyp)
			continue
		}
		if e.Type != tc.errTyp || !strings.HasPrefix(e.Message, tc.want) {
			t.Errorf("%s: got %s: %q, want %s: %q…", tc.name, e.Type, e.Message, tc.errTyp, tc.want)
		}
	}
}

func TestCheckTaskDefinitionFields(t *testing.T) {
	t.Parallel()
	td, err := buildTaskDefinition(regTD(func(m *ecsv1.RegisterTaskDefinitionRequest) { m.PidMode = proto.String("host") }))
	if err != nil {
		t.Fatal(err)
	}
	td.Revision = 3
	if err := CheckTaskDefinitionFields(td); err != nil {
		t.Fatalf("a task definition of honoured fields: %v", err)
	}
	// Secrets are honoured (resolved at task start).
	td.ContainerDefinitions[0].Secrets = []*ecsv1.Secret{{Name: proto.String("A"), ValueFrom: proto.String("/param")}}
	if err := CheckTaskDefinitionFields(td); err != nil {
		t.Fatalf("a task definition with secrets: %v", err)
	}
	// As stored by a build that did not refuse environmentFiles yet.
	td.ContainerDefinitions[0].EnvironmentFiles = []*ecsv1.EnvironmentFile{{Type: proto.String("s3"), Value: proto.String("arn:aws:s3:::b/x.env")}}
	err = CheckTaskDefinitionFields(td)
	var e *awserr.Error
	if !errors.As(err, &e) || e.Type != InvalidParamErr || !strings.HasPrefix(e.Message, "Task definition f:3: containerDefinitions[0].environmentFiles is not supported by Berth.") {
		t.Fatalf("stored task definition with environmentFiles: %v", err)
	}
}
