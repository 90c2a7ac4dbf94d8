//! What a person at a terminal sees, pinned at 80 and 200 columns through a
//! pseudo-terminal: tables that fit (stacked below 100 columns, cuts marked
//! `…`, pipes whole), `-h` under a screen, one error style, and the texts a
//! plugin author reads when chasing UnexpectedAdmissionError.

use std::time::Duration;

use dpctl::kubelet_sim::PodSpec;
use dpctl::mock_plugin::{MockConfig, MockPlugin, ResourceConfig};

use crate::support::pty::{on_terminal, too_wide};
use crate::support::{Sandbox, dpctl, sim, unregistered_mock};

const GPU: &str = "example.com/gpu";

/// `plugin check` at 80 columns is stacked (every line fits, every check
/// named under its header), at 200 a table whose rows fit, each cut marked;
/// through a pipe every row is whole.
#[tokio::test]
async fn plugin_check_fits_80_and_200_columns_and_pipes_keep_rows_whole() {
    let sb = Sandbox::new();
    let (_h, socket) = unregistered_mock(&sb, ResourceConfig::new(GPU, 2)).await;
    let narrow = on_terminal(&["plugin", "check", "--socket", &socket, "-q"], 80).await;
    narrow.expect_code(0);
    // The table's lines; the summary after it is prose the terminal wraps.
    let table = |s: &str| s.split("\n\n").filter(|b| !b.contains(" checks: ")).collect::<Vec<_>>().join("\n");
    assert_eq!(too_wide(&table(&narrow.stdout), 80), Vec::<&str>::new(), "{}", narrow.stdout);
    assert!(narrow.stdout.lines().any(|l| l == "CHECK   options-answer"), "{}", narrow.stdout);
    assert!(narrow.stdout.lines().any(|l| l.starts_with("RESULT  pass")), "{}", narrow.stdout);
    let wide = on_terminal(&["plugin", "check", "--socket", &socket, "-q"], 200).await;
    wide.expect_code(0);
    assert_eq!(too_wide(&wide.stdout, 200), Vec::<&str>::new(), "{}", wide.stdout);
    let header = wide.stdout.lines().find(|l| l.starts_with("CHECK")).unwrap();
    assert!(header.contains("RESULT") && header.contains("DETAIL"), "{}", wide.stdout);
    let piped = dpctl(&["plugin", "check", "--socket", &socket]).await;
    piped.expect_code(0);
    let long = piped.stdout.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(long > 80, "a pipe keeps rows whole, so some are long:\n{}", piped.stdout);
    assert!(!piped.stdout.contains('…'), "{}", piped.stdout);
    // A row too long for 200 columns is cut with a marker, never silently.
    for l in wide.stdout.lines().filter(|l| l.chars().count() == 200) {
        assert!(l.ends_with('…'), "cut without a marker: {l}");
    }
}

