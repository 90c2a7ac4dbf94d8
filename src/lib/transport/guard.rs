//! What keeps a hostile or careless client from locking a dpctl server up:
//! the table of open connections (with eviction of the oldest idle one when
//! the table is full), the idle deadline, and the PING/SETTINGS flood limit.
//!
//! One mechanism for every server: the gRPC servers (plugin sockets,
//! kubelet.sock, PodResources) apply it through [`super::AuthorityFix`],
//! which sees every byte each way and reads the HTTP/2 frame headers (never
//! payloads) to know which streams are open; the control sockets mark their
//! connections busy while a request is handled.
//!
//! Why eviction rather than refusal: connections cost the client nothing, so
//! any fixed cap that refuses newcomers can be filled by a client that opens
//! connections and leaves them idle, and then nobody else gets in (the
//! kubelet's Register call, a `dpctl podresources` run). Closing the oldest
//! idle connection instead keeps the cap on memory and descriptors, while a
//! newcomer always gets in unless every connection is busy with a call. An
//! idle gRPC client loses nothing: it sees GOAWAY and dials again on its
//! next call, as gRPC clients do when a server restarts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a connection may stay open with no call in progress before the
/// server closes it (with GOAWAY on HTTP/2). A kubelet keeps a ListAndWatch
/// stream open on its plugin connections, so they are never idle; a client
/// between calls dials again when it needs to (grpc-go and tonic do so
/// transparently after GOAWAY). grpc-go servers offer the same knob
/// (`MaxConnectionIdle`); five minutes keeps a client that pauses between
/// calls (a human at `dpctl`, a CI step) on one connection, while a client
/// holding connections for nothing gets them closed. Documented in the README.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// PING and SETTINGS frames a client may send in a burst while the server
/// sends no HEADERS or DATA. Answering each costs the server a write (a
/// PING ACK or SETTINGS ACK); h2 bounds what is queued but not the rate, so
/// a client sending them in a loop kept a server at 80-90% of a core.
pub const CONTROL_FRAME_BURST: u32 = 256;
/// Rate at which that allowance comes back: ten per second, far above
/// what keepalive pings (grpc-go sends one per 10 s at most often) or
/// settings changes need. Every HEADERS or DATA frame the server sends
/// restores the whole allowance (as grpc-go's server resets its ping
/// strikes when it sends data), so a client that pings once per response
/// (grpc-go's BDP estimator) is never limited. Past the allowance the
/// connection gets GOAWAY with ENHANCE_YOUR_CALM and is closed.
pub const CONTROL_FRAMES_PER_SECOND: u32 = 10;

/// The connections of one server, at most `max` at once.
#[derive(Debug, Clone)]
pub struct ConnTable {
    inner: Arc<Table>,
}

#[derive(Debug)]
struct Table {
    max: usize,
    epoch: Instant,
    next_id: AtomicU64,
    entries: Mutex<Vec<Arc<Entry>>>,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    /// Milliseconds since the table's epoch, plus one, since the connection
    /// became idle; 0 while it is busy.
    idle_since: AtomicU64,
    evicted: AtomicBool,
    close: CancellationToken,
}

/// What [`ConnTable::admit`] decided about a new connection.
#[derive(Debug)]
pub enum Admission {
    /// Admitted with room to spare.
    Admitted(ConnSlot),
    /// Admitted after closing the oldest idle connection.
    Evicted(ConnSlot),
    /// Every open connection is busy: refused.
    Full,
}

