//! Sizes the kubelet bounds, which dpctl's clients, servers and checks share.

/// The kubelet's receive limit for device-plugin messages, every release
/// (grpc-go's default, which the device manager does not raise).
pub const KUBELET_MAX_RECV: usize = 4 * 1024 * 1024;
