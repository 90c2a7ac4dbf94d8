//! `--engine cluster:DIR`: a one-node cluster on this machine. etcd, the
//! API server, the scheduler and the controller manager (from DIR:
//! `conformance/build.sh cluster`, or official binaries), `kubectl proxy`
//! (the plain-HTTP door dpctl's API client and the drivers under test use),
//! and the real-kubelet engine's node ([`super::Node`], with containerd and
//! runc) registered with that API server.
//!
//! The same guarantees as the kubelet engine: every process runs in a
//! private mount namespace made by the `--isolate` helper with the root
//! read-only, the run's directory bound writable on itself and a private
//! /etc/hosts that maps the node's name to 127.0.0.1 (the API server
//! reaches the kubelet by that name, `--kubelet-preferred-address-types=
//! Hostname`). The certificates are the API server's own self-signed ones
//! (`--cert-dir` in the run's directory), the service-account key is made
//! there with openssl, clients authenticate with a static token
//! (`--token-auth-file`) and every request is allowed (`AlwaysAllow`): a
//! throwaway cluster on loopback. The controller manager's
//! `--flex-volume-plugin-dir` is in the run's directory too (its default,
//! `/usr/libexec/kubernetes/...`, would be made on the host). Nothing is
//! left when [`Cluster::stop`] returns, nor when a start fails.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Bind, IsolateConfig, Join, Layout, Node, Plan, READY_TIMEOUT, STOP_GRACE, run_bounded, spawn_in};
use crate::apiserver::client::Client;
use crate::error::{Error, Result};
use crate::kubelet_sim::SimConfig;
use crate::smoke::process::PluginProcess;

/// The control-plane programs DIR must hold.
pub const BINARIES: [&str; 5] = ["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl"];

const PLACE: &str = "--engine cluster";

/// How long `ctr images import` may take (an image of a debug build is over 100 MB).
const IMPORT_TIMEOUT: Duration = Duration::from_secs(120);

