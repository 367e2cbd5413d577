package ecr

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"slices"
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

// lifecyclePolicy is an ECR lifecycle policy document.
type lifecyclePolicy struct {
	Rules []lifecycleRule `json:"rules"`
}

type lifecycleRule struct {
	RulePriority int    `json:"rulePriority"`
	Description  string `json:"description"`
	Selection    struct {
		TagStatus      string   `json:"tagStatus"`
		TagPrefixList  []string `json:"tagPrefixList"`
		TagPatternList []string `json:"tagPatternList"`
		CountType      string   `json:"countType"`
		CountUnit      string   `json:"countUnit"`
		CountNumber    int      `json:"countNumber"`
	} `json:"selection"`
	Action struct {
		Type string `json:"type"`
	} `json:"action"`
}

// parseLifecyclePolicy validates a policy as ECR does: rules with unique positive
// priorities, tagStatus tagged (with tagPrefixList or tagPatternList), untagged or any
// (the rule of lowest priority), countType imageCountMoreThan or sinceImagePushed (with
// countUnit days), a positive countNumber, action expire. Rules come back by priority.
func parseLifecyclePolicy(text string) ([]lifecycleRule, error) {
	bad := func(format string, args ...any) error {
		return invalidParameter("Invalid parameter at 'LifecyclePolicyText' failed to satisfy constraint: '"+format+"'", args...)
	}
	var p lifecyclePolicy
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, bad("Lifecycle policy validation failure: %s", err)
	}
	if len(p.Rules) == 0 {
		return nil, bad("Lifecycle policy validation failure: the policy has no rules")
	}
	rules := slices.Clone(p.Rules)
	slices.SortFunc(rules, func(a, b lifecycleRule) int { return a.RulePriority - b.RulePriority })
	for i, r := range rules {
		sel := r.Selection
		switch {
		case r.RulePriority < 1:
			return nil, bad("Lifecycle policy validation failure: rulePriority must be a positive integer")
		case i > 0 && rules[i-1].RulePriority == r.RulePriority:
			return nil, bad("Lifecycle policy validation failure: rulePriority %d is used twice", r.RulePriority)
		case r.Action.Type != "expire":
			return nil, bad("Lifecycle policy validation failure: action.type must be expire")
		case sel.CountNumber < 1:
			return nil, bad("Lifecycle policy validation failure: countNumber must be a positive integer")
		}
		switch sel.CountType {
		case "imageCountMoreThan":
			if sel.CountUnit != "" {
				return nil, bad("Lifecycle policy validation failure: countUnit is only valid with sinceImagePushed")
			}
		case "sinceImagePushed":
			if sel.CountUnit != "days" {
				return nil, bad("Lifecycle policy validation failure: sinceImagePushed needs countUnit days")
			}
		default:
			return nil, bad("Lifecycle policy validation failure: countType %q is not one Berth applies (imageCountMoreThan, sinceImagePushed)", sel.CountType)
		}
		switch sel.TagStatus {
		case "tagged":
			if (len(sel.TagPrefixList) == 0) == (len(sel.TagPatternList) == 0) {
				return nil, bad("Lifecycle policy validation failure: a tagged rule needs tagPrefixList or tagPatternList (one of them)")
			}
		case "untagged", "any":
			if len(sel.TagPrefixList) > 0 || len(sel.TagPatternList) > 0 {
				return nil, bad("Lifecycle policy validation failure: tagPrefixList and tagPatternList are only valid with tagStatus tagged")
			}
			if sel.TagStatus == "any" && i != len(rules)-1 {
				return nil, bad("Lifecycle policy validation failure: a rule with tagStatus any must have the highest rulePriority")
			}
		default:
			return nil, bad("Lifecycle policy validation failure: tagStatus must be tagged, untagged or any")
		}
	}
	return rules, nil
}

// selects reports whether rule r's selection takes img (its tag status and, for tagged
// rules, every prefix or pattern matched by one of its tags).
func (r lifecycleRule) selects(img *storev1.EcrImageRecord) bool {
	tags := img.GetTags()
	switch r.Selection.TagStatus {
	case "untagged":
		return len(tags) == 0
	case "any":
		return true
	}
	if len(tags) == 0 {
		return false
	}
	for _, p := range r.Selection.TagPrefixList {
		if !slices.ContainsFunc(tags, func(t string) bool { return strings.HasPrefix(t, p) }) {
			return false
		}
	}
	for _, p := range r.Selection.TagPatternList {
		if !slices.ContainsFunc(tags, func(t string) bool { ok, _ := path.Match(p, t); return ok }) {
			return false
		}
	}
	return true
}

