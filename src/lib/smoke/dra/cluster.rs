//! `dpctl dra smoke --engine cluster:DIR`: the driver against a one-node
//! cluster ([`crate::smoke::node::cluster`]): it publishes its slices to the
//! real API server, the real scheduler allocates the claims (a template
//! claim, a claim for two devices, and one for more devices than published,
//! which it must refuse), the real kubelet prepares and unprepares them.
//! The steps this engine does not play are reported `skip` with the reason.
//!
//! The driver runs on the host, unmodified, with the run's root as `{dir}`
//! (its `plugins_registry` is the directory bound on the node's
//! /var/lib/kubelet/plugins_registry: the kubelet's plugin watcher sees the
//! registration socket there, and dials the endpoint by its host path) and
//! the API server behind `kubectl proxy` as `{kubeconfig}`.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use super::judge;
use super::runner::Engine;
use super::{DraSmokeConfig, NAMESPACE, NODE_NAME, SUITE_NAME, Sandbox, StepId};
use crate::apiserver::client::Client;
use crate::check::Outcome;
use crate::error::Result;
use crate::kubelet_sim::SimConfig;
use crate::smoke::harness::{Head, Rows};
use crate::smoke::isolate::Layout;
use crate::smoke::node::cluster::Cluster;
use crate::smoke::process::PluginProcess;
use crate::smoke::{SmokeProgress, SmokeReport};

/// How long a pod may take to run, or the scheduler to refuse one.
const POD_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(200);

/// Why each step this engine does not play is skipped.
fn not_played(step: StepId) -> Option<&'static str> {
    Some(match step {
        StepId::AdvertisedServed | StepId::SocketPaths | StepId::PrepareIdempotent | StepId::CallTime => {
            "dpctl's own calls on the driver's sockets: --engine sim plays it (the cluster engine leaves the calls \
             to the real kubelet)"
        }
        StepId::Cdi => "containerd 1.6 (the node's runtime) has no CDI: what the container gets is not checkable",
        StepId::KubeletRestart | StepId::NodeReboot => {
            "the cluster engine does not restart its kubelet or node yet: --engine sim plays it"
        }
        StepId::RequestNames | StepId::ParallelPods | StepId::DistinctDevices => {
            "not played on the cluster engine yet: --engine sim plays it"
        }
        StepId::RollingUpdate | StepId::LongSocketPath => "not played on the cluster engine: --engine sim plays it",
        _ => return None,
    })
}

struct Runner<'p> {
    cluster: &'p Cluster,
    cfg: DraSmokeConfig,
    sb: Sandbox,
    api: Client,
    driver: Option<PluginProcess>,
    name: Option<String>,
    endpoint: Option<PathBuf>,
    devices: usize,
    pods: Vec<String>,
    rows: Rows<'p, StepId>,
    layout: &'p Layout,
}

/// Runs the smoke on a cluster (see the module docs). `Err` when the cluster could not start.
pub async fn run(
    cfg: DraSmokeConfig,
    interrupt: impl Future<Output = ()>,
    progress: &mut (dyn FnMut(SmokeProgress) + Send),
) -> Result<SmokeReport> {
    let dir = cfg.cluster.clone().unwrap_or_default();
    let started = SystemTime::now();
    let t0 = Instant::now();
    let layout = Layout::create(None)?;
    let release = cfg.kubelet_version.numbered();
    let sim = SimConfig::new(&layout.device_plugins);
    crate::smoke::process::become_subreaper();
    // Started to the end even on Ctrl-C (every wait in it is bounded), so
    // that whatever it started is stopped by the same path.
    let cluster = Cluster::start(&dir, &release, &sim, &layout, None, NODE_NAME).await;
    let cluster = match cluster {
        Ok(c) => c,
        Err(e) => {
            layout.remove();
            return Err(e);
        }
    };
    // The run's root is laid out as the kubelet's: plugins_registry is the
    // directory bound on the node's /var/lib/kubelet/plugins_registry.
    let mut sb = Sandbox::under(&layout.root, &layout.device_plugins);
    sb.registry_dir = layout.plugins_registry.clone();
    sb.kubeconfig = cluster.proxy_kubeconfig().to_path_buf();
    for d in [&sb.cdi_dir, &sb.plugin_dir] {
        let _ = std::fs::create_dir_all(d);
    }
    progress(SmokeProgress::SimReady {
        dir: layout.root.clone(),
        kubelet_socket: layout.device_plugins.join(crate::paths::KUBELET_SOCKET_NAME),
        engine: cluster.name(),
    });
    let keep = cfg.keep;
    let mut r = Runner {
        cluster: &cluster,
        rows: super::runner::rows(&cfg, progress),
        cfg,
        sb,
        api: cluster.client().clone(),
        driver: None,
        name: None,
        endpoint: None,
        devices: 0,
        pods: Vec::new(),
        layout: &layout,
    };
    let lost = async { format!("the cluster stopped: {}", cluster.exited().await) };
    let report = super::runner::drive(&mut r, interrupt, lost, started, t0).await;
    if !keep {
        layout.remove();
    }
    Ok(report)
}

