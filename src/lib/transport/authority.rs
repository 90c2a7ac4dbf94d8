//! A connection adapter that makes every `:authority` real clients send over a
//! unix socket acceptable to tonic's HTTP/2 server (h2).
//!
//! grpc-go dialing a bare socket path sends the path itself as `:authority`
//! (`/var/lib/kubelet/device-plugins/kubelet.sock`), and grpc-core sends it
//! percent-encoded (`var%2Flib%2F...`). h2 parses `:authority` as a URI
//! authority, rejects both, and resets the stream with PROTOCOL_ERROR, so such
//! clients cannot talk to a plain tonic server at all.
//!
//! [`AuthorityFix`] sits between the socket and the server. It reads the
//! client's frames, decodes every header block with HPACK (keeping the
//! client's dynamic table), replaces an `:authority` that h2 would reject by
//! `localhost`, and re-encodes the block with its own encoder (so the server's
//! HPACK state only ever sees what this adapter wrote). Every other frame, and
//! everything the server writes, passes through unchanged.
//!
//! Decoding every header block is costly (the HPACK crate rebuilds its
//! Huffman table for each string), so the first header block of a
//! connection decides: when its `:authority` is acceptable (current kubelets
//! send `localhost`), the connection is passed through untouched from then
//! on; otherwise every block is rewritten. Clients keep one `:authority` per
//! connection, so this costs nothing in correctness in practice.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER_LEN: usize = 9;
const TYPE_HEADERS: u8 = 0x1;
const TYPE_CONTINUATION: u8 = 0x9;
const FLAG_END_STREAM: u8 = 0x1;
const FLAG_END_HEADERS: u8 = 0x4;
const FLAG_PADDED: u8 = 0x8;
const FLAG_PRIORITY: u8 = 0x20;
/// SETTINGS_MAX_FRAME_SIZE default; h2's server does not raise it.
const MAX_FRAME: usize = 16_384;
/// Largest frame a client may send: the server's SETTINGS_MAX_FRAME_SIZE,
/// which tonic leaves at the protocol default (h2 answers FRAME_SIZE_ERROR).
const MAX_INBOUND_FRAME: usize = MAX_FRAME;
/// Upper bound of one compressed header block (HEADERS plus CONTINUATIONs).
const MAX_HEADER_BLOCK: usize = 64 * 1024;
/// Most CONTINUATION frames in one header block.
const MAX_CONTINUATIONS: u32 = 64;
/// Upper bound of one decoded header list (name + value + 32 per field, as
/// HTTP/2 counts it); h2 itself stops at 16 KiB, so nothing legitimate is lost.
const MAX_HEADER_LIST: usize = 64 * 1024;
/// The HPACK table size h2's server allows its clients (the protocol default).
const MAX_TABLE_SIZE: usize = 4096;
/// The authority substituted for one h2 would reject.
pub const REPLACEMENT_AUTHORITY: &str = "localhost";

/// True when h2 accepts `value` as an `:authority`.
pub fn is_valid_authority(value: &[u8]) -> bool {
    http::uri::Authority::try_from(value).is_ok()
}

/// Wraps the server side of a connection; see the module docs.
///
/// A connection can also be given a kill switch ([`AuthorityFix::abort_on`]):
/// once it fires, reads and writes fail and the server drops the connection,
/// so no stream outlives the server that accepted it.
pub struct AuthorityFix<S> {
    inner: S,
    abort: Option<Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>>,
    raw: BytesMut,
    ready: BytesMut,
    preface_left: usize,
    block: Option<PendingBlock>,
    decoder: loona_hpack::Decoder<'static>,
    encoder: loona_hpack::Encoder<'static>,
    mode: Mode,
    rewritten: u64,
    eof: bool,
}

/// What the connection's first header block decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No header block seen yet.
    Undecided,
    /// The first block's `:authority` was fine: forward blocks as they are.
    PassThrough,
    /// It was not: decode, fix and re-encode every block.
    Rewrite,
}

struct PendingBlock {
    stream_id: u32,
    end_stream: bool,
    continuations: u32,
    fragment: Vec<u8>,
}

impl<S> std::fmt::Debug for AuthorityFix<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorityFix").field("rewritten", &self.rewritten).finish_non_exhaustive()
    }
}

