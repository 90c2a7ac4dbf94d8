//! The smoke corpus (docs/smoke-corpus.md): every bug class `smoke`,
//! `plugin check` and `dra smoke` must catch, read from the page's tables and
//! run as a user runs it. Each row is a test: the named step fails with its
//! rule and every piece of evidence the row lists (exit 1), on kubelet-sim
//! and, for device plugins, on the referee of 1.37 (the kubelet's own code).
//! Then the correct plugins: the same verdict run after run (the default
//! mock 10 times), and the upstream sample device plugin and DRA test
//! driver built by `conformance/build.sh upstream` pass.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use dpctl::check::Case;

use crate::support::{Run, dpctl_bin, dpctl_command, run_bounded};

/// One smoke run, bounded (a run with a 2 s restart deadline takes seconds).
const RUN: Duration = Duration::from_secs(120);

/// Which suite a row runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Suite {
    /// `dpctl smoke` (§1).
    Smoke,
    /// `dpctl dra smoke` (§2).
    Dra,
}

/// One row of a corpus table.
#[derive(Debug, Clone)]
struct Row {
    class: String,
    /// The plugin cell's words (`mock-plugin --same-device`), or `None` when pending.
    plugin: Option<Vec<String>>,
    flags: Vec<String>,
    step: String,
    evidence: Vec<String>,
}

/// The texts between backticks in `cell`.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// The rows of the table in section `## <n>.` of docs/smoke-corpus.md.
fn rows(section: u8) -> Vec<Row> {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/smoke-corpus.md"))
        .expect("docs/smoke-corpus.md");
    let start = page.find(&format!("\n## {section}. ")).unwrap_or_else(|| panic!("no section {section}"));
    let body = &page[start + 1..];
    let body = &body[..body[3..].find("\n## ").map_or(body.len(), |i| i + 3)];
    let mut out = Vec::new();
    for line in body.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        if cells[0] == "bug class" {
            continue;
        }
        assert_eq!(cells.len(), 7, "a corpus row has 7 cells: {line}");
        let plugin = (!cells[1].starts_with("pending:"))
            .then(|| backticked(cells[1]).join(" ").split_whitespace().map(str::to_string).collect());
        out.push(Row {
            class: cells[0].to_string(),
            plugin,
            flags: backticked(cells[2]).join(" ").split_whitespace().map(str::to_string).collect(),
            step: backticked(cells[3]).join(""),
            evidence: backticked(cells[5]),
        });
    }
    assert!(!out.is_empty(), "section {section} has rows");
    out
}

/// The row of `class` (the first cell), from §1 or §2.
fn row(class: &str) -> (Suite, Row) {
    for (section, suite) in [(1, Suite::Smoke), (2, Suite::Dra)] {
        if let Some(r) = rows(section).into_iter().find(|r| r.class == class) {
            return (suite, r);
        }
    }
    panic!("no corpus row {class:?} in docs/smoke-corpus.md")
}

/// The whole command a row runs: `dpctl smoke|dra smoke -o json FLAGS -- PLUGIN`.
fn command(suite: Suite, row: &Row, engine: Option<&Path>) -> Vec<String> {
    let words = row.plugin.clone().expect("a row that is not pending");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let resolve = |w: &String| {
        if w.starts_with("tests/") { repo.join(w).display().to_string() } else { w.clone() }
    };
    let has = |flag: &str| row.flags.iter().any(|f| f == flag);
    let mut args: Vec<String> = Vec::new();
    match suite {
        Suite::Smoke => {
            args.extend(["smoke", "-o", "json"].map(String::from));
            for (flag, value) in [("--stream-window", "300ms"), ("--restart-deadline", "2s")] {
                if !has(flag) {
                    args.extend([flag.to_string(), value.to_string()]);
                }
            }
            if let Some(dir) = engine {
                args.extend(["--engine".into(), format!("referee:{}", dir.display())]);
                args.extend(["--kubelet-version".into(), "1.37".into()]);
            }
        }
        Suite::Dra => {
            args.extend(
                ["dra", "smoke", "-o", "json", "--slice-timeout", "300ms", "--skip", "long-socket-path"]
                    .map(String::from),
            );
        }
    }
    args.extend(row.flags.iter().cloned());
    args.push("--".into());
    args.push(dpctl_bin().into());
    match (suite, words.first().map(String::as_str)) {
        (Suite::Smoke, Some("mock-plugin")) => {
            args.extend(["mock-plugin", "--dir", "{dir}"].map(String::from));
            if !words.iter().any(|w| w == "--config") {
                args.extend(["--resource", "example.com/gpu"].map(String::from));
            }
        }
        (Suite::Dra, Some("dra")) if words.get(1).map(String::as_str) == Some("mock") => {
            args.extend(
                ["dra", "mock", "gpu.example.com", "--dir", "{dir}", "--cdi-dir", "{cdi_dir}"].map(String::from),
            );
        }
        _ => panic!("{}: the plugin cell names neither mock-plugin nor dra mock: {words:?}", row.class),
    }
    let skip = if suite == Suite::Dra { 2 } else { 1 };
    args.extend(words.iter().skip(skip).map(resolve));
    args
}

