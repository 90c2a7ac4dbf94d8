//! A kubelet.sock that appears late: the kubelet reports itself started
//! (its process runs, node status is posted) while its device manager has
//! not created `kubelet.sock` yet (docs/kubelet-versions.md §10). A plugin
//! that calls Register once at start, finds no socket and gives up never
//! registers; one that retries or watches the directory does.

use std::sync::Arc;

use super::{Inner, serve_registration};
use crate::error::Result;

/// Serves kubelet.sock now, or, with a delay configured
/// (`--kubelet-socket-delay`), after it in the background; the sim is
/// started either way.
pub(super) async fn serve_registration_at(inner: &Arc<Inner>) -> Result<()> {
    let delay = inner.config.kubelet_socket_delay;
    if delay.is_zero() {
        return serve_registration(inner).await;
    }
    tracing::info!(delay = %crate::text::fmt_duration(delay), "kubelet.sock is created late");
    let inner = Arc::clone(inner);
    let mut shutdown = inner.shutdown.subscribe();
    tokio::spawn(async move {
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        if let Err(e) = serve_registration(&inner).await {
            tracing::warn!(error = %e, "cannot serve the late kubelet.sock");
        } else if inner.is_stopped() {
            // Stopped while it was being created: close it again.
            super::stop_registration(&inner).await;
        } else {
            tracing::info!(socket = %inner.paths.kubelet_socket.display(), "kubelet.sock created (late)");
        }
    });
    Ok(())
}
