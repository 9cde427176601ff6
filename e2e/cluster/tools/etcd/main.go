// etcd server at the version k8s.io/kubernetes pins (go.etcd.io/etcd/server/v3), so the
// apiserver talks to the etcd it is tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
