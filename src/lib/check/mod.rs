//! `dpctl plugin check`: a sanity suite for device plugins, like csi-sanity
//! is for CSI drivers. It talks to a plugin's socket the way a kubelet does
//! and checks every answer against what the kubelet needs.
//!
//! Each check has a stable kebab-case name ([`CheckId::name`]), a one-line
//! reason it matters, and the rule it enforces; a run yields a [`Report`] of
//! [`CheckResult`]s (pass, fail, skip, error) with the evidence. The engine
//! is a library so that `dpctl smoke` can run the same checks, feeding in the
//! `RegisterRequest` its kubelet-sim observed ([`CheckTarget::registration`]).
//!
//! How `dpctl smoke` reuses it (after its kubelet-sim accepted `req`):
//!
//! ```text
//! let target = CheckTarget {
//!     registration: Some(Registration::from_request(&req, "the RegisterRequest")),
//!     ..CheckTarget::new(plugin_socket)
//! };
//! let opts = CheckOptions { suite: "dpctl smoke".into(), ..CheckOptions::default() };
//! let mut report = check::run_checks(&target, &opts).await;
//! report.checks.push(CheckResult { name: "admission".into(), .. });   // its own steps
//! report.tally();
//! output::check::report(out, format, &report)?;  output::check::junit(file, &report)?;
//! std::process::exit(report.exit_code());
//! ```
//!
//! The suite opens ListAndWatch once at the start and keeps it open for the
//! whole run (as the kubelet does), so `list-stream-stays-open` and
//! `parallel-calls` see whether the other calls disturb it.

pub mod case;
mod checks;
mod probe;

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::limits::KUBELET_MAX_RECV;
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::text::millis;

pub use case::{Case, CaseInfo, CheckResult, Outcome, Totals, any_failure};

/// The checks, in the order they run and are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CheckId {
    /// GetDevicePluginOptions answers within the call deadline.
    OptionsAnswer,
    /// The first ListAndWatch message arrives promptly.
    ListFirstMessagePrompt,
    /// Device IDs are non-empty and unique.
    DeviceIdsValid,
    /// Health is exactly `Healthy` or `Unhealthy`.
    HealthValues,
    /// NUMA node IDs are not negative and no TopologyInfo is empty.
    NumaIdsValid,
    /// ListAndWatch messages fit the kubelet's receive limit.
    MessageSize,
    /// Allocate of healthy devices answers once per container request.
    AllocateHealthy,
    /// Allocate of an ID never advertised fails cleanly.
    AllocateUnknownId,
    /// Two containers given different devices get different device-specific content.
    DistinctDevices,
    /// GetPreferredAllocation answers keep the contract (when advertised).
    PreferredContract,
    /// GetPreferredAllocation is not advertised: the kubelet will not call it.
    PreferredNotAdvertised,
    /// PreStartContainer answers within the kubelet's deadline (when required).
    PrestartDeadline,
    /// Concurrent calls all succeed and do not break the stream.
    ParallelCalls,
    /// ListAndWatch stays open through the run.
    ListStreamStaysOpen,
}

impl CheckId {
    /// Every check, in run order.
    pub const ALL: [CheckId; 14] = [
        CheckId::OptionsAnswer,
        CheckId::ListFirstMessagePrompt,
        CheckId::DeviceIdsValid,
        CheckId::HealthValues,
        CheckId::NumaIdsValid,
        CheckId::MessageSize,
        CheckId::AllocateHealthy,
        CheckId::AllocateUnknownId,
        CheckId::DistinctDevices,
        CheckId::PreferredContract,
        CheckId::PreferredNotAdvertised,
        CheckId::PrestartDeadline,
        CheckId::ParallelCalls,
        CheckId::ListStreamStaysOpen,
    ];
}

