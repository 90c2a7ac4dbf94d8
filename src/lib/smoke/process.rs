//! The vendor's plugin as a child process of `dpctl smoke`: launched in its
//! own process group with stdin closed and its output captured (the last
//! bytes kept in memory, everything optionally written to files), and always
//! stopped: [`PluginProcess::terminate`] sends SIGTERM, waits a grace period,
//! then SIGKILL; dropping the handle kills the group at once; and the child
//! gets SIGKILL from the kernel if dpctl itself dies.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use crate::error::{Error, Result};

/// Which output stream of the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// `stdout` or `stderr`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// How the process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitView {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// In words: `exited with code 1`, `killed by signal 9 (SIGKILL)`.
    pub text: String,
}

impl ExitView {
    fn from_status(s: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        let code = s.code();
        let signal = s.signal();
        let text = match (code, signal) {
            (Some(c), _) => format!("exited with code {c}"),
            (None, Some(sig)) => format!("killed by signal {sig} ({})", signal_name(sig)),
            (None, None) => "ended".to_string(),
        };
        ExitView { code, signal, text }
    }
}

impl std::fmt::Display for ExitView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// The usual name of a signal number.
fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// The captured output of one stream: byte count, and the last bytes.
#[derive(Debug)]
struct Tail {
    total: u64,
    keep: usize,
    buf: VecDeque<u8>,
}

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let bytes = if bytes.len() > self.keep { &bytes[bytes.len() - self.keep..] } else { bytes };
        let over = (self.buf.len() + bytes.len()).saturating_sub(self.keep);
        self.buf.drain(..over);
        self.buf.extend(bytes);
    }
}

/// What a stream printed, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputView {
    /// Bytes written in all.
    pub bytes: u64,
    /// The last bytes (up to the capture limit), lossily decoded; starts at a
    /// line boundary when cut.
    pub tail: String,
    /// True when `tail` is not the whole output.
    pub truncated: bool,
    /// The file with the whole output, when written (`--log-dir`).
    pub file: Option<String>,
}

impl OutputView {
    /// The last `n` lines of the tail.
    pub fn last_lines(&self, n: usize) -> Vec<&str> {
        let lines: Vec<&str> = self.tail.lines().collect();
        lines[lines.len().saturating_sub(n)..].to_vec()
    }
}

/// How to launch the plugin.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Program and arguments (already substituted).
    pub command: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Bytes of each stream kept in memory.
    pub keep_bytes: usize,
    /// Write the whole output to `<log_dir>/<log_name>.stdout.log` and `<log_name>.stderr.log`.
    pub log_dir: Option<PathBuf>,
    /// The log files' name: the step that started the process (`launch`,
    /// `plugin-restart`, `node-reboot`), so that each process keeps its own.
    pub log_name: String,
    /// Send each output line here as it arrives.
    pub lines: Option<mpsc::UnboundedSender<(Stream, String)>>,
}

/// How [`PluginProcess::terminate`] went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    /// The process had already ended before it was asked to stop.
    pub already_exited: bool,
    /// It ended within the grace period after SIGTERM.
    pub exited_on_sigterm: bool,
    /// It had to be killed with SIGKILL.
    pub killed: bool,
    /// From SIGTERM to its end.
    pub after: Duration,
    /// How it ended (None only if it could not be waited for).
    pub exit: Option<ExitView>,
}

/// A running (or ended) plugin process.
#[derive(Debug)]
pub struct PluginProcess {
    pid: u32,
    exit: watch::Receiver<Option<ExitView>>,
    stdout: Arc<Mutex<Tail>>,
    stderr: Arc<Mutex<Tail>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
    files: [Option<PathBuf>; 2],
}

