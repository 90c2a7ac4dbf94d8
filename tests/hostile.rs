//! Hostile clients: idle connections, control-frame floods and silent
//! servers must not lock anyone out or hang anyone.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::support::fake_plugin::{Behaviour, FakePlugin, device, register};
use crate::support::{Child, Sandbox, dpctl, within};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The client preface and an empty SETTINGS frame: all an idle client sends.
fn hello() -> Vec<u8> {
    let mut b = PREFACE.to_vec();
    b.extend(frame(4, 0, 0, &[]));
    b
}

/// Raises this process's soft limit on open files to `want` (within the
/// hard limit): the test holds a thousand connections, and shares the
/// process with the servers it runs in-process.
fn raise_fd_limit(want: u64) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit read or write one rlimit struct we own.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        if lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        }
    }
}

/// Opens `n` connections to `path` that do nothing more than the HTTP/2
/// handshake (`h2`) or nothing at all, and holds them.
async fn hold_idle(path: &Path, n: usize, h2: bool) -> Vec<UnixStream> {
    raise_fd_limit(4096);
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        let mut c = within("an idle connection", UnixStream::connect(path))
            .await
            .unwrap_or_else(|e| panic!("connection {i} to {}: {e}", path.display()));
        if h2 {
            // The server may already have closed it to make room: that is the point.
            let _ = c.write_all(&hello()).await;
        }
        held.push(c);
    }
    held
}

const IDLE: usize = 1000;

// 256 clients that sent only the preface and SETTINGS used to make a plugin
// server refuse every new connection for as long as they were held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_connections_do_not_lock_out_a_plugin_server() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let mut mock = Child::dpctl(&[
        "mock-plugin",
        "--dir",
        dir,
        "--resource",
        "example.com/gpu",
        "--devices",
        "2",
        "--no-register",
        "-o",
        "json",
    ]);
    mock.event("serving").await;
    let socket = sb.join("example-gpu.sock");
    let _held = hold_idle(&socket, IDLE, true).await;
    let r =
        dpctl(&["plugin", "call", "options", "--socket", socket.to_str().unwrap(), "--connect-timeout", "5s"]).await;
    r.expect_code(0);
}

// The same on the sim's kubelet.sock (Register), its PodResources socket
// (`dpctl podresources list`) and its control socket (`kubelet-sim status`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_connections_do_not_lock_out_the_kubelet_sockets() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let mut sim = Child::dpctl(&["kubelet-sim", "-o", "json", "--dir", dir]);
    sim.event("started").await;

    let kubelet = sb.join("kubelet.sock");
    let held = hold_idle(&kubelet, IDLE, true).await;
    let plugin = FakePlugin::new(vec![device("d0", "Healthy", None)], Behaviour::default());
    let _stop = plugin.serve(&sb.join("a.sock")).await;
    within(
        "Register while idle connections are held",
        register(&kubelet, "v1beta1", "example.com/gpu", "a.sock", None),
    )
    .await
    .expect("Register succeeds");
    drop(held);

    let podresources = sb.join("pod-resources.sock");
    let held = hold_idle(&podresources, IDLE, true).await;
    let r = dpctl(&["podresources", "list", "--socket", podresources.to_str().unwrap(), "-o", "json"]).await;
    r.expect_code(0);
    drop(held);

    let control = dpctl::paths::control_socket(sb.path(), "kubelet-sim");
    assert!(control.exists(), "{}", control.display());
    let _held = hold_idle(&control, IDLE, false).await;
    let r = dpctl(&["kubelet-sim", "status", "--dir", dir]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("example.com/gpu"), "{}", r.stdout);
}

/// Reads frames until the server closes; returns the GOAWAY seen, if any
/// (error code, debug data).
async fn goaway_then_close(conn: &mut UnixStream) -> Option<(u32, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let mut goaway = None;
    loop {
        let n = conn.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return goaway;
        }
        buf.extend_from_slice(&chunk[..n]);
        while buf.len() >= 9 {
            let len = (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
            if buf.len() < 9 + len {
                break;
            }
            if buf[3] == 7 && len >= 8 {
                let code = u32::from_be_bytes([buf[13], buf[14], buf[15], buf[16]]);
                goaway = Some((code, String::from_utf8_lossy(&buf[17..9 + len]).into_owned()));
            }
            buf.drain(..9 + len);
        }
    }
}