/// `-h` stays under a screen; the global options are printed once, by
/// `dpctl options`; the differences list is `dpctl help kubelet-versions`.
#[tokio::test]
async fn help_is_a_screen_and_reference_prose_has_its_own_place() {
    for cmd in
        [&["kubelet-sim", "-h"][..], &["smoke", "-h"], &["plugin", "check", "-h"], &["mock-plugin", "-h"], &["-h"]]
    {
        for cols in [80, 200] {
            let r = on_terminal(cmd, cols).await;
            r.expect_code(0);
            let lines = r.stdout.lines().count();
            assert!(lines <= 55, "dpctl {} at {cols} columns: {lines} lines\n{}", cmd.join(" "), r.stdout);
            assert!(!r.stdout.contains("--no-headers "), "global options repeated:\n{}", r.stdout);
            assert!(r.stdout.contains("dpctl options"), "{}", r.stdout);
        }
    }
    // mock-plugin's twenty faults are one paragraph in -h, every line of each in --help.
    for cols in [80, 200] {
        let short = on_terminal(&["mock-plugin", "-h"], cols).await;
        let out = &short.expect_code(0).stdout;
        assert!(out.contains("Faults (20 flags; each explained in --help): --error, --latency"), "{out}");
        assert!(out.contains("--register-once"), "every fault named: {out}");
        assert!(!out.contains("Fault: answer RPC with an error status"), "fault lines in -h: {out}");
        assert!(out.lines().all(|l| l.chars().count() <= usize::from(cols)), "wider than {cols}: {out}");
    }
    let long = dpctl(&["mock-plugin", "--help"]).await;
    let out = &long.expect_code(0).stdout;
    for line in ["Fault: answer RPC with an error status", "--register-once", "--hang-on-sigterm", "--devices <N>"] {
        assert!(out.contains(line), "{line} missing from --help:\n{out}");
    }
    let long = dpctl(&["kubelet-sim", "--help"]).await;
    long.expect_code(0);
    assert!(long.stdout.lines().count() < 200, "{}", long.stdout.lines().count());
    assert!(!long.stdout.contains("same resource registered again"), "differences list still in --help");
    assert!(long.stdout.contains("dpctl help kubelet-versions"), "{}", long.stdout);
    let topic = dpctl(&["help", "kubelet-versions"]).await;
    topic.expect_code(0);
    assert!(topic.stdout.contains("same resource registered again"), "{}", topic.stdout);
    assert!(topic.stdout.contains("DRA release rules"), "{}", topic.stdout);
    let topics = dpctl(&["help", "topics"]).await;
    topics.expect_code(0);
    for t in ["kubelet-versions", "isolate", "engines", "exit-codes"] {
        assert!(topics.stdout.contains(t), "{}", topics.stdout);
    }
    let sub = dpctl(&["help", "kubelet-sim", "restart"]).await;
    sub.expect_code(0);
    assert!(sub.stdout.contains("Usage: dpctl kubelet-sim restart"), "{}", sub.stdout);
    let options = dpctl(&["options"]).await;
    options.expect_code(0);
    for flag in ["--output", "--color", "--verbose", "--quiet", "--no-trunc", "--no-headers"] {
        assert!(options.stdout.contains(flag), "{flag}:\n{}", options.stdout);
    }
    let bad = dpctl(&["help", "no-such-thing"]).await;
    bad.expect_code(2);
    assert!(bad.stderr.starts_with("dpctl: error: "), "{}", bad.stderr);
}

/// Every error reads `dpctl: error: …` then `  hint: …`: clap's usage
/// errors, explain finding nothing, a zero deadline, a runtime error.
#[tokio::test]
async fn one_error_style() {
    let usage = dpctl(&["plugin", "call", "list", "--bogus"]).await;
    usage.expect_code(2);
    assert!(
        usage.stderr.starts_with("dpctl: error: unexpected argument '--bogus' found\n  hint: "),
        "{}",
        usage.stderr
    );
    assert!(usage.stderr.contains("usage: dpctl plugin call list [OPTIONS]"), "{}", usage.stderr);
    let explain = dpctl(&["explain", "hello"]).await;
    explain.expect_code(1);
    assert!(
        explain.stderr.starts_with("dpctl: error: no kubelet text dpctl knows in the input (5 characters)\n  hint: "),
        "{}",
        explain.stderr
    );
    for flag in ["--timeout", "--connect-timeout"] {
        let zero = dpctl(&["plugin", "call", "list", "--socket", "/nonexistent", flag, "0"]).await;
        zero.expect_code(2);
        assert!(zero.stderr.starts_with("dpctl: error: invalid value '0' for"), "{}", zero.stderr);
        assert!(zero.stderr.contains("is no time at all"), "{}", zero.stderr);
        assert!(zero.stderr.contains("\n  hint: --help says what each flag takes"), "{}", zero.stderr);
    }
    let runtime = dpctl(&["plugin", "call", "list", "--socket", "/nonexistent"]).await;
    runtime.expect_code(3);
    assert!(runtime.stderr.starts_with("dpctl: error: no socket at /nonexistent\n  hint: "), "{}", runtime.stderr);
}

