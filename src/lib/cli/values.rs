//! The command line's names and help for the values of the output format,
//! the PodResources API choice and the Topology Manager's and CPU manager's
//! policies (clap's `ValueEnum`), kept here so that the output layer and
//! the domains do not depend on clap.

use clap::ValueEnum;

use crate::check::Case;
use clap::builder::PossibleValue;

use crate::output::Format;
use crate::podresources::client::ApiChoice;
use crate::topology::{CpuPolicy, Policy, Scope};

impl ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &[Format::Table, Format::Wide, Format::Json, Format::Yaml]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let (name, help) = match self {
            Format::Table => ("table", "Aligned columns for people"),
            Format::Wide => ("wide", "Like `table`, with more columns"),
            Format::Json => ("json", "JSON with stable snake_case keys; JSON Lines for streams"),
            Format::Yaml => ("yaml", "The JSON data as YAML; a document per event for streams"),
        };
        Some(PossibleValue::new(name).help(help))
    }
}

impl ValueEnum for ApiChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &[ApiChoice::Auto, ApiChoice::V1, ApiChoice::V1alpha1]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let (name, help) = match self {
            ApiChoice::Auto => ("auto", "v1, falling back to v1alpha1 when the kubelet has no v1 (before 1.20)"),
            ApiChoice::V1 => ("v1", "Only v1"),
            ApiChoice::V1alpha1 => ("v1alpha1", "Only v1alpha1 (List only: devices without topology)"),
        };
        Some(PossibleValue::new(name).help(help))
    }
}

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

    #[test]
    fn output_formats_and_api_versions_parse_from_their_names() {
        for f in Format::value_variants() {
            let name = f.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
            assert_eq!(Format::from_str(&name, false), Ok(*f));
        }
        assert_eq!(ApiChoice::from_str("v1alpha1", false), Ok(ApiChoice::V1alpha1));
        assert_eq!(ApiChoice::from_str("auto", false), Ok(ApiChoice::Auto));
        assert_eq!(Format::from_str("yaml", false), Ok(Format::Yaml));
        assert!(Format::from_str("xml", false).is_err());
    }
}

/// A value parser that offers `values` to shell completion (and `--help`)
/// while `inner` decides what is accepted: `--kubelet-version` also takes
/// `v1.30.7`, and check names are checked after the split on commas.
#[derive(Clone)]
pub struct Offered<P> {
    inner: P,
    values: Vec<&'static str>,
}

impl<P: clap::builder::TypedValueParser> clap::builder::TypedValueParser for Offered<P> {
    type Value = P::Value;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<Self::Value, clap::Error> {
        self.inner.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.values.iter().map(|v| PossibleValue::new(*v))))
    }
}

/// `inner`, offering `values`.
pub fn offering<P>(inner: P, values: &[&'static str]) -> Offered<P> {
    Offered { inner, values: values.to_vec() }
}

/// Names that live for the whole process (clap's completion values are `&'static str`).
fn leaked(names: impl IntoIterator<Item = String>) -> Vec<&'static str> {
    names.into_iter().map(|n| &*Box::leak(n.into_boxed_str())).collect()
}

/// `--kubelet-version`: offers 1.26 … master; parses what `KubeletVersion` parses.
pub fn kubelet_version() -> Offered<impl clap::builder::TypedValueParser<Value = crate::kubelet_sim::KubeletVersion>> {
    let values = leaked(crate::kubelet_sim::KubeletVersion::all().iter().map(ToString::to_string));
    Offered { inner: |s: &str| s.parse::<crate::kubelet_sim::KubeletVersion>(), values }
}

/// `--kubelet-version` where it takes several releases: a comma-separated
/// list of releases and ranges, kept as text and checked by the one parser,
/// [`KubeletVersion::parse_list`](crate::kubelet_sim::KubeletVersion::parse_list),
/// so a bad value gets the same error in every command; offers single releases.
pub fn kubelet_versions() -> Offered<impl clap::builder::TypedValueParser<Value = String>> {
    let values = leaked(crate::kubelet_sim::KubeletVersion::all().iter().map(ToString::to_string));
    let inner = |s: &str| -> std::result::Result<String, String> {
        crate::kubelet_sim::KubeletVersion::parse_list(s).map_err(|e| match e {
            crate::Error::Invalid { message, .. } => message,
            other => other.to_string(),
        })?;
        Ok(s.to_string())
    };
    Offered { inner, values }
}

/// A device's health: offers `healthy` and `unhealthy`; any other string is
/// taken as is (the kubelet counts it as unhealthy).
pub fn health() -> Offered<clap::builder::StringValueParser> {
    Offered { inner: clap::builder::StringValueParser::new(), values: vec!["healthy", "unhealthy"] }
}

/// `--only`/`--skip` of `plugin check`: offers the check names.
pub fn check_names() -> Offered<clap::builder::StringValueParser> {
    Offered {
        inner: clap::builder::StringValueParser::new(),
        values: crate::check::CheckId::ALL.iter().map(|c| c.name()).collect(),
    }
}

/// `smoke --skip`: offers the skippable steps and the check names.
pub fn smoke_skip_names() -> Offered<clap::builder::StringValueParser> {
    let steps = crate::smoke::StepId::ALL.iter().filter(|s| s.skippable()).map(|s| s.name());
    let values = steps.chain(crate::check::CheckId::ALL.iter().map(|c| c.name())).collect();
    Offered { inner: clap::builder::StringValueParser::new(), values }
}
