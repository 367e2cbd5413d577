// Package console is Berth's web console, served by the gateway at /console: sign in with
// an access key (the API's account and key model), then browse the account's clusters,
// services, tasks, container instances and task definitions of one region, follow a
// task's logs, and scale services, force new deployments, stop tasks and drain or
// activate instances, each after a confirmation page.
//
// Pages are rendered with html/template from templates embedded in the binary, with a
// small embedded stylesheet and script (nothing is fetched from elsewhere). Every read and
// write is an ECS operation sent to the scheduler through the gateway's own operation
// clients with the signed-in account and region (Config.Call), so the console sees
// exactly what the API shows. Pages update live: the browser holds one server-sent event
// stream (/console/events), fed by one scheduler-side watch per (account, region)
// shared by every browser (Config.Watch), and re-renders the page's main section when a
// change arrives.
package console

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// SessionLifetime is how long a console session lasts after sign-in.
const SessionLifetime = 12 * time.Hour

// Credential is a resolved access key.
type Credential struct {
	// AccountID is the key's 12-digit account.
	AccountID string
	// SecretAccessKey is the key's secret.
	SecretAccessKey string
	// InstanceScoped is true for a container instance's agent credential, which cannot
	// sign in to the console.
	InstanceScoped bool
}

// ErrUnknownKey is returned by Config.Resolve for an access key id that does not exist.
var ErrUnknownKey = errors.New("console: unknown access key")

// Identity is who a console request acts as.
type Identity struct {
	AccessKeyID string
	AccountID   string
	Region      string
}

// APIError is an ECS error answer (the AWS error type and message), as Config.Call
// returns it for the console to show.
type APIError struct {
	Type    string
	Message string
}

// Error implements error.
func (e *APIError) Error() string { return e.Type + ": " + e.Message }

// Change is one notice of the watch feeding live updates: the kinds of resources that
// changed ("clusters", "services", "tasks", "instances", "task-definitions").
type Change struct {
	Kinds []string
}

