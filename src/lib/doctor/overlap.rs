//! A device plugin and a DRA driver serving the same hardware on one node.
//!
//! The kubelet keeps the two apart: the device manager counts what device
//! plugins advertise, the DRA manager prepares what the scheduler allocated
//! from ResourceSlices, and neither knows the other's devices. A node where
//! both serve one GPU hands it out twice (docs/dra.md §9).
//!
//! The rule, on what doctor can read without calling Allocate or Prepare:
//! - **same device (error)**: a host device node (or a CDI device name)
//!   that the checkpoint's Allocate answers gave a container is also in a
//!   CDI device a DRA driver prepared (the CDI IDs of `dra_manager_state`
//!   and of PodResources' `dynamic_resources`, resolved in the CDI specs):
//!   both hand it out now;
//! - **same hardware (warning)**: such a device node is in a CDI device a
//!   registered DRA driver's spec defines (the spec's vendor is the driver
//!   name or ends in `.<driver>`), not prepared now: the driver can hand it
//!   out next;
//! - **same vendor (warning, weak)**: a device-plugin resource's domain
//!   and a DRA driver name match (`example.com/gpu` and `gpu.example.com`)
//!   and no device node links them either way: both may serve the vendor's
//!   devices, or different ones.
//!
//! Only a device's own device nodes count on the DRA side; the spec-wide
//! ones (control nodes every container of the vendor gets) are left out.
//! A device plugin's device nodes are known only from Allocate answers the
//! kubelet checkpointed: a plugin whose devices are not in use shows none.

use std::collections::{BTreeMap, BTreeSet};

use super::cdi::CdiRegistry;
use super::{Out, Severity};

/// What the device manager handed out, from one checkpoint entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DpUse {
    /// The extended resource.
    pub resource: String,
    /// Pod UID and container.
    pub pod: String,
    /// The container.
    pub container: String,
    /// Host paths of the answer's `devices`.
    pub nodes: Vec<String>,
    /// CDI device names of the answer.
    pub cdi: Vec<String>,
}

/// One CDI ID a DRA driver prepared for a claim.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct DraUse {
    /// The driver.
    pub driver: String,
    /// `namespace/name` of the claim.
    pub claim: String,
    /// The CDI ID.
    pub cdi_id: String,
    /// Where doctor read it (`dra_manager_state`, `PodResources`).
    pub source: &'static str,
}

/// Where a DRA driver's device node comes from.
struct DraNode {
    driver: String,
    what: String,
    prepared: bool,
}

/// `vendor` of a `vendor/class=name` CDI name.
fn vendor(name: &str) -> &str {
    name.split('/').next().unwrap_or_default()
}

/// A CDI vendor belongs to a driver: the same name, or a subdomain of it.
fn vendor_of_driver(vendor: &str, driver: &str) -> bool {
    vendor == driver || vendor.strip_suffix(driver).is_some_and(|p| p.ends_with('.'))
}

/// A resource's domain and a driver name share a vendor: equal, or one a
/// subdomain of the other (`example.com/gpu` and `gpu.example.com`).
fn same_vendor(resource: &str, driver: &str) -> bool {
    let Some((domain, _)) = resource.split_once('/') else { return false };
    vendor_of_driver(driver, domain) || vendor_of_driver(domain, driver)
}

/// Every device node (host path) a DRA driver prepared or can hand out.
fn dra_nodes(prepared: &[DraUse], drivers: &BTreeSet<String>, reg: &CdiRegistry) -> BTreeMap<String, Vec<DraNode>> {
    let mut by_node: BTreeMap<String, Vec<DraNode>> = BTreeMap::new();
    let mut taken = BTreeSet::new();
    for u in prepared {
        let Some((nodes, spec)) = reg.devices.get(&u.cdi_id) else { continue };
        taken.insert(u.cdi_id.clone());
        for n in nodes {
            let what =
                format!("claim {} through CDI device {} ({}; spec {})", u.claim, u.cdi_id, u.source, spec.display());
            by_node.entry(n.clone()).or_default().push(DraNode { driver: u.driver.clone(), what, prepared: true });
        }
    }
    for (name, (nodes, spec)) in &reg.devices {
        let Some(driver) = drivers.iter().find(|d| vendor_of_driver(vendor(name), d)) else { continue };
        if taken.contains(name) {
            continue;
        }
        for n in nodes {
            let what = format!("CDI device {name} of spec {} (not prepared now)", spec.display());
            by_node.entry(n.clone()).or_default().push(DraNode { driver: driver.clone(), what, prepared: false });
        }
    }
    by_node
}

