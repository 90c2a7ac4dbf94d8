//! dpctl: a toolkit for debugging Kubernetes device plugins.
//!
//! It can play every part of the device-plugin protocol over one shared
//! gRPC-over-unix-socket [`transport`]: the kubelet (`kubelet_sim`), a client
//! of a plugin's socket ([`plugin_client`]), a PodResources reader
//! (`podresources`), and a device plugin (`mock_plugin`). The library never
//! prints: commands render their data through [`output`] into writers that
//! the binary hands in.

#![warn(missing_docs)]

pub mod apiserver;
pub mod bench;
pub mod cdi_spec;
pub mod check;
pub mod checkpoint;
pub mod cli;
pub mod contract;
pub mod demo;
pub mod doctor;
pub mod dra;
pub mod duration;
pub mod error;
pub mod input;
pub mod kubelet_sim;
pub mod mock_plugin;
pub mod model;
pub mod output;
pub mod paths;
pub mod plugin_client;
pub mod podresources;
pub mod proto;
pub mod rpc;
pub mod scenario;
pub mod signal;
pub mod smoke;
pub mod transport;
pub mod validate;
pub mod wire_events;

pub use error::{Error, Result};

// The kubelet's logic lives in its own crate (`crates/kubelet`, no async
// runtime or gRPC); dpctl's modules reach it under these names.
pub use dpctl_kubelet::{kubelet_texts, kubelet_version, limits, quantity, text, topology};
