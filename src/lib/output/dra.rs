//! Rendering for `dpctl dra`: the judged answers of a DRA driver, its
//! registration, health messages, the mock driver's events, and the DRA
//! manager's checkpoint.

use std::io::{self, Write};

use colored::Colorize;

use super::{Streams, out_err, table, timestamp, write_json, write_json_line, write_table};
use crate::dra::cdi::IdVerdict;
use crate::dra::client::{CallReport, HealthEntry, InfoReport};
use crate::dra::mock::{DraEvent, DraEventKind};
use crate::dra::state::StateReport;
use crate::error::Result;

/// Writes each problem as a `problem:` line.
fn problems(w: &mut dyn Write, list: &[String]) -> io::Result<()> {
    for p in list {
        writeln!(w, "{} {p}", "problem:".red().bold())?;
    }
    Ok(())
}

/// `dra info`: the plugin, its services and any problem.
pub fn info(s: &mut Streams<'_>, r: &InfoReport) -> Result<()> {
    if s.format.is_json() {
        write_json(s.out, r).map_err(out_err)?;
    } else {
        let none = || "-".to_string();
        let mut t = table(["FIELD", "VALUE"]);
        t.add_row(["registration".to_string(), r.registration_socket.display().to_string()]);
        t.add_row(["type".to_string(), r.plugin_type.clone()]);
        t.add_row(["driver".to_string(), r.driver.clone()]);
        t.add_row([
            "endpoint".to_string(),
            if r.endpoint.is_empty() { "(empty: the registration socket)".into() } else { r.endpoint.clone() },
        ]);
        t.add_row(["node service (1.34+)".to_string(), r.chosen_node_service.clone().unwrap_or_else(none)]);
        t.add_row(["health service (1.37)".to_string(), r.chosen_health_service.clone().unwrap_or_else(none)]);
        write_table(s.out, &t).map_err(out_err)?;
        writeln!(s.out).map_err(out_err)?;
        let mut t = table(["ADVERTISED", "SERVED"]);
        for p in &r.services {
            t.add_row([p.service.clone(), p.status.clone()]);
        }
        write_table(s.out, &t).map_err(out_err)?;
        problems(s.out, &r.problems).map_err(out_err)?;
    }
    Ok(())
}

/// `dra prepare|unprepare`: each claim and its result.
pub fn call(s: &mut Streams<'_>, r: &CallReport) -> Result<()> {
    if s.format.is_json() {
        let mut v = serde_json::to_value(r).map_err(|e| out_err(e.into()))?;
        v["ok"] = serde_json::Value::Bool(r.ok());
        write_json(s.out, &v).map_err(out_err)?;
        return Ok(());
    }
    let unprepare = r.rpc.ends_with("NodeUnprepareResources");
    let mut t = if unprepare {
        table(["CLAIM", "UID", "RESULT"])
    } else {
        table(["CLAIM", "UID", "DEVICE", "REQUESTS", "CDI IDS", "RESULT"])
    };
    for c in &r.claims {
        let claim = if c.claim.is_empty() { "(unknown)".to_string() } else { c.claim.clone() };
        let result = if !c.error.is_empty() {
            format!("error: {}", c.error)
        } else if c.problems.is_empty() && !c.warnings.is_empty() {
            "accepted, no device".into()
        } else if c.problems.is_empty() {
            "ok".into()
        } else {
            c.problems[0].clone()
        };
        if unprepare || c.devices.is_empty() {
            let mut row = vec![claim, c.uid.clone()];
            if !unprepare {
                row.extend(["-".into(), "-".into(), "-".into()]);
            }
            row.push(result);
            t.add_row(row);
            continue;
        }
        for (i, d) in c.devices.iter().enumerate() {
            let requests = if d.request_names.is_empty() { "(all)".to_string() } else { d.request_names.join(",") };
            let ids: Vec<String> =
                d.cdi_device_ids.iter().map(|x| format!("{} ({})", x.id, verdict(&x.verdict))).collect();
            let (cl, uid, res) = if i == 0 {
                (claim.clone(), c.uid.clone(), result.clone())
            } else {
                (String::new(), String::new(), String::new())
            };
            t.add_row([cl, uid, format!("{}/{}", d.pool, d.device), requests, ids.join(" "), res]);
        }
    }
    write_table(s.out, &t).map_err(out_err)?;
    for c in &r.claims {
        problems(
            s.out,
            &c.problems
                .iter()
                .skip(usize::from(c.error.is_empty() && !c.problems.is_empty()).min(1))
                .map(|p| format!("{}: {p}", c.uid))
                .collect::<Vec<_>>(),
        )
        .map_err(out_err)?;
    }
    problems(s.out, &r.problems).map_err(out_err)?;
    for c in &r.claims {
        for w in &c.warnings {
            writeln!(s.out, "{} {}: {w}", "warning:".yellow(), c.uid).map_err(out_err)?;
        }
    }
    let verdict = if r.ok() {
        "the kubelet would accept this answer".green().to_string()
    } else {
        "the kubelet would fail the pod".red().to_string()
    };
    writeln!(
        s.out,
        "{}: {} claims answered in {} ms (deadline {} ms): {verdict}",
        r.rpc,
        r.claims.len(),
        r.duration_ms,
        r.timeout_ms
    )
    .map_err(out_err)?;
    Ok(())
}

