//! CDI in doctor: the spec reader ([`crate::cdi_spec`]) and the CDI names
//! an Allocate answer asks for.

pub use crate::cdi_spec::{CdiRegistry, read_dirs};

/// CDI names an Allocate answer asks for: `cdi_devices`, and the values of
/// `cdi.k8s.io/*` annotations (comma-separated).
pub fn names_in(alloc: &crate::model::ContainerAllocation) -> Vec<String> {
    let mut out: Vec<String> = alloc.cdi_devices.clone();
    for (k, v) in &alloc.annotations {
        if k.starts_with("cdi.k8s.io/") {
            out.extend(v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from));
        }
    }
    out
}
