//! The programs `conformance/build.sh` builds with Go: the referees
//! (`target/referee/`), the DRA driver on the real kubeletplugin helper
//! (`target/dra-driver/`) and the upstream programs of the smoke corpus
//! (`target/upstream/`: the sample device plugin and the DRA test driver of
//! k8s.io/kubernetes). Without them (no Go toolchain) the tests that need
//! them pass without running, after ONE `SKIPPED` line for the whole suite;
//! under `CI=true` their absence fails the test.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `None` after the suite's one SKIPPED line (the first reason seen); under
/// CI=true a failure naming `area` and `why`.
pub fn skip(area: &str, why: &str) {
    static SKIPPED: OnceLock<()> = OnceLock::new();
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{area}: a Go-built program is unavailable under CI: {why}");
    }
    // Written to the process's stderr, not through `eprintln!`, which libtest
    // captures: a plain `cargo test` shows the line.
    SKIPPED.get_or_init(|| {
        use std::io::Write;
        let line = format!(
            "SKIPPED tests of the Go-built referees, DRA drivers, upstream programs and kubelet: {why} (first seen in {area})\n"
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
    });
}

/// The Go DRA driver (`DPCTL_DRA_DRIVER_DIR`, default `target/dra-driver`),
/// or `None` after the SKIPPED line.
pub fn dra_driver_or_skip(area: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("DPCTL_DRA_DRIVER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/dra-driver"));
    let bin = dir.join("dpctl-dra-driver");
    if bin.is_file() {
        return Some(bin);
    }
    skip(area, &format!("no {} (build it with conformance/build.sh dra-driver)", bin.display()));
    None
}

/// An upstream program `conformance/build.sh upstream` builds
/// (`DPCTL_UPSTREAM_DIR`, default `target/upstream`): `sample-device-plugin`
/// or `dra-test-driver`; `None` after the SKIPPED line.
pub fn upstream_or_skip(area: &str, name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("DPCTL_UPSTREAM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/upstream"));
    let bin = dir.join(name);
    if bin.is_file() {
        return Some(bin);
    }
    skip(area, &format!("no {} (build it with conformance/build.sh upstream)", bin.display()));
    None
}

/// The referee directory (`DPCTL_REFEREE_DIR`, default `target/referee`)
/// when it holds the referee of `release` (`1.37`), else `None` after the
/// SKIPPED line.
pub fn referee_dir_or_skip(area: &str, release: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("DPCTL_REFEREE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/referee"));
    if dir.join(format!("dpctl-referee-{release}")).is_file() {
        return Some(dir);
    }
    skip(
        area,
        &format!("no dpctl-referee-{release} in {} (build it with conformance/build.sh {release})", dir.display()),
    );
    None
}

/// The kubelet release the real-kubelet tests run (`conformance/build.sh kubelet`'s default).
pub const KUBELET_RELEASE: &str = "1.37";

/// The directory of real kubelets (`DPCTL_KUBELET_DIR`, default
/// `target/kubelet`) with `kubelet-1.37` and its images, on a machine that
/// can run them (root, containerd, runc), or `None` after the SKIPPED line.
pub fn kubelet_or_skip(area: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("DPCTL_KUBELET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/kubelet"));
    for file in [format!("kubelet-{KUBELET_RELEASE}"), "pause.tar".into(), "busybox.tar".into()] {
        if !dir.join(&file).is_file() {
            let why = format!("no {} (build it with conformance/build.sh kubelet)", dir.join(file).display());
            skip(area, &why);
            return None;
        }
    }
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip(area, "the real kubelet runs containers: root is needed");
        return None;
    }
    let on_path =
        |p: &str| std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).any(|d| d.join(p).is_file());
    if let Some(missing) = ["containerd", "ctr", "runc"].into_iter().find(|p| !on_path(p)) {
        skip(area, &format!("{missing} is not on PATH (apt-get install containerd runc)"));
        return None;
    }
    Some(dir)
}

