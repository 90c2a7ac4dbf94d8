//! Fuzzing without a nightly toolchain (the files come from users, so any
//! byte sequence must give an error, not a panic): the parsers that read
//! user files (mock-plugin TOML configs, Pod manifests in YAML and JSON,
//! durations) get thousands of mutated inputs, seeded so a failure
//! reproduces. They must return an error, never panic, and stay fast. The
//! `:authority` adapter's harness is `fuzz_header_blocks` in
//! `src/lib/transport/authority.rs`. `DPCTL_FUZZ_CASES` runs more.

use std::time::{Duration, Instant};

use dpctl::kubelet_sim::PodSpec;
use dpctl::mock_plugin::config::MockConfig;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn cases() -> usize {
    std::env::var("DPCTL_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
}

const TOKENS: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    "\"",
    "'",
    ":",
    "- ",
    "\n",
    "  ",
    "=",
    ",",
    "1e20",
    "-1",
    "\u{0}",
    "\u{feff}",
    "[[resource]]",
    "devices = ",
    "name = ",
    "every = ",
    "\"500ms\"",
    "18446744073709551616",
    "NaN",
    "&a",
    "*a",
    "!!binary",
    "---",
];

/// One mutation of `text`: a byte flip, a token inserted, a slice deleted or repeated.
fn mutate(rng: &mut StdRng, text: &str) -> String {
    let mut s: Vec<char> = text.chars().collect();
    for _ in 0..rng.random_range(1..5) {
        let at = rng.random_range(0..=s.len());
        match rng.random_range(0..4) {
            0 if at < s.len() => s[at] = char::from(rng.random_range(0x20u8..0x7f)),
            1 => {
                let t = TOKENS[rng.random_range(0..TOKENS.len())];
                s.splice(at..at, t.chars());
            }
            2 if at < s.len() => {
                let end = rng.random_range(at..=s.len().min(at + 20));
                s.drain(at..end);
            }
            _ if at < s.len() => {
                let end = rng.random_range(at..=s.len().min(at + 10));
                let piece: Vec<char> = s[at..end].to_vec();
                for _ in 0..rng.random_range(1..50) {
                    s.splice(at..at, piece.iter().copied());
                }
            }
            _ => {}
        }
    }
    s.into_iter().collect()
}

fn seeds(dir: &str, ext: &str) -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out: Vec<String> = std::fs::read_dir(&root)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == ext))
                .filter_map(|p| std::fs::read_to_string(p).ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn fuzz_mock_plugin_configs() {
    let mut corpus = seeds("examples", "toml");
    corpus.push("[[resource]]\nname = \"example.com/gpu\"\ndevices = 4\n".into());
    let mut rng = StdRng::seed_from_u64(8);
    for case in 0..cases() {
        let pick = rng.random_range(0..corpus.len());
        let text = mutate(&mut rng, &corpus[pick]);
        let started = Instant::now();
        if let Ok(cfg) = MockConfig::from_toml(&text) {
            let _ = cfg.check();
        }
        assert!(started.elapsed() < Duration::from_secs(2), "case {case} was slow:\n{text}");
    }
}

#[test]
fn fuzz_pod_manifests() {
    let mut corpus = seeds("examples", "yaml");
    corpus.push(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  initContainers:\n  - name: i\n    \
         restartPolicy: Always\n  containers:\n  - name: c\n    resources:\n      limits:\n        \
         example.com/gpu: 2\n"
            .into(),
    );
    corpus.push(
        r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns"},"spec":{"containers":[{"name":"c","resources":{"limits":{"example.com/gpu":"1"}}}]}}"#
            .into(),
    );
    let mut rng = StdRng::seed_from_u64(9);
    for case in 0..cases() {
        let pick = rng.random_range(0..corpus.len());
        let text = mutate(&mut rng, &corpus[pick]);
        let started = Instant::now();
        if let Ok(pod) = PodSpec::from_manifest(&text, "fuzz.yaml") {
            let _ = pod.validate();
        }
        assert!(started.elapsed() < Duration::from_secs(2), "case {case} was slow:\n{text}");
    }
}

#[test]
fn fuzz_durations() {
    let corpus = ["500ms", "10s", "2m", "1h 30m", "1.5", "365d", "0"];
    let mut rng = StdRng::seed_from_u64(10);
    for _ in 0..cases() {
        let pick = rng.random_range(0..corpus.len());
        let text = mutate(&mut rng, corpus[pick]);
        if let Ok(d) = dpctl::duration::parse(&text) {
            assert!(d <= dpctl::duration::MAX, "{text:?} gave {d:?}");
            // Whatever parses can be added to a clock.
            let _ = dpctl::duration::deadline(d);
        }
    }
}
