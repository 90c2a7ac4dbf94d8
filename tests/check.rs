//! `dpctl plugin check` as a user runs it: a well-behaved plugin passes every
//! check (exit 0); each misbehaviour fails exactly the check that covers it,
//! with evidence naming the problem (exit 1). Also JUnit, JSON, --only/--skip,
//! an unreachable plugin, and the library entry point that `smoke` uses.

use std::collections::BTreeMap;
use std::time::Duration;

use dpctl::check::{self, CheckOptions, CheckTarget, Outcome, Registration};
use dpctl::proto::deviceplugin::v1beta1 as dp;

use crate::support::fake_plugin::{AllocateAnswer, Behaviour, FakePlugin, UnknownIds, device};
use crate::support::{Run, Sandbox, dpctl, within};

/// Four devices: three healthy over NUMA nodes 0 and 1 (node 0 must show), one unhealthy.
fn devices() -> Vec<dp::Device> {
    vec![
        device("GPU-0", "Healthy", Some(&[0])),
        device("GPU-1", "Healthy", Some(&[0])),
        device("GPU-2", "Healthy", Some(&[1])),
        device("GPU-3", "Unhealthy", Some(&[1])),
    ]
}

/// Fast settings: a short stream window, everything else at its default.
const FAST: [&str; 2] = ["--stream-window", "300ms"];

async fn serve(
    sb: &Sandbox,
    devices: Vec<dp::Device>,
    behaviour: Behaviour,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let path = sb.join("p.sock");
    let stop = FakePlugin::new(devices, behaviour).serve(&path).await;
    (path.to_str().unwrap().to_string(), stop)
}

async fn check(socket: &str, extra: &[&str]) -> Run {
    let mut args = vec!["plugin", "check", "--socket", socket];
    args.extend_from_slice(&FAST);
    args.extend_from_slice(extra);
    dpctl(&args).await
}

/// Outcome by check name, from `-o json`.
fn outcomes(v: &serde_json::Value) -> BTreeMap<String, String> {
    v["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["outcome"].as_str().unwrap().to_string()))
        .collect()
}

fn evidence<'a>(v: &'a serde_json::Value, name: &str) -> &'a str {
    v["checks"].as_array().unwrap().iter().find(|c| c["name"] == name).expect(name)["evidence"].as_str().unwrap()
}

/// The names whose outcome is `outcome`.
fn with(v: &serde_json::Value, outcome: &str) -> Vec<String> {
    outcomes(v).into_iter().filter(|(_, o)| o == outcome).map(|(n, _)| n).collect()
}

#[tokio::test]
async fn well_behaved_plugin_passes_every_check() {
    let sb = Sandbox::new();
    let (s, _stop) = serve(&sb, devices(), Behaviour::conformant()).await;
    let r = check(
        &s,
        &["--register-options", "pre_start_required=true,get_preferred_allocation_available=true", "-o", "json"],
    )
    .await;
    let v = r.expect_code(0).json();
    assert_eq!(v["suite"], "dpctl plugin check");
    assert_eq!(v["totals"]["total"], 14, "{v:#}");
    assert_eq!(v["totals"]["failed"], 0, "{v:#}");
    assert_eq!(v["totals"]["errors"], 0, "{v:#}");
    // Only the not-advertised side of the preferred pair is skipped.
    assert_eq!(with(&v, "skip"), ["preferred-not-advertised"], "{v:#}");
    assert!(evidence(&v, "numa-ids-valid").contains("NUMA nodes 0-1"), "{v:#}");
    assert!(evidence(&v, "health-values").contains("3 Healthy, 1 Unhealthy"));
    assert!(evidence(&v, "message-size").contains("under the 4,194,304-byte limit"));
    assert!(evidence(&v, "allocate-healthy").contains("2 containers [GPU-0] [GPU-1]: 2 responses"));
    assert!(evidence(&v, "allocate-unknown-id").contains("InvalidArgument"));
    assert!(evidence(&v, "distinct-devices").contains("VISIBLE_DEVICES=GPU-1"), "{v:#}");
    assert!(evidence(&v, "parallel-calls").contains("still open"));
    for c in v["checks"].as_array().unwrap() {
        assert!(c["reason"].as_str().is_some_and(|s| !s.is_empty()) && c["duration_ms"].is_u64(), "{c}");
    }

    // The table: one row per check, then the summary; nothing on stderr.
    let r = check(&s, &[]).await;
    r.expect_code(0);
    assert!(r.stdout.starts_with("CHECK"), "{}", r.stdout);
    assert!(r.stdout.contains("list-stream-stays-open"), "{}", r.stdout);
    assert!(r.stdout.contains("14 checks: 13 passed, 0 failed, 1 skipped, 0 errors"), "{}", r.stdout);
    assert!(!r.stdout.contains("FAIL"), "{}", r.stdout);
    assert!(r.stderr.is_empty(), "stderr: {}", r.stderr);
}

