//! `dpctl dra smoke --engine cluster:DIR`: DRA drivers meet a one-node
//! cluster (etcd, the API server, scheduler and controller manager built by
//! `conformance/build.sh cluster`, the real kubelet of `build.sh kubelet`
//! with containerd and runc), as root. The mock and the Go driver on the
//! kubeletplugin helper pass: the real scheduler allocates a template claim
//! and a 2-device claim, refuses an over-large one, the real kubelet
//! prepares and unprepares; a mock whose Prepare leaves a claim out (a
//! corpus bug) fails admission with the kubelet's words. After every run
//! nothing is left on the host. Without the binaries (or root, containerd,
//! runc) these print the suite's one SKIPPED line; under CI=true that fails.

use std::path::Path;
use std::time::Duration;

use crate::kubelet_engine::{assert_no_process_of, host_state};
use crate::support::go_built::{KUBELET_RELEASE, ONE_NODE, cluster_or_skip, dra_driver_or_skip};
use crate::support::{dpctl_bin, dpctl_command, run_bounded};

/// A cluster starts in about 15 s on 2 idle cores; pods run in about 2 s.
const RUN_WAIT: Duration = Duration::from_secs(400);

async fn smoke(dir: &Path, kubelets: &Path, driver: &[&str]) -> (i32, serde_json::Value, String) {
    let engine = format!("--engine=cluster:{}", dir.display());
    let mut args = vec!["dra", "smoke", &engine, "--kubelet-version", KUBELET_RELEASE, "-o", "json", "--"];
    args.extend_from_slice(driver);
    let mut cmd = dpctl_command();
    cmd.env("DPCTL_KUBELET_DIR", kubelets).args(&args);
    let run = run_bounded(cmd, &args, RUN_WAIT).await;
    let v = run.json();
    let root = v["dir"].as_str().unwrap_or_default().to_string();
    assert!(!root.is_empty() && !Path::new(&root).exists(), "the run's directory {root} is removed: {}", run.stderr);
    assert_no_process_of(&root);
    (run.code, v, run.stderr)
}

fn step<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|x| x["name"] == name))
        .unwrap_or_else(|| panic!("no step {name} in {report:#}"))
}

/// The mock with `extra` flags, publishing 4 devices to the cluster's API server.
fn mock(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec![
        dpctl_bin(),
        "dra",
        "mock",
        "gpu.example.com",
        "--dir",
        "{dir}",
        "--cdi-dir",
        "{cdi_dir}",
        "--kubeconfig",
        "{kubeconfig}",
        "--node-name",
        "{node}",
    ];
    v.extend_from_slice(extra);
    v
}

/// The steps the cluster plays pass; the others are skipped with a reason.
fn assert_cluster_passes(v: &serde_json::Value, stderr: &str) {
    for name in [
        "launch",
        "registration",
        "published-slices",
        "admission",
        "multi-device-claim",
        "unsatisfiable-claim",
        "unprepare-idempotent",
        "shutdown",
    ] {
        assert_eq!(step(v, name)["outcome"], "pass", "{name}: {:#} {stderr}", step(v, name));
    }
    assert!(
        step(v, "unsatisfiable-claim")["evidence"].as_str().unwrap().contains("cannot allocate all claims"),
        "{v:#}"
    );
    for s in v["steps"].as_array().unwrap() {
        if s["outcome"] == "skip" {
            assert!(!s["evidence"].as_str().unwrap_or_default().is_empty(), "{s:#}");
        }
    }
    assert!(v["engine"].as_str().unwrap().starts_with("cluster v1.37"), "{v:#}");
}

#[tokio::test]
async fn the_mock_passes_on_a_cluster_and_nothing_is_left() {
    let Some((dir, kubelets)) = cluster_or_skip("cluster_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let before = host_state();
    let (code, v, stderr) = smoke(&dir, &kubelets, &mock(&[])).await;
    assert_eq!(code, 0, "{v:#} {stderr}");
    assert_cluster_passes(&v, &stderr);
    assert!(step(&v, "cdi")["evidence"].as_str().unwrap().contains("no CDI"), "{v:#}");
    assert_eq!(host_state(), before, "the run left mounts, cgroups or directories on the host");
}

#[tokio::test]
async fn the_go_driver_passes_on_a_cluster() {
    let Some((dir, kubelets)) = cluster_or_skip("cluster_engine") else { return };
    let Some(bin) = dra_driver_or_skip("cluster_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let bin = bin.display().to_string();
    let driver = [
        bin.as_str(),
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
    ];
    let (code, v, stderr) = smoke(&dir, &kubelets, &driver).await;
    assert_eq!(code, 0, "{v:#} {stderr}");
    assert_cluster_passes(&v, &stderr);
}

/// A Prepare answer that leaves a claim out: the real kubelet fails the pod.
#[tokio::test]
async fn a_driver_that_leaves_a_claim_out_fails_admission_on_a_cluster() {
    let Some((dir, kubelets)) = cluster_or_skip("cluster_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let (code, v, stderr) = smoke(&dir, &kubelets, &mock(&["--fault", "missing-uid"])).await;
    assert_eq!(code, 1, "{v:#} {stderr}");
    let admission = step(&v, "admission");
    assert_eq!(admission["outcome"], "fail", "{admission:#}");
    assert!(admission["evidence"].as_str().unwrap().contains("not Running"), "{admission:#}");
    assert_eq!(step(&v, "published-slices")["outcome"], "pass", "{v:#}");
}

/// No root needed: a DIR without the binaries is refused before anything starts.
#[tokio::test]
async fn a_dir_without_the_binaries_is_refused_with_the_build_command() {
    let empty = tempfile::tempdir().unwrap();
    let engine = format!("--engine=cluster:{}", empty.path().display());
    let args = ["dra", "smoke", engine.as_str(), "--", "true"];
    let mut cmd = dpctl_command();
    cmd.args(args);
    let run = run_bounded(cmd, &args, Duration::from_secs(30)).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    // As root the binaries are looked for (root is checked first otherwise).
    assert!(run.stderr.contains("conformance/build.sh cluster") || run.stderr.contains("root"), "{}", run.stderr);
    let bad = ["dra", "smoke", "--engine", "cluster:", "--", "true"];
    let mut cmd = dpctl_command();
    cmd.args(bad);
    let run = run_bounded(cmd, &bad, Duration::from_secs(30)).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("cluster:DIR"), "{}", run.stderr);
}
