//! Which kubelet release dpctl plays or judges against (`--kubelet-version`): one
//! [`KubeletVersion`] per release from 1.26 to 1.37 plus `master`, with one
//! method per device-manager behaviour that changed between them. Every
//! method names the releases it holds for and, for the newer ones, the
//! kubelet file or PR it was read from; where a release is inferred or
//! unverified, the method says so. `master` is 1.37 plus what is known to be
//! merged after it; nothing known differs yet, so it plays 1.37.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::invalid::{Invalid, Result};

mod cleanup;
mod dra;
mod policy_options;
pub use cleanup::{Cleanup, CleanupRule, cleanup_dir};
pub use dra::{DRA_RULES, ReleaseRule, dra_rules_text};

/// The oldest release the sim plays.
pub const OLDEST_MINOR: u8 = 26;
/// The newest release (the default).
pub const NEWEST_MINOR: u8 = 37;
/// [`NEWEST_MINOR`] as `--kubelet-version` writes it: the flags' default
/// (a unit test holds the two together).
pub const NEWEST_NAME: &str = "1.37";

/// A kubelet release (minor version; patch releases are treated as their
/// `.0`, except where a method says otherwise) or `master`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KubeletVersion {
    /// `1.<minor>`, 26 ..= 37.
    Release(u8),
    /// The development branch after 1.37: 1.37 plus what is known to be
    /// merged since (nothing the device manager shows, so far).
    Master,
}

impl Default for KubeletVersion {
    fn default() -> Self {
        KubeletVersion::NEWEST
    }
}

impl KubeletVersion {
    /// The newest release: the default.
    pub const NEWEST: KubeletVersion = KubeletVersion::Release(NEWEST_MINOR);

    /// Every version the sim plays, oldest first.
    pub fn all() -> Vec<KubeletVersion> {
        (OLDEST_MINOR..=NEWEST_MINOR).map(KubeletVersion::Release).chain([KubeletVersion::Master]).collect()
    }

    /// The release's `1.NN` number, `master` being the release after the
    /// newest: the name the referee binaries and kubelet builds carry.
    pub fn numbered(self) -> String {
        match self {
            KubeletVersion::Release(m) => format!("1.{m}"),
            KubeletVersion::Master => format!("1.{}", NEWEST_MINOR + 1),
        }
    }

    /// The accepted names, for errors and `--help`: `1.26, 1.27, …, master`.
    pub fn valid_list() -> String {
        Self::all().iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    }

    /// The accepted forms of `--kubelet-version` where it takes several
    /// releases, for errors and `--help`.
    pub const LIST_FORMS: &'static str = "a release (1.30, v1.30.7, master), a comma-separated list \
         (1.28,1.32,1.36) or a range of every release in between, both ends included (1.28-1.37 or 1.28..1.37)";

    /// Parses one release: `1.30`, `v1.30`, `1.30.7` (a patch maps to its
    /// minor), the same with a pre-release or build suffix
    /// (`v1.30.7-eks-59bf375`, `v1.31.3+k3s1`: a node's `kubeletVersion` on
    /// managed clusters) or `master`. A range (`1.28-1.37`, `1.28..1.37`)
    /// names several releases and is refused here: only [`Self::parse_list`]
    /// expands it. Anything else is bad input naming the valid list.
    pub fn parse(s: &str) -> Result<KubeletVersion> {
        let place = format!("--kubelet-version {}", crate::text::shorten(s, 40));
        if let Some((from, to)) = range_ends(s) {
            let n = Self::range(&place, from, to).map_or_else(|_| "several".to_string(), |r| r.len().to_string());
            return Err(Invalid::new(
                &place,
                format!(
                    "a range names {n} releases, and this takes one: a release dpctl plays ({}; also v1.30 or \
                     1.30.7)",
                    Self::valid_list()
                ),
            ));
        }
        Self::parse_one(&place, s)
    }