#[tokio::test]
async fn shared_test_plugin_skips_what_it_does_not_advertise() {
    // The fake plugin's default behaviour advertises neither option, so the checks that need
    // them skip; it allocates any ID it is given, which the suite catches.
    let sb = Sandbox::new();
    let p = FakePlugin::new(devices(), Behaviour::default());
    let path = sb.join("t.sock");
    let _stop = p.serve(&path).await;
    let v = check(path.to_str().unwrap(), &["-o", "json"]).await.expect_code(1).json();
    assert_eq!(with(&v, "fail"), ["allocate-unknown-id"], "{v:#}");
    assert_eq!(v["totals"]["errors"], 0, "{v:#}");
    assert_eq!(with(&v, "skip"), ["preferred-contract", "preferred-not-advertised", "prestart-deadline"]);
    assert!(evidence(&v, "preferred-not-advertised").contains("the kubelet never calls it"), "{v:#}");
    assert!(evidence(&v, "prestart-deadline").contains("pre_start_required=false"), "{v:#}");
    // Like a kubelet, the suite never calls what is not advertised.
    let calls = p.rpcs();
    assert!(calls.iter().any(|c| c == "Allocate"), "{calls:?}");
    assert!(!calls.iter().any(|c| c == "GetPreferredAllocation" || c == "PreStartContainer"), "{calls:?}");
}

#[tokio::test]
async fn unadvertised_preferred_allocation_is_probed_only_when_asked() {
    let sb = Sandbox::new();
    let p = FakePlugin::new(devices(), Behaviour::default());
    let path = sb.join("t.sock");
    let _stop = p.serve(&path).await;
    let only = ["--only", "preferred-not-advertised", "-o", "json"];
    let v = check(path.to_str().unwrap(), &only).await.expect_code(0).json();
    assert_eq!(with(&v, "skip"), ["preferred-not-advertised"], "{v:#}");
    assert!(evidence(&v, "preferred-not-advertised").contains("--probe-unadvertised"), "{v:#}");
    assert!(!p.rpcs().iter().any(|c| c == "GetPreferredAllocation"));

    let mut args = only.to_vec();
    args.push("--probe-unadvertised");
    let v = check(path.to_str().unwrap(), &args).await.expect_code(0).json();
    assert_eq!(with(&v, "skip"), ["preferred-not-advertised"], "{v:#}");
    assert!(evidence(&v, "preferred-not-advertised").contains("yet the plugin answers it"), "{v:#}");
    assert!(p.rpcs().iter().any(|c| c == "GetPreferredAllocation"));
}

#[tokio::test]
async fn no_healthy_devices_skips_what_needs_them() {
    let sb = Sandbox::new();
    let d = vec![device("GPU-0", "Unhealthy", Some(&[0])), device("GPU-1", "Unhealthy", Some(&[0]))];
    let (s, _stop) = serve(&sb, d, Behaviour::conformant()).await;
    let v = check(&s, &["-o", "json"]).await.expect_code(0).json();
    assert_eq!(
        with(&v, "skip"),
        [
            "allocate-healthy",
            "allocate-unknown-id",
            "distinct-devices",
            "preferred-contract",
            "preferred-not-advertised",
            "prestart-deadline",
        ],
        "{v:#}"
    );
    assert!(evidence(&v, "allocate-healthy").contains("no healthy devices"), "{v:#}");
    // A refusal proves something only next to a healthy Allocate that works.
    assert!(evidence(&v, "allocate-unknown-id").contains("advertises no healthy device"), "{v:#}");
    assert!(evidence(&v, "parallel-calls").contains("GetDevicePluginOptions"), "{v:#}");
}

/// Runs the suite against a plugin with `faults` and `devices`, and asserts
/// that exactly the `failing` checks fail and that each named check's
/// evidence contains its text. Returns the JSON report.
async fn expect_failures(
    devices: Vec<dp::Device>,
    faults: Behaviour,
    extra: &[&str],
    failing: &[&str],
    texts: &[(&str, &str)],
) -> serde_json::Value {
    let sb = Sandbox::new();
    let (s, _stop) = serve(&sb, devices, faults).await;
    let mut args = extra.to_vec();
    args.extend(["-o", "json"]);
    let r = check(&s, &args).await;
    let v = r.expect_code(1).json();
    assert_eq!(with(&v, "fail"), failing, "{v:#}");
    for (name, text) in texts {
        let e = evidence(&v, name);
        assert!(e.contains(text), "{name}: expected {text:?} in {e:?}");
    }
    v
}

#[tokio::test]
async fn wrong_preferred_answer_fails_preferred_contract() {
    let f = Behaviour { preferred_ignores_must_include: true, ..Behaviour::conformant() };
    expect_failures(
        devices(),
        f,
        &[],
        &["preferred-contract"],
        &[(
            "preferred-contract",
            "must include GPU-2: answered [GPU-0,GPU-1]: preferred-must-include: missing must_include_deviceIDs: GPU-2",
        )],
    )
    .await;
}

