//! Renderer for `dpctl explain`: for each kubelet text found in what the
//! user pasted, its reason, cause, releases and the command that confirms it.

use std::io::{self, Write};

use colored::Colorize;
use serde::Serialize;

use super::write_json;
use crate::kubelet_texts::KubeletText;

/// One text found, as JSON shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Match {
    /// The text's machine name.
    pub code: &'static str,
    /// The pod event's reason it comes with.
    pub reason: &'static str,
    /// The kubelet's text, `{}` where a value goes.
    pub template: &'static str,
    /// The values found in those places, in order.
    pub values: Vec<String>,
    /// The kubelet releases that say it.
    pub releases: &'static str,
    /// Why the kubelet says it.
    pub cause: &'static str,
    /// The dpctl command that confirms it.
    pub confirm: &'static str,
    /// kubelet-sim produces it.
    pub played_by_sim: bool,
}

/// `dpctl explain`'s answer.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The texts found, most specific first.
    pub matches: Vec<Match>,
}

impl Explanation {
    /// From what [`crate::kubelet_texts::explain`] found.
    pub fn new(found: Vec<(KubeletText, Vec<String>)>) -> Self {
        let matches = found
            .into_iter()
            .map(|(t, values)| Match {
                code: t.code,
                reason: t.reason,
                template: t.template,
                values,
                releases: t.releases,
                cause: t.cause,
                confirm: t.confirm,
                played_by_sim: t.played,
            })
            .collect();
        Explanation { matches }
    }
}

/// Renders the answer: a block per text found.
pub fn explanation(w: &mut dyn Write, format: super::Format, e: &Explanation) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, e);
    }
    for (i, m) in e.matches.iter().enumerate() {
        if i > 0 {
            writeln!(w)?;
        }
        writeln!(w, "{} ({})", m.reason.bold(), m.code)?;
        writeln!(w, "  text:     {}", m.template)?;
        if !m.values.is_empty() {
            writeln!(w, "  values:   {}", m.values.join(" | "))?;
        }
        writeln!(w, "  cause:    {}", m.cause)?;
        writeln!(w, "  releases: {}", m.releases)?;
        writeln!(w, "  confirm:  {}", m.confirm)?;
    }
    Ok(())
}
