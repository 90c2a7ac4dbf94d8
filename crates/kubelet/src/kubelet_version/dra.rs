//! The DRA manager's release rules (docs/dra.md): one row of [`DRA_RULES`]
//! per behaviour that changed between 1.34 and 1.37, each with its first
//! release and a sentence read from the kubelet's code of each release
//! (pkg/kubelet/cm/dra/..., v1.34.4, v1.35.4, v1.36.3, v1.37.2), and one
//! predicate of [`KubeletVersion`] per row. `kubelet-sim --help` prints the
//! table; the simulator asks the predicates.

use super::KubeletVersion;

/// One release rule: the predicate, the first release it holds for, what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseRule {
    /// The predicate of [`KubeletVersion`] that asks it.
    pub name: &'static str,
    /// The first minor release it holds for (every later one too).
    pub first: u8,
    /// What holds from that release on.
    pub says: &'static str,
}

const HAS_DRA: ReleaseRule = ReleaseRule {
    name: "has_dra",
    first: 34,
    says: "DRA is on by default (DynamicResourceAllocation GA, v1.DRAPlugin): a DRA manager registers DRAPlugin sockets and prepares claims; before, pods with claims are refused",
};
const CHECKPOINTS_SHARE_ID: ReleaseRule = ReleaseRule {
    name: "checkpoints_dra_share_id",
    first: 35,
    says: "dra_manager_state records each prepared device's ShareID",
};
const DEREGISTERS_UNDELIVERED: ReleaseRule = ReleaseRule {
    name: "deregisters_on_undelivered_registration",
    first: 36,
    says: "a DRA driver whose success notification (NotifyRegistrationStatus) fails is deregistered and retried (operation_generator.go, PR #133335)",
};
const STREAMS_HEALTH: ReleaseRule = ReleaseRule {
    name: "streams_dra_device_health",
    first: 36,
    says: "ResourceHealthStatus is on: each registered instance gets a device-health stream (1.36: v1alpha1, advertised or not)",
};
const MAPS_EXTENDED: ReleaseRule = ReleaseRule {
    name: "maps_extended_resources_to_claims",
    first: 36,
    says: "DRAExtendedResource (KEP-5004) is on: a pod's extendedResourceClaimStatus claim is prepared and its mapped resources leave the device manager",
};
const CAPITAL_POD: ReleaseRule = ReleaseRule {
    name: "capitalizes_pod_in_claim_owner_error",
    first: 36,
    says: "a template claim the pod does not own is refused with `... was not created for Pod ... (Pod is not owner)` (`pod` before)",
};
const PICKS_HEALTH: ReleaseRule = ReleaseRule {
    name: "picks_advertised_dra_health_service",
    first: 37,
    says: "the health stream uses the kubelet's preferred health service among those the driver advertises, none when it advertises none",
};
const RESETS_DEVICES: ReleaseRule = ReleaseRule {
    name: "resets_prepared_devices",
    first: 37,
    says: "a NodePrepareResources answer replaces the driver's devices of the claim (resetDevices); before, it is appended, so a restored claim prepared again lists its devices twice",
};
const UNPREPARES_OWN: ReleaseRule = ReleaseRule {
    name: "unprepares_only_claims_of_the_pod",
    first: 37,
    says: "a deleted pod unprepares only claims that reference it, found in the cache first (hasPodReference); before, its spec's claims, so a pod that never used a claim unprepares it for its one user",
};
const REFUSES_WHILE_UNPREPARING: ReleaseRule = ReleaseRule {
    name: "refuses_claim_users_while_unpreparing",
    first: 37,
    says: "a claim whose last user's NodeUnprepareResources is under way (or failed) refuses new users: `ResourceClaim <name> is being unprepared`; before, a new user joins it without a call",
};

/// Every DRA release rule, oldest first.
pub const DRA_RULES: &[ReleaseRule] = &[
    HAS_DRA,
    CHECKPOINTS_SHARE_ID,
    DEREGISTERS_UNDELIVERED,
    STREAMS_HEALTH,
    MAPS_EXTENDED,
    CAPITAL_POD,
    PICKS_HEALTH,
    RESETS_DEVICES,
    UNPREPARES_OWN,
    REFUSES_WHILE_UNPREPARING,
];

impl KubeletVersion {
    /// The first release with DRA on by default ([`DRA_RULES`]' `has_dra`
    /// row), for errors and hints that name it.
    pub const FIRST_WITH_DRA: KubeletVersion = KubeletVersion::Release(HAS_DRA.first);

