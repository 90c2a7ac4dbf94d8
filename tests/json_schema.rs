//! docs/json.md is the contract for programs that read `-o json`: these
//! tests run the commands and check their keys against the page, and check
//! the one vocabulary (snake_case, no dots, durations in `_ms`, `device_ids`).

use std::collections::BTreeSet;

use dpctl::mock_plugin::{ErrorSpec, MockConfig, MockPlugin, ResourceConfig, Rpc, RpcFault, RpcSelector};
use serde_json::Value;

use crate::support::{Sandbox, dpctl};

fn page() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json.md")).expect("docs/json.md")
}

/// The keys the page lists after `label` (up to the next full stop), in backquotes.
fn documented(label: &str) -> BTreeSet<String> {
    let page = page();
    let at = page.find(label).unwrap_or_else(|| panic!("docs/json.md has no {label:?}"));
    let rest = &page[at + label.len()..];
    let end = [rest.find(".\n"), rest.find(". ")].into_iter().flatten().min().unwrap_or(rest.len());
    // Values and nested keys in parentheses are not this object's keys.
    let mut flat = String::new();
    let mut depth = 0;
    for c in rest[..end].chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => flat.push(c),
            _ => {}
        }
    }
    flat.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().cloned().collect()
}

/// Every key in `v`, at any depth, follows §1: snake_case, no dot, no
/// `_s`/`_us` duration, no `devices_ids`.
fn check_vocabulary(v: &Value, path: &str) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let ok = k.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    && !k.ends_with("_s")
                    && !k.ends_with("_us")
                    && k != "devices_ids";
                // Maps keyed by data (resource names, error codes, rules) are not vocabulary.
                let data =
                    ["errors_by_code", "violations_by_rule", "envs", "annotations"].iter().any(|d| path.ends_with(d));
                assert!(ok || data, "{path}.{k} breaks docs/json.md §1");
                check_vocabulary(x, &format!("{path}.{k}"));
            }
        }
        Value::Array(a) => a.iter().for_each(|x| check_vocabulary(x, path)),
        _ => {}
    }
}

/// Doctor on a node with nothing on it: the report's and the findings'
/// keys are the documented ones, and every code is in the page's table;
/// every code the source can emit is in the table too.
#[tokio::test]
async fn doctor_json_is_as_documented() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.join("var/lib/kubelet/device-plugins")).unwrap();
    drop(std::os::unix::net::UnixListener::bind(sb.join("var/lib/kubelet/device-plugins/stale.sock")).unwrap());
    let r = dpctl(&["doctor", "--root", sb.path().to_str().unwrap(), "--timeout", "200ms", "-o", "json"]).await;
    let v = r.json();
    check_vocabulary(&v, "doctor");
    assert_eq!(keys(&v), documented("Top-level keys: "));
    let page = page();
    for f in v["findings"].as_array().unwrap() {
        assert_eq!(keys(f), documented("Each finding: "), "{f}");
        let code = f["code"].as_str().unwrap();
        assert!(!code.is_empty() && page.contains(&format!("`{code}`")), "code {code} is not in docs/json.md");
    }
    assert!(v["findings"].as_array().unwrap().iter().any(|f| f["code"] == "stale-socket"), "{v:#}");
    // Every code in the source is documented.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib/doctor");
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let src = std::fs::read_to_string(e.path()).unwrap();
        for (i, _) in src.match_indices("(\"") {
            let rest = &src[i + 2..];
            let Some((check, tail)) = rest.split_once("\", \"") else { continue };
            let Some((code, _)) = tail.split_once("\")") else { continue };
            if page.contains(&format!("| {check} |")) {
                assert!(
                    page.contains(&format!("`{code}`")),
                    "{}: code {code} is not in docs/json.md",
                    e.path().display()
                );
            }
        }
    }
}

