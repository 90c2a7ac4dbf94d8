//! `--engine kubelet:PATH`: a real kubelet in standalone mode (static pods,
//! no API server) with Debian's containerd and runc, on this machine.
//!
//! Everything runs in private mount namespaces made by the `--isolate`
//! helper ([`super::isolate`]) with the same binds: `/run`, `/var/lib` and
//! `/var/log` rebound on fresh directories of the run, the run's device-plugin,
//! plugins_registry and pod-resources directories on the kubelet's paths, and
//! the six sysctls the kubelet sets (`setupKernelTunables`, k8s.io/kubernetes
//! pkg/kubelet/cm/container_manager_linux.go) covered by files holding the
//! values it wants, so the host's are never written. containerd also gets a
//! PID namespace: when it ends, the kernel ends its shims and containers
//! with it, whatever happened to dpctl. Pods go under a cgroup of the run's
//! own (`cgroupRoot`), removed at the end; one a crashed run left is removed
//! by the next ([`sweep_cgroups`]).
//!
//! The engine answers the control protocol as the sim and the referee do:
//! `admit` writes a static pod and waits for the kubelet's verdict (the
//! checkpoint's entry for the pod, or the Warning event it logs), then
//! checks inside each running container what the Allocate answer promised
//! ([`container_view`]); `delete` removes the manifest and waits for the
//! containers to go; `status` reads the kubelet's PodResources API and its
//! log; `events` are read off the log ([`kubelet_log`]).

pub mod cluster;
pub(super) mod config;
pub mod container_view;
pub mod kubelet_log;
mod restart;

pub use config::BUSYBOX_IMAGE;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::isolate::{Bind, IsolateConfig, Layout, Plan};
use super::process::{Launch, PluginProcess, Stream};
use crate::error::{Error, Result};
use crate::kubelet_sim::control::{Answer, RemoteError, Request, WireEvent};
use crate::kubelet_sim::{
    AdmitOutcome, ContainerOutcome, DeleteOutcome, KubeletVersion, PodSpec, SimConfig, SimStatus,
};
use container_view::ContainerView;
use kubelet_log::{Fact, LogReader, PodWarning};

/// File name prefix of the kubelets `conformance/build.sh kubelet` builds.
pub const KUBELET_PREFIX: &str = "kubelet-";

/// The images `conformance/build.sh kubelet` puts beside the kubelets.
const IMAGES: [&str; 2] = ["pause.tar", "busybox.tar"];

/// How long containerd and the kubelet may take to serve.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the kubelet may take to admit a pod and start its containers.
const POD_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a `ctr` command may take.
const CTR_TIMEOUT: Duration = Duration::from_secs(30);
/// How long each process gets to stop after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(100);
/// The kubelet's log lines kept for errors.
const TAIL_LINES: usize = 12;

/// The six sysctls the kubelet sets and the values it wants
/// (k8s.io/component-helpers node/util/sysctl).
const SYSCTLS: [(&str, &str); 6] = [
    ("vm/overcommit_memory", "1"),
    ("vm/panic_on_oom", "0"),
    ("kernel/panic", "10"),
    ("kernel/panic_on_oops", "1"),
    ("kernel/keys/root_maxkeys", "1000000"),
    ("kernel/keys/root_maxbytes", "25000000"),
];

/// The prefix of the cgroups a run makes (`<prefix><pid>-<n>`).
const CGROUP_PREFIX: &str = "dpctl-smoke-";

/// The kubelet binary for `version`: `path` itself when it is a file, else
/// `path/kubelet-1.NN`; the images must be beside it.
pub fn kubelet_binary(path: &Path, release: &str) -> Result<PathBuf> {
    let place = format!("--engine kubelet:{}", crate::text::shorten(&path.display().to_string(), 120));
    let build = format!("build it with conformance/build.sh kubelet {release} (into target/kubelet/)");
    let meta = std::fs::metadata(path).map_err(|e| Error::invalid(&place, format!("{e}; {build}")))?;
    let binary = if meta.is_dir() { path.join(format!("{KUBELET_PREFIX}{release}")) } else { path.to_path_buf() };
    if !binary.is_file() {
        return Err(Error::invalid(&place, format!("no {} in {}; {build}", binary.display(), path.display())));
    }
    let dir = binary.parent().unwrap_or(Path::new("."));
    for image in IMAGES {
        if !dir.join(image).is_file() {
            return Err(Error::invalid(
                &place,
                format!("no {image} beside {} (the pods' images); {build}", binary.display()),
            ));
        }
    }
    Ok(binary)
}

/// What the node's processes and files are.
struct Paths {
    root: PathBuf,
    run: PathBuf,
    manifests: PathBuf,
    containerd_socket: PathBuf,
    checkpoint: PathBuf,
    podresources: PathBuf,
}

impl Paths {
    fn new(layout: &Layout) -> Paths {
        let root = layout.root.clone();
        Paths {
            run: root.join("run"),
            manifests: root.join("var-lib").join(config::MANIFESTS.trim_start_matches("/var/lib/")),
            containerd_socket: root.join("run").join(config::CONTAINERD_SOCKET.trim_start_matches("/run/")),
            checkpoint: layout.device_plugins.join("kubelet_internal_checkpoint"),
            podresources: layout.podresources_socket(),
            root,
        }
    }
}

/// What the kubelet logged that the engine answers from.
#[derive(Debug, Default)]
struct LogState {
    events: Vec<WireEvent>,
    warnings: Vec<PodWarning>,
    tail: std::collections::VecDeque<String>,
    /// The plugin watcher's registrations (bounded): the log line of each.
    registrations: Vec<String>,
    /// Where the running kubelet's events begin (a restart starts anew).
    kubelet_from: usize,
}

/// What the kubelet's plugin manager logs when it registers a plugin
/// (k8s.io/kubernetes pkg/kubelet/pluginmanager/reconciler/reconciler.go
/// `reconcileNew`, V(1)): GetInfo and the handler's registration follow.
const REGISTER_STARTED: &str = "OperationExecutor.RegisterPlugin started";

/// A running node: containerd and the kubelet.
#[derive(Debug)]
pub struct Node {
    name: String,
    version: KubeletVersion,
    run: PathBuf,
    manifests: PathBuf,
    containerd_socket: PathBuf,
    checkpoint: PathBuf,
    podresources: PathBuf,
    device_plugins: PathBuf,
    containerd: PluginProcess,
    /// The running kubelet: a restart ([`restart`]) puts a new process here.
    kubelet: Mutex<Arc<PluginProcess>>,
    /// How the kubelet is started again: its namespace's plan and command line.
    kubelet_start: (Plan, Vec<String>),
    /// True while a restart has stopped the kubelet on purpose.
    restarting: std::sync::atomic::AtomicBool,
    /// Kubelet restarts so far.
    restarts: std::sync::atomic::AtomicU32,
    cgroups: Vec<PathBuf>,
    log: Arc<Mutex<LogState>>,
    pods: Mutex<BTreeMap<(String, String), String>>,
    exec_seq: std::sync::atomic::AtomicU64,
}