/// docs/protocol.md §3.7 (every version, 1.26 to master): the kubelet rejects an
/// Allocate answer with no container response.
#[tokio::test]
async fn empty_allocate_response_fails_allocate_healthy() {
    let f = Behaviour { allocate_answer: AllocateAnswer::Empty, ..Behaviour::conformant() };
    // parallel-calls leaves Allocate out, as it fails even alone: one fault, one failed check.
    let v = expect_failures(
        devices(),
        f,
        &[],
        &["allocate-healthy"],
        &[
            (
                "allocate-healthy",
                "Allocate 1 container [GPU-0]: no container response: the kubelet rejects the pod \
                 (UnexpectedAdmissionError: \"no containers return in allocation response\")",
            ),
            ("parallel-calls", "left out, as it fails even alone: Allocate"),
        ],
    )
    .await;
    let c = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "allocate-healthy").unwrap();
    assert!(c["rule"].as_str().unwrap().contains("reads only container_responses[0]"), "{c:#}");
}

/// docs/protocol.md §3.7 (every version): the kubelet reads only the first
/// container response, so extra ones fail nothing.
#[tokio::test]
async fn extra_allocate_responses_pass_as_the_kubelet_reads_the_first() {
    let sb = Sandbox::new();
    let (s, _stop) =
        serve(&sb, devices(), Behaviour { allocate_answer: AllocateAnswer::OneExtra, ..Behaviour::conformant() }).await;
    let v = check(&s, &["--only", "allocate-healthy,parallel-calls", "-o", "json"]).await.expect_code(0).json();
    assert_eq!(outcomes(&v)["allocate-healthy"], "pass", "{v:#}");
    assert_eq!(outcomes(&v)["parallel-calls"], "pass", "{v:#}");
    let e = evidence(&v, "allocate-healthy");
    assert!(
        e.contains(
            "Allocate 1 container [GPU-0]: 2 responses (the kubelet reads only the first and ignores the other 1)"
        ),
        "{e}"
    );
    assert!(e.contains("3 container responses for 2 container requests (not a failure"), "{e}");
}

/// docs/protocol.md §3.6 (every version): the kubelet sends one container request
/// to GetPreferredAllocation and reads only container_responses[0]; a further
/// response is noted, not failed.
#[tokio::test]
async fn extra_preferred_responses_pass_as_the_kubelet_reads_the_first() {
    let sb = Sandbox::new();
    let (s, _stop) =
        serve(&sb, devices(), Behaviour { preferred_extra_response: true, ..Behaviour::conformant() }).await;
    let v = check(&s, &["--only", "preferred-contract", "-o", "json"]).await.expect_code(0).json();
    assert_eq!(outcomes(&v)["preferred-contract"], "pass", "{v:#}");
    let e = evidence(&v, "preferred-contract");
    assert!(e.contains("held more than one container response; the kubelet reads only the first"), "{e}");
}

/// The kubelet sends one container per Allocate (docs/protocol.md §3.7), so a
/// plugin that answers a two-container call with one response works on a
/// node: the count is reported, not failed.
#[tokio::test]
async fn one_response_for_two_containers_is_reported_not_failed() {
    let sb = Sandbox::new();
    let (s, _stop) =
        serve(&sb, devices(), Behaviour { allocate_answer: AllocateAnswer::FirstOnly, ..Behaviour::conformant() })
            .await;
    let v = check(&s, &["--only", "allocate-healthy", "-o", "json"]).await.expect_code(0).json();
    assert_eq!(outcomes(&v)["allocate-healthy"], "pass", "{v:#}");
    let e = evidence(&v, "allocate-healthy");
    assert!(
        e.contains(
            "Allocate 2 containers [GPU-0] [GPU-1]: 1 container response for 2 container requests (not a \
             failure: the kubelet never sends two containers in one call)"
        ),
        "{e}"
    );
}

/// The rules and reasons say what the kubelet does: GetPreferredAllocation
/// only while devices are still needed after init-container reuse
/// (docs/kubelet-versions.md §5, docs/protocol.md §3.6; 1.26 to master) and capacity
/// dropping at the first node-status update after the 5-minute grace period
/// (docs/kubelet-versions.md §3, every version).
#[tokio::test]
async fn rules_say_when_the_kubelet_asks_preferred_and_drops_capacity() {
    let sb = Sandbox::new();
    let (s, _stop) = serve(&sb, devices(), Behaviour::conformant()).await;
    let v = check(&s, &["--only", "preferred-contract,preferred-not-advertised,list-stream-stays-open", "-o", "json"])
        .await
        .expect_code(0)
        .json();
    let field = |name: &str, f: &str| -> String {
        v["checks"].as_array().unwrap().iter().find(|c| c["name"] == name).expect(name)[f].as_str().unwrap().to_string()
    };
    for name in ["preferred-contract", "preferred-not-advertised"] {
        let text = format!("{} {}", field(name, "reason"), field(name, "rule"));
        assert!(text.contains("after reusing its init containers' ones"), "{name}: {text}");
        assert!(!text.contains("every admission"), "{name}: {text}");
    }
    let stream = format!("{} {}", field("list-stream-stays-open", "reason"), field("list-stream-stays-open", "rule"));
    assert!(stream.contains("first node-status update"), "{stream}");
    assert!(stream.contains("5 minutes") || stream.contains("5-minute"), "{stream}");
}