impl ConnTable {
    /// A table for at most `max` connections (at least one).
    pub fn new(max: usize) -> Self {
        ConnTable {
            inner: Arc::new(Table {
                max: max.max(1),
                epoch: Instant::now(),
                next_id: AtomicU64::new(0),
                entries: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Admits a new connection, closing the connection idle the longest when
    /// the table is full; refuses it only when every connection is busy.
    /// The slot's token is a child of `stop`, so stopping the server closes
    /// every connection.
    pub fn admit(&self, stop: &CancellationToken) -> Admission {
        let Ok(mut entries) = self.inner.entries.lock() else { return Admission::Full };
        let mut evicted = false;
        if entries.len() >= self.inner.max {
            let oldest = entries
                .iter()
                .enumerate()
                .filter_map(|(i, e)| match e.idle_since.load(Ordering::Relaxed) {
                    0 => None,
                    since => Some((since, i)),
                })
                .min();
            let Some((_, i)) = oldest else { return Admission::Full };
            let victim = entries.swap_remove(i);
            victim.evicted.store(true, Ordering::Relaxed);
            victim.close.cancel();
            evicted = true;
        }
        let entry = Arc::new(Entry {
            id: self.inner.next_id.fetch_add(1, Ordering::Relaxed),
            idle_since: AtomicU64::new(self.inner.now_stamp()),
            evicted: AtomicBool::new(false),
            close: stop.child_token(),
        });
        entries.push(Arc::clone(&entry));
        let slot = ConnSlot { entry, table: Arc::clone(&self.inner) };
        if evicted { Admission::Evicted(slot) } else { Admission::Admitted(slot) }
    }

    /// Connections open now.
    pub fn len(&self) -> usize {
        self.inner.entries.lock().map_or(0, |e| e.len())
    }

    /// True when no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Table {
    fn now_stamp(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1
    }
}

/// One connection's place in a [`ConnTable`]; frees it when dropped.
#[derive(Debug)]
pub struct ConnSlot {
    entry: Arc<Entry>,
    table: Arc<Table>,
}

impl ConnSlot {
    /// Marks the connection idle (no call in progress) or busy.
    pub fn set_idle(&self, idle: bool) {
        let stamp = if idle { self.table.now_stamp() } else { 0 };
        self.entry.idle_since.store(stamp, Ordering::Relaxed);
    }

    /// How long the connection has been idle; `None` while it is busy.
    pub fn idle_for(&self) -> Option<Duration> {
        match self.entry.idle_since.load(Ordering::Relaxed) {
            0 => None,
            since => Some(Duration::from_millis(self.table.now_stamp().saturating_sub(since))),
        }
    }

    /// Cancelled when the connection must close: evicted, or the server stopping.
    pub fn token(&self) -> CancellationToken {
        self.entry.close.clone()
    }

    /// True when the table closed this connection to make room.
    pub fn evicted(&self) -> bool {
        self.entry.evicted.load(Ordering::Relaxed)
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        if let Ok(mut entries) = self.table.entries.lock()
            && let Some(i) = entries.iter().position(|e| e.id == self.entry.id)
        {
            entries.swap_remove(i);
        }
    }
}

const FRAME_HEADER_LEN: usize = 9;
const TYPE_DATA: u8 = 0x0;
const TYPE_HEADERS: u8 = 0x1;
const TYPE_RST_STREAM: u8 = 0x3;
const TYPE_SETTINGS: u8 = 0x4;
const TYPE_PING: u8 = 0x6;
const TYPE_GOAWAY: u8 = 0x7;
const FLAG_END_STREAM: u8 = 0x1;
const FLAG_ACK: u8 = 0x1;
/// GOAWAY error codes (RFC 9113 §7).
const NO_ERROR: u32 = 0x0;
const ENHANCE_YOUR_CALM: u32 = 0xb;
/// Streams tracked per connection; hyper refuses streams past its limit
/// (128) with RST_STREAM, so more are only seen briefly. Past this, the
/// connection simply counts as busy.
const MAX_TRACKED_STREAMS: usize = 1024;

/// Reads frame headers out of a byte stream that arrives in pieces.
#[derive(Debug)]
struct FrameWalker {
    head: [u8; FRAME_HEADER_LEN],
    have: usize,
    skip: usize,
    /// At least one whole frame header has been seen.
    started: bool,
}

impl FrameWalker {
    fn new(skip: usize) -> Self {
        FrameWalker { head: [0; FRAME_HEADER_LEN], have: 0, skip, started: false }
    }

    /// Calls `f(type, flags, stream)` for every frame header in `data`.
    fn feed(&mut self, mut data: &[u8], mut f: impl FnMut(u8, u8, u32)) {
        while !data.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(data.len());
                self.skip -= n;
                data = &data[n..];
                continue;
            }
            let n = (FRAME_HEADER_LEN - self.have).min(data.len());
            self.head[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == FRAME_HEADER_LEN {
                let h = &self.head;
                let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
                let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                f(h[3], h[4], stream);
                self.have = 0;
                self.skip = len;
                self.started = true;
            }
        }
    }

    /// True between frames (a frame may be inserted here).
    fn at_boundary(&self) -> bool {
        self.have == 0 && self.skip == 0
    }
}

/// Why a connection is being closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// No open stream for [`IDLE_TIMEOUT`].
    Idle,
    /// Closed to make room for a new connection.
    Evicted,
    /// Too many PING/SETTINGS frames.
    Flood,
}

impl Close {
    fn code(self) -> u32 {
        match self {
            Close::Idle | Close::Evicted => NO_ERROR,
            Close::Flood => ENHANCE_YOUR_CALM,
        }
    }

    /// GOAWAY's debug data, as grpc-go words it where it has a counterpart.
    fn debug_data(self) -> &'static [u8] {
        match self {
            Close::Idle => b"max_idle",
            Close::Evicted => b"connection limit: idle connection closed for a new one",
            Close::Flood => b"too_many_pings",
        }
    }

    /// The error the server sees in place of its read or write.
    pub fn error(self) -> std::io::Error {
        let text = match self {
            Close::Idle => "connection idle too long",
            Close::Evicted => "idle connection closed to make room for a new one",
            Close::Flood => "too many PING/SETTINGS frames",
        };
        std::io::Error::new(std::io::ErrorKind::ConnectionAborted, text)
    }
}

/// One HTTP/2 connection's watcher: which client streams are open (from
/// the frame headers each way), the idle deadline, the control-frame
/// allowance, and the connection's slot in its table.
#[derive(Debug)]
pub struct Http2Guard {
    slot: ConnSlot,
    idle_timeout: Duration,
    inbound: FrameWalker,
    outbound: FrameWalker,
    /// Client streams the server has not finished answering (nor reset).
    streams: Vec<u32>,
    last_stream: u32,
    idle_since: Instant,
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    tokens: u32,
    refilled: Instant,
    pending: Option<Close>,
}

impl Http2Guard {
    /// Watches a connection whose client preface (`preface_len` bytes)
    /// comes first on the inbound side.
    pub fn new(slot: ConnSlot, idle_timeout: Duration, preface_len: usize) -> Self {
        let now = Instant::now();
        Http2Guard {
            slot,
            idle_timeout,
            inbound: FrameWalker::new(preface_len),
            outbound: FrameWalker::new(0),
            streams: Vec::new(),
            last_stream: 0,
            idle_since: now,
            timer: Box::pin(tokio::time::sleep_until(deadline_after(now, idle_timeout))),
            tokens: CONTROL_FRAME_BURST,
            refilled: now,
            pending: None,
        }
    }

