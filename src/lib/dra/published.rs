//! The devices a driver publishes, and the devices it prepares held
//! against them.
//!
//! The scheduler allocates a claim only devices of a pool's current
//! generation: `GatherPools` in k8s.io/dynamic-resource-allocation
//! `structured/pools.go` keeps, per pool, the slices with the highest
//! `spec.pool.generation` and drops the older ones. So a driver that
//! answers NodePrepareResources with a device that no current slice of its
//! own publishes (a typo in the device name, a pool it never published, a
//! device it took out of the pool) hands a container something the cluster
//! never allocated: the kubelet does not check (its `prepareResources` in
//! pkg/kubelet/cm/dra/manager.go copies the answer into its cache as it
//! is), so dpctl does.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// A driver's published pools: per pool, its current generation and the
/// devices of the slices at that generation, and the devices of older ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pools {
    pools: BTreeMap<String, Pool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Pool {
    generation: i64,
    current: BTreeSet<String>,
    stale: BTreeMap<String, i64>,
}

impl Pools {
    /// The pools of `driver` in `slices` (ResourceSlice objects, any node).
    pub fn of(slices: &[Value], driver: &str) -> Pools {
        let mut pools: BTreeMap<String, Pool> = BTreeMap::new();
        let text = |s: &Value, p: &str| s.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
        let ours = slices.iter().filter(|s| text(s, "/spec/driver") == driver);
        for s in ours {
            let name = text(s, "/spec/pool/name");
            let generation = s.pointer("/spec/pool/generation").and_then(Value::as_i64).unwrap_or(0);
            let devices = s.pointer("/spec/devices").and_then(Value::as_array).cloned().unwrap_or_default();
            let names = devices.iter().filter_map(|d| d.get("name").and_then(Value::as_str)).map(String::from);
            let pool = pools.entry(name).or_default();
            if generation > pool.generation || pool.current.is_empty() && pool.stale.is_empty() {
                let old = std::mem::take(&mut pool.current);
                pool.stale.extend(old.into_iter().map(|d| (d, pool.generation)));
                pool.generation = generation;
            }
            if generation == pool.generation {
                pool.current.extend(names);
            } else {
                pool.stale.extend(names.map(|d| (d, generation)));
            }
        }
        for p in pools.values_mut() {
            let current = p.current.clone();
            p.stale.retain(|d, _| !current.contains(d));
        }
        Pools { pools }
    }

    /// No slice of the driver was seen.
    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }

    /// How many devices the current generations publish.
    pub fn device_count(&self) -> usize {
        self.pools.values().map(|p| p.current.len()).sum()
    }

    /// What is wrong with preparing `device` of `pool`, or None when a
    /// current slice publishes it.
    pub fn problem(&self, driver: &str, pool: &str, device: &str) -> Option<String> {
        let Some(p) = self.pools.get(pool) else {
            let known: Vec<&str> = self.pools.keys().map(String::as_str).collect();
            return Some(format!(
                "prepared {pool}/{device}, but driver {driver} publishes no pool {pool:?} (its pools: {})",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ));
        };
        if p.current.contains(device) {
            return None;
        }
        Some(match p.stale.get(device) {
            Some(g) => format!(
                "prepared {pool}/{device}, which only generation {g} of pool {pool} publishes; the current \
                 generation is {} (the scheduler allocates from it alone)",
                p.generation
            ),
            None => format!(
                "prepared {pool}/{device}, which no ResourceSlice of driver {driver} publishes (pool {pool} \
                 generation {} has {})",
                p.generation,
                crate::text::count(p.current.len(), "device", "devices")
            ),
        })
    }

    /// The problems of every (pool, device) prepared.
    pub fn problems<'a>(&self, driver: &str, prepared: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
        prepared.into_iter().filter_map(|(pool, device)| self.problem(driver, pool, device)).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn slice(driver: &str, pool: &str, generation: i64, devices: &[&str]) -> Value {
        let devices: Vec<Value> = devices.iter().map(|d| json!({"name": d})).collect();
        json!({"spec": {"driver": driver, "pool": {"name": pool, "generation": generation}, "devices": devices}})
    }

    #[test]
    fn a_published_device_of_the_current_generation_is_fine() {
        let pools = Pools::of(&[slice("d.x", "pool-0", 1, &["dev-0", "dev-1"])], "d.x");
        assert!(pools.problems("d.x", [("pool-0", "dev-1")]).is_empty());
        assert_eq!(pools.device_count(), 2);
    }

    #[test]
    fn an_unpublished_device_and_an_unpublished_pool_are_named() {
        let pools = Pools::of(&[slice("d.x", "pool-0", 1, &["dev-0"])], "d.x");
        let p = pools.problems("d.x", [("pool-0", "dev-9"), ("pool-7", "dev-0")]);
        assert!(p[0].contains("pool-0/dev-9, which no ResourceSlice of driver d.x publishes"), "{p:?}");
        assert!(p[1].contains("publishes no pool \"pool-7\" (its pools: pool-0)"), "{p:?}");
    }

    #[test]
    fn a_device_only_an_older_generation_publishes_is_stale() {
        for order in [[0, 1], [1, 0]] {
            let s = [slice("d.x", "pool-0", 1, &["dev-0", "dev-1"]), slice("d.x", "pool-0", 2, &["dev-0"])];
            let pools = Pools::of(&[s[order[0]].clone(), s[order[1]].clone()], "d.x");
            let p = pools.problems("d.x", [("pool-0", "dev-0"), ("pool-0", "dev-1")]);
            assert_eq!(p.len(), 1, "{p:?}");
            assert!(p[0].contains("only generation 1 of pool pool-0"), "{p:?}");
        }
    }

    #[test]
    fn other_drivers_slices_do_not_count() {
        let pools = Pools::of(&[slice("other.x", "pool-0", 1, &["dev-0"])], "d.x");
        assert!(pools.is_empty());
        assert_eq!(pools.problems("d.x", [("pool-0", "dev-0")]).len(), 1);
    }
}
