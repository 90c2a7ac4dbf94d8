//! `dpctl dra` as a user runs it: the mock DRA driver (`dra mock`) as the
//! driver, the clients (`dra info|prepare|unprepare|watch-health`) as the
//! kubelet's side, and `checkpoint show|verify` on `dra_manager_state`.
//! The kubelet rules judged here hold for 1.34 to 1.37 (docs/dra.md).

use crate::support::{Child, Sandbox, dpctl};

const DRIVER: &str = "gpu.example.com";

/// A running mock driver under `sb`, with its sockets and CDI directory.
struct Mock {
    /// Killed when the test drops it.
    _child: Child,
    registry: String,
    endpoint: String,
    cdi: String,
}

async fn mock(sb: &Sandbox, extra: &[&str]) -> Mock {
    let dir = sb.path().to_str().unwrap().to_string();
    let mut args = vec!["dra", "mock", DRIVER, "--dir", &dir, "-o", "json"];
    args.extend_from_slice(extra);
    let mut child = Child::dpctl(&args);
    let serving = child.event("serving").await;
    Mock {
        _child: child,
        registry: format!("{dir}/plugins_registry"),
        endpoint: serving["endpoint"].as_str().unwrap().to_string(),
        cdi: serving["cdi_dir"].as_str().unwrap().to_string(),
    }
}

/// The registration GetInfo answers, and what a 1.34+ kubelet picks from it:
/// the first node service in the driver's order; for health (1.37) v1 first.
#[tokio::test]
async fn info_shows_registration_and_the_services_kubelets_1_34_to_1_37_pick() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--service", "v1beta1", "--service", "v1", "--service", "health-v1alpha1"]).await;
    let r = dpctl(&["dra", "info", "--driver", DRIVER, "--registry-dir", &m.registry, "-o", "json"]).await;
    let v = r.expect_code(0).json();
    assert_eq!(v["plugin_type"], "DRAPlugin");
    assert_eq!(v["driver"], DRIVER);
    assert_eq!(v["endpoint"], m.endpoint.as_str());
    assert_eq!(
        v["supported_versions"],
        serde_json::json!(["v1beta1.DRAPlugin", "v1.DRAPlugin", "v1alpha1.DRAResourceHealth"])
    );
    assert_eq!(v["chosen_node_service"], "v1beta1.DRAPlugin", "the driver's order wins in 1.34+");
    assert_eq!(v["chosen_health_service"], "v1alpha1.DRAResourceHealth");
    assert!(v["services"].as_array().unwrap().iter().all(|s| s["status"] == "served"), "{v}");
    let r = dpctl(&["dra", "info", "--registration", &format!("{}/{DRIVER}-reg.sock", m.registry)]).await;
    let row = r
        .expect_code(0)
        .stdout
        .lines()
        .find(|l| l.starts_with("node service"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>());
    assert_eq!(row, Some(vec!["node", "service", "(1.34+)", "v1beta1.DRAPlugin"]), "{}", r.stdout);
}

