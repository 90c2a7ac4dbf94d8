//! `dpctl smoke -- COMMAND...` as a vendor's CI runs it, with dpctl's own
//! mock plugin as the vendor's plugin: well-behaved, every step passes (exit
//! 0); with each fault, the step or check that covers it fails with evidence
//! naming the fault (exit 1). Also a command that does not exist or exits at
//! once, a plugin that ignores SIGTERM, Ctrl-C, JUnit, --log-dir and --dir.
//! After every run the plugin process is gone and the fresh directory removed.

use std::collections::BTreeMap;
use std::time::Duration;

use dpctl::check::Case;

use crate::support::{Child, Run, Sandbox, dpctl, dpctl_bin, dpctl_command, run_bounded};

pub(crate) const GPU: &str = "example.com/gpu";

/// A smoke run may wait out the kubelet's 10 s dial-back timeout.
const SMOKE_WAIT: Duration = Duration::from_secs(40);

/// Runs `dpctl smoke -o json <flags> -- <command>` and parses the report;
/// the settle window is 1 s unless `flags` give `--settle`.
pub(crate) async fn smoke(flags: &[&str], command: &[&str]) -> (Run, serde_json::Value) {
    let mut args = vec!["smoke", "-o", "json"];
    if !flags.contains(&"--settle") {
        args.extend(["--settle", "1s"]);
    }
    args.extend_from_slice(flags);
    args.push("--");
    args.extend_from_slice(command);
    let mut cmd = dpctl_command();
    cmd.args(&args);
    let run = run_bounded(cmd, &args, SMOKE_WAIT).await;
    let report = run.json();
    assert_plugin_gone(&report);
    if !report["dir_kept"].as_bool().unwrap() {
        let dir = report["dir"].as_str().unwrap();
        assert!(!std::path::Path::new(dir).exists(), "the fresh directory {dir} is removed");
    }
    (run, report)
}

/// `dpctl mock-plugin` for GPU in the smoke directory, plus `extra` flags.
pub(crate) fn mock(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec![dpctl_bin(), "mock-plugin", "--dir", "{dir}", "--resource", GPU];
    v.extend_from_slice(extra);
    v
}

/// Short windows for runs that look for one failure.
pub(crate) const FAST: [&str; 4] = ["--stream-window", "300ms", "--restart-deadline", "2s"];

/// The plugin's pid from the report: it must not be running any more.
fn assert_plugin_gone(report: &serde_json::Value) {
    let Some(pid) = report["plugin"]["pid"].as_u64() else { return };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Gone, or at most a zombie waiting for init (a grandchild reparented).
    let state = stat.rsplit(')').next().and_then(|s| s.split_whitespace().next()).unwrap_or("");
    assert!(stat.is_empty() || state == "Z", "plugin pid {pid} still runs: {stat}");
}

pub(crate) fn outcomes(v: &serde_json::Value) -> BTreeMap<String, String> {
    v["steps"]
        .as_array()
        .expect("steps array")
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["outcome"].as_str().unwrap().to_string()))
        .collect()
}

pub(crate) fn step<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["steps"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no step {name}"))
}

pub(crate) fn failed(v: &serde_json::Value) -> Vec<String> {
    outcomes(v).into_iter().filter(|(_, o)| o == "fail" || o == "error").map(|(n, _)| n).collect()
}

