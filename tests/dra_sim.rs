//! kubelet-sim as the kubelet's DRA manager, driven as a user drives it:
//! `dpctl dra mock` is the driver, `dpctl kubelet-sim` registers it from
//! plugins_registry, admits pods with `resourceClaims` (prepared before the
//! containers start), unprepares them at deletion, writes
//! `dra_manager_state` and prepares restored claims again after a restart.
//! The rules hold for kubelets 1.34 to 1.37 (docs/dra.md §6); each test
//! names the release it plays.

use crate::support::{Child, DRA_POD, Sandbox, dpctl};

const DRIVER: &str = "gpu.example.com";

/// A node: the mock driver (recording its calls) and a sim watching its plugins_registry.
struct Node {
    mock: Child,
    sim: Child,
    root: String,
    dir: String,
    record: std::path::PathBuf,
    pod: String,
}

async fn node(sb: &Sandbox, version: &str, mock_args: &[&str]) -> Node {
    let root = sb.path().to_str().unwrap().to_string();
    let record = sb.join("calls.jsonl");
    let mut args = vec!["dra", "mock", DRIVER, "--dir", &root, "-o", "json", "--record", record.to_str().unwrap()];
    args.extend_from_slice(mock_args);
    let mut mock = Child::dpctl(&args);
    mock.event("serving").await;
    let dir = format!("{root}/device-plugins");
    let registry = format!("{root}/plugins_registry");
    let sim = Child::dpctl(&[
        "kubelet-sim",
        "--dir",
        &dir,
        "--registry-dir",
        &registry,
        "--kubelet-version",
        version,
        "-o",
        "json",
    ]);
    let pod = sb.join("pod.yaml");
    std::fs::write(&pod, DRA_POD).unwrap();
    Node { mock, sim, root, dir, record, pod: pod.to_str().unwrap().to_string() }
}

/// The RPCs the mock recorded, in order.
fn rpcs(record: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["rpc"].as_str().map(String::from))
        .collect()
}

