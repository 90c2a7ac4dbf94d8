//! `dpctl apiserver` as a DRA driver author runs it: the API a driver built
//! on the upstream `kubeletplugin` helper needs, with no cluster. The Go
//! driver in conformance/dra-driver (built by `conformance/build.sh`) is the
//! peer: real client-go, real helper. Without it that test prints one
//! `SKIPPED` line (one for the suite) and passes, except under `CI=true`, where
//! it fails. The wire-level tests below speak HTTP themselves and always run.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::support::{Child, Sandbox, WAIT, dpctl};

const DRIVER: &str = "gpu.dpctl.example";
const CLAIM_UID: &str = "4f5c-11aa";
const NODE_UID: &str = "node-uid-1";

/// A Node, a pod and a claim allocated to the driver and reserved for the pod.
fn objects() -> String {
    format!(
        "\
apiVersion: v1
kind: Node
metadata: {{name: node-1, uid: {NODE_UID}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: pod-1, namespace: team-a, uid: pod-uid-1}}
spec: {{nodeName: node-1, containers: [{{name: c, image: busybox}}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: gpu, namespace: team-a, uid: {CLAIM_UID}}}
spec:
  devices:
    requests: [{{name: gpu, exactly: {{deviceClassName: gpu.dpctl.example}}}}]
status:
  allocation:
    devices:
      results: [{{request: gpu, driver: {DRIVER}, pool: node-1, device: gpu-1}}]
  reservedFor: [{{resource: pods, name: pod-1, uid: pod-uid-1}}]
"
    )
}

/// A running `dpctl apiserver -o json` and its address.
struct Api {
    child: Child,
    dir: PathBuf,
    kubeconfig: String,
    addr: Addr,
}

/// Where the server listens and the bearer token its kubeconfig holds.
#[derive(Clone, Debug)]
struct Addr {
    host: String,
    token: String,
}

impl Addr {
    fn of(server: &str, kubeconfig: &str) -> Addr {
        let text = std::fs::read_to_string(kubeconfig).unwrap();
        let token = text.lines().find_map(|l| l.trim().strip_prefix("token: ")).expect("a token in the kubeconfig");
        Addr { host: server.trim_start_matches("http://").to_string(), token: token.trim_matches('"').to_string() }
    }
}

async fn apiserver(sb: &Sandbox) -> Api {
    let file = sb.join("objects.yaml");
    std::fs::write(&file, objects()).unwrap();
    let dir = sb.join("api");
    let mut child =
        Child::dpctl(&["apiserver", "--dir", dir.to_str().unwrap(), "--objects", file.to_str().unwrap(), "-o", "json"]);
    let serving = child.event("serving").await;
    let server = serving["server"].as_str().unwrap();
    assert_eq!(serving["objects"], 3, "{serving}");
    let kubeconfig = serving["kubeconfig"].as_str().unwrap().to_string();
    Api { addr: Addr::of(server, &kubeconfig), kubeconfig, dir, child }
}

/// One HTTP/1.1 request; the status code and the JSON body.
async fn http(addr: &Addr, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
    let Addr { host, token } = addr;
    let mut s = tokio::time::timeout(WAIT, tokio::net::TcpStream::connect(host)).await.unwrap().unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut raw)).await.expect("the answer within the bound").unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let code: u16 = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

async fn get(addr: &Addr, path: &str) -> (u16, Value) {
    http(addr, "GET", path, "application/json", b"").await
}

async fn send(addr: &Addr, method: &str, path: &str, body: &Value) -> (u16, Value) {
    http(addr, method, path, "application/json", body.to_string().as_bytes()).await
}

const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";

fn slice(name: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": DRIVER, "nodeName": "node-1", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0"}]},
    })
}

/// A watch: its lines as they come.
struct Watch {
    lines: tokio::io::Lines<BufReader<tokio::net::TcpStream>>,
}

