// Package endpoints serves what the ECS agent serves its tasks over HTTP: the task
// credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI, AWS's
// "Task IAM role" JSON) and the task metadata endpoint version 4
// (ECS_CONTAINER_METADATA_URI_V4: /, /task, /stats, /task/stats).
//
// Credentials are fetched from the control plane when a task with a taskRoleArn starts
// (Prepare) and again when half of their lifetime has passed; Release forgets them when
// the task stops (the control plane refuses them from then on). The ids in the URIs are
// HMACs of the task (and container) under a key of the agent's, so they are unguessable,
// bound to one task, and stable across agent restarts (adopted containers keep their
// environment).
//
// Where a task reaches the endpoints: a task in networkMode host gets
// AWS_CONTAINER_CREDENTIALS_FULL_URI and ECS_CONTAINER_METADATA_URI_V4 with the agent's
// loopback address, which the AWS SDKs accept for the full URI. When the host routes
// 169.254.170.2:80 to the agent's listener (Config.LinkLocal or SetLinkLocal; the agent
// turns it on once network.RouteLinkLocal installed the DNAT, as the ECS agent does for
// bridge and awsvpc tasks), tasks of the other modes get the documented
// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and http://169.254.170.2/v4/… instead.
package endpoints

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
)

// LinkLocalAddr is the address the ECS agent serves tasks on inside their network
// ("169.254.170.2:80"); the host's network setup redirects it to the agent's listener.
const LinkLocalAddr = "169.254.170.2"

// Environment variables set in a task's containers, as the ECS agent sets them.
const (
	EnvCredentialsRelativeURI = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
	EnvCredentialsFullURI     = "AWS_CONTAINER_CREDENTIALS_FULL_URI"
	EnvMetadataV4             = "ECS_CONTAINER_METADATA_URI_V4"
	EnvMetadataV3             = "ECS_CONTAINER_METADATA_URI"
	EnvExecutionEnv           = "AWS_EXECUTION_ENV"
	// EnvEndpointURL is the AWS SDKs' and CLI's endpoint override: every task that
	// reaches this listener gets the Berth endpoint through it (Config.API) unless its
	// definition sets it.
	EnvEndpointURL = "AWS_ENDPOINT_URL"
	// EnvRegion and EnvDefaultRegion hold the task's region in every container, as
	// Fargate sets them, unless the task definition or an override sets them.
	EnvRegion        = "AWS_REGION"
	EnvDefaultRegion = "AWS_DEFAULT_REGION"
)

// CredentialsFunc asks the control plane for session credentials of a task's role
// (AgentService.GetTaskCredentials).
type CredentialsFunc func(ctx context.Context, taskARN, roleType string) (*agentv1.GetTaskCredentialsResponse, error)

// Source answers the metadata endpoint's questions about the tasks on this host.
type Source interface {
	// TaskMetadata returns the task's metadata (the /task answer), false when the agent
	// does not hold the task. A container whose process is being started is answered
	// once its start is recorded (the caller may be that very process), or when ctx ends.
	TaskMetadata(ctx context.Context, taskARN string) (*Task, bool)
	// ContainerStats returns one container's stats in the Docker stats shape; an error
	// when the container has no running process.
	ContainerStats(ctx context.Context, taskARN, containerName string) (*Stats, error)
}

// Config configures a Server.
type Config struct {
	// Addr is where to listen ("host:port", port 0 picks one); default "127.0.0.1:0".
	Addr string
	// Credentials fetches task role credentials; nil fails every task that has a role.
	Credentials CredentialsFunc
	// Key keys the ids in the URIs (at least 16 bytes); random when empty, so ids then
	// change with each agent start.
	Key []byte
	// LinkLocal says 169.254.170.2:80 reaches this listener from tasks that are not in
	// networkMode host.
	LinkLocal bool
	// API is Berth's endpoint (the gateway URL the agent reaches). When set, POST / on
	// this listener is relayed to it with the Host header unchanged (the SigV4 signature
	// covers it), so a task reaches every Berth API (ECS, STS, logs, …) at the address it
	// reaches the credentials at — 169.254.170.2 from bridge and awsvpc tasks, whose
	// network cannot reach the host's loopback — and tasks with a role get
	// AWS_ENDPOINT_URL pointing there. Empty relays nothing.
	API string
	// RetryInterval is the wait between failed refreshes; default 5 s.
	RetryInterval time.Duration
	// Log receives refresh failures; nil discards them.
	Log *slog.Logger
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
}

// Server serves the credentials and metadata endpoints. Create it with New, set the
// metadata source with SetSource, then Run it.
type Server struct {
	cfg Config
	ln  net.Listener

	mu     sync.Mutex
	source Source
	base   context.Context
	creds  map[string]*taskCreds // by credentials id
	tasks  map[string]*taskEntry // by task ARN
	tokens map[string]metaRef    // metadata token → container
}

type taskCreds struct {
	resp *agentv1.GetTaskCredentialsResponse
}