/// `--socket <TAB>` offers sockets (and directories), not every file.
#[tokio::test]
async fn socket_flags_complete_sockets() {
    let bash = dpctl(&["completions", "bash"]).await.expect_code(0).stdout.clone();
    assert!(bash.contains("__dpctl_sockets() {"), "no socket filter in bash");
    let mut lines = bash.lines();
    let mut cases = 0;
    while let Some(l) = lines.next() {
        if l.trim() == "--socket)" {
            cases += 1;
            assert!(lines.next().unwrap().contains("__dpctl_sockets"), "a --socket case offers every file");
        }
    }
    assert!(cases > 5, "{cases} --socket cases");
    let zsh = dpctl(&["completions", "zsh"]).await.expect_code(0).stdout.clone();
    let socket_specs: Vec<&str> = zsh.lines().filter(|l| l.contains("--socket=[")).collect();
    assert!(!socket_specs.is_empty());
    assert!(socket_specs.iter().all(|l| l.contains("_files -g \"*(-=)\"")), "{socket_specs:#?}");
    let fish = dpctl(&["completions", "fish"]).await.expect_code(0).stdout.clone();
    let socket_lines: Vec<&str> = fish.lines().filter(|l| l.contains(" -l socket ")).collect();
    assert!(!socket_lines.is_empty());
    assert!(socket_lines.iter().all(|l| l.ends_with("-r -f -a '(__dpctl_sockets)'")), "{socket_lines:#?}");
}

/// The plugin author's node made by kubelet-sim: doctor reads the sim's own
/// PodResources socket (no flag), does not take it for a plugin, and after a
/// kubelet restart the plugin missed names the window with the kubelet's age
/// and fails; at 80 columns the evidence wraps under its label.
#[tokio::test]
async fn doctor_on_a_sim_directory_names_the_restart_window() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap().to_string();
    let kubelet = sim::start(sb.path(), |_| {}).await;
    let cfg = MockConfig {
        dir: Some(sb.path().to_path_buf()),
        resources: vec![ResourceConfig::new(GPU, 2)],
        ..MockConfig::default()
    };
    let mock = MockPlugin::start(cfg).await.expect("mock starts");
    sim::counts_are(&kubelet, GPU, 2, 2).await;
    kubelet.admit(PodSpec::shorthand("p", "default", &[(GPU.into(), 1)])).await.unwrap();
    let healthy = dpctl(&["doctor", "--dir", &dir, "-o", "json"]).await;
    healthy.expect_code(0);
    let j = healthy.json();
    let findings = j["findings"].as_array().unwrap();
    let podres = findings.iter().find(|f| f["check"] == "podresources").unwrap();
    assert!(podres["subject"].as_str().unwrap().ends_with("/pod-resources.sock"), "{podres}");
    assert_eq!(podres["severity"], "ok", "{podres}");
    assert!(findings.iter().all(|f| f["code"] != "not-a-device-plugin"), "{j:#}");
    assert!(findings.iter().any(|f| f["code"] == "kubelet-view-ok"), "{j:#}");
    // The suggested Allocate names a device no pod holds.
    let allocate = findings.iter().find(|f| f["code"] == "allocate-not-called").unwrap();
    let held = kubelet.status().pods[0].containers[0].devices[GPU][0].clone();
    let hint = allocate["hint"].as_str().unwrap();
    assert!(hint.contains("no pod holds it") && !hint.contains(&format!("--devices {held} ")), "{hint}");

    mock.stop().await.unwrap();
    kubelet.restart(Duration::from_millis(200)).await.unwrap();
    let r = dpctl(&["doctor", "--dir", &dir, "-o", "json"]).await;
    r.expect_code(1);
    let j = r.json();
    let f = j["findings"].as_array().unwrap().iter().find(|f| f["code"] == "not-registered-again").expect("finding");
    let ev = f["evidence"].as_str().unwrap();
    assert!(ev.starts_with("example.com/gpu has not registered again since the kubelet restarted "), "{ev}");
    assert!(ev.contains(" s ago (kubelet.sock's age)"), "{ev}");
    let narrow = on_terminal(&["doctor", "--dir", &dir], 80).await;
    assert_eq!(too_wide(&narrow.stdout, 80), Vec::<&str>::new(), "{}", narrow.stdout);
    assert!(
        narrow.stdout.lines().any(|l| l.starts_with("EVIDENCE  example.com/gpu has not registered")),
        "{}",
        narrow.stdout
    );
    let wide = on_terminal(&["doctor", "--dir", &dir], 200).await;
    assert_eq!(too_wide(&wide.stdout, 200), Vec::<&str>::new(), "{}", wide.stdout);
    assert!(wide.stdout.lines().any(|l| l.starts_with("RESULT ") && l.contains("EVIDENCE")), "{}", wide.stdout);
}