impl PluginProcess {
    /// Starts the command in its own process group. The error says why it
    /// could not start (e.g. no such file).
    pub async fn spawn(launch: Launch) -> Result<PluginProcess> {
        let Some((program, args)) = launch.command.split_first() else {
            return Err(Error::invalid("COMMAND", "no command given after --"));
        };
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own group: Ctrl-C in a terminal reaches dpctl only (which
            // then stops the plugin gracefully), and signals reach helpers
            // the plugin started.
            .process_group(0);
        // SAFETY: the closure runs in the child between fork and exec and
        // only makes the async-signal-safe prctl system call. The parent-death
        // signal is tied to the spawning thread; dpctl spawns from the
        // runtime's main or worker threads, which live as long as dpctl.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                Ok(())
            });
        }
        let mut files: [Option<PathBuf>; 2] = [None, None];
        let mut writers: [Option<tokio::fs::File>; 2] = [None, None];
        if let Some(dir) = &launch.log_dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::invalid("--log-dir", format!("cannot create directory {}: {e}", dir.display())))?;
            for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
                let path = dir.join(format!("{}.{}.log", launch.log_name, stream.as_str()));
                let f = tokio::fs::File::create(&path)
                    .await
                    .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
                writers[i] = Some(f);
                files[i] = Some(path);
            }
        }
        let mut child = cmd.spawn().map_err(|e| spawn_error(program, e))?;
        // A spawned child always has an ID until it is waited for.
        let pid = child.id().unwrap_or_default();
        let new_tail = || Arc::new(Mutex::new(Tail { total: 0, keep: launch.keep_bytes.max(1), buf: VecDeque::new() }));
        let (stdout, stderr) = (new_tail(), new_tail());
        let mut readers = Vec::new();
        let [w_out, w_err] = writers;
        if let Some(out) = child.stdout.take() {
            readers.push(tokio::spawn(capture(out, Stream::Stdout, Arc::clone(&stdout), w_out, launch.lines.clone())));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(tokio::spawn(capture(err, Stream::Stderr, Arc::clone(&stderr), w_err, launch.lines.clone())));
        }
        let (tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let view = match child.wait().await {
                Ok(status) => ExitView::from_status(status),
                Err(e) => ExitView { code: None, signal: None, text: format!("could not be waited for: {e}") },
            };
            let _ = tx.send(Some(view));
        });
        Ok(PluginProcess { pid, exit, stdout, stderr, readers, files })
    }

    /// The process ID (also its process group ID).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// How it ended, when it has.
    pub fn exit(&self) -> Option<ExitView> {
        self.exit.borrow().clone()
    }

    /// Completes when the process has ended.
    pub async fn exited(&self) -> ExitView {
        let mut rx = self.exit.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or_else(unreachable_exit),
            // The waiter task is gone without a status: treat as ended.
            Err(_) => unreachable_exit(),
        }
    }

    /// Sends `sig` to the process group, while the leader has not been reaped
    /// (after that its ID may belong to someone else).
    fn signal_group(&self, sig: libc::c_int) {
        if self.exit.borrow().is_some() || self.pid == 0 {
            return;
        }
        let Ok(pgid) = libc::pid_t::try_from(self.pid) else { return };
        // SAFETY: kill(2) takes plain integers and has no memory effects; a
        // negative pid addresses the process group the child leads.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }

    /// Stops the process: SIGTERM to its group, up to `grace` for it to end,
    /// then SIGKILL. Waits until its output is read to the end (briefly).
    pub async fn terminate(&self, grace: Duration) -> Termination {
        if let Some(exit) = self.exit() {
            self.drain().await;
            return Termination {
                already_exited: true,
                exited_on_sigterm: false,
                killed: false,
                after: Duration::ZERO,
                exit: Some(exit),
            };
        }
        let t0 = Instant::now();
        self.signal_group(libc::SIGTERM);
        let mut killed = false;
        let exit = match tokio::time::timeout(grace, self.exited()).await {
            Ok(v) => v,
            Err(_) => {
                killed = true;
                self.signal_group(libc::SIGKILL);
                self.exited().await
            }
        };
        let after = t0.elapsed();
        self.drain().await;
        Termination { already_exited: false, exited_on_sigterm: !killed, killed, after, exit: Some(exit) }
    }

    /// Waits (briefly) for the output readers to reach the end of the pipes.
    async fn drain(&self) {
        for r in &self.readers {
            if r.is_finished() {
                continue;
            }
            // A helper that inherited the pipes may keep them open; do not wait for it.
            let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
            while !r.is_finished() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// What a stream printed so far.
    pub fn output(&self, stream: Stream) -> OutputView {
        let (tail, file) = match stream {
            Stream::Stdout => (&self.stdout, &self.files[0]),
            Stream::Stderr => (&self.stderr, &self.files[1]),
        };
        let t = tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let bytes: Vec<u8> = t.buf.iter().copied().collect();
        let truncated = t.total > bytes.len() as u64;
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if truncated && let Some(nl) = text.find('\n') {
            text.drain(..=nl);
        }
        OutputView { bytes: t.total, tail: text, truncated, file: file.as_ref().map(|p| p.display().to_string()) }
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        // Whatever happened (an error, a panic, a dropped future): the plugin
        // and its helpers do not outlive dpctl's interest in them.
        self.signal_group(libc::SIGKILL);
        for r in &self.readers {
            r.abort();
        }
    }
}

/// Makes dpctl the reaper of its orphaned descendants
/// (`PR_SET_CHILD_SUBREAPER`): a plugin that daemonises (forks, `setsid`,
/// and lets its parent exit) then stays dpctl's child, where
/// [`kill_survivors`] finds it. Only `dpctl smoke` (its own process) calls this.
pub fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers and only
    // changes how this process's orphaned descendants are reparented.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "cannot become a child subreaper");
    }
}

