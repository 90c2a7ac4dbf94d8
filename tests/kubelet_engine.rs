//! `dpctl smoke --engine kubelet:DIR`: plugins meet a real kubelet (built by
//! `conformance/build.sh kubelet`) with containerd and runc, as root. The
//! mock plugin, the grpcio peer and the upstream sample device plugin pass;
//! an Allocate answer whose mount names a host path that does not exist, and
//! one whose device node the container does not get, fail admission from
//! inside the container; after every run, and after Ctrl-C, nothing is left on the host
//! (mounts, cgroups, /var/lib/kubelet, the run's directory, processes).
//! Without the kubelet (or root, containerd, runc) these print the suite's
//! one SKIPPED line; under CI=true that is a failure.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::go_built::{KUBELET_RELEASE, ONE_NODE, kubelet_or_skip};
use crate::support::{Child, Sandbox, dpctl_bin, dpctl_command, interop, run_bounded};

/// A run starts containerd and the kubelet (about 1.5 s) and pods (under 1 s each).
const RUN_WAIT: Duration = Duration::from_secs(180);

/// What a run could leave on the host.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct HostState {
    mounts: BTreeSet<String>,
    cgroups: BTreeSet<String>,
    kubelet_dir: bool,
    run_containerd: bool,
}

pub(crate) fn host_state() -> HostState {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(' ').skip(3).take(2).collect::<Vec<_>>().join(" "))
        .collect();
    let mut cgroups = BTreeSet::new();
    for h in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
        for e in std::fs::read_dir(h.path()).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("dpctl-smoke-") {
                cgroups.insert(e.path().display().to_string());
            }
        }
    }
    HostState {
        mounts,
        cgroups,
        kubelet_dir: Path::new("/var/lib/kubelet").exists(),
        run_containerd: Path::new("/run/containerd").exists(),
    }
}

/// No process of the run (containerd, its shims, the kubelet, the pods) is left.
pub(crate) fn assert_no_process_of(dir: &str) {
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(!text.contains(dir), "a process of the run is left: {} {text}", e.file_name().to_string_lossy());
    }
}

async fn smoke(dir: &Path, command: &[&str]) -> (i32, serde_json::Value, String) {
    smoke_with(dir, &[], command).await
}

/// [`smoke`] with smoke's flags `flags`.
async fn smoke_with(dir: &Path, flags: &[&str], command: &[&str]) -> (i32, serde_json::Value, String) {
    let engine = format!("--engine=kubelet:{}", dir.display());
    let mut args =
        vec!["smoke", &engine, "--kubelet-version", KUBELET_RELEASE, "--stream-window", "300ms", "-o", "json"];
    args.extend_from_slice(flags);
    args.push("--");
    args.extend_from_slice(command);
    let mut cmd = dpctl_command();
    cmd.args(&args);
    let run = run_bounded(cmd, &args, RUN_WAIT).await;
    let v = run.json();
    let root = v["dir"].as_str().unwrap_or_default().trim_end_matches("/device-plugins").to_string();
    assert!(!root.is_empty() && !Path::new(&root).exists(), "the run's directory {root} is removed");
    assert_no_process_of(&root);
    (run.code, v, run.stderr)
}

fn step<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no {name}: {v:#}"))
}

/// A mock-plugin configuration whose Allocate answer sets an env var, bind-mounts
/// `mount_source` read-only at /data and gives /dev/null as a device node.
fn mock_config(sb: &Sandbox, mount_source: &str) -> PathBuf {
    mock_config_with(sb, mount_source, "/dev/null")
}

/// [`mock_config`] with the device node's host path `device_host`.
fn mock_config_with(sb: &Sandbox, mount_source: &str, device_host: &str) -> PathBuf {
    let config = sb.join("mock.toml");
    let text = format!(
        "[[resource]]\nname = \"example.com/gpu\"\n[[resource.device]]\nid = \"GPU-0\"\n[[resource.device]]\nid = \"GPU-1\"\n\
         [resource.allocate]\nenvs = {{ GPU_IDS = \"{{ids}}\" }}\n\
         mounts = [ {{ container_path = \"/data\", host_path = \"{mount_source}\", read_only = true }} ]\n\
         devices = [ {{ container_path = \"/dev/gpu-{{id}}\", host_path = \"{device_host}\" }} ]\n"
    );
    std::fs::write(&config, text).expect("write the mock's configuration");
    config
}

