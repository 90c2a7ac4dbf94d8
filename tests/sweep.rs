//! The absurd-input sweep (hostile input, second pass): each test pins one
//! thing the sweep broke (a panic, a hang, a silent exit 0, a wrong exit
//! code) with the value that broke it. README's exit-code table: 2 for bad input, named.

use std::sync::Arc;
use std::time::Duration;

use dpctl::podresources::fixture::{Fixture, FixtureProvider};
use dpctl::podresources::server::{PodResourcesService, ServedApis, ServerConfig};
use dpctl::transport::{self, BindOptions};

use crate::support::{Child, Sandbox, dpctl, dpctl_command, run_bounded, sim, within};

/// Asserts a bad-input refusal: exit 2, the message, never a panic.
fn refused(r: &crate::support::Run, says: &str) {
    r.expect_code(2);
    assert!(r.stderr.contains(says), "{}: {}", r.command_line(), r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

// docs/topology.md §2.6 (prefer-closest-numa-nodes reads the NUMA distances):
// `--numa-distances` used to panic on any value (exit 101, clap reading the
// matrix back as a repeated flag), so the option could not be used at all.
#[tokio::test]
async fn numa_distances_are_accepted_and_bad_ones_refused() {
    let sb = Sandbox::new();
    let dir = sb.join("dp");
    let dir = dir.to_str().unwrap();
    let r = dpctl(&[
        "kubelet-sim",
        "--dir",
        dir,
        "--topology-manager-policy",
        "best-effort",
        "--topology-manager-policy-options",
        "prefer-closest-numa-nodes=true",
        "--numa-distances",
        "10,21;21,10",
        "--expect",
        "example.com/gpu=1",
        "--timeout",
        "50ms",
    ])
    .await;
    // It runs: the expectation (no plugin) is what fails.
    r.expect_code(1);
    assert!(r.stdout.contains("expectations NOT met"), "{}\n{}", r.stdout, r.stderr);
    refused(&dpctl(&["kubelet-sim", "--dir", dir, "--numa-distances", "0"]).await, "needs 2 rows of 2 values");
    // A row longer than any machine is refused while parsing.
    let row = vec!["10"; 20_000].join(",");
    refused(&dpctl(&["kubelet-sim", "--dir", dir, "--numa-distances", &row]).await, "more than 16 values");
}

// `--reserved-cpus` with many short ranges (each under the range limit) used
// to build a set of millions of CPUs: over 20 s and hundreds of MB before the
// machine check. A CPU past the sim's 4096 is now refused while parsing.
#[tokio::test]
async fn reserved_cpus_cannot_name_millions_of_cpus() {
    let sb = Sandbox::new();
    // About 120 KB: one argument may have at most 128 KiB.
    let ranges: Vec<String> = (0..5000u32).map(|i| format!("{}-{}", i * 4096, i * 4096 + 4095)).collect();
    let list = ranges.join(",");
    let dir = sb.join("dp");
    refused(
        &dpctl(&["kubelet-sim", "--dir", dir.to_str().unwrap(), "--reserved-cpus", &list]).await,
        "beyond the sim's limit of 4096 CPUs",
    );
    refused(
        &dpctl(&["kubelet-sim", "--dir", dir.to_str().unwrap(), "--reserved-cpus", "0-4294967295"]).await,
        "--reserved-cpus",
    );
}

// A pod whose control request is over the sim's 16 MiB per request used to
// exit 0 with no output: the sim refused it and hung up, the client's write
// failed with a broken pipe, and dpctl took that for a closed stdout.
#[tokio::test]
async fn admitting_a_pod_too_big_for_the_control_socket_is_bad_input() {
    let sb = Sandbox::new();
    let dir = sb.join("dp");
    let _sim = sim::start(&dir, |_| {}).await;
    let containers: Vec<serde_json::Value> = (0..140_000)
        .map(|i| serde_json::json!({"name": format!("c{i:062}"), "resources": {"limits": {"example.com/gpu": "1"}}}))
        .collect();
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "huge"},
        "spec": {"containers": containers}});
    let file = sb.join("huge.json");
    std::fs::write(&file, serde_json::to_vec(&pod).unwrap()).unwrap();
    let args = ["kubelet-sim", "admit", "--dir", dir.to_str().unwrap(), "-f", file.to_str().unwrap()];
    // Reading 17 MB of JSON takes a few seconds in a debug build.
    let mut cmd = dpctl_command();
    cmd.args(args);
    let r = run_bounded(cmd, &args, Duration::from_secs(60)).await;
    refused(&r, "over the 16777216 bytes a control socket reads per request");
}

