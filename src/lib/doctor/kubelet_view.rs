//! The kubelet's view against the plugins' own: what each live plugin
//! reports (doctor's own ListAndWatch) beside what the kubelet says it can
//! hand out (PodResources `GetAllocatableResources`, read-only).
//!
//! The case this exists for: the kubelet's ListAndWatch stream to a plugin
//! ended (the plugin returned from ListAndWatch, or its connection broke).
//! The kubelet then counts every device of that resource as unhealthy and
//! never reopens the stream (pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go,
//! `Run`: one ListAndWatch per registration), so node allocatable is 0 and
//! admission fails with "no healthy devices present", while the plugin,
//! asked afresh on a new stream, reports every device healthy.

use std::collections::{BTreeMap, BTreeSet};

use super::{Out, Severity};
use crate::checkpoint::report::CheckpointReport;
use crate::model::Device;

/// A plugin doctor reached and what its first ListAndWatch message listed.
#[derive(Debug, Clone)]
pub(super) struct LivePlugin {
    /// The socket (the finding's subject).
    pub subject: String,
    /// The devices it reported.
    pub devices: Vec<Device>,
}

/// The kubelet's allocatable devices: (resource, device ID) pairs, or why
/// they could not be read.
pub(super) type Allocatable = std::result::Result<BTreeSet<(String, String)>, String>;

/// The resource a plugin serves: the one whose allocatable or checkpoint
/// registered IDs share the most device IDs with the plugin's report.
fn resource_of(
    devices: &[Device],
    allocatable: &BTreeSet<(String, String)>,
    checkpoint: Option<&CheckpointReport>,
) -> Option<String> {
    let ids: BTreeSet<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    let mut score: BTreeMap<String, usize> = BTreeMap::new();
    for (r, id) in allocatable {
        if ids.contains(id.as_str()) {
            *score.entry(r.clone()).or_default() += 1;
        }
    }
    if score.is_empty() {
        for (r, reg) in checkpoint.map(|c| &c.registered_devices).into_iter().flatten() {
            let n = reg.iter().flatten().filter(|id| ids.contains(id.as_str())).count();
            if n > 0 {
                score.insert(r.clone(), n);
            }
        }
    }
    score.into_iter().max_by_key(|(_, n)| *n).map(|(r, _)| r)
}

/// One `kubelet-view` finding per live plugin (none when the kubelet's
/// allocatable list could not be read, beyond saying so), and one
/// `allocate` finding saying what doctor can tell about Allocate read-only.
pub(super) fn check(
    plugins: &[LivePlugin],
    allocatable: Option<&Allocatable>,
    checkpoint: Option<&CheckpointReport>,
    out: &mut Out,
) {
    let allocatable = match allocatable {
        None => return, // PodResources did not answer: its own finding says so.
        Some(Err(why)) => {
            if !plugins.is_empty() {
                out.hint(
                    Severity::Warning,
                    ("kubelet-view", "allocatable-unavailable"),
                    "GetAllocatableResources",
                    format!("cannot compare the plugins' devices with the kubelet's: {why}"),
                    "a kubelet before 1.23 (or with KubeletPodResourcesGetAllocatable off) does not serve it; \
                     `kubectl get node NAME -o jsonpath='{.status.allocatable}'` shows the counts",
                );
            }
            return;
        }
        Some(Ok(a)) => a,
    };
    for p in plugins {
        judge_plugin(p, allocatable, checkpoint, out);
    }
}

