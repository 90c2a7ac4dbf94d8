//! The DRA manager's release rules that its own tests do not name: which
//! health service each release would stream from (docs/dra.md §2). Kept
//! apart from `dra.rs` so that the state machine's file stays the one place
//! its transitions change.

use super::dra::DraState;
use crate::dra::HealthApi;
use crate::kubelet_version::KubeletVersion;

fn health(minor: u8, advertised: &[&str]) -> Option<HealthApi> {
    let mut d = DraState::new(KubeletVersion::Release(minor));
    let supported: Vec<String> = advertised.iter().map(|s| (*s).to_string()).collect();
    let inst = d.register("gpu.example.com", "/p/dra.sock", "/p/dra.sock".into(), "/r/reg.sock".into(), &supported);
    inst.expect("a valid registration").health
}

/// 1.34-1.36 open the v1alpha1 health stream whether or not the driver
/// advertises it (kubernetes/kubernetes#141855); 1.37 picks v1 before
/// v1alpha1 among the advertised ones, and none when none is advertised.
#[test]
fn health_service_v1alpha1_always_1_34_to_1_36_advertised_only_from_1_37() {
    let node_only = ["v1.DRAPlugin"];
    let both = ["v1.DRAPlugin", "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"];
    let alpha = ["v1.DRAPlugin", "v1alpha1.DRAResourceHealth"];
    for minor in 34..=36 {
        assert_eq!(health(minor, &node_only), Some(HealthApi::V1alpha1), "1.{minor}");
        assert_eq!(health(minor, &both), Some(HealthApi::V1alpha1), "1.{minor}");
    }
    assert_eq!(health(37, &node_only), None);
    assert_eq!(health(37, &both), Some(HealthApi::V1));
    assert_eq!(health(37, &alpha), Some(HealthApi::V1alpha1));
}