impl Case for CheckId {
    fn all() -> &'static [Self] {
        &CheckId::ALL
    }

    // long: the id table, one row (name, reason, rule) per check; split, the table would scatter.
    fn info(self) -> CaseInfo {
        match self {
            CheckId::OptionsAnswer => CaseInfo {
                name: "options-answer",
                reason: "the kubelet calls GetDevicePluginOptions inside Register; without an answer the resource never appears",
                rule: "kubelet >= 1.25 calls GetDevicePluginOptions synchronously inside Register; an error fails the \
                 registration (\"failed to get device plugin options: ...\"), ListAndWatch is never called and the \
                 resource never appears (kubernetes/kubernetes#109016); RegisterRequest.options is never read \
                 (every kubelet 1.26+), so options that differ from it are only noted",
            },
            CheckId::ListFirstMessagePrompt => CaseInfo {
                name: "list-first-message-prompt",
                reason: "until the first ListAndWatch message arrives the resource has no capacity on the node",
                rule: "a resource appears in node status only after its first ListAndWatch message; send the full device \
                 list as soon as the stream opens",
            },
            CheckId::DeviceIdsValid => CaseInfo {
                name: "device-ids-valid",
                reason: "device IDs key the kubelet's device sets and checkpoint; empty or repeated IDs miscount capacity",
                rule: "every device ID in a ListAndWatch message must be non-empty and unique: the kubelet keeps sets of \
                 IDs, so repeats collapse into one device",
            },
            CheckId::HealthValues => CaseInfo {
                name: "health-values",
                reason: "only the exact string \"Healthy\" counts; any other value silently makes the device unallocatable",
                rule: "health must be exactly \"Healthy\" or \"Unhealthy\" (pluginapi.Healthy, pluginapi.Unhealthy); \
                 the kubelet treats any other string as unhealthy",
            },
            CheckId::NumaIdsValid => CaseInfo {
                name: "numa-ids-valid",
                reason: "the Topology Manager aligns devices by their NUMA node IDs; a negative ID names no real node, \
                 and a TopologyInfo with no nodes hides the device from GetAllocatableResources",
                rule: "TopologyInfo NUMA node IDs must not be negative: they are the node's NUMA node numbers; a device \
                 without NUMA affinity sends no TopologyInfo at all, since the kubelet lists a device in PodResources \
                 GetAllocatableResources once per node of its TopologyInfo, so one with an empty node list is left \
                 out (docs/protocol.md §2.1, every version 1.26 to master)",
            },
            CheckId::MessageSize => CaseInfo {
                name: "message-size",
                reason: "the kubelet receives at most 4 MiB per message; a larger device list ends the stream for good",
                rule: "the kubelet's client receives at most 4194304 bytes per message; a larger ListAndWatch message \
                 fails with ResourceExhausted, ends the stream, marks the resource unhealthy and is never retried \
                 (kubernetes/kubernetes#109304)",
            },
            CheckId::AllocateHealthy => CaseInfo {
                name: "allocate-healthy",
                reason: "pod admission calls Allocate with one container; the kubelet rejects the pod when the answer holds no \
                 container response, and reads only the first",
                rule: "the kubelet sends one ContainerAllocateRequest per Allocate call and reads only \
                 container_responses[0]; an empty list (\"no containers return in allocation response\") or an \
                 error rejects the pod with UnexpectedAdmissionError, and further responses are ignored \
                 (docs/protocol.md §3.7, every version 1.26 to master); the API asks for one response per container \
                 request, so a two-container call is tried and its count reported, never failed",
            },
            CheckId::AllocateUnknownId => CaseInfo {
                name: "allocate-unknown-id",
                reason: "a plugin must refuse a device it does not have rather than hand it to a container, or hang",
                rule: "Allocate of an ID the plugin never advertised must fail with an error status, promptly: success \
                 promises a device that does not exist, and the kubelet calls Allocate with no deadline, so a hang \
                 blocks pod admission",
            },
            CheckId::DistinctDevices => CaseInfo {
                name: "distinct-devices",
                reason: "two containers given different devices must get different hardware; an answer naming the same \
                 device whatever was asked puts two pods on one GPU",
                rule: "Allocate of two different device IDs (one container each, as the kubelet calls it) must not \
                 answer the same device-specific content: env values, CDI device names, device-node host paths and \
                 mount host paths go to the runtime unchecked (deviceRunContainerOptions in \
                 pkg/kubelet/cm/devicemanager/pod_devices.go, every version); identical answers, or an answer naming \
                 the other device's ID and not its own, give both containers one device",
            },
            CheckId::PreferredContract => CaseInfo {
                name: "preferred-contract",
                reason: "when advertised, the kubelet asks GetPreferredAllocation at admission whenever a container still needs \
                 devices after reusing its init containers' ones, and relies on the answer",
                rule: "GetPreferredAllocation must return exactly allocation_size IDs, all from available_deviceIDs, \
                 including every must_include_deviceIDs, without repeats, one response per container request; the \
                 kubelet sends one container and reads only container_responses[0], drops unknown IDs and fills a \
                 short answer arbitrarily, losing the plugin's placement (docs/protocol.md §3.6)",
            },
            CheckId::PreferredNotAdvertised => CaseInfo {
                name: "preferred-not-advertised",
                reason: "without get_preferred_allocation_available the kubelet never calls GetPreferredAllocation",
                rule: "the kubelet calls GetPreferredAllocation only when get_preferred_allocation_available=true, and then \
                 only at admission for a container that still needs devices after reusing its init containers' ones \
                 (not on restarts; docs/kubelet-versions.md §5, 1.26 to master)",
            },
            CheckId::PrestartDeadline => CaseInfo {
                name: "prestart-deadline",
                reason: "with pre_start_required, every container start waits for PreStartContainer, for at most 30 s",
                rule: "with pre_start_required=true the kubelet calls PreStartContainer on every container start with a \
                 30 s deadline (KubeletPreStartContainerRPCTimeoutInSecs); an error or a timeout fails the start",
            },
            CheckId::ParallelCalls => CaseInfo {
                name: "parallel-calls",
                reason: "admissions, container starts and re-registrations reach the plugin concurrently on one connection, \
                 beside the open ListAndWatch stream",
                rule: "concurrent calls on the kubelet's single connection must all succeed and must not end or stall the \
                 ListAndWatch stream",
            },
            CheckId::ListStreamStaysOpen => CaseInfo {
                name: "list-stream-stays-open",
                reason: "the kubelet never reopens ListAndWatch; once it ends, every device is unhealthy until the plugin \
                 registers again, and capacity drops to 0 at the first node-status update after the 5-minute grace \
                 period",
                rule: "when ListAndWatch ends (error, EOF or status OK) the kubelet marks all devices unhealthy and never \
                 calls it again; only a new Register recovers (kubernetes/kubernetes#92958); capacity stays until \
                 the first node-status update (every 10 s by default) more than 5 minutes after the end, which sets \
                 it to 0 (docs/kubelet-versions.md §3, every version)",
            },
        }
    }
}

