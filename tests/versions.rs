//! `--kubelet-version`: kubelet-sim playing one release, and the places where
//! it follows the kubelet exactly, so a plugin passing against one release
//! behaves the same on a node of that release. Each test cites
//! the section of docs/kubelet-versions.md (and the versions) it pins.

use std::time::Duration;

use dpctl::kubelet_sim::{CleanupRule, EventKind, KubeletVersion, PodSpec, SimConfig, SimHandle};

use crate::support::fake_plugin::{AllocateAnswer, Behaviour, FakePlugin, register};
use crate::support::sim::{self, counts_are, next};
use crate::support::{Sandbox, dpctl, within};

const GPU: &str = "example.com/gpu";

fn v(minor: u8) -> KubeletVersion {
    KubeletVersion::Release(minor)
}

async fn start_sim(sb: &Sandbox, version: KubeletVersion, tune: impl FnOnce(&mut SimConfig)) -> SimHandle {
    sim::start(sb.path(), |c| {
        c.set_kubelet_version(version);
        tune(c);
    })
    .await
}

/// docs/kubelet-versions.md §1 "Endpoint handling", every version: the socket is
/// `filepath.Join(dir, endpoint)`, so an absolute endpoint is appended to the
/// directory instead of replacing it.
#[tokio::test]
async fn absolute_endpoint_is_appended_to_the_directory_like_filepath_join() {
    let sb = Sandbox::new();
    let sim = start_sim(&sb, KubeletVersion::NEWEST, |_| {}).await;
    let mut rx = sim.subscribe();
    // A plugin serving outside the directory and registering its absolute path fails.
    let p = FakePlugin::new(FakePlugin::healthy(1, false), Behaviour::default());
    let real = sb.join("p.sock");
    let _stop = p.serve(&real).await;
    let abs = real.display().to_string();
    let st = within("register", register(&sb.join("kubelet.sock"), "v1beta1", GPU, &abs, None)).await.unwrap_err();
    assert_eq!(st.message(), "failed to dial device plugin: context deadline exceeded");
    let ev = next(&mut rx, "rejection", |k| matches!(k, EventKind::RegistrationRejected { .. })).await;
    let EventKind::RegistrationRejected { socket, .. } = ev else { unreachable!() };
    assert_eq!(socket, format!("{}{}", sb.path().display(), abs), "dialed <dir>/<absolute endpoint>");
    assert!(p.rpcs().is_empty(), "the plugin at the absolute path was never called");
    // The same absolute form naming a socket that does sit under the directory works.
    std::fs::create_dir(sb.join("run")).unwrap();
    let q = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour::default());
    let _stop_q = q.serve(&sb.join("run/q.sock")).await;
    within("register", register(&sb.join("kubelet.sock"), "v1beta1", GPU, "/run/q.sock", None)).await.unwrap();
    counts_are(&sim, GPU, 2, 2).await;
    assert_eq!(sim.status().resource(GPU).unwrap().socket.as_deref(), Some(sb.join("run/q.sock").to_str().unwrap()));
    sim.stop().await.unwrap();
}

/// docs/kubelet-versions.md §5 "Failure message": an empty AllocateResponse is
/// printed by gogo's String() up to 1.33 and as nothing from 1.34.
#[tokio::test]
async fn empty_allocate_response_text_follows_the_version() {
    for (version, tail) in [
        (v(26), "&AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}"),
        (v(33), "&AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}"),
        (v(34), ""),
        (KubeletVersion::Master, ""),
    ] {
        let sb = Sandbox::new();
        let sim = start_sim(&sb, version, |_| {}).await;
        let p = FakePlugin::new(
            FakePlugin::healthy(1, false),
            Behaviour { allocate_answer: AllocateAnswer::Empty, ..Default::default() },
        );
        let (_path, _stop) = p.start(sb.path(), "gpu.sock", GPU).await;
        counts_are(&sim, GPU, 1, 1).await;
        let o = sim.admit(PodSpec::shorthand("empty", "default", &[(GPU.into(), 1)])).await.unwrap();
        assert!(!o.admitted);
        assert_eq!(o.reason.as_deref(), Some("UnexpectedAdmissionError"));
        assert_eq!(
            o.message.unwrap(),
            format!("Allocate failed due to no containers return in allocation response {tail}, which is unexpected"),
            "{version}"
        );
        sim.stop().await.unwrap();
    }
}

/// docs/kubelet-versions.md §4: 1.26-1.32 delete every non-directory but the
/// checkpoint at start, 1.33+ sockets only. In a directory the sim did not
/// create, only sockets are deleted and the rest is reported.
#[tokio::test]
async fn restart_cleanup_follows_the_version_and_spares_foreign_files() {
    for (version, owns, deleted, would) in [
        (v(32), true, vec!["notes.txt"], vec![]),
        (v(32), false, vec![], vec!["notes.txt"]),
        (v(33), true, vec![], vec![]),
        (KubeletVersion::Master, false, vec![], vec![]),
    ] {
        let sb = Sandbox::new();
        let sim = start_sim(&sb, version, |c| c.owns_dir = owns).await;
        let p = FakePlugin::new(FakePlugin::healthy(1, false), Behaviour::default());
        let (_path, _stop) = p.start(sb.path(), "gpu.sock", GPU).await;
        counts_are(&sim, GPU, 1, 1).await;
        std::fs::write(sb.join("notes.txt"), "x").unwrap();
        let report = within("restart", sim.restart(Duration::from_millis(50))).await.unwrap();
        assert_eq!(report.kubelet_version, version);
        assert_eq!(report.cleanup_rule, version.cleanup_rule());
        assert_eq!(report.deleted_sockets, ["gpu.sock"], "{version}");
        assert_eq!(report.deleted_files, deleted, "{version} owns={owns}");
        assert_eq!(report.would_delete, would, "{version} owns={owns}");
        assert_eq!(sb.join("notes.txt").exists(), deleted.is_empty(), "{version} owns={owns}");
        assert!(sb.join("kubelet_internal_checkpoint").exists(), "the checkpoint is never deleted");
        sim.stop().await.unwrap();
    }
    assert_eq!(v(32).cleanup_rule(), CleanupRule::AllNonDirectories);
}

