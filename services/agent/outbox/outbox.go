package outbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
)

// ErrBackward is returned by Append for a change whose status is behind the
// task's known status: known status only moves forward.
var ErrBackward = errors.New("outbox: status would move backward")

var (
	bucketChanges     = []byte("changes")
	bucketStatus      = []byte("status")
	bucketDeliveries  = []byte("deliveries")
	bucketAssignments = []byte("assignments")
	bucketLast        = []byte("last")
)

// statusRank orders ECS lastStatus values along the task lifecycle.
var statusRank = map[string]int{
	"PROVISIONING":   0,
	"PENDING":        1,
	"ACTIVATING":     2,
	"RUNNING":        3,
	"DEACTIVATING":   4,
	"STOPPING":       5,
	"DEPROVISIONING": 6,
	"STOPPED":        7,
}

// Rank returns the position of an ECS lastStatus in the task lifecycle
// (PROVISIONING 0 … STOPPED 7), or -1 for an unknown status.
func Rank(status string) int {
	if r, ok := statusRank[status]; ok {
		return r
	}
	return -1
}

// Outbox is an open state file. Its methods are safe for concurrent use.
type Outbox struct {
	db *bolt.DB
}

// Open opens or creates the state file at path, waiting up to 5 s for
// another process's lock. Close releases it.
func Open(path string) (*Outbox, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("outbox: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketChanges, bucketStatus, bucketDeliveries, bucketAssignments, bucketLast} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("outbox: init %s: %w", path, err)
	}
	return &Outbox{db: db}, nil
}

// Close closes the file.
func (o *Outbox) Close() error {
	if err := o.db.Close(); err != nil {
		return fmt.Errorf("outbox: close: %w", err)
	}
	return nil
}

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}

// Append stores change with the next sequence number, which it sets on
// change and returns. It returns ErrBackward, storing nothing, when
// change.LastStatus ranks below the task's known status; a change with the
// same status (a health or container update) is stored.
func (o *Outbox) Append(change *agentv1.TaskStateChange) (uint64, error) {
	var seq uint64
	err := o.db.Update(func(tx *bolt.Tx) error {
		st := tx.Bucket(bucketStatus)
		arn := []byte(change.GetTaskArn())
		if known := st.Get(arn); known != nil && Rank(change.GetLastStatus()) < Rank(string(known)) {
			return ErrBackward
		}
		changes := tx.Bucket(bucketChanges)
		var err error
		if seq, err = changes.NextSequence(); err != nil {
			return err
		}
		change.Seq = seq
		b, err := proto.Marshal(change)
		if err != nil {
			return err
		}
		if err := changes.Put(seqKey(seq), b); err != nil {
			return err
		}
		if err := tx.Bucket(bucketLast).Put(arn, b); err != nil {
			return err
		}
		return st.Put(arn, []byte(change.GetLastStatus()))
	})
	if err != nil {
		if errors.Is(err, ErrBackward) {
			return 0, fmt.Errorf("task %s to %s: %w", change.GetTaskArn(), change.GetLastStatus(), err)
		}
		return 0, fmt.Errorf("outbox: append change for %s: %w", change.GetTaskArn(), err)
	}
	return seq, nil
}

// KnownStatus returns the last status stored for the task, "" if none.
func (o *Outbox) KnownStatus(taskARN string) (string, error) {
	var s string
	err := o.db.View(func(tx *bolt.Tx) error {
		s = string(tx.Bucket(bucketStatus).Get([]byte(taskARN)))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("outbox: known status of %s: %w", taskARN, err)
	}
	return s, nil
}

// Last returns the last change stored for the task (acknowledged or not),
// or nil if none, so a restarted agent can carry its timestamps on.
func (o *Outbox) Last(taskARN string) (*agentv1.TaskStateChange, error) {
	var c *agentv1.TaskStateChange
	err := o.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLast).Get([]byte(taskARN))
		if v == nil {
			return nil
		}
		c = new(agentv1.TaskStateChange)
		return proto.Unmarshal(v, c)
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: last change of %s: %w", taskARN, err)
	}
	return c, nil
}

// Ack deletes the changes with the given sequence numbers; unknown numbers
// are ignored.
func (o *Outbox) Ack(seqs []uint64) error {
	err := o.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChanges)
		for _, s := range seqs {
			if err := b.Delete(seqKey(s)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("outbox: ack %v: %w", seqs, err)
	}
	return nil
}

