//! The command line's names for the Topology Manager's and CPU manager's
//! policies (clap's `ValueEnum`), kept here so that the domain
//! ([`crate::topology`]) does not depend on clap.

use clap::ValueEnum;
use clap::builder::PossibleValue;

use crate::topology::{CpuPolicy, Policy, Scope};

impl ValueEnum for Policy {
    fn value_variants<'a>() -> &'a [Self] {
        &[Policy::None, Policy::BestEffort, Policy::Restricted, Policy::SingleNumaNode]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            Policy::None => "No hints are collected; devices are not aligned",
            Policy::BestEffort => "Merge the hints, always admit",
            Policy::Restricted => "Admit only a preferred hint",
            Policy::SingleNumaNode => "Admit only a preferred hint on one NUMA node (or none)",
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

impl ValueEnum for Scope {
    fn value_variants<'a>() -> &'a [Self] {
        &[Scope::Container, Scope::Pod]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            Scope::Container => "One hint per container, init containers first",
            Scope::Pod => "One hint for the whole pod",
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

impl ValueEnum for CpuPolicy {
    fn value_variants<'a>() -> &'a [Self] {
        &[CpuPolicy::None, CpuPolicy::Static]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let (name, help) = match self {
            CpuPolicy::None => ("none", "Every container in the shared pool; no CPU hints"),
            CpuPolicy::Static => ("static", "Guaranteed pods with integer CPU requests get exclusive CPUs"),
        };
        Some(PossibleValue::new(name).help(help))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_parses_from_the_kubelets_name() {
        for p in Policy::value_variants() {
            assert_eq!(Policy::from_str(p.name(), false), Ok(*p));
        }
        for s in Scope::value_variants() {
            assert_eq!(Scope::from_str(s.name(), false), Ok(*s));
        }
        assert_eq!(CpuPolicy::from_str("static", false), Ok(CpuPolicy::Static));
        assert!(Policy::from_str("strict", false).is_err());
    }
}
