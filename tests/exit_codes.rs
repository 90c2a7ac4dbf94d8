//! One exit-code contract, so scripts and CI can act on the code whatever the
//! command: a test per row of the README's
//! exit-code table, and bad input of every kind exiting 2 before anything
//! starts.

use crate::support::fake_plugin::{Behaviour, FakePlugin, device};
use crate::support::{Sandbox, dpctl};

#[tokio::test]
async fn row_0_success() {
    dpctl(&["completions", "bash"]).await.expect_code(0);
}

#[tokio::test]
async fn row_1_a_check_failed() {
    // The test plugin allocates IDs it never advertised: a check fails.
    let sb = Sandbox::new();
    let path = sb.join("c.sock");
    let _stop = FakePlugin::new(vec![device("d0", "Healthy", None)], Behaviour::default()).serve(&path).await;
    dpctl(&["plugin", "check", "--socket", path.to_str().unwrap()]).await.expect_code(1);
}

#[tokio::test]
async fn row_2_bad_usage_or_input() {
    let sb = Sandbox::new();
    let long = format!("{}/{}.sock", sb.path().display(), "s".repeat(120));
    let long_dir = format!("{}/{}", sb.path().display(), "d".repeat(110));
    std::fs::write(sb.join("file"), b"x").unwrap();
    std::fs::write(sb.join("bin.toml"), [0xff, 0xfe, b'\n']).unwrap();
    let file = sb.join("file");
    let scenario_file = concat!(env!("CARGO_MANIFEST_DIR"), "/conformance/scenarios/register-basic.toml");
    let gone_sock = sb.join("gone.sock").display().to_string();
    let missing = sb.join("no-such-kubeconfig").display().to_string();
    let tls = sb.join("tls-kubeconfig");
    std::fs::write(
        &tls,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443'}}]\n",
    )
    .unwrap();
    let tls = tls.display().to_string();
    let corrupt = sb.join("kroot");
    std::fs::create_dir_all(&corrupt).unwrap();
    std::fs::write(corrupt.join("dra_manager_state"), "{\"Data\": 5}").unwrap();
    let corrupt = corrupt.display().to_string();
    let file = file.to_str().unwrap();
    let dir = sb.path().to_str().unwrap();
    let bin = sb.join("bin.toml");
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        ("an unknown flag", vec!["plugin", "call", "options", "--no-such-flag"], "unexpected argument"),
        // Out-of-range durations must be refused, not panic (exit 101).
        ("a huge duration", vec!["plugin", "call", "options", "--timeout", "1e20"], "365 days"),
        ("a huge timeout", vec!["podresources", "list", "--timeout", "1e19"], "365 days"),
        (
            "a huge flap period",
            vec!["mock-plugin", "--resource", "example.com/gpu", "--devices", "1", "--flap", "GPU-0:1e19"],
            "365 days",
        ),
        // The same socket-path problem gets one code whichever command meets it.
        ("a socket path over 107 bytes to dial", vec!["plugin", "call", "options", "--socket", &long], "107"),
        ("a socket path over 107 bytes to serve", vec!["kubelet-sim", "--dir", &long_dir], "107"),
        (
            "a plugin socket path over 107 bytes",
            vec!["mock-plugin", "--resource", "example.com/gpu", "--devices", "1", "--dir", &long_dir, "--no-register"],
            "107",
        ),
        ("a config that is a directory", vec!["mock-plugin", "--config", dir], "not a regular file"),
        ("a config that is not UTF-8", vec!["mock-plugin", "--config", bin.to_str().unwrap()], "not UTF-8"),
        (
            "--record at a directory",
            vec!["mock-plugin", "--resource", "example.com/gpu", "--devices", "1", "--dir", dir, "--record", dir],
            "--record",
        ),
        ("kubelet-sim --dir at a file", vec!["kubelet-sim", "--dir", file], "not a directory"),
        // An absurd device count must be refused at once, not start for minutes.
        (
            "ten million devices",
            vec!["mock-plugin", "--resource", "example.com/gpu", "--devices", "10000000", "--no-register"],
            "over the limit of 100000",
        ),
        ("smoke --log-dir at a file", vec!["smoke", "--log-dir", file, "--", "true"], "--log-dir"),
        // A flag without a value, and one that needs plugins_registry.
        (
            "--assume-claims-reserved with a value",
            vec!["kubelet-sim", "--dir", dir, "--registry-dir", dir, "--assume-claims-reserved=yes"],
            "unexpected value",
        ),
        (
            "--assume-claims-reserved without --registry-dir",
            vec!["kubelet-sim", "--assume-claims-reserved"],
            "--registry-dir",
        ),
        // The lifecycle faults' and smoke's settle window's bad values.
        (
            "a crash delay that is no duration",
            vec!["mock-plugin", "--resource", "example.com/gpu", "--crash-after-restart", "soon"],
            "--crash-after-restart",
        ),
        (
            "a huge crash delay",
            vec!["mock-plugin", "--resource", "example.com/gpu", "--crash-after-restart", "1e20"],
            "365 days",
        ),
        (
            "a rescan limit that is no number",
            vec!["mock-plugin", "--resource", "example.com/gpu", "--scan-stops-after", "many"],
            "--scan-stops-after",
        ),
        ("a settle window that is no duration", vec!["smoke", "--settle", "a while", "--", "true"], "--settle"),
        ("a huge settle window", vec!["smoke", "--settle", "1e20", "--", "true"], "365 days"),
        // One --kubelet-version parser: a range backwards, past the releases played, or
        // where one release is taken is refused with the accepted forms, never run as one.
        ("a backwards range", vec!["smoke", "--kubelet-version", "1.37-1.28", "--", "true"], "1.28-1.37 or 1.28..1.37"),
        ("a range past 1.38", vec!["dra", "smoke", "--kubelet-version", "1.34..1.39", "--", "true"], "\"1.39\""),
        ("1.39 in scenario run", vec!["scenario", "run", "--kubelet-version", "1.39", dir], "1.38, master"),
        // scenario diff compares the sim with another engine: which one must be said, and not the sim.
        ("scenario diff with nothing to compare with", vec!["scenario", "diff", dir], "--referee"),
        (
            "scenario diff with the sim",
            vec!["scenario", "diff", "--engine", "sim", scenario_file],
            "referee:PATH or kubelet:PATH",
        ),
        (
            "scenario diff with two engines",
            vec!["scenario", "diff", "--engine", "kubelet:/x", "--referee", dir, dir],
            "--engine",
        ),
        (
            "scenario diff on no kubelet",
            vec!["scenario", "diff", "--engine", "kubelet:/nonexistent", scenario_file],
            "conformance/build.sh kubelet",
        ),
        ("a range for one release", vec!["kubelet-sim", "--kubelet-version", "1.28-1.37"], "a range names 10 releases"),
        ("a range for doctor", vec!["doctor", "--kubelet-version", "1.28..1.30"], "a range names 3 releases"),
        // dra check and prepare read --kubeconfig before they call the driver; a checkpoint
        // that cannot be read under --kubelet-root is refused, never guessed at.
        (
            "dra check --kubeconfig that is no kubeconfig",
            vec!["dra", "check", "--registration", &gone_sock, "--kubeconfig", file],
            "--kubeconfig",
        ),
        (
            "dra check --kubeconfig missing",
            vec!["dra", "check", "--registration", &gone_sock, "--kubeconfig", &missing],
            "--kubeconfig",
        ),
        (
            "dra check --kubeconfig of a TLS server",
            vec!["dra", "check", "--registration", &gone_sock, "--kubeconfig", &tls],
            "uses TLS",
        ),
        (
            "dra prepare --kubeconfig that is no kubeconfig",
            vec!["dra", "prepare", "--socket", &gone_sock, "--claim", "gpu/u1", "--kubeconfig", file],
            "--kubeconfig",
        ),
        (
            "dra check --claim over a corrupt dra_manager_state",
            vec!["dra", "check", "--registration", &gone_sock, "--claim", "gpu/u1", "--kubelet-root", &corrupt],
            "dra_manager_state",
        ),
        // --only and --skip: one parser, one error for a name that is no step or check, and a
        // name in both refused (it would run nothing --only asked for), in smoke and plugin check.
        (
            "an unknown --only step",
            vec!["smoke", "--only", "nope", "--", "true"],
            "--only: unknown step or check \"nope\"",
        ),
        ("an empty-looking --only", vec!["smoke", "--only", "admission,,x y", "--", "true"], "\"x y\""),
        (
            "--only and --skip of one step",
            vec!["smoke", "--only", "admission", "--skip", "admission", "--", "true"],
            "is in --only too",
        ),
        (
            "--only and --skip of one check",
            vec!["smoke", "--only", "options-answer", "--skip", "options-answer", "--", "true"],
            "is in --only too",
        ),
        (
            "--only and --skip of one check in plugin check",
            vec![
                "plugin",
                "check",
                "--socket",
                "/nonexistent/p.sock",
                "--only",
                "message-size",
                "--skip",
                "message-size",
            ],
            "--skip: \"message-size\" is in --only too",
        ),
        ("--stable with a value", vec!["smoke", "--stable=yes", "--", "true"], "--stable"),
        ("--stable with a value in plugin check", vec!["plugin", "check", "--stable=1"], "--stable"),
    ];
    for (what, args, says) in cases {
        let r = dpctl(&args).await;
        assert_eq!(r.code, 2, "{what}: exit {}\n{}", r.code, r.stderr);
        assert!(r.stderr.contains(says), "{what}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{what}: {}", r.stderr);
    }
}