    /// The token that closes this connection (eviction or server stop).
    pub fn token(&self) -> CancellationToken {
        self.slot.token()
    }

    /// True when the slot was taken away to make room.
    pub fn evicted(&self) -> bool {
        self.slot.evicted()
    }

    /// Bytes the server is about to read. `Err` when the client is
    /// flooding: the caller withholds the bytes and closes.
    pub fn inbound(&mut self, data: &[u8]) -> Result<(), Close> {
        let was_idle = self.streams.is_empty();
        let mut flood = false;
        let Http2Guard { inbound, streams, last_stream, tokens, refilled, .. } = self;
        inbound.feed(data, |kind, flags, id| match kind {
            TYPE_HEADERS if id % 2 == 1 && id > *last_stream => {
                *last_stream = id;
                if streams.len() < MAX_TRACKED_STREAMS {
                    streams.push(id);
                }
            }
            TYPE_RST_STREAM => streams.retain(|s| *s != id),
            TYPE_PING | TYPE_SETTINGS if flags & FLAG_ACK == 0 => {
                flood |= !take_token(tokens, refilled);
            }
            _ => {}
        });
        self.transition(was_idle);
        if flood {
            tracing::warn!(
                burst = CONTROL_FRAME_BURST,
                per_second = CONTROL_FRAMES_PER_SECOND,
                "closing a connection flooding PING/SETTINGS frames (GOAWAY ENHANCE_YOUR_CALM)"
            );
            return Err(Close::Flood);
        }
        Ok(())
    }

