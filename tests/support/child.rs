//! The one helper for a process a test or benchmark runs in the background
//! (a long-lived dpctl, or a grpcio peer): stdout read line by line, stderr
//! gathered for failure reports (or passed through), every wait bounded,
//! killed on drop.
//!
//! Self-contained (no `super::`), so benches include it with
//! `#[path = "../tests/support/child.rs"] mod child;`.

#![allow(dead_code)]

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;
use tokio::sync::mpsc;

/// How long any single wait in a test may take.
pub const WAIT: Duration = Duration::from_secs(10);

/// What becomes of the child's stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stderr {
    /// Gathered: shown when a wait fails, readable line by line.
    Keep,
    /// Passed through to the test's own stderr (benchmarks).
    Inherit,
}

/// A running child process; killed on drop.
pub struct Child {
    child: tokio::process::Child,
    what: String,
    lines: Lines<BufReader<ChildStdout>>,
    /// Every stdout line read so far.
    pub seen: Vec<String>,
    /// Every stderr line so far (with [`Stderr::Keep`]).
    stderr: Arc<Mutex<Vec<String>>>,
    stderr_lines: Option<mpsc::UnboundedReceiver<String>>,
    /// The bound on each wait ([`WAIT`] unless changed with [`Child::patience`]).
    patience: Duration,
}

