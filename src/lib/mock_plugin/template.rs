//! Allocate answer templates: an [`AllocateConfig`]'s strings (with `{ids}`,
//! `{count}`, `{resource}`, and the per-device `{id}` and `{index}`),
//! compiled once and expanded per container request.

use std::collections::HashMap;

use super::config::AllocateConfig;
use super::placeholder::{Template, Values};
use crate::proto::deviceplugin::v1beta1 as dp;

/// Calls `f` once, or once per device (with its index) when `per_device`.
fn each(per_device: bool, v: &Values<'_>, mut f: impl FnMut(usize)) {
    if per_device {
        (0..v.ids.len()).for_each(&mut f);
    } else {
        f(0);
    }
}

/// Most bytes the strings of one Allocate answer (all its containers) may
/// expand to. A per-device entry that holds `{ids}` grows with the square of
/// the devices asked for: 10,000 devices made gigabytes and aborted the
/// mock. 16 times the 4 MiB a kubelet accepts, so an oversize answer can
/// still be sent on purpose.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// What is left of [`MAX_ANSWER_BYTES`] while an answer is rendered.
#[derive(Debug)]
pub struct Budget {
    left: usize,
    over: bool,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { left: MAX_ANSWER_BYTES, over: false }
    }
}

impl Budget {
    /// `t` expanded for device `i`, charged to the budget; empty once over.
    fn expand(&mut self, t: &Template, v: &Values<'_>, i: usize) -> String {
        if self.over {
            return String::new();
        }
        let s = t.expand(v, i);
        match self.left.checked_sub(s.len()) {
            Some(left) => self.left = left,
            None => self.over = true,
        }
        if self.over { String::new() } else { s }
    }
}

/// A compiled Allocate answer.
#[derive(Debug, Clone)]
pub struct AllocateTemplate {
    envs: Vec<(Template, Template)>,
    annotations: Vec<(Template, Template)>,
    mounts: Vec<(Template, Template, bool)>,
    devices: Vec<(Template, Template, String)>,
    cdi_devices: Vec<Template>,
}

impl AllocateTemplate {
    /// Compiles a config (already checked by `MockConfig::check`).
    pub fn compile(c: &AllocateConfig) -> Result<Self, String> {
        let pair = |(k, v): (&String, &String)| Ok::<_, String>((Template::parse(k)?, Template::parse(v)?));
        Ok(AllocateTemplate {
            envs: c.envs.iter().map(pair).collect::<Result<_, _>>()?,
            annotations: c.annotations.iter().map(pair).collect::<Result<_, _>>()?,
            mounts: c
                .mounts
                .iter()
                .map(|m| Ok((Template::parse(&m.container_path)?, Template::parse(&m.host_path)?, m.read_only)))
                .collect::<Result<_, String>>()?,
            devices: c
                .devices
                .iter()
                .map(|d| {
                    Ok((Template::parse(&d.container_path)?, Template::parse(&d.host_path)?, d.permissions.clone()))
                })
                .collect::<Result<_, String>>()?,
            cdi_devices: c.cdi_devices.iter().map(|t| Template::parse(t)).collect::<Result<_, _>>()?,
        })
    }

