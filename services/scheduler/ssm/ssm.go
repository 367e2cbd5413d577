package ssm

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ssmv1 "github.com/berthhq/berth/gen/berth/ssm/v1"
	"github.com/berthhq/berth/gen/berth/ssm/v1/ssmv1connect"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Parameter types.
const (
	String       = "String"
	StringList   = "StringList"
	SecureString = "SecureString"
)

const (
	maxVersions     = 100
	maxStandardSize = 4096
	maxAdvancedSize = 8192
	maxLabels       = 10
)

// Handler implements ssmv1connect.SsmServiceHandler.
type Handler struct {
	ssmv1connect.UnimplementedSsmServiceHandler
	// Logger receives the internal faults of its actions (errors that are not AWS
	// exceptions, which the client sees as ServerException); nil discards them.
	Logger *slog.Logger

	kv   clientv3.KV
	ring *seal.Keyring
	now  func() time.Time
}

// New returns the handler over kv, sealing values with ring; now is the clock (time.Now
// when nil).
func New(kv clientv3.KV, ring *seal.Keyring, now func() time.Time) *Handler {
	if now == nil {
		now = time.Now
	}
	return &Handler{kv: kv, ring: ring, now: now}
}

// ErrNoKeyring answers every action when the scheduler has no secrets key.
var ErrNoKeyring = awserr.New("InternalServerError", "Parameters are disabled on this Berth: the scheduler has no secrets key (--secrets-key-file or BERTH_SECRETS_KEY; see docs/secrets.md).")

func validation(format string, args ...any) *awserr.Error {
	return awserr.New("ValidationException", format, args...)
}

func notFound(name string) *awserr.Error {
	return awserr.New("ParameterNotFound", "Parameter %s not found.", name)
}