/// Kills (SIGKILL) and reaps the processes the plugin left behind: children
/// of dpctl (orphans reparented to it, see [`become_subreaper`]) in another
/// session than dpctl's, i.e. ones that called `setsid`. Returns them as
/// `PID (NAME)`.
pub fn kill_survivors() -> Vec<String> {
    let me = std::process::id();
    // SAFETY: getsid(0) only reads this process's session id.
    let my_sid = unsafe { libc::getsid(0) };
    let mut found = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return found };
    for entry in rd.filter_map(std::result::Result::ok) {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let name = stat.get(open + 1..close).unwrap_or("?").to_string();
        let mut rest = stat.get(close + 1..).unwrap_or("").split_whitespace();
        let state = rest.next();
        let ppid = rest.next().and_then(|v| v.parse::<u32>().ok());
        let sid = rest.nth(1).and_then(|v| v.parse::<i32>().ok());
        if ppid != Some(me) || sid == Some(my_sid) || state == Some("Z") {
            continue;
        }
        // SAFETY: sending SIGKILL to a child of ours by pid, then reaping it.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        found.push(format!("{pid} ({name})"));
    }
    found.sort();
    found
}

fn unreachable_exit() -> ExitView {
    ExitView { code: None, signal: None, text: "ended (status unknown)".into() }
}

/// A spawn error in words a user can act on.
fn spawn_error(program: &str, e: std::io::Error) -> Error {
    let why = match e.kind() {
        std::io::ErrorKind::NotFound => {
            if Path::new(program).components().count() > 1 {
                format!("{program}: no such file (is the path right, relative to the current directory?)")
            } else {
                format!("{program}: command not found in PATH")
            }
        }
        std::io::ErrorKind::PermissionDenied => format!("{program}: permission denied (is it executable?)"),
        _ => format!("{program}: {e}"),
    };
    Error::invalid("COMMAND", format!("cannot start the plugin: {why}"))
}

/// Reads one stream to its end: into the tail, the log file and the line channel.
async fn capture(
    mut r: impl AsyncRead + Unpin,
    stream: Stream,
    tail: Arc<Mutex<Tail>>,
    mut file: Option<tokio::fs::File>,
    lines: Option<mpsc::UnboundedSender<(Stream, String)>>,
) {
    let mut buf = vec![0u8; 8192];
    let mut partial: Vec<u8> = Vec::new();
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(chunk);
        if let Some(f) = file.as_mut()
            && f.write_all(chunk).await.is_err()
        {
            file = None;
        }
        if let Some(tx) = &lines {
            partial.extend_from_slice(chunk);
            while let Some(pos) = partial.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = partial.drain(..=pos).collect();
                let _ = tx.send((stream, String::from_utf8_lossy(&line[..line.len() - 1]).into_owned()));
            }
            // A line longer than 64 KiB is passed on in pieces.
            if partial.len() > 64 * 1024 {
                let _ = tx.send((stream, String::from_utf8_lossy(&partial).into_owned()));
                partial.clear();
            }
        }
    }
    if let (Some(tx), false) = (&lines, partial.is_empty()) {
        let _ = tx.send((stream, String::from_utf8_lossy(&partial).into_owned()));
    }
    if let Some(mut f) = file {
        let _ = f.flush().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_bytes() {
        let mut t = Tail { total: 0, keep: 5, buf: VecDeque::new() };
        t.push(b"abc");
        t.push(b"defg");
        assert_eq!(t.buf.iter().copied().collect::<Vec<_>>(), b"cdefg");
        t.push(b"0123456789");
        assert_eq!(t.buf.iter().copied().collect::<Vec<_>>(), b"56789");
        assert_eq!(t.total, 17);
    }

    #[tokio::test]
    async fn output_is_captured_and_a_stubborn_process_is_killed() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let launch = Launch {
            command: vec!["sh".into(), "-c".into(), "trap '' TERM; echo hello; echo oops >&2; sleep 30".into()],
            env: vec![],
            keep_bytes: 1024,
            log_dir: None,
            log_name: "launch".into(),
            lines: Some(tx),
        };
        let p = PluginProcess::spawn(launch).await.unwrap();
        let mut seen = Vec::new();
        while seen.len() < 2 {
            let line = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.unwrap().unwrap();
            seen.push(line);
        }
        seen.sort_by_key(|(s, _)| s.as_str());
        assert_eq!(seen, [(Stream::Stderr, "oops".to_string()), (Stream::Stdout, "hello".to_string())]);
        let t = p.terminate(Duration::from_millis(300)).await;
        assert!(t.killed && !t.exited_on_sigterm, "{t:?}");
        assert_eq!(t.exit.unwrap().signal, Some(libc::SIGKILL));
        assert_eq!(p.output(Stream::Stdout).tail, "hello\n");
        assert_eq!(p.output(Stream::Stderr).tail, "oops\n");
    }

    #[tokio::test]
    async fn a_missing_command_is_explained() {
        let launch = Launch {
            command: vec!["./no-such-plugin".into()],
            env: vec![],
            keep_bytes: 16,
            log_dir: None,
            log_name: "launch".into(),
            lines: None,
        };
        let e = PluginProcess::spawn(launch).await.unwrap_err().to_string();
        assert!(e.contains("./no-such-plugin: no such file"), "{e}");
    }
}