// `doctor --every 0` used to rerun doctor back to back: hundreds of reports
// a second until killed.
#[tokio::test]
async fn doctor_every_must_leave_time_between_runs() {
    let sb = Sandbox::new();
    let root = sb.path().to_str().unwrap();
    refused(&dpctl(&["doctor", "--root", root, "--every", "0"]).await, "--every: 0ms is too short");
    refused(&dpctl(&["doctor", "--root", root, "--every", "500ms"]).await, "at least 1s");
}

// README exit codes, row 2: "a --dir ... path that cannot be used". A
// dangling symbolic link (every command) and a file (mock-plugin,
// --registry-dir) used to exit 3 with the OS's bare "File exists".
#[tokio::test]
async fn a_dir_that_cannot_be_made_is_bad_input() {
    let sb = Sandbox::new();
    std::fs::write(sb.join("file"), b"x").unwrap();
    std::os::unix::fs::symlink(sb.join("nowhere"), sb.join("dangling")).unwrap();
    let file = sb.join("file");
    let file = file.to_str().unwrap();
    let dangling = sb.join("dangling");
    let dangling = dangling.to_str().unwrap();
    let under_file = format!("{file}/registry");
    let sim_dir = sb.join("dp");
    let sim_dir = sim_dir.to_str().unwrap();
    let mock = ["mock-plugin", "--resource", "example.com/gpu", "--no-register", "--run-for", "1s", "--dir"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        ([&mock[..], &[file]].concat(), "is a regular file, not a directory"),
        ([&mock[..], &[dangling]].concat(), "is a symbolic link to"),
        (vec!["kubelet-sim", "--dir", dangling], "is a symbolic link to"),
        (vec!["kubelet-sim", "--dir", sim_dir, "--registry-dir", &under_file], "is a regular file, not a directory"),
        (vec!["smoke", "--dir", dangling, "--", "true"], "is a symbolic link to"),
    ];
    for (args, says) in cases {
        refused(&dpctl(&args).await, says);
    }
    // Nothing was left behind in the sim's directory.
    let left: Vec<_> =
        std::fs::read_dir(sb.join("dp")).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(left.iter().all(|p| p.is_dir()), "{left:?}");
}

