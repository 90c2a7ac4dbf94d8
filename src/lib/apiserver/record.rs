//! What `dpctl apiserver` leaves in its directory, so that the published
//! slices can be read back, also after it stopped:
//! - `apiserver.json`: the server's address, its kubeconfig, the current
//!   resourceVersion, the number of writes and every ResourceSlice as
//!   stored, rewritten (atomically) after each write;
//! - `apiserver-writes.jsonl`: every write (create, update, delete) as one
//!   JSON line, after a header line naming dpctl;
//! - the kubeconfig (`--kubeconfig-out`, default `kubeconfig`).
//!
//! Each file says it was written by dpctl; a file in the way that does not
//! is never overwritten.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::store::Write;
use crate::error::{Error, Result};

/// The record's file name in the directory.
pub const RECORD_FILE: &str = "apiserver.json";
/// The write log's file name in the directory.
pub const WRITES_FILE: &str = "apiserver-writes.jsonl";
/// What every file dpctl apiserver writes says it was written by.
pub const WRITTEN_BY: &str = "dpctl apiserver";

/// `apiserver.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// Always [`WRITTEN_BY`].
    pub written_by: String,
    /// The server's URL, e.g. `http://127.0.0.1:38211`.
    pub server: String,
    /// The kubeconfig written for it.
    pub kubeconfig: PathBuf,
    /// The resourceVersion after the last write.
    pub resource_version: String,
    /// Writes recorded so far.
    pub writes: u64,
    /// Every ResourceSlice as stored, by name.
    pub slices: Vec<Value>,
}

/// Keeps the record up to date.
#[derive(Debug)]
pub struct Recorder {
    dir: PathBuf,
    log: std::fs::File,
    record: Record,
}

/// Refuses to replace `path` unless it is missing or its first bytes say
/// dpctl apiserver wrote it.
fn ours(path: &Path, what: &str) -> Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        Ok(m) => m,
    };
    let head = if meta.is_file() {
        let mut buf = vec![0; 256];
        let n = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut buf)).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    } else {
        String::new()
    };
    if !meta.is_file() {
        let kind = if meta.is_dir() { "directory" } else { "special file" };
        return Err(Error::invalid(what, format!("{} is a {kind}, not a file dpctl can write", path.display())));
    }
    if head.contains(WRITTEN_BY) {
        return Ok(());
    }
    Err(Error::invalid(
        what,
        format!(
            "{} exists and was not written by dpctl apiserver; dpctl never overwrites it: \
             remove it or choose another path",
            path.display()
        ),
    ))
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a
/// reader never sees half a file.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The kubeconfig a client (a driver, kubectl) uses to reach `server`.
pub fn kubeconfig(server: &str) -> String {
    format!(
        "# Written by {WRITTEN_BY}: its API at {server}, plain HTTP on loopback, no credentials.\n\
         apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: dpctl\n  cluster:\n    server: {server}\n\
         contexts:\n\
         - name: dpctl\n  context:\n    cluster: dpctl\n    user: dpctl\n\
         current-context: dpctl\n\
         users:\n\
         - name: dpctl\n  user: {{}}\n"
    )
}

/// Checks that the files to be written are dpctl's or missing, before the
/// server binds.
pub fn check_paths(dir: &Path, kubeconfig_out: &Path) -> Result<()> {
    crate::input::create_dir(dir, 0o755)?;
    ours(&dir.join(RECORD_FILE), "--dir")?;
    ours(&dir.join(WRITES_FILE), "--dir")?;
    ours(kubeconfig_out, "--kubeconfig-out")
}

