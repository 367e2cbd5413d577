package lb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// StoreSink is the Sink that writes to etcd through the store package.
type StoreSink struct {
	// KV is the etcd client.
	KV clientv3.KV
}

// PutHealth implements Sink.
func (s StoreSink) PutHealth(ctx context.Context, healthKey string, h *storev1.TargetHealthRecord) error {
	_, err := store.NewTxn(s.KV).Put(healthKey, h).Commit(ctx)
	return err
}

// RemoveTarget implements Sink: the target record goes only if unchanged since the lb
// role saw it (a RegisterTargets in between wins), its health record with it.
func (s StoreSink) RemoveTarget(ctx context.Context, targetKey string, modRevision int64, healthKey string) error {
	_, err := store.NewTxn(s.KV).IfModRevision(targetKey, modRevision).Delete(targetKey).Delete(healthKey).Commit(ctx)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		return nil // gone already, or changed: the next snapshot says what to do
	}
	return err
}

// LoadSnapshot reads the whole ELB configuration of every account and region.
func LoadSnapshot(ctx context.Context, kv clientv3.KV) (Snapshot, error) {
	var snap Snapshot
	lbs, err := store.ListAll[*storev1.LoadBalancerRecord](ctx, kv, keys.ElbKind("lbs"))
	if err != nil {
		return snap, err
	}
	for _, it := range lbs {
		snap.LoadBalancers = append(snap.LoadBalancers, it.Value)
	}
	tgs, err := store.ListAll[*storev1.TargetGroupRecord](ctx, kv, keys.ElbKind("tgs"))
	if err != nil {
		return snap, err
	}
	tgArn := map[string]string{} // target group key -> ARN
	for _, it := range tgs {
		snap.TargetGroups = append(snap.TargetGroups, it.Value)
		tgArn[it.Key] = it.Value.GetTargetGroupArn()
	}
	ls, err := store.ListAll[*storev1.ListenerRecord](ctx, kv, keys.ElbKind("listeners"))
	if err != nil {
		return snap, err
	}
	for _, it := range ls {
		snap.Listeners = append(snap.Listeners, it.Value)
	}
	rs, err := store.ListAll[*storev1.RuleRecord](ctx, kv, keys.ElbKind("rules"))
	if err != nil {
		return snap, err
	}
	for _, it := range rs {
		snap.Rules = append(snap.Rules, it.Value)
	}
	health, err := store.ListAll[*storev1.TargetHealthRecord](ctx, kv, keys.ElbHealthAll())
	if err != nil {
		return snap, err
	}
	healthOf := map[string]*storev1.TargetHealthRecord{}
	for _, it := range health {
		healthOf[it.Key] = it.Value
	}
	ts, err := store.ListAll[*storev1.TargetRecord](ctx, kv, keys.ElbKind("targets"))
	if err != nil {
		return snap, err
	}
	snap.Targets = map[string][]Target{}
	for _, it := range ts {
		tgKey, healthKey, ok := keys.ElbTargetOwner(it.Key)
		if !ok {
			continue
		}
		arn := tgArn[tgKey]
		if arn == "" {
			continue
		}
		snap.Targets[arn] = append(snap.Targets[arn], Target{
			Key: it.Key, HealthKey: healthKey, ModRevision: it.ModRevision, Record: it.Value, Health: healthOf[healthKey],
		})
	}
	return snap, nil
}

// Run serves the ELB configuration in etcd until ctx ends: it loads a snapshot, applies
// it, and loads again after every change under keys.ElbConfig (and every resync
// interval, which also retries listeners that could not be bound).
func Run(ctx context.Context, c store.Client, cfg Config) error {
	if cfg.Sink == nil {
		cfg.Sink = StoreSink{KV: c}
	}
	s := New(ctx, cfg)
	defer s.Close(5 * time.Second)
	return s.follow(ctx, c)
}

// resyncInterval is how often the lb role reloads without a change.
const resyncInterval = 10 * time.Second

func (s *Server) follow(ctx context.Context, c store.Client) error {
	changed := make(chan struct{}, 1)
	werr := make(chan error, 1)
	go func() {
		// Any record type decodes as Empty (its fields kept as unknown): the events
		// only say that something changed.
		werr <- store.Watch(ctx, c, keys.ElbConfig(), 0, func(store.Event[*emptypb.Empty]) error {
			select {
			case changed <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	tick := time.NewTicker(resyncInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-werr:
			return fmt.Errorf("lb: watch: %w", err)
		case <-changed:
		case <-tick.C:
		}
		snap, err := LoadSnapshot(ctx, c)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.log.Warn("lb: load configuration", "err", err)
			continue
		}
		_ = s.Apply(snap) // bind errors are logged and retried
	}
}