// README exit codes, row 3: "permission denied" is 3. A --dir the OS will not
// let dpctl create (a read-only parent) exited 2 as if the flag were wrong.
#[tokio::test]
async fn a_dir_the_os_will_not_create_exits_3() {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        eprintln!("SKIPPED a_dir_the_os_will_not_create_exits_3: root is not denied by chmod 0555");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let locked = sb.join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    let dir = locked.join("dp");
    let r = dpctl(&["kubelet-sim", "--dir", dir.to_str().unwrap(), "--timeout", "50ms"]).await;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    r.expect_code(3);
    assert!(r.stderr.contains("permission denied: cannot create directory"), "{}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

// README, safety: the sim never rewrites a checkpoint it did not write. A
// dangling symbolic link at kubelet_internal_checkpoint used to count as "no
// checkpoint": the sim wrote its own file over the link at start.
#[tokio::test]
async fn a_dangling_checkpoint_link_is_never_replaced() {
    let sb = Sandbox::new();
    let dir = sb.join("dp");
    std::fs::create_dir(&dir).unwrap();
    let link = dir.join("kubelet_internal_checkpoint");
    std::os::unix::fs::symlink(sb.join("elsewhere"), &link).unwrap();
    let d = dir.to_str().unwrap();
    let r = dpctl(&["kubelet-sim", "--dir", d, "--expect", "example.com/gpu=1", "--timeout", "50ms"]).await;
    r.expect_code(1);
    assert!(r.stdout.contains("a symbolic link to"), "{}", r.stdout);
    assert!(r.stdout.contains("the sim will not touch it"), "{}", r.stdout);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
    assert!(!sb.join("elsewhere").exists());
    // `checkpoint verify` names it too, instead of "no such file".
    let r = dpctl(&["checkpoint", "verify", "--dir", d]).await;
    refused(&r, "a symbolic link to");
    let file = sb.join("file");
    std::fs::write(&file, b"x").unwrap();
    refused(&dpctl(&["checkpoint", "verify", "--dir", file.to_str().unwrap()]).await, "is --dir a file?");
}

// README, safety: the sim "never replaces a symbolic link there". A live link
// to a valid checkpoint, adopted (--adopt-checkpoint), used to be renamed
// over at the first write: the link became the sim's own file.
#[tokio::test]
async fn a_live_checkpoint_link_is_never_replaced_even_adopted() {
    const TEGRA: &[u8] = include_bytes!("data/checkpoints/kubelet-kind-tegra.json");
    let sb = Sandbox::new();
    let dir = sb.join("dp");
    std::fs::create_dir(&dir).unwrap();
    let target = sb.join("real_checkpoint");
    std::fs::write(&target, TEGRA).unwrap();
    let link = dir.join("kubelet_internal_checkpoint");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let sim = sim::start(&dir, |c| c.adopt_checkpoint = true).await;
    let cp = sim.status().checkpoint.expect("checkpoint status");
    assert_eq!(cp.found, "valid", "{cp:?}");
    assert!(!cp.writes, "{cp:?}");
    assert!(cp.ownership.contains("a symbolic link to"), "{}", cp.ownership);
    assert!(cp.ownership.contains("not even with --adopt-checkpoint"), "{}", cp.ownership);
    // A state change and a kubelet restart: both would write the checkpoint.
    sim.delete("default", "bf52b2cd-b611-4e79-86b1-280b283185c3").await.unwrap();
    sim.restart(Duration::from_millis(300)).await.unwrap();
    sim.stop().await.unwrap();
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
    assert_eq!(std::fs::read(&target).unwrap(), TEGRA, "the link's target changed");
    // The writer itself refuses a link, whoever calls it.
    let e = dpctl::checkpoint::write_atomic(&link, b"{}").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("never replaces a symbolic link"), "{e}");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
}

// A mock-plugin config whose per-device env holds `{ids}` grows with the
// square of the devices asked for: an Allocate of 10,000 devices used to
// build gigabytes until the mock aborted ("memory allocation failed"). It
// now answers ResourceExhausted and keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allocate_template_cannot_expand_without_bound() {
    let sb = Sandbox::new();
    let config = sb.join("square.toml");
    std::fs::write(
        &config,
        "[[resource]]\nname = \"example.com/sq\"\ncount = 10000\n[resource.allocate.envs]\n\"E_{index}\" = \"{ids}\"\n",
    )
    .unwrap();
    let dir = sb.path().to_str().unwrap();
    let mut mock = Child::dpctl(&[
        "mock-plugin",
        "--config",
        config.to_str().unwrap(),
        "--dir",
        dir,
        "--no-register",
        "--hide-rpcs",
        "-o",
        "json",
    ]);
    mock.event("serving").await;
    let socket = sb.join("example-sq.sock");
    let socket = socket.to_str().unwrap();
    let all: Vec<String> = (0..10_000).map(|i| format!("SQ-{i}")).collect();
    let r = dpctl(&["plugin", "call", "allocate", "--socket", socket, "--devices", &all.join(",")]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("ResourceExhausted") && r.stderr.contains("over 67108864 bytes"), "{}", r.stderr);
    // Still serving, and a reasonable request is answered.
    let r = dpctl(&["plugin", "call", "allocate", "--socket", socket, "--devices", "SQ-0,SQ-1"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("SQ-0,SQ-1"), "{}", r.stdout);
    mock.stop().await;
}

// PodResources memory sizes are the kubelet's uint64s: three of 8 EiB made
// `podresources list` and `free` overflow their sums and panic (exit 101);
// in a release build they would wrap to a wrong total. The sums saturate.
#[tokio::test]
async fn podresources_memory_sums_cannot_overflow() {
    let sb = Sandbox::new();
    let huge = r#"{"memory_type": "memory", "size": 9223372036854775807, "numa_nodes": [0]}"#;
    let three = format!("[{huge}, {huge}, {huge}]");
    let json = format!(
        r#"{{"pod_resources": [{{"name": "p", "namespace": "d", "containers": [{{"name": "c", "memory": {three}}}]}}],
            "allocatable": {{"memory": {three}}}}}"#
    );
    let fixture = Fixture::from_json(&json, "three 8 EiB sizes").unwrap();
    let service = PodResourcesService::new(Arc::new(FixtureProvider::new(fixture)), ServerConfig::default());
    let socket = sb.join("pr.sock");
    let listener = transport::bind(&socket, &BindOptions::default()).await.unwrap();
    let (_stop, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(transport::serve(service.router_for(ServedApis::default()), listener, async {
        let _ = rx.await;
    }));
    let s = socket.to_str().unwrap();
    let r = dpctl(&["podresources", "list", "--socket", s]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("16Ei"), "{}", r.stdout);
    let r = dpctl(&["podresources", "free", "--socket", s, "-o", "json"]).await;
    r.expect_code(0);
    let memory = &r.json()["memory"][0];
    assert_eq!((memory["allocatable"].as_u64(), memory["free"].as_u64()), (Some(u64::MAX), Some(0)), "{memory}");
}

