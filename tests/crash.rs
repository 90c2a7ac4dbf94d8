//! Crash consistency of `dpctl kubelet-sim`, with the real binary: the sim
//! is killed (SIGKILL) at a random moment during an admission, during a
//! plugin's re-registration or during `kubelet-sim restart`, started again
//! on the same directory, and asked to admit again. After every kill:
//! no device is in two pods, every admission the sim answered is still
//! there, `dpctl checkpoint verify` passes, a foreign checkpoint is
//! unchanged, and no temporary file of an interrupted write is left.
//!
//! The kubelet writes its checkpoint inside admission, before the answer
//! (`pkg/kubelet/cm/devicemanager/manager.go`, every release the sim plays:
//! 1.26 … master); this pins the sim to the same promise.
//!
//! `DPCTL_CRASH_TRIALS` sets the number of trials (CI: a few), and
//! `DPCTL_CRASH_SEED` replays a run; the seed is printed on failure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{Child, Sandbox, dpctl, dpctl_command};

const RESOURCE: &str = "example.com/gpu";
const DEVICES: usize = 6;

/// A checkpoint a real kubelet could have written (valid checksum; the
/// trailing newline makes its bytes differ from anything the sim writes, so
/// the sim must treat it as foreign and keep its own pods in `.dpctl/`).
const FOREIGN: &str = "{\"Data\":{\"PodDeviceEntries\":null,\"RegisteredDevices\":{}},\"Checksum\":3467439661}\n";

/// xorshift64*: the delays, reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// A second admission in flight (a checkpoint already on disk).
    Admission,
    /// A new plugin process registering, an admission in flight.
    Reregistration,
    /// `dpctl kubelet-sim restart` running, an admission in flight.
    Restart,
}

#[derive(Default, Debug)]
struct Tally {
    trials: usize,
    foreign: usize,
    kills: BTreeMap<&'static str, usize>,
    acknowledged: usize,
    lost: usize,
    doubled: usize,
}

impl Tally {
    fn kill(&mut self, what: &'static str) {
        *self.kills.entry(what).or_default() += 1;
    }
}

/// A sim on `dir`; `again`: after a crash, with `--force`, so that it
/// deletes every socket at start as a kubelet does, and the plugin, seeing
/// its socket gone, registers again. The default release (1.37+, which
/// refuses a second Register on a live (name, socket)): the mock registers
/// once per kubelet.sock creation even when the directory's events about the
/// new kubelet.sock arrive after it has registered with it.
fn sim(dir: &Path, again: bool) -> Child {
    let mut args = vec!["kubelet-sim", "--dir", dir.to_str().unwrap(), "-o", "json", "--no-podresources"];
    if again {
        args.push("--force");
    }
    Child::dpctl(&args)
}

fn mock(dir: &Path) -> Child {
    Child::dpctl(&["mock-plugin", "--dir", dir.to_str().unwrap(), "--resource", RESOURCE, "--devices", "6", "-q"])
}

/// `kubelet-sim admit` in the background: its exit code and stdout.
fn admit(dir: &Path, name: &str) -> tokio::task::JoinHandle<(i32, String)> {
    let mut cmd = tokio::process::Command::from(dpctl_command());
    cmd.args(["kubelet-sim", "admit", "--dir", dir.to_str().unwrap(), "-o", "json", "--name", name]);
    cmd.args(["--allocate", &format!("{RESOURCE}=1")]).stdin(std::process::Stdio::null()).kill_on_drop(true);
    tokio::spawn(async move {
        let out = tokio::time::timeout(Duration::from_secs(20), cmd.output()).await;
        let out = out.expect("admit within 20 s").expect("run admit");
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
    })
}

/// The UID and devices of an acknowledged admission, or `None`.
fn acknowledged(code: i32, stdout: &str) -> Option<(String, Vec<String>)> {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).ok()?;
    if code != 0 || v["admitted"] != true {
        return None;
    }
    let devices = v["containers"][0]["resources"][0]["devices"]
        .as_array()?
        .iter()
        .filter_map(|d| d.as_str().map(String::from))
        .collect();
    Some((v["uid"].as_str()?.to_string(), devices))
}

