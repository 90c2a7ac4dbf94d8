//! A seeded fake PodResources server: a [`Provider`] whose pods and
//! allocatable resources come from a JSON file, with a [`FixtureHandle`] to
//! swap the data while it serves (tests drive `watch` this way, and
//! `dpctl podresources serve` reloads the file when it changes).
//!
//! # File format
//!
//! ```json
//! {
//!   "pod_resources": [
//!     {
//!       "name": "train-0", "namespace": "gpu-jobs",
//!       "containers": [
//!         {
//!           "name": "trainer",
//!           "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-0"], "numa_nodes": [0]}],
//!           "cpu_ids": [2, 3],
//!           "memory": [{"memory_type": "hugepages-2Mi", "size": 67108864, "numa_nodes": [0]}],
//!           "dynamic_resources": [
//!             {"claim_name": "gpu", "claim_namespace": "gpu-jobs",
//!              "claim_resources": [{"cdi_devices": ["vendor.com/gpu=gpu-3"], "driver_name": "gpu.vendor.com",
//!                                   "pool_name": "node-a", "device_name": "gpu-3", "share_id": null}]}
//!           ]
//!         }
//!       ],
//!       "cpu_ids": [], "memory": []
//!     }
//!   ],
//!   "allocatable": {"devices": [...], "cpu_ids": [0, 1, 2, 3], "memory": [...]}
//! }
//! ```
//!
//! Keys are the proto field names in snake_case; every key is optional
//! (missing lists are empty). This is exactly what `dpctl podresources dump`
//! writes and what `list -o json` prints under `pod_resources`, so a node can
//! be recorded and replayed. The protobuf JSON mapping is accepted too, so
//! the grpcio peer's `podresources.example.json` and `grpcurl` output load
//! unchanged:
//!
//! - topology as `"topology": {"nodes": [{"ID": 0}]}` (or `"id"`) instead of
//!   `"numa_nodes": [0]`; no topology at all (neither key) is kept as absent,
//!   which is not the same as NUMA node 0;
//! - lowerCamelCase keys (`podResources`, `deviceIds`, `cpuIds`, ...);
//! - 64-bit numbers as strings (`"size": "17179869184"`);
//! - CDI devices as `{"name": "..."}` objects or plain strings;
//! - top-level `_comment`, `schema_version` and `api_version` are ignored.
//!
//! Unknown keys are errors that name the key and line, so a typo does not
//! silently drop data.
//!
//! Entries no kubelet sends are refused, naming the entry (docs/protocol.md §2.1,
//! every version): the kubelet reports devices as one `ContainerDevices` per
//! (device, NUMA node), so an entry with several device IDs, with none, or
//! with several NUMA nodes is an error (split it: one entry per ID and node).
//!
//! A container may carry `"sidecar": true` (a dpctl key, not a proto field):
//! it is a restartable init container, which v1 lists (put sidecars first, as
//! the kubelet does) and v1alpha1 leaves out, as v1alpha1 lists regular
//! containers only (docs/protocol.md §2.2).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use serde::de::{self, IgnoredAny, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::server::{Provider, to_v1alpha1};
use super::view::{AllocatableView, PodView};
use crate::error::{Error, Result};
use crate::proto::podresources::{v1, v1alpha1};

/// What a fake kubelet reports: its pods and its allocatable resources.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fixture {
    /// Pods, in the order `List` returns them.
    pub pods: Vec<v1::PodResources>,
    /// `GetAllocatableResources`.
    pub allocatable: v1::AllocatableResourcesResponse,
    /// Restartable init containers, as (namespace, pod, container): listed
    /// by v1, left out by v1alpha1.
    pub sidecars: BTreeSet<(String, String, String)>,
}

/// The file format in its canonical form (what `dump` writes).
#[derive(Debug, Clone, Serialize)]
pub struct FixtureFile {
    /// The pods.
    pub pod_resources: Vec<PodView>,
    /// The allocatable resources.
    pub allocatable: AllocatableView,
}

