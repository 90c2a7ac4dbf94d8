//! The kubelet's admission and device-manager error texts, as one table:
//! kubelet-sim builds its rejections from these templates (so it says
//! exactly what the kubelet says), and `dpctl explain` matches what a user
//! pastes against the same templates (so the two cannot drift).
//!
//! A template holds `{}` where the kubelet formats a value in; the texts are
//! those of pkg/kubelet/cm/devicemanager/manager.go,
//! pkg/kubelet/cm/topologymanager/topology_manager.go and
//! pkg/kubelet/lifecycle/predicate.go (docs/kubelet-versions.md §5 for the
//! one text that changed between releases).

/// One kubelet text: what it means and how to confirm it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeletText {
    /// A stable machine name (`no-healthy-devices`).
    pub code: &'static str,
    /// The pod event's reason the text comes with (`UnexpectedAdmissionError`, …).
    pub reason: &'static str,
    /// The text, `{}` where a value goes.
    pub template: &'static str,
    /// The kubelet releases that say it.
    pub releases: &'static str,
    /// Why the kubelet says it.
    pub cause: &'static str,
    /// The dpctl command that confirms the cause.
    pub confirm: &'static str,
    /// kubelet-sim produces it (and a test proves `explain` knows it).
    pub played: bool,
}

/// The reason of a device manager failure during admission.
pub const UNEXPECTED_ADMISSION_ERROR: &str = "UnexpectedAdmissionError";

const ALL: &str = "1.26-1.38 (every release dpctl plays)";

/// `Allocate failed due to {}, which is unexpected`: the admission handler's
/// wrapper around every device manager error.
pub const WRAPPER: KubeletText = KubeletText {
    code: "allocate-failed-unexpected",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "Allocate failed due to {}, which is unexpected",
    releases: ALL,
    cause: "the device manager refused the pod at admission; the text inside says why",
    confirm: "dpctl doctor",
    played: true,
};

/// `cannot allocate unregistered device {}`.
pub const UNREGISTERED: KubeletText = KubeletText {
    code: "unregistered-device",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "cannot allocate unregistered device {}",
    releases: ALL,
    cause: "no plugin for this resource ever sent devices to this kubelet (never registered, or removed \
            after the grace period that follows a stream end), and no checkpoint restored it",
    confirm: "dpctl doctor (is the plugin's socket live, and does the kubelet-view finding list its devices?)",
    played: true,
};

/// `no healthy devices present; cannot allocate unhealthy devices {}`.
pub const NO_HEALTHY: KubeletText = KubeletText {
    code: "no-healthy-devices",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "no healthy devices present; cannot allocate unhealthy devices {}",
    releases: ALL,
    cause: "the kubelet counts no device of the resource as healthy: most often the kubelet restarted and the \
            plugin has not registered again yet (a kubelet starts with no healthy device for every resource its \
            checkpoint names, until that resource's plugin registers: pods admitted in that window fail), or its \
            ListAndWatch stream to the plugin ended (the kubelet then marks every device unhealthy and never \
            reopens the stream), or the plugin itself reports them Unhealthy",
    confirm: "dpctl doctor (it names a resource that has not registered again since the kubelet restarted, and its \
              kubelet-view finding compares the plugin's own report with GetAllocatableResources)",
    played: true,
};

/// `requested number of devices unavailable for {}. Requested: {}, Available: {}`.
pub const UNAVAILABLE: KubeletText = KubeletText {
    code: "devices-unavailable",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "requested number of devices unavailable for {}. Requested: {}, Available: {}",
    releases: ALL,
    cause: "fewer free healthy devices than the container asks for: other pods (or entries the checkpoint \
            restored) hold them, or some turned unhealthy after the scheduler counted them",
    confirm: "dpctl podresources free (and dpctl doctor for checkpoint entries of pods no longer listed)",
    played: true,
};

/// `unexpectedly allocated less resources than required. Requested: {}, Got: {}`.
pub const ALLOCATED_LESS: KubeletText = KubeletText {
    code: "allocated-less",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "unexpectedly allocated less resources than required. Requested: {}, Got: {}",
    releases: ALL,
    cause: "GetPreferredAllocation answered fewer (or unknown) device IDs than allocation_size, and the \
            kubelet could not fill the rest",
    confirm: "dpctl plugin call preferred --socket SOCKET --available ID,ID --size N (read-only for the plugin)",
    played: true,
};

/// `unknown Device Plugin {}`.
pub const UNKNOWN_PLUGIN: KubeletText = KubeletText {
    code: "unknown-device-plugin",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "unknown Device Plugin {}",
    releases: ALL,
    cause: "the kubelet knows the resource's devices (from the checkpoint, after a kubelet or node restart) \
            but no plugin has registered since: the plugin has not noticed the restart",
    confirm: "dpctl doctor (the socket finding shows whether the plugin is live; kubelet-sim restart reproduces it)",
    played: true,
};

