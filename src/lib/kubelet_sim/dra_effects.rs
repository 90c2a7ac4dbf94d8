//! What performs the DRA manager's effects (`manager/dra/events.rs` decides
//! them): events, the `dra_manager_state` write, the ResourceSlice wipe and
//! its timer, and each registered instance's device-health stream, whose
//! messages go back to the manager as transitions.

use std::sync::Arc;

use super::events::EventKind;
use super::manager::{DeviceHealthView, DraEffect, DraInstance};
use super::shell::Inner;

/// Performs the effects of a DRA transition, in order.
pub(crate) fn perform(inner: &Arc<Inner>, effects: Vec<DraEffect>) {
    for e in effects {
        match e {
            DraEffect::Emit(kind) => inner.emit(kind),
            DraEffect::WriteState => super::dra_file::write_state(inner),
            DraEffect::Wipe { driver, reason } => super::dra_api::wipe(inner, driver.as_deref(), reason),
            DraEffect::ScheduleWipe { driver, generation } => schedule_wipe(inner, driver, generation),
            DraEffect::StartHealth { instance, api, generation } => spawn_health(inner, instance, api, generation),
        }
    }
}

/// Reports the wipe timer of the driver's last instance after
/// `--dra-wiping-delay` (30 s, the same 1.34-1.37), unless the sim stops first.
fn schedule_wipe(inner: &Arc<Inner>, driver: String, generation: u64) {
    if inner.api.get().is_none() {
        return;
    }
    let inner2 = Arc::clone(inner);
    let stop = inner.shutdown_future();
    let delay = inner.config.dra_wiping_delay;
    let task = tokio::spawn(async move {
        tokio::select! {
            () = stop => {}
            () = tokio::time::sleep(delay) => {
                let effects = inner2.lock().dra_wipe_timer(&driver, generation);
                perform(&inner2, effects);
            }
        }
    });
    inner.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(task);
}

/// The kubelet's wait between two attempts at a health stream
/// (`wait.UntilWithContext(..., 5*time.Second)` in
/// pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go).
const HEALTH_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// Streams the instance's device health while it stays registered, where
/// the release opens a stream (`DraInstance::health`): each message updates
/// the devices' health (status, events); a failed or ended stream is opened
/// again 5 s later, as the kubelet does.
fn spawn_health(inner: &Arc<Inner>, inst: DraInstance, api: crate::dra::HealthApi, generation: u64) {
    let inner2 = Arc::clone(inner);
    let stop = inner.shutdown_future();
    let task = tokio::spawn(async move {
        tokio::select! {
            () = stop => {}
            () = health_loop(&inner2, &inst, api, generation) => {}
        }
    });
    inner.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(task);
}

async fn health_loop(inner: &Arc<Inner>, inst: &DraInstance, api: crate::dra::HealthApi, generation: u64) {
    let cfg =
        crate::transport::ClientConfig { connect_timeout: crate::dra::KUBELET_CALL_TIMEOUT, ..Default::default() };
    let event = |error: Option<String>| EventKind::DraHealthStream {
        driver: inst.driver.clone(),
        endpoint: inst.endpoint.clone(),
        service: api.advertised().to_string(),
        error,
    };
    let mut last_error = None;
    let mut events = inner.events.subscribe();
    let gone = |ev: &super::events::SimEvent| {
        matches!(&ev.kind, EventKind::DraDeregistered { driver, endpoint }
            if *driver == inst.driver && *endpoint == inst.endpoint)
    };
    let current = || inner.lock().dra_stream_current(&inst.driver, &inst.endpoint, generation);
    while current() {
        let error = match crate::dra::client::watch_health(&inst.socket, api, &cfg).await {
            Err(e) => super::registration::go_rpc_error(&e),
            Ok(mut rx) => {
                inner.emit(event(None));
                last_error = None;
                loop {
                    tokio::select! {
                        m = rx.recv() => match m {
                            // A restart or a new registration of the endpoint took over.
                            Some(Ok(_)) if !current() => return,
                            Some(Ok(entries)) => health_message(inner, &inst.driver, entries),
                            Some(Err(e)) => break super::registration::go_rpc_error(&e),
                            None => break "the stream ended".to_string(),
                        },
                        // The kubelet cancels the stream when the instance goes.
                        ev = events.recv() => match ev {
                            Ok(ev) if gone(&ev) => return,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                            _ => {}
                        },
                    }
                }
            }
        };
        // A driver answering Unimplemented every 5 s is reported once, not every time.
        if last_error.as_ref() != Some(&error) {
            inner.emit(event(Some(error.clone())));
            last_error = Some(error);
        }
        tokio::time::sleep(HEALTH_RETRY).await;
    }
}

fn health_message(inner: &Arc<Inner>, driver: &str, entries: Vec<crate::dra::client::HealthEntry>) {
    let devices = entries
        .into_iter()
        .map(|e| DeviceHealthView {
            driver: driver.to_string(),
            pool: e.pool,
            device: e.device,
            health: e.health,
            message: e.message,
        })
        .collect();
    let effects = inner.lock().dra_health(driver, devices);
    perform(inner, effects);
}
