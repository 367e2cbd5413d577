package reaper

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berthhq/berth/services/scheduler/ecs/control"
)

// control's Server is what the app wires in.
var (
	_ Control = (*control.Server)(nil)
	_         = Config{Control: func(kv clientv3.KV) Control { return (*control.Server).Fenced(nil, kv) }}
)

// testRegion is the region the tests call in.
const testRegion = "us-east-1"