async fn run(args: &[String]) -> Run {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = dpctl_command();
    cmd.args(&args);
    run_bounded(cmd, &args, RUN).await
}

fn step<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|x| x["name"] == name))
        .unwrap_or_else(|| panic!("no step {name} in {report:#}"))
}

/// The rule a step of `suite` enforces, as the library names it.
fn rule_of(suite: Suite, name: &str) -> String {
    let rule = match suite {
        Suite::Smoke => dpctl::check::CheckId::from_name(name)
            .map(|c| c.rule())
            .or_else(|| dpctl::smoke::StepId::from_name(name).map(|s| s.rule())),
        Suite::Dra => dpctl::smoke::dra::StepId::from_name(name).map(|s| s.rule()),
    };
    rule.unwrap_or_else(|| panic!("{name} is no step of {suite:?}")).to_string()
}

/// Runs the row and asserts its FAIL row: the step failed, with its rule and every piece of evidence.
async fn caught(class: &str, engine: Option<&Path>) -> Value {
    let (suite, row) = row(class);
    let args = command(suite, &row, engine);
    let r = run(&args).await;
    assert_eq!(r.code, 1, "{class}: {args:?}\n{}\n{}", r.stdout, r.stderr);
    let report = r.json();
    let s = step(&report, &row.step);
    assert_eq!(s["outcome"], "fail", "{class}: {s:#}");
    assert_eq!(s["rule"], rule_of(suite, &row.step), "{class}: {s:#}");
    let evidence = s["evidence"].as_str().unwrap_or_default();
    for needle in &row.evidence {
        assert!(evidence.contains(needle.as_str()), "{class}: evidence lacks {needle:?}: {evidence}");
    }
    report
}

/// A row on kubelet-sim and (device plugins) on the referee of 1.37, both at
/// once: each run is mostly waiting on its kubelet's deadlines.
async fn corpus_row(class: &str) {
    if row(class).0 == Suite::Smoke
        && !class.contains("(sim only")
        && let Some(dir) = crate::support::go_built::referee_dir_or_skip("corpus", "1.37")
    {
        let (_, report) = tokio::join!(caught(class, None), caught(class, Some(&dir)));
        assert_eq!(report["engine"].as_str().map(|e| e.starts_with("referee")), Some(true), "{report:#}");
    } else {
        caught(class, None).await;
    }
}

macro_rules! corpus {
    ($($name:ident: $class:literal,)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                corpus_row($class).await;
            }
        )*
        /// Every row of the page is a test above, and every test a row.
        const TESTED: &[&str] = &[$($class),*];
    };
}

