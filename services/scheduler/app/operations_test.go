package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
)

var updateOperations = flag.Bool("update-operations", false, "rewrite docs/ecs-operations.md from control.Operations")

const (
	operationsPath = "../../../docs/ecs-operations.md"
	ecsModelPath   = "../../../api/ecs/ecs-2014-11-13.json"
)

// modelOperations returns the operation names of the ECS model, sorted.
func modelOperations(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(ecsModelPath)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Operations map[string]json.RawMessage `json:"operations"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(m.Operations))
	for k := range m.Operations {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// servedUnsupported calls every operation of the replica's ECS API with an empty request,
// through its Connect handler (App.Handler, over HTTP, with the gateway's identity
// headers), and returns those that answer UnsupportedFeatureException with the message
// control.UnsupportedMessage builds for them.
func servedUnsupported(t *testing.T) map[string]bool {
	t.Helper()
	a, err := New(Config{Etcd: etcdtest.Start(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	client := reflect.ValueOf(ecsv1connect.NewEcsServiceClient(srv.Client(), srv.URL, identityHeaders("123456789012", "us-east-1", nil)))
	ops := reflect.TypeFor[ecsv1connect.EcsServiceHandler]()
	out := map[string]bool{}
	for i := range ops.NumMethod() {
		m := ops.Method(i)
		reqType := m.Type.In(1) // *connect.Request[X]
		req := reflect.New(reqType.Elem())
		req.Elem().Field(0).Set(reflect.New(reqType.Elem().Field(0).Type.Elem()))
		res := client.MethodByName(m.Name).Call([]reflect.Value{reflect.ValueOf(context.Background()), req})
		if e, ok := res[1].Interface().(error); ok && e != nil {
			if ee, ok := awserr.FromConnect(e); ok && ee.Type == "UnsupportedFeatureException" && ee.Message == control.UnsupportedMessage(m.Name) {
				out[m.Name] = true
			}
		}
	}
	return out
}

// TestOperationTable keeps control.Operations, the ECS model and what the replica serves
// in step, and docs/ecs-operations.md rendered from them (-update-operations rewrites
// it): every model operation is in the table, exactly the unsupported ones answer
// UnsupportedFeatureException with the table's message (which names the operation and
// what Berth supports instead), and every stub or unsupported one says why.
func TestOperationTable(t *testing.T) {
	ops := modelOperations(t)
	if len(ops) != len(control.Operations) {
		t.Errorf("the model has %d operations, the table %d", len(ops), len(control.Operations))
	}
	unsup := servedUnsupported(t)
	for _, op := range ops {
		r, ok := control.Operations[op]
		if !ok {
			t.Errorf("%s: not in control.Operations", op)
			continue
		}
		if (r.Status == control.Unsupported) != unsup[op] {
			t.Errorf("%s: the table says %s, the replica answers unsupported=%v", op, r.Status, unsup[op])
		}
		if r.Status != control.Real && r.Why == "" {
			t.Errorf("%s: %s without a reason", op, r.Status)
		}
		if r.Status == control.Unsupported && (r.Instead == "" || !strings.Contains(control.UnsupportedMessage(op), op)) {
			t.Errorf("%s: the message %q must name it and what Berth supports instead", op, control.UnsupportedMessage(op))
		}
	}
	doc := renderOperations(ops)
	if *updateOperations {
		if err := os.WriteFile(operationsPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(operationsPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != doc {
		t.Fatalf("%s is out of date: run go test ./services/scheduler/app -run TestOperationTable -update-operations", operationsPath)
	}
}

func renderOperations(ops []string) string {
	count := map[control.OperationStatus]int{}
	for _, op := range ops {
		count[control.Operations[op].Status]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# ECS operations: what Berth serves

Every operation of the ECS model (api/ecs/ecs-2014-11-13.json, %d operations) with how
Berth serves it: **real** (AWS's semantics, observable), **stub** (AWS's shapes, but it
does not do what AWS does yet) or **unsupported** (UnsupportedFeatureException naming the
operation, why and what Berth supports instead — the message below). Generated from
control.Operations by TestOperationTable in services/scheduler/app, which also checks it
against what the scheduler answers; the e2e test TestOperationProbe calls all of them
through the gateway.

Today: %d real, %d stub, %d unsupported.

| operation | status | notes |
|---|---|---|
`, len(ops), count[control.Real], count[control.Stub], count[control.Unsupported])
	for _, op := range ops {
		r := control.Operations[op]
		note := r.Why
		if r.Status == control.Unsupported {
			note = control.UnsupportedMessage(op)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", op, r.Status, strings.ReplaceAll(note, "|", `\|`))
	}
	return b.String()
}
