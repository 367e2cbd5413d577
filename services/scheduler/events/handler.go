package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/berthhq/berth/gen/berth/events/v1"
	"github.com/berthhq/berth/gen/berth/events/v1/eventsv1connect"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Rule states (the model's RuleState).
const (
	StateEnabled  = "ENABLED"
	StateDisabled = "DISABLED"
	// StateEnabledAllCloudTrail is accepted and acts as ENABLED: Berth emits no CloudTrail
	// management events, the only ones it would add.
	StateEnabledAllCloudTrail = "ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS"
)

// DefaultBus is the only event bus Berth has: every account's default bus.
const DefaultBus = "default"

// maxTargets is AWS's quota of targets per rule.
const maxTargets = 5

// Handler implements eventsv1connect.EventsServiceHandler: EventBridge rules on the
// default event bus with ECS targets, tags, TestEventPattern and PutEvents (docs/events.md).
// The actions it does not serve answer UnsupportedOperationException (the gateway).
type Handler struct {
	eventsv1connect.UnimplementedEventsServiceHandler
	// Logger receives the internal faults of its actions and PutEvents' delivery
	// failures; nil discards them.
	Logger *slog.Logger

	kv  clientv3.KV
	ecs ECS
	now func() time.Time
}

// New returns the handler over kv; ecs checks targets and runs PutEvents' matches (nil
// refuses every ECS target); now is the clock (time.Now when nil).
func New(kv clientv3.KV, ecs ECS, now func() time.Time) *Handler {
	if now == nil {
		now = time.Now
	}
	return &Handler{kv: kv, ecs: ecs, now: now}
}

func (h *Handler) log() *slog.Logger {
	if h.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Logger
}

func newError(typ, format string, args ...any) *awserr.Error { return awserr.New(typ, format, args...) }

func validation(format string, args ...any) *awserr.Error {
	return awserr.New("ValidationException", format, args...)
}

func ruleNotFound(name string) *awserr.Error {
	return awserr.New("ResourceNotFoundException", "Rule %s does not exist on EventBus %s.", name, DefaultBus)
}

var namePattern = regexp.MustCompile(`^[\.\-_A-Za-z0-9]{1,64}$`)

// checkName validates a rule name or target id as AWS's model constrains it (1–64 of
// [.-_A-Za-z0-9]), with AWS's validation message naming the member.
func checkName(member, v string) error {
	if !namePattern.MatchString(v) {
		return validation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_A-Za-z0-9]+ and have length between 1 and 64", v, member)
	}
	return nil
}

// bus resolves EventBusName (name or ARN; empty is the default bus). Berth has only each
// account's default bus; another answers ResourceNotFoundException as AWS does for a bus
// that does not exist.
func bus(s keys.Scope, name *string) (string, error) {
	n := ptr(name)
	if n == "" || n == DefaultBus || n == busARN(s, DefaultBus) {
		return DefaultBus, nil
	}
	if a, ok := strings.CutPrefix(n, "arn:aws:events:"); ok {
		n = a[strings.LastIndex(a, "/")+1:]
	}
	return "", awserr.New("ResourceNotFoundException", "Event bus %s does not exist.", n)
}

func busARN(s keys.Scope, name string) string {
	return fmt.Sprintf("arn:aws:events:%s:%s:event-bus/%s", s.Region, s.Account, name)
}

// RuleARN returns the ARN of a rule of the default bus,
// arn:aws:events:{region}:{account}:rule/{name}.
func RuleARN(s keys.Scope, name string) string {
	return fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", s.Region, s.Account, name)
}

func ptr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (h *Handler) get(ctx context.Context, s keys.Scope, name string) (*storev1.EventRuleRecord, int64, error) {
	rec, rev, err := store.Get[*storev1.EventRuleRecord](ctx, h.kv, keys.EventRule(s, DefaultBus, name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, ruleNotFound(name)
	}
	return rec, rev, err
}

// mutate applies fn to the rule's record in a CAS loop; a missing rule answers
// ResourceNotFoundException.
func (h *Handler) mutate(ctx context.Context, s keys.Scope, name string, fn func(*storev1.EventRuleRecord) error) (*storev1.EventRuleRecord, error) {
	rec, _, err := store.Mutate(ctx, h.kv, keys.EventRule(s, DefaultBus, name), fn)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ruleNotFound(name)
	}
	return rec, err
}