fn verdict(v: &IdVerdict) -> String {
    match v {
        IdVerdict::Unchecked => "not resolved".into(),
        IdVerdict::Resolved => "resolves".into(),
        IdVerdict::Unresolved => "unresolvable".into(),
        IdVerdict::Unparsable(_) => "does not parse".into(),
    }
}

/// One health message: a table, or a JSON line with its sequence number.
pub fn health_message(s: &mut Streams<'_>, seq: u64, devices: &[HealthEntry]) -> io::Result<()> {
    if s.format.is_json() {
        return write_json_line(s.out, &serde_json::json!({"seq": seq, "devices": devices}));
    }
    writeln!(s.out, "message {seq}: {} devices", devices.len())?;
    let mut t = table(["POOL", "DEVICE", "HEALTH", "UPDATED", "TIMEOUT", "MESSAGE"]);
    for d in devices {
        let health = if d.health == "Healthy" { d.health.green().to_string() } else { d.health.red().to_string() };
        let timeout = if d.health_check_timeout_seconds == 0 {
            "default".into()
        } else {
            format!("{}s", d.health_check_timeout_seconds)
        };
        t.add_row([d.pool.clone(), d.device.clone(), health, updated(d.last_updated_time), timeout, d.message.clone()]);
    }
    write_table(s.out, &t)?;
    s.out.flush()
}

/// A health entry's `last_updated_time` (Unix seconds) as dpctl shows
/// times (RFC 3339, UTC); `-` when unset (0), the raw number when negative.
fn updated(secs: i64) -> String {
    match u64::try_from(secs) {
        Ok(0) => "-".into(),
        Ok(n) => timestamp(std::time::UNIX_EPOCH + std::time::Duration::from_secs(n)),
        Err(_) => secs.to_string(),
    }
}

/// One event of the mock driver: a line, or a JSON line.
pub fn mock_event(w: &mut dyn Write, json: bool, e: &DraEvent) -> io::Result<()> {
    if json {
        return write_json_line(w, e);
    }
    let detail = match &e.kind {
        DraEventKind::Serving { registration_socket, endpoint, supported_versions, served, cdi_dir } => format!(
            "{}  registration {}  endpoint {}  advertises [{}]  serves [{}]  CDI specs in {}",
            "serving".green(),
            registration_socket.display(),
            endpoint.display(),
            supported_versions.join(", "),
            served.join(", "),
            cdi_dir.display()
        ),
        DraEventKind::Rpc { rpc, request, response, error, duration_ms } => {
            let answer = match (error, response) {
                (Some(e), _) => e.red().to_string(),
                (None, Some(r)) => r.to_string(),
                (None, None) => "(stream)".into(),
            };
            format!("rpc  {rpc}  {request} -> {answer}  ({duration_ms} ms)")
        }
        DraEventKind::Published { server, node, writes } => {
            let done = if writes.is_empty() {
                "current, nothing written".to_string()
            } else {
                writes.iter().map(|(verb, name)| format!("{verb} {name}")).collect::<Vec<_>>().join(", ")
            };
            format!("published  ResourceSlices of node {node} at {server}: {done}")
        }
        DraEventKind::Stopped { reason } => format!("stopped ({reason})"),
    };
    writeln!(w, "{}  {}  {detail}", timestamp(e.time).dimmed(), e.resource)?;
    w.flush()
}

