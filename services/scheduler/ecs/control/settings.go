package control

import (
	"context"
	"encoding/base64"
	"slices"
	"strconv"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Account setting names Berth knows, with AWS's defaults
// (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/ecs-account-settings.html).
const (
	SettingServiceLongARN           = "serviceLongArnFormat"
	SettingTaskLongARN              = "taskLongArnFormat"
	SettingContainerInstanceLongARN = "containerInstanceLongArnFormat"
	SettingContainerInsights        = "containerInsights"
)

var settingDefaults = map[string]string{
	SettingServiceLongARN:             "enabled",
	SettingTaskLongARN:                "enabled",
	SettingContainerInstanceLongARN:   "enabled",
	"awsvpcTrunking":                  "disabled",
	SettingContainerInsights:          "disabled",
	"dualStackIPv6":                   "disabled",
	"fargateFIPSMode":                 "disabled",
	"tagResourceAuthorization":        "on",
	"fargateTaskRetirementWaitPeriod": "7",
	"guardDutyActivate":               "off",
	"defaultLogDriverMode":            "non-blocking",
}

func settingNames() []string {
	names := make([]string, 0, len(settingDefaults))
	for n := range settingDefaults {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func validSettingValue(name, value string) bool {
	switch name {
	case SettingContainerInsights:
		return oneOf(value, "enabled", "disabled", "enhanced")
	case "tagResourceAuthorization", "guardDutyActivate":
		return oneOf(value, "on", "off")
	case "fargateTaskRetirementWaitPeriod":
		return oneOf(value, "0", "7", "14")
	case "defaultLogDriverMode":
		return oneOf(value, "blocking", "non-blocking")
	}
	return oneOf(value, "enabled", "disabled")
}

// rootARN is the account's root principal, the only principal Berth knows.
func rootARN(account keys.Scope) string { return "arn:aws:iam::" + account.Account + ":root" }

// settings reads the account's stored settings: principal settings carry the principal
// ARN, account defaults (PutAccountSettingDefault) none.
func (s *Server) settings(ctx context.Context, account keys.Scope) ([]*ecsv1.Setting, error) {
	rec, _, err := get[*ecsv1.ListAccountSettingsResponse](ctx, s.kv, keys.Settings(account))
	if err != nil || rec == nil {
		return nil, err
	}
	return rec.GetSettings(), nil
}

// effective returns the value of setting name for the account's root principal: its own
// setting, else the account default, else AWS's default. A value Berth refuses
// (settingRefusals; stored before Berth refused it) is not in force: AWS's default is.
func effective(stored []*ecsv1.Setting, name string) string {
	v, def := "", settingDefaults[name]
	for _, st := range stored {
		if st.GetName() != name {
			continue
		}
		if _, refused := settingRefusals[name][st.GetValue()]; refused {
			continue
		}
		if st.PrincipalArn == nil {
			def = st.GetValue()
		} else {
			v = st.GetValue()
		}
	}
	if v != "" {
		return v
	}
	return def
}

// longARN reports whether new ARNs of the setting's resource type use the long format.
func (s *Server) longARN(ctx context.Context, account keys.Scope, setting string) (bool, error) {
	return LongARNFormat(ctx, s.kv, account, setting)
}

// LongARNFormat reports whether the account's new ARNs of the kind the setting governs
// (SettingTaskLongARN, SettingContainerInstanceLongARN, SettingServiceLongARN) use the
// long format, the one with the cluster name: true unless the account's effective
// setting is "disabled". For the service scheduler's service ARNs. AWS reference:
// https://docs.aws.amazon.com/AmazonECS/latest/developerguide/ecs-account-settings.html
func LongARNFormat(ctx context.Context, kv clientv3.KV, account keys.Scope, setting string) (bool, error) {
	rec, _, err := get[*ecsv1.ListAccountSettingsResponse](ctx, kv, keys.Settings(account))
	if err != nil {
		return false, err
	}
	return longARNIn(rec, setting), nil
}

// longARNIn is LongARNFormat's rule on the account's settings record rec (nil: none).
func longARNIn(rec *ecsv1.ListAccountSettingsResponse, setting string) bool {
	return effective(rec.GetSettings(), setting) != "disabled"
}

// putSetting stores a setting; principal "" stores the account default.
func (s *Server) putSetting(ctx context.Context, account keys.Scope, name, value, principal string) error {
	key := keys.Settings(account)
	return awsapi.Retry(ctx, func() error {
		rec, rev, err := get[*ecsv1.ListAccountSettingsResponse](ctx, s.kv, key)
		if err != nil {
			return err
		}
		if rec == nil {
			rec = &ecsv1.ListAccountSettingsResponse{}
		}
		rec.Settings = slices.DeleteFunc(rec.Settings, func(st *ecsv1.Setting) bool {
			return st.GetName() == name && st.GetPrincipalArn() == principal
		})
		ns := &ecsv1.Setting{Name: proto.String(name), Value: proto.String(value), Type: proto.String("user")}
		if principal != "" {
			ns.PrincipalArn = proto.String(principal)
		}
		rec.Settings = append(rec.Settings, ns)
		txn := store.NewTxn(s.kv)
		if rev == 0 {
			txn.Create(key, rec)
		} else {
			txn.Update(key, rev, rec)
		}
		_, err = txn.Commit(ctx)
		return err
	})
}

// settingRefusals are the values of account settings Berth cannot honour, by setting
// name and value, each with the reason the InvalidParameterException gives. A value not
// listed is honoured: the long-ARN formats change the ARNs Berth issues, and the others
// accepted describe what Berth does — containerInsights disabled (Berth publishes no
// Container Insights metrics), awsvpcTrunking enabled (Berth limits no awsvpc tasks by
// network interfaces, which is what trunking lifts), dualStackIPv6 and fargateFIPSMode
// disabled, defaultLogDriverMode non-blocking (the awslogs mode Berth's agent uses when a
// container sets none), tagResourceAuthorization on or off (Berth has no IAM policies,
// so tagging on create needs no further permission either way) and every
// fargateTaskRetirementWaitPeriod (Berth never retires tasks for patching).
var settingRefusals = map[string]map[string]string{
	SettingContainerInsights: {
		"enabled":  "Berth has no Container Insights metrics yet; use disabled.",
		"enhanced": "Berth has no Container Insights metrics yet; use disabled.",
	},
	"awsvpcTrunking": {
		"disabled": "Berth limits no awsvpc tasks by network interfaces: every instance places awsvpc tasks as with trunking enabled, which is the only value Berth honours.",
	},
	"dualStackIPv6": {
		"enabled": "Berth gives tasks IPv4 addresses only; use disabled.",
	},
	"fargateFIPSMode": {
		"enabled": "Berth runs no FIPS 140 validated cryptography for Fargate tasks; use disabled.",
	},
	"defaultLogDriverMode": {
		"blocking": "Berth's awslogs driver defaults to non-blocking; set mode blocking in a container's logConfiguration.options instead.",
	},
}

func checkSetting(name, value string) error {
	if _, ok := settingDefaults[name]; !ok {
		return awserr.InvalidParameterf("Invalid setting name %q.", name)
	}
	if name == "guardDutyActivate" {
		return awserr.InvalidParameterf("The guardDutyActivate setting cannot be changed through ECS.")
	}
	if !validSettingValue(name, value) {
		return awserr.InvalidParameterf("Invalid value %q for setting %s.", value, name)
	}
	if why, ok := settingRefusals[name][value]; ok {
		return awserr.InvalidParameterf("The value %q of setting %s is not supported by Berth: %s", value, name, why)
	}
	return nil
}

// settingPrincipal returns the principal an account setting call acts for: principalArn,
// or the account's root when it is empty. Berth knows no principal but the root; any
// other is InvalidParameterException.
func settingPrincipal(account keys.Scope, principalArn string) (string, error) {
	root := rootARN(account)
	if principalArn != "" && principalArn != root {
		return "", awserr.InvalidParameterf("Berth only knows the account's root principal %s.", root)
	}
	return root, nil
}

// PutAccountSetting sets an account setting for a principal (the caller's root when
// principalArn is omitted; Berth knows no other principal). The ARN-format settings
// switch the format of ARNs issued afterwards; a value Berth cannot honour
// (settingRefusals) is refused rather than stored. Errors: InvalidParameterException for
// an unknown name, a bad or unsupported value or another principal. AWS reference: PutAccountSetting.
func (s *Server) PutAccountSetting(ctx context.Context, req *connect.Request[ecsv1.PutAccountSettingRequest]) (*connect.Response[ecsv1.PutAccountSettingResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.PutAccountSettingRequest) (*ecsv1.PutAccountSettingResponse, error) {
		if err := checkSetting(m.GetName(), m.GetValue()); err != nil {
			return nil, err
		}
		principal, err := settingPrincipal(account, m.GetPrincipalArn())
		if err != nil {
			return nil, err
		}
		if err := s.putSetting(ctx, account, m.GetName(), m.GetValue(), principal); err != nil {
			return nil, err
		}
		return &ecsv1.PutAccountSettingResponse{Setting: &ecsv1.Setting{
			Name: proto.String(m.GetName()), Value: proto.String(m.GetValue()),
			PrincipalArn: proto.String(principal), Type: proto.String("user"),
		}}, nil
	})
}

// PutAccountSettingDefault sets an account setting's default for every principal of the
// account. Errors as PutAccountSetting. AWS reference: PutAccountSettingDefault.
func (s *Server) PutAccountSettingDefault(ctx context.Context, req *connect.Request[ecsv1.PutAccountSettingDefaultRequest]) (*connect.Response[ecsv1.PutAccountSettingDefaultResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.PutAccountSettingDefaultRequest) (*ecsv1.PutAccountSettingDefaultResponse, error) {
		if err := checkSetting(m.GetName(), m.GetValue()); err != nil {
			return nil, err
		}
		if err := s.putSetting(ctx, account, m.GetName(), m.GetValue(), ""); err != nil {
			return nil, err
		}
		return &ecsv1.PutAccountSettingDefaultResponse{Setting: &ecsv1.Setting{
			Name: proto.String(m.GetName()), Value: proto.String(m.GetValue()),
			PrincipalArn: proto.String(rootARN(account)), Type: proto.String("user"),
		}}, nil
	})
}

// DeleteAccountSetting removes a principal's setting, so the account default (or AWS's)
// applies again, and returns the setting removed. AWS reference: DeleteAccountSetting.
func (s *Server) DeleteAccountSetting(ctx context.Context, req *connect.Request[ecsv1.DeleteAccountSettingRequest]) (*connect.Response[ecsv1.DeleteAccountSettingResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DeleteAccountSettingRequest) (*ecsv1.DeleteAccountSettingResponse, error) {
		name := m.GetName()
		if _, ok := settingDefaults[name]; !ok {
			return nil, awserr.InvalidParameterf("Invalid setting name %q.", name)
		}
		principal, err := settingPrincipal(account, m.GetPrincipalArn())
		if err != nil {
			return nil, err
		}
		var removed *ecsv1.Setting
		key := keys.Settings(account)
		err = awsapi.Retry(ctx, func() error {
			removed = nil
			rec, rev, err := get[*ecsv1.ListAccountSettingsResponse](ctx, s.kv, key)
			if err != nil || rec == nil {
				return err
			}
			rec.Settings = slices.DeleteFunc(rec.Settings, func(st *ecsv1.Setting) bool {
				if st.GetName() == name && st.GetPrincipalArn() == principal {
					removed = st
					return true
				}
				return false
			})
			if removed == nil {
				return nil
			}
			_, err = store.NewTxn(s.kv).Update(key, rev, rec).Commit(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
		if removed == nil {
			removed = &ecsv1.Setting{Name: proto.String(name), Value: proto.String(settingDefaults[name]), PrincipalArn: proto.String(principal), Type: proto.String("user")}
		}
		return &ecsv1.DeleteAccountSettingResponse{Setting: removed}, nil
	})
}

// ListAccountSettings lists the account's settings: with effectiveSettings, the value in
// force for every setting; otherwise those explicitly set. name, value and principalArn
// filter; maxResults is 1–10 (0, the unset value, means 10) and nextToken pages. AWS reference: ListAccountSettings.
func (s *Server) ListAccountSettings(ctx context.Context, req *connect.Request[ecsv1.ListAccountSettingsRequest]) (*connect.Response[ecsv1.ListAccountSettingsResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListAccountSettingsRequest) (*ecsv1.ListAccountSettingsResponse, error) {
		limit := 10
		if m.GetMaxResults() != 0 {
			if m.GetMaxResults() < 1 || m.GetMaxResults() > 10 {
				return nil, awserr.InvalidParameterf("maxResults must be between 1 and 10.")
			}
			limit = int(m.GetMaxResults())
		}
		if m.Name != nil {
			if _, ok := settingDefaults[m.GetName()]; !ok {
				return nil, awserr.InvalidParameterf("Invalid setting name %q.", m.GetName())
			}
		}
		if p := m.GetPrincipalArn(); p != "" && p != rootARN(account) {
			return &ecsv1.ListAccountSettingsResponse{}, nil
		}
		stored, err := s.settings(ctx, account)
		if err != nil {
			return nil, err
		}
		var all []*ecsv1.Setting
		for _, name := range settingNames() {
			if m.Name != nil && name != m.GetName() {
				continue
			}
			explicit := false
			for _, st := range stored {
				explicit = explicit || st.GetName() == name
			}
			if !explicit && !m.GetEffectiveSettings() {
				continue
			}
			typ := "user"
			if !explicit {
				typ = "aws_managed"
			}
			v := effective(stored, name)
			if m.Value != nil && v != m.GetValue() {
				continue
			}
			all = append(all, &ecsv1.Setting{Name: proto.String(name), Value: proto.String(v), PrincipalArn: proto.String(rootARN(account)), Type: proto.String(typ)})
		}
		start := 0
		if tok := m.GetNextToken(); tok != "" {
			b, err := base64.RawURLEncoding.DecodeString(tok)
			n, aerr := strconv.Atoi(string(b))
			if err != nil || aerr != nil || n < 0 || n > len(all) {
				return nil, awserr.InvalidParameterf("Invalid nextToken.")
			}
			start = n
		}
		end := min(start+limit, len(all))
		resp := &ecsv1.ListAccountSettingsResponse{Settings: all[start:end]}
		if end < len(all) {
			resp.NextToken = proto.String(base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end))))
		}
		return resp, nil
	})
}