/// `endpoint {} has been stopped`.
pub const ENDPOINT_STOPPED: KubeletText = KubeletText {
    code: "endpoint-stopped",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "endpoint {} has been stopped",
    releases: ALL,
    cause: "the plugin's ListAndWatch stream ended and the kubelet stopped its endpoint; it is not reopened \
            until the plugin registers again",
    confirm: "dpctl doctor (kubelet-view), then restart the plugin",
    played: true,
};

/// `rpc error: code = Canceled desc = grpc: the client connection is closing`:
/// a call on the plugin's connection after the kubelet closed it.
pub const CONNECTION_CLOSING: KubeletText = KubeletText {
    code: "plugin-connection-closing",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "rpc error: code = Canceled desc = grpc: the client connection is closing",
    releases: ALL,
    cause: "the plugin's ListAndWatch stream ended while the call (Allocate, GetPreferredAllocation, \
            PreStartContainer) was in flight: the kubelet closed its connection to the plugin \
            (plugin/v1beta1/handler.go runClient, client.go Disconnect), so the call failed without the plugin's \
            answer",
    confirm: "dpctl doctor (kubelet-view); the plugin's log says why its stream ended; restart the plugin",
    played: true,
};

/// `no containers return in allocation response {}`.
pub const EMPTY_ALLOCATE: KubeletText = KubeletText {
    code: "empty-allocate-response",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "no containers return in allocation response {}",
    releases: "1.26-1.38; up to 1.33 followed by the gogo dump &AllocateResponse{...}, from 1.34 by nothing",
    cause: "the plugin's Allocate answered with no container response",
    confirm: "dpctl plugin call allocate --socket SOCKET --devices ID (this allocates for real: use a device no pod holds)",
    played: true,
};

/// `device plugin GetPreferredAllocation rpc failed with err: {}`.
pub const PREFERRED_FAILED: KubeletText = KubeletText {
    code: "preferred-allocation-failed",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "device plugin GetPreferredAllocation rpc failed with err: {}",
    releases: ALL,
    cause: "the plugin advertises GetPreferredAllocation but the call failed",
    confirm: "dpctl plugin call preferred --socket SOCKET --available ID,ID --size N",
    played: true,
};

/// `rpc error: code = {} desc = {}`: the gRPC error of Allocate, as Go prints it.
pub const RPC_ERROR: KubeletText = KubeletText {
    code: "allocate-rpc-error",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "rpc error: code = {} desc = {}",
    releases: ALL,
    cause: "the plugin's Allocate returned this gRPC error (or the connection to its socket failed)",
    confirm: "dpctl plugin call allocate --socket SOCKET --devices ID (this allocates for real: use a device no pod \
              holds); dpctl smoke runs it against kubelet-sim instead",
    played: true,
};

/// `failed to write checkpoint file {}: {}`.
pub const CHECKPOINT_WRITE: KubeletText = KubeletText {
    code: "checkpoint-write-failed",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "failed to write checkpoint file {}: {}",
    releases: ALL,
    cause: "the kubelet could not write kubelet_internal_checkpoint after allocating (disk full, read-only \
            file system, permissions)",
    confirm: "dpctl doctor (dir and checkpoint findings)",
    played: true,
};

/// `previously allocated devices are no longer healthy; cannot allocate unhealthy devices {}`.
pub const PREVIOUSLY_ALLOCATED_UNHEALTHY: KubeletText = KubeletText {
    code: "previously-allocated-unhealthy",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "previously allocated devices are no longer healthy; cannot allocate unhealthy devices {}",
    releases: "1.34-1.38 (kubelet-sim plays it when a reboot admits a pod again on its kept devices)",
    cause: "a restarted container's devices, held from before, are now reported Unhealthy",
    confirm: "dpctl plugin watch --socket SOCKET (the health the plugin reports)",
    played: true,
};

/// `Resources cannot be allocated with Topology locality`.
pub const TOPOLOGY_AFFINITY: KubeletText = KubeletText {
    code: "topology-affinity",
    reason: "TopologyAffinityError",
    template: "Resources cannot be allocated with Topology locality",
    releases: ALL,
    cause: "the Topology Manager policy (single-numa-node or restricted) found no NUMA placement that satisfies \
            every resource of the container (devices, CPUs, memory) at once",
    confirm: "dpctl podresources allocatable -o wide (which NUMA nodes the devices sit on), then \
              dpctl kubelet-sim --topology-policy POLICY to replay the admission",
    played: true,
};

