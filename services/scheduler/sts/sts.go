// Package sts serves the STS API (berth.sts.v1.StsService) in the scheduler:
// GetCallerIdentity answers the caller's account and the principal the gateway
// authenticated (the account's root user for an account access key; the assumed role of
// session credentials once the gateway issues them). The other actions of the model answer
// CodeUnimplemented, which the gateway returns as UnsupportedOperation naming the action.
package sts

import (
	"context"

	"connectrpc.com/connect"

	stsv1 "github.com/berthhq/berth/gen/berth/sts/v1"
	"github.com/berthhq/berth/gen/berth/sts/v1/stsv1connect"
	"github.com/berthhq/berth/services/scheduler/caller"
	"github.com/berthhq/berth/services/scheduler/ecserr"
)

// Handler implements stsv1connect.StsServiceHandler.
type Handler struct {
	stsv1connect.UnimplementedStsServiceHandler
}

// New returns the STS handler; it keeps no state.
func New() *Handler { return &Handler{} }

// GetCallerIdentity answers Account, Arn and UserId of the caller, as AWS's
// GetCallerIdentity: for an account access key the root user (arn:aws:iam::{account}:root,
// UserId the account id). It needs the identity the caller interceptor reads; without one
// it answers AccessDenied.
func (*Handler) GetCallerIdentity(ctx context.Context, _ *connect.Request[stsv1.GetCallerIdentityRequest]) (*connect.Response[stsv1.GetCallerIdentityResponse], error) {
	id, ok := caller.From(ctx)
	if !ok {
		return nil, ecserr.ToConnect(ecserr.New("AccessDenied", "The request carries no account."))
	}
	arn, uid := id.PrincipalARN, id.PrincipalID
	if arn == "" {
		arn, uid = "arn:aws:iam::"+id.Account+":root", id.Account
	}
	account := id.Account
	return connect.NewResponse(&stsv1.GetCallerIdentityResponse{Account: &account, Arn: &arn, UserId: &uid}), nil
}
