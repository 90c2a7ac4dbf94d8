//! `dpctl dra check`: a driver judged end to end as kubelets 1.34-1.37 need
//! it to behave: its registration and what it advertises against what it
//! serves, socket paths, Prepare answered by the kubelet's rules and again
//! with the same devices (idempotent), CDI IDs that parse and resolve,
//! request names, Unprepare answered twice, and every call well within the
//! 45 s deadline (docs/dra.md §2, §3).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::check_claim::OwnClaim;
use super::claims::ClaimRef;
use super::client::{self, CallReport, InfoReport};
use crate::check::{Case, CaseInfo, CheckResult, Outcome};
use crate::error::{Error, Result};
use crate::transport::ClientConfig;

/// The cases, in run order: a name the compiler checks (a misspelt case
/// does not build).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DraCase {
    /// GetInfo as the kubelet checks it.
    Registration,
    /// Every advertised service is served.
    AdvertisedServed,
    /// Registration socket and endpoint fit a unix socket.
    SocketPaths,
    /// Prepare answered by the kubelet's map rules.
    Prepare,
    /// Every device prepared is published.
    Published,
    /// The CDI IDs parse and resolve.
    Cdi,
    /// Request names without subrequests.
    RequestNames,
    /// Prepare again: the same devices.
    PrepareIdempotent,
    /// Unprepare, and again.
    UnprepareIdempotent,
    /// Every call well within the deadline.
    CallTime,
}

impl DraCase {
    /// Every case, in run order.
    pub const ALL: [DraCase; 10] = [
        DraCase::Registration,
        DraCase::AdvertisedServed,
        DraCase::SocketPaths,
        DraCase::Prepare,
        DraCase::Published,
        DraCase::Cdi,
        DraCase::RequestNames,
        DraCase::PrepareIdempotent,
        DraCase::UnprepareIdempotent,
        DraCase::CallTime,
    ];
}

impl Case for DraCase {
    fn all() -> &'static [Self] {
        &DraCase::ALL
    }

    fn info(self) -> CaseInfo {
        match self {
            DraCase::Registration => CaseInfo {
                name: "registration",
                reason: "a registration the kubelet refuses leaves the driver unused",
                rule: "GetInfo: type DRAPlugin, a DNS-subdomain name, a known DRAPlugin service in supported_versions (docs/dra.md §2)",
            },
            DraCase::AdvertisedServed => CaseInfo {
                name: "advertised-served",
                reason: "an advertised service that is not served fails every call on it, or spams the kubelet's log",
                rule: "every advertised DRAPlugin and DRAResourceHealth service answers on the endpoint (docs/dra.md §2)",
            },
            DraCase::SocketPaths => CaseInfo {
                name: "socket-paths",
                reason: "a socket path over 107 bytes cannot be bound or dialed",
                rule: "registration socket and endpoint at most 107 bytes (docs/dra.md §2)",
            },
            DraCase::Prepare => CaseInfo {
                name: "prepare",
                reason: "the kubelet fails the pod on any break of its map rules",
                rule: "every claim answered under its UID and no other, no per-claim error (docs/dra.md §3)",
            },
            DraCase::Published => CaseInfo {
                name: "published",
                reason: "a device no current ResourceSlice publishes was never allocated: the container gets what the cluster did not give it",
                rule: "every device prepared is one the driver publishes in its pool's current generation (docs/dra.md §3)",
            },
            DraCase::Cdi => CaseInfo {
                name: "cdi",
                reason: "the runtime fails the container on a CDI ID it cannot resolve; the kubelet does not check",
                rule: "each CDI ID parses as vendor/class=name and a spec in --cdi-dir defines it (docs/dra.md §3)",
            },
            DraCase::RequestNames => CaseInfo {
                name: "request-names",
                reason: "a request name with '/' matches no container's request: the container gets no device",
                rule: "request_names hold whole request names, subrequests stripped (docs/dra.md §3)",
            },
            DraCase::PrepareIdempotent => CaseInfo {
                name: "prepare-idempotent",
                reason: "after a kubelet restart a prepared claim is prepared again and must get the same devices",
                rule: "Prepare of a prepared claim answers the same devices and CDI IDs (docs/dra.md §3)",
            },
            DraCase::UnprepareIdempotent => CaseInfo {
                name: "unprepare-idempotent",
                reason: "the kubelet repeats Unprepare until it succeeds; a pod stays Terminating while it fails",
                rule: "Unprepare succeeds, and again for a claim already unprepared (docs/dra.md §3)",
            },
            DraCase::CallTime => CaseInfo {
                name: "call-time",
                reason: "the kubelet gives up after 45 s and retries only at the next pod sync",
                rule: "each Prepare and Unprepare well within 45 s: under half of it (docs/dra.md §2)",
            },
        }
    }
}