    fn holds(self, rule: &ReleaseRule) -> bool {
        self.at_least(rule.first)
    }

    /// [`DRA_RULES`]: `has_dra`, 1.34+.
    pub fn has_dra(self) -> bool {
        self.holds(&HAS_DRA)
    }

    /// [`DRA_RULES`]: `checkpoints_dra_share_id`, 1.35+.
    pub fn checkpoints_dra_share_id(self) -> bool {
        self.holds(&CHECKPOINTS_SHARE_ID)
    }

    /// [`DRA_RULES`]: `deregisters_on_undelivered_registration`, 1.36+.
    pub fn deregisters_on_undelivered_registration(self) -> bool {
        self.holds(&DEREGISTERS_UNDELIVERED)
    }

    /// [`DRA_RULES`]: `streams_dra_device_health`, 1.36+.
    pub fn streams_dra_device_health(self) -> bool {
        self.holds(&STREAMS_HEALTH)
    }

    /// [`DRA_RULES`]: `maps_extended_resources_to_claims`, 1.36+.
    pub fn maps_extended_resources_to_claims(self) -> bool {
        self.holds(&MAPS_EXTENDED)
    }

    /// [`DRA_RULES`]: `capitalizes_pod_in_claim_owner_error`, 1.36+.
    pub fn capitalizes_pod_in_claim_owner_error(self) -> bool {
        self.holds(&CAPITAL_POD)
    }

    /// [`DRA_RULES`]: `picks_advertised_dra_health_service`, 1.37+.
    pub fn picks_advertised_dra_health_service(self) -> bool {
        self.holds(&PICKS_HEALTH)
    }

    /// [`DRA_RULES`]: `resets_prepared_devices`, 1.37+.
    pub fn resets_prepared_devices(self) -> bool {
        self.holds(&RESETS_DEVICES)
    }

    /// [`DRA_RULES`]: `unprepares_only_claims_of_the_pod`, 1.37+.
    pub fn unprepares_only_claims_of_the_pod(self) -> bool {
        self.holds(&UNPREPARES_OWN)
    }

    /// [`DRA_RULES`]: `refuses_claim_users_while_unpreparing`, 1.37+.
    pub fn refuses_claim_users_while_unpreparing(self) -> bool {
        self.holds(&REFUSES_WHILE_UNPREPARING)
    }
}

/// The table as `--help` prints it: one line per rule, `1.NN+: <sentence>`.
pub fn dra_rules_text() -> String {
    DRA_RULES.iter().map(|r| format!("  - 1.{}+: {}\n", r.first, r.says)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A predicate and its name.
    type Named = (&'static str, fn(KubeletVersion) -> bool);

    /// Each predicate answers its row: false the release before, true from its first.
    #[test]
    fn each_dra_predicate_answers_its_row() {
        let predicates: [Named; 10] = [
            ("has_dra", KubeletVersion::has_dra),
            ("checkpoints_dra_share_id", KubeletVersion::checkpoints_dra_share_id),
            ("deregisters_on_undelivered_registration", KubeletVersion::deregisters_on_undelivered_registration),
            ("streams_dra_device_health", KubeletVersion::streams_dra_device_health),
            ("maps_extended_resources_to_claims", KubeletVersion::maps_extended_resources_to_claims),
            ("capitalizes_pod_in_claim_owner_error", KubeletVersion::capitalizes_pod_in_claim_owner_error),
            ("picks_advertised_dra_health_service", KubeletVersion::picks_advertised_dra_health_service),
            ("resets_prepared_devices", KubeletVersion::resets_prepared_devices),
            ("unprepares_only_claims_of_the_pod", KubeletVersion::unprepares_only_claims_of_the_pod),
            ("refuses_claim_users_while_unpreparing", KubeletVersion::refuses_claim_users_while_unpreparing),
        ];
        assert_eq!(predicates.len(), DRA_RULES.len());
        for (rule, (name, p)) in DRA_RULES.iter().zip(predicates) {
            assert_eq!(rule.name, name);
            assert!(!p(KubeletVersion::Release(rule.first - 1)), "{name} before 1.{}", rule.first);
            assert!(p(KubeletVersion::Release(rule.first)) && p(KubeletVersion::Master), "{name}");
        }
        assert!(dra_rules_text().contains("1.37+: a claim whose last user's NodeUnprepareResources"));
    }
}
