#!/bin/sh
# Builds the referee (conformance/referee: the kubelet's own code, run) for
# kubelet releases: dpctl-referee-1.NN into ${DPCTL_REFEREE_DIR:-<repo>/target/referee},
# and the DRA driver built on the upstream kubeletplugin helper
# (conformance/dra-driver): dpctl-dra-driver into
# ${DPCTL_DRA_DRIVER_DIR:-<repo>/target/dra-driver}; and two programs this
# project did not write, the corpus smoke and dra smoke are measured on
# (conformance/upstream: Go module dependencies, nothing copied): the
# upstream sample device plugin (k8s.io/kubernetes/test/images/
# sample-device-plugin) and the upstream DRA test driver
# (k8s.io/kubernetes/test/e2e/dra/test-driver), as sample-device-plugin and
# dra-test-driver into ${DPCTL_UPSTREAM_DIR:-<repo>/target/upstream}.
# Usage: conformance/build.sh [--lean] [1.NN ... dra-driver upstream]
#        (default: a referee for every released release of the release table
#        that has one, 1.34-1.37, then the DRA driver and the upstream
#        programs; one modfile per referee, referee/modfiles/1.NN.mod, which
#        tests/conformance.rs checks against KubeletVersion::referee_releases.
#        A pre-release, 1.38 (v1.38.0-beta.0, built with go 1.27, about 5 min
#        on 2 cores), is built only when named: conformance/build.sh 1.38;
#        without it tests/conformance.rs skips 1.38 with one line, even under
#        CI=true)
#        conformance/build.sh [--lean] kubelet [1.NN ...]
#        (default: 1.37) builds the real kubelet (k8s.io/kubernetes/cmd/kubelet
#        from the module proxy, pinned by the referee's modfiles/1.NN.mod; a
#        release whose modfile pins a pre-release has no kubelet build) as
#        kubelet-1.NN into ${DPCTL_KUBELET_DIR:-<repo>/target/kubelet}, with
#        the two images `dpctl smoke --engine kubelet` runs (pause.tar from the
#        kubelet module's build/pause/linux/pause.c, compiled static; busybox.tar
#        from the host's static busybox, Debian's busybox-static) in the same
#        directory; see kubelet.sh.
#        conformance/build.sh [--lean] cluster [1.34 1.35 1.36 1.37]
#        (default: 1.37) builds the control plane of a one-node cluster
#        (etcd at the version k8s.io/kubernetes 1.NN requires, kube-apiserver,
#        kube-scheduler, kube-controller-manager, kubectl) into
#        ${DPCTL_CLUSTER_DIR:-<repo>/target/cluster}/1.NN; see cluster.sh.
# GOMODCACHE, GOCACHE and GOFLAGS come from the environment; the builds
# share GOCACHE, so packages that did not change between releases compile
# once.
# --lean empties GOCACHE and GOMODCACHE after each release, so the disk
# holds one release's caches at a time (about 2 GB instead of 7.5 GB for
# all four). It refuses unless both caches are inside this repository's
# target/: it never empties a user's own Go caches.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=${DPCTL_REFEREE_DIR:-$repo/target/referee}
lean=no
if [ "${1:-}" = "--lean" ]; then
	lean=yes
	shift
fi
kubelet=no
cluster=no
if [ "${1:-}" = "kubelet" ]; then
	kubelet=yes
	shift
elif [ "${1:-}" = "cluster" ]; then
	# The same releases as the kubelet: the same checks below.
	kubelet=yes
	cluster=yes
	shift
fi
# The referee releases: one per modfiles/1.NN.mod, oldest first. A release
# whose modfile pins a pre-release of k8s.io/kubernetes (a tag with a '-')
# has a referee but no real kubelet build.
modfiles=$here/referee/modfiles
known=$(cd "$modfiles" && ls 1.*.mod | sed 's/\.mod$//' | sort -V | tr '\n' ' ')
known=${known% }
prerelease() {
	sed -n 's|^[[:space:]]*k8s.io/kubernetes v[0-9.]*-.*|pre|p' "$modfiles/$1.mod" | head -1
}
released=
for r in $known; do
	[ -n "$(prerelease "$r")" ] || released="$released $r"
