package ecr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Repository policies (SetRepositoryPolicy): IAM policy documents whose statements
// grant or deny other accounts ECR actions on one repository. Berth's registry tokens
// name an account, not a user or role, so a principal is an account: "*", an account
// ID, or an ARN in it (arn:aws:iam::{account}:root, or any principal ARN of the account,
// which then stands for the whole account). The registry enforces them on pulls across
// accounts (docs/ecr.md); the owner's own requests never depend on them.

// strings1 is an IAM value that is one string or a list of them.
type strings1 []string

func (s *strings1) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		var l []string
		if err := json.Unmarshal(b, &l); err != nil {
			return err
		}
		*s = l
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err != nil {
		return err
	}
	*s = strings1{one}
	return nil
}

type policyStatement struct {
	Sid       string          `json:"Sid"`
	Effect    string          `json:"Effect"`
	Principal json.RawMessage `json:"Principal"`
	Action    strings1        `json:"Action"`

	accounts []string // "*" or account IDs
}

type repositoryPolicy struct {
	Version   string            `json:"Version"`
	ID        string            `json:"Id"`
	Statement []policyStatement `json:"Statement"`
}

var (
	accountPattern   = regexp.MustCompile(`^[0-9]{12}$`)
	principalARN     = regexp.MustCompile(`^arn:aws[a-z-]*:(iam|sts)::([0-9]{12}):.+$`)
	policyActionName = regexp.MustCompile(`^(\*|ecr:[A-Za-z*?]+)$`)
)

// badPolicy is ECR's answer to a policy it refuses, with Berth's reason.
func badPolicy(format string, args ...any) error {
	return invalidParameter("Invalid parameter at 'PolicyText' failed to satisfy constraint: 'Invalid repository policy provided': %s", fmt.Sprintf(format, args...))
}

// parseRepositoryPolicy validates a repository policy: JSON, Version 2012-10-17 or
// 2008-10-17, at least one statement, each with Effect Allow or Deny, a Principal of
// accounts ("*", {"AWS": …}) and ecr: actions. Members Berth does not evaluate
// (Condition, NotPrincipal, NotAction, Resource, a Service principal) are refused by
// name, so none is silently ignored.
func parseRepositoryPolicy(text string) (*repositoryPolicy, error) {
	var p repositoryPolicy
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, badPolicy("%s (Berth evaluates Version, Id and Statement with Sid, Effect, Principal and Action)", err)
	}
	if dec.More() {
		return nil, badPolicy("text after the policy document")
	}
	switch p.Version {
	case "2012-10-17", "2008-10-17":
	default:
		return nil, badPolicy("Version must be 2012-10-17 or 2008-10-17")
	}
	if len(p.Statement) == 0 {
		return nil, badPolicy("the policy has no Statement")
	}
	for i := range p.Statement {
		st := &p.Statement[i]
		if st.Effect != "Allow" && st.Effect != "Deny" {
			return nil, badPolicy("Statement %d: Effect must be Allow or Deny", i)
		}
		if len(st.Action) == 0 {
			return nil, badPolicy("Statement %d: Action is required", i)
		}
		for _, a := range st.Action {
			if !policyActionName.MatchString(a) {
				return nil, badPolicy("Statement %d: action %q is not an ecr: action", i, a)
			}
		}
		accounts, err := principalAccounts(st.Principal)
		if err != nil {
			return nil, badPolicy("Statement %d: %s", i, err)
		}
		st.accounts = accounts
	}
	return &p, nil
}

