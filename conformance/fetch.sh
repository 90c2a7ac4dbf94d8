#!/bin/sh
# Downloads into GOMODCACHE the Go modules that `conformance/build.sh` (the
# referees of the released releases, the DRA driver, the upstream
# programs), `build.sh kubelet` and `build.sh cluster` (1.37, or the
# releases named) need, without compiling anything: `go list -deps` of the
# packages they build, with the same modfiles, tags and CGO_ENABLED. Run in
# the background (as .ci/run does), it overlaps the download, which is
# network-bound (about 60 s per referee release on the CI machine, 15% of a
# core), with compiling; the builds take the modules from the cache (Go locks
# each module while it downloads it, so a build never reads a half-written
# one). A download that fails here fails again, with its error, in the
# build that needs it.
# Usage: conformance/fetch.sh [1.NN ...]   (kubelet and cluster releases; default 1.37)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
export CGO_ENABLED="${CGO_ENABLED:-0}"
work=$(mktemp -d "${TMPDIR:-/tmp}/dpctl-fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$here/k8s-release.sh"
status=0
fetch() {
	if ! (cd "$1" && shift && go list -deps "$@" >/dev/null); then
		echo "fetch.sh: downloading the modules of $* failed" >&2
		status=1
	fi
}
# The referees, oldest first (build.sh's order); a pre-release is built
# only when named, so it is not fetched.
for mod in $(cd "$here/referee/modfiles" && ls 1.*.mod | sort -V); do
	r=${mod%.mod}
	grep -q '^[[:space:]]*k8s.io/kubernetes v[0-9.]*-' "$here/referee/modfiles/$mod" && continue
	fetch "$here/referee" -modfile="modfiles/$mod" -tags "k8s_$(echo "$r" | tr . _)" .
done
fetch "$here/dra-driver" .
fetch "$here/upstream" k8s.io/kubernetes/test/images/sample-device-plugin k8s.io/kubernetes/test/e2e/dra/test-driver
for r in ${*:-1.37}; do
	# As kubelet.sh, then cluster.sh (their modfile copies and directories).
	k8s_release fetch "$r" "$work"
	fetch "$here/referee" -mod=mod -modfile="$work/$r.mod" k8s.io/kubernetes/cmd/kubelet
	k8s_release fetch "$r" "$work"
	etcd=$(cd "$here/cluster" && go list -mod=mod -modfile="$work/$r.mod" -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
	(cd "$here/cluster" && go mod edit -modfile="$work/$r.mod" -require="go.etcd.io/etcd/server/v3@$etcd")
	fetch "$here/cluster" -mod=mod -modfile="$work/$r.mod" ./etcd k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
done
exit $status
