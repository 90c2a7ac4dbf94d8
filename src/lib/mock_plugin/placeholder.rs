//! One template string with placeholders (`{ids}`, `{count}`, `{resource}`,
//! and the per-device `{id}` and `{index}`): parsed once, expanded per
//! container request. A leaf: the config checks its strings with it and
//! the Allocate answer template compiles them with it.

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

fn push_joined(out: &mut String, ids: &[String]) {
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
