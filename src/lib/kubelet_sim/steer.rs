//! Steering a running sim as `dpctl kubelet-sim admit|delete|...` does,
//! without clap: the pod a command names (a manifest, or the `--allocate`
//! shorthand), how long each request may take, and what an answer means as
//! an exit code. The command layer only fills these in.

use std::path::Path;
use std::time::Duration;

use super::admission::PodSpec;
use super::control::{Answer, Request};
use crate::error::{Error, Result, exit};
use crate::topology::Compute;

/// Parses `--expect RESOURCE=COUNT`.
pub fn parse_expect(s: &str) -> Result<(String, usize)> {
    let (r, n) = PodSpec::parse_allocate(s).map_err(|_| {
        Error::invalid(
            format!("--expect {s}"),
            "expected RESOURCE=COUNT with an extended resource name, e.g. example.com/gpu=4",
        )
    })?;
    Ok((r, usize::try_from(n).unwrap_or(usize::MAX)))
}

/// One `--expect` and what was seen.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExpectResult {
    /// Resource name.
    pub resource: String,
    /// Expected allocatable.
    pub expected: usize,
    /// Allocatable seen (absent when the resource is not in node status).
    pub allocatable: Option<usize>,
    /// Capacity seen.
    pub capacity: Option<usize>,
    /// The expectation holds.
    pub met: bool,
}

/// Expectation results from counts.
pub fn expect_results(
    expects: &[(String, usize)],
    counts: &std::collections::BTreeMap<String, crate::model::Counts>,
) -> Vec<ExpectResult> {
    expects
        .iter()
        .map(|(r, n)| {
            let c = counts.get(r);
            ExpectResult {
                resource: r.clone(),
                expected: *n,
                allocatable: c.map(|c| c.allocatable),
                capacity: c.map(|c| c.capacity),
                met: c.is_some_and(|c| c.allocatable == *n),
            }
        })
        .collect()
}

/// Reads a Pod manifest (YAML or JSON) from `path`; `-` reads stdin.
pub fn read_manifest(path: &Path) -> Result<PodSpec> {
    let place = path.display().to_string();
    let text = if place == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| Error::io("reading stdin", e))?
    } else {
        crate::input::read_text(path, &place)?
    };
    PodSpec::from_manifest(&text, &place)
}

/// The `--allocate` shorthand: a one-container pod.
#[derive(Debug, Clone, Default)]
pub struct Shorthand {
    /// RESOURCE=COUNT, each (as `--allocate` takes them).
    pub allocate: Vec<String>,
    /// Pod name [default: a generated one].
    pub name: Option<String>,
    /// Namespace.
    pub namespace: String,
    /// CPU limit (= request), e.g. 2 or 500m.
    pub cpu: Option<String>,
    /// Memory limit (= request), e.g. 1Gi.
    pub memory: Option<String>,
}

impl Shorthand {
    /// The pod, checked (errors name the flag).
    pub fn pod(&self) -> Result<PodSpec> {
        let limits = self.allocate.iter().map(|s| PodSpec::parse_allocate(s)).collect::<Result<Vec<_>>>()?;
        let name = self.name.clone().unwrap_or_else(|| format!("pod-{:08x}", rand::random::<u32>()));
        let mut pod = PodSpec::shorthand(&name, &self.namespace, &limits);
        if let Some(c) = pod.containers.first_mut() {
            c.compute = shorthand_compute(self.cpu.as_deref(), self.memory.as_deref())?;
        }
        Ok(pod)
    }
}

/// `--cpu` and `--memory` of a shorthand pod: limits, requests equal to them.
fn shorthand_compute(cpu: Option<&str>, memory: Option<&str>) -> Result<Compute> {
    let mut c = Compute::default();
    if let Some(q) = cpu {
        let m = crate::quantity::parse(q, 3, true)
            .map_err(|e| Error::invalid(format!("--cpu {q}"), format!("{e} (a CPU quantity, e.g. 2, 500m, 1.5)")))?;
        c.cpu_limit_millis = Some(m);
    }
    if let Some(q) = memory {
        let b = crate::quantity::parse(q, 0, false).map_err(|e| {
            Error::invalid(format!("--memory {q}"), format!("{e} (a memory quantity, e.g. 1Gi, 512Mi)"))
        })?;
        c.memory_limit = Some(b);
    }
    Ok(c)
}

/// `(namespace, name)` from `NAME` or `NAMESPACE/NAME` (the latter wins over `namespace`).
pub fn pod_ref(pod: String, namespace: String) -> (String, String) {
    match pod.split_once('/') {
        Some((ns, n)) => (ns.to_string(), n.to_string()),
        None => (namespace, pod),
    }
}

