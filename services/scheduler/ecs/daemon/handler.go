package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Statuses of the daemon shapes (the ECS model's enums).
const (
	StatusActive           = "ACTIVE"
	StatusDeleteInProgress = "DELETE_IN_PROGRESS"
	StatusDeleted          = "DELETED"

	DeploymentPending            = "PENDING"
	DeploymentInProgress         = "IN_PROGRESS"
	DeploymentSuccessful         = "SUCCESSFUL"
	DeploymentStopped            = "STOPPED"
	DeploymentRollbackInProgress = "ROLLBACK_IN_PROGRESS"
	DeploymentRollbackSuccessful = "ROLLBACK_SUCCESSFUL"
	DeploymentRollbackFailed     = "ROLLBACK_FAILED"
)

// Config configures a Daemons.
type Config struct {
	// KV is the etcd client. Required.
	KV clientv3.KV
	// Logger receives internal faults; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Kick, when set, is called after every write that changes what runs, so the
	// leader's loop passes soon.
	Kick func()
}

// Daemons serves the twelve daemon actions over etcd. Its methods have the
// ecsv1connect.EcsServiceHandler signatures; embed it beside *control.Server (whose
// embedded UnimplementedEcsServiceHandler answers these actions otherwise) so that these
// take precedence. Safe for concurrent use.
type Daemons struct {
	kv   clientv3.KV
	log  *slog.Logger
	now  func() time.Time
	kick func()
}

// NewHandler returns a Daemons for cfg. It does not touch etcd.
func NewHandler(cfg Config) *Daemons {
	h := &Daemons{kv: cfg.KV, log: cfg.Logger, now: cfg.Now, kick: cfg.Kick}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.kick == nil {
		h.kick = func() {}
	}
	return h
}

// nowEpoch is the handler's clock as an ECS timestamp.
func (h *Daemons) nowEpoch() float64 { return awsapi.Epoch(h.now()) }

// get reads a record; nil (and revision 0) when absent.
func get[T proto.Message](ctx context.Context, kv clientv3.KV, key string) (T, int64, error) {
	v, rev, err := store.Get[T](ctx, kv, key)
	if errors.Is(err, store.ErrNotFound) {
		var zero T
		return zero, 0, nil
	}
	return v, rev, err
}

// newID returns a random 32-hex-digit id (daemon deployments and revisions).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// nonNil returns s, or an empty list for nil (the lists AWS returns even when empty).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
