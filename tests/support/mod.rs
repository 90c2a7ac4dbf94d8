//! Shared test helpers: sandboxes, the dpctl binary, an in-test device plugin.

#![allow(dead_code)]

pub mod child;
pub mod fake_plugin;
pub mod go_built;
pub mod h2raw;
pub mod interop;
pub mod kubelet;
pub mod pty;
pub mod silent;
pub mod sim;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

pub use child::{Child, Stderr, WAIT};

/// Awaits `fut`, failing the test if it takes longer than [`WAIT`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {WAIT:?} waiting for {what}"),
    }
}

/// A fresh, short temporary directory (unix socket paths must stay short).
pub struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new().prefix("dp").tempdir_in("/tmp").expect("create temp dir");
        Sandbox { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// The dpctl binary under test.
pub fn dpctl_bin() -> &'static str {
    env!("CARGO_BIN_EXE_dpctl")
}

/// Result of running dpctl.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// The arguments dpctl ran with (empty when the caller built the command).
    pub args: Vec<String>,
}

impl Run {
    pub fn from(out: Output) -> Self {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            args: Vec::new(),
        }
    }

    /// Like [`Run::from`], remembering the arguments for failure reports.
    pub fn with_args(out: Output, args: &[&str]) -> Self {
        Run { args: args.iter().map(|a| a.to_string()).collect(), ..Run::from(out) }
    }

    /// Panics with the whole run shown unless the exit code is `code`: the
    /// command line, stdout, stderr, and each directory the arguments name
    /// with its listing (as ripgrep's test harness does).
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        if self.code != code {
            panic!(
                "unexpected exit code {} (wanted {code})\n--- command\n{}\n--- stdout\n{}\n--- stderr\n{}{}",
                self.code,
                self.command_line(),
                self.stdout,
                self.stderr,
                listings(&self.args)
            );
        }
        self
    }

    /// `dpctl ARGS` as a shell would take it (each argument quoted when needed).
    pub fn command_line(&self) -> String {
        let quote = |a: &String| {
            if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@".contains(c)) {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        };
        let args: Vec<String> = self.args.iter().map(quote).collect();
        if args.is_empty() { "dpctl (arguments not recorded)".into() } else { format!("dpctl {}", args.join(" ")) }
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}\n--- stderr\n{}", self.stdout, self.stderr))
    }

    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
            .collect()
    }
}

/// The environment variables dpctl reads (`dpctl --help` lists them): a test
/// never inherits them from the shell that runs `cargo test`.
pub const DPCTL_ENV: [&str; 5] =
    ["DPCTL_DEVICE_PLUGIN_DIR", "DPCTL_PODRESOURCES_SOCKET", "DPCTL_LOG", "DPCTL_ROOT", "DPCTL_NODE_NAME"];

/// Runs dpctl with `args` (colors off, no inherited dpctl env), waiting at most [`WAIT`].
pub async fn dpctl(args: &[&str]) -> Run {
    dpctl_env(args, &[]).await
}

/// Like [`dpctl`], with extra environment variables.
pub async fn dpctl_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = dpctl_command();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_bounded(cmd, args, WAIT).await
}

/// Runs `cmd` (dpctl with `args`) to completion with stdin closed, failing
/// the test if it takes longer than `bound` (the child is killed then).
pub async fn run_bounded(cmd: Command, args: &[&str], bound: Duration) -> Run {
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    match tokio::time::timeout(bound, cmd.output()).await {
        Ok(out) => Run::with_args(out.expect("run dpctl"), args),
        Err(_) => panic!("dpctl {} took over {bound:?}", args.join(" ")),
    }
}

/// The directories an argument list names (an existing directory, or the
/// directory of an existing file or socket; `--flag=value` values too), each
/// with a bounded listing, for failure reports.
fn listings(args: &[String]) -> String {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for arg in args {
        let value = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
        let path = Path::new(value);
        if !path.is_absolute() {
            continue;
        }
        let dir = if path.is_dir() {
            path.to_path_buf()
        } else if path.exists() {
            path.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            continue;
        };
        if dir != Path::new("/") && !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    let mut out = String::new();
    for dir in dirs {
        out.push_str(&format!("\n--- directory {}\n", dir.display()));
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                let mut names: Vec<String> = entries
                    .filter_map(Result::ok)
                    .map(|e| {
                        let kind = match e.file_type() {
                            Ok(t) if t.is_dir() => "/",
                            Ok(t) if std::os::unix::fs::FileTypeExt::is_socket(&t) => "=",
                            _ => "",
                        };
                        format!("{}{kind}", e.file_name().to_string_lossy())
                    })
                    .collect();
                names.sort();
                let more = names.len().saturating_sub(50);
                names.truncate(50);
                if names.is_empty() {
                    out.push_str("(empty)\n");
                }
                for n in names {
                    out.push_str(&n);
                    out.push('\n');
                }
                if more > 0 {
                    out.push_str(&format!("... and {more} more\n"));
                }
            }
            Err(e) => out.push_str(&format!("(cannot list: {e})\n")),
        }
    }
    out
}

