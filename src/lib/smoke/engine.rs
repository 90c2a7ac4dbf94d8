//! The kubelet dpctl steers: the in-process kubelet-sim, or a referee (a
//! separate program that runs the kubelet's own device manager, Topology
//! Manager, plugin manager and PodResources server for one release and
//! answers kubelet-sim's control protocol).
//!
//! Both are driven the same way: requests of [`crate::kubelet_sim::control`]
//! and the directories of a fresh [`Layout`]. The referee hard-codes the
//! kubelet's paths (`/var/lib/kubelet/device-plugins` in the device manager),
//! so it runs inside the `smoke --isolate` mount namespace ([`super::isolate`])
//! with the layout's three directories bound on the kubelet's standard paths;
//! plugins and clients outside use the layout's directories, the same files.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use super::isolate::{IsolateConfig, Layout, Plan};
use super::process::{Launch, PluginProcess, Stream};
use crate::error::{Error, Result};
use crate::kubelet_sim::control::{self, Answer, RemoteError, Reply, Request};
use crate::kubelet_sim::{KubeletSim, KubeletVersion, SimConfig, SimHandle, SimStatus};

/// File name prefix of the referee binaries `conformance/build.sh` builds.
pub const REFEREE_PREFIX: &str = "dpctl-referee-";

/// Where `conformance/build.sh` puts the referees by default, relative to the repository.
pub const REFEREE_DEFAULT_DIR: &str = "target/referee";

/// The environment variable naming the directory of referee binaries.
pub const ENV_REFEREE_DIR: &str = "DPCTL_REFEREE_DIR";

/// How long a referee may take to serve (a Go program that starts four
/// kubelet managers; slow on a loaded CI machine, never minutes).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a referee gets to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How long `--version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// Which kubelet answers (`--engine`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EngineKind {
    /// The in-process kubelet-sim.
    #[default]
    Sim,
    /// A referee binary, or a directory of `dpctl-referee-1.NN` binaries.
    Referee(PathBuf),
    /// A real kubelet (a binary, or a directory of `kubelet-1.NN`) with
    /// containerd and runc ([`super::node`]).
    Kubelet(PathBuf),
}

impl FromStr for EngineKind {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "sim" {
            return Ok(EngineKind::Sim);
        }
        if let Some(p) = s.strip_prefix("kubelet:") {
            if p.is_empty() {
                return Err("kubelet: needs a PATH (a kubelet binary or a directory of kubelet-1.NN)".into());
            }
            return Ok(EngineKind::Kubelet(PathBuf::from(p)));
        }
        match s.strip_prefix("referee:") {
            Some(p) if !p.is_empty() => Ok(EngineKind::Referee(PathBuf::from(p))),
            Some(_) => Err("referee: needs a PATH (a referee binary or a directory of dpctl-referee-1.NN)".into()),
            None => Err(format!(
                "{:?} is not an engine; use sim, referee:PATH (a referee binary or a directory of \
                 dpctl-referee-1.NN binaries, built by conformance/build.sh) or kubelet:PATH (a kubelet \
                 binary or a directory of kubelet-1.NN, built by conformance/build.sh kubelet)",
                crate::text::shorten(s, 60)
            )),
        }
    }
}

impl EngineKind {
    /// A short name for reports: `sim` or `referee`.
    pub fn word(&self) -> &'static str {
        match self {
            EngineKind::Sim => "sim",
            EngineKind::Referee(_) => "referee",
            EngineKind::Kubelet(_) => "kubelet",
        }
    }
}

/// The referee binary for `version`: `path` itself when it is a file, else
/// `path/dpctl-referee-1.NN`. A missing one is bad input naming the ones
/// that exist and how to build it.
pub fn referee_binary(path: &Path, version: KubeletVersion) -> Result<PathBuf> {
    let release = version.numbered();
    let place = place_of(path);
    if !KubeletVersion::referee_releases().contains(&version) {
        let built = KubeletVersion::referee_releases().iter().map(ToString::to_string).collect::<Vec<_>>();
        return Err(Error::invalid(
            &place,
            format!(
                "no referee plays kubelet {version}: conformance/build.sh builds the releases {}",
                built.join(", ")
            ),
        ));
    }
    let meta = std::fs::metadata(path).map_err(|e| {
        Error::invalid(
            &place,
            format!(
                "{e}; build the referees with conformance/build.sh {release} (they go to {REFEREE_DEFAULT_DIR}/, \
                 or to ${ENV_REFEREE_DIR})"
            ),
        )
    })?;
    if meta.is_file() {
        return Ok(path.to_path_buf());
    }
    if !meta.is_dir() {
        return Err(Error::invalid(&place, "neither a referee binary nor a directory of them"));
    }
    let wanted = path.join(format!("{REFEREE_PREFIX}{release}"));
    if wanted.is_file() {
        return Ok(wanted);
    }
    let have = available_referees(path);
    Err(Error::invalid(
        &place,
        format!(
            "no {REFEREE_PREFIX}{release} in {} (it holds: {}); build it with conformance/build.sh {release}",
            path.display(),
            if have.is_empty() { "none".to_string() } else { have.join(", ") }
        ),
    ))
}

