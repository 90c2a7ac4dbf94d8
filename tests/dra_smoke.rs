//! `dpctl dra smoke` as a DRA driver author runs it in CI: the driver's
//! command after `--`, unmodified, against an in-process kubelet-sim (the
//! DRA manager, kubelets 1.34-1.37) and API server. dpctl's own mock
//! passes, and fails each injected fault with the rule and the evidence;
//! the Go driver on the real kubeletplugin helper (conformance/dra-driver)
//! passes too, or the suite's one `SKIPPED` line without it (a failure under
//! CI=true).

use std::time::Duration;

use serde_json::Value;

use crate::support::{Sandbox, dpctl, dpctl_bin, dpctl_command, run_bounded};

/// A whole smoke run takes seconds; this bounds it.
const RUN: Duration = Duration::from_secs(90);

async fn smoke(flags: &[&str], driver: &[&str]) -> crate::support::Run {
    let mut args = vec!["dra", "smoke", "-o", "json"];
    if !flags.contains(&"--slice-timeout") {
        // The mock publishes no slices: a short wait keeps each run quick.
        args.extend(["--slice-timeout", "300ms"]);
    }
    args.extend_from_slice(flags);
    args.push("--");
    args.extend_from_slice(driver);
    let mut cmd = dpctl_command();
    cmd.args(&args);
    run_bounded(cmd, &args, RUN).await
}

/// `dpctl dra mock` as the driver command, with `extra` flags.
fn mock(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec![dpctl_bin(), "dra", "mock", "gpu.example.com", "--dir", "{dir}", "--cdi-dir", "{cdi_dir}"];
    v.extend_from_slice(extra);
    v
}

fn step<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|x| x["name"] == name))
        .unwrap_or_else(|| panic!("no step {name} in {report:#}"))
}

fn outcome(report: &Value, name: &str) -> String {
    step(report, name)["outcome"].as_str().unwrap_or_default().to_string()
}

fn evidence(report: &Value, name: &str) -> String {
    step(report, name)["evidence"].as_str().unwrap_or_default().to_string()
}

/// Every step passed or was skipped (with its reason shown when not).
fn assert_passes(report: &Value) {
    for s in report["steps"].as_array().unwrap() {
        assert!(s["outcome"] == "pass" || s["outcome"] == "skip", "{} did not pass: {s:#}", s["name"]);
    }
}