type taskEntry struct {
	credID string
	cancel context.CancelFunc
	tokens []string
}

type metaRef struct{ taskARN, container string }

// New listens on cfg.Addr. It returns an error when it cannot.
func New(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if len(cfg.Key) == 0 {
		cfg.Key = make([]byte, 32)
		if _, err := rand.Read(cfg.Key); err != nil {
			return nil, err
		}
	}
	if len(cfg.Key) < 16 {
		return nil, errors.New("endpoints: Key is shorter than 16 bytes")
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, ln: ln, base: context.Background(), creds: map[string]*taskCreds{}, tasks: map[string]*taskEntry{}, tokens: map[string]metaRef{}}, nil
}

// Addr returns the listener's address ("127.0.0.1:port").
func (s *Server) Addr() string { return s.ln.Addr().String() }

// SetLinkLocal says whether 169.254.170.2:80 reaches this listener from tasks that are
// not in networkMode host (Config.LinkLocal); it applies to the tasks Prepare readies
// from then on. The agent turns it on once the host's redirect is installed.
func (s *Server) SetLinkLocal(on bool) {
	s.mu.Lock()
	s.cfg.LinkLocal = on
	s.mu.Unlock()
}

// SetSource sets where metadata comes from (the task manager).
func (s *Server) SetSource(src Source) {
	s.mu.Lock()
	s.source = src
	s.mu.Unlock()
}

// Run serves until ctx ends, then closes the listener and stops every refresh.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	s.base = ctx
	s.mu.Unlock()
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	err := srv.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) id(parts ...string) string {
	m := hmac.New(sha256.New, s.cfg.Key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(m.Sum(nil))[:32]
}

// TaskRole returns the role of a task's containers: the override's taskRoleArn, else the
// task definition's; "" when it has none.
func TaskRole(a *agentv1.Assignment) string {
	if r := a.GetTask().GetOverrides().GetTaskRoleArn(); r != "" {
		return r
	}
	return a.GetTaskDefinition().GetTaskRoleArn()
}

// Prepare readies the endpoints of the task a assigns and returns, by container name,
// the environment its containers get. For a task with a role it fetches credentials
// first and returns the error when it cannot (the task must not start without them).
// networkMode is the task's ("host" when empty). Calling it again for the same task (an
// adopted one after an agent restart) fetches fresh credentials under the same ids.
func (s *Server) Prepare(ctx context.Context, a *agentv1.Assignment, networkMode string) (map[string][]string, error) {
	taskARN := a.GetTask().GetTaskArn()
	base := "http://" + s.Addr()
	s.mu.Lock()
	linkLocal := s.cfg.LinkLocal
	s.mu.Unlock()
	if networkMode != "" && networkMode != "host" && linkLocal {
		base = "http://" + LinkLocalAddr
	}
	var credEnv []string
	e := &taskEntry{}
	if role := TaskRole(a); role != "" {
		if s.cfg.Credentials == nil {
			return nil, errors.New("this agent cannot fetch task role credentials")
		}
		resp, err := s.cfg.Credentials(ctx, taskARN, "TaskRole")
		if err != nil {
			return nil, err
		}
		e.credID = s.id("credentials", taskARN)
		path := "/v2/credentials/" + e.credID
		if base == "http://"+LinkLocalAddr {
			credEnv = []string{EnvCredentialsRelativeURI + "=" + path}
		} else {
			credEnv = []string{EnvCredentialsFullURI + "=" + base + path}
		}
		s.mu.Lock()
		s.creds[e.credID] = &taskCreds{resp: resp}
		rctx, cancel := context.WithCancel(s.base)
		s.mu.Unlock()
		e.cancel = cancel
		go s.refresh(rctx, taskARN, e.credID, resp)
	}
	// Every task that reaches this listener gets the Berth endpoint as its AWS endpoint,
	// with a role or without one (its SDK may be given keys another way). A bridge or
	// awsvpc task without the link-local route does not reach 127.0.0.1 here.
	reachable := networkMode == "" || networkMode == "host" || base == "http://"+LinkLocalAddr
	if s.cfg.API != "" && reachable {
		credEnv = append(credEnv, EnvEndpointURL+"="+base)
	}
	env := map[string][]string{}
	for _, c := range a.GetTaskDefinition().GetContainerDefinitions() {
		tok := s.id("metadata", taskARN, c.GetName())
		e.tokens = append(e.tokens, tok)
		env[c.GetName()] = append([]string{
			EnvMetadataV4 + "=" + base + "/v4/" + tok,
			EnvMetadataV3 + "=" + base + "/v3/" + tok,
			EnvExecutionEnv + "=AWS_ECS_EC2",
		}, credEnv...)
	}
	s.mu.Lock()
	if old := s.tasks[taskARN]; old != nil && old.cancel != nil {
		old.cancel()
	}
	s.tasks[taskARN] = e
	for i, c := range a.GetTaskDefinition().GetContainerDefinitions() {
		s.tokens[e.tokens[i]] = metaRef{taskARN: taskARN, container: c.GetName()}
	}
	s.mu.Unlock()
	return env, nil
}

// refresh fetches new credentials when half the lifetime of the current ones has passed,
// until ctx ends; failures are retried every RetryInterval.
func (s *Server) refresh(ctx context.Context, taskARN, credID string, cur *agentv1.GetTaskCredentialsResponse) {
	issued := s.cfg.Now()
	for {
		wait := cur.GetExpiration().AsTime().Sub(issued) / 2
		if wait < time.Second {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		for {
			resp, err := s.cfg.Credentials(ctx, taskARN, "TaskRole")
			if err == nil {
				s.mu.Lock()
				if c := s.creds[credID]; c != nil {
					c.resp = resp
				}
				s.mu.Unlock()
				cur, issued = resp, s.cfg.Now()
				break
			}
			if ctx.Err() != nil {
				return
			}
			s.cfg.Log.Warn("refreshing task credentials failed", "task", taskARN, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.cfg.RetryInterval):
			}
		}
	}
}

// Release forgets a stopped task: its credentials stop being served and refreshed and its
// metadata tokens stop answering.
func (s *Server) Release(taskARN string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.tasks[taskARN]
	if e == nil {
		return
	}
	if e.cancel != nil {
		e.cancel()
	}
	delete(s.creds, e.credID)
	for _, t := range e.tokens {
		delete(s.tokens, t)
	}
	delete(s.tasks, taskARN)
}

// Handler returns the endpoints' HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/credentials/{id}", s.serveCredentials)
	for _, v := range []string{"v3", "v4"} {
		mux.HandleFunc("GET /"+v+"/{token}", s.serveMetadata(false, false))
		mux.HandleFunc("GET /"+v+"/{token}/task", s.serveMetadata(true, false))
		mux.HandleFunc("GET /"+v+"/{token}/stats", s.serveMetadata(false, true))
		mux.HandleFunc("GET /"+v+"/{token}/task/stats", s.serveMetadata(true, true))
	}
	if s.cfg.API != "" {
		if target, err := url.Parse(s.cfg.API); err == nil {
			rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(target)
				r.Out.Host = r.In.Host // signed by the caller's SigV4
			}}
			mux.Handle("POST /{$}", rp)
		} else {
			s.cfg.Log.Warn("task endpoint relay off: bad API URL", "url", s.cfg.API, "err", err)
		}
	}
	return mux
}

