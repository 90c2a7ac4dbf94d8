//! `fieldSelector` and `labelSelector` of list and watch requests, in the
//! forms clients send: comma-separated `key=value`, `key==value` and
//! `key!=value` terms (labels also take `key` and `!key`). Set-based label
//! terms (`in`, `notin`) are refused with a 400, as are fields the API
//! server does not index for the resource.

use serde_json::Value;

use super::kinds::Kind;
use super::status::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Eq(String),
    Ne(String),
    Exists,
    Absent,
}

/// A parsed selector pair; the empty selector selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    fields: Vec<(String, Op)>,
    labels: Vec<(String, Op)>,
}

fn terms(text: &str, what: &str, labels: bool) -> Result<Vec<(String, Op)>, ApiError> {
    let mut out = Vec::new();
    for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let bad =
            || ApiError::bad_request(format!("invalid {what} {term:?}: want key=value, key==value or key!=value"));
        let (key, op) = if let Some((k, v)) = term.split_once("!=") {
            (k, Op::Ne(v.trim().to_string()))
        } else if let Some((k, v)) = term.split_once("==") {
            (k, Op::Eq(v.trim().to_string()))
        } else if let Some((k, v)) = term.split_once('=') {
            (k, Op::Eq(v.trim().to_string()))
        } else if labels && term.contains(' ') {
            return Err(ApiError::bad_request(format!(
                "{what} {term:?}: set-based terms (in, notin) are not supported by dpctl apiserver"
            )));
        } else if labels {
            match term.strip_prefix('!') {
                Some(k) => (k, Op::Absent),
                None => (term, Op::Exists),
            }
        } else {
            return Err(bad());
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(bad());
        }
        out.push((key.to_string(), op));
    }
    Ok(out)
}

impl Selector {
    /// Parses the two selectors for `kind`, refusing fields it does not index.
    pub fn parse(kind: &Kind, fields: Option<&str>, labels: Option<&str>) -> Result<Self, ApiError> {
        let fields = terms(fields.unwrap_or(""), "field selector", false)?;
        for (key, _) in &fields {
            let known = key == "metadata.name"
                || (kind.namespaced && key == "metadata.namespace")
                || kind.fields.contains(&key.as_str());
            if !known {
                let mut all = vec!["metadata.name".to_string()];
                if kind.namespaced {
                    all.push("metadata.namespace".into());
                }
                all.extend(kind.fields.iter().map(|f| f.to_string()));
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {key} (for {}: {})",
                    kind.qualified(),
                    all.join(", ")
                )));
            }
        }
        Ok(Selector { fields, labels: terms(labels.unwrap_or(""), "label selector", true)? })
    }

    /// True when `obj` matches every term.
    pub fn matches(&self, obj: &Value) -> bool {
        let field_ok = self.fields.iter().all(|(key, op)| {
            let mut v = obj;
            for part in key.split('.') {
                v = v.get(part).unwrap_or(&Value::Null);
            }
            let have = match v {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                _ => String::new(),
            };
            match op {
                Op::Eq(want) => &have == want,
                Op::Ne(want) => &have != want,
                Op::Exists | Op::Absent => true,
            }
        });
        let labels = obj.pointer("/metadata/labels");
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        field_ok
            && self.labels.iter().all(|(key, op)| match op {
                Op::Eq(want) => label(key) == Some(want.as_str()),
                Op::Ne(want) => label(key) != Some(want.as_str()),
                Op::Exists => label(key).is_some(),
                Op::Absent => label(key).is_none(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(node: &str, driver: &str) -> Value {
        json!({"metadata": {"name": "s", "labels": {"a": "1"}}, "spec": {"nodeName": node, "driver": driver, "pool": {"name": node}}})
    }

    #[test]
    fn the_helpers_slice_selector_matches_driver_and_node() {
        let s = Selector::parse(Kind::slices(), Some("spec.driver=gpu.example,spec.nodeName=n1"), None).unwrap();
        assert!(s.matches(&slice("n1", "gpu.example")));
        assert!(!s.matches(&slice("n2", "gpu.example")));
        assert!(!s.matches(&slice("n1", "other")));
        let pool = Selector::parse(Kind::slices(), Some("spec.pool.name==n1"), Some("a=1,!b")).unwrap();
        assert!(pool.matches(&slice("n1", "x")));
    }

    #[test]
    fn an_empty_node_name_term_matches_slices_without_one() {
        let s = Selector::parse(Kind::slices(), Some("spec.nodeName="), None).unwrap();
        assert!(s.matches(&json!({"spec": {"allNodes": true}})));
        assert!(!s.matches(&slice("n1", "d")));
    }

    #[test]
    fn unknown_fields_and_set_terms_are_bad_requests() {
        let e = Selector::parse(Kind::slices(), Some("spec.devices=1"), None).unwrap_err();
        assert_eq!((e.code, e.reason), (400, "BadRequest"));
        assert!(e.message.contains("spec.devices"), "{}", e.message);
        let e = Selector::parse(Kind::slices(), None, Some("a in (x)")).unwrap_err();
        assert!(e.message.contains("set-based"), "{}", e.message);
        assert!(Selector::parse(Kind::slices(), Some("nokey"), None).is_err());
    }
}