/// A check run's report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DraCheckReport {
    /// The registration socket.
    pub registration: PathBuf,
    /// The claim used.
    pub claim: ClaimRef,
    /// Where the claim came from: `made-up`, `given` (--claim) or
    /// `created` (in the API server of --kubeconfig, deleted afterwards).
    pub claim_source: &'static str,
    /// What happened to the claim check created (its device, its deletion).
    pub notes: Vec<String>,
    /// Results, in case order.
    pub results: Vec<CheckResult>,
    /// Ctrl-C or SIGTERM ended the run: the results are what was done until
    /// then, the calls not answered are skipped.
    pub interrupted: bool,
}

impl DraCheckReport {
    /// Why the driver's calls went unchecked: the evidence of a skipped
    /// `prepare` (no service a kubelet would use, or a driver that reads
    /// claims from an API server it was not given). A run that checked
    /// only the registration is not a pass: `dra check` exits 1 on it.
    pub fn not_checked(&self) -> Option<&str> {
        match self.results.iter().find(|r| r.name == DraCase::Prepare.name()) {
            Some(r) if r.outcome == Outcome::Skip => Some(r.evidence.as_str()),
            Some(_) => None,
            None => Some("Prepare was not called"),
        }
    }

    /// Every case passed or was skipped, Prepare was called, and the run was not interrupted.
    pub fn ok(&self) -> bool {
        !self.interrupted && !crate::check::any_failure(&self.results) && self.not_checked().is_none()
    }
}

/// What `dra check` is given besides the driver.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// The claim to prepare (--claim): refused when a pod holds it.
    pub claim: Option<ClaimRef>,
    /// The API server the driver uses (--kubeconfig): check creates its claim there.
    pub kubeconfig: Option<PathBuf>,
    /// The kubelet's root directory, where `dra_manager_state` is.
    pub kubelet_root: PathBuf,
    /// CDI spec directories to resolve IDs in.
    pub cdi_dirs: Vec<PathBuf>,
}

fn result(case: DraCase, ok: bool, evidence: String, took: Duration) -> CheckResult {
    CheckResult::new(case, if ok { Outcome::Pass } else { Outcome::Fail }, evidence, took)
}

fn skipped(case: DraCase, why: &str) -> CheckResult {
    CheckResult::new(case, Outcome::Skip, why, Duration::ZERO)
}

/// The cases of the driver's calls: every case after registration and its
/// paths (the first three of [`DraCase::ALL`]).
const CALL_CASES: &[DraCase] = DraCase::ALL.split_at(3).1;

/// A made-up claim: a random UID in namespace and name `dpctl-check`.
pub fn made_up_claim() -> ClaimRef {
    let hex = format!("{:032x}", rand::random::<u128>());
    ClaimRef { namespace: "dpctl-check".into(), name: "dpctl-check".into(), uid: super::check_claim::uid_of(&hex) }
}

/// Refuses a claim a pod holds in the kubelet's checkpoint: check would
/// unprepare it under the pod. The pods are named from the API server of
/// `kubeconfig` when one is given (the checkpoint has their UIDs only).
async fn refuse_held(root: &Path, claim: &ClaimRef, kubeconfig: Option<&Path>) -> Result<()> {
    let mut pods = super::check_claim::holders(root, claim)?;
    if pods.is_empty() {
        return Ok(());
    }
    if let Some(kc) = kubeconfig {
        pods = super::check_claim::pod_names(kc, pods).await;
    }
    Err(Error::invalid(
        "--claim",
        format!(
            "claim {}/{} (uid {}) is prepared for pod {} (in {}): dra check would unprepare it under a running pod; \
             it never touches a claim a pod holds. Leave --claim out (with --kubeconfig check creates a claim of its \
             own) or name a claim no pod uses",
            claim.namespace,
            claim.name,
            claim.uid,
            crate::text::list(&pods),
            root.join(super::state::FILE_NAME).display()
        ),
    ))
}