impl<S> AuthorityFix<S> {
    /// Wraps a freshly accepted connection (before the client preface).
    pub fn new(inner: S) -> Self {
        AuthorityFix {
            inner,
            abort: None,
            raw: BytesMut::with_capacity(16 * 1024),
            ready: BytesMut::with_capacity(16 * 1024),
            preface_left: PREFACE.len(),
            block: None,
            decoder: {
                let mut d = loona_hpack::Decoder::new();
                d.set_max_allowed_table_size(MAX_TABLE_SIZE);
                d
            },
            encoder: loona_hpack::Encoder::new(),
            mode: Mode::Undecided,
            rewritten: 0,
            eof: false,
        }
    }

    /// Aborts the connection when `token` is cancelled.
    pub fn abort_on(mut self, token: tokio_util::sync::CancellationToken) -> Self {
        self.abort = Some(Box::pin(token.cancelled_owned()));
        self
    }

    /// Fails once the kill switch has fired (and registers for its wake-up).
    fn check_abort(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let fired = self.abort.as_mut().is_some_and(|f| f.as_mut().poll(cx).is_ready());
        if fired { Err(io::Error::new(io::ErrorKind::ConnectionAborted, "server stopped")) } else { Ok(()) }
    }

    /// The wrapped connection.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// How many `:authority` values this connection had replaced so far.
    pub fn rewritten(&self) -> u64 {
        self.rewritten
    }