// Config configures the console. Resolve, Call and Watch are required.
type Config struct {
	// Resolve looks up an access key id: ErrUnknownKey when there is none.
	Resolve func(ctx context.Context, accessKeyID string) (Credential, error)
	// Call sends one ECS operation (by its action name, e.g. "DescribeServices") with the
	// identity's account and region and returns its output; ECS errors as *APIError.
	Call func(ctx context.Context, who Identity, action string, in proto.Message) (proto.Message, error)
	// Watch streams change notices for the identity's account and region until ctx ends
	// or the stream fails (then the channel is closed).
	Watch func(ctx context.Context, who Identity) (<-chan Change, error)
	// Logs reads task logs; nil means InstanceLogs over HTTPClient and Call (each task's
	// agent, found through its instance's berth.log-endpoint attribute).
	Logs LogSource
	// HTTPClient reaches agents for the default Logs; http.DefaultClient when nil.
	HTTPClient connect.HTTPClient
	// RegionAllowed reports whether the region may be signed in to.
	RegionAllowed func(region string) bool
	// DefaultRegion fills the sign-in form; "us-east-1" when empty.
	DefaultRegion string
	// Locked, Failed and Succeeded share the gateway's lockout of addresses that fail to
	// authenticate; nil disables it.
	Locked    func(r *http.Request) (time.Duration, bool)
	Failed    func(r *http.Request)
	Succeeded func(r *http.Request)
	// Logger receives errors; slog.Default() when nil.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Console is the console's http.Handler, for paths under /console.
type Console struct {
	cfg   Config
	log   *slog.Logger
	mux   *http.ServeMux
	pages map[string]*template.Template
	hub   *hub
}

// New returns the console. It fails when a required Config field is missing or a
// template does not parse.
func New(cfg Config) (*Console, error) {
	if cfg.Resolve == nil || cfg.Call == nil || cfg.Watch == nil {
		return nil, errors.New("console: Resolve, Call and Watch are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DefaultRegion == "" {
		cfg.DefaultRegion = "us-east-1"
	}
	if cfg.Logs == nil {
		hc := cfg.HTTPClient
		if hc == nil {
			hc = http.DefaultClient
		}
		cfg.Logs = NewInstanceLogs(hc, cfg.Call)
	}
	if cfg.RegionAllowed == nil {
		cfg.RegionAllowed = func(string) bool { return true }
	}
	c := &Console{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	c.hub = newHub(cfg.Watch, cfg.Logger)
	if err := c.parseTemplates(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", staticHandler(http.FileServerFS(static))))
	c.mux.HandleFunc("GET /console/signin", c.signinForm)
	c.mux.HandleFunc("POST /console/signin", c.signin)
	c.mux.HandleFunc("POST /console/signout", c.auth(c.signout))
	c.mux.HandleFunc("GET /console/{$}", c.auth(c.clustersPage))
	c.mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusFound)
	})
	c.mux.HandleFunc("GET /console/events", c.auth(c.events))
	c.mux.HandleFunc("GET /console/clusters/{cluster}", c.auth(c.clusterPage))
	c.mux.HandleFunc("GET /console/clusters/{cluster}/services/{service}", c.auth(c.servicePage))
	c.mux.HandleFunc("POST /console/clusters/{cluster}/services/{service}/scale", c.auth(c.scaleService))
	c.mux.HandleFunc("POST /console/clusters/{cluster}/services/{service}/deploy", c.auth(c.forceDeployment))
	c.mux.HandleFunc("GET /console/clusters/{cluster}/tasks/{task}", c.auth(c.taskPage))
	c.mux.HandleFunc("POST /console/clusters/{cluster}/tasks/{task}/stop", c.auth(c.stopTask))
	c.mux.HandleFunc("GET /console/clusters/{cluster}/tasks/{task}/logs", c.auth(c.logsPage))
	c.mux.HandleFunc("GET /console/clusters/{cluster}/tasks/{task}/logs/stream", c.auth(c.logsStream))
	c.mux.HandleFunc("GET /console/clusters/{cluster}/instances/{instance}", c.auth(c.instancePage))
	c.mux.HandleFunc("POST /console/clusters/{cluster}/instances/{instance}/state", c.auth(c.instanceState))
	c.mux.HandleFunc("GET /console/task-definitions", c.auth(c.taskDefinitionsPage))
	c.mux.HandleFunc("GET /console/task-definitions/{family}/{revision}", c.auth(c.taskDefinitionPage))
	return c, nil
}

// staticHandler adds caching and type headers to the embedded assets.
func staticHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		h.ServeHTTP(w, r)
	})
}

// ServeHTTP serves /console and everything under it, with security headers on every
// answer: a content security policy allowing only the console's own script and style,
// no framing, no referrer.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	c.mux.ServeHTTP(w, r)
}

// request is one authenticated console request.
type request struct {
	who  Identity
	sess *session
}

type ctxKey struct{}

// auth checks the session cookie, and on POST the CSRF token; unauthenticated GETs go to
// the sign-in page, everything else is refused with 403.
func (c *Console) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rq, err := c.session(r)
		if err != nil {
			// Page loads go to the sign-in page; the event stream and the live updater's
			// partial fetches get 403 (the updater then leaves the page as it is).
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" && r.Header.Get("X-Console-Partial") == "" {
				http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
				return
			}
			http.Error(w, "Not signed in.", http.StatusForbidden)
			return
		}
		if r.Method == http.MethodPost {
			if !rq.sess.checkCSRF(r.PostFormValue("csrf")) {
				http.Error(w, "The form's CSRF token is missing or wrong: reload the page and try again.", http.StatusForbidden)
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rq)))
	}
}

func reqOf(r *http.Request) *request { return r.Context().Value(ctxKey{}).(*request) }

