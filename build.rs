//! Compiles the kubelet protos in `proto/` with protox (no system `protoc`)
//! and generates prost messages plus tonic clients and servers into OUT_DIR.

use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "deviceplugin/v1beta1/api.proto",
    "dra/v1/api.proto",
    "dra/v1beta1/api.proto",
    "dra-health/v1alpha1/api.proto",
    "dra-health/v1/api.proto",
    "pluginregistration/v1/api.proto",
    "podresources/v1/api.proto",
    "podresources/v1alpha1/api.proto",
];

/// The subset of the Kubernetes API's protobuf schema that client-go sends
/// for ResourceSlice writes (see proto/README.md).
const K8S_PROTOS: &[&str] = &["k8s/resource_v1.proto", "k8s/meta_v1.proto", "k8s/runtime.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(PROTOS, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("descriptors.bin"), prost::Message::encode_to_vec(&fds))?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(fds)?;
    // The Kubernetes API objects dpctl apiserver decodes from protobuf:
    // descriptors only (read with prost-reflect), no generated code.
    let k8s = protox::compile(K8S_PROTOS, ["proto"])?;
    std::fs::write(out.join("k8s-descriptors.bin"), prost::Message::encode_to_vec(&k8s))?;
    Ok(())
}
