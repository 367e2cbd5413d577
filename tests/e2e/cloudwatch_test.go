package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/smithy-go"
)

// cwCLI runs `aws cloudwatch …` (CLI v1.45: botocore 1.43 sends smithy-rpc-v2-cbor) against
// stack and decodes its JSON answer; an error answer returns its stderr.
func cwCLI(t *testing.T, stack *apiStack, acct string, args ...string) (map[string]any, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "aws", append([]string{"cloudwatch", "--endpoint-url", stack.url, "--region", "us-east-1", "--output", "json"}, args...)...)
	cmd.Env = cliEnv(stack, acct)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, stderr.String()
	}
	v := map[string]any{}
	if len(strings.TrimSpace(string(out))) > 0 {
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("aws cloudwatch %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return v, ""
}

// TestCloudWatchWithAWSCLI drives the CloudWatch actions through the AWS CLI (CBOR on the
// wire): put-metric-data, get-metric-statistics, list-metrics, put-metric-alarm,
// describe-alarms, set-alarm-state, describe-alarm-history, and AWS's error codes.
func TestCloudWatchWithAWSCLI(t *testing.T) {
	t.Parallel() // see main_test.go
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; make deps installs it")
	}
	const acct = "123456789012"
	stack := startAPIStack(t, acct, "210987654321")
	must := func(args ...string) map[string]any {
		t.Helper()
		v, stderr := cwCLI(t, stack, acct, args...)
		if v == nil {
			t.Fatalf("aws cloudwatch %s: %s", strings.Join(args, " "), stderr)
		}
		return v
	}
	minute := time.Now().UTC().Truncate(time.Minute)
	at := func(d time.Duration) string { return minute.Add(d).Format(time.RFC3339) }
	must("put-metric-data", "--namespace", "Shop", "--metric-name", "Latency", "--unit", "Milliseconds",
		"--dimensions", "Host=a", "--value", "12", "--timestamp", at(-2*time.Minute))
	must("put-metric-data", "--namespace", "Shop", "--metric-data",
		fmt.Sprintf(`[{"MetricName":"Latency","Unit":"Milliseconds","Dimensions":[{"Name":"Host","Value":"a"}],"Timestamp":"%s","Values":[20,40],"Counts":[1,3]}]`, at(-time.Minute)))
	stats := must("get-metric-statistics", "--namespace", "Shop", "--metric-name", "Latency", "--dimensions", "Name=Host,Value=a",
		"--statistics", "Average", "Maximum", "SampleCount", "--period", "60", "--start-time", at(-10*time.Minute), "--end-time", at(time.Minute))
	dps, _ := stats["Datapoints"].([]any)
	if len(dps) != 2 || stats["Label"] != "Latency" {
		t.Fatalf("get-metric-statistics: %v", stats)
	}
	var second map[string]any
	for _, d := range dps {
		if m := d.(map[string]any); m["SampleCount"] == 4.0 {
			second = m
		}
	}
	if second == nil || second["Average"] != 35.0 || second["Maximum"] != 40.0 || second["Unit"] != "Milliseconds" {
		t.Fatalf("datapoints %v", dps)
	}
	if _, ok := second["Sum"]; ok {
		t.Fatalf("Sum was not asked for: %v", second)
	}
	// Another account sees nothing of it.
	if v, _ := cwCLI(t, stack, "210987654321", "list-metrics", "--namespace", "Shop"); len(v["Metrics"].([]any)) != 0 {
		t.Fatalf("other account lists %v", v)
	}
	list := must("list-metrics", "--namespace", "Shop")
	if ms := list["Metrics"].([]any); len(ms) != 1 || ms[0].(map[string]any)["MetricName"] != "Latency" {
		t.Fatalf("list-metrics: %v", list)
	}
	if _, stderr := cwCLI(t, stack, acct, "put-metric-data", "--namespace", "AWS/ECS", "--metric-name", "X", "--value", "1"); !strings.Contains(stderr, "(InvalidParameterValue)") {
		t.Fatalf("AWS/ namespace: %q", stderr)
	}
	if _, stderr := cwCLI(t, stack, acct, "get-metric-statistics", "--namespace", "Shop", "--metric-name", "Latency", "--statistics", "Average",
		"--period", "61", "--start-time", at(-10*time.Minute), "--end-time", at(0)); !strings.Contains(stderr, "(InvalidParameterValue)") {
		t.Fatalf("period 61: %q", stderr)
	}

	// The alarm's metric has no data and ignores missing data, so the leader's evaluations
	// keep whatever state set-alarm-state gives it.
	must("put-metric-alarm", "--alarm-name", "slow", "--namespace", "Shop", "--metric-name", "Absent", "--dimensions", "Name=Host,Value=a",
		"--statistic", "Average", "--period", "60", "--evaluation-periods", "3", "--datapoints-to-alarm", "2", "--threshold", "30",
		"--comparison-operator", "GreaterThanThreshold", "--treat-missing-data", "ignore")
	alarms := must("describe-alarms", "--alarm-names", "slow")
	ma := alarms["MetricAlarms"].([]any)
	if len(ma) != 1 || len(alarms["CompositeAlarms"].([]any)) != 0 {
		t.Fatalf("describe-alarms: %v", alarms)
	}
	a := ma[0].(map[string]any)
	if a["StateValue"] != "INSUFFICIENT_DATA" || a["AlarmArn"] != "arn:aws:cloudwatch:us-east-1:"+acct+":alarm:slow" || a["DatapointsToAlarm"] != 2.0 ||
		a["Threshold"] != 30.0 || a["ActionsEnabled"] != true || a["TreatMissingData"] != "ignore" {
		t.Fatalf("alarm %v", a)
	}
	must("set-alarm-state", "--alarm-name", "slow", "--state-value", "ALARM", "--state-reason", "testing")
	hist := must("describe-alarm-history", "--alarm-name", "slow", "--history-item-type", "StateUpdate")
	items := hist["AlarmHistoryItems"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["HistorySummary"] != "Alarm updated from INSUFFICIENT_DATA to ALARM" {
		t.Fatalf("history %v", hist)
	}
	if v := must("describe-alarms", "--state-value", "ALARM"); len(v["MetricAlarms"].([]any)) != 1 {
		t.Fatalf("describe-alarms --state-value ALARM: %v", v)
	}
	if v := must("describe-alarms-for-metric", "--namespace", "Shop", "--metric-name", "Absent", "--dimensions", "Name=Host,Value=a"); len(v["MetricAlarms"].([]any)) != 1 {
		t.Fatalf("describe-alarms-for-metric: %v", v)
	}
	if _, stderr := cwCLI(t, stack, acct, "put-metric-alarm", "--alarm-name", "bad", "--namespace", "Shop", "--metric-name", "Latency",
		"--statistic", "Average", "--period", "60", "--evaluation-periods", "1", "--datapoints-to-alarm", "2", "--threshold", "1",
		"--comparison-operator", "GreaterThanThreshold"); !strings.Contains(stderr, "(InvalidParameterValue)") {
		t.Fatalf("DatapointsToAlarm > EvaluationPeriods: %q", stderr)
	}
	if _, stderr := cwCLI(t, stack, acct, "delete-alarms", "--alarm-names", "slow", "nope"); !strings.Contains(stderr, "(ResourceNotFound)") {
		t.Fatalf("delete-alarms with a missing alarm: %q", stderr)
	}
	must("delete-alarms", "--alarm-names", "slow")
}

// TestCloudWatchWithBoto3 runs testdata/cloudwatch_boto3.py: boto3's own CBOR client.
func TestCloudWatchWithBoto3(t *testing.T) {
	t.Parallel() // see main_test.go
	python := boto3Python(t)
	const acct = "123456789012"
	stack := startAPIStack(t, acct)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "cloudwatch_boto3.py"))
	cmd.Env = append(cliEnv(stack, acct), "AWS_ENDPOINT_URL="+stack.url, "AWS_DEFAULT_REGION=us-east-1")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("cloudwatch_boto3.py: %v\n%s", err, out)
	}
}

