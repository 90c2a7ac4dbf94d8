#!/usr/bin/env bash
# soak-dra.sh: the DRA soak (BENCHMARKS.md): leaks that only show over time. `dpctl kubelet-sim --api-objects` (its
# API server in-process) and `dpctl dra mock --kubeconfig` (publishing its pool there and GETting
# each claim it prepares) as their own processes, and pods with a ResourceClaim of their own
# admitted and deleted in a loop: each admission stores its claim in the sim's API (the manifest
# wins), prepares it on the driver, and the deletion unprepares it and deletes the claim. Both
# processes' RSS is sampled; memory must stay flat (the last sample within 10% of the first one
# taken after the warm-up) with 0 errors, and both processes alive to the end.
#
#   scripts/soak-dra.sh [SECONDS=1200] [SAMPLE_SECONDS=60]
#
# DPCTL names the binary (default target/release/dpctl). Exit 0 when flat, 1 otherwise.
set -euo pipefail
dpctl=${DPCTL:-target/release/dpctl}
duration=${1:-1200}
every=${2:-60}
driver=gpu.example.com
root=$(mktemp -d /tmp/dsoak.XXXXXX)
sim_pid='' mock_pid=''
cleanup() {
    [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
    [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null && wait "$sim_pid" 2>/dev/null
    rm -rf "$root"
}
trap cleanup EXIT
mkdir -p "$root/device-plugins" "$root/plugins_registry"
cat >"$root/objects.yaml" <<EOF
apiVersion: v1
kind: Node
metadata: {name: node-1, uid: 7d3c4a10-0000-4000-8000-000000000001}
EOF
"$dpctl" kubelet-sim --dir "$root/device-plugins" --registry-dir "$root/plugins_registry" \
    --api-objects "$root/objects.yaml" -q >/dev/null 2>"$root/sim.log" &
sim_pid=$!
for _ in $(seq 100); do [ -S "$root/device-plugins/kubelet.sock" ] && [ -f "$root/kubeconfig" ] && break; sleep 0.1; done
"$dpctl" dra mock "$driver" --dir "$root" --kubeconfig "$root/kubeconfig" --node-name node-1 --devices 4 \
    -q >/dev/null 2>"$root/mock.log" &
mock_pid=$!
for _ in $(seq 100); do [ -S "$root/plugins_registry/$driver-reg.sock" ] && break; sleep 0.1; done
sleep 1 # the sim registers the driver (its plugin watcher) before the first admission

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
pod() { # pod NAME N: a pod with its own claim, allocated dev-(N mod 4) of pool-0
    local uid claim_uid
    uid=$(printf '00000000-0000-4000-8000-%012d' "$2")
    claim_uid=$(printf '00000000-0000-4000-9000-%012d' "$2")
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default, uid: $uid}
spec:
  nodeName: node-1
  resourceClaims: [{name: gpu, resourceClaimName: $1-claim}]
  containers: [{name: main, image: busybox, resources: {claims: [{name: gpu}]}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1-claim, namespace: default, uid: $claim_uid}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: $driver}}]
status:
  allocation:
    devices:
      results: [{request: gpu, driver: $driver, pool: pool-0, device: dev-$(($2 % 4))}]
  reservedFor: [{resource: pods, name: $1, uid: $uid}]
EOF
}

printf '%8s %12s %13s %9s %8s\n' 't (s)' 'sim RSS KiB' 'mock RSS KiB' admitted errors
start=$SECONDS next=0 i=0 admitted=0 errors=0 samples=()
while [ $((SECONDS - start)) -lt "$duration" ]; do
    if [ $((SECONDS - start)) -ge "$next" ]; then
        s=$(rss "$sim_pid") m=$(rss "$mock_pid")
        samples+=("$s $m")
        printf '%8d %12d %13d %9d %8d\n' $((SECONDS - start)) "$s" "$m" "$admitted" "$errors"
        next=$((next + every))
    fi
    i=$((i + 1))
    pod "soak-$i" "$i" >"$root/pod.yaml"
    if "$dpctl" kubelet-sim admit --dir "$root/device-plugins" "$root/pod.yaml" -q >/dev/null 2>"$root/err"; then
        admitted=$((admitted + 1))
    else
        errors=$((errors + 1)) && echo "admit soak-$i: $(head -3 "$root/err")" >&2
    fi
    "$dpctl" kubelet-sim delete --dir "$root/device-plugins" "soak-$i" -q >/dev/null 2>"$root/err" ||
        { errors=$((errors + 1)) && echo "delete soak-$i: $(head -3 "$root/err")" >&2; }
done
s=$(rss "$sim_pid") m=$(rss "$mock_pid")
samples+=("$s $m")
printf '%8d %12d %13d %9d %8d\n' $((SECONDS - start)) "$s" "$m" "$admitted" "$errors"
alive=yes
kill -0 "$sim_pid" 2>/dev/null && kill -0 "$mock_pid" 2>/dev/null || alive=no
# The baseline is the sample a tenth of the way in (after the allocators' warm-up).
read -r s0 m0 <<<"${samples[$((${#samples[@]} / 10))]}"
read -r s1 m1 <<<"${samples[$((${#samples[@]} - 1))]}"
flat() { [ "$2" -le $(($1 + $1 / 10)) ]; }
ok=0
flat "$s0" "$s1" && echo "PASS sim RSS flat: $s0 -> $s1 KiB" || { echo "FAIL sim RSS grew: $s0 -> $s1 KiB"; ok=1; }
flat "$m0" "$m1" && echo "PASS mock RSS flat: $m0 -> $m1 KiB" || { echo "FAIL mock RSS grew: $m0 -> $m1 KiB"; ok=1; }
[ "$errors" -eq 0 ] && echo "PASS 0 errors ($admitted admitted)" || { echo "FAIL $errors errors"; ok=1; }
[ "$alive" = yes ] && echo "PASS both processes alive" || { echo "FAIL a process died"; ok=1; }
exit $ok
