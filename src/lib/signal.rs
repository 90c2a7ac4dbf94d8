//! The signals that end a dpctl command that runs until stopped: Ctrl-C
//! (SIGINT) and SIGTERM (kubectl delete, systemd, a CI runner's cancel).

use std::future::Future;

/// Completes on Ctrl-C (SIGINT) or SIGTERM. The handlers are installed
/// when this is called, not when the future is first polled: a process
/// that announced it is serving must not die of a SIGTERM that arrives
/// before its signal task got to run (the default action kills it without
/// its cleanup). Must be called inside a tokio runtime.
pub fn shutdown() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    let mut terminate = signal(SignalKind::terminate()).ok();
    async move {
        let int = async {
            match interrupt.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let term = async {
            match terminate.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = int => {},
            () = term => {},
        }
    }
}
