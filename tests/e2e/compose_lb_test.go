package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/berthhq/berth/tests/e2e/harness"
)

// composeELBClient is an ELBv2 client of the compose stack's gateway at url (HTTPS with
// the stack's CA), no retries.
func composeELBClient(url string, roots *x509.CertPool, keyID, secret string) *elbv2.Client {
	return elbv2.New(elbv2.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), RetryMaxAttempts: 1,
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}},
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: keyID, SecretAccessKey: secret}, nil
		})})
}

// composeLBService is issue 17's zero-failure scenario (lbZeroFailures) on the compose
// stack: the bridge tasks run in the agents' containers (each its own network namespace
// with portmap's DNAT rules), the lb service in the host network binds the listener on
// 127.0.0.1 and reaches the tasks at their agent's address on the stack network and
// dynamic host port. The task is killed from the host: its container's process is the one
// in the cgroup named by the container's runtimeId (containerd's id, which the agent
// reports). The service is deleted at the end and its tasks waited for.
func composeLBService(t *testing.T, ctx context.Context, ecsc *ecs.Client, elbc *elbv2.Client, image string) {
	s := &lbService{t: t, ecs: ecsc, elb: elbc, cluster: "default", name: "lbweb"}
	defer func() {
		ctx := context.WithoutCancel(ctx)
		if _, err := ecsc.DeleteService(ctx, &ecs.DeleteServiceInput{Cluster: aws.String("default"), Service: aws.String(s.name), Force: aws.Bool(true)}); err != nil {
			t.Errorf("delete the lb service: %v", err)
			return
		}
		if err := harness.Poll(ctx, 90*time.Second, func() error {
			l, err := ecsc.ListTasks(ctx, &ecs.ListTasksInput{Cluster: aws.String("default"), ServiceName: aws.String(s.name)})
			if err != nil {
				return err
			}
			if len(l.TaskArns) > 0 {
				return fmt.Errorf("%d tasks of the lb service left", len(l.TaskArns))
			}
			return nil
		}); err != nil {
			t.Errorf("the lb service's tasks: %v", err)
		}
	}()
	s.lbZeroFailures(ctx, image, "127.0.0.1", func(tasks map[string]string) string {
		arns := make([]string, 0, len(tasks))
		for arn := range tasks {
			arns = append(arns, arn)
		}
		ts, err := s.describeTasks(ctx, arns)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range ts {
			for _, c := range task.Containers {
				id := aws.ToString(c.RuntimeId)
				if id == "" {
					continue
				}
				pids := cgroupPids(id)
				if len(pids) == 0 {
					continue
				}
				for _, pid := range pids {
					if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
						t.Fatalf("kill -9 %d: %v", pid, err)
					}
				}
				t.Logf("killed task %s (container %s, host pids %v)", aws.ToString(task.TaskArn), id, pids)
				return aws.ToString(task.TaskArn)
			}
		}
		t.Fatalf("no process of the service's containers found by runtimeId in the host's /proc/*/cgroup")
		return ""
	})
}

// cgroupPids returns the host pids whose cgroup path ends in the element id.
func cgroupPids(id string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue
		}
		// "hierarchy:controllers:path" a line (cgroup v2: "0::path").
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if filepath.Base(line[strings.LastIndex(line, ":")+1:]) == id {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