corpus! {
    same_device_for_every_request: "Allocate answers the same device for every request",
    bad_health_behind_an_empty_first_message: "A bad health value hidden behind an empty first message (vacuous check)",
    bad_health_value: "A health string other than `Healthy`/`Unhealthy`",
    invalid_resource_name: "An invalid resource name",
    unknown_api_version: "An API version the kubelet does not speak",
    options_fail_inside_register: "GetDevicePluginOptions fails inside Register",
    register_before_serving: "Register before the socket is served",
    list_and_watch_ends: "ListAndWatch ends",
    allocate_fails: "Allocate fails",
    preferred_allocation_fails: "GetPreferredAllocation fails",
    slow_pre_start: "PreStartContainer slower than its deadline",
    no_registration_after_a_kubelet_restart: "No registration after a kubelet restart",
    oversize_list: "A ListAndWatch message over 4 MiB",
    register_once_and_give_up: "Register once and give up (sim only: the referee's device manager creates kubelet.sock at once, so smoke refuses `--late-kubelet-socket` on it)",
    stale_stream_after_a_kubelet_restart: "A stale stream after a kubelet restart",
    crash_after_a_kubelet_restart: "A crash some seconds after a kubelet restart",
    rescan_loop_that_stops: "A rescan loop that stops",
    hang_on_sigterm: "A hang on SIGTERM",
    ids_that_change_per_start: "Device IDs that change on every start",
    dra_same_device_for_every_claim: "The same device for every claim",
    dra_claim_left_out: "A claim left out of the answer",
    dra_not_idempotent: "Prepare of a prepared claim gives other devices",
    dra_unresolvable_cdi: "CDI IDs with no spec",
    dra_health_unserved: "Health advertised but not served",
    dra_slow_prepare: "Prepare slower than the deadline",
}

/// The page and the tests agree: every row that is not pending is a test,
/// and the pending rows are the lifecycle classes still to come.
#[test]
fn every_corpus_row_is_a_test() {
    let all: Vec<Row> = rows(1).into_iter().chain(rows(2)).collect();
    let runnable: Vec<&str> = all.iter().filter(|r| r.plugin.is_some()).map(|r| r.class.as_str()).collect();
    let mut tested = TESTED.to_vec();
    tested.sort_unstable();
    let mut listed = runnable.clone();
    listed.sort_unstable();
    assert_eq!(listed, tested, "docs/smoke-corpus.md rows and tests/corpus.rs tests differ");
    for r in all.iter().filter(|r| r.plugin.is_some()) {
        assert!(!r.step.is_empty() && !r.evidence.is_empty(), "{}: a row names its step and evidence", r.class);
    }
    let pending = all.iter().filter(|r| r.plugin.is_none()).count();
    assert_eq!(pending, 0, "pending rows");
}

/// The report's totals: `[passed, failed, skipped, errors]`.
fn totals(report: &Value) -> [u64; 4] {
    let t = &report["totals"];
    ["passed", "failed", "skipped", "errors"].map(|k| t[k].as_u64().unwrap_or_else(|| panic!("no totals.{k}: {t:#}")))
}

/// A run's verdict: each step's (name, outcome), and the totals.
type Verdict = (Vec<(String, String)>, [u64; 4]);

/// The same binary, the same verdict: the default mock 10 times, each run
/// with the same totals and every step's outcome the same (a flaky window
/// or a vacuous rule would show as a difference), and no failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_mock_gets_the_same_verdict_ten_times() {
    let window = ["--stream-window", "300ms", "--restart-deadline", "2s", "--settle", "1s"];
    let args: Vec<String> = ["smoke", "-o", "json"]
        .into_iter()
        .chain(window)
        .chain(["--"])
        .map(String::from)
        .chain([dpctl_bin().to_string()])
        .chain(["mock-plugin", "--dir", "{dir}", "--resource", "example.com/gpu"].map(String::from))
        .collect();
    let mut first: Option<Verdict> = None;
    for i in 0..10 {
        let r = run(&args).await;
        assert_eq!(r.code, 0, "run {i}: {}\n{}", r.stdout, r.stderr);
        let report = r.json();
        let outcomes: Vec<(String, String)> = report["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| (s["name"].as_str().unwrap().to_string(), s["outcome"].as_str().unwrap().to_string()))
            .collect();
        let seen = (outcomes, totals(&report));
        match &first {
            None => first = Some(seen),
            Some(f) => assert_eq!(&seen, f, "run {i} differs from run 0"),
        }
    }
    let (outcomes, t) = first.expect("ran");
    assert_eq!(t[1] + t[3], 0, "{outcomes:?}");
    // Nothing vacuous: a rule with nothing to judge is skipped, with its reason.
    let numa = outcomes.iter().find(|(n, _)| n == "numa-ids-valid").expect("numa-ids-valid");
    assert_eq!(numa.1, "skip", "the default mock reports no NUMA topology");
}

