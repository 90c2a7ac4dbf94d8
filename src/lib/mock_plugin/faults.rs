//! Faults at run time: which error or latency applies to the n-th call of an
//! RPC, and the padding that pushes a ListAndWatch message over the
//! kubelet's 4 MiB limit.

use std::sync::OnceLock;
use std::time::Duration;

use prost::Message;

use super::config::{ErrorSpec, Faults, Rpc, RpcFault};
use crate::limits::KUBELET_MAX_RECV;
use crate::proto::deviceplugin::v1beta1 as dp;

/// The faults of one resource, ready to apply.
#[derive(Debug)]
pub struct FaultPlan {
    per_rpc: [Vec<RpcFault>; 7],
    /// The config they came from.
    pub config: Faults,
    padding: OnceLock<Vec<dp::Device>>,
}

/// What to do with one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Wait this long first.
    pub latency: Option<Duration>,
    /// Then fail with this.
    pub error: Option<ErrorSpec>,
}

impl FaultPlan {
    /// Sorts the configured faults by RPC.
    pub fn new(config: &Faults) -> Self {
        let per_rpc = Rpc::ALL.map(|rpc| config.rpc.iter().filter(|f| f.rpc.matches(rpc)).cloned().collect());
        FaultPlan { per_rpc, config: config.clone(), padding: OnceLock::new() }
    }

    /// The verdict for call number `call` (1-based) of `rpc`: latencies add
    /// up, and the first error wins. A fault with neither error nor latency
    /// fails with `internal`.
    pub fn verdict(&self, rpc: Rpc, call: u64) -> Verdict {
        let mut v = Verdict::default();
        for f in &self.per_rpc[rpc.index()] {
            if call <= f.after {
                continue;
            }
            if let Some(l) = f.latency {
                v.latency = Some(v.latency.unwrap_or_default() + l);
            }
            if v.error.is_none() {
                v.error = f.error.clone().or_else(|| {
                    f.latency.is_none().then(|| ErrorSpec {
                        code: tonic::Code::Internal,
                        message: format!(
                            "injected failure: {} fails after {}",
                            rpc.name(),
                            crate::text::count(f.after, "call", "calls")
                        ),
                    })
                });
            }
        }
        v
    }

    /// True when no fault touches `rpc` (the fast path skips the verdict).
    pub fn none_for(&self, rpc: Rpc) -> bool {
        self.per_rpc[rpc.index()].is_empty()
    }

    /// Devices that, added to any ListAndWatch message, make it larger than
    /// the kubelet's receive limit. Built once, on first use.
    pub fn padding(&self) -> &[dp::Device] {
        self.padding.get_or_init(oversize_padding)
    }
}

/// Unhealthy devices with 63-character IDs (the longest the API allows),
/// enough of them to pass 4 MiB by a little.
fn oversize_padding() -> Vec<dp::Device> {
    let target = KUBELET_MAX_RECV + 1024;
    let one = pad_device(0);
    let per = dp::ListAndWatchResponse { devices: vec![one] }.encoded_len();
    let n = target / per + 1;
    (0..n).map(pad_device).collect()
}

fn pad_device(i: usize) -> dp::Device {
    dp::Device { id: format!("oversize-padding-{i:046}"), health: dp::UNHEALTHY.to_string(), topology: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock_plugin::config::RpcSelector;

    #[test]
    fn verdicts_follow_after_and_merge() {
        let faults = Faults {
            rpc: vec![
                RpcFault { rpc: RpcSelector::One(Rpc::Allocate), error: None, latency: None, after: 2 },
                RpcFault { rpc: RpcSelector::Any, error: None, latency: Some(Duration::from_millis(5)), after: 0 },
            ],
            ..Default::default()
        };
        let p = FaultPlan::new(&faults);
        assert_eq!(p.verdict(Rpc::Allocate, 1), Verdict { latency: Some(Duration::from_millis(5)), error: None });
        let v = p.verdict(Rpc::Allocate, 3);
        assert_eq!(v.error.unwrap().code, tonic::Code::Internal);
        assert!(p.verdict(Rpc::ListAndWatch, 9).error.is_none());
        assert!(!p.none_for(Rpc::GetInfo));
    }

    #[test]
    fn padding_is_just_over_the_limit() {
        let pad = oversize_padding();
        let len = dp::ListAndWatchResponse { devices: pad }.encoded_len();
        assert!(len > KUBELET_MAX_RECV && len < KUBELET_MAX_RECV + 4096, "{len}");
    }
}