/// `status` and the `started` event name the version; bad versions are bad
/// input (exit 2) naming the valid list.
#[tokio::test]
async fn cli_names_the_version_and_rejects_unknown_ones() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let run = dpctl(&["kubelet-sim", "--dir", dir, "--kubelet-version", "1.25"]).await;
    run.expect_code(2);
    assert!(run.stderr.contains("1.26, 1.27") && run.stderr.contains("master"), "{}", run.stderr);
    let run =
        dpctl(&["kubelet-sim", "--dir", dir, "--kubelet-version", "v1.30.7", "--timeout", "100ms", "-o", "json"]).await;
    run.expect_code(0);
    let lines = run.json_lines();
    let started = lines.iter().find(|l| l["event"] == "started").expect("a started event");
    assert_eq!(started["kubelet_version"], "1.30");
    assert_eq!(started["cleanup_rule"], "all-non-directories");
    let sim = start_sim(&sb, v(28), |_| {}).await;
    assert_eq!(sim.status().kubelet_version, v(28));
    let run = dpctl(&["kubelet-sim", "status", "--dir", dir, "-o", "json"]).await;
    run.expect_code(0);
    assert_eq!(run.json()["kubelet_version"], "1.28");
    let run = dpctl(&["kubelet-sim", "status", "--dir", dir]).await;
    assert!(run.stdout.starts_with("kubelet 1.28 (simulated)"), "{}", run.stdout);
    sim.stop().await.unwrap();
}

/// 1.37 and master (PR #135437; `PluginConnected` in
/// pkg/kubelet/cm/devicemanager/manager.go and `connectClient` in
/// plugin/v1beta1/handler.go of v1.37.2): clients are kept per (name,
/// socket). A second Register at the socket of an endpoint still stored is
/// refused with `device plugin already connected: <socket>`, and the failed
/// connect drops every client at that socket, the live one included: its
/// stream end then disconnects nothing (devices stay healthy) and its
/// endpoint stays stored, so later Registers there are refused too. Another
/// socket registers and serves.
#[tokio::test]
async fn from_1_37_a_live_duplicate_is_refused_and_drops_the_client_at_that_socket() {
    for version in [v(37), KubeletVersion::Master] {
        let sb = Sandbox::new();
        let sim = start_sim(&sb, version, |_| {}).await;
        let mut rx = sim.subscribe();
        let a = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour::default());
        let (_pa, _sa) = a.start(sb.path(), "a.sock", GPU).await;
        counts_are(&sim, GPU, 2, 2).await;
        let ks = sb.join("kubelet.sock");
        let again = || register(&ks, "v1beta1", GPU, "a.sock", None);
        let st = within("register", again()).await.unwrap_err();
        assert_eq!(st.code(), tonic::Code::Unknown, "{version}");
        let want = format!("device plugin already connected: {}", sb.join("a.sock").display());
        assert_eq!(st.message(), want, "{version}");
        next(&mut rx, "rejection", |k| matches!(k, EventKind::RegistrationRejected { .. })).await;
        assert_eq!(sim.status().resource(GPU).unwrap().state, "untracked", "{version}");
        a.end_streams();
        let ev = next(&mut rx, "stream end", |k| {
            matches!(k, EventKind::StreamEnded { .. } | EventKind::StreamEndedUntracked { .. })
        })
        .await;
        assert!(matches!(ev, EventKind::StreamEndedUntracked { .. }), "{version}: {ev:?}");
        counts_are(&sim, GPU, 2, 2).await;
        // The endpoint stays stored: the same socket is still refused.
        let st = within("register again", again()).await.unwrap_err();
        assert_eq!(st.message(), want, "{version}");
        let b = FakePlugin::new(FakePlugin::healthy(3, false), Behaviour::default());
        let (_pb, _sb) = b.start(sb.path(), "b.sock", GPU).await;
        counts_are(&sim, GPU, 3, 3).await;
        assert_eq!(sim.status().resource(GPU).unwrap().state, "serving", "{version}");
        sim.stop().await.unwrap();
    }
}

/// Two plugins of one resource on two sockets, and the current one's stream
/// ends. 1.26-1.36: the name has one client, the current one, so the
/// resource is disconnected (devices unhealthy, grace period). 1.37+
/// (PluginDisconnected in pkg/kubelet/cm/devicemanager/manager.go of
/// v1.37.2): another endpoint is still stored, so only the ended one is
/// dropped and the other takes over: devices stay healthy and Allocate goes
/// to the other plugin.
#[tokio::test]
async fn from_1_37_a_current_stream_end_hands_the_resource_to_the_other_socket() {
    for version in [v(36), v(37), KubeletVersion::Master] {
        let sb = Sandbox::new();
        let sim = start_sim(&sb, version, |_| {}).await;
        let mut rx = sim.subscribe();
        let a = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour::default());
        let (_pa, _sa) = a.start(sb.path(), "a.sock", GPU).await;
        counts_are(&sim, GPU, 2, 2).await;
        let b = FakePlugin::new(FakePlugin::healthy(3, false), Behaviour::default());
        let (_pb, _sb) = b.start(sb.path(), "b.sock", GPU).await;
        counts_are(&sim, GPU, 3, 3).await;
        b.end_streams();
        let ev = next(&mut rx, "b's stream end", |k| {
            matches!(k, EventKind::StreamEnded { .. } | EventKind::StreamEndedFailover { .. })
        })
        .await;
        if version >= v(37) {
            let EventKind::StreamEndedFailover { socket, now_serving, capacity, allocatable, .. } = ev else {
                panic!("{version}: {ev:?}")
            };
            assert_eq!(socket, sb.join("b.sock").display().to_string(), "{version}");
            assert_eq!(now_serving, sb.join("a.sock").display().to_string(), "{version}");
            assert_eq!((capacity, allocatable), (3, 3), "{version}");
            assert_eq!(sim.status().resource(GPU).unwrap().state, "serving", "{version}");
            a.set_devices(FakePlugin::healthy(5, false));
            counts_are(&sim, GPU, 5, 5).await;
            let o = sim.admit(PodSpec::shorthand("p", "default", &[(GPU.into(), 1)])).await.unwrap();
            assert!(o.admitted, "{version}: {:?}", o.message);
            assert_eq!((a.calls().allocate.len(), b.calls().allocate.len()), (1, 0), "{version}");
        } else {
            let EventKind::StreamEnded { socket, .. } = ev else { panic!("{version}: {ev:?}") };
            assert_eq!(socket, sb.join("b.sock").display().to_string(), "{version}");
            counts_are(&sim, GPU, 3, 0).await;
        }
        sim.stop().await.unwrap();
    }
}

