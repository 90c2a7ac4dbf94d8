//! A writer over the process's stdout or stderr descriptor (handed over by
//! the binary) that never lets a full pipe outlast a signal: before each
//! write it waits, in 100 ms steps, for the descriptor to take bytes, and
//! gives up with `BrokenPipe` once [`request_stop`] was called. A
//! `kubelet-sim -o json` whose stdout nobody reads then still stops on
//! SIGTERM (removing its sockets) instead of blocking in `write` forever.

use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

static STOPPING: AtomicBool = AtomicBool::new(false);

/// A signal asked the process to stop: output a reader is not taking may be
/// dropped from now on (writes that can go through still do).
pub fn request_stop() {
    STOPPING.store(true, Ordering::SeqCst);
}

/// True after [`request_stop`].
pub fn stop_requested() -> bool {
    STOPPING.load(Ordering::SeqCst)
}

/// How long one wait for a writable descriptor lasts before the stop flag is
/// checked again: the bound on how long a signal waits for a stuck reader.
const STEP_MS: i32 = 100;

/// Writes at most this much per `write(2)` once `poll` says the descriptor
/// takes bytes: a pipe that reports writable has room for at least one
/// page, so a write this size does not block.
const CHUNK: usize = 4096;

/// See the module docs. Unbuffered: wrap it in a `LineWriter`.
#[derive(Debug)]
pub struct FdWriter {
    fd: OwnedFd,
}

impl FdWriter {
    /// A writer over `fd` (a duplicate of stdout or stderr).
    pub fn new(fd: OwnedFd) -> Self {
        FdWriter { fd }
    }

    /// Waits until the descriptor takes bytes; `BrokenPipe` once a stop was
    /// requested and it still does not.
    fn writable(&self) -> io::Result<()> {
        loop {
            let mut p = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
            // SAFETY: one valid pollfd for the duration of the call.
            let n = unsafe { libc::poll(&raw mut p, 1, STEP_MS) };
            if n > 0 {
                return Ok(());
            }
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            if stop_requested() {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "nobody reads the output and a signal asked dpctl to stop",
                ));
            }
        }
    }
}

impl Write for FdWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.writable()?;
        let len = buf.len().min(CHUNK);
        loop {
            // SAFETY: `buf[..len]` is valid for reads; the descriptor is owned.
            let n = unsafe { libc::write(self.fd.as_raw_fd(), buf.as_ptr().cast(), len) };
            if n >= 0 {
                return Ok(usize::try_from(n).unwrap_or(0));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe nobody reads: writes fill it, then the next write waits, and
    /// returns `BrokenPipe` within a few steps of a stop request.
    #[test]
    fn a_full_pipe_gives_way_to_a_stop_request() {
        let mut fds = [0; 2];
        // SAFETY: a valid array of two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors are fresh and owned from here on.
        let (r, w) = unsafe {
            use std::os::fd::FromRawFd;
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        };
        let mut out = FdWriter::new(w);
        let line = vec![b'x'; 1024];
        let filler = std::thread::spawn(move || {
            loop {
                if let Err(e) = out.write_all(&line) {
                    return e;
                }
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!filler.is_finished(), "a full pipe blocks the writer until a stop is requested");
        let t = std::time::Instant::now();
        request_stop();
        let e = filler.join().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
        assert!(t.elapsed() < std::time::Duration::from_secs(2), "{:?}", t.elapsed());
        drop(r);
    }
}
