#!/bin/sh
# Smoke-test a device plugin's container image with dpctl, using docker or
# podman: `dpctl smoke` starts a kubelet-sim in a fresh directory and runs the
# container with that directory mounted where the plugin expects the kubelet's
# (/var/lib/kubelet/device-plugins), so the image runs unmodified.
#
#   examples/smoke-image.sh registry.example.com/vendor/device-plugin:1.2.3 [extra docker run args...]
#   DPCTL_ENGINE=podman examples/smoke-image.sh IMAGE
#
# Things that differ across the container boundary, and what this script does:
# - Socket ownership. The plugin creates its socket as the container's user
#   (root, unless the image says otherwise); a socket is only usable by users
#   who may write to it, so a non-root dpctl cannot dial a root-owned 0755
#   socket. Run dpctl as root (sudo, as here when not root), or run the
#   container as your user (--user "$(id -u):$(id -g)") if the plugin allows
#   it, or use rootless podman (the container's root is your user).
#   kubelet-sim's own kubelet.sock is owner-only (0600); root in the container
#   can use it, and so can a container started with --user of dpctl's user.
# - SELinux (Fedora, RHEL, CentOS Stream): a container may only use a mounted
#   host directory that carries a container label. `:z` relabels dpctl's
#   fresh directory (it is dpctl's, so that is safe); never relabel a real
#   node's /var/lib/kubelet. Without SELinux, `:z` is ignored.
# - Signals. dpctl stops the plugin with SIGTERM to `docker run`, which passes
#   it to the container's PID 1. A plugin running as PID 1 without a SIGTERM
#   handler ignores it: --init puts a small init in front that does not.
#   --name and the trap remove the container if dpctl has to SIGKILL the
#   client (after --grace).
# - Plugins registering through plugins_registry also get
#   {registry_dir}:/var/lib/kubelet/plugins_registry; kubelet-sim translates
#   the endpoint they announce (a path inside the container) to its own
#   directory.
set -eu

image=${1:?usage: $0 IMAGE [docker run args...]}
shift
engine=${DPCTL_ENGINE:-docker}
name=dpctl-smoke-$$
sudo=
if [ "$(id -u)" != 0 ] && [ "$engine" = docker ]; then
  sudo=sudo
fi

trap '$engine rm -f "$name" >/dev/null 2>&1 || true' EXIT

$sudo dpctl smoke \
  --junit smoke.xml \
  --log-dir smoke-logs \
  --register-timeout 60s \
  --grace 15s \
  -- "$engine" run --rm --init --name "$name" \
    -v '{dir}:/var/lib/kubelet/device-plugins:z' \
    -v '{registry_dir}:/var/lib/kubelet/plugins_registry:z' \
    "$@" "$image"