    /// One release, ranges already set apart.
    fn parse_one(place: &str, s: &str) -> Result<KubeletVersion> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("master") {
            return Ok(KubeletVersion::Master);
        }
        let bad = || {
            Invalid::new(
                place,
                format!("not a kubelet version dpctl plays; valid: {} (also v1.30 or 1.30.7)", Self::valid_list()),
            )
        };
        let t = t.strip_prefix('v').or_else(|| t.strip_prefix('V')).unwrap_or(t);
        // A pre-release or build suffix, as managed clusters report
        // (`v1.30.7-eks-59bf375`, `v1.31.3+k3s1`, `v1.29.8-gke.1031000`),
        // is release 1.N: semver's identifiers, not empty.
        let t = match t.find(['-', '+']) {
            Some(at) => {
                let suffix = &t[at + 1..];
                let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+');
                if suffix.is_empty() || !suffix.bytes().all(ok) {
                    return Err(bad());
                }
                &t[..at]
            }
            None => t,
        };
        let mut parts = t.split('.');
        let (Some(major), Some(minor)) = (parts.next(), parts.next()) else { return Err(bad()) };
        let patch = parts.next();
        if parts.next().is_some() || major != "1" {
            return Err(bad());
        }
        let digits = |p: &str| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit());
        if !digits(minor) || patch.is_some_and(|p| !digits(p)) {
            return Err(bad());
        }
        let minor: u8 = minor.parse().map_err(|_| bad())?;
        if !(OLDEST_MINOR..=NEWEST_MINOR).contains(&minor) {
            return Err(bad());
        }
        Ok(KubeletVersion::Release(minor))
    }

    /// Every release from `from` to `to`, both included.
    fn range(place: &str, from: &str, to: &str) -> Result<Vec<KubeletVersion>> {
        let bad = |why: String| Invalid::new(place, format!("{why}; accepted: {}", Self::LIST_FORMS));
        let end = |e: &str| {
            // An end that is itself a range (`1.28-1.37-1.30`) is no release.
            let one = if range_ends(e).is_some() { Err(()) } else { Self::parse_one(place, e).map_err(|_| ()) };
            one.map_err(|()| {
                bad(format!(
                    "{:?} is not a release dpctl plays ({})",
                    crate::text::shorten(e.trim(), 20),
                    Self::valid_list()
                ))
            })
        };
        let (a, b) = (end(from)?, end(to)?);
        if a > b {
            return Err(bad(format!("the range goes from {a} down to {b}: write the older release first ({b}-{a})")));
        }
        Ok(Self::all().into_iter().filter(|v| *v >= a && *v <= b).collect())
    }

    /// Parses `--kubelet-version` where it takes several releases: a
    /// comma-separated list of releases and ranges (`1.28,1.32`,
    /// `1.28-1.37`, `1.28..1.37`: a range is every release dpctl plays in
    /// between, both ends included), keeping the order given and dropping
    /// repeats. The one parser of the flag for every command that runs
    /// several releases (`smoke`, `dra smoke`, `scenario run|diff`).
    pub fn parse_list(s: &str) -> Result<Vec<KubeletVersion>> {
        let place = format!("--kubelet-version {}", crate::text::shorten(s, 40));
        let mut out = Vec::new();
        for part in s.split(',') {
            if part.trim().is_empty() {
                return Err(Invalid::new(
                    &place,
                    format!("an empty entry in the list; accepted: {}", Self::LIST_FORMS),
                ));
            }
            let versions = match range_ends(part) {
                Some((from, to)) => Self::range(&place, from, to)?,
                None => vec![Self::parse_one(&place, part)?],
            };
            for v in versions {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
        Ok(out)
    }

    /// The minor number; `master` counts as one past the newest release.
    fn minor(self) -> u8 {
        match self {
            KubeletVersion::Release(m) => m,
            KubeletVersion::Master => NEWEST_MINOR + 1,
        }
    }

    /// True for this minor release or any later one (master included).
    /// Private to the release table: every other module asks a named
    /// predicate (tests/layers.rs checks that no comparison leaks out).
    pub(crate) fn at_least(self, minor: u8) -> bool {
        self.minor() >= minor
    }

    /// docs/kubelet-versions.md §2: up to 1.36 a second `Register` of a registered resource replaces
    /// the client in a map keyed by name, and the old stream's end then
    /// disconnects the new client (issue #121994). 1.37 (PR #135437,
    /// `pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go`) keeps a list
    /// of clients per name, matched by socket path.
    pub fn replaces_by_name(self) -> bool {
        !self.at_least(37)
    }

    /// 1.37 (PR #135437, `PluginConnected` in
    /// `pkg/kubelet/cm/devicemanager/manager.go`): a second registration at
    /// the socket path of an endpoint still in the endpoint store is refused
    /// with `device plugin already connected: <socket path>`.
    pub fn rejects_duplicate_socket(self) -> bool {
        self.at_least(37)
    }

    /// docs/kubelet-versions.md §4: what the kubelet deletes from the device-plugins directory at
    /// start. 1.26–1.32 (including later 1.31.x, after the PR #126976
    /// revert): every non-directory; 1.33 and later: sockets only (PR
    /// #130187; 1.33 rather than 1.34 is inferred). 1.31.0's brief
    /// sockets-only rule is not played (patches are treated as equal).
    pub fn cleanup_rule(self) -> CleanupRule {
        if self.at_least(33) { CleanupRule::SocketsOnly } else { CleanupRule::AllNonDirectories }
    }

    /// docs/kubelet-versions.md §5: the text after `no containers return in allocation response `
    /// for an empty `AllocateResponse`: the gogo `String()` dump up to 1.33,
    /// nothing from 1.34 (protoc-gen-go, KL `3c7be05`).
    pub fn empty_allocate_text(self) -> &'static str {
        if self.at_least(34) { "" } else { "&AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}" }
    }

    /// docs/protocol.md §1.2: `ContainerAllocateResponse.cdi_devices` (field 5)
    /// was added in 1.28; the generated code of 1.26 and 1.27 does not know
    /// the field, so those kubelets drop the CDI devices a plugin returns.
    pub fn knows_cdi_devices(self) -> bool {
        self.at_least(28)
    }

    /// The CDI names of an Allocate answer reach the container runtime: 1.29+
    /// (gate `DevicePluginCDIDevices` beta and on 1.29-1.30, GA 1.31). In
    /// 1.28 the gate is alpha and off, so `deviceRunContainerOptions`
    /// (`pkg/kubelet/cm/devicemanager/pod_devices.go`, PR #118254) passes
    /// none on, although the answer (field 5 included) is kept and
    /// checkpointed; 1.26-1.27 do not know the field at all.
    pub fn passes_cdi_devices_to_runtime(self) -> bool {
        self.at_least(29)
    }

    /// docs/kubelet-versions.md §5: up to 1.28 a restartable init container's (sidecar's) devices go
    /// into the reuse pool like a plain init container's; 1.29+ keeps them
    /// out (PR #120461).
    pub fn reuses_sidecar_devices(self) -> bool {
        !self.at_least(29)
    }

    /// docs/kubelet-versions.md §5: 1.27+ (`isContainerAlreadyRunning`): while sources are not ready
    /// after a kubelet restart, a running container gets neither
    /// GetPreferredAllocation nor Allocate. 1.26 allocates again.
    pub fn skips_running_containers_after_restart(self) -> bool {
        self.at_least(27)
    }

    /// docs/kubelet-versions.md §7: up to 1.30 a checkpoint that is not v2 is read as the pre-1.20 v1
    /// format; 1.31+ has no fallback.
    pub fn reads_v1_checkpoint(self) -> bool {
        !self.at_least(31)
    }

    /// docs/kubelet-versions.md §8: PodResources `Get` is served by default (gate
    /// `KubeletPodResourcesGet` beta and on from 1.34, GA in 1.36, no gate on
    /// master; alpha and off 1.27–1.33; absent in 1.26).
    pub fn podresources_get_default(self) -> bool {
        self.at_least(34)
    }

    /// docs/kubelet-versions.md §8: the v1 PodResources service has a `Get` method (added in 1.27;
    /// the summary table's "–" for 1.26).
    pub fn podresources_has_get(self) -> bool {
        self.at_least(27)
    }

    /// docs/kubelet-versions.md §8: the PodResources rate limit (100 qps, burst 10) exists from 1.27
    /// (PR #116459; a 1.26.x backport is unverified).
    pub fn podresources_rate_limited(self) -> bool {
        self.at_least(27)
    }

    /// docs/kubelet-versions.md §8: `Get` finds a pod the kubelet rejected (the pod manager keeps
    /// it, phase Failed) up to 1.34, whose `kubeletPodsProvider.GetPodByName`
    /// (pkg/kubelet/kubelet.go) returns the pod manager's pod unfiltered; 1.35+ filter inactive
    /// pods (`isPodInactive`) and answer "not found". Played against the referee 1.34-1.38.
    pub fn podresources_get_finds_rejected(self) -> bool {
        !self.at_least(35)
    }

    /// docs/kubelet-versions.md §8: `List`/`Get` include restartable init containers: 1.30–1.32 when
    /// `SidecarContainers` is on (beta, on by default), always from 1.33.
    pub fn list_includes_sidecars(self) -> bool {
        self.at_least(30)
    }

    /// docs/kubelet-versions.md §1: from 1.35 (PR #134293; read in the 1.34.4 and 1.35.4 code) the Register
    /// call's context bounds the dial-back and GetDevicePluginOptions, so a
    /// plugin's Register deadline aborts the kubelet's side. Before, the
    /// kubelet used a background context.
    pub fn register_context_bounds_dial(self) -> bool {
        self.at_least(35)
    }

    /// docs/kubelet-versions.md §6: `DeRegisterPlugin` of a deleted plugins_registry socket goes by
    /// name up to 1.36 (it can disconnect a same-named client registered
    /// through kubelet.sock), by (name, endpoint) from 1.37 (PR #135437).
    pub fn deregisters_by_endpoint(self) -> bool {
        self.at_least(37)
    }

    /// A plugins_registry plugin the device manager refused (its dial-back or
    /// GetDevicePluginOptions failed) is taken out of the plugin manager's
    /// actual state and tried again: 1.36+ (PR #133335,
    /// `pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go`;
    /// also deregisters a plugin whose success notification fails).
    /// 1.26-1.35 leave it in the actual state, so it is never retried until
    /// its registration socket is re-created.
    pub fn retries_refused_registry_plugins(self) -> bool {
        self.at_least(36)
    }

    /// Device topology hints are built over the NUMA nodes that host the
    /// resource's devices only: 1.36+ (`deviceNUMANodes` in
    /// pkg/kubelet/cm/devicemanager/topology_hints.go of v1.36.3; absent in
    /// v1.35.4). Up to 1.35 over every machine node, so masks with nodes that
    /// host none of its devices are offered too (never preferred).
    pub fn device_hints_only_on_device_nodes(self) -> bool {
        self.at_least(36)
    }
}