/// One HTTP/2 frame, as the wire has it.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut f = len[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

// A client that opens streams and never sends their bodies used to be held
// without limit: 250 connections of 2,000 such calls took a mock plugin
// from 35 MB to 1.4 GB. Over 128 open calls on one connection, the server
// refuses the stream (REFUSED_STREAM) and keeps serving everyone else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cannot_hold_more_than_128_open_calls() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let args = ["mock-plugin", "--dir", dir, "--resource", "example.com/gpu", "--devices", "1", "--no-register"];
    let mut mock = Child::dpctl(&[&args[..], &["--hide-rpcs", "-o", "json"]].concat());
    mock.event("serving").await;
    let socket = sb.join("example-gpu.sock");
    // HPACK literals without indexing, no Huffman coding.
    let mut headers = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/v1beta1.DevicePlugin/Allocate"),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        headers.push(0);
        headers.push(u8::try_from(name.len()).unwrap());
        headers.extend(name.as_bytes());
        headers.push(u8::try_from(value.len()).unwrap());
        headers.extend(value.as_bytes());
    }
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(h2_frame(4, 0, 0, &[]));
    for i in 0..300u32 {
        out.extend(h2_frame(1, 4, 1 + 2 * i, &headers)); // HEADERS, END_HEADERS, no body
    }
    let mut conn = tokio::net::UnixStream::connect(&socket).await.unwrap();
    conn.write_all(&out).await.unwrap();
    let refused = within("300 - 128 REFUSED_STREAM resets", async {
        let (mut buf, mut refused) = (Vec::new(), 0);
        let mut chunk = [0u8; 16384];
        while refused < 300 - 128 {
            let n = conn.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the server closed the connection after {refused} refusals");
            buf.extend_from_slice(&chunk[..n]);
            while buf.len() >= 9 {
                let len = usize::from(buf[0]) << 16 | usize::from(buf[1]) << 8 | usize::from(buf[2]);
                if buf.len() < 9 + len {
                    break;
                }
                if buf[3] == 3 && buf[9..9 + len] == [0, 0, 0, 7] {
                    refused += 1;
                }
                buf.drain(..9 + len);
            }
        }
        refused
    })
    .await;
    assert_eq!(refused, 300 - 128);
    // The 128 calls stay open on that connection; others are served.
    dpctl(&["plugin", "call", "options", "--socket", socket.to_str().unwrap()]).await.expect_code(0);
    drop(conn);
    mock.stop().await;
}

