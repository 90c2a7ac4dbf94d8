//! `dpctl smoke --isolate`: run a vendor's plugin unmodified, in a private
//! mount namespace where kubelet-sim's fresh directories sit at the kubelet's
//! standard paths.
//!
//! How: the plugin's command is wrapped in a re-exec of dpctl itself as a
//! hidden helper (`dpctl __isolate-exec -- CMD...`, see [`HELPER_ARG`]). The
//! helper is a fresh, single-threaded process (the binary calls
//! [`helper_main`] before it starts any thread), so it may create a user
//! namespace, and it can use ordinary Rust (read directories, build paths,
//! report errors in words) where a `pre_exec` closure could only make raw
//! system calls. It:
//!
//! 1. `unshare(CLONE_NEWNS)` (as root) or `unshare(CLONE_NEWUSER |
//!    CLONE_NEWNS)` with a one-ID uid/gid map (as anyone else);
//! 2. makes every mount private, recursively, so nothing it does propagates
//!    back to the host;
//! 3. mounts a tmpfs on a staging directory inside the run's own fresh
//!    directory;
//! 4. for a mountpoint that does not exist (e.g. `/var/lib/kubelet` on a
//!    machine that is not a node), covers its nearest existing ancestor
//!    (e.g. `/var/lib`) with a copy on that tmpfs in which every original
//!    entry is bind-mounted back and the missing directories are created: the
//!    host's file systems are never written, and nothing is left to remove;
//! 5. bind-mounts each source on its target, detaches the staging tmpfs and
//!    `exec`s the plugin (same process: the smoke's process group, signals
//!    and parent-death signal apply to the plugin itself).
//!
//! Before the sim starts, [`Plan::preflight`] runs the helper once in check
//! mode (steps 1-5 without the `exec`): a machine that refuses the namespace
//! is reported with the reason and the fix, and the plugin never starts.
//!
//! `DPCTL_ISOLATE_SIMULATE_REFUSAL=<knob>` ([`ENV_SIMULATE_REFUSAL`]) makes
//! the run take the unprivileged path and behave as if the kernel had refused
//! the user namespace because of that knob (`unprivileged_userns_clone`,
//! `max_user_namespaces` or `apparmor_restrict_unprivileged_userns`): it is
//! how the refusal is tested on machines that allow user namespaces.

use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The hidden first argument that makes `dpctl` the isolation helper.
pub const HELPER_ARG: &str = "__isolate-exec";

/// The environment variable carrying the helper's instructions (JSON); the
/// helper removes it before it starts the plugin.
const ENV_SPEC: &str = "DPCTL_ISOLATE_SPEC";

/// Test hook: simulate the kernel refusing a user namespace (see the module docs).
pub const ENV_SIMULATE_REFUSAL: &str = "DPCTL_ISOLATE_SIMULATE_REFUSAL";

/// The kubelet's standard directories the sim's are mounted on.
pub const STANDARD_DEVICE_PLUGINS: &str = crate::paths::DEFAULT_DEVICE_PLUGIN_DIR;
/// See [`STANDARD_DEVICE_PLUGINS`].
pub const STANDARD_PLUGINS_REGISTRY: &str = crate::paths::DEFAULT_PLUGINS_REGISTRY_DIR;
/// See [`STANDARD_DEVICE_PLUGINS`].
pub const STANDARD_POD_RESOURCES: &str = "/var/lib/kubelet/pod-resources";

/// Longest accepted mount path, and most entries copied from one directory.
const MAX_PATH_BYTES: usize = 4096;
const MAX_SHADOW_ENTRIES: usize = 10_000;
/// How long the check-mode helper may take.
const PREFLIGHT_TIMEOUT: Duration = Duration::from_secs(20);

/// The directories of one smoke run: a fresh root under /tmp holding the
/// device-plugin directory (unless `--dir` names one), the plugins_registry
/// directory and the PodResources directory, laid out as under
/// /var/lib/kubelet.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The fresh root (removed at the end unless kept).
    pub root: PathBuf,
    /// The device-plugin directory (kubelet.sock, plugin sockets, checkpoint).
    pub device_plugins: PathBuf,
    /// The plugins_registry directory the sim's plugin watcher watches.
    pub plugins_registry: PathBuf,
    /// The directory of the PodResources socket (`kubelet.sock` in it).
    pub pod_resources: PathBuf,
    /// The helper's staging directory (a tmpfs inside the namespace only).
    pub staging: PathBuf,
}

impl Layout {
    /// Creates the fresh root and its directories; `dir` (from `--dir`)
    /// replaces the device-plugin directory.
    pub fn create(dir: Option<&Path>) -> Result<Layout> {
        let root = crate::paths::fresh_dir("dpctl-smoke")?;
        let layout = Layout {
            device_plugins: dir.map(Path::to_path_buf).unwrap_or_else(|| root.join("device-plugins")),
            plugins_registry: root.join("plugins_registry"),
            pod_resources: root.join("pod-resources"),
            staging: root.join(".isolate"),
            root,
        };
        let mut dirs = vec![&layout.plugins_registry, &layout.pod_resources, &layout.staging];
        if dir.is_none() {
            dirs.push(&layout.device_plugins);
        }
        for d in dirs {
            if let Err(e) = std::fs::create_dir(d) {
                layout.remove();
                return Err(Error::io(format!("creating {}", d.display()), e));
            }
        }
        Ok(layout)
    }

