//! The shared transport: safe binding, socket cleanup, every `:authority`
//! form real clients send, and client errors that say what is wrong.

use std::os::unix::fs::PermissionsExt;

use dpctl::transport::{BindOptions, bind};

use crate::support::fake_plugin::{Behaviour, FakePlugin, device};
use crate::support::{Sandbox, dpctl, h2raw, within};

#[tokio::test]
async fn bind_refuses_a_live_socket_and_replaces_a_stale_one() {
    let sb = Sandbox::new();
    let path = sb.join("p.sock");
    let first = bind(&path, &BindOptions::default()).await.unwrap();
    let err = bind(&path, &BindOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains("already served by a live process"), "{err}");
    assert!(err.hint().unwrap().contains("--force"));
    // A socket nobody listens on any more is stale: it is replaced.
    let std_listener = std::os::unix::net::UnixListener::bind(sb.join("stale.sock")).unwrap();
    drop(std_listener);
    assert!(sb.join("stale.sock").exists());
    bind(&sb.join("stale.sock"), &BindOptions::default()).await.unwrap();
    // Forcing takes over a live one.
    let forced = bind(&path, &BindOptions { force: true, ..Default::default() }).await.unwrap();
    drop(first); // the old guard must not remove the new socket
    assert!(path.exists());
    drop(forced);
    assert!(!path.exists(), "the socket is removed when its listener goes");
}

#[tokio::test]
async fn bind_never_touches_files_dirs_or_symlinks() {
    let sb = Sandbox::new();
    std::fs::write(sb.join("file"), b"keep me").unwrap();
    std::fs::create_dir(sb.join("dir")).unwrap();
    std::os::unix::fs::symlink(sb.join("file"), sb.join("link")).unwrap();
    for (name, kind) in [("file", "regular file"), ("dir", "directory"), ("link", "symbolic link")] {
        let err = bind(&sb.join(name), &BindOptions { force: true, ..Default::default() }).await.unwrap_err();
        assert!(err.to_string().contains(&format!("it is a {kind}")), "{err}");
    }
    assert_eq!(std::fs::read(sb.join("file")).unwrap(), b"keep me");
    assert!(sb.join("dir").is_dir());
}

