// Command etcd is the etcd server (go.etcd.io/etcd/server/v3/etcdmain) built from the Go
// module proxy as a static binary, for the compose stack's FROM-scratch etcd image on
// machines that reach no container registry. It takes etcd's own flags.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
