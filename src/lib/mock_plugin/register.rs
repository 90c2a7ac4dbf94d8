//! Serving and registering, and doing both again after a kubelet restart.
//!
//! Each resource has a supervisor task. It serves the socket first, then
//! calls Register on `<dir>/kubelet.sock` (retrying with backoff while the
//! kubelet is missing or refusing). It watches the directory (inotify, with
//! a slow poll as a safety net): when its own socket is deleted it serves a
//! new one at once, and when kubelet.sock is created anew it registers again.
//! A rejection stops the resource and is reported as fatal.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

use super::config::Faults;
use super::events::{EventKind, RegisterView};
use super::service::{MockService, ms};
use super::state::Resource;
use crate::error::{Error, Result};
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::proto::deviceplugin::v1beta1::registration_client::RegistrationClient;
use crate::transport::{self, BindOptions, Listener};

/// First retry delay after a failed Register.
const BACKOFF_START: Duration = Duration::from_millis(100);
/// Longest retry delay (kubelet.sock appearing cuts any wait short).
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Safety-net check of the sockets, in case a filesystem event is missed.
const POLL: Duration = Duration::from_millis(500);
/// How long a stopping generation may take to let its connections go.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// How the crash-after-restart fault ends the process: Go's runtime panic
/// when an update goes to the channel the plugin closed after the old
/// stream's Send failed (a Go panic exits with code 2, as dpctl's error does).
pub const CRASH_TEXT: &str = "panic: send on closed channel (the crash-after-restart fault: the old ListAndWatch \
     stream's Send failed after the kubelet restart, the plugin closed its update channel, and the next update \
     panicked)\n\ngoroutine 42 [running]:\nmain.(*plugin).sendUpdate(...)";

/// A change in the watched directory.
#[derive(Debug, Clone)]
pub enum DirEvent {
    /// A file appeared (created or moved in).
    Created(String),
    /// A file disappeared (deleted or moved away).
    Removed(String),
    /// Something else happened (or events were lost): check everything.
    Rescan,
}

/// Starts watching `dir`; events go to `tx`. `None` when inotify is not
/// available (the supervisors' poll still notices changes).
pub fn watch_dir(dir: &Path, tx: broadcast::Sender<DirEvent>) -> Option<notify::RecommendedWatcher> {
    use notify::event::{ModifyKind, RenameMode};
    use notify::{EventKind as K, RecursiveMode, Watcher};
    let name_of = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let handler = move |res: notify::Result<notify::Event>| {
        let Ok(ev) = res else {
            let _ = tx.send(DirEvent::Rescan);
            return;
        };
        match ev.kind {
            K::Create(_) | K::Modify(ModifyKind::Name(RenameMode::To)) => {
                ev.paths.iter().filter_map(|p| name_of(p)).for_each(|n| {
                    let _ = tx.send(DirEvent::Created(n));
                });
            }
            K::Remove(_) | K::Modify(ModifyKind::Name(RenameMode::From)) => {
                ev.paths.iter().filter_map(|p| name_of(p)).for_each(|n| {
                    let _ = tx.send(DirEvent::Removed(n));
                });
            }
            K::Modify(ModifyKind::Name(RenameMode::Both)) if ev.paths.len() == 2 => {
                if let Some(n) = name_of(&ev.paths[0]) {
                    let _ = tx.send(DirEvent::Removed(n));
                }
                if let Some(n) = name_of(&ev.paths[1]) {
                    let _ = tx.send(DirEvent::Created(n));
                }
            }
            K::Access(_) | K::Modify(ModifyKind::Data(_) | ModifyKind::Metadata(_)) => {}
            _ => {
                let _ = tx.send(DirEvent::Rescan);
            }
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch the directory; falling back to polling");
            return None;
        }
    };
    if let Err(e) = watcher.watch(dir, RecursiveMode::NonRecursive) {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the directory; falling back to polling");
        return None;
    }
    Some(watcher)
}

/// What tells one socket file from its replacement: device, inode and
/// change time. The inode alone does not: ext4 hands a socket re-created at
/// once the inode just freed (6 restarts in 10 went unnoticed that way). The
/// change time, coarse as it is, still separates most re-creations; the
/// directory's Remove and Create events do the rest.
pub type Identity = (u64, u64, i64, i64);