// TestCloudWatchWithSDK uses the Go SDK v2 CloudWatch client (v1.76, rpc-v2-cbor too).
func TestCloudWatchWithSDK(t *testing.T) {
	t.Parallel() // see main_test.go
	const acct = "123456789012"
	stack := startAPIStack(t, acct)
	c := cloudwatch.NewFromConfig(stack.awsConfig(acct, "us-east-1"))
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Minute)
	dims := []cwtypes.Dimension{{Name: aws.String("Q"), Value: aws.String("1")}}
	_, err := c.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String("Go"), MetricData: []cwtypes.MetricDatum{
		{MetricName: aws.String("Depth"), Dimensions: dims, Value: aws.Float64(7), Timestamp: aws.Time(now.Add(-time.Minute)), Unit: cwtypes.StandardUnitCount},
	}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{Namespace: aws.String("Go"), MetricName: aws.String("Depth"), Dimensions: dims,
		StartTime: aws.Time(now.Add(-time.Hour)), EndTime: aws.Time(now), Period: aws.Int32(60), Statistics: []cwtypes.Statistic{cwtypes.StatisticMaximum}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Datapoints) != 1 || aws.ToFloat64(out.Datapoints[0].Maximum) != 7 || !out.Datapoints[0].Timestamp.Equal(now.Add(-time.Minute)) || out.Datapoints[0].Average != nil {
		t.Fatalf("datapoints %+v", out.Datapoints)
	}
	_, err = c.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String("AWS/X"), MetricData: []cwtypes.MetricDatum{{MetricName: aws.String("m"), Value: aws.Float64(1)}}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidParameterValue" {
		t.Fatalf("AWS/ namespace: %v", err)
	}
}