/// `kubelet-sim reboot --seed`: the running sim's pods in a random order
/// made from `seed` (the same seed, the same order for the same pods).
pub async fn seeded_reboot_order(dir: &std::path::Path, seed: u64) -> crate::Result<Vec<String>> {
    let status = match super::control::call(dir, &Request::Status, Duration::from_secs(10)).await? {
        Ok(Answer::Status(s)) => s,
        Ok(_) => return Err(crate::Error::invalid("kubelet-sim", "unexpected answer to status")),
        Err(e) => return Err(crate::Error::invalid("kubelet-sim", e.message)),
    };
    let names: Vec<String> = status.pods.iter().map(|p| format!("{}/{}", p.namespace, p.name)).collect();
    Ok(super::reboot::seeded_order(&names, seed))
}

impl Request {
    /// How long the client waits for the answer: admission may call slow
    /// plugins; a restart waits `wait_ms` and then some.
    pub fn deadline(&self) -> Duration {
        match self {
            Request::Admit { .. } | Request::DryRun { .. } => Duration::from_secs(300),
            Request::Delete { .. } => Duration::from_secs(30),
            // The re-admission (no plugin call) is within the wait, or just after it.
            Request::Restart { wait_ms, readmit_after_ms, .. } => Duration::from_millis(*wait_ms)
                .max(Duration::from_millis(readmit_after_ms.unwrap_or(0)))
                .saturating_add(Duration::from_secs(30)),
            Request::RestartContainer { .. } => Duration::from_secs(60),
            // Every pod admitted again, each perhaps calling slow plugins.
            Request::Reboot { readmit_after_ms, .. } => {
                Duration::from_millis(*readmit_after_ms).saturating_add(Duration::from_secs(300))
            }
            Request::Status | Request::SetGrace { .. } | Request::Events { .. } => Duration::from_secs(10),
        }
    }
}

impl Answer {
    /// The exit code the answer means: 1 when a pod was rejected, a container
    /// did not start (a dry run starts none) or a plugin did not come back.
    pub fn exit_code(&self) -> u8 {
        let ok = match self {
            Answer::Admit(o) => {
                let dry = o.topology.as_ref().is_some_and(|t| t.dry_run);
                o.admitted && (dry || o.containers.iter().all(|c| c.started))
            }
            Answer::Restart(r) => r.all_returned && r.readmitted.iter().all(|p| p.admitted),
            Answer::Reboot(r) => r.rejected().next().is_none(),
            Answer::RestartContainer(r) => r.started,
            Answer::Delete(_) | Answer::Status(_) | Answer::SetGrace { .. } | Answer::Events { .. } => true,
        };
        if ok { exit::OK } else { exit::CHECK_FAILED }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_refs_take_a_namespace_prefix() {
        assert_eq!(pod_ref("ml/trainer".into(), "default".into()), ("ml".into(), "trainer".into()));
        assert_eq!(pod_ref("trainer".into(), "team".into()), ("team".into(), "trainer".into()));
    }

    #[test]
    fn shorthand_errors_name_the_flag() {
        let s =
            Shorthand { allocate: vec!["example.com/gpu=1".into()], cpu: Some("lots".into()), ..Shorthand::default() };
        assert!(s.pod().unwrap_err().to_string().starts_with("--cpu lots"));
        let s =
            Shorthand { allocate: vec!["example.com/gpu=1".into()], memory: Some("x".into()), ..Shorthand::default() };
        assert!(s.pod().unwrap_err().to_string().starts_with("--memory x"));
        assert!(parse_expect("gpu").unwrap_err().to_string().starts_with("--expect gpu"));
    }

    fn outcome(admitted: bool) -> super::super::AdmitOutcome {
        super::super::AdmitOutcome {
            pod: "p".into(),
            namespace: "default".into(),
            uid: "u".into(),
            admitted,
            reason: None,
            message: None,
            containers: Vec::new(),
            took_ms: 0,
            topology: None,
            kept_in: None,
            dra: None,
        }
    }

    #[test]
    fn answers_map_to_the_documented_exit_codes() {
        // `kubelet-sim --help`: admit exits 1 when the pod is rejected or a
        // container cannot start; restart-container when it does not start.
        assert_eq!(Answer::Admit(outcome(true)).exit_code(), exit::OK);
        assert_eq!(Answer::Admit(outcome(false)).exit_code(), exit::CHECK_FAILED);
        let restart = |started| super::super::RestartOutcome {
            pod: "p".into(),
            namespace: "default".into(),
            container: "c".into(),
            pre_start: Default::default(),
            started,
            start_error: None,
        };
        assert_eq!(Answer::RestartContainer(restart(true)).exit_code(), exit::OK);
        assert_eq!(Answer::RestartContainer(restart(false)).exit_code(), exit::CHECK_FAILED);
        assert_eq!(Answer::SetGrace { grace_period_ms: 1 }.exit_code(), exit::OK);
    }

    #[test]
    fn a_restart_waits_longer_than_its_wait() {
        assert_eq!(
            Request::Restart { wait_ms: 1000, readmit_after_ms: None, no_readmit: false }.deadline(),
            Duration::from_secs(31)
        );
        assert!(
            Request::Restart { wait_ms: u64::MAX, readmit_after_ms: None, no_readmit: false }.deadline()
                > Duration::from_millis(u64::MAX)
        );
    }
}