    /// The layout's directories on the kubelet's standard paths.
    pub fn standard_binds(&self) -> Vec<Bind> {
        vec![
            Bind { source: self.device_plugins.clone(), target: STANDARD_DEVICE_PLUGINS.into() },
            Bind { source: self.plugins_registry.clone(), target: STANDARD_PLUGINS_REGISTRY.into() },
            Bind { source: self.pod_resources.clone(), target: STANDARD_POD_RESOURCES.into() },
        ]
    }

    /// `(standard path, layout path)` pairs: how the sim finds a socket a
    /// plugin in a container (`-v {dir}:/var/lib/kubelet/device-plugins`)
    /// names by its standard path.
    pub fn path_map(&self) -> Vec<(PathBuf, PathBuf)> {
        self.standard_binds().into_iter().map(|b| (b.target, b.source)).collect()
    }

    /// The PodResources socket the sim serves.
    pub fn podresources_socket(&self) -> PathBuf {
        self.pod_resources.join(crate::paths::KUBELET_SOCKET_NAME)
    }

    /// Removes the fresh root (never a `--dir`, which lies elsewhere).
    pub fn remove(&self) {
        if let Err(e) = std::fs::remove_dir_all(&self.root)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.root.display(), error = %e, "could not remove the smoke directory");
        }
    }
}

/// One bind mount: `source` (on the host) appears at `target` inside the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// The host path.
    pub source: PathBuf,
    /// Where the plugin sees it.
    pub target: PathBuf,
}

/// Parses `--bind SRC:DST`: SRC must exist, DST must be absolute and plain
/// (no `.` or `..`), neither may be `/`.
pub fn parse_bind(s: &str) -> std::result::Result<Bind, String> {
    let Some((src, dst)) = s.split_once(':') else {
        return Err(format!("{s:?} is not SRC:DST (e.g. --bind ./cdi:/etc/cdi)"));
    };
    if src.is_empty() || dst.is_empty() {
        return Err(format!("{s:?}: both SRC and DST are needed (SRC:DST)"));
    }
    if dst.len() > MAX_PATH_BYTES || src.len() > MAX_PATH_BYTES {
        return Err(format!("a path longer than {MAX_PATH_BYTES} bytes"));
    }
    let target = PathBuf::from(dst);
    if !target.is_absolute() {
        return Err(format!("DST {dst:?} must be an absolute path (where the plugin sees SRC)"));
    }
    if target.components().any(|c| matches!(c, Component::CurDir | Component::ParentDir)) {
        return Err(format!("DST {dst:?} must not contain . or .. components"));
    }
    if target == Path::new("/") {
        return Err("DST / would hide the whole file system; bind onto a directory below it".into());
    }
    let source = std::path::absolute(src).map_err(|e| format!("SRC {src:?}: {e}"))?;
    if let Err(e) = std::fs::metadata(&source) {
        return Err(format!("SRC {src:?} cannot be used: {e}"));
    }
    if source == Path::new("/") {
        return Err("SRC / cannot be bound; name the directory you need".into());
    }
    Ok(Bind { source, target })
}

/// How to isolate the plugin.
#[derive(Debug, Clone, Default)]
pub struct IsolateConfig {
    /// Extra binds (`--bind`), after the three standard ones.
    pub binds: Vec<Bind>,
    /// The dpctl executable to re-run as the helper (default: this one).
    pub helper: Option<PathBuf>,
    /// Also a PID namespace (root only): the command is its first process,
    /// so when it ends the kernel kills every process left in it (what
    /// containerd's shims and containers would otherwise outlive).
    pub pid_namespace: bool,
    /// Mountpoints (among the binds) made shared inside the namespace, after
    /// every bind: a kubelet bind-mounts its root directory on itself unless
    /// it is on a shared mount, which would hide what is bound below it.
    pub shared: Vec<PathBuf>,
    /// The root mount read-only inside the namespace, after every bind (the
    /// binds stay writable): what the command writes outside them fails
    /// instead of landing on the host (containerd makes a missing mount
    /// source as a directory).
    pub read_only_root: bool,
}

/// One mount made inside the namespace, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountRecord {
    /// Where (inside the namespace).
    pub target: String,
    /// What: a host path, or `tmpfs`.
    pub source: String,
    /// `bind`, or `tmpfs` (a copy of a directory that lacked a mountpoint).
    pub kind: String,
    /// In words.
    pub note: String,
}

/// What `--isolate` set up, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolationReport {
    /// `mount` (as root) or `user+mount` (a user namespace, as anyone else).
    pub namespaces: String,
    /// Every mount, in the order made.
    pub mounts: Vec<MountRecord>,
}

