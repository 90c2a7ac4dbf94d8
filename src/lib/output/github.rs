//! What GitHub Actions shows of `plugin check`, `smoke` and `dra smoke`:
//! `::error` annotations, one per failed step across releases, and the
//! Markdown step summary (a table of steps × releases). GitHub shows at most
//! 10 error annotations per step and 50 per job, so a fault that fails the
//! same step on ten releases must be one annotation, not ten, and the
//! failures that only follow from it none (docs/json.md §9).

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::check::{CheckResult, Outcome};
use crate::text::shorten;

/// True under GitHub Actions (`GITHUB_ACTIONS=true`): annotations are
/// written only there (the runner reads them on stderr too, so stdout stays data).
pub fn in_actions() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

/// One run's results: its release (`1.37`; none for `plugin check`) and
/// every case in run order.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The kubelet release played, for a smoke.
    pub release: Option<&'a str>,
    /// Every step and check, in run order.
    pub results: &'a [CheckResult],
}

/// How the failures of one run relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sequence {
    /// `plugin check`: each check makes its own calls, so each failure is
    /// its own; only a case that could not run (`error`) after a failure
    /// follows from it.
    Independent,
    /// `smoke`, `dra smoke`: each step works on the node the steps before
    /// left, so after the first failure every later one may follow from it.
    Ordered,
}

/// Widest evidence quoted in an annotation (GitHub cuts longer messages anyway).
const ANNOTATION_EVIDENCE: usize = 1500;

/// Most bytes of one step summary (GitHub takes up to 1 MiB per step; a
/// table of every release stays far below this).
pub const SUMMARY_LIMIT: usize = 64 * 1024;

/// Widest evidence quoted per failure in the step summary.
const SUMMARY_EVIDENCE: usize = 2000;

/// The failures of a run that are their own (`roots`) and the names of those
/// that follow from an earlier one.
fn split(results: &[CheckResult], seq: Sequence) -> (Vec<&CheckResult>, Vec<&str>) {
    let mut roots = Vec::new();
    let mut follow = Vec::new();
    for c in results.iter().filter(|c| c.outcome.is_failure()) {
        let after_one = !roots.is_empty();
        let own = match seq {
            Sequence::Independent => !(after_one && c.outcome == Outcome::Error),
            Sequence::Ordered => !after_one,
        };
        if own { roots.push(c) } else { follow.push(c.name.as_str()) }
    }
    (roots, follow)
}

/// True when `c` failed only after an earlier failure of its run (see [`Sequence`]).
fn is_follow_on(run: &Run<'_>, c: &CheckResult, seq: Sequence) -> bool {
    split(run.results, seq).1.contains(&c.name.as_str())
}

/// One annotation: a failed step, the releases it failed on, the first
/// release's result, and what failed after it on each.
struct Group<'a> {
    first: &'a CheckResult,
    releases: Vec<&'a str>,
    /// Every release's evidence is the first one's.
    same_evidence: bool,
    /// Per release (in order), the names that failed after this one.
    follow: Vec<(&'a str, Vec<&'a str>)>,
}

/// The failures of every run grouped by step, in the order they first failed.
fn groups<'a>(runs: &[Run<'a>], seq: Sequence) -> Vec<Group<'a>> {
    let mut order: Vec<&str> = Vec::new();
    let mut by_name: BTreeMap<&str, Group<'a>> = BTreeMap::new();
    for run in runs {
        let (roots, follow) = split(run.results, seq);
        let release = run.release.unwrap_or_default();
        for (i, c) in roots.iter().enumerate() {
            let g = by_name.entry(c.name.as_str()).or_insert_with(|| {
                order.push(c.name.as_str());
                Group { first: c, releases: Vec::new(), same_evidence: true, follow: Vec::new() }
            });
            g.same_evidence &= g.first.evidence == c.evidence;
            g.releases.push(release);
            // The follow-ons are told once, with the run's first failure.
            if i == 0 && !follow.is_empty() {
                g.follow.push((release, follow.clone()));
            }
        }
    }
    order.into_iter().filter_map(|n| by_name.remove(n)).collect()
}

/// `kubelet 1.35, 1.36, 1.37`, or nothing for `plugin check`.
fn on_releases(releases: &[&str]) -> String {
    let named: Vec<&str> = releases.iter().copied().filter(|r| !r.is_empty()).collect();
    if named.is_empty() { String::new() } else { format!("kubelet {}", named.join(", ")) }
}

/// What failed after a step: `admission, node-reboot` when every release
/// agrees, else per release.
fn follow_text(follow: &[(&str, Vec<&str>)]) -> String {
    let Some((_, first)) = follow.first() else { return String::new() };
    if follow.iter().all(|(_, f)| f == first) {
        return first.join(", ");
    }
    follow.iter().map(|(r, f)| format!("{} on {r}", f.join(", "))).collect::<Vec<_>>().join("; ")
}