/// Every kubelet 1.26+ ignores RegisterRequest.options (`Register` in
/// pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go, v1.34-v1.37): a
/// plugin whose RegisterRequest options differ from GetDevicePluginOptions
/// works on every node, so the suite passes it; options-answer notes the
/// difference and says when the kubelet calls GetPreferredAllocation (only
/// while devices are still needed: devicesToAllocate in manager.go), not "at
/// every admission". There is no
/// registration-options-agree check any more.
#[tokio::test]
async fn register_options_that_differ_pass_with_a_note_in_every_release() {
    let sb = Sandbox::new();
    let (s, _stop) = serve(&sb, devices(), Behaviour::conformant()).await;
    let args = [
        "--register-options",
        "pre_start_required=false,get_preferred_allocation_available=false",
        "--skip",
        "parallel-calls",
        "-o",
        "json",
    ];
    let v = check(&s, &args).await.expect_code(0).json();
    assert_eq!(v["totals"]["failed"], 0, "{v:#}");
    let names: Vec<&str> = v["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert!(!names.contains(&"registration-options-agree"), "{names:?}");
    let e = evidence(&v, "options-answer");
    for want in [
        "note: pre_start_required is false in --register-options but true here, so the kubelet calls \
         PreStartContainer on every container start",
        "get_preferred_allocation_available is false in --register-options but true here, so the kubelet calls \
         GetPreferredAllocation at admission whenever devices are still needed after init-container reuse",
        "every kubelet 1.26+ ignores RegisterRequest.options",
    ] {
        assert!(e.contains(want), "{want}\n{e}");
    }
    // The check list no longer offers it, and asking for it is bad input.
    let list = dpctl(&["plugin", "check", "--list"]).await;
    list.expect_code(0);
    assert!(!list.stdout.contains("registration-options-agree"), "{}", list.stdout);
    check(&s, &["--only", "registration-options-agree"]).await.expect_code(2);
}

#[tokio::test]
async fn allocate_of_unknown_id_succeeding_fails() {
    let f = Behaviour { unknown_ids: UnknownIds::Accept, ..Behaviour::conformant() };
    expect_failures(
        devices(),
        f,
        &[],
        &["allocate-unknown-id"],
        &[("allocate-unknown-id", "which the plugin never advertised, succeeded with 1 container response")],
    )
    .await;
}

/// allocate-unknown-id (a plugin rule, the same for every kubelet 1.26+):
/// a plugin that refuses EVERY Allocate, healthy IDs too, refuses unknown
/// IDs as well, which proves nothing; it passed before (a false pass). The
/// check now passes only next to a healthy Allocate that works, and skips,
/// saying why, when that fails: with the whole suite and with it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_refusing_every_allocate_does_not_pass_allocate_unknown_id() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let mut mock = crate::support::Child::dpctl(&[
        "mock-plugin",
        "--resource",
        "example.com/gpu",
        "--devices",
        "2",
        "--dir",
        dir,
        "--no-register",
        "--error",
        "Allocate=internal:allocation is broken",
        "-o",
        "json",
    ]);
    let ev = mock.event("serving").await;
    let socket = ev["socket"].as_str().expect("the serving socket").to_string();
    let v = check(&socket, &["-o", "json"]).await.expect_code(1).json();
    assert_eq!(outcomes(&v)["allocate-healthy"], "fail", "{v:#}");
    assert_eq!(outcomes(&v)["allocate-unknown-id"], "skip", "{v:#}");
    let e = evidence(&v, "allocate-unknown-id");
    assert!(e.contains("refused in") && e.contains("fails as well (see allocate-healthy)"), "{e}");
    // Alone (allocate-healthy not run), the check makes the healthy Allocate itself.
    let v = check(&socket, &["--only", "allocate-unknown-id", "-o", "json"]).await.json();
    assert_eq!(with(&v, "pass"), Vec::<String>::new(), "{v:#}");
    assert_eq!(with(&v, "skip"), ["allocate-unknown-id"], "{v:#}");
    // A plugin that refuses only unknown IDs still passes, naming the healthy Allocate that worked.
    let sb2 = Sandbox::new();
    let (s, _stop) = serve(&sb2, devices(), Behaviour::conformant()).await;
    let v = check(&s, &["--only", "allocate-unknown-id", "-o", "json"]).await.expect_code(0).json();
    assert_eq!(with(&v, "pass"), ["allocate-unknown-id"], "{v:#}");
    assert!(evidence(&v, "allocate-unknown-id").contains("an Allocate of the healthy"), "{v:#}");
}

