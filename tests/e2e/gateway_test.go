package e2e

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/smithy-go"
	clientv3 "go.etcd.io/etcd/client/v3"

	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/pkg/h2c"
	"github.com/berthhq/berth/services/gateway"
	"github.com/berthhq/berth/services/scheduler/app"
	"github.com/berthhq/berth/services/scheduler/cloudwatch/metricstore"
	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/ecr/registry"
	"github.com/berthhq/berth/services/scheduler/logs/logstore"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/tests/e2e/harness"
)

// apiStack is the real gateway in front of a real scheduler replica on embedded etcd, in
// process, with one ECS client per account (signing for us-east-1).
type apiStack struct {
	clients map[string]*ecs.Client
	// url is the gateway's endpoint (h2c, so agent streams work through it too).
	url string
	// keys holds each account's access key id and secret.
	keys map[string][2]string
	// sched is the scheduler replica (its Admin service creates instance keys).
	sched *app.App
	// etcd is the scheduler's etcd client, for tests that look at what is stored.
	etcd *clientv3.Client
	// registry is the ECR registry's host:port (package ecr/registry, blobs in a temp dir).
	registry string
	// ecrDir is the ECR registry's blob directory.
	ecrDir string
}

// client returns an ECS client of acct signing for region.
func (s *apiStack) client(acct, region string) *ecs.Client {
	k := s.keys[acct]
	return ecs.New(ecs.Options{
		Region:       region,
		BaseEndpoint: aws.String(s.url),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: k[0], SecretAccessKey: k[1]}, nil
		}),
	})
}

