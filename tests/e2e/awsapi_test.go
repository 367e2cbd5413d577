package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// testKeyring is a fresh random secrets keyring.
func testKeyring(t testing.TB) *seal.Keyring {
	secret := make([]byte, seal.KeySize)
	_, _ = rand.Read(secret)
	k, err := seal.New(seal.Key{ID: "test", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// awsConfig is an SDK config of acct signing for region against the stack's gateway.
func (s *apiStack) awsConfig(acct, region string) aws.Config {
	k := s.keys[acct]
	return aws.Config{
		Region:       region,
		BaseEndpoint: aws.String(s.url),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: k[0], SecretAccessKey: k[1]}, nil
		}),
		RetryMaxAttempts: 1,
	}
}

// TestSTSGetCallerIdentity: the real scheduler answers each account's root ARN.
func TestSTSGetCallerIdentity(t *testing.T) {
	const a, b = "111111111111", "222222222222"
	stack := startAPIStack(t, a, b)
	for _, acct := range []string{a, b} {
		out, err := sts.NewFromConfig(stack.awsConfig(acct, "eu-west-1")).GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(out.Account) != acct || aws.ToString(out.Arn) != "arn:aws:iam::"+acct+":root" || aws.ToString(out.UserId) != acct {
			t.Errorf("%s: GetCallerIdentity = %s %s %s", acct, aws.ToString(out.Account), aws.ToString(out.Arn), aws.ToString(out.UserId))
		}
	}
}

