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
    /// Checks the rate limit (errors name `--qps` or `--burst`): `--qps` from
    /// [`MIN_QPS`] to [`MAX_QPS`], `--burst` from 1 to [`MAX_BURST`].
    pub fn check(&self) -> Result<()> {
        if let Some((qps, burst)) = self.rate_limit {
            if !(MIN_QPS..=MAX_QPS).contains(&qps) {
                // 1e308 as written, not as 309 digits.
                let shown = if qps.is_finite() && qps.abs() < 1e12 { format!("{qps}") } else { format!("{qps:e}") };
                return Err(Error::invalid(
                    "--qps",
                    format!(
                        "{shown} is not a rate from {MIN_QPS} to {MAX_QPS} calls per second \
                         (hint: for no limit at all, use --no-rate-limit)"
                    ),
                ));
            }
            if !(1..=MAX_BURST).contains(&burst) {
                return Err(Error::invalid(
                    "--burst",
                    format!(
                        "{burst} is not a burst from 1 to {MAX_BURST} calls (hint: for no limit at all, use --no-rate-limit)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Lowest `--qps`: one call per 1,000 s. Below it a refused client would be
/// told to wait for hours, which no test needs.
pub const MIN_QPS: f64 = 0.001;
/// Highest `--qps`. One process cannot serve a million PodResources calls a
/// second, so a higher rate would not be a limit at all but look like one
/// (`1e308` used to be accepted): `--no-rate-limit` says so plainly.
pub const MAX_QPS: f64 = 1_000_000.0;
/// Highest `--burst` (see [`MAX_QPS`]).
pub const MAX_BURST: u32 = 1_000_000;

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
        r = transport::serve(service.router_for(fake.apis), listener, crate::signal::shutdown()) => r?,
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
        // Inf, negative, over the top: refused, naming the flag and --no-rate-limit.
        for qps in [f64::INFINITY, f64::NEG_INFINITY, -1.0, 1e308, 1_000_001.0, 0.0009] {
            let e = fake(Some((qps, 10))).check().unwrap_err();
            assert_eq!(e.exit_code(), crate::error::exit::USAGE);
            assert!(e.to_string().starts_with("--qps") && e.to_string().contains("--no-rate-limit"), "{qps}: {e}");
            assert!(e.to_string().len() < 160, "the value is shown short: {e}");
        }
        assert!(fake(Some((100.0, 1_000_001))).check().unwrap_err().to_string().starts_with("--burst"));
        assert!(fake(Some((MAX_QPS, MAX_BURST))).check().is_ok());
        assert!(fake(Some((MIN_QPS, 1))).check().is_ok());
        assert!(fake(None).check().is_ok());
    }
}