/// `Pod Scope Resources cannot be allocated with Topology locality`.
pub const TOPOLOGY_AFFINITY_POD: KubeletText = KubeletText {
    code: "topology-affinity-pod-scope",
    reason: "TopologyAffinityError",
    template: "Pod Scope Resources cannot be allocated with Topology locality",
    releases: "1.34-1.38 (read in their source; kubelet-sim does not play it)",
    cause: "as TopologyAffinityError, under topology-manager-scope=pod: the whole pod's resources on one placement",
    confirm: "dpctl podresources allocatable -o wide",
    played: false,
};

/// `Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}`.
pub const OUT_OF: KubeletText = KubeletText {
    code: "out-of-resource",
    reason: "OutOf<resource>",
    template: "Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}",
    releases: ALL,
    cause: "the kubelet's own count of the extended resource is below the request: with capacity 0 the plugin \
            never registered or its resource was removed after a stream end",
    confirm: "dpctl doctor; kubectl get node NAME -o jsonpath='{.status.allocatable}'",
    played: true,
};

/// `device plugin already connected: {}` (a Register refused, 1.37+).
pub const ALREADY_CONNECTED: KubeletText = KubeletText {
    code: "already-connected",
    reason: "Register refused",
    template: "device plugin already connected: {}",
    releases: "1.37+ (docs/kubelet-versions.md §2)",
    cause: "a second Register for the same resource and socket while the first connection lives",
    confirm: "dpctl kubelet-sim --kubelet-version 1.37 with the plugin, or dpctl smoke",
    played: true,
};

/// `Failed to prepare dynamic resources: {}` (event reason FailedPrepareDynamicResources).
pub const DRA_PREPARE: KubeletText = KubeletText {
    code: "dra-prepare-failed",
    reason: "FailedPrepareDynamicResources",
    template: "Failed to prepare dynamic resources: {}",
    releases: "1.34-1.38 (read in their source; kubelet-sim does not play DRA)",
    cause: "a DRA driver's NodePrepareResources failed (or the driver is not registered on this node); \
            this is not a device plugin",
    confirm: "ls /var/lib/kubelet/plugins_registry (the driver's socket); dpctl doctor lists its GetInfo",
    played: false,
};

/// `device plugin PreStartContainer rpc failed with err: {}` (container start).
pub const PRESTART_FAILED: KubeletText = KubeletText {
    code: "prestart-failed",
    reason: "CreateContainerConfigError",
    template: "device plugin PreStartContainer rpc failed with err: {}",
    releases: ALL,
    cause: "the pod was admitted, but the plugin (which asked for PreStartContainer) failed it when the container \
            was about to start",
    confirm: "dpctl plugin call prestart --socket SOCKET --devices ID",
    played: true,
};

/// `endpoint not found in cache for a registered resource: {}` (container start).
pub const PRESTART_NO_ENDPOINT: KubeletText = KubeletText {
    code: "endpoint-not-found",
    reason: "CreateContainerConfigError",
    template: "endpoint not found in cache for a registered resource: {}",
    releases: ALL,
    cause: "the container holds devices of a resource whose plugin is gone (its endpoint was removed) when the \
            kubelet wanted PreStartContainer or GetPreferredAllocation",
    confirm: "dpctl doctor (is the plugin's socket live?)",
    played: true,
};

/// `not enough cpus available to satisfy request: requested={}, available={}` (CPU manager, static policy).
pub const NOT_ENOUGH_CPUS: KubeletText = KubeletText {
    code: "not-enough-cpus",
    reason: UNEXPECTED_ADMISSION_ERROR,
    template: "not enough cpus available to satisfy request: requested={}, available={}",
    releases: ALL,
    cause: "the static CPU manager has fewer free exclusive CPUs (on the NUMA nodes the Topology Manager chose) \
            than a Guaranteed container asks for; not a device plugin problem",
    confirm: "dpctl podresources free (exclusive CPUs held by pods), dpctl podresources allocatable",
    played: true,
};

/// Every text, the wrapper first.
pub const ALL_TEXTS: &[KubeletText] = &[
    WRAPPER,
    UNREGISTERED,
    NO_HEALTHY,
    UNAVAILABLE,
    ALLOCATED_LESS,
    UNKNOWN_PLUGIN,
    ENDPOINT_STOPPED,
    EMPTY_ALLOCATE,
    PREFERRED_FAILED,
    CONNECTION_CLOSING,
    RPC_ERROR,
    CHECKPOINT_WRITE,
    PRESTART_FAILED,
    PRESTART_NO_ENDPOINT,
    PREVIOUSLY_ALLOCATED_UNHEALTHY,
    NOT_ENOUGH_CPUS,
    TOPOLOGY_AFFINITY,
    TOPOLOGY_AFFINITY_POD,
    OUT_OF,
    ALREADY_CONNECTED,
    DRA_PREPARE,
];