// PutRule creates or replaces a rule (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutRule.html):
// omitted members are cleared on an update, tags apply only when the rule is created,
// targets are kept. A rule needs an EventPattern, a ScheduleExpression or both.
func (h *Handler) PutRule(ctx context.Context, req *connect.Request[eventsv1.PutRuleRequest]) (*connect.Response[eventsv1.PutRuleResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.PutRuleRequest) (*eventsv1.PutRuleResponse, error) {
		name := ptr(m.Name)
		if err := checkName("name", name); err != nil {
			return nil, err
		}
		if _, err := bus(s, m.EventBusName); err != nil {
			return nil, err
		}
		if m.GetEventPattern() == "" && m.GetScheduleExpression() == "" {
			return nil, validation("Parameter(s) EventPattern or ScheduleExpression must be specified.")
		}
		if m.GetScheduleExpression() != "" {
			if _, err := ParseSchedule(m.GetScheduleExpression(), h.now()); err != nil {
				return nil, err
			}
		}
		if m.GetEventPattern() != "" {
			if len(m.GetEventPattern()) > 4096 {
				return nil, validation("1 validation error detected: Value at 'eventPattern' failed to satisfy constraint: Member must have length less than or equal to 4096")
			}
			if _, err := CompilePattern(m.GetEventPattern()); err != nil {
				return nil, err
			}
		}
		state := m.GetState()
		switch state {
		case "":
			state = StateEnabled
		case StateEnabled, StateDisabled, StateEnabledAllCloudTrail:
		default:
			return nil, validation("1 validation error detected: Value '%s' at 'state' failed to satisfy constraint: Member must satisfy enum value set: [ENABLED, DISABLED, ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS]", state)
		}
		if len(m.GetDescription()) > 512 {
			return nil, validation("1 validation error detected: Value at 'description' failed to satisfy constraint: Member must have length less than or equal to 512")
		}
		tags, err := checkTags(m.Tags)
		if err != nil {
			return nil, err
		}
		now := epoch(h.now())
		rule := &eventsv1.Rule{
			Arn: proto.String(RuleARN(s, name)), Name: proto.String(name), EventBusName: proto.String(DefaultBus),
			Description: m.Description, EventPattern: m.EventPattern, ScheduleExpression: m.ScheduleExpression,
			State: proto.String(state), RoleArn: m.RoleArn,
		}
		key := keys.EventRule(s, DefaultBus, name)
		for attempt := 1; ; attempt++ {
			old, rev, err := store.Get[*storev1.EventRuleRecord](ctx, h.kv, key)
			switch {
			case errors.Is(err, store.ErrNotFound):
				rec := &storev1.EventRuleRecord{Rule: rule, Tags: tags, CreatedBy: s.Account, ScheduleBase: now}
				_, err = store.Create(ctx, h.kv, key, rec)
			case err != nil:
				return nil, err
			default:
				rec := proto.Clone(old).(*storev1.EventRuleRecord)
				rec.Rule = rule
				if old.GetRule().GetScheduleExpression() != rule.GetScheduleExpression() ||
					(old.GetRule().GetState() == StateDisabled && state != StateDisabled) {
					rec.ScheduleBase, rec.LastFired = now, 0
				}
				_, err = store.Update(ctx, h.kv, key, rev, rec)
			}
			if err == nil {
				return &eventsv1.PutRuleResponse{RuleArn: rule.Arn}, nil
			}
			if !errors.Is(err, store.ErrExists) && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrPreconditionFailed) || attempt >= 5 {
				return nil, err
			}
		}
	})
}