#[tokio::test]
async fn allocate_of_unknown_id_hanging_fails() {
    let f = Behaviour { unknown_ids: UnknownIds::Hang, ..Behaviour::conformant() };
    expect_failures(
        devices(),
        f,
        &["--timeout", "300ms", "--only", "allocate-unknown-id,allocate-healthy"],
        &["allocate-unknown-id"],
        &[("allocate-unknown-id", "which the plugin never advertised, got no answer within 300ms")],
    )
    .await;
}

#[tokio::test]
async fn bad_health_string_fails_health_values() {
    let mut d = devices();
    d[1].health = "healthy".into();
    expect_failures(d, Behaviour::conformant(), &[], &["health-values"], &[("health-values", "GPU-1=\"healthy\"")])
        .await;
}

#[tokio::test]
async fn duplicate_ids_fail_device_ids_valid() {
    let mut d = devices();
    d.push(device("GPU-0", "Healthy", Some(&[0])));
    d.push(device("", "Healthy", None));
    expect_failures(
        d,
        Behaviour::conformant(),
        &[],
        &["device-ids-valid"],
        &[("device-ids-valid", "1 device with an empty ID; IDs listed more than once: GPU-0")],
    )
    .await;
}

#[tokio::test]
async fn negative_numa_fails_numa_ids_valid() {
    let mut d = devices();
    d[2] = device("GPU-2", "Healthy", Some(&[-1]));
    expect_failures(
        d,
        Behaviour::conformant(),
        &[],
        &["numa-ids-valid"],
        &[("numa-ids-valid", "negative NUMA node IDs on: GPU-2")],
    )
    .await;
}

/// docs/protocol.md §2.1 (every version): GetAllocatableResources lists a device
/// once per node of its TopologyInfo, so an empty node list hides it.
#[tokio::test]
async fn empty_topology_fails_numa_ids_valid() {
    let mut d = devices();
    d[1] = device("GPU-1", "Healthy", Some(&[]));
    expect_failures(
        d,
        Behaviour::conformant(),
        &[],
        &["numa-ids-valid"],
        &[("numa-ids-valid", "a TopologyInfo with no NUMA nodes on: GPU-1; the kubelet leaves such devices out")],
    )
    .await;
}

#[tokio::test]
async fn oversize_list_fails_message_size_with_the_margin() {
    // 48,000 devices with 80-character IDs: about 4.6 MB, over the 4 MiB limit.
    let d: Vec<dp::Device> = (0..48_000).map(|i| device(&format!("{i:0>80}"), "Healthy", None)).collect();
    let v = expect_failures(
        d,
        Behaviour::conformant(),
        &[],
        &["message-size"],
        &[("message-size", "over the kubelet's 4,194,304-byte limit")],
    )
    .await;
    // The evidence gives the size and how far over it is, in bytes and percent.
    let e = evidence(&v, "message-size");
    let bytes: usize =
        e["ListAndWatch message of ".len()..].split(' ').next().unwrap().replace(',', "").parse().unwrap();
    assert!(bytes > 4_194_304, "{e}");
    assert!(e.contains(&format!("is {} bytes (", group(bytes - 4_194_304))) && e.contains("%) over"), "{e}");
}

