//! Generated kubelet API types (from `proto/`) and the API constants that go
//! with them. Every other module takes its wire types from here.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// Device plugin API v1beta1 (`v1beta1.Registration`, `v1beta1.DevicePlugin`).
pub mod deviceplugin {
    pub mod v1beta1 {
        tonic::include_proto!("v1beta1");

        /// The only API version current kubelets accept in `RegisterRequest.version`.
        pub const VERSION: &str = "v1beta1";
        /// `SupportedVersions` of the kubelet.
        pub const SUPPORTED_VERSIONS: &[&str] = &[VERSION];
        /// Health value of a usable device. Any other string means unhealthy.
        pub const HEALTHY: &str = "Healthy";
        /// Health value of an unusable device.
        pub const UNHEALTHY: &str = "Unhealthy";
    }
}

/// Plugin-watcher registration API (`pluginregistration.Registration`).
pub mod pluginregistration {
    tonic::include_proto!("pluginregistration");

    /// `PluginInfo.type` of a device plugin.
    pub const DEVICE_PLUGIN_TYPE: &str = "DevicePlugin";
    /// `PluginInfo.type` of a DRA driver's kubelet plugin; `name` is then the
    /// driver name and `supported_versions` lists gRPC services (docs/dra.md §1).
    pub const DRA_PLUGIN_TYPE: &str = "DRAPlugin";
}

/// PodResources API, v1 and v1alpha1.
pub mod podresources {
    pub mod v1 {
        tonic::include_proto!("v1");
    }
    pub mod v1alpha1 {
        tonic::include_proto!("v1alpha1");
    }
}

/// DRA kubelet plugin APIs (docs/dra.md §1). The node service's wire name
/// is not the string a driver advertises in `supported_versions`: the
/// `SERVICE` constants are the advertised strings.
pub mod dra {
    /// `k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin` (kubelet 1.34+).
    pub mod v1 {
        tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1");
        /// What a driver lists in `supported_versions` for this service.
        pub const SERVICE: &str = "v1.DRAPlugin";
    }
    /// `k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin` (kubelet 1.32+, deprecated in 1.34).
    pub mod v1beta1 {
        tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1beta1");
        /// What a driver lists in `supported_versions` for this service.
        pub const SERVICE: &str = "v1beta1.DRAPlugin";
    }
    /// Device health (`DRAResourceHealth`); here the advertised string is the wire name.
    pub mod health {
        /// `v1alpha1.DRAResourceHealth` (kubelet 1.34+). Its package is
        /// `v1alpha1`, the same as PodResources v1alpha1: prost puts both in
        /// one module, re-exported here by name.
        pub mod v1alpha1 {
            pub use crate::proto::podresources::v1alpha1::{
                DeviceHealth, DeviceIdentifier, HealthStatus, NodeWatchResourcesRequest, NodeWatchResourcesResponse,
                dra_resource_health_client, dra_resource_health_server,
            };
            /// The advertised string and the wire service name.
            pub const SERVICE: &str = "v1alpha1.DRAResourceHealth";
        }
        /// `v1.DRAResourceHealth` (kubelet 1.37+), same messages as v1alpha1
        /// (package `v1`, shared with PodResources v1).
        pub mod v1 {
            pub use crate::proto::podresources::v1::{
                DeviceHealth, DeviceIdentifier, HealthStatus, NodeWatchResourcesRequest, NodeWatchResourcesResponse,
                dra_resource_health_client, dra_resource_health_server,
            };
            /// The advertised string and the wire service name.
            pub const SERVICE: &str = "v1.DRAResourceHealth";
        }
    }
}

/// The compiled `FileDescriptorSet` of every proto in `proto/`.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));
