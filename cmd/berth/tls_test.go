package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/cobra"

	"github.com/berthhq/berth/cmd/berth/internal/agentcmd"
	"github.com/berthhq/berth/cmd/berth/internal/gatewaycmd"
	"github.com/berthhq/berth/pkg/pki"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of several loggers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runCmd runs a cobra command to completion and returns its stdout.
func runCmd(t *testing.T, cmd *cobra.Command, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("%s %v: %v\n%s", cmd.Name(), args, err, errb.String())
	}
	return out.String()
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// tlsStack is a scheduler and a gateway run by their own commands with the certificates
// `berth tls` made, over an embedded etcd.
type tlsStack struct {
	dir               string
	schedAddr, gwAddr string
	// ecrAddr is the ECR registry's address, served over HTTPS with the scheduler's
	// certificate.
	ecrAddr       string
	token         string
	keyID, secret string
	logs          *lockedBuffer
	// etcd is the embedded member's client.
	etcd *clientv3.Client
	// run runs a command until the test ends, its output into logs.
	run func(cmd *cobra.Command, args ...string)
}

func (s *tlsStack) path(name string) string { return filepath.Join(s.dir, name) }

// files returns the pki.Files of role's certificate.
func (s *tlsStack) files(role string) pki.Files {
	return pki.Files{CA: s.path("berth-ca.pem"), Cert: s.path("berth-" + role + ".pem"), Key: s.path("berth-" + role + "-key.pem")}
}

// client returns an HTTP/2 TLS client presenting role's certificate ("" for none).
func (s *tlsStack) client(t *testing.T, role string) *http.Client {
	t.Helper()
	f := pki.Files{CA: s.path("berth-ca.pem")}
	if role != "" {
		f = s.files(role)
	}
	cfg, err := f.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}, Timeout: 10 * time.Second}
}