/// A plugin whose first ListAndWatch message is empty and whose later ones
/// list its devices: the snapshot rules judge the later ones too (and say
/// how many), never "nothing to check".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_first_message_is_not_a_vacuous_pass() {
    let args: Vec<String> = ["smoke", "-o", "json", "--stream-window", "300ms", "--restart-deadline", "2s", "--"]
        .into_iter()
        .map(String::from)
        .chain([dpctl_bin().to_string()])
        .chain(
            [
                "mock-plugin",
                "--dir",
                "{dir}",
                "--resource",
                "example.com/gpu",
                "--numa-nodes",
                "2",
                "--empty-first-message",
            ]
            .map(String::from),
        )
        .collect();
    let r = run(&args).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let report = r.json();
    for name in ["device-ids-valid", "health-values", "numa-ids-valid"] {
        let s = step(&report, name);
        assert_eq!(s["outcome"], "pass", "{s:#}");
        let ev = s["evidence"].as_str().unwrap();
        assert!(ev.contains("1 of 2 ListAndWatch messages in the window"), "{name}: {ev}");
    }
    assert!(step(&report, "numa-ids-valid")["evidence"].as_str().unwrap().contains("NUMA nodes 0-1"));
    assert_eq!(step(&report, "distinct-devices")["outcome"], "pass", "{report:#}");
}

/// The upstream sample device plugin (k8s.io/kubernetes
/// test/images/sample-device-plugin, built from the module proxy): it dials
/// the kubelet's standard path, so it runs `--isolate`, and it registers
/// again 10 s after a kubelet restart (its `Watch` polls every 10 s), so it
/// gets a restart deadline it meets. It passes on the sim and on the 1.37
/// referee, with distinct mounts for distinct devices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_sample_device_plugin_passes_smoke() {
    let Some(bin) = crate::support::go_built::upstream_or_skip("corpus", "sample-device-plugin") else { return };
    if unsafe { libc::geteuid() } != 0 {
        crate::support::go_built::skip("corpus", "the sample device plugin needs --isolate, which needs root here");
        return;
    }
    let referee = crate::support::go_built::referee_dir_or_skip("corpus", "1.37");
    let engines: Vec<Option<&Path>> = [None].into_iter().chain(referee.as_deref().map(Some)).collect();
    for engine in engines {
        let mut args: Vec<String> =
            ["smoke", "-o", "json", "--isolate", "--stream-window", "300ms", "--restart-deadline", "30s"]
                .map(String::from)
                .to_vec();
        if let Some(dir) = engine {
            args.extend([
                "--engine".into(),
                format!("referee:{}", dir.display()),
                "--kubelet-version".into(),
                "1.37".into(),
            ]);
        }
        args.extend(["--".to_string(), bin.display().to_string()]);
        let r = run(&args).await;
        assert_eq!(r.code, 0, "{engine:?}: {}\n{}", r.stdout, r.stderr);
        let report = r.json();
        assert_eq!(report["resource"], "example.com/resource", "{report:#}");
        let distinct = step(&report, "distinct-devices");
        assert_eq!(distinct["outcome"], "pass", "{distinct:#}");
        assert!(distinct["evidence"].as_str().unwrap().contains("mount /tmp/Dev-"), "{distinct:#}");
        assert_eq!(step(&report, "numa-ids-valid")["outcome"], "skip", "it reports no topology");
    }
}

/// The upstream DRA test driver (k8s.io/kubernetes test/e2e/dra/test-driver,
/// built from the module proxy) on the kubeletplugin helper: it passes
/// `dra smoke` on every release the sim plays DRA for (one range, one run
/// each, one report), its parallel claims each on their own device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_dra_test_driver_passes_dra_smoke_on_1_34_to_1_37() {
    let Some(bin) = crate::support::go_built::upstream_or_skip("corpus", "dra-test-driver") else { return };
    // The driver creates only the parent of its socket directory (a DaemonSet's hostPath makes the rest).
    let driver = format!(
        "mkdir -p {{plugin_dir}}/test-driver.cdi.k8s.io && exec {} kubelet-plugin --kubeconfig {{kubeconfig}} \
         --node-name {{node}} --plugin-registration-path {{registry_dir}} --datadir {{plugin_dir}} --cdi-dir {{cdi_dir}}",
        bin.display()
    );
    let args: Vec<String> =
        ["dra", "smoke", "-o", "json", "--kubelet-version", "1.34-1.37", "--slice-timeout", "10s", "--"]
            .into_iter()
            .map(String::from)
            .chain(["sh".to_string(), "-c".to_string(), driver])
            .collect();
    let r = run(&args).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let report = r.json();
    assert_eq!(report["passed"], serde_json::json!(["1.34", "1.35", "1.36", "1.37"]), "{report:#}");
    for run in report["runs"].as_array().expect("runs") {
        assert_eq!(run["resource"], "test-driver.cdi.k8s.io", "{run:#}");
        for name in ["parallel-pods", "distinct-devices"] {
            assert_eq!(step(run, name)["outcome"], "pass", "{run:#}");
        }
    }
}

