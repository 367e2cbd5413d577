package failover

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestFailover: with one replica gone (its port refuses connections), every call, read
// or write, lands on the live replica exactly once, and calls keep being balanced.
func TestFailover(t *testing.T) {
	var hits [2]atomic.Int32
	var srvs [2]*httptest.Server
	for i := range srvs {
		srvs[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			hits[i].Add(1)
			w.Write(b)
		}))
	}
	defer srvs[1].Close()
	lb, err := New(nil, []string{srvs[0].URL, srvs[1].URL})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: lb}
	call := func(method string) (string, error) {
		res, err := c.Post("http://scheduler/berth.ecs.v1.EcsService/"+method, "application/json", strings.NewReader(method))
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return string(b), err
	}
	for range 4 {
		if _, err := call("ListClusters"); err != nil {
			t.Fatal(err)
		}
	}
	if hits[0].Load() != 2 || hits[1].Load() != 2 {
		t.Errorf("balance: %d/%d calls, want 2/2", hits[0].Load(), hits[1].Load())
	}
	srvs[0].Close() // the replica is gone: its port refuses connections
	for _, m := range []string{"ListClusters", "RegisterTaskDefinition", "DescribeTasks", "RunTask"} {
		before := hits[1].Load()
		got, err := call(m)
		if err != nil || got != m {
			t.Errorf("%s after the loss: %q %v", m, got, err)
		}
		if n := hits[1].Load() - before; n != 1 {
			t.Errorf("%s reached the live replica %d times", m, n)
		}
	}
}

func TestIdempotent(t *testing.T) {
	for path, want := range map[string]bool{
		"/berth.ecs.v1.EcsService/DescribeClusters":       true,
		"/berth.ecs.v1.EcsService/ListTasks":              true,
		"/berth.admin.v1.AdminService/ResolveAccessKey":   true,
		"/berth.ecs.v1.EcsService/RunTask":                false,
		"/berth.ecs.v1.EcsService/RegisterTaskDefinition": false,
		"/berth.agent.v1.AgentService/Session":            false,
	} {
		if Idempotent(path) != want {
			t.Errorf("Idempotent(%s) = %v", path, !want)
		}
	}
}
