package main

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/cmd/berth/internal/agentcmd"
	"github.com/berthhq/berth/cmd/berth/internal/gatewaycmd"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestAgentFailsOverBetweenGateways runs an agent with two gateways (`--gateway
// https://B,https://C`) over one scheduler, all by their own commands with TLS. With B
// stopped, the agent's session is through C; B comes back and C stops: the session
// breaks and the agent opens a new one through B without a restart (the instance's
// presence key, which names the session, changes).
func TestAgentFailsOverBetweenGateways(t *testing.T) {
	s := startTLSStack(t)
	gf, af := s.files("gateway"), s.files("agent")
	logs := &lockedBuffer{}
	c := s.client(t, "")
	// startGateway runs a gateway on addr until the returned stop is called.
	startGateway := func(addr string) (stop func()) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		var done sync.WaitGroup
		cmd := gatewaycmd.Command("gateway")
		cmd.SetArgs([]string{"--scheduler-url", "https://" + s.schedAddr, "--listen", addr,
			"--tls-ca", gf.CA, "--tls-cert", gf.Cert, "--tls-key", gf.Key, "--require-agent-cert"})
		cmd.SetOut(logs)
		cmd.SetErr(logs)
		done.Go(func() { _ = cmd.ExecuteContext(ctx) })
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			res, err := c.Get("https://" + addr + "/")
			if err == nil {
				res.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("gateway %s never served HTTPS: %v", addr, err)
			}
		}
		stop = func() { cancel(); done.Wait() }
		t.Cleanup(stop)
		return stop
	}
	gwB, gwC := freeAddr(t), freeAddr(t)
	stopC := startGateway(gwC)

	creds := s.path("agent.env")
	if err := os.WriteFile(creds, []byte("BERTH_ACCESS_KEY_ID="+s.keyID+"\nBERTH_SECRET_ACCESS_KEY="+s.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// B is down when the agent starts: its calls go to C.
	s.run(agentcmd.Command("agent"), "--gateway", "https://"+gwB+",https://"+gwC,
		"--tls-ca", af.CA, "--tls-cert", af.Cert, "--tls-key", af.Key,
		"--cluster", "default", "--data-dir", s.path("agent"), "--containerd", s.path("no-containerd.sock"),
		"--credentials-file", creds, "--log-addr", freeAddr(t))

	// presence returns the session the instance's presence key names ("" without one).
	probe := keys.Presence(keys.Scope{Account: "123456789012", Region: "us-east-1"}, "default", "x")
	prefix := strings.TrimSuffix(probe, "x")
	presence := func() string {
		res, err := s.etcd.Get(t.Context(), prefix, clientv3.WithPrefix())
		if err != nil || len(res.Kvs) != 1 {
			return ""
		}
		return string(res.Kvs[0].Value)
	}
	waitSession := func(what string, ok func(string) bool) string {
		t.Helper()
		for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if p := presence(); p != "" && ok(p) {
				return p
			}
		}
		t.Fatalf("%s: presence %q\ngateways:\n%s\nstack:\n%s", what, presence(), logs.String(), s.logs.String())
		return ""
	}
	throughC := waitSession("the agent's session through C, with B down", func(string) bool { return true })

	startGateway(gwB)
	stopC()
	throughB := waitSession("a new session through B after C stopped", func(p string) bool { return p != throughC })
	t.Logf("session through C %q, then through B %q", throughC, throughB)
}