/// docs/kubelet-versions.md §2, 1.26-1.36: the same second Register on the same
/// socket is accepted (replace by name), with no error.
#[tokio::test]
async fn releases_accept_a_second_register_on_the_same_socket() {
    let sb = Sandbox::new();
    let sim = start_sim(&sb, v(30), |_| {}).await;
    let a = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour::default());
    let (_pa, _sa) = a.start(sb.path(), "a.sock", GPU).await;
    counts_are(&sim, GPU, 2, 2).await;
    within("register", register(&sb.join("kubelet.sock"), "v1beta1", GPU, "a.sock", None)).await.unwrap();
    counts_are(&sim, GPU, 2, 2).await;
    assert_eq!(sim.status().resource(GPU).unwrap().registrations, 2);
    sim.stop().await.unwrap();
}

/// Runs `dpctl smoke -o json <flags> -- dpctl mock-plugin ... <extra>` and returns the exit code and JSON.
async fn smoke_matrix(flags: &[&str], extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec!["smoke", "-o", "json", "--stream-window", "300ms", "--restart-deadline", "3s"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", crate::support::dpctl_bin(), "mock-plugin", "--dir", "{dir}", "--resource", GPU]);
    args.extend_from_slice(extra);
    let mut cmd = crate::support::dpctl_command();
    cmd.args(&args);
    let run = crate::support::run_bounded(cmd, &args, Duration::from_secs(90)).await;
    (run.code, run.json(), run.stderr)
}

/// `dpctl smoke --kubelet-version 1.28,1.32,1.36` against dpctl's mock plugin:
/// one full run per release, all pass; JUnit has one suite per release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_matrix_passes_a_well_behaved_plugin_on_three_releases() {
    let sb = Sandbox::new();
    let junit = sb.join("m.xml");
    let flags = ["--kubelet-version", "1.28,1.32,1.36", "--junit", junit.to_str().unwrap()];
    let (code, v, stderr) = smoke_matrix(&flags, &["--devices", "2", "--pre-start", "--preferred", "pack"]).await;
    assert_eq!(code, 0, "{v:#}\n{stderr}");
    assert_eq!(v["passed"], serde_json::json!(["1.28", "1.32", "1.36"]));
    assert_eq!(v["failed"], serde_json::json!([]));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for (r, want) in runs.iter().zip(["1.28", "1.32", "1.36"]) {
        assert_eq!(r["kubelet_version"], want);
        assert_eq!(r["totals"]["failed"], 0, "{r:#}");
    }
    assert!(stderr.contains("== kubelet 1.32 (2/3) =="), "{stderr}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("JUnit parses");
    let suites: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testsuite")).collect();
    let names: Vec<_> = suites.iter().map(|s| s.attribute("name").unwrap()).collect();
    assert_eq!(names, ["dpctl smoke (kubelet 1.28)", "dpctl smoke (kubelet 1.32)", "dpctl smoke (kubelet 1.36)"]);
    let root = doc.root_element();
    assert_eq!(root.attribute("failures"), Some("0"));
    let total: usize = suites.iter().map(|s| s.attribute("tests").unwrap().parse::<usize>().unwrap()).sum();
    assert_eq!(root.attribute("tests").unwrap().parse::<usize>().unwrap(), total);
}

/// docs/kubelet-versions.md §2: a plugin that calls Register twice on the same
/// socket passes on 1.28 and 1.36 (replace by name) and fails from 1.37
/// (PR #135437: a second client at a live (name, socket) is rejected).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_matrix_fails_a_double_register_from_1_37_only() {
    let flags = ["--kubelet-version", "1.28,1.36,1.37", "--skip", "kubelet-restart"];
    let (code, v, stderr) = smoke_matrix(&flags, &["--register-twice"]).await;
    assert_eq!(code, 1, "{v:#}\n{stderr}");
    assert_eq!(v["passed"], serde_json::json!(["1.28", "1.36"]), "{v:#}");
    assert_eq!(v["failed"], serde_json::json!(["1.37"]));
    let master = &v["runs"][2];
    // Reported where a user looks for a registration problem, right after registration; not as health.
    let steps = master["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names[1..3], ["registration", "registration-request"], "{names:?}");
    let rr = steps.iter().find(|s| s["name"] == "registration-request").unwrap();
    assert_eq!(rr["outcome"], "fail", "{rr}");
    let ev = rr["evidence"].as_str().unwrap();
    assert!(
        ev.contains("a second Register: after the accepted registration")
            && ev.contains("kubelet 1.37 refused it")
            && ev.contains("device plugin already connected: "),
        "{ev}"
    );
    let hr = steps.iter().find(|s| s["name"] == "health-report").unwrap();
    assert_eq!(hr["outcome"], "pass", "the devices' health is fine: {hr}");
    for run in v["runs"].as_array().unwrap().iter().take(2) {
        let rr = run["steps"].as_array().unwrap().iter().find(|s| s["name"] == "registration-request").unwrap();
        assert_eq!(rr["outcome"], "pass", "1.28 and 1.36 replace the plugin by name: {rr}");
    }
}

/// docs/kubelet-versions.md §5 "A pod arriving between Register and the first
/// ListAndWatch message" (every version): the device manager has no device
/// sets yet and skips the resource; node status does not list it, so the
/// request is stripped and the pod admitted with no devices. After the
/// 5-minute removal node status lists it at 0, and the same pod is rejected
/// with OutOf<resource>, not UnexpectedAdmissionError.
#[tokio::test]
async fn a_pod_before_the_first_list_and_watch_message_is_treated_as_the_kubelet_does() {
    let sb = Sandbox::new();
    let sim = start_sim(&sb, KubeletVersion::NEWEST, |c| c.grace_period = Duration::from_millis(100)).await;
    let mut rx = sim.subscribe();
    let p = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour { hold_first: true, ..Default::default() });
    let (_path, _stop) = p.start(sb.path(), "gpu.sock", GPU).await;
    let o = sim.admit(PodSpec::shorthand("early", "default", &[(GPU.into(), 1)])).await.unwrap();
    assert!(o.admitted, "{o:?}");
    let r = &o.containers[0].resources[0];
    assert!(r.devices.is_empty() && r.warnings[0].rule == "request-stripped", "{r:?}");
    assert!(!p.rpcs().contains(&"Allocate".to_string()), "no Allocate for a stripped request");
    sim.delete("default", "early").await.unwrap();
    // The first snapshot: now a device-plugin resource.
    p.set_devices(FakePlugin::healthy(2, false));
    counts_are(&sim, GPU, 2, 2).await;
    // The stream ends, the grace period passes: capacity 0, key kept.
    p.end_streams();
    next(&mut rx, "removal", |k| matches!(k, EventKind::ResourceRemoved { .. })).await;
    counts_are(&sim, GPU, 0, 0).await;
    // The plugin registers again but has not sent its list yet.
    let q = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour { hold_first: true, ..Default::default() });
    let _stop_q = q.serve(&sb.join("gpu2.sock")).await;
    within("register", register(&sb.join("kubelet.sock"), "v1beta1", GPU, "gpu2.sock", None)).await.unwrap();
    let o = sim.admit(PodSpec::shorthand("late", "default", &[(GPU.into(), 1)])).await.unwrap();
    assert!(!o.admitted);
    assert_eq!(o.reason.as_deref(), Some("OutOfexample.com/gpu"));
    assert_eq!(
        o.message.as_deref(),
        Some("Node didn't have enough resource: example.com/gpu, requested: 1, used: 0, capacity: 0")
    );
    sim.stop().await.unwrap();
}