impl Fixture {
    /// Parses the JSON text of a fixture; `place` names it in errors.
    pub fn from_json(text: &str, place: &str) -> Result<Self> {
        let spec: FileSpec = serde_json::from_str(text).map_err(|e| Error::invalid(place, e.to_string()))?;
        spec.into_fixture().map_err(|m| Error::invalid(place, m))
    }

    /// Reads and parses a fixture file; errors name the file.
    pub fn load(path: &Path) -> Result<Self> {
        Self::load_as(path, &path.display().to_string())
    }

    /// Reads and parses a fixture file the user named; errors are
    /// [`Error::Invalid`] at `place` (e.g. `--data FILE`), an unreadable
    /// file included (with the OS reason): it is bad input, not a socket
    /// problem.
    pub fn load_as(path: &Path, place: &str) -> Result<Self> {
        let text = crate::input::read_text(path, place)?;
        Self::from_json(&text, place)
    }

    /// The canonical file form.
    pub fn to_file(&self) -> FixtureFile {
        FixtureFile {
            pod_resources: self.pods.iter().map(PodView::from).collect(),
            allocatable: AllocatableView::from(&self.allocatable),
        }
    }
}

/// A cloneable handle that reads and replaces a [`FixtureProvider`]'s data
/// while it serves.
#[derive(Debug, Clone, Default)]
pub struct FixtureHandle {
    data: Arc<RwLock<Arc<Fixture>>>,
}

