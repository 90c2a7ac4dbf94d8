//! `dpctl doctor merge`: many nodes' `dpctl doctor -o json` reports (as
//! `kubectl logs -l ...` prints them: one JSON line per run, or pretty JSON,
//! with or without kubectl's `--prefix`) folded into one view: a summary per
//! node and every finding that is not ok, each with its node.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::{DoctorReport, Finding, Severity};
use crate::error::{Error, Result};

/// One node's latest report, counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeSummary {
    /// The node (`--node` / `DPCTL_NODE_NAME`), or `(unnamed, line N)`.
    pub node: String,
    /// The worst severity in its report.
    pub worst: Severity,
    /// Findings that are ok.
    pub ok: usize,
    /// Warnings.
    pub warnings: usize,
    /// Errors.
    pub errors: usize,
    /// How long its doctor run took.
    pub took_ms: u64,
    /// The kubelet release its findings were judged by.
    pub kubelet_version: String,
    /// Its device-plugin directory (with the `--root` prefix).
    pub dir: String,
    /// Which input its report came from (a file, or `stdin`).
    pub source: String,
    /// Where in that input its report starts (1-based line).
    pub line: usize,
}

/// One finding with the node it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeFinding {
    /// The node.
    pub node: String,
    /// The finding.
    #[serde(flatten)]
    pub finding: Finding,
}

/// A stretch of input that was not a doctor report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Which input (a file, or `stdin`).
    pub source: String,
    /// 1-based line.
    pub line: usize,
    /// Why.
    pub why: String,
}

/// The merged view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergedReport {
    /// One row per node, worst first, then by name.
    pub nodes: Vec<NodeSummary>,
    /// Findings of every node (only warnings and errors unless `all`), in node order.
    pub findings: Vec<NodeFinding>,
    /// Input that was not a report (kubectl's own messages, a cut line).
    pub skipped: Vec<Skipped>,
}

impl MergedReport {
    /// The worst severity over every node.
    pub fn worst(&self) -> Severity {
        self.nodes.iter().map(|n| n.worst).max().unwrap_or(Severity::Ok)
    }
}

/// Strips kubectl's `--prefix` (`[pod/NAME/CONTAINER] `) from a line.
fn strip_prefix(line: &str) -> &str {
    if line.starts_with('[')
        && let Some(end) = line.find("] ")
    {
        return &line[end + 2..];
    }
    line
}

/// Merges the reports found in `text` (`place` names it in errors). A
/// node's later report replaces its earlier one. Input without a single
/// report is bad input.
pub fn merge(text: &str, place: &str, all: bool) -> Result<MergedReport> {
    merge_sources(&[(place, text)], all)
}

/// Like [`merge`] over several inputs `(place, text)`, read in order.
pub fn merge_sources(sources: &[(&str, &str)], all: bool) -> Result<MergedReport> {
    let mut latest: BTreeMap<String, (String, usize, DoctorReport)> = BTreeMap::new();
    let mut skipped = Vec::new();
    for (place, text) in sources {
        scan(place, text, &mut latest, &mut skipped);
    }
    if latest.is_empty() {
        let places: Vec<&str> = sources.iter().map(|(p, _)| *p).collect();
        return Err(Error::invalid(
            places.join(", "),
            "no dpctl doctor report in it: feed the output of `dpctl doctor -o json` (one report per line, as \
             `kubectl logs -l app.kubernetes.io/name=dpctl-doctor --tail=1` prints the DaemonSet's)",
        ));
    }
    summarise(&latest, skipped, all)
}