// credentialsJSON is the ECS agent's credentials answer.
type credentialsJSON struct {
	RoleArn         string `json:"RoleArn"`
	AccessKeyID     string `json:"AccessKeyId"`
	SecretAccessKey string `json:"SecretAccessKey"`
	Token           string `json:"Token"`
	Expiration      string `json:"Expiration"`
}

func (s *Server) serveCredentials(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	c := s.creds[r.PathValue("id")]
	var resp *agentv1.GetTaskCredentialsResponse
	if c != nil {
		resp = c.resp
	}
	s.mu.Unlock()
	if resp == nil {
		// The ECS agent's answer for an id it does not hold.
		writeJSON(w, http.StatusBadRequest, map[string]string{"code": "InvalidIdInRequest", "message": "CredentialsV2Request: Credentials not found"})
		return
	}
	writeJSON(w, http.StatusOK, credentialsJSON{
		RoleArn: resp.GetRoleArn(), AccessKeyID: resp.GetAccessKeyId(), SecretAccessKey: resp.GetSecretAccessKey(),
		Token: resp.GetSessionToken(), Expiration: resp.GetExpiration().AsTime().UTC().Format(time.RFC3339),
	})
}

func (s *Server) serveMetadata(task, stats bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		ref, ok := s.tokens[r.PathValue("token")]
		src := s.source
		s.mu.Unlock()
		if !ok || src == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"code": "InvalidIdInRequest", "message": "V4 metadata handler: unable to get task arn from request"})
			return
		}
		md, ok := src.TaskMetadata(r.Context(), ref.taskARN)
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"code": "InvalidIdInRequest", "message": "V4 metadata handler: task not found"})
			return
		}
		switch {
		case task && !stats:
			writeJSON(w, http.StatusOK, md)
		case task && stats:
			out := map[string]*Stats{}
			for _, c := range md.Containers {
				st, err := src.ContainerStats(r.Context(), ref.taskARN, c.Name)
				if err != nil {
					out[c.DockerID] = nil // AWS answers null for a container without stats
					continue
				}
				out[c.DockerID] = st
			}
			writeJSON(w, http.StatusOK, out)
		case stats:
			st, err := src.ContainerStats(r.Context(), ref.taskARN, ref.container)
			if err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"code": "InternalServerError", "message": "V4 stats handler: unable to get stats for container: " + err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, st)
		default:
			for _, c := range md.Containers {
				if c.Name == ref.container {
					writeJSON(w, http.StatusOK, c)
					return
				}
			}
			writeJSON(w, http.StatusNotFound, map[string]string{"code": "InvalidIdInRequest", "message": "V4 metadata handler: container not found"})
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
