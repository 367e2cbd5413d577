package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/tests/e2e/harness"
)

// A doc's shell examples are run by TestDocBlocksRun, or by TestReadmeWalkthrough (the
// README's walkthrough markers), or marked, in the doc, as not runnable by a test, with
// the reason a reader sees in the doc's source:
//
//	<!-- doc-test: skip: needs three hosts -->
//	```sh
//
// TestDocBlocksMarked lists them all and fails on a command block that is in none of
// these cases (an unlabelled fence whose first line is a command, a marker without a
// reason or without a block under it).

// docBlock is one fenced code block of a doc.
type docBlock struct {
	File string // relative to the repository root
	Line int    // of the opening fence, 1-based
	Lang string // the fence's info string: "sh", "json", "" …
	Body string
	// Skip is the reason of a `<!-- doc-test: skip: REASON -->` just above the fence.
	Skip string
	// Walkthrough: between README's walkthrough markers, run by TestReadmeWalkthrough.
	Walkthrough bool
}

// ID names the block in test output: file:line.
func (b docBlock) ID() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// shell reports whether the block is a shell example (the ones a reader pastes).
func (b docBlock) shell() bool {
	switch b.Lang {
	case "sh", "bash", "shell", "console", "zsh":
		return true
	}
	return false
}

// docFiles are the docs whose shell blocks must run: README.md, every docs/*.md and
// deploy/README.md, in that order (TestDocBlocksRun runs them in it).
func docFiles(t testing.TB, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(docs)
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	return append(files, filepath.Join("deploy", "README.md"))
}

var (
	skipMarker = regexp.MustCompile(`^<!--\s*doc-test:\s*skip:\s*(.*?)\s*-->$`)
	// A line that starts a command: an unlabelled fence opening with one is an example
	// that must be labelled sh (and then run or marked). "berth dev ready: …" is output.
	commandLine = regexp.MustCompile(`^(\$ |aws |(bin/)?berth [a-z-]+( +-|$| +[a-z0-9-]+( |$))|make |curl |docker|go |grpcurl |buf |export |systemctl |sudo |apt-get )`)
)

// parseDocBlocks returns the fenced blocks of the doc at root/rel, and what is wrong
// with its markers: a skip marker with an empty reason or not right above a shell
// block, an unlabelled block that holds commands.
func parseDocBlocks(t testing.TB, root, rel string) (blocks []docBlock, problems []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	inWalkthrough := false
	lastText, lastTextLine := "", 0 // the last non-blank line outside blocks
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch line {
		case "<!-- walkthrough:begin -->":
			inWalkthrough = true
		case "<!-- walkthrough:end -->":
			inWalkthrough = false
		}
		if !strings.HasPrefix(line, "```") {
			if line != "" {
				if skipMarker.MatchString(lastText) {
					problems = append(problems, fmt.Sprintf("%s:%d: a doc-test marker with no code block right under it", rel, lastTextLine))
				}
				lastText, lastTextLine = line, i+1
			}
			continue
		}
		b := docBlock{File: rel, Line: i + 1, Lang: strings.TrimSpace(strings.TrimPrefix(line, "```")), Walkthrough: inWalkthrough}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		b.Body = strings.Join(body, "\n") + "\n"
		if m := skipMarker.FindStringSubmatch(lastText); m != nil {
			b.Skip = m[1]
			switch {
			case m[1] == "":
				problems = append(problems, fmt.Sprintf("%s: its doc-test skip marker gives no reason", b.ID()))
			case !b.shell():
				problems = append(problems, fmt.Sprintf("%s: a doc-test skip marker above a %q block, not a shell one", b.ID(), b.Lang))
			case b.Walkthrough:
				problems = append(problems, fmt.Sprintf("%s: a doc-test skip marker inside the walkthrough, which TestReadmeWalkthrough runs whole", b.ID()))
			}
		}
		if b.Walkthrough && b.shell() && b.Lang != "sh" {
			problems = append(problems, fmt.Sprintf("%s: a ```%s block in the walkthrough, whose test runs only ```sh blocks", b.ID(), b.Lang))
		}
		if b.Lang == "" {
			for _, l := range body {
				if l = strings.TrimSpace(l); l != "" {
					if commandLine.MatchString(l) {
						problems = append(problems, fmt.Sprintf("%s: an unlabelled block of commands (%q): label it ```sh and let TestDocBlocksRun run it, or mark it <!-- doc-test: skip: REASON -->", b.ID(), l))
					}
					break
				}
			}
		}
		blocks = append(blocks, b)
		lastText, lastTextLine = "", 0
	}
	return blocks, problems
}

