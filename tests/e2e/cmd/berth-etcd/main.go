// Command berth-etcd is the real etcd server (go.etcd.io/etcd/server/v3's etcdmain), built
// by the e2e harness from the Go module proxy so the tests run a genuine etcd cluster
// without an etcd binary on the machine. Flags are etcd's own.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