/// Finds the reports in one input.
fn scan(
    place: &str,
    text: &str,
    latest: &mut BTreeMap<String, (String, usize, DoctorReport)>,
    skipped: &mut Vec<Skipped>,
) {
    let skip = |line: usize, why: String| Skipped { source: place.to_string(), line, why };
    let mut pos = 0usize;
    let mut line_no = 1usize;
    // Moves `pos` to `to`, counting the lines passed.
    let advance = |pos: &mut usize, line_no: &mut usize, to: usize| {
        *line_no += text.get(*pos..to).unwrap_or_default().matches('\n').count();
        *pos = to;
    };
    while pos < text.len() {
        let rest = text.get(pos..).unwrap_or_default();
        let line_end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let line = rest.get(..line_end).unwrap_or_default();
        let body = strip_prefix(line.trim_start());
        if body.trim().is_empty() {
            {
                let to = pos + line_end;
                advance(&mut pos, &mut line_no, to)
            };
            continue;
        }
        if !body.starts_with('{') {
            skipped.push(skip(line_no, "not JSON".into()));
            {
                let to = pos + line_end;
                advance(&mut pos, &mut line_no, to)
            };
            continue;
        }
        // The JSON value may span lines (pretty JSON from a one-shot run).
        let start = pos + (line.len() - body.len());
        let json = text.get(start..).unwrap_or_default();
        let mut stream = serde_json::Deserializer::from_str(json).into_iter::<serde_json::Value>();
        match stream.next() {
            Some(Ok(value)) => {
                let report_line = line_no;
                advance(&mut pos, &mut line_no, start + stream.byte_offset());
                match serde_json::from_value::<DoctorReport>(value) {
                    Ok(report) => {
                        let node = match report.node.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
                            Some(n) => n.to_string(),
                            None => format!("(unnamed, {place} line {report_line})"),
                        };
                        latest.insert(node, (place.to_string(), report_line, report));
                    }
                    Err(e) => skipped.push(skip(report_line, format!("JSON, but not a doctor report: {e}"))),
                }
            }
            Some(Err(e)) => {
                skipped.push(skip(line_no, format!("cut or broken JSON: {e}")));
                {
                    let to = pos + line_end;
                    advance(&mut pos, &mut line_no, to)
                };
            }
            None => {
                let to = pos + line_end;
                advance(&mut pos, &mut line_no, to)
            }
        }
    }
}

/// Counts each node's latest report and lists the findings.
fn summarise(
    latest: &BTreeMap<String, (String, usize, DoctorReport)>,
    skipped: Vec<Skipped>,
    all: bool,
) -> Result<MergedReport> {
    let mut nodes: Vec<NodeSummary> = latest
        .iter()
        .map(|(node, (source, line, r))| {
            let (ok, warnings, errors) = r.counts();
            NodeSummary {
                node: node.clone(),
                worst: r.worst(),
                ok,
                warnings,
                errors,
                took_ms: r.took_ms,
                kubelet_version: r.kubelet_version.to_string(),
                dir: r.dir.clone(),
                source: source.clone(),
                line: *line,
            }
        })
        .collect();
    nodes.sort_by(|a, b| b.worst.cmp(&a.worst).then_with(|| a.node.cmp(&b.node)));
    let mut findings = Vec::new();
    for n in &nodes {
        if let Some((_, _, r)) = latest.get(&n.node) {
            findings.extend(
                r.findings
                    .iter()
                    .filter(|f| all || f.severity != Severity::Ok)
                    .map(|f| NodeFinding { node: n.node.clone(), finding: f.clone() }),
            );
        }
    }
    Ok(MergedReport { nodes, findings, skipped })
}

