//! Terminals and pipes, as a user sees them: completions that offer values
//! instead of file names, bench's figures when nothing succeeded, and
//! counts that read as English.

use dpctl::mock_plugin::{ErrorSpec, ResourceConfig, Rpc, RpcFault, RpcSelector};

use crate::support::{Sandbox, dpctl, unregistered_mock};

const GPU: &str = "example.com/gpu";

/// In bash's script, what each subcommand's `flag)` case completes with.
fn bash_cases(script: &str, flag: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut command = String::new();
    let mut lines = script.lines();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t.starts_with("dpctl__") && t.ends_with(')') {
            command = t.trim_end_matches(')').to_string();
        } else if t == format!("{flag})") {
            out.push((command.clone(), lines.next().unwrap_or_default().trim().to_string()));
        }
    }
    out
}

/// Every `--kubelet-version`, mock-plugin's `--preferred` and `--health`
/// offers its values in every subcommand, never the files in the directory.
#[tokio::test]
async fn completions_offer_values_wherever_a_flag_takes_a_fixed_set() {
    let r = dpctl(&["completions", "bash"]).await;
    r.expect_code(0);
    for (flag, value) in [("--kubelet-version", "1.37"), ("--preferred", "spread"), ("--health", "unhealthy")] {
        let cases = bash_cases(&r.stdout, flag);
        assert!(!cases.is_empty(), "no {flag} in the bash script");
        for (command, completes) in cases {
            assert!(!completes.contains("compgen -f"), "{command} {flag} offers file names: {completes}");
            assert!(completes.contains(value), "{command} {flag} does not offer {value}: {completes}");
        }
    }
    // scenario's list still takes the release after the newest (played as master).
    let sb = Sandbox::new();
    let r = dpctl(&["scenario", "run", sb.path().to_str().unwrap(), "--kubelet-version", "1.99"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("1.99"), "{}", r.stderr);
}

/// A plugin that refuses every call: no latency figures (0 would read as
/// fast), and a ratio against it says there is nothing to divide by.
#[tokio::test]
async fn bench_shows_no_latency_and_no_ratio_over_zero_successes() {
    let (sa, sb) = (Sandbox::new(), Sandbox::new());
    let mut broken = ResourceConfig::new(GPU, 2);
    broken.faults.rpc.push(RpcFault {
        rpc: RpcSelector::One(Rpc::GetDevicePluginOptions),
        error: Some(ErrorSpec { code: tonic::Code::Unavailable, message: "gone".into() }),
        latency: None,
        after: 0,
    });
    let (_ha, a) = unregistered_mock(&sa, broken).await;
    let (_hb, b) = unregistered_mock(&sb, ResourceConfig::new(GPU, 2)).await;
    let r = dpctl(&["bench", "options", "--socket", &a, "--total", "5", "--warmup", "0s"]).await;
    r.expect_code(0);
    let row: Vec<&str> = r.stdout.lines().find(|l| l.starts_with(a.as_str())).unwrap().split_whitespace().collect();
    // PLUGIN SENT OK ERRORS VIOLATIONS OK/S P50 P90 P99 P99.9 MAX CPU/CALL
    assert_eq!(&row[1..5], ["5", "0", "5", "0"], "{}", r.stdout);
    assert_eq!(&row[6..11], ["-", "-", "-", "-", "-"], "{}", r.stdout);
    let r = dpctl(&["bench", "options", "--socket", &a, "--compare", &b, "--total", "4", "--warmup", "0s"]).await;
    r.expect_code(0);
    let ratio = r.stdout.lines().find(|l| l.starts_with("ratio ")).expect("a ratio line");
    assert_eq!(ratio, format!("ratio {b} / {a}: throughput -  p50 -  p99 - (no successful call on {a})"));
    let j =
        dpctl(&["bench", "options", "--socket", &a, "--compare", &b, "--total", "4", "--warmup", "0s", "-o", "json"])
            .await
            .expect_code(0)
            .json();
    assert_eq!(j["ratio"]["throughput"], serde_json::Value::Null, "{}", j["ratio"]);
}

/// Counts read as English: one device, one change, one response.
#[tokio::test]
async fn counts_of_one_are_singular() {
    let sb = Sandbox::new();
    let (_h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 1)).await;
    let r = dpctl(&["plugin", "check", "--socket", &sock, "--stream-window", "200ms"]).await;
    r.expect_code(0);
    assert!(!r.stdout.contains("(s)"), "{}", r.stdout);
    assert!(r.stdout.contains("1 device,") || r.stdout.contains("1 device "), "{}", r.stdout);
}