// allDocBlocks is parseDocBlocks over docFiles: the shell blocks only, and every problem.
func allDocBlocks(t testing.TB, root string) (blocks []docBlock, problems []string) {
	t.Helper()
	for _, f := range docFiles(t, root) {
		bs, ps := parseDocBlocks(t, root, f)
		problems = append(problems, ps...)
		for _, b := range bs {
			if b.shell() {
				blocks = append(blocks, b)
			}
		}
	}
	return blocks, problems
}

// TestDocBlocksMarked checks that every shell example of README.md, docs/*.md and
// deploy/README.md is run by a test — TestReadmeWalkthrough for the README's walkthrough,
// TestDocBlocksRun for every other block — or marked as not runnable here with a reason,
// and lists them with the reasons. It fails on an unlabelled command block and on a
// marker without a reason or a block.
func TestDocBlocksMarked(t *testing.T) {
	root := repoRoot(t)
	blocks, problems := allDocBlocks(t, root)
	for _, p := range problems {
		t.Error(p)
	}
	var walk, run, skip int
	var skipped []string
	for _, b := range blocks {
		switch {
		case b.Walkthrough:
			walk++
		case b.Skip != "":
			skip++
			skipped = append(skipped, fmt.Sprintf("  %s: %s", b.ID(), b.Skip))
		default:
			run++
		}
	}
	if walk < 5 || run < 5 {
		t.Errorf("found %d walkthrough blocks and %d others to run: the parser lost blocks", walk, run)
	}
	t.Logf("%d shell blocks: %d run by TestReadmeWalkthrough, %d by TestDocBlocksRun, %d skipped:\n%s",
		len(blocks), walk, run, skip, strings.Join(skipped, "\n"))
}

// docFillIn replaces, in the blocks of one doc, what a reader fills in (a placeholder, a
// host name, a port) with this run's value. Each must match: a stale one fails the test.
type docFillIn struct {
	file, old, new, why string
}

// docCheck checks what the one block of file that contains block printed or did.
type docCheck struct {
	file, block string
	check       func(t *testing.T, r docRun)
}

// docRun is what a docCheck sees of its block's run.
type docRun struct {
	out string // the block's stdout
	wd  string // the directory the doc's blocks ran in
	// cli runs a command (aws …, bin/berth …) against the same berth dev and returns
	// its trimmed stdout; it fails the test on a non-zero exit.
	cli func(name string, args ...string) string
}

