//! `dpctl dra`: DRA drivers' kubelet plugins. One-shot calls on a driver's
//! sockets (`info`, `prepare`, `unprepare`, `watch-health`), judged as the
//! kubelet judges the answers, and a mock driver (`mock`).
//!
//! Its own command rather than a part of `plugin` and `mock-plugin`: a DRA
//! driver speaks another API (claims in, CDI IDs out; two sockets; service
//! names in GetInfo) with none of the device-plugin flags, and `dpctl dra
//! --help` shows the whole DRA tool set in one place.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use crate::dra::claims::{self, ClaimRef};
use crate::dra::client::HealthEntry;
use crate::dra::mock::{DraEvent, Faults, MockConfig};
use crate::dra::{self, HealthApi, NodeApi, Service};
use crate::duration::parse as parse_duration;
use crate::error::{Error, Result, exit};
use crate::output::{Streams, dra as render, out_err};
use crate::transport::ClientConfig;

const HELP: &str = "\
Examples:
  dpctl dra mock gpu.example.com --dir /tmp/k        # a mock driver, registered in /tmp/k
  dpctl dra info --driver gpu.example.com --registry-dir /tmp/k/plugins_registry
  dpctl dra prepare --socket /tmp/k/plugins/gpu.example.com/dra.sock --claim default/gpu/4f5c-11
  dpctl dra unprepare --socket /tmp/k/plugins/gpu.example.com/dra.sock --claim default/gpu/4f5c-11
  dpctl dra watch-health --driver gpu.example.com --registry-dir /tmp/k/plugins_registry --count 1
  dpctl dra check --driver gpu.example.com --registry-dir /tmp/k/plugins_registry
  dpctl dra check --driver gpu.dpctl.example --kubeconfig /tmp/k/kubeconfig

Answers are judged as kubelets 1.34-1.37 judge them: every claim answered under its UID and no
other, per-claim errors, the 45 s deadline (half of it is reported as slow); and what the runtime
checks later: CDI IDs that parse and resolve in the spec directories (--cdi-dir; by default
/etc/cdi and /var/run/cdi). prepare and unprepare exit 1 when the kubelet would fail the pod.
prepare asks the driver to really prepare devices: point it at a test driver, or unprepare after.

A driver on the kubeletplugin helper reads every claim from its API server: give dra check the
driver's --kubeconfig and it creates a claim of its own there (allocated a device the driver
publishes) and deletes it afterwards; without one, the cases that need a claim are skipped, saying so.
check never touches a claim a pod holds: --claim naming one in the kubelet's dra_manager_state
(--kubelet-root) is refused with exit 2, naming the pod.";

/// `dpctl dra ...`
#[derive(Debug, Subcommand)]
#[command(after_long_help = HELP)]
pub enum DraCommand {
    /// GetInfo on a driver's registration socket, judged as the kubelet does; each advertised
    /// service probed on the endpoint (an empty NodePrepareResources; the first health message).
    #[command(after_long_help = HELP)]
    Info(InfoArgs),
    /// NodePrepareResources for the claims named, as the kubelet sends it; the answer judged.
    #[command(after_long_help = HELP)]
    Prepare(CallArgs),
    /// NodeUnprepareResources for the claims named; the answer judged.
    #[command(after_long_help = HELP)]
    Unprepare(CallArgs),
    /// Stream NodeWatchResources: each message is the driver's full device health list.
    #[command(after_long_help = HELP)]
    WatchHealth(WatchArgs),
    /// Judge a driver end to end: registration, advertised vs served, socket paths, Prepare by
    /// the kubelet's rules and again (idempotent), CDI IDs, request names, Unprepare twice, call
    /// times. Prepares and unprepares one claim of its own: use a test driver.
    #[command(after_long_help = HELP)]
    Check(CheckArgs),
    /// Be a DRA driver: register on plugins_registry, prepare claims, write CDI specs, stream
    /// health; misbehave on request (--fault, --prepare-delay, --prepare-error ...).
    #[command(after_long_help = MOCK_HELP)]
    Mock(Box<MockArgs>),
    /// CI for a DRA driver: run it unmodified against a fresh kubelet-sim (the DRA manager) and API
    /// server, take it through registration, slices, pods with claims, a kubelet restart, a reboot with
    /// the CDI directory wiped, parallel pods and long socket paths; table, JSON or JUnit.
    #[command(after_long_help = SMOKE_HELP)]
    Smoke(Box<SmokeArgs>),
}