/// Checks that existed once, with why they went. `--skip` accepts them (a
/// CI line skipping a check that no longer runs keeps working); `--only`
/// names them in its error.
pub const RETIRED: &[(&str, &str)] = &[(
    "registration-options-agree",
    "removed: every kubelet ignores RegisterRequest.options (only GetDevicePluginOptions counts), so a \
     difference never breaks a plugin; options-answer notes it in its evidence",
)];

/// Why `name` is no longer a check, if it was one.
pub fn retired(name: &str) -> Option<&'static str> {
    RETIRED.iter().find(|(n, _)| *n == name).map(|(_, why)| *why)
}

/// Picks checks by name: all of them, or only `only`, minus `skip`.
/// Unknown names are an error that lists the valid ones.
pub fn select(only: &[String], skip: &[String]) -> Result<Vec<CheckId>> {
    let parse = |flag: &str, names: &[String]| -> Result<Vec<CheckId>> {
        names
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .filter(|n| flag != "--skip" || retired(n).is_none())
            .map(|n| {
                CheckId::from_name(n).ok_or_else(|| match retired(n) {
                    Some(why) => Error::invalid(flag, format!("check {n:?} was {why}")),
                    None => Error::invalid(
                        flag,
                        format!("unknown check {n:?}; valid checks: {}", CheckId::names().join(", ")),
                    ),
                })
            })
            .collect()
    };
    let only = parse("--only", only)?;
    let skip = parse("--skip", skip)?;
    // Both naming one check would run nothing of what --only asked for.
    if let Some(both) = skip.iter().find(|c| only.contains(c)) {
        return Err(Error::invalid(
            "--skip",
            format!("{:?} is in --only too; name it in one of them (--only runs only what it names)", both.name()),
        ));
    }
    Ok(CheckId::ALL.into_iter().filter(|c| only.is_empty() || only.contains(c)).filter(|c| !skip.contains(c)).collect())
}

