#!/bin/sh
# Builds the real kubelet for `dpctl smoke --engine kubelet`; run through
# `conformance/build.sh [--lean] kubelet [1.34 1.35 1.36 1.37]`, which checks
# the arguments and the --lean caches first.
#
# Into ${DPCTL_KUBELET_DIR:-<repo>/target/kubelet}:
# - kubelet-1.NN: k8s.io/kubernetes/cmd/kubelet at the version the referee's
#   modfiles/1.NN.mod pins (module dependencies from the proxy, nothing
#   copied), its version stamped as the upstream release build does
#   (-X k8s.io/component-base/version.gitVersion=...). The modfile is copied
#   first: -mod=mod adds the go.sum lines cmd/kubelet needs beyond the
#   referee's, and the repository's files stay untouched.
# - pause.tar: the sandbox image, from the kubelet module's own
#   build/pause/linux/pause.c compiled static with the flags of its Makefile.
# - busybox.tar: the container image the smoke's pods run, from the host's
#   static busybox (Debian: apt-get install busybox-static).
# Both images are docker-save tarballs for `ctr -n k8s.io image import`,
# built byte-for-byte reproducibly (fixed mtimes, owners and order).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=${DPCTL_KUBELET_DIR:-$repo/target/kubelet}
lean=${DPCTL_BUILD_LEAN:-no}
releases=${*:-1.37}
need() {
	command -v "$1" >/dev/null 2>&1 || {
		echo "build.sh kubelet: $1 is not on PATH ($2)" >&2
		exit 2
	}
}
need go "the kubelet is Go; see conformance/README.md"
need cc "pause.c is compiled static; Debian: apt-get install gcc libc6-dev"
need sha256sum "coreutils"
# A dynamic busybox would find no libc in the image: ldd fails on a static one.
busybox=$(command -v busybox || true)
if [ -z "$busybox" ] || ldd "$busybox" >/dev/null 2>&1; then
	echo "build.sh kubelet: no static busybox on PATH (the pods' image; Debian: apt-get install busybox-static)" >&2
	exit 2
fi
. "$here/k8s-release.sh"
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/dpctl-kubelet-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# image NAME TAG ROOTFS ENTRYPOINT_JSON OUT: a one-layer docker-save tarball.
image() {
	d=$work/image-$1
	mkdir -p "$d"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$3" -cf "$d/layer.tar" .
	layer=$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
	mkdir -p "$d/$layer"
	mv "$d/layer.tar" "$d/$layer/layer.tar"
	printf '{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z","config":{"Entrypoint":%s,"Env":["PATH=/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$4" "$layer" >"$d/config.json"
	config=$(sha256sum "$d/config.json" | cut -d' ' -f1)
	mv "$d/config.json" "$d/$config.json"
	printf '[{"Config":"%s.json","RepoTags":["dpctl.local/%s:%s"],"Layers":["%s/layer.tar"]}]' \
		"$config" "$1" "$2" "$layer" >"$d/manifest.json"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$d" -cf "$5.tmp" .
	mv "$5.tmp" "$5"
}

for r in $releases; do
	k8s_release kubelet "$r" "$work"
	bin=$out/kubelet-$r
	start=$(date +%s)
	if ! k8s_build "$here/referee" "$work/$r.mod" "$ldflags" -o "$bin.tmp" k8s.io/kubernetes/cmd/kubelet; then
		echo "build.sh kubelet: building kubelet $version failed" >&2
		exit 1
	fi
	mv "$bin.tmp" "$bin"
	echo "built $bin: $("$bin" --version) ($(($(date +%s) - start)) s, $(du -m "$bin" | cut -f1) MB)"
	if [ ! -f "$out/pause.tar" ]; then
		src=$(cd "$here/referee" && go list -mod=mod -modfile="$work/$r.mod" -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
		mkdir -p "$work/pause-root"
		# The flags of build/pause/Makefile (CFLAGS), version = the kubelet's.
		cc -Os -Wall -Werror -static -DVERSION="$version-dpctl" -o "$work/pause-root/pause" "$src"
		image pause 1 "$work/pause-root" '["/pause"]' "$out/pause.tar"
		echo "built $out/pause.tar (dpctl.local/pause:1, from $version's build/pause/linux/pause.c)"
	fi
	if [ $lean = yes ]; then
		go clean -cache -modcache
	fi
done
if [ ! -f "$out/busybox.tar" ]; then
	root=$work/busybox-root
	mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys" "$root/etc" "$root/tmp"
	cp "$busybox" "$root/bin/busybox"
	for applet in $("$busybox" --list); do
		[ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
	done
	image busybox 1 "$root" '["/bin/sh","-c"]' "$out/busybox.tar"
	echo "built $out/busybox.tar (dpctl.local/busybox:1, $("$busybox" | head -1 | cut -d' ' -f1-2))"
fi