/// A running one-node cluster.
#[derive(Debug)]
pub struct Cluster {
    node: Node,
    /// Control-plane processes, in start order.
    control: Vec<(&'static str, PluginProcess)>,
    kubeconfig: PathBuf,
    proxy_kubeconfig: PathBuf,
    client: Client,
    node_name: String,
    version: String,
    /// The node's containerd socket (on the host, under the run's root).
    containerd_socket: PathBuf,
}

/// The control-plane binaries in `dir` and the kubelet paired with them:
/// `dir/kubelet`, `dir/kubelet-1.NN`, or `$DPCTL_KUBELET_DIR/kubelet-1.NN`.
pub fn binaries(dir: &Path, release: &str) -> Result<PathBuf> {
    let place = format!("{PLACE}:{}", crate::text::shorten(&dir.display().to_string(), 120));
    let build = format!(
        "build them with conformance/build.sh cluster {release} (into target/cluster/{release}), or put the \
         official {} there",
        BINARIES.join(", ")
    );
    if !dir.is_dir() {
        return Err(Error::invalid(&place, format!("not a directory; {build}")));
    }
    for b in BINARIES {
        if !dir.join(b).is_file() {
            return Err(Error::invalid(&place, format!("no {b} in {}; {build}", dir.display())));
        }
    }
    let mut candidates = vec![dir.join("kubelet"), dir.join(format!("{}{release}", super::KUBELET_PREFIX))];
    if let Some(k) = std::env::var_os("DPCTL_KUBELET_DIR") {
        candidates.push(Path::new(&k).join(format!("{}{release}", super::KUBELET_PREFIX)));
    }
    match candidates.iter().find(|c| c.is_file()) {
        Some(k) => super::kubelet_binary(k, release),
        None => Err(Error::invalid(
            &place,
            format!(
                "no kubelet: none of {}; build it with conformance/build.sh kubelet {release} and set \
                 DPCTL_KUBELET_DIR, or put a kubelet (with pause.tar and busybox.tar beside it) in DIR",
                candidates.iter().map(|c| c.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// A free loopback TCP port (bound and released: the run's processes take it next).
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("finding a free loopback port", e))?;
    Ok(l.local_addr().map_err(|e| Error::io("finding a free loopback port", e))?.port())
}

/// The ports of one cluster.
#[derive(Debug, Clone, Copy)]
struct Ports {
    etcd: u16,
    peer: u16,
    api: u16,
    proxy: u16,
    kubelet: u16,
    scheduler: u16,
    controller: u16,
}

/// The run's files: the service-account key, the token file, the
/// kubeconfigs and the private /etc/hosts.
struct Files {
    dir: PathBuf,
    sa_key: PathBuf,
    tokens: PathBuf,
    kubeconfig: PathBuf,
    proxy_kubeconfig: PathBuf,
    hosts: PathBuf,
    certs: PathBuf,
}

fn kubeconfig_text(server: &str, token: Option<&str>) -> String {
    let user = match token {
        Some(t) => format!("    token: {t}\n"),
        None => "    {}\n".into(),
    };
    let tls = if server.starts_with("https://") { "    insecure-skip-tls-verify: true\n" } else { "" };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: dpctl\n  cluster:\n    server: {server}\n{tls}users:\n- name: \
         admin\n  user:\n{user}contexts:\n- name: dpctl\n  context:\n    cluster: dpctl\n    user: admin\ncurrent-context: dpctl\n"
    )
}

async fn write_files(root: &Path, node: &str, ports: Ports) -> Result<Files> {
    let dir = root.join("cluster");
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |e| Error::io(format!("writing {what}"), e)
    };
    let f = Files {
        sa_key: dir.join("sa.key"),
        tokens: dir.join("tokens.csv"),
        kubeconfig: dir.join("kubeconfig"),
        proxy_kubeconfig: dir.join("kubeconfig.http"),
        hosts: dir.join("hosts"),
        certs: dir.join("apiserver-certs"),
        dir,
    };
    for d in [&f.dir, &f.certs] {
        std::fs::create_dir_all(d).map_err(io(d))?;
    }
    let token: String = (0..4).map(|_| format!("{:016x}", rand::random::<u64>())).collect();
    std::fs::write(&f.tokens, format!("{token},admin,admin,\"system:masters\"\n")).map_err(io(&f.tokens))?;
    let server = format!("https://127.0.0.1:{}", ports.api);
    std::fs::write(&f.kubeconfig, kubeconfig_text(&server, Some(&token))).map_err(io(&f.kubeconfig))?;
    let proxy = format!("http://127.0.0.1:{}", ports.proxy);
    std::fs::write(&f.proxy_kubeconfig, kubeconfig_text(&proxy, None)).map_err(io(&f.proxy_kubeconfig))?;
    std::fs::write(&f.hosts, super::config::hosts(node)).map_err(io(&f.hosts))?;
    let args = ["genrsa".to_string(), "-out".into(), f.sa_key.display().to_string(), "2048".into()];
    run_bounded(Path::new("openssl"), &args, Duration::from_secs(30))
        .await
        .map_err(|e| Error::invalid(PLACE, format!("making the service-account key: {e}")))?;
    Ok(f)
}

/// Each control-plane program's command line, in start order.
// long: the five command lines, one flag a line, as the programs' docs list them.
fn commands(dir: &Path, f: &Files, p: Ports) -> Vec<(&'static str, Vec<String>)> {
    let bin = |b: &str| dir.join(b).display().to_string();
    let d = |p: &Path| p.display().to_string();
    let etcd_url = format!("http://127.0.0.1:{}", p.etcd);
    let peer_url = format!("http://127.0.0.1:{}", p.peer);
    let kubeconfig = format!("--kubeconfig={}", d(&f.kubeconfig));
    vec![
        (
            "etcd",
            vec![
                bin("etcd"),
                "--name=dpctl".into(),
                format!("--data-dir={}", d(&f.dir.join("etcd"))),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=dpctl={peer_url}"),
                "--log-level=warn".into(),
            ],
        ),
        (
            "kube-apiserver",
            vec![
                bin("kube-apiserver"),
                format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                // A loopback address is refused with the default reconciler; the
                // `kubernetes` Service's endpoints are not needed here.
                "--endpoint-reconciler-type=none".into(),
                format!("--secure-port={}", p.api),
                format!("--cert-dir={}", d(&f.certs)),
                "--service-cluster-ip-range=10.96.0.0/24".into(),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", d(&f.sa_key)),
                format!("--service-account-signing-key-file={}", d(&f.sa_key)),
                format!("--token-auth-file={}", d(&f.tokens)),
                "--authorization-mode=AlwaysAllow".into(),
                "--kubelet-preferred-address-types=Hostname".into(),
                "--allow-privileged=true".into(),
                "--profiling=false".into(),
            ],
        ),
        (
            "kubectl proxy",
            vec![
                bin("kubectl"),
                kubeconfig.clone(),
                "proxy".into(),
                "--address=127.0.0.1".into(),
                format!("--port={}", p.proxy),
                r"--accept-hosts=^(127\.0\.0\.1|localhost)$".into(),
            ],
        ),
        (
            "kube-controller-manager",
            vec![
                bin("kube-controller-manager"),
                kubeconfig.clone(),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", p.controller),
                format!("--cert-dir={}", d(&f.dir.join("controller-manager-certs"))),
                format!("--service-account-private-key-file={}", d(&f.sa_key)),
                format!("--root-ca-file={}", d(&f.certs.join("apiserver.crt"))),
                format!("--flex-volume-plugin-dir={}", d(&f.dir.join("flexvolume"))),
                "--use-service-account-credentials=false".into(),
            ],
        ),
        (
            "kube-scheduler",
            vec![
                bin("kube-scheduler"),
                kubeconfig,
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", p.scheduler),
                format!("--cert-dir={}", d(&f.dir.join("scheduler-certs"))),
            ],
        ),
    ]
}

/// `kube-apiserver --version` (`Kubernetes v1.37.2`), checked against the kubelet's release.
async fn control_version(dir: &Path, release: &str) -> Result<String> {
    let place = format!("{PLACE}:{}", dir.display());
    let out = run_bounded(&dir.join("kube-apiserver"), &["--version".into()], Duration::from_secs(20))
        .await
        .map_err(|e| Error::invalid(&place, format!("cannot run kube-apiserver: {e}")))?;
    let played = out.trim().trim_start_matches("Kubernetes ").to_string();
    let minor: String = played.trim_start_matches('v').split('.').take(2).collect::<Vec<_>>().join(".");
    if minor != release {
        return Err(Error::invalid(
            &place,
            format!("kube-apiserver is {played}, not release {release}: pair it with a kubelet of its release"),
        ));
    }
    Ok(played)
}

impl Cluster {
    /// Starts the cluster for release `1.NN` in `layout` with a node named
    /// `node`; what started is stopped again when a later part fails.
    pub async fn start(
        dir: &Path,
        release: &str,
        config: &SimConfig,
        layout: &Layout,
        helper: Option<PathBuf>,
        node: &str,
    ) -> Result<Cluster> {
        preflight()?;
        let kubelet = binaries(dir, release)?;
        Cluster::start_with(dir, &kubelet, release, config, layout, helper, node).await
    }

    /// [`Cluster::start`] with the kubelet binary given (beside it
    /// `pause.tar` and `busybox.tar`) instead of looked for.
    pub async fn start_with(
        dir: &Path,
        kubelet: &Path,
        release: &str,
        config: &SimConfig,
        layout: &Layout,
        helper: Option<PathBuf>,
        node: &str,
    ) -> Result<Cluster> {
        preflight()?;
        let kubelet = super::kubelet_binary(kubelet, release)?;
        let version = control_version(dir, release).await?;
        let ports = Ports {
            etcd: free_port()?,
            peer: free_port()?,
            api: free_port()?,
            proxy: free_port()?,
            kubelet: free_port()?,
            scheduler: free_port()?,
            controller: free_port()?,
        };
        let files = write_files(&layout.root, node, ports).await?;
        let client = Client::from_kubeconfig(&files.proxy_kubeconfig, PLACE)?;
        let mut control = Vec::new();
        let started = Cluster::control_plane(dir, &files, ports, layout, helper.clone(), &client, &mut control).await;
        let join = Join {
            kubeconfig: files.kubeconfig.clone(),
            port: ports.kubelet,
            node: node.to_string(),
            binds: vec![Bind { source: files.hosts.clone(), target: "/etc/hosts".into() }],
        };
        let node_started = match started {
            Ok(()) => Node::start_joined(&kubelet, release, config, layout, helper, Some(&join)).await,
            Err(e) => Err(e),
        };
        let node_running = match node_started {
            Ok(n) => n,
            Err(e) => {
                stop_control(&control).await;
                return Err(e);
            }
        };
        let cluster = Cluster {
            node: node_running,
            control,
            kubeconfig: files.kubeconfig,
            proxy_kubeconfig: files.proxy_kubeconfig,
            client,
            node_name: node.to_string(),
            version,
            containerd_socket: layout
                .root
                .join("run")
                .join(super::config::CONTAINERD_SOCKET.trim_start_matches("/run/")),
        };
        if let Err(e) = cluster.wait_node_ready().await {
            let _ = cluster.stop().await;
            return Err(e);
        }
        Ok(cluster)
    }

    /// etcd, the API server (ready: `/readyz` through the proxy), the proxy, the controller manager and the scheduler.
    async fn control_plane(
        dir: &Path,
        files: &Files,
        ports: Ports,
        layout: &Layout,
        helper: Option<PathBuf>,
        client: &Client,
        control: &mut Vec<(&'static str, PluginProcess)>,
    ) -> Result<()> {
        let config = IsolateConfig {
            binds: vec![
                Bind { source: files.dir.clone(), target: files.dir.clone() },
                Bind { source: files.hosts.clone(), target: "/etc/hosts".into() },
            ],
            helper,
            pid_namespace: false,
            shared: Vec::new(),
            read_only_root: true,
        };
        for (name, command) in commands(dir, files, ports) {
            if name == "kube-controller-manager" {
                // Its --root-ca-file is the certificate the API server made at its start.
                wait_for("kube-apiserver", &control[1].1, || {
                    let ready = client.request("GET", "/readyz", None);
                    async move { ready.await.is_ok() }
                })
                .await?;
            }
            let mut plan = Plan::new(&config, layout)?;
            let process = spawn_in(&mut plan, command, None).await?;
            control.push((name, process));
            if name == "etcd" {
                let port = ports.etcd;
                wait_for(name, &control[0].1, || async move {
                    tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok()
                })
                .await?;
            }
        }
        Ok(())
    }

    /// Waits for the Node's Ready condition, as the scheduler needs it.
    async fn wait_node_ready(&self) -> Result<()> {
        let path = format!("/api/v1/nodes/{}", self.node_name);
        let deadline = crate::duration::deadline(READY_TIMEOUT);
        loop {
            let last = match self.client.request("GET", &path, None).await {
                Ok(v) => {
                    let conds = v["status"]["conditions"].as_array().cloned().unwrap_or_default();
                    let ready = conds.iter().find(|c| c["type"] == "Ready");
                    if ready.is_some_and(|c| c["status"] == "True") {
                        return Ok(());
                    }
                    ready.map_or("no Ready condition".into(), |c| {
                        format!("Ready {}: {}", c["status"], c["message"].as_str().unwrap_or_default())
                    })
                }
                Err(e) => e.message,
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::invalid(
                    PLACE,
                    format!(
                        "node {} was not Ready within {} s ({last}); the kubelet's errors: {}",
                        self.node_name,
                        READY_TIMEOUT.as_secs(),
                        self.node.output_tail()
                    ),
                ));
            }
            tokio::time::sleep(super::POLL).await;
        }
    }

    /// `cluster v1.N.P`.
    pub fn name(&self) -> String {
        format!("cluster {}", self.version)
    }

    /// The node.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The admin kubeconfig (the API server itself, TLS, a token): for kubectl and client-go.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The plain-HTTP kubeconfig (through `kubectl proxy`): for dpctl's own client and `dpctl dra mock`.
    pub fn proxy_kubeconfig(&self) -> &Path {
        &self.proxy_kubeconfig
    }

    /// A client of the API server (through the proxy).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The node's name.
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// Imports a docker-save or OCI image tarball into the node's containerd
    /// (namespace `k8s.io`, where the kubelet looks): pods then run it
    /// without a registry (deploy/image-tar.sh makes one of dpctl).
    pub async fn import_image(&self, tar: &Path) -> Result<()> {
        let args: Vec<String> = vec![
            "--address".into(),
            self.containerd_socket.display().to_string(),
            "--namespace".into(),
            "k8s.io".into(),
            "images".into(),
            "import".into(),
            tar.display().to_string(),
        ];
        run_bounded(Path::new("ctr"), &args, IMPORT_TIMEOUT)
            .await
            .map(drop)
            .map_err(|e| Error::invalid(PLACE, format!("importing {} into the node's containerd: {e}", tar.display())))
    }

    /// Completes when any of the cluster's processes ends on its own.
    pub async fn exited(&self) -> String {
        let control = futures_util::future::select_all(
            self.control.iter().map(|(name, p)| Box::pin(async move { format!("{name} {}", p.exited().await) })),
        );
        tokio::select! {
            () = self.node.exited() => "the kubelet or containerd ended".into(),
            (what, _, _) = control => what,
        }
    }

    /// Tears it down: the node first (pods, kubelet, containerd, cgroups),
    /// then the control plane in reverse start order.
    pub async fn stop(&self) -> Result<()> {
        let node = self.node.stop().await;
        stop_control(&self.control).await;
        node
    }
}

/// Root, containerd, runc and openssl.
fn preflight() -> Result<()> {
    super::preflight()?;
    if super::find_on_path("openssl").is_none() {
        return Err(Error::invalid(
            PLACE,
            "openssl is not on PATH (it makes the service-account key); install it (Debian/Ubuntu: apt-get install \
             openssl)",
        ));
    }
    Ok(())
}

/// Stops control-plane processes, the last started first.
async fn stop_control(control: &[(&'static str, PluginProcess)]) {
    for (_, p) in control.iter().rev() {
        let _ = p.terminate(STOP_GRACE).await;
    }
}

/// [`super::wait_ready`] for a control-plane process.
async fn wait_for<F: std::future::Future<Output = bool>>(
    name: &str,
    process: &PluginProcess,
    ready: impl FnMut() -> F,
) -> Result<()> {
    super::wait_ready(process, name, READY_TIMEOUT, &|| super::last_lines(process), ready).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfigs_name_the_server_and_the_token() {
        let tls = kubeconfig_text("https://127.0.0.1:6443", Some("abc"));
        assert!(tls.contains("server: https://127.0.0.1:6443") && tls.contains("token: abc"), "{tls}");
        assert!(tls.contains("insecure-skip-tls-verify: true"), "{tls}");
        let http = kubeconfig_text("http://127.0.0.1:8001", None);
        assert!(!http.contains("insecure") && !http.contains("token"), "{http}");
        assert_eq!(crate::apiserver::client::server_of(&http).unwrap(), "http://127.0.0.1:8001");
    }

    /// Official binaries: DIR holds the five programs and a `kubelet` with
    /// the images beside it (docs/cluster.md §2).
    #[test]
    fn a_dir_of_official_binaries_pairs_with_its_own_kubelet() {
        let d = tempfile::tempdir().unwrap();
        for f in BINARIES.iter().chain(&["kubelet", "pause.tar", "busybox.tar"]) {
            std::fs::write(d.path().join(f), "").unwrap();
        }
        assert_eq!(binaries(d.path(), "1.37").unwrap(), d.path().join("kubelet"));
        std::fs::remove_file(d.path().join("pause.tar")).unwrap();
        let e = binaries(d.path(), "1.37").unwrap_err().to_string();
        assert!(e.contains("no pause.tar"), "{e}");
    }

    #[test]
    fn a_missing_binary_is_named_with_the_build_command() {
        let d = tempfile::tempdir().unwrap();
        let e = binaries(d.path(), "1.37").unwrap_err().to_string();
        assert!(e.contains("no etcd") && e.contains("conformance/build.sh cluster 1.37"), "{e}");
    }
}