async fn serve_plugin(path: &Path, limits: dpctl::transport::ConnectionLimits) -> tokio::sync::oneshot::Sender<()> {
    use dpctl::proto::deviceplugin::v1beta1::device_plugin_server::DevicePluginServer;
    let plugin = FakePlugin::new(vec![device("d0", "Healthy", None)], Behaviour::default());
    let listener = dpctl::transport::bind(path, &Default::default()).await.unwrap();
    let router = dpctl::transport::server_builder().add_service(DevicePluginServer::new(plugin));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(dpctl::transport::serve_with(router, listener, limits, async {
        let _ = rx.await;
    }));
    tx
}

// A connection with no open stream for the idle timeout gets GOAWAY
// (NO_ERROR) and is closed; one with an open ListAndWatch stream is kept, and
// a client whose idle connection was closed dials again for its next call.
#[tokio::test]
async fn idle_connections_get_goaway_at_the_deadline_and_busy_ones_stay() {
    use futures_util::StreamExt;
    let sb = Sandbox::new();
    let path = sb.join("i.sock");
    let idle_timeout = Duration::from_millis(400);
    let limits = dpctl::transport::ConnectionLimits { idle_timeout, ..Default::default() };
    let _stop = serve_plugin(&path, limits).await;
    let started = Instant::now();
    let mut idle = UnixStream::connect(&path).await.unwrap();
    idle.write_all(&hello()).await.unwrap();
    let seen = within("the idle connection to be closed", goaway_then_close(&mut idle)).await;
    assert_eq!(seen, Some((0, "max_idle".to_string())));
    assert!(started.elapsed() >= idle_timeout, "{:?}", started.elapsed());

    let client = dpctl::plugin_client::PluginClient::connect(&path, &Default::default()).await.unwrap();
    let mut watch = Box::pin(client.list_and_watch().await.unwrap());
    within("the first list", watch.next()).await.unwrap().unwrap();
    tokio::time::sleep(idle_timeout * 3).await;
    // The stream is still open: a call on the same connection works at once.
    client.options().await.unwrap();
    drop(watch);
    // Now idle: closed at the deadline; the client's next call dials again.
    tokio::time::sleep(idle_timeout * 3).await;
    client.options().await.expect("the client dials again after GOAWAY");
}

// At the cap, a new connection takes the place of the oldest idle one (which
// gets GOAWAY); when every connection is busy, the newcomer is closed.
#[tokio::test]
async fn at_the_cap_the_oldest_idle_connection_makes_room() {
    use futures_util::StreamExt;
    let sb = Sandbox::new();
    let path = sb.join("c.sock");
    let limits = dpctl::transport::ConnectionLimits { max_connections: 2, ..Default::default() };
    let _stop = serve_plugin(&path, limits).await;
    let mut oldest = UnixStream::connect(&path).await.unwrap();
    oldest.write_all(&hello()).await.unwrap();
    let busy = dpctl::plugin_client::PluginClient::connect(&path, &Default::default()).await.unwrap();
    let mut watch = Box::pin(busy.list_and_watch().await.unwrap());
    within("the first list", watch.next()).await.unwrap().unwrap();
    // A third: the oldest idle connection goes, the busy one stays.
    let newcomer = dpctl::plugin_client::PluginClient::connect(&path, &Default::default()).await.unwrap();
    newcomer.options().await.unwrap();
    let seen = within("the oldest idle connection to be closed", goaway_then_close(&mut oldest)).await;
    assert_eq!(seen.map(|s| s.0), Some(0));
    busy.options().await.unwrap();
    // Both busy (two open streams): a third connection is closed at once.
    let mut watch2 = Box::pin(newcomer.list_and_watch().await.unwrap());
    within("the first list", watch2.next()).await.unwrap().unwrap();
    let mut over = UnixStream::connect(&path).await.unwrap();
    let _ = over.write_all(&hello()).await;
    let seen = within("the connection over the cap to be closed", goaway_then_close(&mut over)).await;
    assert_eq!(seen, None, "closed before any HTTP/2");
    busy.options().await.unwrap();
    newcomer.options().await.unwrap();
}

/// Floods `frame` on one connection until the server closes it; returns
/// the GOAWAY seen and how long the flood lasted.
async fn flood(path: &Path, unit: Vec<u8>) -> (Option<(u32, String)>, Duration) {
    let started = Instant::now();
    let conn = UnixStream::connect(path).await.unwrap();
    let (mut read, mut write) = conn.into_split();
    let reader = tokio::spawn(async move {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        let mut goaway = None;
        loop {
            let n = read.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return goaway;
            }
            buf.extend_from_slice(&chunk[..n]);
            while buf.len() >= 9 {
                let len = (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
                if buf.len() < 9 + len {
                    break;
                }
                if buf[3] == 7 && len >= 8 {
                    let code = u32::from_be_bytes([buf[13], buf[14], buf[15], buf[16]]);
                    goaway = Some((code, String::from_utf8_lossy(&buf[17..9 + len]).into_owned()));
                }
                buf.drain(..9 + len);
            }
        }
    });
    let batch: Vec<u8> = std::iter::repeat_n(unit, 1000).flatten().collect();
    write.write_all(&hello()).await.unwrap();
    while write.write_all(&batch).await.is_ok() {
        if reader.is_finished() {
            break;
        }
    }
    let goaway = within("the flooding connection to be closed", reader).await.unwrap();
    (goaway, started.elapsed())
}

