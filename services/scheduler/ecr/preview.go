package ecr

import (
	"context"
	"errors"
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

// Lifecycle policy previews: StartLifecyclePolicyPreview records the policy and the
// time it was started on the repository; GetLifecyclePolicyPreview evaluates it (as the
// background pass does, with the start time as now) over the images the repository
// holds, without expiring any. A preview is therefore COMPLETE as soon as it starts.

// StartLifecyclePolicyPreview starts a preview of lifecyclePolicyText, or of the
// repository's stored policy when none is given (LifecyclePolicyNotFoundException when
// it has none either).
func (h *Handler) StartLifecyclePolicyPreview(ctx context.Context, req *connect.Request[ecrv1.StartLifecyclePolicyPreviewRequest]) (*connect.Response[ecrv1.StartLifecyclePolicyPreviewResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.StartLifecyclePolicyPreviewRequest) (*ecrv1.StartLifecyclePolicyPreviewResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo, text := in.GetRepositoryName(), in.GetLifecyclePolicyText()
		if in.LifecyclePolicyText != nil {
			if len(text) < 100 || len(text) > 30720 {
				return nil, invalidParameter("Invalid parameter at 'lifecyclePolicyText' failed to satisfy constraint: 'Member must have length less than or equal to 30720 and greater than or equal to 100'")
			}
			if _, err := parseLifecyclePolicy(text); err != nil {
				return nil, err
			}
		}
		_, _, err := store.Mutate(ctx, h.kv, keys.EcrRepository(s, repo), func(rec *storev1.EcrRepositoryRecord) error {
			if in.LifecyclePolicyText == nil {
				if rec.GetLifecyclePolicy() == "" {
					return lifecyclePolicyNotFound(s, repo)
				}
				text = rec.GetLifecyclePolicy()
			}
			rec.LifecyclePreviewPolicy, rec.LifecyclePreviewStartedAt = text, awsapi.Epoch(h.now())
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil, RepositoryNotFound(s, repo)
		}
		if err != nil {
			return nil, err
		}
		return &ecrv1.StartLifecyclePolicyPreviewResponse{RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo),
			LifecyclePolicyText: proto.String(text), Status: proto.String("IN_PROGRESS")}, nil
	})
}

// GetLifecyclePolicyPreview answers the images the previewed policy would expire, by
// imageIds or paged (maxResults 1–100, nextToken; filter.tagStatus), and their count.
func (h *Handler) GetLifecyclePolicyPreview(ctx context.Context, req *connect.Request[ecrv1.GetLifecyclePolicyPreviewRequest]) (*connect.Response[ecrv1.GetLifecyclePolicyPreviewResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ecrv1.GetLifecyclePolicyPreviewRequest) (*ecrv1.GetLifecyclePolicyPreviewResponse, error) {
		if err := checkRegistry(s, in.RegistryId); err != nil {
			return nil, err
		}
		repo := in.GetRepositoryName()
		ids := in.GetImageIds()
		if len(ids) > 0 && (in.GetMaxResults() != 0 || in.NextToken != nil) {
			return nil, invalidParameter("Invalid parameter: maxResults and nextToken cannot be used with imageIds.")
		}
		if len(ids) > 100 {
			return nil, invalidParameter("Invalid parameter at 'imageIds' failed to satisfy constraint: 'Member must have length less than or equal to 100'")
		}
		limit := 100
		if n := in.GetMaxResults(); n != 0 {
			if n < 1 || n > 100 {
				return nil, invalidParameter("Invalid parameter at 'maxResults' failed to satisfy constraint: 'Member must have value less than or equal to 100 and greater than or equal to 1'")
			}
			limit = int(n)
		}
		keep := func(*storev1.EcrImageRecord) bool { return true }
		switch ts := in.GetFilter().GetTagStatus(); ts {
		case "", "ANY":
		case "TAGGED":
			keep = func(i *storev1.EcrImageRecord) bool { return len(i.GetTags()) > 0 }
		case "UNTAGGED":
			keep = func(i *storev1.EcrImageRecord) bool { return len(i.GetTags()) == 0 }
		default:
			return nil, invalidParameter("Invalid parameter at 'filter.tagStatus': %s is not valid.", ts)
		}
		rec, _, err := h.Repository(ctx, s, repo)
		if err != nil {
			return nil, err
		}
		text := rec.GetLifecyclePreviewPolicy()
		if text == "" {
			return nil, awserr.New("LifecyclePolicyPreviewNotFoundException", "There is no dry run for the repository with name '%s' in the registry with id '%s'", repo, s.Account)
		}
		rules, err := parseLifecyclePolicy(text)
		if err != nil {
			return nil, err
		}
		imgs, err := store.ListAll[*storev1.EcrImageRecord](ctx, h.kv, keys.EcrImages(s, repo))
		if err != nil {
			return nil, err
		}
		vals := make([]*storev1.EcrImageRecord, len(imgs))
		for i, im := range imgs {
			vals[i] = im.Value
		}
		at := rec.GetLifecyclePreviewStartedAt()
		exp := expired(rules, vals, time.Unix(0, int64(at*1e9)))
		// Pages follow the digests' order; a token is the last digest answered.
		slices.SortFunc(exp, func(a, b expiry) int { return strings.Compare(a.img.GetDigest(), b.img.GetDigest()) })
		out := &ecrv1.GetLifecyclePolicyPreviewResponse{RegistryId: proto.String(s.Account), RepositoryName: proto.String(repo),
			LifecyclePolicyText: proto.String(text), Status: proto.String("COMPLETE"),
			PreviewResults: []*ecrv1.LifecyclePolicyPreviewResult{},
			Summary:        &ecrv1.LifecyclePolicyPreviewSummary{ExpiringImageTotalCount: int32(len(exp))}}
		after := in.GetNextToken()
		if after != "" && !digestPattern.MatchString(after) {
			return nil, invalidParameter("Invalid parameter at 'nextToken': the token is not valid.")
		}
		for _, e := range exp {
			img := e.img
			if !keep(img) || (after != "" && img.GetDigest() <= after) {
				continue
			}
			if len(ids) > 0 && !slices.ContainsFunc(ids, func(id *ecrv1.ImageIdentifier) bool {
				return id.GetImageDigest() == img.GetDigest() || (id.ImageDigest == nil && slices.Contains(img.GetTags(), id.GetImageTag()))
			}) {
				continue
			}
			if len(ids) == 0 && len(out.PreviewResults) == limit {
				out.NextToken = proto.String(out.PreviewResults[limit-1].GetImageDigest())
				break
			}
			out.PreviewResults = append(out.PreviewResults, &ecrv1.LifecyclePolicyPreviewResult{
				ImageDigest: proto.String(img.GetDigest()), ImageTags: slices.Clone(img.GetTags()), ImagePushedAt: proto.Float64(img.GetPushedAt()),
				Action: &ecrv1.LifecyclePolicyRuleAction{Type: proto.String("EXPIRE")}, AppliedRulePriority: int32(e.priority),
			})
		}
		return out, nil
	})
}
