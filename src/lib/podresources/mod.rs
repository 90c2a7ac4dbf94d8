//! The kubelet's PodResources API: a [`client`] that reads it the way an
//! operator needs (v1 with a v1alpha1 fallback), dpctl's [`view`] of the data,
//! what is [`free`] on a node, what changed between two answers ([`diff`]),
//! and a server that answers from any [`server::Provider`] (kubelet-sim's
//! state, or a JSON [`fixture`]); both keep to the kubelet's rate limit
//! with one [`ratelimit::TokenBucket`].

pub mod cause;
pub mod client;
pub mod diff;
pub mod fake;
pub mod fixture;
pub mod free;
pub mod query;
pub mod ratelimit;
pub mod server;
pub mod view;
pub mod watch;

use crate::error::Error;

/// What the user can do about `e`: the PodResources-specific hint when the
/// error came from a PodResources call ([`client::hint`]), otherwise the
/// general one ([`Error::hint`]). Callers that show hints use this, so the
/// ground-level error type never imports this domain.
pub fn hint(e: &Error) -> Option<String> {
    client::hint(e).or_else(|| e.hint())
}
