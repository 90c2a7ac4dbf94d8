//! What a running container shows of its Allocate answer: the environment,
//! the mounts and the device nodes the plugin promised, read inside the
//! container by a busybox shell ([`SCRIPT`]) and compared with the answer.
//! Pure: the node runs the script, this module says what is missing.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::model::ContainerAllocation;

/// The shell run inside the container, with the device paths to look at as
/// its arguments: the environment, the mount table, then each path's type
/// and device number (busybox `stat`, numbers in hex).
pub const SCRIPT: &str = "env; echo @@mounts; cat /proc/self/mountinfo; echo @@devices; \
    for p in \"$@\"; do if [ -e \"$p\" ]; then stat -c \"$p|%F|%t:%T\" \"$p\"; else echo \"$p|missing|\"; fi; done";

/// A device node as seen: its type (`character special file`, ...) and
/// `major:minor` in hex (as `stat -c %t:%T` prints them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The file type.
    pub kind: String,
    /// `major:minor`, hex.
    pub number: String,
}

/// What the container showed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerView {
    /// `env`.
    pub env: BTreeMap<String, String>,
    /// Mount points, with their per-mount options (`ro`/`rw`, ...).
    pub mounts: BTreeMap<String, String>,
    /// Each path asked about: `None` when it does not exist.
    pub devices: BTreeMap<String, Option<Node>>,
}

/// Reads the script's output.
pub fn parse(output: &str) -> ContainerView {
    let mut view = ContainerView::default();
    let mut section = "env";
    for line in output.lines() {
        match line {
            "@@mounts" => section = "mounts",
            "@@devices" => section = "devices",
            _ if section == "env" => {
                if let Some((k, v)) = line.split_once('=') {
                    view.env.insert(k.to_string(), v.to_string());
                }
            }
            _ if section == "mounts" => {
                // mountinfo: id parent major:minor root mount-point options ...
                let fields: Vec<&str> = line.split(' ').collect();
                if let (Some(point), Some(options)) = (fields.get(4), fields.get(5)) {
                    view.mounts.insert(unescape(point), (*options).to_string());
                }
            }
            _ => {
                let mut parts = line.splitn(3, '|');
                let (Some(path), Some(kind), number) = (parts.next(), parts.next(), parts.next()) else { continue };
                let node =
                    (kind != "missing").then(|| Node { kind: kind.to_string(), number: number.unwrap_or("").into() });
                view.devices.insert(path.to_string(), node);
            }
        }
    }
    view
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// What the container lacks of `promised`, one text per item (empty: it
/// shows everything). `host_nodes` are the device numbers of the answer's
/// host paths as dpctl sees them (`None`: not a device node there).
pub fn missing(
    promised: &ContainerAllocation,
    host_nodes: &BTreeMap<String, Option<Node>>,
    seen: &ContainerView,
) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in &promised.envs {
        match seen.env.get(k) {
            Some(got) if got == v => {}
            Some(got) => out.push(format!("env {k}={v:?} is {k}={got:?} in the container")),
            None => out.push(format!("env {k}={v:?} is not set in the container")),
        }
    }
    for m in &promised.mounts {
        match seen.mounts.get(&m.container_path) {
            None => {
                out.push(format!("mount {} (host {}) is not mounted in the container", m.container_path, m.host_path))
            }
            Some(opts) if m.read_only && !opts.split(',').any(|o| o == "ro") => {
                out.push(format!("mount {} should be read-only; the container has it {opts}", m.container_path));
            }
            Some(_) => {}
        }
    }
    for d in &promised.devices {
        match seen.devices.get(&d.container_path).cloned().flatten() {
            None => {
                out.push(format!("device {} (host {}) does not exist in the container", d.container_path, d.host_path))
            }
            Some(node) => {
                if let Some(Some(host)) = host_nodes.get(&d.host_path)
                    && host.number != node.number
                {
                    out.push(format!(
                        "device {} is {} in the container, but the host's {} is {}",
                        d.container_path, node.number, d.host_path, host.number
                    ));
                }
            }
        }
    }
    out
}

/// What the answer promised, in one line for evidence.
pub fn promised_text(a: &ContainerAllocation) -> String {
    let mut s = String::new();
    let envs: Vec<String> = a.envs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mounts: Vec<String> = a.mounts.iter().map(|m| format!("{}:{}", m.host_path, m.container_path)).collect();
    let devices: Vec<String> = a.devices.iter().map(|d| format!("{}:{}", d.host_path, d.container_path)).collect();
    let _ = write!(s, "envs [{}], mounts [{}], devices [{}]", envs.join(" "), mounts.join(" "), devices.join(" "));
    s
}

/// What the container showed of the promised items, in one line for evidence.
pub fn seen_text(promised: &ContainerAllocation, seen: &ContainerView) -> String {
    let envs: Vec<String> =
        promised.envs.keys().map(|k| format!("{k}={}", seen.env.get(k).map_or("<unset>", String::as_str))).collect();
    let mounts: Vec<String> = promised
        .mounts
        .iter()
        .map(|m| {
            format!("{}:{}", m.container_path, seen.mounts.get(&m.container_path).map_or("<absent>", String::as_str))
        })
        .collect();
    let devices: Vec<String> = promised
        .devices
        .iter()
        .map(|d| match seen.devices.get(&d.container_path).cloned().flatten() {
            Some(n) => format!("{}:{}", d.container_path, n.number),
            None => format!("{}:<absent>", d.container_path),
        })
        .collect();
    format!("envs [{}], mounts [{}], devices [{}]", envs.join(" "), mounts.join(" "), devices.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSpec, Mount};

    fn answer() -> ContainerAllocation {
        ContainerAllocation {
            devices_ids: vec!["d0".into()],
            envs: BTreeMap::from([("GPU".into(), "d0".into())]),
            mounts: vec![Mount { container_path: "/data".into(), host_path: "/srv".into(), read_only: true }],
            devices: vec![DeviceSpec {
                container_path: "/dev/gpu0".into(),
                host_path: "/dev/null".into(),
                permissions: "rw".into(),
            }],
            annotations: BTreeMap::new(),
            cdi_devices: Vec::new(),
        }
    }

    const SEEN: &str = "PATH=/bin\nGPU=d0\n@@mounts\n\
        100 90 0:50 / / rw,relatime - overlay overlay rw\n\
        101 100 8:1 /srv /data ro,relatime - ext4 /dev/vda ro\n\
        @@devices\n/dev/gpu0|character special file|1:3\n";

    #[test]
    fn a_container_with_everything_lacks_nothing() {
        let seen = parse(SEEN);
        assert_eq!(seen.env["GPU"], "d0");
        assert_eq!(seen.mounts["/data"], "ro,relatime");
        let host = BTreeMap::from([("/dev/null".to_string(), Some(Node { kind: "c".into(), number: "1:3".into() }))]);
        assert_eq!(missing(&answer(), &host, &seen), Vec::<String>::new());
    }

    #[test]
    fn each_missing_item_is_named() {
        let seen =
            parse("PATH=/bin\n@@mounts\n101 100 8:1 /srv /data rw - ext4 /dev/vda rw\n@@devices\n/dev/gpu0|missing|\n");
        let got = missing(&answer(), &BTreeMap::new(), &seen);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].contains("GPU=\"d0\" is not set"), "{got:?}");
        assert!(got[1].contains("read-only"), "{got:?}");
        assert!(got[2].contains("/dev/gpu0 (host /dev/null) does not exist"), "{got:?}");
        assert!(seen_text(&answer(), &seen).contains("GPU=<unset>"));
        assert!(promised_text(&answer()).contains("/srv:/data"));
    }
}