/// The [`Identity`] of the file at `path`, if any.
pub fn inode(path: &Path) -> Option<Identity> {
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))
}

/// Settings shared by the supervisors.
#[derive(Debug, Clone)]
pub struct Shared {
    /// The device-plugin directory.
    pub dir: PathBuf,
    /// Register on kubelet.sock at all.
    pub register: bool,
    /// Deadline of one Register call.
    pub register_timeout: Duration,
    /// Take over live sockets.
    pub force: bool,
}

impl Shared {
    fn kubelet_socket(&self) -> PathBuf {
        crate::paths::kubelet_socket(&self.dir)
    }

    fn bind_options(&self) -> BindOptions {
        BindOptions { force: self.force, force_flag: "--force", ..BindOptions::default() }
    }
}

/// One serving generation: the server task and how to stop it.
struct Generation {
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<()>>,
    inode: Option<Identity>,
}

impl Generation {
    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(STOP_WAIT, self.task).await;
    }
}

/// Binds the resource's socket (before anything is spawned, so that start-up
/// fails cleanly).
pub async fn bind(res: &Resource, shared: &Shared) -> Result<Listener> {
    transport::bind(&res.socket, &shared.bind_options()).await
}

/// Why a Register attempt failed.
enum Failure {
    /// Worth retrying: the kubelet is missing, refusing, or went away.
    Retry(String),
    /// The kubelet said no.
    Rejected(String),
}

/// The supervisor of one resource.
pub struct Supervisor {
    res: Arc<Resource>,
    shared: Arc<Shared>,
    faults: Faults,
    fs: broadcast::Receiver<DirEvent>,
    stop: watch::Receiver<bool>,
    fatal: mpsc::UnboundedSender<Error>,
    generation: Option<Generation>,
    generations: u32,
    /// kubelet.sock's identity when Register last succeeded.
    registered_with: Option<Identity>,
    /// When that successful Register began (wall clock, as file times are):
    /// a kubelet.sock of that identity changed before it is the very socket
    /// registered with, so a Create or Remove event about it that arrives
    /// late (the directory's events lag behind the files) is not a new
    /// kubelet. From 1.37 a second Register there is refused as `device
    /// plugin already connected` (docs/kubelet-versions.md §2).
    registered_since: Option<std::time::SystemTime>,
    /// kubelet.sock was deleted since Register last succeeded: the next
    /// kubelet.sock created is a new kubelet, whatever its inode.
    kubelet_gone: bool,
    need_serve: bool,
    need_register: bool,
    /// What caused the pending (re-)registration, and when.
    cause: (Instant, String),
    /// Why the socket is to be served again.
    serve_reason: String,
    attempts: u32,
    backoff: Duration,
    retry_at: Option<tokio::time::Instant>,
    /// The register-twice fault has made its second call.
    registered_twice: bool,
    /// The kubelet restart being registered with is counted already.
    restart_noted: bool,
}