/// `--engine referee:PATH` for errors, a very long PATH shortened.
fn place_of(path: &Path) -> String {
    format!("--engine referee:{}", crate::text::shorten(&path.display().to_string(), 120))
}

/// The referee binaries in `dir`, by file name, sorted.
pub fn available_referees(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(std::result::Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(REFEREE_PREFIX))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Runs `binary --version` and checks it plays `version`: the answer is
/// `dpctl-referee kubelet v1.N.P`; another release is refused.
pub async fn referee_version(binary: &Path, version: KubeletVersion) -> Result<String> {
    let place = place_of(binary);
    let mut cmd = tokio::process::Command::new(binary);
    cmd.arg("--version").stdin(std::process::Stdio::null()).kill_on_drop(true);
    let out = match tokio::time::timeout(VERSION_TIMEOUT, cmd.output()).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => {
            let release = version.numbered();
            return Err(Error::invalid(
                &place,
                format!("cannot run it: {e}; build it with conformance/build.sh {release} (it must be executable)"),
            ));
        }
        Err(_) => {
            return Err(Error::Timeout { what: format!("{} --version", binary.display()), timeout: VERSION_TIMEOUT });
        }
    };
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let played = text.strip_prefix("dpctl-referee kubelet v").map(str::to_string);
    let Some(played) = played.filter(|_| out.status.success()) else {
        return Err(Error::invalid(
            &place,
            format!(
                "not a dpctl referee: --version answered {:?} ({}), not \"dpctl-referee kubelet v1.N.P\"; \
                 build one with conformance/build.sh {}",
                crate::text::shorten(&text, 80),
                out.status,
                version.numbered()
            ),
        ));
    };
    let release = version.numbered();
    let minor_of = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
    if minor_of(&played) != release {
        return Err(Error::invalid(
            &place,
            format!(
                "this referee runs kubelet v{played}, not release {release} (--kubelet-version); use \
                 {REFEREE_PREFIX}{release} (conformance/build.sh {release})"
            ),
        ));
    }
    Ok(format!("v{played}"))
}

/// A running kubelet, of either kind.
#[derive(Debug)]
pub struct Engine {
    running: Running,
    /// `kubelet-sim`, or `referee v1.37.2`.
    name: String,
    dir: PathBuf,
}

#[derive(Debug)]
enum Running {
    Sim(SimHandle),
    Referee { process: PluginProcess, control: PathBuf },
    Kubelet(Box<super::node::Node>),
}

impl Engine {
    /// Starts `kind` in `layout`. The sim takes `config` as it is; a referee
    /// takes its release and Topology Manager, CPU manager and machine from
    /// it, runs inside a mount namespace (dpctl re-run as the helper: `helper`,
    /// or this executable) and is ready when its control socket answers.
    pub async fn start(
        kind: &EngineKind,
        config: SimConfig,
        layout: &Layout,
        helper: Option<PathBuf>,
    ) -> Result<Engine> {
        let dir = config.dir.clone();
        match kind {
            EngineKind::Sim => {
                let sim = KubeletSim::start(config).await?;
                Ok(Engine { running: Running::Sim(sim), name: crate::kubelet_sim::default_engine(), dir })
            }
            EngineKind::Referee(path) => {
                let binary = referee_binary(path, config.kubelet_version)?;
                let played = referee_version(&binary, config.kubelet_version).await?;
                let (process, control) = launch_referee(&binary, &config, layout, helper).await?;
                Ok(Engine { running: Running::Referee { process, control }, name: format!("referee {played}"), dir })
            }
            EngineKind::Kubelet(path) => {
                let release = config.kubelet_version.numbered();
                let node = super::node::Node::start(path, &release, &config, layout, helper).await?;
                Ok(Engine { name: node.name().to_string(), running: Running::Kubelet(Box::new(node)), dir })
            }
        }
    }

