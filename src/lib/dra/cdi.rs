//! CDI device IDs as a DRA driver returns them (`vendor/class=name`), the
//! spec files the mock driver writes, and whether IDs resolve against spec
//! directories. The kubelet never checks the IDs: the container runtime does,
//! when the container is created, and fails it (`unresolvable CDI devices`)
//! if one is unknown (docs/dra.md §3). dpctl checks both before that.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::error::{Error, Result};

/// The parts of a fully qualified CDI device name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdiId {
    /// The vendor, e.g. `example.com`.
    pub vendor: String,
    /// The class, e.g. `gpu`.
    pub class: String,
    /// The device name.
    pub name: String,
}

/// Parses `vendor/class=name` with the CDI naming rules: vendor and class
/// start with a letter, end with a letter or digit, and hold letters,
/// digits, `.`, `-`, `_`; the device name starts and ends with a letter or
/// digit and may also hold `:`.
pub fn parse_id(id: &str) -> std::result::Result<CdiId, String> {
    let (kind, name) = id.split_once('=').ok_or_else(|| format!("{id:?} has no '=' (want vendor/class=name)"))?;
    let (vendor, class) = kind.split_once('/').ok_or_else(|| format!("{id:?} has no '/' (want vendor/class=name)"))?;
    check_part(vendor, "vendor", &['.', '-', '_'], true).map_err(|e| format!("{id:?}: {e}"))?;
    check_part(class, "class", &['.', '-', '_'], true).map_err(|e| format!("{id:?}: {e}"))?;
    check_part(name, "device name", &['.', '-', '_', ':'], false).map_err(|e| format!("{id:?}: {e}"))?;
    Ok(CdiId { vendor: vendor.into(), class: class.into(), name: name.into() })
}

fn check_part(s: &str, what: &str, extra: &[char], letter_first: bool) -> std::result::Result<(), String> {
    let (Some(first), Some(last)) = (s.chars().next(), s.chars().last()) else {
        return Err(format!("empty {what}"));
    };
    if letter_first && !first.is_ascii_alphabetic() {
        return Err(format!("{what} {s:?} must start with a letter"));
    }
    if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
        return Err(format!("{what} {s:?} must start and end with a letter or digit"));
    }
    match s.chars().find(|c| !c.is_ascii_alphanumeric() && !extra.contains(c)) {
        Some(c) => Err(format!("{what} {s:?} holds {c:?}")),
        None => Ok(()),
    }
}

/// The CDI kind (`vendor/class`) the mock driver uses for `driver`: the
/// driver name is a DNS subdomain, so it is a valid vendor.
pub fn mock_kind(driver: &str) -> String {
    format!("{driver}/claim")
}

/// The spec file the mock driver writes for one claim, in `dir`.
/// The claim's UID comes from the request: one that could leave `dir` or
/// name a hidden file (a `/`, `..`, a leading `.`, anything but letters,
/// digits, `-`, `_` and `.`, or over 128 bytes) is refused, naming it.
pub fn spec_path(dir: &Path, driver: &str, claim_uid: &str) -> std::result::Result<PathBuf, String> {
    let ok = !claim_uid.is_empty()
        && claim_uid.len() <= 128
        && !claim_uid.starts_with('.')
        && claim_uid.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !ok {
        return Err(format!(
            "claim UID {claim_uid:?} cannot name a CDI spec file: a UID is letters, digits, '-', '_' and '.' \
             (not first), at most 128 bytes"
        ));
    }
    Ok(dir.join(format!("{driver}-{claim_uid}.json")))
}

/// Writes a CDI spec defining `names` (device names) of `kind`, each
/// setting one environment variable, atomically (a temporary file renamed
/// over the spec); a file already there that dpctl did not write is never
/// replaced.
pub fn write_spec(path: &Path, kind: &str, names: &[String]) -> Result<()> {
    let entries: Vec<(String, Option<String>)> = names.iter().map(|n| (n.clone(), None)).collect();
    write_spec_nodes(path, kind, &entries)
}

/// [`write_spec`], each device also adding its host device node when it has one.
pub fn write_spec_nodes(path: &Path, kind: &str, devices: &[(String, Option<String>)]) -> Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && !(meta.is_file() && is_own_spec(path))
    {
        return Err(Error::invalid(
            path.display().to_string(),
            "exists and is not a CDI spec dpctl wrote; it is not replaced (choose another --cdi-dir)",
        ));
    }
    let devices: Vec<_> = devices
        .iter()
        .map(|(n, node)| {
            let mut edits = json!({"env": [format!("DPCTL_DRA_DEVICE={n}")]});
            if let Some(node) = node {
                edits["deviceNodes"] = json!([{"path": node}]);
            }
            json!({"name": n, "containerEdits": edits})
        })
        .collect();
    let spec = json!({"cdiVersion": "0.6.0", "kind": kind, "annotations": {"dpctl.dev/written-by": "dpctl dra mock"}, "devices": devices});
    let text = serde_json::to_vec_pretty(&spec).map_err(|e| Error::io("encoding a CDI spec", e.into()))?;
    crate::checkpoint::write_atomic(path, &text)
}

