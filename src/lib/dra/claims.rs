//! The claims a user names for a call: `--claim NAMESPACE/NAME/UID` flags or
//! a claims file (a JSON or YAML list of `{namespace, name, uid}`, or
//! ResourceClaim documents such as a pod manifest for kubelet-sim holds). The
//! kubelet sends exactly these three fields; the driver reads the rest of
//! the ResourceClaim from the API server itself (docs/dra.md §1).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Most claims one call carries from dpctl (a pod has a handful; the
/// kubelet batches one pod's claims per driver).
pub const MAX_CLAIMS: usize = 10_000;
/// Longest UID accepted (Kubernetes UIDs are 36 characters).
const MAX_UID: usize = 128;

/// One claim's identity, as the kubelet sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimRef {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The claim's UID: the key of the driver's answer.
    pub uid: String,
}

impl ClaimRef {
    /// Checks the three fields: namespace a DNS label, name a DNS subdomain,
    /// UID non-empty without `/` or whitespace (it names files on the node).
    pub fn check(&self, place: &str) -> Result<()> {
        let bad = |m: String| Error::invalid(place, m);
        if self.namespace.len() > 63
            || self.namespace.contains('.')
            || !crate::validate::is_dns1123_subdomain(&self.namespace)
        {
            return Err(bad(format!(
                "namespace {:?} is not a DNS label (lowercase letters, digits, '-'; at most 63)",
                short(&self.namespace)
            )));
        }
        if !crate::validate::is_dns1123_subdomain(&self.name) {
            return Err(bad(format!(
                "claim name {:?} is not a DNS subdomain (lowercase letters, digits, '-', '.'; at most 253)",
                short(&self.name)
            )));
        }
        if self.uid.is_empty()
            || self.uid.len() > MAX_UID
            || self.uid.chars().any(|c| c == '/' || c.is_whitespace() || c.is_control())
        {
            return Err(bad(format!(
                "UID {:?} must be 1 to {MAX_UID} characters without '/' or spaces",
                short(&self.uid)
            )));
        }
        Ok(())
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

fn short(s: &str) -> String {
    if s.chars().count() > 64 { format!("{}...", s.chars().take(64).collect::<String>()) } else { s.to_string() }
}

/// Parses `--claim NAMESPACE/NAME/UID` (or `NAME/UID` in `default`).
pub fn parse_flag(s: &str) -> std::result::Result<ClaimRef, String> {
    let parts: Vec<&str> = s.split('/').collect();
    let claim = match parts.as_slice() {
        [ns, name, uid] => ClaimRef { namespace: (*ns).into(), name: (*name).into(), uid: (*uid).into() },
        [name, uid] => ClaimRef { namespace: "default".into(), name: (*name).into(), uid: (*uid).into() },
        _ => return Err(format!("{:?}: want NAMESPACE/NAME/UID (or NAME/UID in namespace default)", short(s))),
    };
    claim.check("--claim").map_err(|e| e.to_string().trim_start_matches("--claim: ").to_string())?;
    Ok(claim)
}

/// Reads a claims file: a JSON or YAML list of `{namespace, name, uid}`.
pub fn read_file(path: &Path) -> Result<Vec<ClaimRef>> {
    let place = format!("--claims {}", path.display());
    let text = crate::input::read_text(path, &place)?;
    crate::input::check_depth(&text, &place, 16)?;
    let claims: Vec<ClaimRef> = match serde_norway::from_str(&text) {
        Ok(c) => c,
        Err(e) => resource_claims(&text).filter(|c| !c.is_empty()).ok_or_else(|| {
            Error::invalid(
                &place,
                format!(
                    "{e}; want a list of {{namespace, name, uid}}, e.g. [{{namespace: default, name: gpu, uid: 1234}}], \
                     or ResourceClaim documents (as kubelet-sim admit reads them, docs/dra.md §6)"
                ),
            )
        })?,
    };
    for (i, c) in claims.iter().enumerate() {
        c.check(&format!("{place}: claim {}", i + 1))?;
    }
    Ok(claims)
}

/// The identities of the ResourceClaim documents in `text` (YAML documents
/// or the items of a `kind: List`; other kinds, such as a Pod, are skipped):
/// the same files `kubelet-sim admit` reads. `None` when it is not YAML.
fn resource_claims(text: &str) -> Option<Vec<ClaimRef>> {
    use serde::Deserialize as _;
    let mut out = Vec::new();
    for d in serde_norway::Deserializer::from_str(text) {
        let v = serde_json::Value::deserialize(d).ok()?;
        let items = match v.get("kind").and_then(|k| k.as_str()) {
            Some("List") => v.get("items").and_then(|i| i.as_array()).cloned().unwrap_or_default(),
            _ => vec![v],
        };
        for item in items.iter().filter(|i| i.get("kind").and_then(|k| k.as_str()) == Some("ResourceClaim")) {
            let meta = item.get("metadata")?;
            let field = |k: &str| meta.get(k).and_then(|x| x.as_str()).map(String::from);
            out.push(ClaimRef {
                namespace: field("namespace").unwrap_or_else(|| "default".into()),
                name: field("name").unwrap_or_default(),
                uid: field("uid").unwrap_or_default(),
            });
        }
    }
    Some(out)
}

/// Joins flags and file, refusing an empty set, too many claims and a UID
/// named twice (the answer is a map keyed by UID: two requests for one UID
/// cannot be told apart).
pub fn collect(flags: Vec<ClaimRef>, file: Option<&Path>) -> Result<Vec<ClaimRef>> {
    let mut all = flags;
    if let Some(f) = file {
        all.extend(read_file(f)?);
    }
    if all.is_empty() {
        return Err(Error::invalid("--claim", "no claims: name one with --claim NAMESPACE/NAME/UID or --claims FILE"));
    }
    if all.len() > MAX_CLAIMS {
        return Err(Error::invalid("--claims", format!("{} claims; at most {MAX_CLAIMS} per call", all.len())));
    }
    let mut seen = std::collections::BTreeSet::new();
    for c in &all {
        if !seen.insert(c.uid.as_str()) {
            return Err(Error::invalid(
                "--claim",
                format!("UID {} is named twice; each claim needs its own UID", c.uid),
            ));
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_with_or_without_namespace() {
        let c = parse_flag("ns1/gpu-claim/1234-5678").unwrap();
        assert_eq!((c.namespace.as_str(), c.name.as_str(), c.uid.as_str()), ("ns1", "gpu-claim", "1234-5678"));
        assert_eq!(parse_flag("gpu/u1").unwrap().namespace, "default");
        assert!(parse_flag("a/b/c/d").is_err_and(|e| e.contains("NAMESPACE/NAME/UID")));
        assert!(parse_flag("Bad/x/u").is_err_and(|e| e.contains("namespace")));
        assert!(parse_flag(&format!("x/{}", "u".repeat(200))).is_err_and(|e| e.contains("UID")));
    }

    #[test]
    fn resource_claim_documents_name_the_claims() {
        let text = "kind: Pod\nmetadata: {name: p}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: gpu, uid: u1}\n";
        let c = resource_claims(text).unwrap();
        assert_eq!(c, [ClaimRef { namespace: "default".into(), name: "gpu".into(), uid: "u1".into() }]);
    }

    #[test]
    fn duplicates_and_nothing_are_refused() {
        let c = parse_flag("a/u").unwrap();
        assert!(collect(vec![c.clone(), c], None).is_err());
        assert!(collect(vec![], None).is_err());
    }
}
