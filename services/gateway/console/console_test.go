package console

import (
	"bufio"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/pkg/buildinfo"
)

// fakeBackend answers the console's ECS calls and records them.
type fakeBackend struct {
	mu      sync.Mutex
	calls   []string
	who     []Identity
	updates []*ecsv1.UpdateServiceRequest
	changes chan Change
	failed  int
}

func (f *fakeBackend) config() Config {
	return Config{
		Resolve: func(_ context.Context, id string) (Credential, error) {
			switch id {
			case "AKIDTEST":
				return Credential{AccountID: "123456789012", SecretAccessKey: "s3cret"}, nil
			case "AKIDAGENT":
				return Credential{AccountID: "123456789012", SecretAccessKey: "agent", InstanceScoped: true}, nil
			}
			return Credential{}, ErrUnknownKey
		},
		Call: func(_ context.Context, who Identity, action string, in proto.Message) (proto.Message, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.calls = append(f.calls, action)
			f.who = append(f.who, who)
			switch action {
			case "DescribeServices":
				return &ecsv1.DescribeServicesResponse{Services: []*ecsv1.Service{{ServiceName: proto.String("web"), Status: proto.String("ACTIVE"), DesiredCount: 1}}}, nil
			case "ListTasks":
				return &ecsv1.ListTasksResponse{}, nil
			case "UpdateService":
				f.updates = append(f.updates, in.(*ecsv1.UpdateServiceRequest))
				return &ecsv1.UpdateServiceResponse{}, nil
			case "ListClusters":
				return &ecsv1.ListClustersResponse{}, nil
			}
			return nil, &APIError{Type: "ClientException", Message: "unexpected " + action}
		},
		Watch: func(ctx context.Context, who Identity) (<-chan Change, error) {
			return f.changes, nil
		},
		Failed:        func(*http.Request) { f.mu.Lock(); f.failed++; f.mu.Unlock() },
		RegionAllowed: func(r string) bool { return r == "us-east-1" || r == "eu-west-1" },
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn signs in through the form and returns the client with its cookie jar.
func signIn(t *testing.T, srv *httptest.Server, key, secret string) (*http.Client, *http.Response) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(srv.URL + "/console/signin")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(res)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("sign-in form without csrf: %s", body)
	}
	res, err = c.PostForm(srv.URL+"/console/signin", url.Values{"csrf": {m[1]}, "access_key_id": {key}, "secret_access_key": {secret}, "region": {"eu-west-1"}})
	if err != nil {
		t.Fatal(err)
	}
	return c, res
}

func readAll(res *http.Response) string {
	defer res.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

func newServer(t *testing.T, f *fakeBackend) *httptest.Server {
	t.Helper()
	c, err := New(f.config())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv
}

// TestSignIn: a wrong secret, an unknown key and an instance-scoped key are refused (and
// counted for lockout); the right key gets an HttpOnly, SameSite=Strict session cookie
// scoped to /console; a tampered cookie is no session.
func TestSignIn(t *testing.T) {
	f := &fakeBackend{changes: make(chan Change)}
	srv := newServer(t, f)
	for _, kc := range [][2]string{{"AKIDTEST", "wrong"}, {"AKIDNOPE", "s3cret"}, {"AKIDAGENT", "agent"}} {
		_, res := signIn(t, srv, kc[0], kc[1])
		body := readAll(res)
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "is wrong") {
			t.Fatalf("%s/%s: %d %s", kc[0], kc[1], res.StatusCode, body)
		}
	}
	if f.failed != 3 {
		t.Fatalf("failed sign-ins counted %d, want 3", f.failed)
	}
	c, res := signIn(t, srv, "AKIDTEST", "s3cret")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/" {
		t.Fatalf("sign-in: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	var sess *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == sessionCookie {
			sess = ck
		}
	}
	if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Path != "/console" {
		t.Fatalf("session cookie %+v", sess)
	}
	res, err := c.Get(srv.URL + "/console/")
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("clusters page: %v %v", err, res)
	}
	if f.who[len(f.who)-1] != (Identity{AccessKeyID: "AKIDTEST", AccountID: "123456789012", Region: "eu-west-1"}) {
		t.Fatalf("calls made as %+v", f.who[len(f.who)-1])
	}
	// A tampered cookie (another region) sends the browser to sign in.
	u, _ := url.Parse(srv.URL + "/console/")
	tampered := strings.Replace(sess.Value, ".eu-west-1.", ".us-east-1.", 1)
	c.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: tampered, Path: "/console"}})
	res, _ = c.Get(srv.URL + "/console/")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/signin" {
		t.Fatalf("tampered cookie: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
}

