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

use std::path::{Path, PathBuf};
use std::time::Duration;

use dpctl::kubelet_sim::SimConfig;
use dpctl::smoke::isolate::Layout;
use dpctl::smoke::node::cluster::Cluster;
use futures_util::FutureExt;

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

/// The node of the fleet test (mapped to 127.0.0.1 in the cluster's private /etc/hosts).
const FLEET_NODE: &str = "dpctl-fleet";
/// The image deploy/image-tar.sh tags by default (not `latest`: no pull).
const LOCAL_IMAGE: &str = "dpctl.local/dpctl:dev";
/// How long a kubectl call or a pod to finish may take.
const KUBECTL_WAIT: Duration = Duration::from_secs(90);

/// `kubectl` of the cluster's build, with the admin kubeconfig.
struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// Runs kubectl with `stdin`: (exit code, stdout, stderr).
    async fn run(&self, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args).kill_on_drop(true);
        pipe(cmd, stdin, KUBECTL_WAIT).await
    }

    /// Runs kubectl and asserts it succeeded: its stdout.
    async fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (code, out, err) = self.run(args, stdin).await;
        assert_eq!(code, 0, "kubectl {args:?}: {out} {err}");
        out
    }

    /// Runs kubectl until `done` holds for its stdout (bounded): that stdout.
    async fn until(&self, args: &[&str], done: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + KUBECTL_WAIT;
        loop {
            let (_, out, err) = self.run(args, None).await;
            if done(&out) {
                return out;
            }
            if tokio::time::Instant::now() >= deadline {
                let (_, events, _) = self.run(&["get", "events", "-A"], None).await;
                panic!("kubectl {args:?} not done in {KUBECTL_WAIT:?}: {out} {err}\nevents:\n{events}");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// Runs `cmd` with `stdin` piped in, bounded: (exit code, stdout, stderr).
async fn pipe(mut cmd: tokio::process::Command, stdin: Option<&str>, bound: Duration) -> (i32, String, String) {
    use tokio::io::AsyncWriteExt;
    cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut input = child.stdin.take().unwrap();
    let text = stdin.unwrap_or_default().to_string();
    tokio::spawn(async move {
        let _ = input.write_all(text.as_bytes()).await;
    });
    let out = tokio::time::timeout(bound, child.wait_with_output()).await.expect("bounded").expect("output");
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), s(&out.stdout), s(&out.stderr))
}

/// `dpctl doctor merge -o json` over `logs`: (exit code, the merged report).
async fn merge(logs: &str) -> (i32, serde_json::Value) {
    let mut cmd = tokio::process::Command::new(dpctl_bin());
    cmd.env("NO_COLOR", "1").args(["doctor", "merge", "-o", "json"]).kill_on_drop(true);
    let (code, out, err) = pipe(cmd, Some(logs), Duration::from_secs(30)).await;
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("doctor merge -o json: {e}: {out} {err}"));
    (code, v)
}

/// A manifest of deploy/ as a user edits it: our image, the node's release.
/// On a real node the runtime makes a missing hostPath directory (the CDI
/// ones); the engine's node has a read-only root, so a host without
/// /etc/cdi gets an empty directory of the run's instead.
fn manifest(file: &str, release: &str, run: &Path) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text
        .replace("ghcr.io/example/dpctl:latest", LOCAL_IMAGE)
        .replace("\"--kubelet-version\", \"1.36\"", &format!("\"--kubelet-version\", \"{release}\""))
        .replace("NODE_NAME_HERE", FLEET_NODE);
    let edited = if Path::new("/etc/cdi").is_dir() {
        edited
    } else {
        let empty = run.join("etc-cdi");
        std::fs::create_dir_all(&empty).unwrap();
        edited.replace("{path: /etc/cdi}", &format!("{{path: {}}}", empty.display()))
    };
    assert!(edited.contains(LOCAL_IMAGE) && edited.contains(release), "{file} names no image or release to set");
    edited
}

