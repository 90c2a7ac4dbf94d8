//! A small typed reader of CDI spec files (`/etc/cdi`, `/var/run/cdi`): only
//! what dpctl needs, the fully qualified device names (`kind=name`) each
//! spec defines and the device nodes each device adds. Doctor and the DRA
//! commands both read specs with it. The CNCF `container-device-interface`
//! crate exists but brings a JSON-schema validator, OCI types and a CLI
//! parser; dpctl needs a few fields.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Largest spec file read.
const MAX_SPEC_BYTES: u64 = 4 * 1024 * 1024;

/// The fields of a CDI spec doctor reads.
#[derive(Debug, Deserialize)]
struct Spec {
    #[serde(rename = "cdiVersion", default)]
    cdi_version: String,
    kind: String,
    #[serde(default)]
    devices: Vec<SpecDevice>,
}

#[derive(Debug, Deserialize)]
struct SpecDevice {
    name: String,
    #[serde(rename = "containerEdits", default)]
    edits: Edits,
}

/// A device's `containerEdits`: only its device nodes are read.
#[derive(Debug, Default, Deserialize)]
struct Edits {
    #[serde(rename = "deviceNodes", default)]
    device_nodes: Vec<DeviceNode>,
}

/// A CDI device node: `path` in the container, `hostPath` on the host
/// (the same as `path` when unset).
#[derive(Debug, Deserialize)]
struct DeviceNode {
    path: String,
    #[serde(rename = "hostPath", default)]
    host_path: Option<String>,
}

/// What the spec directories define.
#[derive(Debug, Default)]
pub struct CdiRegistry {
    /// Fully qualified device names (`vendor.com/class=name`).
    pub names: BTreeSet<String>,
    /// Spec files read, with the names each defines.
    pub specs: Vec<(PathBuf, usize)>,
    /// Files that do not parse, with why.
    pub broken: Vec<(PathBuf, String)>,
    /// Directories that exist.
    pub dirs_present: Vec<PathBuf>,
    /// Per fully qualified name: the host paths of the device nodes the
    /// device itself adds (its own `containerEdits`; the spec-wide edits,
    /// shared by every device of the spec, are left out), and the spec
    /// file that defines it.
    pub devices: BTreeMap<String, (Vec<String>, PathBuf)>,
}

/// Reads every `*.json`, `*.yaml` and `*.yml` in `dirs` (missing dirs are skipped).
pub fn read_dirs(dirs: &[PathBuf]) -> CdiRegistry {
    let mut reg = CdiRegistry::default();
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(dir) else { continue };
        reg.dirs_present.push(dir.clone());
        let mut files: Vec<PathBuf> = rd.filter_map(std::result::Result::ok).map(|e| e.path()).collect();
        files.sort();
        for path in files {
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
            if !matches!(ext, "json" | "yaml" | "yml") {
                continue;
            }
            match read_spec(&path, ext) {
                Ok(spec) => {
                    let before = reg.names.len();
                    for d in &spec.devices {
                        let name = format!("{}={}", spec.kind, d.name);
                        let nodes = d
                            .edits
                            .device_nodes
                            .iter()
                            .map(|n| n.host_path.clone().filter(|h| !h.is_empty()).unwrap_or_else(|| n.path.clone()))
                            .collect();
                        reg.devices.entry(name.clone()).or_insert((nodes, path.clone()));
                        reg.names.insert(name);
                    }
                    reg.specs.push((path, reg.names.len().saturating_sub(before)));
                }
                Err(e) => reg.broken.push((path, e)),
            }
        }
    }
    reg
}

fn read_spec(path: &Path, ext: &str) -> Result<Spec, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_SPEC_BYTES {
        return Err(format!("{} bytes is over the {MAX_SPEC_BYTES}-byte limit", meta.len()));
    }
    let text = std::fs::read(path).map_err(|e| e.to_string())?;
    let spec: Spec = if ext == "json" {
        serde_json::from_slice(&text).map_err(|e| e.to_string())?
    } else {
        serde_norway::from_slice(&text).map_err(|e| e.to_string())?
    };
    if spec.cdi_version.is_empty() {
        return Err("no cdiVersion".into());
    }
    if !spec.kind.contains('/') {
        return Err(format!("kind {:?} is not vendor.com/class", spec.kind));
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device's own device nodes are kept (hostPath, else path); the
    /// spec-wide ones, shared by all its devices, are not.
    #[test]
    fn device_nodes_are_read_per_device() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("gpu.yaml"),
            "cdiVersion: 0.6.0\nkind: vendor.com/gpu\ncontainerEdits:\n  deviceNodes: [{path: /dev/ctl}]\n\
             devices:\n  - name: gpu0\n    containerEdits:\n      deviceNodes:\n        - {path: /dev/gpu0}\n\
             \x20       - {path: /dev/c1, hostPath: /dev/h1}\n",
        )
        .unwrap();
        let reg = read_dirs(&[dir.path().to_path_buf()]);
        let (nodes, spec) = &reg.devices["vendor.com/gpu=gpu0"];
        assert_eq!(nodes, &["/dev/gpu0", "/dev/h1"]);
        assert!(spec.ends_with("gpu.yaml"));
    }

    #[test]
    fn reads_names_and_reports_broken_specs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("vendor.yaml"),
            "cdiVersion: 0.6.0\nkind: vendor.com/gpu\ndevices:\n  - name: gpu0\n  - name: all\ncontainerEdits: {}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("b.json"),
            r#"{"cdiVersion":"0.5.0","kind":"x.io/nic","devices":[{"name":"n1"}]}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("broken.yaml"), "kind: [").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let reg = read_dirs(&[dir.path().to_path_buf(), dir.path().join("missing")]);
        assert_eq!(
            reg.names.iter().cloned().collect::<Vec<_>>(),
            ["vendor.com/gpu=all", "vendor.com/gpu=gpu0", "x.io/nic=n1"]
        );
        assert_eq!(reg.broken.len(), 1);
        assert_eq!(reg.devices["vendor.com/gpu=gpu0"].0, Vec::<String>::new());
        assert!(reg.broken[0].0.ends_with("broken.yaml"));
    }
}
