//! The kubelet's PodResources API: a server that answers from any
//! [`server::Provider`] (kubelet-sim's state, fixtures).

pub mod server;