/// Prepare as the kubelet sends it: every claim answered under its UID, CDI
/// IDs that resolve in the specs the mock wrote; prepared again, the same
/// devices; unprepared, the spec is gone; every call is in the record.
#[tokio::test]
async fn prepare_unprepare_round_trip_with_cdi_specs_and_record() {
    let sb = Sandbox::new();
    let record = sb.join("calls.jsonl");
    let m = mock(&sb, &["--record", record.to_str().unwrap()]).await;
    let prep = |api: &'static str| {
        let (ep, cdi) = (m.endpoint.clone(), m.cdi.clone());
        async move {
            let args = [
                "dra",
                "prepare",
                "--socket",
                &ep,
                "--api",
                api,
                "--claim",
                "default/gpu/uid-1",
                "--claim",
                "team-a/big/uid-2",
                "--cdi-dir",
                &cdi,
                "-o",
                "json",
            ];
            dpctl(&args).await
        }
    };
    let first = prep("v1").await;
    let v = first.expect_code(0).json();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["rpc"], "v1.DRAPlugin/NodePrepareResources");
    let claims = v["claims"].as_array().unwrap();
    assert_eq!((claims[0]["uid"].as_str(), claims[1]["claim"].as_str()), (Some("uid-1"), Some("team-a/big")));
    let id = &claims[0]["devices"][0]["cdi_device_ids"][0];
    assert_eq!(
        (id["id"].as_str(), id["status"].as_str()),
        (Some("gpu.example.com/claim=pool-0-dev-0"), Some("resolved"))
    );
    assert!(std::path::Path::new(&m.cdi).join("gpu.example.com-uid-1.json").is_file());
    // Idempotent: the same devices again, over the other API (no share_id
    // in v1beta1: null, as unset in v1).
    let again = prep("v1beta1").await;
    let w = again.expect_code(0).json();
    assert_eq!(w["claims"][0]["devices"], v["claims"][0]["devices"]);
    let r = dpctl(&["dra", "unprepare", "--socket", &m.endpoint, "--claim", "default/gpu/uid-1"]).await;
    assert!(r.expect_code(0).stdout.contains("the kubelet would accept this answer"), "{}", r.stdout);
    assert!(!std::path::Path::new(&m.cdi).join("gpu.example.com-uid-1.json").exists());
    drop(m);
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&record).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let rpcs: Vec<&str> = lines.iter().map(|l| l["rpc"].as_str().unwrap()).collect();
    assert_eq!(
        rpcs,
        [
            "v1.DRAPlugin/NodePrepareResources",
            "v1beta1.DRAPlugin/NodePrepareResources",
            "v1.DRAPlugin/NodeUnprepareResources"
        ]
    );
    assert_eq!(lines[0]["resource"], DRIVER);
    assert_eq!(lines[0]["request"]["claims"][1]["uid"], "uid-2");
}

/// A claim left out of the answer: the kubelet fails the pod with
/// "skipped N ResourceClaims" (1.34-1.37); exit 1.
#[tokio::test]
async fn a_claim_missing_from_the_answer_fails_as_the_kubelet_says() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--fault", "missing-uid"]).await;
    let r = dpctl(&[
        "dra",
        "prepare",
        "--socket",
        &m.endpoint,
        "--claim",
        "a/uid-a",
        "--claim",
        "b/uid-b",
        "--no-cdi-check",
    ])
    .await;
    r.expect_code(1);
    assert!(r.stdout.contains("NodePrepareResources skipped 1 ResourceClaims"), "{}", r.stdout);
    assert!(r.stdout.contains("the kubelet would fail the pod"), "{}", r.stdout);
}

/// A per-claim error is the kubelet's "NodePrepareResources failed for
/// ResourceClaim <name>: <error>" (exit 1); a whole-call status is exit 4.
#[tokio::test]
async fn per_claim_errors_and_call_statuses() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--prepare-error", "GPU fell off the bus"]).await;
    let r = dpctl(&["dra", "prepare", "--socket", &m.endpoint, "--claim", "gpu/uid-1", "--no-cdi-check"]).await;
    r.expect_code(1);
    assert!(
        r.stdout.contains("NodePrepareResources failed for ResourceClaim gpu: GPU fell off the bus"),
        "{}",
        r.stdout
    );
    drop(m);
    let sb = Sandbox::new();
    let m = mock(&sb, &["--prepare-status", "unavailable"]).await;
    let r = dpctl(&["dra", "prepare", "--socket", &m.endpoint, "--claim", "gpu/uid-1"]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("Unavailable") && r.stderr.contains("injected by dpctl dra mock"), "{}", r.stderr);
}

/// CDI IDs the runtime cannot use: no spec written (unresolvable) or IDs that
/// do not parse; the kubelet passes both on, the container then fails.
#[tokio::test]
async fn unresolvable_and_unparsable_cdi_ids_are_named() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--fault", "unresolvable-cdi"]).await;
    let r = dpctl(&["dra", "prepare", "--socket", &m.endpoint, "--claim", "gpu/uid-1", "--cdi-dir", &m.cdi]).await;
    r.expect_code(1);
    assert!(r.stdout.contains("(unresolvable)") && r.stdout.contains("unresolvable CDI devices"), "{}", r.stdout);
    drop(m);
    let sb = Sandbox::new();
    let m = mock(&sb, &["--fault", "bad-cdi-id"]).await;
    let r = dpctl(&["dra", "prepare", "--socket", &m.endpoint, "--claim", "gpu/uid-1", "--no-cdi-check"]).await;
    r.expect_code(1);
    assert!(r.stdout.contains("has no '='") && r.stdout.contains("(does not parse)"), "{}", r.stdout);
}

