//! The supervisor's cluster-wide views (docs/EVENTS.md, docs/STATE-VIEWS.md): every node's
//! state view under its id, every node's event stream merged into the supervisor's own, and
//! fault rules forwarded to a node's admin listener. The supervisor keeps no node state of
//! its own: views are asked for when a request arrives; events are copied as they stream.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Map, Value};

use brook::events::EventLog;

/// How long one node may take to answer a forwarded view or fault request.
pub const NODE_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest line of a node's event stream the supervisor reads; a longer one ends the stream
/// (it is reconnected).
pub const EVENT_LINE_BYTES_MAX: u64 = 256 << 10;
/// Largest node answer read for a merged view.
pub const VIEW_ANSWER_BYTES_MAX: u64 = 16 << 20;
/// Wait before following a node's events again after its stream ended (it died, was
/// paused past the keep-alive or has not started yet).
pub const EVENT_FOLLOW_RETRY: Duration = Duration::from_millis(300);

/// Largest `/metrics` text read from a node for the live page's plots.
pub const METRICS_ANSWER_BYTES_MAX: u64 = 4 << 20;

/// Where one node's admin listener is, as the supervisor knows it now.
#[derive(Debug, Clone)]
pub struct NodeTarget {
    pub id: i32,
    pub admin: Option<SocketAddr>,
    pub alive: bool,
    /// How often the node was started: a new run numbers its events from 1 again.
    pub starts: u32,
}

/// The `Authorization` value of every call to a node (`brook cluster --http-auth`).
static NODE_AUTHORIZATION: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the credentials the supervisor's calls to its nodes carry (once, at start).
pub fn set_node_authorization(value: String) {
    let _ = NODE_AUTHORIZATION.set(value);
}

/// `request` with the nodes' credentials, when there are any.
fn authorized<B>(request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
    match NODE_AUTHORIZATION.get() {
        Some(v) => request.header("Authorization", v),
        None => request,
    }
}

fn agent(timeout: Option<Duration>) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(timeout)
        .build()
        .into()
}

/// `GET path` on every node at once (blocking): `{"nodes": {"1": answer, ...}}`, with
/// `{"error": ...}` for a node that is down or did not answer.
pub fn merged_get(targets: &[NodeTarget], path: &str) -> Value {
    let answers: Vec<(i32, Value)> = std::thread::scope(|s| {
        let calls: Vec<_> = targets
            .iter()
            .map(|t| (t.id, s.spawn(|| view_of(t, path))))
            .collect();
        calls
            .into_iter()
            .map(|(id, h)| {
                let v = h
                    .join()
                    .unwrap_or_else(|_| json!({ "error": "view call failed" }));
                (id, v)
            })
            .collect()
    });
    let nodes: Map<String, Value> = answers
        .into_iter()
        .map(|(id, v)| (id.to_string(), v))
        .collect();
    json!({ "nodes": nodes })
}

fn view_of(t: &NodeTarget, path: &str) -> Value {
    match (t.alive, t.admin) {
        (false, _) => json!({ "error": "node is not running" }),
        (true, None) => json!({ "error": "node has no admin listener" }),
        (true, Some(admin)) => match forward("GET", admin, path, None) {
            Ok((_, v)) => v,
            Err(e) => json!({ "error": e }),
        },
    }
}

/// One call to a node's admin listener (blocking): its status and JSON answer.
pub fn forward(
    method: &str,
    admin: SocketAddr,
    path: &str,
    body: Option<Value>,
) -> Result<(StatusCode, Value), String> {
    forward_within(method, admin, path, body, NODE_CALL_TIMEOUT)
}

/// [`forward`] bounded by `timeout` instead of [`NODE_CALL_TIMEOUT`], for calls that wait on
/// the cluster (a controlled shutdown).
pub fn forward_within(
    method: &str,
    admin: SocketAddr,
    path: &str,
    body: Option<Value>,
    timeout: Duration,
) -> Result<(StatusCode, Value), String> {
    let url = format!("http://{admin}{path}");
    let a = agent(Some(timeout));
    let resp = match (method, body) {
        ("POST", Some(b)) => authorized(a.post(&url)).send_json(b),
        ("POST", None) => authorized(a.post(&url)).send_empty(),
        ("DELETE", _) => authorized(a.delete(&url)).call(),
        _ => authorized(a.get(&url)).call(),
    }
    .map_err(|e| format!("{url}: {e}"))?;
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let value = resp
        .into_body()
        .with_config()
        .limit(VIEW_ANSWER_BYTES_MAX)
        .read_json::<Value>()
        .map_err(|e| format!("{url}: {e}"))?;
    Ok((status, value))
}

