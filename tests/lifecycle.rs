//! The node lifecycle that plugins fail on, as a user plays it from the
//! CLI: a kubelet restart with pods still running (the re-admission), a
//! re-created kubelet.sock, and smoke's reboot step.

use crate::support::fake_plugin::{Behaviour, FakePlugin};
use crate::support::{Child, Sandbox, dpctl};

const GPU: &str = "example.com/gpu";

/// A sim playing `version` in `sb`, a plugin with 4 devices that never
/// registers again after a restart, and two pods admitted: `a` (a main
/// container with one device) and `b` (an init container and a main
/// container, one device each).
async fn two_pods(sb: &Sandbox, version: &str) -> (Child, tokio::sync::oneshot::Sender<()>) {
    let dir = sb.path().to_str().unwrap();
    let mut child = Child::dpctl(&["kubelet-sim", "--dir", dir, "--kubelet-version", version, "-o", "json"]);
    child.line_with("\"started\"").await;
    let p = FakePlugin::new(FakePlugin::healthy(4, false), Behaviour::default());
    let (_path, stop) = p.start(sb.path(), "gpu.sock", GPU).await;
    child.line_with("\"snapshot\"").await;
    let pods = [
        (
            "a.yaml",
            "metadata: {name: a}\nspec:\n  containers:\n  - name: main\n    resources: {limits: {example.com/gpu: 1}}\n",
        ),
        (
            "b.yaml",
            "metadata: {name: b}\nspec:\n  initContainers:\n  - name: init\n    resources: {limits: {example.com/gpu: 1}}\n  \
             containers:\n  - name: main\n    resources: {limits: {example.com/gpu: 1}}\n",
        ),
    ];
    for (file, manifest) in pods {
        std::fs::write(sb.join(file), manifest).unwrap();
        let r = dpctl(&["kubelet-sim", "admit", "--dir", dir, "-f", sb.join(file).to_str().unwrap()]).await;
        r.expect_code(0);
    }
    (child, stop)
}

/// 1.27+ (isContainerAlreadyRunning; docs/kubelet-versions.md §5, §10): after a
/// kubelet restart with the plugin not back, the pod whose only device holder
/// is its running main container keeps its device; the pod whose completed
/// init container held one is rejected (kubernetes #138446) and leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_readmits_running_pods_and_rejects_a_completed_init_on_1_37() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let (mut child, _stop) = two_pods(&sb, "1.37").await;
    let r = dpctl(&["kubelet-sim", "restart", "--dir", dir, "--wait", "200ms", "-o", "json"]).await;
    let v = r.expect_code(1).json();
    let pods = v["readmitted"].as_array().expect("readmitted pods");
    assert_eq!((pods[0]["pod"].as_str(), pods[0]["admitted"].as_bool()), (Some("a"), Some(true)), "{v}");
    assert_eq!(pods[0]["containers"][0]["running"], true);
    assert_eq!((pods[1]["pod"].as_str(), pods[1]["admitted"].as_bool()), (Some("b"), Some(false)), "{v}");
    assert_eq!(pods[1]["reason"], "UnexpectedAdmissionError");
    assert_eq!(
        pods[1]["message"],
        "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices example.com/gpu, \
         which is unexpected"
    );
    assert_eq!(
        (pods[1]["containers"][0]["running"].as_bool(), pods[1]["containers"][1]["running"].as_bool()),
        (Some(false), Some(true))
    );
    child.line_with("\"admission_rejected\"").await;
    let st = dpctl(&["kubelet-sim", "status", "--dir", dir, "-o", "json"]).await.expect_code(0).json();
    let names: Vec<&str> = st["pods"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["a"], "the rejected pod is killed: {st}");
    // --no-readmit: nothing admitted again, the pod keeps its device unchecked.
    let r = dpctl(&["kubelet-sim", "restart", "--dir", dir, "--wait", "100ms", "--no-readmit", "-o", "json"]).await;
    assert!(r.expect_code(1).json().get("readmitted").is_none(), "{}", r.stdout);
    child.terminate();
    child.wait().await;
}

/// 1.26 (no running-container skip): the running main container's devices
/// are checked too, so both pods are rejected while the plugin is not back;
/// the table says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_checks_running_containers_on_1_26() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let (mut child, _stop) = two_pods(&sb, "1.26").await;
    let r = dpctl(&["kubelet-sim", "restart", "--dir", dir, "--wait", "200ms"]).await;
    let out = r.expect_code(1).stdout.clone();
    assert_eq!(out.matches("rejected").count(), 3, "two rows and the note: {out}");
    assert!(out.contains("main dev-0 (running, checked)"), "{out}");
    assert!(out.contains("rejected after the restart:"), "{out}");
    child.terminate();
    child.wait().await;
}

/// Absurd re-admission delays are refused with the flag's name (exit 2).
#[tokio::test]
async fn restart_refuses_an_absurd_readmit_after() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    for bad in ["1e20s", "soon", ""] {
        let r = dpctl(&["kubelet-sim", "restart", "--dir", dir, "--readmit-after", bad]).await;
        assert!(r.expect_code(2).stderr.contains("--readmit-after"), "{bad}: {}", r.stderr);
    }
    let r = dpctl(&["kubelet-sim", "restart", "--dir", dir, "--readmit-after", "1s", "--no-readmit"]).await;
    r.expect_code(2);
}

/// A kubelet restart whose new kubelet.sock appears late (bottlerocket
/// #4250; every release: the device manager serves it only once it has
/// started), possibly on the inode the old one had: `dpctl mock-plugin`,
/// whose own socket was deleted first, keeps retrying until the new
/// kubelet.sock exists and registers once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mock_reregisters_when_a_restart_recreates_kubelet_sock_late() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let mut sim = Child::dpctl(&["kubelet-sim", "--dir", dir, "--kubelet-socket-delay", "700ms", "-o", "json"]);
    sim.line_with("\"started\"").await;
    let mut mock = Child::dpctl(&["mock-plugin", "--dir", dir, "--resource", GPU, "--devices", "2"]);
    sim.line_with("\"snapshot\"").await;
    let r = dpctl(&["kubelet-sim", "restart", "--dir", dir, "--wait", "10s", "-o", "json"]).await;
    let v = r.expect_code(0).json();
    assert_eq!(v["kubelet_socket_late_ms"], 700, "{v}");
    assert_eq!(v["all_returned"], true, "{v}");
    assert_eq!(v["resources"][0]["reregistered"], true);
    let st = dpctl(&["kubelet-sim", "status", "--dir", dir, "-o", "json"]).await.expect_code(0).json();
    assert_eq!(st["resources"][0]["registrations"], 1, "one Register for the new kubelet.sock: {st}");
    mock.terminate();
    mock.wait().await;
    sim.terminate();
    sim.wait().await;
}
