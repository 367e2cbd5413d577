package lb

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
)

// BenchmarkProxy measures what the HTTP listener adds to a request: b.N sequential GETs
// straight to a target, b.N through a listener to the same target, and b.N through a
// bare httputil.ReverseProxy to it (the floor of any proxy built on net/http: one more
// loopback HTTP exchange), interleaved, one keep-alive client each; reported as p50/p99
// of each and the listener's p50 ratio to direct and to the bare proxy. The target does
// no work (it writes a constant body), so direct is one loopback HTTP exchange and the
// listener's path two: the ratio's floor is about 2 for any proxy. The same is then done
// b.N/10 times (at least 20) against a path where the target takes 1 ms per request
// (a sleep: a handler waiting on its database, say), whose ratio is what a client of a
// real service sees; the listener's added p50 (µs) is reported for both. CPU time per
// request (getrusage of the process, which is client, listener and target) is measured
// for each path in a block of b.N/2 requests: it is what load on the machine does not
// change. Last, for one second, requests/s through the listener from 16 concurrent clients.
func BenchmarkProxy(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := New(ctx, Config{ListenHost: "127.0.0.1", Sink: newMemSink()})
	defer s.Close(time.Second)
	body := []byte("hello from the target\n")
	target := newBackendFunc(b, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/work" {
			time.Sleep(time.Millisecond)
		}
		_, _ = w.Write(body)
	})
	port := freePort(b)
	tt := Target{Key: "/berth/v1/elb/targets/0/us-east-1/web/t", HealthKey: "/berth/v1/elb-health/0/us-east-1/web/t", ModRevision: 1,
		Record: &storev1.TargetRecord{Id: "127.0.0.1", Address: target}, Health: &storev1.TargetHealthRecord{State: elb.StateHealthy}}
	group := tg("web", "HTTP")
	group.HealthCheckIntervalSeconds = 300
	group.HealthCheckPath = "/"
	if err := s.Apply(Snapshot{
		LoadBalancers: []*storev1.LoadBalancerRecord{{LoadBalancerArn: lbArn, State: "active"}},
		TargetGroups:  []*storev1.TargetGroupRecord{group},
		Listeners:     []*storev1.ListenerRecord{{ListenerArn: lnArn, LoadBalancerArn: lbArn, Protocol: "HTTP", Port: port, DefaultActions: fwd(map[string]int32{"web": 1})}},
		Targets:       map[string][]Target{tgArn("web"): {tt}},
	}); err != nil {
		b.Fatal(err)
	}
	direct, viaLB := "http://"+target+"/", fmt.Sprintf("http://127.0.0.1:%d/", port)
	bare := httptest.NewServer(httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target}))
	defer bare.Close()
	viaBare := bare.URL + "/"
	client := func() *http.Client {
		return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, Proxy: nil}}
	}
	cd, cl, cb := client(), client(), client()
	get := func(c *http.Client, url string) time.Duration {
		t0 := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", url, resp.StatusCode)
		}
		return time.Since(t0)
	}
	for range 50 { // warm both connection pools
		get(cd, direct)
		get(cl, viaLB)
		get(cb, viaBare)
	}
	b.ResetTimer()
	ds, ls, bs := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	for range b.N {
		ds = append(ds, get(cd, direct))
		ls = append(ls, get(cl, viaLB))
		bs = append(bs, get(cb, viaBare))
	}
	b.StopTimer()
	slices.Sort(ds)
	slices.Sort(ls)
	slices.Sort(bs)
	pct := func(v []time.Duration, p float64) float64 {
		return float64(v[min(len(v)-1, int(float64(len(v))*p))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(ds, 0.5), "direct-p50-µs")
	b.ReportMetric(pct(ds, 0.99), "direct-p99-µs")
	b.ReportMetric(pct(ls, 0.5), "lb-p50-µs")
	b.ReportMetric(pct(ls, 0.99), "lb-p99-µs")
	b.ReportMetric(pct(ls, 0.5)/pct(ds, 0.5), "p50-ratio")
	b.ReportMetric(pct(bs, 0.5), "bare-p50-µs")
	b.ReportMetric(pct(bs, 0.99), "bare-p99-µs")
	b.ReportMetric(pct(ls, 0.5)/pct(bs, 0.5), "p50-ratio-vs-bare")
	b.ReportMetric(pct(ls, 0.5)-pct(ds, 0.5), "lb-added-p50-µs")

	// CPU per request (user + system, the whole process: client, listener and target),
	// each path in a block of its own: what the listener costs in work, whatever the
	// machine's load does to the latencies.
	cpuPer := func(c *http.Client, url string, n int) float64 {
		var r0, r1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		for range n {
			get(c, url)
		}
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		cpu := time.Duration(r1.Utime.Nano()-r0.Utime.Nano()) + time.Duration(r1.Stime.Nano()-r0.Stime.Nano())
		return float64(cpu.Nanoseconds()) / 1e3 / float64(n)
	}
	cpuN := max(b.N/2, 100)
	cpuD, cpuL, cpuB := cpuPer(cd, direct, cpuN), cpuPer(cl, viaLB, cpuN), cpuPer(cb, viaBare, cpuN)
	b.ReportMetric(cpuD, "direct-cpu-µs/req")
	b.ReportMetric(cpuL, "lb-cpu-µs/req")
	b.ReportMetric(cpuB, "bare-cpu-µs/req")
	b.ReportMetric(cpuL/cpuD, "cpu-ratio")

	// The same against a target taking 1 ms a request.
	workN := max(b.N/10, 20)
	ds, ls, bs = ds[:0], ls[:0], bs[:0]
	for range workN {
		ds = append(ds, get(cd, direct+"work"))
		ls = append(ls, get(cl, viaLB+"work"))
		bs = append(bs, get(cb, viaBare+"work"))
	}
	slices.Sort(ds)
	slices.Sort(ls)
	slices.Sort(bs)
	b.ReportMetric(pct(ds, 0.5), "work-direct-p50-µs")
	b.ReportMetric(pct(ds, 0.99), "work-direct-p99-µs")
	b.ReportMetric(pct(ls, 0.5), "work-lb-p50-µs")
	b.ReportMetric(pct(ls, 0.99), "work-lb-p99-µs")
	b.ReportMetric(pct(bs, 0.5), "work-bare-p50-µs")
	b.ReportMetric(pct(ls, 0.5)/pct(ds, 0.5), "work-p50-ratio")
	b.ReportMetric(pct(ls, 0.5)-pct(ds, 0.5), "work-lb-added-p50-µs")

	// Throughput through the one listener.
	var n int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Second)
	cc := client()
	for range 16 {
		wg.Go(func() {
			k := int64(0)
			for time.Now().Before(deadline) {
				get(cc, viaLB)
				k++
			}
			mu.Lock()
			n += k
			mu.Unlock()
		})
	}
	wg.Wait()
	b.ReportMetric(float64(n), "req/s")
	b.ReportMetric(0, "ns/op")
}
