//! The kubelet release the sim plays: [`KubeletVersion`] and its table of
//! behaviours live in the ground module [`crate::kubelet_version`] (so that
//! `doctor` and the scenarios judge by the same table without importing the
//! simulator); this path re-exports them for the sim.

pub use crate::kubelet_version::*;

#[cfg(test)]
mod tests {
    use super::*;

    /// The sim's servers take the played release's rules when it is set:
    /// docs/kubelet-versions.md §7 (v1 checkpoints read 1.26-1.30) and §8
    /// (PodResources `Get` exists from 1.27 and is on by default from 1.34;
    /// the rate limit from 1.27).
    #[test]
    fn the_sims_servers_follow_each_release_1_26_to_1_37() {
        use crate::checkpoint::LegacyFormat;
        for minor in 26..=37 {
            let mut c = crate::kubelet_sim::SimConfig::new("/tmp/dpctl-sim");
            c.set_kubelet_version(KubeletVersion::Release(minor));
            let v1 = if minor <= 30 { LegacyFormat::Accept } else { LegacyFormat::Refuse };
            assert_eq!(c.checkpoint_v1, v1, "1.{minor}");
            assert_eq!(c.podresources.get_exists, minor >= 27, "1.{minor}");
            assert_eq!(c.podresources.get_enabled, minor >= 34, "1.{minor}");
            assert_eq!(c.podresources.rate_limit.is_some(), minor >= 27, "1.{minor}");
        }
    }
}
