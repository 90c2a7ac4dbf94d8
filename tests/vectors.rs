//! The protos against wire vectors encoded by Google's protobuf runtime
//! (tests/data/wire-vectors.json): every vector decodes into dpctl's generated
//! types and re-encodes byte for byte (except those marked decode_only), and
//! its JSON content, read with dpctl's own descriptors, encodes to the same bytes.

use dpctl::proto::{deviceplugin::v1beta1 as dp, pluginregistration as reg, podresources::v1, podresources::v1alpha1};
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};

/// Decodes `bytes` as the generated type named `name` and re-encodes it.
fn roundtrip(name: &str, bytes: &[u8]) -> Vec<u8> {
    fn rt<M: Message + Default>(b: &[u8]) -> Vec<u8> {
        M::decode(b).expect("decodes into the generated type").encode_to_vec()
    }
    match name {
        "v1beta1.Empty" => rt::<dp::Empty>(bytes),
        "v1beta1.DevicePluginOptions" => rt::<dp::DevicePluginOptions>(bytes),
        "v1beta1.RegisterRequest" => rt::<dp::RegisterRequest>(bytes),
        "v1beta1.ListAndWatchResponse" => rt::<dp::ListAndWatchResponse>(bytes),
        "v1beta1.PreferredAllocationRequest" => rt::<dp::PreferredAllocationRequest>(bytes),
        "v1beta1.PreferredAllocationResponse" => rt::<dp::PreferredAllocationResponse>(bytes),
        "v1beta1.AllocateRequest" => rt::<dp::AllocateRequest>(bytes),
        "v1beta1.AllocateResponse" => rt::<dp::AllocateResponse>(bytes),
        "v1beta1.PreStartContainerRequest" => rt::<dp::PreStartContainerRequest>(bytes),
        "v1beta1.PreStartContainerResponse" => rt::<dp::PreStartContainerResponse>(bytes),
        "v1.ListPodResourcesRequest" => rt::<v1::ListPodResourcesRequest>(bytes),
        "v1.ListPodResourcesResponse" => rt::<v1::ListPodResourcesResponse>(bytes),
        "v1.AllocatableResourcesRequest" => rt::<v1::AllocatableResourcesRequest>(bytes),
        "v1.AllocatableResourcesResponse" => rt::<v1::AllocatableResourcesResponse>(bytes),
        "v1.GetPodResourcesRequest" => rt::<v1::GetPodResourcesRequest>(bytes),
        "v1.GetPodResourcesResponse" => rt::<v1::GetPodResourcesResponse>(bytes),
        "v1alpha1.ListPodResourcesResponse" => rt::<v1alpha1::ListPodResourcesResponse>(bytes),
        "pluginregistration.InfoRequest" => rt::<reg::InfoRequest>(bytes),
        "pluginregistration.PluginInfo" => rt::<reg::PluginInfo>(bytes),
        "pluginregistration.RegistrationStatus" => rt::<reg::RegistrationStatus>(bytes),
        "pluginregistration.RegistrationStatusResponse" => rt::<reg::RegistrationStatusResponse>(bytes),
        other => panic!("vector for a message this test does not know: {other}"),
    }
}

/// Proto JSON with upstream field names and default values left out, so that
/// an explicit `false` in a vector equals an absent proto3 field on the wire.
fn canonical(m: &DynamicMessage) -> serde_json::Value {
    let opts = prost_reflect::SerializeOptions::new().use_proto_field_name(true).skip_default_fields(true);
    m.serialize_with_options(serde_json::value::Serializer, &opts).unwrap()
}

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

#[test]
fn every_vector_roundtrips_through_the_generated_types() {
    let file: serde_json::Value = serde_json::from_str(include_str!("data/wire-vectors.json")).unwrap();
    let pool = DescriptorPool::decode(dpctl::proto::FILE_DESCRIPTOR_SET).unwrap();
    let vectors = file["vectors"].as_array().unwrap();
    assert!(vectors.len() >= 20, "expected the full vector set");
    for v in vectors {
        let name = v["message"].as_str().unwrap();
        let bytes = hex_decode(v["hex"].as_str().unwrap());
        let decode_only = v["decode_only"].as_bool().unwrap_or(false);

        // 1. Generated types: decode, re-encode (prost drops unknown fields, so a
        //    wrong number or type shows up as different bytes or a decode error).
        let again = roundtrip(name, &bytes);
        let desc = pool.get_message_by_name(name).unwrap_or_else(|| panic!("{name} missing from dpctl's protos"));
        if decode_only {
            assert_eq!(again.len(), bytes.len(), "{name}: re-encoded length differs");
            let a = DynamicMessage::decode(desc.clone(), again.as_slice()).unwrap();
            let b = DynamicMessage::decode(desc.clone(), bytes.as_slice()).unwrap();
            assert_eq!(a, b, "{name}: content differs after re-encoding");
        } else {
            assert_eq!(again, bytes, "{name}: re-encoding is not byte-identical");
        }

        // 2. Content: the vector's JSON (upstream proto field names) read with
        //    dpctl's descriptors must be exactly the decoded message.
        let content = v["content"].to_string();
        let mut de = serde_json::Deserializer::from_str(&content);
        let from_json = DynamicMessage::deserialize(desc.clone(), &mut de)
            .unwrap_or_else(|e| panic!("{name}: content does not fit dpctl's proto ({e})"));
        let from_wire = DynamicMessage::decode(desc, bytes.as_slice()).unwrap();
        assert_eq!(
            canonical(&from_json),
            canonical(&from_wire),
            "{name}: decoded content differs from the vector's content"
        );
        if !decode_only {
            assert_eq!(from_json.encode_to_vec(), bytes, "{name}: content encodes differently");
        }
    }
}

#[test]
fn field_names_as_prost_generates_them() {
    // The upstream field names carry over as the spec predicts; NUMA node 0 is kept.
    let d = dp::ListAndWatchResponse::decode(hex_decode("0a140a056465762d3212074865616c7468791a020a00").as_slice())
        .unwrap();
    assert_eq!(d.devices[0].id, "dev-2");
    assert_eq!(d.devices[0].topology.as_ref().unwrap().nodes[0].id, 0);
    let p = dp::ContainerPreferredAllocationRequest::default();
    let _ = (&p.available_device_i_ds, &p.must_include_device_i_ds);
}