/// Not idempotent: the same claim prepared twice gets another device.
#[tokio::test]
async fn a_driver_that_is_not_idempotent_answers_other_devices() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--fault", "not-idempotent"]).await;
    let args =
        ["dra", "prepare", "--socket", m.endpoint.as_str(), "--claim", "gpu/uid-1", "--no-cdi-check", "-o", "json"];
    let a = dpctl(&args).await.expect_code(0).json();
    let b = dpctl(&args).await.expect_code(0).json();
    assert_ne!(a["claims"][0]["devices"][0]["device"], b["claims"][0]["devices"][0]["device"]);
}

/// Health advertised but not served: what 1.34-1.36 kubelets log every 5 s
/// as Unimplemented; info names it and exits 1.
#[tokio::test]
async fn health_advertised_but_not_served_is_found() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--fault", "health-unserved"]).await;
    let r = dpctl(&["dra", "info", "--driver", DRIVER, "--registry-dir", &m.registry]).await;
    r.expect_code(1);
    assert!(
        r.stdout.contains("advertises v1alpha1.DRAResourceHealth but does not serve it: unimplemented"),
        "{}",
        r.stdout
    );
    let r = dpctl(&["dra", "watch-health", "--socket", &m.endpoint, "--count", "1"]).await;
    r.expect_code(4);
}

/// The health stream: full lists, unhealthy devices marked.
#[tokio::test]
async fn watch_health_streams_full_lists() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--devices", "2", "--unhealthy", "dev-1", "--health-interval", "100ms"]).await;
    let r = dpctl(&[
        "dra",
        "watch-health",
        "--driver",
        DRIVER,
        "--registry-dir",
        &m.registry,
        "--count",
        "2",
        "-o",
        "json",
    ])
    .await;
    let lines = r.expect_code(0).json_lines();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["seq"], 2);
    assert_eq!(lines[0]["devices"][0]["health"], "Healthy");
    assert_eq!(lines[0]["devices"][1]["health"], "Unhealthy");
    // The table shows times as the rest of dpctl does (RFC 3339, UTC), not epoch seconds.
    let r = dpctl(&["dra", "watch-health", "--socket", &m.endpoint, "--count", "1"]).await;
    let out = &r.expect_code(0).stdout;
    let row = out.lines().find(|l| l.starts_with("pool-0") && l.contains("dev-0")).expect("a row for dev-0");
    let year = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()[..5].to_string();
    assert!(row.contains(&year) && row.contains('T') && row.contains('Z'), "{out}");
    assert!(!row.split_whitespace().any(|c| c.len() >= 10 && c.chars().all(|x| x.is_ascii_digit())), "{out}");
}

/// Calling a service the driver does not serve: exit 4, the hint names it.
#[tokio::test]
async fn wrong_service_is_exit_4() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--service", "v1beta1"]).await;
    let r = dpctl(&["dra", "prepare", "--socket", &m.endpoint, "--api", "v1", "--claim", "gpu/uid-1"]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("not implemented") && r.stderr.contains("dpctl dra info"), "{}", r.stderr);
    // Through GetInfo the advertised v1beta1 is used.
    let r = dpctl(&[
        "dra",
        "prepare",
        "--driver",
        DRIVER,
        "--registry-dir",
        &m.registry,
        "--claim",
        "gpu/uid-1",
        "--no-cdi-check",
    ])
    .await;
    assert!(r.expect_code(0).stdout.contains("v1beta1.DRAPlugin/NodePrepareResources"), "{}", r.stdout);
}

/// A call slower than --timeout: exit 5 (the kubelet's 45 s is the default).
#[tokio::test]
async fn a_slow_prepare_hits_the_deadline() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--prepare-delay", "5s"]).await;
    let r = dpctl(&["dra", "prepare", "--socket", &m.endpoint, "--claim", "gpu/uid-1", "--timeout", "300ms"]).await;
    r.expect_code(5);
    assert!(r.stderr.contains("deadline exceeded"), "{}", r.stderr);
}

