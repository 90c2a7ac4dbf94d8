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
    // tempfile creates the file with O_EXCL and mode 0600, like os.CreateTemp.
    let mut tmp = tempfile::Builder::new()
        .prefix(".")
        .tempfile_in(dir)
        .map_err(|e| Error::io(format!("creating a temporary file in {}", dir.display()), e))?;
    let what = || format!("writing {}", tmp_name(path));
    tmp.write_all(bytes).map_err(|e| Error::io(what(), e))?;
    tmp.as_file().sync_all().map_err(|e| Error::io(what(), e))?;
    tmp.persist(path).map_err(|e| Error::io(format!("renaming over {}", path.display()), e.error))?;
    // Make the rename itself durable (the kubelet does not; it costs little).
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
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
