//! A small typed reader of CDI spec files (`/etc/cdi`, `/var/run/cdi`): only
//! what doctor needs, the fully qualified device names (`kind=name`) each
//! spec defines. The CNCF `container-device-interface` crate exists but
//! brings a JSON-schema validator, OCI types and a CLI parser; doctor needs
//! three fields.

use std::collections::BTreeSet;
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
                        reg.names.insert(format!("{}={}", spec.kind, d.name));
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

/// CDI names an Allocate answer asks for: `cdi_devices`, and the values of
/// `cdi.k8s.io/*` annotations (comma-separated).
pub fn names_in(alloc: &crate::model::ContainerAllocation) -> Vec<String> {
    let mut out: Vec<String> = alloc.cdi_devices.clone();
    for (k, v) in &alloc.annotations {
        if k.starts_with("cdi.k8s.io/") {
            out.extend(v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(reg.broken[0].0.ends_with("broken.yaml"));
    }
}
