package task

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// StopTxn stops the task at key as AWS's StopTask does: desiredStatus STOPPED with the
// stopCode, reason and stoppingAt, and a StopOrder in its instance's inbox; a task not
// placed goes straight to STOPPED (its containers too). The
// txn also requires ifs (the service scheduler passes the leader's fence) and is retried
// on conflict (awsapi.Retry) until ctx ends. A task already desired STOPPED is left as it
// is. It returns the task as read; InvalidParameterException "The referenced task was not
// found." when there is none, or the etcd or fence error. now is the clock.
func StopTxn(ctx context.Context, kv clientv3.KV, now func() time.Time, account keys.Scope, key, stopCode, reason string, ifs ...clientv3.Cmp) (*storev1.TaskRecord, error) {
	var out *storev1.TaskRecord
	err := awsapi.Retry(ctx, func() error {
		rec, rev, err := store.Get[*storev1.TaskRecord](ctx, kv, key)
		if errors.Is(err, store.ErrNotFound) {
			return awserr.InvalidParameterf("The referenced task was not found.")
		}
		if err != nil {
			return err
		}
		out = rec
		t := rec.GetTask()
		if t.GetDesiredStatus() == DesiredStopped {
			return nil
		}
		old := proto.Clone(rec).(*storev1.TaskRecord)
		stamp := proto.Float64(awsapi.Epoch(now()))
		t.DesiredStatus = proto.String(DesiredStopped)
		t.StopCode = proto.String(stopCode)
		t.StoppedReason = proto.String(reason)
		t.StoppingAt = stamp
		t.Version++
		txn := store.NewTxn(kv).If(ifs...)
		inst := rec.GetContainerInstanceId()
		if inst != "" && t.GetLastStatus() != "STOPPED" {
			txn.Put(keys.Inbox(account, inst, ID(rec)), &storev1.InboxEntry{Delivery: &storev1.InboxEntry_Stop{Stop: &agentv1.StopOrder{
				DeliveryId: ID(rec) + "-stop", TaskArn: t.GetTaskArn(), Reason: reason, StopCode: stopCode,
			}}})
		} else if t.GetLastStatus() != "STOPPED" {
			// Not placed: no instance counts it, so nothing else changes.
			t.LastStatus = proto.String("STOPPED")
			t.StoppedAt, t.ExecutionStoppedAt = stamp, stamp
			for _, c := range t.GetContainers() {
				c.LastStatus = proto.String("STOPPED")
			}
		}
		WriteTxn(txn, account, old, rev, rec)
		_, err = txn.Commit(ctx)
		return err
	})
	return out, err
}