/// The two ends of a range (`1.28..1.37`, or `1.28-1.37` where the text
/// after the dash is itself a release, not a pre-release suffix such as
/// `-eks-59bf375` or `-rc.1`), or `None` for a single release.
fn range_ends(s: &str) -> Option<(&str, &str)> {
    if let Some(ends) = s.split_once("..") {
        return Some(ends);
    }
    let (from, to) = s.split_once('-')?;
    let t = to.trim();
    let t = t.strip_prefix('v').or_else(|| t.strip_prefix('V')).unwrap_or(t);
    let names_release = t.eq_ignore_ascii_case("master")
        || t.strip_prefix("1.").is_some_and(|m| m.bytes().next().is_some_and(|b| b.is_ascii_digit()));
    names_release.then_some((from, to))
}

impl fmt::Display for KubeletVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeletVersion::Release(m) => write!(f, "1.{m}"),
            KubeletVersion::Master => f.write_str("master"),
        }
    }
}

/// For a command-line parser: the error is the message alone (the parser
/// names the flag and the value itself).
impl FromStr for KubeletVersion {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        KubeletVersion::parse(s).map_err(|e| e.message)
    }
}

impl Serialize for KubeletVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KubeletVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        // A referee running the kubelet's own code may play the release after
        // the newest one the sim names, which the sim plays as `master`.
        if s.trim() == format!("1.{}", NEWEST_MINOR + 1) {
            return Ok(KubeletVersion::Master);
        }
        KubeletVersion::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The flags' default is the newest release, and master is numbered as
    // the release after it.
    #[test]
    fn the_default_name_is_the_newest_release() {
        assert_eq!(NEWEST_NAME, KubeletVersion::NEWEST.to_string());
        assert_eq!(KubeletVersion::parse(NEWEST_NAME).unwrap(), KubeletVersion::NEWEST);
        assert_eq!(KubeletVersion::Release(34).numbered(), "1.34");
        assert_eq!(KubeletVersion::Master.numbered(), format!("1.{}", NEWEST_MINOR + 1));
    }

    // Every release: the minor and the patch are 1 to 4 digits each; the
    // cleanup rules read as `doctor` prints them.
    #[test]
    fn minor_and_patch_must_be_short_digit_runs() {
        assert_eq!(KubeletVersion::parse("1.30.1234").unwrap(), KubeletVersion::Release(30));
        for bad in ["1.30.x", "1.30.1x", "1.30.12345", "1.30.", "1.3x", "1.x.1"] {
            assert!(KubeletVersion::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(CleanupRule::AllNonDirectories.to_string(), "every non-directory");
        assert_eq!(CleanupRule::SocketsOnly.to_string(), "sockets only");
        // master is past the newest release, whatever that is.
        assert!(KubeletVersion::Master.at_least(NEWEST_MINOR + 1));
        assert!(!KubeletVersion::NEWEST.at_least(NEWEST_MINOR + 1));
        // PodResources Get: 1.27 on.
        assert!(!KubeletVersion::Release(26).podresources_has_get());
        assert!(KubeletVersion::Release(27).podresources_has_get());
        // The flag parser's view: the message alone.
        assert_eq!("v1.30.2".parse::<KubeletVersion>(), Ok(KubeletVersion::Release(30)));
        assert!("1.30.x".parse::<KubeletVersion>().unwrap_err().contains("1.26, 1.27"));
    }

    #[test]
    fn parses_releases_prefixes_patches_and_master() {
        assert_eq!(KubeletVersion::parse("1.26").unwrap(), KubeletVersion::Release(26));
        assert_eq!(KubeletVersion::parse("v1.30").unwrap(), KubeletVersion::Release(30));
        assert_eq!(KubeletVersion::parse("1.30.7").unwrap(), KubeletVersion::Release(30));
        assert_eq!(KubeletVersion::parse(" master ").unwrap(), KubeletVersion::Master);
        assert_eq!(KubeletVersion::parse("v1.37.2").unwrap(), KubeletVersion::Release(37));
        assert_eq!(KubeletVersion::default(), KubeletVersion::Release(37));
        assert_eq!(KubeletVersion::all().len(), 13);
        assert_eq!(KubeletVersion::Master.to_string(), "master");
    }

    // README's `kubectl debug ... dpctl doctor --kubelet-version "$(kubectl get
    // node ... kubeletVersion)"`: managed clusters report a suffix (EKS, k3s, GKE).
    #[test]
    fn managed_cluster_version_strings_are_their_release() {
        for (s, minor) in [
            ("v1.30.7-eks-59bf375", 30),
            ("v1.31.3+k3s1", 31),
            ("v1.29.8-gke.1031000", 29),
            ("1.33-rc.1", 33),
            ("v1.28.15+rke2r1", 28),
        ] {
            assert_eq!(KubeletVersion::parse(s).unwrap(), KubeletVersion::Release(minor), "{s}");
        }
        for bad in ["v1.30.7-", "v1.30+", "v1.30.7-eks 1", "v1.30.7-eks/x", "-eks", "v1-eks", "v1.x-eks", "v1.25.1-eks"]
        {
            assert!(KubeletVersion::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rejects_others_naming_the_valid_list() {
        // A 100,000-character value is not echoed back whole.
        let e = KubeletVersion::parse(&"1".repeat(100_000)).unwrap_err().to_string();
        assert!(e.len() < 400, "{} bytes", e.len());
        for bad in ["1.25", "1.38", "2.30", "1", "1.30.7.1", "1.x", "", "1.-3", "v", "1.030000"] {
            let e = KubeletVersion::parse(bad).unwrap_err();
            let text = e.to_string();
            assert!(text.contains("1.26, 1.27") && text.contains("1.37, master"), "{bad}: {text}");
        }
        let e = KubeletVersion::parse_list("1.28,,1.36").unwrap_err().to_string();
        assert!(e.contains("empty entry") && e.contains(KubeletVersion::LIST_FORMS), "{e}");
        assert_eq!(
            KubeletVersion::parse_list("1.28,1.32,1.36,1.28").unwrap(),
            [KubeletVersion::Release(28), KubeletVersion::Release(32), KubeletVersion::Release(36)]
        );
    }

    // Nothing that names two releases runs one: a range expands to every
    // release in between (both forms), or is refused naming the forms; the
    // one-release parser refuses it instead of reading `-1.37` as a
    // pre-release suffix (which ran 1.28 alone).
    #[test]
    fn ranges_expand_to_every_release_in_between_or_are_refused() {
        let v = KubeletVersion::Release;
        let all: Vec<_> = (28..=37).map(v).collect();
        assert_eq!(KubeletVersion::parse_list("1.28-1.37").unwrap(), all);
        assert_eq!(KubeletVersion::parse_list("1.28..1.37").unwrap(), all);
        assert_eq!(KubeletVersion::parse_list("v1.28 - v1.37").unwrap(), all);
        assert_eq!(KubeletVersion::parse_list("1.36-master").unwrap(), [v(36), v(37), KubeletVersion::Master]);
        assert_eq!(KubeletVersion::parse_list("1.26,1.34-1.35,1.35").unwrap(), [v(26), v(34), v(35)]);
        assert_eq!(KubeletVersion::parse_list("1.30-1.30").unwrap(), [v(30)]);
        // Managed clusters' suffixes are still one release.
        assert_eq!(KubeletVersion::parse_list("v1.30.7-eks-59bf375,1.33-rc.1").unwrap(), [v(30), v(33)]);
        for (bad, says) in [
            ("1.37-1.28", "write the older release first (1.28-1.37)"),
            ("1.25-1.30", "\"1.25\" is not a release dpctl plays"),
            ("1.30..1.38", "\"1.38\" is not a release dpctl plays"),
            ("1.30..", "\"\" is not a release"),
            ("1.28-1.37-1.30", "is not a release"),
        ] {
            let e = KubeletVersion::parse_list(bad).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(says) && text.contains("1.28-1.37 or 1.28..1.37"), "{bad}: {text}");
        }
        // Where one release is taken, a range is refused, naming how many it names.
        for one in ["1.28-1.37", "1.28..1.37"] {
            let text = KubeletVersion::parse(one).unwrap_err().to_string();
            assert!(text.contains("a range names 10 releases, and this takes one"), "{text}");
        }
        // The release after the newest is not a name: master is.
        assert!(KubeletVersion::parse_list("1.34,1.38").unwrap_err().to_string().contains("1.37, master"));
    }

    #[test]
    fn order_puts_master_last() {
        assert!(KubeletVersion::Release(37) < KubeletVersion::Master);
        assert!(KubeletVersion::Release(26) < KubeletVersion::Release(33));
    }

    /// docs/kubelet-versions.md summary table, one assertion per row that the sim plays.
    #[test]
    fn behaviours_follow_the_summary_table() {
        let v = KubeletVersion::Release;
        // §2 same resource registered again.
        // 1.37 (PR #135437): clients per (name, socket), a live duplicate refused.
        assert!(v(36).replaces_by_name() && !v(37).replaces_by_name() && !KubeletVersion::Master.replaces_by_name());
        assert!(!v(36).rejects_duplicate_socket() && v(37).rejects_duplicate_socket());
        // §4 cleanup.
        assert_eq!(v(26).cleanup_rule(), CleanupRule::AllNonDirectories);
        assert_eq!(v(31).cleanup_rule(), CleanupRule::AllNonDirectories);
        assert_eq!(v(32).cleanup_rule(), CleanupRule::AllNonDirectories);
        assert_eq!(v(33).cleanup_rule(), CleanupRule::SocketsOnly);
        assert_eq!(KubeletVersion::Master.cleanup_rule(), CleanupRule::SocketsOnly);
        assert_eq!(v(37).cleanup_rule(), CleanupRule::SocketsOnly);
        // §5 empty Allocate text.
        assert_eq!(
            v(33).empty_allocate_text(),
            "&AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}"
        );
        assert_eq!(v(34).empty_allocate_text(), "");
        // docs/protocol.md §1.2: cdi_devices from 1.28.
        assert!(!v(27).knows_cdi_devices() && v(28).knows_cdi_devices());
        // DevicePluginCDIDevices: alpha (off) in 1.28, on from 1.29.
        assert!(!v(28).passes_cdi_devices_to_runtime() && v(29).passes_cdi_devices_to_runtime());
        // §5 sidecars, running containers.
        assert!(v(28).reuses_sidecar_devices() && !v(29).reuses_sidecar_devices());
        assert!(!v(26).skips_running_containers_after_restart() && v(27).skips_running_containers_after_restart());
        // §7 v1 checkpoints.
        assert!(v(30).reads_v1_checkpoint() && !v(31).reads_v1_checkpoint());
        // §8 PodResources.
        assert!(!v(33).podresources_get_default() && v(34).podresources_get_default());
        assert!(!v(26).podresources_rate_limited() && v(27).podresources_rate_limited());
        assert!(!v(29).list_includes_sidecars() && v(30).list_includes_sidecars());
        // §1 Register context (from 1.35).
        assert!(!v(34).register_context_bounds_dial() && v(35).register_context_bounds_dial());
        // §9, §6.
        assert!(!v(36).deregisters_by_endpoint() && v(37).deregisters_by_endpoint());
        assert!(!v(35).retries_refused_registry_plugins() && v(36).retries_refused_registry_plugins());
        assert!(!v(35).device_hints_only_on_device_nodes() && v(36).device_hints_only_on_device_nodes());
    }

    /// Nothing known to be merged after 1.37 changes what the device
    /// manager shows, so master answers every behaviour question as 1.37.
    #[test]
    fn master_plays_1_37() {
        let (m, r) = (KubeletVersion::Master, KubeletVersion::Release(37));
        assert_eq!(m.replaces_by_name(), r.replaces_by_name());
        assert_eq!(m.rejects_duplicate_socket(), r.rejects_duplicate_socket());
        assert_eq!(m.cleanup_rule(), r.cleanup_rule());
        assert_eq!(m.empty_allocate_text(), r.empty_allocate_text());
        assert_eq!(m.knows_cdi_devices(), r.knows_cdi_devices());
        assert_eq!(m.passes_cdi_devices_to_runtime(), r.passes_cdi_devices_to_runtime());
        assert_eq!(m.reuses_sidecar_devices(), r.reuses_sidecar_devices());
        assert_eq!(m.skips_running_containers_after_restart(), r.skips_running_containers_after_restart());
        assert_eq!(m.reads_v1_checkpoint(), r.reads_v1_checkpoint());
        assert_eq!(m.podresources_get_default(), r.podresources_get_default());
        assert_eq!(m.podresources_has_get(), r.podresources_has_get());
        assert_eq!(m.podresources_rate_limited(), r.podresources_rate_limited());
        assert_eq!(m.list_includes_sidecars(), r.list_includes_sidecars());
        assert_eq!(m.register_context_bounds_dial(), r.register_context_bounds_dial());
        assert_eq!(m.deregisters_by_endpoint(), r.deregisters_by_endpoint());
        assert_eq!(m.retries_refused_registry_plugins(), r.retries_refused_registry_plugins());
        assert_eq!(m.device_hints_only_on_device_nodes(), r.device_hints_only_on_device_nodes());
    }

    /// A referee running the kubelet's own code may play the release after
    /// the newest one the sim names (today 1.38): read as `master`; any
    /// other release as itself, and past that an error.
    #[test]
    fn deserializes_releases_and_the_next_release_as_master() {
        let read = |s: String| serde_json::from_str::<KubeletVersion>(&format!("\"{s}\""));
        assert_eq!(read("1.30".into()).unwrap(), KubeletVersion::Release(30));
        assert_eq!(read(format!("1.{}", NEWEST_MINOR + 1)).unwrap(), KubeletVersion::Master);
        assert!(read(format!("1.{}", NEWEST_MINOR + 2)).is_err());
    }

    #[test]
    fn serde_uses_the_display_form() {
        let j = serde_json::to_string(&KubeletVersion::Release(30)).unwrap();
        assert_eq!(j, "\"1.30\"");
        let back: KubeletVersion = serde_json::from_str("\"master\"").unwrap();
        assert_eq!(back, KubeletVersion::Master);
    }
}
