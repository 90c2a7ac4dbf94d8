//! The kubelet's PodResources API: a [`client`] that reads it the way an
//! operator needs (v1 with a v1alpha1 fallback), dpctl's [`view`] of the data,
//! what is [`free`] on a node, what changed between two answers ([`diff`]),
//! and a server that answers from any [`server::Provider`] (kubelet-sim's
//! state, or a JSON [`fixture`]); both keep to the kubelet's rate limit
//! with one [`ratelimit::TokenBucket`].

pub mod client;
pub mod diff;
pub mod fixture;
pub mod free;
pub mod ratelimit;
pub mod server;
pub mod view;
