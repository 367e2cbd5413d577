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
// (or held one the model does not define), and any error answer whose type the model does
// not list for the operation (shapecheck.Model.CheckError), fails it; the number of
// responses checked per operation and the error types seen are logged.
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
		seen := rec.ErrorsSeen()
		errOps := make([]string, 0, len(seen))
		for op := range seen {
			errOps = append(errOps, op)
		}
		sort.Strings(errOps)
		for _, op := range errOps {
			t.Logf("shapecheck: error answers of %s: %v", op, seen[op])
		}
		if err := rec.Err(); err != nil {
			t.Error(err)
		}
	})
	return rec
}