/// Compares one plugin's healthy devices with the kubelet's allocatable ones.
fn judge_plugin(
    p: &LivePlugin,
    allocatable: &BTreeSet<(String, String)>,
    checkpoint: Option<&CheckpointReport>,
    out: &mut Out,
) {
    let healthy: Vec<&str> = p.devices.iter().filter(|d| d.is_healthy()).map(|d| d.id.as_str()).collect();
    let resource = resource_of(&p.devices, allocatable, checkpoint);
    let listed: BTreeSet<&str> = allocatable
        .iter()
        .filter(|(r, _)| resource.as_deref().is_none_or(|res| res == r))
        .map(|(_, id)| id.as_str())
        .collect();
    let missing: Vec<&str> = healthy.iter().copied().filter(|id| !listed.contains(id)).collect();
    let name = resource.clone().unwrap_or_else(|| "its resource".into());
    let subject = p.subject.clone();
    if healthy.is_empty() {
        out.add(
            Severity::Ok,
            ("kubelet-view", "kubelet-view-no-healthy"),
            subject,
            "the plugin reports no healthy device: nothing to compare",
        );
        return;
    }
    if missing.len() == healthy.len() {
        out.hint(
            Severity::Error,
            ("kubelet-view", "stream-ended"),
            subject.clone(),
            format!(
                "the plugin reports {} of {name}; the kubelet lists none of them as allocatable \
                 (GetAllocatableResources){}",
                crate::text::count(healthy.len(), "healthy device", "healthy devices"),
                if resource.is_some() { "" } else { ", and no checkpoint names the resource" }
            ),
            format!(
                "the kubelet's ListAndWatch stream to this plugin ended (its log says \"ListAndWatch ended \
                 unexpectedly for device plugin\") and the kubelet never reopens it, or the plugin never \
                 registered: pods asking for {name} fail with UnexpectedAdmissionError (no healthy devices \
                 present). Fix: restart the plugin so it registers again, then find why its stream ended \
                 (a plugin must never return from ListAndWatch); `dpctl smoke` reproduces it off the node"
            ),
        );
    } else if !missing.is_empty() {
        out.hint(
            Severity::Warning,
            ("kubelet-view", "kubelet-view-lagging"),
            subject.clone(),
            format!(
                "the plugin reports {} of {name}; the kubelet does not list {} as allocatable",
                crate::text::count(healthy.len(), "healthy device", "healthy devices"),
                missing.join(",")
            ),
            "the kubelet's view lags the plugin's: the plugin sends updates only on its first stream, \
             or the update was lost; run doctor again, and if it stays, restart the plugin",
        );
    } else {
        out.add(
            Severity::Ok,
            ("kubelet-view", "kubelet-view-ok"),
            subject.clone(),
            format!(
                "the kubelet lists {} of {name} as allocatable",
                match healthy.len() {
                    1 => "the 1 healthy device".to_string(),
                    n => format!("all {n} healthy devices"),
                }
            ),
        );
    }
    allocate_note(&subject, resource.as_deref(), &healthy, checkpoint, out);
}

/// What doctor can say about Allocate without calling it: how many stored
/// Allocate answers the checkpoint holds for the resource, and the command
/// that does call it (with its cost).
fn allocate_note(
    subject: &str,
    resource: Option<&str>,
    healthy: &[&str],
    checkpoint: Option<&CheckpointReport>,
    out: &mut Out,
) {
    let Some(resource) = resource else { return };
    let answers = checkpoint
        .map(|c| c.entries.iter().filter(|e| e.resource == resource && e.allocation.is_some()).count())
        .unwrap_or(0);
    let seen = if answers == 0 {
        "the checkpoint holds no Allocate answer for it".to_string()
    } else {
        format!(
            "the checkpoint holds {} for it, so Allocate worked before",
            crate::text::count(answers, "Allocate answer", "Allocate answers")
        )
    };
    // The checkpoint's entries are the devices pods hold: suggest one no pod holds.
    let held: BTreeSet<&str> = checkpoint
        .map(|c| {
            c.entries.iter().filter(|e| e.resource == resource).flat_map(|e| e.devices_per_numa.values().flatten())
        })
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let call = match healthy.iter().find(|id| !held.contains(**id)) {
        Some(id) => format!(
            "to call Allocate yourself: `dpctl plugin call allocate --socket {subject} --devices {id}` ({id} is \
             healthy and no pod holds it in the checkpoint; it allocates for real: the plugin may reserve or reset \
             the device)"
        ),
        None if healthy.is_empty() => "no healthy device to call Allocate with".to_string(),
        None => format!(
            "every healthy device is held by a pod (checkpoint), so none is free to call Allocate with: \
             `dpctl plugin call allocate --socket {subject} --devices ID` would allocate a device a running \
             container uses"
        ),
    };
    out.hint(
        Severity::Ok,
        ("allocate", "allocate-not-called"),
        subject.to_string(),
        format!("Allocate not called (doctor is read-only); {seen}"),
        format!("if pods fail admission, paste the pod's event into `dpctl explain`; {call}"),
    );
}

/// How long after its start a kubelet counts as just restarted: the
/// device manager's grace period for a plugin that went away
/// (k8s.io/kubernetes pkg/kubelet/cm/devicemanager/endpoint.go,
/// `endpointStopGracePeriod`, 5 minutes).
const RESTART_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);