impl Child {
    /// Starts `cmd` with stdin closed and stdout piped.
    pub fn spawn(cmd: std::process::Command, stderr: Stderr) -> Child {
        let what = format!("{cmd:?}");
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).kill_on_drop(true);
        cmd.stderr(if stderr == Stderr::Keep { Stdio::piped() } else { Stdio::inherit() });
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
        let lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let gathered: Arc<Mutex<Vec<String>>> = Arc::default();
        let stderr_lines = child.stderr.take().map(|err| {
            let (tx, rx) = mpsc::unbounded_channel();
            let gathered = gathered.clone();
            tokio::spawn(async move {
                let mut err = BufReader::new(err).lines();
                while let Ok(Some(line)) = err.next_line().await {
                    gathered.lock().unwrap().push(line.clone());
                    let _ = tx.send(line);
                }
            });
            rx
        });
        Child { child, what, lines, seen: Vec::new(), stderr: gathered, stderr_lines, patience: WAIT }
    }

    /// Bounds each later wait by `bound` instead of [`WAIT`].
    pub fn patience(mut self, bound: Duration) -> Child {
        self.patience = bound;
        self
    }

    /// The process id, while it runs.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The stderr gathered so far, one string.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    #[track_caller]
    fn fail(&self, why: &str) -> ! {
        panic!(
            "{why}\n--- command\n{}\n--- stdout so far\n{}\n--- stderr so far\n{}",
            self.what,
            self.seen.join("\n"),
            self.stderr()
        )
    }

    /// The next stdout line, or `None` once stdout is closed; fails the test
    /// if none comes within the bound.
    pub async fn line(&mut self) -> Option<String> {
        match tokio::time::timeout(self.patience, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => {
                self.seen.push(line.clone());
                Some(line)
            }
            Ok(Ok(None)) => None,
            Ok(Err(e)) => self.fail(&format!("reading stdout: {e}")),
            Err(_) => self.fail(&format!("no stdout line within {:?}", self.patience)),
        }
    }

    /// Reads stdout lines until one contains `needle`.
    pub async fn line_with(&mut self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + self.patience;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, self.lines.next_line()).await {
                Ok(Ok(Some(line))) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Ok(Ok(None)) => self.fail(&format!("stdout closed before a line with {needle:?}")),
                Ok(Err(e)) => self.fail(&format!("reading stdout: {e}")),
                Err(_) => self.fail(&format!("no line with {needle:?} within {:?}", self.patience)),
            }
        }
    }

    /// The next stdout line as JSON.
    pub async fn json(&mut self) -> serde_json::Value {
        let Some(line) = self.line().await else { self.fail("stdout closed before the next JSON line") };
        serde_json::from_str(&line).unwrap_or_else(|e| self.fail(&format!("stdout line is not JSON ({e}): {line}")))
    }

    /// Reads JSON stdout lines until one whose `event` is `name`, and returns it.
    pub async fn event(&mut self, name: &str) -> serde_json::Value {
        self.event_within(name, self.patience).await
    }

    /// Like [`Child::event`], bounded by `bound` (a benchmark's long setup).
    pub async fn event_within(&mut self, name: &str, bound: Duration) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let line = match tokio::time::timeout(left, self.lines.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => self.fail(&format!("stdout closed before a {name:?} event")),
                Ok(Err(e)) => self.fail(&format!("reading stdout: {e}")),
                Err(_) => self.fail(&format!("no {name:?} event within {bound:?}")),
            };
            self.seen.push(line.clone());
            let v: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| self.fail(&format!("stdout line is not JSON ({e}): {line}")));
            if v["event"] == name {
                return v;
            }
        }
    }

    /// Every stdout line left, until stdout closes.
    pub async fn rest(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(line) = self.line().await {
            out.push(line);
        }
        out
    }

    /// The next stderr line (with [`Stderr::Keep`]), or `None` once stderr is closed.
    pub async fn stderr_line(&mut self) -> Option<String> {
        let Some(rx) = self.stderr_lines.as_mut() else { self.fail("stderr is not kept") };
        match tokio::time::timeout(self.patience, rx.recv()).await {
            Ok(line) => line,
            Err(_) => self.fail(&format!("no stderr line within {:?}", self.patience)),
        }
    }

    /// Waits for the process to exit; its exit code (-1 for a signal).
    pub async fn wait(&mut self) -> i32 {
        match tokio::time::timeout(self.patience, self.child.wait()).await {
            Ok(Ok(status)) => status.code().unwrap_or(-1),
            Ok(Err(e)) => self.fail(&format!("waiting for the process: {e}")),
            Err(_) => self.fail(&format!("the process did not exit within {:?}", self.patience)),
        }
    }

    /// Waits for the process to exit and for its stderr to close: the exit
    /// code and the whole stderr.
    pub async fn finish(mut self) -> (i32, String) {
        let code = self.wait().await;
        if let Some(rx) = self.stderr_lines.as_mut() {
            let closed = async { while rx.recv().await.is_some() {} };
            if tokio::time::timeout(self.patience, closed).await.is_err() {
                self.fail("stderr still open after the process exited");
            }
        }
        (code, self.stderr())
    }

    /// Asks the process to stop (SIGTERM), as a node's shutdown does.
    pub fn terminate(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Interrupts the process (SIGINT), as a user's Ctrl-C does.
    pub fn interrupt(&self) {
        self.signal(libc::SIGINT);
    }

    fn signal(&self, signal: i32) {
        let Some(pid) = self.id() else { self.fail("signal: the process already exited") };
        let pid = i32::try_from(pid).expect("pid fits i32");
        // SAFETY: kill(2) with a pid this helper started and has not reaped.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill -{signal} {pid}: {}", std::io::Error::last_os_error());
    }

    /// Stops the process: SIGTERM, then SIGKILL if it has not exited within the bound.
    pub async fn stop(&mut self) {
        if self.id().is_some() {
            self.terminate();
        }
        if tokio::time::timeout(self.patience, self.child.wait()).await.is_err() {
            self.kill().await;
        }
    }

    /// Resident and peak resident memory of the process (VmRSS, VmHWM), in
    /// KiB; zeros once it has exited.
    pub fn rss_kib(&self) -> (u64, u64) {
        let status = self.id().and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok());
        let field = |name: &str| {
            status
                .as_deref()
                .and_then(|s| s.lines().find(|l| l.starts_with(name)))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(self.patience, self.child.wait()).await;
    }
}
