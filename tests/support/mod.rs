//! Shared test helpers: sandboxes, the dpctl binary, an in-test device plugin.

#![allow(dead_code)]

pub mod check_plugin;
pub mod h2raw;
pub mod interop;
pub mod kubelet;
pub mod plugin;
pub mod simplugin;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// How long any single wait in a test may take.
pub const WAIT: Duration = Duration::from_secs(10);

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
}

impl Run {
    pub fn from(out: Output) -> Self {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Panics with the whole run shown unless the exit code is `code`.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr);
        self
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
    let mut cmd = tokio::process::Command::new(dpctl_bin());
    cmd.args(args).env("NO_COLOR", "1").stdin(Stdio::null()).kill_on_drop(true);
    for k in DPCTL_ENV {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = within(&format!("dpctl {}", args.join(" ")), cmd.output()).await.expect("run dpctl");
    Run::from(out)
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
