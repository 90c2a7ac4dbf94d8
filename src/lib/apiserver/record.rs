//! What `dpctl apiserver` leaves in its directory, so that the published
//! slices can be read back, also after it stopped:
//! - `apiserver.json`: the server's address, its kubeconfig, the current
//!   resourceVersion, the number of writes and every ResourceSlice as
//!   stored, rewritten (atomically) after writes: once per burst, not once
//!   per write (a write's own line goes to the log at once), and before the
//!   write is shown;
//! - `apiserver-writes.jsonl`: every write (create, update, delete) as one
//!   JSON line, after a header line naming dpctl;
//! - the kubeconfig (`--kubeconfig-out`, default `kubeconfig`), mode 0600:
//!   it carries the server's bearer token.
//!
//! Each file starts with dpctl's marker; a file in the way that does not is
//! never overwritten.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
/// The exact first line of the kubeconfig dpctl writes: the mark that it
/// may be replaced (a file that merely mentions dpctl is not dpctl's).
const KUBECONFIG_MARK: &str = "# Written by dpctl apiserver.";
/// How the JSON files dpctl writes begin: the marker field first.
const JSON_MARK: &str = "{\n  \"written_by\": \"dpctl apiserver\"";
/// The write log's first line begins so.
const LOG_MARK: &str = "{\"written_by\":\"dpctl apiserver\"";

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
    /// Writes not shown as they happened because the output was too slow
    /// (never in the file).
    #[serde(skip)]
    pub unshown: u64,
}

/// `apiserver.json` as written: the slices shared with the store.
#[derive(Serialize)]
struct RecordView<'a> {
    written_by: &'a str,
    server: &'a str,
    kubeconfig: &'a Path,
    resource_version: String,
    writes: u64,
    slices: Vec<&'a Value>,
}

/// Keeps the record up to date.
#[derive(Debug)]
pub struct Recorder {
    dir: PathBuf,
    log: std::fs::File,
    server: String,
    kubeconfig: PathBuf,
    writes: u64,
    resource_version: String,
    /// Writes were logged since `apiserver.json` was last saved.
    dirty: bool,
}

/// What [`Recorder::snapshot`] took under the store's lock, saved outside it.
#[derive(Debug)]
pub struct Snapshot {
    path: PathBuf,
    server: String,
    kubeconfig: PathBuf,
    writes: u64,
    resource_version: String,
    slices: Vec<Arc<Value>>,
}

impl Snapshot {
    /// Writes `apiserver.json` (atomically).
    pub fn save(&self) -> std::io::Result<()> {
        let view = RecordView {
            written_by: WRITTEN_BY,
            server: &self.server,
            kubeconfig: &self.kubeconfig,
            resource_version: self.resource_version.clone(),
            writes: self.writes,
            slices: self.slices.iter().map(|s| &**s).collect(),
        };
        let mut text = serde_json::to_vec_pretty(&view).map_err(std::io::Error::other)?;
        text.push(b'\n');
        replace(&self.path, &text, 0o644)
    }
}

