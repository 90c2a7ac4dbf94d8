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

/// The compiled `FileDescriptorSet` of every proto in `proto/`.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));