func startTLSStack(t *testing.T) *tlsStack {
	t.Helper()
	s := &tlsStack{dir: t.TempDir(), token: "berth-admin-test-" + fmt.Sprint(time.Now().UnixNano()), logs: &lockedBuffer{}}
	runCmd(t, tlsCommand(), "ca", "create", "--dir", s.dir)
	for _, role := range pki.Roles {
		runCmd(t, tlsCommand(), "cert", "create", "--role", string(role), "--dir", s.dir,
			"--ca", s.path("berth-ca.pem"), "--key", s.path("berth-ca-key.pem"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	etcd, err := etcdembed.Start(ctx, etcdembed.Config{Dir: filepath.Join(s.dir, "etcd"), ClientURL: "http://127.0.0.1:0", PeerURL: "http://127.0.0.1:0", UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait(); etcd.Close() })
	s.etcd = etcd.Client()
	t.Setenv("BERTH_ADMIN_TOKEN", s.token)
	s.schedAddr, s.gwAddr = freeAddr(t), freeAddr(t)
	run := func(cmd *cobra.Command, args ...string) {
		cmd.SetArgs(args)
		cmd.SetOut(s.logs)
		cmd.SetErr(s.logs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.ExecuteContext(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", cmd.Name(), err)
			}
		}()
	}
	s.run = run
	sf, gf := s.files("scheduler"), s.files("gateway")
	secretsKey := make([]byte, 32)
	_, _ = rand.Read(secretsKey)
	keyFile := s.path("secrets.key")
	if err := os.WriteFile(keyFile, []byte("k1:"+base64.StdEncoding.EncodeToString(secretsKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.ecrAddr = freeAddr(t)
	run(schedulerCommand(), "--etcd-endpoints", etcd.Endpoint(), "--listen", s.schedAddr, "--log-dir", t.TempDir(), "--metrics-dir", t.TempDir(),
		"--secrets-key-file", keyFile, "--ecr-listen", s.ecrAddr, "--ecr-blob-dir", t.TempDir(),
		"--tls-ca", sf.CA, "--tls-cert", sf.Cert, "--tls-key", sf.Key)
	run(gatewaycmd.Command("gateway"), "--scheduler-url", "https://"+s.schedAddr, "--listen", s.gwAddr,
		"--tls-ca", gf.CA, "--tls-cert", gf.Cert, "--tls-key", gf.Key, "--require-agent-cert")
	// Seed an account and key with the admin token over TLS (no client certificate).
	admin := func(args ...string) string {
		var out string
		deadline := time.Now().Add(20 * time.Second)
		for {
			cmd := adminCommand()
			var o, e bytes.Buffer
			cmd.SetArgs(append(args, "--scheduler-url", "https://"+s.schedAddr, "--tls-ca", sf.CA, "--token", s.token))
			cmd.SetOut(&o)
			cmd.SetErr(&e)
			err := cmd.ExecuteContext(t.Context())
			if err == nil {
				out = o.String()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("admin %v: %v %s", args, err, e.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
		return out
	}
	admin("account", "create", "123456789012")
	out := admin("key", "create", "123456789012", "--output", "env")
	for line := range strings.Lines(out) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "BERTH_ACCESS_KEY_ID":
			s.keyID = v
		case "BERTH_SECRET_ACCESS_KEY":
			s.secret = v
		}
	}
	if s.keyID == "" || s.secret == "" {
		t.Fatalf("key create output %q", out)
	}
	// Wait for the gateway's HTTPS listener.
	c := s.client(t, "")
	for deadline := time.Now().Add(20 * time.Second); ; {
		res, err := c.Get("https://" + s.gwAddr + "/")
		if err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway never served HTTPS: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return s
}

// connectCall posts a Connect unary JSON call and returns the status and body.
func connectCall(t *testing.T, c *http.Client, url string, header http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestTLSStack runs the scheduler and gateway commands with `berth tls` certificates and
// checks every trust rule of docs/security.md: HTTPS for the AWS CLI (--ca-bundle and
// AWS_CA_BUNDLE), identity headers only from gateway certificates, AdminService only for
// the admin token or an admin certificate, ResolveAccessKey only for gateways and admins,
// the agent API only for agent certificates, certificate rotation without a restart, and
// no secret in any log line.
func TestTLSStack(t *testing.T) {
	s := startTLSStack(t)
	ecs := "https://" + s.schedAddr + "/berth.ecs.v1.EcsService/ListClusters"
	adminURL := "https://" + s.schedAddr + "/berth.admin.v1.AdminService/"
	identity := http.Header{"Berth-Account": {"123456789012"}, "Berth-Region": {"us-east-1"}}
	_, noCLI := exec.LookPath("aws")
	aws := func(env []string, args ...string) (string, error) {
		cmd := exec.Command("aws", append(args, "--endpoint-url", "https://"+s.gwAddr, "--region", "us-east-1", "--output", "json")...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
			"AWS_ACCESS_KEY_ID=" + s.keyID, "AWS_SECRET_ACCESS_KEY=" + s.secret,
			"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
			"AWS_EC2_METADATA_DISABLED=true", "AWS_MAX_ATTEMPTS=1", "AWS_PAGER="}, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	t.Run("identity headers need a gateway certificate", func(t *testing.T) {
		for _, role := range []string{"client", "agent", "admin", "scheduler"} {
			code, body := connectCall(t, s.client(t, role), ecs, identity)
			if code != http.StatusForbidden || !strings.Contains(body, "permission_denied") {
				t.Errorf("%s certificate with forged Berth-Account: %d %s; want 403 permission_denied", role, code, body)
			}
		}
		if code, body := connectCall(t, s.client(t, ""), ecs, identity); code != http.StatusForbidden {
			t.Errorf("no client certificate: %d %s; want 403", code, body)
		}
		if code, body := connectCall(t, s.client(t, "gateway"), ecs, identity); code != http.StatusOK {
			t.Errorf("gateway certificate: %d %s", code, body)
		}
	})

	t.Run("AdminService needs the admin credential", func(t *testing.T) {
		list := adminURL + "ListAccounts"
		for _, tc := range []struct {
			role, token string
			want        int
		}{
			{"client", "", http.StatusUnauthorized},
			{"gateway", "", http.StatusUnauthorized},
			{"client", "wrong-token", http.StatusUnauthorized},
			{"client", s.token, http.StatusOK},
			{"admin", "", http.StatusOK},
		} {
			h := http.Header{}
			if tc.token != "" {
				h.Set("Authorization", "Bearer "+tc.token)
			}
			if code, body := connectCall(t, s.client(t, tc.role), list, h); code != tc.want {
				t.Errorf("ListAccounts as %s token %v: %d %s; want %d", tc.role, tc.token != "", code, body, tc.want)
			}
		}
		resolve := adminURL + "ResolveAccessKey"
		for role, want := range map[string]int{"": http.StatusForbidden, "client": http.StatusForbidden, "agent": http.StatusForbidden, "gateway": http.StatusNotFound, "admin": http.StatusNotFound} {
			if code, body := connectCall(t, s.client(t, role), resolve, nil); code != want {
				t.Errorf("ResolveAccessKey as %s: %d %s; want %d", role, code, body, want)
			}
		}
	})

	t.Run("agent API needs an agent certificate", func(t *testing.T) {
		url := "https://" + s.gwAddr + "/berth.agent.v1.AgentService/Register"
		if code, body := connectCall(t, s.client(t, "client"), url, nil); code != http.StatusForbidden || !strings.Contains(body, "AccessDeniedException") {
			t.Errorf("client certificate: %d %s", code, body)
		}
		if code, body := connectCall(t, s.client(t, "agent"), url, nil); code == http.StatusForbidden || code == 0 {
			t.Errorf("agent certificate refused: %d %s", code, body)
		}
	})

	logAddr := freeAddr(t)
	t.Run("agent session over mTLS", func(t *testing.T) {
		// The agent's bidi stream crosses both TLS hops (agent → gateway with its agent
		// certificate, gateway → scheduler with the gateway's), over HTTP/2 by ALPN. No
		// containerd is needed to register and hold the stream: the instance registers
		// as an involuntary drain whose statusReason names the missing containerd, and
		// the scheduler records the open session as the instance's presence key.
		creds := s.path("agent.env")
		if err := os.WriteFile(creds, []byte("BERTH_ACCESS_KEY_ID="+s.keyID+"\nBERTH_SECRET_ACCESS_KEY="+s.secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		af := s.files("agent")
		s.run(agentcmd.Command("agent"), "--gateway", "https://"+s.gwAddr, "--tls-ca", af.CA, "--tls-cert", af.Cert, "--tls-key", af.Key,
			"--cluster", "default", "--data-dir", s.path("agent"), "--containerd", s.path("no-containerd.sock"),
			"--credentials-file", creds, "--log-addr", logAddr)
		if noCLI != nil {
			t.Skip("the AWS CLI (`aws`) is not installed; CI installs it")
		}
		var last string
		for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			out, err := aws(nil, "ecs", "list-container-instances", "--cluster", "default", "--ca-bundle", s.path("berth-ca.pem"))
			var list struct{ ContainerInstanceArns []string }
			if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.ContainerInstanceArns) == 0 {
				last = out
				continue
			}
			last, _ = aws(nil, "ecs", "describe-container-instances", "--cluster", "default", "--container-instances", list.ContainerInstanceArns[0],
				"--ca-bundle", s.path("berth-ca.pem"))
			arn := list.ContainerInstanceArns[0]
			pkey := keys.Presence(keys.Scope{Account: "123456789012", Region: "us-east-1"}, "default", arn[strings.LastIndex(arn, "/")+1:])
			res, err := s.etcd.Get(t.Context(), pkey)
			if err == nil && len(res.Kvs) == 1 && strings.Contains(last, "no-containerd.sock") {
				// A missing containerd is loud: the agent's log says so, the instance's
				// statusReason (above) names it, and RunTask answers a failure.
				if !strings.Contains(s.logs.String(), "containerd not answering") {
					t.Error("the agent's log does not say containerd is missing")
				}
				if _, err := aws(nil, "ecs", "register-task-definition", "--family", "probe", "--container-definitions",
					`[{"name":"a","image":"x","memory":16}]`, "--ca-bundle", s.path("berth-ca.pem")); err != nil {
					t.Fatal(err)
				}
				out, err := aws(nil, "ecs", "run-task", "--cluster", "default", "--task-definition", "probe", "--ca-bundle", s.path("berth-ca.pem"))
				var run struct {
					Tasks    []any
					Failures []struct{ Reason string }
				}
				if err != nil || json.Unmarshal([]byte(out), &run) != nil || len(run.Tasks) != 0 || len(run.Failures) != 1 || run.Failures[0].Reason == "" {
					t.Errorf("RunTask without containerd: %v %s; want one failure with a reason", err, out)
				}
				return
			}
		}
		t.Fatalf("the agent's session never opened through the TLS gateway: %s\n%s", last, s.logs.String())
	})

	t.Run("agent log service over mTLS", func(t *testing.T) {
		// The agent above has TLS material: its log service (berth logs --agent, and its
		// /metrics) answers only client, admin and gateway certificates.
		metrics := "https://" + logAddr + "/metrics"
		var code int
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if res, err := s.client(t, "admin").Get(metrics); err == nil {
				code = res.StatusCode
				res.Body.Close()
				break
			}
		}
		if code != http.StatusOK {
			t.Fatalf("the agent's log service over mTLS with an admin certificate: %d", code)
		}
		for role, want := range map[string]int{"client": http.StatusOK, "gateway": http.StatusOK, "agent": http.StatusForbidden, "scheduler": http.StatusForbidden} {
			res, err := s.client(t, role).Get(metrics)
			if err != nil {
				t.Errorf("%s certificate: %v", role, err)
				continue
			}
			res.Body.Close()
			if res.StatusCode != want {
				t.Errorf("%s certificate: %d, want %d", role, res.StatusCode, want)
			}
		}
		if res, err := s.client(t, "").Get(metrics); err == nil {
			res.Body.Close()
			t.Errorf("no client certificate: %d, want a refused handshake", res.StatusCode)
		}
		if res, err := http.Get("http://" + logAddr + "/metrics"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				t.Error("plain HTTP read the log service")
			}
		}
		// berth logs: a client certificate reaches the service (the task is unknown to
		// it: not_found), an agent certificate is refused.
		berthLogs := func(role string) error {
			f := s.files(role)
			cmd := logsCommand()
			cmd.SetArgs([]string{"0123456789abcdef0123456789abcdef", "--agent", "https://" + logAddr, "--endpoint", "http://" + freeAddr(t),
				"--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			return cmd.ExecuteContext(t.Context())
		}
		if err := berthLogs("client"); err == nil || !strings.Contains(err.Error(), "not_found") {
			t.Errorf("berth logs with a client certificate: %v; want not_found from the log service", err)
		}
		if err := berthLogs("agent"); err == nil || !strings.Contains(err.Error(), "permission_denied") {
			t.Errorf("berth logs with an agent certificate: %v; want permission_denied", err)
		}
	})

	t.Run("AWS CLI over HTTPS", func(t *testing.T) {
		if noCLI != nil {
			t.Skip("the AWS CLI (`aws`) is not installed; CI installs it")
		}
		if out, err := aws(nil, "ecs", "create-cluster", "--cluster-name", "tls", "--ca-bundle", s.path("berth-ca.pem")); err != nil || !strings.Contains(out, "cluster/tls") {
			t.Errorf("create-cluster --ca-bundle: %v %s", err, out)
		}
		if out, err := aws([]string{"AWS_CA_BUNDLE=" + s.path("berth-ca.pem")}, "ecs", "list-clusters"); err != nil || !strings.Contains(out, "cluster/tls") {
			t.Errorf("list-clusters with AWS_CA_BUNDLE: %v %s", err, out)
		}
		if out, err := aws(nil, "ecs", "list-clusters"); err == nil || !strings.Contains(strings.ToLower(out), "ssl") {
			t.Errorf("list-clusters without the CA bundle: %v %s; want a certificate error", err, out)
		}
	})

	t.Run("ECR registry over HTTPS", func(t *testing.T) {
		// With --tls-cert the scheduler's ECR registry serves HTTPS with its certificate
		// (docs/ecr.md, "HTTPS on a LAN"): GetAuthorizationToken's proxyEndpoint says
		// https, a client trusting the deployment's CA pushes and pulls with the token,
		// and one that does not trust it is refused by its own TLS check.
		if noCLI != nil {
			t.Skip("the AWS CLI (`aws`) is not installed; CI installs it")
		}
		env := []string{"AWS_CA_BUNDLE=" + s.path("berth-ca.pem")}
		if out, err := aws(env, "ecr", "create-repository", "--repository-name", "team/web"); err != nil || !strings.Contains(out, s.ecrAddr+"/team/web") {
			t.Fatalf("create-repository: %v %s; want repositoryUri on %s", err, out, s.ecrAddr)
		}
		out, err := aws(env, "ecr", "get-authorization-token")
		if err != nil {
			t.Fatalf("get-authorization-token: %v %s", err, out)
		}
		var tok struct {
			AuthorizationData []struct{ AuthorizationToken, ProxyEndpoint string }
		}
		if err := json.Unmarshal([]byte(out), &tok); err != nil || len(tok.AuthorizationData) != 1 {
			t.Fatalf("get-authorization-token answer %s: %v", out, err)
		}
		if got, want := tok.AuthorizationData[0].ProxyEndpoint, "https://"+s.ecrAddr; got != want {
			t.Errorf("proxyEndpoint %q; want %q", got, want)
		}
		userPass, _ := base64.StdEncoding.DecodeString(tok.AuthorizationData[0].AuthorizationToken)
		user, pass, _ := strings.Cut(string(userPass), ":")
		auth := remote.WithAuth(&authn.Basic{Username: user, Password: pass})
		caPEM, err := os.ReadFile(s.path("berth-ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(caPEM)
		// As docker does with /etc/docker/certs.d/HOST:PORT/ca.crt: the CA, nothing else.
		trusting := remote.WithTransport(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true})
		ref, err := name.ParseReference(s.ecrAddr + "/team/web:v1")
		if err != nil {
			t.Fatal(err)
		}
		img, err := random.Image(1024, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img, auth, trusting); err != nil {
			t.Fatalf("push over HTTPS with the CA: %v", err)
		}
		want, _ := img.Digest()
		desc, err := remote.Get(ref, auth, trusting)
		if err != nil || desc.Digest != want {
			t.Fatalf("pull over HTTPS: %v, digest %v; want %v", err, desc, want)
		}
		if _, err := remote.Get(ref, auth); err == nil {
			t.Errorf("pull without the CA succeeded; want it refused (an unknown authority, and no plain HTTP)")
		}
	})

	t.Run("certificates reload on change", func(t *testing.T) {
		serial := func() string {
			cfg, _ := pki.Files{CA: s.path("berth-ca.pem")}.ClientConfig()
			conn, err := tls.Dial("tcp", s.gwAddr, cfg)
			if err != nil {
				t.Fatalf("dial gateway: %v", err)
			}
			defer conn.Close()
			return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
		}
		before := serial()
		runCmd(t, tlsCommand(), "cert", "create", "--role", "gateway", "--dir", s.dir, "--dns", "rotated.berth",
			"--ca", s.path("berth-ca.pem"), "--key", s.path("berth-ca-key.pem"))
		newCert, _ := os.ReadFile(s.path("berth-gateway-1.pem"))
		newKey, _ := os.ReadFile(s.path("berth-gateway-1-key.pem"))
		b, _ := pem.Decode(newCert)
		crt, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		// Replace both files by rename, as an operator's rotation (or cert-manager) does.
		for name, data := range map[string][]byte{"berth-gateway.pem": newCert, "berth-gateway-key.pem": newKey} {
			tmp := s.path(name + ".new")
			if err := os.WriteFile(tmp, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, s.path(name)); err != nil {
				t.Fatal(err)
			}
		}
		after := serial()
		if after == before || after != crt.SerialNumber.String() {
			t.Errorf("gateway serves serial %s after rotation (was %s); want the new certificate's %s", after, before, crt.SerialNumber)
		}
		// The gateway's client certificate to the scheduler is the same file: calls go on.
		if code, body := connectCall(t, s.client(t, "gateway"), ecs, identity); code != http.StatusOK {
			t.Errorf("after rotation: %d %s", code, body)
		}
	})

	t.Run("no secret in any log line", func(t *testing.T) {
		logs := s.logs.String()
		if !strings.Contains(logs, "scheduler listening") || !strings.Contains(logs, "gateway listening") {
			t.Fatalf("logs were not captured: %q", logs)
		}
		for name, secret := range map[string]string{"admin token": s.token, "secret access key": s.secret} {
			if strings.Contains(logs, secret) {
				t.Errorf("the %s appears in the logs", name)
			}
		}
		var lines int
		for line := range strings.Lines(logs) {
			var v map[string]any
			if json.Unmarshal([]byte(line), &v) == nil {
				lines++
			}
		}
		t.Logf("%d log lines checked", lines)
	})
}