/// Which registration socket.
#[derive(Debug, Args, Clone)]
pub struct RegistrationTarget {
    /// The driver's registration socket.
    #[arg(long, value_name = "PATH", conflicts_with = "driver")]
    pub registration: Option<PathBuf>,
    /// The driver name: its registration socket is <REGISTRY_DIR>/<NAME>-reg.sock.
    #[arg(long, value_name = "NAME")]
    pub driver: Option<String>,
    /// The kubelet's plugin registration directory.
    #[arg(long, value_name = "DIR", default_value = dra::DEFAULT_REGISTRY_DIR)]
    pub registry_dir: PathBuf,
    /// Limit for connecting to each socket.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive, default_value = "10s")]
    pub connect_timeout: Duration,
}

impl RegistrationTarget {
    fn socket(&self) -> Result<Option<PathBuf>> {
        match (&self.registration, &self.driver) {
            (Some(p), _) => Ok(Some(p.clone())),
            (None, Some(d)) => dra::registration_socket(&self.registry_dir, d, "--driver").map(Some),
            (None, None) => Ok(None),
        }
    }
}

/// `dpctl dra info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Which driver.
    #[command(flatten)]
    pub target: RegistrationTarget,
}

/// Which service socket, and which API on it.
#[derive(Debug, Args, Clone)]
pub struct ServiceTarget {
    /// The driver's service socket (its registered endpoint).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["registration", "driver"])]
    pub socket: Option<PathBuf>,
    /// Or its registration: the endpoint and service come from GetInfo.
    #[command(flatten)]
    pub registration: RegistrationTarget,
}

/// `dpctl dra prepare|unprepare`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// Which driver.
    #[command(flatten)]
    pub target: ServiceTarget,
    /// The node service [default: what a 1.34+ kubelet picks from GetInfo; v1 with --socket].
    #[arg(long, value_enum, value_name = "API")]
    pub api: Option<ApiArg>,
    /// A claim as NAMESPACE/NAME/UID (or NAME/UID in default); repeat for more.
    #[arg(long, value_name = "NS/NAME/UID", value_parser = claims::parse_flag)]
    pub claim: Vec<ClaimRef>,
    /// A JSON or YAML file with a list of {namespace, name, uid}.
    #[arg(long, value_name = "FILE")]
    pub claims: Option<PathBuf>,
    /// Deadline of the call [default: the kubelet's 45s].
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive)]
    pub timeout: Option<Duration>,
    /// CDI spec directory to resolve the answered IDs in; repeat [default: /etc/cdi, /var/run/cdi,
    /// and the cdi/ beside plugins_registry when it exists, as on a node kubelet-sim made].
    #[arg(long, value_name = "DIR")]
    pub cdi_dir: Vec<PathBuf>,
    /// Do not resolve CDI IDs (they are still parsed).
    #[arg(long, conflicts_with = "cdi_dir")]
    pub no_cdi_check: bool,
    /// The kubeconfig of the driver's API server: when the driver says a claim "got replaced",
    /// the error names the UID the API holds it under.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

/// `--api`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApiArg {
    /// k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin (kubelet 1.34+).
    V1,
    /// k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin (kubelet 1.32+).
    V1beta1,
}

/// `dpctl dra check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Which driver.
    #[command(flatten)]
    pub target: RegistrationTarget,
    /// The claim to prepare and unprepare [default: one created with --kubeconfig, else
    /// dpctl-check/dpctl-check/<random UID>]. Refused (exit 2) when a pod holds it in the
    /// kubelet's dra_manager_state.
    #[arg(long, value_name = "NS/NAME/UID", value_parser = claims::parse_flag)]
    pub claim: Option<ClaimRef>,
    /// The kubeconfig of the API server the driver uses (plain HTTP: dpctl apiserver's, or
    /// kubelet-sim --api-objects' ROOT/kubeconfig). Check creates a ResourceClaim there, allocated a
    /// device the driver publishes, prepares it, and deletes it afterwards: what a driver on the
    /// kubeletplugin helper needs, since it reads every claim from the API.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubelet root whose dra_manager_state names the claims pods hold [default: the parent of
    /// the registry directory].
    #[arg(long, value_name = "DIR")]
    pub kubelet_root: Option<PathBuf>,
    /// CDI spec directory to resolve the answered IDs in; repeat [default: /etc/cdi, /var/run/cdi,
    /// and <KUBELET_ROOT>/cdi when it exists, the /var/run/cdi of a node kubelet-sim made].
    #[arg(long, value_name = "DIR")]
    pub cdi_dir: Vec<PathBuf>,
    /// Deadline of each call [default: the kubelet's 45s].
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive)]
    pub timeout: Option<Duration>,
}