fn group(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[tokio::test]
async fn stream_closed_after_first_message_fails_stays_open() {
    let f = Behaviour { end_after: Some(1), ..Behaviour::conformant() };
    let v = expect_failures(
        devices(),
        f,
        &[],
        &["list-stream-stays-open"],
        &[("list-stream-stays-open", "the plugin closed the stream with status OK")],
    )
    .await;
    assert!(evidence(&v, "parallel-calls").contains("had already ended"), "{v:#}");
}

#[tokio::test]
async fn slow_prestart_over_the_deadline_fails() {
    let f = Behaviour { pre_start_delay: Some(Duration::from_millis(1500)), ..Behaviour::conformant() };
    // parallel-calls' PreStartContainer calls have the 10 s call deadline and succeed.
    expect_failures(
        devices(),
        f,
        &["--prestart-timeout", "200ms"],
        &["prestart-deadline"],
        &[("prestart-deadline", "no answer within 200ms for [GPU-0]")],
    )
    .await;
}

#[tokio::test]
async fn slow_first_list_fails_first_message_prompt() {
    let f = Behaviour { first_list_delay: Some(Duration::from_secs(3)), ..Behaviour::conformant() };
    let v = expect_failures(
        devices(),
        f,
        &["--first-list-timeout", "200ms", "--only", "list-first-message-prompt,device-ids-valid,options-answer"],
        &["list-first-message-prompt"],
        &[("list-first-message-prompt", "no ListAndWatch message within 200ms")],
    )
    .await;
    // Without a device list, the device checks cannot run: error, not pass.
    assert_eq!(with(&v, "error"), ["device-ids-valid"], "{v:#}");
}

#[tokio::test]
async fn options_error_fails_options_answer_and_dependants_cannot_run() {
    let f = Behaviour { options_error: Some(tonic::Status::internal("boom: no driver")), ..Behaviour::conformant() };
    let v = expect_failures(
        devices(),
        f,
        &[],
        &["options-answer"],
        &[
            ("options-answer", "the plugin answered Internal: boom: no driver"),
            ("preferred-contract", "GetDevicePluginOptions failed"),
            ("parallel-calls", "left out, as it fails even alone: GetDevicePluginOptions"),
        ],
    )
    .await;
    assert_eq!(with(&v, "error"), ["preferred-contract", "preferred-not-advertised", "prestart-deadline"], "{v:#}");
}

#[tokio::test]
async fn second_stream_ending_the_first_fails_parallel_calls() {
    // As after a re-registration, a second ListAndWatch opens while the first is live.
    let f = Behaviour { single_stream: true, ..Behaviour::conformant() };
    expect_failures(
        devices(),
        f,
        &[],
        &["list-stream-stays-open", "parallel-calls"],
        &[
            ("parallel-calls", "the open ListAndWatch stream ended during the calls"),
            ("list-stream-stays-open", "closed the stream with status OK"),
        ],
    )
    .await;
}

#[tokio::test]
async fn allocate_busy_under_concurrency_fails_parallel_calls() {
    let f = Behaviour { busy_when_concurrent: true, ..Behaviour::conformant() };
    expect_failures(
        devices(),
        f,
        &[],
        &["parallel-calls"],
        &[("parallel-calls", "Allocate: the plugin answered ResourceExhausted: busy: another Allocate is in progress")],
    )
    .await;
}

/// Every kubelet 1.26+ (`Register` in plugin/v1beta1/server.go) ignores
/// RegisterRequest.options, and the upstream e2e test
/// plugin registers without any: options-answer passes with no note.
#[tokio::test]
async fn a_register_request_without_options_gets_no_note() {
    let sb = Sandbox::new();
    let (s, _stop) = serve(&sb, devices(), Behaviour::conformant()).await;
    let request = dp::RegisterRequest {
        version: "v1beta1".into(),
        endpoint: "p.sock".into(),
        resource_name: "example.com/gpu".into(),
        options: None,
    };
    let target = CheckTarget {
        registration: Some(Registration::from_request(&request, "the RegisterRequest")),
        ..CheckTarget::new(&s)
    };
    let opts = CheckOptions { checks: vec![check::CheckId::OptionsAnswer], ..CheckOptions::default() };
    let report = within("the suite", check::run_checks(&target, &opts)).await;
    let r = &report.checks[0];
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.evidence);
    assert!(r.evidence.contains("pre_start_required=true, get_preferred_allocation_available=true"), "{}", r.evidence);
    assert!(!r.evidence.contains("note:"), "{}", r.evidence);
}