/// What the plugin said about itself when it registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// `RegisterRequest.options` (`None` when the request carried none).
    pub options: Option<dp::DevicePluginOptions>,
    /// Where the options came from, for the evidence (e.g. `--register-options`).
    pub source: String,
}

impl Registration {
    /// The options of a `RegisterRequest` a kubelet (or kubelet-sim) received.
    pub fn from_request(req: &dp::RegisterRequest, source: impl Into<String>) -> Self {
        Registration { options: req.options, source: source.into() }
    }
}

/// Parses `--register-options`: `pre_start_required=true,get_preferred_allocation_available=0`
/// (keys left out are false, as in the message).
pub fn parse_register_options(s: &str) -> std::result::Result<dp::DevicePluginOptions, String> {
    let mut o = dp::DevicePluginOptions::default();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) =
            part.split_once('=').ok_or_else(|| format!("{part:?} is not KEY=BOOL (e.g. pre_start_required=true)"))?;
        let value = match value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => true,
            "false" | "0" | "no" => false,
            v => return Err(format!("{key}: {v:?} is not true or false")),
        };
        match key.trim() {
            "pre_start_required" => o.pre_start_required = value,
            "get_preferred_allocation_available" => o.get_preferred_allocation_available = value,
            k => {
                return Err(format!(
                    "unknown option {k:?}; the options are pre_start_required and get_preferred_allocation_available"
                ));
            }
        }
    }
    Ok(o)
}

/// Which plugin to check.
#[derive(Debug, Clone)]
pub struct CheckTarget {
    /// The plugin's socket.
    pub socket: PathBuf,
    /// Limit for connecting to it.
    pub connect_timeout: Duration,
    /// The receive limit the messages must fit (the kubelet's 4 MiB).
    pub max_message_bytes: usize,
    /// The registration, when known (`options-answer` notes options that differ from it).
    pub registration: Option<Registration>,
    /// Where to report each call on the wire (`-v`).
    pub tap: Option<crate::transport::Tap>,
}

impl CheckTarget {
    /// A target with the kubelet's limits and no registration.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        CheckTarget {
            socket: socket.into(),
            connect_timeout: Duration::from_secs(5),
            max_message_bytes: KUBELET_MAX_RECV,
            registration: None,
            tap: None,
        }
    }
}

/// How to run the suite.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Which checks to run (see [`select`]); the order does not matter.
    pub checks: Vec<CheckId>,
    /// Deadline of each unary call (GetDevicePluginOptions, Allocate, GetPreferredAllocation).
    pub call_timeout: Duration,
    /// How long the first ListAndWatch message may take.
    pub first_message_timeout: Duration,
    /// How long after its first message the stream must stay open (at least).
    pub stream_window: Duration,
    /// PreStartContainer deadline (the kubelet's is 30 s).
    pub prestart_timeout: Duration,
    /// How many concurrent calls `parallel-calls` makes.
    pub parallel: usize,
    /// Call GetPreferredAllocation even when it is not advertised (a kubelet
    /// never does); off by default, as a plugin may crash in a handler it
    /// never expects to run.
    pub probe_unadvertised: bool,
    /// Name of the suite in reports and JUnit.
    pub suite: String,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            checks: CheckId::ALL.to_vec(),
            call_timeout: Duration::from_secs(10),
            first_message_timeout: Duration::from_secs(5),
            stream_window: Duration::from_secs(2),
            prestart_timeout: Duration::from_secs(30),
            parallel: 8,
            probe_unadvertised: false,
            suite: SUITE_NAME.into(),
        }
    }
}

