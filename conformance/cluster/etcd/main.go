// Command etcd is upstream etcd's server (go.etcd.io/etcd/server/v3), built
// from the module proxy at the version k8s.io/kubernetes requires: the
// whole program is upstream's etcdmain.Main, as etcd's own server/main.go
// calls it. conformance/cluster.sh builds it for `dpctl dra smoke --engine
// cluster`.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
