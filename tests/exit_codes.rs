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