/// Judges the node: one finding per device node (or CDI name) both hand
/// out, a weak one per (resource, driver) of the same vendor not linked
/// by a device node, and an ok finding when both kinds run and nothing
/// links them.
pub(super) fn check(
    dp: &[DpUse],
    dp_resources: &BTreeSet<String>,
    prepared: &[DraUse],
    drivers: &BTreeSet<String>,
    reg: &CdiRegistry,
    out: &mut Out,
) {
    let dra = dra_nodes(prepared, drivers, reg);
    let mut linked: BTreeSet<(String, String)> = BTreeSet::new();
    let mut reported = BTreeSet::new();
    for u in dp {
        let via_cdi = u.cdi.iter().flat_map(|c| reg.devices.get(c).map(|(n, _)| n.clone()).unwrap_or_default());
        for node in u.nodes.iter().cloned().chain(via_cdi) {
            let Some(users) = dra.get(&node) else { continue };
            for d in users {
                linked.insert((u.resource.clone(), d.driver.clone()));
                if reported.insert((node.clone(), d.driver.clone(), u.pod.clone(), u.container.clone())) {
                    same_node(u, &node, d, out);
                }
            }
        }
        for id in &u.cdi {
            for d in prepared.iter().filter(|d| &d.cdi_id == id) {
                linked.insert((u.resource.clone(), d.driver.clone()));
                if reported.insert((id.clone(), d.driver.clone(), u.pod.clone(), u.container.clone())) {
                    same_cdi_name(u, id, d, out);
                }
            }
        }
    }
    let mut vendor_pairs = 0;
    for r in dp_resources {
        for d in drivers.iter().filter(|d| same_vendor(r, d) && !linked.contains(&(r.clone(), (*d).clone()))) {
            vendor_pairs += 1;
            out.hint(
                Severity::Warning,
                ("dp-dra", "dp-dra-same-vendor"),
                format!("{r} ~ {d}"),
                format!(
                    "device-plugin resource {r} and DRA driver {d} share a vendor domain; no device node was seen \
                     handed out by both (a device plugin's device nodes are known only from the Allocate answers \
                     in its checkpoint)"
                ),
                "if both serve the same devices, each can hand one out while the other has: run one of them per \
                 node (label the nodes and select on the label), or move to the DRA driver alone",
            );
        }
    }
    if linked.is_empty() && vendor_pairs == 0 && !dp_resources.is_empty() && !drivers.is_empty() {
        out.add(
            Severity::Ok,
            ("dp-dra", "dp-dra-distinct"),
            "device plugins and DRA drivers",
            format!(
                "no device node or CDI device handed out by both (device-plugin resources {}; DRA drivers {})",
                dp_resources.iter().cloned().collect::<Vec<_>>().join(", "),
                drivers.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        );
    }
}

const BOTH_HINT: &str = "the device manager and the DRA manager do not know each other's devices, so one device \
     goes to two pods: run either the device plugin or the DRA driver for this hardware on a node (label the nodes \
     and select on the label)";

fn same_node(u: &DpUse, node: &str, d: &DraNode, out: &mut Out) {
    let (severity, code, verb) = if d.prepared {
        (Severity::Error, "dp-dra-same-device", "prepared it for")
    } else {
        (Severity::Warning, "dp-dra-same-hardware", "can hand it out:")
    };
    out.hint(
        severity,
        ("dp-dra", code),
        node.to_string(),
        format!(
            "device plugin resource {} gave it to pod {} container {} (checkpoint's Allocate answer); DRA driver {} \
             {verb} {}",
            u.resource, u.pod, u.container, d.driver, d.what
        ),
        BOTH_HINT,
    );
}

fn same_cdi_name(u: &DpUse, id: &str, d: &DraUse, out: &mut Out) {
    out.hint(
        Severity::Error,
        ("dp-dra", "dp-dra-same-device"),
        id.to_string(),
        format!(
            "device plugin resource {} gave CDI device {id} to pod {} container {} (checkpoint's Allocate answer); \
             DRA driver {} prepared the same CDI device for claim {} ({})",
            u.resource, u.pod, u.container, d.driver, d.claim, d.source
        ),
        BOTH_HINT,
    );
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn reg(devices: &[(&str, &[&str])]) -> CdiRegistry {
        let mut r = CdiRegistry::default();
        for (name, nodes) in devices {
            let nodes = nodes.iter().map(|n| (*n).to_string()).collect();
            r.devices.insert((*name).to_string(), (nodes, PathBuf::from("/var/run/cdi/x.json")));
            r.names.insert((*name).to_string());
        }
        r
    }

    fn dp(nodes: &[&str], cdi: &[&str]) -> DpUse {
        DpUse {
            resource: "example.com/gpu".into(),
            pod: "pod-1".into(),
            container: "main".into(),
            nodes: nodes.iter().map(|n| (*n).to_string()).collect(),
            cdi: cdi.iter().map(|n| (*n).to_string()).collect(),
        }
    }

    fn prepared(id: &str) -> DraUse {
        DraUse {
            driver: "gpu.example.com".into(),
            claim: "default/gpu-claim".into(),
            cdi_id: id.into(),
            source: "dra_manager_state",
        }
    }

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    fn run(dp_uses: &[DpUse], prep: &[DraUse], reg: &CdiRegistry) -> Vec<super::super::Finding> {
        let mut out = Out(Vec::new());
        check(dp_uses, &set(&["example.com/gpu"]), prep, &set(&["gpu.example.com"]), reg, &mut out);
        out.0
    }

    #[test]
    fn a_node_both_hand_out_now_is_an_error_with_both_sides_named() {
        let r = reg(&[("gpu.example.com/claim=pool-0-dev-0", &["/dev/gpu0"])]);
        let f = run(&[dp(&["/dev/gpu0", "/dev/ctl"], &[])], &[prepared("gpu.example.com/claim=pool-0-dev-0")], &r);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            (f[0].severity, f[0].code.as_str(), f[0].subject.as_str()),
            (Severity::Error, "dp-dra-same-device", "/dev/gpu0")
        );
        assert!(f[0].evidence.contains("example.com/gpu gave it to pod pod-1 container main"), "{}", f[0].evidence);
        assert!(
            f[0].evidence.contains("claim default/gpu-claim through CDI device gpu.example.com/claim=pool-0-dev-0")
        );
    }

    #[test]
    fn a_node_the_driver_defines_but_has_not_prepared_is_a_warning() {
        let r = reg(&[("gpu.example.com/claim=dev-1", &["/dev/gpu1"]), ("other.io/x=a", &["/dev/gpu1"])]);
        let f = run(&[dp(&["/dev/gpu1"], &[])], &[], &r);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].severity, f[0].code.as_str()), (Severity::Warning, "dp-dra-same-hardware"));
        assert!(f[0].evidence.contains("not prepared now"));
    }

    /// The same CDI name from both sides (a plugin answering CDI names, the
    /// driver's spec defining it) is the same device even without nodes.
    #[test]
    fn the_same_cdi_name_is_the_same_device() {
        let f = run(&[dp(&[], &["vendor.com/gpu=0"])], &[prepared("vendor.com/gpu=0")], &reg(&[]));
        assert_eq!(f[0].code, "dp-dra-same-device");
        assert_eq!(f[0].subject, "vendor.com/gpu=0");
    }

    /// Only the vendor links them: a weak warning. Different nodes on both
    /// sides and different vendors: an ok finding saying so.
    #[test]
    fn vendor_alone_is_a_weak_warning_and_disjoint_nodes_are_ok() {
        let r = reg(&[("gpu.example.com/claim=dev-0", &["/dev/gpu0"])]);
        let f = run(&[dp(&["/dev/other"], &[])], &[prepared("gpu.example.com/claim=dev-0")], &r);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].severity, f[0].code.as_str()), (Severity::Warning, "dp-dra-same-vendor"));
        assert_eq!(f[0].subject, "example.com/gpu ~ gpu.example.com");
        let mut out = Out(Vec::new());
        check(&[], &set(&["vendor.com/nic"]), &[], &set(&["gpu.example.com"]), &r, &mut out);
        assert_eq!(out.0[0].code, "dp-dra-distinct");
        let mut out = Out(Vec::new());
        check(&[], &set(&[]), &[], &set(&["gpu.example.com"]), &r, &mut out);
        assert!(out.0.is_empty(), "no device plugin: nothing to compare");
    }

    #[test]
    fn vendor_matching_is_by_whole_labels() {
        assert!(same_vendor("example.com/gpu", "gpu.example.com"));
        assert!(same_vendor("example.com/gpu", "example.com"));
        assert!(same_vendor("gpu.example.com/x", "example.com"));
        assert!(!same_vendor("example.com/gpu", "gpu.badexample.com"));
        assert!(!same_vendor("gpu", "gpu.example.com"));
        assert!(vendor_of_driver("k8s.gpu.example.com", "gpu.example.com"));
        assert!(!vendor_of_driver("xgpu.example.com", "gpu.example.com"));
    }
}
