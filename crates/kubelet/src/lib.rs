//! The kubelet's logic as dpctl plays it, with no I/O runtime: the release
//! table (what changed between kubelet releases), the Topology Manager and
//! static CPU manager as pure functions, resource quantities, the kubelet's
//! texts and limits, and where it keeps things on a node.
//!
//! This crate has no async runtime, gRPC or transport in its dependencies:
//! everything here is tested without sockets, and `cargo mutants -p
//! dpctl-kubelet` runs on it alone. The `dpctl` package (the root of the
//! workspace) re-exports these modules under their old names.

#![warn(missing_docs)]

pub mod invalid;
pub mod kubelet_texts;
pub mod kubelet_version;
pub mod layout;
pub mod limits;
pub mod quantity;
pub mod text;
pub mod topology;

pub use invalid::{Invalid, Result};
