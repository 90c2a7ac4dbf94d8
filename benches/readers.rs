//! dpctl's readers on hostile files, linear in the input (issue: the new
//! surfaces hardened like the old): `checkpoint show --dra` with one 4 MiB
//! CDI device ID, `checkpoint verify --dra` on a `dra_manager_state` of
//! about 16 and 62 MiB (the limit is 64), and `apiserver --objects` with a 55 MB file of
//! more objects than it serves. Each is the `dpctl` process, timed, with
//! its peak resident memory. Thresholds: the 4 MiB ID shown within 2 s; the
//! 62 MiB checkpoint read within 6x the time of the 16 MiB one (linear) and
//! under 1 GiB; the objects file refused within 5 s and under 300 MB.
//!
//!     cargo bench --bench readers

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn verdict(what: &str, ok: bool) -> bool {
    println!("{} {what}", if ok { "PASS" } else { "FAIL" });
    ok
}

/// The peak resident memory of process `pid` so far, in KiB (its `VmHWM`).
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs dpctl with `args`, output discarded: wall time, peak RSS in KiB
/// (read every 5 ms until it exits), exit code.
fn run(args: &[&str]) -> (Duration, u64, i32) {
    let start = Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dpctl"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("dpctl starts");
    let mut peak = 0;
    loop {
        peak = peak.max(peak_kib(child.id()).unwrap_or(0));
        if let Some(status) = child.try_wait().expect("wait") {
            return (start.elapsed(), peak, status.code().unwrap_or(-1));
        }
        assert!(start.elapsed() < Duration::from_secs(600), "dpctl {args:?} still running after 10 minutes");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A `dra_manager_state` holding `claims` as the kubelet writes it.
fn dra_state(path: &Path, claims: Vec<Value>) {
    let data = json!({"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1",
                      "ClaimInfoStateList": claims})
    .to_string();
    let sum = dpctl::dra::state::crc32_ieee(data.as_bytes());
    std::fs::write(path, json!({"Data": data, "Checksum": sum}).to_string()).expect("write");
}

fn claim(i: usize, cdi_id: &str) -> Value {
    json!({"ClaimUID": format!("uid-{i}"), "ClaimName": format!("claim-{i}"), "Namespace": "default",
           "PodUIDs": {format!("pod-{i}"): {}},
           "DriverState": {"gpu.example.com": {"Devices": [{"PoolName": "node-a", "DeviceName": format!("gpu-{i}"),
               "ShareID": null, "RequestNames": ["gpu"], "CDIDeviceIDs": [cdi_id]}]}}})
}

/// Claims filling about `bytes` of checkpoint.
fn claims_of(bytes: usize) -> Vec<Value> {
    let one = claim(0, "gpu.example.com/gpu=gpu-0").to_string().len() + 40;
    (0..bytes / one).map(|i| claim(i, &format!("gpu.example.com/gpu=gpu-{i}"))).collect()
}

fn main() {
    let dir = tempfile::Builder::new().prefix("dpctl-readers-bench").tempdir().expect("tempdir");
    let p = |n: &str| dir.path().join(n).to_str().expect("UTF-8").to_string();
    let mut ok = true;

    let huge_id = format!("gpu.example.com/gpu={}", "a".repeat(4 << 20));
    dra_state(Path::new(&p("huge_id")), vec![claim(0, &huge_id)]);
    let (t, rss, code) = run(&["checkpoint", "show", "--dra", &p("huge_id")]);
    println!(
        "checkpoint show --dra, one 4 MiB CDI ID: {:.2} s, peak RSS {} MiB, exit {code}",
        t.as_secs_f64(),
        rss / 1024
    );
    ok &= verdict("a 4 MiB CDI ID shown within 2 s", t < Duration::from_secs(2) && code == 0);

    dra_state(Path::new(&p("small")), claims_of(16 << 20));
    dra_state(Path::new(&p("large")), claims_of(58 << 20));
    let size = |n: &str| std::fs::metadata(p(n)).map(|m| m.len() as f64 / 1048576.0).unwrap_or(0.0);
    let (ts, rss_s, code_s) = run(&["checkpoint", "verify", "--dra", &p("small")]);
    let (tl, rss_l, code_l) = run(&["checkpoint", "verify", "--dra", &p("large")]);
    println!(
        "checkpoint verify --dra: {:.1} MiB {:.2} s {} MiB peak (exit {code_s}); {:.1} MiB {:.2} s {} MiB peak (exit {code_l})",
        size("small"),
        ts.as_secs_f64(),
        rss_s / 1024,
        size("large"),
        tl.as_secs_f64(),
        rss_l / 1024
    );
    ok &= verdict("the 62 MiB checkpoint read within 6x the 16 MiB one's time", tl < ts * 6 && code_l == 0);
    ok &= verdict("the 62 MiB checkpoint read under 1 GiB", rss_l < 1 << 20);

    let objects: Vec<Value> = (0..130_000)
        .map(|i| json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": {"name": format!("c{i}"), "namespace": "default", "labels": {"x": "y".repeat(200)}},
                        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}))
        .collect();
    std::fs::write(p("objects.json"), Value::from(objects).to_string()).expect("write");
    let (t, rss, code) = run(&["apiserver", "--dir", &p("api"), "--objects", &p("objects.json")]);
    println!(
        "apiserver --objects, {:.1} MB, 130,000 objects: refused in {:.2} s, peak RSS {} MiB, exit {code}",
        size("objects.json") * 1.048576,
        t.as_secs_f64(),
        rss / 1024
    );
    ok &= verdict(
        "the objects file refused within 5 s and under 300 MB",
        t < Duration::from_secs(5) && rss < 300 * 1024 && code == 2,
    );
    std::process::exit(i32::from(!ok));
}