/// docs/kubelet-versions.md §5 "PreStartContainer" (every version): called at
/// every container start, restarts included, with the container's devices;
/// a failure stops only that container. Through the library and the CLI.
#[tokio::test]
async fn pre_start_is_called_again_on_each_container_restart_and_a_failure_stops_only_it() {
    let sb = Sandbox::new();
    let sim = start_sim(&sb, v(30), |_| {}).await;
    let opts = dpctl::proto::deviceplugin::v1beta1::DevicePluginOptions {
        pre_start_required: true,
        get_preferred_allocation_available: false,
    };
    let p = FakePlugin::new(FakePlugin::healthy(3, false), Behaviour { options: opts, ..Default::default() });
    let (_path, _stop) = p.start(sb.path(), "gpu.sock", GPU).await;
    counts_are(&sim, GPU, 3, 3).await;
    let manifest = r#"{"metadata":{"name":"two","namespace":"ml"},"spec":{"containers":[
        {"name":"a","resources":{"limits":{"example.com/gpu":1}}},
        {"name":"b","resources":{"limits":{"example.com/gpu":1}}}]}}"#;
    // A failing PreStart of a regular container stops only that container.
    p.set(|s| s.pre_start_error = Some(tonic::Status::unknown("warming up")));
    let o = sim.admit(PodSpec::from_manifest(manifest, "m.json").unwrap()).await.unwrap();
    assert!(o.admitted);
    let started: Vec<bool> = o.containers.iter().map(|c| c.started).collect();
    assert_eq!(started, [false, false], "both fail on their own: {o:?}");
    assert!(o.containers[1].start_error.as_deref().unwrap().contains("warming up"), "b was tried, not blocked");
    p.set(|s| s.pre_start_error = None);
    let before = p.calls().pre_start.len();
    let r = sim.restart_container("ml", "two", "a").await.unwrap();
    assert!(r.started && r.pre_start[GPU] == "ok", "{r:?}");
    let calls = p.calls().pre_start.clone();
    assert_eq!(calls.len(), before + 1);
    assert_eq!(calls.last().unwrap(), &o.devices("a", GPU));
    // docs/protocol.md §3.7: a container restart reuses the cached Allocate answer.
    assert_eq!(p.calls().allocate.len(), 2, "one Allocate per container at admission, none at the restart");
    // From another process; a failure is exit 1 and names the plugin's error.
    p.set(|s| s.pre_start_error = Some(tonic::Status::unknown("device busy")));
    let dir = sb.path().to_str().unwrap();
    let run = dpctl(&["kubelet-sim", "restart-container", "--dir", dir, "ml/two", "b"]).await;
    run.expect_code(1);
    assert!(run.stdout.contains("did not start") && run.stdout.contains("device busy"), "{}", run.stdout);
    let run = dpctl(&["kubelet-sim", "restart-container", "--dir", dir, "ml/two", "nope"]).await;
    run.expect_code(2);
    assert!(run.stderr.contains("has no container \"nope\" (containers: a, b)"), "{}", run.stderr);
    // After the plugin's stream ends, a restart fails with the stopped endpoint.
    p.set(|s| s.pre_start_error = None);
    p.end_streams();
    counts_are(&sim, GPU, 3, 0).await;
    let r = sim.restart_container("ml", "two", "a").await.unwrap();
    assert!(!r.started);
    assert!(r.start_error.unwrap().contains("has been stopped"));
    sim.stop().await.unwrap();
}

/// docs/kubelet-versions.md §6 (every version): the plugins_registry watcher
/// ignores dot-named sockets, watches sub-directories, and deleting a
/// registered socket deregisters the plugin (DeRegisterPlugin: devices
/// unhealthy, as a stream end).
#[tokio::test]
async fn plugins_registry_watches_subdirectories_ignores_dot_files_and_deregisters_on_delete() {
    let sb = Sandbox::new();
    let reg_dir = sb.join("reg");
    let sim = start_sim(&sb, KubeletVersion::NEWEST, |c| c.registry_dir = Some(reg_dir.clone())).await;
    let mut rx = sim.subscribe();
    let info = |name: &str| Some(("DevicePlugin".to_string(), name.to_string(), String::new(), vec!["v1beta1".into()]));
    // A dot-named socket is never asked GetInfo.
    let hidden = FakePlugin::new(
        FakePlugin::healthy(1, false),
        Behaviour { info: info("example.com/hidden"), ..Default::default() },
    );
    let _stop_h = hidden.serve(&reg_dir.join(".hidden.sock")).await;
    // A socket in a new sub-directory registers.
    std::fs::create_dir(reg_dir.join("vendor")).unwrap();
    let p = FakePlugin::new(
        FakePlugin::healthy(2, false),
        Behaviour { info: info("example.com/sub"), ..Default::default() },
    );
    let _stop_p = p.serve(&reg_dir.join("vendor/p.sock")).await;
    let ev = next(&mut rx, "registration", |k| matches!(k, EventKind::Registered { .. })).await;
    let EventKind::Registered { resource, socket, .. } = ev else { unreachable!() };
    assert_eq!(resource, "example.com/sub");
    assert_eq!(socket, reg_dir.join("vendor/p.sock").display().to_string(), "empty endpoint: the socket's path");
    counts_are(&sim, "example.com/sub", 2, 2).await;
    assert!(hidden.rpcs().is_empty(), "dot-named socket ignored: {:?}", hidden.rpcs());
    // Deleting the socket (its server still runs) deregisters the plugin.
    std::fs::remove_file(reg_dir.join("vendor/p.sock")).unwrap();
    let ev = next(&mut rx, "deregistration", |k| matches!(k, EventKind::StreamEnded { .. })).await;
    let EventKind::StreamEnded { reason, .. } = ev else { unreachable!() };
    assert!(reason.contains("DeRegisterPlugin"), "{reason}");
    counts_are(&sim, "example.com/sub", 2, 0).await;
    assert!(!sim.counts().contains_key("example.com/hidden"));
    sim.stop().await.unwrap();
}

