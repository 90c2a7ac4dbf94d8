//! `kubelet-sim admit --dry-run` over the manager's Topology Manager and
//! device choice (`manager/topology.rs`), and the report types.

use std::sync::Arc;

use super::outcome::AdmitOutcome;
pub use super::outcome::{NumaIds, Placement, ProviderHintsView, TopologyDecision, TopologyReport};
use super::pod::PodSpec;
use super::shell::Inner;
use crate::error::{Error, Result};

/// `kubelet-sim admit --dry-run`: the same hints, verdicts and choices,
/// with no Allocate, GetPreferredAllocation or PreStartContainer call and
/// nothing kept. Where the kubelet would call GetPreferredAllocation, the
/// report shows the request and the sim picks in the plugin's order.
pub(crate) async fn dry_run(inner: &Arc<Inner>, mut spec: PodSpec) -> Result<AdmitOutcome> {
    spec.validate()?;
    let _turn = inner.admission.lock().await;
    if inner.is_stopped() {
        return Err(Error::invalid("kubelet-sim", "the sim has stopped"));
    }
    // What a user asks of a dry run for a pod the sim already admitted is
    // whether one more like it fits now: it is judged as a second pod (its
    // own UID) beside the first, whose devices stay taken.
    let beside_admitted = inner.lock().is_admitted(&spec.namespace, &spec.name);
    if beside_admitted {
        spec.uid = Some("dry-run".into());
    }
    let started = std::time::Instant::now();
    let uid = spec.uid.get_or_insert_with(|| "dry-run".into()).clone();
    let mut outcome = AdmitOutcome::pending(&spec, uid);
    let result = inner.lock().dry_run(&spec, &mut outcome);
    if let Some(t) = outcome.topology.as_mut() {
        t.beside_admitted = beside_admitted;
    }
    if let Err(r) = result {
        outcome.reason = Some(r.reason);
        outcome.message = Some(r.message);
    } else {
        outcome.admitted = true;
    }
    outcome.took_ms = crate::text::millis(started.elapsed());
    Ok(outcome)
}
