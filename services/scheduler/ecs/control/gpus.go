package control

import (
	"errors"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/placement"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// validateResourceRequirements checks a container's resourceRequirements (where names it:
// "container 'web'" or "container override 'web'") as AWS's ResourceRequirement reference
// describes them: type GPU with a whole positive number of physical GPUs. GPUs are
// honoured at placement: a task is placed only on an instance with that many unassigned
// GPUs, else it fails with RESOURCE:GPU (always on an instance whose agent found no GPU),
// and given that many GPU ids exclusively (task.PlaceTxn). InferenceAccelerator (Elastic Inference) is refused. errType is the error's
// type: ClientErr at registration, InvalidParamErr for an override.
func validateResourceRequirements(errType, where string, reqs []*ecsv1.ResourceRequirement) error {
	for _, r := range reqs {
		switch r.GetType() {
		case placement.ResourceGPU:
			if _, err := placement.GPUCount([]*ecsv1.ResourceRequirement{r}); errors.Is(err, placement.ErrInvalid) {
				return awserr.New(errType, "Invalid 'resourceRequirements' setting for %s. The value of a GPU resource requirement must be a whole number of GPUs, 1 or more: %q.", where, r.GetValue())
			}
		case "InferenceAccelerator":
			return awserr.New(errType, "Invalid 'resourceRequirements' setting for %s. InferenceAccelerator is not supported by Berth: it has no Elastic Inference accelerators. Berth supports type GPU.", where)
		default:
			return awserr.New(errType, "Invalid 'resourceRequirements' setting for %s. Unknown type %q: valid types are GPU and InferenceAccelerator.", where, r.GetType())
		}
	}
	return nil
}