/// The helper's instructions.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Spec {
    binds: Vec<Bind>,
    /// `(uid, gid)` to map to root in a new user namespace; `None`: none.
    userns: Option<(u32, u32)>,
    staging: PathBuf,
    /// Set up, report, and exit instead of starting the command.
    check: bool,
    /// Simulate a refusal by this knob (tests).
    simulate: Option<String>,
    /// A PID namespace too ([`IsolateConfig::pid_namespace`]).
    #[serde(default)]
    pid_namespace: bool,
    /// [`IsolateConfig::shared`].
    #[serde(default)]
    shared: Vec<PathBuf>,
    /// [`IsolateConfig::read_only_root`].
    #[serde(default)]
    read_only_root: bool,
}

/// What the check-mode helper prints (one JSON line).
#[derive(Debug, Serialize, Deserialize)]
struct CheckAnswer {
    ok: Option<IsolationReport>,
    error: Option<String>,
    /// The namespace is fine but the command cannot be started in it.
    #[serde(default)]
    launch_error: Option<String>,
}

/// A command wrapped in the helper.
#[derive(Debug, Clone)]
pub struct Wrapped {
    /// The helper, its argument, `--`, then the plugin's command.
    pub command: Vec<String>,
    /// Variables to add to the plugin's environment (the helper's instructions).
    pub env: Vec<(String, String)>,
}

/// A prepared isolation: the spec and the helper to run it.
#[derive(Debug, Clone)]
pub struct Plan {
    spec: Spec,
    helper: PathBuf,
    launch_error: Option<String>,
}

impl Plan {
    /// The standard binds (the layout's directories on the kubelet's paths)
    /// plus `config.binds`, as root or in a user namespace.
    pub fn new(config: &IsolateConfig, layout: &Layout) -> Result<Plan> {
        let helper = match &config.helper {
            Some(h) => h.clone(),
            None => std::env::current_exe()
                .map_err(|e| Error::io("finding the dpctl executable to run the --isolate helper", e))?,
        };
        let mut binds = layout.standard_binds();
        for b in &config.binds {
            if binds.iter().any(|x| x.target == b.target) {
                return Err(Error::invalid(
                    "--bind",
                    format!("{} is already a mountpoint of --isolate (or given twice)", b.target.display()),
                ));
            }
            binds.push(b.clone());
        }
        let simulate = std::env::var(ENV_SIMULATE_REFUSAL).ok().filter(|s| !s.is_empty());
        // SAFETY: geteuid/getegid take no arguments and cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let userns = (uid != 0 || simulate.is_some()).then_some((uid, gid));
        if config.pid_namespace && userns.is_some() {
            return Err(Error::invalid("--isolate", "a PID namespace is made as root only (run dpctl with sudo)"));
        }
        let spec = Spec {
            binds,
            userns,
            staging: layout.staging.clone(),
            check: false,
            simulate,
            pid_namespace: config.pid_namespace,
            shared: config.shared.clone(),
            read_only_root: config.read_only_root,
        };
        Ok(Plan { spec, helper, launch_error: None })
    }

    /// Path pairs (seen by the plugin, seen from the host) for translating
    /// paths the plugin reports (a GetInfo endpoint) to the sim's view.
    pub fn path_map(&self) -> Vec<(PathBuf, PathBuf)> {
        self.spec.binds.iter().map(|b| (b.target.clone(), b.source.clone())).collect()
    }

    /// The command line and environment that run `command` isolated.
    pub fn wrap(&self, command: &[String]) -> Result<Wrapped> {
        let mut out = vec![self.helper.display().to_string(), HELPER_ARG.to_string(), "--".to_string()];
        out.extend(command.iter().cloned());
        let spec = serde_json::to_string(&self.spec)
            .map_err(|e| Error::invalid("--isolate", format!("cannot encode the helper's instructions: {e}")))?;
        Ok(Wrapped { command: out, env: vec![(ENV_SPEC.to_string(), spec)] })
    }

    /// Why the plugin's program cannot be started inside the namespace (not
    /// found, not executable), as found by [`Plan::preflight`]: the launch
    /// step fails with it, as it would without `--isolate`.
    pub fn launch_error(&self) -> Option<&str> {
        self.launch_error.as_deref()
    }

