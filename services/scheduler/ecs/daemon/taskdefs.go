package daemon

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/control"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// familyPattern is AWS's rule for a daemon task definition family (and a daemon's name):
// up to 255 letters, numbers, underscores and hyphens.
var familyPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,255}$`)

// NetworkMode is the network mode of every daemon task: the host's.
const NetworkMode = "host"

// BuildTaskDefinition validates a RegisterDaemonTaskDefinition request and returns the
// task definition Berth's agents run for it (network mode host, EC2 compatibility) and
// the DaemonTaskDefinition it describes, both without family revision or ARN. It holds
// the request to RegisterTaskDefinition's rules (control.BuildTaskDefinition): a member
// Berth cannot honour is refused by name. Errors are ClientException, as AWS answers a
// bad RegisterDaemonTaskDefinition.
func BuildTaskDefinition(m *ecsv1.RegisterDaemonTaskDefinitionRequest) (*ecsv1.TaskDefinition, *ecsv1.DaemonTaskDefinition, error) {
	if err := control.CheckFields(control.ClientErr, m); err != nil {
		return nil, nil, err
	}
	switch f := m.GetFamily(); {
	case f == "":
		return nil, nil, awserr.Clientf("Family should not be null or empty.")
	case !familyPattern.MatchString(f):
		return nil, nil, awserr.Clientf("Family can have up to 255 characters. Valid characters are letters (uppercase and lowercase), numbers, underscores, and hyphens.")
	}
	if len(m.GetContainerDefinitions()) == 0 {
		return nil, nil, awserr.Clientf("Container list cannot be empty.")
	}
	if err := ecsrules.ValidateTags(m.GetTags()); err != nil {
		return nil, nil, err
	}
	req := &ecsv1.RegisterTaskDefinitionRequest{
		Family: m.Family, Cpu: m.Cpu, Memory: m.Memory, TaskRoleArn: m.TaskRoleArn, ExecutionRoleArn: m.ExecutionRoleArn,
		NetworkMode: proto.String(NetworkMode), RequiresCompatibilities: []string{"EC2"},
	}
	for _, c := range m.GetContainerDefinitions() {
		cd := &ecsv1.ContainerDefinition{}
		if err := convert(c, cd); err != nil {
			return nil, nil, err
		}
		req.ContainerDefinitions = append(req.ContainerDefinitions, cd)
	}
	for _, v := range m.GetVolumes() {
		vol := &ecsv1.Volume{}
		if err := convert(v, vol); err != nil {
			return nil, nil, err
		}
		req.Volumes = append(req.Volumes, vol)
	}
	td, err := control.BuildTaskDefinition(req)
	if err != nil {
		return nil, nil, err
	}
	dtd := &ecsv1.DaemonTaskDefinition{
		Family: m.Family, TaskRoleArn: m.TaskRoleArn, ExecutionRoleArn: m.ExecutionRoleArn,
		Cpu: td.Cpu, Memory: td.Memory, Status: proto.String(StatusActive),
		ContainerDefinitions: m.GetContainerDefinitions(), Volumes: nonNil(m.GetVolumes()),
	}
	return td, dtd, nil
}

// convert copies the members of src into dst by their AWS member names (the daemon
// shapes are subsets of the task definition shapes of the same names).
func convert(src, dst proto.Message) error {
	b, err := protojson.Marshal(src)
	if err != nil {
		return fmt.Errorf("daemon: encode %T: %w", src, err)
	}
	if err := protojson.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("daemon: %T as %T: %w", src, dst, err)
	}
	return nil
}

// RegisterDaemonTaskDefinition registers the next revision of a daemon task definition
// family (the family's revision counter and the revision in one transaction). Errors:
// ClientException for a bad family, empty containerDefinitions or a member Berth refuses
// (naming it), as RegisterTaskDefinition. AWS reference: RegisterDaemonTaskDefinition.
func (h *Daemons) RegisterDaemonTaskDefinition(ctx context.Context, req *connect.Request[ecsv1.RegisterDaemonTaskDefinitionRequest]) (*connect.Response[ecsv1.RegisterDaemonTaskDefinitionResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.RegisterDaemonTaskDefinitionRequest) (*ecsv1.RegisterDaemonTaskDefinitionResponse, error) {
		td, dtd, err := BuildTaskDefinition(m)
		if err != nil {
			return nil, err
		}
		family := m.GetFamily()
		dtd.RegisteredBy = proto.String(control.RootARN(account))
		td.RegisteredBy = dtd.RegisteredBy
		td.Status = proto.String(StatusActive)
		var out string
		err = awsapi.Retry(ctx, func() error {
			fkey := keys.DaemonFamily(account, family)
			fam, frev, err := get[*storev1.FamilyRecord](ctx, h.kv, fkey)
			if err != nil {
				return err
			}
			if fam == nil {
				fam = &storev1.FamilyRecord{Family: family}
			}
			rev := int(fam.GetLastRevision()) + 1
			fam.LastRevision = int32(rev)
			fam.ActiveRevisions++
			a := arn.ARN{Region: account.Region, Account: account.Account, Type: arn.DaemonTaskDefinition, Name: family, Revision: rev}.String()
			now := h.nowEpoch()
			dtd.Revision, dtd.DaemonTaskDefinitionArn, dtd.RegisteredAt = int32(rev), proto.String(a), proto.Float64(now)
			td.Revision, td.TaskDefinitionArn, td.RegisteredAt = int32(rev), proto.String(a), proto.Float64(now)
			txn := store.NewTxn(h.kv)
			if frev == 0 {
				txn.Create(fkey, fam)
			} else {
				txn.Update(fkey, frev, fam)
			}
			txn.Create(keys.DaemonTaskDefinition(account, family, rev), &storev1.DaemonTaskDefinitionRecord{
				DaemonTaskDefinition: dtd, TaskDefinition: td, Tags: m.GetTags(),
			})
			if _, err := txn.Commit(ctx); err != nil {
				return err
			}
			out = a
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.RegisterDaemonTaskDefinitionResponse{DaemonTaskDefinitionArn: proto.String(out)}, nil
	})
}

// parseRef splits a daemon task definition reference — family, family:revision or the
// ARN — into family and revision (0: the latest ACTIVE one); ok is false when it cannot
// name one of account's.
func parseRef(account keys.Scope, ref string) (string, int, bool) {
	if arn.IsARN(ref) {
		a, err := arn.Parse(ref)
		if err != nil || a.Type != arn.DaemonTaskDefinition || !account.Owns(a.Partition, a.Account, a.Region) {
			return "", 0, false
		}
		return a.Name, a.Revision, true
	}
	family, rev, hasRev := strings.Cut(ref, ":")
	if !familyPattern.MatchString(family) {
		return "", 0, false
	}
	if !hasRev {
		return family, 0, true
	}
	n, err := strconv.Atoi(rev)
	if err != nil || n < 1 {
		return "", 0, false
	}
	return family, n, true
}

// lookup reads the daemon task definition ref names (the family's latest ACTIVE
// revision for a bare family); nil when there is none.
func lookup(ctx context.Context, kv clientv3.KV, account keys.Scope, ref string) (*storev1.DaemonTaskDefinitionRecord, int64, error) {
	family, rev, ok := parseRef(account, ref)
	if !ok {
		return nil, 0, nil
	}
	if rev > 0 {
		return get[*storev1.DaemonTaskDefinitionRecord](ctx, kv, keys.DaemonTaskDefinition(account, family, rev))
	}
	items, err := store.ListAll[*storev1.DaemonTaskDefinitionRecord](ctx, kv, keys.DaemonTaskDefinitions(account, family))
	if err != nil {
		return nil, 0, err
	}
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Value.GetDaemonTaskDefinition().GetStatus() == StatusActive {
			return items[i].Value, items[i].ModRevision, nil
		}
	}
	return nil, 0, nil
}

// DescribeDaemonTaskDefinition describes a revision (family — its latest ACTIVE
// revision —, family:revision or ARN). Errors: ClientException "Unable to describe
// daemon task definition." for an unknown one. AWS reference: DescribeDaemonTaskDefinition.
func (h *Daemons) DescribeDaemonTaskDefinition(ctx context.Context, req *connect.Request[ecsv1.DescribeDaemonTaskDefinitionRequest]) (*connect.Response[ecsv1.DescribeDaemonTaskDefinitionResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeDaemonTaskDefinitionRequest) (*ecsv1.DescribeDaemonTaskDefinitionResponse, error) {
		if m.GetDaemonTaskDefinition() == "" {
			return nil, awserr.Clientf("daemonTaskDefinition is required.")
		}
		rec, _, err := lookup(ctx, h.kv, account, m.GetDaemonTaskDefinition())
		if err != nil {
			return nil, err
		}
		if rec == nil {
			return nil, awserr.Clientf("Unable to describe daemon task definition.")
		}
		return &ecsv1.DescribeDaemonTaskDefinitionResponse{DaemonTaskDefinition: rec.GetDaemonTaskDefinition()}, nil
	})
}

// DeleteDaemonTaskDefinition deletes a revision (family:revision or ARN): it is
// DELETE_IN_PROGRESS while a daemon that is not deleted still deploys it and DELETED
// otherwise, and can no longer be used by CreateDaemon or UpdateDaemon. Errors:
// ClientException for a reference without revision or an unknown revision. AWS
// reference: DeleteDaemonTaskDefinition.
func (h *Daemons) DeleteDaemonTaskDefinition(ctx context.Context, req *connect.Request[ecsv1.DeleteDaemonTaskDefinitionRequest]) (*connect.Response[ecsv1.DeleteDaemonTaskDefinitionResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DeleteDaemonTaskDefinitionRequest) (*ecsv1.DeleteDaemonTaskDefinitionResponse, error) {
		family, rev, ok := parseRef(account, m.GetDaemonTaskDefinition())
		if !ok || rev == 0 {
			return nil, awserr.Clientf("Revision must be specified as family:revision or as a full daemon task definition ARN.")
		}
		a := arn.ARN{Region: account.Region, Account: account.Account, Type: arn.DaemonTaskDefinition, Name: family, Revision: rev}.String()
		inUse, err := h.taskDefinitionInUse(ctx, account, a)
		if err != nil {
			return nil, err
		}
		found := false
		_, _, err = store.Mutate(ctx, h.kv, keys.DaemonTaskDefinition(account, family, rev), func(r *storev1.DaemonTaskDefinitionRecord) error {
			found = true
			d := r.GetDaemonTaskDefinition()
			if d.GetStatus() == StatusDeleted {
				return nil
			}
			if d.DeleteRequestedAt == nil {
				d.DeleteRequestedAt = proto.Float64(h.nowEpoch())
			}
			d.Status = proto.String(StatusDeleted)
			if inUse {
				d.Status = proto.String(StatusDeleteInProgress)
			}
			r.TaskDefinition.Status = proto.String("DELETE_IN_PROGRESS")
			return nil
		})
		if err != nil && !found {
			return nil, awserr.Clientf("The specified daemon task definition does not exist.")
		}
		if err != nil {
			return nil, err
		}
		return &ecsv1.DeleteDaemonTaskDefinitionResponse{DaemonTaskDefinitionArn: proto.String(a)}, nil
	})
}

// taskDefinitionInUse reports whether a daemon of account that is not being deleted
// deploys (or keeps tasks of) the daemon task definition tdARN.
func (h *Daemons) taskDefinitionInUse(ctx context.Context, account keys.Scope, tdARN string) (bool, error) {
	items, err := store.ListAll[*storev1.DaemonRecord](ctx, h.kv, keys.Daemons(account, ""))
	if err != nil {
		return false, err
	}
	for _, it := range items {
		for _, d := range it.Value.GetService().GetService().GetDeployments() {
			if d.GetTaskDefinition() == tdARN && d.GetStatus() != "INACTIVE" {
				return true, nil
			}
		}
	}
	return false, nil
}

// ListDaemonTaskDefinitions lists daemon task definition revisions, filtered by family
// (exact) or familyPrefix, status (ACTIVE by default; DELETE_IN_PROGRESS or ALL) and, with
// revision LAST_REGISTERED, only each family's newest revision; sorted by family and
// revision (sort ASC, the default, or DESC); maxResults 1 to 100 (default 100) with
// nextToken. AWS reference: ListDaemonTaskDefinitions.
func (h *Daemons) ListDaemonTaskDefinitions(ctx context.Context, req *connect.Request[ecsv1.ListDaemonTaskDefinitionsRequest]) (*connect.Response[ecsv1.ListDaemonTaskDefinitionsResponse], error) {
	return awsapi.Handle(ctx, h.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListDaemonTaskDefinitionsRequest) (*ecsv1.ListDaemonTaskDefinitionsResponse, error) {
		if m.Family != nil && m.FamilyPrefix != nil {
			return nil, awserr.InvalidParameterf("family and familyPrefix cannot both be specified.")
		}
		limit, err := maxResults(m.MaxResults, 100)
		if err != nil {
			return nil, err
		}
		status := m.GetStatus()
		if status == "" {
			status = StatusActive
		}
		if status != StatusActive && status != StatusDeleteInProgress && status != "ALL" {
			return nil, awserr.InvalidParameterf("status must be one of ACTIVE, DELETE_IN_PROGRESS or ALL.")
		}
		if s := m.GetSort(); s != "" && s != "ASC" && s != "DESC" {
			return nil, awserr.InvalidParameterf("sort must be ASC or DESC.")
		}
		if r := m.GetRevision(); r != "" && r != "LAST_REGISTERED" {
			return nil, awserr.InvalidParameterf("revision must be LAST_REGISTERED.")
		}
		prefix := keys.DaemonTaskDefinitions(account, m.GetFamily())
		items, err := store.ListAll[*storev1.DaemonTaskDefinitionRecord](ctx, h.kv, prefix)
		if err != nil {
			return nil, err
		}
		var out []*ecsv1.DaemonTaskDefinitionSummary
		last := map[string]int{} // family → index in out of its newest revision
		for _, it := range items {
			d := it.Value.GetDaemonTaskDefinition()
			if m.FamilyPrefix != nil && !strings.HasPrefix(d.GetFamily(), m.GetFamilyPrefix()) {
				continue
			}
			if status != "ALL" && d.GetStatus() != status {
				continue
			}
			sum := &ecsv1.DaemonTaskDefinitionSummary{
				Arn: d.DaemonTaskDefinitionArn, Status: d.Status, RegisteredAt: d.RegisteredAt,
				RegisteredBy: d.RegisteredBy, DeleteRequestedAt: d.DeleteRequestedAt,
			}
			if m.GetRevision() == "LAST_REGISTERED" {
				if i, ok := last[d.GetFamily()]; ok {
					out[i] = sum
					continue
				}
				last[d.GetFamily()] = len(out)
			}
			out = append(out, sum)
		}
		if m.GetSort() == "DESC" {
			slices.Reverse(out)
		}
		page, next, err := paginate(out, m.GetNextToken(), limit)
		if err != nil {
			return nil, err
		}
		return &ecsv1.ListDaemonTaskDefinitionsResponse{DaemonTaskDefinitions: nonNil(page), NextToken: next}, nil
	})
}

// maxResults checks a maxResults member (1 to most) and returns it, or most when unset.
func maxResults(v *int32, most int) (int, error) {
	if v == nil {
		return most, nil
	}
	if *v < 1 || int(*v) > most {
		return 0, awserr.InvalidParameterf("maxResults must be between 1 and %d.", most)
	}
	return int(*v), nil
}

// paginate returns the page of items after the offset token holds, and the next token
// (nil on the last page). Tokens are offsets: the lists are small and read whole.
func paginate[T any](items []T, token string, limit int) ([]T, *string, error) {
	start := 0
	if token != "" {
		n, err := strconv.Atoi(token)
		if err != nil || n < 0 || n > len(items) {
			return nil, nil, awserr.InvalidParameterf("Invalid nextToken.")
		}
		start = n
	}
	end := min(start+limit, len(items))
	var next *string
	if end < len(items) {
		next = proto.String(strconv.Itoa(end))
	}
	return items[start:end], next, nil
}
