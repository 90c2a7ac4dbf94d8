//! Watch: the JSON event stream client-go's reflectors read. Where a watch
//! starts follows the API server: `sendInitialEvents=true` (client-go's
//! WatchList, on by default since 1.35) streams the current objects as
//! ADDED, then a BOOKMARK annotated `k8s.io/initial-events-end`;
//! `resourceVersion` unset or `0` streams the current objects too, without
//! the bookmark; `resourceVersion=N` replays every later event. An update
//! that moves an object into or out of the selector is ADDED or DELETED,
//! as the API server's watch cache reports it.

use serde_json::{Value, json};

use super::kinds::Kind;
use super::select::Selector;
use super::status::ApiError;
use super::store::{Event, Verb};

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The current objects as ADDED; then, when `bookmark`, the
    /// initial-events-end BOOKMARK.
    Initial {
        /// Send the bookmark that ends the initial events.
        bookmark: bool,
    },
    /// Events after this resourceVersion.
    After(u64),
}

impl Start {
    /// From the query's `resourceVersion`, `sendInitialEvents` and `allowWatchBookmarks`.
    pub fn parse(
        rv: Option<&str>,
        send_initial: Option<&str>,
        bookmarks: bool,
        current: u64,
    ) -> Result<Self, ApiError> {
        let rv = rv.filter(|r| !r.is_empty());
        let n = match rv {
            Some(r) => parse_rv(r)?,
            None => None,
        };
        Ok(match (send_initial, n) {
            (Some("true"), _) => {
                if !bookmarks {
                    return Err(ApiError::bad_request(
                        "sendInitialEvents requires allowWatchBookmarks=true (the end of the initial events is a bookmark)",
                    ));
                }
                Start::Initial { bookmark: true }
            }
            (Some("false"), None) => Start::After(current),
            (Some("false") | None, Some(0)) | (None, None) => Start::Initial { bookmark: false },
            (Some("false") | None, Some(n)) => Start::After(n),
            (Some(other), _) => {
                return Err(ApiError::bad_request(format!("sendInitialEvents={other:?}: want true or false")));
            }
        })
    }
}

/// A request's `resourceVersion` (empty: none), refused with a 400 when it
/// is not one this server gives out, for a list as for a watch.
pub fn parse_rv(rv: &str) -> Result<Option<u64>, ApiError> {
    if rv.is_empty() {
        return Ok(None);
    }
    rv.parse::<u64>().map(Some).map_err(|_| {
        ApiError::bad_request(format!("resourceVersion {rv:?}: not a resource version this server gave out"))
    })
}

/// One watch event line.
pub fn line(kind_type: &str, object: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(&json!({"type": kind_type, "object": object})).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// The BOOKMARK that ends the initial events at resourceVersion `rv`.
pub fn initial_events_end(kind: &Kind, rv: u64) -> Vec<u8> {
    let object = json!({
        "kind": kind.kind,
        "apiVersion": kind.api_version(),
        "metadata": {"resourceVersion": rv.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}},
    });
    line("BOOKMARK", &object)
}

/// The event a watcher with `sel` sees for `event`, if any.
pub fn seen(event: &Event, sel: &Selector) -> Option<Vec<u8>> {
    let was = event.old.as_ref().is_some_and(|o| sel.matches(o));
    let is = sel.matches(&event.new);
    let kind = match event.verb {
        Verb::Create if is => "ADDED",
        Verb::Update if was && is => "MODIFIED",
        Verb::Update if is => "ADDED",
        Verb::Update if was => "DELETED",
        Verb::Delete if was => "DELETED",
        _ => return None,
    };
    Some(line(kind, &event.new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_a_watch_starts_follows_the_api_server() {
        assert_eq!(Start::parse(Some("12"), Some("true"), true, 20).unwrap(), Start::Initial { bookmark: true });
        assert!(Start::parse(None, Some("true"), false, 20).is_err());
        assert_eq!(Start::parse(Some("0"), None, true, 20).unwrap(), Start::Initial { bookmark: false });
        assert_eq!(Start::parse(None, None, false, 20).unwrap(), Start::Initial { bookmark: false });
        assert_eq!(Start::parse(Some("7"), None, false, 20).unwrap(), Start::After(7));
        assert_eq!(Start::parse(None, Some("false"), false, 20).unwrap(), Start::After(20));
        assert_eq!(Start::parse(Some("x"), None, false, 20).unwrap_err().code, 400);
    }

    #[test]
    fn an_update_out_of_the_selector_is_a_delete() {
        let sel = Selector::parse(Kind::slices(), Some("spec.driver=a"), None).unwrap();
        let ev = Event {
            rv: 3,
            verb: Verb::Update,
            key: ("resourceslices", String::new(), "s".into()),
            old: Some(std::sync::Arc::new(json!({"spec": {"driver": "a"}}))),
            new: std::sync::Arc::new(json!({"spec": {"driver": "b"}})),
            size: 0,
        };
        let text = String::from_utf8(seen(&ev, &sel).unwrap()).unwrap();
        assert!(text.starts_with(r#"{"object""#) || text.contains(r#""type":"DELETED""#), "{text}");
        assert!(text.contains("DELETED"), "{text}");
    }
}
