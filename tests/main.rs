//! dpctl's integration tests: one test binary (one link step), one module
//! per area. Tests start real servers on sockets in a fresh temporary
//! directory, never sleep for readiness, and put a timeout on every wait.

mod support;

mod apiserver;
mod bench;
mod check;
mod checkpoint;
mod ci_output;
mod cluster_engine;
mod completions;
mod conformance;
mod corpus;
mod crash;
mod demo;
mod deploy;
mod doctor;
mod doctor_dra;
mod dra;
mod dra_e2e;
mod dra_sim;
mod dra_smoke;
mod exit_codes;
mod fuzz;
mod help;
mod hostile;
mod interop;
mod isolate;
mod json_schema;
mod kubelet_engine;
mod kubelet_sim;
mod layers;
mod lifecycle;
mod mock_plugin;
mod plugin_cli;
mod podresources;
mod smoke;
mod smoke_corpus;
mod sweep;
mod terminal;
mod terms;
mod topology;
mod transport;
mod vectors;
mod versions;
mod wire;