func epoch(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func checkTags(in []*eventsv1.Tag) ([]*eventsv1.Tag, error) {
	if len(in) > 50 {
		return nil, validation("1 validation error detected: Value at 'tags' failed to satisfy constraint: Member must have length less than or equal to 50")
	}
	seen := map[string]bool{}
	for _, t := range in {
		k := t.GetKey()
		if k == "" || len(k) > 128 || len(t.GetValue()) > 256 {
			return nil, validation("1 validation error detected: Value '%s' at 'tags.member.key' failed to satisfy constraint: Member must have length between 1 and 128 (values at most 256)", k)
		}
		if t.Value == nil {
			return nil, validation("Tag value for key '%s' is required.", k)
		}
		if seen[k] {
			return nil, validation("Tag keys must be unique: %s appears twice.", k)
		}
		seen[k] = true
	}
	return in, nil
}

// DescribeRule answers the rule with CreatedBy (the account that created it).
func (h *Handler) DescribeRule(ctx context.Context, req *connect.Request[eventsv1.DescribeRuleRequest]) (*connect.Response[eventsv1.DescribeRuleResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.DescribeRuleRequest) (*eventsv1.DescribeRuleResponse, error) {
		if _, err := bus(s, m.EventBusName); err != nil {
			return nil, err
		}
		rec, _, err := h.get(ctx, s, ptr(m.Name))
		if err != nil {
			return nil, err
		}
		r := rec.GetRule()
		return &eventsv1.DescribeRuleResponse{
			Arn: r.Arn, Name: r.Name, EventBusName: r.EventBusName, Description: r.Description, EventPattern: r.EventPattern,
			ScheduleExpression: r.ScheduleExpression, State: r.State, RoleArn: r.RoleArn, CreatedBy: proto.String(rec.GetCreatedBy()),
		}, nil
	})
}

// rules returns the bus's rules in name order.
func (h *Handler) rules(ctx context.Context, s keys.Scope) ([]*storev1.EventRuleRecord, error) {
	items, err := store.ListAll[*storev1.EventRuleRecord](ctx, h.kv, keys.EventRules(s, DefaultBus))
	if err != nil {
		return nil, err
	}
	out := make([]*storev1.EventRuleRecord, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetRule().GetName() < out[j].GetRule().GetName() })
	return out, nil
}

// page cuts names (sorted) at the NextToken (the last name of the previous page) and
// Limit (1–100, default 100) and returns the next token.
func page[T any](items []T, name func(T) string, token *string, limit int32) ([]T, *string, error) {
	if limit < 0 || limit > 100 {
		return nil, nil, validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 100", limit)
	}
	if limit == 0 {
		limit = 100
	}
	start := 0
	if token != nil {
		t := *token
		if t == "" {
			return nil, nil, validation("The NextToken is not valid.")
		}
		start = sort.Search(len(items), func(i int) bool { return name(items[i]) > t })
	}
	end := min(start+int(limit), len(items))
	var next *string
	if end < len(items) {
		next = proto.String(name(items[end-1]))
	}
	return items[start:end], next, nil
}

// ListRules lists the bus's rules whose names start with NamePrefix, in name order.
func (h *Handler) ListRules(ctx context.Context, req *connect.Request[eventsv1.ListRulesRequest]) (*connect.Response[eventsv1.ListRulesResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.ListRulesRequest) (*eventsv1.ListRulesResponse, error) {
		if _, err := bus(s, m.EventBusName); err != nil {
			return nil, err
		}
		all, err := h.rules(ctx, s)
		if err != nil {
			return nil, err
		}
		all = slices.DeleteFunc(all, func(r *storev1.EventRuleRecord) bool {
			return !strings.HasPrefix(r.GetRule().GetName(), m.GetNamePrefix())
		})
		got, next, err := page(all, func(r *storev1.EventRuleRecord) string { return r.GetRule().GetName() }, m.NextToken, m.Limit)
		if err != nil {
			return nil, err
		}
		resp := &eventsv1.ListRulesResponse{Rules: make([]*eventsv1.Rule, 0, len(got)), NextToken: next}
		for _, r := range got {
			resp.Rules = append(resp.Rules, r.GetRule())
		}
		return resp, nil
	})
}

// setState is EnableRule and DisableRule. Enabling a scheduled rule restarts its
// schedule from now, so slots missed while it was disabled do not fire.
func (h *Handler) setState(ctx context.Context, s keys.Scope, busName, name *string, state string) error {
	if _, err := bus(s, busName); err != nil {
		return err
	}
	now := epoch(h.now())
	_, err := h.mutate(ctx, s, ptr(name), func(rec *storev1.EventRuleRecord) error {
		if rec.GetRule().GetState() == StateDisabled && state == StateEnabled {
			rec.ScheduleBase, rec.LastFired = now, 0
		}
		if state == StateDisabled || rec.GetRule().GetState() == StateDisabled {
			rec.Rule.State = proto.String(state)
		}
		return nil
	})
	return err
}