/// Runs every case on the driver registered at `registration`, preparing
/// (then unpreparing) the claim of `opts`: the one given, one created in
/// the API server of `opts.kubeconfig` (deleted afterwards), or a made-up one.
/// When `stop` completes (Ctrl-C, SIGTERM) the call in flight is given up and
/// the report has what was done until then, marked interrupted.
// long: the run's cases in order, each step's outcome feeding the next.
pub async fn run(
    registration: &Path,
    opts: CheckOptions,
    cfg: &ClientConfig,
    stop: impl std::future::Future<Output = ()>,
) -> Result<DraCheckReport> {
    let started = Instant::now();
    // A bad kubeconfig is bad input, found before the driver is called.
    let client = match &opts.kubeconfig {
        Some(k) => Some(crate::apiserver::client::Client::from_kubeconfig(k, "--kubeconfig")?),
        None => None,
    };
    if let Some(c) = &opts.claim {
        refuse_held(&opts.kubelet_root, c, opts.kubeconfig.as_deref()).await?;
    }
    let info =
        client::info(registration, &ClientConfig { call_timeout: Duration::from_secs(1), ..cfg.clone() }).await?;
    let mut results = registration_results(registration, &info, started.elapsed());
    let mut report = DraCheckReport {
        registration: registration.into(),
        claim: opts.claim.clone().unwrap_or_else(made_up_claim),
        claim_source: if opts.claim.is_some() { "given" } else { "made-up" },
        notes: vec![],
        results: vec![],
        interrupted: false,
    };
    let Some(api) = super::chosen_node_api(&info.supported_versions) else {
        for &case in CALL_CASES {
            results.push(skipped(case, "no DRAPlugin service a 1.34+ kubelet knows is advertised"));
        }
        report.results = results;
        return Ok(report);
    };
    let own = match (&opts.claim, client.clone()) {
        (None, Some(c)) => Some(OwnClaim::create(c, &info.driver).await?),
        _ => None,
    };
    if let Some(o) = &own {
        report.claim = o.claim.clone();
        report.claim_source = "created";
        report.notes.push(format!(
            "created ResourceClaim {}/{} (uid {}) allocated {}/{} of driver {}",
            o.claim.namespace, o.claim.name, o.claim.uid, o.device.pool, o.device.device, info.driver
        ));
    }
    let endpoint = PathBuf::from(if info.endpoint.is_empty() {
        registration.display().to_string()
    } else {
        info.endpoint.clone()
    });
    let mut answered = Vec::new();
    report.interrupted = tokio::select! {
        () = calls(&endpoint, api, &report.claim, cfg, &opts.cdi_dirs, &mut answered) => false,
        () = stop => true,
    };
    let calls = match <[Result<CallReport>; 4]>::try_from(answered) {
        Ok([a, b, c, d]) if !report.interrupted => (a, b, c, d),
        Ok(_) | Err(_) => {
            interrupted(&mut report, results, own.as_ref()).await;
            return Ok(report);
        }
    };
    let pools = match &client {
        Some(c) => Some(super::check_claim::pools(c, &info.driver).await),
        None => None,
    };
    if let Some(o) = &own {
        report.notes.push(match o.delete().await {
            Ok(()) => format!("deleted ResourceClaim {}/{}", o.claim.namespace, o.claim.name),
            Err(e) => format!("could not delete ResourceClaim {}/{}: {e}", o.claim.namespace, o.claim.name),
        });
    }
    let needs_api = own.is_none() && opts.claim.is_none() && calls.0.as_ref().is_err_and(reads_claims);
    if needs_api {
        let why = format!(
            "the driver reads each claim from its API server (the kubeletplugin helper's words: {}); pass \
             --kubeconfig FILE, the kubeconfig the driver uses, and dra check creates a ResourceClaim of its own \
             there (and deletes it afterwards)",
            calls.0.as_ref().err().map(ToString::to_string).unwrap_or_default()
        );
        results.push(skipped(DraCase::Prepare, &why));
        let rest = "no claim to prepare: see prepare (pass --kubeconfig)";
        results.extend(CALL_CASES[1..].iter().map(|c| skipped(*c, rest)));
    } else {
        results.extend(call_results(&calls.0, &calls.1, &calls.2, &calls.3));
        let at = results.iter().position(|r| r.name == DraCase::Prepare.name()).map_or(results.len(), |i| i + 1);
        results.insert(at, published(&calls.0, pools.as_ref(), &info.driver));
    }
    report.results = results;
    Ok(report)
}