/// A failing `expect_code` shows the command line and the listing of the
/// directories its arguments name.
#[test]
fn a_failed_expectation_shows_the_command_and_the_directory() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.join("gpu.json"), b"{}").expect("write a file");
    let config = sandbox.join("gpu.json");
    let config = config.to_str().expect("utf-8 path");
    let out = Command::new("true").output().expect("run true");
    let run = Run::with_args(out, &["mock-plugin", "--config", config, "--note=it's"]);
    let shown = std::panic::catch_unwind(|| {
        run.expect_code(2);
    })
    .expect_err("exit code 0 is not 2");
    let message = shown.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains(&format!("dpctl mock-plugin --config {config} '--note=it'\\''s'")), "{message}");
    assert!(message.contains(&format!("--- directory {}\ngpu.json\n", sandbox.path().display())), "{message}");
    assert!(message.contains("unexpected exit code 0 (wanted 2)"), "{message}");
}

/// A std Command for dpctl, for tests that manage the child themselves
/// (colors off, no inherited dpctl env, like [`dpctl`]).
pub fn dpctl_command() -> Command {
    let mut cmd = Command::new(dpctl_bin());
    cmd.env("NO_COLOR", "1");
    for k in DPCTL_ENV {
        cmd.env_remove(k);
    }
    cmd
}

impl Child {
    /// Starts `dpctl ARGS` in the background (like [`dpctl_command`]),
    /// stderr gathered for failure reports.
    pub fn dpctl(args: &[&str]) -> Child {
        let mut cmd = dpctl_command();
        cmd.args(args);
        Child::spawn(cmd, Stderr::Keep)
    }
}

/// Every `DPCTL_*` variable `dpctl --help` names is removed from both kinds
/// of child, so a developer's shell cannot point a test at a real kubelet.
#[test]
fn children_do_not_inherit_the_dpctl_environment() {
    let help = Command::new(dpctl_bin()).arg("--help").env("NO_COLOR", "1").output().expect("run dpctl --help");
    let help = String::from_utf8_lossy(&help.stdout);
    let mut named: Vec<&str> = help
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .filter(|w| w.starts_with("DPCTL_") && w.len() > "DPCTL_".len())
        .collect();
    named.sort_unstable();
    named.dedup();
    assert!(!named.is_empty(), "dpctl --help names its environment variables:\n{help}");
    let removed: Vec<String> = dpctl_command()
        .get_envs()
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    for var in named {
        assert!(DPCTL_ENV.contains(&var), "{var} is missing from DPCTL_ENV");
        assert!(removed.iter().any(|r| r == var), "dpctl_command() passes {var} on to the child");
    }
}

/// A background child's failed wait is bounded and shows the command, the
/// stdout read so far and the stderr.
#[tokio::test]
async fn a_failed_wait_on_a_child_shows_its_command_and_output() {
    use futures_util::FutureExt;
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo started; echo oops >&2; exec sleep 30"]);
    let mut child = Child::spawn(cmd, Stderr::Keep).patience(Duration::from_millis(300));
    assert_eq!(child.stderr_line().await.as_deref(), Some("oops"));
    let shown = std::panic::AssertUnwindSafe(child.line_with("never printed"))
        .catch_unwind()
        .await
        .expect_err("no such line: the wait fails");
    let message = shown.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("no line with \"never printed\" within 300ms"), "{message}");
    assert!(message.contains("--- command\n\"sh\" \"-c\""), "{message}");
    assert!(message.contains("--- stdout so far\nstarted\n--- stderr so far\noops"), "{message}");
}

/// A pod with one claim used by its container, and the claim allocated on the mock's `pool-0/dev-0`.
pub const DRA_POD: &str = "\
apiVersion: v1
kind: Pod
metadata: {name: trainer, uid: pod-uid-1}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimName: gpu-claim}
  containers:
  - name: main
    resources:
      claims: [{name: gpu}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu-claim, uid: claim-uid-1}
status:
  allocation:
    devices:
      results:
      - {request: gpu, driver: gpu.example.com, pool: pool-0, device: dev-0}
  reservedFor:
  - {resource: pods, name: trainer, uid: pod-uid-1}
";

/// dpctl's mock plugin serving one resource in the sandbox, not registered
/// with any kubelet (for the commands that call a plugin's socket), and
/// that socket's path.
pub async fn unregistered_mock(
    sb: &Sandbox,
    r: dpctl::mock_plugin::ResourceConfig,
) -> (dpctl::mock_plugin::MockHandle, String) {
    use dpctl::mock_plugin::{MockConfig, MockPlugin};
    let cfg =
        MockConfig { dir: Some(sb.path().to_path_buf()), register: false, resources: vec![r], ..MockConfig::default() };
    let handle = MockPlugin::start(cfg).await.expect("mock starts");
    let socket = handle.socket(&handle.resources()[0]).expect("socket").to_str().unwrap().to_string();
    (handle, socket)
}
