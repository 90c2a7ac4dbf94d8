//! `dpctl podresources serve` as a library call: a fake kubelet's
//! PodResources endpoint answering from a fixture file, reloaded when the
//! file changes, until Ctrl-C or SIGTERM. What it does is told through a
//! callback ([`Served`]); the output layer renders it.

use std::path::PathBuf;
use std::sync::Arc;

use super::fixture::{Fixture, FixtureProvider, Reload, reload_loop};
use super::server::{PodResourcesService, ServedApis, ServerConfig};
use crate::error::{Error, Result};
use crate::transport::{self, BindOptions};

/// How to serve.
#[derive(Debug, Clone)]
pub struct FakeKubelet {
    /// The socket to serve on.
    pub socket: PathBuf,
    /// The fixture file [default: an empty node].
    pub data: Option<PathBuf>,
    /// Answer Get as a kubelet with the feature gate off.
    pub disable_get: bool,
    /// Calls per second and burst; `None`: no rate limit.
    pub rate_limit: Option<(f64, u32)>,
    /// The API versions served.
    pub apis: ServedApis,
    /// Take the socket over even if a live process serves it.
    pub force: bool,
}

/// What [`serve`] tells its caller.
#[derive(Debug)]
pub enum Served {
    /// Serving: the fixture has this many pods.
    Ready {
        /// Pods in the fixture.
        pods: usize,
    },
    /// The fixture file changed (see [`Reload`]).
    Reload(Reload),
}

impl FakeKubelet {
    /// Checks the rate limit (errors name `--qps` or `--burst`).
    pub fn check(&self) -> Result<()> {
        if let Some((qps, burst)) = self.rate_limit {
            if !(qps > 0.0 && qps.is_finite()) {
                return Err(Error::invalid("--qps", "must be a positive number (or use --no-rate-limit)"));
            }
            if burst == 0 {
                return Err(Error::invalid("--burst", "must be at least 1 (or use --no-rate-limit)"));
            }
        }
        Ok(())
    }
}

/// Loads the fixture, binds the socket, reports [`Served::Ready`], then
/// serves and reloads until Ctrl-C or SIGTERM (or `report` fails).
pub async fn serve(fake: &FakeKubelet, mut report: impl FnMut(Served) -> Result<()>) -> Result<()> {
    fake.check()?;
    let fixture = match &fake.data {
        Some(path) => Fixture::load_as(path, &format!("--data {}", path.display()))?,
        None => Fixture::default(),
    };
    let pods = fixture.pods.len();
    let provider = FixtureProvider::new(fixture);
    let handle = provider.handle();
    let config =
        ServerConfig { get_enabled: !fake.disable_get, rate_limit: fake.rate_limit, ..ServerConfig::default() };
    let service = PodResourcesService::new(Arc::new(provider), config);
    let bind = BindOptions { force: fake.force, force_flag: "--force", ..BindOptions::default() };
    let listener = transport::bind(&fake.socket, &bind).await?;
    report(Served::Ready { pods })?;
    let reload = async {
        let Some(path) = &fake.data else { return std::future::pending::<Result<()>>().await };
        reload_loop(path, &handle, |r| report(Served::Reload(r))).await
    };
    tokio::select! {
        r = transport::serve(service.router_for(fake.apis), listener, transport::shutdown_signal()) => r?,
        r = reload => r?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(rate_limit: Option<(f64, u32)>) -> FakeKubelet {
        FakeKubelet {
            socket: "/x".into(),
            data: None,
            disable_get: false,
            rate_limit,
            apis: ServedApis::default(),
            force: false,
        }
    }

    #[test]
    fn rate_limit_errors_name_the_flag() {
        assert!(fake(Some((0.0, 10))).check().unwrap_err().to_string().starts_with("--qps"));
        assert!(fake(Some((f64::NAN, 10))).check().unwrap_err().to_string().starts_with("--qps"));
        assert!(fake(Some((5.0, 0))).check().unwrap_err().to_string().starts_with("--burst"));
        assert!(fake(None).check().is_ok());
    }
}
