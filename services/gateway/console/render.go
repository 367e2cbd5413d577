package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strings"
	"time"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/berthhq/berth/pkg/buildinfo"
)

// pageNames are the templates under templates/, each rendered inside layout.html.
var pageNames = []string{"signin", "clusters", "cluster", "service", "task", "logs", "instance", "taskdefs", "taskdef", "confirm", "error"}

var funcs = template.FuncMap{
	// version is the Berth release the page was served by (buildinfo.Version).
	"version": func() string { return buildinfo.Version },
	// when formats an ECS timestamp (epoch seconds); empty for zero.
	"when": func(sec float64) string {
		if sec == 0 {
			return ""
		}
		return epoch(sec).UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"iso": func(sec float64) string {
		if sec == 0 {
			return ""
		}
		return epoch(sec).UTC().Format(time.RFC3339Nano)
	},
	"logtime": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"short":   shortID,
	"name":    lastPart,
	"pct": func(part, whole int64) int64 {
		if whole <= 0 {
			return 0
		}
		return int64(math.Round(100 * float64(part) / float64(whole)))
	},
	"resource": func(rs []*ecsv1.Resource, name string) int64 {
		for _, r := range rs {
			if r.GetName() == name {
				return int64(r.GetIntegerValue()) + r.GetLongValue() + int64(r.GetDoubleValue())
			}
		}
		return 0
	},
	"ports": func(rs []*ecsv1.Resource, name string) string {
		for _, r := range rs {
			if r.GetName() == name {
				return strings.Join(r.GetStringSetValue(), ", ")
			}
		}
		return ""
	},
	"sub":   func(a, b int64) int64 { return a - b },
	"int64": func(v int32) int64 { return int64(v) },
	// familyPath turns "family:revision" into the task definition page's "family/revision".
	"familyPath": func(ref string) string {
		if i := lastColon(ref); i >= 0 {
			return ref[:i] + "/" + ref[i+1:]
		}
		return ref
	},
	// dict builds a map from key, value pairs, for sub-templates.
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, errors.New("dict: odd number of arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, errors.New("dict: key is not a string")
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
	"add":   func(a, b int32) int32 { return a + b },
	"lower": strings.ToLower,
	"status": func(s string) string { // a CSS class for a status word
		switch s {
		case "RUNNING", "ACTIVE", "COMPLETED", "PRIMARY", "HEALTHY":
			return "ok"
		case "STOPPED", "FAILED", "INACTIVE", "UNHEALTHY":
			return "bad"
		case "":
			return ""
		}
		return "busy"
	},
}

func epoch(sec float64) time.Time {
	s, frac := math.Modf(sec)
	return time.Unix(int64(s), int64(frac*1e9))
}

// lastPart returns what follows an ARN's last '/' (a name or an id).
func lastPart(arn string) string {
	if i := strings.LastIndexByte(arn, '/'); i >= 0 {
		return arn[i+1:]
	}
	return arn
}

// shortID returns the first 8 characters of an ARN's id.
func shortID(arn string) string {
	id := lastPart(arn)
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func taskID(arn string) string { return lastPart(arn) }

func ptr[T any](v T) *T { return &v }

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (c *Console) parseTemplates() error {
	c.pages = map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("console: template %s: %w", name, err)
		}
		c.pages[name] = t
	}
	return nil
}

// render executes a page (the whole document, or only its main section when the live
// updater asks with X-Console-Partial) into a buffer, then writes it.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data map[string]any) {
	t := c.pages[name]
	if data == nil {
		data = map[string]any{}
	}
	if rq, ok := r.Context().Value(ctxKey{}).(*request); ok {
		data["Who"] = rq.who
		data["CSRFToken"] = rq.sess.csrf()
	}
	data["Path"] = r.URL.Path
	var buf bytes.Buffer
	tmpl := "layout.html"
	if r.Header.Get("X-Console-Partial") == "1" {
		tmpl = "main"
	}
	if err := t.ExecuteTemplate(&buf, tmpl, data); err != nil {
		c.log.Error("console: rendering", "page", name, "error", err)
		http.Error(w, "The page could not be rendered.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// page renders an authenticated page with its title.
func (c *Console) page(w http.ResponseWriter, r *http.Request, name, title string, data map[string]any) {
	data["Title"] = title
	c.render(w, r, http.StatusOK, name, data)
}

// fail renders an ECS error (or an internal one) as the error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *APIError
	status := http.StatusBadRequest
	if !errors.As(err, &ae) {
		c.log.Error("console: call failed", "path", r.URL.Path, "error", err)
		ae = &APIError{Type: "ServerException", Message: "An internal error occurred."}
		status = http.StatusInternalServerError
	}
	c.render(w, r, status, "error", map[string]any{"Title": "Error", "Err": ae})
}

// call sends an ECS action as the signed-in identity.
func (c *Console) call(r *http.Request, rq *request, action string, in proto.Message) (proto.Message, error) {
	return c.cfg.Call(r.Context(), rq.who, action, in)
}