done
released=${released# }
if [ $kubelet = yes ]; then
	targets=${*:-1.37}
else
	# Pre-releases only when named: per-push CI runs the default.
	targets=${*:-$released dra-driver upstream}
fi
releases=
dra_driver=no
upstream=no
for r in $targets; do
	case " $known dra-driver upstream " in
	*" $r "*) ;;
	*)
		echo "build.sh: no referee for kubelet release '$r' (known: $known; or dra-driver, upstream)" >&2
		exit 2
		;;
	esac
	case $r in
	dra-driver | upstream)
		if [ $kubelet = yes ]; then
			echo "build.sh: 'kubelet' builds kubelet releases only (known: $released)" >&2
			exit 2
		fi
		if [ "$r" = upstream ]; then upstream=yes; else dra_driver=yes; fi
		;;
	*)
		if [ $kubelet = yes ] && [ -n "$(prerelease "$r")" ]; then
			echo "build.sh: 'kubelet' builds kubelet releases $released ($r is a pre-release: referee only)" >&2
			exit 2
		fi
		releases="$releases $r"
		;;
	esac
done
if ! command -v go >/dev/null 2>&1; then
	echo "build.sh: the go toolchain is not on PATH (the referee is Go; see conformance/README.md)" >&2
	exit 2
fi
if [ $lean = yes ]; then
	for v in GOCACHE GOMODCACHE; do
		dir=$(go env $v)
		case $dir in
		"$repo/target/"*) ;;
		*)
			echo "build.sh: --lean empties $v, which is $dir, outside $repo/target/; set $v under target/ first" >&2
			exit 2
			;;
		esac
	done
fi
if [ $cluster = yes ]; then
	DPCTL_BUILD_LEAN=$lean exec "$here/cluster.sh" $releases
fi
if [ $kubelet = yes ]; then
	DPCTL_BUILD_LEAN=$lean exec "$here/kubelet.sh" $releases
fi
[ -z "$releases" ] || mkdir -p "$out"
cd "$here/referee"
for r in $releases; do
	tag=k8s_$(echo "$r" | tr . _)
	bin="$out/dpctl-referee-$r"
	# A release whose go line is newer than the local toolchain (1.38 needs
	# go 1.27: its packages compile apart from the other releases', as Go's
	# cache is per toolchain) builds with that toolchain, fetched from the module proxy as
	# GOTOOLCHAIN=auto would, unless GOTOOLCHAIN is set.
	need=go$(sed -n 's/^go \(.*\)/\1/p' "modfiles/$r.mod")
	toolchain=${GOTOOLCHAIN:-}
	if [ -z "$toolchain" ] && [ "$(printf '%s\n%s\n' "$need" "$(GOTOOLCHAIN=local go env GOVERSION)" | sort -V | head -1)" != "$need" ]; then
		toolchain=$need
	fi
	# Static, path-free binaries: no C toolchain needed, and the same
	# sources give the same binary on any machine.
	if ! GOTOOLCHAIN=${toolchain:-local} CGO_ENABLED=${CGO_ENABLED:-0} go build -trimpath -ldflags="-s -w" -modfile="modfiles/$r.mod" -tags "$tag" -o "$bin" .; then
		echo "build.sh: building the referee for kubelet $r failed" >&2
		exit 1
	fi
	echo "built $bin: $("$bin" --version)"
	if [ $lean = yes ]; then
		go clean -cache -modcache
	fi
done
if [ $dra_driver = yes ]; then
	drv_out=${DPCTL_DRA_DRIVER_DIR:-$repo/target/dra-driver}
	mkdir -p "$drv_out"
	cd "$here/dra-driver"
	if ! CGO_ENABLED=${CGO_ENABLED:-0} go build -trimpath -ldflags="-s -w" -o "$drv_out/dpctl-dra-driver" .; then
		echo "build.sh: building the DRA driver (conformance/dra-driver) failed" >&2
		exit 1
	fi
	echo "built $drv_out/dpctl-dra-driver: $("$drv_out/dpctl-dra-driver" --version)"
	if [ $lean = yes ]; then
		go clean -cache -modcache
	fi
fi
if [ $upstream = yes ]; then
	up_out=${DPCTL_UPSTREAM_DIR:-$repo/target/upstream}
	mkdir -p "$up_out"
	cd "$here/upstream"
	# The packages are the go.mod's `tool` entries: built from the module
	# cache at the version go.mod pins, as upstream wrote them.
	for pkg in k8s.io/kubernetes/test/images/sample-device-plugin k8s.io/kubernetes/test/e2e/dra/test-driver; do
		name=$(basename "$pkg")
		[ "$name" = test-driver ] && name=dra-test-driver
		if ! CGO_ENABLED=${CGO_ENABLED:-0} go build -trimpath -ldflags="-s -w" -o "$up_out/$name" "$pkg"; then
			echo "build.sh: building the upstream $pkg (conformance/upstream) failed" >&2
			exit 1
		fi
		echo "built $up_out/$name: $pkg $(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
	done
	if [ $lean = yes ]; then
		go clean -cache -modcache
	fi
fi