// A client sending PING or SETTINGS frames in a loop used to keep a server
// at 80-90% of a core for as long as it liked. Past the allowance it gets
// GOAWAY ENHANCE_YOUR_CALM and is closed, and other clients are served
// meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_and_settings_floods_are_cut_off_and_others_are_served() {
    let sb = Sandbox::new();
    let path = sb.join("f.sock");
    let _stop = serve_plugin(&path, Default::default()).await;
    let normal = dpctl::plugin_client::PluginClient::connect(&path, &Default::default()).await.unwrap();
    for unit in [frame(6, 0, 0, b"12345678"), frame(4, 0, 0, &[])] {
        let kind = if unit[3] == 6 { "PING" } else { "SETTINGS" };
        let target = path.clone();
        let flooding = tokio::spawn(async move { flood(&target, unit).await });
        // Served while the flood is on (and after).
        normal.options().await.unwrap();
        let (goaway, took) = flooding.await.unwrap();
        assert_eq!(goaway, Some((0xb, "too_many_pings".to_string())), "{kind} flood");
        assert!(took < Duration::from_secs(5), "{kind} flood lasted {took:?}");
        normal.options().await.unwrap();
    }
}

// The allowance is given back whenever the server sends an answer: a client
// that pings around every call (grpc-go's BDP estimator) is never cut off,
// however many calls it makes.
#[tokio::test]
async fn pings_between_calls_are_never_a_flood() {
    let sb = Sandbox::new();
    let path = sb.join("p.sock");
    let _stop = serve_plugin(&path, Default::default()).await;
    let mut c = UnixStream::connect(&path).await.unwrap();
    c.write_all(&hello()).await.unwrap();
    let mut enc = loona_hpack::Encoder::new();
    let calls = 3 * dpctl::transport::guard::CONTROL_FRAME_BURST;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    for i in 0..calls {
        let stream = 1 + 2 * i;
        let headers: Vec<(&[u8], &[u8])> = vec![
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", b"/v1beta1.DevicePlugin/GetDevicePluginOptions"),
            (b":authority", b"localhost"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
        ];
        let mut out = frame(6, 0, 0, b"bdp-ping");
        out.extend(frame(1, 0x4, stream, &enc.encode(headers)));
        out.extend(frame(0, 0x1, stream, &[0, 0, 0, 0, 0]));
        c.write_all(&out).await.unwrap();
        // Wait for this call's trailers (HEADERS with END_STREAM on the stream).
        within("the call's answer", async {
            loop {
                while buf.len() >= 9 {
                    let len = (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
                    if buf.len() < 9 + len {
                        break;
                    }
                    let (kind, flags) = (buf[3], buf[4]);
                    let id = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]);
                    assert_ne!(kind, 7, "GOAWAY after {i} calls");
                    buf.drain(..9 + len);
                    if kind == 1 && flags & 1 != 0 && id == stream {
                        return;
                    }
                }
                let n = c.read(&mut chunk).await.unwrap();
                assert!(n > 0, "closed after {i} calls");
                buf.extend_from_slice(&chunk[..n]);
            }
        })
        .await;
    }
}