    /// Why the engine cannot reboot the node on request (a real kubelet), or
    /// `None` when it can; every engine restarts the kubelet.
    pub fn cannot_reboot(&self) -> Option<&'static str> {
        matches!(self.running, Running::Kubelet(_)).then_some(super::node::NOT_PLAYED)
    }

    /// What a real kubelet appends to a static pod's name (`-<node name>`,
    /// k8s.io/kubernetes pkg/kubelet/config/common.go `applyDefaults`), as
    /// PodResources names it; empty on the sim and the referee.
    pub fn static_pod_suffix(&self) -> String {
        match self.running {
            Running::Kubelet(_) => super::node::config::static_pod_name(""),
            Running::Sim(_) | Running::Referee { .. } => String::new(),
        }
    }

    /// What answers: `kubelet-sim` or `referee v1.N.P`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device-plugin directory (as plugins outside see it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The in-process sim, when this is one.
    pub fn sim(&self) -> Option<&SimHandle> {
        match &self.running {
            Running::Sim(s) => Some(s),
            Running::Referee { .. } | Running::Kubelet(_) => None,
        }
    }

    /// Sends one control request; a remote failure is `Ok(Err(..))`.
    pub async fn call(&self, request: Request) -> Result<std::result::Result<Answer, RemoteError>> {
        match &self.running {
            Running::Sim(sim) => Ok(match control::handle(sim.clone(), Ok(request)).await {
                Reply::Ok(a) => Ok(a),
                Reply::Error(e) => Err(e),
            }),
            Running::Referee { process, control } => {
                if let Some(exit) = process.exit() {
                    return Err(Error::invalid(&self.name, format!("the referee {exit}; {}", last_lines(process))));
                }
                let timeout = request.deadline();
                let reply: Reply = crate::transport::control::call(control, &request, timeout).await?;
                Ok(match reply {
                    Reply::Ok(a) => Ok(a),
                    Reply::Error(e) => Err(e),
                })
            }
            Running::Kubelet(node) => Ok(node.call(request).await),
        }
    }

    /// The status, with the engine's name filled in.
    pub async fn status(&self) -> Result<SimStatus> {
        match self.call(Request::Status).await? {
            Ok(Answer::Status(mut s)) => {
                if let Running::Referee { .. } | Running::Kubelet(_) = self.running {
                    // The referee's own word wins when it gives one.
                    if s.engine == crate::kubelet_sim::default_engine() {
                        s.engine.clone_from(&self.name);
                    }
                }
                Ok(s)
            }
            Ok(other) => Err(Error::invalid(&self.name, format!("answered status with {other:?}"))),
            Err(e) => Err(Error::invalid(&self.name, format!("status: {}", e.message))),
        }
    }

    /// Completes when a referee's process ends on its own (never for the sim).
    pub async fn exited(&self) {
        match &self.running {
            Running::Sim(_) => std::future::pending().await,
            Running::Referee { process, .. } => {
                process.exited().await;
            }
            Running::Kubelet(node) => node.exited().await,
        }
    }

    /// The referee's last lines of output (empty for the sim).
    pub fn output_tail(&self) -> String {
        match &self.running {
            Running::Sim(_) => String::new(),
            Running::Referee { process, .. } => last_lines(process),
            Running::Kubelet(node) => node.output_tail(),
        }
    }

    /// Stops the kubelet: the sim in-process; a referee by SIGTERM (then
    /// SIGKILL after a grace period). Safe to call once whatever happened.
    pub async fn stop(&self) -> Result<()> {
        match &self.running {
            Running::Sim(sim) => sim.stop().await,
            Running::Referee { process, .. } => {
                let t = process.terminate(STOP_GRACE).await;
                if t.killed {
                    tracing::warn!(engine = %self.name, "the referee ignored SIGTERM and was killed");
                }
                Ok(())
            }
            Running::Kubelet(node) => node.stop().await,
        }
    }
}

/// The referee's last output lines, for errors.
fn last_lines(p: &PluginProcess) -> String {
    let o = p.output(Stream::Stderr);
    let lines = o.last_lines(8);
    if lines.is_empty() { "it printed nothing on stderr".into() } else { format!("its stderr: {}", lines.join(" | ")) }
}

/// The referee's command line: the kubelet's flags as kubelet-sim takes them.
fn referee_args(binary: &Path, config: &SimConfig) -> Vec<String> {
    let t = &config.topology;
    let mut args = vec![
        binary.display().to_string(),
        "--topology-manager-policy".into(),
        t.policy.name().into(),
        "--topology-manager-scope".into(),
        t.scope.name().into(),
        "--cpu-manager-policy".into(),
        match t.cpu_policy {
            crate::topology::CpuPolicy::None => "none".into(),
            crate::topology::CpuPolicy::Static => "static".into(),
        },
        "--numa-nodes".into(),
        t.machine.numa_nodes.to_string(),
        "--cpus-per-numa".into(),
        t.machine.cpus_per_numa.to_string(),
    ];
    if !t.options.given.is_empty() {
        let mut opts = Vec::new();
        if t.options.given.contains("prefer-closest-numa-nodes") {
            opts.push(format!("prefer-closest-numa-nodes={}", t.options.prefer_closest_numa_nodes));
        }
        if t.options.given.contains("max-allowable-numa-nodes") {
            opts.push(format!("max-allowable-numa-nodes={}", t.options.max_allowable_numa_nodes));
        }
        args.extend(["--topology-manager-policy-options".into(), opts.join(",")]);
    }
    if !t.reserved_cpus.is_empty() {
        let list: Vec<String> = t.reserved_cpus.iter().map(u32::to_string).collect();
        args.extend(["--reserved-cpus".into(), list.join(",")]);
    }
    if let Some(d) = &t.machine.distances {
        let rows: Vec<String> = d.iter().map(|r| r.iter().map(u64::to_string).collect::<Vec<_>>().join(",")).collect();
        args.extend(["--numa-distances".into(), rows.join(";")]);
    }
    // The DRA manager's checkpoint goes where the sim keeps it, the parent of
    // plugins_registry (docs/dra.md §6), outside the kubelet's bound paths.
    if let Some(root) = config.registry_dir.as_deref().and_then(Path::parent) {
        args.extend(["--dra-state-dir".into(), root.display().to_string()]);
    }
    args
}