/// One node at a time: a run's cgroups and mounts, while it runs, would show
/// in another test's before/after comparison of the host (and two kubelets
/// with containerd on 2 cores slow each other past their deadlines). Every
/// real-kubelet and cluster test holds it: `ONE_NODE.lock().await`, within
/// this process and, through [`ROOT_ENGINE_LOCK`], against every other.
pub static ONE_NODE: OneNode = OneNode(tokio::sync::Mutex::const_new(()));

/// The file whose exclusive `flock` a real kubelet or cluster run holds: the
/// one by-hand runs take with `flock /tmp/dpctl-root-engine.lock <command>`,
/// so two test processes (or a test and a by-hand run) never run a node at
/// once.
pub const ROOT_ENGINE_LOCK: &str = "/tmp/dpctl-root-engine.lock";

/// How long a test waits for another process's node run to end: longer than
/// the slowest such run (a cluster smoke on a loaded 2-core machine).
const ROOT_ENGINE_WAIT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// See [`ONE_NODE`].
pub struct OneNode(tokio::sync::Mutex<()>);

/// Held while a test runs a node: the in-process turn and the file lock
/// (released when the file closes).
pub struct OneNodeGuard {
    _file: std::fs::File,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl OneNode {
    /// Waits for this process's turn, then for [`ROOT_ENGINE_LOCK`]; panics
    /// naming the lock when another process holds it past [`ROOT_ENGINE_WAIT`].
    pub async fn lock(&'static self) -> OneNodeGuard {
        let turn = self.0.lock().await;
        let locking = tokio::task::spawn_blocking(|| {
            let file = root_engine_lock_file()?;
            file.lock()?;
            Ok::<_, std::io::Error>(file)
        });
        match tokio::time::timeout(ROOT_ENGINE_WAIT, locking).await {
            Ok(Ok(Ok(file))) => OneNodeGuard { _file: file, _turn: turn },
            Ok(Ok(Err(e))) => panic!("locking {ROOT_ENGINE_LOCK}: {e}"),
            Ok(Err(e)) => panic!("locking {ROOT_ENGINE_LOCK}: {e}"),
            Err(_) => panic!(
                "another process held {ROOT_ENGINE_LOCK} (a real kubelet or cluster run) for {} min: \
                 see `grep FLOCK /proc/locks`",
                ROOT_ENGINE_WAIT.as_secs() / 60
            ),
        }
    }
}

/// [`ROOT_ENGINE_LOCK`] opened for `flock`: a duplicate of a descriptor this
/// process inherited on it when there is one (`flock /tmp/dpctl-root-engine.lock
/// cargo test ...`: the lock the run already holds is taken again at once, not
/// waited for), else the file itself, created when missing.
fn root_engine_lock_file() -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    for entry in std::fs::read_dir("/proc/self/fd")?.flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if target == Path::new(ROOT_ENGINE_LOCK) {
            // SAFETY: dup takes a descriptor number and returns a new one or -1.
            let dup = unsafe { libc::dup(fd) };
            if dup >= 0 {
                // SAFETY: `dup` is a fresh descriptor this process owns alone.
                return Ok(unsafe { std::fs::File::from_raw_fd(dup) });
            }
        }
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(ROOT_ENGINE_LOCK)
        .or_else(|_| std::fs::File::open(ROOT_ENGINE_LOCK))
}

/// The cluster's binaries for [`KUBELET_RELEASE`] (`DPCTL_CLUSTER_DIR`,
/// default `target/cluster`, then `1.37/`: `conformance/build.sh cluster`)
/// and the kubelet directory ([`kubelet_or_skip`]), or `None` after the
/// SKIPPED line.
pub fn cluster_or_skip(area: &str) -> Option<(PathBuf, PathBuf)> {
    let base = std::env::var_os("DPCTL_CLUSTER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/cluster"));
    let dir = base.join(KUBELET_RELEASE);
    for b in ["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl"] {
        if !dir.join(b).is_file() {
            let why = format!("no {} (build it with conformance/build.sh cluster)", dir.join(b).display());
            skip(area, &why);
            return None;
        }
    }
    let kubelets = kubelet_or_skip(area)?;
    Some((dir, kubelets))
}
