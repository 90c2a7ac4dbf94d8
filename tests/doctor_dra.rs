//! `dpctl doctor` on nodes with DRA drivers, built in a sandbox root as a
//! user builds them: `dpctl dra mock` is the driver (its CDI specs naming a
//! device node), `dpctl kubelet-sim` the kubelet (registering it from
//! plugins_registry, preparing a claim, writing `dra_manager_state`),
//! `dpctl mock-plugin` a device plugin whose Allocate answer hands out the
//! same device node; and a kubelet whose `--root-dir` is elsewhere, seen
//! through a `proc` tree under the root. The kubelet rules are those of
//! 1.37 (service choice as 1.34-1.37, docs/dra.md §2).

use std::path::Path;

use crate::support::{Child, DRA_POD, Sandbox, dpctl};

const DRIVER: &str = "gpu.example.com";
const GPU: &str = "example.com/gpu";

/// A device plugin with one GPU whose Allocate answer hands out the device
/// node the DRA driver's CDI spec names for its `dev-0`.
const PLUGIN: &str = r#"
[[resource]]
name = "example.com/gpu"
endpoint = "example-gpu.sock"

[[resource.device]]
id = "GPU-0"

[[resource.allocate.devices]]
container_path = "/dev/gpu0"
host_path = "/dev/dpctl-gpu0"
permissions = "rw"
"#;

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// The findings of a `doctor -o json` run that are not ok, as (code, subject).
fn bad(v: &serde_json::Value) -> Vec<(String, String)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "ok")
        .map(|f| (f["code"].as_str().unwrap().to_string(), f["subject"].as_str().unwrap().to_string()))
        .collect()
}

fn finding<'a>(v: &'a serde_json::Value, code: &str) -> &'a serde_json::Value {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == code)
        .unwrap_or_else(|| panic!("no {code} finding: {v:#}"))
}