/// The mock passes, its container shows its answer, and it comes back from
/// each of three restarts of the real kubelet (SIGTERM, then the same
/// kubelet on the same state; the pod's container keeps running).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mock_plugin_passes_on_the_real_kubelet_and_its_container_shows_the_answer() {
    let Some(dir) = kubelet_or_skip("kubelet_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let before = host_state();
    let sb = Sandbox::new();
    let config = mock_config(&sb, sb.path().to_str().unwrap());
    let cmd = [dpctl_bin(), "mock-plugin", "--dir", "{dir}", "--config", config.to_str().unwrap()];
    let (code, v, stderr) = smoke_with(&dir, &["--restarts", "3"], &cmd).await;
    assert_eq!(code, 0, "{v:#}\n{stderr}");
    assert!(v["runs"][0]["engine"].as_str().unwrap_or_default().starts_with("kubelet v1.37"), "{v:#}");
    let admission = step(&v, "admission");
    assert_eq!(admission["outcome"], "pass", "{admission:#}");
    assert!(admission["evidence"].as_str().unwrap().contains("1 device node, 1 mount"), "{admission:#}");
    let restart = step(&v, "kubelet-restart");
    assert_eq!(restart["outcome"], "pass", "{restart:#}");
    let ev = restart["evidence"].as_str().unwrap();
    for needle in ["re-registered 3/3", "restarted the kubelet: deleted ", "example.com/gpu registered again "] {
        assert!(ev.contains(needle), "kubelet-restart evidence lacks {needle:?}: {ev}");
    }
    for name in ["health-recovery", "device-rescan"] {
        assert_eq!(step(&v, name)["outcome"], "pass", "{name}: {:#}", step(&v, name));
    }
    let reboot = step(&v, "node-reboot");
    assert_eq!(reboot["outcome"], "skip", "{reboot:#}");
    assert!(reboot["evidence"].as_str().unwrap().contains("not played by kubelet v1.37"), "{reboot:#}");
    assert_eq!(host_state(), before, "the host is as before the run");
}

/// A plugin that registers once and never again fails kubelet-restart on
/// the real kubelet, naming the deadline; nothing is left on the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_never_registers_again_fails_the_real_kubelets_restart() {
    let Some(dir) = kubelet_or_skip("kubelet_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let before = host_state();
    let cmd = [dpctl_bin(), "mock-plugin", "--dir", "{dir}", "--resource", "example.com/gpu", "--no-reregister"];
    let (code, v, stderr) = smoke_with(&dir, &["--restart-deadline", "3s"], &cmd).await;
    assert_eq!(code, 1, "{v:#}\n{stderr}");
    let restart = step(&v, "kubelet-restart");
    assert_eq!(restart["outcome"], "fail", "{restart:#}");
    let ev = restart["evidence"].as_str().unwrap();
    for needle in ["example.com/gpu did not register again within 3s", "A plugin must notice kubelet.sock"] {
        assert!(ev.contains(needle), "kubelet-restart evidence lacks {needle:?}: {ev}");
    }
    assert_eq!(host_state(), before, "the host is as before the run");
}

