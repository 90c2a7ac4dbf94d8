#!/bin/sh
# Builds the control plane of a one-node cluster for `dpctl dra smoke
# --engine cluster:DIR` and tests/cluster_engine.rs; run through
# `conformance/build.sh [--lean] cluster [1.34 1.35 1.36 1.37]`, which checks
# the arguments and the --lean caches first.
#
# Into ${DPCTL_CLUSTER_DIR:-<repo>/target/cluster}/1.NN/, for each release:
# - etcd: cluster/etcd/main.go, a main calling
#   go.etcd.io/etcd/server/v3/etcdmain.Main at the version k8s.io/kubernetes
#   1.NN's own go.mod requires (v3.6.4 for 1.34, v3.7.0 for 1.37: the etcd
#   its release's integration tests run against);
# - kube-apiserver, kube-scheduler, kube-controller-manager and kubectl:
#   k8s.io/kubernetes/cmd/... at the version the referee's modfiles/1.NN.mod
#   pins, the version stamped as the upstream release build does.
# All from the Go module proxy (module dependencies, nothing copied), with
# a copy of the referee's modfile and -mod=mod (the go.sum lines these
# commands need beyond the referee's are added to the copy; the
# repository's files stay untouched), static and stripped. They share
# GOCACHE with the kubelet of the same release (conformance/kubelet.sh): most
# packages compile once. The kubelet itself is `build.sh kubelet 1.NN`;
# `dpctl dra smoke --engine cluster:DIR` reads DIR/kubelet (or a kubelet-1.NN
# beside DIR, or DPCTL_KUBELET_DIR), so official binaries work the same:
# a DIR holding etcd, kube-apiserver, kube-scheduler, kube-controller-manager
# and kubelet (docs/cluster.md).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=${DPCTL_CLUSTER_DIR:-$repo/target/cluster}
lean=${DPCTL_BUILD_LEAN:-no}
releases=${*:-1.37}
command -v go >/dev/null 2>&1 || {
	echo "build.sh cluster: go is not on PATH (the control plane is Go; see conformance/README.md)" >&2
	exit 2
}
. "$here/k8s-release.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/dpctl-cluster-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

for r in $releases; do
	k8s_release cluster "$r" "$work"
	dir=$out/$r
	mkdir -p "$dir"
	start=$(date +%s)
	# etcd: the version k8s.io/kubernetes requires, made a direct requirement
	# of the modfile copy (it is `// indirect` there); its binary without the
	# component-base version stamp (a main of etcd's own).
	etcd=$(cd "$here/cluster" && go list -mod=mod -modfile="$work/$r.mod" -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
	(cd "$here/cluster" && go mod edit -modfile="$work/$r.mod" -require="go.etcd.io/etcd/server/v3@$etcd")
	if ! k8s_build "$here/cluster" "$work/$r.mod" "-s -w" -o "$dir/etcd.tmp" ./etcd; then
		echo "build.sh cluster: building etcd $etcd failed" >&2
		exit 1
	fi
	mv "$dir/etcd.tmp" "$dir/etcd"
	# The four commands in one `go build`: one package load, and the link of
	# one overlaps the compiling or linking of another.
	rm -rf "$work/cmd"
	mkdir -p "$work/cmd"
	if ! k8s_build "$here/cluster" "$work/$r.mod" "$ldflags" -o "$work/cmd/" k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl; then
		echo "build.sh cluster: building kube-apiserver, kube-scheduler, kube-controller-manager and kubectl $version failed" >&2
		exit 1
	fi
	for cmd in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
		mv "$work/cmd/$cmd" "$dir/$cmd"
	done
	echo "built $dir: etcd $etcd, kube-apiserver kube-scheduler kube-controller-manager kubectl $version" \
		"($(($(date +%s) - start)) s, $(du -cm "$dir"/etcd "$dir"/kube-* "$dir"/kubectl | tail -1 | cut -f1) MB)"
	if [ $lean = yes ]; then
		go clean -cache -modcache
	fi
done