/// 1.37 (the default): the mock passes every step; it publishes no slices
/// (said so, made-up devices), rolling-update is not asked; the JUnit file
/// holds the same steps.
#[tokio::test]
async fn the_mock_passes_every_step_on_1_37_with_junit() {
    let sb = Sandbox::new();
    let junit = sb.join("dra.xml");
    let run = smoke(&["--junit", junit.to_str().unwrap()], &mock(&[])).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let r = run.json();
    assert_passes(&r);
    assert_eq!(r["suite"], "dpctl dra smoke");
    assert_eq!(r["kubelet_version"], "1.37");
    assert_eq!(outcome(&r, "published-slices"), "skip");
    assert!(evidence(&r, "published-slices").contains("made-up devices"), "{r:#}");
    assert!(evidence(&r, "rolling-update").contains("--rolling"), "{r:#}");
    for s in
        ["admission", "cdi", "request-names", "prepare-idempotent", "kubelet-restart", "node-reboot", "parallel-pods"]
    {
        assert_eq!(outcome(&r, s), "pass", "{s}");
    }
    assert!(evidence(&r, "node-reboot").contains("1 spec file wiped"), "{r:#}");
    assert!(evidence(&r, "long-socket-path").contains("unix sockets allow at most 107"), "{r:#}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"<testsuite name="dpctl dra smoke""#) && xml.contains(r#"failures="0""#), "{xml}");
    assert!(xml.contains(r#"name="node-reboot (kubelet-1.37)""#), "{xml}");
}

/// 1.34: a kubelet restart reads the claim back and prepares nothing, so
/// kubelet-restart passes with the devices unchanged; the reboot prepares
/// the claim again (1.34-1.36 append the same devices).
#[tokio::test]
async fn the_mock_passes_on_1_34() {
    let run = smoke(&["--kubelet-version", "1.34", "--skip", "long-socket-path"], &mock(&[])).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let r = run.json();
    assert_passes(&r);
    assert_eq!(r["kubelet_version"], "1.34");
    assert_eq!(outcome(&r, "kubelet-restart"), "pass");
    assert_eq!(outcome(&r, "long-socket-path"), "skip");
}

/// The mock as a helper-built driver (`--kubeconfig {kubeconfig} --node-name
/// {node}`), 1.37: it publishes its pool, the claims are allocated from it,
/// and the claim allocated for the subrequest `gpu/large` is answered with
/// `gpu` (the helper strips subrequests), so request-names passes too.
#[tokio::test]
async fn the_mock_on_the_api_publishes_and_strips_subrequests_1_37() {
    let api = ["--kubeconfig", "{kubeconfig}", "--node-name", "{node}"];
    let run = smoke(&["--slice-timeout", "10s", "--skip", "long-socket-path"], &mock(&api)).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let r = run.json();
    assert_passes(&r);
    assert_eq!(outcome(&r, "published-slices"), "pass", "{r:#}");
    assert!(evidence(&r, "published-slices").contains("pool-0/dev-0"), "{r:#}");
    assert!(evidence(&r, "request-names").contains("request_names gpu"), "{r:#}");
}

/// The mock on the API preparing `dev-4` of its 4 published devices (an
/// off-by-one): the sim admits the pod as the kubelet does (it never holds
/// answers against slices), and admission fails naming the device.
#[tokio::test]
async fn a_device_no_slice_publishes_fails_admission() {
    let extra = ["--kubeconfig", "{kubeconfig}", "--node-name", "{node}", "--fault", "unpublished-device"];
    let r = fails(
        &extra,
        &["--slice-timeout", "10s", "--skip", "long-socket-path"],
        "admission",
        "prepared pool-0/dev-4, which no ResourceSlice of driver gpu.example.com publishes (pool pool-0 generation 1",
        "every device prepared is one a current ResourceSlice of the driver publishes",
    )
    .await;
    assert_eq!(outcome(&r, "published-slices"), "pass", "{r:#}");
}

/// A fault's run: exit 1, and `step` failed with the rule and this evidence.
async fn fails(extra: &[&'static str], flags: &[&str], failed: &str, evidence_has: &str, rule_has: &str) -> Value {
    let run = smoke(flags, &mock(extra)).await;
    assert_eq!(run.code, 1, "{extra:?}: {}\n{}", run.stdout, run.stderr);
    let r = run.json();
    let s = step(&r, failed);
    assert_eq!(s["outcome"], "fail", "{extra:?}: {r:#}");
    assert!(s["evidence"].as_str().unwrap().contains(evidence_has), "{extra:?}: {s:#}");
    assert!(s["rule"].as_str().unwrap().contains(rule_has), "{extra:?}: {s:#}");
    r
}

/// A claim left out of the answer: kubelets 1.34-1.37 fail the pod with these words
/// (`pkg/kubelet/cm/dra/manager.go`); the run plays 1.37.
#[tokio::test]
async fn a_missing_claim_uid_fails_admission_in_the_kubelets_words() {
    let r = fails(
        &["--fault", "missing-uid"],
        &["--skip", "long-socket-path"],
        "admission",
        "prepare dynamic resources: NodePrepareResources skipped 1 ResourceClaims",
        "under its UID",
    )
    .await;
    assert!(evidence(&r, "cdi").starts_with("not run: admission failed"), "{r:#}");
}

#[tokio::test]
async fn a_claim_prepared_again_with_other_devices_fails_idempotence() {
    let r = fails(
        &["--fault", "not-idempotent"],
        &["--skip", "long-socket-path"],
        "prepare-idempotent",
        "first pool-0/dev-",
        "same devices",
    )
    .await;
    let ev = evidence(&r, "prepare-idempotent");
    assert!(ev.contains("then pool-0/dev-") && !ev.contains("[\"") && !ev.contains("(\""), "{r:#}");
}

/// A driver whose registration server answers once cannot register again
/// after a kubelet restart: kubelet-restart fails (the reboot starts a new
/// driver, which registers).
#[tokio::test]
async fn a_driver_that_registers_once_fails_the_kubelet_restart() {
    let r = fails(
        &["--fault", "register-once"],
        &["--skip", "long-socket-path", "--register-timeout", "3s"],
        "kubelet-restart",
        "did not register again within",
        "registers again",
    )
    .await;
    assert_eq!(outcome(&r, "node-reboot"), "pass", "{r:#}");
}

/// CDI IDs with no spec: the container's IDs, and again after the reboot.
#[tokio::test]
async fn unresolvable_cdi_ids_fail_cdi_and_the_reboot() {
    let r = fails(&["--fault", "unresolvable-cdi"], &["--skip", "long-socket-path"], "cdi", "no spec in", "defines it")
        .await;
    assert_eq!(outcome(&r, "admission"), "pass", "the kubelet does not check CDI IDs: {r:#}");
    assert!(evidence(&r, "node-reboot").contains("kubernetes/kubernetes#141433"), "{r:#}");
}

/// A driver (root, on a real node's CI) that swaps its {cdi_dir} for a link
/// to another directory: node-reboot empties nothing through the link and
/// fails naming it; the files there are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cdi_dir_swapped_for_a_link_is_not_emptied_through_it() {
    let sb = Sandbox::new();
    let victim = sb.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("keep.json"), "{}").unwrap();
    let script = format!(
        "[ -L {{cdi_dir}} ] || {{ rm -rf {{cdi_dir}} && ln -s {v} {{cdi_dir}}; }}; exec {d} dra mock gpu.example.com \
         --dir {{dir}} --cdi-dir {{cdi_dir}}",
        v = victim.display(),
        d = dpctl_bin()
    );
    let run = smoke(&[], &["sh", "-c", &script]).await;
    run.expect_code(1);
    let v = run.json();
    assert_eq!(outcome(&v, "node-reboot"), "fail", "{v:#}");
    let ev = evidence(&v, "node-reboot");
    assert!(ev.contains("replaced by a link to") && ev.contains(victim.to_str().unwrap()), "{ev}");
    assert!(victim.join("keep.json").exists(), "a file outside the sandbox was removed through the link");
}

/// A Prepare slower than the deadline (lowered by --timeout, as the output
/// says): the kubelet's DeadlineExceeded fails the pod, and call-time fails.
#[tokio::test]
async fn a_call_over_the_deadline_fails_call_time_and_says_the_deadline_was_lowered() {
    let r = fails(
        &["--prepare-delay", "1500ms"],
        &["--timeout", "1s", "--skip", "long-socket-path"],
        "call-time",
        "a call hit the deadline",
        "45 s",
    )
    .await;
    assert!(evidence(&r, "call-time").contains("deadline lowered to 1000 ms by --timeout (the kubelet's is 45 s)"));
    assert!(evidence(&r, "admission").contains("code = DeadlineExceeded"), "{r:#}");
}

#[tokio::test]
async fn health_advertised_but_not_served_fails_advertised_served() {
    fails(
        &["--fault", "health-unserved"],
        &["--skip", "long-socket-path"],
        "advertised-served",
        "advertises v1alpha1.DRAResourceHealth but does not serve it",
        "answers on the endpoint",
    )
    .await;
}

/// A driver that cannot run twice: --rolling names why the second instance failed.
#[tokio::test]
async fn rolling_with_a_driver_that_cannot_run_twice_names_the_second_instances_error() {
    fails(
        &[],
        &["--rolling", "--skip", "long-socket-path"],
        "rolling-update",
        "the second instance exited",
        "second instance",
    )
    .await;
}

/// The driver on the real kubeletplugin helper (1.37): it publishes its
/// slice, reads each claim from the API server, strips the subrequest, and
/// runs a second instance beside the first (the helper's RollingUpdate).
#[tokio::test]
async fn the_go_driver_on_the_real_helper_passes() {
    let Some(bin) = crate::support::go_built::dra_driver_or_skip("dra_smoke") else { return };
    let bin = bin.to_str().unwrap();
    let cmd = go_driver(bin);
    // A driver built before --rolling-update-uid cannot run twice: say so, and fail under CI.
    let help = std::process::Command::new(bin).arg("--help").output().unwrap();
    let rolls = String::from_utf8_lossy(&help.stderr).contains("rolling-update-uid");
    if !rolls {
        let why = "the driver has no --rolling-update-uid: rebuild it (conformance/build.sh dra-driver)";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        eprintln!("SKIPPED dra_smoke rolling-update: {why}");
    }
    let mut cmd = cmd.to_vec();
    let mut flags = vec!["--slice-timeout", "10s"];
    if rolls {
        cmd.extend(["--rolling-update-uid", "pod-{instance}"]);
        flags.push("--rolling");
    }
    let run = smoke(&flags, &cmd).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let r = run.json();
    assert_passes(&r);
    assert_eq!(r["resource"], "gpu.dpctl.example");
    if rolls {
        assert_eq!(outcome(&r, "rolling-update"), "pass", "{r:#}");
        assert!(evidence(&r, "rolling-update").contains("dra-pod-2.sock beside"), "{r:#}");
    }
    assert!(evidence(&r, "published-slices").contains("gpu-0"), "{r:#}");
    assert!(evidence(&r, "request-names").contains("request_names gpu;"), "{r:#}");
    assert!(evidence(&r, "long-socket-path").contains("bind: invalid argument"), "{r:#}");
}

/// The helper-built driver without its RollingUpdate option: the second
/// instance takes the first's sockets over. --rolling fails at once (it used
/// to wait 20 s and say nothing of the second instance), naming both sockets.
#[tokio::test]
async fn rolling_with_a_helper_driver_that_takes_the_sockets_over_fails_at_once() {
    let Some(bin) = crate::support::go_built::dra_driver_or_skip("dra_smoke") else { return };
    let bin = bin.to_str().unwrap();
    let cmd = go_driver(bin);
    let run = smoke(&["--slice-timeout", "10s", "--rolling", "--skip", "long-socket-path"], &cmd).await;
    run.expect_code(1);
    let r = run.json();
    assert_eq!(outcome(&r, "rolling-update"), "fail", "{r:#}");
    let ev = evidence(&r, "rolling-update");
    assert!(ev.contains("took them over") && ev.contains("gpu.dpctl.example-reg.sock"), "{ev}");
    let took = step(&r, "rolling-update")["duration_ms"].as_f64().unwrap_or(f64::MAX);
    assert!(took < 20_000.0, "it waited for the registration timeout: {took} ms");
}

/// The helper-built Go driver's command line, on the sandbox's paths.
fn go_driver(bin: &str) -> [&str; 11] {
    [
        bin,
        "--kubeconfig",
        "{kubeconfig}",
        "--node-name",
        "{node}",
        "--registry-dir",
        "{registry_dir}",
        "--plugin-dir",
        "{plugin_dir}/gpu.dpctl.example",
        "--cdi-dir",
        "{cdi_dir}",
    ]
}

/// Bad input: the documented exit code 2 and a message naming the flag.
#[tokio::test]
async fn bad_input_names_the_flag() {
    let m = mock(&[]);
    for (flags, needle) in [
        (&["--kubelet-version", "1.33"][..], "--kubelet-version"),
        (&["--timeout", "50s"][..], "--timeout"),
        (&["--timeout", "1e20s"][..], "--timeout"),
        (&["--skip", "admission"][..], "cannot be skipped"),
        (&["--skip", "nope"][..], "long-socket-path"),
        (&["--parallel", "0"][..], "--parallel"),
        (&["--driver", "Not_A_Name"][..], "--driver"),
        (&["--junit", "/nonexistent-dir/x.xml"][..], "--junit"),
        (&["--engine", "kubelet:/x"][..], "cluster:DIR"),
        (&["--engine", "cluster:"][..], "cluster:DIR"),
        (&["--engine", "cluster:/x", "--kubelet-version", "1.34,1.37"][..], "one release"),
    ] {
        let mut args = vec!["dra", "smoke"];
        args.extend_from_slice(flags);
        args.push("--");
        args.extend(m.iter().copied());
        let run = dpctl(&args).await;
        assert_eq!(run.code, 2, "{flags:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{flags:?}: {}", run.stderr);
    }
    let run = dpctl(&["dra", "smoke", "--", "/nonexistent/driver"]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stdout.contains("launch") && run.stdout.contains("/nonexistent/driver"), "{}", run.stdout);
}