#[tokio::test]
async fn table_shows_evidence_and_rule_of_a_failure() {
    let sb = Sandbox::new();
    let f = Behaviour { unknown_ids: UnknownIds::Accept, ..Behaviour::conformant() };
    let (s, _stop) = serve(&sb, devices(), f).await;
    let r = check(&s, &["--only", "allocate-unknown-id"]).await;
    r.expect_code(1);
    assert!(
        r.stdout.contains("FAIL allocate-unknown-id\n  evidence: Allocate of dpctl-check-unknown-"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("  rule:     Allocate of an ID the plugin never advertised must fail"), "{}", r.stdout);
    assert!(r.stdout.contains("1 check: 0 passed, 1 failed, 0 skipped, 0 errors"), "{}", r.stdout);
}

#[tokio::test]
async fn junit_report_is_well_formed_and_counts_match() {
    let sb = Sandbox::new();
    // A duplicate ID full of XML metacharacters and a control character, so escaping is exercised.
    let nasty = "<GPU&\"'>\u{1}";
    let mut d = devices();
    d.push(device(nasty, "Healthy", None));
    d.push(device(nasty, "Healthy", None));
    let f = Behaviour { options: dp::DevicePluginOptions::default(), ..Behaviour::conformant() };
    let (s, _stop) = serve(&sb, d, f).await;
    let xml_path = sb.join("report.xml");
    let r = check(&s, &["--junit", xml_path.to_str().unwrap()]).await;
    r.expect_code(1);
    let xml = std::fs::read_to_string(&xml_path).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("not well-formed XML ({e}):\n{xml}"));
    let suite = doc.descendants().find(|n| n.has_tag_name("testsuite")).expect("testsuite");
    assert_eq!(suite.attribute("name"), Some("dpctl plugin check"));
    let cases: Vec<_> = suite.children().filter(|n| n.has_tag_name("testcase")).collect();
    assert_eq!(cases.len(), 14);
    let count = |tag: &str| cases.iter().filter(|c| c.children().any(|n| n.has_tag_name(tag))).count();
    assert_eq!(suite.attribute("tests"), Some("14"));
    assert_eq!(suite.attribute("failures"), Some(count("failure").to_string().as_str()));
    assert_eq!(suite.attribute("skipped"), Some(count("skipped").to_string().as_str()));
    assert_eq!(suite.attribute("errors"), Some("0"));
    assert_eq!(count("failure"), 1);
    // Both preferred checks and prestart are skipped.
    assert_eq!(count("skipped"), 3);
    let failed = cases.iter().find(|c| c.children().any(|n| n.has_tag_name("failure"))).unwrap();
    assert_eq!(failed.attribute("name"), Some("device-ids-valid"));
    let failure = failed.children().find(|n| n.has_tag_name("failure")).unwrap();
    // The ID survives escaping (the control character as \u{0001}), in the message and the body.
    assert!(failure.attribute("message").unwrap().contains("<GPU&\"'>\\u{0001}"), "{xml}");
    let body = failure.text().unwrap();
    assert!(body.contains("rule: every device ID") && body.contains("reason:"), "{body}");
    // The table shows the same failure.
    assert!(r.stdout.contains("FAIL device-ids-valid"), "{}", r.stdout);
}

