package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// awsProbe is the aws-probe mode: with the AWS SDK for Go v2's default configuration
// (credentials from AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI, endpoint from
// AWS_ENDPOINT_URL, region from AWS_REGION) it calls sts GetCallerIdentity and ecs
// ListClusters, then reads the task metadata endpoint v4 (/, /task, /stats, /task/stats),
// printing one "key=value" line per result ("error=…" and exit 1 on a failure). It then
// sleeps until signalled.
func awsProbe(ctx context.Context, stdout io.Writer) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(stdout, "error=%s: %v\n", what, err)
		return exitFail
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(cctx)
	if err != nil {
		return fail("config", err)
	}
	creds, err := cfg.Credentials.Retrieve(cctx)
	if err != nil {
		return fail("credentials", err)
	}
	fmt.Fprintf(stdout, "credentials-source=%s\n", creds.Source)
	fmt.Fprintf(stdout, "endpoint=%s\n", os.Getenv("AWS_ENDPOINT_URL"))
	fmt.Fprintf(stdout, "credentials-uri=%s%s\n", os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI"), os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"))
	id, err := sts.NewFromConfig(cfg).GetCallerIdentity(cctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return fail("sts", err)
	}
	fmt.Fprintf(stdout, "caller-arn=%s\ncaller-account=%s\n", aws.ToString(id.Arn), aws.ToString(id.Account))
	cl, err := ecs.NewFromConfig(cfg).ListClusters(cctx, &ecs.ListClustersInput{})
	if err != nil {
		return fail("ecs", err)
	}
	fmt.Fprintf(stdout, "clusters=%s\n", strings.Join(cl.ClusterArns, ","))

	base := os.Getenv("ECS_CONTAINER_METADATA_URI_V4")
	if base == "" {
		return fail("metadata", fmt.Errorf("ECS_CONTAINER_METADATA_URI_V4 is not set"))
	}
	var ctr struct{ Name, DockerId, KnownStatus string }
	var task struct {
		TaskARN, Family, KnownStatus string
		Containers                   []struct{ Name string }
	}
	var stats struct {
		CPU struct {
			Usage struct {
				Total uint64 `json:"total_usage"`
			} `json:"cpu_usage"`
		} `json:"cpu_stats"`
		Memory struct {
			Usage uint64 `json:"usage"`
		} `json:"memory_stats"`
	}
	var taskStats map[string]json.RawMessage
	for _, g := range []struct {
		path string
		v    any
	}{{"", &ctr}, {"/task", &task}, {"/stats", &stats}, {"/task/stats", &taskStats}} {
		if err := getJSON(cctx, base+g.path, g.v); err != nil {
			return fail("metadata"+g.path, err)
		}
	}
	fmt.Fprintf(stdout, "metadata-container=%s %s\n", ctr.Name, ctr.KnownStatus)
	fmt.Fprintf(stdout, "metadata-task=%s %s %s containers=%d\n", task.TaskARN, task.Family, task.KnownStatus, len(task.Containers))
	fmt.Fprintf(stdout, "metadata-stats=cpu:%t memory:%t\n", stats.CPU.Usage.Total > 0, stats.Memory.Usage > 0)
	fmt.Fprintf(stdout, "metadata-task-stats=%d\n", len(taskStats))
	fmt.Fprintln(stdout, "probe ok")
	<-ctx.Done()
	return exitOK
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}