/// The suite's name in reports and in JUnit's `<testsuite name>`.
pub const SUITE_NAME: &str = "dpctl plugin check";

/// Why nothing could be checked: the plugin could not be reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreachable {
    /// The connection error.
    pub message: String,
    /// What to do about it, when known.
    pub hint: Option<String>,
    /// The exit code of that error (3 for socket problems, 5 for a timeout).
    pub exit_code: u8,
}

/// A whole run: what was checked and every result, in run order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The suite's name (`dpctl plugin check`).
    pub suite: String,
    /// The plugin socket.
    pub socket: String,
    /// When the run started, RFC 3339.
    pub started: String,
    /// How long the run took.
    pub duration_ms: u64,
    /// Set when the plugin could not be reached (every check is then an error).
    pub unreachable: Option<Unreachable>,
    /// Totals by outcome.
    pub totals: Totals,
    /// The results.
    pub checks: Vec<CheckResult>,
}

impl Report {
    /// Recomputes [`Report::totals`] from the results.
    pub fn tally(&mut self) {
        self.totals = Totals::of(&self.checks);
    }

    /// The exit code: the connection error's when unreachable, 1 when a check
    /// failed or could not run, else 0.
    pub fn exit_code(&self) -> u8 {
        if let Some(u) = &self.unreachable {
            return u.exit_code;
        }
        if any_failure(&self.checks) { crate::error::exit::CHECK_FAILED } else { crate::error::exit::OK }
    }
}

/// What the suite reports while it runs (for a progress display).
#[derive(Debug)]
pub enum Progress<'a> {
    /// A check is starting.
    Started(CheckId),
    /// A check finished.
    Finished(&'a CheckResult),
}

/// Runs the selected checks against the target.
pub async fn run_checks(target: &CheckTarget, opts: &CheckOptions) -> Report {
    run_checks_with(target, opts, &mut |_| {}).await
}