    /// The answer for one container that was given `ids`, charged to
    /// `budget` (one per Allocate call); an error once it would be over.
    pub fn render(
        &self,
        ids: &[String],
        resource: &str,
        budget: &mut Budget,
    ) -> Result<dp::ContainerAllocateResponse, String> {
        let v = Values { ids, resource };
        let map = |pairs: &[(Template, Template)], b: &mut Budget| {
            let mut out = HashMap::new();
            for (k, val) in pairs {
                each(k.per_device() || val.per_device(), &v, |i| {
                    let key = b.expand(k, &v, i);
                    let value = b.expand(val, &v, i);
                    if !b.over {
                        out.insert(key, value);
                    }
                });
            }
            out
        };
        let envs = map(&self.envs, budget);
        let annotations = map(&self.annotations, budget);
        let mut mounts = Vec::new();
        for (c, h, ro) in &self.mounts {
            each(c.per_device() || h.per_device(), &v, |i| {
                let (container_path, host_path) = (budget.expand(c, &v, i), budget.expand(h, &v, i));
                if !budget.over {
                    mounts.push(dp::Mount { container_path, host_path, read_only: *ro });
                }
            });
        }
        let mut devices = Vec::new();
        for (c, h, perm) in &self.devices {
            each(c.per_device() || h.per_device(), &v, |i| {
                let (container_path, host_path) = (budget.expand(c, &v, i), budget.expand(h, &v, i));
                if !budget.over {
                    devices.push(dp::DeviceSpec { container_path, host_path, permissions: perm.clone() });
                }
            });
        }
        let mut cdi_devices = Vec::new();
        for c in &self.cdi_devices {
            each(c.per_device(), &v, |i| {
                let name = budget.expand(c, &v, i);
                if !budget.over {
                    cdi_devices.push(dp::CdiDevice { name });
                }
            });
        }
        if budget.over {
            return Err(format!(
                "the Allocate answer templates expand to over {MAX_ANSWER_BYTES} bytes for {} \
                 (the kubelet accepts 4 MiB); per-device entries with {{ids}} grow with the square of the devices",
                crate::text::count(ids.len(), "device", "devices")
            ));
        }
        Ok(dp::ContainerAllocateResponse { envs, mounts, devices, annotations, cdi_devices })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock_plugin::config::{DeviceSpecConfig, MountConfig};

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn per_device_entries_repeat() {
        let c = AllocateConfig {
            envs: [("VISIBLE".to_string(), "{ids}".to_string()), ("DEV_{index}".to_string(), "{id}".to_string())]
                .into(),
            annotations: Default::default(),
            mounts: vec![MountConfig { container_path: "/data".into(), host_path: "/srv".into(), read_only: true }],
            devices: vec![DeviceSpecConfig {
                container_path: "/dev/{id}".into(),
                host_path: "/dev/null".into(),
                permissions: "rw".into(),
            }],
            cdi_devices: vec!["example.com/gpu={id}".into()],
        };
        let t = AllocateTemplate::compile(&c).unwrap();
        let r = t.render(&ids(&["G1", "G2"]), "example.com/gpu", &mut Budget::default()).unwrap();
        assert_eq!(r.envs["VISIBLE"], "G1,G2");
        assert_eq!(r.envs["DEV_0"], "G1");
        assert_eq!(r.envs["DEV_1"], "G2");
        assert_eq!(r.mounts.len(), 1);
        assert_eq!(r.devices.iter().map(|d| d.container_path.as_str()).collect::<Vec<_>>(), ["/dev/G1", "/dev/G2"]);
        assert_eq!(r.cdi_devices[1].name, "example.com/gpu=G2");
    }

    // The absurd-input sweep: 10,000 devices through a per-device `{ids}`
    // entry used to build gigabytes (the mock aborted out of memory).
    #[test]
    fn an_answer_that_expands_past_the_budget_is_refused() {
        let c = AllocateConfig {
            envs: [("E_{index}".to_string(), "{ids}".to_string())].into(),
            ..AllocateConfig::default()
        };
        let t = AllocateTemplate::compile(&c).unwrap();
        let many: Vec<String> = (0..10_000).map(|i| format!("GPU-{i}")).collect();
        let e = t.render(&many, "example.com/gpu", &mut Budget::default()).unwrap_err();
        assert!(e.contains("over 67108864 bytes for 10000 devices"), "{e}");
        // The budget is per call: it covers every container of one request.
        let mut b = Budget::default();
        let few = &many[..1000];
        let r = t.render(few, "example.com/gpu", &mut b).unwrap();
        assert_eq!(r.envs.len(), 1000);
        assert!(b.left < MAX_ANSWER_BYTES - 1000 * 5000);
    }
}