/// 1.36+ (PR #133335, pluginmanager/operationexecutor/operation_generator.go
/// of v1.36.3): a plugins_registry registration whose dial-back fails (its
/// endpoint is not served yet) is taken out of the actual state and tried
/// again; once the endpoint comes up, a later attempt registers it. (Played
/// at the default, 1.37; 1.26-1.35 never retry it: see the next test.)
#[tokio::test]
async fn a_failed_plugins_registry_registration_is_retried_until_it_succeeds() {
    let sb = Sandbox::new();
    let reg_dir = sb.join("reg");
    let late = sb.join("late.sock");
    let sim = start_sim(&sb, KubeletVersion::NEWEST, |c| c.registry_dir = Some(reg_dir.clone())).await;
    let mut rx = sim.subscribe();
    let info = Some((
        "DevicePlugin".to_string(),
        "example.com/late".to_string(),
        late.display().to_string(),
        vec!["v1beta1".into()],
    ));
    let p = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour { info, ..Default::default() });
    let _stop_reg = p.serve(&reg_dir.join("p.sock")).await;
    // The first attempt fails: nothing serves the endpoint yet (the dial gives up after 400 ms).
    let ev = next(&mut rx, "a failed registration", |k| matches!(k, EventKind::RegistrationRejected { .. })).await;
    let EventKind::RegistrationRejected { message, .. } = ev else { unreachable!() };
    assert_eq!(message, "failed to dial device plugin: context deadline exceeded");
    assert!(sim.counts().get("example.com/late").is_none_or(|c| c.capacity == 0));
    let _stop_dp = p.serve(&late).await;
    let ev = next(&mut rx, "registration on retry", |k| matches!(k, EventKind::Registered { .. })).await;
    let EventKind::Registered { resource, socket, .. } = ev else { unreachable!() };
    assert_eq!((resource.as_str(), socket), ("example.com/late", late.display().to_string()));
    counts_are(&sim, "example.com/late", 2, 2).await;
    let get_info = p.rpcs().iter().filter(|r| *r == "GetInfo").count();
    assert!(get_info >= 2, "GetInfo asked again on retry: {:?}", p.rpcs());
    sim.stop().await.unwrap();
}

/// The plugin manager's handling of a plugins_registry plugin the device
/// manager refuses (here GetDevicePluginOptions fails), read from
/// pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go:
/// 1.26-1.35 (v1.35.4) leave it in the actual state, so it is never tried
/// again, even once it would work, until its registration socket is
/// re-created; 1.36+ (PR #133335, v1.36.3) remove it and the reconciler tries
/// again after the backoff (notifyPlugin returns the failure as an error, so
/// goroutinemap's 500 ms doubling backoff applies).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_registry_plugins_the_device_manager_refused_are_retried_from_1_36_only() {
    for version in [v(35), v(36), v(37)] {
        let sb = Sandbox::new();
        let reg_dir = sb.join("reg");
        let sim = start_sim(&sb, version, |c| c.registry_dir = Some(reg_dir.clone())).await;
        let mut rx = sim.subscribe();
        let info = Some(("DevicePlugin".to_string(), GPU.to_string(), String::new(), vec!["v1beta1".into()]));
        let p = FakePlugin::new(
            FakePlugin::healthy(2, false),
            Behaviour { info, options_error: Some(tonic::Status::internal("not ready")), ..Default::default() },
        );
        let stop = p.serve(&reg_dir.join("p.sock")).await;
        let ev = next(&mut rx, "the refusal", |k| matches!(k, EventKind::RegistrationRejected { .. })).await;
        let EventKind::RegistrationRejected { message, .. } = ev else { unreachable!() };
        assert_eq!(message, "failed to get device plugin options: rpc error: code = Internal desc = not ready");
        // The plugin would now work.
        p.set(|b| b.options_error = None);
        let options_calls = |p: &FakePlugin| p.rpcs().iter().filter(|r| *r == "GetDevicePluginOptions").count();
        if version >= v(36) {
            next(&mut rx, "registration on retry", |k| matches!(k, EventKind::Registered { .. })).await;
            counts_are(&sim, GPU, 2, 2).await;
            assert_eq!(options_calls(&p), 2, "{version}: {:?}", p.rpcs());
        } else {
            // Several reconciler passes and backoff periods: no second attempt.
            let more = tokio::time::timeout(
                Duration::from_secs(3),
                next(&mut rx, "another attempt", |k| {
                    matches!(k, EventKind::Registered { .. } | EventKind::RegistrationRejected { .. })
                }),
            )
            .await;
            assert!(more.is_err(), "{version}: tried again: {more:?}");
            assert_eq!(options_calls(&p), 1, "{version}: {:?}", p.rpcs());
            assert_eq!(p.calls().notify.len(), 1, "{version}: one failure notification");
            assert!(sim.counts().get(GPU).is_none_or(|c| c.capacity == 0), "{version}");
            // Re-creating the registration socket makes the kubelet try again.
            drop(stop);
            let _ = std::fs::remove_file(reg_dir.join("p.sock"));
            let _stop = p.serve(&reg_dir.join("p.sock")).await;
            next(&mut rx, "registration of the re-created socket", |k| matches!(k, EventKind::Registered { .. })).await;
            counts_are(&sim, GPU, 2, 2).await;
        }
        sim.stop().await.unwrap();
    }
}

