//! What a CI engineer sees from `dpctl smoke` in GitHub Actions: one JSON
//! shape for any number of releases, JUnit names carrying the release (one
//! run or several), one `::error` annotation per failed step across
//! releases (none for what failed after it) with the rule and the evidence,
//! the step summary, a stable view that diffs clean, `--only`, each step
//! printed once, and table cells and narration whole when not a terminal.

use std::time::Duration;

use crate::support::{Sandbox, dpctl_bin, dpctl_command, run_bounded};

const GPU: &str = "example.com/gpu";

async fn smoke(flags: &[&str], extra: &[&str], env: &[(&str, &str)]) -> crate::support::Run {
    let mut args = vec!["smoke", "--stream-window", "300ms", "--restart-deadline", "3s", "--skip", "kubelet-restart"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", dpctl_bin(), "mock-plugin", "--dir", "{dir}", "--resource", GPU]);
    args.extend_from_slice(extra);
    let mut cmd = dpctl_command();
    cmd.args(&args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_bounded(cmd, &args, Duration::from_secs(90)).await
}

/// docs/kubelet-versions.md §2: Register twice on one socket passes on 1.36
/// and fails on 1.37 (PR #135437). Under GITHUB_ACTIONS=true the failure is
/// an `::error` annotation naming the step, the release, the rule and the
/// evidence; JUnit classnames and names carry `kubelet-1.NN`; the JSON has
/// `runs` whether one release or two is asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_actions_gets_annotations_unique_junit_names_and_one_json_shape() {
    let sb = Sandbox::new();
    let junit = sb.join("m.xml");
    let flags = ["--kubelet-version", "1.36,1.37", "-o", "json", "--junit", junit.to_str().unwrap()];
    let run = smoke(&flags, &["--register-twice"], &[("GITHUB_ACTIONS", "true")]).await;
    run.expect_code(1);
    let v = run.json();
    assert_eq!(v["failed"], serde_json::json!(["1.37"]), "{v:#}");
    let errors: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with("::error ")).collect();
    assert!(!errors.is_empty(), "{}", run.stderr);
    assert!(errors.iter().all(|l| l.contains(" failed on kubelet 1.37::")), "{errors:#?}");
    assert!(errors.iter().all(|l| l.contains("%0Arule: ") && l.contains("%0Areason: ")), "{errors:#?}");
    assert!(!run.stdout.contains("::error"), "annotations stay off stdout (it carries JSON)");

    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("JUnit parses");
    let cases: Vec<(String, String)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|n| (n.attribute("classname").unwrap().to_string(), n.attribute("name").unwrap().to_string()))
        .collect();
    let unique: std::collections::BTreeSet<&(String, String)> = cases.iter().collect();
    assert_eq!(unique.len(), cases.len(), "each (classname, name) once: {cases:#?}");
    assert!(cases.contains(&("dpctl.smoke.kubelet-1.36".into(), "registration (kubelet-1.36)".into())), "{cases:#?}");
    assert!(cases.contains(&("dpctl.smoke.kubelet-1.37".into(), "registration (kubelet-1.37)".into())), "{cases:#?}");

    // One release: the same `runs`, `passed`, `failed` (and the run's own fields, as before).
    let one_xml = sb.join("one.xml");
    let one = smoke(&["-o", "json", "--junit", one_xml.to_str().unwrap()], &[], &[]).await;
    one.expect_code(0);
    // A matrix job's one release: the JUnit names carry it all the same, so the jobs' files merge.
    let xml = std::fs::read_to_string(&one_xml).unwrap();
    assert!(
        xml.contains(r#"<testcase name="registration (kubelet-1.37)" classname="dpctl.smoke.kubelet-1.37""#),
        "{xml}"
    );
    assert!(!xml.contains(r#"<testcase name="registration""#), "{xml}");
    let o = one.json();
    assert_eq!(o["runs"].as_array().map(Vec::len), Some(1), "{o:#}");
    assert_eq!(o["passed"], serde_json::json!(["1.37"]));
    assert_eq!(o["runs"][0]["steps"], o["steps"]);
    assert!(!one.stderr.contains("::error"), "no annotations outside GitHub Actions");
}

/// Each step once: the table on stdout has it, stderr does not repeat it;
/// with stdout a pipe the DETAIL cells are whole (no `…`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_step_is_printed_once_and_cells_are_whole_in_a_pipe() {
    let run = smoke(&[], &["--devices", "2", "--pre-start", "--preferred", "pack"], &[]).await;
    run.expect_code(0);
    let admission = run.stdout.lines().find(|l| l.starts_with("admission ")).unwrap();
    assert!(!admission.contains('…'), "{admission}");
    assert!(admission.len() > 150, "whole evidence: {admission}");
    for step in ["registration", "admission", "allocate-healthy"] {
        assert_eq!(run.stdout.lines().filter(|l| l.starts_with(&format!("{step} "))).count(), 1, "{}", run.stdout);
        assert!(!run.stderr.lines().any(|l| l.contains(&format!(" {step} "))), "{}", run.stderr);
    }
}

/// One fault (Allocate answers Internal) on three releases: 9 failures
/// (allocate-healthy, then admission and node-reboot after it, on each), one
/// annotation naming the three releases and what failed after it; the step
/// summary appended to `$GITHUB_STEP_SUMMARY` (what was there is kept) with
/// a row per step and a column per release; stderr narration whole (not a
/// terminal) even with -o json.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_fault_on_three_releases_is_one_annotation_and_a_step_summary() {
    let sb = Sandbox::new();
    let summary = sb.join("summary.md");
    std::fs::write(&summary, "## an earlier step's summary\n").unwrap();
    let env = [("GITHUB_ACTIONS", "true"), ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap())];
    let flags = ["--kubelet-version", "1.35-1.37", "-o", "json", "--settle", "1s"];
    let run = smoke(&flags, &["--error", "allocate=internal:boom"], &env).await;
    run.expect_code(1);
    let v = run.json();
    let failed: usize =
        v["runs"].as_array().unwrap().iter().map(|r| r["totals"]["failed"].as_u64().unwrap() as usize).sum();
    assert_eq!(failed, 9, "{v:#}");
    let errors: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with("::error ")).collect();
    assert_eq!(errors.len(), 1, "one annotation per failed step, none for follow-ons: {errors:#?}");
    let e = errors[0];
    assert!(
        e.starts_with("::error title=dpctl smoke%3A allocate-healthy failed on kubelet 1.35%2C 1.36%2C 1.37::"),
        "{e}"
    );
    assert!(e.contains("Internal: boom") && e.contains("%0Arule: ") && e.contains("%0Areason: "), "{e}");
    assert!(e.ends_with("not annotated (they may follow from it): admission, node-reboot"), "{e}");

    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.starts_with(
            "## an earlier step's summary\n### dpctl smoke: FAIL on kubelet 1.35, 1.36, 1.37 (passed: none)\n"
        ),
        "{md}"
    );
    for row in [
        "| step | 1.35 | 1.36 | 1.37 |",
        "| launch | ✅ pass | ✅ pass | ✅ pass |",
        "| allocate-healthy | ❌ fail | ❌ fail | ❌ fail |",
        "| admission | ❌ fail ↳ | ❌ fail ↳ | ❌ fail ↳ |",
        "| node-reboot | ❌ fail ↳ | ❌ fail ↳ | ❌ fail ↳ |",
        "| kubelet-restart | ⏭️ skip | ⏭️ skip | ⏭️ skip |",
        "| shutdown | ✅ pass | ✅ pass | ✅ pass |",
        "**allocate-healthy** fail on kubelet 1.35, 1.36, 1.37",
        "- failed after it (↳, may follow from it): admission, node-reboot",
    ] {
        assert!(md.lines().any(|l| l == row), "{row:?} in\n{md}");
    }
    assert_eq!(md.lines().filter(|l| l.starts_with("| ")).count(), 1 + v["runs"][0]["steps"].as_array().unwrap().len());

    // stderr is a pipe here: the narration of a failed step keeps its whole evidence.
    let admission = run.stderr.lines().find(|l| l.starts_with("fail  admission")).unwrap();
    assert!(!admission.contains('…') && admission.len() > 150, "{admission}");
    assert!(admission.ends_with("code = Internal desc = boom, which is unexpected"), "{admission}");
}