/// `--kubelet-version 1.36..1.37` (and `1.36-1.37`) runs both releases,
/// never 1.36 alone: two runs in one report, `smoke` and `dra smoke` alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_range_runs_every_release_in_it() {
    let skip = "kubelet-restart,plugin-restart,health-recovery,node-reboot,parallel-calls";
    for range in ["1.36..1.37", "1.36-1.37"] {
        let args: Vec<String> =
            ["smoke", "-o", "json", "--kubelet-version", range, "--skip", skip, "--stream-window", "300ms", "--"]
                .into_iter()
                .map(String::from)
                .chain([dpctl_bin().to_string()])
                .chain(["mock-plugin", "--dir", "{dir}", "--resource", "example.com/gpu"].map(String::from))
                .collect();
        let r = run(&args).await;
        assert_eq!(r.code, 0, "{range}: {}\n{}", r.stdout, r.stderr);
        assert_eq!(r.json()["passed"], serde_json::json!(["1.36", "1.37"]), "{range}");
    }
    let args: Vec<String> =
        ["dra", "smoke", "-o", "json", "--kubelet-version", "1.36-1.37", "--slice-timeout", "300ms"]
            .into_iter()
            .chain(["--skip", "long-socket-path,node-reboot,kubelet-restart", "--"])
            .map(String::from)
            .chain([dpctl_bin().to_string()])
            .chain(["dra", "mock", "gpu.example.com", "--dir", "{dir}", "--cdi-dir", "{cdi_dir}"].map(String::from))
            .collect();
    let r = run(&args).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let report = r.json();
    assert_eq!(report["passed"], serde_json::json!(["1.36", "1.37"]), "{report:#}");
    assert_eq!(report["runs"].as_array().map(Vec::len), Some(2));
}

/// `dra smoke`'s parallel-pods never hands one device to two claims at
/// once: a driver that publishes 2 devices gets 2 pods (not --parallel 3),
/// each claim on its own device, and says so; distinct-devices judges the
/// answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_pods_give_each_claim_its_own_device() {
    let args: Vec<String> = ["dra", "smoke", "-o", "json", "--slice-timeout", "10s", "--parallel", "3"]
        .into_iter()
        .chain(["--skip", "long-socket-path", "--"])
        .map(String::from)
        .chain([dpctl_bin().to_string()])
        .chain(
            ["dra", "mock", "gpu.example.com", "--dir", "{dir}", "--cdi-dir", "{cdi_dir}", "--devices", "2"]
                .map(String::from),
        )
        .chain(["--kubeconfig", "{kubeconfig}", "--node-name", "{node}"].map(String::from))
        .collect();
    let r = run(&args).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let report = r.json();
    let parallel = step(&report, "parallel-pods");
    assert_eq!(parallel["outcome"], "pass", "{parallel:#}");
    let ev = parallel["evidence"].as_str().unwrap();
    assert!(ev.contains("2 pods, not --parallel 3: the driver publishes 2 devices, one per claim"), "{ev}");
    assert!(ev.contains("pool-0/dev-0") && ev.contains("pool-0/dev-1"), "{ev}");
    let distinct = step(&report, "distinct-devices");
    assert_eq!(distinct["outcome"], "pass", "{distinct:#}");
    assert!(distinct["evidence"].as_str().unwrap().contains("2 claims, 2 distinct CDI IDs"), "{distinct:#}");
}