/// docs/kubelet-versions.md §8 "Get" (no such method in 1.26; gate
/// `KubeletPodResourcesGet`: alpha and off 1.27-1.33, on from 1.34) and "Rate limit" (100 qps, burst 10, from 1.27;
/// none in 1.26): the sim's PodResources server follows the version played.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podresources_get_gate_and_rate_limit_follow_the_version() {
    use dpctl::proto::podresources::v1;
    async fn client(
        sb: &Sandbox,
    ) -> v1::pod_resources_lister_client::PodResourcesListerClient<tonic::transport::Channel> {
        let channel = dpctl::transport::connect(&sb.join("pod-resources.sock"), Duration::from_secs(5)).await.unwrap();
        v1::pod_resources_lister_client::PodResourcesListerClient::new(channel)
    }
    /// How many of `n` concurrent List calls the rate limit rejected.
    async fn rejected_of(sb: &Sandbox, n: usize) -> usize {
        let c = client(sb).await;
        let calls = (0..n).map(|_| {
            let mut c = c.clone();
            async move { c.list(v1::ListPodResourcesRequest {}).await }
        });
        let results = within("concurrent List calls", futures_util::future::join_all(calls)).await;
        results
            .iter()
            .filter(|r| {
                r.as_ref().is_err_and(|s| {
                    s.code() == tonic::Code::ResourceExhausted && s.message() == "rejected by rate limit"
                })
            })
            .count()
    }
    let get = v1::GetPodResourcesRequest { pod_name: "nope".into(), pod_namespace: "default".into() };
    for (minor, get_on, limited) in [(26, false, false), (27, false, true), (33, false, true), (34, true, true)] {
        let sb = Sandbox::new();
        let sim = start_sim(&sb, v(minor), |_| {}).await;
        let err = client(&sb).await.get(get.clone()).await.unwrap_err();
        if minor == 26 {
            assert_eq!(err.code(), tonic::Code::Unimplemented, "1.26 has no Get: {err:?}");
        } else {
            assert_eq!(err.code(), tonic::Code::Unknown, "1.{minor}: {err:?}");
            let want =
                if get_on { "pod nope in namespace default not found" } else { "PodResources API Get method disabled" };
            assert_eq!(err.message(), want, "1.{minor}");
        }
        let rejected = rejected_of(&sb, 100).await;
        if limited {
            assert!(rejected > 0, "1.{minor}: 100 concurrent calls, none rate-limited");
        } else {
            assert_eq!(rejected, 0, "1.{minor} has no rate limit");
        }
        sim.stop().await.unwrap();
    }
}

/// docs/kubelet-versions.md §6 "Deregistration" and §2:
/// up to 1.36 deleting a plugins_registry socket deregisters by resource name,
/// so a same-named plugin that has since registered through kubelet.sock is
/// the one disconnected (its devices go unhealthy); 1.37 and master (PR
/// #135437) match the endpoint too and leave it alone.
#[tokio::test]
async fn deleting_a_registry_socket_deregisters_by_name_up_to_1_36_and_by_endpoint_from_1_37() {
    for version in [v(36), v(37), KubeletVersion::Master] {
        let sb = Sandbox::new();
        let reg_dir = sb.join("reg");
        let sim = start_sim(&sb, version, |c| c.registry_dir = Some(reg_dir.clone())).await;
        let mut rx = sim.subscribe();
        let info =
            |name: &str| Some(("DevicePlugin".to_string(), name.to_string(), String::new(), vec!["v1beta1".into()]));
        std::fs::create_dir_all(&reg_dir).unwrap();
        let a = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour { info: info(GPU), ..Default::default() });
        let _stop_a = a.serve(&reg_dir.join("a.sock")).await;
        counts_are(&sim, GPU, 2, 2).await;
        let other = FakePlugin::new(
            FakePlugin::healthy(1, false),
            Behaviour { info: info("example.com/other"), ..Default::default() },
        );
        let _stop_o = other.serve(&reg_dir.join("other.sock")).await;
        counts_are(&sim, "example.com/other", 1, 1).await;
        // The same resource, now through kubelet.sock with three devices.
        let b = FakePlugin::new(FakePlugin::healthy(3, false), Behaviour::default());
        let (_b_path, _stop_b) = b.start(sb.path(), "b.sock", GPU).await;
        counts_are(&sim, GPU, 3, 3).await;
        // Delete a.sock, then other.sock: the watcher handles them in order, so
        // once other's deregistration is seen, a.sock's has been handled.
        std::fs::remove_file(reg_dir.join("a.sock")).unwrap();
        std::fs::remove_file(reg_dir.join("other.sock")).unwrap();
        let mut gpu_ended = None;
        within("other's deregistration", async {
            loop {
                let ev = rx.recv().await.expect("event stream");
                if let EventKind::StreamEnded { resource, socket, reason, .. } = ev.kind {
                    assert!(reason.contains("DeRegisterPlugin"), "{reason}");
                    if resource == GPU {
                        gpu_ended = Some(socket);
                    } else if resource == "example.com/other" {
                        return;
                    }
                }
            }
        })
        .await;
        if version >= v(37) {
            assert_eq!(gpu_ended, None, "{version}: the kubelet.sock plugin is not disconnected");
            counts_are(&sim, GPU, 3, 3).await;
        } else {
            let socket = gpu_ended.expect("1.36: deregistration by name disconnects the current plugin");
            assert!(socket.ends_with("b.sock"), "{socket}");
            counts_are(&sim, GPU, 3, 0).await;
        }
        sim.stop().await.unwrap();
    }
}

/// docs/kubelet-versions.md §9 ":authority" and §1 "Dial options" (1.26 to
/// master): the kubelet's dial-back to a plugin sends `:authority:
/// localhost`. A bare HTTP/2 server records what the sim sends.
#[tokio::test]
async fn dial_back_sends_authority_localhost_in_every_version() {
    for version in [v(26), v(36), v(37), KubeletVersion::Master] {
        let sb = Sandbox::new();
        let sim = start_sim(&sb, version, |_| {}).await;
        let listener = tokio::net::UnixListener::bind(sb.join("raw.sock")).unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<(String, Option<String>)>();
        let server = tokio::spawn(async move {
            let (sock, _) = listener.accept().await.unwrap();
            let mut conn = h2::server::handshake(sock).await.unwrap();
            if let Some(Ok((req, mut respond))) = conn.accept().await {
                let _ = tx.send((req.uri().path().to_string(), req.uri().authority().map(|a| a.to_string())));
                // Trailers-only answer: Unimplemented.
                let resp = http::Response::builder()
                    .status(200)
                    .header("content-type", "application/grpc")
                    .header("grpc-status", "12")
                    .body(())
                    .unwrap();
                let _ = respond.send_response(resp, true);
                while conn.accept().await.is_some() {}
            }
        });
        let err = register(&sb.join("kubelet.sock"), "v1beta1", GPU, "raw.sock", None).await.unwrap_err();
        let (path, authority) = within("the dial-back's first request", rx).await.unwrap();
        assert_eq!(path, "/v1beta1.DevicePlugin/GetDevicePluginOptions", "{version}");
        assert_eq!(authority.as_deref(), Some("localhost"), "{version}");
        assert!(format!("{err:?}").contains("failed to get device plugin options"), "{version}: {err:?}");
        server.abort();
        sim.stop().await.unwrap();
    }
}

