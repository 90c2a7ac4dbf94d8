//! Default locations on a node, and the environment variables that override
//! them. No other module spells a kubelet path.

use std::path::{Path, PathBuf};

pub use dpctl_kubelet::layout::{
    CHECKPOINT_FILE_NAME, DEFAULT_DEVICE_PLUGIN_DIR, DEFAULT_PLUGINS_REGISTRY_DIR, DEFAULT_PODRESOURCES_SOCKET,
    KUBELET_SOCKET_NAME,
};

/// Overrides [`DEFAULT_DEVICE_PLUGIN_DIR`].
pub const ENV_DEVICE_PLUGIN_DIR: &str = "DPCTL_DEVICE_PLUGIN_DIR";
/// Overrides [`DEFAULT_PODRESOURCES_SOCKET`].
pub const ENV_PODRESOURCES_SOCKET: &str = "DPCTL_PODRESOURCES_SOCKET";
/// Name of the PodResources socket `dpctl kubelet-sim` serves in its directory.
pub const SIM_PODRESOURCES_SOCKET_NAME: &str = "pod-resources.sock";
/// Subdirectory that holds dpctl's own control sockets. A kubelet (real or
/// simulated) cleans up only the sockets directly in its directory, so these
/// survive a kubelet restart.
pub const CONTROL_DIR_NAME: &str = ".dpctl";

/// Longest unix socket path Linux accepts (`sun_path` is 108 bytes with the NUL).
pub const MAX_SOCKET_PATH_LEN: usize = 107;

/// Removes a directory dpctl created (and everything in it) when dropped,
/// unless disarmed: a panic or an early return still cleans up a smoke or
/// demo directory.
#[derive(Debug)]
pub struct RemoveDirOnDrop(Option<PathBuf>);

impl RemoveDirOnDrop {
    /// Guards `dir`; `None` guards nothing (a directory the user gave).
    pub fn new(dir: Option<PathBuf>) -> Self {
        RemoveDirOnDrop(dir)
    }