/// `dpctl dra watch-health`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Which driver.
    #[command(flatten)]
    pub target: ServiceTarget,
    /// The health service [default: what a 1.37 kubelet picks from GetInfo; v1alpha1 with --socket].
    #[arg(long, value_enum, value_name = "API")]
    pub api: Option<HealthArg>,
    /// Stop after this many messages.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Stop after this long [default: until stopped].
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive)]
    pub timeout: Option<Duration>,
}

/// `--api` of watch-health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HealthArg {
    /// v1alpha1.DRAResourceHealth (kubelet 1.34+).
    V1alpha1,
    /// v1.DRAResourceHealth (kubelet 1.37+).
    V1,
}

/// Runs `dpctl dra ...`.
pub async fn run(cmd: DraCommand, s: &mut Streams<'_>) -> Result<u8> {
    match cmd {
        DraCommand::Info(a) => {
            let Some(socket) = a.target.socket()? else {
                return Err(Error::invalid(
                    "--driver",
                    "name the driver (--driver NAME) or its socket (--registration PATH)",
                ));
            };
            let cfg = client_config(a.target.connect_timeout, Duration::from_secs(1), s.wire.clone());
            let report = dra::client::info(&socket, &cfg).await?;
            render::info(s, &report)?;
            // Exit 1 when the kubelet would refuse or stumble.
            Ok(if report.problems.is_empty() { exit::OK } else { exit::CHECK_FAILED })
        }
        DraCommand::Prepare(a) => call(a, true, s).await,
        DraCommand::Unprepare(a) => call(a, false, s).await,
        DraCommand::WatchHealth(a) => watch(a, s).await,
        DraCommand::Check(a) => check(a, s).await,
        DraCommand::Mock(a) => mock(*a, s).await,
        DraCommand::Smoke(a) => smoke(*a, s).await,
    }
}

async fn check(a: CheckArgs, s: &mut Streams<'_>) -> Result<u8> {
    // Ctrl-C or SIGTERM: the call in flight is given up, the report shows what was done (exit 1).
    let stop = crate::signal::shutdown();
    let Some(socket) = a.target.socket()? else {
        return Err(Error::invalid("--driver", "name the driver (--driver NAME) or its socket (--registration PATH)"));
    };
    // The kubelet root is the parent of plugins_registry (the registration
    // socket's directory).
    let kubelet_root = a.kubelet_root.unwrap_or_else(|| {
        let reg_dir = match &a.target.registration {
            Some(p) => p.parent().map(PathBuf::from).unwrap_or_default(),
            None => a.target.registry_dir.clone(),
        };
        reg_dir.parent().map(PathBuf::from).unwrap_or(reg_dir)
    });
    // A node kubelet-sim or dra smoke made keeps its /var/run/cdi in <root>/cdi.
    let dirs = if a.cdi_dir.is_empty() {
        let mut d = vec![PathBuf::from("/etc/cdi"), PathBuf::from("/var/run/cdi")];
        d.extend(Some(kubelet_root.join("cdi")).filter(|p| p.is_dir()));
        d
    } else {
        a.cdi_dir
    };
    let opts = dra::check::CheckOptions { claim: a.claim, kubeconfig: a.kubeconfig, kubelet_root, cdi_dirs: dirs };
    let cfg = client_config(a.target.connect_timeout, a.timeout.unwrap_or(dra::KUBELET_CALL_TIMEOUT), s.wire.clone());
    let report = dra::check::run(&socket, opts, &cfg, stop).await?;
    render::check(s, &report)?;
    Ok(if report.ok() { exit::OK } else { exit::CHECK_FAILED })
}

/// The client settings of a `dra` call, with the `-v`/`-vv` wire tap
/// `plugin` commands use (`tap`: the streams' tap, if any).
fn client_config(connect: Duration, call: Duration, tap: Option<crate::wire_events::Tap>) -> ClientConfig {
    ClientConfig { connect_timeout: connect, call_timeout: call, tap, ..ClientConfig::default() }
}

/// The service socket and the services GetInfo advertises (none with --socket).
async fn resolve(t: &ServiceTarget, tap: Option<crate::wire_events::Tap>) -> Result<(PathBuf, Option<Vec<String>>)> {
    if let Some(s) = &t.socket {
        return Ok((s.clone(), None));
    }
    let Some(reg) = t.registration.socket()? else {
        return Err(Error::invalid("--socket", "name the driver: --socket PATH, --registration PATH or --driver NAME"));
    };
    // The kubelet gives GetInfo 1 s.
    let info = dra::client::get_info(&reg, &client_config(t.registration.connect_timeout, Duration::from_secs(1), tap))
        .await?;
    Ok((dra::client::endpoint_of(&info, &reg), Some(info.supported_versions)))
}

