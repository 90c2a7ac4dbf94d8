//! The scenario corpus (`conformance/scenarios/*.toml`): every scenario runs
//! on kubelet-sim for each release it names and meets its expectations; run
//! twice on the sim it diffs empty (the observables are normalised and
//! deterministic); and, when the referees (the kubelet's own code, built by
//! `conformance/build.sh`) exist, every scenario runs on the referee of each
//! release and the diff against the sim is empty or declared.
//!
//! Without referees the referee tests print the suite's one `SKIPPED ...`
//! line and pass, except under `CI=true`, where they fail: CI must prove
//! conformance (as tests/support/interop.rs does for the Python peers).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use dpctl::kubelet_sim::KubeletVersion;
use dpctl::scenario::diff::{ScenarioDiff, Verdict, diff};
use dpctl::scenario::run::{RunConfig, ScenarioRun, plan, run};
use dpctl::smoke::engine::{EngineKind, REFEREE_PREFIX};

use crate::support::dpctl_bin;

/// Runs at once, per test: each run is mostly waiting on its kubelet (the
/// corpus at 1.37 one run at a time: 3% of a core on the sim, 7% on the
/// referee), but the runs' observation windows (the checkpoint's 1 s settle,
/// the plugin watcher's retries) are wall-clock: at 8 per test (16 with both
/// corpus tests at once) a loaded 2-core machine made them miss.
const PARALLEL: usize = 4;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/scenarios")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime")
}

/// Runs `jobs` (scenario, release, engine), `PARALLEL` at a time, in order of the input.
fn run_all(jobs: Vec<(dpctl::scenario::Scenario, KubeletVersion, EngineKind)>) -> Vec<ScenarioRun> {
    let rt = runtime();
    rt.block_on(async {
        let limit = Arc::new(tokio::sync::Semaphore::new(PARALLEL));
        let mut handles = Vec::new();
        for (s, v, engine) in jobs {
            let limit = Arc::clone(&limit);
            handles.push(tokio::spawn(async move {
                let _turn = limit.acquire_owned().await.expect("semaphore");
                let config = RunConfig { engine, version: v, helper: Some(dpctl_bin().into()) };
                let name = format!("{} {}", s.name, v.numbered());
                run(&s, &config).await.unwrap_or_else(|e| panic!("{name}: could not run: {e}"))
            }));
        }
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.expect("a run task"));
        }
        out
    })
}

/// A run of the corpus: the scenario, the release and what the engine showed.
type CorpusRun = (dpctl::scenario::Scenario, KubeletVersion, ScenarioRun);

/// Every scenario on the sim for each release it names, run once per process:
/// the sim test checks them and reruns the newest release of each; the
/// referee test diffs the referee against them (before, it ran them again).
fn sim_runs() -> &'static [CorpusRun] {
    static RUNS: OnceLock<Vec<CorpusRun>> = OnceLock::new();
    RUNS.get_or_init(|| {
        let plan = plan(&[corpus()], None).expect("the corpus loads");
        let jobs: Vec<_> = plan.runs.iter().map(|(s, v)| (s.clone(), *v, EngineKind::Sim)).collect();
        let runs = run_all(jobs.clone());
        jobs.into_iter().zip(runs).map(|((s, v, _), r)| (s, v, r)).collect()
    })
}

