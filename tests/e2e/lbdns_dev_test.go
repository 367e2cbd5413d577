package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/tests/e2e/harness"
)

// TestLoadBalancerDNSNameOnDev: a load balancer's DNSName resolves through `berth dev`'s
// DNS server (the Cloud Map one, which tasks reach as 169.254.169.253) to the address
// the stack's lb binds listeners on, and an HTTP client that resolves it there reaches
// the listener: created with the AWS CLI, resolved with Go's own resolver pointed at the
// DNS server, fetched by name (issue 39 §6: the name resolved nowhere).
func TestLoadBalancerDNSNameOnDev(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	dnsAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	env := append(devEnv(t, filepath.Join(dir, "data")), "BERTH_DNS_ADDR="+dnsAddr, "BERTH_LB_LISTEN_HOST=127.0.0.1")
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	aws := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }

	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "behind "+r.Host) }))
	defer backend.Close()
	bport := backend.Listener.Addr().(*net.TCPAddr).Port
	lbArn := aws("elbv2", "create-load-balancer", "--name", "dnslb", "--query", "LoadBalancers[0].LoadBalancerArn", "--output", "text")
	name := aws("elbv2", "describe-load-balancers", "--load-balancer-arns", lbArn, "--query", "LoadBalancers[0].DNSName", "--output", "text")
	if !strings.HasPrefix(name, "dnslb-") || !strings.HasSuffix(name, ".elb.amazonaws.com") {
		t.Fatalf("DNSName = %q", name)
	}
	tg := aws("elbv2", "create-target-group", "--name", "dnstg", "--protocol", "HTTP", "--port", strconv.Itoa(bport), "--target-type", "ip",
		"--health-check-interval-seconds", "5", "--health-check-timeout-seconds", "2", "--healthy-threshold-count", "2",
		"--query", "TargetGroups[0].TargetGroupArn", "--output", "text")
	lport := harness.FreePort(t)
	aws("elbv2", "create-listener", "--load-balancer-arn", lbArn, "--protocol", "HTTP", "--port", strconv.Itoa(lport),
		"--default-actions", "Type=forward,TargetGroupArn="+tg)
	aws("elbv2", "register-targets", "--target-group-arn", tg, "--targets", "Id=127.0.0.1")

	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, dnsAddr)
	}}
	waitFor(t, func() (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		ips, err := resolver.LookupHost(ctx, name)
		return fmt.Sprintf("%s → %v %v", name, ips, err), err == nil && len(ips) == 1 && ips[0] == "127.0.0.1"
	})
	dialer := &net.Dialer{Resolver: resolver}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}
	url := "http://" + name + ":" + strconv.Itoa(lport) + "/"
	waitFor(t, func() (string, bool) {
		res, err := client.Get(url)
		if err != nil {
			return err.Error(), false
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return fmt.Sprintf("%d %s", res.StatusCode, b), res.StatusCode == 200 && strings.HasPrefix(string(b), "behind "+name)
	})

	// Deleted, the name no longer resolves here (it is forwarded, and nothing answers it).
	aws("elbv2", "delete-listener", "--listener-arn", aws("elbv2", "describe-listeners", "--load-balancer-arn", lbArn, "--query", "Listeners[0].ListenerArn", "--output", "text"))
	aws("elbv2", "delete-load-balancer", "--load-balancer-arn", lbArn)
	waitFor(t, func() (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		ips, err := resolver.LookupHost(ctx, name)
		return fmt.Sprintf("%s → %v %v", name, ips, err), !slices.Contains(ips, "127.0.0.1")
	})
}
