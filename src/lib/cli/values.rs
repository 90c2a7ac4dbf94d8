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

/// A value parser for an enum of the kubelet crate, whose types cannot take
/// clap's `ValueEnum` (that crate knows no clap): each value's name, help
/// and value, offered to `--help` and completion as `ValueEnum` offers them.
#[derive(Clone, Copy)]
pub struct Choices<T: 'static>(pub &'static [(&'static str, &'static str, T)]);

impl<T: Clone + Send + Sync + 'static> clap::builder::TypedValueParser for Choices<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<T, clap::Error> {
        let offered = clap::builder::PossibleValuesParser::new(self.possible());
        let name = offered.parse_ref(cmd, arg, value)?;
        let chosen = self.0.iter().find(|(n, ..)| *n == name).map(|(.., v)| v.clone());
        chosen.ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.possible()))
    }
}

impl<T> Choices<T> {
    fn possible(&self) -> impl Iterator<Item = PossibleValue> + '_ {
        self.0.iter().map(|(name, help, _)| PossibleValue::new(*name).help(*help))
    }
}

/// `--topology-manager-policy`.
pub const TOPOLOGY_POLICIES: Choices<Policy> = Choices(&[
    ("none", "No hints are collected; devices are not aligned", Policy::None),
    ("best-effort", "Merge the hints, always admit", Policy::BestEffort),
    ("restricted", "Admit only a preferred hint", Policy::Restricted),
    ("single-numa-node", "Admit only a preferred hint on one NUMA node (or none)", Policy::SingleNumaNode),
]);

/// `--topology-manager-scope`.
pub const TOPOLOGY_SCOPES: Choices<Scope> = Choices(&[
    ("container", "One hint per container, init containers first", Scope::Container),
    ("pod", "One hint for the whole pod", Scope::Pod),
]);

/// `--cpu-manager-policy`.
pub const CPU_POLICIES: Choices<CpuPolicy> = Choices(&[
    ("none", "Every container in the shared pool; no CPU hints", CpuPolicy::None),
    ("static", "Guaranteed pods with integer CPU requests get exclusive CPUs", CpuPolicy::Static),
]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_is_offered_by_the_kubelets_name() {
        for (name, _, p) in TOPOLOGY_POLICIES.0 {
            assert_eq!(*name, p.name());
        }
        for (name, _, s) in TOPOLOGY_SCOPES.0 {
            assert_eq!(*name, s.name());
        }
        let cmd = clap::Command::new("t");
        let parse =
            |c: &Choices<Policy>, v: &str| clap::builder::TypedValueParser::parse_ref(c, &cmd, None, v.as_ref());
        assert_eq!(parse(&TOPOLOGY_POLICIES, "single-numa-node").unwrap(), Policy::SingleNumaNode);
        assert!(parse(&TOPOLOGY_POLICIES, "strict").is_err());
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

/// A `--kubelet-version` help text from the release table: `{all}` becomes
/// `1.26 … 1.38 or master`, `{newest}` the newest release, `{default}` the
/// default, `{referees}` the referees' range (`1.34-1.38`); a pre-release gets
/// a sentence saying so. The one place these help texts take releases from.
pub fn release_help(text: &str) -> String {
    use crate::kubelet_sim::KubeletVersion as V;
    let (oldest, newest) = (V::all()[0], V::NEWEST);
    let mut s = text
        .replace("{all}", &format!("{oldest} … {newest} or master"))
        .replace("{newest}", &newest.to_string())
        .replace("{default}", &V::DEFAULT.to_string())
        .replace("{referees}", &V::referee_range());
    if let Some(tag) = newest.pre_release() {
        s.push_str(&format!(" {newest} is a pre-release ({tag}), played only when named."));
    }
    s
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
        crate::kubelet_sim::KubeletVersion::parse_list(s).map_err(|e| e.message)?;
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

/// `smoke --only`: offers every step and check name.
pub fn smoke_only_names() -> Offered<clap::builder::StringValueParser> {
    let steps = crate::smoke::StepId::ALL.iter().map(|s| s.name());
    let values = steps.chain(crate::check::CheckId::ALL.iter().map(|c| c.name())).collect();
    Offered { inner: clap::builder::StringValueParser::new(), values }
}

/// `smoke --skip`: offers the skippable steps and the check names.
pub fn smoke_skip_names() -> Offered<clap::builder::StringValueParser> {
    let steps = crate::smoke::StepId::ALL.iter().filter(|s| s.skippable()).map(|s| s.name());
    let values = steps.chain(crate::check::CheckId::ALL.iter().map(|c| c.name())).collect();
    Offered { inner: clap::builder::StringValueParser::new(), values }
}
