#!/bin/sh
# A dpctl image without a registry or an image builder: a one-layer
# docker-save tarball holding a dpctl binary and the shared libraries it
# links (as `ldd` lists them), laid out like deploy/Containerfile's image
# (/usr/local/bin/dpctl, entrypoint dpctl, user 65532:65532).
#
#   deploy/image-tar.sh DPCTL OUT.tar [NAME:TAG]     (default dpctl.local/dpctl:dev)
#
# Load it on a node: `ctr -n k8s.io images import OUT.tar` (containerd),
# `docker load -i OUT.tar`, `podman load -i OUT.tar`, or
# `kind load image-archive OUT.tar`. A tag other than `latest` makes the
# manifests' default imagePullPolicy IfNotPresent: the node uses the loaded
# image and never pulls. tests/cluster_engine.rs runs deploy/ on a one-node
# cluster with it. Reproducible: fixed mtimes, owners and order.
set -eu
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	echo "usage: deploy/image-tar.sh DPCTL OUT.tar [NAME:TAG]" >&2
	exit 2
fi
bin=$1
out=$2
tag=${3:-dpctl.local/dpctl:dev}
case $tag in
*:*) ;;
*)
	echo "image-tar.sh: $tag: give NAME:TAG (e.g. dpctl.local/dpctl:dev)" >&2
	exit 2
	;;
esac
for tool in tar sha256sum ldd; do
	command -v $tool >/dev/null 2>&1 || {
		echo "image-tar.sh: $tool is not on PATH (coreutils, tar, libc-bin)" >&2
		exit 2
	}
done
if [ ! -x "$bin" ]; then
	echo "image-tar.sh: $bin is not an executable (build dpctl first: cargo build --release)" >&2
	exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/dpctl-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root/usr/local/bin" "$root/tmp" "$root/etc"
cp "$bin" "$root/usr/local/bin/dpctl"
# The libraries and the loader, each at its path (a static binary lists none).
for lib in $(ldd "$bin" 2>/dev/null | grep -o '/[^ ]*' || true); do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
image=$work/image
mkdir -p "$image"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -cf "$image/layer.tar" .
layer=$(sha256sum "$image/layer.tar" | cut -d' ' -f1)
mkdir -p "$image/$layer"
mv "$image/layer.tar" "$image/$layer/layer.tar"
printf '{"architecture":"%s","os":"linux","created":"1970-01-01T00:00:00Z","config":{"User":"65532:65532","Entrypoint":["/usr/local/bin/dpctl"],"Cmd":["--help"],"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
	"$(uname -m | sed 's/x86_64/amd64/; s/aarch64/arm64/')" "$layer" >"$image/config.json"
config=$(sha256sum "$image/config.json" | cut -d' ' -f1)
mv "$image/config.json" "$image/$config.json"
printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$config" "$tag" "$layer" >"$image/manifest.json"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$image" -cf "$out.tmp" .
mv "$out.tmp" "$out"
echo "built $out ($tag, $(du -m "$out" | cut -f1) MB)"
