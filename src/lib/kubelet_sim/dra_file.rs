//! `dra_manager_state` on disk (docs/dra.md §6): the checkpoint sits in the
//! kubelet's root directory, the parent of plugins_registry
//! (`<root>/dra_manager_state`). The sim writes it only when it created it
//! or wrote it last (recorded in `<dir>/.dpctl/kubelet-sim-dra-state.json`),
//! or with `--adopt-checkpoint`; a file another program wrote is read and
//! restored, never changed. The bytes are the DRA manager's
//! (`Manager::dra_checkpoint_bytes`).

use std::path::{Path, PathBuf};

use super::shell::Inner;
use crate::error::{Error, Result};

/// The record that the sim wrote `dra_manager_state`, inside `<dir>/.dpctl/`.
pub const MARKER_NAME: &str = "kubelet-sim-dra-state.json";

/// True when the sim plays a DRA manager: a release with DRA on by default
/// and a plugins_registry to find drivers in.
pub(crate) fn enabled(inner: &Inner) -> bool {
    inner.config.kubelet_version.has_dra() && inner.config.registry_dir.is_some()
}

/// `<root>/dra_manager_state`, root being the parent of plugins_registry.
pub(crate) fn state_path(registry_dir: &Path) -> PathBuf {
    registry_dir.parent().unwrap_or(registry_dir).join(crate::dra::state::FILE_NAME)
}

/// The sim's record of the last `dra_manager_state` it wrote.
fn marker(inner: &Inner) -> PathBuf {
    inner.paths.dir.join(crate::paths::CONTROL_DIR_NAME).join(MARKER_NAME)
}

fn fnv(bytes: &[u8]) -> String {
    let h =
        bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{h:016x}")
}

/// Reads `dra_manager_state` at start (or a restart) into the DRA manager.
/// A corrupt file stops the start, as it stops the kubelet. Returns whether
/// the sim may write the file, and the entries restored.
pub(crate) fn load(inner: &Inner) -> Result<(bool, usize)> {
    let Some(path) = inner.config.registry_dir.as_deref().map(state_path) else { return Ok((false, 0)) };
    let text = match std::fs::symlink_metadata(&path) {
        // No file: the claims in memory carry over (none prepared).
        Err(_) => return Ok((true, inner.lock().dra_restore(None).unwrap_or(0))),
        Ok(m) if m.file_type().is_symlink() || !m.is_file() => {
            return Err(Error::invalid(
                path.display().to_string(),
                "not a regular file: the DRA checkpoint must be one (kubelet-sim never follows or replaces a link)",
            ));
        }
        Ok(_) => {
            crate::input::read_text_within(&path, &path.display().to_string(), crate::checkpoint::MAX_CHECKPOINT_BYTES)?
        }
    };
    let report = crate::dra::state::parse(&path, &text)?;
    let restored = inner.lock().dra_restore(Some(&report)).map_err(|e| {
        Error::invalid(
            path.display().to_string(),
            format!(
                "{e}; the kubelet's DRA manager (and the kubelet) would not start. hint: drain the node and remove the file"
            ),
        )
    })?;
    let ours = std::fs::read_to_string(marker(inner)).is_ok_and(|m| m.trim() == fnv(text.as_bytes()));
    Ok((ours || inner.config.adopt_checkpoint, restored))
}

/// Writes `dra_manager_state` (fsynced) when the sim may.
pub(crate) fn write_state(inner: &Inner) {
    if !enabled(inner) || !inner.dra_writes.load(std::sync::atomic::Ordering::Relaxed) || !inner.config.checkpoint {
        return;
    }
    let Some(path) = inner.config.registry_dir.as_deref().map(state_path) else { return };
    let bytes = inner.lock().dra_checkpoint_bytes();
    let temp = crate::checkpoint::Temp { tag: Some(&inner.tmp_tag), durable: true };
    let written = crate::checkpoint::write_with(
        &marker(inner),
        fnv(&bytes).as_bytes(),
        &crate::checkpoint::Temp { tag: Some(&inner.tmp_tag), durable: false },
    )
    .and_then(|()| crate::checkpoint::write_with(&path, &bytes, &temp));
    if let Err(e) = written {
        tracing::warn!(error = %e, "could not write the DRA checkpoint");
    }
}