/// Polls `kubelet-sim status` (bounded) until the plugin's device is counted.
async fn wait_allocatable(dir: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let v = dpctl(&["kubelet-sim", "status", "--dir", dir, "-o", "json"]).await.expect_code(0).json();
        if v["resources"][0]["allocatable"] == 1 {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the plugin's device is never allocatable: {v:#}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// 1.37: a node with the mock DRA driver registered and one claim prepared
/// is healthy (its registration, service socket, versions and checkpoint
/// shown); once a device plugin hands out the device node the driver
/// prepared, doctor reports both sides of it as an error and exits 1; with
/// the claim gone and the node only in the driver's spec, a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dra_node_is_healthy_until_a_device_plugin_hands_out_the_same_device_1_37() {
    let sb = Sandbox::new();
    let kroot = sb.join("var/lib/kubelet");
    for d in ["device-plugins", "pod-resources", "plugins_registry"] {
        std::fs::create_dir_all(kroot.join(d)).unwrap();
    }
    let (root, dir, cdi) = (s(sb.path()), s(&kroot.join("device-plugins")), s(&sb.join("var/run/cdi")));
    let mut driver = Child::dpctl(&[
        "dra",
        "mock",
        DRIVER,
        "--dir",
        &s(&kroot),
        "--cdi-dir",
        &cdi,
        "--devices",
        "1",
        "--device-node",
        "/dev/dpctl-gpu{index}",
        "-o",
        "json",
    ]);
    driver.event("serving").await;
    let mut sim = Child::dpctl(&[
        "kubelet-sim",
        "--dir",
        &dir,
        "--registry-dir",
        &s(&kroot.join("plugins_registry")),
        "--podresources-socket",
        &s(&kroot.join("pod-resources/kubelet.sock")),
        "--kubelet-version",
        "1.37",
        "-o",
        "json",
    ]);
    sim.event("dra_registered").await;
    std::fs::write(sb.join("pod.yaml"), DRA_POD).unwrap();
    dpctl(&["kubelet-sim", "admit", "--dir", &dir, &s(&sb.join("pod.yaml"))]).await.expect_code(0);

    let run =
        dpctl(&["doctor", "--root", &root, "--kubelet-version", "1.37", "--timeout", "500ms", "-o", "json"]).await;
    let v = run.expect_code(0).json();
    assert_eq!(bad(&v), Vec::<(String, String)>::new(), "{v:#}");
    let reg = finding(&v, "dra-registered");
    assert!(reg["subject"].as_str().unwrap().ends_with("plugins_registry/gpu.example.com-reg.sock"), "{reg}");
    let evidence = reg["evidence"].as_str().unwrap();
    assert!(evidence.starts_with("driver gpu.example.com, endpoint /var/lib/kubelet/plugins/gpu.example.com/dra.sock: live (served); advertises v1.DRAPlugin, v1beta1.DRAPlugin, v1alpha1.DRAResourceHealth; a 1.37 kubelet uses v1.DRAPlugin"), "{evidence}");
    assert!(finding(&v, "dra-state-ok")["evidence"].as_str().unwrap().contains("verifies (CRC-32 of Data); 1 claim"));
    // kubelet-sim serves the device-plugin directory: its parent is the root, no process looked up.
    assert_eq!(finding(&v, "kubelet-root-sim")["subject"], "/var/lib/kubelet", "{v:#}");

    std::fs::write(sb.join("gpu.toml"), PLUGIN).unwrap();
    let mut plugin = Child::dpctl(&["mock-plugin", "--config", &s(&sb.join("gpu.toml")), "--dir", &dir, "-o", "json"]);
    plugin.event("registered").await;
    wait_allocatable(&dir).await;
    dpctl(&["kubelet-sim", "admit", "--dir", &dir, "--allocate", &format!("{GPU}=1"), "--name", "dp-pod"])
        .await
        .expect_code(0);

    let run = dpctl(&["doctor", "--root", &root, "--timeout", "500ms", "-o", "json"]).await;
    let v = run.expect_code(1).json();
    assert_eq!(bad(&v), vec![("dp-dra-same-device".to_string(), "/dev/dpctl-gpu0".to_string())], "{v:#}");
    let same = finding(&v, "dp-dra-same-device");
    let evidence = same["evidence"].as_str().unwrap();
    assert!(evidence.starts_with("device plugin resource example.com/gpu gave it to pod default/dp-pod"), "{evidence}");
    assert!(evidence.contains("DRA driver gpu.example.com prepared it for claim default/gpu-claim through CDI device gpu.example.com/claim=pool-0-dev-0 (dra_manager_state; spec"), "{evidence}");
    assert!(same["hint"].as_str().unwrap().contains("run either the device plugin or the DRA driver"));
    let table = dpctl(&["doctor", "--root", &root, "--timeout", "500ms"]).await;
    assert!(table.expect_code(1).stdout.contains("dp-dra"), "{}", table.stdout);
    println!("{}", table.stdout);

    // The claim goes (unprepared, its spec removed); a spec the driver keeps for all its devices
    // (as drivers that write one at start do) still names the node: the driver can hand it out.
    dpctl(&["kubelet-sim", "delete", "--dir", &dir, "trainer"]).await.expect_code(0);
    let spec = r#"{"cdiVersion":"0.6.0","kind":"gpu.example.com/gpu","devices":[{"name":"gpu0","containerEdits":{"deviceNodes":[{"path":"/dev/dpctl-gpu0"}]}}]}"#;
    std::fs::write(sb.join("var/run/cdi/gpu.example.com.json"), spec).unwrap();
    let run = dpctl(&["doctor", "--root", &root, "--timeout", "500ms", "-o", "json"]).await;
    let v = run.expect_code(0).json();
    assert_eq!(bad(&v), vec![("dp-dra-same-hardware".to_string(), "/dev/dpctl-gpu0".to_string())], "{v:#}");
    let evidence = finding(&v, "dp-dra-same-hardware")["evidence"].as_str().unwrap().to_string();
    assert!(
        evidence.contains("DRA driver gpu.example.com can hand it out: CDI device gpu.example.com/gpu=gpu0 of spec"),
        "{evidence}"
    );
    plugin.stop().await;
    sim.terminate();
    driver.terminate();
}

/// 1.37: the kubelet runs with `--root-dir /data/kubelet` (its command line
/// in `<root>/proc`); a driver registering in the default
/// /var/lib/kubelet/plugins_registry is never seen: an error naming the
/// path, the root and where to register; drivers under the real root are
/// judged as usual (one served, one advertising no node service the
/// kubelet knows, refused with the kubelet's words). `--kubelet-root-dir` overrides the look-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_registering_outside_a_relocated_root_is_reported_1_37() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("proc/4242")).unwrap();
    std::fs::write(sb.join("proc/4242/cmdline"), b"/usr/bin/kubelet\0--v=2\0--root-dir=/data/kubelet\0").unwrap();
    std::fs::create_dir_all(sb.join("var/lib/kubelet/device-plugins")).unwrap();
    let root = s(sb.path());
    let mut lost = Child::dpctl(&["dra", "mock", DRIVER, "--dir", &s(&sb.join("var/lib/kubelet")), "-o", "json"]);
    lost.event("serving").await;
    let mut seen =
        Child::dpctl(&["dra", "mock", "nic.example.com", "--dir", &s(&sb.join("data/kubelet")), "-o", "json"]);
    seen.event("serving").await;
    let args =
        ["dra", "mock", "tpu.example.com", "--dir", &s(&sb.join("data/kubelet")), "--service", "health-v1alpha1"];
    let mut refused = Child::dpctl(&[&args[..], &["-o", "json"]].concat());
    refused.event("serving").await;

    let run = dpctl(&["doctor", "--root", &root, "--timeout", "500ms", "-o", "json"]).await;
    let v = run.expect_code(1).json();
    let kroot = finding(&v, "kubelet-root");
    assert_eq!(kroot["subject"], "/data/kubelet", "{kroot}");
    assert!(kroot["evidence"].as_str().unwrap().starts_with("kubelet (pid 4242) runs with --root-dir /data/kubelet"));
    let hidden = finding(&v, "registration-outside-root");
    assert_eq!(hidden["severity"], "error");
    assert!(
        hidden["subject"].as_str().unwrap().ends_with("/var/lib/kubelet/plugins_registry/gpu.example.com-reg.sock")
    );
    let evidence = hidden["evidence"].as_str().unwrap();
    assert!(evidence.contains("DRAPlugin gpu.example.com registers here, in /var/lib/kubelet/plugins_registry, but the kubelet's root is /data/kubelet: it watches /data/kubelet/plugins_registry and never sees this socket"), "{evidence}");
    assert!(
        hidden["hint"]
            .as_str()
            .unwrap()
            .starts_with("point the driver's registration directory at /data/kubelet/plugins_registry")
    );
    let ok = finding(&v, "dra-registered");
    assert!(
        ok["evidence"].as_str().unwrap().starts_with(
            "driver nic.example.com, endpoint /data/kubelet/plugins/nic.example.com/dra.sock: live (served)"
        ),
        "{ok}"
    );
    let no = finding(&v, "dra-refused");
    assert_eq!(no["severity"], "error");
    let evidence = no["evidence"].as_str().unwrap();
    assert!(evidence.ends_with("a 1.37 kubelet refuses it: none of services supported by the plugin ([\"v1alpha1.DRAResourceHealth\"]) are supported by the kubelet ([\"v1.DRAPlugin\" \"v1beta1.DRAPlugin\"])"), "{evidence}");
    let table = dpctl(&["doctor", "--root", &root, "--timeout", "500ms"]).await;
    println!("{}", table.expect_code(1).stdout);

    // Told the root, doctor does not look the kubelet up: the default root sees the first driver.
    let run = dpctl(&["doctor", "--root", &root, "--kubelet-root-dir", "/var/lib/kubelet", "-o", "json"]).await;
    let v = run.json();
    assert_eq!(finding(&v, "kubelet-root-given")["subject"], "/var/lib/kubelet");
    assert!(finding(&v, "dra-registered")["evidence"].as_str().unwrap().starts_with("driver gpu.example.com"));
    lost.terminate();
    seen.terminate();
    refused.terminate();
}