// TestDocBlocksRun runs every shell block of README.md, docs/*.md and deploy/README.md
// that is neither in the README's walkthrough (TestReadmeWalkthrough runs those) nor
// marked `doc-test: skip`, as written, against one real `bin/berth dev` (etcd,
// scheduler, gateway, agent, registry, lb role, a private containerd) with the real AWS
// CLI: each doc's blocks in order in one `bash` with `set -euo pipefail` (a reader's
// session: a block's variables hold in the next), after the README's set-up (its
// AWS_* environment and `bin/berth image demo`), in a scratch directory where `berth`
// and `bin/berth` are this build's. Where a doc says what a block prints, the output is
// checked (docChecks). The only changes to the text are the dev's own addresses and the
// fill-ins below, each with its reason; every block must have run to its end.
func TestDocBlocksRun(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	begin := time.Now()
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	env = append(env, "PATH="+filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	cli(t, root, env, "bin/berth", "image", "demo")
	instance := cli(t, root, env, "aws", "ecs", "list-container-instances", "--query", "containerInstanceArns[0]", "--output", "text")
	lbPort := fmt.Sprint(harness.FreePort(t))
	// `berth admin` talks to a scheduler's internal listener, which berth dev does not
	// publish: adding-a-host.md's admin commands go to a `berth scheduler` of their own.
	schedulerURL, adminToken := startDocScheduler(t, dir)
	// BERTH_SCHEDULER_URL: where `berth admin` without --scheduler-url goes (its default,
	// 127.0.0.1:4567, on a scheduler host).
	env = append(env, "BERTH_ADMIN_TOKEN="+adminToken, "BERTH_SCHEDULER_URL="+schedulerURL)

	fillIns := []docFillIn{
		{"docs/capacity-providers.md", "<container instance ARN>", instance, "the dev agent's instance"},
		{"docs/capacity-providers.md", "--cluster prod", "--cluster default", "the dev agent's cluster"},
		{"docs/adding-a-host.md", "http://gateway.example:4566", envValue(env, "AWS_ENDPOINT_URL"), "the dev's endpoint"},
		{"docs/adding-a-host.md", "AWS_ACCESS_KEY_ID=...", "AWS_ACCESS_KEY_ID=test", "the dev's key"},
		{"docs/adding-a-host.md", "AWS_SECRET_ACCESS_KEY=...", "AWS_SECRET_ACCESS_KEY=test", "the dev's key"},
		{"docs/adding-a-host.md", "--scheduler-url http://127.0.0.1:4567", "--scheduler-url " + schedulerURL, "a port no other test holds"},
		// Step 6 on the same scheduler: the host's first key stays in web-7.env (the
		// host's agent.env), the scoped one goes beside it, and the first one's id is
		// what the reader reads from the host's file.
		{"docs/adding-a-host.md", "--container-instance ARN --output env > web-7.env",
			"--container-instance " + docInstanceARN + " --output env > web-7-scoped.env", "the instance of step 4; the host's old file kept"},
		{"docs/adding-a-host.md", "key delete OLD_ACCESS_KEY_ID", "key delete $(sed -n 's/^BERTH_ACCESS_KEY_ID=//p' web-7.env)", "the id of step 3's key"},
		{"docs/load-balancing.md", "--port 8000", "--port " + lbPort, "a port no other test holds"},
		{"docs/load-balancing.md", "127.0.0.1:8000", "127.0.0.1:" + lbPort, "a port no other test holds"},
	}

	blocks, problems := allDocBlocks(t, root)
	if len(problems) > 0 {
		t.Fatalf("TestDocBlocksMarked's problems first:\n%s", strings.Join(problems, "\n"))
	}
	var order []string
	byFile := map[string][]docBlock{}
	for _, b := range blocks {
		if b.Walkthrough || b.Skip != "" {
			continue
		}
		if _, ok := byFile[b.File]; !ok {
			order = append(order, b.File)
		}
		byFile[b.File] = append(byFile[b.File], b)
	}
	checked := map[int]bool{}
	ran := 0
	for _, file := range order {
		wd, outs := runDocBlocks(t, root, env, filepath.Join(dir, "work"), byFile[file], fillIns)
		for _, b := range byFile[file] {
			out, ok := outs[b.ID()]
			if !ok {
				continue // runDocBlocks said why
			}
			ran++
			for i, c := range docChecks {
				if c.file == b.File && strings.Contains(b.Body, c.block) {
					checked[i] = true
					t.Run(strings.ReplaceAll(b.ID(), "/", "_"), func(t *testing.T) {
						c.check(t, docRun{out: out, wd: wd, cli: func(name string, args ...string) string {
							return cli(t, root, env, name, args...)
						}})
					})
				}
			}
		}
	}
	for i, c := range docChecks {
		if !checked[i] && !t.Failed() {
			t.Errorf("no block of %s that ran contains %q: the check is stale", c.file, c.block)
		}
	}
	for _, f := range fillIns {
		if !slices.ContainsFunc(byFile[f.file], func(b docBlock) bool { return strings.Contains(b.Body, f.old) }) {
			t.Errorf("no block to run of %s contains %q (fill-in: %s): the fill-in is stale", f.file, f.old, f.why)
		}
	}
	t.Logf("ran %d doc blocks of %d docs in %s (berth dev included)", ran, len(order), time.Since(begin).Round(time.Second))
}

// docInstanceARN is the container instance adding-a-host.md's step 4 would register in
// account 123456789012: `berth admin key create --container-instance` checks its shape
// and account, not that it is registered.
const docInstanceARN = "arn:aws:ecs:us-east-1:123456789012:container-instance/prod/0123456789abcdef0123456789abcdef"

// startDocScheduler starts one etcd member and one `berth scheduler` on it with an admin
// token (BERTH_ADMIN_TOKEN, as an operator sets it) and a secrets keyring, for the docs'
// `berth admin` commands; it returns the scheduler's URL and the token. Both stop when
// the test ends.
func startDocScheduler(t *testing.T, dir string) (url, token string) {
	t.Helper()
	bins := harness.FindBinaries(t)
	client, peer, listen := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "secrets.key")
	if err := os.WriteFile(keyFile, []byte("k1:"+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token = "doc-test-admin-" + rand.Text()
	etcd := &harness.Proc{Name: "etcd", Path: bins.Etcd, LogPath: filepath.Join(dir, "etcd.log"), Args: []string{
		"--name", "e0", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
		"--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + peer,
		"--initial-cluster", "e0=http://" + peer, "--unsafe-no-fsync", "--log-level", "warn",
	}}
	sched := &harness.Proc{Name: "scheduler", Path: bins.Berth, LogPath: filepath.Join(dir, "scheduler.log"), Args: []string{
		"scheduler", "--etcd-endpoints", "http://" + client, "--listen", listen,
		"--log-dir", filepath.Join(dir, "cwlogs"), "--metrics-dir", filepath.Join(dir, "cwmetrics"), "--secrets-key-file", keyFile,
	}, Env: []string{"BERTH_ADMIN_TOKEN=" + token}}
	for _, p := range []*harness.Proc{etcd, sched} {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = p.Stop()
			if t.Failed() {
				t.Logf("%s's log (end):\n%s", p.Name, p.LogTail(3000))
			}
		})
	}
	if err := harness.Poll(t.Context(), time.Minute, func() error {
		conn, err := net.DialTimeout("tcp", listen, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	}); err != nil {
		t.Fatalf("berth scheduler on %s: %v", listen, err)
	}
	return "http://" + listen, token
}

// runDocBlocks runs one doc's blocks, in order, in one bash in a directory of its own
// under work, and returns that directory and each block's stdout by ID — only of the
// blocks that ran to their end; it fails t for the one that did not.
func runDocBlocks(t *testing.T, root string, env []string, work string, blocks []docBlock, fillIns []docFillIn) (string, map[string]string) {
	t.Helper()
	file := blocks[0].File
	wd := filepath.Join(work, strings.NewReplacer("/", "_", ".", "_").Replace(file))
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	// `bin/berth` as the README writes it, from any directory.
	if err := os.Symlink(filepath.Join(root, "bin"), filepath.Join(wd, "bin")); err != nil {
		t.Fatal(err)
	}
	const marker = "@@doc-block "
	var script strings.Builder
	script.WriteString("set -euo pipefail\nset -x\n")
	for _, b := range blocks {
		body := strings.ReplaceAll(b.Body, "http://127.0.0.1:4566", envValue(env, "AWS_ENDPOINT_URL"))
		body = strings.ReplaceAll(body, "127.0.0.1:5000", envValue(env, "BERTH_REGISTRY_ADDR"))
		if ecr := envValue(env, "BERTH_ECR_ADDR"); ecr != "" {
			body = strings.ReplaceAll(body, "127.0.0.1:5001", ecr)
		}
		for _, f := range fillIns {
			if f.file == file {
				body = strings.ReplaceAll(body, f.old, f.new)
			}
		}
		fmt.Fprintf(&script, "echo '%s%s'\n%s", marker, b.ID(), body)
	}
	fmt.Fprintf(&script, "echo '%send'\n", marker)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir, cmd.Env = wd, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s: %d blocks in %s", file, len(blocks), time.Since(start).Round(100*time.Millisecond))

	outs := map[string]string{}
	id, last := "", ""
	for _, part := range strings.Split(stdout.String(), marker)[1:] {
		if id != "" {
			outs[id] = last
		}
		id, last, _ = strings.Cut(part, "\n")
	}
	if id != "end" {
		t.Errorf("the block %s fails: %v\nits output:\n%s\nbash's trace and errors (end):\n%s", id, err, last, tailString(stderr.String(), 4000))
	} else if err != nil {
		t.Errorf("%s's blocks: %v\n%s", file, err, tailString(stderr.String(), 4000))
	}
	return wd, outs
}

// tailString is the last n bytes of s.
func tailString(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// docChecks are what the docs say their blocks print or do.
var docChecks = []docCheck{
	{"README.md", "aws --region eu-west-1 ecs create-cluster --cluster-name demo", func(t *testing.T, r docRun) {
		// The create prints the eu-west-1 ARN; the us-east-1 list does not list it.
		if n := strings.Count(r.out, "arn:aws:ecs:eu-west-1:000000000000:cluster/demo"); n != 1 {
			t.Errorf("the eu-west-1 cluster's ARN is printed %d times, want once (by create-cluster, not by the us-east-1 list-clusters):\n%s", n, r.out)
		}
	}},
	{"README.md", "aws secretsmanager create-secret --name app/db", func(t *testing.T, r docRun) {
		// The registered reference is the secret's real ARN, and a task of it gets the value.
		arn := r.cli("aws", "secretsmanager", "describe-secret", "--secret-id", "app/db", "--query", "ARN", "--output", "text")
		if !strings.Contains(r.out, `"valueFrom": "`+arn+`:password::"`) {
			t.Errorf("the task definition's valueFrom is not the secret's ARN %s with the key:\n%s", arn, r.out)
		}
		task := r.cli("aws", "ecs", "run-task", "--task-definition", "app", "--query", "tasks[0].taskArn", "--output", "text")
		stopped := waitFor(t, func() (string, bool) {
			s := r.cli("aws", "ecs", "describe-tasks", "--tasks", task, "--query",
				"tasks[0].[lastStatus,stopCode,containers[0].exitCode,stoppedReason]", "--output", "text")
			return s, strings.HasPrefix(s, "STOPPED")
		})
		if f := strings.Fields(stopped); len(f) < 3 || f[1] != "EssentialContainerExited" || f[2] != "0" {
			t.Fatalf("the task of the secrets example: %q, want STOPPED EssentialContainerExited 0", stopped)
		}
		if logs := r.cli("bin/berth", "logs", task); !strings.Contains(logs, "app: DB_PASSWORD=pw") {
			t.Errorf("the task's environment lacks DB_PASSWORD=pw:\n%s", logs)
		}
	}},
	{"docs/adding-a-host.md", "aws ecs create-cluster --cluster-name prod", func(t *testing.T, r docRun) {
		if !strings.Contains(r.out, `"clusterName": "prod"`) || !strings.Contains(r.out, `"status": "ACTIVE"`) {
			t.Errorf("create-cluster prod printed:\n%s", r.out)
		}
	}},
	{"docs/adding-a-host.md", "account create 123456789012 --name prod", func(t *testing.T, r docRun) {
		// "web-7.env holds two lines, BERTH_ACCESS_KEY_ID=... and BERTH_SECRET_ACCESS_KEY=..."
		readKeyEnv(t, filepath.Join(r.wd, "web-7.env"))
		if accounts := r.cli("bin/berth", "admin", "account", "list"); !regexp.MustCompile(`123456789012\s+prod`).MatchString(accounts) {
			t.Errorf("berth admin account list lacks 123456789012 prod:\n%s", accounts)
		}
	}},
	{"docs/adding-a-host.md", "berth admin key delete OLD_ACCESS_KEY_ID", func(t *testing.T, r docRun) {
		// The scoped key replaced the host's first one: "berth admin key list ACCOUNT
		// lists key ids" — the scoped key's, with its instance, and no longer the first.
		old, scoped := readKeyEnv(t, filepath.Join(r.wd, "web-7.env")), readKeyEnv(t, filepath.Join(r.wd, "web-7-scoped.env"))
		keys := r.cli("bin/berth", "admin", "key", "list", "123456789012")
		if !regexp.MustCompile(regexp.QuoteMeta(scoped) + `\s+` + regexp.QuoteMeta(docInstanceARN)).MatchString(keys) {
			t.Errorf("berth admin key list lacks the scoped key %s of %s:\n%s", scoped, docInstanceARN, keys)
		}
		if old == "" || strings.Contains(keys, old) {
			t.Errorf("berth admin key list still holds the deleted key %q:\n%s", old, keys)
		}
	}},
	{"docs/capacity-providers.md", "--attributes name=berth.capacity-provider,value=spot-pool", func(t *testing.T, r docRun) {
		// "DescribeContainerInstances shows the pool as capacityProviderName."
		instance := r.cli("aws", "ecs", "list-container-instances", "--query", "containerInstanceArns[0]", "--output", "text")
		got := r.cli("aws", "ecs", "describe-container-instances", "--container-instances", instance, "--query",
			"containerInstances[0].[capacityProviderName,attributes[?name=='berth.fargate'].value|[0]]", "--output", "text")
		if strings.Join(strings.Fields(got), " ") != "spot-pool false" {
			t.Errorf("the instance after the example: capacityProviderName and berth.fargate %q, want spot-pool false", got)
		}
		// Back to a host of no pool that takes Fargate tasks, for the docs after this one.
		r.cli("aws", "ecs", "delete-attributes", "--attributes",
			"name=berth.capacity-provider,targetId="+instance, "name=berth.fargate,targetId="+instance)
	}},
	{"docs/load-balancing.md", "aws elbv2 create-listener", func(t *testing.T, r docRun) {
		// The curl through the listener: the task's answer.
		if !strings.HasSuffix(strings.TrimSpace(r.out), "ok") {
			t.Errorf("the request through the load balancer did not answer ok:\n%s", r.out)
		}
	}},
	{"docs/security.md", "berth tls ca create", func(t *testing.T, r docRun) {
		// Each writes berth-ROLE.pem and berth-ROLE-key.pem; keys mode 0600; the role
		// as a URI SAN; the CA ECDSA P-256 for 5 years, the others for one year.
		for _, role := range []string{"ca", "scheduler", "gateway", "agent", "admin"} {
			cert := readDocCert(t, filepath.Join(r.wd, "berth-"+role+".pem"))
			if fi, err := os.Stat(filepath.Join(r.wd, "berth-"+role+"-key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("berth-%s-key.pem: %v, mode %v; want 0600", role, err, fi)
			}
			if cert == nil {
				continue
			}
			years := cert.NotAfter.Sub(cert.NotBefore).Hours() / 24 / 365
			if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
				t.Errorf("berth-%s.pem: key %T, want ECDSA P-256", role, cert.PublicKey)
			}
			if role == "ca" {
				if !cert.IsCA || years < 4.9 || years > 5.1 {
					t.Errorf("berth-ca.pem: CA %v, valid %.2f years; want a CA for 5", cert.IsCA, years)
				}
				continue
			}
			if years < 0.9 || years > 1.1 || len(cert.URIs) != 1 || cert.URIs[0].String() != "urn:berth:role:"+role {
				t.Errorf("berth-%s.pem: valid %.2f years, URIs %v; want 1 year and urn:berth:role:%s", role, years, cert.URIs, role)
			}
		}
		if c := readDocCert(t, filepath.Join(r.wd, "berth-scheduler.pem")); c != nil && !slices.Contains(c.DNSNames, "scheduler1.internal") {
			t.Errorf("berth-scheduler.pem names %v, want scheduler1.internal among them", c.DNSNames)
		}
	}},
}

// readKeyEnv checks that the file at path is what `berth admin key create --output env`
// writes, the two lines BERTH_ACCESS_KEY_ID=… and BERTH_SECRET_ACCESS_KEY=…, and returns
// the key id ("" and t failed when it is not).
func readKeyEnv(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "BERTH_ACCESS_KEY_ID=") || !strings.HasPrefix(lines[1], "BERTH_SECRET_ACCESS_KEY=") {
		t.Errorf("%s: %q, want the two lines BERTH_ACCESS_KEY_ID=… and BERTH_SECRET_ACCESS_KEY=…", path, data)
		return ""
	}
	return strings.TrimPrefix(lines[0], "BERTH_ACCESS_KEY_ID=")
}

// readDocCert parses the PEM certificate at path; nil (and t failed) when it cannot.
func readDocCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return nil
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Errorf("%s holds no PEM block", path)
		return nil
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return nil
	}
	return cert
}