// TestScaleNeedsCSRFAndConfirmation: a form without the session's CSRF token is refused;
// with it, the first post shows a confirmation page and calls nothing; confirmed, the
// console calls UpdateService with the count.
func TestScaleNeedsCSRFAndConfirmation(t *testing.T) {
	f := &fakeBackend{changes: make(chan Change)}
	srv := newServer(t, f)
	c, _ := signIn(t, srv, "AKIDTEST", "s3cret")
	page, err := c.Get(srv.URL + "/console/clusters/default/services/web")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(page)
	m := csrfField.FindStringSubmatch(body)
	if page.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("service page %d: %s", page.StatusCode, body)
	}
	action := srv.URL + "/console/clusters/default/services/web/scale"
	res, _ := c.PostForm(action, url.Values{"desired_count": {"3"}, "csrf": {"forged"}})
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("forged csrf: %d", res.StatusCode)
	}
	res, _ = c.PostForm(action, url.Values{"desired_count": {"3"}, "csrf": {m[1]}})
	body = readAll(res)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Scale service web to 3 tasks?") || len(f.updates) != 0 {
		t.Fatalf("unconfirmed: %d, %d updates, %s", res.StatusCode, len(f.updates), body)
	}
	res, _ = c.PostForm(action, url.Values{"desired_count": {"3"}, "csrf": {m[1]}, "confirm": {"yes"}})
	if res.StatusCode != http.StatusSeeOther || len(f.updates) != 1 || f.updates[0].GetDesiredCount() != 3 || f.updates[0].GetService() != "web" {
		t.Fatalf("confirmed: %d %v", res.StatusCode, f.updates)
	}
	res, _ = c.PostForm(action, url.Values{"desired_count": {"-1"}, "csrf": {m[1]}, "confirm": {"yes"}})
	if res.StatusCode != http.StatusBadRequest || len(f.updates) != 1 {
		t.Fatalf("negative count: %d", res.StatusCode)
	}
}

// TestEventsStream: the event stream relays the watch's notices as "change" events, and
// refuses a browser without a session.
func TestEventsStream(t *testing.T) {
	f := &fakeBackend{changes: make(chan Change, 1)}
	srv := newServer(t, f)
	res, err := http.Get(srv.URL + "/console/events")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther && res.StatusCode != http.StatusForbidden && res.Request.URL.Path != "/console/signin" {
		t.Fatalf("events without a session: %d", res.StatusCode)
	}
	c, _ := signIn(t, srv, "AKIDTEST", "s3cret")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/console/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err = c.Do(req)
	if err != nil || res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %v %v", err, res)
	}
	defer res.Body.Close()
	f.changes <- Change{Kinds: []string{"services", "tasks"}}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if sc.Text() == "data: services,tasks" {
			return
		}
	}
	t.Fatalf("no change event: %v", sc.Err())
}

// fakeLogs is a LogSource that records its queries and sends fixed lines.
type fakeLogs struct {
	mu      sync.Mutex
	queries []LogQuery
}

func (l *fakeLogs) ReadLogs(_ context.Context, _ Identity, q LogQuery, emit func([]LogLine) error) error {
	l.mu.Lock()
	l.queries = append(l.queries, q)
	l.mu.Unlock()
	return emit([]LogLine{{Container: "web", Stream: "stderr", Time: time.Unix(1700000000, 0), Text: `say "hi" <b>`}})
}

// TestLogs: the logs page shows the tail (escaped) read for the task's ARN, cluster and
// instance; the follow stream sends the lines as JSON "line" events from `since`, then
// "end".
func TestLogs(t *testing.T) {
	f := &fakeBackend{changes: make(chan Change)}
	logs := &fakeLogs{}
	cfg := f.config()
	cfg.Logs = logs
	call := cfg.Call
	cfg.Call = func(ctx context.Context, who Identity, action string, in proto.Message) (proto.Message, error) {
		if action == "DescribeTasks" {
			return &ecsv1.DescribeTasksResponse{Tasks: []*ecsv1.Task{{
				TaskArn:              proto.String("arn:aws:ecs:eu-west-1:123456789012:task/prod/abc"),
				ContainerInstanceArn: proto.String("arn:aws:ecs:eu-west-1:123456789012:container-instance/prod/i1"),
				LastStatus:           proto.String("RUNNING"),
			}}}, nil
		}
		return call(ctx, who, action, in)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	client, _ := signIn(t, srv, "AKIDTEST", "s3cret")
	res, err := client.Get(srv.URL + "/console/clusters/prod/tasks/abc/logs")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(res)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `say &#34;hi&#34; &lt;b&gt;`) {
		t.Fatalf("logs page %d: %s", res.StatusCode, body)
	}
	q := logs.queries[0]
	if q.TaskARN != "arn:aws:ecs:eu-west-1:123456789012:task/prod/abc" || q.Cluster != "prod" ||
		q.ContainerInstanceARN != "arn:aws:ecs:eu-west-1:123456789012:container-instance/prod/i1" || q.Tail != logTail || q.Follow {
		t.Fatalf("page query %+v", q)
	}
	since := time.Unix(1700000000, 1).UTC().Format(time.RFC3339Nano)
	res, err = client.Get(srv.URL + "/console/clusters/prod/tasks/abc/logs/stream?since=" + url.QueryEscape(since))
	if err != nil {
		t.Fatal(err)
	}
	body = readAll(res)
	if !strings.Contains(body, "event: line\ndata: {\"container\":\"web\",\"stream\":\"stderr\",\"time\":\"2023-11-14T22:13:20Z\",\"text\":\"say \\\"hi\\\" \\u003cb\\u003e\"}") ||
		!strings.Contains(body, "event: end") {
		t.Fatalf("stream: %s", body)
	}
	if q := logs.queries[1]; !q.Follow || !q.Since.Equal(time.Unix(1700000000, 1)) {
		t.Fatalf("stream query %+v", q)
	}
}

// TestVersionShown: every page names the Berth version that served it (buildinfo.Version,
// which `make release` stamps).
func TestVersionShown(t *testing.T) {
	v := buildinfo.Version
	t.Cleanup(func() { buildinfo.Version = v })
	buildinfo.Version = "v9.8.7-test"
	srv := newServer(t, &fakeBackend{changes: make(chan Change)})
	res, err := http.Get(srv.URL + "/console/signin")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(res); !strings.Contains(body, `<span class="version" title="Berth version">v9.8.7-test</span>`) {
		t.Errorf("sign-in page without the version:\n%s", body)
	}
}
