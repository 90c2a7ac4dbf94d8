//! What a CI engineer sees from `dpctl smoke` in GitHub Actions: one JSON
//! shape for any number of releases, JUnit names unique per release,
//! `::error` annotations with the rule and the evidence, each step printed
//! once, and table cells whole when stdout is not a terminal.

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
    assert!(errors.iter().all(|l| l.contains("(kubelet-1.37)")), "{errors:#?}");
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
    let one = smoke(&["-o", "json"], &[], &[]).await;
    one.expect_code(0);
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
