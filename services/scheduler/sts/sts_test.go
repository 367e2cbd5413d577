package sts_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	stsv1 "github.com/berthhq/berth/gen/berth/sts/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/sts"
)

const account = "111122223333"

func ctxFor(t *testing.T, id caller.Identity) context.Context {
	t.Helper()
	return caller.With(t.Context(), id)
}

// wantAWSError fails unless err carries the AWS error typ whose message contains msg.
func wantAWSError(t *testing.T, err error, typ, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", typ)
	}
	e, ok := awserr.FromConnect(err)
	if !ok {
		t.Fatalf("error %v carries no AWS exception, want %s", err, typ)
	}
	if e.Type != typ || !strings.Contains(e.Message, msg) {
		t.Fatalf("error = %s: %q, want %s containing %q", e.Type, e.Message, typ, msg)
	}
}

func TestGetCallerIdentity(t *testing.T) {
	h := sts.New()
	for _, tc := range []struct {
		name                string
		id                  caller.Identity
		wantArn, wantUserID string
	}{
		{
			name:    "account key is the root user",
			id:      caller.Identity{Account: account, Region: "us-east-1"},
			wantArn: "arn:aws:iam::" + account + ":root", wantUserID: account,
		},
		{
			name: "session credentials are the assumed role",
			id: caller.Identity{Account: account, Region: "eu-west-1",
				PrincipalARN: "arn:aws:sts::" + account + ":assumed-role/app/s1", PrincipalID: "AROAEXAMPLE:s1"},
			wantArn: "arn:aws:sts::" + account + ":assumed-role/app/s1", wantUserID: "AROAEXAMPLE:s1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := h.GetCallerIdentity(ctxFor(t, tc.id), connect.NewRequest(&stsv1.GetCallerIdentityRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Msg; got.GetAccount() != account || got.GetArn() != tc.wantArn || got.GetUserId() != tc.wantUserID {
				t.Fatalf("identity = (%s, %s, %s), want (%s, %s, %s)", got.GetAccount(), got.GetArn(), got.GetUserId(), account, tc.wantArn, tc.wantUserID)
			}
		})
	}

	t.Run("no identity", func(t *testing.T) {
		_, err := h.GetCallerIdentity(t.Context(), connect.NewRequest(&stsv1.GetCallerIdentityRequest{}))
		// In process, awsapi.Handle refuses it; through Connect, caller.Interceptor does first.
		wantAWSError(t, err, "AccessDeniedException", "The request carries no account.")
	})
}

// issuer records AssumeRole's arguments and answers fixed credentials.
type issuer struct {
	role, session string
	duration      time.Duration
	id            caller.Identity
	calls         int
	err           error
}

var expiry = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func (i *issuer) AssumeRole(_ context.Context, id caller.Identity, role, session string, d time.Duration) (*agentv1.GetTaskCredentialsResponse, string, string, error) {
	i.calls++
	i.id, i.role, i.session, i.duration = id, role, session, d
	if i.err != nil {
		return nil, "", "", i.err
	}
	return &agentv1.GetTaskCredentialsResponse{AccessKeyId: "ASIAEXAMPLE", SecretAccessKey: "secret", SessionToken: "token",
			Expiration: timestamppb.New(expiry)},
		"arn:aws:sts::" + account + ":assumed-role/" + strings.TrimPrefix(role[strings.LastIndex(role, ":")+1:], "role/") + "/" + session,
		"AROAEXAMPLE:" + session, nil
}

func str(s string) *string { return &s }

func assume(role, session string) *stsv1.AssumeRoleRequest {
	return &stsv1.AssumeRoleRequest{RoleArn: str(role), RoleSessionName: str(session)}
}

