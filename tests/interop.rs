//! dpctl against an independent gRPC stack: grpcio (grpc-core) clients and
//! servers from tests/interop/peer.py, and grpcurl (grpc-go). Each
//! `:authority` form that real clients send is exercised against dpctl's
//! servers. Blocking waits on peer processes run on a multi-threaded runtime
//! so that in-test servers keep serving.

use crate::support::fake_plugin::{Behaviour, FakePlugin, device};
use crate::support::interop::{self, AUTHORITY_MODES};
use crate::support::{Child, Sandbox, dpctl};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_clients_reach_a_dpctl_server_with_every_authority() {
    let Some(env) = interop::env() else { return };
    let sb = Sandbox::new();
    let path = sb.join("gpu.sock");
    let plugin = FakePlugin::new(vec![device("GPU-0", "Healthy", Some(&[0]))], Behaviour::default());
    let _stop = plugin.serve(&path).await;
    let sock = path.to_str().unwrap();
    for mode in AUTHORITY_MODES {
        let mut results = Vec::new();
        for rpc in ["options", "list", "allocate"] {
            let args = ["--socket", sock, "--authority", mode, "--rpc", rpc, "--devices", "GPU-0"];
            results.push(interop::call(&env, &args).await);
        }
        for r in &results {
            assert_eq!(r["event"], "ok", "authority {mode}: {r}");
        }
        assert_eq!(results[1]["response"]["devices"][0]["ID"], "GPU-0");
        assert_eq!(results[2]["response"]["container_responses"][0]["envs"]["VISIBLE_DEVICES"], "GPU-0");
    }
}

