//! Renders the Topology Manager part of a `kubelet-sim admit` report: per
//! container (or the pod) and provider, the hints in the kubelet's notation,
//! the merged best hint and the policy's verdict, then where the devices and
//! exclusive CPUs went, per NUMA node.

use std::io::{self, Write};

use colored::Colorize;

use super::{table, write_table};
use crate::kubelet_sim::topology::TopologyReport;

fn hints_text(h: &Option<Vec<crate::topology::HintView>>) -> String {
    match h {
        None => "nil (no preference)".into(),
        Some(l) if l.is_empty() => "[] (cannot be satisfied)".into(),
        Some(l) => l.iter().map(|x| x.hint.as_str()).collect::<Vec<_>>().join(" "),
    }
}

/// Writes the hints, verdicts and placement as tables.
pub fn report(w: &mut dyn Write, t: &TopologyReport) -> io::Result<()> {
    if t.policy == "none" && t.cpu_manager_policy == "none" && !t.dry_run {
        return Ok(()); // the defaults: nothing to say
    }
    writeln!(
        w,
        "topology manager: policy {}, scope {}; cpu manager: {}{}",
        t.policy,
        t.scope,
        t.cpu_manager_policy,
        if t.dry_run { " (dry run: nothing allocated, no plugin called)" } else { "" }
    )?;
    if !t.decisions.is_empty() {
        let mut tb = table(["CONTAINER", "PROVIDER", "RESOURCE", "REQUEST", "HINTS", "BEST", "VERDICT"]);
        for d in &t.decisions {
            let who = d.container.clone().unwrap_or_else(|| "(pod)".into());
            for (i, h) in d.hints.iter().enumerate() {
                let first = i == 0;
                tb.add_row([
                    if first { who.clone() } else { String::new() },
                    h.provider.clone(),
                    h.resource.clone().unwrap_or_else(|| "-".into()),
                    if h.resource.is_some() { h.request.to_string() } else { "-".into() },
                    if h.resource.is_some() { hints_text(&h.hints) } else { "no preference".into() },
                    if first { d.best.hint.clone() } else { String::new() },
                    if !first {
                        String::new()
                    } else if d.admit {
                        "admit".green().to_string()
                    } else {
                        "reject".red().to_string()
                    },
                ]);
            }
        }
        write_table(w, &tb)?;
    }
    if !t.placements.is_empty() {
        let mut tb = table(["CONTAINER", "RESOURCE", "NUMA", "IDS"]);
        for p in &t.placements {
            for n in &p.numa {
                let numa = if n.numa < 0 { "none".to_string() } else { n.numa.to_string() };
                tb.add_row([p.container.clone(), p.resource.clone(), numa, n.ids.join(",")]);
            }
        }
        write_table(w, &tb)?;
    }
    Ok(())
}