/// Bad input to the clients: exit 2 for claims, 3 for sockets.
#[tokio::test]
async fn client_errors_have_their_exit_codes() {
    let sb = Sandbox::new();
    let s = sb.join("none.sock");
    let sock = s.to_str().unwrap();
    let r = dpctl(&["dra", "prepare", "--socket", sock, "--claim", "gpu/uid-1"]).await;
    assert!(r.expect_code(3).stderr.contains("no socket at"), "{}", r.stderr);
    let r = dpctl(&["dra", "prepare", "--socket", sock]).await;
    assert!(r.expect_code(2).stderr.contains("no claims"), "{}", r.stderr);
    let r = dpctl(&["dra", "prepare", "--socket", sock, "--claim", "a/b/c/d"]).await;
    assert!(r.expect_code(2).stderr.contains("NAMESPACE/NAME/UID"), "{}", r.stderr);
    let r = dpctl(&["dra", "prepare", "--socket", sock, "--claim", "gpu/u", "--claim", "other/u"]).await;
    assert!(r.expect_code(2).stderr.contains("named twice"), "{}", r.stderr);
    let file = sb.join("claims.yaml");
    std::fs::write(&file, "- {namespace: default, name: gpu}\n").unwrap();
    let r = dpctl(&["dra", "prepare", "--socket", sock, "--claims", file.to_str().unwrap()]).await;
    assert!(r.expect_code(2).stderr.contains("uid"), "{}", r.stderr);
    let r = dpctl(&["dra", "prepare", "--socket", sock, "--claims", sb.path().to_str().unwrap()]).await;
    assert!(r.expect_code(2).stderr.contains("directory"), "{}", r.stderr);
    let r = dpctl(&["dra", "info", "--driver", DRIVER, "--registry-dir", sb.path().to_str().unwrap()]).await;
    r.expect_code(3);
    let r = dpctl(&["dra", "prepare", "--socket", sb.path().to_str().unwrap(), "--claim", "gpu/u"]).await;
    assert!(r.expect_code(3).stderr.contains("not a unix socket"), "{}", r.stderr);
}

/// A claims file works like the flags.
#[tokio::test]
async fn a_claims_file_names_the_claims() {
    let sb = Sandbox::new();
    let m = mock(&sb, &[]).await;
    let file = sb.join("claims.json");
    std::fs::write(&file, r#"[{"namespace":"default","name":"gpu","uid":"uid-9"}]"#).unwrap();
    let r = dpctl(&[
        "dra",
        "prepare",
        "--socket",
        &m.endpoint,
        "--claims",
        file.to_str().unwrap(),
        "--cdi-dir",
        &m.cdi,
        "-o",
        "json",
    ])
    .await;
    assert_eq!(r.expect_code(0).json()["claims"][0]["uid"], "uid-9");
}

/// Bad input to the mock: exit 2; a live socket is never taken over: exit 3.
#[tokio::test]
async fn mock_refuses_bad_input_and_live_sockets() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let long_pool = "p".repeat(100_000);
    for (args, needle) in [
        (vec!["Not_A_Name"], "DNS subdomain"),
        (vec![DRIVER, "--devices", "0"], "--devices"),
        (vec![DRIVER, "--devices", "1e20"], "invalid value"),
        (vec![DRIVER, "--devices", "2", "--devices-per-claim", "3"], "--devices-per-claim"),
        (vec![DRIVER, "--service", "v2"], "unknown DRA service"),
        (vec![DRIVER, "--unhealthy", "dev-9"], "not one of the devices"),
        (vec![DRIVER, "--health-interval", "0s"], "at least 100ms"),
        (vec![DRIVER, "--pool", &long_pool], "not a DNS subdomain"),
        (vec![DRIVER, "--request-name", ""], "--request-name"),
    ] {
        let mut full = vec!["dra", "mock", "--dir", dir];
        full.extend(args);
        let r = dpctl(&full).await;
        assert!(r.expect_code(2).stderr.contains(needle), "{needle}: {}", r.stderr);
    }
    let long = format!("{dir}/{}", "d".repeat(120));
    let r = dpctl(&["dra", "mock", DRIVER, "--dir", &long]).await;
    assert!(r.expect_code(2).stderr.contains("unix sockets allow at most"), "{}", r.stderr);
    let _m = mock(&sb, &[]).await;
    let r = dpctl(&["dra", "mock", DRIVER, "--dir", dir]).await;
    assert!(r.expect_code(3).stderr.contains("already served by a live process"), "{}", r.stderr);
}

