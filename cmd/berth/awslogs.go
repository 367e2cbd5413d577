package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/berthhq/berth/pkg/sigv4client"
)

// awsClient calls AWS JSON 1.1 operations on Berth's gateway, signed with SigV4.
type awsClient struct {
	endpoint, region, accessKey, secretKey string
}

// call runs target (e.g. "Logs_20140328.GetLogEvents") for the signing service with in
// as the JSON body and decodes the answer into out. An AWS error comes back as an error
// "Type: message".
func (c awsClient) call(ctx context.Context, service, target string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	tr := sigv4client.New(http.DefaultTransport, sigv4client.StaticCredentials(c.accessKey, c.secretKey), c.region)
	tr.Service = service
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.endpoint, "/")+"/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", target)
	resp, err := (&http.Client{Transport: tr, Timeout: time.Minute}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(b, &e)
		return fmt.Errorf("%s: %s", e.Type[strings.LastIndex(e.Type, "#")+1:], e.Message)
	}
	return json.Unmarshal(b, out)
}

// awslogsTarget is where an awslogs container's output is: its group and stream.
type awslogsTarget struct {
	container, group, stream string
}

// awslogsTargets looks the task up through the ECS API and returns the awslogs
// destinations of its containers (only container, when set). A task without awslogs
// containers answers none.
func (c awsClient) awslogsTargets(ctx context.Context, cluster, task, container string) ([]awslogsTarget, error) {
	var dt struct {
		Tasks []struct {
			TaskArn           string `json:"taskArn"`
			TaskDefinitionArn string `json:"taskDefinitionArn"`
			Containers        []struct {
				Name        string `json:"name"`
				RuntimeID   string `json:"runtimeId"`
				ContainerID string `json:"containerArn"`
			} `json:"containers"`
		} `json:"tasks"`
	}
	in := map[string]any{"tasks": []string{task}}
	if p := strings.Split(task, "/"); cluster == "" && len(p) == 3 && strings.HasSuffix(p[0], ":task") {
		cluster = p[1] // a long task ARN names its cluster
	}
	if cluster != "" {
		in["cluster"] = cluster
	}
	if err := c.call(ctx, "ecs", "AmazonEC2ContainerServiceV20141113.DescribeTasks", in, &dt); err != nil {
		return nil, err
	}
	if len(dt.Tasks) == 0 {
		return nil, fmt.Errorf("task %s not found (give --cluster for a task outside the default cluster)", task)
	}
	t := dt.Tasks[0]
	var td struct {
		TaskDefinition struct {
			ContainerDefinitions []struct {
				Name             string `json:"name"`
				LogConfiguration *struct {
					LogDriver string            `json:"logDriver"`
					Options   map[string]string `json:"options"`
				} `json:"logConfiguration"`
			} `json:"containerDefinitions"`
		} `json:"taskDefinition"`
	}
	if err := c.call(ctx, "ecs", "AmazonEC2ContainerServiceV20141113.DescribeTaskDefinition", map[string]any{"taskDefinition": t.TaskDefinitionArn}, &td); err != nil {
		return nil, err
	}
	id := t.TaskArn[strings.LastIndex(t.TaskArn, "/")+1:]
	var out []awslogsTarget
	for _, cd := range td.TaskDefinition.ContainerDefinitions {
		lc := cd.LogConfiguration
		if lc == nil || lc.LogDriver != "awslogs" || (container != "" && cd.Name != container) {
			continue
		}
		stream := ""
		if p := lc.Options["awslogs-stream-prefix"]; p != "" {
			stream = p + "/" + cd.Name + "/" + id
		} else {
			for _, ct := range t.Containers {
				if ct.Name == cd.Name {
					stream = ct.RuntimeID
				}
			}
		}
		if stream == "" {
			continue
		}
		out = append(out, awslogsTarget{container: cd.Name, group: lc.Options["awslogs-group"], stream: stream})
	}
	return out, nil
}

// logEvent is one event of GetLogEvents.
type logEvent struct {
	Timestamp int64  `json:"timestamp"`
	Message   string `json:"message"`
}

// printAWSLogs prints a container's events from the log store through GetLogEvents:
// all (or the last tail) oldest first, then, with follow, new ones as they arrive
// until ctx ends.
func (c awsClient) printAWSLogs(ctx context.Context, w io.Writer, t awslogsTarget, tail int32, since time.Duration, follow, timestamps bool) error {
	in := map[string]any{"logGroupName": t.group, "logStreamName": t.stream}
	if tail > 0 {
		in["limit"] = tail
	} else {
		in["startFromHead"] = true
	}
	if since > 0 {
		in["startTime"] = time.Now().Add(-since).UnixMilli()
	}
	for {
		var out struct {
			Events           []logEvent `json:"events"`
			NextForwardToken string     `json:"nextForwardToken"`
		}
		if err := c.call(ctx, "logs", "Logs_20140328.GetLogEvents", in, &out); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, e := range out.Events {
			if timestamps {
				fmt.Fprintf(w, "%s %s: %s\n", time.UnixMilli(e.Timestamp).UTC().Format(time.RFC3339Nano), t.container, e.Message)
			} else {
				fmt.Fprintf(w, "%s: %s\n", t.container, e.Message)
			}
		}
		atEnd := out.NextForwardToken == in["nextToken"]
		in = map[string]any{"logGroupName": t.group, "logStreamName": t.stream, "nextToken": out.NextForwardToken}
		if atEnd || len(out.Events) == 0 {
			if !follow {
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}