// TestDevECSServiceMetrics runs `berth dev` and a one-task service, and waits for the
// service's AWS/ECS CPUUtilization and MemoryUtilization (computed from the agent's cgroup
// samples) and the cluster's CPUReservation to be readable with the AWS CLI.
func TestDevECSServiceMetrics(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	dir := t.TempDir()
	env := devEnv(t, filepath.Join(dir, "data"))
	startDev(t, root, env, filepath.Join(dir, "dev.log"))
	image := envValue(env, "BERTH_REGISTRY_ADDR") + "/berth/demo:latest"
	cli(t, root, env, "bin/berth", "image", "demo")
	awsc := func(args ...string) string { t.Helper(); return cli(t, root, env, "aws", args...) }
	def, _ := json.Marshal([]map[string]any{{
		"name": "app", "image": image, "memory": 64, "command": []string{"sleep", "600"}, "essential": true,
	}})
	awsc("ecs", "register-task-definition", "--family", "cwmetrics", "--cpu", "256", "--memory", "128", "--container-definitions", string(def))
	awsc("ecs", "create-service", "--service-name", "cwweb", "--task-definition", "cwmetrics", "--desired-count", "1")
	defer awsc("ecs", "delete-service", "--service", "cwweb", "--force")
	stat := func(name string, dims ...string) (map[string]any, bool) {
		now := time.Now().UTC()
		out := awsc(append([]string{"cloudwatch", "get-metric-statistics", "--namespace", "AWS/ECS", "--metric-name", name,
			"--statistics", "Average", "SampleCount", "--period", "60", "--output", "json",
			"--start-time", now.Add(-15 * time.Minute).Format(time.RFC3339), "--end-time", now.Format(time.RFC3339), "--dimensions"}, dims...)...)
		var v struct{ Datapoints []map[string]any }
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if len(v.Datapoints) == 0 {
			return nil, false
		}
		return v.Datapoints[len(v.Datapoints)-1], true
	}
	// Samples every 15 s, written per minute once it has passed: allow a few minutes.
	deadline := time.Now().Add(4 * time.Minute)
	var cpu map[string]any
	for {
		var ok bool
		if cpu, ok = stat("CPUUtilization", "Name=ClusterName,Value=default", "Name=ServiceName,Value=cwweb"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no CPUUtilization datapoint of service cwweb within 4 minutes")
		}
		time.Sleep(5 * time.Second)
	}
	if avg, _ := cpu["Average"].(float64); cpu["SampleCount"] != 1.0 || avg < 0 || avg > 400 || cpu["Unit"] != "Percent" {
		t.Fatalf("CPUUtilization datapoint %v", cpu)
	}
	if mem, ok := stat("MemoryUtilization", "Name=ClusterName,Value=default", "Name=ServiceName,Value=cwweb"); !ok || mem["Average"].(float64) < 0 {
		t.Fatalf("MemoryUtilization datapoint %v", mem)
	}
	res, ok := stat("CPUReservation", "Name=ClusterName,Value=default")
	if !ok || res["Average"].(float64) <= 0 {
		t.Fatalf("CPUReservation datapoint %v", res)
	}
}

