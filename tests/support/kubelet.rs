//! A small kubelet registration server built directly on the generated code
//! (not on dpctl's kubelet-sim), for testing plugins: it records every
//! RegisterRequest, validates like the kubelet, dials the plugin back, and
//! can be "restarted" the way a kubelet restarts (plugin sockets deleted,
//! kubelet.sock created anew).

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dpctl::plugin_client::PluginClient;
use dpctl::proto::deviceplugin::v1beta1 as dp;
use dpctl::proto::deviceplugin::v1beta1::registration_server::{Registration, RegistrationServer};
use dpctl::transport::ClientConfig;
use tokio::sync::{mpsc, oneshot};
use tonic::{Request, Response, Status};

use super::within;

/// How the test kubelet answers Register.
#[derive(Clone, Debug)]
pub struct KubeletBehaviour {
    /// Reject every Register with this message (after recording it).
    pub reject: Option<String>,
    /// Check version and resource name with the kubelet's rules and texts.
    pub validate: bool,
    /// Dial the plugin back and call GetDevicePluginOptions inside Register,
    /// as kubelets since 1.25 do; a failure rejects the registration.
    pub dial_back: bool,
    /// Limit of the dial back.
    pub dial_timeout: Duration,
    /// Sit on every Register call this long before answering.
    pub delay: Option<Duration>,
}

impl Default for KubeletBehaviour {
    fn default() -> Self {
        KubeletBehaviour {
            reject: None,
            validate: true,
            dial_back: true,
            dial_timeout: Duration::from_secs(2),
            delay: None,
        }
    }
}

/// One Register call as the test kubelet saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub request: dp::RegisterRequest,
    /// When the call arrived.
    pub at: Instant,
    /// Whether the plugin socket existed when Register arrived.
    pub socket_existed: bool,
    /// The plugin's GetDevicePluginOptions answer (with dial_back).
    pub options: Option<dp::DevicePluginOptions>,
    /// What the kubelet answered: None = accepted.
    pub rejected: Option<String>,
}

struct Server {
    dir: PathBuf,
    behaviour: KubeletBehaviour,
    seen: mpsc::UnboundedSender<Seen>,
    arrived: mpsc::UnboundedSender<Instant>,
}

#[tonic::async_trait]
impl Registration for Server {
    async fn register(&self, req: Request<dp::RegisterRequest>) -> Result<Response<dp::Empty>, Status> {
        let at = Instant::now();
        let _ = self.arrived.send(at);
        if let Some(d) = self.behaviour.delay {
            tokio::time::sleep(d).await;
        }
        let request = req.into_inner();
        let socket = self.dir.join(&request.endpoint);
        let socket_existed = socket.exists();
        let mut options = None;
        let verdict = async {
            if self.behaviour.validate {
                dpctl::validate::check_registration(&request.version, &request.resource_name)?;
            }
            if let Some(msg) = &self.behaviour.reject {
                return Err(msg.clone());
            }
            if self.behaviour.dial_back {
                let cfg = ClientConfig {
                    connect_timeout: self.behaviour.dial_timeout,
                    call_timeout: self.behaviour.dial_timeout,
                    ..Default::default()
                };
                let client = PluginClient::connect(&socket, &cfg)
                    .await
                    .map_err(|e| format!("failed to dial device plugin: {e}"))?;
                options =
                    Some(client.options().await.map_err(|e| format!("failed to get device plugin options: {e}"))?);
            }
            Ok(())
        }
        .await;
        let rejected = verdict.err();
        let _ = self.seen.send(Seen { request, at, socket_existed, options, rejected: rejected.clone() });
        match rejected {
            Some(msg) => Err(Status::unknown(msg)),
            None => Ok(Response::new(dp::Empty {})),
        }
    }
}

/// A kubelet registration server on `<dir>/kubelet.sock`.
pub struct TestKubelet {
    dir: PathBuf,
    behaviour: KubeletBehaviour,
    tx: mpsc::UnboundedSender<Seen>,
    rx: mpsc::UnboundedReceiver<Seen>,
    arrived_tx: mpsc::UnboundedSender<Instant>,
    arrived: mpsc::UnboundedReceiver<Instant>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<dpctl::Result<()>>>,
}

impl TestKubelet {
    /// Serves kubelet.sock (bound before this returns).
    pub async fn start(dir: &Path, behaviour: KubeletBehaviour) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let (arrived_tx, arrived) = mpsc::unbounded_channel();
        let mut k =
            TestKubelet { dir: dir.to_path_buf(), behaviour, tx, rx, arrived_tx, arrived, stop: None, task: None };
        k.serve().await;
        k
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("kubelet.sock")
    }

    async fn serve(&mut self) {
        let server = Arc::new(Server {
            dir: self.dir.clone(),
            behaviour: self.behaviour.clone(),
            seen: self.tx.clone(),
            arrived: self.arrived_tx.clone(),
        });
        let listener = dpctl::transport::bind(&self.socket(), &Default::default()).await.expect("bind kubelet.sock");
        let router = tonic::transport::Server::builder().add_service(RegistrationServer::from_arc(server));
        let (stop, rx) = oneshot::channel::<()>();
        self.task = Some(tokio::spawn(dpctl::transport::serve(router, listener, async {
            let _ = rx.await;
        })));
        self.stop = Some(stop);
    }

    /// Stops serving; kubelet.sock is removed.
    pub async fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            within("test kubelet to stop", t).await.expect("join").expect("serve");
        }
    }

    /// What a kubelet restart does: the old kubelet goes (its socket with
    /// it), the new one deletes every socket in the directory, then serves a
    /// new kubelet.sock. Returns the moment the new kubelet.sock exists.
    pub async fn restart(&mut self) -> Instant {
        self.stop().await;
        for entry in std::fs::read_dir(&self.dir).expect("read dir").flatten() {
            if entry.file_type().is_ok_and(|t| t.is_socket()) {
                std::fs::remove_file(entry.path()).expect("remove socket");
            }
        }
        self.serve().await;
        Instant::now()
    }

    /// A kubelet process restarting on its own (as `kubelet-sim` stopped
    /// and started again without --force): its kubelet.sock goes and comes
    /// back; the plugins' sockets are left alone. Returns the moment the new
    /// kubelet.sock exists.
    pub async fn restart_keeping_plugin_sockets(&mut self) -> Instant {
        self.stop().await;
        self.serve().await;
        Instant::now()
    }

    /// The next Register call.
    pub async fn next(&mut self) -> Seen {
        within("a Register call", self.rx.recv()).await.expect("kubelet channel open")
    }

    /// Waits until a Register call has arrived (before it is answered).
    pub async fn arrived(&mut self) -> Instant {
        within("a Register call to arrive", self.arrived.recv()).await.expect("kubelet channel open")
    }

    /// A Register call within `d`, if any.
    pub async fn next_within(&mut self, d: Duration) -> Option<Seen> {
        tokio::time::timeout(d, self.rx.recv()).await.ok().flatten()
    }
}