/// Bad `dra mock --device-node` templates are refused with the flag named
/// (exit 2), before any socket is made.
#[tokio::test]
async fn a_bad_device_node_template_is_refused() {
    let sb = Sandbox::new();
    let long = format!("/dev/{}", "a".repeat(100_000));
    for value in ["dev/gpu{index}", "", "/dev/a\nb", long.as_str()] {
        let run = dpctl(&["dra", "mock", DRIVER, "--dir", &s(sb.path()), "--device-node", value]).await;
        assert!(run.expect_code(2).stderr.contains("--device-node"), "{value:.20}: {}", run.stderr);
        assert!(run.stderr.contains("an absolute path of at most 4096 bytes"), "{}", run.stderr);
    }
    assert!(!sb.join("plugins_registry").exists());
}

/// Bad `--kubelet-root-dir` values are refused with the flag named (exit 2).
#[tokio::test]
async fn a_bad_kubelet_root_dir_is_refused() {
    let long = format!("/{}", "a".repeat(100_000));
    for (value, says) in [
        ("relative/dir", "is not an absolute path"),
        ("", "is not an absolute path"),
        (long.as_str(), "longer than any path"),
    ] {
        let run = dpctl(&["doctor", "--kubelet-root-dir", value]).await;
        assert!(run.expect_code(2).stderr.contains(says), "{value:.20}: {}", run.stderr);
        assert!(run.stderr.contains("--kubelet-root-dir"), "{}", run.stderr);
    }
}

