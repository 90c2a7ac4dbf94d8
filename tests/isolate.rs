//! `dpctl smoke --isolate` and smoke through plugins_registry, as a vendor's
//! CI runs them: a plugin that only knows the kubelet's standard paths
//! (docs/protocol.md §1.3: `DevicePluginPath` /var/lib/kubelet/device-plugins/,
//! `KubeletSocket`; §2: /var/lib/kubelet/pod-resources/kubelet.sock; the
//! plugin watcher's /var/lib/kubelet/plugins_registry/) is smoked unmodified
//! in a private mount namespace. After every isolated run the host's mount
//! table is unchanged and no mountpoint directory is left behind. These tests
//! run as root (as CI does); as another user they are skipped with a message.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::{Run, Sandbox, dpctl_bin, interop, run_bounded};

const GPU: &str = "example.com/gpu";
const SMOKE_WAIT: Duration = Duration::from_secs(40);
const FAST: [&str; 4] = ["--stream-window", "300ms", "--restart-deadline", "5s"];

fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        let test = std::thread::current().name().unwrap_or("an --isolate test").to_string();
        eprintln!("SKIPPED {test}: --isolate tests need root (CI runs them as root)");
    }
    root
}

/// The host's mount table, as this process sees it.
fn mounts() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").expect("read /proc/self/mountinfo")
}

/// The names in `dir`, sorted, one a line.
fn listing(dir: &str) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {dir}: {e}"))
        .map(|e| e.expect("read entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.join("\n")
}

/// What an isolated run must leave exactly as it was: the host's mount
/// table and the listings of `/` and `/var/lib` (where missing mountpoints
/// would otherwise be made).
fn host_state() -> [(&'static str, String); 3] {
    [
        ("/proc/self/mountinfo", mounts()),
        ("the listing of /", listing("/")),
        ("the listing of /var/lib", listing("/var/lib")),
    ]
}

/// The paths an isolated run may need as mountpoints, and whether each exists now.
fn kubelet_paths() -> Vec<(String, bool)> {
    ["/var/lib/kubelet", "/var/lib/kubelet/device-plugins", "/var/lib/kubelet/plugins_registry"]
        .iter()
        .map(|p| (p.to_string(), Path::new(p).exists()))
        .collect()
}

/// Runs `dpctl smoke -o json <flags> -- <command>` (optionally as another
/// user, with extra environment) and parses the report when there is one.
async fn smoke_as(
    user: Option<u32>,
    env: &[(&str, &str)],
    flags: &[&str],
    command: &[&str],
) -> (Run, Option<serde_json::Value>) {
    let mut args = vec!["smoke", "-o", "json"];
    args.extend_from_slice(flags);
    args.push("--");
    args.extend_from_slice(command);
    let mut cmd = std::process::Command::new(dpctl_bin());
    cmd.args(&args)
        .env_remove("DPCTL_DEVICE_PLUGIN_DIR")
        .env_remove("DPCTL_PODRESOURCES_SOCKET")
        .env_remove("DPCTL_LOG")
        .env("NO_COLOR", "1")
        .current_dir("/tmp")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(uid) = user {
        cmd.uid(uid).gid(uid);
    }
    // Every --isolate run, whatever it binds and however it ends, leaves the
    // host byte for byte as it was.
    let before = args.contains(&"--isolate").then(host_state);
    let run = run_bounded(cmd, &args, SMOKE_WAIT).await;
    if let Some(before) = before {
        for ((what, was), (_, now)) in before.iter().zip(host_state()) {
            assert_eq!(&now, was, "{what} changed across {args:?}");
        }
    }
    let report = serde_json::from_str(&run.stdout).ok();
    (run, report)
}

async fn smoke(flags: &[&str], command: &[&str]) -> (Run, serde_json::Value) {
    let (run, report) = smoke_as(None, &[], flags, command).await;
    let report = report.unwrap_or_else(|| panic!("no JSON report: {run:?}"));
    (run, report)
}

fn outcome<'a>(v: &'a serde_json::Value, name: &str) -> &'a str {
    v["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step {name}: {v:#}"))["outcome"]
        .as_str()
        .unwrap()
}