/// Starts the referee in the namespace and waits until `status` answers.
async fn launch_referee(
    binary: &Path,
    config: &SimConfig,
    layout: &Layout,
    helper: Option<PathBuf>,
) -> Result<(PluginProcess, PathBuf)> {
    let mut plan = Plan::new(
        &IsolateConfig { binds: Vec::new(), helper, pid_namespace: false, shared: Vec::new(), read_only_root: false },
        layout,
    )?;
    let program = binary.display().to_string();
    plan.preflight(&program).await?;
    if let Some(why) = plan.launch_error() {
        return Err(Error::invalid(format!("--engine referee:{}", binary.display()), why.to_string()));
    }
    let wrapped = plan.wrap(&referee_args(binary, config))?;
    let launch = Launch {
        command: wrapped.command,
        env: wrapped.env,
        keep_bytes: 64 * 1024,
        log_dir: None,
        log_name: "referee".into(),
        lines: None,
    };
    let process = PluginProcess::spawn(launch).await?;
    let control = crate::paths::control_socket(&layout.device_plugins, control::CONTROL_NAME);
    let deadline = crate::duration::deadline(READY_TIMEOUT);
    loop {
        if let Some(exit) = process.exit() {
            return Err(Error::invalid(
                format!("--engine referee:{}", binary.display()),
                format!("the referee {exit} before it served; {}", last_lines(&process)),
            ));
        }
        if control.exists() {
            let r: Result<Reply> =
                crate::transport::control::call(&control, &Request::Status, Duration::from_secs(5)).await;
            if let Ok(Reply::Ok(Answer::Status(_))) = r {
                return Ok((process, control));
            }
        }
        if tokio::time::Instant::now() >= deadline {
            let _ = process.terminate(STOP_GRACE).await;
            return Err(Error::Timeout {
                what: format!("the referee {} to answer status on {}", binary.display(), control.display()),
                timeout: READY_TIMEOUT,
            });
        }
        // Polling, bounded above: the referee's only readiness signal is its control socket.
        tokio::select! {
            _ = process.exited() => {}
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_and_refuse_clearly() {
        assert_eq!("sim".parse::<EngineKind>().unwrap(), EngineKind::Sim);
        assert_eq!("referee:/x".parse::<EngineKind>().unwrap(), EngineKind::Referee("/x".into()));
        assert!("referee:".parse::<EngineKind>().unwrap_err().contains("needs a PATH"));
        assert!("kubelet".parse::<EngineKind>().unwrap_err().contains("kubelet:PATH"));
        assert_eq!("kubelet:/k".parse::<EngineKind>().unwrap(), EngineKind::Kubelet("/k".into()));
        assert!("kubelet:".parse::<EngineKind>().unwrap_err().contains("needs a PATH"));
    }

    // The referee binaries name master by the release after the newest; the
    // flag does not (one parser: `scenario run --kubelet-version 1.38` is
    // refused as `smoke` refuses it).
    #[test]
    fn master_is_the_release_after_the_newest_for_referee_binaries_only() {
        let next = crate::kubelet_sim::version::NEWEST_MINOR + 1;
        assert_eq!(KubeletVersion::Master.numbered(), format!("1.{next}"));
        assert!(KubeletVersion::parse_list(&format!("1.34,1.{next}")).is_err());
    }

    #[test]
    fn a_missing_referee_names_what_exists_and_how_to_build() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("dpctl-referee-1.34"), "").unwrap();
        let e = referee_binary(d.path(), KubeletVersion::Release(35)).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::exit::USAGE);
        let t = e.to_string();
        assert!(t.contains("dpctl-referee-1.34") && t.contains("conformance/build.sh 1.35"), "{t}");
        assert_eq!(referee_binary(d.path(), KubeletVersion::Release(34)).unwrap(), d.path().join("dpctl-referee-1.34"));
    }
}
