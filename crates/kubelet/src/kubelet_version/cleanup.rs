//! The kubelet's clean-up of the device-plugins directory at start
//! (`CleanupPluginDirectory`, docs/kubelet-versions.md §4): which entries each
//! release deletes, and the deletion itself with the sim's safety rules
//! (only sockets in a directory dpctl did not create). Ground for both the
//! simulator, which performs it, and `doctor`, which predicts it.

use std::fmt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::KubeletVersion;

/// What `CleanupPluginDirectory` removes from the device-plugins directory
/// at kubelet start (docs/kubelet-versions.md §4). The checkpoint file and
/// directories (with everything in them) are always kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CleanupRule {
    /// `os.Lstat`: every entry that is not a directory (sockets, regular
    /// files, symlinks themselves, FIFOs).
    AllNonDirectories,
    /// `os.Stat` + `ModeSocket`: only entries whose target is a socket (a
    /// symlink to a socket loses the link; a dangling link is kept).
    SocketsOnly,
}

impl fmt::Display for CleanupRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CleanupRule::AllNonDirectories => "every non-directory",
            CleanupRule::SocketsOnly => "sockets only",
        })
    }
}

impl Default for CleanupRule {
    /// The rule of the default release.
    fn default() -> Self {
        KubeletVersion::DEFAULT.cleanup_rule()
    }
}

/// What the start-up cleanup of the device-plugins directory did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cleanup {
    /// Sockets deleted (as every kubelet version does).
    pub deleted_sockets: Vec<String>,
    /// Other entries deleted (regular files, symlinks, FIFOs): only in a
    /// directory the sim created, or with `emulate_cleanup`.
    pub deleted_files: Vec<String>,
    /// Entries the played kubelet would also have deleted, kept because the
    /// sim did not create the directory (pass `--emulate-cleanup`).
    pub would_delete: Vec<String>,
}

/// The kubelet's `CleanupPluginDirectory` under `rule`
/// (docs/kubelet-versions.md §4): the checkpoint and directories are always kept,
/// and so are `keep` (the sim's own sockets). A socket is deleted; anything
/// else the rule removes is deleted only when `may_delete_files`, and
/// otherwise listed in [`Cleanup::would_delete`].
pub fn cleanup_dir(dir: &Path, keep: &[PathBuf], rule: CleanupRule, may_delete_files: bool) -> Cleanup {
    let mut out = Cleanup::default();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for entry in rd.filter_map(std::result::Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_name() == crate::layout::CHECKPOINT_FILE_NAME || keep.contains(&path) {
            continue;
        }
        let Ok(lmeta) = std::fs::symlink_metadata(&path) else { continue };
        let own_socket = lmeta.file_type().is_socket();
        let removes = match rule {
            // os.Lstat: every non-directory, the link itself for a symlink.
            CleanupRule::AllNonDirectories => !lmeta.is_dir(),
            // os.Stat: only entries whose target is a socket (a dangling link is kept).
            CleanupRule::SocketsOnly => std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_socket()),
        };
        if !removes {
            continue;
        }
        if !own_socket && !may_delete_files {
            out.would_delete.push(name);
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) if own_socket => out.deleted_sockets.push(name),
            Ok(()) => out.deleted_files.push(name),
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "could not delete"),
        }
    }
    out.deleted_sockets.sort();
    out.deleted_files.sort();
    out.would_delete.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory like a node's: a plugin socket, a file, a sub-directory
    /// with a socket, symlinks to a socket, to a file and dangling, the
    /// checkpoint and one of our own sockets.
    fn node_dir() -> (tempfile::TempDir, Vec<std::os::unix::net::UnixListener>) {
        let dir = tempfile::Builder::new().prefix("dp").tempdir_in("/tmp").unwrap();
        let d = dir.path();
        std::fs::write(d.join("notes.txt"), "x").unwrap();
        std::fs::write(d.join(crate::layout::CHECKPOINT_FILE_NAME), "{}").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        let mut l = vec![std::os::unix::net::UnixListener::bind(d.join("sub/in.sock")).unwrap()];
        l.push(std::os::unix::net::UnixListener::bind(d.join("a.sock")).unwrap());
        l.push(std::os::unix::net::UnixListener::bind(d.join("keep.sock")).unwrap());
        std::os::unix::fs::symlink(d.join("notes.txt"), d.join("link-file")).unwrap();
        std::os::unix::fs::symlink(d.join("sub/in.sock"), d.join("link-sock")).unwrap();
        std::os::unix::fs::symlink(d.join("gone"), d.join("link-dangling")).unwrap();
        (dir, l)
    }

    fn exists(p: &Path) -> bool {
        std::fs::symlink_metadata(p).is_ok()
    }

    /// docs/kubelet-versions.md §4, 1.26-1.32 (Lstat): every non-directory but
    /// the checkpoint, in a directory the sim owns.
    #[test]
    fn cleanup_1_26_to_1_32_removes_every_non_directory_where_allowed() {
        let (dir, _l) = node_dir();
        let d = dir.path();
        let c = cleanup_dir(d, &[d.join("keep.sock")], CleanupRule::AllNonDirectories, true);
        assert_eq!(c.deleted_sockets, ["a.sock"]);
        assert_eq!(c.deleted_files, ["link-dangling", "link-file", "link-sock", "notes.txt"]);
        assert!(c.would_delete.is_empty());
        assert!(exists(&d.join(crate::layout::CHECKPOINT_FILE_NAME)), "the checkpoint is never deleted");
        assert!(exists(&d.join("sub/in.sock")) && exists(&d.join("keep.sock")));
    }

    /// The same rule in a directory the sim did not create: only sockets go,
    /// the rest is reported.
    #[test]
    fn cleanup_in_a_foreign_directory_deletes_only_sockets_and_reports_the_rest() {
        let (dir, _l) = node_dir();
        let d = dir.path();
        let c = cleanup_dir(d, &[d.join("keep.sock")], CleanupRule::AllNonDirectories, false);
        assert_eq!(c.deleted_sockets, ["a.sock"]);
        assert!(c.deleted_files.is_empty());
        assert_eq!(c.would_delete, ["link-dangling", "link-file", "link-sock", "notes.txt"]);
        for n in ["notes.txt", "link-file", "link-sock", "link-dangling", crate::layout::CHECKPOINT_FILE_NAME] {
            assert!(exists(&d.join(n)), "{n} kept");
        }
    }

    /// docs/kubelet-versions.md §4, 1.33+ (Stat + ModeSocket): sockets only,
    /// following symlinks (a link to a socket goes, a dangling link stays).
    #[test]
    fn cleanup_1_33_and_later_removes_sockets_only_following_symlinks() {
        let (dir, _l) = node_dir();
        let d = dir.path();
        let c = cleanup_dir(d, &[d.join("keep.sock")], CleanupRule::SocketsOnly, true);
        assert_eq!(c.deleted_sockets, ["a.sock"]);
        assert_eq!(c.deleted_files, ["link-sock"]);
        assert!(exists(&d.join("notes.txt")) && exists(&d.join("link-file")) && exists(&d.join("link-dangling")));
        assert!(exists(&d.join("sub/in.sock")), "the target of the link stays");
        let (dir, _l) = node_dir();
        let d = dir.path();
        let c = cleanup_dir(d, &[], CleanupRule::SocketsOnly, false);
        assert_eq!(c.deleted_sockets, ["a.sock", "keep.sock"]);
        assert_eq!(c.would_delete, ["link-sock"]);
    }
}