/// The commonest window for `no healthy devices present`: the kubelet
/// restarted and a resource its checkpoint names has not registered again.
/// A kubelet starting reads the checkpoint and gives every resource there an
/// empty healthy set until its plugin registers (k8s.io/kubernetes
/// pkg/kubelet/cm/devicemanager/manager.go, `readCheckpoint`), so pods asking
/// for it fail admission meanwhile. Said when the checkpoint names the
/// resource, no live plugin here serves it and the kubelet lists none of its
/// devices; `kubelet_age` is kubelet.sock's (made when the kubelet started).
pub(super) fn not_registered_again(
    plugins: &[LivePlugin],
    allocatable: Option<&Allocatable>,
    checkpoint: Option<&CheckpointReport>,
    kubelet_age: Option<std::time::Duration>,
    out: &mut Out,
) {
    let (Some(checkpoint), Some(age)) = (checkpoint, kubelet_age) else { return };
    let listed: BTreeSet<(String, String)> = match allocatable {
        Some(Ok(a)) => a.clone(),
        _ => BTreeSet::new(),
    };
    let served: BTreeSet<String> =
        plugins.iter().filter_map(|p| resource_of(&p.devices, &listed, Some(checkpoint))).collect();
    for resource in checkpoint.registered_devices.keys() {
        if served.contains(resource) || listed.iter().any(|(r, _)| r == resource) {
            continue;
        }
        let known = if matches!(allocatable, Some(Ok(_))) {
            ", and the kubelet lists none of its devices as allocatable"
        } else {
            ""
        };
        // Past the restart window the plugin left while the kubelet ran:
        // uninstalled, or crashed, with its socket gone for good.
        let evidence = if age <= RESTART_WINDOW {
            format!(
                "{resource} has not registered again since the kubelet restarted {} s ago (kubelet.sock's age): \
                 the checkpoint names it, no plugin socket in the directory serves it{known}",
                age.as_secs()
            )
        } else {
            format!(
                "{resource} has not registered again: its plugin socket is gone and never came back (uninstalled, \
                 or crashed), while the kubelet has run {} s (kubelet.sock's age, past a restart window of {} s): \
                 the checkpoint names it, no plugin socket in the directory serves it{known}",
                age.as_secs(),
                RESTART_WINDOW.as_secs()
            )
        };
        out.hint(
            Severity::Error,
            ("kubelet-view", "not-registered-again"),
            resource.clone(),
            evidence,
            format!(
                "until its plugin registers, the kubelet has no healthy {resource} device: pods asking for it fail \
                 with UnexpectedAdmissionError (no healthy devices present). A plugin must call Register again \
                 when kubelet.sock is created anew; restart it now. `dpctl smoke` checks that it does (step \
                 kubelet-restart)"
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;

    fn checkpoint() -> CheckpointReport {
        CheckpointReport {
            path: "kubelet_internal_checkpoint".into(),
            format: None,
            stored_checksum: None,
            computed_checksum: None,
            verifies: true,
            meaning: String::new(),
            error: None,
            entries: vec![],
            registered_devices: BTreeMap::from([("example.com/gpu".to_string(), Some(vec!["g0".to_string()]))]),
        }
    }

    fn evidence(age: u64, listed: &[(&str, &str)]) -> Vec<String> {
        let mut out = Out(Vec::new());
        let listed: Allocatable = Ok(listed.iter().map(|(r, d)| (r.to_string(), d.to_string())).collect());
        not_registered_again(&[], Some(&listed), Some(&checkpoint()), Some(Duration::from_secs(age)), &mut out);
        out.0.into_iter().map(|f| f.evidence).collect()
    }

    /// Within five minutes of the kubelet's start: the restart window. Past
    /// it: the plugin left while the kubelet ran (uninstalled, crashed).
    /// A plugin the kubelet lists is fine either way.
    #[test]
    fn the_restart_window_and_an_uninstalled_plugin_are_told_apart() {
        let ev = evidence(12, &[]);
        assert!(ev[0].starts_with("example.com/gpu has not registered again since the kubelet restarted 12 s ago"));
        let ev = evidence(4000, &[]);
        assert!(
            ev[0].starts_with(
                "example.com/gpu has not registered again: its plugin socket is gone and never came back \
                 (uninstalled, or crashed), while the kubelet has run 4000 s"
            ),
            "{ev:?}"
        );
        assert!(evidence(4000, &[("example.com/gpu", "g0")]).is_empty());
        assert!(evidence(12, &[("example.com/gpu", "g0")]).is_empty());
    }
}