/// Like [`run_checks`], telling `progress` as each check starts and finishes.
pub async fn run_checks_with(
    target: &CheckTarget,
    opts: &CheckOptions,
    progress: &mut (dyn FnMut(Progress<'_>) + Send),
) -> Report {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let mut selected = opts.checks.clone();
    selected.sort();
    selected.dedup();
    let mut report = Report {
        suite: opts.suite.clone(),
        socket: target.socket.display().to_string(),
        started: crate::text::timestamp(started),
        duration_ms: 0,
        unreachable: None,
        totals: Totals::default(),
        checks: Vec::new(),
    };
    match probe::Probe::connect(target, opts).await {
        Ok(mut probe) => {
            for id in selected {
                progress(Progress::Started(id));
                let t = Instant::now();
                let finding = checks::run(id, &mut probe).await;
                let mut result = CheckResult::new(id, finding.outcome, finding.evidence, t.elapsed());
                if let Some(rule) = finding.rule {
                    result.rule = rule;
                }
                progress(Progress::Finished(&result));
                report.checks.push(result);
            }
            probe.close();
        }
        Err(e) => {
            let evidence = format!("could not connect to the plugin: {e}");
            for id in selected {
                let result = CheckResult::new(id, Outcome::Error, evidence.clone(), Duration::ZERO);
                progress(Progress::Finished(&result));
                report.checks.push(result);
            }
            report.unreachable = Some(Unreachable {
                message: e.to_string(),
                hint: crate::podresources::hint(&e),
                exit_code: e.exit_code(),
            });
        }
    }
    report.duration_ms = millis(t0.elapsed());
    report.tally();
    report
}

/// What one check found; the rule defaults to the check's own.
#[derive(Debug)]
struct Finding {
    outcome: Outcome,
    evidence: String,
    rule: Option<String>,
}

impl Finding {
    fn pass(evidence: impl Into<String>) -> Self {
        Finding { outcome: Outcome::Pass, evidence: evidence.into(), rule: None }
    }
    fn fail(evidence: impl Into<String>) -> Self {
        Finding { outcome: Outcome::Fail, evidence: evidence.into(), rule: None }
    }
    fn skip(evidence: impl Into<String>) -> Self {
        Finding { outcome: Outcome::Skip, evidence: evidence.into(), rule: None }
    }
    fn error(evidence: impl Into<String>) -> Self {
        Finding { outcome: Outcome::Error, evidence: evidence.into(), rule: None }
    }
}

#[cfg(test)]
mod tests {

    // A CI line written when registration-options-agree existed keeps
    // working with --skip; --only says why it is gone.
    #[test]
    fn a_retired_check_is_accepted_by_skip_and_explained_by_only() {
        let all = select(&[], &[]).unwrap();
        assert_eq!(select(&[], &["registration-options-agree".into()]).unwrap(), all);
        let e = select(&["registration-options-agree".into()], &[]).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::exit::USAGE);
        assert!(e.to_string().contains("ignores RegisterRequest.options"), "{e}");
        assert!(select(&[], &["no-such-check".into()]).unwrap_err().to_string().contains("unknown check"));
    }

    use super::*;

    #[test]
    fn names_are_unique_kebab_case_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for c in CheckId::ALL {
            let n = c.name();
            assert!(seen.insert(n), "{n} twice");
            assert!(n.chars().all(|ch| ch.is_ascii_lowercase() || ch == '-'), "{n}");
            assert_eq!(CheckId::from_name(n), Some(c));
            assert!(!c.reason().is_empty() && !c.rule().is_empty());
        }
    }

    #[test]
    fn register_options_parse() {
        let o = parse_register_options("pre_start_required=true, get_preferred_allocation_available=0").unwrap();
        assert!(o.pre_start_required && !o.get_preferred_allocation_available);
        assert_eq!(parse_register_options("").unwrap(), dp::DevicePluginOptions::default());
        assert!(parse_register_options("pre_start_required").unwrap_err().contains("KEY=BOOL"));
        assert!(parse_register_options("prestart=true").unwrap_err().contains("unknown option"));
        assert!(parse_register_options("pre_start_required=maybe").unwrap_err().contains("not true or false"));
    }

    #[test]
    fn selection_by_only_and_skip() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(select(&[], &[]).unwrap().len(), CheckId::ALL.len());
        assert_eq!(
            select(&s(&["message-size", "options-answer"]), &[]).unwrap(),
            [CheckId::OptionsAnswer, CheckId::MessageSize]
        );
        let without = select(&[], &s(&["parallel-calls"])).unwrap();
        assert!(!without.contains(&CheckId::ParallelCalls) && without.len() == CheckId::ALL.len() - 1);
        let e = select(&s(&["nope"]), &[]).unwrap_err().to_string();
        assert!(e.contains("--only") && e.contains("\"nope\"") && e.contains("options-answer"), "{e}");
        assert!(select(&[], &s(&["x"])).unwrap_err().to_string().contains("--skip"));
    }

    #[test]
    fn exit_code_follows_outcomes() {
        let mut r = Report {
            suite: SUITE_NAME.into(),
            socket: "/x".into(),
            started: String::new(),
            duration_ms: 0,
            unreachable: None,
            totals: Totals::default(),
            checks: vec![CheckResult::new(CheckId::OptionsAnswer, Outcome::Pass, "", Duration::ZERO)],
        };
        r.checks.push(CheckResult::new(CheckId::PreferredContract, Outcome::Skip, "", Duration::ZERO));
        assert_eq!(r.exit_code(), 0);
        r.checks.push(CheckResult::new(CheckId::MessageSize, Outcome::Error, "", Duration::ZERO));
        assert_eq!(r.exit_code(), 1);
        r.tally();
        assert_eq!(r.totals, Totals { total: 3, passed: 1, failed: 0, skipped: 1, errors: 1 });
        r.unreachable = Some(Unreachable { message: "no socket".into(), hint: None, exit_code: 3 });
        assert_eq!(r.exit_code(), 3);
    }
}
