//! The state of one mocked resource, shared by its gRPC service, its control
//! socket, its timeline and the library handle: the device table (kept as
//! the ListAndWatch message it produces), the broadcast of new snapshots to
//! open streams, counters, and event and record output.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use bytes::Bytes;
use prost::Message;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Serialize;
use tokio::sync::broadcast;

use super::config::{DeviceConfig, Policy, ResourceConfig, Rpc};
use super::events::{EventKind, MockEvent, RpcRecord};
use super::faults::FaultPlan;
use super::record::Recorder;
use super::template::AllocateTemplate;
use crate::model::{self, Change, Counts, Device};
use crate::proto::deviceplugin::v1beta1 as dp;

/// How many snapshots an open stream may fall behind before it skips to
/// the newest (the newest always reaches it).
const SNAPSHOT_BACKLOG: usize = 64;

/// One ListAndWatch message, encoded once when the list changes and shared
/// by every open stream: sending it to a stream copies the bytes into the
/// stream's buffer, it never clones or re-encodes the device table.
#[derive(Debug)]
pub struct EncodedList {
    bytes: Bytes,
}

impl EncodedList {
    /// Encodes `msg`.
    pub fn encode(msg: &dp::ListAndWatchResponse) -> Self {
        EncodedList { bytes: Bytes::from(msg.encode_to_vec()) }
    }

    /// The encoded message (cheap to clone: the bytes are shared).
    pub fn bytes(&self) -> Bytes {
        self.bytes.clone()
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.bytes.len()
    }

    /// The message decoded again (for records and for callers that want the
    /// devices; the serving path never needs it).
    pub fn decode(&self) -> Result<dp::ListAndWatchResponse, prost::DecodeError> {
        dp::ListAndWatchResponse::decode(self.bytes.clone())
    }
}

/// One ListAndWatch message, shared by every open stream.
pub type Snapshot = Arc<EncodedList>;

/// The device table: the message it produces (owned, changed in place) with
/// an index by ID, and that message encoded.
struct Table {
    msg: dp::ListAndWatchResponse,
    snap: Snapshot,
    index: HashMap<String, usize>,
}

impl Table {
    fn new(devices: Vec<dp::Device>) -> Self {
        let msg = dp::ListAndWatchResponse { devices };
        let snap = Arc::new(EncodedList::encode(&msg));
        let mut t = Table { msg, snap, index: HashMap::new() };
        t.reindex();
        t
    }

    fn reindex(&mut self) {
        self.index = self.msg.devices.iter().enumerate().map(|(i, d)| (d.id.clone(), i)).collect();
    }
}

/// Counters of one resource.
#[derive(Debug, Default)]
pub struct Stats {
    calls: [AtomicU64; 7],
    /// ListAndWatch messages sent, over all streams.
    pub messages: AtomicU64,
    /// Open ListAndWatch streams.
    pub streams: AtomicUsize,
    /// Lists a slow stream skipped to catch up with the newest.
    pub skipped: AtomicU64,
    /// Device-list changes published.
    pub changes: AtomicU64,
    /// Successful registrations.
    pub registrations: AtomicU32,
    /// Registered with the current kubelet.
    pub registered: AtomicBool,
}

/// The shared state of one resource.
pub struct Resource {
    /// Resource name.
    pub name: String,
    /// Socket file name.
    pub endpoint: String,
    /// Socket path.
    pub socket: PathBuf,
    /// Options advertised.
    pub options: dp::DevicePluginOptions,
    /// Allocate answer.
    pub template: AllocateTemplate,
    /// Refuse unhealthy devices in Allocate.
    pub refuse_unhealthy: bool,
    /// Faults.
    pub faults: FaultPlan,
    /// Counters.
    pub stats: Stats,
    policy: Policy,
    rng: Mutex<StdRng>,
    table: RwLock<Table>,
    updates: broadcast::Sender<Snapshot>,
    events: broadcast::Sender<MockEvent>,
    recorder: Option<Arc<Recorder>>,
    rpc_events: bool,
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource").field("name", &self.name).field("socket", &self.socket).finish_non_exhaustive()
    }
}

fn to_proto(d: &DeviceConfig) -> dp::Device {
    dp::Device {
        id: d.id.clone(),
        health: d.health.clone(),
        topology: d
            .numa
            .as_ref()
            .map(|n| dp::TopologyInfo { nodes: n.iter().map(|id| dp::NumaNode { id: *id }).collect() }),
    }
}

