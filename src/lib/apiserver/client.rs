//! A small Kubernetes API client for what a DRA driver does: GET an object,
//! LIST with a field selector, and create, update and delete
//! ResourceSlices, in JSON over plain HTTP/1.1. It reads the server from a
//! kubeconfig (the current context's cluster) as client-go does, and turns
//! the API's `Status` answers into [`Failure`]s with their message, so a
//! caller can repeat the API server's words. `https://` servers are refused
//! with a clear error: dpctl's API server is loopback HTTP; the one
//! credential this client carries is the kubeconfig user's bearer token.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// Longest an answer may be (a list of a driver's slices is far smaller).
const MAX_ANSWER: usize = 16 * 1024 * 1024;
/// Bound on each request, connection included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A failed request as the API answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// HTTP code (0: no answer: the connection failed or timed out).
    pub code: u16,
    /// The Status `reason`, or empty.
    pub reason: String,
    /// The Status `message`, or what went wrong on the way.
    pub message: String,
    /// No answer came within the request's deadline.
    pub timed_out: bool,
}

impl Failure {
    /// The error a command stops with when request `what` to `server`
    /// failed, with the README's exit codes: no connection 3, an error
    /// answered (401/403, 404, 409, ...) 4, no answer in time 5.
    pub fn error(self, server: &str, what: &str) -> Error {
        if self.timed_out {
            return Error::Timeout { what: format!("{what} at {server}"), timeout: REQUEST_TIMEOUT };
        }
        if self.code == 0 {
            return Error::Connect { path: server.into(), reason: format!("{what}: {}", self.message) };
        }
        Error::Api {
            what: what.into(),
            server: server.into(),
            code: self.code,
            reason: self.reason,
            message: self.message,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A client for one API server.
#[derive(Debug, Clone)]
pub struct Client {
    /// `host:port`.
    authority: String,
    /// The server URL, for messages.
    server: String,
    /// The kubeconfig user's bearer token.
    token: Option<String>,
}

impl Client {
    /// The client for the current context of the kubeconfig at `path`.
    pub fn from_kubeconfig(path: &Path, flag: &str) -> Result<Client> {
        let place = format!("{flag} {}", path.display());
        let text = crate::input::read_text(path, &place)?;
        let server = server_of(&text).map_err(|why| Error::invalid(&place, why))?;
        let mut client = Client::for_server(&server).map_err(|why| Error::invalid(&place, why))?;
        client.token = token_of(&text);
        Ok(client)
    }

    /// The client for `server` (`http://host:port`).
    pub fn for_server(server: &str) -> std::result::Result<Client, String> {
        if server.starts_with("https://") {
            return Err(format!(
                "the server {server} uses TLS; this client speaks plain HTTP only (dpctl apiserver's and \
                 kubelet-sim --api-objects' loopback servers)"
            ));
        }
        let Some(rest) = server.strip_prefix("http://") else {
            return Err(format!("the server {server:?} is not an http:// URL"));
        };
        let authority = rest.trim_end_matches('/').to_string();
        if authority.is_empty() || authority.contains('/') {
            return Err(format!("the server {server:?} has a path; want http://host:port"));
        }
        Ok(Client { authority, server: server.to_string(), token: None })
    }

    /// The server URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// One request; the JSON answer of a 2xx, else the Status as a [`Failure`].
    pub async fn request(&self, method: &str, path: &str, body: Option<&Value>) -> std::result::Result<Value, Failure> {
        let fail = |message: String| Failure { code: 0, reason: String::new(), message, timed_out: false };
        let call = async {
            let stream = tokio::net::TcpStream::connect(&self.authority)
                .await
                .map_err(|e| fail(format!("connecting to {}: {e}", self.server)))?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| fail(format!("talking to {}: {e}", self.server)))?;
            let driver = tokio::spawn(conn);
            let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
            let mut req = http::Request::builder();
            if let Some(t) = &self.token {
                req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
            }
            let req = req
                .method(method)
                .uri(path)
                .header(http::header::HOST, &self.authority)
                .header(http::header::ACCEPT, "application/json")
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(bytes))
                .map_err(|e| fail(format!("building the request: {e}")))?;
            let resp = sender.send_request(req).await.map_err(|e| fail(format!("{method} {path}: {e}")))?;
            let code = resp.status().as_u16();
            let collected = Limited::new(resp.into_body(), MAX_ANSWER).collect().await;
            driver.abort();
            let raw = collected.map_err(|e| fail(format!("reading the answer to {method} {path}: {e}")))?.to_bytes();
            let value: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
            if (200..300).contains(&code) {
                return Ok(value);
            }
            let text = |k: &str| value.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let message = if text("message").is_empty() { format!("HTTP {code}") } else { text("message") };
            Err(Failure { code, reason: text("reason"), message, timed_out: false })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, call).await.unwrap_or_else(|_| {
            let message = format!("{method} {path}: no answer within {REQUEST_TIMEOUT:?}");
            Err(Failure { timed_out: true, ..fail(message) })
        })
    }
}

/// Percent-encodes a path segment or query value (everything but RFC 3986's unreserved characters).
pub fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(flatten)]
    inner: T,
}