// etcdHolds reports whether any value under /berth/v1/ contains needle.
func etcdHolds(t *testing.T, kv clientv3.KV, needle string) bool {
	t.Helper()
	res, err := kv.Get(t.Context(), store.Prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range res.Kvs {
		if bytes.Contains(item.Value, []byte(needle)) {
			return true
		}
	}
	return false
}

// TestSecretsManagerWithSDK drives Secrets Manager through the real gateway and scheduler
// with the SDK: versions and stages, lookups by name and ARN, metadata, listing, tags,
// deletion with a recovery window and without, restore; values sealed in etcd; accounts
// and regions isolated.
func TestSecretsManagerWithSDK(t *testing.T) {
	const owner, other = "111111111111", "222222222222"
	stack := startAPIStack(t, owner, other)
	ctx := t.Context()
	sm := secretsmanager.NewFromConfig(stack.awsConfig(owner, "us-east-1"))

	const v1 = `{"user":"app","password":"hunter2-sealed"}`
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String("prod/db"), SecretString: aws.String(v1), Description: aws.String("db"),
		Tags: []smtypes.Tag{{Key: aws.String("team"), Value: aws.String("core")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(created.ARN)
	if !regexp.MustCompile(`^arn:aws:secretsmanager:us-east-1:111111111111:secret:prod/db-[A-Za-z0-9]{6}$`).MatchString(arn) || created.VersionId == nil {
		t.Fatalf("CreateSecret: arn %q version %v", arn, created.VersionId)
	}
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("prod/db"), SecretString: aws.String("x")}); apiErrorCode(err) != "ResourceExistsException" {
		t.Errorf("duplicate CreateSecret: %v", err)
	}
	if etcdHolds(t, stack.etcd, "hunter2-sealed") {
		t.Fatal("the secret value is in etcd in plaintext")
	}
	for _, id := range []string{"prod/db", arn, strings.TrimSuffix(arn, arn[len(arn)-7:])} {
		got, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
		if err != nil || aws.ToString(got.SecretString) != v1 || aws.ToString(got.ARN) != arn || len(got.VersionStages) != 1 || got.VersionStages[0] != "AWSCURRENT" || got.CreatedDate == nil {
			t.Errorf("GetSecretValue(%s): %+v %v", id, got, err)
		}
	}
	put, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(arn), SecretString: aws.String("v2")})
	if err != nil {
		t.Fatal(err)
	}
	prev, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("prod/db"), VersionStage: aws.String("AWSPREVIOUS")})
	if err != nil || aws.ToString(prev.SecretString) != v1 || aws.ToString(prev.VersionId) != aws.ToString(created.VersionId) {
		t.Errorf("AWSPREVIOUS: %+v %v", prev, err)
	}
	byID, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("prod/db"), VersionId: put.VersionId})
	if err != nil || aws.ToString(byID.SecretString) != "v2" {
		t.Errorf("by VersionId: %+v %v", byID, err)
	}
	if _, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("prod/db"), VersionStage: aws.String("AWSPENDING")}); apiErrorCode(err) != "ResourceNotFoundException" {
		t.Errorf("missing stage: %v", err)
	}
	// Idempotent retry of the same token; another value under it is refused.
	token := "11111111-2222-3333-4444-555555555555"
	for i, v := range []string{"v3", "v3", "other"} {
		_, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("prod/db"), SecretString: aws.String(v), ClientRequestToken: aws.String(token)})
		if (i < 2) != (err == nil) || (i == 2 && apiErrorCode(err) != "ResourceExistsException") {
			t.Errorf("PutSecretValue %d (%s): %v", i, v, err)
		}
	}
	bin, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("bin"), SecretBinary: []byte{0, 1, 2, 255}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: bin.ARN}); err != nil || !bytes.Equal(got.SecretBinary, []byte{0, 1, 2, 255}) || got.SecretString != nil {
		t.Errorf("binary secret: %+v %v", got, err)
	}
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("both"), SecretBinary: []byte{1}, SecretString: aws.String("x")}); apiErrorCode(err) != "InvalidParameterException" {
		t.Errorf("both values: %v", err)
	}

	// Metadata never carries a value.
	if _, err := sm.UpdateSecret(ctx, &secretsmanager.UpdateSecretInput{SecretId: aws.String("prod/db"), Description: aws.String("primary db")}); err != nil {
		t.Fatal(err)
	}
	desc, err := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String("prod/db")})
	if err != nil || aws.ToString(desc.Description) != "primary db" || len(desc.Tags) != 1 || len(desc.VersionIdsToStages) != 2 ||
		desc.VersionIdsToStages[aws.ToString(put.VersionId)][0] != "AWSPREVIOUS" || desc.LastAccessedDate == nil {
		t.Errorf("DescribeSecret: %+v %v", desc, err)
	}
	if _, err := sm.TagResource(ctx, &secretsmanager.TagResourceInput{SecretId: aws.String(arn), Tags: []smtypes.Tag{{Key: aws.String("env"), Value: aws.String("prod")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.UntagResource(ctx, &secretsmanager.UntagResourceInput{SecretId: aws.String(arn), TagKeys: []string{"team"}}); err != nil {
		t.Fatal(err)
	}
	list, err := sm.ListSecrets(ctx, &secretsmanager.ListSecretsInput{Filters: []smtypes.Filter{{Key: smtypes.FilterNameStringTypeTagKey, Values: []string{"env"}}}})
	if err != nil || len(list.SecretList) != 1 || aws.ToString(list.SecretList[0].Name) != "prod/db" || len(list.SecretList[0].Tags) != 1 {
		t.Errorf("ListSecrets by tag-key: %+v %v", list, err)
	}
	page, err := sm.ListSecrets(ctx, &secretsmanager.ListSecretsInput{MaxResults: aws.Int32(1), SortBy: smtypes.SortByTypeName, SortOrder: smtypes.SortOrderTypeAsc})
	if err != nil || len(page.SecretList) != 1 || aws.ToString(page.SecretList[0].Name) != "bin" || page.NextToken == nil {
		t.Fatalf("ListSecrets page 1: %+v %v", page, err)
	}
	page2, err := sm.ListSecrets(ctx, &secretsmanager.ListSecretsInput{MaxResults: aws.Int32(1), SortBy: smtypes.SortByTypeName, SortOrder: smtypes.SortOrderTypeAsc, NextToken: page.NextToken})
	if err != nil || len(page2.SecretList) != 1 || aws.ToString(page2.SecretList[0].Name) != "prod/db" || page2.NextToken != nil {
		t.Errorf("ListSecrets page 2: %+v %v", page2, err)
	}
	versions, err := sm.ListSecretVersionIds(ctx, &secretsmanager.ListSecretVersionIdsInput{SecretId: aws.String("prod/db"), IncludeDeprecated: aws.Bool(true)})
	if err != nil || len(versions.Versions) != 3 {
		t.Errorf("ListSecretVersionIds: %+v %v", versions, err)
	}

	// Another account and another region see nothing.
	if _, err := secretsmanager.NewFromConfig(stack.awsConfig(other, "us-east-1")).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)}); apiErrorCode(err) != "ResourceNotFoundException" {
		t.Errorf("other account by ARN: %v", err)
	}
	if _, err := secretsmanager.NewFromConfig(stack.awsConfig(owner, "eu-west-1")).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("prod/db")}); apiErrorCode(err) != "ResourceNotFoundException" {
		t.Errorf("other region by name: %v", err)
	}

	// Deletion with a recovery window, restore, forced deletion.
	if _, err := sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String("prod/db"), RecoveryWindowInDays: aws.Int64(3)}); apiErrorCode(err) != "InvalidParameterException" {
		t.Errorf("window 3 days: %v", err)
	}
	del, err := sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String("prod/db"), RecoveryWindowInDays: aws.Int64(7)})
	if err != nil || del.DeletionDate == nil || del.DeletionDate.Sub(time.Now()) < 6*24*time.Hour {
		t.Fatalf("DeleteSecret: %+v %v", del, err)
	}
	if _, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("prod/db")}); apiErrorCode(err) != "InvalidRequestException" {
		t.Errorf("value of a deleted secret: %v", err)
	}
	if l, _ := sm.ListSecrets(ctx, &secretsmanager.ListSecretsInput{}); len(l.SecretList) != 1 {
		t.Errorf("ListSecrets shows a secret planned for deletion: %d", len(l.SecretList))
	}
	if l, _ := sm.ListSecrets(ctx, &secretsmanager.ListSecretsInput{IncludePlannedDeletion: aws.Bool(true)}); len(l.SecretList) != 2 {
		t.Errorf("IncludePlannedDeletion: %d", len(l.SecretList))
	}
	if _, err := sm.RestoreSecret(ctx, &secretsmanager.RestoreSecretInput{SecretId: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	if got, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("prod/db")}); err != nil || aws.ToString(got.SecretString) != "v3" {
		t.Errorf("after restore: %+v %v", got, err)
	}
	if _, err := sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String("prod/db"), ForceDeleteWithoutRecovery: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String("prod/db")}); apiErrorCode(err) != "ResourceNotFoundException" {
		t.Errorf("after forced deletion: %v", err)
	}
	if etcdHolds(t, stack.etcd, "secret-values/111111111111/us-east-1/prod%2Fdb") {
		t.Error("forced deletion left values behind")
	}
	again, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("prod/db"), SecretString: aws.String("new")})
	if err != nil || aws.ToString(again.ARN) == arn {
		t.Errorf("re-create after deletion: %+v %v (a new ARN suffix is expected)", again, err)
	}
}

