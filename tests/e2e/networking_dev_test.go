package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// TestTwoDevsAWSVPC runs two `berth dev` on this host, each with its own data dir and
// etcd (so each scheduler would hand out 10.240.0.0/24 first): an awsvpc task on each
// reaches RUNNING with an address of a different task subnet and answers HTTP from the
// host. Their tasks are then stopped and both devs with them (Ctrl-C): neither leaves a
// namespace, a CNI cache entry (lease, rules) or a host port reservation behind. (A dev
// stopped with tasks running leaves them running for its next start, as the README says;
// an agent starting on a host reaps the networks of a data dir that is gone:
// services/agent TestNetworkReapsDeadAgent.)
func TestTwoDevsAWSVPC(t *testing.T) {
	t.Parallel() // see main_test.go
	root := repoRoot(t)
	requireDevPrereqs(t, root)
	var devs []*devProcess
	var tags []string
	var subnets []*net.IPNet
	var stopTasks []func()
	for i := range 2 {
		dir := t.TempDir()
		env := devEnv(t, filepath.Join(dir, "data"))
		devs = append(devs, startDev(t, root, env, filepath.Join(dir, "dev.log")))
		h := sha256.Sum256([]byte(filepath.Join(dir, "data", "agent", "network")))
		tags = append(tags, hex.EncodeToString(h[:4]))
		reg := envValue(env, "BERTH_REGISTRY_ADDR")
		c := ecs.New(ecs.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(envValue(env, "AWS_ENDPOINT_URL")),
			Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
			}),
		})
		cli(t, root, env, "bin/berth", "image", "demo")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_, err := c.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
			Family: aws.String("vpc"), NetworkMode: ecstypes.NetworkModeAwsvpc,
			ContainerDefinitions: []ecstypes.ContainerDefinition{{
				Name: aws.String("web"), Image: aws.String(reg + "/berth/demo:latest"), Memory: aws.Int32(64),
				Command:      []string{"serve", "8080"},
				PortMappings: []ecstypes.PortMapping{{ContainerPort: aws.Int32(8080)}},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		run, err := c.RunTask(ctx, &ecs.RunTaskInput{TaskDefinition: aws.String("vpc"),
			NetworkConfiguration: &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{"subnet-0a1b2c"}}}})
		if err != nil || len(run.Tasks) != 1 {
			t.Fatalf("RunTask: %v %v", err, run)
		}
		arn := aws.ToString(run.Tasks[0].TaskArn)
		stopTasks = append(stopTasks, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := c.StopTask(ctx, &ecs.StopTaskInput{Task: aws.String(arn)}); err != nil {
				t.Fatalf("dev %d: StopTask: %v", i, err)
			}
			waitFor(t, func() (string, bool) {
				d, err := c.DescribeTasks(ctx, &ecs.DescribeTasksInput{Tasks: []string{arn}})
				if err != nil || len(d.Tasks) != 1 {
					return fmt.Sprint(err), false
				}
				return aws.ToString(d.Tasks[0].LastStatus), aws.ToString(d.Tasks[0].LastStatus) == "STOPPED"
			})
		})
		var ip string
		waitFor(t, func() (string, bool) {
			d, err := c.DescribeTasks(ctx, &ecs.DescribeTasksInput{Tasks: []string{arn}})
			if err != nil || len(d.Tasks) != 1 {
				return fmt.Sprint(err), false
			}
			tk := d.Tasks[0]
			if s := aws.ToString(tk.LastStatus); s == "STOPPED" {
				t.Fatalf("dev %d's awsvpc task stopped: %s", i, aws.ToString(tk.StoppedReason))
			}
			if len(tk.Containers) == 1 && len(tk.Containers[0].NetworkInterfaces) == 1 {
				ip = aws.ToString(tk.Containers[0].NetworkInterfaces[0].PrivateIpv4Address)
			}
			return aws.ToString(tk.LastStatus), aws.ToString(tk.LastStatus) == "RUNNING"
		})
		var sub *net.IPNet
		for _, s := range subnets {
			if s.Contains(net.ParseIP(ip)) {
				t.Fatalf("dev %d's task address %s is in the other dev's task subnet %s", i, ip, s)
			}
		}
		sub = &net.IPNet{IP: net.ParseIP(ip).Mask(net.CIDRMask(24, 32)), Mask: net.CIDRMask(24, 32)}
		subnets = append(subnets, sub)
		waitFor(t, func() (string, bool) {
			cl := &http.Client{Timeout: 3 * time.Second}
			resp, err := cl.Get("http://" + ip + ":8080/")
			if err != nil {
				return err.Error(), false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b), strings.TrimSpace(string(b)) == "ok"
		})
	}
	// The tasks stop, then both devs: the task networks went with the tasks.
	for i, d := range devs {
		stopTasks[i]()
		d.stop(t)
	}
	for i, tag := range tags {
		left := leftovers(tag)
		if len(left) > 0 {
			t.Errorf("dev %d (owner %s) left on the host: %s", i, tag, strings.Join(left, ", "))
		}
	}
}

// leftovers lists what the agent with owner tag tag still holds on the host: namespaces
// under /run/berth/netns, libcni cache entries (each a network DEL never ran for) and
// host port reservations.
func leftovers(tag string) []string {
	var out []string
	if ents, err := os.ReadDir("/run/berth/netns"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "berth-"+tag+"-") {
				out = append(out, "netns "+e.Name())
			}
		}
	}
	if ents, err := os.ReadDir("/var/lib/cni/results"); err == nil {
		for _, e := range ents {
			if strings.Contains(e.Name(), "-"+tag+"-") {
				out = append(out, "CNI cache "+e.Name())
			}
		}
	}
	if ents, err := os.ReadDir("/run/berth/hostports"); err == nil {
		for _, e := range ents {
			if b, err := os.ReadFile(filepath.Join("/run/berth/hostports", e.Name())); err == nil && strings.Contains(string(b), `"owner":"`+tag+`"`) {
				out = append(out, "host port "+e.Name())
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		out = append(out, err.Error())
	}
	return out
}
