package ecr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Pull-through cache rules: a pull of {ecrRepositoryPrefix}/{name}:{ref} from the
// registry that finds no such image fetches {upstream}/{upstream prefix/}{name}:{ref}
// from the rule's upstream registry, stores it (creating the repository on the first
// pull) and serves it (package registry). Berth pulls from upstreams anonymously: rules
// with credentialArn or customRoleArn are refused.

var cachePrefixPattern = regexp.MustCompile(`^([a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*/?|ROOT)$`)

// checkCachePrefix validates a repository prefix as ECR does (2–30 characters, the
// repository name rule or ROOT) and returns it without a trailing '/'.
func checkCachePrefix(field, p string) (string, error) {
	if len(p) < 2 || len(p) > 30 || !cachePrefixPattern.MatchString(p) {
		return "", invalidParameter("Invalid parameter at '%s' failed to satisfy constraint: 'must satisfy regular expression '[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*/?|ROOT' and length between 2 and 30'", field)
	}
	return strings.TrimSuffix(p, "/"), nil
}

// checkUpstreamURL validates an upstreamRegistryUrl: a host[:port], optionally with an
// http:// or https:// scheme and nothing after the host.
func checkUpstreamURL(raw string) error {
	host := raw
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
			return invalidParameter("Invalid parameter at 'upstreamRegistryUrl': %q is not a registry host[:port] (an http:// or https:// scheme may come before it).", raw)
		}
		host = u.Host
	}
	if host == "" || strings.ContainsAny(host, "/ ") {
		return invalidParameter("Invalid parameter at 'upstreamRegistryUrl': %q is not a registry host[:port].", raw)
	}
	if h, _, err := net.SplitHostPort(host); err == nil && h == "" {
		return invalidParameter("Invalid parameter at 'upstreamRegistryUrl': %q has no host.", raw)
	}
	return nil
}

var upstreamRegistries = map[string]bool{"ecr": true, "ecr-public": true, "quay": true, "k8s": true, "docker-hub": true,
	"github-container-registry": true, "azure-container-registry": true, "gitlab-container-registry": true, "chainguard": true}

func cacheRuleNotFound(s keys.Scope, prefix string) error {
	return awserr.New("PullThroughCacheRuleNotFoundException", "The pull through cache rule with prefix '%s' does not exist in the registry with id '%s'", prefix, s.Account)
}

func noCredentials(field string) error {
	return invalidParameter("Invalid parameter at '%s': Berth pulls from upstream registries anonymously; %s is not supported.", field, field)
}