    /// Runs the helper in check mode: the namespace and every mount are made
    /// (and thrown away) before anything starts, and `program` is looked up
    /// inside; a refusal is an error with the reason and the fix.
    pub async fn preflight(&mut self, program: &str) -> Result<IsolationReport> {
        let mut spec = self.spec.clone();
        spec.check = true;
        let json = serde_json::to_string(&spec)
            .map_err(|e| Error::invalid("--isolate", format!("cannot encode the helper's instructions: {e}")))?;
        let mut cmd = tokio::process::Command::new(&self.helper);
        cmd.arg(HELPER_ARG)
            .arg("--")
            .arg(program)
            .env(ENV_SPEC, json)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let out = match tokio::time::timeout(PREFLIGHT_TIMEOUT, cmd.output()).await {
            Ok(Ok(o)) => o,
            Ok(Err(e)) => {
                return Err(Error::io(format!("starting the --isolate helper {}", self.helper.display()), e));
            }
            Err(_) => {
                return Err(Error::Timeout {
                    what: "the --isolate helper setting up the namespace".into(),
                    timeout: PREFLIGHT_TIMEOUT,
                });
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        match serde_json::from_str::<CheckAnswer>(stdout.trim()) {
            Ok(CheckAnswer { ok: Some(report), launch_error, .. }) => {
                self.launch_error = launch_error;
                Ok(report)
            }
            Ok(CheckAnswer { error: Some(message), .. }) => Err(Error::invalid("--isolate", message)),
            _ => Err(Error::invalid(
                "--isolate",
                format!(
                    "the helper ({} {HELPER_ARG}) did not answer ({}): {}",
                    self.helper.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            )),
        }
    }
}

/// The helper, when this process was started as one (`argv[1]` is
/// [`HELPER_ARG`]): sets up the namespace and starts the command after `--`
/// (never returns then), or in check mode writes the report. `None`: not a
/// helper run. Call it first thing in `main`, before any thread starts.
pub fn helper_main(out: &mut dyn Write, err: &mut dyn Write) -> Option<u8> {
    let mut args = std::env::args_os();
    let _program = args.next();
    if args.next().as_deref() != Some(std::ffi::OsStr::new(HELPER_ARG)) {
        return None;
    }
    let rest: Vec<OsString> = args.collect();
    let command: Vec<OsString> = match rest.split_first() {
        Some((dd, cmd)) if dd == "--" => cmd.to_vec(),
        _ => rest,
    };
    let spec: Option<Spec> = std::env::var(ENV_SPEC).ok().and_then(|s| serde_json::from_str(&s).ok());
    let Some(spec) = spec else {
        let message = format!("{HELPER_ARG} is dpctl smoke --isolate's helper; it is not run by hand");
        let _ = crate::error::write(err, &message, Some("run dpctl smoke --isolate -- PLUGIN"));
        return Some(crate::error::exit::USAGE);
    };
    let result = setup(&spec);
    if spec.check {
        let answer = match result {
            Ok(report) => {
                let launch_error = command.first().and_then(|p| find_program(Path::new(p)).err());
                CheckAnswer { ok: Some(report), error: None, launch_error }
            }
            Err(e) => CheckAnswer { ok: None, error: Some(message_of(e)), launch_error: None },
        };
        let code = if answer.ok.is_some() { crate::error::exit::OK } else { crate::error::exit::USAGE };
        let line = serde_json::to_string(&answer).unwrap_or_default();
        let _ = writeln!(out, "{line}");
        return Some(code);
    }
    if let Err(e) = result {
        let _ = writeln!(err, "dpctl --isolate: error: {}", message_of(e));
        return Some(126);
    }
    let Some((program, args)) = command.split_first() else {
        let _ = writeln!(err, "dpctl --isolate: error: no command after --");
        return Some(crate::error::exit::USAGE);
    };
    use std::os::unix::process::CommandExt;
    // SAFETY: removing a variable in a single-threaded process (the helper
    // starts no thread) cannot race with a reader.
    unsafe { std::env::remove_var(ENV_SPEC) };
    if spec.pid_namespace
        && let Some(code) = fork_pid_one(err)
    {
        return Some(code);
    }
    let e = std::process::Command::new(program).args(args).exec();
    let name = Path::new(program).display();
    let (why, code) = match e.kind() {
        std::io::ErrorKind::NotFound if Path::new(program).components().count() > 1 => {
            (format!("{name}: no such file inside the namespace (is the path right?)"), 127)
        }
        std::io::ErrorKind::NotFound => (format!("{name}: command not found in PATH"), 127),
        std::io::ErrorKind::PermissionDenied => (format!("{name}: permission denied (is it executable?)"), 126),
        _ => (format!("{name}: {e}"), 126),
    };
    let _ = writeln!(err, "dpctl --isolate: cannot start the plugin: {why}");
    Some(code)
}

/// In a PID namespace the first child is its process 1: forks it (it
/// returns `None` and goes on to `exec` the command) and waits for it here,
/// returning its exit code; the child mounts the namespace's own /proc.
/// This process ignores SIGINT and SIGTERM (they
/// reach the child too: it is in the same process group) and the child dies
/// with it (parent-death signal), so the kernel's end of the namespace
/// follows dpctl's, even a crash.
fn fork_pid_one(err: &mut dyn Write) -> Option<u8> {
    // SAFETY: the helper is single-threaded, so fork(2) copies a consistent
    // process; signal(2) and prctl(2) take plain values.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        match libc::fork() {
            -1 => {
                let e = std::io::Error::last_os_error();
                let _ = writeln!(err, "dpctl --isolate: error: fork into the PID namespace: {e}");
                Some(126)
            }
            0 => {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                // The host's /proc shows the host's process IDs: containerd's
                // shim reads /proc/<its parent's ID> and fails on it. This
                // namespace's own /proc hides the binds made below /proc/sys,
                // which only a kubelet outside a PID namespace needs.
                let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                if let Err(e) = mount(Some(Path::new("proc")), Path::new("/proc"), Some("proc"), flags, None) {
                    let _ = writeln!(err, "dpctl --isolate: error: mounting the PID namespace's /proc: {e}");
                    return Some(126);
                }
                None
            }
            child => {
                let mut status = 0;
                while libc::waitpid(child, &raw mut status, 0) == -1 {
                    if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                        return Some(126);
                    }
                }
                let code =
                    if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
                Some(u8::try_from(code).unwrap_or(u8::MAX))
            }
        }
    }
}