/// Asserts `name` failed with evidence containing every piece of `needles`.
#[track_caller]
pub(crate) fn assert_failed(v: &serde_json::Value, name: &str, needles: &[&str]) {
    let s = step(v, name);
    assert_eq!(s["outcome"], "fail", "{name}: {s:#}");
    let ev = s["evidence"].as_str().unwrap();
    for n in needles {
        assert!(ev.contains(n), "{name} evidence lacks {n:?}: {ev}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_well_behaved_plugin_passes_every_step_and_junit_parses() {
    let sb = Sandbox::new();
    let junit = sb.join("smoke.xml");
    let flags = ["--junit", junit.to_str().unwrap(), "--request", "2"];
    let cmd = mock(&[
        "--devices",
        "4",
        "--numa-nodes",
        "2",
        "--preferred",
        "pack",
        "--pre-start",
        "--cdi",
        "example.com/gpu={id}",
    ]);
    let (run, v) = smoke(&flags, &cmd).await;
    run.expect_code(0);
    assert!(failed(&v).is_empty(), "{:#}", v["steps"]);
    let names: Vec<String> = outcomes(&v).into_keys().collect();
    for s in dpctl::smoke::StepId::ALL {
        assert!(names.contains(&s.name().to_string()), "step {} reported", s.name());
    }
    for c in dpctl::check::CheckId::ALL {
        assert!(names.contains(&c.name().to_string()), "check {} reported", c.name());
    }
    assert_eq!(v["suite"], "dpctl smoke");
    assert_eq!(v["resource"], GPU);
    assert_eq!(v["interrupted"], false);
    assert_eq!(v["totals"]["failed"], 0);
    let dir = v["dir"].as_str().unwrap();
    assert!(dir.starts_with("/tmp/dpctl-smoke-"), "{dir}");
    assert_eq!(v["command"][3], dir, "{{dir}} substituted");
    // The options the RegisterRequest carried agree with GetDevicePluginOptions: no note.
    let options = step(&v, "options-answer");
    assert_eq!(options["outcome"], "pass");
    assert!(!options["evidence"].as_str().unwrap().contains("note:"), "{options}");
    let adm = step(&v, "admission")["evidence"].as_str().unwrap();
    assert!(
        adm.contains("GetPreferredAllocation") && adm.contains("Allocate(") && adm.contains("CDI example.com/gpu="),
        "{adm}"
    );
    assert!(adm.contains("PreStartContainer: ok"), "{adm}");
    let restart = step(&v, "kubelet-restart")["evidence"].as_str().unwrap();
    assert!(restart.contains("registered again") && restart.contains(" ms after the new kubelet.sock"), "{restart}");
    let down = step(&v, "shutdown")["evidence"].as_str().unwrap();
    assert!(down.contains("exited with code 0") && down.contains("socket example-gpu.sock is gone"), "{down}");
    assert!(v["plugin"]["stdout"]["tail"].as_str().unwrap().contains("registered"), "mock output kept");

    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("JUnit parses");
    let suite = doc.descendants().find(|n| n.has_tag_name("testsuite")).unwrap();
    assert_eq!(suite.attribute("name"), Some("dpctl smoke"));
    assert_eq!(suite.attribute("failures"), Some("0"));
    let cases: Vec<_> = suite.children().filter(|n| n.has_tag_name("testcase")).collect();
    assert_eq!(cases.len(), v["steps"].as_array().unwrap().len());
    let class = |name: &str| cases.iter().find(|c| c.attribute("name") == Some(name)).unwrap().attribute("classname");
    // One release (a CI matrix job's run): the names and classnames carry it all the same.
    assert_eq!(class("registration (kubelet-1.37)"), Some("dpctl.smoke.kubelet-1.37"));
    assert_eq!(class("allocate-healthy (kubelet-1.37)"), Some("dpctl.plugin.check.kubelet-1.37"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_and_narration_for_people() {
    let run = dpctl(&[
        "smoke",
        "--stream-window",
        "300ms",
        "--settle",
        "1s",
        "--",
        dpctl_bin(),
        "mock-plugin",
        "--dir",
        "{dir}",
        "--resource",
        GPU,
    ])
    .await;
    run.expect_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].starts_with("STEP") && lines[0].contains("DETAIL"), "{}", run.stdout);
    assert!(lines.iter().any(|l| l.starts_with("kubelet-restart") && l.contains("pass")), "{}", run.stdout);
    assert!(lines.last().unwrap().starts_with("PASS 27 steps: "), "{}", run.stdout);
    // Narration on stderr: the sim and the plugin's pid; each step is printed
    // once, in the table on stdout (CI logs merge the two streams).
    assert!(run.stderr.contains("kubelet-sim: serving /tmp/dpctl-smoke-"), "{}", run.stderr);
    assert!(run.stderr.contains("plugin: started pid "), "{}", run.stderr);
    assert!(!run.stderr.lines().any(|l| l.starts_with("pass  registration")), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_resource_name_fails_registration_with_the_kubelets_text() {
    let (run, v) = smoke(&FAST, &mock(&["--register-resource-name", "gpu"])).await;
    run.expect_code(1);
    assert_failed(&v, "registration", &["rejected", r#"the ResourceName "gpu" is invalid"#]);
    assert_eq!(failed(&v), ["registration"]);
    assert_eq!(step(&v, "admission")["evidence"], "not run: the plugin did not register");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_version_fails_registration() {
    let (run, v) = smoke(&FAST, &mock(&["--register-version", "v1alpha"])).await;
    run.expect_code(1);
    assert_failed(&v, "registration", &[r#"version "v1alpha""#, "is not supported by kubelet"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_options_fail_registration() {
    let (run, v) = smoke(&FAST, &mock(&["--error", "GetDevicePluginOptions=internal:options are broken"])).await;
    run.expect_code(1);
    assert_failed(&v, "registration", &["failed to get device plugin options", "options are broken"]);
}

/// Every kubelet 1.26+ ignores RegisterRequest.options (only
/// GetDevicePluginOptions counts: `Register` in
/// pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go), so a plugin
/// whose two answers differ works on every node: smoke passes it and notes
/// the difference (it failed a registration-options-agree check before: a
/// false failure).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatched_register_options_pass_with_a_note_in_every_release() {
    let (run, v) = smoke(&FAST, &mock(&["--register-options-mismatch"])).await;
    run.expect_code(0);
    assert!(failed(&v).is_empty(), "{:#}", v["steps"]);
    let options = step(&v, "options-answer");
    assert_eq!(options["outcome"], "pass", "{options}");
    let e = options["evidence"].as_str().unwrap();
    assert!(
        e.contains("note: pre_start_required is true in the RegisterRequest kubelet-sim received but false here")
            && e.contains("every kubelet 1.26+ ignores RegisterRequest.options"),
        "{e}"
    );
    assert!(v["steps"].as_array().unwrap().iter().all(|s| s["name"] != "registration-options-agree"), "{v:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registering_before_serving_fails_with_the_dial_back_timeout() {
    let (run, v) = smoke(&FAST, &mock(&["--register-before-serving"])).await;
    run.expect_code(1);
    assert_failed(&v, "registration", &["failed to dial device plugin", "serve the socket before calling Register"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ending_list_and_watch_fails_the_health_report_and_admission() {
    let (run, v) = smoke(&FAST, &mock(&["--end-stream-after", "1"])).await;
    run.expect_code(1);
    assert_failed(&v, "health-report", &["ListAndWatch ended", "allocatable 0"]);
    assert_failed(&v, "list-stream-stays-open", &["ended"]);
    assert_failed(&v, "admission", &["ListAndWatch stream had ended"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_health_string_fails_the_health_report() {
    let sb = Sandbox::new();
    let config = sb.join("bad-health.toml");
    std::fs::write(
        &config,
        "[[resource]]\nname = \"example.com/gpu\"\n[[resource.device]]\nid = \"GPU-0\"\n\
         [[resource.device]]\nid = \"GPU-1\"\nhealth = \"healthy\"\n",
    )
    .unwrap();
    let cmd = [dpctl_bin(), "mock-plugin", "--dir", "{dir}", "--config", config.to_str().unwrap()];
    let (run, v) = smoke(&FAST, &cmd).await;
    run.expect_code(1);
    assert_failed(&v, "health-report", &[r#"GPU-1 reports health "healthy""#, "capacity 2, allocatable 1"]);
    assert_failed(&v, "health-values", &["GPU-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allocate_error_fails_admission() {
    let (run, v) = smoke(&FAST, &mock(&["--error", "Allocate=unavailable:driver gone"])).await;
    run.expect_code(1);
    assert_failed(&v, "admission", &["UnexpectedAdmissionError", "driver gone"]);
    assert_failed(&v, "allocate-healthy", &["driver gone"]);
    assert_eq!(step(&v, "pod-deletion")["outcome"], "skip");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_preferred_allocation_breaks_the_contract_and_admission() {
    let (run, v) =
        smoke(&FAST, &mock(&["--preferred", "--error", "GetPreferredAllocation=internal:no topology"])).await;
    run.expect_code(1);
    assert_failed(&v, "preferred-contract", &["no topology"]);
    assert_failed(&v, "admission", &["GetPreferredAllocation rpc failed", "no topology"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_pre_start_fails_admission_and_the_deadline_check() {
    let mut flags = FAST.to_vec();
    flags.extend(["--prestart-timeout", "300ms"]);
    let (run, v) = smoke(&flags, &mock(&["--pre-start", "--latency", "PreStartContainer=2s"])).await;
    run.expect_code(1);
    assert_failed(&v, "admission", &["would not start", "PreStartContainer", "DeadlineExceeded"]);
    assert_failed(&v, "prestart-deadline", &["no answer within 300ms"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_pre_start_fails_admission() {
    let (run, v) = smoke(&FAST, &mock(&["--pre-start", "--error", "PreStartContainer=internal:reset failed"])).await;
    run.expect_code(1);
    assert_failed(&v, "admission", &["would not start", "reset failed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_reregistration_after_a_restart_fails_the_restart_step() {
    let mut flags = FAST.to_vec();
    flags[3] = "1s";
    let (run, v) = smoke(&flags, &mock(&["--no-reregister"])).await;
    run.expect_code(1);
    assert_eq!(failed(&v), ["kubelet-restart"]);
    assert_failed(&v, "kubelet-restart", &["example.com/gpu did not register again within 1s", "call Register again"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_command_fails_launch() {
    let (run, v) = smoke(&FAST, &["./no-such-plugin", "--dir", "{dir}"]).await;
    run.expect_code(1);
    assert_failed(&v, "launch", &["./no-such-plugin: no such file"]);
    assert_eq!(step(&v, "shutdown")["evidence"], "the plugin never started");
    assert!(v["plugin"]["pid"].is_null());
    let (_, v) = smoke(&FAST, &["no-such-plugin-in-path"]).await;
    assert_failed(&v, "launch", &["no-such-plugin-in-path: command not found in PATH"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_exits_at_once_is_reported_with_its_output() {
    let cmd = ["sh", "-c", "echo starting; echo 'fatal: no devices found' >&2; exit 3"];
    let (run, v) = smoke(&FAST, &cmd).await;
    run.expect_code(1);
    assert_failed(&v, "registration", &["exited with code 3 before registering", "fatal: no devices found"]);
    assert_eq!(v["plugin"]["exit"]["code"], 3);
    assert_eq!(v["plugin"]["stderr"]["tail"], "fatal: no devices found\n");
    assert!(step(&v, "shutdown")["evidence"].as_str().unwrap().contains("had already exited with code 3"));
    // The table shows the plugin's last output under the failures.
    let run = dpctl(&["smoke", "--", "sh", "-c", "echo 'fatal: no devices found' >&2; exit 3"]).await;
    run.expect_code(1);
    assert!(run.stdout.contains("plugin output (pid "), "{}", run.stdout);
    assert!(run.stdout.contains("  | fatal: no devices found"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_ignores_sigterm_is_killed() {
    let flags = ["--register-timeout", "300ms", "--grace", "300ms"];
    let (run, v) = smoke(&flags, &["sh", "-c", "trap '' TERM; echo waiting; sleep 30"]).await;
    run.expect_code(1);
    assert_failed(&v, "registration", &["no Register on", "within 300ms", "still running"]);
    assert_failed(&v, "shutdown", &["still running 300ms after SIGTERM: killed with SIGKILL"]);
    assert_eq!(v["plugin"]["exit"]["signal"], 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_the_plugin_and_reports_what_ran() {
    let mut child = Child::dpctl(&["smoke", "-o", "json", "--", "sh", "-c", "echo up; exec sleep 60"]);
    let pid = loop {
        let line = child.stderr_line().await.expect("a 'started pid' line");
        if let Some(rest) = line.strip_prefix("plugin: started pid ") {
            break rest.split(':').next().unwrap().to_string();
        }
    };
    child.interrupt();
    let stdout = child.rest().await.join("\n");
    assert_eq!(child.wait().await, 1);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["interrupted"], true);
    assert_eq!(v["plugin"]["pid"].to_string(), pid);
    assert_eq!(step(&v, "registration")["evidence"], "not run: interrupted");
    assert_eq!(step(&v, "shutdown")["outcome"], "pass");
    assert_plugin_gone(&v);
    assert!(!std::path::Path::new(v["dir"].as_str().unwrap()).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_dir_keeps_the_whole_output_and_dir_is_kept() {
    let sb = Sandbox::new();
    let dir = sb.join("dp");
    let logs = sb.join("logs");
    let flags = [
        "--dir",
        dir.to_str().unwrap(),
        "--log-dir",
        logs.to_str().unwrap(),
        "--skip",
        "kubelet-restart,parallel-calls",
        "--request",
        "0",
        "--stream-window",
        "300ms",
    ];
    let (run, v) = smoke(&flags, &mock(&[])).await;
    run.expect_code(0);
    assert_eq!(v["dir"], dir.to_str().unwrap());
    assert_eq!(v["dir_kept"], true);
    assert!(dir.join(dpctl::paths::CHECKPOINT_FILE_NAME).exists(), "the sim's checkpoint stays in --dir");
    assert!(dpctl::paths::sockets_in(&dir).is_empty(), "no socket left: {:?}", dpctl::paths::sockets_in(&dir));
    for name in ["kubelet-restart", "parallel-calls"] {
        assert_eq!(step(&v, name)["evidence"], "skipped with --skip");
    }
    assert_eq!(step(&v, "admission")["evidence"], "--request 0: no pod admitted");
    // One pair of files per process, named by the step that started it.
    for by in ["launch", "plugin-restart"] {
        let out = std::fs::read_to_string(logs.join(format!("{by}.stdout.log"))).unwrap();
        assert!(out.contains("registered"), "{by}: {out}");
        let err = std::fs::read_to_string(logs.join(format!("{by}.stderr.log"))).unwrap();
        assert!(err.contains("mock plugin for"), "{by}: {err}");
    }
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(
        procs.iter().map(|p| p["started_by"].as_str().unwrap()).collect::<Vec<_>>(),
        ["launch", "plugin-restart"]
    );
    assert_ne!(procs[0]["pid"], procs[1]["pid"]);
    assert_eq!(v["plugin"]["stdout"]["file"], logs.join("plugin-restart.stdout.log").to_str().unwrap());
}

#[tokio::test]
async fn usage_errors_exit_2() {
    let run = dpctl(&["smoke"]).await;
    run.expect_code(2);
    let run = dpctl(&["smoke", "--skip", "nope", "--", "true"]).await;
    run.expect_code(2);
    assert!(run.stderr.contains("unknown step or check \"nope\""), "{}", run.stderr);
    let run = dpctl(&["smoke", "--skip", "registration", "--", "true"]).await;
    run.expect_code(2);
    assert!(run.stderr.contains("cannot be skipped"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dir_a_live_kubelet_serves_is_refused() {
    let sb = Sandbox::new();
    let sim = dpctl::kubelet_sim::KubeletSim::start(dpctl::kubelet_sim::SimConfig::new(sb.path())).await.unwrap();
    let run = dpctl(&["smoke", "--dir", sb.path().to_str().unwrap(), "--", "true"]).await;
    run.expect_code(2);
    assert!(run.stderr.contains("a live kubelet (or kubelet-sim) serves"), "{}", run.stderr);
    assert!(sb.join("kubelet.sock").exists(), "the other kubelet's socket is untouched");
    sim.stop().await.unwrap();
}

// On a node a daemonised helper outlives the plugin's pod. A plugin that
// daemonises (a process that calls setsid and
// outlives the plugin) used to survive smoke, which still passed. Now it is
// found, killed and reported as a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_leaves_a_daemon_behind_fails_and_the_daemon_is_killed() {
    let sb = Sandbox::new();
    let pidfile = sb.join("daemon.pid");
    let script = format!(
        "setsid sh -c 'echo $$ > {}; exec sleep 300' & exec {} mock-plugin --dir {{dir}} --resource {GPU}",
        pidfile.display(),
        dpctl_bin()
    );
    let (run, v) = smoke(&FAST, &["sh", "-c", &script]).await;
    run.expect_code(1);
    assert_failed(&v, "plugin-leaves-no-processes", &["(sleep)"]);
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    assert!(stat.is_empty(), "the daemon {pid} still runs: {stat}");
}

/// docs/kubelet-versions.md §9 (every version): the kubelet's plugin watcher dials
/// without an :authority override, which kubelet-sim does not reproduce, so a
/// registration through plugins_registry says what this run cannot catch.
#[tokio::test]
async fn a_plugins_registry_registration_notes_the_watchers_authority() {
    let cmd = mock(&["--no-register", "--registry-dir", "{registry_dir}"]);
    let mut flags = vec!["--registration", "plugins-registry", "--skip", "kubelet-restart"];
    flags.extend_from_slice(&FAST);
    let (run, v) = smoke(&flags, &cmd).await;
    run.expect_code(0);
    let e = step(&v, "registration")["evidence"].as_str().unwrap();
    assert!(e.contains("through plugins_registry"), "{e}");
    assert!(e.contains("without an :authority override") && e.contains("kubelet-sim sends localhost"), "{e}");
    // A kubelet.sock registration carries no such note.
    let (_, v) = smoke(&FAST, &mock(&[])).await;
    let e = step(&v, "registration")["evidence"].as_str().unwrap();
    assert!(e.contains("Register(version v1beta1") && !e.contains(":authority"), "{e}");
}

/// docs/protocol.md §5 item 2 (every version): a ListAndWatch message over 4 MiB ends
/// the kubelet's stream with ResourceExhausted before any device is known
/// (0/0), and the pod then meets the predicate handler's OutOf rejection.
#[tokio::test]
async fn an_oversize_list_fails_message_size_first_snapshot_and_admission() {
    let (run, v) = smoke(&FAST, &mock(&["--oversize-list", "--devices", "2"])).await;
    run.expect_code(1);
    assert_failed(&v, "message-size", &["over the kubelet's 4,194,304-byte limit"]);
    assert_failed(
        &v,
        "first-snapshot",
        &["code = ResourceExhausted desc = grpc: received message larger than max (", " vs. 4194304)"],
    );
    assert_failed(&v, "health-report", &["capacity 0, allocatable 0 as the kubelet counts them (0 devices); "]);
    assert_failed(&v, "admission", &["OutOfexample.com/gpu: Node didn't have enough resource: example.com/gpu"]);
}

/// docs/protocol.md §1.2 (cdi_devices, ContainerAllocateResponse field 5, from
/// kubelet 1.28): kubelets 1.26-1.27 drop them, and 1.28 passes them to the
/// runtime only with gate DevicePluginCDIDevices (alpha, off by default; PR
/// #118254). An answer with ONLY CDI devices then gives the container nothing
/// from the plugin, so smoke's admission step fails on 1.26, 1.27 and 1.28;
/// CDI plus env vars keeps a warning and passes; 1.29 (gate on) passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdi_only_allocate_fails_admission_on_kubelets_before_1_29() {
    let run_on = |version: &'static str, extra: &'static [&'static str]| async move {
        let flags =
            ["--kubelet-version", version, "--skip", "kubelet-restart,parallel-calls", "--stream-window", "300ms"];
        let mut m = mock(&["--cdi", "example.com/gpu={id}"]);
        m.extend_from_slice(extra);
        smoke(&flags, &m).await
    };
    // 1.28 knows the field but passes it to the runtime only with the alpha
    // gate DevicePluginCDIDevices, off by default: nothing reaches the container.
    for version in ["1.26", "1.27", "1.28"] {
        let (run, v) = run_on(version, &[]).await;
        run.expect_code(1);
        assert_failed(
            &v,
            "admission",
            &[
                &format!("kubelet {version} gives container"),
                "nothing from the plugin",
                "only cdi_devices",
                "field 5",
                "also return device nodes (DeviceSpec) or env vars",
            ],
        );
        assert_eq!(failed(&v), ["admission"], "{version}: {:#}", v["steps"]);
    }
    // CDI and an env var: the env var reaches the container; warning only.
    let (run, v) = run_on("1.26", &["--env", "GPUS={ids}"]).await;
    run.expect_code(0);
    let adm = step(&v, "admission");
    assert_eq!(adm["outcome"], "pass", "{adm:#}");
    assert!(adm["evidence"].as_str().unwrap().contains("warning cdi-devices-unknown"), "{adm:#}");
    // 1.28 with an env var too: passes, warning that the CDI names stay behind its gate.
    let (run, v) = run_on("1.28", &["--env", "GPUS={ids}"]).await;
    run.expect_code(0);
    let adm = step(&v, "admission");
    assert_eq!(adm["outcome"], "pass", "{adm:#}");
    assert!(adm["evidence"].as_str().unwrap().contains("warning cdi-devices-gated"), "{adm:#}");
    // 1.29 passes cdi_devices to the runtime (gate beta, on): CDI alone passes.
    let (run, v) = run_on("1.29", &[]).await;
    run.expect_code(0);
    assert_eq!(step(&v, "admission")["outcome"], "pass");
}

// `--restarts N` (kubelet behaviour of every release 1.26-1.37: a restart
// deletes the plugin sockets and serves a new kubelet.sock): the tally is in
// the table, the JSON (`restarts`) and the JUnit case; a plugin that never
// comes back is 100% flaky and fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_n_reports_the_flake_rate_in_table_json_and_junit() {
    let sb = Sandbox::new();
    let junit = sb.join("smoke.xml");
    let skip = ["--skip", "parallel-calls,plugin-restart,health-recovery", "--stream-window", "300ms"];
    let mut flags = vec!["--restarts", "4", "--junit", junit.to_str().unwrap()];
    flags.extend(skip);
    let (run, v) = smoke(&flags, &mock(&["--devices", "2"])).await;
    run.expect_code(0);
    let want = "re-registered 4/4 (0.0% flaky)";
    assert_eq!(v["restarts"]["restarts"], 4);
    assert_eq!(v["restarts"]["reregistered"], 4);
    assert_eq!(v["restarts"]["summary"], want);
    assert!(step(&v, "kubelet-restart")["evidence"].as_str().unwrap().starts_with(want), "{v:#}");
    assert!(std::fs::read_to_string(&junit).unwrap().contains(want), "JUnit carries the tally");
    let mut args = vec!["smoke", "--restarts", "2"];
    args.extend(skip);
    args.push("--");
    args.extend(mock(&["--devices", "2"]));
    let mut cmd = dpctl_command();
    cmd.args(&args);
    let table = run_bounded(cmd, &args, SMOKE_WAIT).await;
    table.expect_code(0);
    assert!(table.stdout.contains("re-registered 2/2 (0.0% flaky)"), "{}", table.stdout);

    let flags =
        ["--restarts", "3", "--restart-deadline", "500ms", "--skip", "parallel-calls", "--stream-window", "300ms"];
    let (run, v) = smoke(&flags, &mock(&["--no-reregister"])).await;
    run.expect_code(1);
    assert_eq!(v["restarts"]["summary"], "re-registered 0/3 (100.0% flaky)");
    assert_failed(
        &v,
        "kubelet-restart",
        &["re-registered 0/3 (100.0% flaky); restart 1: restarted the kubelet", "did not register again within 500ms"],
    );
}

// The plugin process restarted while the kubelet runs on (every release):
// its stream ends (allocatable 0), the new process registers and the counts
// come back; a fault the mock's own switch makes and clears is recovered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_restart_and_health_recovery_pass_with_the_mock() {
    let flags = ["--skip", "parallel-calls,kubelet-restart", "--stream-window", "300ms"];
    let (run, v) = smoke(&flags, &mock(&["--devices", "3"])).await;
    run.expect_code(0);
    let restart = step(&v, "plugin-restart");
    assert_eq!(restart["outcome"], "pass", "{restart}");
    let ev = restart["evidence"].as_str().unwrap();
    for want in ["on SIGTERM", "allocatable 0 while it was down", "registered", "capacity 3 -> 3, allocatable 3 -> 3"] {
        assert!(ev.contains(want), "{want:?} in {ev}");
    }
    let health = step(&v, "health-recovery");
    assert_eq!(health["outcome"], "pass", "{health}");
    let ev = health["evidence"].as_str().unwrap();
    assert!(ev.contains("set Unhealthy): allocatable 3 -> 2") && ev.contains("allocatable 3 (capacity 3)"), "{ev}");
}

// A plugin whose second start fails: plugin-restart fails with its exit and
// output, while health-recovery, which runs before it on the first process
// (the mock, found by its control socket), passes. Hooks that make a fault
// but never clear it fail health-recovery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_cannot_restart_or_recover_fails_those_steps() {
    let sb = Sandbox::new();
    let marker = sb.join("started");
    let script = format!(
        "if [ -e {m} ]; then echo 'cannot start twice' >&2; exit 3; fi; touch {m}; exec {d} mock-plugin --dir {{dir}} \
         --resource {GPU} --devices 2",
        m = marker.display(),
        d = dpctl_bin()
    );
    let skip = "parallel-calls,kubelet-restart,node-reboot";
    let flags = ["--skip", skip, "--stream-window", "300ms", "--restart-deadline", "3s"];
    let (run, v) = smoke(&flags, &["sh", "-c", &script]).await;
    run.expect_code(1);
    assert_failed(&v, "plugin-restart", &["exited with code 3 before registering", "cannot start twice"]);
    assert_eq!(step(&v, "health-recovery")["outcome"], "pass");

    let fault = format!("{} mock-plugin set-health --dir {{dir}} {GPU} GPU-1 unhealthy", dpctl_bin());
    let flags = [
        "--skip",
        "parallel-calls,kubelet-restart,plugin-restart,node-reboot",
        "--stream-window",
        "300ms",
        "--recovery-deadline",
        "1s",
        "--fault-command",
        &fault,
        "--recover-command",
        "true",
    ];
    let (run, v) = smoke(&flags, &mock(&["--devices", "2"])).await;
    run.expect_code(1);
    assert_failed(&v, "health-recovery", &["allocatable 2 -> 1", "--recover-command true", "still 1 of 2 after 1s"]);
}

// A kubelet.sock created after the plugin started (every release: the
// kubelet's device manager serves it only once it has started): a plugin
// that calls Register once and gives up fails registration with the reason;
// one that retries until kubelet.sock exists passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_kubelet_sock_fails_a_plugin_that_registers_once_only() {
    let flags = ["--late-kubelet-socket", "1s", "--register-timeout", "5s"];
    let (run, v) = smoke(&flags, &mock(&["--register-once"])).await;
    run.expect_code(1);
    assert_failed(
        &v,
        "registration",
        &["kubelet.sock was created 1s after the sim started", "must retry Register", "--register-once gives up"],
    );
    let mut flags = flags.to_vec();
    flags.extend(["--skip", "parallel-calls,plugin-restart,health-recovery", "--stream-window", "300ms"]);
    let (run, v) = smoke(&flags, &mock(&[])).await;
    run.expect_code(0);
    assert_eq!(step(&v, "registration")["outcome"], "pass");
}

// A node reboot (docs/kubelet-versions.md §10; 1.34-1.37 checked against the
// kubelet's own code by the scenario reboot-plugin-late): a pod holds
// devices, the node reboots with the plugin down, the kubelet admits the pod
// again before the plugin is back and rejects it with
// UnexpectedAdmissionError (the report says why, for the release played); the
// plugin, started again late, registers and a new pod is admitted: the step
// passes, in the JSON, the table and JUnit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_reboot_reports_the_rejected_pod_and_passes_when_the_plugin_comes_back() {
    let sb = Sandbox::new();
    let junit = sb.join("smoke.xml");
    let skip = [
        "--skip",
        "parallel-calls,kubelet-restart,plugin-restart,health-recovery",
        "--stream-window",
        "300ms",
        "--settle",
        "1s",
    ];
    let mut flags = vec!["--kubelet-version", "1.35", "--junit", junit.to_str().unwrap()];
    flags.extend(skip);
    let (run, v) = smoke(&flags, &mock(&["--devices", "2"])).await;
    run.expect_code(0);
    let s = step(&v, "node-reboot");
    assert_eq!(s["outcome"], "pass", "{s:#}");
    let ev = s["evidence"].as_str().unwrap();
    for want in [
        "kubelet 1.35 rebooted with pod default/dpctl-smoke-reboot holding GPU-0",
        "failed with UnexpectedAdmissionError: Allocate failed due to no healthy devices present; cannot allocate \
         unhealthy devices example.com/gpu, which is unexpected",
        "the plugin started again (pid ",
        "(capacity 2, allocatable 2); a new pod was admitted on GPU-0",
    ] {
        assert!(ev.contains(want), "{want:?} in {ev}");
    }
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("name=\"node-reboot (kubelet-1.35)\"") && xml.contains("no healthy devices present"), "{xml}");
    let mut args = vec!["smoke"];
    args.extend(skip);
    args.push("--");
    args.extend(mock(&["--devices", "2"]));
    let mut cmd = dpctl_command();
    cmd.args(&args);
    let table = run_bounded(cmd, &args, SMOKE_WAIT).await;
    assert!(table.expect_code(0).stdout.contains("node-reboot"), "{}", table.stdout);
}

// A plugin that cannot start a second time fails node-reboot with its exit
// and output; --request 0 skips the step (no pod to admit again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_reboot_fails_a_plugin_that_does_not_come_back() {
    let sb = Sandbox::new();
    let marker = sb.join("started");
    let script = format!(
        "if [ -e {m} ]; then echo 'cannot start twice' >&2; exit 3; fi; touch {m}; exec {d} mock-plugin --dir {{dir}} \
         --resource {GPU} --devices 2",
        m = marker.display(),
        d = dpctl_bin()
    );
    let skip = "parallel-calls,kubelet-restart,plugin-restart,health-recovery";
    let flags = ["--skip", skip, "--stream-window", "300ms", "--restart-deadline", "3s"];
    let (run, v) = smoke(&flags, &["sh", "-c", &script]).await;
    run.expect_code(1);
    assert_failed(
        &v,
        "node-reboot",
        &["failed with UnexpectedAdmissionError", "exited with code 3", "cannot start twice"],
    );
    let flags = ["--skip", skip, "--stream-window", "300ms", "--request", "0"];
    let (run, v) = smoke(&flags, &mock(&["--devices", "2"])).await;
    run.expect_code(0);
    assert_eq!(step(&v, "node-reboot")["outcome"], "skip");
}

// A kubelet restart whose kubelet.sock is re-created late (every release;
// bottlerocket #4250): dpctl's mock keeps retrying and comes back; a plugin
// that ignores the re-created socket fails kubelet-restart, and the evidence
// says the socket came back late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_recreated_kubelet_sock_fails_a_plugin_that_does_not_register_again() {
    let skip = "parallel-calls,plugin-restart,health-recovery,node-reboot";
    let flags =
        ["--late-kubelet-socket", "500ms", "--skip", skip, "--stream-window", "300ms", "--restart-deadline", "3s"];
    let (run, v) = smoke(&flags, &mock(&[])).await;
    run.expect_code(0);
    assert_eq!(step(&v, "kubelet-restart")["outcome"], "pass", "{v:#}");
    let (run, v) = smoke(&flags, &mock(&["--no-reregister"])).await;
    run.expect_code(1);
    assert_failed(
        &v,
        "kubelet-restart",
        &["did not register again within 3s", "kubelet.sock was re-created 500 ms after the old one"],
    );
}