#[tokio::test]
async fn only_and_skip_choose_checks_and_unknown_names_are_usage_errors() {
    let sb = Sandbox::new();
    let (s, _stop) = serve(&sb, devices(), Behaviour::conformant()).await;
    let v = check(&s, &["--only", "options-answer,device-ids-valid", "-o", "json"]).await.expect_code(0).json();
    assert_eq!(outcomes(&v).keys().collect::<Vec<_>>(), ["device-ids-valid", "options-answer"]);
    let v = check(&s, &["--skip", "parallel-calls", "--skip", "list-stream-stays-open", "-o", "json"])
        .await
        .expect_code(0)
        .json();
    let names = outcomes(&v);
    assert_eq!(names.len(), 12);
    assert!(!names.contains_key("parallel-calls") && !names.contains_key("list-stream-stays-open"));

    let r = check(&s, &["--only", "options-answer,no-such-check"]).await;
    r.expect_code(2);
    assert!(
        r.stderr.contains("--only: unknown check \"no-such-check\"; valid checks: options-answer,"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("list-stream-stays-open"), "{}", r.stderr);
    assert!(r.stdout.is_empty());
    check(&s, &["--skip", "nope"]).await.expect_code(2);
    // An unwritable --junit path is a usage error found before anything runs.
    let r = check(&s, &["--junit", "/nonexistent-dir/r.xml"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("--junit") && r.stdout.is_empty(), "{}", r.stderr);
}

#[tokio::test]
async fn a_junit_file_that_cannot_be_written_is_a_usage_error() {
    let sb = Sandbox::new();
    let (s, _stop) = serve(&sb, devices(), Behaviour::conformant()).await;
    // Opens fine, then every write fails (ENOSPC): bad input, not a socket problem.
    let r = check(&s, &["--only", "options-answer", "--junit", "/dev/full"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("--junit: cannot write /dev/full"), "{}", r.stderr);
    assert!(r.stderr.contains("No space left on device"), "the OS reason: {}", r.stderr);
    assert!(r.stdout.contains("options-answer"), "the results are still shown: {}", r.stdout);
    // A directory cannot be opened for writing at all.
    let r = check(&s, &["--only", "options-answer", "--junit", sb.path().to_str().unwrap()]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("--junit: cannot write") && r.stderr.contains("Is a directory"), "{}", r.stderr);
}

#[tokio::test]
async fn list_names_every_check() {
    let r = dpctl(&["plugin", "check", "--list", "-o", "json"]).await;
    let v = r.expect_code(0).json();
    let names: Vec<&str> = v.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 14);
    assert_eq!(names[0], "options-answer");
    assert!(v.as_array().unwrap().iter().all(|c| c["reason"].is_string() && c["rule"].is_string()));
}

#[tokio::test]
async fn socket_without_the_device_plugin_service_is_named() {
    // A gRPC server on the socket, but no v1beta1.DevicePlugin service (as on kubelet.sock).
    let sb = Sandbox::new();
    let path = sb.join("other.sock");
    let listener = dpctl::transport::bind(&path, &Default::default()).await.unwrap();
    let router = tonic::transport::Server::builder()
        .add_optional_service::<dp::device_plugin_server::DevicePluginServer<FakePlugin>>(None);
    let (_stop, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(dpctl::transport::serve(router, listener, async {
        let _ = rx.await;
    }));
    let r = check(path.to_str().unwrap(), &["-o", "json"]).await;
    let v = r.expect_code(1).json();
    assert_eq!(with(&v, "fail"), ["list-first-message-prompt", "list-stream-stays-open", "options-answer"], "{v:#}");
    assert!(evidence(&v, "options-answer").contains("does not serve v1beta1.DevicePlugin"), "{v:#}");
    assert_eq!(with(&v, "pass"), Vec::<String>::new(), "nothing can pass: {v:#}");
}

#[tokio::test]
async fn unreachable_plugin_exits_3_and_still_writes_junit() {
    let sb = Sandbox::new();
    let missing = sb.join("gone.sock");
    let xml_path = sb.join("r.xml");
    let r = check(missing.to_str().unwrap(), &["--junit", xml_path.to_str().unwrap()]).await;
    r.expect_code(3);
    assert!(r.stderr.contains("no socket at") && r.stderr.contains("hint:"), "{}", r.stderr);
    assert!(r.stdout.contains("0 of 14 checks run"), "{}", r.stdout);
    let xml = std::fs::read_to_string(&xml_path).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let errors = doc.descendants().filter(|n| n.has_tag_name("error")).count();
    assert_eq!(errors, 14, "{xml}");
}

/// The entry point `dpctl smoke` uses: the observed RegisterRequest goes in
/// with the target, and the report comes back as data.
#[tokio::test]
async fn library_takes_an_observed_register_request() {
    let sb = Sandbox::new();
    let (s, _stop) = serve(&sb, devices(), Behaviour::conformant()).await;
    let request = dp::RegisterRequest {
        version: "v1beta1".into(),
        endpoint: "p.sock".into(),
        resource_name: "example.com/gpu".into(),
        options: Some(dp::DevicePluginOptions { pre_start_required: true, get_preferred_allocation_available: false }),
    };
    let target = CheckTarget {
        registration: Some(Registration::from_request(&request, "the RegisterRequest")),
        ..CheckTarget::new(&s)
    };
    let opts = CheckOptions {
        checks: vec![check::CheckId::AllocateHealthy, check::CheckId::OptionsAnswer],
        ..CheckOptions::default()
    };
    let mut seen = Vec::new();
    let report = within(
        "the suite",
        check::run_checks_with(&target, &opts, &mut |p| {
            if let check::Progress::Finished(r) = p {
                seen.push(r.name.clone());
            }
        }),
    )
    .await;
    // Run order, whatever order they were asked in.
    assert_eq!(seen, ["options-answer", "allocate-healthy"]);
    // RegisterRequest.options are never read by a kubelet (1.26+): a note, no failure.
    assert_eq!(report.exit_code(), 0);
    let r = &report.checks[0];
    assert_eq!(r.outcome, Outcome::Pass);
    assert!(
        r.evidence.contains("note: get_preferred_allocation_available is false in the RegisterRequest but true here"),
        "{}",
        r.evidence
    );
    assert_eq!(report.totals.failed, 0);
}

#[tokio::test]
async fn colored_failures_keep_intact_escape_codes_and_aligned_columns() {
    let sb = Sandbox::new();
    let f = Behaviour { options_error: Some(tonic::Status::internal("boom")), ..Behaviour::conformant() };
    let (s, _stop) = serve(&sb, devices(), f).await;
    let r = check(&s, &["--color", "always", "--only", "options-answer,device-ids-valid"]).await;
    r.expect_code(1);
    // The FAIL header is colored after upper-casing: its escape codes are intact.
    assert!(r.stdout.contains("\u{1b}[1;31mFAIL\u{1b}[0m"), "{:?}", r.stdout);
    assert!(!r.stdout.contains("\u{1b}[1;31M"), "a broken escape code: {:?}", r.stdout);
    // Colored cells do not push the next column out of line.
    let strip = |l: &str| {
        let mut out = String::new();
        let mut esc = false;
        for c in l.chars() {
            match (esc, c) {
                (false, '\u{1b}') => esc = true,
                (true, 'm') => esc = false,
                (true, _) => {}
                (false, c) => out.push(c),
            }
        }
        out
    };
    let rows: Vec<String> = r.stdout.lines().take(3).map(strip).collect();
    let col = |l: &str| l.find("TIME").or_else(|| l.find("ms")).unwrap();
    assert_eq!(col(&rows[0]), rows[0].find("TIME").unwrap());
    let starts: Vec<usize> =
        rows[1..].iter().map(|l| l.split_whitespace().nth(2).map(|t| l.find(t).unwrap()).unwrap()).collect();
    assert!(starts.iter().all(|s| *s == rows[0].find("TIME").unwrap()), "misaligned: {rows:#?}");
}