/// A node kubelet-sim made (`--dir ROOT/device-plugins`, plugins_registry
/// beside it) with the mock driver, one claim prepared.
async fn sim_node(sb: &Sandbox, fault: &[&str]) -> (Child, Child, String) {
    let root = s(sb.path());
    let dir = format!("{root}/device-plugins");
    let cdi = format!("{root}/cdi");
    let mut args = vec!["dra", "mock", DRIVER, "--dir", &root, "--cdi-dir", &cdi, "-o", "json"];
    args.extend_from_slice(fault);
    let mut driver = Child::dpctl(&args);
    driver.event("serving").await;
    let registry = format!("{root}/plugins_registry");
    let args = ["kubelet-sim", "--dir", &dir, "--registry-dir", &registry, "--kubelet-version", "1.37", "-o", "json"];
    let mut sim = Child::dpctl(&args);
    sim.event("dra_registered").await;
    std::fs::write(sb.join("pod.yaml"), DRA_POD).unwrap();
    dpctl(&["kubelet-sim", "admit", "--dir", &dir, &s(&sb.join("pod.yaml"))]).await.expect_code(0);
    (driver, sim, dir)
}

/// 1.37: doctor on a node kubelet-sim made needs only `--dir`: the root is
/// the sim's (its plugins_registry, dra_manager_state and cdi/), each DRA
/// driver is judged once (under `dra`, not again under `registry`), and a
/// claim prepared with CDI IDs no spec defines is an error (a driver that
/// answers IDs without writing its spec); the correct driver gives none,
/// run after run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_on_a_sim_node_needs_only_dir_and_flags_prepared_cdi_ids_no_spec_defines_1_37() {
    let sb = Sandbox::new();
    let (driver, sim, dir) = sim_node(&sb, &[]).await;
    let reg_sock = format!("{}/plugins_registry/{DRIVER}-reg.sock", s(sb.path()));
    for _ in 0..2 {
        let v = dpctl(&["doctor", "--dir", &dir, "--timeout", "500ms", "-o", "json"]).await.json();
        let root = finding(&v, "kubelet-root-sim");
        assert_eq!(root["subject"], s(sb.path()), "{root}");
        assert!(finding(&v, "dra-state-ok")["evidence"].as_str().unwrap().contains("1 claim"), "{v:#}");
        let about_driver: Vec<&str> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["subject"] == reg_sock.as_str())
            .map(|f| f["code"].as_str().unwrap())
            .collect();
        assert_eq!(about_driver, ["dra-registered"], "one finding per driver: {v:#}");
        assert!(!v.to_string().contains("dra-cdi-undefined"), "{v:#}");
    }
    sim.terminate();
    driver.terminate();

    let sb = Sandbox::new();
    let (driver, sim, dir) = sim_node(&sb, &["--fault", "unresolvable-cdi"]).await;
    let r = dpctl(&["doctor", "--dir", &dir, "--timeout", "500ms", "-o", "json"]).await;
    let v = r.expect_code(1).json();
    let f = finding(&v, "dra-cdi-undefined");
    assert_eq!(
        (f["severity"].as_str(), f["subject"].as_str()),
        (Some("error"), Some("claim default/gpu-claim")),
        "{f}"
    );
    let want = format!("driver {DRIVER} prepared CDI device gpu.example.com/claim=pool-0-dev-0, which no spec in");
    assert!(f["evidence"].as_str().unwrap().starts_with(&want), "{f}");
    sim.terminate();
    driver.terminate();
}
