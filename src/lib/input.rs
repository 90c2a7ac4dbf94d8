//! Reading the files a user names (configs, manifests, fixtures) safely:
//! only regular files (a FIFO or device would block or never end), bounded
//! in size, UTF-8, and manifests bounded in nesting depth before any parser
//! sees them. Every failure is bad input ([`Error::Invalid`], exit 2), except
//! a directory the OS will not let dpctl create (see [`create_dir`]).

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Result};

/// Largest config, manifest or fixture file dpctl reads (64 MiB: a 10,000-pod
/// fixture is a few MiB).
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Deepest nesting accepted in a YAML or JSON manifest (a Pod is about 10 deep).
pub const MAX_MANIFEST_DEPTH: usize = 64;

/// What kind of file `meta` describes, in words.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symbolic link"
    } else if t.is_fifo() {
        "FIFO (named pipe)"
    } else if t.is_socket() {
        "socket"
    } else if t.is_file() {
        "regular file"
    } else if t.is_char_device() || t.is_block_device() {
        "device"
    } else {
        "special file"
    }
}

/// Directories a command made that it takes back when it fails before
/// using them: each removed only while empty (`remove_dir`, never
/// recursive, never through a link), deepest first, so a refused run leaves
/// no empty directory behind and never removes what someone put there.
#[derive(Debug, Default)]
#[must_use = "call undo() on failure, or keep() once the directories are in use"]
pub struct MadeDirs(Vec<std::path::PathBuf>);

impl MadeDirs {
    /// Removes the directories made, deepest first, each only while empty.
    pub fn undo(self) {
        for d in self.0.iter().rev() {
            if std::fs::remove_dir(d).is_err() {
                return;
            }
        }
    }

    /// The directories stay (the command is using them).
    pub fn keep(self) {}
}

/// [`create_dir`], returning the directories it made (the missing
/// ancestors and `dir`) so a failure can take them back.
pub fn create_dir_undoable(dir: &Path, mode: u32) -> Result<MadeDirs> {
    let mut missing: Vec<std::path::PathBuf> =
        dir.ancestors().take_while(|a| std::fs::symlink_metadata(a).is_err()).map(Path::to_path_buf).collect();
    missing.reverse();
    create_dir(dir, mode)?;
    Ok(MadeDirs(missing))
}

/// Creates directory `dir` (and its parents) with `mode` when missing. When
/// something that is not a directory is in the way (a file, a dangling
/// symbolic link, a link loop) it is bad input (exit 2) and the error names
/// it, instead of the OS's bare "File exists". When the OS refuses (permission
/// denied, read-only file system, disk full) it is
/// [`Error::PermissionDenied`] or [`Error::Io`] (exit 3), as the README's
/// exit-code table says.
pub fn create_dir(dir: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new().recursive(true).mode(mode).create(dir).map_err(|e| {
        let place = format!("directory {}", dir.display());
        // The nearest existing ancestor tells what is in the way (a symbolic
        // link counts as itself unless it leads to a directory).
        let blocker = dir.ancestors().find_map(|a| std::fs::symlink_metadata(a).ok().map(|m| (a, m)));
        match blocker {
            Some((at, meta)) if meta.file_type().is_symlink() && !at.is_dir() => {
                let target = std::fs::read_link(at).map(|t| t.display().to_string()).unwrap_or_default();
                Error::invalid(
                    place,
                    format!(
                        "{} is a symbolic link to {target:?}, which is not a directory (or does not exist); \
                         create the directory it points to, or choose another directory",
                        at.display()
                    ),
                )
            }
            Some((at, meta)) if !meta.is_dir() && !meta.file_type().is_symlink() => Error::invalid(
                place,
                format!("{} exists and is a {}, not a directory; choose another directory", at.display(), kind(&meta)),
            ),
            _ => not_made(dir, place, e),
        }
    })
}

/// Classifies an error from creating `dir` when nothing that is not a
/// directory was found in the way.
fn not_made(dir: &Path, place: String, e: std::io::Error) -> Error {
    match e.raw_os_error() {
        // Something is in the way after all (a path component that is not a
        // directory, a link loop, a non-directory made meanwhile).
        Some(libc::ENOTDIR | libc::ELOOP | libc::EEXIST) => Error::invalid(place, format!("cannot create it: {e}")),
        Some(libc::EACCES | libc::EPERM) => Error::PermissionDenied { path: dir.to_path_buf(), op: "create directory" },
        _ => Error::io(format!("creating {place}"), e),
    }
}

/// Reads the text file at `path` that the user gave as `place` (e.g.
/// `--config FILE`), within [`MAX_FILE_BYTES`].
pub fn read_text(path: &Path, place: &str) -> Result<String> {
    read_text_within(path, place, MAX_FILE_BYTES)
}

