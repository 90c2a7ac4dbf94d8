//! The interop peers: tests/interop/peer.py on grpcio (grpc-core) and grpcurl
//! (grpc-go), an independent gRPC stack.
//!
//! The Python environment comes from `DPCTL_INTEROP_PYTHON` (and
//! `DPCTL_GRPCURL`), or is created once under target/ with `python3 -m venv`
//! and pip (tests/interop/requirements.txt). If it cannot be had, interop
//! tests are skipped with a message, except under CI (`CI` set), where that
//! is a failure: CI must prove interoperability.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::Receiver;

use super::WAIT;

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

/// A running process (a peer, or a long-lived dpctl) whose JSON stdout lines
/// can be awaited; killed on drop.
pub struct Peer {
    child: Child,
    lines: Receiver<serde_json::Value>,
    pub seen: Vec<serde_json::Value>,
}

impl Peer {
    /// Starts `peer.py <args>`.
    pub fn start(env: &Env, args: &[&str]) -> Peer {
        let mut cmd = Command::new(&env.python);
        cmd.arg(peer_script()).args(args);
        Peer::spawn(cmd)
    }

    /// Starts `dpctl <args>` (add `-o json` to get event lines).
    pub fn dpctl(args: &[&str]) -> Peer {
        let mut cmd = super::dpctl_command();
        cmd.args(args);
        Peer::spawn(cmd)
    }

    fn spawn(mut cmd: Command) -> Peer {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        let stdout = child.stdout.take().expect("peer stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v = serde_json::from_str(&line).unwrap_or(serde_json::json!({ "raw": line }));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Peer { child, lines: rx, seen: Vec::new() }
    }

    /// Waits (at most [`WAIT`]) for a line whose "event" is `event`, and returns it.
    pub fn wait_event(&mut self, event: &str) -> serde_json::Value {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => {
                    self.seen.push(v.clone());
                    if v["event"] == event {
                        return v;
                    }
                }
                Err(_) => panic!("peer: no {event:?} event within {WAIT:?}; saw {:?}", self.seen),
            }
        }
    }

    /// The next JSON line, waiting at most [`WAIT`].
    pub fn next_line(&mut self) -> serde_json::Value {
        match self.lines.recv_timeout(WAIT) {
            Ok(v) => {
                self.seen.push(v.clone());
                v
            }
            Err(_) => panic!("no output line within {WAIT:?}; saw {:?}", self.seen),
        }
    }

    /// Waits for the process to exit and returns its exit code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        let deadline = std::time::Instant::now() + WAIT;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::park_timeout(std::time::Duration::from_millis(20));
        }
        panic!("peer did not exit within {WAIT:?}");
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `peer.py call ...` to completion and returns its one JSON result line.
pub fn call(env: &Env, args: &[&str]) -> serde_json::Value {
    let out = Command::new(&env.python).arg(peer_script()).arg("call").args(args).output().expect("run peer.py call");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("peer call printed no JSON ({e}): {text}\n{}", String::from_utf8_lossy(&out.stderr)))
}

/// The three `:authority` forms real clients send over a unix socket.
pub const AUTHORITY_MODES: [&str; 3] = ["localhost", "path", "grpc-default"];