async fn call(a: CallArgs, prepare: bool, s: &mut Streams<'_>) -> Result<u8> {
    // Ctrl-C or SIGTERM: the call is given up and reported unanswered (exit 1).
    let stop = crate::signal::shutdown();
    let claims = claims::collect(a.claim, a.claims.as_deref())?;
    if let Some(k) = &a.kubeconfig {
        // A bad kubeconfig is bad input, found before the driver is called.
        crate::apiserver::client::Client::from_kubeconfig(k, "--kubeconfig")?;
    }
    let (socket, advertised) = resolve(&a.target, s.wire.clone()).await?;
    let api = match (a.api, &advertised) {
        (Some(ApiArg::V1), _) => NodeApi::V1,
        (Some(ApiArg::V1beta1), _) => NodeApi::V1beta1,
        (None, None) => NodeApi::V1,
        (None, Some(list)) => dra::chosen_node_api(list).ok_or_else(|| {
            Error::invalid("--api", format!("the driver advertises no DRAPlugin service a 1.34+ kubelet knows ({list:?}); pass --api to call one anyway"))
        })?,
    };
    let cfg = client_config(
        a.target.registration.connect_timeout,
        a.timeout.unwrap_or(dra::KUBELET_CALL_TIMEOUT),
        s.wire.clone(),
    );
    let dirs = if prepare {
        match (a.no_cdi_check, a.cdi_dir.is_empty()) {
            (true, _) => vec![],
            (false, true) => {
                // A node kubelet-sim made keeps its /var/run/cdi in <root>/cdi (root: plugins_registry's parent).
                let root = a.target.registration.registry_dir.parent().map(|r| r.join("cdi"));
                let mut d = vec![PathBuf::from("/etc/cdi"), PathBuf::from("/var/run/cdi")];
                d.extend(root.filter(|p| a.target.socket.is_none() && p.is_dir()));
                d
            }
            (false, false) => a.cdi_dir,
        }
    } else {
        vec![]
    };
    let sent = std::time::Instant::now();
    let answer = async {
        if prepare {
            dra::client::prepare(&socket, api, &claims, &cfg, &dirs).await
        } else {
            dra::client::unprepare(&socket, api, &claims, &cfg).await
        }
    };
    let report = tokio::select! {
        r = answer => r,
        () = stop => {
            let rpc = if prepare { "NodePrepareResources" } else { "NodeUnprepareResources" };
            let c = render::UnansweredCall { rpc, socket: &socket, claims: &claims, waited: sent.elapsed() };
            render::call_interrupted(s, &c)?;
            return Ok(exit::CHECK_FAILED);
        }
    };
    let report = match (report, &a.kubeconfig) {
        (Err(Error::Rpc { rpc, path, code, message }), Some(kc)) if message.contains(" got replaced") => {
            let notes = dra::check_claim::api_uids(kc, &claims).await?;
            let message = if notes.is_empty() { message } else { format!("{message} ({})", notes.join("; ")) };
            return Err(Error::Rpc { rpc, path, code, message });
        }
        (r, _) => r?,
    };
    render::call(s, &report)?;
    // Exit 1 when the kubelet would fail the pod.
    Ok(if report.ok() { exit::OK } else { exit::CHECK_FAILED })
}

async fn watch(a: WatchArgs, s: &mut Streams<'_>) -> Result<u8> {
    let (socket, advertised) = resolve(&a.target, s.wire.clone()).await?;
    let api = match (a.api, &advertised) {
        (Some(HealthArg::V1), _) => HealthApi::V1,
        (Some(HealthArg::V1alpha1), _) | (None, None) => HealthApi::V1alpha1,
        (None, Some(list)) => dra::chosen_health_api(list).ok_or_else(|| {
            Error::invalid(
                "--api",
                format!("the driver advertises no DRAResourceHealth service ({list:?}); pass --api to try one anyway"),
            )
        })?,
    };
    let cfg = client_config(a.target.registration.connect_timeout, Duration::from_secs(10), s.wire.clone());
    let rx = dra::client::watch_health(&socket, api, &cfg).await?;
    watch_health(s, rx, a.count, a.timeout.map(crate::duration::deadline)).await
}

const MOCK_HELP: &str = "\
Layout under --dir (a kubelet root directory):
  <DIR>/plugins_registry/<DRIVER>-reg.sock   registration (type DRAPlugin)
  <DIR>/plugins/<DRIVER>/dra.sock            the endpoint: DRAPlugin and health services
  <DIR>/plugins/<DRIVER>/cdi/                CDI specs, one per prepared claim (--cdi-dir to move;
                                             /var/run/cdi only if you name it)