// session verifies the request's session cookie.
func (c *Console) session(r *http.Request) (*request, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, errBadSession
	}
	s, mac, err := parseSession(ck.Value)
	if err != nil {
		return nil, err
	}
	cred, err := c.cfg.Resolve(r.Context(), s.KeyID)
	if err != nil || cred.InstanceScoped {
		return nil, errBadSession
	}
	if err := s.verify(sessionKey(cred.SecretAccessKey), mac, c.cfg.Now()); err != nil {
		return nil, err
	}
	if !c.cfg.RegionAllowed(s.Region) {
		return nil, errBadSession
	}
	return &request{who: Identity{AccessKeyID: s.KeyID, AccountID: cred.AccountID, Region: s.Region}, sess: s}, nil
}

// signinForm renders the sign-in page with a fresh double-submit CSRF token.
func (c *Console) signinForm(w http.ResponseWriter, r *http.Request) {
	c.renderSignin(w, r, http.StatusOK, "", r.URL.Query().Get("region"))
}

func (c *Console) renderSignin(w http.ResponseWriter, r *http.Request, status int, msg, region string) {
	token := randomToken()
	setCookie(w, r, preCookie, token, 600)
	if region == "" {
		region = c.cfg.DefaultRegion
	}
	c.render(w, r, status, "signin", map[string]any{"CSRF": token, "Error": msg, "Region": region})
}

// signin checks an access key id and secret the way the gateway resolves keys (the
// scheduler's AdminService lookup) and starts a session.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	pre, err := r.Cookie(preCookie)
	token := r.PostFormValue("csrf")
	if err != nil || token == "" || subtle.ConstantTimeCompare([]byte(pre.Value), []byte(token)) != 1 {
		c.renderSignin(w, r, http.StatusForbidden, "The sign-in form expired; try again.", "")
		return
	}
	if c.cfg.Locked != nil {
		if wait, locked := c.cfg.Locked(r); locked {
			c.renderSignin(w, r, http.StatusTooManyRequests,
				fmt.Sprintf("Too many failed sign-ins from this address; try again in %d s.", int(wait.Seconds()+0.999)), "")
			return
		}
	}
	keyID := strings.TrimSpace(r.PostFormValue("access_key_id"))
	secret := r.PostFormValue("secret_access_key")
	region := strings.TrimSpace(r.PostFormValue("region"))
	if region == "" {
		region = c.cfg.DefaultRegion
	}
	if !c.cfg.RegionAllowed(region) {
		c.renderSignin(w, r, http.StatusBadRequest, fmt.Sprintf("Region %q is not served by this endpoint.", region), "")
		return
	}
	cred, err := c.cfg.Resolve(r.Context(), keyID)
	switch {
	case err != nil && !errors.Is(err, ErrUnknownKey):
		c.log.Error("console sign-in: resolving access key", "error", err)
		c.renderSignin(w, r, http.StatusInternalServerError, "The key could not be checked right now; try again.", region)
		return
	case err != nil || cred.InstanceScoped || keyID == "" ||
		subtle.ConstantTimeCompare([]byte(secret), []byte(cred.SecretAccessKey)) != 1:
		if c.cfg.Failed != nil {
			c.cfg.Failed(r)
		}
		c.renderSignin(w, r, http.StatusUnauthorized, "The access key id or secret access key is wrong.", region)
		return
	}
	if c.cfg.Succeeded != nil {
		c.cfg.Succeeded(r)
	}
	s := &session{KeyID: keyID, Region: region, Expires: c.cfg.Now().Add(SessionLifetime), Nonce: randomToken(),
		key: sessionKey(cred.SecretAccessKey)}
	setCookie(w, r, sessionCookie, s.encode(), int(SessionLifetime/time.Second))
	setCookie(w, r, preCookie, "", -1)
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

// signout deletes the session cookie.
func (c *Console) signout(w http.ResponseWriter, r *http.Request) {
	setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
}