// The commands that steer a running sim or mock through its control socket
// used to exit 3 with "Not a directory (os error 20)" when --dir was a file;
// like a missing directory, that is "nothing runs there": exit 2.
#[tokio::test]
async fn steering_with_dir_at_a_file_is_bad_input() {
    let sb = Sandbox::new();
    let file = sb.join("file");
    std::fs::write(&file, b"x").unwrap();
    let f = file.to_str().unwrap();
    let cases: [(Vec<&str>, &str); 3] = [
        (vec!["kubelet-sim", "restart", "--dir", f], "no kubelet-sim is running there"),
        (
            vec!["kubelet-sim", "admit", "--dir", f, "--allocate", "example.com/gpu=1"],
            "no kubelet-sim is running there",
        ),
        (
            vec!["mock-plugin", "set-health", "--dir", f, "example.com/gpu", "GPU-0", "unhealthy"],
            "no mock plugin serves example.com/gpu",
        ),
    ];
    for (args, says) in cases {
        refused(&dpctl(&args).await, says);
    }
}

// The control socket takes JSON from any local process, past the CLI's
// duration parser: `set_grace` with u64::MAX ms used to be accepted (a grace
// period of 584 billion years in `status`), as was such a restart wait.
// They get the flags' bound of 365 days.
#[tokio::test]
async fn control_requests_get_the_duration_bound_of_flags() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let sb = Sandbox::new();
    let dir = sb.join("dp");
    let _sim = sim::start(&dir, |_| {}).await;
    let conn = tokio::net::UnixStream::connect(dir.join(".dpctl/kubelet-sim.sock")).await.unwrap();
    let (read, mut write) = conn.into_split();
    let mut lines = BufReader::new(read).lines();
    for request in [
        r#"{"op":"set_grace","grace_period_ms":18446744073709551615}"#,
        r#"{"op":"restart","wait_ms":18446744073709551615}"#,
    ] {
        write.write_all(format!("{request}\n").as_bytes()).await.unwrap();
        let reply = within("the reply", lines.next_line()).await.unwrap().unwrap();
        assert!(reply.contains("is longer than the longest duration dpctl accepts (365 days)"), "{reply}");
        assert!(reply.contains("\"exit_code\":2"), "{reply}");
    }
    let r = dpctl(&["kubelet-sim", "status", "--dir", dir.to_str().unwrap(), "-o", "json"]).await;
    r.expect_code(0);
    assert_eq!(r.json()["grace_period_ms"], 300_000, "{}", r.stdout);
    assert_eq!(r.json()["restarts"], 0, "{}", r.stdout);
}

