//! Servers that never answer: one that accepts connections and says
//! nothing, and one that completes the HTTP/2 handshake (its SETTINGS and
//! the ACK of the client's) and then ignores every call. Client commands
//! must fail within their timeouts against both.

use std::path::{Path, PathBuf};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;

/// How silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Silence {
    /// Accepts and never reads or writes.
    AcceptOnly,
    /// Sends SETTINGS, acknowledges the client's, then only reads.
    Handshake,
}

/// A silent server on a unix socket; stops (and its connections close) on drop.
pub struct SilentServer {
    pub path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An empty SETTINGS frame, or its ACK.
fn settings(ack: bool) -> [u8; 9] {
    [0, 0, 0, 4, u8::from(ack), 0, 0, 0, 0]
}

impl SilentServer {
    pub fn start(path: &Path, how: Silence) -> SilentServer {
        let listener = UnixListener::bind(path).expect("bind the silent server");
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            // Dropped with the task: every handshake connection closes too.
            let mut talking = tokio::task::JoinSet::new();
            loop {
                let Ok((mut conn, _)) = listener.accept().await else { continue };
                match how {
                    Silence::AcceptOnly => held.push(conn),
                    Silence::Handshake => {
                        talking.spawn(async move {
                            if conn.write_all(&settings(false)).await.is_err() {
                                return;
                            }
                            let mut buf = vec![0u8; 65536];
                            let mut acked = false;
                            while let Ok(n) = conn.read(&mut buf).await {
                                if n == 0 {
                                    return;
                                }
                                if !acked {
                                    acked = true;
                                    let _ = conn.write_all(&settings(true)).await;
                                }
                            }
                        });
                    }
                }
            }
        });
        SilentServer { path: path.to_path_buf(), task }
    }
}