// EnableRule enables a rule (ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS stays as is).
func (h *Handler) EnableRule(ctx context.Context, req *connect.Request[eventsv1.EnableRuleRequest]) (*connect.Response[eventsv1.EnableRuleResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.EnableRuleRequest) (*eventsv1.EnableRuleResponse, error) {
		return &eventsv1.EnableRuleResponse{}, h.setState(ctx, s, m.EventBusName, m.Name, StateEnabled)
	})
}

// DisableRule disables a rule: it stops firing and matching.
func (h *Handler) DisableRule(ctx context.Context, req *connect.Request[eventsv1.DisableRuleRequest]) (*connect.Response[eventsv1.DisableRuleResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.DisableRuleRequest) (*eventsv1.DisableRuleResponse, error) {
		return &eventsv1.DisableRuleResponse{}, h.setState(ctx, s, m.EventBusName, m.Name, StateDisabled)
	})
}

// DeleteRule deletes a rule; one that still has targets answers ValidationException
// unless Force. Deleting a rule that does not exist succeeds, as on AWS.
func (h *Handler) DeleteRule(ctx context.Context, req *connect.Request[eventsv1.DeleteRuleRequest]) (*connect.Response[eventsv1.DeleteRuleResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.DeleteRuleRequest) (*eventsv1.DeleteRuleResponse, error) {
		if _, err := bus(s, m.EventBusName); err != nil {
			return nil, err
		}
		if err := checkName("name", ptr(m.Name)); err != nil {
			return nil, err
		}
		for attempt := 1; ; attempt++ {
			rec, rev, err := h.get(ctx, s, ptr(m.Name))
			if errors.Is(err, awserr.ResourceNotFound) {
				return &eventsv1.DeleteRuleResponse{}, nil
			}
			if err != nil {
				return nil, err
			}
			if len(rec.GetTargets()) > 0 && !m.Force {
				return nil, validation("Rule can't be deleted since it has targets.")
			}
			_, err = store.Delete(ctx, h.kv, keys.EventRule(s, DefaultBus, ptr(m.Name)), rev)
			if err == nil || errors.Is(err, store.ErrNotFound) {
				return &eventsv1.DeleteRuleResponse{}, nil
			}
			if !errors.Is(err, store.ErrPreconditionFailed) || attempt >= 5 {
				return nil, err
			}
		}
	})
}