// Quantities in a manifest: a huge one (cpu: 1e30, 8Ei) used to be "not a
// CPU quantity", as if misspelt; valid Kubernetes forms (1.5Gi, 1e9, 2k)
// were refused the same way. Each refusal now says why.
#[tokio::test]
async fn manifest_quantities_are_read_as_kubernetes_reads_them() {
    let sb = Sandbox::new();
    let dir = sb.join("dp");
    let _sim = sim::start(&dir, |_| {}).await;
    let d = dir.to_str().unwrap();
    let pod = |limits: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: q}}\nspec:\n  containers:\n  - name: c\n    resources:\n      limits: {{{limits}}}\n"
        )
    };
    let file = sb.join("pod.yaml");
    let f = file.to_str().unwrap();
    std::fs::write(&file, pod(r#"memory: "1.5Gi", cpu: "2""#)).unwrap();
    let r = dpctl(&["kubelet-sim", "admit", "--dir", d, "--dry-run", "-f", f, "-o", "json"]).await;
    r.expect_code(0);
    assert_eq!(r.json()["admitted"], true, "{}", r.stdout);
    for (limits, says) in [
        (r#"cpu: "1e30""#, r#"limits[cpu]: "1e30": too large"#),
        // 8Ei bytes fit a u64; 8Ei CPUs in millicores do not.
        (r#"memory: "8Ei", cpu: "8Ei""#, r#"limits[cpu]: "8Ei": too large"#),
        (r#"memory: "16Ei""#, r#""16Ei": too large"#),
        (r#"cpu: "1e-30""#, "finer than the unit allows"),
        (r#"cpu: "NaN""#, r#""NaN": not a quantity"#),
        (r#""example.com/gpu": "18446744073709551616""#, "is too large"),
        (r#""example.com/gpu": "0.5""#, "is not a whole number"),
    ] {
        std::fs::write(&file, pod(limits)).unwrap();
        refused(&dpctl(&["kubelet-sim", "admit", "--dir", d, "--dry-run", "-f", f]).await, says);
    }
    let shorthand =
        ["kubelet-sim", "admit", "--dir", d, "--dry-run", "--allocate", "example.com/gpu=1", "--cpu", "1e30"];
    refused(&dpctl(&shorthand).await, "--cpu 1e30: too large");
}

// mock-plugin's control socket added devices past the 100,000 a config may
// have (150,000 in one request, and again, without end). It is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_socket_cannot_grow_a_resource_past_the_device_limit() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let args = ["mock-plugin", "--dir", dir, "--resource", "example.com/gpu", "--devices", "1", "--no-register"];
    let mut mock = Child::dpctl(&[&args[..], &["--hide-rpcs", "-o", "json"]].concat());
    mock.event("serving").await;
    let devices: Vec<serde_json::Value> = (0..100_000).map(|i| serde_json::json!({"id": format!("N-{i}")})).collect();
    let request = serde_json::json!({"op": "add_devices", "devices": devices});
    let conn = tokio::net::UnixStream::connect(sb.join(".dpctl/example.com_gpu.sock")).await.unwrap();
    let (read, mut write) = conn.into_split();
    write.write_all(format!("{request}\n").as_bytes()).await.unwrap();
    let reply = within("the reply", BufReader::new(read).lines().next_line()).await.unwrap().unwrap();
    assert!(
        reply.contains("adding 100000 devices to 1 would be over the limit of 100000"),
        "{}",
        &reply[..300.min(reply.len())]
    );
    let status = dpctl(&["mock-plugin", "status", "--dir", dir, "example.com/gpu", "-o", "json"]).await;
    assert_eq!(status.expect_code(0).json()["capacity"], 1);
    mock.stop().await;
}

// `bench --concurrency 100000` (then the flag's maximum) aborted out of
// memory, and 10,000 took 2.2 GB: every worker keeps a latency histogram
// of about 220 KB. The bound is now 1,000, refused while parsing.
#[tokio::test]
async fn bench_concurrency_is_bounded() {
    let sb = Sandbox::new();
    let s = sb.join("none.sock");
    let r = dpctl(&["bench", "allocate", "--socket", s.to_str().unwrap(), "--concurrency", "1001"]).await;
    refused(&r, "1001 is not in 1..=1000");
}

// `podresources serve --qps 1e308` was accepted and meant no limit while
// looking like one. --qps is now 0.001..=1000000 and --burst 1..=1000000;
// outside, exit 2 naming the flag and pointing at --no-rate-limit. Nothing
// is bound.
#[tokio::test]
async fn podresources_serve_rate_limit_is_bounded() {
    let sb = Sandbox::new();
    let s = sb.join("pr.sock");
    let sock = s.to_str().unwrap();
    for qps in ["1e308", "inf", "NaN", "-5", "0", "2000000"] {
        let r = dpctl(&["podresources", "serve", "--socket", sock, &format!("--qps={qps}")]).await;
        refused(&r, "--qps:");
        assert!(r.stderr.contains("--no-rate-limit"), "{}", r.stderr);
    }
    let r = dpctl(&["podresources", "serve", "--socket", sock, "--burst", "4000000000"]).await;
    refused(&r, "--burst:");
    assert!(!s.exists(), "nothing was bound");
}
