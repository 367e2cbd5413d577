package outbox_test

import (
	"path/filepath"
	"testing"

	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/services/agent/outbox"
)

// BenchmarkAppend measures one durable state change (one bbolt commit
// with fsync) on the machine's disk.
func BenchmarkAppend(b *testing.B) {
	o, err := outbox.Open(filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	for b.Loop() {
		if _, err := o.Append(&agentv1.TaskStateChange{TaskArn: "t", LastStatus: "RUNNING"}); err != nil {
			b.Fatal(err)
		}
	}
}