/// `kubelet-sim status -o json`, polled until the resource has every device
/// (its plugin registered and sent its list), bounded.
async fn ready_status(dir: &Path, what: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let run = dpctl(&["kubelet-sim", "status", "--dir", dir.to_str().unwrap(), "-o", "json"]).await;
        if run.code == 0 {
            let v = run.json();
            let ready = v["resources"]
                .as_array()
                .is_some_and(|rs| rs.iter().any(|r| r["resource"] == RESOURCE && r["allocatable"] == DEVICES));
            if ready {
                return v;
            }
        }
        assert!(Instant::now() < deadline, "{what}: the sim never showed {DEVICES} {RESOURCE}: {}", run.stdout);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every pod's devices of RESOURCE: admitted ones and those known only from
/// the checkpoint (or the sim's own allocations file).
fn holders(status: &serde_json::Value) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for key in ["pods", "restored_pods"] {
        for p in status[key].as_array().into_iter().flatten() {
            let uid = p["uid"].as_str().unwrap_or_default().to_string();
            for c in p["containers"].as_array().into_iter().flatten() {
                let ids = c["devices"][RESOURCE].as_array().into_iter().flatten();
                out.entry(uid.clone()).or_default().extend(ids.filter_map(|d| d.as_str().map(String::from)));
            }
        }
    }
    out
}

/// Devices held by two different pods.
fn doubled(h: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for (uid, ids) in h {
        for id in ids.iter().collect::<BTreeSet<_>>() {
            if let Some(other) = seen.insert(id, uid)
                && other != uid
            {
                out.push(format!("{id} in {other} and {uid}"));
            }
        }
    }
    out
}

/// Temporary files of the sim's writes left in the directory or `.dpctl/`.
fn leftovers(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for d in [dir.to_path_buf(), dir.join(".dpctl")] {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.contains(".dpctl-") && name.ends_with(".tmp") {
                out.push(e.path().display().to_string());
            }
        }
    }
    out
}