/// A plugin whose old ListAndWatch goroutine keeps the updates after a
/// kubelet restart (the new stream never hears of a change) registers
/// again, but health-recovery on the process that lived through the real
/// kubelet's restart fails: the fault never reached the kubelet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_stream_after_the_real_kubelets_restart_fails_health_recovery() {
    let Some(dir) = kubelet_or_skip("kubelet_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let before = host_state();
    let cmd =
        [dpctl_bin(), "mock-plugin", "--dir", "{dir}", "--resource", "example.com/gpu", "--stale-stream-after-restart"];
    let flags = ["--settle", "1s", "--recovery-deadline", "1500ms", "--grace", "500ms", "--skip", "parallel-calls"];
    let (code, v, stderr) = smoke_with(&dir, &flags, &cmd).await;
    assert_eq!(code, 1, "{v:#}\n{stderr}");
    assert_eq!(step(&v, "kubelet-restart")["outcome"], "pass", "{:#}", step(&v, "kubelet-restart"));
    let health = step(&v, "health-recovery");
    assert_eq!(health["outcome"], "fail", "{health:#}");
    let ev = health["evidence"].as_str().unwrap();
    for needle in ["the process that lived through the kubelet restart", "the fault never reached the kubelet"] {
        assert!(ev.contains(needle), "health-recovery evidence lacks {needle:?}: {ev}");
    }
    assert_eq!(host_state(), before, "the host is as before the run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_whose_host_path_does_not_exist_fails_admission_inside_the_container() {
    let Some(dir) = kubelet_or_skip("kubelet_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let before = host_state();
    let sb = Sandbox::new();
    let missing = sb.join("no-such-dir/{id}");
    let config = mock_config(&sb, missing.to_str().unwrap());
    let cmd = [dpctl_bin(), "mock-plugin", "--dir", "{dir}", "--config", config.to_str().unwrap()];
    let (code, v, stderr) = smoke(&dir, &cmd).await;
    assert_eq!(code, 1, "{v:#}\n{stderr}");
    let admission = step(&v, "admission");
    assert_eq!(admission["outcome"], "fail", "{admission:#}");
    let ev = admission["evidence"].as_str().unwrap();
    for needle in ["would not start", "the kubelet could not run it", "no-such-dir/GPU-", "Allocate answered"] {
        assert!(ev.contains(needle), "admission evidence lacks {needle:?}: {ev}");
    }
    assert!(!sb.join("no-such-dir").exists(), "the runtime made nothing on the host");
    assert_eq!(host_state(), before, "the host is as before the run");
}

/// A device node whose host path is a directory without device nodes: the
/// kubelet passes it on and the container starts, but containerd adds only
/// the device nodes found under a directory (github.com/containerd/containerd
/// oci/utils_unix.go `getDevices`), so the container has no /dev/gpu-*: the
/// check from inside fails admission, naming the path, the answer and what
/// the container saw (the env var it did get).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_the_container_does_not_get_fails_admission_from_inside_the_container() {
    let Some(dir) = kubelet_or_skip("kubelet_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let before = host_state();
    let sb = Sandbox::new();
    let empty = sb.join("no-devices-here");
    std::fs::create_dir(&empty).expect("an empty directory");
    let config = mock_config_with(&sb, sb.path().to_str().unwrap(), empty.to_str().unwrap());
    let cmd = [dpctl_bin(), "mock-plugin", "--dir", "{dir}", "--config", config.to_str().unwrap()];
    let (code, v, stderr) = smoke(&dir, &cmd).await;
    assert_eq!(code, 1, "{v:#}\n{stderr}");
    let admission = step(&v, "admission");
    assert_eq!(admission["outcome"], "fail", "{admission:#}");
    let ev = admission["evidence"].as_str().unwrap();
    for needle in [
        "inside the running container: device /dev/gpu-GPU-",
        "does not exist in the container",
        "the container saw: envs [GPU_IDS=GPU-",
        ":<absent>]",
    ] {
        assert!(ev.contains(needle), "admission evidence lacks {needle:?}: {ev}");
    }
    assert!(!ev.contains("is not set in the container"), "the env var reached the container: {ev}");
    // Only the container view failed: the rest of the run passed.
    let failed: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["outcome"] == "fail")
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["admission"], "{v:#}");
    assert_eq!(host_state(), before, "the host is as before the run");
}