Without an API server the mock allocates by itself: each new claim gets --devices-per-claim free
devices (dev-0 ...) of --pool, the same ones again when prepared again, until unprepared. With
--kubeconfig and --node-name it does what a driver on the kubeletplugin helper does: publishes its
pool as one ResourceSlice of the node (created, updated or deleted as the helper's controller does,
owned by the Node) before it registers and checks it again every 5 s, and at each Prepare GETs every claim and prepares the
devices of its allocation for this driver, failing the call with the helper's words (`retrieve
claim NS/NAME: ...`, `claim NS/NAME not allocated`, `claim NS/NAME got replaced`). Every call is
shown as an event (-o json: JSON Lines) and, with --record, written to a file.

Faults (--fault, repeatable):
  missing-uid       the first claim of each Prepare is left out of the answer
  not-idempotent    a claim prepared again gets other devices
  unresolvable-cdi  CDI IDs are answered but no spec is written
  bad-cdi-id        CDI IDs that do not parse (no vendor/class)
  health-unserved   health is advertised but not served (kubelets log Unimplemented every 5 s)
  register-once     GetInfo is answered once: after a kubelet restart the driver never registers again
  same-device       every claim is answered with the pool's first device (its CDI ID), whatever was
                    allocated: two claims, one device
  unpublished-device
                    every claim is answered with dev-N (N = --devices), a device no ResourceSlice
                    publishes: an off-by-one (dra check's published case, dra smoke's admission)

Examples:
  dpctl dra mock gpu.example.com --dir /tmp/k --devices 4
  dpctl dra mock gpu.example.com --dir /tmp/k --service v1beta1 --service v1   # 1.34+ pick v1beta1
  dpctl dra mock gpu.example.com --dir /tmp/k --prepare-delay 50s   # past the 45 s deadline";

/// `dpctl dra mock`.
#[derive(Debug, Args)]
pub struct MockArgs {
    /// The driver name (a DNS subdomain, e.g. gpu.example.com).
    #[arg(value_name = "DRIVER")]
    pub driver: String,
    /// The kubelet root directory the sockets go under.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/kubelet")]
    pub dir: PathBuf,
    /// Where CDI specs go [default: <DIR>/plugins/<DRIVER>/cdi].
    #[arg(long, value_name = "DIR")]
    pub cdi_dir: Option<PathBuf>,
    /// A service to advertise, in order: v1, v1beta1, health-v1alpha1, health-v1 (or the advertised
    /// string); repeat [default: v1, v1beta1, health-v1alpha1, as the kubeletplugin helper].
    #[arg(long, value_name = "SERVICE", value_parser = Service::parse)]
    pub service: Vec<Service>,
    /// How many devices.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub devices: usize,
    /// Devices each claim gets.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub devices_per_claim: usize,
    /// The pool name.
    #[arg(long, value_name = "NAME", default_value = "pool-0")]
    pub pool: String,
    /// request_names of every device answered; repeat [default: none, i.e. all requests].
    #[arg(long, value_name = "NAME")]
    pub request_name: Vec<String>,
    /// A device reported Unhealthy on the health stream; repeat.
    #[arg(long, value_name = "DEVICE")]
    pub unhealthy: Vec<String>,
    /// Health stream period.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub health_interval: Duration,
    /// What to break; repeat.
    #[arg(long, value_enum, value_name = "FAULT")]
    pub fault: Vec<FaultArg>,
    /// Wait this long before answering each Prepare.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub prepare_delay: Option<Duration>,
    /// Answer every claim of Prepare with this error.
    #[arg(long, value_name = "TEXT")]
    pub prepare_error: Option<String>,
    /// Fail Prepare as a whole with this gRPC code (e.g. unavailable).
    #[arg(long, value_name = "CODE", value_parser = crate::rpc::parse_code)]
    pub prepare_status: Option<tonic::Code>,
    /// Answer every claim of Unprepare with this error.
    #[arg(long, value_name = "TEXT")]
    pub unprepare_error: Option<String>,
    /// Write every call as a JSON line to FILE (only an empty file or a record dpctl wrote is replaced).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// The host device node each device's CDI entry adds, e.g. /dev/gpu{index} ({index}: the
    /// device's number, {device}: its name) [default: none, env only].
    #[arg(long, value_name = "PATH")]
    pub device_node: Option<String>,
    /// Use the API server of this kubeconfig (plain HTTP: `dpctl apiserver`'s, or kubelet-sim
    /// --api-objects' ROOT/kubeconfig) as a helper-built driver does: publish the pool as a
    /// ResourceSlice of --node-name, and prepare the devices each claim's allocation names (the
    /// claim GET first; the helper's errors for a missing, unallocated or replaced claim).
    #[arg(long, value_name = "FILE", requires = "node_name")]
    pub kubeconfig: Option<PathBuf>,
    /// The node the mock runs on (its Node must be in the API; needs --kubeconfig).
    #[arg(long, value_name = "NAME", requires = "kubeconfig")]
    pub node_name: Option<String>,
}

/// `--fault`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FaultArg {
    /// The first claim of each Prepare is left out.
    MissingUid,
    /// A claim prepared again gets other devices.
    NotIdempotent,
    /// CDI IDs answered, no spec written.
    UnresolvableCdi,
    /// CDI IDs that do not parse.
    BadCdiId,
    /// Health advertised, not served.
    HealthUnserved,
    /// GetInfo answered once: no registration after a kubelet restart.
    RegisterOnce,
    /// Every claim answered with the first device.
    SameDevice,
    /// Every claim answered with no device and no error.
    NoDevice,
    /// Every claim answered with a device no ResourceSlice publishes.
    UnpublishedDevice,
}

fn mock_config(a: MockArgs) -> Result<MockConfig> {
    let has = |f| a.fault.contains(&f);
    let faults = Faults {
        missing_uid: has(FaultArg::MissingUid),
        not_idempotent: has(FaultArg::NotIdempotent),
        unresolvable_cdi: has(FaultArg::UnresolvableCdi),
        bad_cdi_id: has(FaultArg::BadCdiId),
        health_unserved: has(FaultArg::HealthUnserved),
        register_once: has(FaultArg::RegisterOnce),
        same_device: has(FaultArg::SameDevice),
        no_device: has(FaultArg::NoDevice),
        unpublished_device: has(FaultArg::UnpublishedDevice),
        prepare_delay: a.prepare_delay,
        prepare_error: a.prepare_error,
        prepare_status: a.prepare_status,
        unprepare_error: a.unprepare_error,
    };
    let services = if a.service.is_empty() {
        vec![Service::Node(NodeApi::V1), Service::Node(NodeApi::V1beta1), Service::Health(HealthApi::V1alpha1)]
    } else {
        a.service
    };
    let plugin_dir = a.dir.join("plugins").join(&a.driver);
    Ok(MockConfig {
        registry_dir: a.dir.join("plugins_registry"),
        endpoint: plugin_dir.join("dra.sock"),
        cdi_dir: a.cdi_dir.unwrap_or_else(|| plugin_dir.join("cdi")),
        driver: a.driver,
        services,
        pool: a.pool,
        devices: a.devices,
        devices_per_claim: a.devices_per_claim,
        request_names: a.request_name,
        unhealthy: a.unhealthy.into_iter().collect::<BTreeSet<_>>(),
        health_interval: crate::duration::check(a.health_interval)
            .map_err(|e| Error::invalid("--health-interval", e))?,
        faults,
        record: a.record,
        device_node: a.device_node,
    })
}

async fn mock(mut a: MockArgs, s: &mut Streams<'_>) -> Result<u8> {
    let api = match (a.kubeconfig.take(), a.node_name.take()) {
        (Some(kubeconfig), Some(node_name)) => Some(dra::mock::ApiOptions { kubeconfig, node_name }),
        _ => None,
    };
    let cfg = mock_config(a)?;
    cfg.check()?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let run = dra::mock::run_with_api(cfg, api, tx, crate::signal::shutdown());
    mock_events(s, rx, run).await
}

/// `dra watch-health`: one table (or JSON line) per message until `count`
/// messages, the deadline, Ctrl-C, or the stream's end (an error, exit 4).
async fn watch_health(
    s: &mut Streams<'_>,
    mut rx: tokio::sync::mpsc::Receiver<Result<Vec<HealthEntry>>>,
    count: Option<u64>,
    deadline: Option<tokio::time::Instant>,
) -> Result<u8> {
    let stop = crate::signal::shutdown();
    tokio::pin!(stop);
    let mut seq = 0u64;
    loop {
        let until = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let msg = tokio::select! {
            m = rx.recv() => m,
            () = until => return Ok(exit::OK),
            () = &mut stop => return Ok(exit::OK),
        };
        let Some(msg) = msg else { return Ok(exit::OK) };
        let devices = msg?;
        seq += 1;
        render::health_message(s, seq, &devices).map_err(out_err)?;
        if count.is_some_and(|c| seq >= c) {
            return Ok(exit::OK);
        }
    }
}

/// Runs the mock driver (`run`), showing its events as they come.
async fn mock_events(
    s: &mut Streams<'_>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<DraEvent>,
    run: impl std::future::Future<Output = Result<()>>,
) -> Result<u8> {
    tokio::pin!(run);
    let mut result = None;
    loop {
        tokio::select! {
            e = rx.recv() => match e {
                Some(e) => render::mock_event(s.out, s.format.is_json(), &e).map_err(out_err)?,
                None => break,
            },
            r = &mut run, if result.is_none() => { result = Some(r); }
        }
        if result.is_some() && rx.is_empty() {
            break;
        }
    }
    while let Ok(e) = rx.try_recv() {
        render::mock_event(s.out, s.format.is_json(), &e).map_err(out_err)?;
    }
    match result {
        Some(r) => r.map(|()| exit::OK),
        None => run.await.map(|()| exit::OK),
    }
}

const SMOKE_HELP: &str = "\
The driver runs in a fresh kubelet root under /tmp (removed afterwards unless --keep), with these
placeholders replaced in every argument and set as environment variables:
  {dir}           the kubelet root (DPCTL_DRA_DIR); dpctl dra mock's --dir
  {registry_dir}  <dir>/plugins_registry, watched by kubelet-sim (DPCTL_REGISTRY_DIR)
  {plugin_dir}    <dir>/plugins: service sockets go in <plugin_dir>/<driver>/ (DPCTL_PLUGIN_DIR)
  {cdi_dir}       <dir>/cdi, the node's /var/run/cdi (DPCTL_CDI_DIR)
  {kubeconfig}    the in-process API server's kubeconfig (KUBECONFIG)
  {node}          the Node it serves, dpctl-smoke-node (NODE_NAME)
  {instance}      1, or 2 for the second instance of --rolling (DPCTL_DRA_INSTANCE)

The API server serves the Node and the ResourceClaims smoke allocates from the slices the driver
publishes (made-up devices when it publishes none); kubelet-sim gets the same claims in each pod's
manifest. Steps: launch, registration, advertised-served, socket-paths, published-slices, admission,
cdi, request-names, prepare-idempotent, kubelet-restart, node-reboot, unprepare-idempotent,
parallel-pods (each claim its own device), distinct-devices (their CDI IDs differ), rolling-update
(only with --rolling), long-socket-path, call-time, shutdown. Each row
gives the rule and the evidence; a failure gives the kubelet's words. The verdicts on registration,
request names, idempotence and call times are dra check's.

long-socket-path starts the driver again under a kubelet root whose socket paths pass 107 bytes (a
unix socket cannot hold them): it passes when the driver is still reachable there, or stops with an
error naming the path; it fails when it hangs silently or registers an endpoint the kubelet cannot dial.

--timeout lowers the kubelet's 45 s deadline on each Prepare and Unprepare (for quick CI of a slow
driver: a call over half of it is slow, over it fails, and the output says the deadline was lowered).

Examples:
  dpctl dra smoke -- dpctl dra mock gpu.example.com --dir {dir} --cdi-dir {cdi_dir}
  dpctl dra smoke --junit smoke.xml -- ./my-driver --kubeconfig {kubeconfig} --cdi-dir {cdi_dir}
  dpctl dra smoke --timeout 1s -- dpctl dra mock gpu.example.com --dir {dir} --prepare-delay 2s
  dpctl dra smoke --kubelet-version 1.34 --skip long-socket-path -- ./my-driver ...
  dpctl dra smoke --kubelet-version 1.34-1.37 -- ./my-driver ...   (one run per release, one report)

Exit codes:
  0  every step passed (or was skipped)
  1  a step failed (the report says which and why), or the run was interrupted
  2  bad usage (no command, unknown --skip name, unwritable --junit, --kubelet-version before 1.34)
  3  kubelet-sim or the API server could not bind their sockets";

/// `dpctl dra smoke`.
#[derive(Debug, Args)]
pub struct SmokeArgs {
    /// The driver's command line, after `--` (placeholders below).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// The driver to test when several register [default: the first].
    #[arg(long, value_name = "NAME")]
    pub driver: Option<String>,
    /// The kubelet releases whose DRA manager kubelet-sim plays (help text: `values::release_help`).
    #[arg(long, value_name = "VERSION,...", default_value = crate::kubelet_version::NEWEST_NAME,
        value_parser = super::values::kubelet_versions(), help = super::values::release_help(
        "The kubelet releases whose DRA manager kubelet-sim plays (1.34 or later), one run each: \
         comma-separated, or a range ({referees} or 1.34..{newest})."))]
    pub kubelet_version: String,
    /// How long the driver may take to start and register (also again after a restart).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "20s")]
    pub register_timeout: Duration,
    /// How long to wait for the driver's first ResourceSlice.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "3s")]
    pub slice_timeout: Duration,
    /// Deadline of each Prepare and Unprepare: the kubelet's 45s, or lower.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive, default_value = "45s")]
    pub timeout: Duration,
    /// Pods admitted at once in parallel-pods.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub parallel: usize,
    /// Start a second instance ({instance} = 2) beside the first: a rolling update.
    #[arg(long)]
    pub rolling: bool,
    /// How long the driver may take to exit after SIGTERM before it gets SIGKILL.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub grace: Duration,
    /// Leave out these steps (comma-separated): published-slices, request-names, prepare-idempotent,
    /// kubelet-restart, node-reboot, parallel-pods, distinct-devices, rolling-update, long-socket-path.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub skip: Vec<String>,
    /// Print only what two runs of the same driver agree on (per release: each step's name and
    /// outcome, the totals), as JSON (YAML with -o yaml), for diffing against a committed baseline.
    #[arg(long)]
    pub stable: bool,
    /// Also write the report as JUnit XML to FILE (testsuite "dpctl dra smoke").
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the driver's whole output to DIR/plugin.stdout.log and DIR/plugin.stderr.log.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Keep the fresh kubelet root afterwards (checkpoint, CDI specs, API server record).
    #[arg(long)]
    pub keep: bool,
    /// What plays the node: `sim` (kubelet-sim and dpctl's API server; no root), or
    /// `cluster:DIR`, a one-node cluster: etcd, kube-apiserver, kube-scheduler,
    /// kube-controller-manager and kubectl from DIR (conformance/build.sh cluster), the real
    /// kubelet with containerd and runc, in a private mount namespace (root; docs/cluster.md).
    #[arg(long, value_name = "ENGINE", default_value = "sim", value_parser = parse_dra_engine)]
    pub engine: DraEngine,
}

/// `dra smoke --engine`: the sim, or a cluster's binary directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraEngine(pub Option<PathBuf>);

fn parse_dra_engine(s: &str) -> std::result::Result<DraEngine, String> {
    match s {
        "sim" => Ok(DraEngine(None)),
        _ => match s.strip_prefix("cluster:") {
            Some(d) if !d.is_empty() => Ok(DraEngine(Some(PathBuf::from(d)))),
            _ => Err(format!(
                "{:?}: want sim or cluster:DIR (DIR: the binaries conformance/build.sh cluster builds)",
                crate::text::shorten(s, 64)
            )),
        },
    }
}

async fn smoke(a: SmokeArgs, s: &mut Streams<'_>) -> Result<u8> {
    use crate::smoke::dra::{DraSmokeConfig, select_skips};
    let versions = crate::kubelet_sim::KubeletVersion::parse_list(&a.kubelet_version)?;
    if a.engine.0.is_some() && versions.len() > 1 {
        return Err(Error::invalid(
            "--kubelet-version",
            "--engine cluster:DIR runs one release (the one its binaries are): name one, e.g. 1.37",
        ));
    }
    let config = DraSmokeConfig {
        cluster: a.engine.0,
        command: a.command,
        keep: a.keep,
        driver: a.driver,
        register_timeout: crate::duration::check(a.register_timeout)
            .map_err(|e| Error::invalid("--register-timeout", e))?,
        slice_timeout: crate::duration::check(a.slice_timeout).map_err(|e| Error::invalid("--slice-timeout", e))?,
        timeout: a.timeout,
        parallel: a.parallel,
        rolling: a.rolling,
        grace: crate::duration::check(a.grace).map_err(|e| Error::invalid("--grace", e))?,
        skip: select_skips(&a.skip)?,
        log_dir: a.log_dir,
        ..DraSmokeConfig::default()
    };
    config.check_inputs()?;
    let junit_file = super::junit::JunitFile::create(a.junit.as_deref())?;
    let bar = crate::output::progress_bar(s.progress, None, "{spinner} {elapsed} {msg}");
    let steps = s.format.is_json() || a.stable;
    let several = versions.len() > 1;
    let whole = !s.err_is_tty;
    let mut narrator = crate::output::smoke::Narrator::new(&mut *s.err, s.quiet, bar.as_ref(), several, steps, whole);
    let matrix = crate::smoke::dra::run_releases(config, &versions, crate::signal::shutdown(), &mut |p| {
        narrator.on(p);
    })
    .await;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let matrix = matrix?;
    if let Some(file) = junit_file {
        file.write(|w| crate::output::smoke::junit_report(w, &matrix))?;
    }
    crate::output::smoke::finished(s, &matrix, several, a.stable)?;
    super::junit::step_summary(&mut *s.err, |w| crate::output::smoke::step_summary(w, &matrix))?;
    Ok(matrix.exit_code())
}