// CreatePullThroughCacheRule creates a rule caching upstreamRegistryUrl's images under
// ecrRepositoryPrefix.
func (h *Handler) CreatePullThroughCacheRule(ctx context.Context, req *connect.Request[ecrv1.CreatePullThroughCacheRuleRequest]) (*connect.Response[ecrv1.CreatePullThroughCacheRuleResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.CreatePullThroughCacheRuleRequest) (*ecrv1.CreatePullThroughCacheRuleResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		prefix, err := checkCachePrefix("ecrRepositoryPrefix", in.GetEcrRepositoryPrefix())
		if err != nil {
			return nil, err
		}
		up := "ROOT"
		if in.UpstreamRepositoryPrefix != nil {
			if up, err = checkCachePrefix("upstreamRepositoryPrefix", in.GetUpstreamRepositoryPrefix()); err != nil {
				return nil, err
			}
		}
		if err := checkUpstreamURL(in.GetUpstreamRegistryUrl()); err != nil {
			return nil, err
		}
		if r := in.GetUpstreamRegistry(); r != "" && !upstreamRegistries[r] {
			return nil, awserr.New("UnsupportedUpstreamRegistryException", "The upstream registry %q is not supported.", r)
		}
		if in.GetCredentialArn() != "" {
			return nil, noCredentials("credentialArn")
		}
		if in.GetCustomRoleArn() != "" {
			return nil, noCredentials("customRoleArn")
		}
		rule := &ecrv1.PullThroughCacheRule{
			EcrRepositoryPrefix: proto.String(prefix), UpstreamRegistryUrl: proto.String(in.GetUpstreamRegistryUrl()),
			CreatedAt: proto.Float64(awsapi.Epoch(h.now())), RegistryId: proto.String(s.Account), UpstreamRepositoryPrefix: proto.String(up),
		}
		if in.UpstreamRegistry != nil {
			rule.UpstreamRegistry = proto.String(in.GetUpstreamRegistry())
		}
		if _, err := store.Create(ctx, h.kv, keys.EcrCacheRule(s, prefix), rule); err != nil {
			if errors.Is(err, store.ErrExists) {
				return nil, awserr.New("PullThroughCacheRuleAlreadyExistsException", "A pull through cache rule with prefix '%s' already exists in the registry with id '%s'", prefix, s.Account)
			}
			return nil, err
		}
		return &ecrv1.CreatePullThroughCacheRuleResponse{EcrRepositoryPrefix: rule.EcrRepositoryPrefix, UpstreamRegistryUrl: rule.UpstreamRegistryUrl,
			CreatedAt: rule.CreatedAt, RegistryId: rule.RegistryId, UpstreamRegistry: rule.UpstreamRegistry, UpstreamRepositoryPrefix: rule.UpstreamRepositoryPrefix}, nil
	})
}

// DescribePullThroughCacheRules lists the caller's rules, or the ones named.
func (h *Handler) DescribePullThroughCacheRules(ctx context.Context, req *connect.Request[ecrv1.DescribePullThroughCacheRulesRequest]) (*connect.Response[ecrv1.DescribePullThroughCacheRulesResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.DescribePullThroughCacheRulesRequest) (*ecrv1.DescribePullThroughCacheRulesResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		out := &ecrv1.DescribePullThroughCacheRulesResponse{PullThroughCacheRules: []*ecrv1.PullThroughCacheRule{}}
		if names := in.GetEcrRepositoryPrefixes(); len(names) > 0 {
			if in.GetMaxResults() != 0 || in.NextToken != nil {
				return nil, invalidParameter("Invalid parameter: maxResults and nextToken cannot be used with ecrRepositoryPrefixes.")
			}
			for _, n := range names {
				p, err := checkCachePrefix("ecrRepositoryPrefixes", n)
				if err != nil {
					return nil, err
				}
				rule, _, err := store.Get[*ecrv1.PullThroughCacheRule](ctx, h.kv, keys.EcrCacheRule(s, p))
				if errors.Is(err, store.ErrNotFound) {
					return nil, cacheRuleNotFound(s, p)
				}
				if err != nil {
					return nil, err
				}
				out.PullThroughCacheRules = append(out.PullThroughCacheRules, rule)
			}
			return out, nil
		}
		limit, err := maxResults(in.GetMaxResults())
		if err != nil {
			return nil, err
		}
		items, next, err := store.List[*ecrv1.PullThroughCacheRule](ctx, h.kv, keys.EcrCacheRules(s), limit, in.GetNextToken())
		if err != nil {
			if errors.Is(err, store.ErrInvalidToken) {
				return nil, invalidParameter("Invalid parameter at 'nextToken': the token is not valid.")
			}
			return nil, err
		}
		for _, it := range items {
			out.PullThroughCacheRules = append(out.PullThroughCacheRules, it.Value)
		}
		if next != "" {
			out.NextToken = proto.String(next)
		}
		return out, nil
	})
}