func TestAssumeRole(t *testing.T) {
	role := "arn:aws:iam::" + account + ":role/app"
	id := caller.Identity{Account: account, Region: "us-east-1"}

	t.Run("issues credentials", func(t *testing.T) {
		iss := &issuer{}
		h := &sts.Handler{Roles: iss}
		res, err := h.AssumeRole(ctxFor(t, id), connect.NewRequest(assume(role, "deploy@ci")))
		if err != nil {
			t.Fatal(err)
		}
		if iss.role != role || iss.session != "deploy@ci" || iss.duration != time.Hour || iss.id.Account != account {
			t.Fatalf("issuer got (%s, %s, %s, %s), want (%s, deploy@ci, 1h, %s)", iss.id.Account, iss.role, iss.session, iss.duration, role, account)
		}
		m := res.Msg
		if got, want := m.GetAssumedRoleUser().GetArn(), "arn:aws:sts::"+account+":assumed-role/app/deploy@ci"; got != want {
			t.Errorf("AssumedRoleUser.Arn = %s, want %s", got, want)
		}
		if got := m.GetAssumedRoleUser().GetAssumedRoleId(); got != "AROAEXAMPLE:deploy@ci" {
			t.Errorf("AssumedRoleId = %s", got)
		}
		c := m.GetCredentials()
		if c.GetAccessKeyId() != "ASIAEXAMPLE" || c.GetSecretAccessKey() != "secret" || c.GetSessionToken() != "token" {
			t.Errorf("credentials = %v", c)
		}
		if c.GetExpiration() != float64(expiry.Unix()) {
			t.Errorf("Expiration = %v, want %v (epoch seconds)", c.GetExpiration(), expiry.Unix())
		}
	})

	t.Run("duration seconds", func(t *testing.T) {
		for _, tc := range []struct {
			secs int32
			want time.Duration // 0: refused
		}{
			{0, time.Hour}, // absent: AWS's default of one hour
			{899, 0},
			{900, 15 * time.Minute},
			{43200, 12 * time.Hour},
			{43201, 0},
			{-1, 0},
		} {
			iss := &issuer{}
			req := assume(role, "s1")
			req.DurationSeconds = tc.secs
			_, err := (&sts.Handler{Roles: iss}).AssumeRole(ctxFor(t, id), connect.NewRequest(req))
			if tc.want == 0 {
				wantAWSError(t, err, "ValidationError", "Member must have value between 900 and 43200")
				if iss.calls != 0 {
					t.Errorf("DurationSeconds %d: issuer called for a refused request", tc.secs)
				}
				continue
			}
			if err != nil {
				t.Fatalf("DurationSeconds %d: %v", tc.secs, err)
			}
			if iss.duration != tc.want {
				t.Errorf("DurationSeconds %d: issued for %s, want %s", tc.secs, iss.duration, tc.want)
			}
		}
	})

	t.Run("role session name", func(t *testing.T) {
		for _, tc := range []struct {
			session string
			ok      bool
		}{
			{"ab", true},
			{"a", false}, // at least 2
			{strings.Repeat("s", 64), true},
			{strings.Repeat("s", 65), false},
			{"user+x=y,z.w@co-1_", true},
			{"has space", false},
			{"slash/no", false},
			{"colon:no", false},
			{"", false},
		} {
			_, err := (&sts.Handler{Roles: &issuer{}}).AssumeRole(ctxFor(t, id), connect.NewRequest(assume(role, tc.session)))
			if tc.ok {
				if err != nil {
					t.Errorf("session %q: %v", tc.session, err)
				}
				continue
			}
			wantAWSError(t, err, "ValidationError", "roleSessionName")
		}
	})

	t.Run("role ARN", func(t *testing.T) {
		for _, bad := range []string{
			"app",
			"arn:aws:iam::" + account + ":user/app",
			"arn:aws:iam::" + account + ":role/",
			"arn:aws:s3::" + account + ":role/app",
			"arn:aws:iam::" + account,
			"",
		} {
			_, err := (&sts.Handler{Roles: &issuer{}}).AssumeRole(ctxFor(t, id), connect.NewRequest(assume(bad, "s1")))
			wantAWSError(t, err, "ValidationError", "is invalid")
		}
		// A role path is part of the resource.
		if _, err := (&sts.Handler{Roles: &issuer{}}).AssumeRole(ctxFor(t, id), connect.NewRequest(assume("arn:aws:iam::"+account+":role/team/app", "s1"))); err != nil {
			t.Errorf("role with a path: %v", err)
		}
	})

	t.Run("role of another account", func(t *testing.T) {
		other := "arn:aws:iam::999999999999:role/app"
		iss := &issuer{}
		_, err := (&sts.Handler{Roles: iss}).AssumeRole(ctxFor(t, id), connect.NewRequest(assume(other, "s1")))
		wantAWSError(t, err, "AccessDenied", "User: arn:aws:iam::"+account+":root is not authorized to perform: sts:AssumeRole on resource: "+other)
		if iss.calls != 0 {
			t.Error("issuer called for another account's role")
		}
		// The message names the principal that asked.
		withPrincipal := id
		withPrincipal.PrincipalARN = "arn:aws:sts::" + account + ":assumed-role/ci/job"
		_, err = (&sts.Handler{Roles: iss}).AssumeRole(ctxFor(t, withPrincipal), connect.NewRequest(assume(other, "s1")))
		wantAWSError(t, err, "AccessDenied", "User: arn:aws:sts::"+account+":assumed-role/ci/job is not authorized")
	})

	t.Run("members Berth cannot honour are refused", func(t *testing.T) {
		for name, set := range map[string]func(*stsv1.AssumeRoleRequest){
			"Policy":            func(r *stsv1.AssumeRoleRequest) { r.Policy = str("{}") },
			"PolicyArns":        func(r *stsv1.AssumeRoleRequest) { r.PolicyArns = []*stsv1.PolicyDescriptorType{{}} },
			"Tags":              func(r *stsv1.AssumeRoleRequest) { r.Tags = []*stsv1.Tag{{Key: str("k"), Value: str("v")}} },
			"TransitiveTagKeys": func(r *stsv1.AssumeRoleRequest) { r.TransitiveTagKeys = []string{"k"} },
			"ExternalId":        func(r *stsv1.AssumeRoleRequest) { r.ExternalId = str("x") },
			"SerialNumber":      func(r *stsv1.AssumeRoleRequest) { r.SerialNumber = str("arn:aws:iam::" + account + ":mfa/u") },
			"TokenCode":         func(r *stsv1.AssumeRoleRequest) { r.TokenCode = str("123456") },
			"SourceIdentity":    func(r *stsv1.AssumeRoleRequest) { r.SourceIdentity = str("me") },
			"ProvidedContexts":  func(r *stsv1.AssumeRoleRequest) { r.ProvidedContexts = []*stsv1.ProvidedContext{{}} },
		} {
			iss := &issuer{}
			req := assume(role, "s1")
			set(req)
			_, err := (&sts.Handler{Roles: iss}).AssumeRole(ctxFor(t, id), connect.NewRequest(req))
			wantAWSError(t, err, "ValidationError", name+" is not supported by Berth")
			if iss.calls != 0 {
				t.Errorf("%s: issuer called", name)
			}
		}
	})

	t.Run("issuer error passes through", func(t *testing.T) {
		want := connect.NewError(connect.CodeUnavailable, errors.New("store down"))
		_, err := (&sts.Handler{Roles: &issuer{err: want}}).AssumeRole(ctxFor(t, id), connect.NewRequest(assume(role, "s1")))
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatalf("err = %v, want the issuer's", err)
		}
	})

	t.Run("unsupported without an issuer", func(t *testing.T) {
		_, err := sts.New().AssumeRole(ctxFor(t, id), connect.NewRequest(assume(role, "s1")))
		if connect.CodeOf(err) != connect.CodeUnimplemented {
			t.Fatalf("err = %v, want CodeUnimplemented", err)
		}
	})

	t.Run("no identity", func(t *testing.T) {
		iss := &issuer{}
		_, err := (&sts.Handler{Roles: iss}).AssumeRole(t.Context(), connect.NewRequest(assume(role, "s1")))
		// In process, awsapi.Handle refuses it; through Connect, caller.Interceptor does first.
		wantAWSError(t, err, "AccessDeniedException", "The request carries no account.")
		if iss.calls != 0 {
			t.Error("issuer called without an identity")
		}
	})
}

func TestUnservedActionsAreUnimplemented(t *testing.T) {
	_, err := sts.New().GetSessionToken(ctxFor(t, caller.Identity{Account: account, Region: "us-east-1"}), connect.NewRequest(&stsv1.GetSessionTokenRequest{}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("GetSessionToken err = %v, want CodeUnimplemented (the gateway's UnsupportedOperation)", err)
	}
}
