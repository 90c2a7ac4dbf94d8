//! The start-up check of the Topology Manager's policy options, per release.

use super::KubeletVersion;
use crate::invalid::{Invalid, Result};
use crate::topology::PolicyOptions;

impl KubeletVersion {
    /// docs/topology.md §2.6: refuses the `--topology-manager-policy-options`
    /// this release's kubelet refuses at startup with its default feature
    /// gates. `max-allowable-numa-nodes` exists from 1.31 (KEP-4622, beta),
    /// so earlier releases know no such option; `prefer-closest-numa-nodes`
    /// is alpha in 1.26–1.27 (KEP-3545; alpha gates are off by default) and
    /// beta from 1.28. The alpha refusal's wording is dpctl's (unverified).
    pub fn check_policy_options(self, options: &PolicyOptions) -> Result<()> {
        let place = "--topology-manager-policy-options";
        let hint = |since: u8| format!("hint: kubelet {self} refuses it at startup; it is available from 1.{since}");
        if options.given.contains("max-allowable-numa-nodes") && !self.at_least(31) {
            return Err(Invalid::new(
                place,
                format!("unknown Topology Manager Policy option: \"max-allowable-numa-nodes\"; {}", hint(31)),
            ));
        }
        if options.given.contains("prefer-closest-numa-nodes") && !self.at_least(28) {
            return Err(Invalid::new(
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
        let max: PolicyOptions = "max-allowable-numa-nodes=16".parse().unwrap();
        let e = KubeletVersion::Release(30).check_policy_options(&max).unwrap_err().to_string();
        assert!(e.contains("unknown Topology Manager Policy option: \"max-allowable-numa-nodes\""), "{e}");
        assert!(e.contains("available from 1.31"), "{e}");
        KubeletVersion::Release(31).check_policy_options(&max).unwrap();
        KubeletVersion::Master.check_policy_options(&max).unwrap();
        let closest: PolicyOptions = "prefer-closest-numa-nodes=true".parse().unwrap();
        let e = KubeletVersion::Release(27).check_policy_options(&closest).unwrap_err().to_string();
        assert!(e.contains("alpha-level option in kubelet 1.27"), "{e}");
        KubeletVersion::Release(28).check_policy_options(&closest).unwrap();
        // Options not given are never refused (the defaults apply in every release).
        KubeletVersion::Release(26).check_policy_options(&Default::default()).unwrap();
    }
}