/// `dra check`: a results table, each failure in full.
pub fn check(s: &mut Streams<'_>, r: &crate::dra::check::DraCheckReport) -> Result<()> {
    if s.format.is_json() {
        let totals = crate::check::Totals::of(&r.results);
        write_json(s.out, &serde_json::json!({"registration": r.registration, "claim": r.claim, "claim_source": r.claim_source, "notes": r.notes, "results": r.results, "totals": totals, "checked": r.not_checked().is_none(), "not_checked": r.not_checked(), "interrupted": r.interrupted, "ok": r.ok()}))
            .map_err(out_err)?;
        return Ok(());
    }
    let mut t = table(["CHECK", "RESULT", "EVIDENCE"]);
    for c in &r.results {
        t.add_row([c.name.clone(), super::cases::outcome(c.outcome), super::cases::one_line(&c.evidence)]);
    }
    write_table(s.out, &t).map_err(out_err)?;
    super::cases::failures(s.out, &r.results).map_err(out_err)?;
    for n in &r.notes {
        writeln!(s.out, "{n}").map_err(out_err)?;
    }
    let totals = crate::check::Totals::of(&r.results);
    writeln!(
        s.out,
        "\n{} passed, {} failed, {} skipped (claim {}/{} uid {}, {})",
        totals.passed, totals.failed, totals.skipped, r.claim.namespace, r.claim.name, r.claim.uid, r.claim_source
    )
    .map_err(out_err)?;
    if r.interrupted {
        writeln!(s.out, "INTERRUPTED (Ctrl-C or SIGTERM): the results above are what was done until then (exit 1)")
            .map_err(out_err)?;
    } else if let Some(why) = r.not_checked() {
        writeln!(
            s.out,
            "NOT CHECKED: Prepare and Unprepare were never judged, only the registration (exit 1): {}",
            super::cases::one_line(why)
        )
        .map_err(out_err)?;
    }
    Ok(())
}

