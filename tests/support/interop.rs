//! The interop peers: tests/interop/peer.py on grpcio (grpc-core) and grpcurl
//! (grpc-go), an independent gRPC stack.
//!
//! The Python environment comes from `DPCTL_INTEROP_PYTHON` (and
//! `DPCTL_GRPCURL`), or is created once under target/ with `python3 -m venv`
//! and pip (tests/interop/requirements.txt). If it cannot be had, interop
//! tests are skipped with a message, except under CI (`CI` set), where that
//! is a failure: CI must prove interoperability.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::{Child, Stderr};

/// The Python interpreter and grpcurl of the interop environment.
#[derive(Debug, Clone)]
pub struct Env {
    pub python: PathBuf,
    pub grpcurl: PathBuf,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Path of peer.py.
pub fn peer_script() -> PathBuf {
    root().join("tests/interop/peer.py")
}

fn setup() -> Result<Env, String> {
    if let Some(py) = std::env::var_os("DPCTL_INTEROP_PYTHON") {
        let py = PathBuf::from(py);
        let grpcurl = std::env::var_os("DPCTL_GRPCURL")
            .map(PathBuf::from)
            .unwrap_or_else(|| py.parent().unwrap_or(Path::new(".")).join("grpcurl"));
        return Ok(Env { python: py, grpcurl });
    }
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("interop-venv");
    let python = venv.join("bin/python");
    let stamp = venv.join(".installed");
    // One process at a time sets the venv up (nextest runs tests in parallel processes).
    std::fs::create_dir_all(&venv).map_err(|e| e.to_string())?;
    let lock = std::fs::File::create(venv.with_extension("lock")).map_err(|e| e.to_string())?;
    lock.lock().map_err(|e| e.to_string())?;
    if !stamp.exists() {
        let run = |cmd: &mut Command| -> Result<(), String> {
            let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!("{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr)))
            }
        };
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        run(Command::new(&python)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "-r"])
            .arg(root().join("tests/interop/requirements.txt")))?;
        std::fs::write(&stamp, b"").map_err(|e| e.to_string())?;
    }
    Ok(Env { python, grpcurl: venv.join("bin/grpcurl") })
}

/// The interop environment, or `None` (with a message) when it cannot be had
/// outside CI. Panics under CI.
pub fn env() -> Option<Env> {
    static ENV: OnceLock<Result<Env, String>> = OnceLock::new();
    match ENV.get_or_init(setup) {
        Ok(env) => Some(env.clone()),
        Err(e) if std::env::var_os("CI").is_some() => panic!("interop environment unavailable under CI: {e}"),
        Err(e) => {
            // libtest names each test's thread after the test.
            let test = std::thread::current().name().unwrap_or("an interop test").to_string();
            eprintln!(
                "SKIPPED {test}: interop peers unavailable ({e}); set DPCTL_INTEROP_PYTHON or install python3 + pip"
            );
            None
        }
    }
}

/// Starts `peer.py ARGS` in the background (its JSON event lines on stdout).
pub fn peer(env: &Env, args: &[&str]) -> Child {
    let mut cmd = Command::new(&env.python);
    cmd.arg(peer_script()).args(args);
    Child::spawn(cmd, Stderr::Keep)
}

/// Runs `peer.py call ...` to completion (bounded like every wait) and
/// returns its one JSON result line.
pub async fn call(env: &Env, args: &[&str]) -> serde_json::Value {
    let mut cmd = tokio::process::Command::new(&env.python);
    cmd.arg(peer_script()).arg("call").args(args).stdin(std::process::Stdio::null()).kill_on_drop(true);
    let out = super::within("peer.py call", cmd.output()).await.expect("run peer.py call");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("peer call printed no JSON ({e}): {text}\n{}", String::from_utf8_lossy(&out.stderr)))
}

/// The three `:authority` forms real clients send over a unix socket.
pub const AUTHORITY_MODES: [&str; 3] = ["localhost", "path", "grpc-default"];
