// Command berth-agent is the agent role alone: `berth agent` without the scheduler, the
// gateway or etcd linked in, for hosts that only run tasks. Its flags are `berth agent`'s.
package main

import (
	"github.com/berthhq/berth/cmd/berth/internal/agentcmd"
	"github.com/berthhq/berth/cmd/berth/internal/cli"
)

func main() { cli.Main(agentcmd.Command("berth-agent")) }