/// Reads the reports in `files` (`-` is stdin; none: stdin, which must not be
/// a terminal) and merges them (see [`merge_sources`]).
pub fn merge_files(files: &[PathBuf], all: bool) -> Result<MergedReport> {
    let stdin = || {
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(std::io::stdin(), crate::input::MAX_FILE_BYTES),
            &mut text,
        )
        .map_err(|e| crate::error::Error::io("reading stdin", e))?;
        Ok::<_, crate::error::Error>(text)
    };
    if files.is_empty() && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(crate::error::Error::invalid(
            "dpctl doctor merge",
            "stdin is a terminal: pipe reports in (`kubectl logs -l ... --tail=1 | dpctl doctor merge`) or name files",
        ));
    }
    let mut inputs: Vec<(String, String)> = Vec::new();
    if files.is_empty() {
        inputs.push(("stdin".into(), stdin()?));
    }
    for f in files {
        if f.as_os_str() == "-" {
            inputs.push(("stdin".into(), stdin()?));
        } else {
            let place = f.display().to_string();
            let text = crate::input::read_text(f, &place)?;
            inputs.push((place, text));
        }
    }
    let sources: Vec<(&str, &str)> = inputs.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    merge_sources(&sources, all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(node: Option<&str>, sev: Severity, subject: &str) -> DoctorReport {
        DoctorReport {
            node: node.map(str::to_string),
            root: "/host".into(),
            dir: "/host/var/lib/kubelet/device-plugins".into(),
            kubelet_version: crate::kubelet_version::KubeletVersion::DEFAULT,
            findings: vec![Finding {
                severity: sev,
                check: "socket".into(),
                code: "plugin-live".into(),
                subject: subject.into(),
                evidence: "e".into(),
                hint: None,
            }],
            took_ms: 3,
        }
    }

    #[test]
    fn lines_pretty_json_prefixes_and_junk() {
        let a1 = serde_json::to_string(&report(Some("a"), Severity::Error, "old")).unwrap();
        let a2 = serde_json::to_string(&report(Some("a"), Severity::Warning, "new")).unwrap();
        let b = serde_json::to_string_pretty(&report(Some("b"), Severity::Ok, "fine")).unwrap();
        let text = format!(
            "{a1}\nError from server (NotFound): pods \"x\" not found\n[pod/dpctl-doctor-q/doctor] {a2}\n{b}\n{{\"findings\": 1}}\n{{\"cut"
        );
        let m = merge(&text, "stdin", false).unwrap();
        let names: Vec<&str> = m.nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(names, ["a", "b"], "worst first; a's later report replaced its first");
        assert_eq!(m.nodes[0].worst, Severity::Warning);
        assert_eq!(m.findings.len(), 1);
        assert_eq!(m.findings[0].finding.subject, "new");
        assert!(m.skipped.iter().all(|s| s.source == "stdin"));
        let lines: Vec<usize> = m.skipped.iter().map(|s| s.line).collect();
        assert_eq!(lines, [2, 3 + b.lines().count() + 1, 3 + b.lines().count() + 2], "{:?}", m.skipped);
        assert_eq!(m.worst(), Severity::Warning);
        assert_eq!(merge(&text, "stdin", true).unwrap().findings.len(), 2);
    }

    #[test]
    fn several_inputs_keep_their_own_line_numbers() {
        let a = serde_json::to_string(&report(Some("a"), Severity::Ok, "x")).unwrap();
        let m = merge_sources(&[("one.json", &format!("{a}\njunk\n")), ("two.json", "junk\n")], false).unwrap();
        let at: Vec<(&str, usize)> = m.skipped.iter().map(|s| (s.source.as_str(), s.line)).collect();
        assert_eq!(at, [("one.json", 2), ("two.json", 1)]);
        assert_eq!(m.nodes[0].source, "one.json");
        let e = merge_sources(&[("one.json", "junk"), ("two.json", "")], false).unwrap_err();
        assert!(e.to_string().contains("one.json, two.json"), "{e}");
    }

    #[test]
    fn no_report_is_bad_input() {
        let e = merge("hello\n", "stdin", false).unwrap_err();
        assert!(matches!(e, Error::Invalid { .. }), "{e}");
        assert!(e.to_string().contains("no dpctl doctor report"), "{e}");
    }

    #[test]
    fn unnamed_reports_are_kept_apart() {
        let r = serde_json::to_string(&report(None, Severity::Ok, "x")).unwrap();
        let m = merge(&format!("{r}\n{r}\n"), "stdin", false).unwrap();
        let names: Vec<&str> = m.nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(names, ["(unnamed, stdin line 1)", "(unnamed, stdin line 2)"]);
    }
}