/// A registration socket that is a link to the driver's (kept elsewhere):
/// the plugin watcher stats through links (os.Stat in traversePluginDir and
/// handleCreateEvent), so the driver registers under the link's path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_registration_socket_registers_1_37() {
    let sb = Sandbox::new();
    let elsewhere = sb.join("driver");
    let elsewhere = elsewhere.to_str().unwrap();
    let mut mock = Child::dpctl(&["dra", "mock", DRIVER, "--dir", elsewhere, "-o", "json"]);
    let serving = mock.event("serving").await;
    let registry = sb.join("plugins_registry");
    std::fs::create_dir_all(&registry).unwrap();
    let real = std::fs::read_dir(format!("{elsewhere}/plugins_registry"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .unwrap_or_else(|| panic!("no registration socket: {serving}"));
    let link = registry.join(real.file_name().unwrap());
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let dir = sb.join("device-plugins");
    let (dir, registry) = (dir.to_str().unwrap(), registry.to_str().unwrap());
    let mut sim = Child::dpctl(&["kubelet-sim", "--dir", dir, "--registry-dir", registry, "-o", "json"]);
    let reg = sim.event("dra_registered").await;
    assert_eq!(reg["driver"].as_str(), Some(DRIVER), "{reg}");
}

/// 1.37: register, admit (prepare seen by the driver, CDI IDs for the
/// container), PodResources `dynamic_resources`, the checkpoint verifies;
/// a restart reads the claim back and prepares nothing (the running pod
/// keeps its sandbox: SyncPod prepares only when it creates one);
/// deletion unprepares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_prepared_shown_checkpointed_read_back_and_unprepared_1_37() {
    let sb = Sandbox::new();
    let mut n = node(&sb, "1.37", &[]).await;
    let reg = n.sim.event("dra_registered").await;
    assert_eq!((reg["driver"].as_str(), reg["service"].as_str()), (Some(DRIVER), Some("v1.DRAPlugin")));
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &n.dir, &n.pod, "-o", "json"]).await;
    let v = r.expect_code(0).json();
    assert_eq!(v["dra"]["error"], serde_json::Value::Null, "{v}");
    assert_eq!(v["dra"]["calls"][0]["rpc"], "v1.DRAPlugin/NodePrepareResources");
    assert_eq!(v["dra"]["cdi_devices"]["main"], serde_json::json!(["gpu.example.com/claim=pool-0-dev-0"]));
    assert_eq!(v["containers"][0]["started"], true);
    assert!(rpcs(&n.record).contains(&"v1.DRAPlugin/NodePrepareResources".to_string()));

    let sock = format!("{}/pod-resources.sock", n.dir);
    let pr = dpctl(&["podresources", "get", "--socket", &sock, "trainer", "-o", "json"]).await;
    let pv = pr.expect_code(0).json();
    let dynamic = &pv["pod_resources"]["containers"][0]["dynamic_resources"][0];
    assert_eq!(dynamic["claim_name"], "gpu-claim", "{pv}");
    assert_eq!(dynamic["claim_resources"][0]["driver_name"], DRIVER);
    assert_eq!(dynamic["claim_resources"][0]["device_name"], "dev-0");

    let state = format!("{}/dra_manager_state", n.root);
    let ck = dpctl(&["checkpoint", "verify", "--dra", &state, "-o", "json"]).await;
    let cv = ck.expect_code(0).json();
    assert_eq!(cv["claims"][0]["ClaimUID"], "claim-uid-1", "{cv}");
    assert!(cv["claims"][0]["PodUIDs"].get("pod-uid-1").is_some(), "{cv}");

    let r = dpctl(&["kubelet-sim", "restart", "--dir", &n.dir, "--wait", "20s", "-o", "json"]).await;
    let rv = r.expect_code(0).json();
    assert_eq!(rv["dra_restored_claims"], 1, "{rv}");
    assert!(rv.get("dra_prepared").is_none(), "{rv}");
    let prepares = rpcs(&n.record).iter().filter(|r| r.ends_with("NodePrepareResources")).count();
    assert_eq!(prepares, 1, "a restart prepares nothing: {:?}", rpcs(&n.record));
    let st = dpctl(&["kubelet-sim", "status", "--dir", &n.dir, "-o", "json"]).await;
    let sv = st.expect_code(0).json();
    assert_eq!(sv["dra"]["claims"][0]["drivers"][DRIVER].as_array().map(Vec::len), Some(1), "read back: {sv}");

    let d = dpctl(&["kubelet-sim", "delete", "--dir", &n.dir, "trainer"]).await;
    let out = &d.expect_code(0).stdout;
    assert!(out.contains("unprepared default/gpu-claim"), "{out}");
    assert_eq!(rpcs(&n.record).last().map(String::as_str), Some("v1.DRAPlugin/NodeUnprepareResources"));
    let ck = dpctl(&["checkpoint", "verify", "--dra", &state, "-o", "json"]).await;
    assert_eq!(ck.expect_code(0).json()["claims"], serde_json::json!([]));
    // The driver stops and removes its registration socket: deregistered.
    n.mock.terminate();
    let gone = n.sim.event("dra_deregistered").await;
    assert_eq!(gone["driver"], DRIVER);
    let st = dpctl(&["kubelet-sim", "status", "--dir", &n.dir, "-o", "json"]).await;
    assert_eq!(st.expect_code(0).json()["dra"]["drivers"], serde_json::json!([]));
    n.sim.terminate();
}

/// 1.34: a driver failing Prepare keeps the containers from starting, with
/// the kubelet's text; admit exits 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_prepare_reads_as_the_kubelets_error_1_34() {
    let sb = Sandbox::new();
    let mut n = node(&sb, "1.34", &["--prepare-error", "no GPU left"]).await;
    n.sim.event("dra_registered").await;
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &n.dir, &n.pod]).await;
    let out = &r.expect_code(1).stdout;
    let text = "prepare dynamic resources: NodePrepareResources failed for ResourceClaim gpu-claim: no GPU left";
    assert!(out.contains(&format!("not started: container main: {text}")), "{out}");
    let ev = n.sim.event("dra_prepared").await;
    assert_eq!(ev["error"], text);
    n.sim.terminate();
}

/// 1.34 (the referee shows the same for 1.34-1.37, conformance/scenarios/
/// dra-prepare-missing-claim.toml): a claim the driver leaves out of its
/// Prepare answer is skipped, so no container starts; and a pod holding no
/// device-plugin devices writes no device-manager checkpoint, neither when
/// it is deleted nor at a restart (the device manager never held anything).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_left_out_of_the_answer_fails_the_pod_and_no_device_checkpoint_appears_1_34() {
    let sb = Sandbox::new();
    let mut n = node(&sb, "1.34", &["--fault", "missing-uid"]).await;
    n.sim.event("dra_registered").await;
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &n.dir, &n.pod, "-o", "json"]).await;
    let v = r.expect_code(1).json();
    let text = "prepare dynamic resources: NodePrepareResources skipped 1 ResourceClaims";
    assert_eq!(v["dra"]["error"], text, "{v}");
    assert_eq!(v["containers"][0]["started"], false, "{v}");
    let checkpoint = std::path::Path::new(&n.dir).join("kubelet_internal_checkpoint");
    let r = dpctl(&["kubelet-sim", "restart", "--dir", &n.dir, "--wait", "20s", "-o", "json"]).await;
    r.expect_code(0);
    assert!(!checkpoint.exists(), "a restart created {}", checkpoint.display());
    dpctl(&["kubelet-sim", "delete", "--dir", &n.dir, "trainer"]).await.expect_code(0);
    assert!(!checkpoint.exists(), "deleting a pod without devices created {}", checkpoint.display());
    n.sim.terminate();
}

