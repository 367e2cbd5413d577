package keys

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// LayoutVersion is the key layout this build writes. Layout 2 put {region} after
// {account} in every key of ECS state (layout 1, before regions, had no region part);
// layout 3 keeps an instance's task counts as its record's active_tasks and the
// idx/instance-running keys (layout 2 stored pendingTasksCount and runningTasksCount in
// the record). MigrateLayout brings layout 1 to 2, task.MigrateCounts 2 to 3.
const LayoutVersion = "3"

// layoutRegions is the layout MigrateLayout brings state to.
const layoutRegions = "2"

// Layout returns the key that records the layout of the store's ECS state.
func Layout() string { return store.MustKey("layout") }

// layout1Parts is, per top-level prefix (and per idx kind), how many key parts followed
// the prefix in layout 1. Escape keeps '/' out of free-form parts, so the count tells a
// layout-1 key from a layout-2 one (which has one more, or two more for the inbox).
var layout1Parts = map[string]int{
	"clusters":               2, // {account}/{cluster}
	"families":               2, // {account}/{family}
	"task-definitions":       3, // {account}/{family}/{revision}
	"instances":              3, // {account}/{cluster}/{id}
	"tasks":                  3, // {account}/{cluster}/{id}
	"services":               3, // {account}/{cluster}/{service}
	"settings":               1, // {account}
	"protection":             3, // {account}/{cluster}/{task}
	"inbox":                  2, // {instance}/{task}: no account
	"idx/instance-by-host":   3, // {account}/{cluster}/{host}
	"idx/client-token":       3, // {account}/{cluster}/{token}
	"idx/task-list":          6, // {account}/{cluster}/{desired}/{dim}/{value}/{task}
	"idx/id-cluster":         3, // {account}/{kind}/{id}
	"idx/clusters-active":    2, // {account}/{cluster}
	"idx/families-by-status": 3, // {account}/{status}/{family}
	"idx/taskdefs-by-status": 4, // {account}/{status}/{family}/{revision}
}

// MigrateLayout moves ECS state written by builds without regions (layout 1) into
// region, the scheduler's default region (BERTH_REGION): every such key gains the
// region after its account (inbox entries gain the account of their instance too), and
// its value is kept as is — ARNs in records already name the region those builds wrote,
// which is their one configured region, so pass the same one. Each key moves in its own
// transaction (create the new key if absent, delete the old one if unchanged), so
// replicas starting together, or a migration cut short, are safe to run again. When
// done it writes Layout() = "2", and later starts (at layout 2 or later) return at once.
// It returns how many keys moved. Run it, then task.MigrateCounts, before serving: a
// layout-1 key is invisible to this build.
func MigrateLayout(ctx context.Context, kv clientv3.KV, region string) (int, error) {
	if region == "" {
		return 0, fmt.Errorf("keys: MigrateLayout needs a region")
	}
	if v, _, err := store.Get[*wrapperspb.StringValue](ctx, kv, Layout()); err == nil && (v.GetValue() == layoutRegions || v.GetValue() == LayoutVersion) {
		return 0, nil
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	moved := 0
	// Instances first: inbox keys find their account through them.
	accountOf := map[string]string{} // instance id -> account
	order := []string{"instances", "clusters", "families", "task-definitions", "tasks", "services",
		"settings", "protection", "idx/instance-by-host", "idx/client-token", "idx/task-list",
		"idx/id-cluster", "idx/clusters-active", "idx/families-by-status", "idx/taskdefs-by-status", "inbox"}
	for _, p := range order {
		prefix := store.Prefix + p + "/"
		want := layout1Parts[p]
		token := ""
		for {
			ks, next, err := store.ListKeys(ctx, kv, prefix, store.MaxListLimit, token)
			if err != nil {
				return moved, fmt.Errorf("keys: migrate %s: %w", p, err)
			}
			for _, k := range ks {
				parts := strings.Split(strings.TrimPrefix(k, prefix), "/")
				if len(parts) != want {
					continue // layout 2 already
				}
				var nk string
				switch p {
				case "inbox":
					acct, ok := accountOf[parts[0]]
					if !ok {
						continue // its instance is gone: nothing will deliver it
					}
					nk = prefix + acct + "/" + region + "/" + strings.Join(parts, "/")
				case "instances":
					accountOf[parts[2]] = parts[0]
					fallthrough
				default:
					nk = prefix + parts[0] + "/" + region + "/" + strings.Join(parts[1:], "/")
				}
				ok, err := moveKey(ctx, kv, k, nk)
				if err != nil {
					return moved, fmt.Errorf("keys: migrate %s: %w", k, err)
				}
				if ok {
					moved++
				}
			}
			if next == "" {
				break
			}
			token = next
		}
	}
	return moved, SetLayout(ctx, kv, layoutRegions)
}

// SetLayout records that the store's ECS state is in layout version ("1", "2", ...)
// unless it already records that version or a later one: a replica finishing a
// migration after another one brought the store further does not set it back. It
// compares the layout key's ModRevision with the one it read, and reads again when
// another replica wrote it in between. Errors: etcd's, or a version that is not a
// number.
func SetLayout(ctx context.Context, kv clientv3.KV, version string) error {
	want, err := strconv.Atoi(version)
	if err != nil {
		return fmt.Errorf("keys: layout version %q: %w", version, err)
	}
	b, err := proto.Marshal(wrapperspb.String(version))
	if err != nil {
		return err
	}
	for {
		resp, err := kv.Get(ctx, Layout())
		if err != nil {
			return fmt.Errorf("keys: read layout version: %w", err)
		}
		var rev int64
		if len(resp.Kvs) > 0 {
			rev = resp.Kvs[0].ModRevision
			var cur wrapperspb.StringValue
			if err := proto.Unmarshal(resp.Kvs[0].Value, &cur); err == nil {
				if n, err := strconv.Atoi(cur.GetValue()); err == nil && n >= want {
					return nil
				}
			}
		}
		tr, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(Layout()), "=", rev)).
			Then(clientv3.OpPut(Layout(), string(b))).Commit()
		if err != nil {
			return fmt.Errorf("keys: write layout version: %w", err)
		}
		if tr.Succeeded {
			return nil
		}
	}
}

// moveKey copies old's value to nk if nk is absent and deletes old if it is unchanged,
// in one transaction. It reports whether it moved the key.
func moveKey(ctx context.Context, kv clientv3.KV, old, nk string) (bool, error) {
	resp, err := kv.Get(ctx, old)
	if err != nil || len(resp.Kvs) == 0 {
		return false, err
	}
	v := resp.Kvs[0]
	tr, err := kv.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(old), "=", v.ModRevision),
		clientv3.Compare(clientv3.CreateRevision(nk), "=", 0),
	).Then(clientv3.OpPut(nk, string(v.Value)), clientv3.OpDelete(old)).Commit()
	if err != nil {
		return false, err
	}
	return tr.Succeeded, nil
}