// PutTargets adds or replaces (by Id) a rule's targets, at most 5 a rule
// (LimitExceededException). Every target is checked before any is written (see
// checkTarget): a target Berth cannot deliver to is refused by name.
func (h *Handler) PutTargets(ctx context.Context, req *connect.Request[eventsv1.PutTargetsRequest]) (*connect.Response[eventsv1.PutTargetsResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.PutTargetsRequest) (*eventsv1.PutTargetsResponse, error) {
		if _, err := bus(s, m.EventBusName); err != nil {
			return nil, err
		}
		if err := checkName("rule", ptr(m.Rule)); err != nil {
			return nil, err
		}
		if len(m.Targets) == 0 || len(m.Targets) > 10 {
			return nil, validation("1 validation error detected: Value at 'targets' failed to satisfy constraint: Member must have length between 1 and 10")
		}
		if _, _, err := h.get(ctx, s, ptr(m.Rule)); err != nil {
			return nil, err
		}
		ids := map[string]bool{}
		for i, t := range m.Targets {
			if ids[t.GetId()] {
				return nil, validation("The same target ID %s appears twice in Targets.", t.GetId())
			}
			ids[t.GetId()] = true
			if err := h.checkTarget(ctx, s, i, t); err != nil {
				return nil, err
			}
		}
		_, err := h.mutate(ctx, s, ptr(m.Rule), func(rec *storev1.EventRuleRecord) error {
			for _, t := range m.Targets {
				if i := slices.IndexFunc(rec.Targets, func(o *eventsv1.Target) bool { return o.GetId() == t.GetId() }); i >= 0 {
					rec.Targets[i] = t
				} else {
					rec.Targets = append(rec.Targets, t)
				}
			}
			if len(rec.Targets) > maxTargets {
				return awserr.New("LimitExceededException", "The requested resource exceeds the maximum number allowed: a rule has at most %d targets.", maxTargets)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &eventsv1.PutTargetsResponse{FailedEntries: []*eventsv1.PutTargetsResultEntry{}}, nil
	})
}

// RemoveTargets removes targets from a rule by Id; ids the rule does not have are ignored.
func (h *Handler) RemoveTargets(ctx context.Context, req *connect.Request[eventsv1.RemoveTargetsRequest]) (*connect.Response[eventsv1.RemoveTargetsResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.RemoveTargetsRequest) (*eventsv1.RemoveTargetsResponse, error) {
		if _, err := bus(s, m.EventBusName); err != nil {
			return nil, err
		}
		if len(m.Ids) == 0 || len(m.Ids) > 100 {
			return nil, validation("1 validation error detected: Value at 'ids' failed to satisfy constraint: Member must have length between 1 and 100")
		}
		_, err := h.mutate(ctx, s, ptr(m.Rule), func(rec *storev1.EventRuleRecord) error {
			rec.Targets = slices.DeleteFunc(rec.Targets, func(t *eventsv1.Target) bool { return slices.Contains(m.Ids, t.GetId()) })
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &eventsv1.RemoveTargetsResponse{FailedEntries: []*eventsv1.RemoveTargetsResultEntry{}}, nil
	})
}

// ListTargetsByRule lists a rule's targets as PutTargets stored them.
func (h *Handler) ListTargetsByRule(ctx context.Context, req *connect.Request[eventsv1.ListTargetsByRuleRequest]) (*connect.Response[eventsv1.ListTargetsByRuleResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.ListTargetsByRuleRequest) (*eventsv1.ListTargetsByRuleResponse, error) {
		if _, err := bus(s, m.EventBusName); err != nil {
			return nil, err
		}
		rec, _, err := h.get(ctx, s, ptr(m.Rule))
		if err != nil {
			return nil, err
		}
		// Targets keep their PutTargets order: the token is the last id of the previous page.
		targets := rec.GetTargets()
		if m.NextToken != nil {
			i := slices.IndexFunc(targets, func(t *eventsv1.Target) bool { return t.GetId() == *m.NextToken })
			if i < 0 {
				return nil, validation("The NextToken is not valid.")
			}
			targets = targets[i+1:]
		}
		got, next, err := page(targets, func(t *eventsv1.Target) string { return t.GetId() }, nil, m.Limit)
		if err != nil {
			return nil, err
		}
		return &eventsv1.ListTargetsByRuleResponse{Targets: append([]*eventsv1.Target{}, got...), NextToken: next}, nil
	})
}

// ListRuleNamesByTarget lists the rules of the bus that have a target with TargetArn.
func (h *Handler) ListRuleNamesByTarget(ctx context.Context, req *connect.Request[eventsv1.ListRuleNamesByTargetRequest]) (*connect.Response[eventsv1.ListRuleNamesByTargetResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.ListRuleNamesByTargetRequest) (*eventsv1.ListRuleNamesByTargetResponse, error) {
		if _, err := bus(s, m.EventBusName); err != nil {
			return nil, err
		}
		if m.GetTargetArn() == "" {
			return nil, validation("1 validation error detected: Value null at 'targetArn' failed to satisfy constraint: Member must not be null")
		}
		all, err := h.rules(ctx, s)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, r := range all {
			if slices.ContainsFunc(r.GetTargets(), func(t *eventsv1.Target) bool { return t.GetArn() == m.GetTargetArn() }) {
				names = append(names, r.GetRule().GetName())
			}
		}
		got, next, err := page(names, func(n string) string { return n }, m.NextToken, m.Limit)
		if err != nil {
			return nil, err
		}
		return &eventsv1.ListRuleNamesByTargetResponse{RuleNames: append([]string{}, got...), NextToken: next}, nil
	})
}

// ruleOfARN returns the name of the default bus's rule an ARN of this scope names;
// anything else answers ResourceNotFoundException.
func ruleOfARN(s keys.Scope, arn string) (string, error) {
	name, ok := strings.CutPrefix(arn, fmt.Sprintf("arn:aws:events:%s:%s:rule/", s.Region, s.Account))
	if rest, custom := strings.CutPrefix(name, DefaultBus+"/"); custom {
		name = rest
	}
	if !ok || checkName("name", name) != nil {
		return "", awserr.New("ResourceNotFoundException", "Rule %s does not exist.", arn)
	}
	return name, nil
}

// TagResource adds or overwrites tags of a rule (the only taggable resource Berth's
// EventBridge has).
func (h *Handler) TagResource(ctx context.Context, req *connect.Request[eventsv1.TagResourceRequest]) (*connect.Response[eventsv1.TagResourceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.TagResourceRequest) (*eventsv1.TagResourceResponse, error) {
		name, err := ruleOfARN(s, m.GetResourceArn())
		if err != nil {
			return nil, err
		}
		if _, err := checkTags(m.Tags); err != nil {
			return nil, err
		}
		_, err = h.mutate(ctx, s, name, func(rec *storev1.EventRuleRecord) error {
			for _, t := range m.Tags {
				if i := slices.IndexFunc(rec.Tags, func(o *eventsv1.Tag) bool { return o.GetKey() == t.GetKey() }); i >= 0 {
					rec.Tags[i] = t
				} else {
					rec.Tags = append(rec.Tags, t)
				}
			}
			if len(rec.Tags) > 50 {
				return awserr.New("LimitExceededException", "A rule can have at most 50 tags.")
			}
			return nil
		})
		return &eventsv1.TagResourceResponse{}, err
	})
}