// TestDocBlocksParse feeds parseDocBlocks a doc with each kind of block and each mistake
// TestDocBlocksMarked must catch.
func TestDocBlocksParse(t *testing.T) {
	root := t.TempDir()
	doc := "# Doc\n\n```sh\naws ecs list-clusters\n```\n```\nout\n```\n\n" +
		"<!-- doc-test: skip: needs three hosts -->\n\n```sh\nberth agent\n```\n" +
		"<!-- doc-test: skip: -->\n```bash\nmake run\n```\n" +
		"<!-- doc-test: skip: nothing under it -->\ntext\n" +
		"```\nberth agent --efs fs-1=/x\n```\n```\nberth dev ready: endpoint x\n```\n" +
		"<!-- walkthrough:begin -->\n<!-- doc-test: skip: inside -->\n```sh\nls\n```\n```console\nls\n```\n<!-- walkthrough:end -->\n"
	if err := os.WriteFile(filepath.Join(root, "doc.md"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, problems := parseDocBlocks(t, root, "doc.md")
	var got []string
	for _, b := range blocks {
		got = append(got, fmt.Sprintf("%d %q skip=%q walk=%v shell=%v", b.Line, b.Lang, b.Skip, b.Walkthrough, b.shell()))
	}
	want := []string{
		`3 "sh" skip="" walk=false shell=true`,
		`6 "" skip="" walk=false shell=false`,
		`12 "sh" skip="needs three hosts" walk=false shell=true`,
		`16 "bash" skip="" walk=false shell=true`,
		`21 "" skip="" walk=false shell=false`,
		`24 "" skip="" walk=false shell=false`,
		`29 "sh" skip="inside" walk=true shell=true`,
		`32 "console" skip="" walk=true shell=true`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantProblems := []string{
		"doc.md:16: its doc-test skip marker gives no reason",
		"doc.md:19: a doc-test marker with no code block right under it",
		"doc.md:21: an unlabelled block of commands",
		"doc.md:29: a doc-test skip marker inside the walkthrough",
		"doc.md:32: a ```console block in the walkthrough",
	}
	if len(problems) != len(wantProblems) {
		t.Fatalf("problems:\n%s\nwant %d", strings.Join(problems, "\n"), len(wantProblems))
	}
	for i, p := range problems {
		if !strings.HasPrefix(p, wantProblems[i]) {
			t.Errorf("problem %d: %q, want it to start %q", i, p, wantProblems[i])
		}
	}
}