/// Refuses to replace `path` unless it is missing or begins with the exact
/// mark dpctl apiserver writes there (`mark`).
fn ours(path: &Path, what: &str, mark: &str) -> Result<()> {
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
    if head.starts_with(mark) {
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

/// Writes `bytes` to `path` (mode `mode`) through a new temporary file and
/// a rename, so a reader never sees half a file.
fn replace(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes));
    written.and_then(|()| std::fs::rename(&tmp, path)).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The kubeconfig a client (a driver, kubectl) uses to reach `server`
/// with `token` (client-go sends it as `Authorization: Bearer`).
pub fn kubeconfig(server: &str, token: &str) -> String {
    format!(
        "{KUBECONFIG_MARK} Its API at {server}: plain HTTP on loopback, this file's token.\n\
         apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: dpctl\n  cluster:\n    server: {server}\n\
         contexts:\n\
         - name: dpctl\n  context:\n    cluster: dpctl\n    user: dpctl\n\
         current-context: dpctl\n\
         users:\n\
         - name: dpctl\n  user:\n    token: \"{token}\"\n"
    )
}

/// Checks that the files to be written are dpctl's or missing, before the
/// server binds.
pub fn check_paths(dir: &Path, kubeconfig_out: &Path) -> Result<()> {
    crate::input::create_dir(dir, 0o755)?;
    ours(&dir.join(RECORD_FILE), "--dir", JSON_MARK)?;
    ours(&dir.join(WRITES_FILE), "--dir", LOG_MARK)?;
    ours(kubeconfig_out, "--kubeconfig-out", KUBECONFIG_MARK)
}

impl Recorder {
    /// Starts a record in `dir` for the server at `server` and writes its
    /// kubeconfig (mode 0600, with `token`): an empty write log, the initial slices.
    pub fn start(
        dir: &Path,
        server: &str,
        kubeconfig_out: &Path,
        token: &str,
        slices: Vec<Arc<Value>>,
        rv: u64,
    ) -> Result<Self> {
        check_paths(dir, kubeconfig_out)?;
        let io = |what: &Path| {
            let what = what.display().to_string();
            move |e| Error::io(format!("writing {what}"), e)
        };
        let log_path = dir.join(WRITES_FILE);
        let mut log = std::fs::File::create(&log_path).map_err(io(&log_path))?;
        // The marker first: `LOG_MARK` is how a later run knows the file.
        writeln!(log, "{{\"written_by\":{},\"server\":{}}}", json!(WRITTEN_BY), json!(server))
            .map_err(io(&log_path))?;
        let mut recorder = Recorder {
            dir: dir.to_path_buf(),
            log,
            server: server.into(),
            kubeconfig: kubeconfig_out.to_path_buf(),
            writes: 0,
            resource_version: rv.to_string(),
            dirty: true,
        };
        if let Some(s) = recorder.snapshot(slices) {
            s.save().map_err(io(&dir.join(RECORD_FILE)))?;
        }
        replace(kubeconfig_out, kubeconfig(server, token).as_bytes(), 0o600).map_err(io(kubeconfig_out))?;
        Ok(recorder)
    }

    /// Logs one write (its line in the write log, at once); `apiserver.json`
    /// follows at the next [`Recorder::snapshot`].
    pub fn record(&mut self, write: &Write) -> std::io::Result<()> {
        let line = serde_json::to_string(write).map_err(std::io::Error::other)?;
        writeln!(self.log, "{line}")?;
        self.writes += 1;
        self.resource_version.clone_from(&write.resource_version);
        self.dirty = true;
        Ok(())
    }

    /// When writes were logged since the last one: what `apiserver.json`
    /// must now hold (`slices`: every ResourceSlice as stored), to be saved
    /// outside the store's lock.
    pub fn snapshot(&mut self, slices: Vec<Arc<Value>>) -> Option<Snapshot> {
        if !std::mem::take(&mut self.dirty) {
            return None;
        }
        Some(Snapshot {
            path: self.dir.join(RECORD_FILE),
            server: self.server.clone(),
            kubeconfig: self.kubeconfig.clone(),
            writes: self.writes,
            resource_version: self.resource_version.clone(),
            slices,
        })
    }

    /// The record as it stands, with `slices`.
    pub fn current(&self, slices: Vec<Value>) -> Record {
        Record {
            written_by: WRITTEN_BY.into(),
            server: self.server.clone(),
            kubeconfig: self.kubeconfig.clone(),
            resource_version: self.resource_version.clone(),
            writes: self.writes,
            slices,
            unshown: 0,
        }
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
    if !lines.next().is_some_and(|h| h.starts_with(LOG_MARK)) {
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
        let e = Recorder::start(dir.path(), "http://127.0.0.1:1", &kc, "t", vec![], 0).unwrap_err();
        assert!(e.to_string().contains("not written by dpctl apiserver"), "{e}");
        assert_eq!(std::fs::read_to_string(&kc).unwrap(), "apiVersion: v1\nkind: Config\n");
        std::fs::remove_file(&kc).unwrap();
        let r = Recorder::start(dir.path(), "http://127.0.0.1:1", &kc, "t0k", vec![], 3).unwrap();
        assert_eq!(r.current(vec![]).resource_version, "3");
        assert!(std::fs::read_to_string(&kc).unwrap().contains("server: http://127.0.0.1:1"));
        assert!(std::fs::read_to_string(&kc).unwrap().contains("token: \"t0k\""));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&kc).unwrap().permissions().mode() & 0o777, 0o600, "it holds the token");
        assert_eq!(read(dir.path()).unwrap().writes, 0);
        assert!(read_writes(dir.path()).unwrap().is_empty());
        // A second run in the same directory replaces dpctl's own files.
        Recorder::start(dir.path(), "http://127.0.0.1:2", &kc, "t", vec![], 0).unwrap();
    }

    #[test]
    fn a_file_that_merely_mentions_dpctl_apiserver_is_not_dpctls() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("kubeconfig");
        let text = "notes: the kubeconfig dpctl apiserver wrote goes here\n";
        std::fs::write(&notes, text).unwrap();
        let e = Recorder::start(dir.path(), "http://127.0.0.1:1", &notes, "t", vec![], 0).unwrap_err();
        assert!(e.to_string().contains("not written by dpctl apiserver"), "{e}");
        assert_eq!(std::fs::read_to_string(&notes).unwrap(), text);
        let record = dir.path().join(RECORD_FILE);
        std::fs::write(&record, "{\"note\": \"dpctl apiserver\"}").unwrap();
        std::fs::remove_file(&notes).unwrap();
        assert!(Recorder::start(dir.path(), "http://127.0.0.1:1", &notes, "t", vec![], 0).is_err());
    }
}