// DeletePullThroughCacheRule deletes a rule (the images it cached stay).
func (h *Handler) DeletePullThroughCacheRule(ctx context.Context, req *connect.Request[ecrv1.DeletePullThroughCacheRuleRequest]) (*connect.Response[ecrv1.DeletePullThroughCacheRuleResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.DeletePullThroughCacheRuleRequest) (*ecrv1.DeletePullThroughCacheRuleResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		p, err := checkCachePrefix("ecrRepositoryPrefix", in.GetEcrRepositoryPrefix())
		if err != nil {
			return nil, err
		}
		key := keys.EcrCacheRule(s, p)
		rule, rev, err := store.Get[*ecrv1.PullThroughCacheRule](ctx, h.kv, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil, cacheRuleNotFound(s, p)
		}
		if err != nil {
			return nil, err
		}
		if _, err := store.NewTxn(h.kv).IfModRevision(key, rev).Delete(key).Commit(ctx); err != nil {
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
				return nil, cacheRuleNotFound(s, p)
			}
			return nil, err
		}
		return &ecrv1.DeletePullThroughCacheRuleResponse{EcrRepositoryPrefix: rule.EcrRepositoryPrefix, UpstreamRegistryUrl: rule.UpstreamRegistryUrl,
			CreatedAt: rule.CreatedAt, RegistryId: rule.RegistryId, UpstreamRepositoryPrefix: rule.UpstreamRepositoryPrefix}, nil
	})
}

// UpdatePullThroughCacheRule changes a rule's credentials, which Berth does not use: a
// rule without credentialArn and customRoleArn is answered as it is.
func (h *Handler) UpdatePullThroughCacheRule(ctx context.Context, req *connect.Request[ecrv1.UpdatePullThroughCacheRuleRequest]) (*connect.Response[ecrv1.UpdatePullThroughCacheRuleResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.UpdatePullThroughCacheRuleRequest) (*ecrv1.UpdatePullThroughCacheRuleResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		p, err := checkCachePrefix("ecrRepositoryPrefix", in.GetEcrRepositoryPrefix())
		if err != nil {
			return nil, err
		}
		if in.GetCredentialArn() != "" {
			return nil, noCredentials("credentialArn")
		}
		if in.GetCustomRoleArn() != "" {
			return nil, noCredentials("customRoleArn")
		}
		rule, _, err := store.Mutate(ctx, h.kv, keys.EcrCacheRule(s, p), func(r *ecrv1.PullThroughCacheRule) error {
			r.UpdatedAt = proto.Float64(awsapi.Epoch(h.now()))
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil, cacheRuleNotFound(s, p)
		}
		if err != nil {
			return nil, err
		}
		return &ecrv1.UpdatePullThroughCacheRuleResponse{EcrRepositoryPrefix: rule.EcrRepositoryPrefix, RegistryId: rule.RegistryId,
			UpdatedAt: rule.UpdatedAt, UpstreamRepositoryPrefix: rule.UpstreamRepositoryPrefix}, nil
	})
}

// UpstreamHost returns an upstreamRegistryUrl's host[:port] and whether Berth reaches it
// over plain HTTP: with an http:// scheme, or a loopback host without a scheme (as
// docker and go-containerregistry treat loopback registries); HTTPS otherwise.
func UpstreamHost(raw string) (host string, plainHTTP bool) {
	if u, err := url.Parse(raw); err == nil && strings.Contains(raw, "://") {
		return u.Host, u.Scheme == "http"
	}
	h := raw
	if hh, _, err := net.SplitHostPort(raw); err == nil {
		h = hh
	}
	ip := net.ParseIP(h)
	return raw, h == "localhost" || (ip != nil && ip.IsLoopback())
}

// checkUpstream answers whether a registry answers the Distribution API's version check
// (GET /v2/: 200, or 401 asking for credentials) within 10 seconds.
func checkUpstream(ctx context.Context, raw string) error {
	host, plain := UpstreamHost(raw)
	scheme := "https"
	if plain {
		scheme = "http"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+host+"/v2/", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the upstream registry %s does not answer: %v", raw, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
		return fmt.Errorf("the upstream registry %s answers GET /v2/ with %s, not a registry's version check", raw, resp.Status)
	}
	return nil
}