/// docs/kubelet-versions.md §8 "Containers in List/Get": up to 1.29 regular
/// containers only; 1.30-1.32 restartable init containers too, listed first
/// (SidecarContainers on, its default), and always from 1.33. v1alpha1 lists
/// regular containers only in every version.
#[tokio::test]
async fn podresources_lists_sidecars_from_1_30() {
    use dpctl::proto::podresources::{v1, v1alpha1};
    let manifest = r#"{"metadata":{"name":"p","namespace":"ns"},"spec":{
        "initContainers":[{"name":"init"},{"name":"side","restartPolicy":"Always"}],
        "containers":[{"name":"app"}]}}"#;
    for (minor, want) in [(29, vec!["app"]), (30, vec!["side", "app"]), (33, vec!["side", "app"])] {
        let sb = Sandbox::new();
        let sim = start_sim(&sb, v(minor), |_| {}).await;
        let o = sim.admit(PodSpec::from_manifest(manifest, "p.json").unwrap()).await.unwrap();
        assert!(o.admitted, "1.{minor}: {o:?}");
        let channel = dpctl::transport::connect(&sb.join("pod-resources.sock"), Duration::from_secs(5)).await.unwrap();
        let mut c = v1::pod_resources_lister_client::PodResourcesListerClient::new(channel.clone());
        let list = c.list(v1::ListPodResourcesRequest {}).await.unwrap().into_inner();
        let names: Vec<&str> = list.pod_resources[0].containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, want, "1.{minor} List");
        let mut a = v1alpha1::pod_resources_lister_client::PodResourcesListerClient::new(channel);
        let alpha = a.list(v1alpha1::ListPodResourcesRequest {}).await.unwrap().into_inner();
        let names: Vec<&str> = alpha.pod_resources[0].containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["app"], "1.{minor} v1alpha1");
        sim.stop().await.unwrap();
    }
}

/// docs/kubelet-versions.md §2 "If the new registration fails" (1.26-1.36): the
/// kubelet stores the new client under the name before dialing it, so a
/// Register that then fails (here GetDevicePluginOptions) leaves the name with
/// no client; when the earlier plugin's stream ends, runClient finds nothing
/// and never calls PluginDisconnected: the devices stay healthy, no grace
/// period runs, and Allocate still goes to the earlier endpoint. 1.37 and
/// master (PR #135437) key clients by (name, socket), so a failure on another
/// socket leaves the earlier client tracked and its end disconnects.
#[tokio::test]
async fn a_failed_second_register_leaves_the_first_untracked_up_to_1_36_not_from_1_37() {
    for version in [v(36), v(26), v(37), KubeletVersion::Master] {
        let sb = Sandbox::new();
        let sim = start_sim(&sb, version, |_| {}).await;
        let mut rx = sim.subscribe();
        let a = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour::default());
        let (_pa, _sa) = a.start(sb.path(), "a.sock", GPU).await;
        counts_are(&sim, GPU, 2, 2).await;
        let b = FakePlugin::new(
            FakePlugin::healthy(3, false),
            Behaviour { options_error: Some(tonic::Status::internal("not ready")), ..Default::default() },
        );
        let _sb = b.serve(&sb.join("b.sock")).await;
        let st =
            within("register b", register(&sb.join("kubelet.sock"), "v1beta1", GPU, "b.sock", None)).await.unwrap_err();
        assert_eq!(
            st.message(),
            "failed to get device plugin options: rpc error: code = Internal desc = not ready",
            "{version}"
        );
        a.end_streams();
        if version >= v(37) {
            next(&mut rx, "stream end", |k| matches!(k, EventKind::StreamEnded { .. })).await;
            counts_are(&sim, GPU, 2, 0).await;
        } else {
            let ev = next(&mut rx, "untracked stream end", |k| {
                matches!(k, EventKind::StreamEnded { .. } | EventKind::StreamEndedUntracked { .. })
            })
            .await;
            let EventKind::StreamEndedUntracked { socket, capacity, allocatable, .. } = ev else {
                panic!("{version}: {ev:?}")
            };
            assert_eq!((capacity, allocatable), (2, 2), "{version}");
            assert_eq!(socket, sb.join("a.sock").display().to_string());
            counts_are(&sim, GPU, 2, 2).await;
            assert_eq!(sim.status().resource(GPU).unwrap().state, "untracked", "{version}");
            // The pod is admitted and Allocate reaches the first plugin.
            let o = sim.admit(PodSpec::shorthand("p", "default", &[(GPU.into(), 1)])).await.unwrap();
            assert!(o.admitted, "{version}: {:?}", o.message);
            assert_eq!(a.calls().allocate.len(), 1, "{version}");
            // A later successful Register gives the name a client again.
            let c = FakePlugin::new(FakePlugin::healthy(4, false), Behaviour::default());
            let (_pc, _sc) = c.start(sb.path(), "c.sock", GPU).await;
            counts_are(&sim, GPU, 4, 4).await;
        }
        sim.stop().await.unwrap();
    }
}

/// docs/kubelet-versions.md §5 "Restartable init containers": up to 1.28 the
/// device manager adds every init container's devices to the reuse pool,
/// sidecars included, so the regular container is handed the device the
/// sidecar keeps (PR #120461 fixed it in 1.29); 1.29+ keeps it out.
#[tokio::test]
async fn sidecar_devices_are_reused_by_later_containers_up_to_1_28_only() {
    for (version, shared) in [(v(28), true), (v(29), false)] {
        let sb = Sandbox::new();
        let sim = start_sim(&sb, version, |_| {}).await;
        let p = FakePlugin::new(FakePlugin::healthy(4, false), Behaviour::default());
        let (_path, _stop) = p.start(sb.path(), "gpu.sock", GPU).await;
        counts_are(&sim, GPU, 4, 4).await;
        let manifest = sim::sidecar_pod("{name: p}", GPU, ["fetch", "proxy", "main"], "{example.com/gpu: 1}");
        let o = sim.admit(PodSpec::from_manifest(&manifest, "pod.yaml").unwrap()).await.unwrap();
        assert!(o.admitted, "{version}: {:?}", o.message);
        let (fetch, proxy, main) = (o.devices("fetch", GPU), o.devices("proxy", GPU), o.devices("main", GPU));
        assert_eq!(fetch, proxy, "{version}: the sidecar reuses the init container's device");
        assert_eq!(main == proxy, shared, "{version}: main {main:?}, sidecar {proxy:?}");
        assert_eq!(p.calls().allocate, [fetch.clone(), proxy.clone(), main.clone()], "{version}");
        sim.stop().await.unwrap();
    }
}