// Pending returns the unacknowledged changes, oldest first.
func (o *Outbox) Pending() ([]*agentv1.TaskStateChange, error) {
	var out []*agentv1.TaskStateChange
	err := o.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketChanges).ForEach(func(_, v []byte) error {
			c := new(agentv1.TaskStateChange)
			if err := proto.Unmarshal(v, c); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: pending: %w", err)
	}
	return out, nil
}

// TakeDelivery records that the delivery id was taken for the task. It
// returns false when the id, or another delivery of the same task, was
// taken before: the caller acks it and does not act again.
func (o *Outbox) TakeDelivery(id, taskARN string) (bool, error) {
	fresh := false
	err := o.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDeliveries)
		if b.Get([]byte(id)) != nil {
			return nil
		}
		fresh = true
		return b.Put([]byte(id), []byte(taskARN))
	})
	if err != nil {
		return false, fmt.Errorf("outbox: take delivery %s: %w", id, err)
	}
	return fresh, nil
}

// TakeAssignment records the assignment's delivery and stores the
// assignment, in one transaction. It returns false, storing nothing new,
// when the delivery id was taken before or the task already has a known
// status or a stored assignment: a redelivery, to be acked and not run.
func (o *Outbox) TakeAssignment(a *agentv1.Assignment) (bool, error) {
	arn := []byte(a.GetTask().GetTaskArn())
	b, err := proto.Marshal(a)
	if err != nil {
		return false, fmt.Errorf("outbox: encode assignment: %w", err)
	}
	fresh := false
	err = o.db.Update(func(tx *bolt.Tx) error {
		d := tx.Bucket(bucketDeliveries)
		seen := d.Get([]byte(a.GetDeliveryId())) != nil ||
			tx.Bucket(bucketStatus).Get(arn) != nil ||
			tx.Bucket(bucketAssignments).Get(arn) != nil
		if err := d.Put([]byte(a.GetDeliveryId()), arn); err != nil {
			return err
		}
		if seen {
			return nil
		}
		fresh = true
		return tx.Bucket(bucketAssignments).Put(arn, b)
	})
	if err != nil {
		return false, fmt.Errorf("outbox: take assignment %s: %w", arn, err)
	}
	return fresh, nil
}

// PutAssignment stores the assignment of a task the agent runs, so a
// restarted agent can resume managing it.
func (o *Outbox) PutAssignment(a *agentv1.Assignment) error {
	b, err := proto.Marshal(a)
	if err != nil {
		return fmt.Errorf("outbox: encode assignment: %w", err)
	}
	err = o.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAssignments).Put([]byte(a.GetTask().GetTaskArn()), b)
	})
	if err != nil {
		return fmt.Errorf("outbox: put assignment %s: %w", a.GetTask().GetTaskArn(), err)
	}
	return nil
}

// Assignment returns the stored assignment of the task, or nil if none.
func (o *Outbox) Assignment(taskARN string) (*agentv1.Assignment, error) {
	var a *agentv1.Assignment
	err := o.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketAssignments).Get([]byte(taskARN))
		if v == nil {
			return nil
		}
		a = new(agentv1.Assignment)
		return proto.Unmarshal(v, a)
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: assignment %s: %w", taskARN, err)
	}
	return a, nil
}

// Assignments returns every stored assignment's task ARN, sorted.
func (o *Outbox) Assignments() ([]string, error) {
	var arns []string
	err := o.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAssignments).ForEach(func(k, _ []byte) error {
			arns = append(arns, string(k))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: list assignments: %w", err)
	}
	slices.Sort(arns)
	return arns, nil
}

// DeleteAssignment forgets the task's assignment, once its containers are
// removed. Its known status stays, so a late change cannot move it back.
func (o *Outbox) DeleteAssignment(taskARN string) error {
	err := o.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketLast).Delete([]byte(taskARN)); err != nil {
			return err
		}
		return tx.Bucket(bucketAssignments).Delete([]byte(taskARN))
	})
	if err != nil {
		return fmt.Errorf("outbox: delete assignment %s: %w", taskARN, err)
	}
	return nil
}