/// Refuses early, with what is missing and how to get it: root, containerd,
/// runc and ctr on PATH.
fn preflight() -> Result<()> {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::invalid(
            "--engine kubelet",
            "a real kubelet and containerd run containers: run dpctl as root (sudo; on a GitHub Actions \
             runner: sudo -E)",
        ));
    }
    for (program, package) in [("containerd", "containerd"), ("ctr", "containerd"), ("runc", "runc")] {
        if find_on_path(program).is_none() {
            return Err(Error::invalid(
                "--engine kubelet",
                format!("{program} is not on PATH; install it (Debian/Ubuntu: apt-get install {package})"),
            ));
        }
    }
    Ok(())
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

/// Whether this process has CAP_SYS_RESOURCE (bit 24 of CapEff): without
/// it runc cannot give a container an oom_score_adj below containerd's.
fn has_sys_resource() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

/// `kubelet --version` (`Kubernetes v1.37.2`), checked against the release asked for.
async fn kubelet_version(binary: &Path, release: &str) -> Result<String> {
    let place = format!("--engine kubelet:{}", binary.display());
    let out = run_bounded(binary, &["--version".into()], Duration::from_secs(20)).await.map_err(|e| {
        Error::invalid(&place, format!("cannot run it: {e}; build it with conformance/build.sh kubelet"))
    })?;
    let played = out.trim().strip_prefix("Kubernetes ").map(str::to_string);
    let Some(played) = played else {
        return Err(Error::invalid(&place, format!("not a kubelet: --version answered {:?}", out.trim())));
    };
    let minor: String = played.trim_start_matches('v').split('.').take(2).collect::<Vec<_>>().join(".");
    if minor != release {
        return Err(Error::invalid(
            &place,
            format!(
                "this is kubelet {played}, not release {release} (--kubelet-version); use {KUBELET_PREFIX}{release}"
            ),
        ));
    }
    Ok(played)
}

/// Runs a program to its end within `timeout`: its stdout, or its stderr as the error.
async fn run_bounded(program: &Path, args: &[String], timeout: Duration) -> std::result::Result<String, String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).stdin(std::process::Stdio::null()).kill_on_drop(true);
    match tokio::time::timeout(timeout, cmd.output()).await {
        Err(_) => Err(format!("{} did not finish within {} s", program.display(), timeout.as_secs())),
        Ok(Err(e)) => Err(format!("{}: {e}", program.display())),
        Ok(Ok(o)) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(Ok(o)) => Err(format!(
            "{} {} ({}): {}",
            program.display(),
            args.first().map_or("", String::as_str),
            o.status,
            crate::text::shorten(String::from_utf8_lossy(&o.stderr).trim(), 600)
        )),
    }
}

