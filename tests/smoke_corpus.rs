//! smoke's lifecycle corpus entries beyond their docs/smoke-corpus.md rows
//! (which tests/corpus.rs runs): the exact set of steps a crash fails and
//! skips, the fault always undone, and the failure block printing the log
//! of the process a failed step judged.

use crate::smoke::{GPU, assert_failed, failed, mock, smoke, step};
use crate::support::{Sandbox, dpctl_bin, dpctl_command, run_bounded};

/// The lifecycle steps with short windows (the slow parallel-calls check
/// left out: it judges nothing of the lifecycle).
const LIFE: [&str; 12] = [
    "--stream-window",
    "300ms",
    "--restart-deadline",
    "3s",
    "--recovery-deadline",
    "1500ms",
    "--settle",
    "1s",
    "--grace",
    "500ms",
    "--skip",
    "parallel-calls",
];

/// One corpus entry: the mock's fault flags, the step that must fail, the
/// pieces its evidence must name, and every step that fails.
struct Entry {
    fault: &'static [&'static str],
    step: &'static str,
    evidence: &'static [&'static str],
    fails: &'static [&'static str],
}

/// Runs the entry's plugin through the lifecycle steps and checks the catch.
async fn caught(e: &Entry) -> serde_json::Value {
    let (run, v) = smoke(&LIFE, &mock(e.fault)).await;
    run.expect_code(1);
    assert_failed(&v, e.step, e.evidence);
    let mut want: Vec<String> = e.fails.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(failed(&v), want, "{:#}", v["steps"]);
    v
}

// A crash some seconds after any kubelet restart (the old stream's Send
// fails, the plugin closes its update channel, the next update panics with
// `send on closed channel`): kubelet-restart watches the same process for
// the settle window and fails with its exit status and its last output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_a_kubelet_restart_fails_kubelet_restart_in_the_settle_window() {
    let v = caught(&Entry {
        fault: &["--crash-after-restart", "300ms"],
        step: "kubelet-restart",
        evidence: &["settle window after the kubelet restart", "exited with code 2", "panic: send on closed channel"],
        fails: &["kubelet-restart"],
    })
    .await;
    // The steps on the dead process say why they did not run.
    for name in ["health-recovery", "device-rescan", "node-reboot", "plugin-restart"] {
        let s = step(&v, name);
        let ev = s["evidence"].as_str().unwrap();
        assert_eq!(s["outcome"], "skip", "{s:#}");
        assert!(ev.contains("exited with code 2") && ev.ends_with("(see kubelet-restart)"), "{s:#}");
    }
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs[0]["started_by"], "launch");
    assert!(procs[0]["judged_in"].as_array().unwrap().iter().any(|s| s == "kubelet-restart"), "{procs:?}");
    assert!(procs[0]["stderr"]["tail"].as_str().unwrap().contains("panic: send on closed channel"));
}

// The fault is always undone: a fault the plugin never reports (a stale
// stream) fails health-recovery, and --recover-command still runs, once per
// --fault-command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recover_command_runs_whenever_the_fault_command_ran() {
    let sb = Sandbox::new();
    let (faults, recovers) = (sb.join("faults"), sb.join("recovers"));
    let set = |health: &str, log: &std::path::Path| {
        format!(
            "echo x >> {}; {} mock-plugin set-health --dir {{dir}} {GPU} GPU-1 {health}",
            log.display(),
            dpctl_bin()
        )
    };
    let (fault, recover) = (set("unhealthy", &faults), set("healthy", &recovers));
    let mut flags = LIFE.to_vec();
    flags.extend(["--fault-command", &fault, "--recover-command", &recover]);
    let (run, v) = smoke(&flags, &mock(&["--stale-stream-after-restart"])).await;
    run.expect_code(1);
    assert_failed(
        &v,
        "health-recovery",
        &["the fault never reached", "the fault was cleared afterwards (--recover-command"],
    );
    let count = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default().lines().count();
    assert!(count(&faults) >= 1, "the fault command ran");
    assert_eq!(count(&faults), count(&recovers), "every fault cleared");
}

// The failure block under the table prints the log of the process the
// failed steps judged (the first one, whose stream went stale), not the
// last one started; --log-dir keeps each process's output under the step
// that started it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_failure_block_shows_the_judged_process_and_each_process_has_its_log() {
    let sb = Sandbox::new();
    let logs = sb.join("logs");
    let mut args = vec!["smoke", "--log-dir", logs.to_str().unwrap()];
    args.extend(LIFE);
    args.push("--");
    args.extend(mock(&["--stale-stream-after-restart"]));
    let mut cmd = dpctl_command();
    cmd.args(&args);
    let run = run_bounded(cmd, &args, std::time::Duration::from_secs(60)).await;
    run.expect_code(1);
    let out = &run.stdout;
    assert!(out.contains("started by launch, failed health-recovery, device-rescan"), "{out}");
    assert!(!out.contains("started by plugin-restart"), "{out}");
    for by in ["launch", "node-reboot", "plugin-restart"] {
        let log = std::fs::read_to_string(logs.join(format!("{by}.stdout.log"))).unwrap();
        assert!(log.contains("registered"), "{by}: {log}");
        assert!(out.contains(&logs.join(format!("{by}.stdout.log")).display().to_string()), "{out}");
    }
    let launch = std::fs::read_to_string(logs.join("launch.stdout.log")).unwrap();
    assert!(launch.contains("set Unhealthy") || launch.contains("GPU-0"), "{launch}");
}