/// The published verdict: every device the first Prepare answered is in
/// a current ResourceSlice of the driver (`super::published`). Skipped
/// without an API server to read slices from, or with nothing prepared.
pub fn published(
    first: &Result<CallReport>,
    pools: Option<&std::result::Result<super::published::Pools, String>>,
    driver: &str,
) -> CheckResult {
    let Ok(p1) = first else { return skipped(DraCase::Published, "Prepare failed") };
    let devices: Vec<(&str, &str)> =
        p1.claims.iter().flat_map(|c| &c.devices).map(|d| (d.pool.as_str(), d.device.as_str())).collect();
    let pools = match pools {
        None => {
            return skipped(
                DraCase::Published,
                "no API server to read the driver's ResourceSlices from: pass --kubeconfig, the one the driver uses",
            );
        }
        Some(Err(e)) => return CheckResult::new(DraCase::Published, Outcome::Error, e.clone(), Duration::ZERO),
        Some(Ok(p)) => p,
    };
    if devices.is_empty() {
        return skipped(DraCase::Published, "Prepare answered no device: nothing to hold against the ResourceSlices");
    }
    let problems = pools.problems(driver, devices.iter().copied());
    let ev = if problems.is_empty() {
        let shown: Vec<String> = devices.iter().map(|(p, d)| format!("{p}/{d}")).collect();
        format!(
            "{} prepared, each in a current ResourceSlice of {driver} ({} published)",
            shown.join(", "),
            pools.device_count()
        )
    } else {
        problems.join("; ")
    };
    result(DraCase::Published, problems.is_empty(), ev, Duration::ZERO)
}

/// Prepare twice, then Unprepare twice, each answer kept in `answered` as it comes.
async fn calls(
    endpoint: &Path,
    api: super::NodeApi,
    claim: &ClaimRef,
    cfg: &ClientConfig,
    dirs: &[PathBuf],
    answered: &mut Vec<Result<CallReport>>,
) {
    let claims = [claim.clone()];
    answered.push(client::prepare(endpoint, api, &claims, cfg, dirs).await);
    answered.push(client::prepare(endpoint, api, &claims, cfg, dirs).await);
    answered.push(client::unprepare(endpoint, api, &claims, cfg).await);
    answered.push(client::unprepare(endpoint, api, &claims, cfg).await);
}

/// An interrupted run: the registration cases it judged, every call case
/// skipped (saying how far the calls got), and the claim check created
/// deleted all the same.
async fn interrupted(report: &mut DraCheckReport, mut results: Vec<CheckResult>, own: Option<&OwnClaim>) {
    let why = "not run: interrupted (Ctrl-C or SIGTERM) before the driver answered every Prepare and Unprepare";
    results.extend(CALL_CASES.iter().map(|c| skipped(*c, why)));
    report.results = results;
    let c = &report.claim;
    report.notes.push(format!(
        "interrupted: claim {}/{} (uid {}) may be left prepared on the driver (dpctl dra unprepare --claim {}/{}/{})",
        c.namespace, c.name, c.uid, c.namespace, c.name, c.uid
    ));
    if let Some(o) = own {
        report.notes.push(match o.delete().await {
            Ok(()) => format!("deleted ResourceClaim {}/{}", o.claim.namespace, o.claim.name),
            Err(e) => format!("could not delete ResourceClaim {}/{}: {e}", o.claim.namespace, o.claim.name),
        });
    }
}

