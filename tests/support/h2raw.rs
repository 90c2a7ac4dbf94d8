//! A deliberately raw HTTP/2 gRPC client that sends whatever `:authority` it
//! is told to, byte for byte, as grpc-go and grpc-core do over unix sockets.
//! (Rust HTTP/2 clients refuse to send a socket path as an authority.)

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.push(kind);
    f.push(flags);
    f.extend(stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The response headers and trailers of one unary call.
#[derive(Debug, Default)]
pub struct Answer {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub reset: Option<u32>,
}

impl Answer {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Makes `calls` unary calls of `path` on one connection, each with `authority`,
/// sending an empty protobuf message. The encoder indexes headers, so later
/// calls refer to the authority through the dynamic table, as real clients do.
pub async fn unary_calls(socket: &std::path::Path, authority: &str, path: &str, calls: u32) -> Vec<Answer> {
    let mut s = UnixStream::connect(socket).await.expect("connect");
    let mut out = PREFACE.to_vec();
    out.extend(frame(4, 0, 0, &[])); // SETTINGS
    let mut enc = loona_hpack::Encoder::new();
    for i in 0..calls {
        let stream = 1 + 2 * i;
        let headers: Vec<(&[u8], &[u8])> = vec![
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", path.as_bytes()),
            (b":authority", authority.as_bytes()),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
        ];
        out.extend(frame(1, 0x4, stream, &enc.encode(headers)));
        out.extend(frame(0, 0x1, stream, &[0, 0, 0, 0, 0])); // empty message, END_STREAM
    }
    s.write_all(&out).await.unwrap();

    let mut answers: Vec<Answer> = (0..calls).map(|_| Answer::default()).collect();
    let mut done = 0;
    let mut dec = loona_hpack::Decoder::new();
    let mut buf = Vec::new();
    let mut acked = false;
    while done < calls {
        let mut chunk = [0u8; 16384];
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
        while buf.len() >= 9 {
            let len = (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
            if buf.len() < 9 + len {
                break;
            }
            let (kind, flags) = (buf[3], buf[4]);
            let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            let payload: Vec<u8> = buf[9..9 + len].to_vec();
            buf.drain(..9 + len);
            let idx = if stream == 0 { None } else { Some(((stream - 1) / 2) as usize) };
            match (kind, idx) {
                (4, None) if flags & 1 == 0 && !acked => {
                    s.write_all(&frame(4, 1, 0, &[])).await.unwrap();
                    acked = true;
                }
                (1, Some(i)) => {
                    dec.decode_with_cb(&payload, |n, v| {
                        answers[i]
                            .headers
                            .push((String::from_utf8_lossy(&n).into_owned(), String::from_utf8_lossy(&v).into_owned()))
                    })
                    .unwrap();
                    if flags & 1 != 0 {
                        done += 1;
                    }
                }
                (0, Some(i)) => {
                    answers[i].body.extend_from_slice(&payload);
                    if flags & 1 != 0 {
                        done += 1;
                    }
                }
                (3, Some(i)) => {
                    answers[i].reset = Some(u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]));
                    done += 1;
                }
                _ => {}
            }
        }
    }
    answers
}