/// Texts that point the right way: kubelet.sock is named as the kubelet's
/// registration socket; explain's no-healthy-devices names the restart
/// window first; a dry run of an admitted pod judges a second pod like it.
#[tokio::test]
async fn plugin_author_texts() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap().to_string();
    let kubelet = sim::start(sb.path(), |_| {}).await;
    let kubelet_sock = format!("{dir}/kubelet.sock");
    let r = dpctl(&["plugin", "call", "list", "--socket", &kubelet_sock]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("not implemented by the server\n"), "{}", r.stderr);
    assert!(r.stderr.contains("is the kubelet's registration socket: it serves Registration"), "{}", r.stderr);
    let explain =
        dpctl(&["explain", "no healthy devices present; cannot allocate unhealthy devices example.com/gpu"]).await;
    explain.expect_code(0);
    assert!(
        explain.stdout.contains("most often the kubelet restarted and the plugin has not registered again yet"),
        "{}",
        explain.stdout
    );
    let cfg = MockConfig {
        dir: Some(sb.path().to_path_buf()),
        resources: vec![ResourceConfig::new(GPU, 2)],
        ..MockConfig::default()
    };
    let _mock = MockPlugin::start(cfg).await.expect("mock starts");
    sim::counts_are(&kubelet, GPU, 2, 2).await;
    dpctl(&["kubelet-sim", "admit", "--dir", &dir, "--allocate", "example.com/gpu=1", "--name", "one"])
        .await
        .expect_code(0);
    let dry = dpctl(&[
        "kubelet-sim",
        "admit",
        "--dir",
        &dir,
        "--dry-run",
        "--allocate",
        "example.com/gpu=1",
        "--name",
        "one",
    ])
    .await;
    dry.expect_code(0);
    assert!(dry.stdout.starts_with("default/one is already admitted and keeps its devices; judged as a second pod like it:\nwould be admitted default/one"), "{}", dry.stdout);
    let full = dpctl(&[
        "kubelet-sim",
        "admit",
        "--dir",
        &dir,
        "--dry-run",
        "--allocate",
        "example.com/gpu=2",
        "--name",
        "one",
    ])
    .await;
    full.expect_code(1);
    assert!(full.stdout.contains("would be rejected"), "{}", full.stdout);
}

/// `demo` at 80 columns: its prose is wrapped to the terminal (no line the
/// terminal would wrap again); at 200 at its own measure, 100 columns.
#[tokio::test]
async fn demo_prose_fits_80_columns() {
    let narrow = on_terminal(&["demo", "-q"], 80).await;
    narrow.expect_code(0);
    assert_eq!(too_wide(&narrow.stdout, 80), Vec::<&str>::new(), "{}", narrow.stdout);
    assert!(narrow.stdout.contains("Done:"), "{}", narrow.stdout);
    let wide = on_terminal(&["demo", "-q"], 200).await;
    wide.expect_code(0);
    assert_eq!(too_wide(&wide.stdout, 200), Vec::<&str>::new(), "{}", wide.stdout);
    let intro = wide.stdout.lines().next().unwrap();
    assert!(intro.starts_with("dpctl demo: a kubelet") && intro.chars().count() <= 100, "{}", wide.stdout);
    assert!(wide.stdout.lines().any(|l| l.chars().count() > 80), "{}", wide.stdout);
}