/// `--stable`: two runs of the same mock plugin print the same bytes (the
/// full `-o json` differs in pids, directories and times), with each step's
/// name and outcome and no evidence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_of_one_plugin_give_byte_identical_stable_output() {
    let flags = ["--stable", "--settle", "1s"];
    let first = smoke(&flags, &["--devices", "2"], &[]).await;
    let second = smoke(&flags, &["--devices", "2"], &[]).await;
    first.expect_code(0);
    second.expect_code(0);
    assert_eq!(first.stdout, second.stdout, "byte-identical");
    let v = first.json();
    assert_eq!(v["passed"], serde_json::json!(["1.37"]));
    let run = &v["runs"][0];
    assert_eq!(run["engine"], "kubelet-sim");
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps[0], serde_json::json!({"name": "launch", "outcome": "pass"}));
    assert!(steps.iter().all(|s| s.as_object().unwrap().len() == 2), "{steps:#?}");
    for volatile in ["/tmp/", "pid", "duration_ms", "started", "evidence"] {
        assert!(!first.stdout.contains(volatile), "{volatile} in {}", first.stdout);
    }
    // stdout carries no table, so the narration tells each step.
    assert!(first.stderr.lines().any(|l| l.starts_with("pass  admission")), "{}", first.stderr);
}

/// `smoke --only`: the steps and checks named run (with launch,
/// registration and shutdown, which the others need); every other one is
/// skipped and says it was not named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_runs_the_named_steps_and_checks() {
    let run = smoke(&["-o", "json", "--only", "admission,allocate-healthy"], &[], &[]).await;
    run.expect_code(0);
    let v = run.json();
    let steps = v["steps"].as_array().unwrap();
    let ran: Vec<&str> = steps.iter().filter(|s| s["outcome"] != "skip").map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(ran, ["launch", "registration", "allocate-healthy", "admission", "shutdown"], "{v:#}");
    for s in steps.iter().filter(|s| s["outcome"] == "skip") {
        assert_eq!(s["evidence"], "skipped: not named in --only", "{s:#}");
    }
}
