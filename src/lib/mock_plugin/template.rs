//! Allocate answer templates: strings with `{ids}`, `{count}`, `{resource}`,
//! and the per-device `{id}` and `{index}`, compiled once and expanded per
//! container request.

use std::collections::HashMap;

use super::config::AllocateConfig;
use crate::proto::deviceplugin::v1beta1 as dp;

/// A placeholder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Var {
    Ids,
    Count,
    Resource,
    Id,
    Index,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Lit(String),
    Var(Var),
}

/// One compiled template string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    segs: Vec<Seg>,
    per_device: bool,
}

/// The values a template is expanded with.
#[derive(Debug, Clone, Copy)]
pub struct Values<'a> {
    /// The allocated IDs of this container.
    pub ids: &'a [String],
    /// The resource name.
    pub resource: &'a str,
}

impl Template {
    /// Compiles `s`. `{{` and `}}` stand for literal braces; an unknown
    /// placeholder is an error that lists the known ones.
    pub fn parse(s: &str) -> Result<Template, String> {
        let mut segs = Vec::new();
        let mut lit = String::new();
        let mut rest = s;
        while let Some(i) = rest.find(['{', '}']) {
            lit.push_str(&rest[..i]);
            let tail = &rest[i..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                lit.push_str(&tail[..1]);
                rest = &tail[2..];
                continue;
            }
            if tail.starts_with('}') {
                return Err(format!("{s:?}: unmatched '}}' (write '}}}}' for a literal brace)"));
            }
            let Some(end) = tail.find('}') else {
                return Err(format!("{s:?}: unclosed '{{' (write '{{{{' for a literal brace)"));
            };
            let var = match &tail[1..end] {
                "ids" => Var::Ids,
                "count" => Var::Count,
                "resource" => Var::Resource,
                "id" => Var::Id,
                "index" => Var::Index,
                other => {
                    return Err(format!(
                        "{s:?}: unknown placeholder {{{other}}} (known: {{ids}}, {{count}}, {{resource}}, {{id}}, {{index}})"
                    ));
                }
            };
            if !lit.is_empty() {
                segs.push(Seg::Lit(std::mem::take(&mut lit)));
            }
            segs.push(Seg::Var(var));
            rest = &tail[end + 1..];
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            segs.push(Seg::Lit(lit));
        }
        let per_device = segs.iter().any(|s| matches!(s, Seg::Var(Var::Id | Var::Index)));
        Ok(Template { segs, per_device })
    }

    /// True when the template mentions `{id}` or `{index}`.
    pub fn per_device(&self) -> bool {
        self.per_device
    }

    /// Expands for device number `index` (ignored unless per-device).
    pub fn expand(&self, v: &Values<'_>, index: usize) -> String {
        if let [Seg::Lit(s)] = self.segs.as_slice() {
            return s.clone();
        }
        let mut out = String::new();
        for seg in &self.segs {
            match seg {
                Seg::Lit(s) => out.push_str(s),
                Seg::Var(Var::Ids) => push_joined(&mut out, v.ids),
                Seg::Var(Var::Count) => out.push_str(&v.ids.len().to_string()),
                Seg::Var(Var::Resource) => out.push_str(v.resource),
                Seg::Var(Var::Id) => out.push_str(v.ids.get(index).map_or("", String::as_str)),
                Seg::Var(Var::Index) => out.push_str(&index.to_string()),
            }
        }
        out
    }
}

/// Calls `f` once, or once per device (with its index) when `per_device`.
fn each(per_device: bool, v: &Values<'_>, mut f: impl FnMut(usize)) {
    if per_device {
        (0..v.ids.len()).for_each(&mut f);
    } else {
        f(0);
    }
}

fn push_joined(out: &mut String, ids: &[String]) {
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(id);
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
    fn placeholders_expand() {
        let t = Template::parse("{resource}: {ids} ({count}) {{x}}").unwrap();
        let v = Values { ids: &ids(&["a", "b"]), resource: "example.com/gpu" };
        assert_eq!(t.expand(&v, 0), "example.com/gpu: a,b (2) {x}");
        assert!(!t.per_device());
        let t = Template::parse("/dev/{id}#{index}").unwrap();
        assert!(t.per_device());
        assert_eq!(t.expand(&v, 1), "/dev/b#1");
        assert!(Template::parse("{nope}").unwrap_err().contains("unknown placeholder {nope}"));
        assert!(Template::parse("{ids").is_err());
        assert!(Template::parse("x}").is_err());
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