#[derive(Deserialize, Default)]
struct Kubeconfig {
    #[serde(default, rename = "current-context")]
    current_context: String,
    #[serde(default)]
    contexts: Vec<Named<ContextWrap>>,
    #[serde(default)]
    clusters: Vec<Named<ClusterWrap>>,
    #[serde(default)]
    users: Vec<Named<UserWrap>>,
}

#[derive(Deserialize)]
struct UserWrap {
    #[serde(default)]
    user: User,
}

#[derive(Deserialize, Default)]
struct User {
    #[serde(default)]
    token: Option<String>,
}

#[derive(Deserialize)]
struct ContextWrap {
    context: Context,
}

#[derive(Deserialize)]
struct Context {
    cluster: String,
    #[serde(default)]
    user: String,
}

#[derive(Deserialize)]
struct ClusterWrap {
    cluster: Cluster,
}

#[derive(Deserialize)]
struct Cluster {
    server: String,
}

/// The server of a kubeconfig's current context (its only cluster when it names no context).
pub fn server_of(text: &str) -> std::result::Result<String, String> {
    let kc: Kubeconfig = serde_norway::from_str(text).map_err(|e| format!("not a kubeconfig: {e}"))?;
    let cluster = if kc.current_context.is_empty() {
        match kc.clusters.as_slice() {
            [only] => &only.inner.cluster,
            _ => return Err("no current-context, and not exactly one cluster to use".into()),
        }
    } else {
        let ctx = kc
            .contexts
            .iter()
            .find(|c| c.name == kc.current_context)
            .ok_or_else(|| format!("the current-context {:?} is not among its contexts", kc.current_context))?;
        let name = &ctx.inner.context.cluster;
        &kc.clusters
            .iter()
            .find(|c| &c.name == name)
            .ok_or_else(|| format!("the context's cluster {name:?} is not among its clusters"))?
            .inner
            .cluster
    };
    Ok(cluster.server.clone())
}

/// The bearer token of the current context's user (of its only user when
/// it names no context), as client-go sends it.
pub fn token_of(text: &str) -> Option<String> {
    let kc: Kubeconfig = serde_norway::from_str(text).ok()?;
    let user = if kc.current_context.is_empty() {
        match kc.users.as_slice() {
            [only] => &only.inner.user,
            _ => return None,
        }
    } else {
        let ctx = kc.contexts.iter().find(|c| c.name == kc.current_context)?;
        &kc.users.iter().find(|u| u.name == ctx.inner.context.user)?.inner.user
    };
    user.token.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_exit_as_the_readme_says() {
        let f =
            |code: u16, timed_out: bool| Failure { code, reason: "Forbidden".into(), message: "m".into(), timed_out };
        let exit = |f: Failure| f.error("http://127.0.0.1:1", "LIST ResourceSlices").exit_code();
        assert_eq!(exit(f(0, false)), 3, "no connection");
        for code in [401, 403, 404, 409, 500] {
            assert_eq!(exit(f(code, false)), 4, "HTTP {code}");
        }
        assert_eq!(exit(f(0, true)), 5, "no answer in time");
        let e = f(403, false).error("http://127.0.0.1:1", "LIST ResourceSlices");
        assert_eq!(e.to_string(), "LIST ResourceSlices at http://127.0.0.1:1: HTTP 403 Forbidden: m");
        assert!(e.hint().is_some_and(|h| h.contains("credentials")));
    }

    #[test]
    fn the_server_is_the_current_contexts_and_https_is_refused() {
        let kc = super::super::record::kubeconfig("http://127.0.0.1:4321", "s3cret");
        assert_eq!(server_of(&kc).unwrap(), "http://127.0.0.1:4321");
        assert_eq!(token_of(&kc).as_deref(), Some("s3cret"));
        assert_eq!(Client::for_server("http://127.0.0.1:4321").unwrap().authority, "127.0.0.1:4321");
        assert!(Client::for_server("https://10.0.0.1:6443").unwrap_err().contains("uses TLS"));
        assert!(server_of("apiVersion: v1\nkind: Config\ncurrent-context: x\n").unwrap_err().contains("\"x\""));
        assert!(server_of("[1, 2").unwrap_err().starts_with("not a kubeconfig"));
    }
}
