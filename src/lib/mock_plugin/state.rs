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

/// The encoded list of a device table, with where each device's record
/// starts in it, so that a change to a few devices re-encodes only those:
/// the new message is the old one's unchanged runs copied around the changed
/// records, byte for byte what prost encodes for the whole list (a
/// `ListAndWatchResponse` is nothing but its repeated field 1, each record
/// the tag, the length and the `Device`).
///
/// Costs 4 bytes per device beyond the message itself (which the table
/// keeps for new streams anyway).
#[derive(Debug)]
pub struct IndexedList {
    snap: Snapshot,
    /// `offsets[i]` is where device `i`'s record starts; the last entry is
    /// the message's length. Empty when the message is too large to index
    /// (over 4 GiB), and every change then encodes the whole list.
    offsets: Vec<u32>,
}

/// Above this share of changed devices (1 in N), encoding the whole list is
/// as cheap as patching it.
const PATCH_MAX_SHARE: usize = 4;

impl IndexedList {
    /// Encodes `devices` as one ListAndWatch message.
    pub fn encode(devices: &[dp::Device]) -> Self {
        let len: usize = devices.iter().map(|d| prost::encoding::message::encoded_len(1, d)).sum();
        let mut buf = Vec::with_capacity(len);
        let mut offsets = Vec::with_capacity(devices.len().saturating_add(1));
        for d in devices {
            offsets.push(u32::try_from(buf.len()).ok());
            prost::encoding::message::encode(1, d, &mut buf);
        }
        offsets.push(u32::try_from(buf.len()).ok());
        let offsets = offsets.into_iter().collect::<Option<Vec<u32>>>().unwrap_or_default();
        IndexedList { snap: Arc::new(EncodedList { bytes: Bytes::from(buf) }), offsets }
    }

    /// The encoded message.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    /// The list after the devices at positions `changed` were changed in
    /// place in `devices` (same devices, same order, only their contents
    /// changed): those are re-encoded, the rest copied. Encodes the whole
    /// list when the index does not fit `devices` or many devices changed.
    pub fn patched(&self, devices: &[dp::Device], changed: &[usize]) -> Self {
        self.try_patch(devices, changed).unwrap_or_else(|| IndexedList::encode(devices))
    }

    fn try_patch(&self, devices: &[dp::Device], changed: &[usize]) -> Option<Self> {
        let n = devices.len();
        if self.offsets.len() != n.checked_add(1)? || changed.len() > n / PATCH_MAX_SHARE {
            return None;
        }
        let mut changed = changed.to_vec();
        changed.sort_unstable();
        changed.dedup();
        let old: &[u8] = &self.snap.bytes;
        let at = |i: usize| self.offsets.get(i).map(|o| *o as usize);
        // New record lengths, and the message's new length.
        let mut records = Vec::with_capacity(changed.len());
        let mut len = old.len();
        for &p in &changed {
            let d = devices.get(p)?;
            let new_len = prost::encoding::message::encoded_len(1, d);
            let old_len = at(p + 1)?.checked_sub(at(p)?)?;
            len = len.checked_sub(old_len)?.checked_add(new_len)?;
            records.push((p, d, new_len, old_len));
        }
        u32::try_from(len).ok()?;
        let mut buf = Vec::with_capacity(len);
        let mut cursor = 0;
        for &(p, d, _, _) in &records {
            buf.extend_from_slice(old.get(cursor..at(p)?)?);
            prost::encoding::message::encode(1, d, &mut buf);
            cursor = at(p + 1)?;
        }
        buf.extend_from_slice(old.get(cursor..)?);
        if buf.len() != len {
            return None;
        }
        // Every record after a changed one moves by the change in length.
        let mut offsets = Vec::with_capacity(self.offsets.len());
        let mut shift: i64 = 0;
        let mut next = records.iter().peekable();
        for (i, &o) in self.offsets.iter().enumerate() {
            offsets.push(u32::try_from(i64::from(o).checked_add(shift)?).ok()?);
            if let Some((_, _, new_len, old_len)) = next.next_if(|r| r.0 == i) {
                shift = shift.checked_add(i64::try_from(*new_len).ok()?)?.checked_sub(i64::try_from(*old_len).ok()?)?;
            }
        }
        Some(IndexedList { snap: Arc::new(EncodedList { bytes: Bytes::from(buf) }), offsets })
    }
}