/// Every scenario, on the sim, for each release it names; then each
/// scenario's newest release once more: the two sim runs must not differ
/// but where the scenario declares a difference.
#[test]
fn every_scenario_meets_its_expectations_on_the_sim_and_the_sim_diffs_empty_against_itself() {
    let first = sim_runs();
    let scenarios: std::collections::BTreeSet<String> = first.iter().map(|(s, _, _)| s.name.clone()).collect();
    assert!(scenarios.len() >= 60, "the corpus has {} scenarios, fewer than 60", scenarios.len());
    let failures: Vec<String> = first
        .iter()
        .flat_map(|(_, _, r)| r.failures.iter().map(move |f| format!("{} {}: {f}", r.scenario, r.release)))
        .collect();
    assert!(failures.is_empty(), "scenarios failed on the sim:\n  {}", failures.join("\n  "));
    // The newest release of each scenario again, for the sim-vs-sim diff.
    let mut again = Vec::new();
    for name in &scenarios {
        let (s, v, _) = first.iter().rev().find(|(s, _, _)| &s.name == name).expect("a run");
        again.push((s.clone(), *v, EngineKind::Sim));
    }
    let reruns = run_all(again.clone());
    let mut differences = Vec::new();
    for ((s, v, _), rerun) in again.iter().zip(&reruns) {
        let (_, _, first) = first.iter().find(|(t, w, _)| t.name == s.name && w == v).expect("the first run");
        // Only what the scenario declares may differ: a declared difference in
        // when kubelet-sim writes its checkpoint shows between two sim runs too.
        let d = diff(s, first, rerun);
        differences.extend(
            d.entries
                .iter()
                .filter(|e| e.verdict == Verdict::Unexplained)
                .map(|e| format!("{} {} {}: {} vs {}", s.name, e.step, e.path, e.left, e.right)),
        );
    }
    assert!(differences.is_empty(), "the sim differs from itself (not deterministic):\n  {}", differences.join("\n  "));
}

/// The referee directory and the releases built in it, or why there are none.
/// A released release's referee (1.34-1.37) must be there; a pre-release's
/// (1.38: `conformance/build.sh` builds it only when named, so per-push CI
/// does not) is played when built, else skipped with one line, under CI too.
fn referees() -> Result<(PathBuf, Vec<KubeletVersion>), String> {
    let dir = std::env::var_os("DPCTL_REFEREE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/referee"));
    let built = |v: &KubeletVersion| dir.join(format!("{REFEREE_PREFIX}{v}")).is_file();
    let (absent, present): (Vec<_>, Vec<_>) = KubeletVersion::referee_releases().into_iter().partition(|v| !built(v));
    let (absent_pre, missing): (Vec<_>, Vec<_>) = absent.into_iter().partition(|v| v.pre_release().is_some());
    if missing.is_empty() {
        if !absent_pre.is_empty() {
            pre_release_skipped(&dir, &absent_pre);
        }
        return Ok((dir, present));
    }
    let go = std::process::Command::new("go").arg("version").output().is_ok_and(|o| o.status.success());
    let missing = missing.iter().map(|r| format!("{REFEREE_PREFIX}{r}")).collect::<Vec<_>>().join(", ");
    Err(if go {
        format!("no {missing} in {} (Go is installed: build them with conformance/build.sh)", dir.display())
    } else {
        format!(
            "no {missing} in {}, and no Go toolchain to build them (install Go, then conformance/build.sh)",
            dir.display()
        )
    })
}

/// Says once that the pre-release referees `absent` are not built, so their
/// runs are skipped: not a failure, under CI either (CI builds the released
/// referees only), and not a silent pass.
fn pre_release_skipped(dir: &Path, absent: &[KubeletVersion]) {
    static SAID: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    SAID.get_or_init(|| {
        use std::io::Write;
        let names: Vec<String> = absent.iter().map(|v| format!("{REFEREE_PREFIX}{}", v.label())).collect();
        let build: Vec<String> = absent.iter().map(ToString::to_string).collect();
        let line = format!(
            "SKIPPED the pre-release referee runs: no {} in {} (build it with conformance/build.sh {})\n",
            names.join(", "),
            dir.display(),
            build.join(" ")
        );
        // The process's stderr, not `eprintln!` (libtest captures that).
        let _ = std::io::stderr().write_all(line.as_bytes());
    });
}

/// The referees, or `None` after the suite's one SKIPPED line; under CI a failure.
fn referees_or_skip() -> Option<(PathBuf, Vec<KubeletVersion>)> {
    match referees() {
        Ok(r) => Some(r),
        Err(why) => {
            crate::support::go_built::skip("conformance", &why);
            None
        }
    }
}