/// The upstream sample device plugin (k8s.io/kubernetes
/// test/images/sample-device-plugin, built by conformance/build.sh upstream)
/// dials the kubelet's standard path, so it runs `--isolate`: inside its
/// namespace the run's device-plugins directory is at
/// /var/lib/kubelet/device-plugins, as it is in the kubelet's. Its container
/// gets the mount its Allocate answer names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_sample_device_plugin_passes_on_the_real_kubelet() {
    let Some(dir) = kubelet_or_skip("kubelet_engine") else { return };
    let Some(bin) = crate::support::go_built::upstream_or_skip("kubelet_engine", "sample-device-plugin") else {
        return;
    };
    let _node = ONE_NODE.lock().await;
    let before = host_state();
    let engine = format!("--engine=kubelet:{}", dir.display());
    let args = [
        "smoke",
        &engine,
        "--kubelet-version",
        KUBELET_RELEASE,
        "--isolate",
        "--restart-deadline",
        "30s",
        "--stream-window",
        "300ms",
        "-o",
        "json",
        "--",
        bin.to_str().unwrap(),
    ];
    let mut c = dpctl_command();
    c.args(args);
    let run = run_bounded(c, &args, RUN_WAIT).await;
    let v = run.json();
    assert_eq!(run.code, 0, "{v:#}\n{}", run.stderr);
    assert_eq!(v["resource"], "example.com/resource", "{v:#}");
    let admission = step(&v, "admission");
    assert_eq!(admission["outcome"], "pass", "{admission:#}");
    assert!(admission["evidence"].as_str().unwrap().contains("→ 1 mount"), "{admission:#}");
    for name in ["registration", "first-snapshot", "pod-deletion", "plugin-restart", "shutdown"] {
        assert_eq!(step(&v, name)["outcome"], "pass", "{name}: {:#}", step(&v, name));
    }
    let root = v["dir"].as_str().unwrap_or_default().trim_end_matches("/device-plugins").to_string();
    assert!(!root.is_empty() && !Path::new(&root).exists(), "the run's directory {root} is removed");
    assert_no_process_of(&root);
    assert_eq!(host_state(), before, "the host is as before the run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grpcio_peer_passes_on_the_real_kubelet() {
    let Some(dir) = kubelet_or_skip("kubelet_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let Some(env) = interop::env() else { return };
    let script = interop::peer_script();
    let cmd = [env.python.to_str().unwrap(), script.to_str().unwrap(), "plugin", "--dir", "{dir}"];
    let engine = format!("--engine=kubelet:{}", dir.display());
    let args = ["smoke", &engine, "--resource", "example.com/peer", "--stream-window", "300ms", "-o", "json", "--"];
    let all: Vec<&str> = args.iter().chain(cmd.iter()).copied().collect();
    let mut c = dpctl_command();
    c.args(&all);
    let run = run_bounded(c, &all, RUN_WAIT).await;
    let v = run.json();
    assert_eq!(run.code, 0, "{v:#}\n{}", run.stderr);
    for name in ["registration", "first-snapshot", "admission", "pod-deletion", "shutdown"] {
        assert_eq!(step(&v, name)["outcome"], "pass", "{name}: {:#}", step(&v, name));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_a_run_leaves_nothing_on_the_host() {
    let Some(dir) = kubelet_or_skip("kubelet_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let before = host_state();
    let engine = format!("--engine=kubelet:{}", dir.display());
    let mut child = Child::dpctl(&["smoke", &engine, "-o", "json", "--", dpctl_bin(), "mock-plugin", "--dir", "{dir}"]);
    // Interrupted once the plugin runs: containerd and the kubelet are up by then.
    loop {
        let line = child.stderr_line().await.expect("a 'started pid' line");
        if line.starts_with("plugin: started pid ") {
            break;
        }
    }
    child.interrupt();
    let stdout = child.rest().await.join("\n");
    assert_eq!(child.wait().await, 1);
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("the report");
    assert_eq!(v["interrupted"], true);
    let root = v["dir"].as_str().unwrap().trim_end_matches("/device-plugins").to_string();
    assert!(!Path::new(&root).exists(), "{root} is removed");
    assert_no_process_of(&root);
    assert_eq!(host_state(), before, "the host is as before the run");
}

/// A directory without the release's kubelet: exit 2 before anything
/// starts, with the command that builds it (no root or kubelet needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_kubelet_is_bad_input_naming_how_to_build_it() {
    let sb = Sandbox::new();
    let engine = format!("--engine=kubelet:{}", sb.path().display());
    let args = ["smoke", &engine, "--", "true"];
    let mut cmd = dpctl_command();
    cmd.args(args);
    let run = run_bounded(cmd, &args, Duration::from_secs(20)).await;
    run.expect_code(2);
    assert!(run.stderr.contains("conformance/build.sh kubelet 1.37"), "{}", run.stderr);
}

/// `scenario diff --engine kubelet:DIR`: kubelet-sim and the real kubelet
/// show the same on scenarios static pods express (an Allocate answer, an
/// init container whose PreStartContainer fails, a resource no plugin
/// registered, a pod admitted before its plugin, two resources whose answers
/// set one env var: the container has either value, as the kubelet takes
/// them in Go's map order), and one static pods cannot express is skipped
/// with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_diff_finds_no_difference_between_the_sim_and_the_real_kubelet() {
    let Some(dir) = kubelet_or_skip("kubelet_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let before = host_state();
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/scenarios");
    let files: Vec<String> = [
        "admit-allocate-answer",
        "glue-init-failed-no-regular",
        "admit-unknown-resource",
        "register-late-plugin",
        "fit-extended-stripped-counted",
        "register-two-resources",
    ]
    .iter()
    .map(|n| scenarios.join(format!("{n}.toml")).display().to_string())
    .collect();
    let engine = format!("--engine=kubelet:{}", dir.display());
    let mut args = vec!["scenario", "diff", &engine, "--kubelet-version", KUBELET_RELEASE, "-o", "json"];
    args.extend(files.iter().map(String::as_str));
    let mut c = dpctl_command();
    c.args(&args);
    let run = run_bounded(c, &args, RUN_WAIT * 2).await;
    let v = run.json();
    assert_eq!(run.code, 0, "{v:#}\n{}", run.stderr);
    let diffs = v["diffs"].as_array().expect("diffs");
    assert_eq!(diffs.len(), 5, "{v:#}");
    for d in diffs {
        assert!(d["right"].as_str().unwrap().starts_with("kubelet v1.37"), "{d:#}");
        assert_eq!(d["entries"], serde_json::json!([]), "{d:#}");
        assert_eq!(d["run_failures"], serde_json::json!([]), "{d:#}");
    }
    let skipped = v["skipped"].to_string();
    assert!(skipped.contains("fit-extended-stripped-counted: not on a real kubelet"), "{skipped}");
    assert!(skipped.contains("a static pod never gets"), "{skipped}");
    assert_eq!(host_state(), before, "the host is as before the run");
}
