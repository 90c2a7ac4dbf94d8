//! The one-shot PodResources commands as library calls (`list`, `get`,
//! `allocatable`, `free`, `dump`): connect, ask, and return the view dpctl
//! shows with what the calls noticed on the way ([`Calls`]). Testable
//! without clap; the output layer renders the views and the notes.

use std::path::{Path, PathBuf};

use super::client::{ApiChoice, PodResourcesClient, PodResourcesConfig};
use super::fixture::FixtureFile;
use super::free::{self, FreeReport};
use super::view::{
    AllocatableReport, AllocatableView, Api, CPU_RESOURCE, Filter, GetView, HiddenDra, ListView, PodView,
    SCHEMA_VERSION,
};
use crate::error::{Error, Result};

/// What the client noticed besides the answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calls {
    /// The socket, when the kubelet has no v1 and v1alpha1 was used instead.
    pub fell_back: Option<PathBuf>,
    /// Calls the kubelet rate-limited (retried after a back-off).
    pub rate_limited: u64,
    /// A note on what could not be recorded (`dump` of a kubelet without
    /// GetAllocatableResources).
    pub skipped: Option<String>,
}

impl Calls {
    /// What `client` noticed so far.
    pub fn of(client: &PodResourcesClient) -> Calls {
        Calls {
            fell_back: client.fell_back().then(|| client.path().to_path_buf()),
            rate_limited: client.rate_limited(),
            skipped: None,
        }
    }
}

/// `list`: the pods `filter` selects (v1 List, or v1alpha1 when the kubelet has no v1).
/// Also the DRA devices the filter hid (see [`HiddenDra`]).
pub async fn list(
    socket: &Path,
    config: &PodResourcesConfig,
    filter: &Filter,
) -> Result<(ListView, Option<HiddenDra>, Calls)> {
    let client = PodResourcesClient::connect(socket, config).await?;
    let listing = client.list().await?;
    let all: Vec<PodView> = listing.pods.into_iter().map(PodView::from).collect();
    let hidden = filter.hidden_dra(&all);
    let pods = filter.apply(all);
    let view = ListView { schema_version: SCHEMA_VERSION, api_version: listing.api, pod_resources: pods };
    Ok((view, hidden, Calls::of(&client)))
}

/// `get`: one pod (v1 Get).
pub async fn get(socket: &Path, config: &PodResourcesConfig, pod: &str, namespace: &str) -> Result<(GetView, Calls)> {
    let client = PodResourcesClient::connect(socket, config).await?;
    let pod = client.get(pod, namespace).await?;
    let view = GetView { schema_version: SCHEMA_VERSION, api_version: Api::V1, pod_resources: PodView::from(pod) };
    Ok((view, Calls::of(&client)))
}

/// `allocatable`: GetAllocatableResources, and why it lacks devices the
/// node's checkpoint records ([`super::cause`]; empty when it lacks none or
/// no checkpoint is beside the socket).
pub async fn allocatable(
    socket: &Path,
    config: &PodResourcesConfig,
) -> Result<(AllocatableReport, Vec<String>, Calls)> {
    let client = PodResourcesClient::connect(socket, config).await?;
    let alloc = client.allocatable().await?;
    let report = AllocatableReport { schema_version: SCHEMA_VERSION, allocatable: AllocatableView::from(&alloc) };
    let causes = super::cause::device_plugin_dir(socket)
        .map(|d| super::cause::causes(&report.allocatable, &d))
        .unwrap_or_default();
    Ok((report, causes, Calls::of(&client)))
}

/// What `free` reports on.
#[derive(Debug, Clone, Default)]
pub struct FreeOptions {
    /// Only this resource (device resource name, `cpu`, or memory type).
    pub resource: Option<String>,
    /// Split free CPUs by NUMA node, node n holding CPUs n*N..n*N+N-1.
    pub cpus_per_numa: Option<u32>,
}

/// `free`: allocatable minus in use (v1 only: v1alpha1 has no
/// GetAllocatableResources), and the allocatable view it started from.
pub async fn free(
    socket: &Path,
    config: &PodResourcesConfig,
    opts: &FreeOptions,
) -> Result<(FreeReport, AllocatableView, Calls)> {
    let mut config = config.clone();
    if config.api == ApiChoice::Auto {
        config.api = ApiChoice::V1;
    }
    let client = PodResourcesClient::connect(socket, &config).await?;
    let alloc = AllocatableView::from(&client.allocatable().await?);
    let listing = client.list().await?;
    let pods: Vec<PodView> = listing.pods.into_iter().map(PodView::from).collect();
    let mut report = free::free(&alloc, &pods);
    if let Some(per) = opts.cpus_per_numa {
        report.cpus.split_by_numa(per as usize);
    }
    if let Some(r) = &opts.resource {
        report.devices.retain(|d| &d.resource_name == r);
        report.memory.retain(|m| &m.memory_type == r);
        report.held_not_allocatable.retain(|h| &h.resource_name == r);
        if r != CPU_RESOURCE {
            report.cpus = free::CpuFree::default();
        }
    }
    Ok((report, alloc, Calls::of(&client)))
}

/// `dump`: this node's List and GetAllocatableResources as a fixture file. A
/// kubelet without GetAllocatableResources gives an empty allocatable part
/// (said in [`Calls::skipped`]).
pub async fn dump(socket: &Path, config: &PodResourcesConfig) -> Result<(FixtureFile, Calls)> {
    let client = PodResourcesClient::connect(socket, config).await?;
    let listing = client.list().await?;
    let mut skipped = None;
    let alloc = if listing.api == Api::V1 {
        match client.allocatable().await {
            Ok(alloc) => AllocatableView::from(&alloc),
            Err(e @ (Error::Unimplemented { .. } | Error::Rpc { code: tonic::Code::Unknown, .. })) => {
                skipped = Some(format!("no allocatable resources recorded: {e}"));
                AllocatableView::default()
            }
            Err(e) => return Err(e),
        }
    } else {
        AllocatableView::default()
    };
    let file = FixtureFile { pod_resources: listing.pods.into_iter().map(PodView::from).collect(), allocatable: alloc };
    Ok((file, Calls { skipped, ..Calls::of(&client) }))
}