func startAPIStack(t *testing.T, accounts ...string) *apiStack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cli := etcdtest.Start(t)
	logStore, err := logstore.Open(logstore.Config{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logStore.Close() })
	ring := testKeyring(t)
	regLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	regDir := t.TempDir()
	metricStore, err := metricstore.OpenTSDB(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = metricStore.Close() })
	sched, err := app.New(app.Config{Etcd: cli, Region: "us-east-1", Logs: logStore, Metrics: metricStore, Keyring: ring, ECRRegistryHost: regLn.Addr().String(), ECRBlobDir: regDir})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Config{Store: ecr.NewStore(cli, ring, regLn.Addr().String(), nil), Dir: regDir})
	if err != nil {
		t.Fatal(err)
	}
	regSrv := &http.Server{Handler: reg, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = regSrv.Serve(regLn) }()
	t.Cleanup(func() { _ = regSrv.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = h2c.Serve(ctx, ln, sched.Handler()) }()
	go func() { _ = sched.Run(ctx) }()
	gw, err := gateway.New(gateway.Config{SchedulerURL: "http://" + ln.Addr().String(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Every answer the gateway writes is checked against the ECS model's required members.
	srv := httptest.NewUnstartedServer(harness.ShapeRecorder(t).Handler(gw))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)

	s := &apiStack{clients: map[string]*ecs.Client{}, url: srv.URL, keys: map[string][2]string{}, sched: sched, etcd: cli, registry: regLn.Addr().String(), ecrDir: regDir}
	for _, acct := range accounts {
		if _, err := sched.Admin().CreateAccount(ctx, connect.NewRequest(&adminv1.CreateAccountRequest{Id: acct})); err != nil {
			t.Fatal(err)
		}
		key, err := sched.Admin().CreateAccessKey(ctx, connect.NewRequest(&adminv1.CreateAccessKeyRequest{AccountId: acct}))
		if err != nil {
			t.Fatal(err)
		}
		s.keys[acct] = [2]string{key.Msg.GetAccessKey().GetAccessKeyId(), key.Msg.GetSecretAccessKey()}
		s.clients[acct] = s.client(acct, "us-east-1")
	}
	return s
}

func apiErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestGatewaySchedulerWithSDK drives the real gateway and scheduler with the AWS SDK for
// Go v2 and checks parsed responses per action family, and that one account can neither
// see nor touch another's resources, even by ARN.
func TestGatewaySchedulerWithSDK(t *testing.T) {
	const owner, other = "111111111111", "222222222222"
	stack := startAPIStack(t, owner, other)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := stack.clients[owner], stack.clients[other]

	// Clusters.
	created, err := a.CreateCluster(ctx, &ecs.CreateClusterInput{
		ClusterName: aws.String("api"),
		Tags:        []ecstypes.Tag{{Key: aws.String("team"), Value: aws.String("core")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	clusterARN := aws.ToString(created.Cluster.ClusterArn)
	if clusterARN != "arn:aws:ecs:us-east-1:"+owner+":cluster/api" || aws.ToString(created.Cluster.Status) != "ACTIVE" {
		t.Fatalf("CreateCluster: arn %q status %q", clusterARN, aws.ToString(created.Cluster.Status))
	}
	desc, err := a.DescribeClusters(ctx, &ecs.DescribeClustersInput{
		Clusters: []string{"api", "nope"},
		Include:  []ecstypes.ClusterField{ecstypes.ClusterFieldTags, ecstypes.ClusterFieldStatistics},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.Clusters) != 1 || len(desc.Clusters[0].Tags) != 1 || len(desc.Failures) != 1 || aws.ToString(desc.Failures[0].Reason) != "MISSING" {
		t.Errorf("DescribeClusters: %d clusters (tags %v), failures %+v", len(desc.Clusters), desc.Clusters, desc.Failures)
	}

	// Task definitions: timestamps and numbers parse.
	reg, err := a.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family: aws.String("api"),
		Cpu:    aws.String("0.5 vCPU"),
		Memory: aws.String("1GB"),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{
			Name: aws.String("app"), Image: aws.String("127.0.0.1:5000/app:1"), Memory: aws.Int32(64),
			PortMappings: []ecstypes.PortMapping{{ContainerPort: aws.Int32(8080), HostPort: aws.Int32(8080)}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	td := reg.TaskDefinition
	if td.Revision != 1 || aws.ToString(td.Cpu) != "512" || aws.ToString(td.Memory) != "1024" || td.RegisteredAt == nil ||
		time.Since(*td.RegisteredAt) > time.Minute || !aws.ToBool(td.ContainerDefinitions[0].Essential) {
		t.Errorf("RegisterTaskDefinition: revision %d cpu %q memory %q registeredAt %v essential %v",
			td.Revision, aws.ToString(td.Cpu), aws.ToString(td.Memory), td.RegisteredAt, td.ContainerDefinitions[0].Essential)
	}

	// Tags, settings and lists.
	if _, err := a.TagResource(ctx, &ecs.TagResourceInput{ResourceArn: td.TaskDefinitionArn, Tags: []ecstypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); err != nil {
		t.Fatal(err)
	}
	tags, err := a.ListTagsForResource(ctx, &ecs.ListTagsForResourceInput{ResourceArn: td.TaskDefinitionArn})
	if err != nil || len(tags.Tags) != 1 {
		t.Errorf("ListTagsForResource: %v %v", tags, err)
	}
	families, err := a.ListTaskDefinitionFamilies(ctx, &ecs.ListTaskDefinitionFamiliesInput{FamilyPrefix: aws.String("ap")})
	if err != nil || len(families.Families) != 1 || families.Families[0] != "api" {
		t.Errorf("ListTaskDefinitionFamilies: %v %v", families, err)
	}

	// RunTask with no container instance: AWS's error, typed by the SDK.
	_, err = a.RunTask(ctx, &ecs.RunTaskInput{Cluster: aws.String("api"), TaskDefinition: aws.String("api")})
	if code := apiErrorCode(err); code != "InvalidParameterException" {
		t.Errorf("RunTask on a cluster without instances: %v (code %q), want InvalidParameterException", err, code)
	}
	// A bad parameter names the field.
	_, err = a.ListClusters(ctx, &ecs.ListClustersInput{MaxResults: aws.Int32(1000)})
	if code := apiErrorCode(err); code != "InvalidParameterException" {
		t.Errorf("ListClusters maxResults 1000: %v, want InvalidParameterException", err)
	}

	// The other account sees nothing of the first one's, by name or by ARN.
	clusters, err := b.ListClusters(ctx, &ecs.ListClustersInput{})
	if err != nil || len(clusters.ClusterArns) != 0 {
		t.Errorf("other account ListClusters: %v %v", clusters, err)
	}
	cross, err := b.DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{clusterARN}})
	if err != nil || len(cross.Clusters) != 0 || len(cross.Failures) != 1 || aws.ToString(cross.Failures[0].Reason) != "MISSING" {
		t.Errorf("other account DescribeClusters by ARN: %+v %v, want one MISSING failure", cross, err)
	}
	if _, err := b.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: td.TaskDefinitionArn}); apiErrorCode(err) == "" {
		t.Errorf("other account DescribeTaskDefinition by ARN: %v, want an ECS error", err)
	}
	if _, err := b.TagResource(ctx, &ecs.TagResourceInput{ResourceArn: aws.String(clusterARN), Tags: []ecstypes.Tag{{Key: aws.String("x"), Value: aws.String("y")}}}); apiErrorCode(err) == "" {
		t.Errorf("other account TagResource on the first's cluster: %v, want an ECS error", err)
	}
	if _, err := b.DeleteCluster(ctx, &ecs.DeleteClusterInput{Cluster: aws.String(clusterARN)}); apiErrorCode(err) != "ClusterNotFoundException" {
		t.Errorf("other account DeleteCluster by ARN: %v, want ClusterNotFoundException", err)
	}
	still, err := a.DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{"api"}, Include: []ecstypes.ClusterField{ecstypes.ClusterFieldTags}})
	if err != nil || len(still.Clusters) != 1 || aws.ToString(still.Clusters[0].Status) != "ACTIVE" || len(still.Clusters[0].Tags) != 1 {
		t.Errorf("owner's cluster after the other account's attempts: %+v %v", still, err)
	}

	// Delete, then the cluster stays describable as INACTIVE.
	if _, err := a.DeleteCluster(ctx, &ecs.DeleteClusterInput{Cluster: aws.String("api")}); err != nil {
		t.Fatal(err)
	}
	gone, err := a.DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{"api"}})
	if err != nil || len(gone.Clusters) != 1 || aws.ToString(gone.Clusters[0].Status) != "INACTIVE" {
		t.Errorf("DescribeClusters after delete: %+v %v", gone, err)
	}
}
