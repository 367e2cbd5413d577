package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berthhq/berth/services/gateway"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(c *gateway.Config) { c.Registry = reg; c.ServeMetrics = true })
	c := sdkClient(e, devKey, devSecret)
	if _, err := c.ListClusters(t.Context(), &ecs.ListClustersInput{}); err != nil {
		t.Fatal(err)
	}
	_, _ = sdkClient(e, devKey, "wrong").ListClusters(t.Context(), &ecs.ListClustersInput{})

	body := get(t, e.url+"/metrics", http.StatusOK)
	for _, want := range []string{
		`berth_gateway_requests_total{action="ListClusters",code="200"} 1`,
		`berth_gateway_requests_total{action="unknown",code="400"} 1`,
		`berth_gateway_request_duration_seconds_bucket{action="ListClusters",code="200",le="+Inf"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestMetricsNotServedByDefault(t *testing.T) {
	e := newEnv(t, func(c *gateway.Config) { c.Registry = prometheus.NewRegistry() })
	body := get(t, e.url+"/metrics", http.StatusNotFound)
	if !strings.Contains(body, "UnknownOperationException") {
		t.Errorf("/metrics without ServeMetrics: %s", body)
	}
}

func get(t *testing.T, url string, status int) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		t.Fatalf("GET %s: %d, want %d: %s", url, res.StatusCode, status, data)
	}
	return string(data)
}
