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
    let dir = parent_dir(path);
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    let (prefix, suffix) = temp_affixes(path, temp);
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
        dir_synced(d.sync_all()).map_err(|e| Error::io(format!("syncing {}", dir.display()), e))?;
    }
    Ok(())
}

/// The directory a write to `path` renames in: its parent, `.` for a bare
/// file name (whose parent is the empty path).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The temporary file's name prefix and suffix: `.<file name>.dpctl-<tag>-`
/// and `.tmp` when tagged, the kubelet's `.` and nothing otherwise.
fn temp_affixes(path: &Path, temp: &Temp<'_>) -> (String, &'static str) {
    match (temp.tag, path.file_name()) {
        (Some(tag), Some(name)) => (temp_prefix(&name.to_string_lossy(), tag), TEMP_SUFFIX),
        _ => (".".to_string(), ""),
    }
}

/// A directory fsync's result as the write sees it: some file systems
/// cannot sync a directory (EINVAL); their renames are what they are.
fn dir_synced(r: std::io::Result<()>) -> std::io::Result<()> {
    match r {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        other => other,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const CP: &str = "kubelet_internal_checkpoint";

    /// Every release (`util/store/filestore.go`): the write renames in the
    /// target's own directory, `.` for a bare file name.
    #[test]
    fn renames_in_the_targets_directory() {
        assert_eq!(parent_dir(Path::new(CP)), Path::new("."));
        assert_eq!(
            parent_dir(Path::new("/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint")),
            Path::new("/var/lib/kubelet/device-plugins")
        );
        assert_eq!(parent_dir(Path::new("/")), Path::new("."));
    }

    /// Every release: a missing parent directory is created (the kubelet's
    /// `MkdirAll`, 0755 before the umask), then the file is written.
    #[test]
    fn creates_missing_parent_directories() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b").join(CP);
        write_with(&path, b"{}", &Temp { tag: Some("7"), durable: true }).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        assert!(dir.path().join("a/b").is_dir());
    }

    /// A tagged temporary file is named so that a later start finds it as
    /// dpctl's own; an untagged one is named as the kubelet names it.
    #[test]
    fn tagged_temporary_files_are_recognised_as_own() {
        let path = Path::new("/x").join(CP);
        let (prefix, suffix) = temp_affixes(&path, &Temp { tag: Some("42"), durable: false });
        assert_eq!((prefix.as_str(), suffix), (".kubelet_internal_checkpoint.dpctl-42-", ".tmp"));
        let leftover = format!("{prefix}Ab12Cd{suffix}");
        assert!(is_own_temp(&leftover, CP, Some("42")));
        assert!(is_own_temp(&leftover, CP, None));
        assert!(!is_own_temp(&leftover, CP, Some("43")), "another start's tag");
        assert!(!is_own_temp(&leftover, "other", None), "another target's");
        assert_eq!(temp_affixes(&path, &Temp { tag: None, durable: true }), (".".to_string(), ""));
    }

    /// Names that are not dpctl's leftovers: the kubelet's own `.<random>`
    /// temporary files, a missing suffix, an empty tag or random part.
    #[test]
    fn other_names_are_not_own_temporary_files() {
        for (name, tag) in [
            (".123456789", None),
            (".kubelet_internal_checkpoint.dpctl-42-Ab12", Some("42")),
            (".kubelet_internal_checkpoint.dpctl-42-.tmp", Some("42")),
            (".kubelet_internal_checkpoint.dpctl-42-.tmp", None),
            (".kubelet_internal_checkpoint.dpctl--Ab12.tmp", None),
            (".kubelet_internal_checkpoint.dpctl-42.tmp", None),
            ("kubelet_internal_checkpoint", None),
        ] {
            assert!(!is_own_temp(name, CP, tag), "{name} {tag:?}");
        }
    }

    /// dpctl never replaces a symbolic link (README, safety), live or
    /// dangling: the error names where it points and the link stays.
    #[test]
    fn a_symbolic_link_is_refused_naming_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real");
        std::fs::write(&target, b"old").unwrap();
        let link = dir.path().join(CP);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = write_atomic(&link, b"new").unwrap_err().to_string();
        assert!(e.contains(&format!("a symbolic link to {}", target.display())), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(link_target(&target), None, "a regular file is no link");
    }

    /// A directory fsync that the file system does not support (EINVAL) is
    /// no failure; any other error is.
    #[test]
    fn a_directory_sync_fails_only_on_real_errors() {
        let err = |n| Err(std::io::Error::from_raw_os_error(n));
        assert!(dir_synced(Ok(())).is_ok());
        assert!(dir_synced(err(libc::EINVAL)).is_ok());
        assert_eq!(dir_synced(err(libc::EIO)).unwrap_err().raw_os_error(), Some(libc::EIO));
    }

    #[test]
    fn a_failed_write_names_the_temporary_file() {
        assert_eq!(tmp_name(Path::new("/x/cp")), "a temporary file next to /x/cp");
    }
}