/// 1.35: a driver advertising no node service the kubelet knows is told so
/// at registration; 1.33 has no DRA handler (DRA off by default) and refuses
/// a pod with claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_is_refused_with_the_kubelets_texts_1_35_and_1_33() {
    let sb = Sandbox::new();
    let mut n = node(&sb, "1.35", &["--service", "health-v1alpha1"]).await;
    let ev = n.sim.event("dra_registration_rejected").await;
    let msg = ev["message"].as_str().unwrap();
    assert!(
        msg.starts_with("RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of DRA driver plugin gpu.example.com at endpoint ")
            && msg.ends_with("none of services supported by the plugin ([\"v1alpha1.DRAResourceHealth\"]) are supported by the kubelet ([\"v1.DRAPlugin\" \"v1beta1.DRAPlugin\"])"),
        "{msg}"
    );
    n.sim.terminate();
    drop(n);

    let sb = Sandbox::new();
    let mut n = node(&sb, "1.33", &[]).await;
    let ev = n.sim.event("registry_plugin_ignored").await;
    assert!(
        ev["reason"]
            .as_str()
            .unwrap()
            .starts_with("RegisterPlugin error -- no handler registered for plugin type: DRAPlugin at socket "),
        "{ev}"
    );
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &n.dir, &n.pod]).await;
    assert!(r.expect_code(2).stderr.contains("kubelet-sim plays DRA from 1.34"), "{}", r.stderr);
    n.sim.terminate();
}

