package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// LogLine is one line a container printed.
type LogLine struct {
	Container string
	Stream    string // "stdout" or "stderr"
	Time      time.Time
	Text      string
}

// LogQuery selects a task's log lines.
type LogQuery struct {
	// TaskARN is the task's full ARN (the console has checked it is the caller's).
	TaskARN string
	// Cluster and ContainerInstanceARN are the task's cluster name and instance, as
	// DescribeTasks answered.
	Cluster, ContainerInstanceARN string
	// Container limits the read to one container; empty reads all.
	Container string
	// Tail keeps the last N lines per container; 0 keeps all.
	Tail int
	// Since skips lines captured before it; zero keeps all.
	Since time.Time
	// Follow keeps sending new lines until the task's containers stop or ctx ends.
	Follow bool
}

// ErrNoLogs is returned by a LogSource when the task has no logs (yet).
var ErrNoLogs = errors.New("console: no logs for this task")

// LogSource reads task logs for the console's logs page. It is an interface so the page
// can move to another store (CloudWatch Logs) without changing.
type LogSource interface {
	// ReadLogs sends the selected lines to emit in batches, oldest first; it returns
	// ErrNoLogs when the task has none, or emit's error.
	ReadLogs(ctx context.Context, who Identity, q LogQuery, emit func([]LogLine) error) error
}

// AgentLogs reads logs from an agent's LogService (the path `berth logs` uses): the agent
// keeps each container's output under its data dir.
type AgentLogs struct {
	client agentv1connect.LogServiceClient
}

// NewAgentLogs returns a LogSource reading from the agent LogService at baseURL (e.g.
// "http://127.0.0.1:4568", `berth dev`'s BERTH_AGENT_LOG_ADDR) over httpClient.
func NewAgentLogs(httpClient connect.HTTPClient, baseURL string) *AgentLogs {
	return &AgentLogs{client: agentv1connect.NewLogServiceClient(httpClient, baseURL)}
}

// ReadLogs implements LogSource.
func (a *AgentLogs) ReadLogs(ctx context.Context, _ Identity, q LogQuery, emit func([]LogLine) error) error {
	req := &agentv1.ReadLogsRequest{TaskArn: q.TaskARN, ContainerName: q.Container, Tail: int32(q.Tail), Follow: q.Follow}
	if !q.Since.IsZero() {
		req.Since = timestamppb.New(q.Since)
	}
	stream, err := a.client.ReadLogs(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Receive() {
		in := stream.Msg().GetLines()
		out := make([]LogLine, len(in))
		for i, l := range in {
			out[i] = LogLine{Container: l.GetContainerName(), Stream: l.GetStream(), Time: l.GetTime().AsTime(), Text: l.GetText()}
		}
		if err := emit(out); err != nil {
			return err
		}
	}
	err = stream.Err()
	switch {
	case connect.CodeOf(err) == connect.CodeNotFound:
		return ErrNoLogs
	case err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil:
		return err
	}
	return nil
}

// LogEndpointAttribute is the container instance attribute where a Berth agent
// advertises its LogService URL (the agent package's LogEndpointAttribute).
const LogEndpointAttribute = "berth.log-endpoint"

// InstanceLogs reads a task's logs from the agent of its container instance, found
// through the instance's berth.log-endpoint attribute (DescribeContainerInstances as the
// signed-in caller). It is the console's default LogSource.
type InstanceLogs struct {
	httpClient connect.HTTPClient
	call       func(ctx context.Context, who Identity, action string, in proto.Message) (proto.Message, error)
}

// NewInstanceLogs returns an InstanceLogs that describes instances with call (the
// console's Config.Call) and reaches agents with httpClient.
func NewInstanceLogs(httpClient connect.HTTPClient, call func(ctx context.Context, who Identity, action string, in proto.Message) (proto.Message, error)) *InstanceLogs {
	return &InstanceLogs{httpClient: httpClient, call: call}
}

// ReadLogs implements LogSource: ErrNoLogs for a task without an instance or an instance
// whose agent advertises no http(s) log endpoint.
func (l *InstanceLogs) ReadLogs(ctx context.Context, who Identity, q LogQuery, emit func([]LogLine) error) error {
	if q.ContainerInstanceARN == "" {
		return ErrNoLogs
	}
	out, err := l.call(ctx, who, "DescribeContainerInstances", &ecsv1.DescribeContainerInstancesRequest{
		Cluster: &q.Cluster, ContainerInstances: []string{q.ContainerInstanceARN}})
	if err != nil {
		return err
	}
	var endpoint string
	for _, ci := range out.(*ecsv1.DescribeContainerInstancesResponse).GetContainerInstances() {
		for _, a := range ci.GetAttributes() {
			if a.GetName() == LogEndpointAttribute {
				endpoint = a.GetValue()
			}
		}
	}
	if u, err := url.Parse(endpoint); endpoint == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ErrNoLogs
	}
	return NewAgentLogs(l.httpClient, endpoint).ReadLogs(ctx, who, q, emit)
}

