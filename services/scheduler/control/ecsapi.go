package control

import "github.com/berthhq/berth/services/scheduler/ecsapi"

// tasks.go still calls the shared ECS helpers by the names they had when control held
// them; these aliases go once it calls package ecsapi directly.
var (
	validName    = ecsapi.ValidName
	validateTags = ecsapi.ValidateTags
	epoch        = ecsapi.Epoch
	retry        = ecsapi.Retry
	errRetry     = ecsapi.ErrRetry
)