    /// Moves every complete frame from `raw` to `ready`, rewriting header blocks.
    fn process(&mut self) -> io::Result<()> {
        if self.preface_left > 0 {
            let n = self.preface_left.min(self.raw.len());
            let offset = PREFACE.len() - self.preface_left;
            if self.raw[..n] != PREFACE[offset..offset + n] {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "not an HTTP/2 client preface"));
            }
            self.ready.extend_from_slice(&self.raw.split_to(n));
            self.preface_left -= n;
            if self.preface_left > 0 {
                return Ok(());
            }
        }
        loop {
            if self.mode == Mode::PassThrough && self.block.is_none() {
                let rest = self.raw.split();
                self.ready.extend_from_slice(&rest);
                return Ok(());
            }
            if self.raw.len() < FRAME_HEADER_LEN {
                break;
            }
            let len = (usize::from(self.raw[0]) << 16) | (usize::from(self.raw[1]) << 8) | usize::from(self.raw[2]);
            if len > MAX_INBOUND_FRAME {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "HTTP/2 frame too large"));
            }
            if self.raw.len() < FRAME_HEADER_LEN + len {
                self.raw.reserve(FRAME_HEADER_LEN + len - self.raw.len());
                return Ok(());
            }
            let kind = self.raw[3];
            let flags = self.raw[4];
            let stream_id = u32::from_be_bytes([self.raw[5], self.raw[6], self.raw[7], self.raw[8]]) & 0x7fff_ffff;
            match kind {
                TYPE_HEADERS => {
                    let frame = self.raw.split_to(FRAME_HEADER_LEN + len);
                    let fragment = headers_fragment(&frame[FRAME_HEADER_LEN..], flags)?;
                    if self.block.is_some() {
                        return Err(invalid("HEADERS inside another header block"));
                    }
                    let block = PendingBlock {
                        stream_id,
                        end_stream: flags & FLAG_END_STREAM != 0,
                        continuations: 0,
                        fragment: fragment.to_vec(),
                    };
                    self.collect(block, flags)?;
                }
                TYPE_CONTINUATION => {
                    let frame = self.raw.split_to(FRAME_HEADER_LEN + len);
                    let Some(mut block) = self.block.take() else {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, "CONTINUATION without HEADERS"));
                    };
                    block.continuations += 1;
                    if block.stream_id != stream_id
                        || block.fragment.len() + len > MAX_HEADER_BLOCK
                        || block.continuations > MAX_CONTINUATIONS
                    {
                        return Err(invalid("header block too large, or CONTINUATION on another stream"));
                    }
                    block.fragment.extend_from_slice(&frame[FRAME_HEADER_LEN..]);
                    self.collect(block, flags)?;
                }
                _ => {
                    if self.block.is_some() {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, "frame interleaved in a header block"));
                    }
                    let frame = self.raw.split_to(FRAME_HEADER_LEN + len);
                    self.ready.extend_from_slice(&frame);
                }
            }
        }
        Ok(())
    }

    fn collect(&mut self, block: PendingBlock, flags: u8) -> io::Result<()> {
        if flags & FLAG_END_HEADERS == 0 {
            self.block = Some(block);
            return Ok(());
        }
        self.rewrite(&block)
    }

    /// Decodes one complete header block and writes it back, re-encoded
    /// (or as it was, on a pass-through connection).
    fn rewrite(&mut self, block: &PendingBlock) -> io::Result<()> {
        if self.mode == Mode::PassThrough {
            self.emit(block, &block.fragment);
            return Ok(());
        }
        let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(12);
        let mut list_size = 0usize;
        self.decoder
            .decode_with_cb(&block.fragment, |name, value| {
                // Stop keeping fields past the limit: a small block can expand hugely.
                list_size = list_size.saturating_add(name.len() + value.len() + 32);
                if list_size <= MAX_HEADER_LIST {
                    headers.push((name.into_owned(), value.into_owned()));
                }
            })
            .map_err(|e| invalid(format!("HPACK decoding failed: {e:?}")))?;
        if list_size > MAX_HEADER_LIST {
            return Err(invalid(format!("header list of {list_size} bytes is over {MAX_HEADER_LIST}")));
        }
        let bad = |name: &[u8], value: &[u8]| name == b":authority" && !is_valid_authority(value);
        if self.mode == Mode::Undecided {
            if !headers.iter().any(|(n, v)| bad(n, v)) {
                // The server's decoder sees the client's own encoding from the
                // first block on, so forwarding stays consistent.
                self.mode = Mode::PassThrough;
                self.emit(block, &block.fragment);
                return Ok(());
            }
            self.mode = Mode::Rewrite;
        }
        for (name, value) in &mut headers {
            if bad(name, value) {
                tracing::debug!(
                    authority = %String::from_utf8_lossy(value),
                    "replacing an :authority h2 would reject by {REPLACEMENT_AUTHORITY}"
                );
                *value = REPLACEMENT_AUTHORITY.as_bytes().to_vec();
                self.rewritten += 1;
            }
        }
        let encoded = self.encoder.encode(headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
        self.emit(block, &encoded);
        Ok(())
    }

    /// Writes a header block as HEADERS and CONTINUATION frames.
    fn emit(&mut self, block: &PendingBlock, encoded: &[u8]) {
        let mut chunks = encoded.chunks(MAX_FRAME).peekable();
        let mut first = true;
        // An empty block still needs its HEADERS frame.
        let empty: &[u8] = &[];
        let mut chunk = chunks.next().unwrap_or(empty);
        loop {
            let last = chunks.peek().is_none();
            let mut flags = if last { FLAG_END_HEADERS } else { 0 };
            let kind = if first {
                if block.end_stream {
                    flags |= FLAG_END_STREAM;
                }
                TYPE_HEADERS
            } else {
                TYPE_CONTINUATION
            };
            put_frame_header(&mut self.ready, chunk.len(), kind, flags, block.stream_id);
            self.ready.extend_from_slice(chunk);
            first = false;
            match chunks.next() {
                Some(next) => chunk = next,
                None => break,
            }
        }
    }
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// The header block fragment of a HEADERS frame payload, without padding and priority.
fn headers_fragment(payload: &[u8], flags: u8) -> io::Result<&[u8]> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed HEADERS frame");
    let mut start = 0;
    let mut end = payload.len();
    if flags & FLAG_PADDED != 0 {
        let pad = usize::from(*payload.first().ok_or_else(bad)?);
        start += 1;
        end = end.checked_sub(pad).ok_or_else(bad)?;
    }
    if flags & FLAG_PRIORITY != 0 {
        start += 5;
    }
    if start > end {
        return Err(bad());
    }
    Ok(&payload[start..end])
}

