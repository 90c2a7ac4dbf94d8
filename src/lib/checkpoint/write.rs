//! The kubelet's atomic file write (`util/store/filestore.go`): the parent
//! directory created when missing (0755), a temporary file whose name starts
//! with `.` in the same directory (mode 0600), write, fsync, close, rename
//! over the target. A crash leaves either the old file or the new one.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Writes `bytes` to `path` atomically, as the kubelet writes its checkpoint.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
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

fn tmp_name(path: &Path) -> String {
    format!("a temporary file next to {}", path.display())
}
