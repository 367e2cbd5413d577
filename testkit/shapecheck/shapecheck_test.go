package shapecheck_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berthhq/berth/testkit/shapecheck"
)

func model(t *testing.T) *shapecheck.Model {
	t.Helper()
	m, err := shapecheck.LoadFromRepo()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCheck(t *testing.T) {
	m := model(t)
	for _, tc := range []struct {
		name, op, body string
		want           []string // substrings, one per expected violation
	}{
		{"ok", "DescribeServices", `{"services":[{"serviceName":"web","deploymentConfiguration":{"alarms":{"alarmNames":[],"enable":false,"rollback":false}}}],"failures":[]}`, nil},
		{"missing required", "DescribeServices", `{"services":[{"deploymentConfiguration":{"alarms":{"enable":false,"rollback":false}}}]}`,
			[]string{"DescribeServices: services[0].deploymentConfiguration.alarms: missing required member alarmNames (DeploymentAlarms)"}},
		{"null required", "DescribeServices", `{"services":[{"deploymentConfiguration":{"alarms":{"alarmNames":null,"enable":false,"rollback":false}}}]}`,
			[]string{"missing required member alarmNames", "alarms.alarmNames: null list"}},
		{"unknown member", "ListClusters", `{"clusterArns":[],"bogus":1}`, []string{"bogus: member not defined by ListClustersResponse"}},
		{"wrong kind", "DescribeTaskDefinition", `{"taskDefinition":{"revision":"3","volumes":{}}}`,
			[]string{"taskDefinition.revision: want a number", "taskDefinition.volumes: want a list"}},
		{"map values", "DescribeTaskDefinition", `{"taskDefinition":{"containerDefinitions":[{"dockerLabels":{"a":1}}]}}`, []string{`dockerLabels["a"]: want a string`}},
		{"unknown operation", "Nope", `{}`, []string{"Nope: no such operation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := m.Check(tc.op, []byte(tc.body))
			if len(got) != len(tc.want) {
				t.Fatalf("violations %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %q lacks %q", got[i], w)
				}
			}
		})
	}
}

func TestRecorderHandlerAndTransport(t *testing.T) {
	m := model(t)
	rec := shapecheck.NewRecorder(m)
	srv := httptest.NewServer(rec.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == m.TargetPrefix+"DescribeClusters" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ClientException","message":"x"}`))
			return
		}
		_, _ = w.Write([]byte(`{"services":[{"deploymentConfiguration":{"alarms":{"enable":true,"rollback":true}}}]}`))
	})))
	defer srv.Close()
	client := &http.Client{Transport: rec.Transport(nil)}
	for _, op := range []string{"DescribeServices", "DescribeClusters"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		req.Header.Set("X-Amz-Target", m.TargetPrefix+op)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	// Both the server-side handler and the client-side transport saw the one 200 answer
	// and the one error answer (ClientException, a DescribeClusters model error).
	if got := rec.Checked(); got["DescribeServices"] != 2 || got["DescribeClusters"] != 0 {
		t.Errorf("checked %v", got)
	}
	if got := rec.ErrorsSeen(); len(got) != 1 || got["DescribeClusters"]["ClientException"] != 2 {
		t.Errorf("errors seen %v", got)
	}
	if v := rec.Violations(); len(v) != 2 || !strings.Contains(v[0], "alarmNames") {
		t.Errorf("violations %q", v)
	}
	if rec.Err() == nil {
		t.Error("Err() = nil with violations recorded")
	}
}

// TestCheckError checks error answers against the operation's model errors and the common
// ones: each case that must fail names the error type outside the list.
func TestCheckError(t *testing.T) {
	m := model(t)
	for _, tc := range []struct {
		name, op, body string
		want           string // substring of the one violation; "" for none
	}{
		{"model error", "DescribeServices", `{"__type":"ClusterNotFoundException","message":"Cluster not found."}`, ""},
		{"namespaced type", "DeleteService", `{"__type":"com.amazonaws.ecs#ServiceNotFoundException","message":"Service not found."}`, ""},
		{"common error", "ListClusters", `{"__type":"ThrottlingException","message":"Rate exceeded"}`, ""},
		{"signature", "ListClusters", `{"__type":"InvalidSignatureException","message":"x"}`, ""},
		{"unknown operation", "Nope", `{"__type":"UnknownOperationException","message":"x"}`, ""},
		{"unsupported action", "CreateCapacityProvider", `{"__type":"UnsupportedFeatureException","message":"Berth does not support CreateCapacityProvider yet."}`, ""},
		{"not in list", "ListClusters", `{"__type":"ClusterNotFoundException","message":"Cluster not found."}`,
			"ListClusters: error ClusterNotFoundException is not one of the operation's model errors"},
		{"service not active on delete", "DeleteService", `{"__type":"ServiceNotActiveException","message":"Service was not ACTIVE."}`,
			"error ServiceNotActiveException is not one"},
		{"unsupported field", "RegisterTaskDefinition", `{"__type":"UnsupportedFeatureException","message":"x is not supported."}`,
			"error UnsupportedFeatureException is not one"},
		{"other operation's error", "DescribeTaskDefinition", `{"__type":"ResourceNotFoundException","message":"x"}`,
			"error ResourceNotFoundException"},
		{"model error of unknown operation", "Nope", `{"__type":"ClientException","message":"x"}`, "error ClientException"},
		{"validation exception", "ListClusters", `{"__type":"ValidationException","message":"x"}`, "error ValidationException is not one"},
		{"no type", "ListClusters", `{"message":"x"}`, "without __type"},
		{"not JSON", "ListClusters", `<html>`, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := m.CheckError(tc.op, []byte(tc.body))
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("violations %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("violations %q, want one with %q", got, tc.want)
			}
		})
	}
	// The recorder keeps the violation of an error answer and reports it.
	rec := shapecheck.NewRecorder(m)
	rec.Record(m.TargetPrefix+"ListClusters", http.StatusBadRequest, []byte(`{"__type":"ServiceNotFoundException","message":"x"}`))
	if rec.Err() == nil || !strings.Contains(rec.Err().Error(), "ServiceNotFoundException") {
		t.Fatalf("Err() = %v", rec.Err())
	}
	if got := rec.ErrorsSeen()["ListClusters"]["ServiceNotFoundException"]; got != 1 {
		t.Fatalf("errors seen %v", rec.ErrorsSeen())
	}
}
