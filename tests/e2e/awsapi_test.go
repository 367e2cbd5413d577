package e2e

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

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