/// What the fleet recipes gave: the merged reports of the DaemonSet, the
/// Job and `kubectl debug` with each profile, and the debug pods left.
#[derive(Debug)]
struct Fleet {
    daemonset: (i32, serde_json::Value),
    job: (i32, serde_json::Value),
    /// The debug pod's phase and log (doctor's table).
    general: (String, String),
    baseline: (String, String),
    debug_pods_left: String,
}

// long: the three recipes in the README's order, each as its commands.
async fn fleet(cluster: &Cluster, dir: &Path, image: &Path, run: &Path) -> Fleet {
    cluster.import_image(image).await.unwrap();
    let k = Kubectl { bin: dir.join("kubectl"), kubeconfig: cluster.kubeconfig().to_path_buf() };
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let version = k.ok(&["get", "node", FLEET_NODE, "-o", "jsonpath={.status.nodeInfo.kubeletVersion}"], None).await;
    // The DaemonSet: the latest report of every node, merged.
    k.ok(&["apply", "-f", "-"], Some(&manifest("doctor-daemonset.yaml", KUBELET_RELEASE, run))).await;
    let logs = ["logs", "-n", "dpctl-doctor", "-l", "app.kubernetes.io/name=dpctl-doctor", "--tail=1"];
    let ds_logs = k.until(&logs, |out| out.trim_start().starts_with('{')).await;
    let daemonset = merge(&ds_logs).await;
    // The Job, pinned to the node.
    k.ok(&["apply", "-f", "-"], Some(&manifest("doctor-job.yaml", KUBELET_RELEASE, run))).await;
    let job = format!("job/dpctl-doctor-{FLEET_NODE}");
    let status = ["get", "-n", "dpctl-doctor", &job, "-o", "jsonpath={.status.succeeded}{.status.failed}"];
    k.until(&status, |out| !out.trim().is_empty()).await;
    let job = merge(&k.ok(&["logs", "-n", "dpctl-doctor", &job], None).await).await;
    // kubectl debug node/..., as the README gives it (no -it: the pod's log is read).
    let mut debug = Vec::new();
    for profile in ["general", "baseline"] {
        let node = format!("node/{FLEET_NODE}");
        let image = format!("--image={LOCAL_IMAGE}");
        let custom = format!("--custom={}", deploy.join("debug-as-root.yaml").display());
        let mut args = vec!["debug", &node, &image];
        args.push(if profile == "general" { "--profile=general" } else { "--profile=baseline" });
        if profile == "general" {
            args.push(&custom);
        }
        args.extend(["--", "dpctl", "doctor", "--root", "/host", "--kubelet-version", &version]);
        let out = k.ok(&args, None).await;
        let pod = out.split_whitespace().find(|w| w.starts_with("node-debugger-")).unwrap_or_else(|| panic!("{out}"));
        let pod = format!("pod/{pod}");
        let phase =
            k.until(&["get", &pod, "-o", "jsonpath={.status.phase}"], |p| p == "Succeeded" || p == "Failed").await;
        // The recipe is interactive: doctor prints its table.
        let logs = k.ok(&["logs", &pod], None).await;
        debug.push((phase, logs));
    }
    // The README's clean-up line.
    let clean = format!(
        "{kubectl} --kubeconfig {cfg} get pods -o name | grep node-debugger-{FLEET_NODE} | xargs {kubectl} --kubeconfig \
         {cfg} delete",
        kubectl = k.bin.display(),
        cfg = k.kubeconfig.display()
    );
    let mut sh = tokio::process::Command::new("sh");
    sh.args(["-c", &clean]).kill_on_drop(true);
    let (code, out, err) = pipe(sh, None, KUBECTL_WAIT).await;
    assert_eq!(code, 0, "{clean}: {out} {err}");
    let debug_pods_left = k.ok(&["get", "pods", "-o", "name"], None).await;
    let baseline = debug.pop().unwrap();
    let general = debug.pop().unwrap();
    Fleet { daemonset, job, general, baseline, debug_pods_left }
}

