//! Shared by the podresources benchmarks: the busy 10,000-pod node they
//! measure, and their environment settings.

use dpctl::proto::podresources::v1;

/// `name` from the environment as a number, or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn numa(id: i64) -> Option<v1::TopologyInfo> {
    Some(v1::TopologyInfo { nodes: vec![v1::NumaNode { id }] })
}

/// A busy GPU node: every pod has a sidecar and a main container holding a
/// GPU (NUMA node 0 or 1, one entry per device as the kubelet sends them),
/// two exclusive CPUs and pinned memory.
pub fn node(pods: usize) -> Vec<v1::PodResources> {
    (0..pods)
        .map(|i| {
            let n = (i % 2) as i64;
            v1::PodResources {
                name: format!("job-{i:05}-worker"),
                namespace: format!("team-{:02}", i % 40),
                containers: vec![
                    v1::ContainerResources { name: "istio-proxy".into(), ..Default::default() },
                    v1::ContainerResources {
                        name: "trainer".into(),
                        devices: vec![v1::ContainerDevices {
                            resource_name: "nvidia.com/gpu".into(),
                            device_ids: vec![format!("GPU-{i:08x}-7a3c-4f1e-9b2d-{:012x}", i * 7919)],
                            topology: numa(n),
                        }],
                        cpu_ids: vec![(2 * i) as i64 % 256, (2 * i + 1) as i64 % 256],
                        memory: vec![v1::ContainerMemory {
                            memory_type: "memory".into(),
                            size: 4 << 30,
                            topology: numa(n),
                        }],
                        dynamic_resources: Vec::new(),
                    },
                ],
                ..Default::default()
            }
        })
        .collect()
}
