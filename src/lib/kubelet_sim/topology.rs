//! `kubelet-sim admit --dry-run` over the manager's Topology Manager and
//! device choice (`manager/topology.rs`), and the report types.

use std::sync::Arc;

use super::Inner;
use super::outcome::AdmitOutcome;
pub use super::outcome::{NumaIds, Placement, ProviderHintsView, TopologyDecision, TopologyReport};
use super::pod::PodSpec;
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
    if inner.lock().is_admitted(&spec.namespace, &spec.name) {
        return Err(Error::invalid(
            format!("pod {}/{}", spec.namespace, spec.name),
            "is already admitted; delete it first",
        ));
    }
    let started = std::time::Instant::now();
    let uid = spec.uid.get_or_insert_with(|| "dry-run".into()).clone();
    let mut outcome = AdmitOutcome::pending(&spec, uid);
    let result = inner.lock().dry_run(&spec, &mut outcome);
    if let Err(r) = result {
        outcome.reason = Some(r.reason);
        outcome.message = Some(r.message);
    } else {
        outcome.admitted = true;
    }
    outcome.took_ms = crate::text::millis(started.elapsed());
    Ok(outcome)
}