/// deploy/'s DaemonSet and Job and the README's `kubectl debug node/...`
/// recipe run on a one-node cluster with an image of this dpctl
/// (deploy/image-tar.sh, imported into the node's containerd: no
/// registry), and `dpctl doctor merge` reads their logs. One cluster for
/// all; nothing is left on the host.
#[tokio::test]
async fn the_fleet_recipes_run_on_a_cluster() {
    let Some((dir, kubelets)) = cluster_or_skip("cluster_engine") else { return };
    let _node = ONE_NODE.lock().await;
    let before = host_state();
    let work = tempfile::tempdir().unwrap();
    let image = work.path().join("dpctl.tar");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/image-tar.sh");
    let mut cmd = tokio::process::Command::new(&script);
    cmd.arg(dpctl_bin()).arg(&image).kill_on_drop(true);
    let (code, out, err) = pipe(cmd, None, Duration::from_secs(120)).await;
    assert_eq!(code, 0, "{}: {out} {err}", script.display());
    let layout = Layout::create(None).unwrap();
    let root = layout.root.display().to_string();
    let sim = SimConfig::new(&layout.device_plugins);
    let kubelet = kubelets.join(format!("kubelet-{KUBELET_RELEASE}"));
    let helper = Some(PathBuf::from(dpctl_bin()));
    let cluster = match Cluster::start_with(&dir, &kubelet, KUBELET_RELEASE, &sim, &layout, helper, FLEET_NODE).await {
        Ok(c) => c,
        Err(e) => {
            layout.remove();
            panic!("the cluster did not start: {e}");
        }
    };
    // Whatever fails inside, the cluster is stopped before the test fails.
    let outcome = std::panic::AssertUnwindSafe(fleet(&cluster, &dir, &image, &layout.root)).catch_unwind().await;
    let stopped = cluster.stop().await;
    layout.remove();
    let fleet = outcome.unwrap_or_else(|p| std::panic::resume_unwind(p));
    stopped.unwrap();
    assert_no_process_of(&root);
    assert_eq!(host_state(), before, "the run left mounts, cgroups or directories on the host");
    // The DaemonSet's and the Job's reports, merged: the node, all ok
    // (7 checks: dir, kubelet root, kubelet.sock, PodResources, checkpoint,
    // plugins_registry, DRA plugins), exit 0.
    for (recipe, (code, merged)) in [("DaemonSet", &fleet.daemonset), ("Job", &fleet.job)] {
        assert_eq!(*code, 0, "{recipe}: {merged:#}");
        let nodes = merged["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 1, "{recipe}: {merged:#}");
        let n = &nodes[0];
        assert_eq!(n["node"], FLEET_NODE, "{recipe}: DPCTL_NODE_NAME from the downward API: {merged:#}");
        assert_eq!(
            (n["errors"].as_u64(), n["warnings"].as_u64(), n["ok"].as_u64()),
            (Some(0), Some(0), Some(7)),
            "{recipe}: {merged:#}"
        );
        assert_eq!(n["kubelet_version"], KUBELET_RELEASE, "{recipe}: {merged:#}");
        assert!(merged["skipped"].as_array().unwrap().is_empty(), "{recipe}: {merged:#}");
    }
    // kubectl debug, general profile as root (deploy/debug-as-root.yaml):
    // doctor connects to the kubelet's sockets and exits 0.
    let (phase, table) = &fleet.general;
    assert_eq!(phase, "Succeeded", "{table}");
    assert!(table.lines().any(|l| l.starts_with("ok") && l.contains("kubelet-sock")), "{table}");
    assert!(!table.lines().any(|l| l.starts_with("error")), "{table}");
    // The baseline profile mounts no /host: doctor's errors, the pod Failed.
    let (phase, table) = &fleet.baseline;
    assert_eq!(phase, "Failed", "{table}");
    assert!(
        table.lines().any(|l| l.starts_with("error") && l.contains("/host/var/lib/kubelet/device-plugins")),
        "{table}"
    );
    // The README's clean-up line removed both debug pods.
    assert_eq!(fleet.debug_pods_left.trim(), "", "debug pods left");
}