/// GitHub Actions workflow commands (`::error title=...::...`): one per
/// failed step, naming every release it failed on (`what`: `dpctl smoke`),
/// with the first release's evidence, the rule and the reason; failures
/// that follow from an earlier one in their run are named in its message,
/// not annotated. The caller writes them only under `GITHUB_ACTIONS=true`.
pub fn annotations(w: &mut dyn Write, what: &str, runs: &[Run<'_>], seq: Sequence) -> io::Result<()> {
    for g in groups(runs, seq) {
        let on = on_releases(&g.releases);
        let title = if on.is_empty() {
            format!("{what}: {}", g.first.name)
        } else {
            format!("{what}: {} failed on {on}", g.first.name)
        };
        let mut body = shorten(&g.first.evidence, ANNOTATION_EVIDENCE);
        if !g.same_evidence {
            body.push_str(&format!(
                "\n(the evidence of kubelet {}; the step summary and the JUnit file have each release's)",
                g.releases[0]
            ));
        }
        body.push_str(&format!("\nrule: {}\nreason: {}", g.first.rule, g.first.reason));
        if !g.follow.is_empty() {
            body.push_str(&format!(
                "\nfailed after it, not annotated (they may follow from it): {}",
                follow_text(&g.follow)
            ));
        }
        writeln!(w, "::error title={}::{}", escape(&title, true), escape(&body, false))?;
    }
    Ok(())
}

/// Escapes a workflow command's property (`title`) or message.
fn escape(s: &str, property: bool) -> String {
    let mut out = s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A");
    if property {
        out = out.replace(':', "%3A").replace(',', "%2C");
    }
    out
}

/// The Markdown step summary GitHub shows on the run's page
/// (`$GITHUB_STEP_SUMMARY`; the caller appends it there): `verdict` as the
/// heading, a table of every step by release (a follow-on failure marked
/// ↳), then each failed step's evidence, rule and reason. At most
/// [`SUMMARY_LIMIT`] bytes: what does not fit is cut with a line saying so.
pub fn step_summary(w: &mut dyn Write, verdict: &str, runs: &[Run<'_>], seq: Sequence) -> io::Result<()> {
    let mut s = String::new();
    s.push_str(&format!("### {}\n\n", md(verdict)));
    table(&mut s, runs, seq);
    for g in groups(runs, seq) {
        let on = on_releases(&g.releases);
        let on = if on.is_empty() { String::new() } else { format!(" on {on}") };
        s.push_str(&format!("\n**{}** {}{on}\n\n", md(&g.first.name), g.first.outcome.as_str()));
        s.push_str(&format!("<pre>{}</pre>\n\n", html(&shorten(&g.first.evidence, SUMMARY_EVIDENCE))));
        s.push_str(&format!("- rule: {}\n- reason: {}\n", md(&g.first.rule), md(&g.first.reason)));
        if !g.follow.is_empty() {
            s.push_str(&format!("- failed after it (↳, may follow from it): {}\n", md(&follow_text(&g.follow))));
        }
    }
    w.write_all(bounded(s).as_bytes())?;
    w.flush()
}

/// The table: one row per step (in the first run's order, then any only a
/// later run has), one column per release.
fn table(s: &mut String, runs: &[Run<'_>], seq: Sequence) {
    let heads: Vec<String> =
        runs.iter().map(|r| r.release.map_or_else(|| "result".into(), |v| v.to_string())).collect();
    s.push_str(&format!("| step | {} |\n|---|{}\n", heads.join(" | "), "---|".repeat(runs.len())));
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        for c in r.results {
            if !names.contains(&c.name.as_str()) {
                names.push(&c.name);
            }
        }
    }
    for name in names {
        let cells: Vec<String> = runs
            .iter()
            .map(|r| match r.results.iter().find(|c| c.name == name) {
                None => "–".into(),
                Some(c) => cell(c, is_follow_on(r, c, seq)),
            })
            .collect();
        s.push_str(&format!("| {} | {} |\n", md(name), cells.join(" | ")));
    }
    s.push_str(
        "\n✅ pass · ❌ fail · ⚠️ error (could not run) · ⏭️ skip · ↳ failed after an earlier failure of its run\n",
    );
}

/// One table cell: the outcome with its mark.
fn cell(c: &CheckResult, follow_on: bool) -> String {
    let mark = match c.outcome {
        Outcome::Pass => "✅",
        Outcome::Fail => "❌",
        Outcome::Skip => "⏭️",
        Outcome::Error => "⚠️",
    };
    format!("{mark} {}{}", c.outcome.as_str(), if follow_on { " ↳" } else { "" })
}

/// `s` cut to [`SUMMARY_LIMIT`] bytes at a line, with a last line saying so.
fn bounded(s: String) -> String {
    const CUT: &str = "\n… (summary cut at 64 KiB: `-o json` and `--junit` have every result)\n";
    if s.len() <= SUMMARY_LIMIT {
        return s;
    }
    let mut end = SUMMARY_LIMIT - CUT.len();
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let end = s[..end].rfind('\n').unwrap_or(end);
    format!("{}{CUT}", &s[..end])
}

/// Text safe in a Markdown table cell or list item: no pipes, no line
/// breaks, no HTML.
fn md(s: &str) -> String {
    html(s).replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// Text safe inside HTML (`<pre>`).
fn html(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn r(name: &str, outcome: Outcome, evidence: &str) -> CheckResult {
        let info = crate::check::CaseInfo { name: "x", reason: "why", rule: "the rule" };
        CheckResult { name: name.into(), ..CheckResult::of(info, outcome, evidence, Duration::ZERO) }
    }

    /// One fault on three releases: allocate-healthy fails first on each,
    /// admission and node-reboot after it.
    fn three() -> Vec<Vec<CheckResult>> {
        ["1.35", "1.36", "1.37"]
            .iter()
            .map(|v| {
                vec![
                    r("launch", Outcome::Pass, "pid 1"),
                    r("allocate-healthy", Outcome::Fail, &format!("boom on {v}")),
                    r("distinct-devices", Outcome::Skip, "nothing to compare"),
                    r("admission", Outcome::Fail, "rejected"),
                    r("node-reboot", Outcome::Fail, "rejected again"),
                    r("shutdown", Outcome::Pass, "ok"),
                ]
            })
            .collect()
    }

    fn runs(all: &[Vec<CheckResult>]) -> Vec<Run<'_>> {
        let v = ["1.35", "1.36", "1.37"];
        all.iter().zip(v).map(|(results, release)| Run { release: Some(release), results }).collect()
    }

    #[test]
    fn one_annotation_per_failed_step_across_releases_and_none_for_follow_ons() {
        let all = three();
        let mut out = Vec::new();
        annotations(&mut out, "dpctl smoke", &runs(&all), Sequence::Ordered).unwrap();
        let s = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 1, "{s}");
        assert!(
            lines[0].starts_with(
                "::error title=dpctl smoke%3A allocate-healthy failed on kubelet 1.35%2C 1.36%2C 1.37::boom on 1.35%0A"
            ),
            "{s}"
        );
        assert!(lines[0].contains("%0Arule: the rule%0Areason: why%0A"), "{s}");
        assert!(lines[0].ends_with("not annotated (they may follow from it): admission, node-reboot"), "{s}");
    }

    #[test]
    fn plugin_check_annotates_each_failure_but_not_errors_after_one() {
        let results = [
            r("a", Outcome::Fail, "bad"),
            r("b", Outcome::Error, "no list"),
            r("c", Outcome::Fail, "also bad"),
            r("d", Outcome::Pass, "ok"),
        ];
        let mut out = Vec::new();
        annotations(&mut out, "dpctl plugin check", &[Run { release: None, results: &results }], Sequence::Independent)
            .unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(s.lines().count(), 2, "{s}");
        assert!(s.starts_with("::error title=dpctl plugin check%3A a::bad%0A"), "{s}");
        assert!(s.contains("::error title=dpctl plugin check%3A c::also bad%0A"), "{s}");
        assert!(s.contains("not annotated (they may follow from it): b"), "{s}");
    }

    #[test]
    fn the_summary_is_a_table_of_steps_by_release_then_each_failure() {
        let all = three();
        let mut out = Vec::new();
        step_summary(&mut out, "dpctl smoke: FAIL on kubelet 1.35, 1.36, 1.37", &runs(&all), Sequence::Ordered)
            .unwrap();
        let s = String::from_utf8(out).unwrap();
        let want = "### dpctl smoke: FAIL on kubelet 1.35, 1.36, 1.37\n\n\
            | step | 1.35 | 1.36 | 1.37 |\n|---|---|---|---|\n\
            | launch | ✅ pass | ✅ pass | ✅ pass |\n\
            | allocate-healthy | ❌ fail | ❌ fail | ❌ fail |\n\
            | distinct-devices | ⏭️ skip | ⏭️ skip | ⏭️ skip |\n\
            | admission | ❌ fail ↳ | ❌ fail ↳ | ❌ fail ↳ |\n\
            | node-reboot | ❌ fail ↳ | ❌ fail ↳ | ❌ fail ↳ |\n\
            | shutdown | ✅ pass | ✅ pass | ✅ pass |\n\n\
            ✅ pass · ❌ fail · ⚠️ error (could not run) · ⏭️ skip · ↳ failed after an earlier failure of its run\n\n\
            **allocate-healthy** fail on kubelet 1.35, 1.36, 1.37\n\n\
            <pre>boom on 1.35</pre>\n\n\
            - rule: the rule\n- reason: why\n\
            - failed after it (↳, may follow from it): admission, node-reboot\n";
        assert_eq!(s, want);
    }

    #[test]
    fn the_summary_is_bounded_and_escaped() {
        let results: Vec<CheckResult> =
            (0..200).map(|i| r(&format!("s{i}|<x>"), Outcome::Fail, &"e".repeat(5000))).collect();
        let mut out = Vec::new();
        let one = [Run { release: None, results: &results }];
        step_summary(&mut out, "v", &one, Sequence::Independent).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.len() <= SUMMARY_LIMIT, "{}", s.len());
        assert!(s.ends_with("have every result)\n"), "{}", &s[s.len() - 200..]);
        assert!(s.contains("| s0\\|&lt;x&gt; | ❌ fail |"), "{}", &s[..300]);
    }
}