/// Whether `program` can be executed here (inside the namespace): a path
/// as given, a bare name through PATH, as exec would find it.
fn find_program(program: &Path) -> std::result::Result<(), String> {
    let name = program.display();
    if program.as_os_str().as_bytes().contains(&b'{') {
        return Ok(()); // substituted later; exec will tell
    }
    let runnable = |p: &Path| -> Option<bool> {
        let meta = std::fs::metadata(p).ok()?;
        let c = c_path(p).ok()?;
        // SAFETY: a NUL-terminated path that outlives the call.
        Some(meta.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0)
    };
    if program.components().count() > 1 {
        return match runnable(program) {
            Some(true) => Ok(()),
            Some(false) => Err(format!("{name}: permission denied (is it executable?)")),
            None => Err(format!(
                "{name}: no such file inside the namespace (is the path right, relative to the current directory?)"
            )),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|dir| {
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        runnable(&dir.join(program)) == Some(true)
    });
    if found { Ok(()) } else { Err(format!("{name}: command not found in PATH")) }
}

/// The message of an error without an `--isolate: ` place prefix.
fn message_of(e: Error) -> String {
    match e {
        Error::Invalid { message, .. } => message,
        other => other.to_string(),
    }
}

/// Steps 1-5 of the module docs, without the `exec`.
fn setup(spec: &Spec) -> Result<IsolationReport> {
    let namespaces = match spec.userns {
        Some((uid, gid)) => {
            enter_user_namespace(uid, gid, spec.simulate.as_deref())?;
            "user+mount"
        }
        None if spec.pid_namespace => {
            unshare(libc::CLONE_NEWNS | libc::CLONE_NEWPID).map_err(|e| refused_as_root(&e))?;
            "mount+pid"
        }
        None => {
            unshare(libc::CLONE_NEWNS).map_err(|e| refused_as_root(&e))?;
            "mount"
        }
    };
    // Nothing below may reach the host: first make every mount private.
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(|e| mount_error("making the mounts private (mount --make-rprivate /)", &e))?;
    mount(Some(Path::new("tmpfs")), &spec.staging, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some("mode=0755"))
        .map_err(|e| mount_error(&format!("mounting a tmpfs on {}", spec.staging.display()), &e))?;
    let mut state = Shadows { staging: spec.staging.clone(), seq: 0, created: Vec::new() };
    let mut mounts = Vec::new();
    let mut binds = spec.binds.clone();
    // Parents before children.
    binds.sort_by_key(|b| b.target.components().count());
    for b in &binds {
        let is_dir =
            std::fs::metadata(&b.source).map_err(|e| Error::io(format!("reading {}", b.source.display()), e))?.is_dir();
        let created = state.ensure(&b.target, is_dir, &mut mounts)?;
        // From now on the target shows the host's source: never write there.
        state.created.retain(|c| c != &b.target);
        mount(Some(&b.source), &b.target, None, libc::MS_BIND | libc::MS_REC, None)
            .map_err(|e| mount_error(&format!("bind-mounting {} on {}", b.source.display(), b.target.display()), &e))?;
        let note = if created {
            "bind mount; the mountpoint exists inside the namespace only"
        } else {
            "bind mount over the existing path, inside the namespace only"
        };
        mounts.push(MountRecord {
            target: b.target.display().to_string(),
            source: b.source.display().to_string(),
            kind: "bind".into(),
            note: note.into(),
        });
    }
    for p in &spec.shared {
        // A new peer group of this namespace's own: nothing reaches the host.
        mount(None, p, None, libc::MS_REC | libc::MS_SHARED, None)
            .map_err(|e| mount_error(&format!("making {} shared", p.display()), &e))?;
    }
    umount_detach(&spec.staging).map_err(|e| mount_error(&format!("unmounting {}", spec.staging.display()), &e))?;
    if spec.read_only_root {
        // Only this namespace's copy of the root mount; the binds are mounts of their own.
        mount(None, Path::new("/"), None, libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY, None)
            .map_err(|e| mount_error("making / read-only", &e))?;
    }
    Ok(IsolationReport { namespaces: namespaces.into(), mounts })
}

/// Missing mountpoints made inside the namespace.
struct Shadows {
    staging: PathBuf,
    seq: u32,
    /// Directories on a tmpfs copy (the copies, and directories created in
    /// them), where entries can be made without touching the host.
    created: Vec<PathBuf>,
}

impl Shadows {
    /// Makes `target` exist inside the namespace; true when it had to be created.
    fn ensure(&mut self, target: &Path, is_dir: bool, mounts: &mut Vec<MountRecord>) -> Result<bool> {
        if std::fs::symlink_metadata(target).is_ok() {
            return Ok(false);
        }
        let mut ancestor = target;
        loop {
            ancestor = match ancestor.parent() {
                Some(p) => p,
                None => return Err(Error::invalid("--bind", format!("{}: no existing parent", target.display()))),
            };
            if std::fs::symlink_metadata(ancestor).is_ok() {
                break;
            }
        }
        // A directory this run made on a tmpfs (and did not bind over since)
        // can take new entries; anything else is covered with a copy first.
        if !self.created.iter().any(|c| c == ancestor) {
            self.shadow(ancestor, target, mounts)?;
            self.created.push(ancestor.to_path_buf());
        }
        create_missing(ancestor, target, is_dir, &mut self.created)?;
        Ok(true)
    }

    /// Covers `dir` with a tmpfs copy whose entries are bind-mounted back.
    fn shadow(&mut self, dir: &Path, because: &Path, mounts: &mut Vec<MountRecord>) -> Result<()> {
        let n = self.seq;
        self.seq = self.seq.saturating_add(1);
        let orig = self.staging.join(format!("orig{n}"));
        let copy = self.staging.join(format!("copy{n}"));
        let io = |what: String| move |e: std::io::Error| Error::io(what, e);
        std::fs::create_dir(&orig).map_err(io(format!("creating {}", orig.display())))?;
        std::fs::create_dir(&copy).map_err(io(format!("creating {}", copy.display())))?;
        mount(Some(dir), &orig, None, libc::MS_BIND | libc::MS_REC, None)
            .map_err(|e| mount_error(&format!("bind-mounting {} on {}", dir.display(), orig.display()), &e))?;
        let entries = std::fs::read_dir(&orig).map_err(io(format!("reading {}", dir.display())))?;
        let mut count = 0usize;
        for entry in entries {
            let entry = entry.map_err(io(format!("reading {}", dir.display())))?;
            count += 1;
            if count > MAX_SHADOW_ENTRIES {
                return Err(Error::invalid(
                    "--isolate",
                    format!(
                        "{} has over {MAX_SHADOW_ENTRIES} entries; cannot make {} inside the namespace",
                        dir.display(),
                        because.display()
                    ),
                ));
            }
            let (from, to) = (entry.path(), copy.join(entry.file_name()));
            let meta = std::fs::symlink_metadata(&from).map_err(io(format!("reading {}", from.display())))?;
            if meta.file_type().is_symlink() {
                let link = std::fs::read_link(&from).map_err(io(format!("reading {}", from.display())))?;
                std::os::unix::fs::symlink(link, &to).map_err(io(format!("creating {}", to.display())))?;
                continue;
            }
            if meta.is_dir() {
                std::fs::create_dir(&to).map_err(io(format!("creating {}", to.display())))?;
            } else {
                std::fs::File::create(&to).map_err(io(format!("creating {}", to.display())))?;
            }
            mount(Some(&from), &to, None, libc::MS_BIND | libc::MS_REC, None)
                .map_err(|e| mount_error(&format!("bind-mounting {} on {}", from.display(), to.display()), &e))?;
        }
        if let Ok(meta) = std::fs::metadata(dir) {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(meta.permissions().mode()));
        }
        if dir == Path::new("/") {
            enter_root_copy(&copy)?;
        } else {
            mount(Some(&copy), dir, None, libc::MS_BIND | libc::MS_REC, None)
                .map_err(|e| mount_error(&format!("covering {} with its copy", dir.display()), &e))?;
        }
        mounts.push(MountRecord {
            target: dir.display().to_string(),
            source: "tmpfs".into(),
            kind: "tmpfs".into(),
            note: format!(
                "{} does not exist on the host: inside the namespace {} is a tmpfs copy with its {count} entr{} \
                 bind-mounted back, so that the mountpoint can be made without writing to the host",
                because.display(),
                dir.display(),
                if count == 1 { "y" } else { "ies" }
            ),
        });
        Ok(())
    }
}