impl Runner<'_> {
    /// launch and registration: the driver starts, and a registration
    /// socket in the kubelet's plugins_registry answers GetInfo.
    async fn launch_and_register(&mut self) -> bool {
        self.rows.started(StepId::Launch);
        let t0 = Instant::now();
        let Some(proc) = super::runner::launch(&self.cfg, &self.sb, &mut self.rows, t0).await else {
            return false;
        };
        self.driver = Some(proc);
        self.rows.started(StepId::Registration);
        let deadline = crate::duration::deadline(self.cfg.register_timeout);
        let client = crate::transport::ClientConfig::default();
        loop {
            for socket in sockets(&self.sb.registry_dir) {
                if !self.cluster.node().registering(socket.file_name().unwrap_or_default()) {
                    continue;
                }
                if let Ok(info) = crate::dra::client::get_info(&socket, &client).await
                    && self.cfg.driver.as_deref().is_none_or(|d| d == info.name)
                {
                    let took = t0.elapsed();
                    self.rows.record(judge::verdict(StepId::Launch, true, format!("pid {}", self.pid()), took));
                    let ev = format!(
                        "{} registered at {} (endpoint {}): the kubelet's plugin watcher took it up",
                        info.name,
                        socket.display(),
                        info.endpoint
                    );
                    self.endpoint = Some(PathBuf::from(&info.endpoint));
                    self.name = Some(info.name);
                    self.rows.record(judge::verdict(StepId::Registration, true, ev, took));
                    return true;
                }
            }
            if let Some(exit) = self.driver.as_ref().and_then(PluginProcess::exit) {
                let ev = format!("the driver exited: {}", exit.text);
                self.rows.record(judge::verdict(StepId::Launch, false, ev, t0.elapsed()));
                self.rows.why_not = Some("the driver did not start".into());
                return false;
            }
            if tokio::time::Instant::now() >= deadline {
                self.rows.record(judge::verdict(StepId::Launch, true, format!("pid {}", self.pid()), t0.elapsed()));
                let ev = format!(
                    "no registration socket in {} taken up by the kubelet and answering GetInfo within {} ms",
                    self.sb.registry_dir.display(),
                    self.cfg.register_timeout.as_millis()
                );
                self.rows.record(judge::verdict(StepId::Registration, false, ev, t0.elapsed()));
                self.rows.why_not = Some("the driver did not register".into());
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn pid(&self) -> u32 {
        self.driver.as_ref().map_or(0, PluginProcess::pid)
    }

    /// The driver's ResourceSlices for the node, as the API server stores them.
    async fn published_slices(&mut self) -> bool {
        let driver = self.name.clone().unwrap_or_default();
        self.rows.started(StepId::PublishedSlices);
        let t0 = Instant::now();
        let deadline = crate::duration::deadline(self.cfg.slice_timeout.max(Duration::from_secs(10)));
        let slices = loop {
            let slices = self
                .api
                .request("GET", "/apis/resource.k8s.io/v1/resourceslices", None)
                .await
                .ok()
                .and_then(|v| v["items"].as_array().cloned())
                .unwrap_or_default();
            if slices.iter().any(|s| s.pointer("/spec/driver").and_then(Value::as_str) == Some(&driver))
                || tokio::time::Instant::now() >= deadline
            {
                break slices;
            }
            tokio::time::sleep(POLL).await;
        };
        let (devices, _) = judge::slice_devices(&slices, &driver, NODE_NAME);
        let row = judge::published_slices(&slices, &driver, NODE_NAME, t0.elapsed(), &[]);
        self.devices = devices.len();
        let ok = row.outcome == Outcome::Pass;
        if row.outcome == Outcome::Skip {
            // The real scheduler allocates only published devices: nothing to allocate.
            let ev = format!("{}; the scheduler allocates only published devices", row.evidence);
            self.rows.record(judge::verdict(StepId::PublishedSlices, false, ev, t0.elapsed()));
        } else {
            self.rows.record(row);
        }
        if !ok {
            self.rows.why_not = Some("no devices published".into());
        }
        ok
    }

    /// The namespace (and its service account, made by the controller
    /// manager), the DeviceClass, the template and the claims.
    async fn objects(&mut self) -> std::result::Result<(), String> {
        let driver = self.name.clone().unwrap_or_default();
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
        self.create("/api/v1/namespaces", &ns).await?;
        self.create("/apis/resource.k8s.io/v1/deviceclasses", &judge::cluster_device_class(&driver)).await?;
        let base = format!("/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}");
        let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one", "namespace": NAMESPACE}, "spec": {"spec": judge::cluster_claim_spec(1)}});
        self.create(&format!("{base}/resourceclaimtemplates"), &template).await?;
        for (name, count) in [("two", 2), ("too-many", self.devices + 1)] {
            let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": NAMESPACE}, "spec": judge::cluster_claim_spec(count)});
            self.create(&format!("{base}/resourceclaims"), &claim).await?;
        }
        // Pods are refused until the namespace's default service account exists.
        let sa = format!("/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default");
        let deadline = crate::duration::deadline(POD_TIMEOUT);
        while self.api.request("GET", &sa, None).await.is_err() {
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("no service account {NAMESPACE}/default within {} s", POD_TIMEOUT.as_secs()));
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    async fn create(&self, path: &str, obj: &Value) -> std::result::Result<Value, String> {
        self.api.request("POST", path, Some(obj)).await.map_err(|e| format!("POST {path}: {}", e.message))
    }

    async fn pod(&self, name: &str) -> Value {
        let path = format!("/api/v1/namespaces/{NAMESPACE}/pods/{name}");
        self.api.request("GET", &path, None).await.unwrap_or(Value::Null)
    }

    /// The events of a pod (the kubelet's and the scheduler's words).
    async fn events(&self, pod: &str) -> Vec<String> {
        let path = format!(
            "/api/v1/namespaces/{NAMESPACE}/events?fieldSelector={}",
            crate::apiserver::client::pct(&format!("involvedObject.name={pod}"))
        );
        let items = self.api.request("GET", &path, None).await.ok().and_then(|v| v["items"].as_array().cloned());
        items
            .unwrap_or_default()
            .iter()
            .filter(|e| e["type"] == "Warning")
            .map(|e| {
                format!("{}: {}", e["reason"].as_str().unwrap_or_default(), e["message"].as_str().unwrap_or_default())
            })
            .map(|t| crate::text::shorten(&t, 400))
            .collect()
    }

    /// A pod with one claim (`template`: from the template `one`; else the
    /// claim `two`) until Running or the timeout; the verdict of `step`.
    async fn claim_pod(&mut self, step: StepId, name: &str, count: usize, template: bool) -> bool {
        self.rows.started(step);
        let t0 = Instant::now();
        let claim = if template { "one" } else { "two" };
        let pod = judge::cluster_pod(name, (claim, template));
        if let Err(e) = self.create(&format!("/api/v1/namespaces/{NAMESPACE}/pods"), &pod).await {
            self.rows.record(judge::result(step, Outcome::Error, e, t0.elapsed()));
            return false;
        }
        self.pods.push(name.to_string());
        let deadline = crate::duration::deadline(POD_TIMEOUT);
        let seen = loop {
            let seen = self.pod(name).await;
            if seen.pointer("/status/phase") == Some(&json!("Running")) || tokio::time::Instant::now() >= deadline {
                break seen;
            }
            tokio::time::sleep(POLL).await;
        };
        let claim_name = seen
            .pointer("/status/resourceClaimStatuses/0/resourceClaimName")
            .and_then(Value::as_str)
            .unwrap_or(claim)
            .to_string();
        let path = format!("/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims/{claim_name}");
        let claim_obj = self.api.request("GET", &path, None).await.ok();
        let events = self.events(name).await;
        let driver = self.name.clone().unwrap_or_default();
        let row = judge::cluster_running(step, &seen, claim_obj.as_ref(), count, &driver, &events, t0.elapsed());
        let ok = row.outcome == Outcome::Pass;
        self.rows.record(row);
        ok
    }

    /// A pod whose claim asks for one device more than published.
    async fn unsatisfiable(&mut self) {
        self.rows.started(StepId::UnsatisfiableClaim);
        let t0 = Instant::now();
        let pod = judge::cluster_pod("too-many-pod", ("too-many", false));
        if let Err(e) = self.create(&format!("/api/v1/namespaces/{NAMESPACE}/pods"), &pod).await {
            self.rows.record(judge::result(StepId::UnsatisfiableClaim, Outcome::Error, e, t0.elapsed()));
            return;
        }
        self.pods.push("too-many-pod".into());
        let deadline = crate::duration::deadline(POD_TIMEOUT);
        let seen = loop {
            let seen = self.pod("too-many-pod").await;
            let decided = seen.pointer("/spec/nodeName").is_some()
                || seen
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "PodScheduled" && c["status"] == "False"));
            if decided || tokio::time::Instant::now() >= deadline {
                break seen;
            }
            tokio::time::sleep(POLL).await;
        };
        self.rows.record(judge::cluster_unsatisfiable(&seen, self.devices + 1, t0.elapsed()));
    }

    /// Deletes the pods; the kubelet unprepares their claims before it lets
    /// them go. Then Unprepare again, as `dra check` does, on the template
    /// pod's claim.
    async fn unprepare(&mut self, admitted: bool) {
        self.rows.started(StepId::UnprepareIdempotent);
        let t0 = Instant::now();
        let claim = self.claim_ref("template-pod").await;
        let left = self.delete_pods().await;
        if !admitted {
            self.rows.record(judge::not_run(StepId::UnprepareIdempotent, "admission failed"));
            return;
        }
        let kubelet_error = (!left.is_empty()).then(|| {
            format!(
                "pods {} still there {} s after deletion: the kubelet did not finish unpreparing",
                left.join(", "),
                POD_TIMEOUT.as_secs()
            )
        });
        let second = match (&self.endpoint, claim) {
            (Some(endpoint), Some(claim)) => {
                let client = crate::transport::ClientConfig::default();
                match crate::dra::client::unprepare(endpoint, crate::dra::NodeApi::V1, &[claim], &client).await {
                    Ok(r) => Ok(crate::dra::check::map_problems(&r)),
                    Err(e) => Err(e.to_string()),
                }
            }
            _ => Err("the template pod's claim was not found".into()),
        };
        self.rows.record(judge::unprepare(kubelet_error.as_deref(), second, t0.elapsed()));
    }

    /// Deletes the pods made so far and waits (bounded) for them to go:
    /// the ones still there.
    async fn delete_pods(&mut self) -> Vec<String> {
        let pods = std::mem::take(&mut self.pods);
        for p in &pods {
            let path = format!("/api/v1/namespaces/{NAMESPACE}/pods/{p}");
            // Not 0: that removes the object at once (a force delete), before
            // the kubelet has stopped the pod and unprepared its claims.
            let _ = self.api.request("DELETE", &path, Some(&json!({"gracePeriodSeconds": 1}))).await;
        }
        let deadline = crate::duration::deadline(POD_TIMEOUT);
        let mut left = pods;
        while !left.is_empty() && tokio::time::Instant::now() < deadline {
            let mut still = Vec::new();
            for p in &left {
                if !self.pod(p).await.is_null() {
                    still.push(p.clone());
                }
            }
            left = still;
            if !left.is_empty() {
                tokio::time::sleep(POLL).await;
            }
        }
        left
    }

    /// The claim a pod got from its template, as a kubelet names it.
    async fn claim_ref(&self, pod: &str) -> Option<crate::dra::claims::ClaimRef> {
        let seen = self.pod(pod).await;
        let name = seen.pointer("/status/resourceClaimStatuses/0/resourceClaimName").and_then(Value::as_str)?;
        let path = format!("/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims/{name}");
        let claim = self.api.request("GET", &path, None).await.ok()?;
        Some(crate::dra::claims::ClaimRef {
            namespace: NAMESPACE.into(),
            name: name.to_string(),
            uid: claim.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string(),
        })
    }

    async fn shutdown(&mut self) {
        let Some(p) = &self.driver else { return };
        self.rows.send(SmokeProgress::Stopping { grace: self.cfg.grace });
        let t = p.terminate(self.cfg.grace).await;
        let exit = t.exit.map(|e| e.text).unwrap_or_else(|| "ended".into());
        let row = if t.already_exited {
            judge::verdict(StepId::Shutdown, false, format!("the driver had already stopped ({exit})"), t.after)
        } else {
            let ev = if t.exited_on_sigterm {
                format!("{exit} {} ms after SIGTERM", t.after.as_millis())
            } else {
                format!("still running {} ms after SIGTERM: killed", self.cfg.grace.as_millis())
            };
            judge::verdict(StepId::Shutdown, t.exited_on_sigterm, ev, t.after)
        };
        self.rows.record(row);
    }
}

impl<'p> Engine<'p> for Runner<'p> {
    fn rows(&mut self) -> &mut Rows<'p, StepId> {
        &mut self.rows
    }

    async fn steps(&mut self) {
        if !self.launch_and_register().await {
            return;
        }
        if !self.published_slices().await {
            return;
        }
        if let Err(e) = self.objects().await {
            self.rows.why_not = Some(format!("the smoke's objects could not be made: {e}"));
            return;
        }
        let admitted = self.claim_pod(StepId::Admission, "template-pod", 1, true).await;
        if !admitted {
            self.rows.why_not = Some("admission failed".into());
        }
        // The template pod goes first: its device is free again for the
        // 2-device claim (a driver may publish only 2).
        self.unprepare(admitted).await;
        if admitted && !self.rows.skipped(StepId::MultiDeviceClaim) {
            if self.devices >= 2 {
                self.claim_pod(StepId::MultiDeviceClaim, "pair-pod", 2, false).await;
            } else {
                let why = "the driver publishes 1 device: a claim for 2 has nothing to be allocated from";
                self.rows.record(judge::result(StepId::MultiDeviceClaim, Outcome::Skip, why, Duration::ZERO));
            }
        }
        if !self.rows.skipped(StepId::UnsatisfiableClaim) {
            self.unsatisfiable().await;
        }
        self.delete_pods().await;
        self.shutdown().await;
    }

    /// The driver, then the cluster.
    async fn stop(&mut self) {
        if let Some(p) = &self.driver
            && p.exit().is_none()
        {
            p.terminate(self.cfg.grace).await;
        }
        let _ = self.cluster.stop().await;
    }

    fn not_played(step: StepId) -> Option<&'static str> {
        not_played(step)
    }

    fn head(&self) -> Head {
        Head {
            suite: SUITE_NAME,
            kubelet_version: self.cfg.kubelet_version,
            engine: self.cluster.name(),
            command: self.sb.substitute(&self.cfg.command, 1),
            dir: self.layout.root.display().to_string(),
            dir_kept: self.cfg.keep,
            kubelet_socket: self.layout.device_plugins.join(crate::paths::KUBELET_SOCKET_NAME).display().to_string(),
            registry_dir: self.sb.registry_dir.display().to_string(),
            resource: self.name.clone(),
            plugin_socket: self.endpoint.as_ref().map(|e| e.display().to_string()),
        }
    }

    fn plugin(&self) -> Option<&PluginProcess> {
        self.driver.as_ref()
    }
}

/// The sockets in the registry directory, newest first.
fn sockets(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let mut found: Vec<(Option<SystemTime>, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            meta.file_type().is_socket().then(|| (meta.modified().ok(), e.path()))
        })
        .collect();
    found.sort_by(|a, b| b.cmp(a));
    found.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Case;

    #[test]
    fn every_step_the_engine_does_not_play_says_why() {
        let played = [
            StepId::Launch,
            StepId::Registration,
            StepId::PublishedSlices,
            StepId::Admission,
            StepId::MultiDeviceClaim,
            StepId::UnsatisfiableClaim,
            StepId::UnprepareIdempotent,
            StepId::Shutdown,
        ];
        for s in StepId::ALL {
            assert_eq!(not_played(s).is_none(), played.contains(&s), "{}", s.name());
        }
    }
}
