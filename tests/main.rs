//! dpctl's integration tests: one test binary (one link step), one module
//! per area. Tests start real servers on sockets in a fresh temporary
//! directory, never sleep for readiness, and put a timeout on every wait.

mod support;

mod bench;
mod check;
mod completions;
mod demo;
mod interop;
mod kubelet_sim;
mod mock_plugin;
mod plugin_cli;
mod podresources;
mod smoke;
mod transport;
mod vectors;