fn put_frame_header(buf: &mut BytesMut, len: usize, kind: u8, flags: u8, stream_id: u32) {
    // `len` is at most MAX_FRAME, which fits in 24 bits.
    let len = u32::try_from(len).unwrap_or(u32::MAX) & 0x00ff_ffff;
    buf.put_slice(&len.to_be_bytes()[1..]);
    buf.put_u8(kind);
    buf.put_u8(flags);
    buf.put_u32(stream_id & 0x7fff_ffff);
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityFix<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        this.check_abort(cx)?;
        loop {
            if !this.ready.is_empty() {
                let n = this.ready.len().min(buf.remaining());
                buf.put_slice(&this.ready[..n]);
                this.ready.advance(n);
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            if this.mode == Mode::PassThrough && this.raw.is_empty() {
                // Nothing left to inspect on this connection: read straight
                // into the server's buffer.
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            if this.raw.capacity() - this.raw.len() < 8 * 1024 {
                this.raw.reserve(16 * 1024);
            }
            let filled = {
                let dst = this.raw.spare_capacity_mut();
                let mut rb = ReadBuf::uninit(dst);
                ready!(Pin::new(&mut this.inner).poll_read(cx, &mut rb))?;
                rb.filled().len()
            };
            if filled == 0 {
                this.eof = true;
                continue;
            }
            // SAFETY: `poll_read` initialised `filled` bytes of the spare capacity.
            unsafe { this.raw.set_len(this.raw.len() + filled) };
            this.process()?;
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.check_abort(cx)?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check_abort(cx)?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected for AuthorityFix<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers_frame(block: &[u8], flags: u8, stream: u32) -> Vec<u8> {
        let mut b = BytesMut::new();
        put_frame_header(&mut b, block.len(), TYPE_HEADERS, flags, stream);
        b.extend_from_slice(block);
        b.to_vec()
    }

    fn run(input: &[u8]) -> (Vec<u8>, u64) {
        let mut fix = AuthorityFix::new(());
        fix.raw.extend_from_slice(input);
        fix.process().unwrap();
        (fix.ready.to_vec(), fix.rewritten)
    }

    fn decode_all(out: &[u8]) -> Vec<Vec<(String, String)>> {
        let mut dec = loona_hpack::Decoder::new();
        let mut rest = &out[PREFACE.len()..];
        let mut blocks = Vec::new();
        while !rest.is_empty() {
            let len = (usize::from(rest[0]) << 16) | (usize::from(rest[1]) << 8) | usize::from(rest[2]);
            let kind = rest[3];
            let payload = &rest[9..9 + len];
            if kind == TYPE_HEADERS {
                let mut hs = Vec::new();
                dec.decode_with_cb(payload, |n, v| {
                    hs.push((String::from_utf8_lossy(&n).into_owned(), String::from_utf8_lossy(&v).into_owned()))
                })
                .unwrap();
                blocks.push(hs);
            }
            rest = &rest[9 + len..];
        }
        blocks
    }

    #[test]
    fn authority_forms() {
        assert!(is_valid_authority(b"localhost"));
        assert!(!is_valid_authority(b"/var/lib/kubelet/device-plugins/kubelet.sock"));
        assert!(!is_valid_authority(b"var%2Flib%2Fkubelet%2Fdevice-plugins%2Fkubelet.sock"));
    }

    #[test]
    fn rewrites_bad_authority_across_indexed_references() {
        // A client that indexes its bad :authority and refers to it again on the next request.
        let mut enc = loona_hpack::Encoder::new();
        let hs: Vec<(&[u8], &[u8])> = vec![
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", b"/v1beta1.Registration/Register"),
            (b":authority", b"/tmp/dp/kubelet.sock"),
            (b"content-type", b"application/grpc"),
        ];
        let b1 = enc.encode(hs.iter().copied());
        let b2 = enc.encode(hs.iter().copied());
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(&b1, FLAG_END_HEADERS, 1));
        input.extend([0, 0, 1, 0, 0, 0, 0, 0, 1, 0]); // a DATA frame, passed through
        input.extend(headers_frame(&b2, FLAG_END_HEADERS | FLAG_END_STREAM, 3));
        let (out, rewritten) = run(&input);
        assert_eq!(rewritten, 2);
        let blocks = decode_all(&out);
        assert_eq!(blocks.len(), 2);
        for b in &blocks {
            assert!(b.contains(&(":authority".into(), "localhost".into())), "{b:?}");
            assert!(b.contains(&(":path".into(), "/v1beta1.Registration/Register".into())));
        }
    }

    #[test]
    fn keeps_valid_authority_and_joins_continuations() {
        let mut enc = loona_hpack::Encoder::new();
        let hs: Vec<(&[u8], &[u8])> = vec![(b":authority", b"localhost"), (b"x-big", &[b'a'; 300])];
        let block = enc.encode(hs.iter().copied());
        let (a, b) = block.split_at(10);
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(a, 0, 1));
        let mut cont = BytesMut::new();
        put_frame_header(&mut cont, b.len(), TYPE_CONTINUATION, FLAG_END_HEADERS, 1);
        cont.extend_from_slice(b);
        input.extend(cont);
        // Feed the input one byte at a time: frames split anywhere must still work.
        let mut fix = AuthorityFix::new(());
        for byte in &input {
            fix.raw.extend_from_slice(&[*byte]);
            fix.process().unwrap();
        }
        assert_eq!(fix.rewritten, 0);
        let blocks = decode_all(&fix.ready);
        assert_eq!(blocks[0][0], (":authority".to_string(), "localhost".to_string()));
        assert_eq!(blocks[0][1].1.len(), 300);
    }

    #[test]
    fn a_connection_that_starts_valid_is_passed_through_unchanged() {
        let mut enc = loona_hpack::Encoder::new();
        let hs: Vec<(&[u8], &[u8])> = vec![(b":path", b"/x"), (b":authority", b"localhost")];
        let b1 = enc.encode(hs.iter().copied());
        let b2 = enc.encode(hs.iter().copied());
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(&b1, FLAG_END_HEADERS, 1));
        input.extend(headers_frame(&b2, FLAG_END_HEADERS | FLAG_END_STREAM, 3));
        let mut fix = AuthorityFix::new(());
        fix.raw.extend_from_slice(&input);
        fix.process().unwrap();
        assert_eq!(fix.mode, Mode::PassThrough);
        assert_eq!(fix.ready.to_vec(), input, "byte for byte");
    }

    #[test]
    fn padded_and_priority_headers_are_unwrapped() {
        let mut enc = loona_hpack::Encoder::new();
        let hs: Vec<(&[u8], &[u8])> = vec![(b":path", b"/x"), (b":authority", b"/tmp/x.sock")];
        let block = enc.encode(hs.iter().copied());
        // PADDED (pad length 3) and PRIORITY (5 bytes) around the fragment.
        let mut payload = vec![3u8];
        payload.extend([0, 0, 0, 0, 16]);
        payload.extend(&block);
        payload.extend([0, 0, 0]);
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(&payload, FLAG_END_HEADERS | FLAG_PADDED | FLAG_PRIORITY, 1));
        let (out, rewritten) = run(&input);
        assert_eq!(rewritten, 1);
        assert_eq!(decode_all(&out)[0], vec![(":path".into(), "/x".into()), (":authority".into(), "localhost".into())]);
    }

    #[test]
    fn a_small_block_that_expands_hugely_is_refused() {
        // One 4000-byte literal, indexed, then referenced 50,000 times: 50 KB on
        // the wire, 200 MB decoded. The connection is refused instead.
        let mut block = vec![0x40, 1, b'x', 0x7f];
        let mut len = 4000 - 127;
        while len >= 128 {
            block.push((len % 128) as u8 | 0x80);
            len /= 128;
        }
        block.push(len as u8);
        block.extend(std::iter::repeat_n(b'v', 4000));
        block.extend(std::iter::repeat_n(0xbe, 50_000)); // indexed field 62
        let mut input = PREFACE.to_vec();
        let mut at = 0;
        let mut first = true;
        while at < block.len() {
            let end = (at + MAX_FRAME).min(block.len());
            let last = end == block.len();
            let mut b = BytesMut::new();
            let kind = if first { TYPE_HEADERS } else { TYPE_CONTINUATION };
            put_frame_header(&mut b, end - at, kind, if last { FLAG_END_HEADERS } else { 0 }, 1);
            b.extend_from_slice(&block[at..end]);
            input.extend(b);
            at = end;
            first = false;
        }
        let mut fix = AuthorityFix::new(());
        fix.raw.extend_from_slice(&input);
        let err = fix.process().unwrap_err();
        assert!(err.to_string().contains("header list of"), "{err}");
    }

    #[test]
    fn oversized_frames_and_table_sizes_are_refused() {
        let mut input = PREFACE.to_vec();
        let mut b = BytesMut::new();
        put_frame_header(&mut b, MAX_FRAME + 1, 0, 0, 1);
        input.extend(b);
        let mut fix = AuthorityFix::new(());
        fix.raw.extend_from_slice(&input);
        assert!(fix.process().is_err(), "a frame over SETTINGS_MAX_FRAME_SIZE");
        // A dynamic table size update over the server's 4096.
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(&[0x3f, 0xe1, 0x7f], FLAG_END_HEADERS, 1)); // size 16384
        let mut fix = AuthorityFix::new(());
        fix.raw.extend_from_slice(&input);
        assert!(fix.process().is_err(), "a table size over 4096");
    }

    #[test]
    fn rejects_garbage() {
        let mut fix = AuthorityFix::new(());
        fix.raw.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        assert!(fix.process().is_err());
    }
}
