//! `kubelet-sim --api-objects` against another local user who opens 1,000
//! idle connections to its API server's port (1,019 of them under a
//! 1,024-fd limit used to lock root out of the control socket and
//! kubelet.sock while the sim burned CPU on EMFILE). The sim runs with a
//! 1,024 open-file limit; the connections come from a process running as
//! uid/gid 65534 (`setpriv`). Thresholds: while they are held, the control
//! socket answers Status within 100 ms (the slowest of 20 calls), a GET on
//! the API server from its kubeconfig within 100 ms, and the sim uses under
//! half a CPU-second in 5 s (no busy loop).
//!
//!     cargo bench --bench sim_api_idle   # as root (setpriv changes uid)

#[path = "sim_common.rs"]
mod common;

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use common::{Child, Stderr, tempdir, verdict};
use dpctl::kubelet_sim::control::{self, Request};

/// Opens N connections to HOST:PORT, says how many, and holds them until stdin closes.
const HOLDER: &str = r#"
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held = []
for _ in range(n):
    try:
        held.append(socket.create_connection((host, port), timeout=5))
    except OSError as e:
        print("connect failed:", e, flush=True)
        break
print("open", len(held), flush=True)
sys.stdin.read()
"#;

/// CPU seconds (user + system) the process has used.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = after.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the state.
    let ticks = f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0);
    ticks as f64 / 100.0
}

async fn slowest_status(dir: &std::path::Path, n: usize) -> (Duration, usize) {
    let (mut worst, mut failed) = (Duration::ZERO, 0);
    for _ in 0..n {
        let t = Instant::now();
        if !matches!(control::call(dir, &Request::Status, Duration::from_secs(5)).await, Ok(Ok(_))) {
            failed += 1;
        }
        worst = worst.max(t.elapsed());
    }
    (worst, failed)
}

async fn run() -> bool {
    let tmp = tempdir("dsa");
    let root = tmp.path().to_path_buf();
    let (dir, registry) = (root.join("device-plugins"), root.join("plugins_registry"));
    std::fs::create_dir_all(&registry).unwrap();
    let objects = root.join("objects.yaml");
    std::fs::write(&objects, "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n").unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dpctl"));
    cmd.args(["kubelet-sim", "--dir", dir.to_str().unwrap(), "--registry-dir", registry.to_str().unwrap()])
        .args(["--api-objects", objects.to_str().unwrap(), "-o", "json"])
        .env("NO_COLOR", "1");
    // SAFETY: setrlimit in the child before exec touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: 1024, rlim_max: 1024 };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
        });
    }
    let mut sim = Child::spawn(cmd, Stderr::Inherit);
    sim.event_within("started", Duration::from_secs(20)).await;
    let pid = sim.id().expect("the sim runs");
    let kubeconfig = root.join("kubeconfig");
    let api =
        dpctl::apiserver::client::Client::from_kubeconfig(&kubeconfig, "kubeconfig").expect("the sim's kubeconfig");
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    let server = text.lines().find_map(|l| l.trim().strip_prefix("server: ")).expect("server:").trim().to_string();
    let (host, port) = server.trim_start_matches("http://").rsplit_once(':').expect("host:port");
    let (before, _) = slowest_status(&dir, 20).await;
    println!("control socket, nothing held: slowest of 20 Status calls {:.2} ms", before.as_secs_f64() * 1000.0);
    // Root's own bench process has a high limit; the holder runs as nobody.
    let mut holder = std::process::Command::new("setpriv");
    holder.args(["--reuid", "65534", "--regid", "65534", "--clear-groups", "/usr/bin/python3", "-c", HOLDER]);
    holder.args([host, port, "1000"]).stdin(std::process::Stdio::piped());
    let mut holder = Child::spawn(holder, Stderr::Inherit).patience(Duration::from_secs(60));
    let opened = holder.line().await.unwrap_or_default();
    println!("uid 65534: {opened}");
    let cpu0 = cpu_s(pid);
    let t0 = Instant::now();
    let (worst, failed) = slowest_status(&dir, 20).await;
    let t = Instant::now();
    let got = api.request("GET", "/api/v1/nodes/node-1", None).await;
    let get = t.elapsed();
    tokio::time::sleep(Duration::from_secs(5).saturating_sub(t0.elapsed())).await;
    let cpu = cpu_s(pid) - cpu0;
    let (rss, _) = sim.rss_kib();
    println!(
        "held: slowest of 20 Status calls {:.2} ms ({failed} failed); API GET {:.2} ms ({}); sim CPU {cpu:.2} s in {:.1} s; RSS {:.1} MiB",
        worst.as_secs_f64() * 1000.0,
        get.as_secs_f64() * 1000.0,
        if got.is_ok() { "answered".to_string() } else { format!("{:?}", got.as_ref().err()) },
        t0.elapsed().as_secs_f64(),
        rss as f64 / 1024.0
    );
    holder.kill().await;
    sim.stop().await;
    verdict("1,000 connections held by uid 65534", opened.trim() == "open 1000")
        & verdict("control socket answers within 100 ms", failed == 0 && worst < Duration::from_millis(100))
        & verdict("API server answers its kubeconfig within 100 ms", got.is_ok() && get < Duration::from_millis(100))
        & verdict("under 0.5 CPU-s in 5 s (no busy loop)", cpu < 0.5)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let ok = rt.block_on(run());
    std::process::exit(if ok { 0 } else { 1 });
}