impl Supervisor {
    /// A supervisor; `listener` is the already-bound socket (absent with the
    /// register-before-serving fault, which serves only after Register).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        res: Arc<Resource>,
        shared: Arc<Shared>,
        faults: Faults,
        fs: broadcast::Receiver<DirEvent>,
        stop: watch::Receiver<bool>,
        fatal: mpsc::UnboundedSender<Error>,
        listener: Option<Listener>,
        started: Instant,
    ) -> Self {
        let need_register = shared.register;
        let mut s = Supervisor {
            res,
            shared,
            faults,
            fs,
            stop,
            fatal,
            generation: None,
            generations: 0,
            registered_with: None,
            registered_since: None,
            kubelet_gone: false,
            need_serve: listener.is_none(),
            need_register,
            cause: (started, "start".into()),
            serve_reason: "start".into(),
            attempts: 0,
            backoff: BACKOFF_START,
            retry_at: None,
            registered_twice: false,
            restart_noted: false,
        };
        if let Some(l) = listener {
            s.spawn_generation(l, "start");
        }
        s
    }

    fn spawn_generation(&mut self, listener: Listener, reason: &str) {
        let inode = inode(&self.res.socket);
        let (stop_tx, stop_rx) = watch::channel(false);
        let router = super::wire::router(MockService::new(Arc::clone(&self.res), stop_rx.clone()));
        let mut shutdown = stop_rx;
        let task = tokio::spawn(transport::serve(router, listener, async move {
            let _ = shutdown.wait_for(|s| *s).await;
        }));
        if let Some(old) = self.generation.replace(Generation { stop: stop_tx, task, inode }) {
            // The old socket is gone already; let its connections go in the background.
            tokio::spawn(old.stop());
        }
        self.generations += 1;
        self.need_serve = false;
        self.res.emit(EventKind::Serving {
            socket: self.res.socket.clone(),
            devices: self.res.counts().capacity,
            generation: self.generations,
            reason: reason.to_string(),
        });
    }

    async fn serve_again(&mut self, reason: &str) -> Result<()> {
        let listener = bind(&self.res, &self.shared).await?;
        self.spawn_generation(listener, reason);
        Ok(())
    }

    /// Runs until stopped (or until the kubelet rejects the registration).
    pub async fn run(mut self) {
        let mut poll = tokio::time::interval(POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if *self.stop.borrow() {
                break;
            }
            // A Register call can take long (the kubelet dials back inside
            // it); a stop request must not wait for it.
            let mut stop = self.stop.clone();
            let outcome = tokio::select! {
                r = self.step() => r,
                () = stopped(&mut stop) => break,
            };
            if let Err(e) = outcome {
                self.res.stats.registered.store(false, Ordering::Relaxed);
                if let Some(g) = self.generation.take() {
                    g.stop().await;
                }
                let _ = self.fatal.send(e);
                let _ = self.stop.wait_for(|s| *s).await;
                break;
            }
            let retry_at = self.retry_at;
            tokio::select! {
                () = stopped(&mut self.stop) => break,
                ev = self.fs.recv() => match ev {
                    Ok(ev) => self.on_dir_event(ev),
                    Err(broadcast::error::RecvError::Lagged(_)) => self.rescan(),
                    Err(broadcast::error::RecvError::Closed) => {
                        // No watcher: the poll below keeps working.
                        self.fs = broadcast::channel(1).1;
                    }
                },
                () = sleep_until(retry_at), if retry_at.is_some() => self.retry_at = None,
                _ = poll.tick() => self.rescan(),
            }
        }
        if let Some(g) = self.generation.take() {
            g.stop().await;
        }
        self.res.stats.registered.store(false, Ordering::Relaxed);
        self.res.emit(EventKind::Stopped {});
    }

    /// Does what is pending: serve, register (in the configured order).
    async fn step(&mut self) -> Result<()> {
        let before_serving = self.faults.register_before_serving;
        if self.need_serve && !(before_serving && self.need_register && self.shared.register) {
            let reason = self.serve_reason.clone();
            self.serve_again(&reason).await?;
        }
        if self.need_register && self.shared.register && self.retry_at.is_none() {
            self.attempts += 1;
            self.kubelet_restarted();
            match self.register_once().await {
                Ok((with, since)) => {
                    self.restart_noted = false;
                    self.need_register = false;
                    self.registered_with = with;
                    self.registered_since = Some(since);
                    self.kubelet_gone = false;
                    self.backoff = BACKOFF_START;
                    if self.faults.register_twice && !self.registered_twice {
                        self.registered_twice = true;
                        if let Err(Failure::Rejected(message) | Failure::Retry(message)) = self.register_once().await {
                            self.res.emit(EventKind::Rejected {
                                kubelet_socket: self.shared.kubelet_socket(),
                                request: self.register_view(),
                                message,
                            });
                        }
                    }
                    if self.need_serve {
                        let reason = format!("{} (after registering)", self.serve_reason);
                        self.serve_again(&reason).await?;
                    }
                }
                Err(Failure::Retry(error)) if self.faults.register_once => {
                    // The fault: one try at start, no retry.
                    return Err(Error::invalid(
                        self.res.name.clone(),
                        format!(
                            "Register on {} failed and --register-once gives up: {error}",
                            self.shared.kubelet_socket().display()
                        ),
                    ));
                }
                Err(Failure::Retry(error)) => {
                    let wait = self.backoff;
                    self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                    self.retry_at = Some(crate::duration::deadline(wait));
                    self.res.emit(EventKind::RegisterRetry {
                        kubelet_socket: self.shared.kubelet_socket(),
                        attempt: self.attempts,
                        error,
                        retry_in_ms: crate::text::millis(wait),
                    });
                }
                Err(Failure::Rejected(message)) => {
                    self.res.emit(EventKind::Rejected {
                        kubelet_socket: self.shared.kubelet_socket(),
                        request: self.register_view(),
                        message: message.clone(),
                    });
                    return Err(Error::Rejected {
                        resource: self.res.name.clone(),
                        path: self.shared.kubelet_socket(),
                        message,
                    });
                }
            }
        }
        Ok(())
    }

    fn register_view(&self) -> RegisterView {
        let o = self.res.options;
        let flip = self.faults.register_options_mismatch;
        RegisterView {
            version: self.faults.register_version.clone().unwrap_or_else(|| dp::VERSION.to_string()),
            endpoint: self.res.endpoint.clone(),
            resource_name: self.faults.register_resource_name.clone().unwrap_or_else(|| self.res.name.clone()),
            pre_start_required: o.pre_start_required ^ flip,
            get_preferred_allocation_available: o.get_preferred_allocation_available ^ flip,
        }
    }

    /// One Register call. Returns kubelet.sock's identity on success, and
    /// the time from which that identity is known to be the one registered
    /// with (see [`Supervisor::registered_since`]).
    async fn register_once(&mut self) -> std::result::Result<(Option<Identity>, std::time::SystemTime), Failure> {
        let ksock = self.shared.kubelet_socket();
        let since = std::time::SystemTime::now();
        let ino = inode(&ksock);
        let view = self.register_view();
        let timeout = self.shared.register_timeout;
        let channel = transport::connect(&ksock, timeout.min(Duration::from_secs(5)))
            .await
            .map_err(|e| Failure::Retry(e.to_string()))?;
        let mut client = RegistrationClient::new(channel);
        let mut request = tonic::Request::new(dp::RegisterRequest {
            version: view.version.clone(),
            endpoint: view.endpoint.clone(),
            resource_name: view.resource_name.clone(),
            options: Some(dp::DevicePluginOptions {
                pre_start_required: view.pre_start_required,
                get_preferred_allocation_available: view.get_preferred_allocation_available,
            }),
        });
        request.set_timeout(timeout);
        match tokio::time::timeout(timeout, client.register(request)).await {
            Err(_) => {
                Err(Failure::Retry(format!("no answer to Register within {}", crate::text::fmt_duration(timeout))))
            }
            Ok(Err(status)) if retryable(&status) => {
                Err(Failure::Retry(format!("Register failed: {:?}: {}", status.code(), status.message())))
            }
            Ok(Err(status)) => Err(Failure::Rejected(status.message().to_string())),
            Ok(Ok(_)) => {
                let n = self.res.stats.registrations.fetch_add(1, Ordering::Relaxed) + 1;
                self.res.stats.registered.store(true, Ordering::Relaxed);
                self.res.emit(EventKind::Registered {
                    kubelet_socket: ksock.clone(),
                    request: view,
                    registration: n,
                    attempts: self.attempts,
                    reason: self.cause.1.clone(),
                    took_ms: ms(self.cause.0.elapsed()),
                });
                self.attempts = 0;
                // kubelet.sock replaced during the call (a kubelet starting):
                // the call reached the new one (the old one was gone), so
                // the new one is the socket registered with.
                let after = inode(&ksock);
                if after != ino && after.is_some() {
                    return Ok((after, std::time::SystemTime::now()));
                }
                Ok((ino, since))
            }
        }
    }

    /// About to register again (the plugin noticed a new kubelet: its
    /// socket deleted, kubelet.sock created): the lifecycle faults a kubelet
    /// restart sets off, once per restart. Streams opened from now on are
    /// the new kubelet's.
    fn kubelet_restarted(&mut self) {
        if self.restart_noted || self.res.stats.registrations.load(Ordering::Relaxed) == 0 {
            return;
        }
        self.restart_noted = true;
        self.res.stats.kubelet_restarts.fetch_add(1, Ordering::Relaxed);
        if let Some(after) = self.faults.crash_after_restart {
            let (fatal, name) = (self.fatal.clone(), self.res.name.clone());
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                let _ = fatal.send(Error::invalid(name, CRASH_TEXT));
            });
        }
    }

    /// Marks a (re-)registration as needed, now.
    fn trigger(&mut self, reason: &str, serve: bool) {
        if self.faults.no_reregister && self.res.stats.registrations.load(Ordering::Relaxed) > 0 {
            self.res.emit(EventKind::KubeletRestartIgnored { reason: reason.to_string() });
            // Remember it, so that the same restart is reported once.
            self.registered_with = inode(&self.shared.kubelet_socket());
            self.registered_since = Some(std::time::SystemTime::now());
            self.kubelet_gone = false;
            if let Some(g) = &mut self.generation {
                g.inode = inode(&self.res.socket);
            }
            return;
        }
        if !self.need_register && !self.need_serve {
            self.cause = (Instant::now(), reason.to_string());
        }
        if serve {
            self.serve_reason = reason.to_string();
        }
        self.need_serve |= serve;
        self.need_register = true;
        self.res.stats.registered.store(false, Ordering::Relaxed);
        self.retry_at = None;
        self.backoff = BACKOFF_START;
    }

    fn socket_lost(&self) -> bool {
        match &self.generation {
            Some(g) => g.inode.is_none() || inode(&self.res.socket) != g.inode,
            None => false,
        }
    }

    /// The kubelet.sock now in the directory is the one last registered
    /// with: same identity, and changed before that Register began. An event
    /// about kubelet.sock is then stale: registering again would be a second
    /// Register for one kubelet.sock creation.
    fn registered_with_current(&self) -> bool {
        let (Some(with), Some(since)) = (self.registered_with, self.registered_since) else { return false };
        let Some(now) = inode(&self.shared.kubelet_socket()) else { return false };
        let changed = u64::try_from(now.2).ok().map(|secs| {
            std::time::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_nanos(u64::try_from(now.3).unwrap_or(0))
        });
        now == with && changed.is_some_and(|c| c < since)
    }

    fn kubelet_replaced(&self) -> bool {
        self.registered_with.is_some()
            && inode(&self.shared.kubelet_socket()).is_some_and(|i| Some(i) != self.registered_with)
    }

    fn on_dir_event(&mut self, ev: DirEvent) {
        let kubelet_sock = crate::paths::KUBELET_SOCKET_NAME;
        match ev {
            DirEvent::Removed(name) if name == self.res.endpoint && self.socket_lost() => {
                self.trigger("plugin socket deleted", true);
            }
            DirEvent::Removed(name)
                if name == kubelet_sock && self.registered_with.is_some() && !self.registered_with_current() =>
            {
                self.kubelet_gone = true;
            }
            // A kubelet.sock created after the one registered with was
            // deleted is a new kubelet (upstream plugins watch for exactly
            // this Create event): register again even when the file looks
            // the same (same inode, same coarse change time).
            DirEvent::Created(name) if name == kubelet_sock => {
                if self.registered_with_current() {
                    // A late event about the kubelet.sock registered with.
                    self.kubelet_gone = false;
                } else if self.kubelet_gone || self.kubelet_replaced() {
                    self.kubelet_gone = false;
                    let serve = self.socket_lost();
                    self.trigger("kubelet.sock created", serve);
                } else if self.need_register {
                    // Waiting for the first kubelet: try now.
                    self.retry_at = None;
                    self.backoff = BACKOFF_START;
                }
            }
            DirEvent::Rescan => self.rescan(),
            _ => {}
        }
    }

    fn rescan(&mut self) {
        if self.socket_lost() {
            self.trigger("plugin socket deleted", true);
        } else if self.kubelet_replaced() {
            self.trigger("kubelet.sock replaced", false);
        } else if self.kubelet_gone && self.registered_with_current() {
            self.kubelet_gone = false;
        } else if self.kubelet_gone && inode(&self.shared.kubelet_socket()).is_some() {
            // Deleted and back, its Create event lost.
            self.kubelet_gone = false;
            self.trigger("kubelet.sock created", false);
        }
    }
}

/// True when Register failed on the way rather than by the kubelet's answer:
/// the kubelet went away (its connection broke), or the call was cut off.
/// A status made locally from a transport failure carries that failure as
/// its source; a kubelet's rejection does not.
fn retryable(status: &tonic::Status) -> bool {
    matches!(status.code(), tonic::Code::Unavailable | tonic::Code::Cancelled)
        || std::error::Error::source(status).is_some()
}

/// Completes when `stop` turns true (or its sender is gone).
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