/// One trial; returns its failures (empty when it held).
// long: one story told in order (set up, the in-flight operation, the kill, the
// restart, the checks), easier to read whole than split.
async fn trial(n: usize, rng: &mut Rng, seed: u64, tally: &mut Tally) -> Vec<String> {
    let sb = Sandbox::new();
    let dir = sb.path();
    let scenario = [Scenario::Admission, Scenario::Reregistration, Scenario::Restart][n % 3];
    let foreign = n % 4 == 3;
    if foreign {
        std::fs::write(dir.join("kubelet_internal_checkpoint"), FOREIGN).unwrap();
        tally.foreign += 1;
    }
    let mut s = sim(dir, false);
    s.event("started").await;
    let mut plugin = mock(dir);
    let what = format!("seed {seed} trial {n} ({scenario:?}{})", if foreign { ", foreign checkpoint" } else { "" });
    ready_status(dir, &what).await;
    let mut acked: Vec<(String, Vec<String>)> = Vec::new();
    // A first admission, answered before anything happens.
    let (code, out) = admit(dir, "first").await.unwrap();
    acked.push(acknowledged(code, &out).unwrap_or_else(|| panic!("{what}: first admission: {code} {out}")));
    // The window each operation spans here (debug build, loaded machine):
    // an admit process is 20-80 ms, a plugin process starting and
    // registering 50-250 ms.
    let window = match scenario {
        Scenario::Admission => 90,
        Scenario::Reregistration => 250,
        Scenario::Restart => 150,
    };
    // The first trial of each kind kills within 5 ms of the operation's
    // start, so that some kill surely lands inside one however fast this
    // machine runs it; the rest spread over the whole window.
    let delay = Duration::from_millis(if n < 3 { rng.below(5) } else { rng.below(window) });
    let mut restart = None;
    match scenario {
        Scenario::Admission => {}
        Scenario::Reregistration => {
            plugin.kill().await;
            plugin = mock(dir);
        }
        Scenario::Restart => {
            let mut cmd = tokio::process::Command::from(dpctl_command());
            cmd.args(["kubelet-sim", "restart", "--dir", dir.to_str().unwrap(), "--wait", "5s", "-o", "json"]);
            cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).kill_on_drop(true);
            restart = Some(cmd.spawn().expect("start restart"));
        }
    }
    let in_flight = admit(dir, "second");
    tokio::time::sleep(delay).await;
    let admitting = !in_flight.is_finished();
    let restarting = restart.as_mut().is_some_and(|r| r.try_wait().ok().flatten().is_none());
    s.kill().await;
    let events = s.rest().await;
    // The first plugin's first list is one snapshot; the new one's is the second.
    let snapshots = events.iter().filter(|l| l.contains("\"event\":\"snapshot\"") && l.contains(RESOURCE)).count();
    let reregistering = scenario == Scenario::Reregistration && snapshots < 2;
    if admitting {
        tally.kill("during admission");
    }
    if reregistering {
        tally.kill("during re-registration");
    }
    if restarting {
        tally.kill("during restart");
    }
    let (code, out) = in_flight.await.unwrap();
    if let Some(a) = acknowledged(code, &out) {
        acked.push(a);
    }
    if let Some(mut r) = restart {
        let _ = r.kill().await;
    }
    // The same directory, a new sim; the plugin registers again by itself.
    let mut s = sim(dir, true);
    s.event("started").await;
    let what = format!("{what}, kill after {delay:?}");
    let status = ready_status(dir, &what).await;
    let mut failures = Vec::new();
    let h = holders(&status);
    for (uid, devices) in &acked {
        tally.acknowledged += 1;
        if h.get(uid).is_none_or(|d| d.iter().collect::<BTreeSet<_>>() != devices.iter().collect()) {
            tally.lost += 1;
            failures.push(format!("{what}: acknowledged pod {uid} ({devices:?}) lost after the restart: {h:?}"));
        }
    }
    let (code, out) = admit(dir, "third").await.unwrap();
    match acknowledged(code, &out) {
        None => failures.push(format!("{what}: the admission after the restart failed: {code} {out}")),
        Some((uid, devices)) => {
            for (held_by, held) in &acked {
                let again: Vec<&String> = devices.iter().filter(|d| held.contains(d)).collect();
                if !again.is_empty() {
                    tally.doubled += again.len();
                    failures.push(format!("{what}: {again:?} of acknowledged pod {held_by} given to {uid} too"));
                }
            }
        }
    }
    let after = dpctl(&["kubelet-sim", "status", "--dir", dir.to_str().unwrap(), "-o", "json"]).await;
    let twice = doubled(&holders(&after.json()));
    if !twice.is_empty() {
        tally.doubled += twice.len();
        failures.push(format!("{what}: a device in two pods: {twice:?}"));
    }
    s.stop().await;
    plugin.stop().await;
    // Checked once the sim has stopped: while it runs, a write of its own
    // (after a device list) may have its temporary file open.
    let left = leftovers(dir);
    if !left.is_empty() {
        failures.push(format!("{what}: temporary files left after the restart: {left:?}"));
    }
    let verify = dpctl(&["checkpoint", "verify", "--dir", dir.to_str().unwrap()]).await;
    if verify.code != 0 {
        failures.push(format!("{what}: checkpoint verify: {} {}", verify.stdout, verify.stderr));
    }
    if foreign && std::fs::read_to_string(dir.join("kubelet_internal_checkpoint")).ok().as_deref() != Some(FOREIGN) {
        failures.push(format!("{what}: the foreign checkpoint was changed"));
    }
    tally.trials += 1;
    failures
}

/// See the module docs. Every release: the write inside admission is the
/// kubelet's on 1.26 … master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_no_acknowledged_admission_and_doubles_no_device() {
    let trials: usize = std::env::var("DPCTL_CRASH_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(9);
    let seed: u64 = std::env::var("DPCTL_CRASH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1
    });
    let mut rng = Rng(seed);
    let mut tally = Tally::default();
    let mut failures = Vec::new();
    for n in 0..trials {
        failures.extend(trial(n, &mut rng, seed, &mut tally).await);
    }
    eprintln!("crash: seed {seed}: {tally:?}");
    assert!(
        failures.is_empty(),
        "DPCTL_CRASH_SEED={seed} DPCTL_CRASH_TRIALS={trials} replays this run; {tally:?}\n{}",
        failures.join("\n")
    );
    assert!(tally.kills.values().sum::<usize>() > 0 || trials < 3, "no kill landed inside an operation: {tally:?}");
}