/// [`read_text`] with an explicit size limit.
pub fn read_text_within(path: &Path, place: &str, max: u64) -> Result<String> {
    let bad = |msg: String| Error::invalid(place, msg);
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => bad(format!("cannot read the file: {} does not exist", path.display())),
        _ => bad(format!("cannot read the file: {e}")),
    })?;
    if !meta.is_file() {
        return Err(bad(format!("cannot read the file: it is a {}, not a regular file", kind(&meta))));
    }
    // O_NONBLOCK: should the path have been swapped for a FIFO since, opening
    // it must not block; it is then refused below.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| bad(format!("cannot read the file: {e}")))?;
    let meta = file.metadata().map_err(|e| bad(format!("cannot read the file: {e}")))?;
    if !meta.is_file() {
        return Err(bad(format!("cannot read the file: it is a {}, not a regular file", kind(&meta))));
    }
    if meta.len() > max {
        return Err(bad(format!("the file is {} bytes; at most {max} are read", meta.len())));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| bad(format!("cannot read the file: {e}")))?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max {
        return Err(bad(format!("the file grew past {max} bytes while being read")));
    }
    String::from_utf8(bytes).map_err(|e| {
        bad(format!("the file is not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()))
    })
}

/// Refuses a YAML or JSON document nested deeper than `max` before it is
/// parsed (a deeply nested document made the YAML parser take tens of
/// seconds). Counts flow nesting (`[`, `{` outside quotes) and block nesting
/// (indentation and `- ` sequence markers at the start of a line); both
/// over-estimate, never under-estimate, the real depth.
pub fn check_depth(text: &str, place: &str, max: usize) -> Result<()> {
    let mut flow = 0usize;
    for line in text.lines() {
        let trimmed = line.trim_start_matches(' ');
        let mut block = line.len() - trimmed.len();
        let mut rest = trimmed;
        while let Some(r) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("-\t")) {
            block += 2;
            rest = r.trim_start();
        }
        if block / 2 > max {
            return Err(Error::invalid(place, format!("nested more than {max} levels deep (line indentation)")));
        }
        // Quotes are tracked per line: JSON strings never span lines.
        let mut quote: Option<char> = None;
        let mut escaped = false;
        for c in line.chars() {
            match quote {
                Some(q) => {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' && q == '"' {
                        escaped = true;
                    } else if c == q {
                        quote = None;
                    }
                }
                None => match c {
                    '"' | '\'' => quote = Some(c),
                    '#' => break,
                    '[' | '{' => {
                        flow += 1;
                        if flow > max {
                            return Err(Error::invalid(place, format!("nested more than {max} levels deep")));
                        }
                    }
                    ']' | '}' => flow = flow.saturating_sub(1),
                    _ => {}
                },
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // README exit codes: a directory the OS will not let dpctl create is a
    // socket/permission problem (3); only something in the way is bad input (2).
    #[test]
    fn a_dir_the_os_refuses_exits_3_and_one_in_the_way_exits_2() {
        let dir = Path::new("/x/dp");
        let code =
            |errno| not_made(dir, "directory /x/dp".into(), std::io::Error::from_raw_os_error(errno)).exit_code();
        for errno in [libc::EACCES, libc::EPERM] {
            let e = not_made(dir, "directory /x/dp".into(), std::io::Error::from_raw_os_error(errno));
            assert!(matches!(e, Error::PermissionDenied { .. }), "{errno}: {e:?}");
            assert!(e.to_string().contains("permission denied: cannot create directory /x/dp"), "{e}");
            assert!(e.hint().is_some());
        }
        for errno in [libc::EROFS, libc::ENOSPC, libc::EIO] {
            assert_eq!(code(errno), crate::error::exit::SOCKET, "{errno}");
        }
        for errno in [libc::ENOTDIR, libc::ELOOP, libc::EEXIST] {
            assert_eq!(code(errno), crate::error::exit::USAGE, "{errno}");
        }
    }

    // Reading a FIFO (or a device) given as a manifest or config would block
    // forever on a writer that never comes: such inputs must be refused up front.
    #[test]
    fn refuses_fifos_directories_and_oversized_or_binary_files() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_text(&fifo, "--config").unwrap_err();
        assert_eq!(e.exit_code(), crate::error::exit::USAGE);
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = read_text(dir.path(), "--config").unwrap_err();
        assert!(e.to_string().contains("is a directory, not a regular file"), "{e}");
        std::fs::write(dir.path().join("big"), vec![b'a'; 100]).unwrap();
        let e = read_text_within(&dir.path().join("big"), "--config", 10).unwrap_err();
        assert!(e.to_string().contains("100 bytes; at most 10"), "{e}");
        std::fs::write(dir.path().join("bin"), [b'a', 0xff, 0xfe]).unwrap();
        let e = read_text(&dir.path().join("bin"), "--config").unwrap_err();
        assert!(e.to_string().contains("not UTF-8 text (invalid byte at offset 1)"), "{e}");
        assert_eq!(read_text(&dir.path().join("big"), "x").unwrap().len(), 100);
        let e = read_text(&dir.path().join("missing"), "--config").unwrap_err();
        assert!(e.to_string().starts_with("--config: cannot read the file:"), "{e}");
    }

    // A small manifest nested very deep (200 KB, 100k levels) made the YAML
    // parser take tens of seconds before failing: depth is checked first.
    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let flow = "[".repeat(100_000);
        assert!(check_depth(&flow, "m.yaml", MAX_MANIFEST_DEPTH).is_err());
        let dashes = "- ".repeat(100_000) + "x";
        assert!(check_depth(&dashes, "m.yaml", MAX_MANIFEST_DEPTH).is_err());
        let indented: String = (0..200).map(|i| format!("{}a{i}:\n", " ".repeat(i * 2))).collect();
        assert!(check_depth(&indented, "m.yaml", MAX_MANIFEST_DEPTH).is_err());
        let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    \
                   resources: {limits: {example.com/gpu: 1}}\n    args: [\"[[[[[[\", '{{{{']\n";
        check_depth(pod, "m.yaml", MAX_MANIFEST_DEPTH).unwrap();
    }
}