// expiry is an image a lifecycle policy expires, and the priority of the rule that does.
type expiry struct {
	img      *storev1.EcrImageRecord
	priority int
}

// expired returns the images rules expire at now: each image is taken by the first rule
// (by priority) that selects it, and expired by that rule only — imageCountMoreThan
// keeps the countNumber most recently pushed of the rule's images, sinceImagePushed
// expires those pushed more than countNumber days before now.
func expired(rules []lifecycleRule, imgs []*storev1.EcrImageRecord, now time.Time) []expiry {
	taken := map[string]bool{}
	var out []expiry
	for _, r := range rules {
		var sel []*storev1.EcrImageRecord
		for _, img := range imgs {
			if !taken[img.GetDigest()] && r.selects(img) {
				taken[img.GetDigest()] = true
				sel = append(sel, img)
			}
		}
		switch r.Selection.CountType {
		case "imageCountMoreThan":
			slices.SortStableFunc(sel, func(a, b *storev1.EcrImageRecord) int {
				switch {
				case a.GetPushedAt() > b.GetPushedAt():
					return -1
				case a.GetPushedAt() < b.GetPushedAt():
					return 1
				}
				return 0
			})
			if len(sel) > r.Selection.CountNumber {
				for _, img := range sel[r.Selection.CountNumber:] {
					out = append(out, expiry{img, r.RulePriority})
				}
			}
		case "sinceImagePushed":
			cutoff := awsapi.Epoch(now.Add(-time.Duration(r.Selection.CountNumber) * 24 * time.Hour))
			for _, img := range sel {
				if img.GetPushedAt() < cutoff {
					out = append(out, expiry{img, r.RulePriority})
				}
			}
		}
	}
	return out
}