/// The cgroup hierarchies to make the run's cgroup in: every directory
/// under /sys/fs/cgroup (cgroup v1: one per controller, and `unified`), or
/// /sys/fs/cgroup itself (cgroup v2).
fn hierarchies() -> Vec<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    if base.join("cgroup.controllers").is_file() {
        return vec![base.to_path_buf()];
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(base)
        .map(|rd| {
            rd.filter_map(std::result::Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Removes `dir` and the cgroups below it, deepest first (a cgroup is
/// removed with rmdir once it has no processes and no children).
fn remove_cgroup(dir: &Path) -> std::io::Result<()> {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.filter_map(std::result::Result::ok) {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup(&e.path())?;
            }
        }
    }
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes the cgroups of runs whose dpctl is gone (a crash or SIGKILL).
pub fn sweep_cgroups() {
    for h in hierarchies() {
        let Ok(rd) = std::fs::read_dir(&h) else { continue };
        for e in rd.filter_map(std::result::Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix(CGROUP_PREFIX).and_then(|r| r.split('-').next()) else { continue };
            if pid.parse::<u32>().is_ok_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
                let _ = remove_cgroup(&e.path());
            }
        }
    }
}

/// Makes the run's cgroup in every hierarchy, or says why it cannot.
fn make_cgroups(name: &str) -> Result<Vec<PathBuf>> {
    let mut made: Vec<PathBuf> = Vec::new();
    for h in hierarchies() {
        let dir = h.join(name);
        if let Err(e) = std::fs::create_dir(&dir) {
            for d in &made {
                let _ = remove_cgroup(d);
            }
            return Err(Error::invalid(
                "--engine kubelet",
                format!(
                    "cgroups unusable: cannot create {}: {e} (the kubelet puts pods under a cgroup of the run's \
                     own; /sys/fs/cgroup must be writable: a VM or a privileged container)",
                    dir.display()
                ),
            ));
        }
        made.push(dir);
    }
    Ok(made)
}

/// The run's directories and configuration files; the binds that put them
/// in place inside the namespaces.
fn prepare(
    layout: &Layout,
    paths: &Paths,
    cgroup: &str,
    sim: &SimConfig,
    join: Option<&Join>,
) -> Result<(Vec<Bind>, PathBuf, PathBuf)> {
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |e| Error::io(format!("creating {what}"), e)
    };
    let var_lib = paths.root.join("var-lib");
    let mut dirs = vec![
        paths.run.join(TMP_INSIDE.trim_start_matches("/run/")),
        paths.root.join("var-log"),
        paths.root.join("sysctl"),
        paths.manifests.clone(),
    ];
    for std_path in [super::isolate::STANDARD_DEVICE_PLUGINS, super::isolate::STANDARD_PLUGINS_REGISTRY] {
        dirs.push(var_lib.join(std_path.trim_start_matches("/var/lib/")));
    }
    dirs.push(var_lib.join(super::isolate::STANDARD_POD_RESOURCES.trim_start_matches("/var/lib/")));
    for d in &dirs {
        std::fs::create_dir_all(d).map_err(io(d))?;
    }
    let mut binds = vec![
        Bind { source: paths.run.clone(), target: "/run".into() },
        // The kubelet's root directory: a mountpoint made shared (see
        // IsolateConfig::shared; k8s.io/kubernetes
        // pkg/volume/util/hostutil/hostutil_linux.go `DoMakeRShared`).
        Bind { source: var_lib.join("kubelet"), target: "/var/lib/kubelet".into() },
        Bind { source: var_lib, target: "/var/lib".into() },
        Bind { source: paths.root.join("var-log"), target: "/var/log".into() },
    ];
    for (sysctl, value) in SYSCTLS {
        let file = paths.root.join("sysctl").join(sysctl.replace('/', "."));
        std::fs::write(&file, format!("{value}\n")).map_err(io(&file))?;
        binds.push(Bind { source: file, target: Path::new("/proc/sys").join(sysctl) });
    }
    let containerd_toml = paths.root.join("containerd.toml");
    let containerd = config::containerd_toml(!has_sys_resource(), join.is_some());
    std::fs::write(&containerd_toml, containerd).map_err(io(&containerd_toml))?;
    if let Some(join) = join {
        binds.extend(join.binds.iter().cloned());
        write_cni(paths).map_err(|e| Error::io("writing the node's CNI plugin", e))?;
    }
    let settings = config::KubeletSettings {
        cgroup_root: format!("/{cgroup}"),
        topology_policy: sim.topology.policy.name().into(),
        topology_scope: sim.topology.scope.name().into(),
        server_port: join.map(|j| j.port),
    };
    let kubelet_yaml = paths.root.join("kubelet.yaml");
    std::fs::write(&kubelet_yaml, config::kubelet_yaml(&settings)).map_err(io(&kubelet_yaml))?;
    let _ = layout;
    Ok((binds, containerd_toml, kubelet_yaml))
}

/// The no-op CNI plugin and its configuration, under the run's /run
/// (containerd reads them at [`config::CNI_BIN`] and [`config::CNI_CONF`]).
fn write_cni(paths: &Paths) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let inside = |p: &str| paths.run.join(p.trim_start_matches("/run/"));
    let (bin, conf) = (inside(config::CNI_BIN), inside(config::CNI_CONF));
    std::fs::create_dir_all(&bin)?;
    std::fs::create_dir_all(&conf)?;
    for name in [config::CNI_PLUGIN, "loopback"] {
        let plugin = bin.join(name);
        std::fs::write(&plugin, config::cni_plugin())?;
        std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::write(conf.join("10-dpctl.conf"), config::cni_conf())
}

/// What a cluster's node adds to a standalone one ([`cluster`]).
#[derive(Debug, Clone)]
struct Join {
    /// The kubeconfig the kubelet registers with (a host path).
    kubeconfig: PathBuf,
    /// The kubelet's server port.
    port: u16,
    /// The node's name.
    node: String,
    /// Binds beside the node's own (the private /etc/hosts).
    binds: Vec<Bind>,
}

/// Spawns `command` in a namespace made by `plan`, its output kept (and
/// each line sent to `lines`).
async fn spawn_in(
    plan: &mut Plan,
    command: Vec<String>,
    lines: Option<mpsc::UnboundedSender<(Stream, String)>>,
) -> Result<PluginProcess> {
    let program = command.first().cloned().unwrap_or_default();
    plan.preflight(&program).await?;
    if let Some(why) = plan.launch_error() {
        return Err(Error::invalid("--engine kubelet", why.to_string()));
    }
    let mut wrapped = plan.wrap(&command)?;
    // The root is read-only inside: temporary files (runc's) go under the rebound /run.
    wrapped.env.push(("TMPDIR".into(), TMP_INSIDE.into()));
    PluginProcess::spawn(Launch {
        command: wrapped.command,
        env: wrapped.env,
        keep_bytes: 64 * 1024,
        log_dir: None,
        log_name: "node".into(),
        lines,
    })
    .await
}

/// The temporary directory of the node's processes, inside the namespaces.
const TMP_INSIDE: &str = "/run/dpctl-tmp";

fn last_lines(p: &PluginProcess) -> String {
    let (err, out) = (p.output(Stream::Stderr), p.output(Stream::Stdout));
    let mut lines: Vec<String> = err.last_lines(6).iter().map(|l| l.to_string()).collect();
    lines.extend(out.last_lines(6).iter().map(|l| l.to_string()));
    if lines.is_empty() { "it printed nothing".into() } else { lines.join(" | ") }
}

/// Waits until `ready` holds, the process ends (an error with its last
/// lines) or the deadline passes (an error naming `what`).
async fn wait_ready<F: std::future::Future<Output = bool>>(
    process: &PluginProcess,
    what: &str,
    timeout: Duration,
    tail: &(dyn Fn() -> String + Sync),
    mut ready: impl FnMut() -> F,
) -> Result<()> {
    let deadline = crate::duration::deadline(timeout);
    loop {
        if ready().await {
            return Ok(());
        }
        if let Some(exit) = process.exit() {
            return Err(Error::invalid("--engine kubelet", format!("{what} {exit}; {}", tail())));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::invalid(
                "--engine kubelet",
                format!("{what} was not ready within {} s; {}", timeout.as_secs(), tail()),
            ));
        }
        tokio::select! {
            _ = process.exited() => {}
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

impl Node {
    /// Starts containerd and the kubelet for `config` in `layout`, or says
    /// what is missing; nothing is left behind when it fails.
    /// `release` is `1.NN` (the engine's name for `config.kubelet_version`).
    pub async fn start(
        path: &Path,
        release: &str,
        config: &SimConfig,
        layout: &Layout,
        helper: Option<PathBuf>,
    ) -> Result<Node> {
        Node::start_joined(path, release, config, layout, helper, None).await
    }

    /// [`Node::start`], the kubelet registering with a cluster's API server when `join` is given.
    async fn start_joined(
        path: &Path,
        release: &str,
        config: &SimConfig,
        layout: &Layout,
        helper: Option<PathBuf>,
        join: Option<&Join>,
    ) -> Result<Node> {
        preflight()?;
        let binary = kubelet_binary(path, release)?;
        let played = kubelet_version(&binary, release).await?;
        sweep_cgroups();
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cgroup = format!("{CGROUP_PREFIX}{}-{n}", std::process::id());
        let cgroups = make_cgroups(&cgroup)?;
        match Node::launch(&binary, &played, config, layout, helper, cgroups.clone(), join).await {
            Ok(node) => Ok(node),
            Err(e) => {
                remove_cgroups(&cgroups).await;
                Err(e)
            }
        }
    }

    // long: the start in order (containerd, its images, the log reader, the kubelet), each failure stopping what started.
    async fn launch(
        binary: &Path,
        played: &str,
        config: &SimConfig,
        layout: &Layout,
        helper: Option<PathBuf>,
        cgroups: Vec<PathBuf>,
        join: Option<&Join>,
    ) -> Result<Node> {
        let paths = Paths::new(layout);
        let cgroup = cgroups.first().and_then(|c| c.file_name()).map(|n| n.to_string_lossy().into_owned());
        let (binds, containerd_toml, kubelet_yaml) =
            prepare(layout, &paths, &cgroup.unwrap_or_default(), config, join)?;
        let isolate = |pid_namespace| IsolateConfig {
            binds: binds.clone(),
            helper: helper.clone(),
            pid_namespace,
            shared: vec!["/var/lib/kubelet".into()],
            read_only_root: true,
        };
        let mut plan = Plan::new(&isolate(true), layout)?;
        let containerd = spawn_in(
            &mut plan,
            vec!["containerd".into(), "--config".into(), containerd_toml.display().to_string()],
            None,
        )
        .await?;
        let ctr = ctr_base(&paths.containerd_socket);
        let ready = wait_ready(&containerd, "containerd", READY_TIMEOUT, &|| last_lines(&containerd), || {
            let args = [ctr.clone(), vec!["version".into()]].concat();
            async move { run_bounded(Path::new("ctr"), &args, Duration::from_secs(5)).await.is_ok() }
        })
        .await;
        let images = match ready {
            Ok(()) => import_images(&paths.containerd_socket, binary).await,
            Err(e) => Err(e),
        };
        if let Err(e) = images {
            let _ = containerd.terminate(STOP_GRACE).await;
            return Err(e);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let log = Arc::new(Mutex::new(LogState::default()));
        tokio::spawn(read_log(rx, Arc::clone(&log), layout.device_plugins.clone()));
        let mut kubelet_cmd = vec![
            binary.display().to_string(),
            "--config".into(),
            kubelet_yaml.display().to_string(),
            format!("--hostname-override={}", join.map_or(config::NODE_NAME, |j| j.node.as_str())),
            "--logging-format=json".into(),
            "--v=3".into(),
        ];
        if let Some(j) = join {
            kubelet_cmd.push(format!("--kubeconfig={}", j.kubeconfig.display()));
        }
        let mut plan = Plan::new(&isolate(false), layout)?;
        let kubelet_start = (plan.clone(), kubelet_cmd.clone());
        let kubelet = match spawn_in(&mut plan, kubelet_cmd, Some(tx)).await {
            Ok(k) => k,
            Err(e) => {
                let _ = containerd.terminate(STOP_GRACE).await;
                return Err(e);
            }
        };
        let (sock, podres) =
            (layout.device_plugins.join(crate::paths::KUBELET_SOCKET_NAME), paths.podresources.clone());
        let tail = || {
            let log = log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let lines: Vec<String> = log.tail.iter().cloned().collect();
            if lines.is_empty() { last_lines(&kubelet) } else { format!("its errors: {}", lines.join(" | ")) }
        };
        let ready = wait_ready(&kubelet, &format!("kubelet {played}"), READY_TIMEOUT, &tail, || {
            std::future::ready(sock.exists() && podres.exists())
        })
        .await;
        if let Err(e) = ready {
            let _ = kubelet.terminate(STOP_GRACE).await;
            let _ = containerd.terminate(STOP_GRACE).await;
            return Err(e);
        }
        Ok(Node {
            name: format!("kubelet {played}"),
            version: config.kubelet_version,
            run: paths.run,
            manifests: paths.manifests,
            containerd_socket: paths.containerd_socket,
            checkpoint: paths.checkpoint,
            podresources: paths.podresources,
            device_plugins: layout.device_plugins.clone(),
            containerd,
            kubelet: Mutex::new(Arc::new(kubelet)),
            kubelet_start,
            restarting: std::sync::atomic::AtomicBool::new(false),
            restarts: std::sync::atomic::AtomicU32::new(0),
            cgroups,
            log,
            pods: Mutex::new(BTreeMap::new()),
            exec_seq: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// `kubelet v1.N.P`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Completes when the kubelet or containerd ends on its own (not when
    /// a restart stops the kubelet).
    pub async fn exited(&self) {
        let kubelet = async {
            loop {
                let k = self.kubelet();
                k.exited().await;
                let replaced = !Arc::ptr_eq(&k, &self.kubelet());
                if !replaced && !self.restarting.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                if !replaced {
                    tokio::time::sleep(POLL).await;
                }
            }
        };
        tokio::select! {
            () = kubelet => {}
            _ = self.containerd.exited() => {}
        }
    }

    /// The kubelet process running now.
    fn kubelet(&self) -> Arc<PluginProcess> {
        Arc::clone(&self.kubelet.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Whether the kubelet's plugin watcher took up the plugin whose
    /// registration socket is named `socket` (a line naming no socket at
    /// all counts for any).
    pub fn registering(&self, socket: &std::ffi::OsStr) -> bool {
        let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let needle = socket.to_string_lossy();
        log.registrations.iter().any(|l| l.contains(needle.as_ref()) || !l.contains(".sock"))
    }

    /// The kubelet's last lines of output.
    pub fn output_tail(&self) -> String {
        let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        log.tail.iter().cloned().collect::<Vec<_>>().join(" | ")
    }

    /// Tears the node down in the order a node is drained: pods (their
    /// manifests removed, their containers gone), the kubelet, containerd
    /// (its PID namespace ends every shim and container left), the cgroups.
    pub async fn stop(&self) -> Result<()> {
        if let Ok(rd) = std::fs::read_dir(&self.manifests) {
            for e in rd.filter_map(std::result::Result::ok) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let deadline = crate::duration::deadline(Duration::from_secs(20));
        let kubelet = self.kubelet();
        while kubelet.exit().is_none() && tokio::time::Instant::now() < deadline {
            match self.running_containers().await {
                Ok(ids) if ids.is_empty() => break,
                Err(_) => break,
                Ok(_) => tokio::time::sleep(POLL).await,
            }
        }
        let _ = kubelet.terminate(STOP_GRACE).await;
        let _ = self.containerd.terminate(STOP_GRACE).await;
        remove_cgroups(&self.cgroups).await;
        Ok(())
    }
}

/// Removes the run's cgroups; the processes in them may take a moment to
/// go after a kill, so it tries again for a bounded while.
async fn remove_cgroups(cgroups: &[PathBuf]) {
    let deadline = crate::duration::deadline(Duration::from_secs(10));
    loop {
        let left: Vec<&PathBuf> = cgroups.iter().filter(|c| remove_cgroup(c).is_err()).collect();
        if left.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(cgroups = ?left, "could not remove the node's cgroups");
            return;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `ctr`'s address and namespace arguments.
fn ctr_base(socket: &Path) -> Vec<String> {
    vec!["--address".into(), socket.display().to_string(), "--namespace".into(), "k8s.io".into()]
}

/// Imports the two images beside the kubelet binary.
async fn import_images(socket: &Path, binary: &Path) -> Result<()> {
    let dir = binary.parent().unwrap_or(Path::new("."));
    for image in IMAGES {
        let mut args = ctr_base(socket);
        args.extend(["images".into(), "import".into(), dir.join(image).display().to_string()]);
        run_bounded(Path::new("ctr"), &args, CTR_TIMEOUT)
            .await
            .map_err(|e| Error::invalid("--engine kubelet", format!("importing {image} into containerd: {e}")))?;
    }
    Ok(())
}

/// Turns the kubelet's log lines into facts as they arrive.
async fn read_log(mut rx: mpsc::UnboundedReceiver<(Stream, String)>, log: Arc<Mutex<LogState>>, outside: PathBuf) {
    let mut reader = LogReader::new(super::isolate::STANDARD_DEVICE_PLUGINS);
    while let Some((_, line)) = rx.recv().await {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let fact = reader.observe(&line, u64::try_from(now.as_millis()).unwrap_or(u64::MAX));
        let mut state = log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if line.contains(REGISTER_STARTED) && state.registrations.len() < 1000 {
            state.registrations.push(crate::text::shorten(&line, 1000));
        }
        // The errors it logged are what explain a kubelet that does not come up.
        if line.contains("\"err\":") || !line.starts_with('{') {
            if state.tail.len() >= TAIL_LINES {
                state.tail.pop_front();
            }
            state.tail.push_back(crate::text::shorten(&line, 400));
        }
        match fact {
            Some(Fact::Wire(mut e)) => {
                fill_socket(&mut e, &outside);
                state.events.push(e);
            }
            Some(Fact::PodWarning(w)) => state.warnings.push(w),
            None => {}
        }
    }
}

fn remote(message: impl Into<String>) -> RemoteError {
    RemoteError { message: message.into(), hint: None, exit_code: crate::error::exit::USAGE }
}

/// One checkpoint entry: the devices and the Allocate answer the kubelet
/// recorded for a (pod, container, resource).
struct Entry {
    container: String,
    resource: String,
    devices: Vec<String>,
    allocation: Option<crate::model::ContainerAllocation>,
}

impl Node {
    /// Answers one control request; what a real kubelet cannot be made to
    /// do from outside is refused with the reason.
    pub async fn call(&self, request: Request) -> std::result::Result<Answer, RemoteError> {
        match request {
            Request::Admit { pod } => self.admit(pod).await.map(Answer::Admit),
            Request::Delete { namespace, name } => self.delete(&namespace, &name).await.map(Answer::Delete),
            Request::Status => self.status().await.map(Answer::Status),
            Request::Events { since } => {
                let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let from = usize::try_from(since).unwrap_or(usize::MAX).min(log.events.len());
                Ok(Answer::Events { events: log.events[from..].to_vec(), next: log.events.len() as u64 })
            }
            Request::DryRun { .. } => Err(remote("a real kubelet has no dry-run admission")),
            Request::Restart { wait_ms, readmit_after_ms: None, no_readmit: false } => {
                self.restart(Duration::from_millis(wait_ms)).await.map(Answer::Restart)
            }
            Request::Restart { .. }
            | Request::Reboot { .. }
            | Request::RestartContainer { .. }
            | Request::SetGrace { .. } => {
                Err(remote(format!("the kubelet engine does not play {}: {}", request_name(&request), NOT_PLAYED)))
            }
        }
    }

    /// The checkpoint's entries for `uid` (none while it has none).
    fn entries(&self, uid: &str) -> Vec<Entry> {
        let Ok(Some(cp)) =
            crate::checkpoint::Checkpoint::read(&self.checkpoint, crate::checkpoint::LegacyFormat::Refuse)
        else {
            return Vec::new();
        };
        cp.data
            .pod_device_entries
            .iter()
            .flatten()
            .filter(|e| e.pod_uid == uid)
            .map(|e| Entry {
                container: e.container_name.clone(),
                resource: e.resource_name.clone(),
                devices: e.device_ids.ids(),
                allocation: e
                    .alloc_resp
                    .as_deref()
                    .and_then(|b| {
                        <crate::proto::deviceplugin::v1beta1::ContainerAllocateResponse as prost::Message>::decode(b)
                            .ok()
                    })
                    .map(|r| crate::model::ContainerAllocation::from_response(e.device_ids.ids(), &r)),
            })
            .collect()
    }

    /// The Warning events the kubelet logged for the pod from `from` on.
    fn warnings(&self, namespace: &str, name: &str, from: usize) -> Vec<PodWarning> {
        let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let static_name = config::static_pod_name(name);
        log.warnings.iter().skip(from).filter(|w| w.namespace == namespace && w.name == static_name).cloned().collect()
    }

    fn warning_count(&self) -> usize {
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).warnings.len()
    }

    /// Writes the pod's manifest as the kubelet must read it: whole (a
    /// hidden temporary file, which the kubelet skips, renamed into place).
    fn write_manifest(&self, pod: &PodSpec, uid: &str) -> std::result::Result<PathBuf, RemoteError> {
        let file = self.manifests.join(format!("{}_{}.json", pod.namespace, pod.name));
        let temp = self.manifests.join(format!(".{}_{}.json.tmp", pod.namespace, pod.name));
        let text = serde_json::to_vec_pretty(&config::static_pod(pod, uid)).unwrap_or_default();
        std::fs::write(&temp, text)
            .and_then(|()| std::fs::rename(&temp, &file))
            .map_err(|e| remote(format!("writing the static pod {}: {e}", file.display())))?;
        Ok(file)
    }

    /// Writes a static pod and waits for the kubelet's verdict: the
    /// checkpoint holds every (container, resource) the pod asks for, or
    /// the kubelet logs a refusal. An admitted pod's containers are then
    /// looked at from inside ([`Node::view`]).
    async fn admit(&self, pod: PodSpec) -> std::result::Result<AdmitOutcome, RemoteError> {
        let key = (pod.namespace.clone(), pod.name.clone());
        if self.pods.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(&key) {
            // The sim's words (kubelet_sim/admission.rs), so that a scenario diff sees none.
            return Err(remote(format!("pod {}/{}: is already admitted; delete it first", pod.namespace, pod.name)));
        }
        let uid = pod.uid.clone().unwrap_or_else(crate::apiserver::store::new_uid);
        let wanted: usize = pod.containers.iter().map(|c| c.limits.values().filter(|n| **n > 0).count()).sum();
        let t0 = std::time::Instant::now();
        let seen = self.warning_count();
        let file = self.write_manifest(&pod, &uid)?;
        let deadline = crate::duration::deadline(POD_TIMEOUT);
        let verdict = loop {
            if let Some(w) = self.warnings(&pod.namespace, &pod.name, seen).into_iter().find(PodWarning::is_rejection) {
                break Err(w);
            }
            // Admitted: every (container, resource) asked for is in the
            // checkpoint, or the pod's containers exist (a resource no plugin
            // registered gets no entry: the predicate admit handler strips
            // it, k8s.io/kubernetes pkg/kubelet/lifecycle/predicate.go
            // `removeMissingExtendedResources`). A pod's containers are made
            // only after admission allocated every device.
            let entries = self.entries(&uid);
            if (wanted > 0 && entries.len() >= wanted) || self.pod_containers(&uid).await.is_ok_and(|c| !c.is_empty()) {
                break Ok(self.entries(&uid));
            }
            if tokio::time::Instant::now() >= deadline || self.kubelet().exit().is_some() {
                let _ = std::fs::remove_file(&file);
                return Err(remote(format!(
                    "kubelet {} gave no verdict on pod {}/{} within {} s; its errors: {}",
                    self.name,
                    pod.namespace,
                    pod.name,
                    POD_TIMEOUT.as_secs(),
                    self.output_tail()
                )));
            }
            tokio::time::sleep(POLL).await;
        };
        let took_ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut outcome = AdmitOutcome {
            pod: pod.name.clone(),
            namespace: pod.namespace.clone(),
            uid: uid.clone(),
            admitted: verdict.is_ok(),
            reason: None,
            message: None,
            containers: Vec::new(),
            took_ms,
            topology: None,
            kept_in: Some(self.checkpoint.display().to_string()),
            dra: None,
        };
        match verdict {
            Err(w) => {
                // The sim keeps no refused pod; neither does this node.
                let _ = std::fs::remove_file(&file);
                outcome.reason = Some(w.reason);
                outcome.message = Some(w.message);
            }
            Ok(entries) => {
                self.pods.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key, uid.clone());
                outcome.containers = self.containers(&pod, &uid, &entries, seen).await;
            }
        }
        Ok(outcome)
    }
}

/// The runtime's failure a container's start error quotes, as the sim and the
/// referee give it: this node words it `the kubelet could not run it:
/// REASON: Error: MESSAGE; Allocate answered: ...` ([`Node::wait_running`],
/// [`Node::check_inside`]; the kubelet's event is `"Error: %v"`,
/// k8s.io/kubernetes pkg/kubelet/kuberuntime/kuberuntime_container.go
/// `startContainer`), and MESSAGE is returned; any other text is returned whole.
pub fn kubelet_message(start_error: &str) -> &str {
    let Some(rest) = start_error.strip_prefix(COULD_NOT_RUN) else { return start_error };
    let rest = rest.split_once("; Allocate answered: ").map_or(rest, |(m, _)| m);
    rest.split_once(": Error: ").map_or(rest, |(_, m)| m)
}

/// How a container's start error begins when the kubelet logged the runtime's failure.
const COULD_NOT_RUN: &str = "the kubelet could not run it: ";

/// Why the steps that need them cannot run on a real kubelet.
pub const NOT_PLAYED: &str = "the kubelet engine restarts the kubelet, but does not reboot the node (containerd \
    and every container stopped), restart one container or change the grace period on request; the sim and the \
    referee play these";

fn request_name(r: &Request) -> &'static str {
    match r {
        Request::Restart { .. } => "a kubelet restart",
        Request::Reboot { .. } => "a node reboot",
        Request::RestartContainer { .. } => "a container restart",
        Request::SetGrace { .. } => "a changed grace period",
        _ => "this request",
    }
}

/// The device number of a host path as `stat -c %t:%T` prints it (`None`: not a device node).
fn host_node(path: &str) -> Option<container_view::Node> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path).ok()?;
    let kind = if meta.file_type().is_char_device() {
        "character special file"
    } else if meta.file_type().is_block_device() {
        "block special file"
    } else {
        return None;
    };
    let rdev = meta.rdev();
    Some(container_view::Node { kind: kind.into(), number: format!("{:x}:{:x}", libc::major(rdev), libc::minor(rdev)) })
}

impl Node {
    /// Runs `ctr` against the node's containerd.
    async fn ctr(&self, args: &[&str]) -> std::result::Result<String, String> {
        let mut all = ctr_base(&self.containerd_socket);
        all.extend(args.iter().map(|a| (*a).to_string()));
        run_bounded(Path::new("ctr"), &all, CTR_TIMEOUT).await
    }

    /// The IDs of running tasks.
    async fn running_containers(&self) -> std::result::Result<Vec<String>, String> {
        let out = self.ctr(&["tasks", "ls"]).await?;
        Ok(out
            .lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.get(2) == Some(&"RUNNING")).then(|| f[0].to_string())
            })
            .collect())
    }

    /// The IDs of the pod's containers (not its sandbox), optionally one by name.
    async fn containers_of(&self, uid: &str, name: Option<&str>) -> std::result::Result<Vec<String>, String> {
        let mut filter =
            format!("labels.\"io.kubernetes.pod.uid\"=={uid},labels.\"io.cri-containerd.kind\"==container");
        if let Some(n) = name {
            filter.push_str(&format!(",labels.\"io.kubernetes.container.name\"=={n}"));
        }
        let out = self.ctr(&["containers", "ls", "-q", &filter]).await?;
        Ok(out.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect())
    }

    async fn pod_containers(&self, uid: &str) -> std::result::Result<Vec<String>, String> {
        self.containers_of(uid, None).await
    }

    /// Waits for container `name` of the pod to run (`made`: to exist, as
    /// an init container that ran to completion does): its ID, or the
    /// runtime's failure the kubelet logged for it or its pod (or a
    /// timeout) as text.
    async fn wait_running(
        &self,
        pod: &PodSpec,
        uid: &str,
        (name, made): (&str, bool),
        from: usize,
    ) -> std::result::Result<String, String> {
        let deadline = crate::duration::deadline(POD_TIMEOUT);
        loop {
            let ids = self.containers_of(uid, Some(name)).await?;
            let running = if made { ids.clone() } else { self.running_containers().await? };
            if let Some(id) = ids.into_iter().find(|id| running.contains(id)) {
                return Ok(id);
            }
            let mine = |w: &PodWarning| w.is_run_failure() && (w.container.is_empty() || w.container == name);
            if let Some(w) = self.warnings(&pod.namespace, &pod.name, from).into_iter().find(mine) {
                return Err(format!("{COULD_NOT_RUN}{}: {}", w.reason, w.message));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "it was not running within {} s; the kubelet's errors: {}",
                    POD_TIMEOUT.as_secs(),
                    self.output_tail()
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// What container `id` shows: [`container_view::SCRIPT`] run inside it.
    async fn view(&self, id: &str, paths: &[String]) -> std::result::Result<ContainerView, String> {
        let n = self.exec_seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let exec_id = format!("dpctl-view-{n}");
        // ctr makes the exec's FIFOs where it runs and containerd opens them
        // by path: a directory both see the same (never the host's /run).
        let fifo_dir = self.run.join("dpctl-fifo").display().to_string();
        let mut args = vec![
            "tasks",
            "exec",
            "--fifo-dir",
            &fifo_dir,
            "--exec-id",
            &exec_id,
            id,
            "/bin/sh",
            "-c",
            container_view::SCRIPT,
            "sh",
        ];
        args.extend(paths.iter().map(String::as_str));
        self.ctr(&args).await.map(|out| container_view::parse(&out))
    }

    /// Each container's devices and answer, and whether it runs with what
    /// the answer promised.
    async fn containers(&self, pod: &PodSpec, uid: &str, entries: &[Entry], from: usize) -> Vec<ContainerOutcome> {
        let mut out = Vec::new();
        let mut blocked = false;
        for c in &pod.containers {
            let mut o = ContainerOutcome::new(c);
            let mut promised = crate::model::ContainerAllocation::default();
            let mut conflicts = Conflicts::new();
            for (resource, n) in c.limits.iter().filter(|(_, n)| **n > 0) {
                let e = entries.iter().find(|e| e.container == c.name && &e.resource == resource);
                let mut r = crate::kubelet_sim::ResourceOutcome {
                    resource: resource.clone(),
                    requested: *n,
                    reused: Vec::new(),
                    preferred: None,
                    devices: e.map(|e| e.devices.clone()).unwrap_or_default(),
                    allocation: e.and_then(|e| e.allocation.clone()),
                    warnings: Vec::new(),
                    pre_start: None,
                };
                if let Some(a) = &r.allocation {
                    merge(&mut promised, &mut conflicts, a);
                    if !a.cdi_devices.is_empty() {
                        r.warnings.push(crate::kubelet_sim::Warning {
                            rule: "cdi-not-checkable".into(),
                            evidence: format!(
                                "cdi_devices [{}] not checked inside the container: containerd 1.6 has no CDI (1.7+ does)",
                                a.cdi_devices.join(", ")
                            ),
                        });
                    }
                }
                o.resources.push(r);
            }
            // The kubelet starts no later container while an init container
            // has not succeeded, and retries a failed one with backoff
            // (k8s.io/kubernetes pkg/kubelet/kuberuntime/kuberuntime_container.go
            // `computeInitContainerActions`): after one failed, the later
            // containers are not started and not waited for.
            let checked = if blocked {
                Err(None)
            } else if c.kind == crate::kubelet_sim::ContainerKind::Init {
                self.wait_running(pod, uid, (&c.name, true), from).await.map(drop).map_err(Some)
            } else {
                self.check_inside(pod, uid, &c.name, (&promised, &conflicts), from).await.map_err(Some)
            };
            o.started = checked.is_ok();
            o.start_error = checked.err().flatten();
            blocked |= !o.started && c.kind != crate::kubelet_sim::ContainerKind::Regular;
            out.push(o);
        }
        out
    }

    /// Waits for the container to run and compares what it shows with `promised`.
    async fn check_inside(
        &self,
        pod: &PodSpec,
        uid: &str,
        name: &str,
        (promised, conflicts): (&crate::model::ContainerAllocation, &Conflicts),
        from: usize,
    ) -> std::result::Result<(), String> {
        let answer = container_view::promised_text(promised);
        let id = self
            .wait_running(pod, uid, (name, false), from)
            .await
            .map_err(|e| format!("{e}; Allocate answered: {answer}"))?;
        if promised.envs.is_empty() && promised.mounts.is_empty() && promised.devices.is_empty() {
            return Ok(());
        }
        let paths: Vec<String> = promised.devices.iter().map(|d| d.container_path.clone()).collect();
        let seen = self.view(&id, &paths).await.map_err(|e| format!("looking inside the running container: {e}"))?;
        let hosts: BTreeMap<String, Option<container_view::Node>> =
            promised.devices.iter().map(|d| (d.host_path.clone(), host_node(&d.host_path))).collect();
        // Of an env var two answers set differently the container has either value.
        let mut promised = promised.clone();
        for (k, values) in conflicts {
            if let Some(got) = seen.env.get(k).filter(|got| values.contains(*got)) {
                promised.envs.insert(k.clone(), got.clone());
            }
        }
        let missing = container_view::missing(&promised, &hosts, &seen);
        if missing.is_empty() {
            return Ok(());
        }
        Err(format!(
            "inside the running container: {}; Allocate answered: {answer}; the container saw: {}",
            missing.join("; "),
            container_view::seen_text(&promised, &seen)
        ))
    }
}

/// Env vars that the answers of several resources set to different values:
/// every value set.
type Conflicts = BTreeMap<String, Vec<String>>;

/// Adds one resource's answer to a container's (the kubelet merges every
/// resource's answer into the container's runtime options). An env var set
/// by two answers keeps the value of the one the kubelet takes first, in Go's
/// map order over the container's resources, which is random (it logs
/// "Environment variable has conflicting setting", k8s.io/kubernetes
/// pkg/kubelet/cm/devicemanager/pod_devices.go `deviceRunContainerOptions`):
/// the values are kept in `conflicts`.
fn merge(
    into: &mut crate::model::ContainerAllocation,
    conflicts: &mut Conflicts,
    a: &crate::model::ContainerAllocation,
) {
    for (k, v) in &a.envs {
        match into.envs.get(k) {
            Some(old) if old != v => {
                let values = conflicts.entry(k.clone()).or_insert_with(|| vec![old.clone()]);
                values.push(v.clone());
            }
            Some(_) => {}
            None => {
                into.envs.insert(k.clone(), v.clone());
            }
        }
    }
    into.mounts.extend(a.mounts.iter().cloned());
    into.devices.extend(a.devices.iter().cloned());
    into.cdi_devices.extend(a.cdi_devices.iter().cloned());
}

/// What the kubelet's log says of one resource so far.
#[derive(Debug, Default)]
struct Seen {
    registrations: u64,
    snapshots: u64,
    capacity: usize,
    socket: Option<String>,
    endpoint: Option<String>,
    via: Option<crate::kubelet_sim::Via>,
    stream_end: Option<String>,
}

fn seen_per_resource(events: &[WireEvent]) -> BTreeMap<String, Seen> {
    use crate::kubelet_sim::control::WireEventKind as K;
    let mut out: BTreeMap<String, Seen> = BTreeMap::new();
    for e in events {
        match &e.kind {
            K::Registered { resource, endpoint, socket, via, .. } => {
                let s = out.entry(resource.clone()).or_default();
                s.registrations += 1;
                s.socket = Some(socket.clone());
                s.endpoint = Some(endpoint.clone());
                s.via = Some(*via);
                s.stream_end = None;
            }
            K::Snapshot { resource, devices, .. } => {
                let s = out.entry(resource.clone()).or_default();
                s.snapshots += 1;
                s.capacity = *devices;
            }
            K::StreamEnded { resource, reason, .. } => {
                out.entry(resource.clone()).or_default().stream_end = Some(reason.clone());
            }
            K::RegistrationRejected { .. } => {}
        }
    }
    out
}

impl Node {
    /// Removes the pod's manifest and waits until its containers are gone;
    /// the devices freed are the checkpoint's for the pod.
    async fn delete(&self, namespace: &str, name: &str) -> std::result::Result<DeleteOutcome, RemoteError> {
        let key = (namespace.to_string(), name.to_string());
        let uid = self.pods.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key).cloned();
        let Some(uid) = uid else { return Err(remote(format!("pod {namespace}/{name}: not found (not admitted)"))) };
        let mut freed: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for e in self.entries(&uid) {
            freed.entry(e.resource).or_default().extend(e.devices);
        }
        let file = self.manifests.join(format!("{namespace}_{name}.json"));
        std::fs::remove_file(&file).map_err(|e| remote(format!("removing {}: {e}", file.display())))?;
        let deadline = crate::duration::deadline(POD_TIMEOUT);
        loop {
            // Stopped is gone: the kubelet removes dead containers later, in its garbage collection.
            let running = match (self.pod_containers(&uid).await, self.running_containers().await) {
                (Ok(ids), Ok(running)) => Ok(ids.into_iter().filter(|id| running.contains(id)).collect::<Vec<_>>()),
                (Err(e), _) | (_, Err(e)) => Err(e),
            };
            match running {
                Ok(ids) if ids.is_empty() => break,
                Err(e) => return Err(remote(e)),
                Ok(_) if tokio::time::Instant::now() >= deadline => {
                    return Err(remote(format!(
                        "pod {namespace}/{name} still has containers after {} s",
                        POD_TIMEOUT.as_secs()
                    )));
                }
                Ok(_) => tokio::time::sleep(POLL).await,
            }
        }
        self.pods.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&key);
        Ok(DeleteOutcome { pod: name.to_string(), namespace: namespace.to_string(), freed, dra: None })
    }

    /// The state as the kubelet shows it: registrations and capacity from
    /// its log, allocatable devices and devices in use from its
    /// PodResources API (whose List frees the devices of pods that ended,
    /// k8s.io/kubernetes pkg/kubelet/apis/podresources/server_v1.go `List`).
    async fn status(&self) -> std::result::Result<SimStatus, RemoteError> {
        // A restarted kubelet knows the resources of its checkpoint with no
        // device until their plugins register again (k8s.io/kubernetes
        // pkg/kubelet/cm/devicemanager/manager.go `readCheckpoint`): the
        // capacity is the running kubelet's own.
        let (seen, running) = {
            let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            (seen_per_resource(&log.events), seen_per_resource(log.events.get(log.kubelet_from..).unwrap_or_default()))
        };
        let config = crate::podresources::client::PodResourcesConfig::default();
        let client = crate::podresources::client::PodResourcesClient::connect(&self.podresources, &config).await;
        let (mut healthy, mut in_use): (BTreeMap<String, Vec<serde_json::Value>>, BTreeMap<String, usize>) =
            Default::default();
        if let Ok(client) = &client {
            if let Ok(listing) = client.list().await {
                for d in listing.pods.iter().flat_map(|p| p.containers.iter()).flat_map(|c| c.devices.iter()) {
                    *in_use.entry(d.resource_name.clone()).or_default() += d.device_ids.len();
                }
            }
            if let Ok(a) = client.allocatable().await {
                for d in &a.devices {
                    let numa: Vec<i64> = d.topology.iter().flat_map(|t| t.nodes.iter().map(|n| n.id)).collect();
                    for id in &d.device_ids {
                        let v = serde_json::json!({"id": id, "health": "Healthy", "numa_nodes": (!numa.is_empty()).then(|| numa.clone())});
                        healthy.entry(d.resource_name.clone()).or_default().push(v);
                    }
                }
            }
        }
        let resources: Vec<serde_json::Value> = seen
            .iter()
            .map(|(name, s)| {
                let devices = healthy.remove(name).unwrap_or_default();
                let (capacity, stream_end) = running.get(name).map_or((0, None), |r| (r.capacity, r.stream_end.clone()));
                serde_json::json!({
                    "resource": name,
                    "state": if stream_end.is_some() || !running.contains_key(name) { "stream-ended" } else { "registered" },
                    "reported": s.snapshots > 0,
                    "capacity": capacity.max(devices.len()),
                    "allocatable": devices.len(),
                    "in_use": in_use.get(name).copied().unwrap_or(0),
                    "socket": s.socket, "endpoint": s.endpoint, "via": s.via,
                    "pre_start_required": false, "get_preferred_allocation_available": false,
                    "snapshots": s.snapshots, "registrations": s.registrations, "removal_in_ms": null,
                    "devices": devices,
                    "stream_end_reason": stream_end,
                })
            })
            .collect();
        let status = serde_json::json!({
            "engine": self.name,
            "kubelet_version": self.version,
            "dir": self.device_plugins.display().to_string(),
            "kubelet_socket": self.device_plugins.join(crate::paths::KUBELET_SOCKET_NAME).display().to_string(),
            "podresources_socket": self.podresources.display().to_string(),
            "control_socket": null,
            "running": self.kubelet().exit().is_none(),
            "grace_period_ms": 0,
            "restarts": self.restarts.load(std::sync::atomic::Ordering::Relaxed),
            "resources": resources,
            "pods": [],
        });
        serde_json::from_value(status).map_err(|e| remote(format!("the kubelet engine's status: {e}")))
    }
}

/// Kubelets before 1.37 log no socket path with "Connected to new client"
/// (k8s.io/kubernetes v1.34 pkg/kubelet/cm/devicemanager/plugin/v1beta1
/// handler.go `connectClient`): the socket it dialed is taken to be the
/// newest one in the device-plugin directory (not kubelet.sock), the one the
/// plugin that just registered serves.
fn fill_socket(e: &mut WireEvent, outside: &Path) {
    use crate::kubelet_sim::control::WireEventKind as K;
    let K::Registered { socket, endpoint, .. } = &mut e.kind else { return };
    if !socket.is_empty() {
        return;
    }
    use std::os::unix::fs::FileTypeExt;
    let newest = std::fs::read_dir(outside)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|f| f.file_name() != crate::paths::KUBELET_SOCKET_NAME)
        .filter_map(|f| {
            let meta = f.metadata().ok()?;
            meta.file_type().is_socket().then(|| (meta.modified().ok(), f.file_name()))
        })
        .max();
    if let Some((_, name)) = newest {
        *endpoint = name.to_string_lossy().into_owned();
        *socket = Path::new(super::isolate::STANDARD_DEVICE_PLUGINS).join(&name).display().to_string();
    }
}

#[cfg(test)]
mod tests {
    use super::{Conflicts, kubelet_message, merge};

    #[test]
    fn an_env_var_two_answers_set_differently_may_have_either_value() {
        let answer = |v: &str| crate::model::ContainerAllocation {
            envs: [("DEVICES".to_string(), v.to_string()), (format!("ONLY_{v}"), "1".to_string())].into(),
            ..Default::default()
        };
        let (mut into, mut conflicts) = (crate::model::ContainerAllocation::default(), Conflicts::new());
        merge(&mut into, &mut conflicts, &answer("GPU-0"));
        merge(&mut into, &mut conflicts, &answer("NIC-0"));
        assert_eq!(conflicts, Conflicts::from([("DEVICES".to_string(), vec!["GPU-0".into(), "NIC-0".into()])]));
        assert_eq!(into.envs.len(), 3);
    }

    #[test]
    fn the_kubelets_message_is_taken_out_of_a_start_error() {
        let e = "the kubelet could not run it: Failed: Error: device plugin PreStartContainer rpc failed with err: x; \
                 Allocate answered: envs [], mounts [], devices []";
        assert_eq!(kubelet_message(e), "device plugin PreStartContainer rpc failed with err: x");
        assert_eq!(kubelet_message("inside the running container: env A"), "inside the running container: env A");
    }
}