#[tokio::test]
async fn row_3_socket_problem() {
    let sb = Sandbox::new();
    let r = dpctl(&["plugin", "call", "options", "--socket", sb.join("none.sock").to_str().unwrap()]).await;
    r.expect_code(3);
    assert!(r.stderr.contains("no socket at"), "{}", r.stderr);
}

/// One rule for "nothing is running there", whichever command asks: a
/// plugin socket, a sim's or a mock's control socket, in a directory that
/// exists or not, is a socket problem (3). A `--dir` that is a regular file
/// is bad input (2), as row 2 says.
#[tokio::test]
async fn row_3_nothing_running_there_is_the_same_code_for_every_command() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let gone = sb.join("gone");
    let gone = gone.to_str().unwrap();
    let plugin_socket = format!("{dir}/gpu.sock");
    let podres_socket = format!("{dir}/pod-resources.sock");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["kubelet-sim", "status", "--dir", dir], "no kubelet-sim is running there"),
        (vec!["kubelet-sim", "status", "--dir", gone], "no kubelet-sim is running there"),
        (vec!["kubelet-sim", "admit", "--dir", dir, "--allocate", "example.com/gpu=1"], "no kubelet-sim"),
        (vec!["mock-plugin", "status", "--dir", dir, "example.com/gpu"], "no mock plugin serves example.com/gpu"),
        (vec!["plugin", "call", "options", "--socket", &plugin_socket], "no socket at"),
        (vec!["podresources", "list", "--socket", &podres_socket], "no socket at"),
    ];
    for (args, says) in cases {
        let r = dpctl(&args).await;
        assert_eq!(r.code, 3, "{args:?}: exit {}\n{}", r.code, r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
}

/// A `.dpctl` that is a symbolic link is refused by the mock as by the sim
/// (exit 2, naming it); nothing is made where it points.
#[tokio::test]
async fn row_2_a_linked_control_directory_for_the_mock() {
    let sb = Sandbox::new();
    let elsewhere = Sandbox::new();
    std::os::unix::fs::symlink(elsewhere.path(), sb.join(".dpctl")).unwrap();
    let dir = sb.path().to_str().unwrap();
    let r = dpctl(&["mock-plugin", "--dir", dir, "--resource", "example.com/gpu", "--no-register", "--run-for", "1s"])
        .await;
    r.expect_code(2);
    assert!(r.stderr.contains(".dpctl") && r.stderr.contains("symbolic link"), "{}", r.stderr);
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}

/// A refused start leaves no directory behind: kubelet-sim with an objects
/// file that holds nothing exits 2, and the two directories it had to make
/// for --dir are gone again (one already there stays).
#[tokio::test]
async fn row_2_a_refused_start_leaves_no_directory_it_made() {
    let sb = Sandbox::new();
    let empty = sb.join("objects.json");
    std::fs::write(&empty, "[]").unwrap();
    let dir = sb.join("node/device-plugins");
    let registry = sb.join("node/plugins_registry");
    let args = ["kubelet-sim", "--dir", dir.to_str().unwrap(), "--registry-dir", registry.to_str().unwrap()];
    let r = dpctl(&[&args[..], &["--api-objects", empty.to_str().unwrap()]].concat()).await;
    r.expect_code(2);
    assert!(r.stderr.contains("no objects"), "{}", r.stderr);
    assert!(!sb.join("node").exists(), "a refused start left {:?}", std::fs::read_dir(sb.join("node")).ok());
    assert!(sb.path().exists());
}

/// A symbolic-link loop handed to `checkpoint` is bad input (2), like any
/// path that cannot be a checkpoint; it used to exit 3 (an I/O error).
#[tokio::test]
async fn row_2_a_symlink_loop_given_to_checkpoint() {
    let sb = Sandbox::new();
    let a = sb.join("a");
    std::os::unix::fs::symlink(sb.join("b"), &a).unwrap();
    std::os::unix::fs::symlink(&a, sb.join("b")).unwrap();
    for cmd in ["show", "verify"] {
        let r = dpctl(&["checkpoint", cmd, a.to_str().unwrap()]).await;
        r.expect_code(2);
        assert!(r.stderr.contains("symbolic links"), "{}", r.stderr);
    }
}

/// A checkpoint that does not parse, device or DRA alike: `show` refuses it
/// as bad input (2), `verify` fails it (1, the kubelet cannot read it
/// either). The DRA checkpoint used to exit 2 for `verify` too.
#[tokio::test]
async fn an_unparsable_checkpoint_exits_the_same_for_the_device_and_the_dra_file() {
    let sb = Sandbox::new();
    let device = sb.join("kubelet_internal_checkpoint");
    std::fs::write(&device, "{not json").unwrap();
    let dra = sb.join("dra_manager_state");
    std::fs::write(&dra, "{not json").unwrap();
    for (file, extra) in [(&device, None), (&dra, None), (&dra, Some("--dra"))] {
        for (cmd, code) in [("show", 2), ("verify", 1)] {
            let mut args = vec!["checkpoint", cmd, file.to_str().unwrap()];
            args.extend(extra);
            let r = dpctl(&args).await;
            r.expect_code(code);
            let said = format!("{}{}", r.stdout, r.stderr);
            assert!(said.contains("not a") || said.contains("parse"), "{args:?}: {said}");
        }
    }
    let r = dpctl(&["checkpoint", "verify", "--dra", dra.to_str().unwrap(), "-o", "json"]).await;
    let v = r.expect_code(1).json();
    assert_eq!(v["ok"], false, "{v}");
    assert!(v["problems"][0].as_str().unwrap().contains("does not parse"), "{v}");
}

#[tokio::test]
async fn row_4_the_peer_answered_with_an_error() {
    let sb = Sandbox::new();
    let path = sb.join("e.sock");
    let behaviour = Behaviour {
        allocate_error: Some(tonic::Status::new(tonic::Code::Internal, "out of GPUs")),
        ..Default::default()
    };
    let _stop = FakePlugin::new(vec![device("d0", "Healthy", None)], behaviour).serve(&path).await;
    let r = dpctl(&["plugin", "call", "allocate", "--socket", path.to_str().unwrap(), "--devices", "d0"]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("out of GPUs"), "{}", r.stderr);
}

#[tokio::test]
async fn row_5_a_deadline_passed() {
    let sb = Sandbox::new();
    let path = sb.join("t.sock");
    let behaviour = Behaviour { allocate_delay: Some(std::time::Duration::from_secs(5)), ..Default::default() };
    let _stop = FakePlugin::new(vec![device("d0", "Healthy", None)], behaviour).serve(&path).await;
    let socket = path.to_str().unwrap();
    let r = dpctl(&["plugin", "call", "allocate", "--socket", socket, "--devices", "d0", "--timeout", "200ms"]).await;
    r.expect_code(5);
}
