// Command berth-gateway is the gateway role alone: `berth gateway` without containerd's
// client or etcd's server linked in. Its flags are `berth gateway`'s.
package main

import (
	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/cmd/berth/internal/gatewaycmd"
)

func main() { cli.Main(gatewaycmd.Command("berth-gateway")) }
