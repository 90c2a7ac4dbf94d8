//! `dpctl mock-plugin`'s flags as a plain options struct, and the
//! [`MockConfig`] they build (alone, or over a `--config` file): errors name
//! the flag (or the file and key) that was wrong. Testable without clap.

use std::path::PathBuf;
use std::time::Duration;

use super::config::ConfigIssue;
use super::{AllocateConfig, ErrorSpec, FlapConfig, MockConfig, Policy, ResourceConfig, RpcFault, RpcSelector};
use crate::duration::parse as parse_duration;
use crate::error::{Error, Result};
use crate::proto::deviceplugin::v1beta1 as dp;

/// What `--help` says about the names and codes the fault flags take (they
/// are [`RpcSelector`]'s and [`ErrorSpec`]'s parsers: change it with them).
pub const FAULT_NAMES: &str = "\
RPC names for --error/--latency/--fail-after: GetDevicePluginOptions, ListAndWatch,
GetPreferredAllocation, Allocate, PreStartContainer, GetInfo, NotifyRegistrationStatus, or *
(short forms: options, list, preferred, allocate, prestart). Codes: unavailable, internal,
invalid_argument, ... or a number.";

/// The flags that start a mock plugin (each field is the flag of the same
/// name; see `dpctl mock-plugin --help`).
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--dir`.
    pub dir: Option<PathBuf>,
    /// `--resource`.
    pub resource: Vec<String>,
    /// `--endpoint`.
    pub endpoint: Option<String>,
    /// `--devices`.
    pub devices: Option<usize>,
    /// `--id-prefix`.
    pub id_prefix: Option<String>,
    /// `--numa-nodes`.
    pub numa_nodes: usize,
    /// `--unhealthy`.
    pub unhealthy: Vec<String>,
    /// `--pre-start`.
    pub pre_start: bool,
    /// `--preferred`.
    pub preferred: Option<Policy>,
    /// `--seed`.
    pub seed: u64,
    /// `--refuse-unhealthy`.
    pub refuse_unhealthy: bool,
    /// `--env`.
    pub envs: Vec<String>,
    /// `--cdi`.
    pub cdi: Vec<String>,
    /// `--flap`.
    pub flap: Vec<String>,
    /// `--error`.
    pub errors: Vec<String>,
    /// `--latency`.
    pub latency: Vec<String>,
    /// `--fail-after`.
    pub fail_after: Vec<String>,
    /// `--end-stream-after`.
    pub end_stream_after: Option<u64>,
    /// `--end-stream-error`.
    pub end_stream_error: Option<ErrorSpec>,
    /// `--oversize-list`.
    pub oversize_list: bool,
    /// `--empty-first-message`.
    pub empty_first_message: bool,
    /// `--same-device`.
    pub same_device: bool,
    /// `--register-version`.
    pub register_version: Option<String>,
    /// `--register-resource-name`.
    pub register_resource_name: Option<String>,
    /// `--register-options-mismatch`.
    pub register_options_mismatch: bool,
    /// `--register-before-serving`.
    pub register_before_serving: bool,
    /// `--no-reregister`.
    pub no_reregister: bool,
    /// `--stale-stream-after-restart`.
    pub stale_stream_after_restart: bool,
    /// `--crash-after-restart`.
    pub crash_after_restart: Option<Duration>,
    /// `--scan-stops-after`.
    pub scan_stops_after: Option<u64>,
    /// `--hang-on-sigterm`.
    pub hang_on_sigterm: bool,
    /// `--ids-change-per-start`.
    pub ids_change_per_start: bool,
    /// `--register-twice`.
    pub register_twice: bool,
    /// `--register-once`.
    pub register_once: bool,
    /// `--no-register`.
    pub no_register: bool,
    /// `--registry-dir`.
    pub registry_dir: Option<PathBuf>,
    /// `--record`.
    pub record: Option<PathBuf>,
    /// `--no-control`.
    pub no_control: bool,
    /// `--force`.
    pub force: bool,
    /// `--hide-rpcs`.
    pub hide_rpcs: bool,
    /// `--register-timeout`.
    pub register_timeout: Option<Duration>,
}

/// `healthy`/`unhealthy` in any case become the API's spelling; anything else is kept.
pub fn canonical_health(h: &str) -> String {
    if h.eq_ignore_ascii_case(dp::HEALTHY) {
        dp::HEALTHY.to_string()
    } else if h.eq_ignore_ascii_case(dp::UNHEALTHY) {
        dp::UNHEALTHY.to_string()
    } else {
        h.to_string()
    }
}

/// The config from --config or from the flags, with the flags that apply to
/// both, checked.
pub fn build_config(a: &ServeOptions) -> Result<MockConfig> {
    let (mut config, from_file) = match &a.config {
        Some(path) => (MockConfig::load(path)?, true),
        None => (from_flags(a)?, false),
    };
    if a.dir.is_some() {
        config.dir.clone_from(&a.dir);
    }
    if a.record.is_some() {
        config.record.clone_from(&a.record);
    }
    if a.registry_dir.is_some() {
        config.registry_dir.clone_from(&a.registry_dir);
    }
    if let Some(t) = a.register_timeout {
        config.register_timeout = t;
    }
    config.register &= !a.no_register;
    config.control &= !a.no_control;
    config.force |= a.force;
    config.rpc_events &= !a.hide_rpcs;
    let rpc_faults = fault_flags(a)?;
    for r in &mut config.resources {
        let f = &mut r.faults;
        f.rpc.extend(rpc_faults.iter().cloned());
        if a.end_stream_after.is_some() {
            f.list_and_watch_end_after = a.end_stream_after;
            f.list_and_watch_end_error.clone_from(&a.end_stream_error);
        }
        f.list_and_watch_oversize |= a.oversize_list;
        f.list_and_watch_empty_first |= a.empty_first_message;
        f.allocate_same_device |= a.same_device;
        if a.register_version.is_some() {
            f.register_version.clone_from(&a.register_version);
        }
        if a.register_resource_name.is_some() {
            f.register_resource_name.clone_from(&a.register_resource_name);
        }
        f.register_options_mismatch |= a.register_options_mismatch;
        f.register_before_serving |= a.register_before_serving;
        f.no_reregister |= a.no_reregister;
        f.stale_stream_after_restart |= a.stale_stream_after_restart;
        if a.crash_after_restart.is_some() {
            f.crash_after_restart = a.crash_after_restart;
        }
        if a.scan_stops_after.is_some() {
            f.scan_stops_after = a.scan_stops_after;
        }
        f.hang_on_sigterm |= a.hang_on_sigterm;
        f.ids_change_per_start |= a.ids_change_per_start;
        f.register_twice |= a.register_twice;
        f.register_once |= a.register_once;
    }
    config.check().map_err(|i| {
        let place = match &a.config {
            Some(p) if from_file => format!("{}: {}", p.display(), i.key),
            _ => flag_for(&i),
        };
        Error::invalid(place, i.message)
    })?;
    Ok(config)
}

/// Names the flag behind a config key, for configs built from flags.
fn flag_for(i: &ConfigIssue) -> String {
    let k = i.key.as_str();
    let flag = if k == "resource" || k.ends_with(".name") {
        "--resource"
    } else if k.contains(".endpoint") {
        "--endpoint / --dir"
    } else if k.ends_with(".count") {
        "--devices"
    } else if k.contains(".unhealthy") {
        "--unhealthy"
    } else if k.contains(".flap") {
        "--flap"
    } else if k.contains(".allocate") {
        "--env / --cdi"
    } else if k.contains(".faults") {
        "fault flags"
    } else {
        "--devices"
    };
    flag.to_string()
}

fn from_flags(a: &ServeOptions) -> Result<MockConfig> {
    if a.resource.is_empty() {
        return Err(Error::invalid("mock-plugin", "give --resource NAME (with --devices N), or --config FILE"));
    }
    if a.endpoint.is_some() && a.resource.len() > 1 {
        return Err(Error::invalid("--endpoint", "names one socket; with several --resource, use a --config file"));
    }
    let allocate = if a.envs.is_empty() && a.cdi.is_empty() {
        AllocateConfig::default()
    } else {
        let mut envs = std::collections::BTreeMap::new();
        for e in &a.envs {
            let (k, v) = e.split_once('=').ok_or_else(|| Error::invalid("--env", format!("{e:?} is not KEY=VALUE")))?;
            envs.insert(k.to_string(), v.to_string());
        }
        AllocateConfig { envs, cdi_devices: a.cdi.clone(), ..AllocateConfig::default() }
    };
    let mut flaps = Vec::new();
    for f in &a.flap {
        let (ids, period) =
            f.rsplit_once(':').ok_or_else(|| Error::invalid("--flap", format!("{f:?} is not ID[,ID...]:PERIOD")))?;
        let every = parse_duration(period).map_err(|e| Error::invalid("--flap", e))?;
        flaps.push(FlapConfig { ids: ids.split(',').map(str::to_string).collect(), every });
    }
    let resources = a
        .resource
        .iter()
        .map(|name| {
            let mut r = ResourceConfig::new(name.clone(), a.devices.unwrap_or(4));
            r.endpoint.clone_from(&a.endpoint);
            r.id_prefix.clone_from(&a.id_prefix);
            r.numa_nodes = a.numa_nodes;
            r.unhealthy.clone_from(&a.unhealthy);
            r.pre_start_required = a.pre_start;
            r.get_preferred_allocation_available = a.preferred.is_some();
            r.preferred_policy = a.preferred.unwrap_or_default();
            r.seed = a.seed;
            r.refuse_unhealthy = a.refuse_unhealthy;
            r.allocate = allocate.clone();
            r.flap = flaps.clone();
            r
        })
        .collect();
    Ok(MockConfig { dir: a.dir.clone(), resources, ..MockConfig::default() })
}

/// `--error`, `--latency` and `--fail-after` as RPC faults.
fn fault_flags(a: &ServeOptions) -> Result<Vec<RpcFault>> {
    fn split<'a>(flag: &str, v: &'a str, what: &str) -> Result<(RpcSelector, &'a str)> {
        let (rpc, rest) = v.split_once('=').ok_or_else(|| Error::invalid(flag, format!("{v:?} is not RPC={what}")))?;
        let rpc = rpc.parse().map_err(|e: String| Error::invalid(flag, e))?;
        Ok((rpc, rest))
    }
    let mut faults: Vec<RpcFault> = Vec::new();
    for v in &a.errors {
        let (rpc, spec) = split("--error", v, "CODE[:MESSAGE]")?;
        let error: ErrorSpec = spec.parse().map_err(|e: String| Error::invalid("--error", e))?;
        if error.code == tonic::Code::Ok {
            return Err(Error::invalid("--error", "code ok is not an error"));
        }
        faults.push(RpcFault { rpc, error: Some(error), latency: None, after: 0 });
    }
    for v in &a.latency {
        let (rpc, d) = split("--latency", v, "DURATION")?;
        let latency = parse_duration(d).map_err(|e| Error::invalid("--latency", e))?;
        faults.push(RpcFault { rpc, error: None, latency: Some(latency), after: 0 });
    }
    for v in &a.fail_after {
        let (rpc, n) = split("--fail-after", v, "N")?;
        let n: u64 =
            n.parse().map_err(|_| Error::invalid("--fail-after", format!("{n:?} is not a number of calls")))?;
        let mut found = false;
        for f in faults.iter_mut().filter(|f| f.rpc == rpc && f.error.is_some()) {
            f.after = n;
            found = true;
        }
        if !found {
            faults.push(RpcFault { rpc, error: None, latency: None, after: n });
        }
    }
    Ok(faults)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock_plugin::Rpc;

    #[test]
    fn flags_build_a_config() {
        let a = ServeOptions {
            resource: vec!["example.com/gpu".into()],
            devices: Some(3),
            flap: vec!["GPU-0,GPU-1:250ms".into()],
            errors: vec!["allocate=unavailable:gone".into()],
            fail_after: vec!["Allocate=2".into(), "prestart=1".into()],
            dir: Some("/tmp/x".into()),
            ..Default::default()
        };
        let c = build_config(&a).unwrap();
        let r = &c.resources[0];
        assert_eq!(r.flap[0].ids, ["GPU-0", "GPU-1"]);
        assert_eq!(r.flap[0].every, Duration::from_millis(250));
        let f = &r.faults.rpc;
        assert_eq!(f[0].rpc, RpcSelector::One(Rpc::Allocate));
        assert_eq!((f[0].after, f[0].error.as_ref().unwrap().message.as_str()), (2, "gone"));
        assert_eq!((f[1].rpc, f[1].after, f[1].error.is_none()), (RpcSelector::One(Rpc::PreStartContainer), 1, true));
    }

    #[test]
    fn flag_errors_name_the_flag() {
        let a = ServeOptions {
            resource: vec!["example.com/gpu".into()],
            flap: vec!["GPU-9:1s".into()],
            ..Default::default()
        };
        let e = build_config(&a).unwrap_err().to_string();
        assert!(e.starts_with("--flap: no device \"GPU-9\""), "{e}");
        let a = ServeOptions { resource: vec!["gpu".into()], ..Default::default() };
        assert!(build_config(&a).unwrap_err().to_string().starts_with("--resource: invalid resource name"));
        let a = ServeOptions {
            resource: vec!["example.com/gpu".into()],
            latency: vec!["Allocate=soon".into()],
            ..Default::default()
        };
        assert!(build_config(&a).unwrap_err().to_string().contains("--latency: invalid duration"));
    }
}
