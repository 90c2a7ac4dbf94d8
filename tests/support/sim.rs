//! An in-process kubelet-sim for tests: start one on a directory, wait for
//! an event, wait for a resource's counts; a pod manifest with a sidecar.

use std::path::Path;
use std::time::Duration;

use dpctl::kubelet_sim::{EventKind, KubeletSim, SimConfig, SimEvent, SimHandle};
use tokio::sync::broadcast;

use super::within;

/// A sim on `dir` with a short dial timeout, after `tune`.
pub async fn start(dir: &Path, tune: impl FnOnce(&mut SimConfig)) -> SimHandle {
    let mut c = SimConfig::new(dir);
    c.dial_timeout = Duration::from_millis(400);
    tune(&mut c);
    KubeletSim::start(c).await.expect("start the sim")
}

/// The next event matching `pred` (bounded).
pub async fn next(rx: &mut broadcast::Receiver<SimEvent>, what: &str, pred: impl Fn(&EventKind) -> bool) -> EventKind {
    within(what, async {
        loop {
            let ev = rx.recv().await.expect("event stream");
            if pred(&ev.kind) {
                return ev.kind;
            }
        }
    })
    .await
}

/// Waits until `resource` has exactly `capacity` and `allocatable` devices.
pub async fn counts_are(sim: &SimHandle, resource: &str, capacity: usize, allocatable: usize) {
    let r = resource.to_string();
    sim.wait_for_counts(
        move |c| c.get(&r).is_some_and(|c| c.capacity == capacity && c.allocatable == allocatable),
        Duration::from_secs(10),
    )
    .await
    .unwrap_or_else(|e| panic!("{resource} never reached {capacity}/{allocatable}: {e}; now {:?}", sim.counts()));
}

/// A pod manifest (YAML) with `metadata`, an init container, a restartable
/// init container (a sidecar) and one regular container, named by `names`:
/// each init container asks 1 `resource`, the regular one `main_limits`.
pub fn sidecar_pod(metadata: &str, resource: &str, names: [&str; 3], main_limits: &str) -> String {
    let [init, sidecar, main] = names;
    format!(
        "apiVersion: v1
kind: Pod
metadata: {metadata}
spec:
  initContainers:
  - name: {init}
    resources: {{limits: {{{resource}: 1}}}}
  - name: {sidecar}
    restartPolicy: Always
    resources: {{limits: {{{resource}: 1}}}}
  containers:
  - name: {main}
    resources: {{limits: {main_limits}}}
"
    )
}
