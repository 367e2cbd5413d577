// Package sts serves the STS API (berth.sts.v1.StsService) in the scheduler:
// GetCallerIdentity answers the caller's account and the principal the gateway
// authenticated (the account's root user for an account access key; the assumed role of
// session credentials: task role credentials, and AssumeRole's). AssumeRole issues
// session credentials of the caller's account (package taskcreds). The other actions answer
// CodeUnimplemented, which the gateway returns as UnsupportedOperation naming the action.
package sts

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	stsv1 "github.com/berthhq/berth/gen/berth/sts/v1"
	"github.com/berthhq/berth/gen/berth/sts/v1/stsv1connect"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// Handler implements stsv1connect.StsServiceHandler.
type Handler struct {
	stsv1connect.UnimplementedStsServiceHandler
	// Logger receives the internal faults of its actions (errors that are not AWS
	// exceptions, which the client sees as ServerException; AssumeRole's issuer can
	// fail so); nil discards them.
	Logger *slog.Logger
	// Roles issues AssumeRole's session credentials (package taskcreds); nil leaves
	// AssumeRole unsupported.
	Roles RoleIssuer
}

// RoleIssuer issues session credentials for a role of the caller's account; it returns
// them with the assumed role's ARN and unique id.
type RoleIssuer interface {
	AssumeRole(ctx context.Context, id caller.Identity, role, session string, duration time.Duration) (*agentv1.GetTaskCredentialsResponse, string, string, error)
}

// sessionName is AWS's RoleSessionName pattern and length.
var sessionName = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)

// AssumeRole issues temporary credentials of the caller's account for RoleArn, as AWS STS
// AssumeRole: AssumedRoleUser arn:aws:sts::{account}:assumed-role/{role}/{session}.
// Berth has no IAM: any role ARN of the caller's account may be assumed (the credentials
// act with the account's permissions); one of another account is AccessDenied. The
// request members Berth cannot honour (session policies, tags, MFA, external id, source
// identity, provided contexts) are refused with ValidationError, never ignored.
// DurationSeconds is 900–43200, default 3600.
func (h *Handler) AssumeRole(ctx context.Context, req *connect.Request[stsv1.AssumeRoleRequest]) (*connect.Response[stsv1.AssumeRoleResponse], error) {
	if h.Roles == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("AssumeRole"))
	}
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, _ keys.Scope, m *stsv1.AssumeRoleRequest) (*stsv1.AssumeRoleResponse, error) {
		id, _ := caller.From(ctx) // present: Handle refuses a call without one
		invalid := func(format string, args ...any) (*stsv1.AssumeRoleResponse, error) {
			return nil, awserr.New("ValidationError", format, args...)
		}
		for name, set := range map[string]bool{
			"Policy": m.Policy != nil, "PolicyArns": len(m.GetPolicyArns()) > 0, "Tags": len(m.GetTags()) > 0,
			"TransitiveTagKeys": len(m.GetTransitiveTagKeys()) > 0, "ExternalId": m.ExternalId != nil,
			"SerialNumber": m.SerialNumber != nil, "TokenCode": m.TokenCode != nil, "SourceIdentity": m.SourceIdentity != nil,
			"ProvidedContexts": len(m.GetProvidedContexts()) > 0,
		} {
			if set {
				return invalid("%s is not supported by Berth: it has no IAM policies, tags or MFA; leave it out.", name)
			}
		}
		role, session := m.GetRoleArn(), m.GetRoleSessionName()
		if !sessionName.MatchString(session) {
			return invalid("1 validation error detected: Value '%s' at 'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]* and have length between 2 and 64", session)
		}
		parts := strings.SplitN(role, ":", 6)
		if len(parts) != 6 || parts[0] != "arn" || parts[2] != "iam" || !strings.HasPrefix(parts[5], "role/") || len(parts[5]) <= len("role/") {
			return invalid("%s is invalid", role)
		}
		if parts[4] != id.Account {
			principal, _ := id.Principal()
			return nil, awserr.New("AccessDenied", "User: %s is not authorized to perform: sts:AssumeRole on resource: %s", principal, role)
		}
		secs := m.GetDurationSeconds()
		if secs == 0 {
			secs = 3600
		}
		if secs < 900 || secs > 43200 {
			return invalid("1 validation error detected: Value '%d' at 'durationSeconds' failed to satisfy constraint: Member must have value between 900 and 43200", secs)
		}
		c, arn, uid, err := h.Roles.AssumeRole(ctx, id, role, session, time.Duration(secs)*time.Second)
		if err != nil {
			return nil, err
		}
		return &stsv1.AssumeRoleResponse{
			AssumedRoleUser: &stsv1.AssumedRoleUser{Arn: proto.String(arn), AssumedRoleId: proto.String(uid)},
			Credentials: &stsv1.Credentials{AccessKeyId: proto.String(c.GetAccessKeyId()), SecretAccessKey: proto.String(c.GetSecretAccessKey()),
				SessionToken: proto.String(c.GetSessionToken()), Expiration: proto.Float64(float64(c.GetExpiration().AsTime().Unix()))},
		}, nil
	})
}

// New returns the STS handler; it keeps no state.
func New() *Handler { return &Handler{} }

// GetCallerIdentity answers Account, Arn and UserId of the caller, as AWS's
// GetCallerIdentity: for an account access key the root user (arn:aws:iam::{account}:root,
// UserId the account id). It needs the identity the caller interceptor reads; a call
// without one (in process: the interceptor refuses it first) answers AccessDeniedException.
func (h *Handler) GetCallerIdentity(ctx context.Context, req *connect.Request[stsv1.GetCallerIdentityRequest]) (*connect.Response[stsv1.GetCallerIdentityResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, sc keys.Scope, _ *stsv1.GetCallerIdentityRequest) (*stsv1.GetCallerIdentityResponse, error) {
		id, _ := caller.From(ctx) // present: Handle refuses a call without one
		arn, uid := id.Principal()
		return &stsv1.GetCallerIdentityResponse{Account: proto.String(sc.Account), Arn: proto.String(arn), UserId: proto.String(uid)}, nil
	})
}
