//! A simulated kubelet device manager: it serves `kubelet.sock` and accepts
//! plugin registrations exactly as a kubelet validates and answers them,
//! tracks devices through ListAndWatch, admits pods (GetPreferredAllocation,
//! Allocate, PreStartContainer), restarts like a kubelet (sockets deleted,
//! checkpoint kept, plugins expected back), and serves PodResources from its
//! own pods and devices.
//!
//! [`KubeletSim::start`] takes a plain [`SimConfig`] and returns a
//! [`SimHandle`] to drive it in-process; `dpctl kubelet-sim` is a thin layer
//! over it, and other processes steer a running sim through [`control`].
//!
//! Where the kubelet's behaviour changed between releases, the sim follows
//! v1.25+ (synchronous Register with dial-back; options from
//! GetDevicePluginOptions) and v1.26+ (`:authority: localhost`); what
//! changed from 1.26 on follows the release played ([`KubeletVersion`]),
//! a second registration of a resource included.
//!
//! The folder reads top-down: this file only declares the modules and names
//! what the rest of dpctl uses. [`SimConfig`] (`config.rs`) says how to run
//! the sim; [`KubeletSim::start`] (`lifecycle.rs`) binds and serves;
//! [`SimHandle`] (`handle.rs`, with `restart.rs` and `reboot.rs`) drives it;
//! every task shares the shell's `Inner` (`shell.rs`), which holds the
//! synchronous device manager (`manager/`) and performs its effects.

pub mod admission;
pub mod checkpoint;
mod config;
pub mod control;
pub mod differences;
mod dra;
mod dra_api;
mod dra_claims;
mod dra_effects;
mod dra_file;
pub mod events;
mod handle;
mod late_socket;
mod lifecycle;
mod manager;
mod outcome;
mod pod;
mod podres;
mod reboot;
mod registration;
mod registry;
mod restart;
mod shell;
pub mod steer;
pub mod topology;
pub mod version;
mod wire;

pub use crate::kubelet_version::{Cleanup, cleanup_dir};
pub use admission::{
    AdmitOutcome, ContainerKind, ContainerOutcome, ContainerSpec, DeleteOutcome, PodSpec, PreferredCall,
    ResourceOutcome, RestartOutcome, UNEXPECTED_ADMISSION_ERROR, Warning,
};
pub use checkpoint::CheckpointStatus;
pub use config::{
    DEFAULT_DIAL_TIMEOUT, DEFAULT_DRA_WIPING_DELAY, DEFAULT_GET_INFO_TIMEOUT, DEFAULT_GRACE_PERIOD,
    DEFAULT_PRE_START_TIMEOUT, DEFAULT_RPC_TIMEOUT, MAX_RESOURCES, SimConfig,
};
pub use dra_file::MARKER_NAME as DRA_MARKER_NAME;
pub use events::{ContainerDevicesView, EventKind, RequestOptions, SimEvent, Via};
pub use handle::SimHandle;
pub use lifecycle::KubeletSim;
pub use manager::{ApiView, ClaimInfo, DraInstance, DraStatus, PreparedDevice};
pub use manager::{PodStatus, ResourceStatus, RestoredContainer, RestoredPodStatus, SimStatus, default_engine};
pub use outcome::{DraCall, DraOutcome, ResourceReturn, RestartReport};
pub use reboot::{RebootReport, seeded_order};
pub use registration::{DIAL_FAILED, go_rpc_error};
pub use version::{CleanupRule, KubeletVersion};