impl FixtureHandle {
    /// The current data.
    pub fn get(&self) -> Arc<Fixture> {
        match self.data.read() {
            Ok(g) => Arc::clone(&g),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Replaces the data; the next call answers from it.
    pub fn set(&self, fixture: Fixture) {
        match self.data.write() {
            Ok(mut g) => *g = Arc::new(fixture),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(fixture),
        }
    }

    /// Changes the data in place.
    pub fn update(&self, f: impl FnOnce(&mut Fixture)) {
        let mut next = (*self.get()).clone();
        f(&mut next);
        self.set(next);
    }
}

/// A [`Provider`] that answers from a [`Fixture`].
#[derive(Debug, Clone, Default)]
pub struct FixtureProvider {
    handle: FixtureHandle,
}

impl FixtureProvider {
    /// A provider serving `fixture`.
    pub fn new(fixture: Fixture) -> Self {
        let handle = FixtureHandle::default();
        handle.set(fixture);
        FixtureProvider { handle }
    }

    /// The handle that swaps its data.
    pub fn handle(&self) -> FixtureHandle {
        self.handle.clone()
    }
}

impl Provider for FixtureProvider {
    fn list(&self) -> Vec<v1::PodResources> {
        self.handle.get().pods.clone()
    }

    fn get(&self, name: &str, namespace: &str) -> Option<v1::PodResources> {
        self.handle.get().pods.iter().find(|p| p.name == name && p.namespace == namespace).cloned()
    }

    fn allocatable(&self) -> v1::AllocatableResourcesResponse {
        self.handle.get().allocatable.clone()
    }

    /// Regular containers only (docs/protocol.md §2.2): the fixture's sidecars
    /// are left out.
    fn list_v1alpha1(&self) -> Vec<v1alpha1::PodResources> {
        let f = self.handle.get();
        f.pods
            .iter()
            .map(|p| {
                let mut p = p.clone();
                p.containers.retain(|c| !f.sidecars.contains(&(p.namespace.clone(), p.name.clone(), c.name.clone())));
                to_v1alpha1(&p)
            })
            .collect()
    }
}

/// Notices when a fixture file changes (modification time or size), for
/// reloading it while serving.
#[derive(Debug)]
pub struct FileWatch {
    path: PathBuf,
    stamp: Option<(SystemTime, u64)>,
}

impl FileWatch {
    /// Starts watching `path` from its current state.
    pub fn new(path: &Path) -> Self {
        FileWatch { path: path.to_path_buf(), stamp: stamp(path) }
    }

    /// `Some` with the newly parsed data (or the parse error) when the file
    /// changed since the last call; `None` when it did not.
    pub fn poll(&mut self) -> Option<Result<Fixture>> {
        let now = stamp(&self.path);
        if now == self.stamp || now.is_none() {
            return None;
        }
        self.stamp = now;
        Some(Fixture::load(&self.path))
    }
}

/// How often [`reload_loop`] checks whether the data file changed.
pub const RELOAD_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// What [`reload_loop`] did after the data file changed.
#[derive(Debug)]
pub enum Reload {
    /// The new data is served now: this many pods.
    Reloaded {
        /// Pods in the new data.
        pods: usize,
    },
    /// The file did not parse: the previous data is still served.
    Kept(Error),
}

/// Watches `path` every [`RELOAD_POLL`] and puts each new version into
/// `handle`, telling `report` what happened. Runs until `report` fails (or
/// the caller drops it, as `podresources serve` does when the server stops).
pub async fn reload_loop(
    path: &Path,
    handle: &FixtureHandle,
    mut report: impl FnMut(Reload) -> Result<()>,
) -> Result<()> {
    let mut watch = FileWatch::new(path);
    loop {
        tokio::time::sleep(RELOAD_POLL).await;
        match watch.poll() {
            Some(Ok(f)) => {
                let pods = f.pods.len();
                handle.set(f);
                report(Reload::Reloaded { pods })?;
            }
            Some(Err(e)) => report(Reload::Kept(e))?,
            None => {}
        }
    }
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

// ---- the accepted JSON, before conversion ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    #[serde(default, alias = "podResources")]
    pod_resources: Vec<PodSpec>,
    #[serde(default)]
    allocatable: AllocSpec,
    #[serde(default, rename = "_comment")]
    _comment: Option<IgnoredAny>,
    #[serde(default, rename = "schema_version")]
    _schema_version: Option<IgnoredAny>,
    #[serde(default, rename = "api_version")]
    _api_version: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PodSpec {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    containers: Vec<ContainerSpec>,
    #[serde(default, alias = "cpuIds")]
    cpu_ids: Vec<Int>,
    #[serde(default)]
    memory: Vec<MemorySpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContainerSpec {
    #[serde(default)]
    name: String,
    #[serde(default)]
    devices: Vec<DevicesSpec>,
    #[serde(default, alias = "cpuIds")]
    cpu_ids: Vec<Int>,
    #[serde(default)]
    memory: Vec<MemorySpec>,
    #[serde(default, alias = "dynamicResources")]
    dynamic_resources: Vec<ClaimSpec>,
    #[serde(default)]
    sidecar: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DevicesSpec {
    #[serde(default, alias = "resourceName")]
    resource_name: String,
    #[serde(default, alias = "deviceIds")]
    device_ids: Vec<String>,
    #[serde(default)]
    topology: Option<TopologySpec>,
    #[serde(default, alias = "numaNodes")]
    numa_nodes: Option<Vec<Int>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemorySpec {
    #[serde(default, alias = "memoryType")]
    memory_type: String,
    #[serde(default)]
    size: Size,
    #[serde(default)]
    topology: Option<TopologySpec>,
    #[serde(default, alias = "numaNodes")]
    numa_nodes: Option<Vec<Int>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologySpec {
    #[serde(default)]
    nodes: Vec<NodeSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeSpec {
    #[serde(default, alias = "ID")]
    id: Int,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimSpec {
    #[serde(default, alias = "claimName")]
    claim_name: String,
    #[serde(default, alias = "claimNamespace")]
    claim_namespace: String,
    #[serde(default, alias = "claimResources")]
    claim_resources: Vec<ClaimResourceSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimResourceSpec {
    #[serde(default, alias = "cdiDevices")]
    cdi_devices: Vec<CdiSpec>,
    #[serde(default, alias = "driverName")]
    driver_name: String,
    #[serde(default, alias = "poolName")]
    pool_name: String,
    #[serde(default, alias = "deviceName")]
    device_name: String,
    #[serde(default, alias = "shareId")]
    share_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum CdiSpec {
    Name(String),
    Object {
        #[serde(default)]
        name: String,
    },
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AllocSpec {
    #[serde(default)]
    devices: Vec<DevicesSpec>,
    #[serde(default, alias = "cpuIds")]
    cpu_ids: Vec<Int>,
    #[serde(default)]
    memory: Vec<MemorySpec>,
}

/// A 64-bit integer written as a JSON number or a string (protobuf JSON).
#[derive(Default, Clone, Copy)]
struct Int(i64);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Int;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an integer (a number or a string of digits)")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Int, E> {
                Ok(Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Int, E> {
                i64::try_from(v).map(Int).map_err(|_| E::custom(format!("{v} is too large")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Int, E> {
                v.trim().parse().map(Int).map_err(|_| E::custom(format!("{v:?} is not an integer")))
            }
        }
        d.deserialize_any(V)
    }
}

/// A memory size: like [`Int`], but every uint64 value fits (the proto
/// field is `uint64`), and a negative one is kept to be refused with the
/// entry's name.
#[derive(Default, Clone, Copy)]
struct Size(i128);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a size in bytes (a number or a string of digits)")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Size, E> {
                Ok(Size(i128::from(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Size, E> {
                Ok(Size(i128::from(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Size, E> {
                // Bounded: at most 39 digits reach i128's parser's overflow check.
                v.trim().parse().map(Size).map_err(|_| E::custom(format!("{v:?} is not an integer")))
            }
        }
        d.deserialize_any(V)
    }
}

fn ints(v: &[Int]) -> Vec<i64> {
    v.iter().map(|i| i.0).collect()
}

fn topology(
    what: &str,
    t: Option<&TopologySpec>,
    n: Option<&Vec<Int>>,
) -> std::result::Result<Option<v1::TopologyInfo>, String> {
    match (t, n) {
        (Some(_), Some(_)) => Err(format!("{what}: give either topology or numa_nodes, not both")),
        (Some(t), None) => {
            Ok(Some(v1::TopologyInfo { nodes: t.nodes.iter().map(|n| v1::NumaNode { id: n.id.0 }).collect() }))
        }
        (None, Some(n)) => Ok(Some(v1::TopologyInfo { nodes: n.iter().map(|id| v1::NumaNode { id: id.0 }).collect() })),
        (None, None) => Ok(None),
    }
}

impl DevicesSpec {
    fn convert(&self, at: &str) -> std::result::Result<v1::ContainerDevices, String> {
        let entry = format!("{at} devices {} [{}]", self.resource_name, self.device_ids.join(","));
        let topology = topology(&entry, self.topology.as_ref(), self.numa_nodes.as_ref())?;
        let nodes = topology.as_ref().map_or(0, |t| t.nodes.len());
        // docs/protocol.md §2.1 (every version): one ContainerDevices per (device,
        // NUMA node), with exactly one ID and at most one node.
        let never = match self.device_ids.len() {
            0 => Some("no device ID".to_string()),
            1 if nodes > 1 => Some(format!("{nodes} NUMA nodes")),
            1 => None,
            n if nodes > 1 => Some(format!("{n} device IDs and {nodes} NUMA nodes")),
            n => Some(format!("{n} device IDs")),
        };
        if let Some(what) = never {
            return Err(format!(
                "{entry}: {what} in one entry, which no kubelet sends: it reports one entry per device and NUMA \
                 node, each with exactly one device ID and at most one node (hint: split it into one entry per ID \
                 and node)"
            ));
        }
        Ok(v1::ContainerDevices {
            resource_name: self.resource_name.clone(),
            device_ids: self.device_ids.clone(),
            topology,
        })
    }
}

impl MemorySpec {
    fn convert(&self, at: &str) -> std::result::Result<v1::ContainerMemory, String> {
        let size = match u64::try_from(self.size.0) {
            Ok(size) => size,
            Err(_) if self.size.0 < 0 => {
                return Err(format!("{at} memory {}: size must not be negative", self.memory_type));
            }
            Err(_) => {
                return Err(format!(
                    "{at} memory {}: size {} is over the largest uint64 ({})",
                    self.memory_type,
                    self.size.0,
                    u64::MAX
                ));
            }
        };
        Ok(v1::ContainerMemory {
            memory_type: self.memory_type.clone(),
            size,
            topology: topology(
                &format!("{at} memory {}", self.memory_type),
                self.topology.as_ref(),
                self.numa_nodes.as_ref(),
            )?,
        })
    }
}

fn convert_all<T, U>(
    items: &[T],
    f: impl Fn(&T) -> std::result::Result<U, String>,
) -> std::result::Result<Vec<U>, String> {
    items.iter().map(f).collect()
}

impl FileSpec {
    fn into_fixture(self) -> std::result::Result<Fixture, String> {
        let mut pods = Vec::with_capacity(self.pod_resources.len());
        let mut sidecars = BTreeSet::new();
        for p in &self.pod_resources {
            let at = format!("pod {}/{}", p.namespace, p.name);
            let mut containers = Vec::with_capacity(p.containers.len());
            for c in &p.containers {
                let cat = format!("{at} container {}", c.name);
                if c.sidecar {
                    sidecars.insert((p.namespace.clone(), p.name.clone(), c.name.clone()));
                }
                containers.push(v1::ContainerResources {
                    name: c.name.clone(),
                    devices: convert_all(&c.devices, |d| d.convert(&cat))?,
                    cpu_ids: ints(&c.cpu_ids),
                    memory: convert_all(&c.memory, |m| m.convert(&cat))?,
                    dynamic_resources: c
                        .dynamic_resources
                        .iter()
                        .map(|d| v1::DynamicResource {
                            claim_name: d.claim_name.clone(),
                            claim_namespace: d.claim_namespace.clone(),
                            claim_resources: d
                                .claim_resources
                                .iter()
                                .map(|r| v1::ClaimResource {
                                    cdi_devices: r
                                        .cdi_devices
                                        .iter()
                                        .map(|c| v1::CdiDevice {
                                            name: match c {
                                                CdiSpec::Name(n) | CdiSpec::Object { name: n } => n.clone(),
                                            },
                                        })
                                        .collect(),
                                    driver_name: r.driver_name.clone(),
                                    pool_name: r.pool_name.clone(),
                                    device_name: r.device_name.clone(),
                                    share_id: r.share_id.clone(),
                                })
                                .collect(),
                        })
                        .collect(),
                });
            }
            pods.push(v1::PodResources {
                name: p.name.clone(),
                namespace: p.namespace.clone(),
                containers,
                cpu_ids: ints(&p.cpu_ids),
                memory: convert_all(&p.memory, |m| m.convert(&at))?,
            });
        }
        let a = &self.allocatable;
        let allocatable = v1::AllocatableResourcesResponse {
            devices: convert_all(&a.devices, |d| d.convert("allocatable"))?,
            cpu_ids: ints(&a.cpu_ids),
            memory: convert_all(&a.memory, |m| m.convert("allocatable"))?,
        };
        Ok(Fixture { pods, allocatable, sidecars })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `podresources serve --data` reloads a changed file and keeps the old
    /// data when the new file does not parse (the loop, without clap).
    #[tokio::test]
    async fn the_reload_loop_serves_new_data_and_keeps_old_data_on_a_bad_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("pods.json");
        std::fs::write(&path, r#"{"pod_resources": []}"#).expect("write");
        let provider = FixtureProvider::new(Fixture::default());
        let handle = provider.handle();
        let mut seen = Vec::new();
        let writer = {
            let path = path.clone();
            async move {
                tokio::time::sleep(RELOAD_POLL).await;
                std::fs::write(&path, r#"{"pod_resources": [{"name": "a", "namespace": "n", "containers": []}]}"#)
                    .expect("write");
                tokio::time::sleep(RELOAD_POLL * 3).await;
                std::fs::write(&path, "{not json").expect("write");
                std::future::pending::<()>().await
            }
        };
        let looped = reload_loop(&path, &handle, |r| {
            seen.push(match r {
                Reload::Reloaded { pods } => format!("reloaded {pods}"),
                Reload::Kept(e) => format!("kept: {e}"),
            });
            if seen.len() == 2 { Err(Error::invalid("test", "done")) } else { Ok(()) }
        });
        let ended = tokio::time::timeout(RELOAD_POLL * 20, async {
            tokio::select! {
                r = looped => r,
                () = writer => Ok(()),
            }
        })
        .await;
        assert!(matches!(ended, Ok(Err(Error::Invalid { .. }))), "{ended:?}");
        assert_eq!(seen[0], "reloaded 1");
        assert!(seen[1].starts_with("kept: "), "{seen:?}");
        assert_eq!(provider.list().len(), 1, "the bad file did not replace the good data");
    }

    const PROTO_JSON: &str = r#"{
      "_comment": "protobuf JSON mapping",
      "podResources": [
        {"name": "p", "namespace": "ns", "containers": [
          {"name": "c",
           "devices": [{"resourceName": "x/gpu", "deviceIds": ["g0"], "topology": {"nodes": [{"ID": 0}]}},
                       {"resource_name": "x/nic", "device_ids": ["n0"]}],
           "cpuIds": ["3", 4],
           "memory": [{"memoryType": "memory", "size": "17179869184", "topology": {"nodes": [{"id": 1}]}}],
           "dynamicResources": [{"claimName": "cl", "claimNamespace": "ns",
              "claimResources": [{"cdiDevices": [{"name": "v/gpu=0"}], "driverName": "d", "poolName": "p",
                                  "deviceName": "g", "shareId": "s"}]}]}]}
      ],
      "allocatable": {"devices": [], "cpu_ids": [0, 1]}
    }"#;

    #[test]
    fn proto_json_mapping_loads() {
        let f = Fixture::from_json(PROTO_JSON, "t.json").unwrap();
        let c = &f.pods[0].containers[0];
        assert_eq!(c.devices[0].topology.as_ref().unwrap().nodes[0].id, 0);
        assert!(c.devices[1].topology.is_none(), "no topology stays absent");
        assert_eq!(c.cpu_ids, [3, 4]);
        assert_eq!(c.memory[0].size, 17_179_869_184);
        assert_eq!(c.dynamic_resources[0].claim_resources[0].cdi_devices[0].name, "v/gpu=0");
        assert_eq!(c.dynamic_resources[0].claim_resources[0].share_id.as_deref(), Some("s"));
        assert_eq!(f.allocatable.cpu_ids, [0, 1]);
    }

    #[test]
    fn canonical_form_round_trips() {
        let f = Fixture::from_json(PROTO_JSON, "t.json").unwrap();
        let text = serde_json::to_string(&f.to_file()).unwrap();
        assert_eq!(Fixture::from_json(&text, "again").unwrap(), f);
    }

    /// docs/protocol.md's PodResources `ContainerMemory.size` is a uint64: every
    /// value loads, u64::MAX included (it was refused as "too large"), as a
    /// number or a string, and round-trips; negative or over uint64 is
    /// refused naming the entry.
    #[test]
    fn memory_size_takes_every_uint64() {
        let pod = |size: &str| {
            format!(
                r#"{{"pod_resources": [{{"name": "p", "namespace": "ns", "containers": [{{"name": "c", "memory": [{{"memory_type": "memory", "size": {size}}}]}}]}}]}}"#
            )
        };
        for text in ["18446744073709551615", "\"18446744073709551615\"", "0"] {
            let f = Fixture::from_json(&pod(text), "f.json").unwrap();
            let want = if text == "0" { 0 } else { u64::MAX };
            assert_eq!(f.pods[0].containers[0].memory[0].size, want, "{text}");
            let again = serde_json::to_string(&f.to_file()).unwrap();
            assert_eq!(Fixture::from_json(&again, "again").unwrap(), f);
        }
        let e = Fixture::from_json(&pod("-1"), "f.json").unwrap_err().to_string();
        assert!(e.contains("pod ns/p container c memory memory: size must not be negative"), "{e}");
        let e = Fixture::from_json(&pod("\"18446744073709551616\""), "f.json").unwrap_err().to_string();
        assert!(e.contains("memory memory: size 18446744073709551616 is over the largest uint64"), "{e}");
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = Fixture::from_json(r#"{"pod_resources": [{"name": "p", "contianers": []}]}"#, "f.json").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("f.json") && s.contains("contianers"), "{s}");
        let e = Fixture::from_json(
            r#"{"allocatable": {"devices": [{"resource_name": "r", "device_ids": ["d"], "numa_nodes": [0], "topology": {"nodes": []}}]}}"#,
            "f.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("either topology or numa_nodes"), "{e}");
    }

    /// docs/protocol.md §2.1 (every version): the kubelet sends one
    /// ContainerDevices per (device, NUMA node); other shapes are refused,
    /// naming the entry.
    #[test]
    fn entries_no_kubelet_sends_are_refused_by_name() {
        let pod = |dev: &str| {
            format!(
                r#"{{"pod_resources": [{{"name": "p", "namespace": "ns", "containers": [{{"name": "c", "devices": [{dev}]}}]}}]}}"#
            )
        };
        let err = |text: &str| Fixture::from_json(text, "f.json").unwrap_err();
        let e = err(&pod(r#"{"resource_name": "x/gpu", "device_ids": ["g0", "g1"], "numa_nodes": [0, 1]}"#));
        assert_eq!(e.exit_code(), 2);
        let m = e.to_string();
        assert!(m.contains("f.json") && m.contains("pod ns/p container c devices x/gpu [g0,g1]"), "{m}");
        assert!(m.contains("2 device IDs and 2 NUMA nodes in one entry, which no kubelet sends"), "{m}");
        assert!(m.contains("split it"), "{m}");
        let m = err(&pod(r#"{"resource_name": "x/gpu", "device_ids": ["g0", "g1"]}"#)).to_string();
        assert!(m.contains("[g0,g1]: 2 device IDs in one entry"), "{m}");
        let m = err(&pod(
            r#"{"resource_name": "x/gpu", "deviceIds": ["g0"], "topology": {"nodes": [{"ID": 0}, {"ID": 1}]}}"#,
        ))
        .to_string();
        assert!(m.contains("[g0]: 2 NUMA nodes in one entry"), "{m}");
        let m = err(&pod(r#"{"resource_name": "x/gpu", "device_ids": []}"#)).to_string();
        assert!(m.contains("x/gpu []: no device ID"), "{m}");
        let m = err(r#"{"allocatable": {"devices": [{"resource_name": "x/nic", "device_ids": ["n7", "n8"]}]}}"#)
            .to_string();
        assert!(m.contains("allocatable devices x/nic [n7,n8]: 2 device IDs"), "{m}");
        // What the kubelet does send loads: one ID, one node or none.
        Fixture::from_json(&pod(r#"{"resource_name": "x/gpu", "device_ids": ["g0"], "numa_nodes": [1]}"#), "f")
            .unwrap();
        Fixture::from_json(&pod(r#"{"resource_name": "x/gpu", "device_ids": ["g0"]}"#), "f").unwrap();
    }

    /// docs/protocol.md §2.2: v1alpha1 lists regular containers only; a fixture
    /// container marked as a sidecar shows in v1 only.
    #[test]
    fn v1alpha1_leaves_sidecars_out() {
        let f = Fixture::from_json(
            r#"{"pod_resources": [{"name": "p", "namespace": "ns", "containers": [
                 {"name": "log", "sidecar": true, "devices": [{"resource_name": "x/gpu", "device_ids": ["g1"]}]},
                 {"name": "app", "devices": [{"resource_name": "x/gpu", "device_ids": ["g0"], "numa_nodes": [0]}]}]}]}"#,
            "f",
        )
        .unwrap();
        let p = FixtureProvider::new(f);
        let v1: Vec<String> = p.list()[0].containers.iter().map(|c| c.name.clone()).collect();
        assert_eq!(v1, ["log", "app"]);
        let alpha = p.list_v1alpha1();
        let names: Vec<&str> = alpha[0].containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["app"]);
        assert_eq!(alpha[0].containers[0].devices[0].device_ids, ["g0"]);
    }

    #[test]
    fn handle_swaps_data() {
        let p = FixtureProvider::new(Fixture::default());
        assert!(p.list().is_empty());
        p.handle().update(|f| f.pods.push(v1::PodResources { name: "a".into(), ..Default::default() }));
        assert_eq!(p.list().len(), 1);
        assert!(p.get("a", "").is_some());
    }
}
