package reaper

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/services/scheduler/control"
	"github.com/berthhq/berth/services/scheduler/task"
)

// control's Server is what the app wires in.
var (
	_ Control = (*control.Server)(nil)
	_         = Config{Control: func(kv clientv3.KV) Control { return (*control.Server).Fenced(nil, kv) }}
	_         = Config{TaskIndexKeys: task.IndexKeys}
)

// testRegion is the region the tests call in.
const testRegion = "us-east-1"