impl Watch {
    async fn open(addr: &Addr, query: &str) -> Watch {
        let Addr { host, token } = addr;
        let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
        let head = format!(
            "GET {SLICES}?watch=true&{query} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        );
        s.write_all(head.as_bytes()).await.unwrap();
        let mut lines = BufReader::new(s).lines();
        // Status line and headers.
        loop {
            let l = tokio::time::timeout(WAIT, lines.next_line()).await.unwrap().unwrap().unwrap();
            if l.is_empty() {
                break;
            }
            if l.starts_with("HTTP/1.1") {
                assert!(l.contains(" 200 "), "{l}");
            }
        }
        Watch { lines }
    }

    /// The next event (chunk-size lines of the chunked encoding skipped).
    async fn event(&mut self) -> Value {
        loop {
            let l = tokio::time::timeout(WAIT, self.lines.next_line())
                .await
                .expect("an event within the bound")
                .unwrap()
                .unwrap();
            if l.starts_with('{') {
                return serde_json::from_str(&l).unwrap();
            }
        }
    }
}

/// The Go driver on the real `kubeletplugin` helper and client-go, pointed
/// at dpctl apiserver's kubeconfig: it starts, registers on
/// plugins_registry (`dpctl dra info`), publishes its slice (owned by the
/// Node whose UID it read from the API; read back from the record), and
/// `dpctl dra prepare` of the claim the server serves returns its CDI IDs
/// (the helper GETs the claim first); unprepare removes the spec. A claim
/// whose UID differs from the served one is refused by the helper.
#[tokio::test]
async fn a_helper_built_driver_registers_publishes_and_prepares_against_dpctl_apiserver() {
    let Some(bin) = crate::support::go_built::dra_driver_or_skip("apiserver") else { return };
    let sb = Sandbox::new();
    let mut api = apiserver(&sb).await;
    let (registry, cdi) = (sb.join("plugins_registry"), sb.join("cdi"));
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["--kubeconfig", &api.kubeconfig, "--node-name", "node-1", "--driver-name", DRIVER]);
    cmd.arg("--registry-dir").arg(&registry).arg("--plugin-dir").arg(sb.join("plugin")).arg("--cdi-dir").arg(&cdi);
    let mut driver = Child::spawn(cmd, crate::support::Stderr::Keep).patience(Duration::from_secs(30));
    driver.line_with("started").await;
    // The helper's ResourceSlice controller creates the slice: the server shows the write.
    let write = api.child.event("write").await;
    assert_eq!(
        (write["verb"].as_str(), write["resource"].as_str()),
        (Some("create"), Some("resourceslices")),
        "{write}"
    );
    let r = dpctl(&["apiserver", "slices", "--dir", api.dir.to_str().unwrap(), "-o", "json"]).await;
    let slices = r.expect_code(0).json();
    let s = &slices[0];
    assert_eq!((s["spec"]["driver"].as_str(), s["spec"]["nodeName"].as_str()), (Some(DRIVER), Some("node-1")), "{s}");
    let devices: Vec<&str> =
        s["spec"]["devices"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(devices, ["gpu-0", "gpu-1"]);
    assert_eq!(s["metadata"]["ownerReferences"][0]["uid"], NODE_UID, "the controller GETs the Node for its UID: {s}");
    let reg = registry.to_str().unwrap();
    let info = dpctl(&["dra", "info", "--driver", DRIVER, "--registry-dir", reg, "-o", "json"]).await;
    assert_eq!(info.expect_code(0).json()["chosen_node_service"], "v1.DRAPlugin");
    let call = |verb: &'static str, claim: String| {
        let (reg, cdi) = (reg.to_string(), cdi.to_str().unwrap().to_string());
        async move {
            let args = [
                "dra",
                verb,
                "--driver",
                DRIVER,
                "--registry-dir",
                &reg,
                "--claim",
                &claim,
                "--cdi-dir",
                &cdi,
                "-o",
                "json",
            ];
            dpctl(&args).await
        }
    };
    let prep = call("prepare", format!("team-a/gpu/{CLAIM_UID}")).await;
    let v = prep.expect_code(0).json();
    let id = &v["claims"][0]["devices"][0]["cdi_device_ids"][0];
    let want = format!("{DRIVER}/gpu={CLAIM_UID}-gpu-1");
    assert_eq!((id["id"].as_str(), id["status"].as_str()), (Some(want.as_str()), Some("resolved")), "{v}");
    let spec = cdi.join(format!("{DRIVER}-{CLAIM_UID}.json"));
    assert!(spec.is_file());
    call("unprepare", format!("team-a/gpu/{CLAIM_UID}")).await.expect_code(0);
    assert!(!spec.exists(), "unprepare removes the CDI spec");
    // A claim the server does not hold: the helper's client walks v1, v1beta2 and v1beta1 (each a
    // 404 Status) and reports the last; the next call starts at v1 again and succeeds.
    let missing = call("prepare", "team-a/none/uid-x".into()).await;
    assert_ne!(missing.code, 0);
    let want = "retrieve claim team-a/none: the server could not find the requested resource";
    assert!(missing.stderr.contains(want), "{}", missing.stderr);
    call("prepare", format!("team-a/gpu/{CLAIM_UID}")).await.expect_code(0);
    call("unprepare", format!("team-a/gpu/{CLAIM_UID}")).await.expect_code(0);
    let replaced = call("prepare", "team-a/gpu/another-uid".into()).await;
    assert_ne!(replaced.code, 0);
    assert!(replaced.stderr.contains("claim team-a/gpu got replaced"), "{}", replaced.stderr);
    driver.stop().await;
    api.child.terminate();
    let stopped = api.child.event("stopped").await;
    assert_eq!(stopped["slices"].as_array().map(Vec::len), Some(1), "{stopped}");
    assert_eq!(api.child.wait().await, 0);
}