impl Recorder {
    /// Starts a record in `dir` for the server at `server` and writes its
    /// kubeconfig: an empty write log, the initial slices.
    pub fn start(dir: &Path, server: &str, kubeconfig_out: &Path, slices: Vec<Value>, rv: u64) -> Result<Self> {
        check_paths(dir, kubeconfig_out)?;
        let io = |what: &Path| {
            let what = what.display().to_string();
            move |e| Error::io(format!("writing {what}"), e)
        };
        let log_path = dir.join(WRITES_FILE);
        let mut log = std::fs::File::create(&log_path).map_err(io(&log_path))?;
        let header = json!({"written_by": WRITTEN_BY, "server": server});
        writeln!(log, "{header}").map_err(io(&log_path))?;
        let record = Record {
            written_by: WRITTEN_BY.into(),
            server: server.into(),
            kubeconfig: kubeconfig_out.to_path_buf(),
            resource_version: rv.to_string(),
            writes: 0,
            slices,
        };
        let recorder = Recorder { dir: dir.to_path_buf(), log, record };
        recorder.save().map_err(io(&dir.join(RECORD_FILE)))?;
        replace(kubeconfig_out, kubeconfig(server).as_bytes()).map_err(io(kubeconfig_out))?;
        Ok(recorder)
    }

    fn save(&self) -> std::io::Result<()> {
        let mut text = serde_json::to_vec_pretty(&self.record).map_err(std::io::Error::other)?;
        text.push(b'\n');
        replace(&self.dir.join(RECORD_FILE), &text)
    }

    /// Records one write and the slices after it.
    pub fn record(&mut self, write: &Write, slices: Vec<Value>) -> std::io::Result<()> {
        let line = serde_json::to_string(write).map_err(std::io::Error::other)?;
        writeln!(self.log, "{line}")?;
        self.record.writes += 1;
        self.record.resource_version = write.resource_version.clone();
        self.record.slices = slices;
        self.save()
    }

    /// The record as it stands.
    pub fn current(&self) -> &Record {
        &self.record
    }
}

/// Reads the record a `dpctl apiserver --dir DIR` keeps (running or stopped).
pub fn read(dir: &Path) -> Result<Record> {
    let path = dir.join(RECORD_FILE);
    let place = format!("--dir {}", dir.display());
    if !path.exists() {
        return Err(Error::invalid(
            place,
            format!("no {RECORD_FILE} here: run `dpctl apiserver --dir {} --objects FILE` first", dir.display()),
        ));
    }
    let text = crate::input::read_text(&path, &place)?;
    let record: Record = serde_json::from_str(&text)
        .map_err(|e| Error::invalid(&place, format!("{RECORD_FILE} is not a dpctl apiserver record: {e}")))?;
    if record.written_by != WRITTEN_BY {
        return Err(Error::invalid(place, format!("{RECORD_FILE} was not written by dpctl apiserver")));
    }
    Ok(record)
}

/// Reads the write log: every recorded write, in order.
pub fn read_writes(dir: &Path) -> Result<Vec<Value>> {
    let path = dir.join(WRITES_FILE);
    let place = format!("--dir {}", dir.display());
    let text = crate::input::read_text(&path, &place)?;
    let mut lines = text.lines();
    if !lines.next().is_some_and(|h| h.contains(WRITTEN_BY)) {
        return Err(Error::invalid(place, format!("{WRITES_FILE} was not written by dpctl apiserver")));
    }
    lines.map(|l| serde_json::from_str(l).map_err(|e| Error::invalid(&place, format!("{WRITES_FILE}: {e}")))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_dpctl_did_not_write_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let kc = dir.path().join("kubeconfig");
        std::fs::write(&kc, "apiVersion: v1\nkind: Config\n").unwrap();
        let e = Recorder::start(dir.path(), "http://127.0.0.1:1", &kc, vec![], 0).unwrap_err();
        assert!(e.to_string().contains("not written by dpctl apiserver"), "{e}");
        assert_eq!(std::fs::read_to_string(&kc).unwrap(), "apiVersion: v1\nkind: Config\n");
        std::fs::remove_file(&kc).unwrap();
        let r = Recorder::start(dir.path(), "http://127.0.0.1:1", &kc, vec![], 3).unwrap();
        assert_eq!(r.current().resource_version, "3");
        assert!(std::fs::read_to_string(&kc).unwrap().contains("server: http://127.0.0.1:1"));
        assert_eq!(read(dir.path()).unwrap().writes, 0);
        assert!(read_writes(dir.path()).unwrap().is_empty());
        // A second run in the same directory replaces dpctl's own files.
        Recorder::start(dir.path(), "http://127.0.0.1:2", &kc, vec![], 0).unwrap();
    }
}