/// Every scenario on the referee of each release it names (the release
/// table's referee releases, 1.34-1.38 with the pre-release 1.38): the diff
/// against the sim must be empty or declared in the scenario.
#[test]
fn every_scenario_diffs_empty_or_declared_against_the_referee() {
    let Some((dir, versions)) = referees_or_skip() else { return };
    let plan = plan(&[corpus()], Some(&versions)).expect("the corpus loads");
    let jobs: Vec<_> = plan.runs.iter().map(|(s, v)| (s.clone(), *v, EngineKind::Referee(dir.clone()))).collect();
    // The referee first, while the sim test runs the sim (`sim_runs`); a
    // release the sim corpus does not play by default (a built pre-release)
    // runs on the sim here.
    let referee = run_all(jobs.clone());
    let sims = sim_runs();
    let cached = |s: &dpctl::scenario::Scenario, v: &KubeletVersion| {
        sims.iter().find(|(t, w, _)| t.name == s.name && w == v).map(|(_, _, r)| r)
    };
    let uncached: Vec<_> = jobs
        .iter()
        .filter(|(s, v, _)| cached(s, v).is_none())
        .map(|(s, v, _)| (s.clone(), *v, EngineKind::Sim))
        .collect();
    let more = run_all(uncached.clone());
    let mut problems = Vec::new();
    for ((s, v, _), referee) in jobs.iter().zip(&referee) {
        let sim = cached(s, v)
            .or_else(|| uncached.iter().zip(&more).find(|((t, w, _), _)| t.name == s.name && w == v).map(|(_, r)| r))
            .expect("a sim run of every referee run");
        let d: ScenarioDiff = diff(s, sim, referee);
        for e in d.entries.iter().filter(|e| e.verdict == Verdict::Unexplained) {
            problems.push(format!(
                "{} {} {} {}: sim {} | referee {}",
                d.scenario, d.release, e.step, e.path, e.left, e.right
            ));
        }
        problems.extend(d.run_failures.iter().map(|f| format!("{} {}: {f}", d.scenario, d.release)));
    }
    assert!(problems.is_empty(), "undeclared differences from the kubelet's code:\n  {}", problems.join("\n  "));
}

/// The referee plays the kubelet's own DRA manager, 1.34-1.38: the mock
/// driver is called by it (NodePrepareResources at admission, with the
/// claim; NodeUnprepareResources at deletion), the containers get the CDI
/// IDs the kubelet's GetResources hands out, its `dra_manager_state` holds
/// the claim with the pod and verifies, and PodResources lists the claim.
#[test]
fn the_referee_prepares_and_unprepares_claims_with_the_kubelets_dra_manager_1_34_1_38() {
    let Some((dir, versions)) = referees_or_skip() else { return };
    let s = dpctl::scenario::Scenario::load(&corpus().join("dra-prepare-cdi-by-request.toml")).expect("it loads");
    let jobs = versions.iter().map(|v| (s.clone(), *v, EngineKind::Referee(dir.clone()))).collect();
    for run in run_all(jobs) {
        assert!(run.engine.starts_with("referee v1.3"), "{}", run.engine);
        let step = |name: &str| &run.steps.iter().find(|x| x.step == name).expect("the step ran").observed;
        let admit = step("admit");
        let call = &admit["drivers"]["gpu"]["calls"][0];
        assert_eq!(call["rpc"], "v1.DRAPlugin/NodePrepareResources", "{} {admit:#}", run.release);
        assert_eq!(call["request"]["claims"][0]["uid"], "claim-uid-1");
        let ids = serde_json::json!(["gpu.example.com/claim=pool-0-dev-0", "gpu.example.com/claim=pool-0-dev-1"]);
        assert_eq!(admit["result"]["dra"]["cdi_devices"]["main"], ids, "{admit:#}");
        assert_eq!(admit["result"]["dra"]["cdi_devices"]["other"], serde_json::json!([]));
        assert_eq!(admit["dra_state"]["checksum_ok"], true, "{admit:#}");
        assert!(admit["dra_state"]["claims"][0]["PodUIDs"].get("uid-default-trainer").is_some(), "{admit:#}");
        let dynamic = &admit["podresources"]["list"][0]["containers"][0]["dynamic_resources"][0];
        assert_eq!(dynamic["claim"], "default/gpu-claim", "{admit:#}");
        let delete = step("delete");
        assert_eq!(delete["drivers"]["gpu"]["calls"][0]["rpc"], "v1.DRAPlugin/NodeUnprepareResources", "{delete:#}");
        assert_eq!(delete["dra_state"]["claims"], serde_json::json!([]), "{delete:#}");
    }
}