/// `checkpoint show` for `dra_manager_state`.
pub fn state_shown(s: &mut Streams<'_>, r: &StateReport) -> Result<()> {
    if s.format.is_json() {
        write_json(s.out, r).map_err(out_err)?;
        return Ok(());
    }
    writeln!(s.out, "{} ({} claims; written by kubelet {})", r.file.display(), r.claims.len(), r.written_by)
        .map_err(out_err)?;
    let mut t = table(["CLAIM", "UID", "PODS", "DRIVER", "DEVICE", "REQUESTS", "CDI IDS"]);
    for c in &r.claims {
        let pods = c.pod_uids.as_ref().map(|p| p.keys().cloned().collect::<Vec<_>>().join(",")).unwrap_or_default();
        let mut first = true;
        for (driver, st) in c.driver_state.iter().flatten() {
            for d in st.devices.iter().flatten() {
                let (claim, uid, p) = if first {
                    (format!("{}/{}", c.namespace, c.claim_name), c.claim_uid.clone(), pods.clone())
                } else {
                    Default::default()
                };
                first = false;
                let requests = d.request_names.as_ref().map_or("(all)".into(), |r| r.join(","));
                let ids = d.cdi_device_ids.as_ref().map(|i| i.join(" ")).unwrap_or_default();
                t.add_row([claim, uid, p, driver.clone(), format!("{}/{}", d.pool_name, d.device_name), requests, ids]);
            }
        }
        if first {
            t.add_row([
                format!("{}/{}", c.namespace, c.claim_name),
                c.claim_uid.clone(),
                pods,
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
        }
    }
    write_table(s.out, &t).map_err(out_err)?;
    problems(s.out, &r.problems).map_err(out_err)?;
    Ok(())
}

/// `checkpoint verify` for `dra_manager_state`.
pub fn state_verified(s: &mut Streams<'_>, r: &StateReport) -> Result<()> {
    if s.format.is_json() {
        let mut v = serde_json::to_value(r).map_err(|e| out_err(e.into()))?;
        v["ok"] = serde_json::Value::Bool(r.problems.is_empty());
        write_json(s.out, &v).map_err(out_err)?;
        return Ok(());
    }
    let mut t = table(["FIELD", "VALUE"]);
    t.add_row(["file".to_string(), r.file.display().to_string()]);
    t.add_row(["checksum stored".to_string(), r.stored_checksum.to_string()]);
    t.add_row(["checksum computed (CRC-32 of Data)".to_string(), r.computed_checksum.to_string()]);
    t.add_row(["claims".to_string(), r.claims.len().to_string()]);
    t.add_row(["written by".to_string(), r.written_by.clone()]);
    write_table(s.out, &t).map_err(out_err)?;
    problems(s.out, &r.problems).map_err(out_err)?;
    if r.problems.is_empty() {
        writeln!(s.out, "{}", "ok: a kubelet (1.34-1.37) restores these claims at its next start".green())
            .map_err(out_err)?;
    }
    Ok(())
}

/// `checkpoint verify` for a `dra_manager_state` that does not parse: the
/// kubelet cannot read it either (its DRA manager, and so the kubelet, does
/// not start), so it does not verify.
pub fn state_unparsable(s: &mut Streams<'_>, file: &std::path::Path, why: &crate::Error) -> Result<()> {
    let problem = format!("the file does not parse: {why}; the kubelet cannot read it and does not start");
    if s.format.is_json() {
        let v = serde_json::json!({"file": file, "ok": false, "problems": [problem]});
        return write_json(s.out, &v).map_err(out_err);
    }
    let mut t = table(["FIELD", "VALUE"]);
    t.add_row(["file".to_string(), file.display().to_string()]);
    t.add_row(["checksum".to_string(), "not computed: the file does not parse".to_string()]);
    write_table(s.out, &t).map_err(out_err)?;
    problems(s.out, &[problem]).map_err(out_err)
}

/// A `dra prepare|unprepare` call that Ctrl-C or SIGTERM ended before the
/// driver answered: what was sent, where, and for how long it waited.
pub struct UnansweredCall<'a> {
    /// `NodePrepareResources` or `NodeUnprepareResources`.
    pub rpc: &'a str,
    /// The driver's service socket.
    pub socket: &'a std::path::Path,
    /// The claims sent.
    pub claims: &'a [crate::dra::claims::ClaimRef],
    /// How long the call waited.
    pub waited: std::time::Duration,
}

/// `dra prepare|unprepare` interrupted: the call and how long it waited
/// (the report of a call that got no answer).
pub fn call_interrupted(s: &mut Streams<'_>, c: &UnansweredCall<'_>) -> Result<()> {
    let claims: Vec<String> = c.claims.iter().map(|r| format!("{}/{}/{}", r.namespace, r.name, r.uid)).collect();
    let waited_ms = c.waited.as_secs_f64() * 1000.0;
    if s.format.is_json() {
        let v = serde_json::json!({"rpc": c.rpc, "socket": c.socket, "claims": claims, "interrupted": true,
            "waited_ms": waited_ms, "ok": false});
        return write_json(s.out, &v).map_err(out_err);
    }
    writeln!(
        s.out,
        "{} (Ctrl-C or SIGTERM): {} for {} sent to {}, no answer after {:.1} s; the driver may still act on it",
        "INTERRUPTED".magenta().bold(),
        c.rpc,
        crate::text::list(&claims),
        c.socket.display(),
        c.waited.as_secs_f64()
    )
    .map_err(out_err)
}