// TestSSMParametersWithSDK drives Parameter Store through the real gateway and scheduler.
func TestSSMParametersWithSDK(t *testing.T) {
	const owner, other = "111111111111", "222222222222"
	stack := startAPIStack(t, owner, other)
	ctx := t.Context()
	c := ssm.NewFromConfig(stack.awsConfig(owner, "us-east-1"))

	put := func(name, value string, typ ssmtypes.ParameterType, overwrite bool) (*ssm.PutParameterOutput, error) {
		in := &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(value), Overwrite: aws.Bool(overwrite)}
		if typ != "" {
			in.Type = typ
		}
		return c.PutParameter(ctx, in)
	}
	if out, err := put("/app/db/password", "s3cret-sealed", ssmtypes.ParameterTypeSecureString, false); err != nil || out.Version != 1 || out.Tier != ssmtypes.ParameterTierStandard {
		t.Fatalf("PutParameter: %+v %v", out, err)
	}
	if etcdHolds(t, stack.etcd, "s3cret-sealed") {
		t.Fatal("the parameter value is in etcd in plaintext")
	}
	if _, err := put("/app/db/password", "x", ssmtypes.ParameterTypeSecureString, false); apiErrorCode(err) != "ParameterAlreadyExists" {
		t.Errorf("without Overwrite: %v", err)
	}
	if out, err := put("/app/db/password", "s3cret-2", "", true); err != nil || out.Version != 2 {
		t.Errorf("Overwrite: %+v %v", out, err)
	}
	for _, p := range [][3]string{{"/app/db/host", "db.local", "String"}, {"/app/hosts", "a,b", "StringList"}, {"/other/x", "1", "String"}, {"plain", "p", "String"}} {
		if _, err := put(p[0], p[1], ssmtypes.ParameterType(p[2]), false); err != nil {
			t.Fatalf("PutParameter %s: %v", p[0], err)
		}
	}
	if _, err := put("/aws/reserved", "x", ssmtypes.ParameterTypeString, false); apiErrorCode(err) != "ValidationException" {
		t.Errorf("reserved prefix: %v", err)
	}

	enc, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/app/db/password")})
	if err != nil || aws.ToString(enc.Parameter.Value) == "s3cret-2" || enc.Parameter.Version != 2 || enc.Parameter.Type != ssmtypes.ParameterTypeSecureString {
		t.Errorf("SecureString without decryption: %+v %v", enc.Parameter, err)
	}
	dec, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/app/db/password"), WithDecryption: aws.Bool(true)})
	if err != nil || aws.ToString(dec.Parameter.Value) != "s3cret-2" || aws.ToString(dec.Parameter.ARN) != "arn:aws:ssm:us-east-1:111111111111:parameter/app/db/password" {
		t.Errorf("WithDecryption: %+v %v", dec.Parameter, err)
	}
	v1, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/app/db/password:1"), WithDecryption: aws.Bool(true)})
	if err != nil || aws.ToString(v1.Parameter.Value) != "s3cret-sealed" || aws.ToString(v1.Parameter.Selector) != ":1" {
		t.Errorf("version selector: %+v %v", v1.Parameter, err)
	}
	if _, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/nope")}); apiErrorCode(err) != "ParameterNotFound" {
		t.Errorf("missing: %v", err)
	}
	many, err := c.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{"/app/db/host", "/nope", "plain"}})
	if err != nil || len(many.Parameters) != 2 || len(many.InvalidParameters) != 1 || many.InvalidParameters[0] != "/nope" {
		t.Errorf("GetParameters: %+v %v", many, err)
	}

	one, err := c.GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: aws.String("/app")})
	if err != nil || len(one.Parameters) != 1 || aws.ToString(one.Parameters[0].Name) != "/app/hosts" {
		t.Errorf("by path, one level: %+v %v", one, err)
	}
	var names []string
	var next *string
	for {
		rec, err := c.GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: aws.String("/app/"), Recursive: aws.Bool(true), WithDecryption: aws.Bool(true), MaxResults: aws.Int32(2), NextToken: next})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range rec.Parameters {
			names = append(names, aws.ToString(p.Name)+"="+aws.ToString(p.Value))
		}
		if next = rec.NextToken; next == nil {
			break
		}
	}
	if strings.Join(names, " ") != "/app/db/host=db.local /app/db/password=s3cret-2 /app/hosts=a,b" {
		t.Errorf("by path, recursive, paged: %v", names)
	}

	if _, err := c.LabelParameterVersion(ctx, &ssm.LabelParameterVersionInput{Name: aws.String("/app/db/password"), ParameterVersion: aws.Int64(1), Labels: []string{"stable", "aws-bad"}}); err != nil {
		t.Fatal(err)
	}
	byLabel, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/app/db/password:stable"), WithDecryption: aws.Bool(true)})
	if err != nil || aws.ToString(byLabel.Parameter.Value) != "s3cret-sealed" {
		t.Errorf("label selector: %+v %v", byLabel, err)
	}
	hist, err := c.GetParameterHistory(ctx, &ssm.GetParameterHistoryInput{Name: aws.String("/app/db/password")})
	if err != nil || len(hist.Parameters) != 2 || len(hist.Parameters[0].Labels) != 1 || hist.Parameters[1].Version != 2 {
		t.Errorf("history: %+v %v", hist, err)
	}
	descr, err := c.DescribeParameters(ctx, &ssm.DescribeParametersInput{ParameterFilters: []ssmtypes.ParameterStringFilter{{Key: aws.String("Path"), Option: aws.String("Recursive"), Values: []string{"/app"}}}})
	if err != nil || len(descr.Parameters) != 3 {
		t.Errorf("DescribeParameters: %+v %v", descr, err)
	}
	if _, err := c.AddTagsToResource(ctx, &ssm.AddTagsToResourceInput{ResourceType: ssmtypes.ResourceTypeForTaggingParameter, ResourceId: aws.String("/app/hosts"), Tags: []ssmtypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); err != nil {
		t.Fatal(err)
	}
	if tags, err := c.ListTagsForResource(ctx, &ssm.ListTagsForResourceInput{ResourceType: ssmtypes.ResourceTypeForTaggingParameter, ResourceId: aws.String("/app/hosts")}); err != nil || len(tags.TagList) != 1 {
		t.Errorf("tags: %+v %v", tags, err)
	}

	if _, err := ssm.NewFromConfig(stack.awsConfig(other, "us-east-1")).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/app/hosts")}); apiErrorCode(err) != "ParameterNotFound" {
		t.Errorf("other account: %v", err)
	}
	if _, err := c.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: aws.String("/app/hosts")}); err != nil {
		t.Fatal(err)
	}
	delMany, err := c.DeleteParameters(ctx, &ssm.DeleteParametersInput{Names: []string{"/app/db/host", "/nope"}})
	if err != nil || len(delMany.DeletedParameters) != 1 || len(delMany.InvalidParameters) != 1 {
		t.Errorf("DeleteParameters: %+v %v", delMany, err)
	}
	if _, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/app/hosts")}); apiErrorCode(err) != "ParameterNotFound" {
		t.Errorf("after delete: %v", err)
	}
}

