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
    let dir = parent_dir(path);
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

/// The directory `path` is written in (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Where `path` points, when it is a symbolic link.
pub(crate) fn link_target(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.file_type()
        .is_symlink()
        .then(|| std::fs::read_link(path).map(|t| t.display().to_string()).unwrap_or_else(|_| "?".into()))
}

// Not killed by a test (cargo-mutants: `String::new()`, "xyzzy"): the text
// shows only when writing or syncing an already created temporary file fails
// (a full or failing disk), which no test can arrange portably.
fn tmp_name(path: &Path) -> String {
    format!("a temporary file next to {}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_file_name_is_written_in_the_current_directory() {
        assert_eq!(parent_dir(Path::new("kubelet_internal_checkpoint")), Path::new("."));
        assert_eq!(parent_dir(Path::new("/var/lib/kubelet/x")), Path::new("/var/lib/kubelet"));
        assert_eq!(parent_dir(Path::new("/")), Path::new("."));
    }

    // util/store/filestore.go: a missing parent directory is created;
    // a symbolic link at the target is refused here, naming where it points.
    #[test]
    fn missing_directories_are_created_and_links_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/checkpoint");
        write_atomic(&path, b"x").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"x");
        assert!(dir.path().join("a/b").is_dir());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("a/b/checkpoint", &link).unwrap();
        let e = write_atomic(&link, b"y").unwrap_err().to_string();
        assert!(e.contains("a symbolic link to a/b/checkpoint"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"x");
    }
}
