package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"
)

// systemdRoles are the roles deploy/systemd/ has a unit for: berth-ROLE.service.
var systemdRoles = []string{"gateway", "scheduler", "agent", "lb", "dns"}

// TestSystemdUnits parses each unit of deploy/systemd/ and checks what docs/install.md
// promises of it: `berth ROLE $BERTH_ROLE_OPTS` from /etc/berth/ROLE.env, a restart
// policy, network-online ordering, and for every role but the agent the user berth and
// the sandboxing options (no new privileges, a read-only system, no capabilities but
// binding low ports for lb and dns); the agent stops alone (KillMode=process), so tasks
// outlive it. Where systemd-analyze is installed, `systemd-analyze verify` must accept
// each unit without a word (it reports a bad value as a warning and exits 0).
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	dir := filepath.Join(root, "deploy", "systemd")
	verifyDir := t.TempDir()
	for _, role := range systemdRoles {
		name := "berth-" + role + ".service"
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("deploy/systemd has no %s: %v", name, err)
		}
		sections, err := unit.DeserializeSections(strings.NewReader(string(data)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		opts := map[string]map[string][]string{}
		for _, s := range sections {
			opts[s.Section] = map[string][]string{}
			for _, e := range s.Entries {
				opts[s.Section][e.Name] = append(opts[s.Section][e.Name], e.Value)
			}
		}
		want := func(section, key, value string) {
			t.Helper()
			vs := opts[section][key]
			if len(vs) == 0 || vs[len(vs)-1] != value {
				t.Errorf("%s: [%s] %s = %q, want %q", name, section, key, vs, value)
			}
		}
		optsVar := "BERTH_" + strings.ToUpper(role) + "_OPTS"
		want("Service", "ExecStart", "/usr/local/bin/berth "+role+" $"+optsVar)
		want("Service", "EnvironmentFile", "/etc/berth/"+role+".env")
		want("Unit", "After", "network-online.target"+map[string]string{"scheduler": " etcd.service", "agent": " containerd.service"}[role])
		want("Install", "WantedBy", "multi-user.target")
		if r := opts["Service"]["Restart"]; len(r) == 0 || (r[0] != "on-failure" && r[0] != "always") {
			t.Errorf("%s: Restart = %q, want on-failure or always", name, r)
		}
		if role == "agent" {
			want("Service", "KillMode", "process")
			want("Service", "User", "root")
		} else {
			want("Service", "User", "berth")
			for k, v := range map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
				"PrivateDevices": "yes", "RestrictNamespaces": "yes", "MemoryDenyWriteExecute": "yes", "SystemCallFilter": "@system-service"} {
				want("Service", k, v)
			}
			caps := ""
			if role == "lb" || role == "dns" {
				caps = "CAP_NET_BIND_SERVICE"
			}
			want("Service", "CapabilityBoundingSet", caps)
		}
		// systemd-analyze verify wants the binary there: the unit as written, but with
		// this build's bin/berth.
		verified := strings.ReplaceAll(string(data), "/usr/local/bin/berth", filepath.Join(root, "bin", "berth"))
		if err := os.WriteFile(filepath.Join(verifyDir, name), []byte(verified), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Logf("systemd-analyze not installed: units checked by the parser only (apt-get install systemd)")
		return
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "berth")); err != nil {
		t.Fatalf("bin/berth is missing: run `make build` first (make test does)")
	}
	for _, role := range systemdRoles {
		name := filepath.Join(verifyDir, "berth-"+role+".service")
		out, err := exec.Command("systemd-analyze", "verify", name).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify berth-%s.service: %v\n%s", role, err, out)
		}
	}
}

// TestInstallDocFlags checks the flags docs/install.md writes into /etc/berth/ROLE.env
// (BERTH_ROLE_OPTS="…") against the real commands: `bin/berth ROLE OPTS --help` must
// accept every one, for every role with a unit, and the doc names each unit.
func TestInstallDocFlags(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "bin", "berth")); err != nil {
		t.Fatalf("bin/berth is missing: run `make build` first (make test does)")
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^BERTH_([A-Z]+)_OPTS="([^"]*)"$`).FindAllStringSubmatch(string(doc), -1) {
		role := strings.ToLower(m[1])
		found[role] = true
		args := append(append([]string{role}, strings.Fields(m[2])...), "--help")
		if out, err := exec.Command(filepath.Join(root, "bin", "berth"), args...).CombinedOutput(); err != nil {
			t.Errorf("docs/install.md's %s flags: berth %s: %v\n%s", role, strings.Join(args, " "), err, out)
		}
	}
	for _, role := range systemdRoles {
		if !found[role] {
			t.Errorf("docs/install.md writes no BERTH_%s_OPTS", strings.ToUpper(role))
		}
	}
	if !strings.Contains(string(doc), "deploy/systemd/berth-*.service") {
		t.Errorf("docs/install.md does not install the units of deploy/systemd")
	}
}