fn evidence(v: &serde_json::Value, name: &str) -> String {
    v["steps"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap()["evidence"].as_str().unwrap().to_string()
}

/// The report's isolation mounts as `target <- source` strings.
fn mounted(v: &serde_json::Value) -> Vec<String> {
    v["isolation"]["mounts"]
        .as_array()
        .unwrap_or_else(|| panic!("no isolation in the report: {v:#}"))
        .iter()
        .map(|m| format!("{} <- {}", m["target"].as_str().unwrap(), m["source"].as_str().unwrap()))
        .collect()
}

/// The host is as before: same mount table, no kubelet path created.
fn assert_host_untouched(before_mounts: &str, before_paths: &[(String, bool)]) {
    assert_eq!(mounts(), before_mounts, "the host's mount table changed");
    for (p, existed) in before_paths {
        assert_eq!(Path::new(p).exists(), *existed, "{p} existed before: {existed}; now it differs");
    }
}

/// The grpcio peer with the kubelet's default directory (no `{dir}`) passes
/// every step, registration to restart, inside the namespace: the kubelet's
/// standard paths (docs/protocol.md §1.3) lead to kubelet-sim.
#[tokio::test]
async fn the_grpcio_peer_at_the_default_path_passes_smoke_isolate() {
    if !is_root() {
        return;
    }
    let Some(env) = interop::env() else { return };
    let (m0, p0) = (mounts(), kubelet_paths());
    let py = env.python.to_str().unwrap().to_string();
    let script = interop::peer_script();
    let mut flags = vec!["--isolate", "--resource", "example.com/peer"];
    flags.extend(FAST);
    let (run, v) = smoke(&flags, &[&py, script.to_str().unwrap(), "plugin", "--pre-start"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    for name in ["registration", "registration-request", "admission", "kubelet-restart", "shutdown"] {
        assert_eq!(outcome(&v, name), "pass", "{name}: {v:#}");
    }
    let dir = v["dir"].as_str().unwrap();
    let m = mounted(&v);
    assert!(m.contains(&format!("/var/lib/kubelet/device-plugins <- {dir}")), "{m:?}");
    assert!(m.iter().any(|x| x.starts_with("/var/lib/kubelet/plugins_registry <- ")), "{m:?}");
    assert!(m.iter().any(|x| x.starts_with("/var/lib/kubelet/pod-resources <- ")), "{m:?}");
    assert_eq!(v["isolation"]["namespaces"], "mount");
    assert!(!Path::new(dir).exists(), "the fresh directory {dir} is removed");
    assert_host_untouched(&m0, &p0);
}

/// A plugin that registers only through plugins_registry (the plugin
/// watcher's GetInfo and NotifyRegistrationStatus, docs/protocol.md §1.3 "Related
/// API: plugin-watcher registration") passes smoke; the steps that apply run.
#[tokio::test]
async fn mock_plugin_registering_through_plugins_registry_passes_smoke() {
    let cmd = [dpctl_bin(), "mock-plugin", "--dir", "{dir}", "--registry-dir", "{registry_dir}", "--no-register"];
    let mut cmd = cmd.to_vec();
    cmd.extend(["--resource", GPU]);
    let (run, v) = smoke(&FAST, &cmd).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(evidence(&v, "registration").contains("through plugins_registry"), "{v:#}");
    assert!(evidence(&v, "registration-request").contains("GetInfo named example.com/gpu"), "{v:#}");
    // No RegisterRequest: nothing to note beside the options.
    assert!(!evidence(&v, "options-answer").contains("note:"), "{v:#}");
    for name in ["first-snapshot", "health-report", "admission", "pod-deletion", "kubelet-restart", "shutdown"] {
        assert_eq!(outcome(&v, name), "pass", "{name}: {v:#}");
    }
    assert!(v["registry_dir"].as_str().unwrap().ends_with("/plugins_registry"), "{v:#}");

    // Insisting on kubelet.sock fails the registration and says why.
    let mut flags = FAST.to_vec();
    flags.extend(["--registration", "kubelet-sock", "--skip", "kubelet-restart"]);
    let (run, v) = smoke(&flags, &cmd).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(outcome(&v, "registration"), "fail");
    assert!(evidence(&v, "registration").contains("not through kubelet.sock"), "{v:#}");
}

/// The same mock plugin, isolated, finds the registry at the standard path:
/// its GetInfo endpoint (a path inside the namespace) is dialled on the host.
#[tokio::test]
async fn an_isolated_plugin_registers_through_the_standard_plugins_registry() {
    if !is_root() {
        return;
    }
    let (m0, p0) = (mounts(), kubelet_paths());
    let cmd = [
        "env",
        "-u",
        "DPCTL_DEVICE_PLUGIN_DIR",
        dpctl_bin(),
        "mock-plugin",
        "--registry-dir",
        "/var/lib/kubelet/plugins_registry",
        "--no-register",
        "--resource",
        GPU,
    ];
    let mut flags = vec!["--isolate", "--registration", "plugins-registry"];
    flags.extend(FAST);
    let (run, v) = smoke(&flags, &cmd).await;
    assert_eq!(run.code, 0, "{run:?}");
    let reg = evidence(&v, "registration-request");
    assert!(reg.contains("endpoint /var/lib/kubelet/device-plugins/"), "{reg}");
    assert!(reg.contains(&format!("dialled as {}", v["dir"].as_str().unwrap())), "{reg}");
    assert_host_untouched(&m0, &p0);
}

/// A plugin writing to the kubelet's path reaches kubelet-sim's directory,
/// never the host's; `--bind` adds a path of the user's; nothing is left.
#[tokio::test]
async fn writes_to_kubelet_paths_land_in_the_sims_directory_and_bind_adds_paths() {
    if !is_root() {
        return;
    }
    let sb = Sandbox::new();
    let cdi = sb.join("cdi");
    std::fs::create_dir(&cdi).unwrap();
    std::fs::write(cdi.join("vendor.yaml"), "cdiVersion: 0.6.0\n").unwrap();
    let bind = format!("{}:/etc/dpctl-isolate-test/cdi", cdi.display());
    assert!(!Path::new("/etc/dpctl-isolate-test").exists());
    let (m0, p0) = (mounts(), kubelet_paths());
    let script = "mkdir -p /var/lib/kubelet/device-plugins && echo escaped > /var/lib/kubelet/device-plugins/escaped \
                  && cp /etc/dpctl-isolate-test/cdi/vendor.yaml /var/lib/kubelet/plugins_registry/seen.yaml \
                  && echo ready; sleep 30";
    let flags = ["--isolate", "--bind", &bind, "--keep", "--register-timeout", "1s", "--grace", "1s"];
    let (run, v) = smoke(&flags, &["sh", "-c", script]).await;
    // It never registers: the run fails, the directories are kept for inspection.
    assert_eq!(run.code, 1, "{run:?}");
    assert!(v["plugin"]["stdout"]["tail"].as_str().unwrap().contains("ready"), "{v:#}");
    let dir = Path::new(v["dir"].as_str().unwrap()).to_path_buf();
    let root = dir.parent().unwrap().to_path_buf();
    assert_eq!(std::fs::read_to_string(dir.join("escaped")).unwrap(), "escaped\n");
    let registry = Path::new(v["registry_dir"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(registry.join("seen.yaml")).unwrap(), "cdiVersion: 0.6.0\n");
    assert!(mounted(&v).contains(&format!("/etc/dpctl-isolate-test/cdi <- {}", cdi.display())));
    assert!(!Path::new("/var/lib/kubelet/device-plugins/escaped").exists(), "the write reached the host");
    assert!(!Path::new("/etc/dpctl-isolate-test").exists(), "a mountpoint directory was left on the host");
    assert_host_untouched(&m0, &p0);
    std::fs::remove_dir_all(&root).unwrap();
}

/// A user the kernel refuses a user namespace gets exit 2 with the reason
/// and the fix, before kubelet-sim or the plugin start (the refusal is
/// simulated: this kernel may allow user namespaces).
#[tokio::test]
async fn a_user_refused_a_user_namespace_gets_the_reason_and_the_fix_before_the_plugin_starts() {
    if !is_root() {
        return;
    }
    let sb = Sandbox::new();
    let marker_dir = sb.join("m");
    std::fs::create_dir(&marker_dir).unwrap();
    std::fs::set_permissions(&marker_dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let marker = marker_dir.join("started");
    let script = format!("touch {}; sleep 30", marker.display());
    for (knob, fix) in [
        ("unprivileged_userns_clone", "sudo sysctl -w kernel.unprivileged_userns_clone=1"),
        ("max_user_namespaces", "sudo sysctl -w user.max_user_namespaces="),
        ("apparmor_restrict_unprivileged_userns", "userns,"),
    ] {
        let env = [("DPCTL_ISOLATE_SIMULATE_REFUSAL", knob)];
        let (run, report) = smoke_as(Some(65534), &env, &["--isolate"], &["sh", "-c", &script]).await;
        assert_eq!(run.code, 2, "{knob}: {run:?}");
        assert!(report.is_none(), "{knob}: no report when nothing ran: {run:?}");
        assert!(run.stderr.contains("cannot isolate the plugin as uid 65534"), "{knob}: {}", run.stderr);
        assert!(run.stderr.contains(knob), "{knob}: {}", run.stderr);
        assert!(run.stderr.contains("Fix:") && run.stderr.contains(fix), "{knob}: {}", run.stderr);
        assert!(!run.stderr.contains("kubelet-sim: serving"), "the sim started: {}", run.stderr);
        assert!(!marker.exists(), "{knob}: the plugin started");
    }
}

/// As a user other than root, a user namespace (where the kernel allows one)
/// isolates the plugin just the same; where it does not, the refusal is
/// explained with exit 2.
#[tokio::test]
async fn a_non_root_user_is_isolated_in_a_user_namespace_or_told_why_not() {
    if !is_root() {
        return;
    }
    let (m0, p0) = (mounts(), kubelet_paths());
    let script = "echo mapped > /var/lib/kubelet/device-plugins/uid; cat /proc/self/uid_map; sleep 30";
    let flags = ["--isolate", "--keep", "--register-timeout", "1s", "--grace", "1s"];
    let (run, report) = smoke_as(Some(65534), &[], &flags, &["sh", "-c", script]).await;
    match report {
        None => {
            assert_eq!(run.code, 2, "{run:?}");
            assert!(run.stderr.contains("Fix:"), "{}", run.stderr);
        }
        Some(v) => {
            assert_eq!(v["isolation"]["namespaces"], "user+mount", "{v:#}");
            let dir = Path::new(v["dir"].as_str().unwrap()).to_path_buf();
            assert_eq!(std::fs::read_to_string(dir.join("uid")).unwrap(), "mapped\n");
            // The file belongs to the user on the host (root inside maps to 65534).
            let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(dir.join("uid")).unwrap());
            assert_eq!(owner, 65534);
            assert!(v["plugin"]["stdout"]["tail"].as_str().unwrap().split_whitespace().eq(["0", "65534", "1"]));
            std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
        }
    }
    assert_host_untouched(&m0, &p0);
}

#[tokio::test]
async fn bad_isolate_usage_exits_2_with_the_reason() {
    let (run, _) = smoke_as(None, &[], &["--bind", "/tmp:/x"], &["true"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--isolate"), "{}", run.stderr);
    let (run, _) = smoke_as(None, &[], &["--isolate", "--bind", "/tmp:relative"], &["true"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("must be an absolute path"), "{}", run.stderr);
    let (run, _) = smoke_as(None, &[], &["--isolate", "--bind", "/no/such/src:/x"], &["true"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("cannot be used"), "{}", run.stderr);
    let (run, _) = smoke_as(None, &[], &["--registration", "grpc"], &["true"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("plugins-registry"), "{}", run.stderr);
    // The hidden helper refuses to run without smoke's instructions.
    let run = crate::support::dpctl(&["__isolate-exec", "--", "true"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("not run by hand"), "{}", run.stderr);
}

/// mock-plugin and kubelet-sim take their directories as flags: their help
/// says isolation is not needed for them, and smoke's help explains --isolate.
#[tokio::test]
async fn help_says_where_isolation_is_and_is_not_needed() {
    for cmd in ["mock-plugin", "kubelet-sim"] {
        let run = crate::support::dpctl(&[cmd, "--help"]).await;
        run.expect_code(0);
        assert!(run.stdout.contains("No isolation is needed"), "{cmd} --help: {}", run.stdout);
    }
    let run = crate::support::dpctl(&["smoke", "--help"]).await;
    run.expect_code(0);
    for needle in ["--isolate", "--bind <SRC:DST>", "--registration <WAY>", "{registry_dir}", "dpctl help isolate"] {
        assert!(run.stdout.contains(needle), "smoke --help lacks {needle}: {}", run.stdout);
    }
    // The reference prose lives in its help topic, which smoke's help names.
    let run = crate::support::dpctl(&["help", "isolate"]).await;
    run.expect_code(0);
    assert!(run.stdout.contains("tmpfs copy") && run.stdout.contains("nothing is left behind"), "{}", run.stdout);
}

/// A plugin in a container (or --isolate's namespace) announces its GetInfo
/// endpoint by the path it sees (docs/protocol.md §1.3, plugin-watcher
/// registration: the kubelet dials the endpoint as given); kubelet-sim, told
/// which of its directories is mounted there, dials its own copy.
#[tokio::test]
async fn the_sim_dials_a_getinfo_endpoint_seen_inside_a_container_in_its_own_directory() {
    use dpctl::kubelet_sim::{EventKind, KubeletSim, SimConfig, Via};

    use crate::support::fake_plugin::{Behaviour, FakePlugin};

    let sb = Sandbox::new();
    let reg_dir = sb.join("reg");
    let mut c = SimConfig::new(sb.path());
    c.registry_dir = Some(reg_dir.clone());
    c.path_map = vec![("/var/lib/kubelet/plugins_registry".into(), reg_dir.clone())];
    let sim = KubeletSim::start(c).await.expect("start the sim");
    let mut rx = sim.subscribe();
    let seen = "/var/lib/kubelet/plugins_registry/p.sock".to_string();
    assert!(!Path::new(&seen).exists(), "this test needs {seen} to be absent on the host");
    let info = ("DevicePlugin".to_string(), "example.com/boxed".to_string(), seen.clone(), vec!["v1beta1".to_string()]);
    let p = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour { info: Some(info), ..Default::default() });
    let _stop = p.serve(&reg_dir.join("p.sock")).await;
    let ev = crate::support::within("registration via the registry", async {
        loop {
            let ev = rx.recv().await.expect("event stream");
            if matches!(ev.kind, EventKind::Registered { .. } | EventKind::RegistrationRejected { .. }) {
                return ev.kind;
            }
        }
    })
    .await;
    match ev {
        EventKind::Registered { via, endpoint, socket, .. } => {
            assert_eq!(via, Via::PluginsRegistry);
            assert_eq!(endpoint, seen);
            assert_eq!(Path::new(&socket), reg_dir.join("p.sock"));
        }
        other => panic!("not registered: {other:?}"),
    }
    within_notify(&p).await;
    sim.stop().await.unwrap();
}

async fn within_notify(p: &crate::support::fake_plugin::FakePlugin) {
    crate::support::within("notify", p.notified()).await;
    assert_eq!(p.calls().notify, [(true, String::new())]);
}

/// The plugin's program is looked up inside the namespace: one that exists
/// only under a --bind starts; one that exists nowhere fails the launch step
/// (exit 1), as it does without --isolate.
#[tokio::test]
async fn the_program_is_found_inside_the_namespace_or_the_launch_fails() {
    if !is_root() {
        return;
    }
    let sb = Sandbox::new();
    let bin = sb.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let script = bin.join("vendor-plugin");
    std::fs::write(&script, "#!/bin/sh\necho inside > /var/lib/kubelet/device-plugins/ran\nsleep 30\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bind = format!("{}:/opt/dpctl-isolate-test", bin.display());
    assert!(!Path::new("/opt/dpctl-isolate-test").exists());
    let flags = ["--isolate", "--bind", &bind, "--keep", "--register-timeout", "1s", "--grace", "1s"];
    let (run, v) = smoke(&flags, &["/opt/dpctl-isolate-test/vendor-plugin"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(outcome(&v, "launch"), "pass", "{v:#}");
    let dir = Path::new(v["dir"].as_str().unwrap()).to_path_buf();
    assert_eq!(std::fs::read_to_string(dir.join("ran")).unwrap(), "inside\n");
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    assert!(!Path::new("/opt/dpctl-isolate-test").exists(), "a mountpoint directory was left on the host");

    let (run, v) = smoke(&["--isolate"], &["./no-such-plugin"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(outcome(&v, "launch"), "fail", "{v:#}");
    assert!(evidence(&v, "launch").contains("./no-such-plugin: no such file inside the namespace"), "{v:#}");
    assert!(v["plugin"]["pid"].is_null(), "nothing was started: {v:#}");
}

/// `--bind` to a top-level path that does not exist (`/dpctl-isolate-zz`) or
/// to one nested under a missing top-level directory used to create those
/// directories on the host's `/` (a mount stacked on `/` does not change a
/// process's root), and leave them, while the report said "the mountpoint
/// exists inside the namespace only". Now it does.
#[tokio::test]
async fn binds_to_missing_top_level_paths_never_touch_the_hosts_root() {
    if !is_root() {
        return;
    }
    let sb = Sandbox::new();
    let src = sb.join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("marker"), "from the host\n").unwrap();
    for target in ["/dpctl-isolate-zz", "/dpctl-isolate-newtop/a/b"] {
        assert!(!Path::new(target).exists());
        let top = format!("/{}", Path::new(target).components().nth(1).unwrap().as_os_str().to_string_lossy());
        let bind = format!("{}:{target}", src.display());
        let script = format!("cat {target}/marker && ls / > /dev/null && echo ready; sleep 30");
        let flags = ["--isolate", "--bind", &bind, "--register-timeout", "1s", "--grace", "1s"];
        // smoke_as compares the host's mount table, `/` and `/var/lib` before and after.
        let (run, v) = smoke(&flags, &["sh", "-c", &script]).await;
        assert_eq!(run.code, 1, "it never registers: {run:?}");
        let tail = v["plugin"]["stdout"]["tail"].as_str().unwrap_or_default();
        assert!(tail.contains("from the host") && tail.contains("ready"), "the bind is seen inside: {v:#}");
        assert!(mounted(&v).contains(&format!("{target} <- {}", src.display())), "{v:#}");
        assert!(!Path::new(&top).exists(), "{top} was left on the host");
    }
}