/// docs/kubelet-versions.md §1 "Context used by the dial-back", 1.26-1.34: the
/// kubelet dials back under a background context with its own 10 s, so a
/// plugin that gives up on its Register call (here after 300 ms, before its
/// socket is served) still ends up registered once the dial-back connects.
#[tokio::test]
async fn a_register_call_given_up_by_the_plugin_still_registers_up_to_1_34() {
    let sb = Sandbox::new();
    let sim = start_sim(&sb, v(34), |c| c.dial_timeout = Duration::from_secs(5)).await;
    let mut rx = sim.subscribe();
    let ks = sb.join("kubelet.sock");
    let gave_up =
        tokio::time::timeout(Duration::from_millis(300), register(&ks, "v1beta1", GPU, "late.sock", None)).await;
    assert!(gave_up.is_err(), "the call was still waiting for the dial-back: {gave_up:?}");
    let p = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour::default());
    let _stop = p.serve(&sb.join("late.sock")).await;
    let ev = next(&mut rx, "registration", |k| matches!(k, EventKind::Registered { .. })).await;
    assert!(matches!(ev, EventKind::Registered { endpoint, .. } if endpoint == "late.sock"));
    counts_are(&sim, GPU, 2, 2).await;
    sim.stop().await.unwrap();
}

/// docs/kubelet-versions.md §1, 1.35+ (the 1.35.4 code passes it on): the Register call's
/// context bounds the dial-back and GetDevicePluginOptions, so a plugin that
/// gives up on its call makes the kubelet's dial fail; §2, 1.35-1.36: that
/// failure drops the name's only client, so a live earlier plugin of the name
/// is untracked (its stream end disconnects nothing). 1.37 and master key
/// clients by (name, socket): the live plugin on another socket is still tracked.
#[tokio::test]
async fn a_register_call_given_up_by_the_plugin_fails_it_from_1_35_and_untracks_the_name_up_to_1_36() {
    for version in [v(35), v(36), v(37), KubeletVersion::Master] {
        let sb = Sandbox::new();
        let sim = start_sim(&sb, version, |c| c.dial_timeout = Duration::from_secs(5)).await;
        let mut rx = sim.subscribe();
        let a = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour::default());
        let (_pa, _sa) = a.start(sb.path(), "a.sock", GPU).await;
        counts_are(&sim, GPU, 2, 2).await;
        let ks = sb.join("kubelet.sock");
        let gave_up =
            tokio::time::timeout(Duration::from_millis(300), register(&ks, "v1beta1", GPU, "late.sock", None)).await;
        assert!(gave_up.is_err(), "{version}: the call was still waiting for the dial-back: {gave_up:?}");
        let ev = next(&mut rx, "the given-up registration fails", |k| match k {
            EventKind::RegistrationRejected { .. } => true,
            EventKind::Registered { endpoint, .. } => endpoint == "late.sock",
            _ => false,
        })
        .await;
        let EventKind::RegistrationRejected { endpoint, message, .. } = ev else { panic!("{version}: {ev:?}") };
        assert_eq!(endpoint, "late.sock");
        assert!(message.contains("context canceled"), "{version}: {message}");
        a.end_streams();
        let ev = next(&mut rx, "stream end", |k| {
            matches!(k, EventKind::StreamEnded { .. } | EventKind::StreamEndedUntracked { .. })
        })
        .await;
        if version >= v(37) {
            assert!(matches!(ev, EventKind::StreamEnded { .. }), "{version}: {ev:?}");
            counts_are(&sim, GPU, 2, 0).await;
        } else {
            assert!(matches!(ev, EventKind::StreamEndedUntracked { .. }), "{version}: {ev:?}");
            counts_are(&sim, GPU, 2, 2).await;
            assert_eq!(sim.status().resource(GPU).unwrap().state, "untracked", "{version}");
        }
        sim.stop().await.unwrap();
    }
}

/// docs/protocol.md §1.2: `cdi_devices` (ContainerAllocateResponse field 5) was
/// added in 1.28, so a 1.26 or 1.27 kubelet drops the CDI devices a plugin
/// returns (unknown field); the admission says so and keeps the rest. 1.28
/// knows the field (the cached answer keeps it) but passes CDI names to the
/// runtime only with gate DevicePluginCDIDevices (alpha, off by default; PR
/// #118254): a warning says the container gets none. 1.29+: no warning.
#[tokio::test]
async fn cdi_devices_are_dropped_before_1_28_and_held_back_by_the_gate_in_1_28() {
    for (version, kept, rule) in [
        (v(26), false, Some("cdi-devices-unknown")),
        (v(27), false, Some("cdi-devices-unknown")),
        (v(28), true, Some("cdi-devices-gated")),
        (v(29), true, None),
    ] {
        let sb = Sandbox::new();
        let sim = start_sim(&sb, version, |_| {}).await;
        let p = FakePlugin::new(FakePlugin::healthy(1, false), Behaviour::default());
        let (_path, _stop) = p.start(sb.path(), "gpu.sock", GPU).await;
        counts_are(&sim, GPU, 1, 1).await;
        let o = sim.admit(PodSpec::shorthand("cdi", "default", &[(GPU.into(), 1)])).await.unwrap();
        assert!(o.admitted, "{version}: {:?}", o.message);
        let r = &o.containers[0].resources[0];
        let a = r.allocation.as_ref().expect("an Allocate answer");
        assert!(!a.devices.is_empty(), "{version}: device nodes are kept");
        assert_eq!(!a.cdi_devices.is_empty(), kept, "{version}: {:?}", a.cdi_devices);
        let warned: Vec<(&str, &str)> = r
            .warnings
            .iter()
            .filter(|w| w.rule.starts_with("cdi-devices"))
            .map(|w| (w.rule.as_str(), w.evidence.as_str()))
            .collect();
        match rule {
            None => assert!(warned.is_empty(), "{version}: {warned:?}"),
            Some(rule) => {
                assert_eq!(warned.len(), 1, "{version}: {warned:?}");
                assert_eq!(warned[0].0, rule, "{version}");
                let want = if kept {
                    format!("kubelet {version} keeps cdi_devices in the answer but passes them to the runtime only")
                } else {
                    format!("kubelet {version} predates cdi_devices")
                };
                assert!(warned[0].1.contains(&want) && warned[0].1.contains("example.com/gpu="), "{}", warned[0].1);
            }
        }
        sim.stop().await.unwrap();
    }
}