impl KubeletText {
    /// The text with `values` in its `{}` places, in order (a missing value
    /// leaves the place empty).
    pub fn fill(&self, values: &[&dyn std::fmt::Display]) -> String {
        let mut out = String::new();
        for (i, part) in self.template.split("{}").enumerate() {
            if i > 0
                && let Some(v) = values.get(i - 1)
            {
                out.push_str(&v.to_string());
            }
            out.push_str(part);
        }
        out
    }

    /// Where this text occurs in `input` (anywhere, as pasted from `kubectl
    /// describe` or a log line): the values in its places, or `None`.
    /// A value runs to the next literal part; the last one to the end of the
    /// line, less a trailing `, which is unexpected` or quote.
    pub fn find(&self, input: &str) -> Option<Vec<String>> {
        let parts: Vec<&str> = self.template.split("{}").collect();
        let first = parts.first().copied().unwrap_or_default();
        let mut from = input.find(first)? + first.len();
        let mut values = Vec::new();
        for (i, part) in parts.iter().enumerate().skip(1) {
            let rest = input.get(from..)?;
            let last = i == parts.len() - 1;
            let end = if part.is_empty() && last { line_end(rest) } else { rest.find(part)? };
            values.push(rest.get(..end)?.trim().to_string());
            from += end + part.len();
        }
        // A later, shorter text (the wrapper's inner text) must not match a
        // longer one by its first words only: the literal parts all matched.
        Some(values)
    }
}

/// Where a trailing value ends: the end of the line, before `, which is
/// unexpected` (the admission wrapper) or a closing quote.
fn line_end(rest: &str) -> usize {
    let line = rest.find('\n').unwrap_or(rest.len());
    let s = rest.get(..line).unwrap_or(rest);
    let mut end = s.find(", which is unexpected").unwrap_or(s.len());
    let trimmed = s.get(..end).unwrap_or(s).trim_end();
    if trimmed.ends_with('"') || trimmed.ends_with('\'') {
        end = trimmed.len() - 1;
    }
    end
}

/// The texts found in `input`, most specific first (the longest template),
/// with their values.
pub fn explain(input: &str) -> Vec<(KubeletText, Vec<String>)> {
    let mut found: Vec<(KubeletText, Vec<String>)> =
        ALL_TEXTS.iter().filter_map(|t| t.find(input).map(|v| (*t, v))).collect();
    // The wrapper says least; the rest by how much of the template is literal.
    let literal = |t: &KubeletText| t.template.replace("{}", "").len();
    found.sort_by_key(|(t, _)| (t.code == WRAPPER.code, std::cmp::Reverse(literal(t))));
    // "Pod Scope Resources cannot…" also contains the container-scope text.
    let codes: Vec<&str> = found.iter().map(|(t, _)| t.code).collect();
    if codes.contains(&TOPOLOGY_AFFINITY_POD.code) {
        found.retain(|(t, _)| t.code != TOPOLOGY_AFFINITY.code);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_release_dpctl_plays_follows_the_release_table() {
        use crate::kubelet_version::{NEWEST_MINOR, OLDEST_MINOR};
        assert_eq!(ALL, format!("1.{OLDEST_MINOR}-1.{NEWEST_MINOR} (every release dpctl plays)"));
    }

    #[test]
    fn every_text_is_found_with_its_values() {
        for t in ALL_TEXTS {
            let n = t.template.matches("{}").count();
            let values: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
            let refs: Vec<&dyn std::fmt::Display> = values.iter().map(|v| v as &dyn std::fmt::Display).collect();
            let text = t.fill(&refs);
            let found = explain(&format!("Warning  {}  3s  kubelet  {text}", t.reason));
            assert_eq!(found.first().map(|(f, _)| f.code), Some(t.code), "{text}");
            assert_eq!(found[0].1, values, "{text}");
        }
    }

    #[test]
    fn the_wrapper_comes_after_the_text_it_wraps() {
        let text = WRAPPER.fill(&[&NO_HEALTHY.fill(&[&"example.com/gpu"])]);
        let found = explain(&format!("UnexpectedAdmissionError: {text}"));
        let codes: Vec<&str> = found.iter().map(|(t, _)| t.code).collect();
        assert_eq!(codes, ["no-healthy-devices", "allocate-failed-unexpected"]);
        assert_eq!(found[0].1, ["example.com/gpu"]);
    }

    #[test]
    fn nothing_is_found_in_other_text() {
        assert!(explain("ImagePullBackOff: Back-off pulling image").is_empty());
        assert!(explain("").is_empty());
    }
}