// ValidatePullThroughCacheRule checks that the rule's upstream registry answers the
// Distribution API's version check: isValid, or the failure.
func (h *Handler) ValidatePullThroughCacheRule(ctx context.Context, req *connect.Request[ecrv1.ValidatePullThroughCacheRuleRequest]) (*connect.Response[ecrv1.ValidatePullThroughCacheRuleResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.ValidatePullThroughCacheRuleRequest) (*ecrv1.ValidatePullThroughCacheRuleResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		p, err := checkCachePrefix("ecrRepositoryPrefix", in.GetEcrRepositoryPrefix())
		if err != nil {
			return nil, err
		}
		rule, _, err := store.Get[*ecrv1.PullThroughCacheRule](ctx, h.kv, keys.EcrCacheRule(s, p))
		if errors.Is(err, store.ErrNotFound) {
			return nil, cacheRuleNotFound(s, p)
		}
		if err != nil {
			return nil, err
		}
		out := &ecrv1.ValidatePullThroughCacheRuleResponse{EcrRepositoryPrefix: rule.EcrRepositoryPrefix, RegistryId: rule.RegistryId,
			UpstreamRegistryUrl: rule.UpstreamRegistryUrl, UpstreamRepositoryPrefix: rule.UpstreamRepositoryPrefix, IsValid: true}
		if err := checkUpstream(ctx, rule.GetUpstreamRegistryUrl()); err != nil {
			out.IsValid, out.Failure = false, proto.String(err.Error())
		}
		return out, nil
	})
}

// CacheRule returns the rule whose ecrRepositoryPrefix a repository name falls under
// (the longest; ROOT last) and the upstream repository it names; ok false when none.
func (s *Store) CacheRule(ctx context.Context, sc keys.Scope, name string) (rule *ecrv1.PullThroughCacheRule, upstreamRepo string, ok bool, err error) {
	rules, err := store.ListAll[*ecrv1.PullThroughCacheRule](ctx, s.kv, keys.EcrCacheRules(sc))
	if err != nil {
		return nil, "", false, err
	}
	best, rest := -1, ""
	for i, it := range rules {
		p := it.Value.GetEcrRepositoryPrefix()
		switch {
		case p == "ROOT" && best < 0:
			best, rest = i, name
		case p != "ROOT" && strings.HasPrefix(name, p+"/") && (best < 0 || rules[best].Value.GetEcrRepositoryPrefix() == "ROOT" || len(p) > len(rules[best].Value.GetEcrRepositoryPrefix())):
			best, rest = i, strings.TrimPrefix(name, p+"/")
		}
	}
	if best < 0 {
		return nil, "", false, nil
	}
	r := rules[best].Value
	if up := r.GetUpstreamRepositoryPrefix(); up != "" && up != "ROOT" {
		rest = up + "/" + rest
	}
	return r, rest, true, nil
}

// EnsureRepository creates repository name (MUTABLE, AES256) unless it exists: the
// repository of a pull-through cache's first pull.
func (s *Store) EnsureRepository(ctx context.Context, sc keys.Scope, name string) error {
	if err := checkRepositoryName(name); err != nil {
		return err
	}
	repo := &ecrv1.Repository{
		RepositoryName: proto.String(name), RepositoryArn: proto.String(ARN(sc, name)), RegistryId: proto.String(sc.Account),
		CreatedAt: proto.Float64(awsapi.Epoch(s.now())), ImageTagMutability: proto.String(Mutable),
		ImageScanningConfiguration: &ecrv1.ImageScanningConfiguration{},
		EncryptionConfiguration:    &ecrv1.EncryptionConfiguration{EncryptionType: proto.String("AES256")},
	}
	_, err := store.Create(ctx, s.kv, keys.EcrRepository(sc, name), &storev1.EcrRepositoryRecord{Repository: repo})
	if errors.Is(err, store.ErrExists) {
		return nil
	}
	return err
}