/// The kubeletplugin helper's failure for a claim its API server does not
/// hold (`retrieve claim NS/NAME: ...`, d-r-a `kubeletplugin/draplugin.go`).
fn reads_claims(e: &crate::error::Error) -> bool {
    e.to_string().contains("retrieve claim ")
}

/// The registration, advertised-served and socket-paths verdicts on a
/// driver's GetInfo (also `dra smoke`'s).
pub fn registration_results(registration: &Path, info: &InfoReport, took: Duration) -> Vec<CheckResult> {
    let served: Vec<&String> = info.problems.iter().filter(|p| p.starts_with("advertises ")).collect();
    let other: Vec<&String> =
        info.problems.iter().filter(|p| !p.starts_with("advertises ") && !p.contains("bytes long")).collect();
    let reg_ev = if other.is_empty() {
        format!(
            "type {}, driver {}, services [{}]; a 1.34+ kubelet uses {}",
            info.plugin_type,
            info.driver,
            info.supported_versions.join(", "),
            info.chosen_node_service.as_deref().unwrap_or("-")
        )
    } else {
        other.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ")
    };
    let srv_ev = if served.is_empty() {
        format!("{} advertised, all served", info.services.len())
    } else {
        served.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ")
    };
    let max = crate::paths::MAX_SOCKET_PATH_LEN;
    let ep_len = if info.endpoint.is_empty() { registration.as_os_str().len() } else { info.endpoint.len() };
    let reg_len = registration.as_os_str().len();
    let paths_ok = ep_len <= max && reg_len <= max;
    vec![
        result(DraCase::Registration, other.is_empty(), reg_ev, took),
        result(DraCase::AdvertisedServed, served.is_empty(), srv_ev, took),
        result(
            DraCase::SocketPaths,
            paths_ok,
            format!("registration {reg_len} bytes, endpoint {ep_len} bytes (limit {max})"),
            Duration::ZERO,
        ),
    ]
}

fn call_results(
    first: &Result<CallReport>,
    second: &Result<CallReport>,
    un1: &Result<CallReport>,
    un2: &Result<CallReport>,
) -> Vec<CheckResult> {
    let Ok(p1) = first else {
        let e = first.as_ref().err().map(ToString::to_string).unwrap_or_default();
        let mut out = vec![CheckResult::new(DraCase::Prepare, Outcome::Fail, e, Duration::ZERO)];
        for case in [DraCase::Cdi, DraCase::RequestNames, DraCase::PrepareIdempotent] {
            out.push(skipped(case, "Prepare failed"));
        }
        out.push(unprepare_result(un1, un2));
        out.push(skipped(DraCase::CallTime, "Prepare failed"));
        return out;
    };
    let took = Duration::from_millis(p1.duration_ms);
    let map_problems = map_problems(p1);
    let devices: Vec<String> =
        p1.claims.iter().flat_map(|c| c.devices.iter().map(|d| format!("{}/{}", d.pool, d.device))).collect();
    let warned: Vec<&String> = p1.claims.iter().flat_map(|c| c.warnings.iter()).collect();
    let prepare_ev = if map_problems.is_empty() && !warned.is_empty() {
        format!("answered in {} ms; warning: {}", p1.duration_ms, warned[0])
    } else if map_problems.is_empty() {
        format!("answered with devices [{}] in {} ms", devices.join(", "), p1.duration_ms)
    } else {
        map_problems.join("; ")
    };
    let of = |needle: &str| -> Vec<String> {
        p1.claims.iter().flat_map(|c| c.problems.iter()).filter(|p| p.contains(needle)).cloned().collect()
    };
    let (cdi, names) = (of("CDI"), of("request name"));
    let ids: usize = p1.claims.iter().flat_map(|c| &c.devices).map(|d| d.cdi_device_ids.len()).sum();
    vec![
        result(DraCase::Prepare, map_problems.is_empty(), prepare_ev, took),
        result(
            DraCase::Cdi,
            cdi.is_empty(),
            if cdi.is_empty() { format!("{ids} CDI IDs parse and resolve") } else { cdi.join("; ") },
            Duration::ZERO,
        ),
        result(
            DraCase::RequestNames,
            names.is_empty(),
            if names.is_empty() { "no '/' in request names".into() } else { names.join("; ") },
            Duration::ZERO,
        ),
        idempotent(p1, second),
        unprepare_result(un1, un2),
        call_time([first, second, un1, un2]),
    ]
}

