package reaper

import "github.com/berthhq/berth/services/scheduler/control"

// control's Server is what the app wires in.
var (
	_ Control = (*control.Server)(nil)
	_         = Config{TaskIndexKeys: control.TaskIndexKeys}
)

// testRegion is the region the tests call in.
const testRegion = "us-east-1"
