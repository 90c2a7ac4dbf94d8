//! Where the kubelet keeps things on a node: its own paths and file names,
//! facts of the kubelet's code (dpctl's `paths` adds the overrides).

/// The kubelet's device-plugin directory (hard-coded in the kubelet; it does
/// not follow `--root-dir`).
pub const DEFAULT_DEVICE_PLUGIN_DIR: &str = "/var/lib/kubelet/device-plugins";
/// The kubelet's registration socket, inside the device-plugin directory.
pub const KUBELET_SOCKET_NAME: &str = "kubelet.sock";
/// The device manager's checkpoint file, inside the device-plugin directory.
pub const CHECKPOINT_FILE_NAME: &str = "kubelet_internal_checkpoint";
/// The PodResources socket of a kubelet with the default `--root-dir`.
pub const DEFAULT_PODRESOURCES_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
/// The kubelet's plugin-watcher directory.
pub const DEFAULT_PLUGINS_REGISTRY_DIR: &str = "/var/lib/kubelet/plugins_registry";
