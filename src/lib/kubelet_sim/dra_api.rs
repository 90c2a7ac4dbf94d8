//! The API server side of the sim's DRA manager (docs/dra.md §6): the
//! embedded API server of `--api-objects`, the claims a pod names as the
//! kubelet GETs them (that server, or read-only the one of `--kubeconfig`),
//! and the ResourceSlice deletions the DRA manager asks for.

use std::sync::Arc;

use super::events::EventKind;
use super::pod::PodSpec;
use super::shell::Inner;
use crate::error::{Error, Result};

/// Binds the embedded API server of `--api-objects` (docs/dra.md §6): its
/// record and kubeconfig in the kubelet's root directory (the parent of
/// plugins_registry), served until the sim stops.
pub(crate) async fn start_api(inner: &Arc<Inner>) -> Result<Option<tokio::task::JoinHandle<()>>> {
    let Some(objects) = inner.config.api_objects.clone() else { return Ok(None) };
    let Some(registry) = inner.config.registry_dir.as_deref() else {
        return Err(Error::invalid(
            "--api-objects",
            "serves the API objects DRA drivers read, and DRA drivers register on plugins_registry; \
             hint: add --registry-dir DIR",
        ));
    };
    // Checked here first so that errors name the sim's flag.
    crate::apiserver::objects::load_as(&objects, "--api-objects")?;
    let dir = registry.parent().unwrap_or(registry).to_path_buf();
    let config = crate::apiserver::Config {
        kubeconfig_out: Some(dir.join("kubeconfig")),
        dir,
        objects,
        listen: crate::apiserver::DEFAULT_LISTEN.parse().map_err(|_| Error::invalid("--api-objects", "bad address"))?,
    };
    let server = crate::apiserver::bind(&config).await?;
    tracing::info!(server = server.url(), kubeconfig = %server.kubeconfig().display(), "serving the API objects");
    let _ = inner.api.set(server.handle());
    let stop = inner.shutdown_future();
    Ok(Some(tokio::spawn(async move {
        if let Err(e) = server.run(stop, |_| Ok(())).await {
            tracing::warn!(error = %e, "the embedded API server stopped");
        }
    })))
}

/// The pod's claims from the embedded API server, as the kubelet GETs them
/// (`fetch ResourceClaim`): the claims given with the pod are stored there
/// first (the manifest wins over the objects file, so the driver reads what
/// the sim prepares), then each claim the pod names and the manifest does
/// not carry is read from it. Without `--api-objects`, nothing changes.
pub(crate) async fn resolve_claims(inner: &Inner, spec: &mut PodSpec) -> Result<()> {
    if inner.config.assume_claims_reserved {
        let uid = spec.uid.clone().unwrap_or_default();
        for c in spec.claim_objects.iter_mut().filter(|c| c.reserved_for.is_none()) {
            c.reserved_for = Some(vec![uid.clone()]);
        }
    }
    // The documents as given are needed once, to store them: the pod keeps the parsed claims.
    let given: Vec<(String, serde_json::Value)> = spec
        .claim_objects
        .iter_mut()
        .filter_map(|c| {
            let mut o = c.object.take()?;
            // A claim document without a namespace is the pod's, as the sim reads it.
            if o.pointer("/metadata/namespace").is_none_or(serde_json::Value::is_null) {
                o["metadata"]["namespace"] = serde_json::Value::from(c.namespace.clone());
            }
            Some((c.name.clone(), o))
        })
        .collect();
    if let Some(client) = &inner.api_client {
        return read_claims(client, spec).await;
    }
    let Some(api) = inner.api.get() else { return Ok(()) };
    for (name, obj) in given {
        api.put(obj, &format!("pod {}/{}: ResourceClaim {name}", spec.namespace, spec.name))?;
    }
    for pc in &spec.resource_claims {
        let n = &pc.resource_claim_name;
        if spec.claim_objects.iter().any(|o| o.namespace == spec.namespace && &o.name == n) {
            continue;
        }
        if let Some(v) = api.get("resourceclaims", &spec.namespace, n)? {
            let place = format!("the API server's ResourceClaim {}/{n}", spec.namespace);
            let mut obj = super::dra_claims::claim_object(&v, &spec.namespace, &place)?;
            obj.object = None;
            spec.claim_objects.push(obj);
        }
    }
    Ok(())
}

/// `--kubeconfig`: each claim the pod names and its manifest does not carry
/// is read from that API server (GET, never a write: the sim changes
/// nothing in a cluster); a 404 leaves it missing, which fails the
/// preparation with the kubelet's `fetch ResourceClaim` text.
async fn read_claims(client: &crate::apiserver::client::Client, spec: &mut PodSpec) -> Result<()> {
    let ns = spec.namespace.clone();
    for pc in spec.resource_claims.clone() {
        let n = &pc.resource_claim_name;
        if spec.claim_objects.iter().any(|o| o.namespace == ns && &o.name == n) {
            continue;
        }
        let path = format!("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{n}");
        match client.request("GET", &path, None).await {
            Ok(v) => {
                let place = format!("{}: ResourceClaim {ns}/{n}", client.server());
                let mut obj = super::dra_claims::claim_object(&v, &ns, &place)?;
                obj.object = None;
                spec.claim_objects.push(obj);
            }
            Err(e) if e.code == 404 => {}
            Err(e) => {
                return Err(Error::invalid(
                    "--kubeconfig",
                    format!("fetch ResourceClaim {n} from {}: {e}", client.server()),
                ));
            }
        }
    }
    Ok(())
}

/// Deletes the node's ResourceSlices (all, or `driver`'s) in the sim's API
/// server, as `wipeResourceSlices` in
/// pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go does (a DeleteCollection
/// by `spec.nodeName` and `spec.driver`). The node is the one Node of the
/// objects file; with none (or several) nothing is wiped, as the kubelet
/// waits for its Node.
pub(crate) fn wipe(inner: &Inner, driver: Option<&str>, reason: &str) {
    let Some(api) = inner.api.get() else { return };
    let Ok(Some(node)) = api.only_node() else { return };
    let selector = match driver {
        Some(d) => format!("spec.nodeName={node},spec.driver={d}"),
        None => format!("spec.nodeName={node}"),
    };
    match api.delete_slices(&selector) {
        Ok(slices) => inner.emit(EventKind::DraSlicesWiped {
            node,
            driver: driver.map(String::from),
            slices,
            reason: reason.to_string(),
        }),
        Err(e) => tracing::warn!(error = %e, "could not delete the ResourceSlices"),
    }
}