/// `explain -o json`: the documented keys, for a match and for none.
#[tokio::test]
async fn explain_json_is_as_documented() {
    let r = dpctl(&[
        "explain",
        "-o",
        "json",
        "TopologyAffinityError: Resources cannot be allocated with Topology locality",
    ])
    .await;
    r.expect_code(0);
    let v = r.json();
    check_vocabulary(&v, "explain");
    assert_eq!(keys(&v), ["matches".to_string()].into());
    let m = &v["matches"][0];
    assert_eq!(m["code"], "topology-affinity");
    assert_eq!(keys(m), documented("Each match: "));
    // -o yaml: the same data.
    let y = dpctl(&[
        "explain",
        "-o",
        "yaml",
        "TopologyAffinityError: Resources cannot be allocated with Topology locality",
    ])
    .await;
    y.expect_code(0);
    let yv: Value = serde_norway::from_str(&y.stdout).expect("YAML");
    assert_eq!(yv, v);
    let none = dpctl(&["explain", "-o", "json", "nothing the kubelet says"]).await;
    none.expect_code(1);
    assert_eq!(none.json()["matches"], serde_json::json!([]));
}

/// `bench -o json` against a plugin whose every Allocate fails: the
/// documented keys, `p99_9`, durations in `_ms`, a null ratio is not
/// printed as 0; the table shows `-` for latencies nothing measured.
#[tokio::test]
async fn bench_json_is_as_documented_and_nothing_succeeded_shows_dashes() {
    let sb = Sandbox::new();
    let mut res = ResourceConfig::new("example.com/gpu", 2);
    res.faults.rpc = vec![RpcFault {
        rpc: RpcSelector::One(Rpc::Allocate),
        error: Some("unavailable: driver gone".parse::<ErrorSpec>().unwrap()),
        latency: None,
        after: 0,
    }];
    let cfg = MockConfig {
        dir: Some(sb.path().to_path_buf()),
        register: false,
        resources: vec![res],
        ..MockConfig::default()
    };
    let h = MockPlugin::start(cfg).await.expect("mock starts");
    let sock = h.socket(&h.resources()[0]).unwrap().to_str().unwrap().to_string();
    let base = ["bench", "allocate", "--socket", &sock, "--total", "5", "--concurrency", "1", "--warmup", "0s"];
    let r = dpctl(&[&base[..], &["-o", "json"]].concat()).await;
    r.expect_code(0);
    let v = r.json();
    check_vocabulary(&v, "bench");
    assert_eq!(keys(&v), documented("Top level: "));
    let t = &v["targets"][0];
    assert_eq!(keys(t), documented("Each target:\n"));
    assert_eq!(t["ok"], 0);
    assert!(t["latency_ms"].get("p99_9").is_some(), "{t:#}");
    let table = dpctl(&base).await;
    table.expect_code(0);
    let row = table.stdout.lines().find(|l| l.starts_with(&sock)).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[6..11], ["-", "-", "-", "-", "-"], "{row}");
    h.stop().await.unwrap();
}

/// `-v -o json`: every event on stderr has the keys docs/json.md §8 lists for its kind.
#[tokio::test]
async fn wire_events_are_as_documented() {
    let sb = Sandbox::new();
    let mut r = ResourceConfig::new("example.com/gpu", 2);
    r.faults.rpc.push(RpcFault {
        rpc: RpcSelector::One(Rpc::Allocate),
        error: Some(ErrorSpec { code: tonic::Code::NotFound, message: "none".into() }),
        latency: None,
        after: 0,
    });
    let cfg =
        MockConfig { dir: Some(sb.path().to_path_buf()), register: false, resources: vec![r], ..MockConfig::default() };
    let h = MockPlugin::start(cfg).await.expect("mock starts");
    let sock = h.socket(&h.resources()[0]).unwrap().to_str().unwrap().to_string();
    let mut events = Vec::new();
    for call in [&["options"][..], &["allocate", "--devices", "GPU-0"]] {
        let r = dpctl(&[&["plugin", "call"][..], call, &["--socket", &sock, "-o", "json", "-v"]].concat()).await;
        events.extend(r.stderr.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
    }
    let label = |kind: &str| match kind {
        "end" => "An end event: ".to_string(),
        k => format!("A {k} event: "),
    };
    let kinds: BTreeSet<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, BTreeSet::from(["call", "request", "headers", "response", "end"]));
    for e in &events {
        assert_eq!(keys(e), documented(&label(e["event"].as_str().unwrap())), "{e}");
        if let Some(m) = e.get("message") {
            assert_eq!(keys(m), documented("Each message: "), "{m}");
        }
        for h in e.get("headers").or(e.get("trailers")).and_then(Value::as_array).into_iter().flatten() {
            assert_eq!(keys(h), documented("Each header and trailer: "), "{h}");
        }
    }
}