/// The release table is the one list of releases: `conformance/build.sh`
/// builds a referee per `referee/modfiles/1.NN.mod`, and those are exactly
/// `KubeletVersion::referee_releases()` (1.34-1.38); every scenario that
/// plays the default release (1.37) plays every newer referee release too,
/// so a new release enters the whole corpus at once.
#[test]
fn build_sh_and_the_corpus_follow_the_release_table() {
    let modfiles = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/referee/modfiles");
    let mut built: Vec<KubeletVersion> = std::fs::read_dir(&modfiles)
        .expect("the modfiles")
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".mod").map(str::to_string))
        .map(|r| KubeletVersion::parse(&r).unwrap_or_else(|e| panic!("modfiles/{r}.mod: {e}")))
        .collect();
    built.sort();
    assert_eq!(built, KubeletVersion::referee_releases(), "conformance/referee/modfiles/*.mod against the table");
    let newer: Vec<KubeletVersion> =
        KubeletVersion::referee_releases().into_iter().filter(|v| *v > KubeletVersion::DEFAULT).collect();
    let plan = plan(&[corpus()], None).expect("the corpus loads");
    let mut missing = Vec::new();
    for s in plan.runs.iter().filter(|(_, v)| *v == KubeletVersion::DEFAULT).map(|(s, _)| s) {
        for v in &newer {
            if !plan.runs.iter().any(|(t, w)| t.name == s.name && w == v) {
                missing.push(format!("{} lacks {v}", s.name));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "scenarios that play {} but not the newer releases:\n  {}",
        KubeletVersion::DEFAULT,
        missing.join("\n  ")
    );
}

fn scenario_cli(args: &[&str]) -> (i32, String) {
    let out = crate::support::dpctl_command().args(args).output().expect("dpctl runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A directory without the release's referee: exit 2, naming what it holds
/// and how to build the missing one.
#[test]
fn a_missing_referee_is_bad_input_naming_what_exists_and_how_to_build_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(dir.path().join("dpctl-referee-1.34"), "").expect("a file");
    let file = corpus().join("register-basic.toml");
    let engine = format!("referee:{}", dir.path().display());
    let (code, err) = scenario_cli(&[
        "scenario",
        "run",
        file.to_str().expect("utf-8"),
        "--engine",
        &engine,
        "--kubelet-version",
        "1.36",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("dpctl-referee-1.34") && err.contains("conformance/build.sh 1.36"), "{err}");
}

/// A referee of another release than asked for is refused before it runs.
#[test]
fn a_referee_of_another_release_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a temp dir");
    let fake = dir.path().join("dpctl-referee-1.36");
    std::fs::write(&fake, "#!/bin/sh\necho 'dpctl-referee kubelet v1.35.4'\n").expect("a script");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let file = corpus().join("register-basic.toml");
    let engine = format!("referee:{}", dir.path().display());
    let (code, err) = scenario_cli(&[
        "scenario",
        "run",
        file.to_str().expect("utf-8"),
        "--engine",
        &engine,
        "--kubelet-version",
        "1.36",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("runs kubelet v1.35.4, not release 1.36"), "{err}");
}

/// A scenario file with a typo is bad input naming the key.
#[test]
fn a_bad_scenario_file_names_the_problem() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let f = dir.path().join("bad.toml");
    std::fs::write(&f, "description = \"x\"\nreleases = [\"1.36\"]\n[[step]]\ndo = \"wait\"\nuntil = \"capacity\"\nresorce = \"a/b\"\n")
        .expect("a file");
    let (code, err) = scenario_cli(&["scenario", "run", f.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("resorce"), "{err}");
    let (code, err) = scenario_cli(&["scenario", "run", dir.path().join("missing.toml").to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");
}

/// A step's `unobserved` pointer that matches nothing hides nothing: the run
/// fails naming it, so a misspelt pointer cannot look like it did its job.
#[test]
fn an_unobserved_pointer_that_matches_nothing_fails_the_run() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let f = dir.path().join("s.toml");
    let scenario = |pointer: &str| {
        format!(
            "description = \"x\"\nreleases = [\"1.36\"]\n[[plugin]]\nid = \"gpu\"\n[[plugin.resource]]\n\
             name = \"example.com/gpu\"\ncount = 2\n[[step]]\nname = \"up\"\ndo = \"wait\"\nuntil = \"capacity\"\n\
             resource = \"example.com/gpu\"\ncapacity = 2\nallocatable = 2\nunobserved = [\"{pointer}\"]\n"
        )
    };
    std::fs::write(&f, scenario("/plugins/gpu/registration")).expect("a file");
    let out = crate::support::dpctl_command()
        .args(["scenario", "run", f.to_str().expect("utf-8")])
        .output()
        .expect("dpctl runs");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("failed: step up: unobserved /plugins/gpu/registration matches nothing"), "{shown}");
    std::fs::write(&f, scenario("/plugins/gpu/registrations")).expect("a file");
    let (code, err) = scenario_cli(&["scenario", "run", f.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
}

/// `dpctl smoke --engine referee:DIR --kubelet-version RELEASES -o json --
/// COMMAND` (the whole smoke once per release against the kubelet's own
/// code), bounded; the exit code and the report.
fn smoke_on_referees(dir: &Path, releases: &str, flags: &[&str], command: &[&str]) -> (i32, serde_json::Value) {
    let engine = format!("referee:{}", dir.display());
    let mut args = vec!["smoke", "--engine", &engine, "--kubelet-version", releases, "--stream-window", "300ms"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["-o", "json", "--"]);
    args.extend_from_slice(command);
    let mut cmd = crate::support::dpctl_command();
    cmd.args(&args);
    let run = runtime().block_on(crate::support::run_bounded(cmd, &args, std::time::Duration::from_secs(120)));
    (run.code, run.json())
}

/// Each run of a matrix report names the referee that played it, at its exact version.
#[track_caller]
fn assert_engines(v: &serde_json::Value, want: &[(&str, &str)]) {
    let runs = v["runs"].as_array().unwrap_or_else(|| panic!("no runs: {v:#}"));
    assert_eq!(runs.len(), want.len(), "{v:#}");
    for (run, (release, engine)) in runs.iter().zip(want) {
        assert_eq!(run["kubelet_version"], *release, "{run:#}");
        assert_eq!(run["engine"], *engine, "{run:#}");
    }
}

fn step_of<'a>(run: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    let steps = run["steps"].as_array().unwrap_or_else(|| panic!("no steps: {run:#}"));
    steps.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no step {name}: {run:#}"))
}

/// On the kubelet's own code, 1.34 and 1.37: a well-behaved `dpctl
/// mock-plugin` passes every smoke step (registration seen in the kubelet's
/// log, admission and deletion by its device manager, its restart cleanup
/// and the plugin's re-registration); one that does not register again after
/// the restart (`--no-reregister`) fails kubelet-restart with the rule and
/// the evidence, and nothing else.
#[test]
fn smoke_on_the_referee_passes_a_mock_plugin_and_fails_one_that_does_not_register_again_1_34_1_37() {
    let Some((dir, _)) = referees_or_skip() else { return };
    let mock = [dpctl_bin(), "mock-plugin", "--dir", "{dir}", "--resource", "example.com/gpu"];
    let (code, v) = smoke_on_referees(&dir, "1.34,1.37", &[], &mock);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["passed"], serde_json::json!(["1.34", "1.37"]), "{v:#}");
    assert_engines(&v, &[("1.34", "referee v1.34.4"), ("1.37", "referee v1.37.2")]);
    for run in v["runs"].as_array().expect("runs") {
        let reg = step_of(run, "registration");
        assert_eq!(reg["outcome"], "pass", "{reg:#}");
        assert!(reg["evidence"].as_str().unwrap().contains("Register(version v1beta1, endpoint example-gpu.sock)"));
        let del = step_of(run, "pod-deletion");
        assert!(del["evidence"].as_str().unwrap().contains("no device in use"), "{del:#}");
        let restart = step_of(run, "kubelet-restart");
        assert!(restart["evidence"].as_str().unwrap().contains("deleted example-gpu.sock"), "{restart:#}");
        assert!(restart["evidence"].as_str().unwrap().contains("registered again"), "{restart:#}");
    }

    let mut lazy = mock.to_vec();
    lazy.push("--no-reregister");
    let (code, v) = smoke_on_referees(&dir, "1.34,1.37", &["--restart-deadline", "2s"], &lazy);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["failed"], serde_json::json!(["1.34", "1.37"]), "{v:#}");
    assert_engines(&v, &[("1.34", "referee v1.34.4"), ("1.37", "referee v1.37.2")]);
    for run in v["runs"].as_array().expect("runs") {
        let failed: Vec<&str> = run["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .filter(|s| s["outcome"] == "fail" || s["outcome"] == "error")
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(failed, ["kubelet-restart"], "{run:#}");
        let s = step_of(run, "kubelet-restart");
        let ev = s["evidence"].as_str().unwrap();
        assert!(ev.contains("example.com/gpu did not register again within 2s of the restart"), "{ev}");
        assert!(ev.contains("its socket example-gpu.sock was not served again"), "{ev}");
        assert!(s["rule"].as_str().unwrap().contains("call Register again"), "{s:#}");
    }
}

/// On the kubelet's own code, 1.34 and 1.37: the grpcio plugin peer (another
/// gRPC stack, tests/interop/peer.py) passes registration, admission with
/// PreStartContainer, the restart and shutdown.
#[test]
fn smoke_on_the_referee_passes_the_grpcio_plugin_peer_1_34_1_37() {
    let Some((dir, _)) = referees_or_skip() else { return };
    let Some(env) = crate::support::interop::env() else { return };
    let py = env.python.to_str().expect("utf-8").to_string();
    let script = crate::support::interop::peer_script();
    let peer = [py.as_str(), script.to_str().expect("utf-8"), "plugin", "--dir", "{dir}", "--pre-start"];
    let (code, v) = smoke_on_referees(&dir, "1.34,1.37", &["--resource", "example.com/peer"], &peer);
    assert_eq!(code, 0, "{v:#}");
    assert_engines(&v, &[("1.34", "referee v1.34.4"), ("1.37", "referee v1.37.2")]);
    for run in v["runs"].as_array().expect("runs") {
        for name in ["registration", "first-snapshot", "health-report", "admission", "kubelet-restart", "shutdown"] {
            let s = step_of(run, name);
            assert_eq!(s["outcome"], "pass", "{name}: {s:#}");
        }
        let admission = step_of(run, "admission")["evidence"].as_str().unwrap().to_string();
        assert!(admission.contains("PreStartContainer"), "{admission}");
    }
}

/// `smoke --engine referee:PATH` refuses, before the plugin starts, a
/// directory without the release's referee, a binary that is not
/// executable, one that is no referee and one of another release: exit 2,
/// with how to build the right one.
#[test]
fn smoke_refuses_a_missing_unusable_or_wrong_referee_with_the_build_hint() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().expect("a temp dir");
    let smoke = |engine: &str, release: &str| {
        let (code, err) = scenario_cli(&[
            "smoke",
            "--engine",
            engine,
            "--kubelet-version",
            release,
            "--",
            dpctl_bin(),
            "mock-plugin",
            "--dir",
            "{dir}",
        ]);
        (code, err)
    };
    let (code, err) = smoke(&format!("referee:{}", d.path().display()), "1.36");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no dpctl-referee-1.36") && err.contains("conformance/build.sh 1.36"), "{err}");

    let plain = d.path().join("dpctl-referee-1.36");
    std::fs::write(&plain, "#!/bin/sh\necho 'dpctl-referee kubelet v1.36.3'\n").expect("a script");
    let (code, err) = smoke(&format!("referee:{}", plain.display()), "1.36");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot run it") && err.contains("conformance/build.sh 1.36"), "{err}");

    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (code, err) = smoke(&format!("referee:{}", d.path().display()), "1.35");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("it holds: dpctl-referee-1.36"), "{err}");
    let (code, err) = smoke(&format!("referee:{}", plain.display()), "1.35");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("runs kubelet v1.36.3, not release 1.35") && err.contains("build.sh 1.35"), "{err}");

    let other = d.path().join("not-a-referee");
    std::fs::write(&other, "#!/bin/sh\necho hello\n").expect("a script");
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (code, err) = smoke(&format!("referee:{}", other.display()), "1.36");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a dpctl referee") && err.contains("build.sh 1.36"), "{err}");
}

/// `dpctl kubelet-sim --engine referee:DIR --kubelet-version 1.36` serves
/// --dir with the kubelet's own code in the foreground: the steering
/// commands drive it (status names it, admit goes through its device
/// manager, restart deletes the plugin's socket and the mock registers
/// again), Ctrl-C stops it, and the sim-only flags are refused.
#[test]
fn kubelet_sim_engine_referee_serves_the_steering_commands_1_36() {
    use crate::support::{Child, Sandbox, dpctl};
    let Some((refs, _)) = referees_or_skip() else { return };
    runtime().block_on(async {
        let sb = Sandbox::new();
        let dir = sb.path().to_str().expect("utf-8").to_string();
        let engine = format!("referee:{}", refs.display());
        let base = ["kubelet-sim", "--engine", &engine, "--kubelet-version", "1.36", "--dir", &dir];
        let mut refused = base.to_vec();
        refused.extend(["--grace-period", "1s"]);
        let r = dpctl(&refused).await;
        r.expect_code(2);
        assert!(r.stderr.contains("--grace-period not with a referee"), "{}", r.stderr);

        let mut serve = base.to_vec();
        serve.extend(["-o", "json"]);
        let mut kubelet = Child::dpctl(&serve);
        let started = kubelet.event("started").await;
        assert_eq!(started["engine"], "referee v1.36.3", "{started}");
        let mut plugin = Child::dpctl(&["mock-plugin", "--dir", &dir, "--resource", "example.com/gpu", "-o", "json"]);
        plugin.event("registered").await;
        // Registered, then the first list: poll status (bounded) until the kubelet counts the devices.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let status = loop {
            let v = dpctl(&["kubelet-sim", "status", "--dir", &dir, "-o", "json"]).await.expect_code(0).json();
            if v["resources"][0]["allocatable"] == 4 || std::time::Instant::now() > deadline {
                break v;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert_eq!(status["engine"], "referee v1.36.3", "{status:#}");
        assert_eq!(status["resources"][0]["state"], "serving", "{status:#}");
        assert_eq!(status["resources"][0]["endpoint"], "example-gpu.sock", "{status:#}");
        assert_eq!(status["resources"][0]["devices"].as_array().map(Vec::len), Some(4), "{status:#}");
        let v = dpctl(&["kubelet-sim", "admit", "--dir", &dir, "--allocate", "example.com/gpu=2", "-o", "json"])
            .await
            .expect_code(0)
            .json();
        assert_eq!(v["admitted"], true, "{v:#}");
        let v = dpctl(&["kubelet-sim", "restart", "--dir", &dir, "--wait", "10s", "-o", "json"])
            .await
            .expect_code(0)
            .json();
        assert_eq!(v["deleted_sockets"], serde_json::json!(["example-gpu.sock"]), "{v:#}");
        assert_eq!(v["resources"][0]["reregistered"], true, "{v:#}");
        assert!(v["resources"][0]["register_after_ms"].is_u64(), "{v:#}");
        plugin.stop().await;
        kubelet.interrupt();
        let stopped = kubelet.event("stopped").await;
        assert_eq!(stopped["engine"], "referee v1.36.3");
        let (code, stderr) = kubelet.finish().await;
        assert_eq!(code, 0, "{stderr}");
        assert!(!sb.join(".dpctl").exists(), "the control socket's directory is removed");
    });
}