/// The device table: the message it produces (owned, changed in place) with
/// an index by ID, and that message encoded.
struct Table {
    msg: dp::ListAndWatchResponse,
    list: IndexedList,
    index: HashMap<String, usize>,
}

impl Table {
    fn new(devices: Vec<dp::Device>) -> Self {
        let list = IndexedList::encode(&devices);
        let msg = dp::ListAndWatchResponse { devices };
        let mut t = Table { msg, list, index: HashMap::new() };
        t.reindex();
        t
    }

    fn reindex(&mut self) {
        self.index = self.msg.devices.iter().enumerate().map(|(i, d)| (d.id.clone(), i)).collect();
    }
}

/// What a change did to the table's shape.
enum Edit {
    /// Devices were added or removed: reindex and encode everything.
    Reshaped,
    /// The devices at these positions changed in place.
    InPlace(Vec<usize>),
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
    /// Changes in device count reported (added or removed devices).
    pub count_changes: AtomicU64,
    /// Successful registrations.
    pub registrations: AtomicU32,
    /// Registered with the current kubelet.
    pub registered: AtomicBool,
    /// Kubelet restarts noticed after the first registration.
    pub kubelet_restarts: AtomicU32,
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
        let mut devices: Vec<dp::Device> = cfg.initial_devices().iter().map(to_proto).collect();
        if cfg.faults.ids_change_per_start {
            let token = start_token();
            for d in &mut devices {
                d.id = format!("{}-{token}", d.id);
            }
        }
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
        Arc::clone(self.read().list.snapshot())
    }

    /// The current message and a receiver of every later one, taken together
    /// so that no change falls between them.
    pub fn watch(&self) -> (Snapshot, broadcast::Receiver<Snapshot>) {
        let t = self.read();
        (Arc::clone(t.list.snapshot()), self.updates.subscribe())
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
        change: impl FnOnce(&mut Vec<dp::Device>, &HashMap<String, usize>) -> Result<(Vec<Change>, Edit), String>,
    ) -> Result<Vec<Change>, String> {
        let (changes, counts) = {
            let mut t = self.write();
            let t = &mut *t;
            // In place: the table is owned here; streams hold only encoded lists.
            let (changes, edit) = change(&mut t.msg.devices, &t.index)?;
            if changes.is_empty() {
                return Ok(changes);
            }
            // Only the changed devices are encoded again; the rest of the
            // message is copied from the previous one.
            t.list = match edit {
                Edit::Reshaped => {
                    t.reindex();
                    IndexedList::encode(&t.msg.devices)
                }
                Edit::InPlace(pos) => t.list.patched(&t.msg.devices, &pos),
            };
            self.stats.changes.fetch_add(1, Ordering::Relaxed);
            let _ = self.updates.send(Arc::clone(t.list.snapshot()));
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
            let mut changed = Vec::new();
            for i in pos {
                let d = &mut devs[i];
                if d.health != health {
                    changes.push(Change::HealthChanged {
                        id: d.id.clone(),
                        from: d.health.clone(),
                        to: health.to_string(),
                    });
                    d.health = health.to_string();
                    changed.push(i);
                }
            }
            Ok((changes, Edit::InPlace(changed)))
        })
    }

    /// Toggles `ids` between Healthy and Unhealthy, in one message.
    pub fn toggle(&self, ids: &[String], cause: &str) -> Result<Vec<Change>, String> {
        self.mutate(cause, |devs, index| {
            let pos = positions(ids, index, devs)?;
            let mut changes = Vec::with_capacity(pos.len());
            for &i in &pos {
                let d = &mut devs[i];
                let to = if d.health == dp::HEALTHY { dp::UNHEALTHY } else { dp::HEALTHY };
                changes.push(Change::HealthChanged { id: d.id.clone(), from: d.health.clone(), to: to.to_string() });
                d.health = to.to_string();
            }
            Ok((changes, Edit::InPlace(pos)))
        })
    }

    /// With the scan-stops-after fault, once its N changes in device count
    /// were reported: the changes a rescan would have found, reported to
    /// the caller (the hardware changed) but never to a stream.
    fn scan_stopped(&self, changes: Vec<Change>) -> Option<Vec<Change>> {
        let limit = self.faults.config.scan_stops_after?;
        (self.stats.count_changes.load(Ordering::Relaxed) >= limit).then_some(changes)
    }

    /// Adds devices (all or nothing: an existing ID adds none), up to
    /// [`MAX_DEVICES`](super::config::MAX_DEVICES) in all, as a config may have.
    pub fn add(&self, new: &[DeviceConfig], cause: &str) -> Result<Vec<Change>, String> {
        if let Some(unseen) = self.scan_stopped(new.iter().map(|d| Change::Added { id: d.id.clone() }).collect()) {
            return Ok(unseen);
        }
        let changes = self.mutate(cause, |devs, index| {
            if devs.len().saturating_add(new.len()) > super::config::MAX_DEVICES {
                return Err(format!(
                    "adding {} to {} would be over the limit of {} per resource",
                    crate::text::count(new.len(), "device", "devices"),
                    devs.len(),
                    super::config::MAX_DEVICES
                ));
            }
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
            Ok((new.iter().map(|d| Change::Added { id: d.id.clone() }).collect(), Edit::Reshaped))
        })?;
        self.count_changed(&changes);
        Ok(changes)
    }

    fn count_changed(&self, changes: &[Change]) {
        if !changes.is_empty() {
            self.stats.count_changes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Removes devices (all or nothing).
    pub fn remove(&self, ids: &[String], cause: &str) -> Result<Vec<Change>, String> {
        if let Some(unseen) = self.scan_stopped(ids.iter().map(|id| Change::Removed { id: id.clone() }).collect()) {
            return Ok(unseen);
        }
        let changes = self.mutate(cause, |devs, index| {
            positions(ids, index, devs)?;
            let gone: HashSet<&str> = ids.iter().map(String::as_str).collect();
            devs.retain(|d| !gone.contains(d.id.as_str()));
            Ok((ids.iter().map(|id| Change::Removed { id: id.clone() }).collect(), Edit::Reshaped))
        })?;
        self.count_changed(&changes);
        Ok(changes)
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

/// What the ids-change-per-start fault appends to every device ID: six hex
/// digits from this process's ID and start time, the same for the whole
/// process and different for the next one.
fn start_token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| {
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let mixed = u64::from(std::process::id()).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(nanos);
        format!("{:06x}", mixed & 0xff_ffff)
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn device(i: usize, topology: bool) -> dp::Device {
        dp::Device {
            id: format!("dev-{i}"),
            health: dp::HEALTHY.to_string(),
            topology: topology.then(|| dp::TopologyInfo { nodes: vec![dp::NumaNode { id: (i % 4) as i64 }] }),
        }
    }

    fn table(n: usize, topology: bool) -> Vec<dp::Device> {
        (0..n).map(|i| device(i, topology || i % 3 == 0)).collect()
    }

    /// The patched message is byte for byte prost's encoding of the whole
    /// changed list, with and without topology, for health changes whose
    /// encoded length differs ("Healthy" vs "Unhealthy"), at the first and
    /// last positions, and for a change that grows a record's length prefix.
    #[test]
    fn patched_list_is_prosts_encoding_of_the_changed_list() {
        for topology in [false, true] {
            let mut devs = table(200, topology);
            let mut list = IndexedList::encode(&devs);
            let whole = |d: &[dp::Device]| dp::ListAndWatchResponse { devices: d.to_vec() }.encode_to_vec();
            assert_eq!(list.snapshot().bytes(), whole(&devs));
            let steps: Vec<Vec<usize>> = vec![vec![0], vec![199], vec![5, 150, 7], vec![7, 7], vec![0, 1, 2, 198, 199]];
            for (step, changed) in steps.into_iter().enumerate() {
                for &p in &changed {
                    let d = &mut devs[p];
                    d.health = if d.health == dp::HEALTHY { dp::UNHEALTHY } else { dp::HEALTHY }.to_string();
                }
                let patched = list.try_patch(&devs, &changed).expect("a few changes are patched");
                assert_eq!(patched.snapshot().bytes(), whole(&devs), "topology {topology}, step {step}");
                list = patched;
            }
            // A record over 127 bytes needs a two-byte length prefix.
            devs[42].health = "x".repeat(300);
            devs[43].topology = None;
            let patched = list.try_patch(&devs, &[43, 42]).expect("patched");
            assert_eq!(patched.snapshot().bytes(), whole(&devs));
            assert_eq!(patched.snapshot().decode().unwrap().devices, devs);
            // Offsets still right after that: one more change further on.
            devs[100].health = dp::UNHEALTHY.into();
            let again = patched.patched(&devs, &[100]);
            assert_eq!(again.snapshot().bytes(), whole(&devs));
        }
    }

    #[test]
    fn an_index_that_does_not_fit_encodes_the_whole_list() {
        let mut devs = table(40, true);
        let list = IndexedList::encode(&devs);
        devs.push(device(40, true));
        assert!(list.try_patch(&devs, &[40]).is_none(), "the list grew");
        let whole = dp::ListAndWatchResponse { devices: devs.clone() }.encode_to_vec();
        assert_eq!(list.patched(&devs, &[40]).snapshot().bytes(), whole);
        // Many changes: the whole list is encoded, with the same bytes.
        let all: Vec<usize> = (0..devs.len()).collect();
        for d in &mut devs {
            d.health = dp::UNHEALTHY.into();
        }
        let fresh = IndexedList::encode(&devs);
        assert!(fresh.try_patch(&devs, &all).is_none());
        let whole = dp::ListAndWatchResponse { devices: devs.clone() }.encode_to_vec();
        assert_eq!(fresh.patched(&devs, &all).snapshot().bytes(), whole);
        assert!(IndexedList::encode(&[]).snapshot().bytes().is_empty());
    }

    /// Through the resource: set-health, toggle, add and remove each publish
    /// prost's encoding of the table as it now is.
    #[test]
    fn every_change_publishes_the_encoding_of_the_whole_table() {
        let mut cfg = ResourceConfig::new("example.com/gpu", 64);
        cfg.numa_nodes = 2;
        let (tx, _) = broadcast::channel(4);
        let dir = std::path::Path::new("/nonexistent");
        let res = Resource::new(&cfg, dir, tx, None, false).expect("resource");
        let check = |what: &str| {
            let devs: Vec<dp::Device> = res.devices().iter().map(dp::Device::from).collect();
            let whole = dp::ListAndWatchResponse { devices: devs }.encode_to_vec();
            assert_eq!(res.snapshot().bytes(), whole, "after {what}");
        };
        check("start");
        let ids: Vec<String> = res.devices().iter().map(|d| d.id.clone()).collect();
        res.set_health(&ids[3..5], dp::UNHEALTHY, "test").unwrap();
        check("set-health");
        res.toggle(&[ids[4].clone(), ids[60].clone()], "test").unwrap();
        check("toggle");
        res.add(&[DeviceConfig { id: "new-1".into(), health: dp::HEALTHY.into(), numa: Some(vec![1]) }], "test")
            .unwrap();
        check("add");
        res.remove(&ids[10..12], "test").unwrap();
        check("remove");
        res.set_health(&["new-1".to_string(), ids[63].clone()], dp::UNHEALTHY, "test").unwrap();
        check("set-health after add and remove");
    }
}