/// An Allocate of 1,750 IDs (about 17 KB: over HTTP/2's default 16 KiB
/// frame, under the 1 MiB dpctl's servers advertise) to the mock plugin in
/// every `:authority` form: grpcio sends it as one DATA frame, which the
/// rewriting adapter must pass whole (it used to reset the connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_requests_over_16_kib_reach_a_dpctl_server_with_every_authority() {
    let Some(env) = interop::env() else { return };
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let args = ["mock-plugin", "--resource", "example.com/gpu", "--devices", "1750", "--no-register", "--dir", dir];
    let mut mock = Child::dpctl(&[&args[..], &["-o", "json"]].concat());
    let sock = mock.event("serving").await["socket"].as_str().unwrap().to_string();
    let all = (0..1750).map(|i| format!("GPU-{i}")).collect::<Vec<_>>().join(",");
    for mode in AUTHORITY_MODES {
        let args = ["--socket", &sock, "--authority", mode, "--rpc", "allocate", "--devices", &all];
        let r = interop::call(&env, &args).await;
        assert_eq!(r["event"], "ok", "authority {mode}: {r}");
        let envs = &r["response"]["container_responses"][0]["envs"]["DPCTL_MOCK_DEVICES"];
        assert_eq!(envs.as_str().map(|s| s.split(',').count()), Some(1750), "authority {mode}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcurl_with_its_raw_path_authority_reaches_a_dpctl_server() {
    let Some(env) = interop::env() else { return };
    let sb = Sandbox::new();
    let path = sb.join("gpu.sock");
    let plugin = FakePlugin::new(vec![device("GPU-0", "Healthy", None)], Behaviour::default());
    let _stop = plugin.serve(&path).await;
    // grpcurl (grpc-go) with -unix and no -authority sends the socket path as :authority.
    let mut cmd = tokio::process::Command::new(&env.grpcurl);
    cmd.kill_on_drop(true).current_dir(env!("CARGO_MANIFEST_DIR")).args([
        "-plaintext",
        "-unix",
        "-import-path",
        "proto",
        "-proto",
        "deviceplugin/v1beta1/api.proto",
        "-d",
        r#"{"container_requests":[{"devices_ids":["GPU-0"]}]}"#,
        path.to_str().unwrap(),
        "v1beta1.DevicePlugin/Allocate",
    ]);
    let out = crate::support::within("grpcurl", cmd.output()).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "grpcurl failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("VISIBLE_DEVICES"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dpctl_plugin_commands_against_a_grpcio_plugin() {
    let Some(env) = interop::env() else { return };
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap().to_string();
    let mut peer = interop::peer(&env, &["plugin", "--dir", &dir, "--no-register", "--devices", "3", "--pre-start"]);
    peer.event("serving").await;
    let sock = sb.join("peer.sock");
    let s = sock.to_str().unwrap();
    let v = dpctl(&["plugin", "call", "options", "--socket", s, "-o", "json"]).await.expect_code(0).json();
    assert_eq!(v["pre_start_required"], true);
    let v = dpctl(&["plugin", "call", "list", "--socket", s, "-o", "json"]).await.expect_code(0).json();
    assert_eq!(v["capacity"], 3);
    assert_eq!(v["devices"][0]["numa_nodes"], serde_json::json!([0]));
    let v = dpctl(&["plugin", "call", "allocate", "--socket", s, "--devices", "dev-0,dev-1", "-o", "json"])
        .await
        .expect_code(0)
        .json();
    assert_eq!(v["containers"][0]["envs"]["PEER_DEVICES"], "dev-0,dev-1");
    let v = dpctl(&[
        "plugin",
        "call",
        "preferred",
        "--socket",
        s,
        "--available",
        "dev-0,dev-1,dev-2",
        "--must-include",
        "dev-2",
        "--size",
        "2",
        "-o",
        "json",
    ])
    .await
    .expect_code(0)
    .json();
    assert_eq!(v["preferred"], serde_json::json!(["dev-2", "dev-0"]));
    dpctl(&["plugin", "call", "prestart", "--socket", s, "--devices", "dev-0"]).await.expect_code(0);
    let r = dpctl(&["plugin", "watch", "--socket", s, "--count", "1", "-o", "json"]).await;
    assert_eq!(r.expect_code(0).json_lines().len(), 1);
    let r = dpctl(&["plugin", "call", "allocate", "--socket", s, "--devices", "nope"]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("InvalidArgument: unknown device nope"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_sim_admits_with_grpcio_plugins_of_every_authority() {
    let Some(env) = interop::env() else { return };
    for mode in AUTHORITY_MODES {
        let sb = Sandbox::new();
        let dir = sb.path().to_str().unwrap().to_string();
        let mut sim = Child::dpctl(&["kubelet-sim", "--dir", &dir, "-o", "json"]);
        sim.event("started").await;
        let mut peer = interop::peer(&env, &["plugin", "--dir", &dir, "--authority", mode, "--devices", "4"]);
        let reg = peer.event("registered").await;
        assert_eq!(reg["resource"], "example.com/peer", "{mode}");
        let snap = sim.event("snapshot").await;
        assert_eq!((snap["capacity"].as_u64(), snap["allocatable"].as_u64()), (Some(4), Some(4)), "{mode}");
        let r = dpctl(&["kubelet-sim", "admit", "--dir", &dir, "--allocate", "example.com/peer=2", "-o", "json"]).await;
        let v = r.expect_code(0).json();
        assert_eq!(v["admitted"], true, "{mode}: {v}");
        // The sim's PodResources server, read by a grpcio client with the same authority form.
        let pr = sb.join("pod-resources.sock");
        let list =
            interop::call(&env, &["--socket", pr.to_str().unwrap(), "--authority", mode, "--rpc", "podresources-list"])
                .await;
        assert_eq!(list["event"], "ok", "{mode}: {list}");
        let pod = &list["response"]["pod_resources"][0];
        assert_eq!(pod["name"], v["pod"], "{mode}");
        let ids: Vec<&str> = pod["containers"][0]["devices"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|d| d["device_ids"].as_array().unwrap().iter().map(|i| i.as_str().unwrap()))
            .collect();
        assert_eq!(ids.len(), 2, "{mode}: one entry per device: {pod}");
        drop((sim, peer));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_sim_answers_a_grpcio_registration_with_the_kubelet_texts() {
    let Some(env) = interop::env() else { return };
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap().to_string();
    let mut sim = Child::dpctl(&["kubelet-sim", "--dir", &dir, "-o", "json"]);
    sim.event("started").await;
    let ks = sb.join("kubelet.sock");
    let ks = ks.to_str().unwrap();
    for (version, resource, expect) in [
        (
            "v1alpha",
            "example.com/x",
            r#"requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]"#,
        ),
        ("v1beta1", "foo", r#"the ResourceName "foo" is invalid"#),
    ] {
        let r = interop::call(
            &env,
            &[
                "--socket",
                ks,
                "--authority",
                "path",
                "--rpc",
                "register",
                "--version",
                version,
                "--resource",
                resource,
                "--endpoint",
                "x.sock",
            ],
        )
        .await;
        assert_eq!(r["event"], "error", "{r}");
        assert_eq!(r["code"], "UNKNOWN", "{r}");
        assert_eq!(r["details"], expect, "{r}");
    }
    drop(sim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mock_plugin_serves_a_grpcio_kubelet_of_every_authority() {
    let Some(env) = interop::env() else { return };
    for mode in AUTHORITY_MODES {
        let sb = Sandbox::new();
        let dir = sb.path().to_str().unwrap().to_string();
        let mut kubelet = interop::peer(&env, &["kubelet", "--dir", &dir, "--authority", mode, "--count", "2"]);
        kubelet.event("serving").await;
        let mut mock = Child::dpctl(&[
            "mock-plugin",
            "--resource",
            "example.com/gpu",
            "--devices",
            "4",
            "--numa-nodes",
            "2",
            "--dir",
            &dir,
            "-o",
            "json",
        ]);
        mock.event("registered").await;
        let req = kubelet.event("register_request").await;
        assert_eq!(req["request"]["version"], "v1beta1", "{mode}");
        assert_eq!(req["request"]["resource_name"], "example.com/gpu", "{mode}");
        let list = kubelet.event("list_and_watch").await;
        assert_eq!(list["devices"].as_array().unwrap().len(), 4, "{mode}");
        let alloc = kubelet.event("allocated").await;
        assert_eq!(alloc["devices_ids"].as_array().unwrap().len(), 2, "{mode}: {alloc}");
        assert_eq!(kubelet.event("done").await["ok"], true, "{mode}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dpctl_podresources_reads_a_grpcio_server() {
    let Some(env) = interop::env() else { return };
    let sb = Sandbox::new();
    let sock = sb.join("pr.sock");
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/podresources.json");
    let s = sock.to_str().unwrap().to_string();
    let mut server = interop::peer(&env, &["podresources", "--socket", &s, "--data", data]);
    server.event("serving").await;
    let s = sock.to_str().unwrap();
    let v = dpctl(&["podresources", "list", "--socket", s, "-o", "json"]).await.expect_code(0).json();
    let c = &v["pod_resources"][0]["containers"][0];
    assert_eq!(c["devices"][0]["numa_nodes"], serde_json::json!([0]), "NUMA node 0 is kept: {c}");
    assert_eq!(c["cpu_ids"], serde_json::json!([0, 1, 2, 3, 8]));
    let r = dpctl(&["podresources", "list", "--socket", s]).await;
    assert!(r.expect_code(0).stdout.contains("0-3,8"), "{}", r.stdout);
    assert!(r.stdout.contains("2Gi"), "{}", r.stdout);
    let r = dpctl(&["podresources", "free", "--socket", s, "-o", "json"]).await;
    assert!(r.expect_code(0).stdout.contains("gpu-2"), "the one free device: {}", r.stdout);
    dpctl(&["podresources", "get", "train-0", "-n", "gpu-jobs", "--socket", s]).await.expect_code(0);
    let r = dpctl(&["podresources", "get", "nope", "-n", "gpu-jobs", "--socket", s]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("pod nope in namespace gpu-jobs not found"), "{}", r.stderr);
    drop(server);
}

/// Runs `dpctl <args>` (a smoke: several runs, python start-ups) bounded by
/// 90 s rather than the per-wait bound, and returns the exit code, stdout
/// parsed as JSON, and stderr.
/// `dpctl smoke SMOKE_FLAGS ... -o json -- <python> peer.py plugin --dir {dir}
/// PEER_FLAGS...` against the grpcio plugin peer; `None` without Python.
async fn smoke_peer(smoke_flags: &[&str], peer_flags: &[&str]) -> Option<(i32, serde_json::Value, String)> {
    let env = interop::env()?;
    let py = env.python.to_str().unwrap().to_string();
    let script = interop::peer_script();
    let mut args = vec!["smoke"];
    args.extend_from_slice(smoke_flags);
    args.extend_from_slice(&["--stream-window", "300ms", "--resource", "example.com/peer", "-o", "json", "--"]);
    args.extend_from_slice(&[&py, script.to_str().unwrap(), "plugin", "--dir", "{dir}"]);
    args.extend_from_slice(peer_flags);
    Some(smoke_json(&args).await)
}

async fn smoke_json(args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut cmd = crate::support::dpctl_command();
    cmd.args(args);
    let run = crate::support::run_bounded(cmd, args, std::time::Duration::from_secs(90)).await;
    (run.code, run.json(), run.stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_passes_a_grpcio_plugin_through_registration_admission_and_restart() {
    let Some((code, v, stderr)) = smoke_peer(&[], &["--authority", "path", "--pre-start"]).await else { return };
    assert_eq!(code, 0, "{v:#}\n{stderr}");
    let steps = v["steps"].as_array().expect("steps");
    for name in ["registration", "admission", "kubelet-restart", "shutdown"] {
        let s = steps.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no step {name}: {v:#}"));
        assert_eq!(s["outcome"], "pass", "{name}: {s:#}");
    }
}

/// `dpctl smoke --kubelet-version` with three releases against the grpcio
/// plugin peer, so a plugin on a stack other than tonic is checked per release. docs/kubelet-versions.md §1 (Register and the
/// dial-back are the same 1.26 to master), §4 (restart cleanup: 1.26-1.32
/// delete every non-directory, 1.33+ sockets only; the peer's socket is
/// deleted either way and it must register again) and §5 (admission): a
/// plugin that registers once per socket passes on 1.28, 1.32 and 1.36.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_matrix_passes_a_grpcio_plugin_on_three_releases() {
    let Some((code, v, stderr)) = smoke_peer(&["--kubelet-version", "1.28,1.32,1.36"], &["--pre-start"]).await else {
        return;
    };
    assert_eq!(code, 0, "{v:#}\n{stderr}");
    assert_eq!(v["passed"], serde_json::json!(["1.28", "1.32", "1.36"]), "{v:#}");
    assert_eq!(v["failed"], serde_json::json!([]), "{v:#}");
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 3, "{v:#}");
    for (run, want) in runs.iter().zip(["1.28", "1.32", "1.36"]) {
        assert_eq!(run["kubelet_version"], want, "{run:#}");
        let steps = run["steps"].as_array().expect("steps");
        for name in ["registration", "admission", "kubelet-restart", "shutdown"] {
            let s = steps.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{want}: no step {name}"));
            assert_eq!(s["outcome"], "pass", "{want} {name}: {s:#}");
        }
    }
}