/// Bad claim input is refused before it reaches the sim (exit 2), naming the field.
#[tokio::test]
async fn bad_claim_input_names_the_field() {
    let sb = Sandbox::new();
    let cases = [
        (
            DRA_POD.replace("claims: [{name: gpu}]", "claims: [{name: tpu}]"),
            "\"tpu\" is not one of spec.resourceClaims",
        ),
        (DRA_POD.replace("uid: claim-uid-1", "uid: \"\""), "UID"),
        (DRA_POD.replace("resourceClaimName: gpu-claim", "resourceClaimTemplateName: t"), "resourceClaimTemplateName"),
        (DRA_POD.replace("driver: gpu.example.com", "driver: \"Not A Name\""), "is not a DNS subdomain"),
        (DRA_POD.replace("kind: Pod", "kind: ResourceClaim"), "no Pod in the manifest"),
        (
            DRA_POD.replace("resourceClaimName: gpu-claim", &format!("resourceClaimName: {}", "a".repeat(100_000))),
            "\"... is not a DNS subdomain",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let f = sb.join(&format!("bad-{i}.yaml"));
        std::fs::write(&f, text).unwrap();
        let r = dpctl(&["kubelet-sim", "admit", "--dir", sb.path().to_str().unwrap(), f.to_str().unwrap()]).await;
        assert!(r.expect_code(2).stderr.contains(want), "case {i}: {}", r.stderr);
        assert!(r.stderr.len() < 1000, "case {i}: the error echoes no huge value");
    }
}

fn vector(name: &str) -> String {
    format!("{}/tests/data/checkpoints/dra/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// 1.34: a dra_manager_state the sim did not write (the kubelet's own test
/// vector) is restored (not prepared) and never changed; a pod using its
/// claim while the driver is away fails the kubelet's way. A corrupt one
/// stops the start, as it stops the kubelet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_checkpoint_is_restored_read_only_and_a_corrupt_one_stops_the_start_1_34() {
    let sb = Sandbox::new();
    let state = sb.join("dra_manager_state");
    std::fs::copy(vector("v1.34-one-claim.json"), &state).unwrap();
    let before = std::fs::read(&state).unwrap();
    let dir = sb.join("device-plugins");
    let (dir, registry) = (dir.to_str().unwrap(), sb.join("plugins_registry"));
    let args = ["kubelet-sim", "--dir", dir, "--registry-dir", registry.to_str().unwrap(), "--kubelet-version", "1.34"];
    let mut sim = Child::dpctl(&[&args[..], &["-o", "json"]].concat());
    sim.event("started").await;
    let st = dpctl(&["kubelet-sim", "status", "--dir", dir, "-o", "json"]).await;
    let v = st.expect_code(0).json();
    assert_eq!(v["dra"]["claims"][0]["name"], "example", "{v}");
    assert_eq!(v["dra"]["claims"][0]["prepared"], false);
    let pod = DRA_POD
        .replace("gpu-claim", "example")
        .replace("claim-uid-1", "067798be-454e-4be4-9047-1aa06aea63f7")
        .replace("driver: gpu.example.com", "driver: test-driver.cdi.k8s.io");
    let f = sb.join("pod.yaml");
    std::fs::write(&f, pod).unwrap();
    let r = dpctl(&["kubelet-sim", "admit", "--dir", dir, f.to_str().unwrap()]).await;
    let out = &r.expect_code(1).stdout;
    assert!(out.contains("prepare dynamic resources: DRA driver test-driver.cdi.k8s.io is not registered"), "{out}");
    assert_eq!(std::fs::read(&state).unwrap(), before, "a file the sim did not write is never changed");
    sim.terminate();
    assert_eq!(sim.wait().await, 0);

    std::fs::copy(vector("v1.34-corrupt-entries.json"), &state).unwrap();
    let r = dpctl(&[&args[..], &["--timeout", "1s"]].concat()).await;
    assert!(r.expect_code(2).stderr.contains("checkpoint is corrupted"), "{}", r.stderr);
    assert!(r.stderr.contains("drain the node and remove the file"), "{}", r.stderr);
}

/// 1.36: a restart prepares nothing; a new user of the restored claim
/// prepares it again and the answer is appended to its restored devices (no
/// `resetDevices` before 1.37), so the checkpoint and PodResources list the
/// device twice; a driver failing the call reads as Go prints a gRPC status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_user_after_a_restart_lists_devices_twice_and_grpc_errors_read_as_go_1_36() {
    let sb = Sandbox::new();
    let shared = DRA_POD.replace(
        "  - {resource: pods, name: trainer, uid: pod-uid-1}\n",
        "  - {resource: pods, name: trainer, uid: pod-uid-1}\n  - {resource: pods, name: second, uid: pod-uid-2}\n",
    );
    let mut n = node(&sb, "1.36", &[]).await;
    n.sim.event("dra_registered").await;
    let first = sb.join("first.yaml");
    std::fs::write(&first, &shared).unwrap();
    dpctl(&["kubelet-sim", "admit", "--dir", &n.dir, first.to_str().unwrap()]).await.expect_code(0);
    let r = dpctl(&["kubelet-sim", "restart", "--dir", &n.dir, "--wait", "20s", "-o", "json"]).await;
    r.expect_code(0);
    assert_eq!(rpcs(&n.record).iter().filter(|r| r.ends_with("NodePrepareResources")).count(), 1);
    n.sim.event("dra_registered").await;
    let second = sb.join("second.yaml");
    std::fs::write(
        &second,
        shared.replace("name: trainer, uid: pod-uid-1}\nspec", "name: second, uid: pod-uid-2}\nspec"),
    )
    .unwrap();
    dpctl(&["kubelet-sim", "admit", "--dir", &n.dir, second.to_str().unwrap()]).await.expect_code(0);
    let sock = format!("{}/pod-resources.sock", n.dir);
    let pr = dpctl(&["podresources", "get", "--socket", &sock, "second", "-o", "json"]).await;
    let pv = pr.expect_code(0).json();
    let devices = &pv["pod_resources"]["containers"][0]["dynamic_resources"][0]["claim_resources"];
    assert_eq!(devices.as_array().map(Vec::len), Some(2), "{pv}");
    assert_eq!(devices[1]["cdi_devices"].as_array().map(Vec::len), Some(2), "the CDI list accumulates: {pv}");
    let ck = dpctl(&["checkpoint", "show", "--dra", &format!("{}/dra_manager_state", n.root), "-o", "json"]).await;
    let cv = ck.expect_code(0).json();
    assert_eq!(cv["claims"][0]["DriverState"][DRIVER]["Devices"].as_array().map(Vec::len), Some(2), "{cv}");
    n.sim.terminate();
    drop(n);

    let sb = Sandbox::new();
    let mut n = node(&sb, "1.36", &["--prepare-status", "unavailable"]).await;
    n.sim.event("dra_registered").await;
    let r = dpctl(&["kubelet-sim", "admit", "--dir", &n.dir, &n.pod]).await;
    let out = &r.expect_code(1).stdout;
    assert!(
        out.contains("prepare dynamic resources: NodePrepareResources: rpc error: code = Unavailable desc = "),
        "{out}"
    );
    n.sim.terminate();
}