/// Makes `copy` (the tmpfs copy of `/`) this process's root.
///
/// Covering `/` with a bind mount is not enough: a process's root is a
/// reference to the mount it started with, and paths starting at `/` are
/// looked up from that reference without crossing a mount stacked on it. A
/// directory then made "in the copy" at `/zz` landed on the host's root
/// file system instead. `pivot_root(2)` moves the root itself: `copy`
/// becomes `/` (its entries are recursive binds of the host's, so every
/// mount below `/` is still there) and the old root, stacked on it by
/// `pivot_root(".", ".")`, is detached. The working directory is restored
/// by path, which resolves the same through the binds.
fn enter_root_copy(copy: &Path) -> Result<()> {
    let cwd = std::env::current_dir().ok();
    // pivot_root needs the new root to be a mountpoint.
    mount(Some(copy), copy, None, libc::MS_BIND | libc::MS_REC, None)
        .map_err(|e| mount_error(&format!("bind-mounting {} on itself", copy.display()), &e))?;
    std::env::set_current_dir(copy).map_err(|e| Error::io(format!("entering {}", copy.display()), e))?;
    let here = c_path(Path::new(".")).map_err(|e| Error::io("pivot_root".to_string(), e))?;
    // SAFETY: pivot_root reads two NUL-terminated paths that outlive the call.
    if unsafe { libc::syscall(libc::SYS_pivot_root, here.as_ptr(), here.as_ptr()) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(mount_error("making the copy of / the root (pivot_root)", &e));
    }
    // The old root now sits on top of "."; detaching it reveals the copy.
    umount_detach(Path::new(".")).map_err(|e| mount_error("detaching the old root", &e))?;
    std::env::set_current_dir("/").map_err(|e| Error::io("entering the new /".to_string(), e))?;
    if let Some(cwd) = cwd {
        let _ = std::env::set_current_dir(cwd);
    }
    Ok(())
}