// handle runs an SSM action through awsapi.Handle; without the keyring every action
// answers ErrNoKeyring.
func handle[Req, Res any](ctx context.Context, h *Handler, req *connect.Request[Req], fn func(context.Context, keys.Scope, *Req) (*Res, error)) (*connect.Response[Res], error) {
	return awsapi.Handle(ctx, h.Logger, req, awsapi.Requires(h.ring != nil, ErrNoKeyring, fn))
}

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_.\-/]+$`)

// checkName validates a parameter name as AWS does (characters, reserved prefixes,
// hierarchy depth, a leading '/' for hierarchical names).
func checkName(name string) error {
	if !namePattern.MatchString(name) {
		return validation("Parameter name must only contain letters, numbers, and the symbols . - _ /: %q is not valid.", name)
	}
	plain := strings.ToLower(strings.TrimPrefix(name, "/"))
	if strings.HasPrefix(plain, "aws") || strings.HasPrefix(plain, "ssm") {
		return validation("Parameter name: can't be prefixed with \"aws\" or \"ssm\" (case-insensitive).")
	}
	if strings.Contains(name, "/") && !strings.HasPrefix(name, "/") {
		return validation("Parameter name must be a fully qualified name.")
	}
	if strings.Count(name, "/") > 15 {
		return awserr.New("HierarchyLevelLimitExceededException", "Parameter name hierarchy can't have more than 15 levels.")
	}
	if len(name) > 1011 {
		return validation("Parameter name must be at most 1011 characters.")
	}
	return nil
}

// ARN returns a parameter's ARN: arn:aws:ssm:{region}:{account}:parameter/{name without
// its leading '/'}.
func ARN(s keys.Scope, name string) string {
	return fmt.Sprintf("arn:%s:ssm:%s:%s:parameter/%s", keys.Partition, s.Region, s.Account, strings.TrimPrefix(name, "/"))
}

// nameOf accepts a parameter name or ARN, returning the name.
func nameOf(s keys.Scope, id string) (string, error) {
	if !strings.HasPrefix(id, "arn:") {
		return id, nil
	}
	parts := strings.SplitN(id, ":", 6)
	if len(parts) != 6 || parts[2] != "ssm" || !strings.HasPrefix(parts[5], "parameter/") {
		return "", validation("Parameter ARN %s is not valid.", id)
	}
	if !s.Owns(parts[1], parts[4], parts[3]) {
		return "", notFound(id)
	}
	name := strings.TrimPrefix(parts[5], "parameter")
	if strings.Count(name, "/") == 1 {
		// "parameter/name": a name without hierarchy, unless it was stored as "/name".
		return name, nil
	}
	return name, nil
}

func ad(s keys.Scope, name string, version int64) []byte {
	return []byte("ssm/" + s.Account + "/" + s.Region + "/" + name + "/" + strconv.FormatInt(version, 10))
}

// get reads a parameter by name (or ARN, whose name may be with or without its leading
// '/').
func (h *Handler) get(ctx context.Context, s keys.Scope, id string) (*storev1.ParameterRecord, int64, error) {
	name, err := nameOf(s, id)
	if err != nil {
		return nil, 0, err
	}
	names := []string{name}
	if strings.HasPrefix(id, "arn:") && strings.Count(name, "/") == 1 {
		names = []string{strings.TrimPrefix(name, "/"), name}
	}
	for _, n := range names {
		rec, rev, err := store.Get[*storev1.ParameterRecord](ctx, h.kv, keys.Parameter(s, n))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		return rec, rev, err
	}
	return nil, 0, notFound(id)
}

// PutParameter creates a parameter or, with Overwrite, adds a version.
func (h *Handler) PutParameter(ctx context.Context, req *connect.Request[ssmv1.PutParameterRequest]) (*connect.Response[ssmv1.PutParameterResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.PutParameterRequest) (*ssmv1.PutParameterResponse, error) {
		id, _ := caller.From(ctx) // present: Handle refuses a call without one
		user, _ := id.Principal()
		name := in.GetName()
		if err := checkName(name); err != nil {
			return nil, err
		}
		value := in.GetValue()
		if value == "" {
			return nil, validation("1 validation error detected: Value at 'value' failed to satisfy constraint: Member must have length greater than or equal to 1")
		}
		if in.Policies != nil {
			return nil, awserr.New("InvalidPolicyTypeException", "Berth does not support parameter policies.")
		}
		switch in.GetDataType() {
		case "", "text":
		default:
			return nil, validation("The data type %s is not supported by Berth; use text.", in.GetDataType())
		}
		tier := in.GetTier()
		switch tier {
		case "", "Standard", "Advanced", "Intelligent-Tiering":
		default:
			return nil, validation("Tier %s is not valid.", tier)
		}
		if in.GetOverwrite() && len(in.GetTags()) > 0 {
			return nil, validation("Invalid request: tags and overwrite can't be used together. To create a parameter with tags, please remove overwrite flag. To update tags for an existing parameter, please use AddTagsToResource or RemoveTagsFromResource.")
		}
		if p := in.GetAllowedPattern(); p != "" {
			re, err := regexp.Compile(p)
			if err != nil {
				return nil, awserr.New("InvalidAllowedPatternException", "The allowed pattern %s is not a valid regular expression.", p)
			}
			if !re.MatchString(value) {
				return nil, awserr.New("ParameterPatternMismatchException", "Parameter value, cannot be validated against allowedPattern: %s", p)
			}
		}
		tags, err := tagsOf(in.GetTags())
		if err != nil {
			return nil, err
		}
		for attempt := 1; ; attempt++ {
			rec, rev, err := h.get(ctx, s, name)
			exists := err == nil
			if err != nil && !errors.Is(err, &awserr.Error{Type: "ParameterNotFound"}) {
				return nil, err
			}
			if exists && !in.GetOverwrite() {
				return nil, awserr.New("ParameterAlreadyExists", "The parameter already exists. To overwrite this value, set the overwrite option in the request to true.")
			}
			if !exists {
				if in.Type == nil {
					return nil, validation("A parameter type is required when you create a parameter.")
				}
				rec = &storev1.ParameterRecord{Name: name, Tier: "Standard", DataType: "text", Tags: tags}
			}
			if in.Type != nil {
				switch in.GetType() {
				case String, StringList, SecureString:
				default:
					return nil, awserr.New("UnsupportedParameterType", "Parameter type %s is not supported.", in.GetType())
				}
				rec.Type = in.GetType()
			}
			if in.KeyId != nil {
				if rec.GetType() != SecureString {
					return nil, validation("KeyId is only valid for SecureString parameters.")
				}
				rec.KeyId = in.GetKeyId()
			}
			if rec.GetType() == SecureString && rec.GetKeyId() == "" {
				rec.KeyId = "alias/aws/ssm"
			}
			if rec.GetType() != SecureString {
				rec.KeyId = ""
			}
			if in.DataType != nil {
				rec.DataType = in.GetDataType()
			}
			switch {
			case tier == "Advanced":
				rec.Tier = "Advanced"
			case tier == "Intelligent-Tiering" && len(value) > maxStandardSize:
				rec.Tier = "Advanced"
			case tier == "Standard" && rec.GetTier() == "Advanced":
				return nil, validation("This parameter uses the advanced-parameter tier. You can't downgrade a parameter from the advanced-parameter tier to the standard-parameter tier.")
			}
			if len(value) > maxStandardSize && rec.GetTier() != "Advanced" {
				return nil, validation("Standard tier parameters support a maximum parameter value of 4096 characters. To create a larger parameter value, upgrade the parameter to use the advanced-parameter tier. For more information, see https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-advanced-parameters.html")
			}
			if len(value) > maxAdvancedSize {
				return nil, validation("Advanced tier parameters support a maximum parameter value of 8192 characters.")
			}
			var version int64 = 1
			if n := len(rec.GetVersions()); n > 0 {
				version = rec.Versions[n-1].GetVersion() + 1
			}
			if len(rec.GetVersions()) >= maxVersions {
				if len(rec.Versions[0].GetLabels()) > 0 {
					return nil, awserr.New("ParameterMaxVersionLimitExceeded", "You attempted to create a new version of %s by calling the PutParameter API with the overwrite flag. Version %d, the oldest version, can't be deleted because it has a label associated with it. Move the label to another version of the parameter, and try again.", name, rec.Versions[0].GetVersion())
				}
				rec.Versions = rec.Versions[1:]
			}
			v := &storev1.ParameterVersion{
				Version: version, Sealed: h.ring.Seal([]byte(value), ad(s, name, version)),
				Description: in.GetDescription(), AllowedPattern: in.GetAllowedPattern(),
				LastModifiedDate: awsapi.Epoch(h.now()), LastModifiedUser: user,
			}
			if exists && in.Description == nil {
				v.Description = rec.Versions[len(rec.Versions)-1].GetDescription()
			}
			if exists && in.AllowedPattern == nil {
				v.AllowedPattern = rec.Versions[len(rec.Versions)-1].GetAllowedPattern()
			}
			rec.Versions = append(rec.Versions, v)
			t := store.NewTxn(h.kv)
			if exists {
				t.Update(keys.Parameter(s, rec.GetName()), rev, rec)
			} else {
				t.Create(keys.Parameter(s, name), rec)
			}
			_, err = t.Commit(ctx)
			switch {
			case err == nil:
				return &ssmv1.PutParameterResponse{Version: version, Tier: proto.String(rec.GetTier())}, nil
			case !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrExists):
				return nil, err
			case attempt >= 5:
				return nil, awserr.New("TooManyUpdates", "There are concurrent updates for a resource that supports one update at a time.")
			}
		}
	})
}

func tagsOf(in []*ssmv1.Tag) ([]*storev1.SecretTag, error) {
	out := make([]*storev1.SecretTag, 0, len(in))
	for _, t := range in {
		if t.GetKey() == "" {
			return nil, validation("A tag key can't be empty.")
		}
		if strings.HasPrefix(strings.ToLower(t.GetKey()), "aws:") {
			return nil, validation("A tag key can't start with the reserved prefix aws:.")
		}
		out = append(out, &storev1.SecretTag{Key: t.GetKey(), Value: t.GetValue()})
	}
	if len(out) > 50 {
		return nil, awserr.New("TooManyTagsError", "The Targets parameter includes too many tags. Remove one or more tags and try the request again.")
	}
	return out, nil
}

// selector splits "name:selector" (a version number or a label).
func selector(id string) (name, sel string) {
	if strings.HasPrefix(id, "arn:") {
		// arn:aws:ssm:region:account:parameter/name[:selector]
		parts := strings.SplitN(id, ":", 7)
		if len(parts) == 7 {
			return strings.Join(parts[:6], ":"), parts[6]
		}
		return id, ""
	}
	if i := strings.LastIndexByte(id, ':'); i > 0 {
		return id[:i], id[i+1:]
	}
	return id, ""
}

// version finds the version sel names (latest when empty).
func version(rec *storev1.ParameterRecord, sel string) (*storev1.ParameterVersion, error) {
	vs := rec.GetVersions()
	if sel == "" {
		return vs[len(vs)-1], nil
	}
	if n, err := strconv.ParseInt(sel, 10, 64); err == nil {
		for _, v := range vs {
			if v.GetVersion() == n {
				return v, nil
			}
		}
		return nil, awserr.New("ParameterVersionNotFound", "Systems Manager could not find version %d of %s. Verify the version and try again.", n, rec.GetName())
	}
	for _, v := range vs {
		if slices.Contains(v.GetLabels(), sel) {
			return v, nil
		}
	}
	return nil, awserr.New("ParameterVersionNotFound", "Systems Manager could not find label %s of %s. Verify the label and try again.", sel, rec.GetName())
}

// valueOf opens a version's value: plaintext for String and StringList and for a
// SecureString with decrypt, else the opaque base64 ciphertext AWS returns.
func (h *Handler) valueOf(s keys.Scope, rec *storev1.ParameterRecord, v *storev1.ParameterVersion, decrypt bool) (string, error) {
	if rec.GetType() == SecureString && !decrypt {
		return base64.StdEncoding.EncodeToString(v.GetSealed()), nil
	}
	plain, err := h.ring.Open(v.GetSealed(), ad(s, rec.GetName(), v.GetVersion()))
	if err != nil {
		return "", awserr.New("InvalidKeyId", "The parameter's value can't be decrypted with the keyring of this deployment.")
	}
	return string(plain), nil
}

func (h *Handler) parameter(s keys.Scope, rec *storev1.ParameterRecord, v *storev1.ParameterVersion, sel string, decrypt bool) (*ssmv1.Parameter, error) {
	val, err := h.valueOf(s, rec, v, decrypt)
	if err != nil {
		return nil, err
	}
	p := &ssmv1.Parameter{
		Name: proto.String(rec.GetName()), Type: proto.String(rec.GetType()), Value: proto.String(val), Version: v.GetVersion(),
		LastModifiedDate: proto.Float64(v.GetLastModifiedDate()), Arn: proto.String(ARN(s, rec.GetName())), DataType: proto.String(rec.GetDataType()),
	}
	if sel != "" {
		p.Selector = proto.String(":" + sel)
	}
	return p, nil
}

// Resolve returns the plaintext value of parameter id (name or ARN, with an optional
// :version or :label selector), decrypting a SecureString: for ECS secrets at task start.
func (h *Handler) Resolve(ctx context.Context, s keys.Scope, id string) (string, error) {
	if h.ring == nil {
		return "", ErrNoKeyring
	}
	name, sel := selector(id)
	rec, _, err := h.get(ctx, s, name)
	if err != nil {
		return "", err
	}
	v, err := version(rec, sel)
	if err != nil {
		return "", err
	}
	return h.valueOf(s, rec, v, true)
}

// GetParameter returns one parameter (latest version, or the version or label its
// selector names).
func (h *Handler) GetParameter(ctx context.Context, req *connect.Request[ssmv1.GetParameterRequest]) (*connect.Response[ssmv1.GetParameterResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.GetParameterRequest) (*ssmv1.GetParameterResponse, error) {
		name, sel := selector(in.GetName())
		rec, _, err := h.get(ctx, s, name)
		if err != nil {
			return nil, err
		}
		v, err := version(rec, sel)
		if err != nil {
			return nil, err
		}
		p, err := h.parameter(s, rec, v, sel, in.GetWithDecryption())
		if err != nil {
			return nil, err
		}
		return &ssmv1.GetParameterResponse{Parameter: p}, nil
	})
}

// GetParameters returns up to 10 parameters; names not found are listed in
// InvalidParameters.
func (h *Handler) GetParameters(ctx context.Context, req *connect.Request[ssmv1.GetParametersRequest]) (*connect.Response[ssmv1.GetParametersResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.GetParametersRequest) (*ssmv1.GetParametersResponse, error) {
		if n := len(in.GetNames()); n < 1 || n > 10 {
			return nil, validation("1 validation error detected: Value at 'names' failed to satisfy constraint: Member must have length less than or equal to 10")
		}
		out := &ssmv1.GetParametersResponse{Parameters: []*ssmv1.Parameter{}, InvalidParameters: []string{}}
		for _, id := range in.GetNames() {
			name, sel := selector(id)
			rec, _, err := h.get(ctx, s, name)
			if err != nil {
				if errors.Is(err, &awserr.Error{Type: "ParameterNotFound"}) || errors.Is(err, &awserr.Error{Type: "ValidationException"}) {
					out.InvalidParameters = append(out.InvalidParameters, id)
					continue
				}
				return nil, err
			}
			v, err := version(rec, sel)
			if err != nil {
				out.InvalidParameters = append(out.InvalidParameters, id)
				continue
			}
			p, err := h.parameter(s, rec, v, sel, in.GetWithDecryption())
			if err != nil {
				return nil, err
			}
			out.Parameters = append(out.Parameters, p)
		}
		return out, nil
	})
}

// all returns the scope's parameters whose names start with namePrefix, in name order.
// Escape keeps prefixes, so it reads only those: it starts right after the escaped
// prefix's own key and stops at the first name past it.
func (h *Handler) all(ctx context.Context, s keys.Scope, namePrefix string) ([]*storev1.ParameterRecord, error) {
	prefix := keys.Parameters(s)
	var out []*storev1.ParameterRecord
	token := ""
	if namePrefix != "" {
		token = store.TokenAfter(prefix + keys.Escape(namePrefix))
	}
	for {
		items, next, err := store.List[*storev1.ParameterRecord](ctx, h.kv, prefix, 500, token)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if !strings.HasPrefix(it.Value.GetName(), namePrefix) {
				return out, nil
			}
			out = append(out, it.Value)
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
}

// page decodes a NextToken (an offset) and checks MaxResults against [1, max].
func page(token *string, maxResults, def, max int32) (int, int, error) {
	// MaxResults has no presence in the model (unboxed): 0 means absent.
	limit := def
	if maxResults != 0 {
		if maxResults < 1 || maxResults > max {
			return 0, 0, validation("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and %d", maxResults, max)
		}
		limit = maxResults
	}
	if token == nil {
		return 0, int(limit), nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(*token)
	n, cerr := strconv.Atoi(strings.TrimPrefix(string(raw), "o:"))
	if err != nil || cerr != nil || n < 0 || !strings.HasPrefix(string(raw), "o:") {
		return 0, 0, awserr.New("InvalidNextToken", "The specified token isn't valid.")
	}
	return n, int(limit), nil
}

func nextToken(offset, limit, total int) *string {
	if offset+limit >= total {
		return nil
	}
	return proto.String(base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(offset+limit))))
}

// filter is one ParameterStringFilter, checked once.
type filter struct {
	key, option string
	values      []string
}

// filtersOf checks ParameterFilters against AWS's ParameterStringFilter reference:
// DescribeParameters takes every key but Label, with Equals and BeginsWith (Name also
// Contains; Path takes Recursive or OneLevel); GetParametersByPath (byPath) takes only
// Type, KeyId and Label (no tag, DataType, Name, Path or Tier), with Equals and
// BeginsWith (Label only Equals). The first option listed is the default.
func filtersOf(in []*ssmv1.ParameterStringFilter, byPath bool) ([]filter, error) {
	var out []filter
	for _, f := range in {
		key, option := f.GetKey(), f.GetOption()
		var allowed map[string][]string
		keyList := "[Path, Name, Type, KeyId, Tier, DataType, tag:]"
		if byPath {
			allowed = map[string][]string{"Type": {"Equals", "BeginsWith"}, "KeyId": {"Equals", "BeginsWith"}, "Label": {"Equals"}}
			keyList = "[Type, KeyId, Label]"
		} else {
			allowed = map[string][]string{
				"Name": {"Equals", "BeginsWith", "Contains"}, "Path": {"Recursive", "OneLevel"},
				"Type": {"Equals", "BeginsWith"}, "KeyId": {"Equals", "BeginsWith"}, "Tier": {"Equals", "BeginsWith"}, "DataType": {"Equals", "BeginsWith"},
			}
		}
		opts, ok := allowed[key]
		if strings.HasPrefix(key, "tag:") && !byPath {
			opts, ok = []string{"Equals", "BeginsWith"}, true
		}
		if !ok {
			return nil, awserr.New("InvalidFilterKey", "The following filter key is not valid: %s. Valid filter keys include: %s.", key, keyList)
		}
		if option == "" {
			option = opts[0]
		}
		if !slices.Contains(opts, option) {
			return nil, awserr.New("InvalidFilterOption", "The following filter option is not valid: %s. Valid options include: [%s].", option, strings.Join(opts, ", "))
		}
		if len(f.GetValues()) == 0 && !strings.HasPrefix(key, "tag:") {
			return nil, awserr.New("InvalidFilterValue", "The filter %s needs at least one value.", key)
		}
		out = append(out, filter{key: key, option: option, values: f.GetValues()})
	}
	return out, nil
}

func (f filter) match(rec *storev1.ParameterRecord) bool {
	var field []string
	switch {
	case f.key == "Name":
		field = []string{rec.GetName()}
	case f.key == "Type":
		field = []string{rec.GetType()}
	case f.key == "KeyId":
		field = []string{rec.GetKeyId()}
	case f.key == "Tier":
		field = []string{rec.GetTier()}
	case f.key == "DataType":
		field = []string{rec.GetDataType()}
	case f.key == "Label":
		for _, v := range rec.GetVersions() {
			field = append(field, v.GetLabels()...)
		}
	case f.key == "Path":
		for _, p := range f.values {
			if underPath(rec.GetName(), p, f.option == "Recursive") {
				return true
			}
		}
		return false
	case strings.HasPrefix(f.key, "tag:"):
		k := strings.TrimPrefix(f.key, "tag:")
		for _, t := range rec.GetTags() {
			if t.GetKey() != k {
				continue
			}
			if len(f.values) == 0 || slices.ContainsFunc(f.values, func(v string) bool {
				return t.GetValue() == v || f.option == "BeginsWith" && strings.HasPrefix(t.GetValue(), v)
			}) {
				return true
			}
		}
		return false
	}
	for _, v := range f.values {
		for _, have := range field {
			switch f.option {
			case "BeginsWith":
				if strings.HasPrefix(have, v) {
					return true
				}
			case "Contains":
				if strings.Contains(have, v) {
					return true
				}
			default:
				if have == v {
					return true
				}
			}
		}
	}
	return false
}

// underPath reports whether name is directly under path (or anywhere beneath, recursive).
func underPath(name, path string, recursive bool) bool {
	if !strings.HasSuffix(path, "/") {
		path += "/"
	}
	if !strings.HasPrefix(name, path) {
		return false
	}
	return recursive || !strings.Contains(name[len(path):], "/")
}

// GetParametersByPath returns the parameters under Path (one level, or all with
// Recursive), filtered and paged (MaxResults up to 10).
func (h *Handler) GetParametersByPath(ctx context.Context, req *connect.Request[ssmv1.GetParametersByPathRequest]) (*connect.Response[ssmv1.GetParametersByPathResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.GetParametersByPathRequest) (*ssmv1.GetParametersByPathResponse, error) {
		path := in.GetPath()
		if !strings.HasPrefix(path, "/") {
			return nil, validation("The parameter doesn't meet the parameter name requirements. The parameter name must begin with a forward slash \"/\".")
		}
		filters, err := filtersOf(in.GetParameterFilters(), true)
		if err != nil {
			return nil, err
		}
		offset, limit, err := page(in.NextToken, in.GetMaxResults(), 10, 10)
		if err != nil {
			return nil, err
		}
		prefix := path
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		recs, err := h.all(ctx, s, prefix)
		if err != nil {
			return nil, err
		}
		var match []*storev1.ParameterRecord
	next:
		for _, r := range recs {
			if !underPath(r.GetName(), path, in.GetRecursive()) {
				continue
			}
			for _, f := range filters {
				if !f.match(r) {
					continue next
				}
			}
			match = append(match, r)
		}
		out := &ssmv1.GetParametersByPathResponse{Parameters: []*ssmv1.Parameter{}, NextToken: nextToken(offset, limit, len(match))}
		for i := offset; i < len(match) && i < offset+limit; i++ {
			r := match[i]
			p, err := h.parameter(s, r, r.Versions[len(r.Versions)-1], "", in.GetWithDecryption())
			if err != nil {
				return nil, err
			}
			out.Parameters = append(out.Parameters, p)
		}
		return out, nil
	})
}

// DeleteParameter deletes a parameter and all its versions.
func (h *Handler) DeleteParameter(ctx context.Context, req *connect.Request[ssmv1.DeleteParameterRequest]) (*connect.Response[ssmv1.DeleteParameterResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.DeleteParameterRequest) (*ssmv1.DeleteParameterResponse, error) {
		return &ssmv1.DeleteParameterResponse{}, h.delete(ctx, s, in.GetName())
	})
}

func (h *Handler) delete(ctx context.Context, s keys.Scope, id string) error {
	rec, rev, err := h.get(ctx, s, id)
	if err != nil {
		return err
	}
	if _, err := store.Delete(ctx, h.kv, keys.Parameter(s, rec.GetName()), rev); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return notFound(id)
		}
		if errors.Is(err, store.ErrConflict) {
			return awserr.New("TooManyUpdates", "There are concurrent updates for a resource that supports one update at a time.")
		}
		return err
	}
	return nil
}

// DeleteParameters deletes up to 10 parameters; names not found are InvalidParameters.
func (h *Handler) DeleteParameters(ctx context.Context, req *connect.Request[ssmv1.DeleteParametersRequest]) (*connect.Response[ssmv1.DeleteParametersResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.DeleteParametersRequest) (*ssmv1.DeleteParametersResponse, error) {
		if n := len(in.GetNames()); n < 1 || n > 10 {
			return nil, validation("1 validation error detected: Value at 'names' failed to satisfy constraint: Member must have length less than or equal to 10")
		}
		out := &ssmv1.DeleteParametersResponse{DeletedParameters: []string{}, InvalidParameters: []string{}}
		for _, name := range in.GetNames() {
			err := h.delete(ctx, s, name)
			switch {
			case err == nil:
				out.DeletedParameters = append(out.DeletedParameters, name)
			case errors.Is(err, &awserr.Error{Type: "ParameterNotFound"}), errors.Is(err, &awserr.Error{Type: "ValidationException"}):
				out.InvalidParameters = append(out.InvalidParameters, name)
			default:
				return nil, err
			}
		}
		return out, nil
	})
}

// DescribeParameters lists parameter metadata (no values), filtered and paged (MaxResults
// up to 50).
func (h *Handler) DescribeParameters(ctx context.Context, req *connect.Request[ssmv1.DescribeParametersRequest]) (*connect.Response[ssmv1.DescribeParametersResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.DescribeParametersRequest) (*ssmv1.DescribeParametersResponse, error) {
		if in.GetShared() {
			return nil, validation("Berth does not share parameters across accounts: Shared is not supported.")
		}
		pf := in.GetParameterFilters()
		for _, f := range in.GetFilters() {
			// The older Filters (Name, Type, KeyId): Name matches by prefix as AWS does.
			option := "Equals"
			if f.GetKey() == "Name" {
				option = "BeginsWith"
			}
			pf = append(pf, &ssmv1.ParameterStringFilter{Key: f.Key, Option: &option, Values: f.GetValues()})
		}
		if len(in.GetFilters()) > 0 && len(in.GetParameterFilters()) > 0 {
			return nil, validation("You can use either Filters or ParameterFilters in a single request, but not both.")
		}
		filters, err := filtersOf(pf, false)
		if err != nil {
			return nil, err
		}
		offset, limit, err := page(in.NextToken, in.GetMaxResults(), 50, 50)
		if err != nil {
			return nil, err
		}
		recs, err := h.all(ctx, s, "")
		if err != nil {
			return nil, err
		}
		var match []*storev1.ParameterRecord
	next:
		for _, r := range recs {
			for _, f := range filters {
				if !f.match(r) {
					continue next
				}
			}
			match = append(match, r)
		}
		out := &ssmv1.DescribeParametersResponse{Parameters: []*ssmv1.ParameterMetadata{}, NextToken: nextToken(offset, limit, len(match))}
		for i := offset; i < len(match) && i < offset+limit; i++ {
			r := match[i]
			v := r.Versions[len(r.Versions)-1]
			m := &ssmv1.ParameterMetadata{
				Name: proto.String(r.GetName()), Arn: proto.String(ARN(s, r.GetName())), Type: proto.String(r.GetType()), Version: v.GetVersion(),
				LastModifiedDate: proto.Float64(v.GetLastModifiedDate()), LastModifiedUser: proto.String(v.GetLastModifiedUser()),
				Tier: proto.String(r.GetTier()), DataType: proto.String(r.GetDataType()), Policies: []*ssmv1.ParameterInlinePolicy{},
			}
			if r.GetKeyId() != "" {
				m.KeyId = proto.String(r.GetKeyId())
			}
			if v.GetDescription() != "" {
				m.Description = proto.String(v.GetDescription())
			}
			if v.GetAllowedPattern() != "" {
				m.AllowedPattern = proto.String(v.GetAllowedPattern())
			}
			out.Parameters = append(out.Parameters, m)
		}
		return out, nil
	})
}

// GetParameterHistory lists every version of a parameter, oldest first (MaxResults up to
// 50).
func (h *Handler) GetParameterHistory(ctx context.Context, req *connect.Request[ssmv1.GetParameterHistoryRequest]) (*connect.Response[ssmv1.GetParameterHistoryResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.GetParameterHistoryRequest) (*ssmv1.GetParameterHistoryResponse, error) {
		rec, _, err := h.get(ctx, s, in.GetName())
		if err != nil {
			return nil, err
		}
		offset, limit, err := page(in.NextToken, in.GetMaxResults(), 50, 50)
		if err != nil {
			return nil, err
		}
		vs := rec.GetVersions()
		out := &ssmv1.GetParameterHistoryResponse{Parameters: []*ssmv1.ParameterHistory{}, NextToken: nextToken(offset, limit, len(vs))}
		for i := offset; i < len(vs) && i < offset+limit; i++ {
			v := vs[i]
			val, err := h.valueOf(s, rec, v, in.GetWithDecryption())
			if err != nil {
				return nil, err
			}
			p := &ssmv1.ParameterHistory{
				Name: proto.String(rec.GetName()), Type: proto.String(rec.GetType()), Value: proto.String(val), Version: v.GetVersion(),
				LastModifiedDate: proto.Float64(v.GetLastModifiedDate()), LastModifiedUser: proto.String(v.GetLastModifiedUser()),
				Labels: slices.Clone(v.GetLabels()), Tier: proto.String(rec.GetTier()), DataType: proto.String(rec.GetDataType()),
				Policies: []*ssmv1.ParameterInlinePolicy{},
			}
			if p.Labels == nil {
				p.Labels = []string{}
			}
			if rec.GetKeyId() != "" {
				p.KeyId = proto.String(rec.GetKeyId())
			}
			if v.GetDescription() != "" {
				p.Description = proto.String(v.GetDescription())
			}
			if v.GetAllowedPattern() != "" {
				p.AllowedPattern = proto.String(v.GetAllowedPattern())
			}
			out.Parameters = append(out.Parameters, p)
		}
		return out, nil
	})
}

var labelDigits = regexp.MustCompile(`^[0-9]`)
var labelPattern = regexp.MustCompile(`^[a-zA-Z0-9_.\-]{1,100}$`)

// validLabel reports whether a label is one AWS accepts: letters, digits, '.', '-', '_',
// not starting with a digit or "aws"/"ssm".
func validLabel(l string) bool {
	low := strings.ToLower(l)
	return labelPattern.MatchString(l) && !labelDigits.MatchString(l) && !strings.HasPrefix(low, "aws") && !strings.HasPrefix(low, "ssm")
}

// LabelParameterVersion attaches labels to a version (the latest when ParameterVersion is
// absent), moving each from the version that had it; invalid labels are returned.
func (h *Handler) LabelParameterVersion(ctx context.Context, req *connect.Request[ssmv1.LabelParameterVersionRequest]) (*connect.Response[ssmv1.LabelParameterVersionResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.LabelParameterVersionRequest) (*ssmv1.LabelParameterVersionResponse, error) {
		if n := len(in.GetLabels()); n < 1 || n > maxLabels {
			return nil, validation("1 validation error detected: Value at 'labels' failed to satisfy constraint: Member must have length between 1 and 10")
		}
		rec, _, err := h.get(ctx, s, in.GetName())
		if err != nil {
			return nil, err
		}
		out := &ssmv1.LabelParameterVersionResponse{InvalidLabels: []string{}}
		_, _, err = store.Mutate(ctx, h.kv, keys.Parameter(s, rec.GetName()), func(r *storev1.ParameterRecord) error {
			out.InvalidLabels = []string{}
			sel := ""
			if in.GetParameterVersion() != 0 {
				sel = strconv.FormatInt(in.GetParameterVersion(), 10)
			}
			v, err := version(r, sel)
			if err != nil {
				return err
			}
			out.ParameterVersion = v.GetVersion()
			for _, l := range in.GetLabels() {
				if !validLabel(l) {
					out.InvalidLabels = append(out.InvalidLabels, l)
					continue
				}
				for _, o := range r.GetVersions() {
					o.Labels = slices.DeleteFunc(o.Labels, func(x string) bool { return x == l })
				}
				v.Labels = append(v.Labels, l)
			}
			if len(v.GetLabels()) > maxLabels {
				return awserr.New("ParameterVersionLabelLimitExceeded", "A parameter version can have a maximum of 10 labels. Move one or more labels to another version and try again.")
			}
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil, notFound(in.GetName())
		}
		return out, err
	})
}

// UnlabelParameterVersion removes labels from a version.
func (h *Handler) UnlabelParameterVersion(ctx context.Context, req *connect.Request[ssmv1.UnlabelParameterVersionRequest]) (*connect.Response[ssmv1.UnlabelParameterVersionResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.UnlabelParameterVersionRequest) (*ssmv1.UnlabelParameterVersionResponse, error) {
		rec, _, err := h.get(ctx, s, in.GetName())
		if err != nil {
			return nil, err
		}
		out := &ssmv1.UnlabelParameterVersionResponse{}
		_, _, err = store.Mutate(ctx, h.kv, keys.Parameter(s, rec.GetName()), func(r *storev1.ParameterRecord) error {
			out.RemovedLabels, out.InvalidLabels = []string{}, []string{}
			v, err := version(r, strconv.FormatInt(in.GetParameterVersion(), 10))
			if err != nil {
				return err
			}
			for _, l := range in.GetLabels() {
				if i := slices.Index(v.Labels, l); i >= 0 {
					v.Labels = slices.Delete(v.Labels, i, i+1)
					out.RemovedLabels = append(out.RemovedLabels, l)
				} else {
					out.InvalidLabels = append(out.InvalidLabels, l)
				}
			}
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil, notFound(in.GetName())
		}
		return out, err
	})
}

func (h *Handler) tagged(ctx context.Context, s keys.Scope, typ, id string, fn func(*storev1.ParameterRecord) error) error {
	if typ != "Parameter" {
		return awserr.New("InvalidResourceType", "Berth supports tags on resource type Parameter only, not %s.", typ)
	}
	rec, _, err := h.get(ctx, s, id)
	if err != nil {
		if errors.Is(err, &awserr.Error{Type: "ParameterNotFound"}) {
			return awserr.New("InvalidResourceId", "The resource ID \"%s\" is not valid. Verify the ID and try again.", id)
		}
		return err
	}
	_, _, err = store.Mutate(ctx, h.kv, keys.Parameter(s, rec.GetName()), fn)
	return err
}

// AddTagsToResource adds or overwrites tags of a parameter.
func (h *Handler) AddTagsToResource(ctx context.Context, req *connect.Request[ssmv1.AddTagsToResourceRequest]) (*connect.Response[ssmv1.AddTagsToResourceResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.AddTagsToResourceRequest) (*ssmv1.AddTagsToResourceResponse, error) {
		tags, err := tagsOf(in.GetTags())
		if err != nil {
			return nil, err
		}
		err = h.tagged(ctx, s, in.GetResourceType(), in.GetResourceId(), func(r *storev1.ParameterRecord) error {
			for _, t := range tags {
				if i := slices.IndexFunc(r.Tags, func(x *storev1.SecretTag) bool { return x.GetKey() == t.GetKey() }); i >= 0 {
					r.Tags[i].Value = t.GetValue()
				} else {
					r.Tags = append(r.Tags, t)
				}
			}
			if len(r.Tags) > 50 {
				return awserr.New("TooManyTagsError", "A parameter can have at most 50 tags.")
			}
			return nil
		})
		return &ssmv1.AddTagsToResourceResponse{}, err
	})
}

// RemoveTagsFromResource removes tags of a parameter by key.
func (h *Handler) RemoveTagsFromResource(ctx context.Context, req *connect.Request[ssmv1.RemoveTagsFromResourceRequest]) (*connect.Response[ssmv1.RemoveTagsFromResourceResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.RemoveTagsFromResourceRequest) (*ssmv1.RemoveTagsFromResourceResponse, error) {
		err := h.tagged(ctx, s, in.GetResourceType(), in.GetResourceId(), func(r *storev1.ParameterRecord) error {
			r.Tags = slices.DeleteFunc(r.Tags, func(t *storev1.SecretTag) bool { return slices.Contains(in.GetTagKeys(), t.GetKey()) })
			return nil
		})
		return &ssmv1.RemoveTagsFromResourceResponse{}, err
	})
}

// ListTagsForResource lists a parameter's tags.
func (h *Handler) ListTagsForResource(ctx context.Context, req *connect.Request[ssmv1.ListTagsForResourceRequest]) (*connect.Response[ssmv1.ListTagsForResourceResponse], error) {
	return handle(ctx, h, req, func(ctx context.Context, s keys.Scope, in *ssmv1.ListTagsForResourceRequest) (*ssmv1.ListTagsForResourceResponse, error) {
		out := &ssmv1.ListTagsForResourceResponse{TagList: []*ssmv1.Tag{}}
		err := h.tagged(ctx, s, in.GetResourceType(), in.GetResourceId(), func(r *storev1.ParameterRecord) error {
			out.TagList = out.TagList[:0]
			for _, t := range r.GetTags() {
				out.TagList = append(out.TagList, &ssmv1.Tag{Key: proto.String(t.GetKey()), Value: proto.String(t.GetValue())})
			}
			return store.ErrNoChange
		})
		return out, err
	})
}