/// Runs each client command against `how`'s silent server and checks its
/// exit code and that it ends within its timeouts plus `slack`.
async fn commands_end_within_their_timeouts(how: crate::support::silent::Silence) {
    use crate::support::silent::{Silence, SilentServer};
    let sb = Sandbox::new();
    let server = SilentServer::start(&sb.join("s.sock"), how);
    let socket = server.path.to_str().unwrap();
    // What a user sees: a timeout (exit 5) within the connect timeout when
    // the server never speaks HTTP/2, within the call timeout when it never
    // answers a call. The slack covers process start on a loaded machine.
    let slack = Duration::from_secs(3);
    let limit = |connect: u64, call: u64| Duration::from_secs(if how == Silence::AcceptOnly { connect } else { call });
    let cases: Vec<(Vec<&str>, i32, Duration)> = vec![
        (vec!["plugin", "call", "options", "--connect-timeout", "1s", "--timeout", "2s"], 5, limit(1, 2)),
        (vec!["plugin", "call", "list", "--connect-timeout", "1s", "--timeout", "2s"], 5, limit(1, 2)),
        (vec!["plugin", "watch", "--connect-timeout", "1s", "--timeout", "2s"], 5, limit(1, 2)),
        (
            vec!["plugin", "check", "--connect-timeout", "1s", "--timeout", "1s", "--first-list-timeout", "1s"],
            // Reached but answering nothing: every check fails (exit 1), each within its deadline.
            if how == Silence::AcceptOnly { 5 } else { 1 },
            // options, the first list, then the calls of the remaining checks, 1 s each at most.
            limit(1, 8),
        ),
        (vec!["bench", "allocate", "--connect-timeout", "1s", "--timeout", "2s", "--duration", "2s"], 5, limit(1, 2)),
        (vec!["bench", "list", "--connect-timeout", "1s", "--timeout", "2s", "--duration", "2s"], 5, limit(1, 2)),
        (vec!["podresources", "list", "--connect-timeout", "1s", "--timeout", "2s"], 5, limit(1, 2)),
        (vec!["podresources", "watch", "--connect-timeout", "1s", "--timeout", "2s"], 5, limit(1, 2)),
    ];
    for (mut args, code, bound) in cases {
        args.extend(["--socket", socket]);
        let started = Instant::now();
        let r = dpctl(&args).await;
        let took = started.elapsed();
        assert_eq!(r.code, code, "{args:?} ({how:?}) took {took:?}\n{}{}", r.stdout, r.stderr);
        assert!(took < bound + slack, "{args:?} ({how:?}) took {took:?}, over {bound:?} + {slack:?}");
        if code == 5 {
            assert!(r.stderr.contains("timed out") || r.stderr.contains("no answer within"), "{args:?}: {}", r.stderr);
        }
    }
}

// `dpctl bench` used to run on for minutes against a socket that accepts
// and never answers, `plugin watch` exited 0 in silence, and `plugin check
// --connect-timeout 1s` took 25 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_commands_time_out_on_a_socket_that_accepts_and_is_silent() {
    commands_end_within_their_timeouts(crate::support::silent::Silence::AcceptOnly).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_commands_time_out_on_a_server_that_never_answers_a_call() {
    commands_end_within_their_timeouts(crate::support::silent::Silence::Handshake).await;
}

/// A driver whose registration GetInfo answers absurd fields (a name of a
/// megabyte, an endpoint past PATH_MAX, a hundred thousand services, each
/// of which `dra info` would probe): refused with the field and its size,
/// exit 4 (the peer's answer), at once, by every command that reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_dra_getinfo_fields_are_refused_naming_the_field() {
    let sb = Sandbox::new();
    let ok_versions = vec!["v1.DRAPlugin".to_string()];
    let cases: Vec<(String, String, Vec<String>, &str)> = vec![
        ("x".repeat(1 << 20), String::new(), ok_versions.clone(), "name is 1048576 bytes, over the bound of 253"),
        ("gpu.example.com".into(), format!("/{}", "e".repeat(5000)), ok_versions.clone(), "endpoint is 5001 bytes"),
        ("gpu.example.com".into(), String::new(), vec!["v1.DRAPlugin".into(); 100_000], "has 100000 entries"),
        ("gpu.example.com".into(), String::new(), vec!["v".repeat(300)], "supported_versions[0] is 300 bytes"),
    ];
    for (i, (name, endpoint, versions, said)) in cases.into_iter().enumerate() {
        let path = sb.join(&format!("absurd-{i}-reg.sock"));
        let behaviour =
            Behaviour { info: Some(("DRAPlugin".into(), name, endpoint, versions)), ..Behaviour::default() };
        let _stop = FakePlugin::new(vec![], behaviour).serve(&path).await;
        let reg = path.to_str().unwrap();
        for args in [
            vec!["dra", "info", "--registration", reg],
            vec!["dra", "prepare", "--registration", reg, "--claim", "default/gpu/uid-1"],
            vec!["dra", "check", "--registration", reg],
        ] {
            let started = Instant::now();
            let r = dpctl(&args).await;
            assert_eq!(r.code, 4, "{args:?}: {}{}", r.stdout, r.stderr);
            assert!(r.stderr.contains(said) && r.stderr.contains("answer refused"), "{args:?}: {}", r.stderr);
            assert!(r.stderr.len() < 2000, "{args:?}: the refusal quotes none of it: {} bytes", r.stderr.len());
            assert!(started.elapsed() < Duration::from_secs(10), "{args:?} took {:?}", started.elapsed());
        }
    }
}