#[tokio::test]
async fn bind_checks_path_length_and_makes_owner_only_sockets() {
    let sb = Sandbox::new();
    let long = sb.join(&"x".repeat(120));
    let err = bind(&long, &BindOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains("unix sockets allow at most 107"), "{err}");
    let l = bind(&sb.join("m.sock"), &BindOptions::default()).await.unwrap();
    let mode = std::fs::metadata(l.guard.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[tokio::test]
async fn server_accepts_every_authority_form_clients_send() {
    let sb = Sandbox::new();
    let path = sb.join("a.sock");
    let plugin = FakePlugin::new(vec![device("d0", "Healthy", None)], Behaviour::default());
    let _stop = plugin.serve(&path).await;
    let raw = path.display().to_string();
    let encoded = raw.trim_start_matches('/').replace('/', "%2F");
    for authority in ["localhost", raw.as_str(), encoded.as_str()] {
        // Three calls on one connection: the later ones refer to the authority
        // through the HPACK dynamic table.
        let answers =
            within(authority, h2raw::unary_calls(&path, authority, "/v1beta1.DevicePlugin/GetDevicePluginOptions", 3))
                .await;
        for a in &answers {
            assert_eq!(a.reset, None, "stream reset for authority {authority}");
            assert_eq!(a.get(":status"), Some("200"), "{authority}: {a:?}");
            assert_eq!(a.get("grpc-status"), Some("0"), "{authority}: {a:?}");
        }
    }
    assert_eq!(plugin.rpcs().len(), 9);
}

#[tokio::test]
async fn client_errors_name_the_cause() {
    let sb = Sandbox::new();
    let missing = sb.join("none.sock");
    let r = dpctl(&["plugin", "call", "options", "--socket", missing.to_str().unwrap()]).await;
    r.expect_code(3);
    assert!(r.stderr.contains("no socket at"), "{}", r.stderr);
    assert!(r.stderr.contains("hint:"));

    std::fs::write(sb.join("plain"), b"").unwrap();
    let r = dpctl(&["plugin", "call", "options", "--socket", sb.join("plain").to_str().unwrap()]).await;
    r.expect_code(3);
    assert!(r.stderr.contains("is not a unix socket (it is a regular file)"), "{}", r.stderr);

    drop(std::os::unix::net::UnixListener::bind(sb.join("stale.sock")).unwrap());
    let r = dpctl(&["plugin", "call", "options", "--socket", sb.join("stale.sock").to_str().unwrap()]).await;
    r.expect_code(3);
    assert!(r.stderr.contains("connection refused"), "{}", r.stderr);
    assert!(r.stderr.contains("stale"), "{}", r.stderr);
}

#[tokio::test]
async fn wrong_service_is_explained() {
    // A socket that serves gRPC, but not the DevicePlugin service (here: PodResources).
    let sb = Sandbox::new();
    let path = sb.join("pr.sock");
    let svc = dpctl::podresources::server::PodResourcesService::new(
        std::sync::Arc::new(Empty),
        dpctl::podresources::server::ServerConfig::default(),
    );
    let listener = bind(&path, &BindOptions::default()).await.unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(dpctl::transport::serve(svc.router(), listener, async {
        let _ = rx.await;
    }));
    let r = dpctl(&["plugin", "call", "options", "--socket", path.to_str().unwrap()]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("not implemented by the server"), "{}", r.stderr);
    assert!(r.stderr.contains("wrong API package or version"), "{}", r.stderr);
    drop(tx);
}

struct Empty;
impl dpctl::podresources::server::Provider for Empty {
    fn list(&self) -> Vec<dpctl::proto::podresources::v1::PodResources> {
        Vec::new()
    }
    fn allocatable(&self) -> dpctl::proto::podresources::v1::AllocatableResourcesResponse {
        Default::default()
    }
}

#[tokio::test]
async fn deadline_and_message_limit() {
    let sb = Sandbox::new();
    let path = sb.join("slow.sock");
    let slow = FakePlugin::new(
        vec![device("d0", "Healthy", None)],
        Behaviour { allocate_delay: Some(std::time::Duration::from_secs(5)), ..Default::default() },
    );
    let _s1 = slow.serve(&path).await;
    let p = path.to_str().unwrap();
    let r = dpctl(&["plugin", "call", "allocate", "--socket", p, "--devices", "d0", "--timeout", "200ms"]).await;
    r.expect_code(5);
    assert!(r.stderr.contains("deadline exceeded"), "{}", r.stderr);

    // 80,000 devices with long IDs: about 4.8 MB, over the kubelet's 4 MiB.
    let big: Vec<_> = (0..80_000)
        .map(|i| device(&format!("GPU-{i:08}-0000-0000-0000-000000000000"), "Healthy", Some(&[0])))
        .collect();
    let path = sb.join("big.sock");
    let _s2 = FakePlugin::new(big, Behaviour::default()).serve(&path).await;
    let p = path.to_str().unwrap();
    let r = dpctl(&["plugin", "call", "list", "--socket", p]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("over the receive limit of 4194304 bytes"), "{}", r.stderr);
    assert!(r.stderr.contains("4 MiB"), "{}", r.stderr);
    let r = dpctl(&["plugin", "call", "list", "--socket", p, "--max-recv-bytes", "16777216", "-o", "json"]).await;
    r.expect_code(0);
    let v = r.json();
    assert_eq!(v["capacity"], 80_000);
    assert!(v["message_bytes"].as_u64().unwrap() > 4 * 1024 * 1024);
}

#[tokio::test]
async fn stopping_a_server_ends_the_streams_it_serves() {
    use futures_util::StreamExt;
    let sb = Sandbox::new();
    let path = sb.join("s.sock");
    // This plugin's ListAndWatch never ends by itself.
    let plugin = FakePlugin::new(vec![device("d0", "Healthy", None)], Behaviour::default());
    let stop = plugin.serve(&path).await;
    let client = dpctl::plugin_client::PluginClient::connect(&path, &Default::default()).await.unwrap();
    let mut stream = Box::pin(client.list_and_watch().await.unwrap());
    within("first snapshot", stream.next()).await.unwrap().unwrap();
    drop(stop);
    // The stream ends (cleanly or with an error) instead of hanging on.
    let _ = within("the stream to end after the server stopped", stream.next()).await;
    assert!(within("end of stream", stream.next()).await.is_none_or(|r| r.is_err()));
    within("socket removal", async {
        while path.exists() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_live_server_with_a_full_backlog_is_not_taken_for_stale() {
    use socket2::{Domain, SockAddr, Socket, Type};
    let sb = Sandbox::new();
    let path = sb.join("busy.sock");
    // A live server that never accepts, with its backlog filled: connects fail with EAGAIN.
    let server = Socket::new(Domain::UNIX, Type::STREAM, None).unwrap();
    server.bind(&SockAddr::unix(&path).unwrap()).unwrap();
    server.listen(0).unwrap();
    let mut clients = Vec::new();
    loop {
        let c = Socket::new(Domain::UNIX, Type::STREAM, None).unwrap();
        c.set_nonblocking(true).unwrap();
        match c.connect(&SockAddr::unix(&path).unwrap()) {
            Ok(()) => clients.push(c),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("unexpected connect error: {e}"),
        }
        assert!(clients.len() < 1000, "backlog never filled");
    }
    let err = bind(&path, &BindOptions::default()).await.unwrap_err();
    assert!(matches!(err, dpctl::Error::AlreadyServing { .. }), "{err}");
    assert!(path.exists(), "the live server's socket is left alone");
}

/// Serves a test plugin at `path` with the given connection limits.
async fn serve_limited(
    path: &std::path::Path,
    limits: dpctl::transport::ConnectionLimits,
) -> (FakePlugin, tokio::sync::oneshot::Sender<()>) {
    use dpctl::proto::deviceplugin::v1beta1::device_plugin_server::DevicePluginServer;
    let plugin = FakePlugin::new(vec![device("d0", "Healthy", None)], Behaviour::default());
    let listener = bind(path, &BindOptions::default()).await.unwrap();
    let router = tonic::transport::Server::builder().add_service(DevicePluginServer::new(plugin.clone()));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(dpctl::transport::serve_with(router, listener, limits, async {
        let _ = rx.await;
    }));
    (plugin, tx)
}

/// Reads until the server closes the connection (EOF or reset).
async fn until_closed(conn: &mut tokio::net::UnixStream) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 1024];
    loop {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

// A local process must not tie up the sim's sockets: a connection that never
// sends the HTTP/2 preface, or
// trickles it, is closed at the handshake deadline; one that completed its
// handshake is not.
#[tokio::test]
async fn connections_that_never_finish_the_handshake_are_closed() {
    use tokio::io::AsyncWriteExt;
    let sb = Sandbox::new();
    let path = sb.join("h.sock");
    let limits = dpctl::transport::ConnectionLimits {
        handshake_timeout: std::time::Duration::from_millis(300),
        ..Default::default()
    };
    let (_plugin, _stop) = serve_limited(&path, limits).await;
    let mut silent = tokio::net::UnixStream::connect(&path).await.unwrap();
    within("the silent connection to be closed", until_closed(&mut silent)).await;
    // One byte at a time, never finishing: closed as well.
    let mut trickle = tokio::net::UnixStream::connect(&path).await.unwrap();
    let closed = async {
        for b in b"PRI * HTTP/2.0\r\n" {
            if trickle.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        until_closed(&mut trickle).await;
    };
    within("the trickling connection to be closed", closed).await;
    // A real client finishes the handshake and keeps its connection past the deadline.
    let client = dpctl::plugin_client::PluginClient::connect(&path, &Default::default()).await.unwrap();
    client.options().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    client.options().await.unwrap();
}
