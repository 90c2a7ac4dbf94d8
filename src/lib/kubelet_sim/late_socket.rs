//! Serving kubelet.sock: the Registration service, bound at start and after
//! each restart, stopped by a restart and at the end.
//!
//! A kubelet.sock may appear late: the kubelet reports itself started
//! (its process runs, node status is posted) while its device manager has
//! not created `kubelet.sock` yet (docs/kubelet-versions.md §10). A plugin
//! that calls Register once at start, finds no socket and gives up never
//! registers; one that retries or watches the directory does.

use std::sync::Arc;
use std::time::Instant;

use super::registration::RegistrationService;
use super::shell::{Inner, ServerTask};
use crate::error::Result;
use crate::proto::deviceplugin::v1beta1::registration_server::RegistrationServer;
use crate::transport::{self, BindOptions};

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
            stop_registration(&inner).await;
        } else {
            tracing::info!(socket = %inner.paths.kubelet_socket.display(), "kubelet.sock created (late)");
        }
    });
    Ok(())
}

/// Binds kubelet.sock and serves the Registration service on it.
pub(super) async fn serve_registration(inner: &Arc<Inner>) -> Result<()> {
    let opts = BindOptions { force: inner.config.force, force_flag: inner.config.force_flag, ..BindOptions::default() };
    let listener = transport::bind(&inner.paths.kubelet_socket, &opts).await?;
    inner.lock().socket_served(Instant::now());
    let service = RegistrationService { inner: Arc::clone(inner) };
    let service = transport::WireService::new(RegistrationServer::new(service), inner.config.tap.clone());
    let router = transport::server_builder().add_service(service);
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let join = tokio::spawn(transport::serve(router, listener, async {
        let _ = rx.await;
    }));
    *inner.registration.lock().await = Some(ServerTask { stop, join });
    Ok(())
}

/// Stops serving kubelet.sock (the socket is removed).
pub(super) async fn stop_registration(inner: &Arc<Inner>) {
    let task = inner.registration.lock().await.take();
    if let Some(t) = task {
        let _ = t.stop.send(());
        let _ = t.join.await;
    }
}
