//! HPACK decode cost of hostile header blocks (any local process can connect,
//! so the first header block is untrusted): the time an
//! HTTP/2 server needs to take in a connection whose first header block is
//! 16 or 64 KiB of tiny Huffman-coded fields, for h2 alone (what tonic runs)
//! and for h2 behind dpctl's `:authority` adapter, as µs per KiB of block.
//! The adapter used to HPACK-decode every first block in full with
//! loona-hpack (also shown: ~10 ms per KiB); it now adds little to h2's own cost.
//!
//!     cargo bench --bench hpack_decode [-- --runs 20]

use std::time::{Duration, Instant};

use dpctl::transport::AuthorityFix;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn arg_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// A literal field without indexing: one-byte Huffman name and value.
const TINY: [u8; 5] = [0x00, 0x81, 0x1f, 0x81, 0x1f];

fn block(prefix: &[u8], size: usize) -> Vec<u8> {
    let mut b = prefix.to_vec();
    while b.len() + TINY.len() <= size {
        b.extend(TINY);
    }
    b
}

fn frame(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend(&u32::try_from(len).expect("len").to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend(stream.to_be_bytes());
}

/// Preface, empty SETTINGS, then the block as HEADERS + CONTINUATIONs.
fn connection_bytes(block: &[u8]) -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    frame(&mut out, 0, 0x4, 0, 0);
    let chunks: Vec<&[u8]> = block.chunks(16_384).collect();
    for (i, c) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len();
        let kind = if i == 0 { 0x1 } else { 0x9 };
        // END_HEADERS on the last frame, END_STREAM on the HEADERS frame.
        let flags = if last { 0x4 } else { 0 } | if i == 0 { 0x1 } else { 0 };
        frame(&mut out, c.len(), kind, flags, 1);
        out.extend(*c);
    }
    out
}

/// Time until an h2 server on `server_io` has accepted (or refused) the request.
async fn serve_once<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(server_io: S) {
    let Ok(mut conn) = h2::server::handshake(server_io).await else { return };
    let _ = conn.accept().await;
}

async fn time_one(bytes: &[u8], wrap: bool) -> Duration {
    let (mut client, server) = tokio::io::duplex(256 * 1024);
    let started = Instant::now();
    let task =
        if wrap { tokio::spawn(serve_once(AuthorityFix::new(server))) } else { tokio::spawn(serve_once(server)) };
    let _ = client.write_all(bytes).await;
    // Close our write side (the server's answers still have somewhere to go):
    // a server that refuses the block (a stream reset) then sees the end of
    // the connection instead of waiting for another request.
    let _ = client.shutdown().await;
    if tokio::time::timeout(Duration::from_secs(30), task).await.is_err() {
        eprintln!("hpack_decode: the server neither took nor refused the block within 30 s");
        std::process::exit(1);
    }
    started.elapsed()
}

fn loona_once(block: &[u8]) -> Duration {
    let started = Instant::now();
    let mut d = loona_hpack::Decoder::new();
    let _ = d.decode_with_cb(block, |_, _| {});
    started.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs: usize = arg_or("--runs", 20);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let localhost: &[u8] = &[0x83, 0x86, 0x41, 0x09, b'l', b'o', b'c', b'a', b'l', b'h', b'o', b's', b't'];
    let path: &[u8] = &[0x83, 0x86, 0x41, 0x04, b'/', b'x', b'.', b's'];
    println!("first header block of tiny Huffman fields; median of {runs} runs, µs per KiB of block");
    println!("{:<34} {:>10} {:>14} {:>18}", "block", "h2 alone", "h2 + adapter", "loona full decode");
    for (what, prefix) in [("localhost", localhost), ("path :authority", path)] {
        for kib in [16usize, 64] {
            let b = block(prefix, kib * 1024);
            let bytes = connection_bytes(&b);
            let h2: Vec<Duration> = (0..runs).map(|_| rt.block_on(time_one(&bytes, false))).collect();
            let fix: Vec<Duration> = (0..runs).map(|_| rt.block_on(time_one(&bytes, true))).collect();
            let loona: Vec<Duration> = (0..runs.min(5)).map(|_| loona_once(&b)).collect();
            let per_kib = |d: Duration| d.as_secs_f64() * 1e6 / kib as f64;
            println!(
                "{:<34} {:>10.1} {:>14.1} {:>18.1}",
                format!("{kib} KiB after {what}"),
                per_kib(median(h2)),
                per_kib(median(fix)),
                per_kib(median(loona))
            );
        }
    }
}
