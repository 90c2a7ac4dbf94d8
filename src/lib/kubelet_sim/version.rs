//! The kubelet release the sim plays: [`KubeletVersion`] and its table of
//! behaviours live in the ground module [`crate::kubelet_version`] (so that
//! `doctor` and the scenarios judge by the same table without importing the
//! simulator); this path re-exports them, and adds the start-up check that
//! needs the Topology Manager's options.

pub use crate::kubelet_version::*;

use crate::error::{Error, Result};

impl KubeletVersion {
    /// docs/topology.md §2.6: refuses the `--topology-manager-policy-options`
    /// this release's kubelet refuses at startup with its default feature
    /// gates. `max-allowable-numa-nodes` exists from 1.31 (KEP-4622, beta),
    /// so earlier releases know no such option; `prefer-closest-numa-nodes`
    /// is alpha in 1.26–1.27 (KEP-3545; alpha gates are off by default) and
    /// beta from 1.28. The alpha refusal's wording is dpctl's (unverified).
    pub fn check_policy_options(self, options: &crate::topology::PolicyOptions) -> Result<()> {
        let place = "--topology-manager-policy-options";
        let hint = |since: u8| format!("hint: kubelet {self} refuses it at startup; it is available from 1.{since}");
        if options.given.contains("max-allowable-numa-nodes") && !self.knows_max_allowable_numa_nodes() {
            return Err(Error::invalid(
                place,
                format!("unknown Topology Manager Policy option: \"max-allowable-numa-nodes\"; {}", hint(31)),
            ));
        }
        if options.given.contains("prefer-closest-numa-nodes") && !self.allows_prefer_closest_numa_nodes() {
            return Err(Error::invalid(
                place,
                format!(
                    "\"prefer-closest-numa-nodes\" is an alpha-level option in kubelet {self} and alpha options \
                     are off by default (feature gate TopologyManagerPolicyAlphaOptions); {}",
                    hint(28)
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_options_follow_each_release() {
        // docs/topology.md §2.6: max-allowable-numa-nodes beta from 1.31 (absent
        // before), prefer-closest-numa-nodes alpha 1.26-1.27, beta 1.28.
        let max: crate::topology::PolicyOptions = "max-allowable-numa-nodes=16".parse().unwrap();
        let e = KubeletVersion::Release(30).check_policy_options(&max).unwrap_err().to_string();
        assert!(e.contains("unknown Topology Manager Policy option: \"max-allowable-numa-nodes\""), "{e}");
        assert!(e.contains("available from 1.31"), "{e}");
        KubeletVersion::Release(31).check_policy_options(&max).unwrap();
        KubeletVersion::Master.check_policy_options(&max).unwrap();
        let closest: crate::topology::PolicyOptions = "prefer-closest-numa-nodes=true".parse().unwrap();
        let e = KubeletVersion::Release(27).check_policy_options(&closest).unwrap_err().to_string();
        assert!(e.contains("alpha-level option in kubelet 1.27"), "{e}");
        KubeletVersion::Release(28).check_policy_options(&closest).unwrap();
        // Options not given are never refused (the defaults apply in every release).
        KubeletVersion::Release(26).check_policy_options(&Default::default()).unwrap();
    }

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