/// A node's `/metrics` (blocking): its status and Prometheus text, as the node wrote it.
pub fn forward_metrics(admin: SocketAddr) -> Result<(StatusCode, String), String> {
    let url = format!("http://{admin}/metrics");
    let resp = authorized(agent(Some(NODE_CALL_TIMEOUT)).get(&url))
        .call()
        .map_err(|e| format!("{url}: {e}"))?;
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let text = resp
        .into_body()
        .with_config()
        .limit(METRICS_ANSWER_BYTES_MAX)
        .read_to_string()
        .map_err(|e| format!("{url}: {e}"))?;
    Ok((status, text))
}

/// Copies node `id`'s event stream into `log` for as long as `stopping` says no: each event
/// keeps its `node` and `time_ms`, its own sequence number becomes `node_seq`, and it gets
/// `source: "node"`. A stream that ends (the node died or restarted) is followed again after
/// [`EVENT_FOLLOW_RETRY`], from where it stopped, or from the start for a new run.
pub fn follow_node_events(
    id: i32,
    target: impl Fn() -> Option<NodeTarget>,
    stopping: impl Fn() -> bool,
    log: Arc<EventLog>,
) {
    let mut run = 0;
    let mut cursor = 0u64;
    while !stopping() {
        let Some(t) = target() else { return };
        if t.starts != run {
            run = t.starts;
            cursor = 0;
        }
        if let (true, Some(admin)) = (t.alive, t.admin) {
            if let Err(e) = copy_stream(id, admin, &mut cursor, &log) {
                tracing::debug!(node = id, error = %e, "event stream ended");
            }
        }
        std::thread::sleep(EVENT_FOLLOW_RETRY);
    }
}

/// Reads one connection's worth of a node's server-sent events into `log`.
fn copy_stream(id: i32, admin: SocketAddr, cursor: &mut u64, log: &EventLog) -> Result<(), String> {
    let url = format!("http://{admin}/v1/events?since={cursor}");
    let resp = authorized(agent(None).get(&url))
        .call()
        .map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("{url}: status {}", resp.status()));
    }
    let mut reader = BufReader::new(resp.into_body().into_reader());
    let mut kind = String::new();
    let mut data = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        let n = (&mut reader)
            .take(EVENT_LINE_BYTES_MAX)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(());
        }
        if !line.ends_with('\n') {
            return Err(format!(
                "an event line longer than {EVENT_LINE_BYTES_MAX} bytes"
            ));
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        } else if let Some(v) = line.strip_prefix("event:") {
            kind = v.trim().to_string();
        } else if line.is_empty() && !data.is_empty() {
            take_event(id, &kind, &data, cursor, log);
            kind.clear();
            data.clear();
        }
    }
}

/// One event from node `id`'s stream, into the supervisor's log.
fn take_event(id: i32, kind: &str, data: &str, cursor: &mut u64, log: &EventLog) {
    let Ok(Value::Object(mut obj)) = serde_json::from_str::<Value>(data) else {
        tracing::warn!(node = id, data, "not an event object");
        return;
    };
    if kind == "dropped" {
        // The node's ring lost events before the supervisor read them: say so in the merged
        // stream, which has its own sequence.
        if let Some(next) = obj.get("next_seq").and_then(Value::as_u64) {
            *cursor = next.saturating_sub(1);
        }
        obj.insert("type".into(), json!("node_events_dropped"));
        obj.insert("node".into(), json!(id));
    } else if let Some(seq) = obj.remove("seq").and_then(|s| s.as_u64()) {
        *cursor = seq;
        obj.insert("node_seq".into(), json!(seq));
    }
    obj.insert("source".into(), json!("node"));
    log.push_object(obj);
}