// TestCloudWatchJSONAndQuery drives the two other protocols CloudWatch's model lists
// through the AWS CLI: the installed botocore's CloudWatch model, rewritten to name only
// "json" (AWS JSON 1.0, X-Amz-Target) or only "query" (Action=…, XML out), is put first on
// AWS_DATA_PATH.
func TestCloudWatchJSONAndQuery(t *testing.T) {
	t.Parallel() // see main_test.go
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; make deps installs it")
	}
	python := boto3Python(t)
	const acct = "123456789012"
	stack := startAPIStack(t, acct)
	data := t.TempDir()
	const rewrite = `import botocore, gzip, json, os, sys
src = os.path.join(os.path.dirname(botocore.__file__), "data/cloudwatch/2010-08-01/service-2.json.gz")
m = json.load(gzip.open(src))
for p in ("json", "query"):
    m["metadata"]["protocol"], m["metadata"]["protocols"] = p, [p]
    d = os.path.join(sys.argv[1], p, "cloudwatch/2010-08-01")
    os.makedirs(d)
    json.dump(m, open(os.path.join(d, "service-2.json"), "w"))
`
	if out, err := exec.Command(python, "-c", rewrite, data).CombinedOutput(); err != nil {
		t.Skipf("cannot rewrite botocore's CloudWatch model: %v\n%s", err, out)
	}
	minute := time.Now().UTC().Truncate(time.Minute)
	for _, p := range []string{"json", "query"} {
		run := func(args ...string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "aws", append([]string{"cloudwatch", "--endpoint-url", stack.url, "--region", "us-east-1", "--output", "json"}, args...)...)
			cmd.Env = append(cliEnv(stack, acct), "AWS_DATA_PATH="+filepath.Join(data, p))
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		ns := "Proto" + p
		if out, err := run("put-metric-data", "--namespace", ns, "--metric-name", "M", "--value", "3", "--unit", "Count", "--timestamp", minute.Add(-time.Minute).Format(time.RFC3339)); err != nil {
			t.Fatalf("%s put-metric-data: %v\n%s", p, err, out)
		}
		out, err := run("get-metric-statistics", "--namespace", ns, "--metric-name", "M", "--statistics", "Sum", "--period", "60",
			"--start-time", minute.Add(-5*time.Minute).Format(time.RFC3339), "--end-time", minute.Format(time.RFC3339))
		var v struct{ Datapoints []map[string]any }
		if err != nil || json.Unmarshal([]byte(out), &v) != nil || len(v.Datapoints) != 1 || v.Datapoints[0]["Sum"] != 3.0 || v.Datapoints[0]["Unit"] != "Count" {
			t.Fatalf("%s get-metric-statistics: %v\n%s", p, err, out)
		}
		if out, err := run("put-metric-data", "--namespace", "AWS/X", "--metric-name", "M", "--value", "1"); err == nil || !strings.Contains(out, "(InvalidParameterValue)") {
			t.Fatalf("%s AWS/ namespace: %v\n%s", p, err, out)
		}
	}
}
