//! What `dpctl kubelet-sim --help` says about the kubelet versions the sim
//! plays and where it deliberately differs from a real kubelet. It lives
//! beside the sim's code: change it when that behaviour changes.

/// The versions list and the deliberate differences, as `--help` shows them
/// (after the examples): the releases from the release table, then
/// [`DIFFERENCES`].
pub fn versions_and_differences() -> String {
    use crate::kubelet_version::KubeletVersion as V;
    let (newest, all) = (V::NEWEST, V::all());
    let pre = newest
        .pre_release()
        .map(|tag| {
            format!(
                " {newest} is the pre-release {tag}: played\n  only when named, labelled in every report, as {} (its referee plays the\n  scenario corpus as {}'s does).",
                V::DEFAULT,
                V::DEFAULT
            )
        })
        .unwrap_or_default();
    format!(
        "Kubelet versions (--kubelet-version, default {}; also v1.30 and 1.30.7):\n  {}, {}, ... \
         {newest}, master.{pre} master is {newest} plus what is known to be\n  merged after it; nothing known \
         changes the device manager, so master\n  plays {newest}. What changes between them \
         (docs/kubelet-versions.md):\n{DIFFERENCES}",
        V::DEFAULT,
        all[0],
        all[1]
    )
}

/// What changes between releases and where the sim deliberately differs
/// from a real kubelet. Each line states a behaviour of this module's code.
pub const DIFFERENCES: &str = "\
  - same resource registered again: 1.26-1.36 replace the plugin by name; the
    old connection stays open and its stream still feeds the resource, and
    when it ends the kubelet disconnects the NEW plugin (issue #121994).
    1.37+ keep one client per (name, socket) (PR #135437): when the current
    one's stream ends while another socket's endpoint is still stored, that
    one takes over (devices stay healthy, no grace period); they refuse a second
    Register on a live (name, socket) with \"device plugin already connected:
    <socket>\"; that refusal also drops the live client at that socket.
    A Register that fails its dial-back or GetDevicePluginOptions while the
    name has a live plugin: 1.26-1.36 drop the name's only client, so that
    plugin's stream end disconnects nothing (devices stay healthy, no grace
    period, Allocate still goes to it); 1.37+ drop every client at the failed
    Register's socket only.
  - restart cleanup: 1.26-1.32 delete every non-directory but the checkpoint;
    1.33+ (1.33 inferred) sockets only, following symlinks. Files that are not
    sockets are deleted only in a directory the sim created (smoke, demo) or
    with --emulate-cleanup; otherwise the report lists what that kubelet
    would have deleted. kubelet_internal_checkpoint is never deleted.
  - empty Allocate response: ...allocation response &AllocateResponse{...}
    up to 1.33, nothing after the trailing space from 1.34.
  - a plugin's Register deadline: 1.26-1.34 dial back under a background
    context, so a plugin whose call timed out can still end up registered;
    1.35+ abort the dial-back and options when the call ends, a
    failed Register like any other (1.35-1.36: a live plugin of the name is
    then untracked; 1.37+: one at the same socket).
  - Allocate's cdi_devices (added in 1.28): 1.26-1.27 drop them (the report
    warns cdi-devices-unknown; the cached answer and checkpoint lack them).
    1.28 keeps them in the cached answer and checkpoint but passes them to
    the runtime only with gate DevicePluginCDIDevices (alpha, off by default):
    the report warns cdi-devices-gated. 1.29+ pass them on.
  - sidecar (restartable init container) devices: up to 1.28 they join the
    init containers' reuse pool, so a later container may get the same device
    (as with SidecarContainers off, a plain init container); 1.29+ keep them.
  - PodResources: 1.26 has no rate limit and no Get (Unimplemented); Get is
    off by default 1.27-1.33 (\"PodResources API Get method disabled\");
    v1 List/Get show sidecars (first) from 1.30, regular containers only
    before; v1alpha1 regular containers only in every version.
  - v1 (pre-1.20) checkpoints are restored up to 1.30; 1.31+ read them as
    the JSON error a corrupt file is: nothing restored, the file kept (the
    kubelet's next write replaces it; the sim's only with --adopt-checkpoint).
  - plugins_registry retries: a registration failing before the device
    manager (dial, GetInfo, type, validation) is retried in every version,
    0.5 s later, doubling up to 2 min 2 s, while the socket exists. One the
    device manager refuses (dial-back, GetDevicePluginOptions): 1.26-1.35 keep
    it in the plugin manager's actual state and never retry it until the
    socket is re-created; 1.36+ (PR #133335) retry it with the same backoff,
    and deregister and retry a plugin whose success notification fails.
  - deleting a plugins_registry socket deregisters by name up to 1.36 (a
    same-named kubelet.sock plugin is disconnected too), by endpoint from 1.37.
  - device topology hints: up to 1.35 built over every machine NUMA node;
    1.36+ only over the nodes that host one of the resource's devices, so a
    mask with a node holding none of them is never offered.
  - --topology-manager-policy-options: max-allowable-numa-nodes exists from
    1.31 (before: unknown option); prefer-closest-numa-nodes is alpha (off by
    default) in 1.26-1.27, so those kubelets refuse it at startup, as the sim does.
  - DRA (docs/dra.md §6), with --registry-dir: 1.34+ play the kubelet's DRA
    manager: DRAPlugin registration (the driver's order picks v1.DRAPlugin or
    v1beta1.DRAPlugin; several instances per driver), pods with
    resourceClaims prepared per driver before their containers start (45 s),
    unprepared when the claim's last user is deleted, dra_manager_state in the
    parent of --registry-dir, PodResources dynamic_resources. ShareID is
    checkpointed from 1.35; a restored claim prepared again after a restart
    gets its devices appended in 1.34-1.36 (listed twice), replaced in 1.37.
    Health streams (NodeWatchResources): none by default in 1.34-1.35
    (ResourceHealthStatus off), v1alpha1 for every driver in 1.36, the
    preferred advertised service in 1.37; reopened every 5 s.
    KEP-5004 pods (status.extendedResourceClaimStatus): 1.36+ prepare the
    claim it names and skip the mapped extended resources in the device
    manager; 1.34-1.35 (DRAExtendedResource off) ignore the status.
    1.26-1.33 (DRA off by default) answer a DRAPlugin with \"no handler
    registered for plugin type: DRAPlugin\" and refuse pods with claims.
  Every version: the endpoint is joined like Go's filepath.Join (an absolute
  endpoint is appended to the directory); a pod arriving before the first
  ListAndWatch message is admitted with the request stripped (node status
  does not list the resource) or rejected OutOf<resource> (it lists it at 0);
  PreStartContainer runs at every container start (restart-container); a
  stream end closes the plugin's connection, so a call in flight then fails
  (\"grpc: the client connection is closing\") and a later one is refused
  (\"endpoint ... has been stopped\"); a device limit of 0 still gets topology hints (every mask, single nodes
  preferred), which can make the merge non-preferred.

Where the sim deliberately differs from a real kubelet:
  - Topology Manager (--topology-manager-policy, default none) and static CPU
    manager follow the kubelet (v1.26+ logic). Within an aligned, unaligned or
    no-topology set the sim takes devices in the plugin's order (the kubelet:
    random map order). CPUs are picked with a simplified takeByTopology (one
    socket, no SMT). The memory manager is not simulated: it gives no hints and
    PodResources has no memory. The machine is simulated (--numa-nodes,
    --cpus-per-numa, --numa-distances), not read from the host; at most 16 NUMA
    nodes, and a merge of more than 10,000,000 hint permutations is refused
    (the kubelet would take minutes).
  - admit --dry-run judges a pod without Allocate, GetPreferredAllocation or
    PreStartContainer: where the kubelet would ask GetPreferredAllocation the
    report shows the request, and the sim picks in the plugin's order.
  - GetDevicePluginOptions, GetPreferredAllocation and Allocate have a deadline
    (--rpc-timeout); the kubelet sets none, so a hung plugin hangs admission.
  - At start the sim leaves sockets something still answers on in place (the
    kubelet deletes them too); --force deletes them. `restart` deletes them
    all, as a restarting kubelet does.
  - Behaviour the versions table marks as version-specific but the sim does not
    play: 1.31.0's sockets-only cleanup (later 1.31.x are played), 1.26.0-1.26.4
    (no device check at a restart's re-admission; 1.26 plays 1.26.5+), 1.34's
    pick of a restarted container's exited instance after a restart, List of
    active pods only (1.34+; the sim keeps no terminated pods), the
    SidecarContainers gate (off by default in 1.28), the healthz check, ResourceHealthStatus
    (1.31+ alpha, on from 1.36: device health in pod status), the <=1.28 kubelet panic when
    a plugin disconnects after its endpoint was dropped, GetAllocatableResources' 1.26-1.27 feature gate
    (always on here). Pod-level cpu_ids/memory in PodResources (1.37+) are
    filled only with gate PodLevelResourceManagers (beta, off by default), so
    they stay empty here as on a default node. No observable difference, so not played: the checksum
    printer (same bytes), gogo vs protoc-gen-go types (same wire), the
    plugins_registry UUID vs timestamp (deregister, register either way).
  - plugins_registry: the sim's GetInfo and NotifyRegistrationStatus calls
    send :authority localhost; the kubelet's plugin watcher sets no authority
    and sends the socket path (docs/kubelet-versions.md §9), which h2-based servers
    (tonic) reject, so a tonic plugin registering that way works here but not
    under a real kubelet (its device-plugin dial-back sends localhost).
  - plugins_registry: a deleted socket deregisters at once (the kubelet's
    reconciler runs every 1 s); dot-named sockets inside dot-named directories
    found by the first walk are ignored too. Retries wait their backoff
    exactly, not for the reconciler's next 1 s pass.
  - The checkpoint is written as the kubelet writes it during admission (after
    each container's devices, before the answer), and more durably: the
    directory is fsynced after the rename, so an answered admission survives
    a kill or a power cut. Writes after ListAndWatch updates happen at
    once, as the kubelet's. A deletion is written within 100 ms (the kubelet
    writes nothing then; its next write drops the pod): after a restart the
    sim cannot tell a deleted pod from a running one.
  - At most 1,024 distinct resource names are tracked (a kubelet has no limit;
    each name costs a device table, a connection and a stream): a Register of
    a new name over it is refused with ResourceExhausted and a text saying
    so, in the event and counted in `status`; a known name still registers.
  - A checkpoint the sim did not write (a real kubelet's) is read, verified and
    restored but never changed, unless --adopt-checkpoint; the kubelet rewrites it.
    The sim then keeps the pods it admits in <dir>/.dpctl/kubelet-sim-allocations
    (same format), written before each answer and restored at start; the
    admission's answer and `status` name the file.
    A symbolic link there is never replaced, even adopted (the kubelet renames
    its new file over the link).
  - Checkpoint entries of pods the sim never admitted (docs/kubelet-versions.md §7) are
    shown by UID in status and count as in use until `delete UID`; they are not
    in PodResources (the sim's pod manager does not know them). A kubelet lists
    such pods when its API server still runs them, and frees the devices of pods
    it no longer has at the next admission.
  - A container whose resource has no cached devices at start gets no late
    Allocate.
  - Capacity drops to 0 the moment the grace period after a stream end passes;
    the kubelet drops it at the first node-status update (every 10 s by
    default) after the 5 minutes.
  - The static CPU manager's reconcile loop (every 10 s, the kubelet's
    --cpu-manager-reconcile-period) is not played: stale exclusive CPUs are
    dropped at the next admission only (the kubelet's Allocate does that
    first too), so 1.34's PodResources Get of a rejected pod shows its
    exclusive CPUs until then, where a kubelet drops them within 10 s.
  - Rejected pods are not kept, so PodResources never lists them.
  - kubelet.sock is created owner-only (0600); the kubelet's socket mode follows its umask.
  - `reboot` (docs/kubelet-versions.md §10): a pod that keeps its checkpointed
    devices gets no PreStartContainer and no Topology Manager check for them
    (the kubelet runs both when the containers start again); a pod with none
    is admitted as a new pod, and may get devices of a pod not admitted again
    yet, or of one rejected meanwhile, which the kubelet keeps in use until
    its pod sources are ready.
  - `restart`'s re-admission of running pods (docs/kubelet-versions.md §5)
    judges the device manager's part only: no Topology Manager merge, CPU
    manager or node-resources check (a kubelet runs them too; with the
    devices kept they pass under policy none).
  - A restart (and the one inside `reboot`) writes the checkpoint; the kubelet
    writes none then. So a plugin already stopped leaves its resource with no
    devices in the sim's file, where the kubelet's still lists the devices of
    its last write (scenario reboot-plugin-late).
  - DRA: claims are read from the pod's manifest or, with --api-objects, from
    the sim's own in-process API server (or, read-only, a plain-HTTP API
    server with --kubeconfig: no TLS); a claim in the manifest wins over the
    objects file and is stored there first (the kubelet reads only the API
    server). With --assume-claims-reserved (off by default) a manifest's claim
    without status.reservedFor counts as reserved for the pod; drivers are
    called in name order (the kubelet: random map order) and the newest
    instance is used whether connected or not; a failed prepare is not retried
    (the kubelet retries at its next sync); device health from the health
    streams shows in status and events, not in pod status. With
    --api-objects the node's ResourceSlices are deleted at start and restart,
    and a driver's --dra-wiping-delay (the kubelet's fixed 30 s) after its
    last registration socket went. KEP-5004 pods (extendedResourceClaimStatus)
    are played from 1.36 (docs/dra.md §8); a mapped resource is dropped from
    the pod's limits before the device manager sees it, so status and
    PodResources show no device-plugin entry for it.";
