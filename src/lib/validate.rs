//! The kubelet's registration checks, with its exact error texts, and the
//! API server's checks of object names.

use crate::proto::deviceplugin::v1beta1::SUPPORTED_VERSIONS;

/// Checks a `RegisterRequest` the way the kubelet does, in the same order
/// (version first, then the resource name). The error is the kubelet's text.
pub fn check_registration(version: &str, resource_name: &str) -> Result<(), String> {
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(format!(
            "requested API version {} is not supported by kubelet. Supported version is [{}]",
            go_quote(version),
            SUPPORTED_VERSIONS.iter().map(|v| go_quote(v)).collect::<Vec<_>>().join(" ")
        ));
    }
    if !is_extended_resource_name(resource_name) {
        return Err(format!("the ResourceName {} is invalid", go_quote(resource_name)));
    }
    Ok(())
}

/// Go's `%q` (`strconv.Quote`), as the kubelet quotes names and versions in
/// its errors: `\a \b \f \n \r \t \v`, `\xNN` for other ASCII controls,
/// `\uNNNN`/`\UNNNNNNNN` for non-printable runes (C1 controls such as
/// `\u0085`, Unicode spaces other than U+0020, format characters), the rest
/// verbatim. Go's `unicode.IsPrint` tables are approximated by Rust's
/// control/whitespace classes plus the common format characters.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if go_printable(c) => out.push(c),
            // equivalent mutant: `<=` differs only for U+10000, which is printable (taken above).
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.IsPrint`, approximately: not a control, not a space other
/// than U+0020, not a common format (Cf), separator (Zl, Zp) or private-use character.
fn go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c as u32,
        0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x180e | 0x200b..=0x200f | 0x2028..=0x202e
        | 0x2060..=0x206f | 0xd800..=0xdfff | 0xe000..=0xf8ff | 0xfeff | 0xfff9..=0xfffb
        | 0xf0000..=0x10ffff)
}

/// `v1helper.IsExtendedResourceName`: a name that needs a device plugin.
pub fn is_extended_resource_name(name: &str) -> bool {
    if !name.contains('/') || name.contains("kubernetes.io/") || name.starts_with("requests.") {
        return false;
    }
    is_qualified_name(&format!("requests.{name}"))
}

/// Explains why a resource name is not a valid extended resource name.
pub fn explain_resource_name(name: &str) -> Option<String> {
    if is_extended_resource_name(name) {
        return None;
    }
    Some(if !name.contains('/') {
        format!("{name:?} has no domain prefix; extended resources look like vendor.com/device")
    } else if name.contains("kubernetes.io/") {
        format!("{name:?} is in the kubernetes.io namespace, which is reserved for native resources")
    } else {
        format!(
            "{name:?} is not <dns-subdomain>/<name>: lowercase domain, one '/', and a name of 1-63 \
             characters [A-Za-z0-9-_.] starting and ending alphanumeric"
        )
    })
}

/// `validation.IsQualifiedName`.
fn is_qualified_name(value: &str) -> bool {
    let mut parts = value.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        // equivalent mutant: deleting this arm changes nothing today, since the
        // only caller (is_extended_resource_name) passes names with a '/'.
        (Some(name), None, None) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => return false,
    };
    if let Some(prefix) = prefix
        && !is_dns1123_subdomain(prefix)
    {
        return false;
    }
    !name.is_empty() && name.len() <= 63 && is_qualified_name_part(name)
}

fn is_qualified_name_part(name: &str) -> bool {
    let b = name.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    alnum(&b[0]) && alnum(&b[b.len() - 1]) && b.iter().all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// True for a DNS-1123 subdomain: at most 253 characters, dot-separated
/// labels of lowercase letters, digits and `-`, each starting and ending with
/// a letter or digit.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            !b.is_empty() && ok(&b[0]) && ok(&b[b.len() - 1]) && b.iter().all(|c| ok(c) || *c == b'-')
        })
}

/// Checks a pod's name and namespace as the API server does
/// (`ValidatePodName`: a DNS-1123 subdomain of at most 253 characters;
/// namespaces: a DNS-1123 label of at most 63).
pub fn check_object_names(name: &str, namespace: &str) -> crate::error::Result<()> {
    if !is_dns1123_subdomain(name) {
        let shown: String = name.chars().take(64).collect();
        let more = if name.chars().count() > 64 { "..." } else { "" };
        return Err(crate::error::Error::invalid(
            "pod metadata.name",
            format!(
                "{shown:?}{more} ({} characters) is not a valid pod name: at most 253 characters, lowercase \
                 letters, digits, '-' and '.', starting and ending with a letter or digit",
                name.chars().count()
            ),
        ));
    }
    if namespace.len() > 63 || namespace.contains('.') || !is_dns1123_subdomain(namespace) {
        let shown: String = namespace.chars().take(64).collect();
        return Err(crate::error::Error::invalid(
            "pod metadata.namespace",
            format!(
                "{shown:?} is not a valid namespace: at most 63 characters, lowercase letters, digits and '-', \
                 starting and ending with a letter or digit"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubelet error texts use Go's %q, so dpctl's copies of them must quote
    /// byte for byte as strconv.Quote does, or a plugin matching on them breaks.
    #[test]
    fn go_quote_matches_strconv_quote() {
        assert_eq!(go_quote("v1beta1"), r#""v1beta1""#);
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(go_quote("\u{7}\u{8}\u{c}\n\r\t\u{b}"), r#""\a\b\f\n\r\t\v""#);
        assert_eq!(go_quote("\0\u{1b}\u{7f}"), r#""\x00\x1b\x7f""#);
        assert_eq!(go_quote("x\u{85}y"), r#""x\u0085y""#);
        assert_eq!(go_quote("\u{a0}\u{2028}\u{200b}\u{feff}"), r#""\u00a0\u2028\u200b\ufeff""#);
        assert_eq!(go_quote("gpu-é-日本-😀"), "\"gpu-é-日本-😀\"");
        assert_eq!(go_quote("\u{f0000}"), r#""\U000f0000""#);
        // The edges of the classes: U+001F is a control, U+0020 and U+10000 are printed.
        assert_eq!(go_quote("\u{1f} \u{10000}"), "\"\\x1f \u{10000}\"");
    }

    // The API server refuses names over 253 characters or not DNS-1123, so the
    // sim must too (a 100,000-character name was once admitted).
    #[test]
    fn pod_names_as_the_api_server_judges_them() {
        for ok in ["p", "pod-1", "a.b-c", &"a".repeat(253)] {
            assert!(check_object_names(ok, "default").is_ok(), "{ok}");
        }
        for bad in ["", "Pod", "pod_1", "-p", "p-", "a..b", &"a".repeat(254), &"a".repeat(100_000)] {
            let e = check_object_names(bad, "default").unwrap_err();
            assert_eq!(e.exit_code(), crate::error::exit::USAGE);
            assert!(e.to_string().len() < 400, "the error stays short");
        }
        // 64 characters are shown whole; past that, cut with "...".
        let e = check_object_names(&format!("P{}", "a".repeat(63)), "default").unwrap_err().to_string();
        assert!(e.contains("a\" (64 characters)"), "{e}");
        let e = check_object_names(&format!("P{}", "a".repeat(64)), "default").unwrap_err().to_string();
        assert!(e.contains("a\"... (65 characters)"), "{e}");
        // A namespace of exactly 63 characters is a DNS-1123 label; 64 is not.
        assert!(check_object_names("p", &"n".repeat(63)).is_ok());
        assert!(check_object_names("p", "kube-system").is_ok());
        assert!(check_object_names("p", "a.b").is_err());
        assert!(check_object_names("p", &"n".repeat(64)).is_err());
    }

    #[test]
    fn resource_names_as_the_kubelet_judges_them() {
        for ok in ["example.com/foo", "nvidia.com/gpu", "a.b-c.d/x_y.z-1", "intel.com/sriov_netdevice"] {
            assert!(is_extended_resource_name(ok), "{ok}");
        }
        for bad in [
            "foo",
            "kubernetes.io/foo",
            "Example.com/foo",
            "a/b/c",
            "example.com/-x",
            "requests.a/b",
            "example.com/",
            "/x",
        ] {
            assert!(!is_extended_resource_name(bad), "{bad}");
            assert!(explain_resource_name(bad).is_some());
        }
        let long = format!("example.com/{}", "a".repeat(64));
        assert!(!is_extended_resource_name(&long));
    }

    #[test]
    fn resource_name_explanations_name_the_cause() {
        assert_eq!(explain_resource_name("example.com/foo"), None);
        let why = |n: &str| explain_resource_name(n).unwrap();
        assert!(why("foo").contains("has no domain prefix"), "{}", why("foo"));
        assert!(why("kubernetes.io/foo").contains("reserved for native resources"));
        assert!(why("example.com/-x").contains("is not <dns-subdomain>/<name>"));
        assert!(why("a/b/c").contains("is not <dns-subdomain>/<name>"));
    }

    #[test]
    fn kubelet_error_texts() {
        assert_eq!(
            check_registration("v1alpha", "example.com/foo").unwrap_err(),
            r#"requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]"#
        );
        assert_eq!(check_registration("v1beta1", "foo").unwrap_err(), r#"the ResourceName "foo" is invalid"#);
        assert!(check_registration("v1beta1", "example.com/foo").is_ok());
    }
}