/// True when the file at `path` is a spec the mock wrote (its annotation).
pub fn is_own_spec(path: &Path) -> bool {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|v| v["annotations"]["dpctl.dev/written-by"] == "dpctl dra mock")
}

/// Removes a spec the mock wrote; anything else is left alone.
pub fn remove_spec(path: &Path) {
    if is_own_spec(path) {
        let _ = std::fs::remove_file(path);
    }
}

/// One CDI ID and its verdict.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CdiCheck {
    /// The ID as answered.
    pub id: String,
    /// What it is.
    #[serde(flatten)]
    pub verdict: IdVerdict,
}

/// What one CDI ID is, judged as the runtime would.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "reason")]
pub enum IdVerdict {
    /// Parses; no spec directories were given to resolve it in.
    Unchecked,
    /// Parses and a spec in the directories defines it.
    Resolved,
    /// Parses, but no spec in the directories defines it.
    Unresolved,
    /// Does not parse as a CDI ID.
    Unparsable(String),
}

/// Judges `ids` against the spec files in `dirs` (missing dirs are
/// skipped; none given: parsed only).
pub fn judge(ids: &[String], dirs: &[PathBuf]) -> Vec<CdiCheck> {
    let registry = crate::cdi_spec::read_dirs(dirs);
    ids.iter()
        .map(|id| {
            let verdict = match parse_id(id) {
                Err(e) => IdVerdict::Unparsable(e),
                Ok(_) if dirs.is_empty() => IdVerdict::Unchecked,
                Ok(_) if registry.names.contains(id) => IdVerdict::Resolved,
                Ok(_) => IdVerdict::Unresolved,
            };
            CdiCheck { id: id.clone(), verdict }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_by_the_cdi_rules() {
        let id = parse_id("nvidia.com/gpu=GPU-0:1").unwrap();
        assert_eq!((id.vendor.as_str(), id.class.as_str(), id.name.as_str()), ("nvidia.com", "gpu", "GPU-0:1"));
        assert!(parse_id("nvidia.com/gpu").is_err_and(|e| e.contains("no '='")));
        assert!(parse_id("gpu=0").is_err_and(|e| e.contains("no '/'")));
        assert!(parse_id("1vendor/gpu=0").is_err_and(|e| e.contains("start with a letter")));
        assert!(parse_id("v/gpu=0/1").is_err_and(|e| e.contains("'/'")));
        assert!(parse_id("v/gpu=").is_err_and(|e| e.contains("empty device name")));
        assert!(parse_id("v/gpu=a-").is_err_and(|e| e.contains("end with")));
    }

    /// The mock names a spec after the claim's UID as it came in the
    /// request (from any client, not only dpctl's, which checks UIDs): one
    /// that could leave the directory or hide the file is refused.
    #[test]
    fn a_uid_that_could_leave_the_directory_names_no_spec() {
        let dir = Path::new("/var/run/cdi");
        for uid in ["x/../../../etc/escaped", "..", ".hidden", "", "a b", "a\0b", &"u".repeat(129)] {
            let e = spec_path(dir, "gpu.example.com", uid).unwrap_err();
            assert!(e.contains("cannot name a CDI spec file"), "{uid:?}: {e}");
        }
        let ok = spec_path(dir, "gpu.example.com", "4f5c1a2e-0b7d-4c1e-9f00-123456789abc").unwrap();
        assert_eq!(ok, dir.join("gpu.example.com-4f5c1a2e-0b7d-4c1e-9f00-123456789abc.json"));
    }

    #[test]
    fn written_specs_resolve_and_are_removed_only_when_ours() {
        let dir = tempfile::tempdir().unwrap();
        let path = spec_path(dir.path(), "gpu.example.com", "uid-1").unwrap();
        write_spec(&path, &mock_kind("gpu.example.com"), &["uid-1-gpu-0".into()]).unwrap();
        let ids = vec!["gpu.example.com/claim=uid-1-gpu-0".to_string(), "gpu.example.com/claim=nope".to_string()];
        let v = judge(&ids, &[dir.path().to_path_buf()]);
        assert_eq!(v[0].verdict, IdVerdict::Resolved);
        assert_eq!(v[1].verdict, IdVerdict::Unresolved);
        assert_eq!(judge(&ids, &[])[0].verdict, IdVerdict::Unchecked);
        let foreign = dir.path().join("other.json");
        std::fs::write(&foreign, "{}").unwrap();
        remove_spec(&foreign);
        assert!(foreign.exists());
        assert!(write_spec(&foreign, "a/b", &[]).is_err());
        remove_spec(&path);
        assert!(!path.exists());
    }
}
