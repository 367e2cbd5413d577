package agentsession

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// Assignments reach the inbox without their task definition (a placement would
// otherwise write it once per task); the session adds it when it delivers, reading each
// revision once per scheduler process: a registered revision's content never changes
// (deregistering changes only its status, which an assignment does not need).

// maxTaskDefs bounds the task definition cache; past it the cache starts over.
const maxTaskDefs = 4096

// taskDefs caches task definitions by account and ARN.
type taskDefs struct {
	mu   sync.Mutex
	defs map[string]cachedTaskDef
}

// cachedTaskDef is one revision: decoded, and encoded as the field that carries it in an
// Assignment (deliverRaw appends it to an assignment's bytes as they are).
type cachedTaskDef struct {
	td    *ecsv1.TaskDefinition
	field []byte
}

// taskDefinition returns the task definition whose ARN is ref, of account, from the
// cache or etcd. The result is shared: the caller must not change it. It fails wrapping
// store.ErrNotFound when the revision is not stored.
func (s *Server) taskDefinition(ctx context.Context, account keys.Scope, ref string) (*ecsv1.TaskDefinition, error) {
	c, err := s.cachedTaskDefinition(ctx, account, ref)
	return c.td, err
}

// newCachedTaskDef returns td with its encoding as an Assignment's task_definition field
// (none for a nil td), or proto.Marshal's error.
func newCachedTaskDef(td *ecsv1.TaskDefinition) (cachedTaskDef, error) {
	if td == nil {
		return cachedTaskDef{}, nil
	}
	enc, err := proto.Marshal(td)
	if err != nil {
		return cachedTaskDef{}, err
	}
	field := protowire.AppendTag(nil, fieldAssignmentTaskDefinition, protowire.BytesType)
	return cachedTaskDef{td: td, field: protowire.AppendBytes(field, enc)}, nil
}

// cachedTaskDefinition is taskDefinition with the revision's encoding as an Assignment's
// task_definition field (tag, length, message).
func (s *Server) cachedTaskDefinition(ctx context.Context, account keys.Scope, ref string) (cachedTaskDef, error) {
	k := account.String() + "/" + ref
	c := &s.tds
	c.mu.Lock()
	cached, ok := c.defs[k]
	c.mu.Unlock()
	if ok {
		return cached, nil
	}
	a, err := arn.Parse(ref)
	if err != nil || (a.Type != arn.TaskDefinition && a.Type != arn.DaemonTaskDefinition) || a.Revision <= 0 {
		return cachedTaskDef{}, fmt.Errorf("agentsession: task definition %q: %w", ref, store.ErrNotFound)
	}
	var td *ecsv1.TaskDefinition
	if a.Type == arn.DaemonTaskDefinition {
		// A managed daemon's task runs the task definition its daemon task definition
		// record holds (ecs/daemon).
		rec, _, err := store.Get[*storev1.DaemonTaskDefinitionRecord](ctx, s.cfg.Etcd, keys.DaemonTaskDefinition(account, a.Name, a.Revision))
		if err != nil {
			return cachedTaskDef{}, fmt.Errorf("agentsession: daemon task definition %s: %w", ref, err)
		}
		td = rec.GetTaskDefinition()
	} else {
		rec, _, err := store.Get[*storev1.TaskDefinitionRecord](ctx, s.cfg.Etcd, keys.TaskDefinition(account, a.Name, a.Revision))
		if err != nil {
			return cachedTaskDef{}, fmt.Errorf("agentsession: task definition %s: %w", ref, err)
		}
		td = rec.GetTaskDefinition()
	}
	cached, err = newCachedTaskDef(td)
	if err != nil {
		return cachedTaskDef{}, fmt.Errorf("agentsession: task definition %s: %w", ref, err)
	}
	c.mu.Lock()
	if c.defs == nil || len(c.defs) >= maxTaskDefs {
		c.defs = map[string]cachedTaskDef{}
	}
	c.defs[k] = cached
	c.mu.Unlock()
	return cached, nil
}