/// Creates `target` (a directory or an empty file) and its missing parents
/// below `ancestor`, remembering the directories made.
fn create_missing(ancestor: &Path, target: &Path, is_dir: bool, created: &mut Vec<PathBuf>) -> Result<()> {
    let Ok(rel) = target.strip_prefix(ancestor) else { return Ok(()) };
    let mut p = ancestor.to_path_buf();
    let parts: Vec<Component<'_>> = rel.components().collect();
    for (i, c) in parts.iter().enumerate() {
        p.push(c);
        let last = i + 1 == parts.len();
        if std::fs::symlink_metadata(&p).is_ok() {
            continue;
        }
        let made = if last && !is_dir { std::fs::File::create(&p).map(drop) } else { std::fs::create_dir(&p) };
        made.map_err(|e| Error::io(format!("creating {} inside the namespace", p.display()), e))?;
        if !last || is_dir {
            created.push(p.clone());
        }
    }
    Ok(())
}

/// `unshare(CLONE_NEWUSER | CLONE_NEWNS)` and a map of the caller's uid and
/// gid to root inside, or an error with the reason and the fix.
fn enter_user_namespace(uid: u32, gid: u32, simulate: Option<&str>) -> Result<()> {
    if let Some(knob) = simulate {
        let errno = if knob.contains("max_user_namespaces") { libc::ENOSPC } else { libc::EPERM };
        return Err(refused_unprivileged(
            uid,
            "unshare(CLONE_NEWUSER)",
            &std::io::Error::from_raw_os_error(errno),
            Some(knob),
        ));
    }
    unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)
        .map_err(|e| refused_unprivileged(uid, "unshare(CLONE_NEWUSER)", &e, None))?;
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| refused_unprivileged(uid, &format!("writing {file}"), &e, None))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("0 {uid} 1"))?;
    write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    Ok(())
}

/// A kernel knob that governs unprivileged user namespaces.
struct Knob {
    sysctl: &'static str,
    file: &'static str,
    /// The value that refuses.
    refusing: &'static str,
    reason: &'static str,
    fix: &'static str,
}

const KNOBS: [Knob; 3] = [
    Knob {
        sysctl: "kernel.apparmor_restrict_unprivileged_userns",
        file: "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        refusing: "1",
        reason: "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later)",
        fix: "give dpctl an AppArmor profile that allows them (a file in /etc/apparmor.d with \
              `abi <abi/4.0>, include <tunables/global> profile dpctl /usr/local/bin/dpctl flags=(unconfined) { userns, }`, \
              then `sudo apparmor_parser -r` on it), or `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`",
    },
    Knob {
        sysctl: "kernel.unprivileged_userns_clone",
        file: "/proc/sys/kernel/unprivileged_userns_clone",
        refusing: "0",
        reason: "the kernel allows user namespaces to root only",
        fix: "`sudo sysctl -w kernel.unprivileged_userns_clone=1`",
    },
    Knob {
        sysctl: "user.max_user_namespaces",
        file: "/proc/sys/user/max_user_namespaces",
        refusing: "0",
        reason: "the kernel allows no user namespaces at all",
        fix: "`sudo sysctl -w user.max_user_namespaces=15000`",
    },
];

/// Why a non-root user got no user namespace, and what to do.
fn refused_unprivileged(uid: u32, op: &str, e: &std::io::Error, simulated: Option<&str>) -> Error {
    let value = |k: &Knob| match simulated {
        Some(s) => (k.sysctl.ends_with(s) || k.file.ends_with(s)).then(|| k.refusing.to_string()),
        None => std::fs::read_to_string(k.file).ok().map(|v| v.trim().to_string()),
    };
    let cause = KNOBS.iter().find(|k| value(k).as_deref() == Some(k.refusing));
    let general = "or run it as root (sudo dpctl smoke --isolate ...), or without --isolate with a plugin that takes \
                   its directory as a flag ({dir})";
    let message = match cause {
        Some(k) => format!(
            "cannot isolate the plugin as uid {uid}: {op} failed ({e}): {} ({} = {}{}). Fix: {}; {general}",
            k.reason,
            k.sysctl,
            k.refusing,
            if simulated.is_some() { ", simulated" } else { "" },
            k.fix
        ),
        None => format!(
            "cannot isolate the plugin as uid {uid}: {op} failed ({e}): the kernel, a seccomp filter (a container's \
             default profile) or a security module refuses user namespaces. Fix: allow them for dpctl (in a \
             container: --security-opt seccomp=unconfined, or --privileged), {general}"
        ),
    };
    Error::invalid("--isolate", message)
}