// principalAccounts reads a statement's Principal as the accounts it names.
func principalAccounts(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 {
		return nil, errors.New("Principal is required")
	}
	var star string
	if json.Unmarshal(raw, &star) == nil {
		if star != "*" {
			return nil, errors.New(`Principal must be "*" or {"AWS": …}`)
		}
		return []string{"*"}, nil
	}
	var m map[string]strings1
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("Principal: %v", err)
	}
	var out []string
	for k, vs := range m {
		if k != "AWS" {
			return nil, fmt.Errorf("principal type %s: Berth's registry tokens are accounts' (use AWS)", k)
		}
		for _, v := range vs {
			switch {
			case v == "*" || accountPattern.MatchString(v):
				out = append(out, v)
			case principalARN.MatchString(v):
				out = append(out, principalARN.FindStringSubmatch(v)[2])
			default:
				return nil, fmt.Errorf("principal %q is not an account ID or an IAM ARN", v)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("Principal names no account")
	}
	return out, nil
}

func (st policyStatement) matches(account, action string) bool {
	who := false
	for _, a := range st.accounts {
		if a == "*" || a == account {
			who = true
		}
	}
	if !who {
		return false
	}
	for _, a := range st.Action {
		if ok, _ := path.Match(strings.ToLower(a), strings.ToLower(action)); ok {
			return true
		}
	}
	return false
}

// PolicyAllows reports whether a repository policy lets account perform action (e.g.
// "ecr:BatchGetImage"): some Allow statement names both, and no Deny statement does. An
// empty or unreadable policy allows nothing.
func PolicyAllows(text, account, action string) bool {
	if text == "" {
		return false
	}
	p, err := parseRepositoryPolicy(text)
	if err != nil {
		return false
	}
	allowed := false
	for _, st := range p.Statement {
		if st.matches(account, action) {
			if st.Effect == "Deny" {
				return false
			}
			allowed = true
		}
	}
	return allowed
}

func repositoryPolicyNotFound(s keys.Scope, repo string) error {
	return awserr.New("RepositoryPolicyNotFoundException", "Repository policy does not exist for the repository with name '%s' in the registry with id '%s'", repo, s.Account)
}

// SetRepositoryPolicy stores a repository's policy (validated by parseRepositoryPolicy).
// force is accepted: a policy never locks the owner's account out of its own
// repository on Berth, so there is nothing for it to override.
func (h *Handler) SetRepositoryPolicy(ctx context.Context, req *connect.Request[ecrv1.SetRepositoryPolicyRequest]) (*connect.Response[ecrv1.SetRepositoryPolicyResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.SetRepositoryPolicyRequest) (*ecrv1.SetRepositoryPolicyResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo, text := in.GetRepositoryName(), in.GetPolicyText()
		if len(text) > 10240 {
			return nil, invalidParameter("Invalid parameter at 'policyText' failed to satisfy constraint: 'Member must have length less than or equal to 10240'")
		}
		if _, err := parseRepositoryPolicy(text); err != nil {
			return nil, err
		}
		_, _, err := store.Mutate(ctx, h.kv, keys.EcrRepository(s, repo), func(rec *storev1.EcrRepositoryRecord) error {
			rec.Policy = text
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil, RepositoryNotFound(s, repo)
		}
		if err != nil {
			return nil, err
		}
		return &ecrv1.SetRepositoryPolicyResponse{RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo), PolicyText: proto.String(text)}, nil
	})
}

// GetRepositoryPolicy answers a repository's policy.
func (h *Handler) GetRepositoryPolicy(ctx context.Context, req *connect.Request[ecrv1.GetRepositoryPolicyRequest]) (*connect.Response[ecrv1.GetRepositoryPolicyResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.GetRepositoryPolicyRequest) (*ecrv1.GetRepositoryPolicyResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo := in.GetRepositoryName()
		rec, _, err := h.Repository(ctx, s, repo)
		if err != nil {
			return nil, err
		}
		if rec.GetPolicy() == "" {
			return nil, repositoryPolicyNotFound(s, repo)
		}
		return &ecrv1.GetRepositoryPolicyResponse{RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo), PolicyText: proto.String(rec.GetPolicy())}, nil
	})
}

// DeleteRepositoryPolicy removes a repository's policy and answers it.
func (h *Handler) DeleteRepositoryPolicy(ctx context.Context, req *connect.Request[ecrv1.DeleteRepositoryPolicyRequest]) (*connect.Response[ecrv1.DeleteRepositoryPolicyResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.DeleteRepositoryPolicyRequest) (*ecrv1.DeleteRepositoryPolicyResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo := in.GetRepositoryName()
		var old string
		_, _, err := store.Mutate(ctx, h.kv, keys.EcrRepository(s, repo), func(rec *storev1.EcrRepositoryRecord) error {
			if rec.GetPolicy() == "" {
				return repositoryPolicyNotFound(s, repo)
			}
			old, rec.Policy = rec.GetPolicy(), ""
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil, RepositoryNotFound(s, repo)
		}
		if err != nil {
			return nil, err
		}
		return &ecrv1.DeleteRepositoryPolicyResponse{RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo), PolicyText: proto.String(old)}, nil
	})
}

// CrossAccount resolves a registry path's repository name for a token of scope sc when
// sc has no repository of that name: "{account}/{name}", with a 12-digit account other
// than sc's, names that account's repository {name} in sc's region (docs/ecr.md). ok is
// false when name is not of that form.
func CrossAccount(sc keys.Scope, name string) (owner keys.Scope, repo string, ok bool) {
	acct, rest, found := strings.Cut(name, "/")
	if !found || !accountPattern.MatchString(acct) || acct == sc.Account || rest == "" {
		return keys.Scope{}, "", false
	}
	return keys.Scope{Account: acct, Region: sc.Region}, rest, true
}
