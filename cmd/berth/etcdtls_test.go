package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/berthhq/berth/pkg/pki"
	"github.com/spf13/cobra"
)

// TestSchedulerEtcdClientTLS runs `berth scheduler` (then `berth dns` and `berth lb`, which
// share its etcd flags) against an etcd member that serves
// TLS and requires client certificates (etcd's --client-cert-auth): with --etcd-cacert,
// --etcd-cert and --etcd-key it serves ECS calls (a cluster, a task definition and a
// RunTask, whose records land in that etcd); without the client certificate it stops at
// once saying etcd refused the handshake. (That RunTask places and runs a task over any
// etcd is the e2e suite's; here the cluster has no instance and RunTask answers so.)
func TestSchedulerEtcdClientTLS(t *testing.T) {
	dir := t.TempDir()
	path := func(n string) string { return filepath.Join(dir, n) }
	write := func(name string, b []byte) {
		if err := os.WriteFile(path(name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caPEM, caKey, err := pki.CreateCA(pki.CAOptions{CommonName: "etcd CA"})
	if err != nil {
		t.Fatal(err)
	}
	write("ca.pem", caPEM)
	// etcd's server certificate names 127.0.0.1 (a serving role's certificate does); the
	// scheduler's etcd client certificate is its own role certificate.
	for name, role := range map[string]pki.Role{"server": pki.RoleScheduler, "client": pki.RoleScheduler} {
		c, k, err := pki.CreateCert(caPEM, caKey, pki.CertOptions{Role: role, CommonName: name})
		if err != nil {
			t.Fatal(err)
		}
		write(name+".pem", c)
		write(name+"-key.pem", k)
	}

	cfg := embed.NewConfig()
	cfg.Dir = path("etcd")
	cfg.LogLevel = "error"
	cfg.UnsafeNoFsync = true
	clientURL, _ := url.Parse("https://" + freeAddr(t))
	peerURL, _ := url.Parse("http://" + freeAddr(t))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*clientURL}, []url.URL{*clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peerURL}, []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: path("server.pem"), KeyFile: path("server-key.pem"), TrustedCAFile: path("ca.pem"), ClientCertAuth: true}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		t.Fatal("etcd not ready")
	}

	run := func(ctx context.Context, args ...string) (chan error, *lockedBuffer) {
		logs := &lockedBuffer{}
		cmd := schedulerCommand()
		cmd.SetArgs(append([]string{"--etcd-endpoints", clientURL.String(), "--log-dir", t.TempDir(), "--metrics-dir", t.TempDir()}, args...))
		cmd.SetOut(logs)
		cmd.SetErr(logs)
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(ctx) }()
		return done, logs
	}

	t.Run("without a client certificate", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		done, logs := run(ctx, "--listen", freeAddr(t), "--etcd-cacert", path("ca.pem"))
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "refused the TLS handshake") || !strings.Contains(err.Error(), "--etcd-cert") {
				t.Errorf("scheduler without an etcd client certificate: %v; want a TLS refusal naming --etcd-cert", err)
			}
			t.Logf("scheduler: %v", err)
		case <-time.After(30 * time.Second):
			t.Errorf("scheduler without an etcd client certificate still running after 30 s:\n%s", logs.String())
		}
	})

	t.Run("with the client certificate", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		listen := freeAddr(t)
		t.Setenv("BERTH_ADMIN_TOKEN", "etcd-tls-test-token")
		done, logs := run(ctx, "--listen", listen, "--etcd-cacert", path("ca.pem"), "--etcd-cert", path("client.pem"), "--etcd-key", path("client-key.pem"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := <-done; err != nil && ctx.Err() == nil {
				t.Errorf("scheduler: %v\n%s", err, logs.String())
			}
		}()
		// The scheduler listens without TLS (h2c on loopback): identity headers are
		// believed, which is what this test needs to drive the ECS API directly.
		c := &http.Client{Transport: h2cTransport(), Timeout: 20 * time.Second}
		id := http.Header{"Berth-Account": {"123456789012"}, "Berth-Region": {"us-east-1"}}
		ecs := "http://" + listen + "/berth.ecs.v1.EcsService/"
		call := func(method, body string) (int, string) {
			req, _ := http.NewRequest(http.MethodPost, ecs+method, strings.NewReader(body))
			req.Header = id.Clone()
			req.Header.Set("Content-Type", "application/json")
			res, err := c.Do(req)
			if err != nil {
				return 0, err.Error()
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return res.StatusCode, string(b)
		}
		var code int
		var body string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
			if code, body = call("CreateCluster", `{"clusterName":"tls"}`); code == http.StatusOK {
				break
			}
		}
		if code != http.StatusOK || !strings.Contains(body, "cluster/tls") {
			t.Fatalf("CreateCluster over etcd TLS: %d %s\n%s", code, body, logs.String())
		}
		if code, body = call("RegisterTaskDefinition", `{"family":"tls","containerDefinitions":[{"name":"a","image":"busybox","memory":16}]}`); code != http.StatusOK {
			t.Fatalf("RegisterTaskDefinition: %d %s", code, body)
		}
		// No container instance is registered: RunTask reads the cluster's instances
		// from etcd and answers as ECS does for an empty cluster.
		if code, body = call("RunTask", `{"cluster":"tls","taskDefinition":"tls"}`); code != http.StatusBadRequest || !strings.Contains(body, "No Container Instances were found in your cluster.") {
			t.Fatalf("RunTask: %d %s", code, body)
		}
		t.Logf("RunTask over etcd TLS: %s", body)
		// The records are in the TLS etcd, read with the same client certificate.
		tlsCfg, err := (transport.TLSInfo{CertFile: path("client.pem"), KeyFile: path("client-key.pem"), TrustedCAFile: path("ca.pem")}).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL.String()}, TLS: tlsCfg, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		res, err := cli.Get(t.Context(), "/berth/v1/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, kv := range res.Kvs {
			found = found || strings.Contains(string(kv.Key), "tls")
		}
		if !found {
			t.Errorf("no record of cluster tls among %d keys in etcd", len(res.Kvs))
		}
	})

	// `berth dns` and `berth lb` read the same etcd with the same flags: refused at once
	// without the client certificate, answering with it.
	t.Run("dns and lb", func(t *testing.T) {
		start := func(ctx context.Context, cmd *cobra.Command, args ...string) (chan error, *lockedBuffer) {
			logs := &lockedBuffer{}
			cmd.SetArgs(append([]string{"--etcd-endpoints", clientURL.String(), "--etcd-cacert", path("ca.pem")}, args...))
			cmd.SetOut(logs)
			cmd.SetErr(logs)
			done := make(chan error, 1)
			go func() { done <- cmd.ExecuteContext(ctx) }()
			return done, logs
		}
		dnsArgs := []string{"--account", "123456789012", "--region", "us-east-1", "--listen", freeAddr(t)}
		for name, cmd := range map[string]*cobra.Command{"dns": dnsCommand(), "lb": lbCommand()} {
			args := []string{"--listen-host", "127.0.0.1"}
			if name == "dns" {
				args = dnsArgs
			}
			done, logs := start(t.Context(), cmd, args...)
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "refused the TLS handshake") {
					t.Errorf("%s without an etcd client certificate: %v; want a TLS refusal", name, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("%s without an etcd client certificate still running after 30 s:\n%s", name, logs.String())
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		done, logs := start(ctx, dnsCommand(), append(dnsArgs[:len(dnsArgs):len(dnsArgs)], "--etcd-cert", path("client.pem"), "--etcd-key", path("client-key.pem"))...)
		defer func() { cancel(); <-done }()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), "dns answering"); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("dns with the etcd client certificate never answered:\n%s", logs.String())
			}
		}
	})
}

// h2cTransport returns a transport speaking HTTP/2 without TLS (the scheduler's plain
// listener).
func h2cTransport() *http.Transport {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Transport{Protocols: &p, DialContext: (&net.Dialer{}).DialContext}
}