/// Why root got no mount namespace (a container without CAP_SYS_ADMIN).
fn refused_as_root(e: &std::io::Error) -> Error {
    Error::invalid(
        "--isolate",
        format!(
            "cannot isolate the plugin: unshare(CLONE_NEWNS) failed ({e}): dpctl lacks CAP_SYS_ADMIN (a container?). \
             Fix: run it with CAP_SYS_ADMIN (docker run --cap-add SYS_ADMIN, or --privileged), or without --isolate \
             with a plugin that takes its directory as a flag ({{dir}})"
        ),
    )
}

fn mount_error(what: &str, e: &std::io::Error) -> Error {
    let hint = if e.raw_os_error() == Some(libc::EPERM) || e.raw_os_error() == Some(libc::EACCES) {
        " (a security module such as AppArmor or SELinux may forbid mounts here; try as root)"
    } else {
        ""
    };
    Error::invalid("--isolate", format!("{what} failed: {e}{hint}"))
}

fn c_path(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
}

fn unshare(flags: libc::c_int) -> std::io::Result<()> {
    // SAFETY: unshare(2) takes flags only and changes this process's namespaces.
    if unsafe { libc::unshare(flags) } == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> std::io::Result<()> {
    let source = source.map(c_path).transpose()?;
    let target = c_path(target)?;
    let fstype = fstype.map(CString::new).transpose().map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let data = data.map(CString::new).transpose().map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is either null (allowed by mount(2) for source,
    // fstype and data) or a NUL-terminated string that outlives the call.
    let rc = unsafe { libc::mount(ptr(&source), target.as_ptr(), ptr(&fstype), flags, ptr(&data).cast()) };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

fn umount_detach(target: &Path) -> std::io::Result<()> {
    let target = c_path(target)?;
    // SAFETY: a NUL-terminated path that outlives the call.
    if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_parse_with_reasons() {
        let b = parse_bind("/tmp:/etc/cdi").unwrap();
        assert_eq!(b, Bind { source: "/tmp".into(), target: "/etc/cdi".into() });
        assert!(parse_bind("/tmp").unwrap_err().contains("SRC:DST"));
        assert!(parse_bind("/tmp:etc").unwrap_err().contains("absolute"));
        assert!(parse_bind("/tmp:/etc/../x").unwrap_err().contains(".."));
        assert!(parse_bind("/tmp:/").unwrap_err().contains("whole file system"));
        assert!(parse_bind("/no/such/dir/x:/y").unwrap_err().contains("cannot be used"));
    }

    #[test]
    fn programs_are_found_as_exec_would() {
        assert!(find_program(Path::new("sh")).is_ok());
        assert!(find_program(Path::new("/bin/sh")).is_ok());
        assert!(find_program(Path::new("no-such-dpctl-plugin")).unwrap_err().contains("not found in PATH"));
        assert!(find_program(Path::new("./no-such-plugin")).unwrap_err().contains("no such file"));
        let d = tempfile::tempdir().unwrap();
        let plain = d.path().join("plugin.txt");
        std::fs::write(&plain, "not a program").unwrap();
        assert!(find_program(&plain).unwrap_err().contains("permission denied"));
        assert!(find_program(Path::new("{dir}/plugin")).is_ok());
    }

    #[test]
    fn a_refusal_names_the_knob_and_the_fix() {
        let e = std::io::Error::from_raw_os_error(libc::EPERM);
        let m = refused_unprivileged(1000, "unshare(CLONE_NEWUSER)", &e, Some("unprivileged_userns_clone")).to_string();
        assert!(m.contains("kernel.unprivileged_userns_clone = 0"), "{m}");
        assert!(m.contains("sudo sysctl -w kernel.unprivileged_userns_clone=1"), "{m}");
        let m = refused_unprivileged(1000, "x", &e, Some("apparmor_restrict_unprivileged_userns")).to_string();
        assert!(m.contains("AppArmor") && m.contains("userns,"), "{m}");
    }

    #[test]
    fn missing_paths_are_made_and_remembered() {
        let d = tempfile::tempdir().unwrap();
        let mut created = Vec::new();
        let target = d.path().join("kubelet/device-plugins");
        create_missing(d.path(), &target, true, &mut created).unwrap();
        assert!(target.is_dir());
        assert_eq!(created, [d.path().join("kubelet"), target]);
        let file = d.path().join("etc/config.yaml");
        create_missing(d.path(), &file, false, &mut created).unwrap();
        assert!(file.is_file());
        assert_eq!(created.last().unwrap(), &d.path().join("etc"));
    }
}