/// What client-go relies on, on the wire: the API server's 404 Status for
/// versions it does not serve (the helper's v1 → v1beta2 → v1beta1
/// fallback), NotFound for a missing object, resourceVersions that move on
/// every write, a Conflict for a stale update, and watches that replay from
/// a resourceVersion or stream the current state with the bookmark that
/// ends WatchList's initial events.
#[tokio::test]
async fn client_go_semantics_on_the_wire() {
    let sb = Sandbox::new();
    let mut api = apiserver(&sb).await;
    let a = api.addr.clone();
    let (code, v) = get(&a, "/apis/resource.k8s.io/v1beta2/resourceslices").await;
    assert_eq!((code, v["kind"].as_str(), v["reason"].as_str()), (404, Some("Status"), Some("NotFound")), "{v}");
    let (code, v) = get(&a, "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/nope").await;
    assert_eq!((code, v["details"]["kind"].as_str()), (404, Some("resourceclaims")), "{v}");
    let (code, claim) = get(&a, "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/gpu").await;
    assert_eq!((code, claim["metadata"]["uid"].as_str()), (200, Some(CLAIM_UID)), "{claim}");
    let (_, groups) = get(&a, "/apis").await;
    assert_eq!(groups["groups"][0]["preferredVersion"]["groupVersion"], "resource.k8s.io/v1");
    let (_, list) = get(&a, SLICES).await;
    let rv0: u64 = list["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let mut from_rv = Watch::open(&a, &format!("resourceVersion={rv0}&fieldSelector=spec.driver%3D{DRIVER}")).await;
    let (code, created) = send(&a, "POST", SLICES, &slice("s1")).await;
    assert_eq!(code, 201, "{created}");
    let rv1: u64 = created["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert!(rv1 > rv0);
    let ev = from_rv.event().await;
    assert_eq!((ev["type"].as_str(), ev["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("s1")));
    let mut stale = created.clone();
    stale["spec"]["devices"] = json!([{"name": "gpu-9"}]);
    let (code, _) = send(&a, "PUT", &format!("{SLICES}/s1"), &stale).await;
    assert_eq!(code, 200);
    let (code, v) = send(&a, "PUT", &format!("{SLICES}/s1"), &stale).await;
    assert_eq!((code, v["reason"].as_str()), (409, Some("Conflict")), "a stale resourceVersion: {v}");
    assert_eq!(from_rv.event().await["type"], "MODIFIED");
    let mut list_watch =
        Watch::open(&a, "sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan").await;
    assert_eq!(list_watch.event().await["type"], "ADDED");
    let end = list_watch.event().await;
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    let (code, _) = send(&a, "DELETE", &format!("{SLICES}/s1"), &json!({"preconditions": {"uid": "wrong"}})).await;
    assert_eq!(code, 409, "a UID precondition that fails");
    let (code, v) = send(&a, "DELETE", &format!("{SLICES}/s1"), &json!({})).await;
    assert_eq!((code, v["status"].as_str()), (200, Some("Success")), "{v}");
    assert_eq!(list_watch.event().await["type"], "DELETED");
    let (code, v) = send(&a, "POST", "/api/v1/nodes", &json!({"metadata": {"name": "n2"}})).await;
    assert_eq!((code, v["reason"].as_str()), (405, Some("MethodNotAllowed")), "the file's objects are read-only");
    // Every write is in the record, in order.
    let r = dpctl(&["apiserver", "writes", "--dir", api.dir.to_str().unwrap(), "-o", "json"]).await;
    let verbs: Vec<String> =
        r.expect_code(0).json().as_array().unwrap().iter().map(|w| w["verb"].as_str().unwrap().to_string()).collect();
    assert_eq!(verbs, ["create", "update", "delete"]);
    api.child.interrupt();
    assert_eq!(api.child.event("stopped").await["writes"], 3);
}

/// A malformed objects file is bad input: exit 2, naming the file, the
/// object and what is wrong, before anything is served or written.
#[tokio::test]
async fn a_malformed_objects_file_is_refused_with_exit_2() {
    let sb = Sandbox::new();
    let cases: &[(&str, &str)] = &[
        ("apiVersion: v1\nkind: Node\nmetadata: {name: [unclosed\n", "not JSON or YAML"),
        (
            "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: a}\n",
            "only resource.k8s.io/v1 is served",
        ),
        ("apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n", "v1 Secret is not served"),
        ("apiVersion: v1\nkind: Node\nmetadata: {name: Not_A_Name}\n", "not a DNS subdomain"),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n",
            "named twice",
        ),
        (
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nstatus: {allocation: {devices: {results: [{request: r}]}}}\n",
            "results[0].driver is required",
        ),
        ("", "no objects"),
        ("42\n", "not an object"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let file = sb.join(&format!("bad-{i}.yaml"));
        std::fs::write(&file, text).unwrap();
        let dir = sb.join(&format!("api-{i}"));
        let r = dpctl(&["apiserver", "--dir", dir.to_str().unwrap(), "--objects", file.to_str().unwrap()]).await;
        r.expect_code(2);
        assert!(r.stderr.contains(&format!("--objects {}", file.display())), "names the file: {}", r.stderr);
        assert!(r.stderr.contains(want), "case {i}: want {want:?} in {}", r.stderr);
        assert!(!dir.join("kubeconfig").exists(), "nothing written for bad input");
    }
    // A 100k-character name is refused without echoing it whole.
    let long = sb.join("long.yaml");
    std::fs::write(&long, format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {}}}\n", "a".repeat(100_000)))
        .unwrap();
    let r = dpctl(&["apiserver", "--dir", sb.join("x").to_str().unwrap(), "--objects", long.to_str().unwrap()]).await;
    assert!(r.expect_code(2).stderr.contains("not a DNS subdomain") && r.stderr.len() < 1000, "{}", r.stderr.len());
    let r =
        dpctl(&["apiserver", "--dir", sb.join("x").to_str().unwrap(), "--objects", sb.path().to_str().unwrap()]).await;
    assert!(r.expect_code(2).stderr.contains("not a regular file"), "{}", r.stderr);
}

/// Flags and files in the way: a non-loopback address (the server has no
/// authentication), a kubeconfig dpctl did not write (never overwritten),
/// a query of a directory with no record, and no --objects.
#[tokio::test]
async fn bad_flags_and_foreign_files_are_refused() {
    let sb = Sandbox::new();
    let file = sb.join("objects.yaml");
    std::fs::write(&file, objects()).unwrap();
    let (f, d) = (file.to_str().unwrap(), sb.join("api"));
    let d = d.to_str().unwrap();
    let r = dpctl(&["apiserver", "--dir", d, "--objects", f, "--listen", "0.0.0.0:0"]).await;
    assert!(r.expect_code(2).stderr.contains("not a loopback address"), "{}", r.stderr);
    let r = dpctl(&["apiserver", "--dir", d, "--objects", f, "--listen", "1e20"]).await;
    r.expect_code(2);
    let mine = sb.join("my-kubeconfig");
    std::fs::write(&mine, "apiVersion: v1\nkind: Config\n").unwrap();
    let r = dpctl(&["apiserver", "--dir", d, "--objects", f, "--kubeconfig-out", mine.to_str().unwrap()]).await;
    assert!(r.expect_code(2).stderr.contains("was not written by dpctl apiserver"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "apiVersion: v1\nkind: Config\n");
    let r = dpctl(&["apiserver", "--dir", d, "--objects", f, "--kubeconfig-out", sb.path().to_str().unwrap()]).await;
    assert!(r.expect_code(2).stderr.contains("is a directory"), "{}", r.stderr);
    let r = dpctl(&["apiserver", "slices", "--dir", sb.join("empty").to_str().unwrap()]).await;
    assert!(r.expect_code(2).stderr.contains("run `dpctl apiserver --dir"), "{}", r.stderr);
    let r = dpctl(&["apiserver", "--dir", d]).await;
    assert!(r.expect_code(2).stderr.contains("--objects FILE are required"), "{}", r.stderr);
}

/// GET `path` as user nobody (uid 65534), with `token` unless empty: the
/// raw answer.
fn as_nobody(host: &str, path: &str, token: &str) -> String {
    use std::os::unix::process::CommandExt;
    let (ip, port) = host.rsplit_once(':').unwrap();
    let auth = if token.is_empty() { String::new() } else { format!("Authorization: Bearer {token}\\r\\n") };
    let script = format!(
        "exec 3<>/dev/tcp/{ip}/{port}; printf 'GET {path} HTTP/1.1\\r\\nHost: x\\r\\n{auth}Connection: close\\r\\n\\r\\n' >&3; timeout 10 cat <&3"
    );
    let out = std::process::Command::new("bash").arg("-c").arg(script).uid(65534).gid(65534).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A slice whose one device carries a string attribute of `bytes` bytes.
fn big_slice(name: &str, bytes: usize) -> Value {
    let mut s = slice(name);
    s["spec"]["devices"] = json!([{"name": "gpu-0", "attributes": {"blob": {"string": "x".repeat(bytes)}}}]);
    s
}

/// The server answers its own user and the kubeconfig's token holder only
/// (another user gets a 401 Status; the kubeconfig is 0600), bounds what it keeps as the real API
/// server does (a body over 3 MiB: 413; an object over etcd's 1.5 MiB: 500
/// with etcd's words; a watch from a resourceVersion compacted away: 200
/// and one ERROR event with the 410 Expired Status, so client-go lists
/// again), and refuses a list's malformed resourceVersion as a watch's.
#[tokio::test]
async fn only_its_user_or_the_token_holder_is_answered_and_memory_is_bounded_like_the_api_servers() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let mut api = apiserver(&sb).await;
    let a = api.addr.clone();
    let mode = std::fs::metadata(&api.kubeconfig).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the kubeconfig holds the token");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Another local user (nobody), without the token, then with it.
        let answer = as_nobody(&a.host, SLICES, "");
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
        assert!(answer.contains(r#""reason":"Unauthorized""#), "{answer}");
        assert!(as_nobody(&a.host, SLICES, &a.token).starts_with("HTTP/1.1 200"));
    }
    let (code, v) = get(&a, &format!("{SLICES}?resourceVersion=abc")).await;
    assert_eq!((code, v["reason"].as_str()), (400, Some("BadRequest")), "a list, as a watch: {v}");
    let body = big_slice("too-big-body", 3 * 1024 * 1024).to_string();
    let (code, v) = http(&a, "POST", SLICES, "application/json", body.as_bytes()).await;
    assert_eq!((code, v["reason"].as_str()), (413, Some("RequestEntityTooLarge")), "{v}");
    let (code, v) = send(&a, "POST", SLICES, &big_slice("two-mb", 2_000_000)).await;
    assert_eq!((code, v["message"].as_str()), (500, Some("etcdserver: request is too large")), "{v}");
    let (code, created) = send(&a, "POST", SLICES, &big_slice("big", 1_400_000)).await;
    assert_eq!(code, 201, "an object under etcd's limit is stored");
    let first: u64 = created["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let mut obj = created;
    for _ in 0..8 {
        let (code, o) = send(&a, "PUT", &format!("{SLICES}/big"), &obj).await;
        assert_eq!(code, 200);
        obj = o;
    }
    let mut old = Watch::open(&a, &format!("resourceVersion={first}")).await;
    let ev = old.event().await;
    assert_eq!((ev["type"].as_str(), ev["object"]["code"].as_u64()), (Some("ERROR"), Some(410)), "{ev}");
    assert_eq!(ev["object"]["reason"], "Expired");
    assert!(ev["object"]["message"].as_str().unwrap().starts_with(&format!("too old resource version: {first} (")));
    api.child.interrupt();
    assert_eq!(api.child.event("stopped").await["writes"], 9);
}

/// An output nobody reads never holds the server up: with `-o json` and
/// stdout unread, writes of 1 MB objects (each shown as one line, far past
/// the pipe's 64 KiB) are answered, reads too, and SIGTERM stops it.
#[tokio::test]
async fn an_unread_output_never_blocks_serving_and_sigterm_stops_it() {
    let sb = Sandbox::new();
    let mut api = apiserver(&sb).await;
    let a = api.addr.clone();
    let (code, mut obj) = send(&a, "POST", SLICES, &big_slice("big", 1_000_000)).await;
    assert_eq!(code, 201);
    for _ in 0..5 {
        let (code, o) = send(&a, "PUT", &format!("{SLICES}/big"), &obj).await;
        assert_eq!(code, 200, "a write is answered while nobody reads the output");
        obj = o;
    }
    let (code, _) = get(&a, &format!("{SLICES}/big")).await;
    assert_eq!(code, 200);
    api.child.terminate();
    assert_eq!(api.child.wait().await, 0, "SIGTERM stops it within the bound");
}