// ApplyLifecyclePolicies runs every repository's lifecycle policy, of every account:
// the images a policy expires are deleted with their tags (as BatchDeleteImage by
// digest), and the repository records when it was evaluated. It returns how many images
// it expired.
func (s *Store) ApplyLifecyclePolicies(ctx context.Context) (int, error) {
	repos, err := store.ListAll[*storev1.EcrRepositoryRecord](ctx, s.kv, store.MustKeyPrefix("ecr-repositories"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, it := range repos {
		if it.Value.GetLifecyclePolicy() == "" {
			continue
		}
		rules, err := parseLifecyclePolicy(it.Value.GetLifecyclePolicy())
		if err != nil {
			continue // stored only after it parsed; a stricter Berth leaves it alone
		}
		r := it.Value.GetRepository()
		arn, _ := strings.CutPrefix(r.GetRepositoryArn(), "arn:aws:ecr:")
		region, _, _ := strings.Cut(arn, ":")
		sc := keys.Scope{Account: r.GetRegistryId(), Region: region}
		name := r.GetRepositoryName()
		imgs, err := store.ListAll[*storev1.EcrImageRecord](ctx, s.kv, keys.EcrImages(sc, name))
		if err != nil {
			return n, err
		}
		vals := make([]*storev1.EcrImageRecord, len(imgs))
		revs := map[string]int64{}
		for i, im := range imgs {
			vals[i] = im.Value
			revs[im.Value.GetDigest()] = im.ModRevision
		}
		for _, e := range expired(rules, vals, s.now()) {
			img := e.img
			if err := s.deleteImage(ctx, sc, name, img, revs[img.GetDigest()]); err != nil {
				if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
					continue // pushed or deleted meanwhile: the next pass sees it
				}
				return n, err
			}
			n++
		}
		_, _, err = store.Mutate(ctx, s.kv, it.Key, func(rec *storev1.EcrRepositoryRecord) error {
			rec.LifecycleEvaluatedAt = awsapi.Epoch(s.now())
			return nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return n, err
		}
	}
	return n, nil
}

// deleteImage deletes an image and its tags in one transaction, if the image is still
// at revision rev.
func (s *Store) deleteImage(ctx context.Context, sc keys.Scope, repo string, img *storev1.EcrImageRecord, rev int64) error {
	key := keys.EcrImage(sc, repo, img.GetDigest())
	txn := store.NewTxn(s.kv).IfModRevision(key, rev).Delete(key)
	for _, t := range img.GetTags() {
		txn.Delete(keys.EcrTag(sc, repo, t))
	}
	_, err := txn.Commit(ctx)
	return err
}

func lifecyclePolicyNotFound(s keys.Scope, repo string) error {
	return awserr.New("LifecyclePolicyNotFoundException", "Lifecycle policy does not exist for the repository with name '%s' in the registry with id '%s'", repo, s.Account)
}

// PutLifecyclePolicy stores a repository's lifecycle policy, which the background pass
// (ApplyLifecyclePolicies) applies.
func (h *Handler) PutLifecyclePolicy(ctx context.Context, req *connect.Request[ecrv1.PutLifecyclePolicyRequest]) (*connect.Response[ecrv1.PutLifecyclePolicyResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.PutLifecyclePolicyRequest) (*ecrv1.PutLifecyclePolicyResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		text, repo := in.GetLifecyclePolicyText(), in.GetRepositoryName()
		if len(text) < 100 || len(text) > 30720 {
			return nil, invalidParameter("Invalid parameter at 'lifecyclePolicyText' failed to satisfy constraint: 'Member must have length less than or equal to 30720 and greater than or equal to 100'")
		}
		if _, err := parseLifecyclePolicy(text); err != nil {
			return nil, err
		}
		_, _, err := store.Mutate(ctx, h.kv, keys.EcrRepository(s, repo), func(rec *storev1.EcrRepositoryRecord) error {
			rec.LifecyclePolicy = text
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil, RepositoryNotFound(s, repo)
		}
		if err != nil {
			return nil, err
		}
		return &ecrv1.PutLifecyclePolicyResponse{RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo), LifecyclePolicyText: proto.String(text)}, nil
	})
}

// GetLifecyclePolicy answers a repository's lifecycle policy.
func (h *Handler) GetLifecyclePolicy(ctx context.Context, req *connect.Request[ecrv1.GetLifecyclePolicyRequest]) (*connect.Response[ecrv1.GetLifecyclePolicyResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.GetLifecyclePolicyRequest) (*ecrv1.GetLifecyclePolicyResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo := in.GetRepositoryName()
		rec, _, err := h.Repository(ctx, s, repo)
		if err != nil {
			return nil, err
		}
		if rec.GetLifecyclePolicy() == "" {
			return nil, lifecyclePolicyNotFound(s, repo)
		}
		out := &ecrv1.GetLifecyclePolicyResponse{RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo), LifecyclePolicyText: proto.String(rec.GetLifecyclePolicy())}
		if at := rec.GetLifecycleEvaluatedAt(); at != 0 {
			out.LastEvaluatedAt = proto.Float64(at)
		}
		return out, nil
	})
}

// DeleteLifecyclePolicy removes a repository's lifecycle policy.
func (h *Handler) DeleteLifecyclePolicy(ctx context.Context, req *connect.Request[ecrv1.DeleteLifecyclePolicyRequest]) (*connect.Response[ecrv1.DeleteLifecyclePolicyResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.DeleteLifecyclePolicyRequest) (*ecrv1.DeleteLifecyclePolicyResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo := in.GetRepositoryName()
		var old *storev1.EcrRepositoryRecord
		_, _, err := store.Mutate(ctx, h.kv, keys.EcrRepository(s, repo), func(rec *storev1.EcrRepositoryRecord) error {
			if rec.GetLifecyclePolicy() == "" {
				return lifecyclePolicyNotFound(s, repo)
			}
			old = proto.CloneOf(rec)
			rec.LifecyclePolicy, rec.LifecycleEvaluatedAt = "", 0
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil, RepositoryNotFound(s, repo)
		}
		if err != nil {
			return nil, err
		}
		out := &ecrv1.DeleteLifecyclePolicyResponse{RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo), LifecyclePolicyText: proto.String(old.GetLifecyclePolicy())}
		if at := old.GetLifecycleEvaluatedAt(); at != 0 {
			out.LastEvaluatedAt = proto.Float64(at)
		}
		return out, nil
	})
}
