//! Soak (leaks and errors that only show over time): `dpctl kubelet-sim` and
//! `dpctl mock-plugin` as their
//! own processes (the release binary) for a while, with the mock's devices
//! flapping health at 100 Hz and pods admitted and deleted as fast as the
//! control socket allows. Reports both processes' RSS over time, the
//! admissions, deletions and health changes seen, and every error. Memory
//! must stay flat and errors at 0.
//!
//!     cargo bench --bench soak -- [--duration 10m] [--hz 100] [--sample 60s]

#[path = "sim_common.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{SimChild, tempdir, verdict};
use dpctl::kubelet_sim::PodSpec;
use dpctl::kubelet_sim::control::{self, Answer, Request};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

/// One line of the table: seconds, both RSS in MiB, and the counts so far.
fn print_row(at: Duration, (sim_kib, mock_kib): (u64, u64), admitted: u64, deleted: u64, errors: u64) {
    println!(
        "{:>8} {:>12.1} {:>12.1} {:>10} {:>10} {:>8}",
        at.as_secs(),
        sim_kib as f64 / 1024.0,
        mock_kib as f64 / 1024.0,
        admitted,
        deleted,
        errors
    );
}

async fn run() -> bool {
    let duration =
        arg("--duration").map_or(Duration::from_secs(60), |d| dpctl::duration::parse(&d).expect("--duration"));
    let hz: f64 = arg("--hz").and_then(|v| v.parse().ok()).unwrap_or(100.0);
    let sample = arg("--sample").map_or(Duration::from_secs(10), |d| dpctl::duration::parse(&d).expect("--sample"));
    let tmp = tempdir("dps");
    let dir = tmp.path().to_path_buf();
    let mut sim = SimChild::start(&dir, &[]).await;
    let period = format!("{}ms", (1000.0 / hz).round().max(1.0));
    let flap = format!("GPU-7:{period}");
    let mock_args = ["--dir", dir.to_str().unwrap(), "--resource", "example.com/gpu", "--devices", "8"];
    let mut mock = common::dpctl(&[&["mock-plugin"][..], &mock_args, &["--flap", &flap, "-q"]].concat());
    sim.event("snapshot", Duration::from_secs(30)).await;
    println!("soak: {} s, health flapping every {period}, sampling every {} s", duration.as_secs(), sample.as_secs());
    println!(
        "{:>8} {:>12} {:>12} {:>10} {:>10} {:>8}",
        "t (s)", "sim RSS MiB", "mock RSS MiB", "admitted", "deleted", "errors"
    );
    let t0 = Instant::now();
    let mut next_sample = Duration::ZERO;
    let (mut admitted, mut deleted, mut errors) = (0u64, 0u64, 0u64);
    let mut samples: Vec<(u64, u64)> = Vec::new();
    let mut i = 0u64;
    while t0.elapsed() < duration {
        if t0.elapsed() >= next_sample {
            let (s, m) = (sim.rss_kib().0, mock.rss_kib().0);
            samples.push((s, m));
            print_row(t0.elapsed(), (s, m), admitted, deleted, errors);
            next_sample += sample;
        }
        i += 1;
        let name = format!("soak-{i}");
        let pod = PodSpec::shorthand(&name, "default", &[("example.com/gpu".into(), 1)]);
        match control::call(&dir, &Request::Admit { pod }, Duration::from_secs(30)).await {
            Ok(Ok(Answer::Admit(o))) if o.admitted => admitted += 1,
            // GPU-7 may be unhealthy at that moment: a rejection is the kubelet's answer, not an error.
            Ok(Ok(Answer::Admit(_))) => {}
            other => {
                errors += 1;
                eprintln!("soak: admit {name}: {other:?}");
            }
        }
        match control::call(
            &dir,
            &Request::Delete { namespace: "default".into(), name: name.clone() },
            Duration::from_secs(30),
        )
        .await
        {
            Ok(Ok(_)) => deleted += 1,
            other => {
                errors += 1;
                eprintln!("soak: delete {name}: {other:?}");
            }
        }
    }
    let (s, m) = (sim.rss_kib().0, mock.rss_kib().0);
    samples.push((s, m));
    let alive = mock.running();
    print_row(t0.elapsed(), (s, m), admitted, deleted, errors);
    let status = control::call(&dir, &Request::Status, Duration::from_secs(10)).await;
    println!("soak: final sim status: {}", if status.is_ok() { "answered" } else { "NO ANSWER" });
    mock.stop().await;
    sim.stop().await;
    // Flat: the last sample at most 25% (and 8 MiB) over the one a tenth of the way in.
    let base = samples[samples.len() / 10];
    let last = samples[samples.len() - 1];
    let flat = |b: u64, l: u64| l <= b + (b / 4).max(8 * 1024);
    let ok_mem = flat(base.0, last.0) && flat(base.1, last.1);
    verdict("memory flat", ok_mem)
        & verdict("0 errors", errors == 0)
        & verdict("both processes alive to the end", alive)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let ok = rt.block_on(run());
    std::process::exit(if ok { 0 } else { 1 });
}
