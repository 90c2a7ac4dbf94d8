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

    /// The answer for one container that was given `ids`.
    pub fn render(&self, ids: &[String], resource: &str) -> dp::ContainerAllocateResponse {
        let v = Values { ids, resource };
        let map = |pairs: &[(Template, Template)]| {
            let mut out = HashMap::new();
            for (k, val) in pairs {
                each(k.per_device() || val.per_device(), &v, |i| {
                    out.insert(k.expand(&v, i), val.expand(&v, i));
                });
            }
            out
        };
        let mut mounts = Vec::new();
        for (c, h, ro) in &self.mounts {
            each(c.per_device() || h.per_device(), &v, |i| {
                mounts.push(dp::Mount { container_path: c.expand(&v, i), host_path: h.expand(&v, i), read_only: *ro });
            });
        }
        let mut devices = Vec::new();
        for (c, h, perm) in &self.devices {
            each(c.per_device() || h.per_device(), &v, |i| {
                devices.push(dp::DeviceSpec {
                    container_path: c.expand(&v, i),
                    host_path: h.expand(&v, i),
                    permissions: perm.clone(),
                });
            });
        }
        let mut cdi_devices = Vec::new();
        for c in &self.cdi_devices {
            each(c.per_device(), &v, |i| cdi_devices.push(dp::CdiDevice { name: c.expand(&v, i) }));
        }
        dp::ContainerAllocateResponse {
            envs: map(&self.envs),
            mounts,
            devices,
            annotations: map(&self.annotations),
            cdi_devices,
        }
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
        let r = t.render(&ids(&["G1", "G2"]), "example.com/gpu");
        assert_eq!(r.envs["VISIBLE"], "G1,G2");
        assert_eq!(r.envs["DEV_0"], "G1");
        assert_eq!(r.envs["DEV_1"], "G2");
        assert_eq!(r.mounts.len(), 1);
        assert_eq!(r.devices.iter().map(|d| d.container_path.as_str()).collect::<Vec<_>>(), ["/dev/G1", "/dev/G2"]);
        assert_eq!(r.cdi_devices[1].name, "example.com/gpu=G2");
    }
}