impl Resource {
    /// Builds the state from a checked config.
    pub fn new(
        cfg: &ResourceConfig,
        dir: &std::path::Path,
        events: broadcast::Sender<MockEvent>,
        recorder: Option<Arc<Recorder>>,
        rpc_events: bool,
    ) -> Result<Self, String> {
        let devices: Vec<dp::Device> = cfg.initial_devices().iter().map(to_proto).collect();
        let table = Table::new(devices);
        let endpoint = cfg.endpoint_name();
        Ok(Resource {
            name: cfg.name.clone(),
            socket: dir.join(&endpoint),
            endpoint,
            options: cfg.options(),
            template: AllocateTemplate::compile(&cfg.allocate)?,
            refuse_unhealthy: cfg.refuse_unhealthy,
            faults: FaultPlan::new(&cfg.faults),
            stats: Stats::default(),
            policy: cfg.preferred_policy,
            rng: Mutex::new(StdRng::seed_from_u64(cfg.seed)),
            table: RwLock::new(table),
            updates: broadcast::channel(SNAPSHOT_BACKLOG).0,
            events,
            recorder,
            rpc_events,
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        // A panic while holding the lock cannot leave the table half-updated
        // in a way that matters to a mock; keep serving.
        self.table.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The current ListAndWatch message.
    pub fn snapshot(&self) -> Snapshot {
        Arc::clone(&self.read().snap)
    }

    /// The current message and a receiver of every later one, taken together
    /// so that no change falls between them.
    pub fn watch(&self) -> (Snapshot, broadcast::Receiver<Snapshot>) {
        let t = self.read();
        (Arc::clone(&t.snap), self.updates.subscribe())
    }

    /// The devices now.
    pub fn devices(&self) -> Vec<Device> {
        self.read().msg.devices.iter().map(Device::from).collect()
    }

    /// Capacity and allocatable now.
    pub fn counts(&self) -> Counts {
        count(&self.read().msg.devices)
    }

    /// The first NUMA node of a device, `-1` for none or unknown.
    pub fn numa_of(&self, id: &str) -> i64 {
        let t = self.read();
        t.index
            .get(id)
            .and_then(|i| t.msg.devices[*i].topology.as_ref())
            .and_then(|t| t.nodes.first())
            .map_or(-1, |n| n.id)
    }

    /// Allocate's check: every ID known, and healthy when so configured.
    pub fn check_allocatable(&self, ids: &[String]) -> Result<(), tonic::Status> {
        let t = self.read();
        for id in ids {
            match t.index.get(id) {
                None => {
                    return Err(tonic::Status::invalid_argument(format!(
                        "unknown device {id:?} for resource {}",
                        self.name
                    )));
                }
                Some(i) if self.refuse_unhealthy && t.msg.devices[*i].health != dp::HEALTHY => {
                    return Err(tonic::Status::invalid_argument(format!(
                        "device {id:?} of {} is {}; refusing to allocate it",
                        self.name, t.msg.devices[*i].health
                    )));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// GetPreferredAllocation's choice for one container.
    pub fn prefer(&self, req: &dp::ContainerPreferredAllocationRequest) -> Vec<String> {
        let numa = |id: &str| self.numa_of(id);
        let mut rng = self.rng.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        super::policy::choose(self.policy, req, &numa, &mut *rng)
    }

    /// Applies `change` to the device list under the lock; publishes a new
    /// message when something changed. Returns the changes.
    fn mutate(
        &self,
        cause: &str,
        change: impl FnOnce(&mut Vec<dp::Device>, &HashMap<String, usize>) -> Result<(Vec<Change>, bool), String>,
    ) -> Result<Vec<Change>, String> {
        let (changes, counts) = {
            let mut t = self.write();
            let t = &mut *t;
            // In place: the table is owned here; streams hold only encoded lists.
            let (changes, reindex) = change(&mut t.msg.devices, &t.index)?;
            if changes.is_empty() {
                return Ok(changes);
            }
            if reindex {
                t.reindex();
            }
            t.snap = Arc::new(EncodedList::encode(&t.msg));
            self.stats.changes.fetch_add(1, Ordering::Relaxed);
            let _ = self.updates.send(Arc::clone(&t.snap));
            let counts = (self.events.receiver_count() > 0).then(|| count(&t.msg.devices));
            (changes, counts)
        };
        if let Some(c) = counts {
            self.emit(EventKind::DevicesChanged {
                cause: cause.to_string(),
                changes: changes.clone(),
                capacity: c.capacity,
                allocatable: c.allocatable,
            });
        }
        Ok(changes)
    }

    /// Sets the health of `ids` (all or nothing: an unknown ID changes nothing).
    pub fn set_health(&self, ids: &[String], health: &str, cause: &str) -> Result<Vec<Change>, String> {
        self.mutate(cause, |devs, index| {
            let pos = positions(ids, index, devs)?;
            let mut changes = Vec::new();
            for i in pos {
                let d = &mut devs[i];
                if d.health != health {
                    changes.push(Change::HealthChanged {
                        id: d.id.clone(),
                        from: d.health.clone(),
                        to: health.to_string(),
                    });
                    d.health = health.to_string();
                }
            }
            Ok((changes, false))
        })
    }

    /// Toggles `ids` between Healthy and Unhealthy, in one message.
    pub fn toggle(&self, ids: &[String], cause: &str) -> Result<Vec<Change>, String> {
        self.mutate(cause, |devs, index| {
            let pos = positions(ids, index, devs)?;
            let mut changes = Vec::with_capacity(pos.len());
            for i in pos {
                let d = &mut devs[i];
                let to = if d.health == dp::HEALTHY { dp::UNHEALTHY } else { dp::HEALTHY };
                changes.push(Change::HealthChanged { id: d.id.clone(), from: d.health.clone(), to: to.to_string() });
                d.health = to.to_string();
            }
            Ok((changes, false))
        })
    }

    /// Adds devices (all or nothing: an existing ID adds none).
    pub fn add(&self, new: &[DeviceConfig], cause: &str) -> Result<Vec<Change>, String> {
        self.mutate(cause, |devs, index| {
            let mut fresh = HashSet::new();
            for d in new {
                if index.contains_key(&d.id) || !fresh.insert(d.id.as_str()) {
                    return Err(format!("device {:?} already exists", d.id));
                }
                if d.id.is_empty() {
                    return Err("empty device ID".into());
                }
            }
            devs.extend(new.iter().map(to_proto));
            Ok((new.iter().map(|d| Change::Added { id: d.id.clone() }).collect(), true))
        })
    }

    /// Removes devices (all or nothing).
    pub fn remove(&self, ids: &[String], cause: &str) -> Result<Vec<Change>, String> {
        self.mutate(cause, |devs, index| {
            positions(ids, index, devs)?;
            let gone: HashSet<&str> = ids.iter().map(String::as_str).collect();
            devs.retain(|d| !gone.contains(d.id.as_str()));
            Ok((ids.iter().map(|id| Change::Removed { id: id.clone() }).collect(), true))
        })
    }

    /// Counts a call of `rpc` and returns its number (1-based).
    pub fn begin(&self, rpc: Rpc) -> u64 {
        self.stats.calls[rpc.index()].fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Calls of each RPC so far.
    pub fn calls(&self) -> Vec<(Rpc, u64)> {
        Rpc::ALL.iter().map(|r| (*r, self.stats.calls[r.index()].load(Ordering::Relaxed))).collect()
    }

    /// True when someone reads RPC details (a recorder, or an event
    /// subscriber when RPC events are on), so building them is worth it.
    pub fn wants_details(&self) -> bool {
        self.recorder.is_some() || (self.rpc_events && self.events.receiver_count() > 0)
    }

    /// Records an RPC: to the record file and to subscribers.
    pub fn record(&self, time: SystemTime, rec: RpcRecord) {
        let event = MockEvent { time, resource: self.name.clone(), kind: EventKind::Rpc(rec) };
        if let Some(r) = &self.recorder {
            r.write(&event);
        }
        if self.rpc_events {
            let _ = self.events.send(event);
        }
    }

    /// Sends an event to subscribers (not to the record file).
    pub fn emit(&self, kind: EventKind) {
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(MockEvent { time: SystemTime::now(), resource: self.name.clone(), kind });
        }
    }

    /// A summary for `status`.
    pub fn status(&self) -> ResourceStatus {
        let devices = self.devices();
        let counts = model::counts(&devices);
        ResourceStatus {
            resource: self.name.clone(),
            socket: self.socket.clone(),
            registered: self.stats.registered.load(Ordering::Relaxed),
            registrations: self.stats.registrations.load(Ordering::Relaxed),
            capacity: counts.capacity,
            allocatable: counts.allocatable,
            open_streams: self.stats.streams.load(Ordering::Relaxed),
            messages_sent: self.stats.messages.load(Ordering::Relaxed),
            skipped_messages: self.stats.skipped.load(Ordering::Relaxed),
            changes: self.stats.changes.load(Ordering::Relaxed),
            calls: self.calls().into_iter().map(|(r, n)| (r.name().to_string(), n)).collect(),
            devices,
        }
    }
}

fn count(devices: &[dp::Device]) -> Counts {
    let healthy = devices.iter().filter(|d| d.health == dp::HEALTHY).count();
    Counts { capacity: devices.len(), allocatable: healthy }
}

fn positions(ids: &[String], index: &HashMap<String, usize>, devs: &[dp::Device]) -> Result<Vec<usize>, String> {
    ids.iter()
        .map(|id| {
            index.get(id).copied().ok_or_else(|| {
                let sample: Vec<&str> = devs.iter().take(4).map(|d| d.id.as_str()).collect();
                let more = if devs.len() > 4 { ", ..." } else { "" };
                format!("no device {id:?} (devices: {}{more})", sample.join(", "))
            })
        })
        .collect()
}

/// What `dpctl mock-plugin status` shows for one resource.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ResourceStatus {
    /// Resource name.
    pub resource: String,
    /// Plugin socket.
    pub socket: PathBuf,
    /// Registered with the current kubelet.
    pub registered: bool,
    /// Successful registrations so far.
    pub registrations: u32,
    /// Healthy plus unhealthy devices.
    pub capacity: usize,
    /// Healthy devices.
    pub allocatable: usize,
    /// Open ListAndWatch streams.
    pub open_streams: usize,
    /// ListAndWatch messages sent.
    pub messages_sent: u64,
    /// Lists skipped by streams that fell behind (each got the newest instead).
    pub skipped_messages: u64,
    /// Device-list changes so far.
    pub changes: u64,
    /// Calls per RPC.
    pub calls: std::collections::BTreeMap<String, u64>,
    /// The devices.
    pub devices: Vec<Device>,
}