fn vector(name: &str) -> String {
    format!("{}/tests/data/checkpoints/dra/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// dra_manager_state from the kubelet's own tests: 1.34 (no ShareID) and
/// 1.37 (ShareID) verify; a corrupt one is exit 1 with the kubelet's words.
#[tokio::test]
async fn checkpoint_verify_reads_dra_manager_state_of_1_34_to_1_37() {
    for (file, written_by) in [
        ("v1.34-one-claim.json", "1.34"),
        ("v1.37-share-id.json", "1.35 or later"),
        ("v1.37-two-claims.json", "1.35 or later"),
    ] {
        let r = dpctl(&["checkpoint", "verify", &vector(file), "-o", "json"]).await;
        let v = r.expect_code(0).json();
        assert_eq!(v["checksum_ok"], true, "{file}");
        assert_eq!(v["stored_checksum"], v["computed_checksum"]);
        assert!(v["written_by"].as_str().unwrap().starts_with(written_by), "{file}: {v}");
    }
    let r = dpctl(&["checkpoint", "verify", &vector("v1.34-corrupt-entries.json")]).await;
    r.expect_code(1);
    assert!(r.stdout.contains("checkpoint is corrupted") && r.stdout.contains("\"Entries\""), "{}", r.stdout);
    let r = dpctl(&["checkpoint", "show", &vector("v1.37-share-id.json"), "-o", "json"]).await;
    let v = r.expect_code(0).json();
    let dev = &v["claims"][0]["DriverState"]["test-driver.cdi.k8s.io"]["Devices"][0];
    assert_eq!(dev["ShareID"], "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa");
}

/// --dra finds the file in the kubelet root (the parent of --dir); a file
/// that does not parse fails verify (exit 1) and is bad input to show (2),
/// as the device checkpoint; a missing one is exit 2.
#[tokio::test]
async fn checkpoint_dra_flag_and_bad_files() {
    let sb = Sandbox::new();
    let plugins = sb.join("device-plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::copy(vector("v1.34-one-claim.json"), sb.join("dra_manager_state")).unwrap();
    let r = dpctl(&["checkpoint", "show", "--dra", "--dir", plugins.to_str().unwrap()]).await;
    assert!(r.expect_code(0).stdout.contains("default/example"), "{}", r.stdout);
    let bad = sb.join("dra_manager_state");
    std::fs::write(&bad, "{\"Data\": 5}").unwrap();
    let r = dpctl(&["checkpoint", "verify", bad.to_str().unwrap()]).await;
    assert!(r.expect_code(1).stdout.contains("not a DRA checkpoint"), "{}", r.stdout);
    let r = dpctl(&["checkpoint", "show", bad.to_str().unwrap()]).await;
    assert!(r.expect_code(2).stderr.contains("not a DRA checkpoint"), "{}", r.stderr);
    let r = dpctl(&["checkpoint", "verify", "--dra", "--dir", sb.path().join("x/y").to_str().unwrap()]).await;
    r.expect_code(2);
}

/// `dra check` on a well-behaved mock: every case passes (1.34-1.37 rules).
#[tokio::test]
async fn check_passes_a_well_behaved_driver() {
    let sb = Sandbox::new();
    let m = mock(&sb, &[]).await;
    let r =
        dpctl(&["dra", "check", "--driver", DRIVER, "--registry-dir", &m.registry, "--cdi-dir", &m.cdi, "-o", "json"])
            .await;
    let v = r.expect_code(0).json();
    assert_eq!(v["totals"]["passed"], 9, "{v}");
    assert_eq!(v["claim"]["namespace"], "dpctl-check");
    let published = v["results"].as_array().unwrap().iter().find(|c| c["name"] == "published").unwrap();
    assert_eq!(published["outcome"], "skip", "no API server to read slices from: {published}");
    assert!(published["evidence"].as_str().unwrap().contains("pass --kubeconfig"), "{published}");
    assert_eq!(v["checked"], true, "{v}");
}

/// `dra check` names each fault of a misbehaving driver under its case.
#[tokio::test]
async fn check_names_each_fault() {
    let sb = Sandbox::new();
    let m = mock(
        &sb,
        &[
            "--fault",
            "not-idempotent",
            "--fault",
            "health-unserved",
            "--request-name",
            "gpu/sub",
            "--unprepare-error",
            "busy",
        ],
    )
    .await;
    let r =
        dpctl(&["dra", "check", "--driver", DRIVER, "--registry-dir", &m.registry, "--cdi-dir", &m.cdi, "-o", "json"])
            .await;
    let v = r.expect_code(1).json();
    let outcome = |name: &str| {
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["outcome"].as_str().unwrap().to_string())
    };
    for failed in ["advertised-served", "request-names", "prepare-idempotent", "unprepare-idempotent"] {
        assert_eq!(outcome(failed).as_deref(), Some("fail"), "{failed}: {v}");
    }
    let idem = v["results"].as_array().unwrap().iter().find(|c| c["name"] == "prepare-idempotent").unwrap();
    assert!(idem["evidence"].as_str().unwrap().contains("then"), "other devices the second time: {idem}");
    for passed in ["registration", "socket-paths", "prepare", "cdi", "call-time"] {
        assert_eq!(outcome(passed).as_deref(), Some("pass"), "{passed}: {v}");
    }
    let sb = Sandbox::new();
    let m = mock(&sb, &["--fault", "missing-uid", "--fault", "unresolvable-cdi"]).await;
    let r = dpctl(&["dra", "check", "--driver", DRIVER, "--registry-dir", &m.registry, "--cdi-dir", &m.cdi]).await;
    r.expect_code(1);
    assert!(r.stdout.contains("NodePrepareResources skipped 1 ResourceClaims"), "{}", r.stdout);
}

/// dpctl's DRA protos against messages the kubelet's own generated types
/// (k8s.io/kubelet v0.37.2) encoded: each decodes into dpctl's type and
/// re-encodes byte for byte, and its JSON content encodes to the same bytes
/// with dpctl's descriptors (v1 share_id, v1beta1 without it, both health versions).
#[test]
fn dra_protos_match_the_kubelets_wire_vectors() {
    use dpctl::proto::dra::{health, v1, v1beta1};
    use prost::Message;
    fn rt<M: Message + Default>(b: &[u8]) -> Vec<u8> {
        M::decode(b).expect("decodes into the generated type").encode_to_vec()
    }
    let file: serde_json::Value = serde_json::from_str(include_str!("data/dra-wire-vectors.json")).unwrap();
    let pool = prost_reflect::DescriptorPool::decode(dpctl::proto::FILE_DESCRIPTOR_SET).unwrap();
    let vectors = file["vectors"].as_array().unwrap();
    assert_eq!(vectors.len(), 11);
    for v in vectors {
        let name = v["message"].as_str().unwrap();
        let hex = v["hex"].as_str().unwrap();
        let bytes: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        let short = name.trim_start_matches("k8s.io.kubelet.pkg.apis.dra.");
        let again = match short {
            "v1.NodePrepareResourcesRequest" => rt::<v1::NodePrepareResourcesRequest>(&bytes),
            "v1.NodePrepareResourcesResponse" => rt::<v1::NodePrepareResourcesResponse>(&bytes),
            "v1.NodeUnprepareResourcesRequest" => rt::<v1::NodeUnprepareResourcesRequest>(&bytes),
            "v1.NodeUnprepareResourcesResponse" => rt::<v1::NodeUnprepareResourcesResponse>(&bytes),
            "v1beta1.NodePrepareResourcesRequest" => rt::<v1beta1::NodePrepareResourcesRequest>(&bytes),
            "v1beta1.NodePrepareResourcesResponse" => rt::<v1beta1::NodePrepareResourcesResponse>(&bytes),
            "v1beta1.NodeUnprepareResourcesResponse" => rt::<v1beta1::NodeUnprepareResourcesResponse>(&bytes),
            "v1alpha1.NodeWatchResourcesRequest" => rt::<health::v1alpha1::NodeWatchResourcesRequest>(&bytes),
            "v1alpha1.NodeWatchResourcesResponse" => rt::<health::v1alpha1::NodeWatchResourcesResponse>(&bytes),
            "v1.NodeWatchResourcesResponse" => rt::<health::v1::NodeWatchResourcesResponse>(&bytes),
            other => panic!("vector for a message this test does not know: {other}"),
        };
        let desc = pool.get_message_by_name(name).unwrap_or_else(|| panic!("{name} is not in dpctl's descriptors"));
        let m = prost_reflect::DynamicMessage::deserialize(desc.clone(), &v["content"])
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // Go writes an empty map value as an explicit empty field (`12 00`),
        // prost leaves it out: the same message, not the same bytes.
        if short == "v1beta1.NodeUnprepareResourcesResponse" {
            let decode = |b: &[u8]| prost_reflect::DynamicMessage::decode(desc.clone(), b).unwrap();
            assert_eq!(decode(&again), decode(&bytes), "{name}: decodes differently");
            assert_eq!(m, decode(&bytes), "{name}: JSON content differs");
            continue;
        }
        assert_eq!(again, bytes, "{name}: re-encoded bytes differ");
        assert_eq!(m.encode_to_vec(), bytes, "{name}: JSON content encodes differently");
    }
    let share = v1::NodePrepareResourcesResponse::decode(&*{
        let h = vectors[1]["hex"].as_str().unwrap();
        (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect::<Vec<u8>>()
    })
    .unwrap();
    assert_eq!(share.claims["u-1"].devices[0].share_id.as_deref(), Some("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"));
}

/// `--claims` also reads ResourceClaim documents (a kubelet-sim pod
/// manifest): the claims it holds are prepared, other documents skipped.
#[tokio::test]
async fn a_claims_file_of_resource_claim_documents_names_the_claims() {
    let sb = Sandbox::new();
    let m = mock(&sb, &[]).await;
    let f = sb.join("pod.yaml");
    std::fs::write(
        &f,
        "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n---\nkind: ResourceClaim\nmetadata: {name: gpu, namespace: team-a, uid: uid-9}\n",
    )
    .unwrap();
    let f = f.to_str().unwrap();
    let r = dpctl(&["dra", "prepare", "--socket", &m.endpoint, "--claims", f, "--cdi-dir", &m.cdi, "-o", "json"]).await;
    let v = r.expect_code(0).json();
    assert_eq!((v["claims"][0]["claim"].as_str(), v["claims"][0]["uid"].as_str()), (Some("team-a/gpu"), Some("uid-9")));
}

/// An answer with no device and no error: the kubelet accepts it (its
/// containers get no device of the claim), so prepare exits 0 but says so,
/// in the table and in dra check's evidence.
#[tokio::test]
async fn a_claim_prepared_with_no_device_is_accepted_with_a_warning() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--fault", "no-device"]).await;
    let r = dpctl(&["dra", "prepare", "--socket", &m.endpoint, "--claim", "gpu/uid-1"]).await;
    let out = &r.expect_code(0).stdout;
    assert!(out.contains("accepted, no device"), "{out}");
    assert!(out.contains("warning: uid-1: prepared with no device and no error: the kubelet accepts this"), "{out}");
    let v = dpctl(&["dra", "prepare", "--socket", &m.endpoint, "--claim", "gpu/uid-1", "-o", "json"]).await.json();
    assert_eq!((v["ok"].as_bool(), v["claims"][0]["warnings"].as_array().map(Vec::len)), (Some(true), Some(1)), "{v}");
    let r = dpctl(&["dra", "check", "--driver", DRIVER, "--registry-dir", &m.registry, "--cdi-dir", &m.cdi]).await;
    assert!(r.stdout.contains("warning: prepared with no device"), "{}", r.stdout);
}

/// `-v` shows a `dra` call on the wire as it shows `plugin` calls: the
/// method, the request and the answer, decoded.
#[tokio::test]
async fn dra_calls_show_on_the_wire_with_v() {
    let sb = Sandbox::new();
    let m = mock(&sb, &[]).await;
    let r =
        dpctl(&["-v", "dra", "prepare", "--socket", &m.endpoint, "--claim", "gpu/uid-1", "--cdi-dir", &m.cdi]).await;
    let all = format!("{}{}", r.expect_code(0).stdout, r.stderr);
    assert!(all.contains("> #1 call /k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"), "{all}");
    assert!(all.contains(r#"> #1 request {"claims":[{"name":"gpu","namespace":"default","uid":"uid-1"}]}"#), "{all}");
    assert!(all.contains("< #1 status OK"), "{all}");
}

/// Waits for the `-v` wire tap's line of `rpc` on `child`'s stderr: the
/// call is on its way to the driver.
async fn sent(child: &mut Child, rpc: &str) {
    loop {
        match child.stderr_line().await {
            Some(l) if l.contains(rpc) => return,
            Some(_) => {}
            None => panic!("stderr closed before {rpc} was sent"),
        }
    }
}

/// Ctrl-C or SIGTERM while a driver holds Prepare (or Unprepare) unanswered:
/// `dra prepare|unprepare` stop at once and say what was sent and that no
/// answer came, exit 1 (before: the default action, exit 130 or 143, no report).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_ends_a_prepare_the_driver_holds_with_what_was_sent() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--prepare-delay", "600s"]).await;
    // Unprepare: a server that completes the HTTP/2 handshake and never answers a call.
    use crate::support::silent::{Silence, SilentServer};
    let silent = SilentServer::start(&sb.join("silent.sock"), Silence::Handshake);
    let silent = silent.path.to_str().unwrap().to_string();
    for (verb, socket, rpc, sigint, json) in [
        ("prepare", &m.endpoint, "NodePrepareResources", true, false),
        ("unprepare", &silent, "NodeUnprepareResources", false, true),
    ] {
        let mut args = vec!["dra", verb, "--socket", socket, "--claim", "default/gpu/uid-1", "-v"];
        if json {
            args.extend(["-o", "json"]);
        }
        let mut c = Child::dpctl(&args).patience(std::time::Duration::from_secs(5));
        sent(&mut c, rpc).await;
        let asked = std::time::Instant::now();
        if sigint {
            c.interrupt()
        } else {
            c.terminate()
        }
        let code = c.wait().await;
        assert!(asked.elapsed() < std::time::Duration::from_secs(5), "{verb}: {:?}", asked.elapsed());
        let out = c.rest().await.join("\n");
        assert_eq!(code, 1, "{verb}: {out}\n{}", c.stderr());
        if json {
            let v: serde_json::Value = serde_json::from_str(&out).expect("a JSON report");
            assert_eq!(
                (&v["interrupted"], &v["ok"], &v["claims"][0]),
                (&true.into(), &false.into(), &"default/gpu/uid-1".into()),
                "{v}"
            );
        } else {
            assert!(out.contains("INTERRUPTED") && out.contains(rpc) && out.contains("default/gpu/uid-1"), "{out}");
            assert!(out.contains("no answer after"), "{out}");
        }
    }
}

/// Ctrl-C during `dra check` while the driver holds Prepare: the check
/// stops at once with the registration cases it judged, the call cases
/// skipped as interrupted, INTERRUPTED, exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_ends_dra_check_with_what_it_judged() {
    let sb = Sandbox::new();
    let m = mock(&sb, &["--prepare-delay", "600s"]).await;
    let reg = format!("{}/{DRIVER}-reg.sock", m.registry);
    let mut c =
        Child::dpctl(&["dra", "check", "--registration", &reg, "-v"]).patience(std::time::Duration::from_secs(5));
    sent(&mut c, "NodePrepareResources").await;
    let asked = std::time::Instant::now();
    c.interrupt();
    let code = c.wait().await;
    assert!(asked.elapsed() < std::time::Duration::from_secs(5), "{:?}", asked.elapsed());
    let out = c.rest().await.join("\n");
    assert_eq!(code, 1, "{out}\n{}", c.stderr());
    assert!(out.contains("INTERRUPTED"), "{out}");
    let prepare = out.lines().find(|l| l.starts_with("prepare ")).unwrap_or_default();
    assert!(prepare.contains("skip") && prepare.contains("interrupted"), "{out}");
    assert!(out.lines().any(|l| l.contains("pass")), "the registration cases judged before it: {out}");
}
