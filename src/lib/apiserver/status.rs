//! The `Status` bodies the Kubernetes API answers failures with. client-go
//! turns them into typed errors (`apierrors.IsNotFound`, `IsConflict`,
//! `IsBadRequest` ...) from `reason` and `code`, and the DRA helper's
//! client walks v1 → v1beta2 → v1beta1 on a NotFound: so every failure
//! here is a real Status with the API server's reason, code and wording.

use serde_json::{Value, json};

/// A failed request: HTTP code, the Status reason and message, and the
/// object named (for `details`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Status `reason` (NotFound, AlreadyExists, Conflict, BadRequest ...).
    pub reason: &'static str,
    /// Status `message`.
    pub message: String,
    /// `details`: name, group, kind (the plural) when an object is named.
    pub details: Option<(String, String, String)>,
}

impl ApiError {
    /// 404 for a URL the server does not serve (a version, group or
    /// resource it lacks): the API server's own text.
    pub fn no_route() -> Self {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource".into(),
            details: None,
        }
    }

    /// 404 for a missing object.
    pub fn not_found(group: &str, resource: &str, qualified: &str, name: &str) -> Self {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{qualified} {name:?} not found"),
            details: Some((name.into(), group.into(), resource.into())),
        }
    }

    /// 409 for a create of a name that exists.
    pub fn already_exists(group: &str, resource: &str, qualified: &str, name: &str) -> Self {
        ApiError {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{qualified} {name:?} already exists"),
            details: Some((name.into(), group.into(), resource.into())),
        }
    }

    /// 409 for an update or delete whose precondition (resourceVersion, UID) fails.
    pub fn conflict(group: &str, resource: &str, qualified: &str, name: &str, why: &str) -> Self {
        ApiError {
            code: 409,
            reason: "Conflict",
            message: format!("Operation cannot be fulfilled on {qualified} {name:?}: {why}"),
            details: Some((name.into(), group.into(), resource.into())),
        }
    }

    /// 400 for a malformed request (body, selector, parameter).
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError { code: 400, reason: "BadRequest", message: message.into(), details: None }
    }

    /// 422 for an object the server will not store.
    pub fn invalid(group: &str, resource: &str, kind: &str, name: &str, message: impl Into<String>) -> Self {
        ApiError {
            code: 422,
            reason: "Invalid",
            message: format!("{kind} {name:?} is invalid: {}", message.into()),
            details: Some((name.into(), group.into(), resource.into())),
        }
    }

    /// 405 for a verb the resource does not take here.
    pub fn method_not_allowed() -> Self {
        ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource".into(),
            details: None,
        }
    }

    /// 410 for a watch from a resourceVersion whose later events were
    /// compacted away: the watch cache's `NewResourceExpired` text, which
    /// client-go's reflector answers with a new list.
    pub fn expired(asked: u64, compacted: u64) -> Self {
        ApiError {
            code: 410,
            reason: "Expired",
            message: format!("too old resource version: {asked} ({compacted})"),
            details: None,
        }
    }

    /// 413 for a request body over `limit` bytes (the API server's `readBody` text).
    pub fn too_large(limit: usize) -> Self {
        ApiError {
            code: 413,
            reason: "RequestEntityTooLarge",
            message: format!("Request entity too large: limit is {limit}"),
            details: None,
        }
    }

    /// 401 for a request without the server's bearer token, as the API
    /// server answers an unauthenticated request.
    pub fn unauthorized() -> Self {
        ApiError { code: 401, reason: "Unauthorized", message: "Unauthorized".into(), details: None }
    }

    /// 500 for a write etcd refuses (an object over its request limit, the
    /// quota full): the API server passes etcd's error through as a Status
    /// with no reason (`StatusReasonUnknown`) and etcd's message.
    pub fn etcd(what: &str) -> Self {
        ApiError { code: 500, reason: "", message: format!("etcdserver: {what}"), details: None }
    }

    /// 500 when recording a write failed.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError { code: 500, reason: "InternalError", message: message.into(), details: None }
    }

    /// The `Status` object.
    pub fn body(&self) -> Value {
        let details = match &self.details {
            Some((name, group, kind)) => {
                let mut d = json!({"name": name, "kind": kind});
                if !group.is_empty() {
                    d["group"] = json!(group);
                }
                d
            }
            None => json!({}),
        };
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": details,
            "code": self.code,
        });
        if let Some(m) = body.as_object_mut() {
            // `reason` and `details` are omitempty in metav1.Status.
            if self.reason.is_empty() {
                m.remove("reason");
            }
            if self.details.is_none() && matches!(self.code, 401 | 410 | 413 | 500) {
                m.remove("details");
            }
        }
        body
    }
}

/// The `Status` a successful delete answers with.
pub fn deleted(group: &str, resource: &str, name: &str, uid: &str) -> Value {
    let mut details = json!({"name": name, "kind": resource, "uid": uid});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}