// runCLI runs the AWS CLI against the stack as acct; it returns stdout, stderr and
// whether it succeeded.
func (s *apiStack) runCLI(t *testing.T, acct string, args ...string) (string, string, bool) {
	t.Helper()
	k := s.keys[acct]
	cmd := exec.CommandContext(t.Context(), "aws", append(args, "--endpoint-url", s.url, "--region", "us-east-1", "--output", "json")...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "AWS_ACCESS_KEY_ID="+k[0], "AWS_SECRET_ACCESS_KEY="+k[1], "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true", "AWS_MAX_ATTEMPTS=1", "AWS_PAGER=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

// TestSecretsCLI: the AWS CLI's sts, secretsmanager and ssm commands against the real
// gateway and scheduler.
func TestSecretsCLI(t *testing.T) {
	t.Parallel() // see main_test.go
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (`aws`) is not installed; CI installs it")
	}
	const acct = "111111111111"
	s := startAPIStack(t, acct)
	must := func(args ...string) map[string]any {
		t.Helper()
		out, stderr, ok := s.runCLI(t, acct, args...)
		if !ok {
			t.Fatalf("aws %v: %s", args, stderr)
		}
		var m map[string]any
		if strings.TrimSpace(out) != "" {
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("aws %v: %q: %v", args, out, err)
			}
		}
		return m
	}
	if id := must("sts", "get-caller-identity"); id["Account"] != acct || id["Arn"] != "arn:aws:iam::"+acct+":root" {
		t.Errorf("get-caller-identity: %v", id)
	}
	created := must("secretsmanager", "create-secret", "--name", "cli/token", "--secret-string", "t0k3n")
	if arn, _ := created["ARN"].(string); !strings.HasPrefix(arn, "arn:aws:secretsmanager:us-east-1:"+acct+":secret:cli/token-") {
		t.Errorf("create-secret: %v", created)
	}
	must("secretsmanager", "put-secret-value", "--secret-id", "cli/token", "--secret-string", "t0k3n-2")
	if v := must("secretsmanager", "get-secret-value", "--secret-id", "cli/token", "--version-stage", "AWSPREVIOUS"); v["SecretString"] != "t0k3n" {
		t.Errorf("get-secret-value AWSPREVIOUS: %v", v)
	}
	if d := must("secretsmanager", "describe-secret", "--secret-id", "cli/token"); d["Name"] != "cli/token" || d["SecretString"] != nil {
		t.Errorf("describe-secret: %v", d)
	}
	if l := must("secretsmanager", "list-secrets"); len(l["SecretList"].([]any)) != 1 {
		t.Errorf("list-secrets: %v", l)
	}
	if d := must("secretsmanager", "delete-secret", "--secret-id", "cli/token", "--force-delete-without-recovery"); d["Name"] != "cli/token" {
		t.Errorf("delete-secret: %v", d)
	}
	if _, stderr, ok := s.runCLI(t, acct, "secretsmanager", "get-secret-value", "--secret-id", "cli/token"); ok || !strings.Contains(stderr, "(ResourceNotFoundException)") {
		t.Errorf("get-secret-value after delete: ok=%v %s", ok, stderr)
	}

	if p := must("ssm", "put-parameter", "--name", "/cli/p", "--value", "one", "--type", "SecureString"); p["Version"] != 1.0 {
		t.Errorf("put-parameter: %v", p)
	}
	must("ssm", "put-parameter", "--name", "/cli/p", "--value", "two", "--overwrite")
	g := must("ssm", "get-parameter", "--name", "/cli/p", "--with-decryption")
	if p, _ := g["Parameter"].(map[string]any); p["Value"] != "two" || p["Version"] != 2.0 {
		t.Errorf("get-parameter: %v", g)
	}
	if bp := must("ssm", "get-parameters-by-path", "--path", "/cli", "--with-decryption"); len(bp["Parameters"].([]any)) != 1 {
		t.Errorf("get-parameters-by-path: %v", bp)
	}
	if h := must("ssm", "get-parameter-history", "--name", "/cli/p"); len(h["Parameters"].([]any)) != 2 {
		t.Errorf("get-parameter-history: %v", h)
	}
	must("ssm", "label-parameter-version", "--name", "/cli/p", "--parameter-version", "1", "--labels", "old")
	if d := must("ssm", "describe-parameters"); len(d["Parameters"].([]any)) != 1 {
		t.Errorf("describe-parameters: %v", d)
	}
	must("ssm", "delete-parameter", "--name", "/cli/p")
	if _, stderr, ok := s.runCLI(t, acct, "ssm", "get-parameter", "--name", "/cli/p"); ok || !strings.Contains(stderr, "(ParameterNotFound)") {
		t.Errorf("get-parameter after delete: ok=%v %s", ok, stderr)
	}
}