    /// Leaves the directory alone from now on (the caller removes or keeps it).
    pub fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for RemoveDirOnDrop {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// `<dir>/kubelet.sock`.
pub fn kubelet_socket(dir: &Path) -> PathBuf {
    dir.join(KUBELET_SOCKET_NAME)
}

/// The control socket of a dpctl process that serves `name` in `dir`.
///
/// Names that would make the path too long are shortened to a stable hash.
pub fn control_socket(dir: &Path, name: &str) -> PathBuf {
    let safe: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).collect();
    let ctl = dir.join(CONTROL_DIR_NAME);
    let candidate = ctl.join(format!("{safe}.sock"));
    if candidate.as_os_str().len() <= MAX_SOCKET_PATH_LEN {
        return candidate;
    }
    ctl.join(format!("{:016x}.sock", fnv1a64(name.as_bytes())))
}

/// FNV-1a, 64 bit: a short stable name for long inputs.
fn fnv1a64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Prefixes every host path: dpctl in a debug pod sees the host at `/host`.
pub const ENV_ROOT: &str = "DPCTL_ROOT";

/// Environment variable naming the node in `dpctl doctor`'s report (a
/// DaemonSet sets it from spec.nodeName).
pub const ENV_NODE_NAME: &str = "DPCTL_NODE_NAME";

/// Most symbolic links [`under_root`] follows in one path (Linux's own limit).
const MAX_LINKS: usize = 40;

/// `path` (a host path) as seen under `root`: `/host` + `/var/lib/...`,
/// resolved as if `root` were `/`: `..` never climbs above `root`, and a
/// symbolic link is followed inside it (an absolute target starts at
/// `root`), so the result names nothing outside `root`, whatever a planted
/// `--root-dir`, registration or link says. What does not exist yet is
/// joined as it is; a path with more than 40 links ends in a name no
/// file can have (a NUL), so nothing is opened through it.
pub fn under_root(root: &Path, path: &Path) -> PathBuf {
    use std::path::Component;
    if root.as_os_str().is_empty() || root == Path::new("/") {
        return path.to_path_buf();
    }
    let mut done = root.to_path_buf();
    let mut depth = 0usize;
    let mut todo: std::collections::VecDeque<std::ffi::OsString> = std::collections::VecDeque::new();
    let push_front = |todo: &mut std::collections::VecDeque<std::ffi::OsString>, p: &Path| {
        for c in p.components().rev() {
            match c {
                Component::Normal(n) => todo.push_front(n.to_os_string()),
                Component::ParentDir => todo.push_front("..".into()),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    };
    push_front(&mut todo, path);
    let mut links = 0;
    while let Some(c) = todo.pop_front() {
        if c == ".." {
            if depth > 0 {
                done.pop();
                depth -= 1;
            }
            continue;
        }
        let next = done.join(&c);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() => {
                let Ok(target) = std::fs::read_link(&next) else { return next.join("\0") };
                links += 1;
                if links > MAX_LINKS {
                    return next.join("\0");
                }
                if target.is_absolute() {
                    done = root.to_path_buf();
                    depth = 0;
                }
                push_front(&mut todo, &target);
            }
            _ => {
                done = next;
                depth += 1;
            }
        }
    }
    done
}

/// The device-plugin directory: the environment override or the default.
pub fn device_plugin_dir_default() -> PathBuf {
    std::env::var_os(ENV_DEVICE_PLUGIN_DIR).map_or_else(|| PathBuf::from(DEFAULT_DEVICE_PLUGIN_DIR), PathBuf::from)
}

/// Translates `p` through `(seen, real)` pairs: a path at or below `seen`
/// becomes the same path below `real` (the longest `seen` wins); other paths
/// are returned as they are. Used for paths a plugin in a private mount
/// namespace reports (e.g. a GetInfo endpoint under a bind mount).
pub fn translate(map: &[(PathBuf, PathBuf)], p: &Path) -> PathBuf {
    map.iter()
        .filter_map(|(seen, real)| p.strip_prefix(seen).ok().map(|rest| (seen.components().count(), real.join(rest))))
        .max_by_key(|(depth, _)| *depth)
        .map_or_else(|| p.to_path_buf(), |(_, real)| real)
}

/// The unix sockets directly in `dir`, sorted by name (empty when the
/// directory cannot be read): for hints and for "nothing left behind" checks.
pub fn sockets_in(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::FileTypeExt;
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(std::result::Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Makes a fresh `/tmp/<prefix>-XXXXXX` directory, mode 0750 (short, so
/// socket paths inside stay short), for smoke runs and demos.
pub fn fresh_dir(prefix: &str) -> crate::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let mut last = None;
    for _ in 0..16 {
        let n: u32 = rand::random();
        let dir = Path::new("/tmp").join(format!("{prefix}-{:06x}", n & 0xff_ffff));
        match std::fs::DirBuilder::new().mode(0o750).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(crate::Error::io("creating a directory under /tmp", e)),
        }
    }
    Err(crate::Error::io(
        "creating a directory under /tmp",
        last.unwrap_or_else(|| std::io::Error::other("no free name after 16 tries")),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_path_under_root_never_leaves_it() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("host");
        std::fs::create_dir_all(root.join("var/lib/kubelet")).unwrap();
        std::fs::create_dir_all(root.join("data")).unwrap();
        symlink("/data", root.join("var/lib/abs")).unwrap();
        symlink("../../../../../../..", root.join("var/lib/kubelet/up")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        let under = |p: &str| super::under_root(&root, std::path::Path::new(p));
        assert_eq!(under("/var/lib/kubelet"), root.join("var/lib/kubelet"));
        assert_eq!(under("/var/lib/abs/x.sock"), root.join("data/x.sock"), "an absolute link starts at the root");
        assert_eq!(under("/var/lib/kubelet/up/etc/passwd"), root.join("etc/passwd"), "a relative link stops there");
        assert_eq!(under("/../../../etc/shadow"), root.join("etc/shadow"), ".. stops at the root");
        assert_eq!(under("../x"), root.join("x"));
        assert!(under("/loop/x").to_string_lossy().contains('\0'), "a link loop opens nothing");
        assert_eq!(
            super::under_root(std::path::Path::new("/"), std::path::Path::new("/a/../b")),
            std::path::Path::new("/a/../b")
        );
    }

    use super::*;

    #[test]
    fn translate_uses_the_longest_prefix() {
        let map = vec![
            (PathBuf::from("/var/lib/kubelet"), PathBuf::from("/tmp/a")),
            (PathBuf::from("/var/lib/kubelet/plugins_registry"), PathBuf::from("/tmp/r")),
        ];
        assert_eq!(translate(&map, Path::new("/var/lib/kubelet/plugins_registry/x.sock")), Path::new("/tmp/r/x.sock"));
        assert_eq!(translate(&map, Path::new("/var/lib/kubelet/x.sock")), Path::new("/tmp/a/x.sock"));
        assert_eq!(translate(&map, Path::new("/var/lib/kubeletx")), Path::new("/var/lib/kubeletx"));
    }

    #[test]
    fn control_socket_is_short_and_stable() {
        let dir = Path::new("/tmp/x");
        assert_eq!(control_socket(dir, "example.com/gpu"), Path::new("/tmp/x/.dpctl/example.com_gpu.sock"));
        let long = "a".repeat(200);
        let p = control_socket(dir, &long);
        assert!(p.as_os_str().len() <= MAX_SOCKET_PATH_LEN);
        assert_eq!(p, control_socket(dir, &long));
    }
}