// logTail is how many lines the logs page shows before following.
const logTail = 200

// logsPage serves a task's last lines, with a follow switch that streams new ones.
func (c *Console) logsPage(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	task, ok := c.describeTask(w, r, rq)
	if !ok {
		return
	}
	data := map[string]any{"Task": task, "Cluster": r.PathValue("cluster"), "ID": taskID(task.GetTaskArn())}
	var lines []LogLine
	if c.cfg.Logs == nil {
		data["Error"] = "This endpoint has no log source configured."
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		err := c.cfg.Logs.ReadLogs(ctx, rq.who, LogQuery{TaskARN: task.GetTaskArn(), Cluster: r.PathValue("cluster"), ContainerInstanceARN: task.GetContainerInstanceArn(), Tail: logTail}, func(b []LogLine) error {
			lines = append(lines, b...)
			return nil
		})
		switch {
		case errors.Is(err, ErrNoLogs):
			data["Error"] = "This task has no logs (yet)."
		case err != nil:
			c.log.Warn("console: reading logs", "task", task.GetTaskArn(), "error", err)
			data["Error"] = "The logs could not be read: " + err.Error()
		}
	}
	data["Lines"] = lines
	if n := len(lines); n > 0 {
		data["Since"] = lines[n-1].Time.Add(time.Nanosecond).UTC().Format(time.RFC3339Nano)
	}
	c.page(w, r, "logs", "Logs of task "+taskID(task.GetTaskArn()), data)
}

// logsStream serves the follow switch: server-sent "line" events (data: container,
// stream and text as a JSON object) from `since` on, until the task's containers stop.
func (c *Console) logsStream(w http.ResponseWriter, r *http.Request) {
	rq := reqOf(r)
	task, ok := c.describeTask(w, r, rq)
	if !ok {
		return
	}
	if c.cfg.Logs == nil {
		http.Error(w, "no log source", http.StatusNotFound)
		return
	}
	q := LogQuery{TaskARN: task.GetTaskArn(), Cluster: r.PathValue("cluster"), ContainerInstanceARN: task.GetContainerInstanceArn(), Follow: true}
	if s := r.URL.Query().Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			http.Error(w, "since: want an RFC 3339 time", http.StatusBadRequest)
			return
		}
		q.Since = t
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 5000\n\n")
	_ = rc.Flush()
	err := c.cfg.Logs.ReadLogs(r.Context(), rq.who, q, func(b []LogLine) error {
		for _, l := range b {
			fmt.Fprintf(w, "event: line\ndata: {\"container\":%s,\"stream\":%s,\"time\":%s,\"text\":%s}\n\n",
				jsonString(l.Container), jsonString(l.Stream), jsonString(l.Time.UTC().Format(time.RFC3339Nano)), jsonString(l.Text))
		}
		return rc.Flush()
	})
	if err != nil && !errors.Is(err, ErrNoLogs) && r.Context().Err() == nil {
		c.log.Warn("console: following logs", "task", task.GetTaskArn(), "error", err)
	}
	fmt.Fprint(w, "event: end\ndata: \n\n")
	_ = rc.Flush()
}

// describeTask reads the path's task; on failure it writes the error page.
func (c *Console) describeTask(w http.ResponseWriter, r *http.Request, rq *request) (*ecsv1.Task, bool) {
	out, err := c.call(r, rq, "DescribeTasks", &ecsv1.DescribeTasksRequest{
		Cluster: ptr(r.PathValue("cluster")), Tasks: []string{r.PathValue("task")}, Include: []string{"TAGS"}})
	if err != nil {
		c.fail(w, r, err)
		return nil, false
	}
	tasks := out.(*ecsv1.DescribeTasksResponse).GetTasks()
	if len(tasks) == 0 {
		c.fail(w, r, &APIError{Type: "ClientException", Message: "No task " + r.PathValue("task") + " in cluster " + r.PathValue("cluster") + "."})
		return nil, false
	}
	return tasks[0], true
}
