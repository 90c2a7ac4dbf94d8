//! The kubelet's atomic file write (`util/store/filestore.go`): the parent
//! directory created when missing (0755), a temporary file whose name starts
//! with `.` in the same directory (mode 0600), write, fsync, close, rename
//! over the target. A crash leaves either the old file or the new one.
//! Unlike the kubelet, a symbolic link at the target is never replaced
//! (README, safety): the write is refused.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Writes `bytes` to `path` atomically, as the kubelet writes its checkpoint.
/// Refuses ([`Error::Invalid`]) when `path` is a symbolic link, live or
/// dangling: the rename would replace the link itself.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_with(path, bytes, &Temp { tag: None, durable: true })
}

/// How [`write_with`] names its temporary file and whether it syncs.
#[derive(Debug, Clone, Copy)]
pub struct Temp<'a> {
    /// Name the temporary file `.<file name>.dpctl-<tag>-<random>.tmp`
    /// instead of `.<random>`, so that a later start can tell dpctl's own
    /// leftovers (from a write a kill interrupted) from anyone else's files
    /// ([`is_own_temp`]).
    pub tag: Option<&'a str>,
    /// fsync the file before the rename and the directory after it. Without
    /// it the rename is still atomic for a killed process (the page cache
    /// survives), not for a power cut.
    pub durable: bool,
}

/// [`write_atomic`] with the temporary file named and synced as `temp` says.
pub fn write_with(path: &Path, bytes: &[u8], temp: &Temp<'_>) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(target) = link_target(path) {
        return Err(Error::invalid(
            path.display().to_string(),
            format!("a symbolic link to {target}: dpctl never replaces a symbolic link; not written"),
        ));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    let prefix = match (temp.tag, path.file_name()) {
        (Some(tag), Some(name)) => temp_prefix(&name.to_string_lossy(), tag),
        _ => ".".to_string(),
    };
    let suffix = if temp.tag.is_some() { TEMP_SUFFIX } else { "" };
    // tempfile creates the file with O_EXCL and mode 0600, like os.CreateTemp.
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(suffix)
        .tempfile_in(dir)
        .map_err(|e| Error::io(format!("creating a temporary file in {}", dir.display()), e))?;
    let what = || format!("writing {}", tmp_name(path));
    tmp.write_all(bytes).map_err(|e| Error::io(what(), e))?;
    if temp.durable {
        tmp.as_file().sync_all().map_err(|e| Error::io(what(), e))?;
    }
    tmp.persist(path).map_err(|e| Error::io(format!("renaming over {}", path.display()), e.error))?;
    // Make the rename itself durable (the kubelet does not): an admission is
    // answered only after this, so a power cut cannot take it back.
    if temp.durable {
        let d = std::fs::File::open(dir).map_err(|e| Error::io(format!("opening {}", dir.display()), e))?;
        match d.sync_all() {
            // Some file systems cannot sync a directory (EINVAL); their renames are what they are.
            Err(e) if e.raw_os_error() != Some(libc::EINVAL) => {
                return Err(Error::io(format!("syncing {}", dir.display()), e));
            }
            _ => {}
        }
    }
    Ok(())
}

const TEMP_SUFFIX: &str = ".tmp";

/// The start of a tagged temporary file's name for target `name`.
fn temp_prefix(name: &str, tag: &str) -> String {
    format!(".{name}.dpctl-{tag}-")
}

/// True when `entry_name` is a temporary file [`write_with`] made for the
/// target `name` with `tag` (any tag when `tag` is `None`), by name only.
pub fn is_own_temp(entry_name: &str, name: &str, tag: Option<&str>) -> bool {
    let Some(rest) = entry_name.strip_suffix(TEMP_SUFFIX) else { return false };
    match tag {
        Some(tag) => rest.strip_prefix(&temp_prefix(name, tag)).is_some_and(|r| !r.is_empty()),
        None => rest
            .strip_prefix(&format!(".{name}.dpctl-"))
            .is_some_and(|r| r.split_once('-').is_some_and(|(t, r)| !t.is_empty() && !r.is_empty())),
    }
}

/// Where `path` points, when it is a symbolic link.
pub(crate) fn link_target(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.file_type()
        .is_symlink()
        .then(|| std::fs::read_link(path).map(|t| t.display().to_string()).unwrap_or_else(|_| "?".into()))
}

fn tmp_name(path: &Path) -> String {
    format!("a temporary file next to {}", path.display())
}