/// The kubelet's own verdicts on an answer (the map rules and per-claim
/// errors), without what the other cases judge (CDI, request names, time).
pub fn map_problems(r: &CallReport) -> Vec<String> {
    r.problems
        .iter()
        .chain(r.claims.iter().flat_map(|c| c.problems.iter()))
        .filter(|p| !p.contains("CDI") && !p.contains("request name") && !p.starts_with("took "))
        .cloned()
        .collect()
}

fn answer(r: &CallReport) -> Vec<(String, Vec<String>)> {
    r.claims
        .iter()
        .flat_map(|c| c.devices.iter())
        .map(|d| (format!("{}/{}", d.pool, d.device), d.cdi_device_ids.iter().map(|x| x.id.clone()).collect()))
        .collect()
}

fn idempotent(p1: &CallReport, second: &Result<CallReport>) -> CheckResult {
    match second {
        Err(e) => result(DraCase::PrepareIdempotent, false, format!("the second Prepare failed: {e}"), Duration::ZERO),
        Ok(p2) if answer(p1) != answer(p2) => result(
            DraCase::PrepareIdempotent,
            false,
            format!("first {}, then {}", super::answer_text(&answer(p1)), super::answer_text(&answer(p2))),
            Duration::ZERO,
        ),
        Ok(p2) if !map_problems(p2).is_empty() => result(
            DraCase::PrepareIdempotent,
            false,
            format!("the second Prepare is not accepted: {}", map_problems(p2).join("; ")),
            Duration::ZERO,
        ),
        Ok(p2) => result(
            DraCase::PrepareIdempotent,
            true,
            format!("the same {} devices again", answer(p2).len()),
            Duration::from_millis(p2.duration_ms),
        ),
    }
}

fn unprepare_result(un1: &Result<CallReport>, un2: &Result<CallReport>) -> CheckResult {
    let judge = |r: &Result<CallReport>, which: &str| match r {
        Err(e) => Some(format!("{which} Unprepare failed: {e}")),
        Ok(r) if !map_problems(r).is_empty() => {
            Some(format!("{which} Unprepare not accepted: {}", map_problems(r).join("; ")))
        }
        Ok(_) => None,
    };
    let problems: Vec<String> = [judge(un1, "the first"), judge(un2, "the second")].into_iter().flatten().collect();
    let ok = problems.is_empty();
    result(
        DraCase::UnprepareIdempotent,
        ok,
        if ok { "both Unprepare calls accepted".into() } else { problems.join("; ") },
        Duration::ZERO,
    )
}

fn call_time(calls: [&Result<CallReport>; 4]) -> CheckResult {
    let times: Vec<u64> = calls.iter().filter_map(|r| r.as_ref().ok()).map(|r| r.duration_ms).collect();
    let deadline_hit = calls.iter().any(|r| matches!(r, Err(crate::error::Error::DeadlineExceeded { .. })));
    call_times(&times, deadline_hit, super::KUBELET_CALL_TIMEOUT)
}

/// The call-time verdict (also `dra smoke`'s): no call hit `deadline`
/// and the slowest took at most half of it.
pub fn call_times(times: &[u64], deadline_hit: bool, deadline: Duration) -> CheckResult {
    let worst = times.iter().copied().max().unwrap_or(0);
    let limit = u64::try_from(deadline.as_millis() / 2).unwrap_or(u64::MAX);
    let ok = worst <= limit && !deadline_hit;
    let ev = if deadline_hit {
        "a call hit the deadline".to_string()
    } else {
        format!("slowest of {} calls {worst} ms (limit {limit} ms)", times.len())
    };
    result(DraCase::CallTime, ok, ev, Duration::from_millis(worst))
}
