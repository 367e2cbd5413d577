package harness

import (
	"sort"
	"sync"
	"testing"

	"github.com/berthhq/berth/testkit/shapecheck"
)

var (
	modelOnce sync.Once
	model     *shapecheck.Model
	modelErr  error
)

// ShapeRecorder returns a recorder checking responses against the repository's ECS model
// (api/ecs/ecs-2014-11-13.json); when t ends, any response that lacked a required member
// (or held one the model does not define) fails it, and the number of responses checked
// per operation is logged.
func ShapeRecorder(t testing.TB) *shapecheck.Recorder {
	t.Helper()
	modelOnce.Do(func() { model, modelErr = shapecheck.LoadFromRepo() })
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	rec := shapecheck.NewRecorder(model)
	t.Cleanup(func() {
		checked := rec.Checked()
		ops := make([]string, 0, len(checked))
		for op := range checked {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		total := 0
		for _, op := range ops {
			total += checked[op]
		}
		t.Logf("shapecheck: %d responses of %d operations checked against the ECS model %v", total, len(ops), ops)
		if err := rec.Err(); err != nil {
			t.Error(err)
		}
	})
	return rec
}