// UntagResource removes tags of a rule by key.
func (h *Handler) UntagResource(ctx context.Context, req *connect.Request[eventsv1.UntagResourceRequest]) (*connect.Response[eventsv1.UntagResourceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.UntagResourceRequest) (*eventsv1.UntagResourceResponse, error) {
		name, err := ruleOfARN(s, m.GetResourceArn())
		if err != nil {
			return nil, err
		}
		_, err = h.mutate(ctx, s, name, func(rec *storev1.EventRuleRecord) error {
			rec.Tags = slices.DeleteFunc(rec.Tags, func(t *eventsv1.Tag) bool { return slices.Contains(m.TagKeys, t.GetKey()) })
			return nil
		})
		return &eventsv1.UntagResourceResponse{}, err
	})
}

// ListTagsForResource lists a rule's tags.
func (h *Handler) ListTagsForResource(ctx context.Context, req *connect.Request[eventsv1.ListTagsForResourceRequest]) (*connect.Response[eventsv1.ListTagsForResourceResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.ListTagsForResourceRequest) (*eventsv1.ListTagsForResourceResponse, error) {
		name, err := ruleOfARN(s, m.GetResourceArn())
		if err != nil {
			return nil, err
		}
		rec, _, err := h.get(ctx, s, name)
		if err != nil {
			return nil, err
		}
		return &eventsv1.ListTagsForResourceResponse{Tags: append([]*eventsv1.Tag{}, rec.GetTags()...)}, nil
	})
}

// TestEventPattern reports whether Event matches EventPattern. The event must carry the
// envelope members AWS requires (id, account, source, time, region, detail-type as
// strings, resources as a list).
func (h *Handler) TestEventPattern(ctx context.Context, req *connect.Request[eventsv1.TestEventPatternRequest]) (*connect.Response[eventsv1.TestEventPatternResponse], error) {
	return awsapi.Handle(ctx, h.Logger, req, func(ctx context.Context, s keys.Scope, m *eventsv1.TestEventPatternRequest) (*eventsv1.TestEventPatternResponse, error) {
		p, err := CompilePattern(m.GetEventPattern())
		if err != nil {
			return nil, err
		}
		ev, err := decodeEvent([]byte(m.GetEvent()))
		obj, ok := ev.(map[string]any)
		if err != nil || !ok {
			return nil, validation("Parameter Event is not valid.")
		}
		for _, k := range []string{"id", "account", "source", "time", "region", "detail-type"} {
			if _, ok := obj[k].(string); !ok {
				return nil, validation("Parameter Event is not valid: it needs the string member %q.", k)
			}
		}
		if r, ok := obj["resources"]; ok {
			if _, ok := r.([]any); !ok {
				return nil, validation("Parameter Event is not valid: resources must be a list.")
			}
		}
		return &eventsv1.TestEventPatternResponse{Result: p.MatchValue(obj)}, nil
	})
}