    /// Bytes the server wrote.
    pub fn outbound(&mut self, data: &[u8]) {
        let was_idle = self.streams.is_empty();
        let Http2Guard { outbound, streams, tokens, .. } = self;
        outbound.feed(data, |kind, flags, id| match kind {
            TYPE_HEADERS | TYPE_DATA => {
                *tokens = CONTROL_FRAME_BURST;
                // The server's answer is complete: the call is over for the
                // server, whether or not the client has ended its side (it
                // cannot reopen the stream, and h2 refuses what it still sends).
                if flags & FLAG_END_STREAM != 0 {
                    streams.retain(|s| *s != id);
                }
            }
            TYPE_RST_STREAM => streams.retain(|s| *s != id),
            _ => {}
        });
        self.transition(was_idle);
    }

    fn transition(&mut self, was_idle: bool) {
        let idle = self.streams.is_empty();
        if idle == was_idle {
            return;
        }
        self.slot.set_idle(idle);
        if idle {
            self.idle_since = Instant::now();
        }
    }

    /// Why the connection must close now, if it must; while idle, registers
    /// `cx` for the idle deadline. (The timer is polled only while idle: it
    /// may fire during a call, and is then moved to the new deadline when the
    /// connection is next idle. The connection's one task is the only waker.)
    pub fn poll_close(&mut self, cx: &mut std::task::Context<'_>) -> Option<Close> {
        if self.pending.is_some() || !self.streams.is_empty() {
            return self.pending;
        }
        while self.timer.as_mut().poll(cx).is_ready() {
            let due = deadline_after(self.idle_since, self.idle_timeout);
            if Instant::now() >= due {
                tracing::debug!(idle = ?self.idle_timeout, "closing an idle connection (GOAWAY)");
                self.pending = Some(Close::Idle);
                return self.pending;
            }
            self.timer.as_mut().reset(due);
        }
        None
    }

    /// The GOAWAY frame to send for `why`, when one can be sent now: the
    /// server has sent its own SETTINGS and is between frames.
    pub fn goaway(&self, why: Close) -> Option<Vec<u8>> {
        if !self.outbound.started || !self.outbound.at_boundary() {
            return None;
        }
        let debug = why.debug_data();
        let len = u32::try_from(8 + debug.len()).unwrap_or(8);
        let mut f = Vec::with_capacity(FRAME_HEADER_LEN + 8 + debug.len());
        f.extend_from_slice(&len.to_be_bytes()[1..]);
        f.extend_from_slice(&[TYPE_GOAWAY, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&self.last_stream.to_be_bytes());
        f.extend_from_slice(&why.code().to_be_bytes());
        f.extend_from_slice(debug);
        Some(f)
    }

    /// Open client streams (for tests).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }
}

/// Spends one control-frame token; false when none is left.
fn take_token(tokens: &mut u32, refilled: &mut Instant) -> bool {
    let now = Instant::now();
    if *tokens >= CONTROL_FRAME_BURST {
        // Full: the allowance comes back from the first one spent.
        *refilled = now;
    } else {
        let per = Duration::from_secs(1) / CONTROL_FRAMES_PER_SECOND;
        let earned = now.saturating_duration_since(*refilled).as_nanos() / per.as_nanos().max(1);
        if earned > 0 {
            *tokens = tokens.saturating_add(u32::try_from(earned).unwrap_or(u32::MAX)).min(CONTROL_FRAME_BURST);
            *refilled = now;
        }
    }
    if *tokens == 0 {
        return false;
    }
    *tokens -= 1;
    true
}

fn deadline_after(from: Instant, d: Duration) -> Instant {
    from.checked_add(d).unwrap_or_else(|| from + Duration::from_secs(86_400 * 365))
}
