//! The admin HTTP API, on its own listener (`admin.listener=127.0.0.1:PORT`).
//!
//! - `GET /faults`: the installed fault rules and how often each fired.
//! - `POST /faults` with a JSON [`FaultSpec`]: installs a rule (a request, crash or link rule,
//!   see [`crate::fault`]), answers `{"id": N}`.
//! - `DELETE /faults`: removes every rule; `DELETE /faults/{id}`: removes one.
//! - `GET /metrics`: every metric in the Prometheus text format (docs/METRICS.md).
//! - `GET /v1/cluster`, `/v1/partitions`, `/v1/producers`, `/v1/groups`: read-only JSON views
//!   of the node's state ([`crate::state_views`], `docs/STATE-VIEWS.md`).
//! - `GET /v1/events[?since=N]`: the node's event stream, server-sent events
//!   ([`crate::events`], `docs/EVENTS.md`).
//! - `GET /`: the live page (`docs/LIVE-PAGE.md`), compiled into the binary.
//! - `POST /controlled-shutdown`: the broker side of a controlled shutdown while the node
//!   keeps running ([`Broker::controlled_shutdown`]), answered once the controller granted it
//!   and this node applied the hand-over (504 if not within `broker.session.timeout.ms`).
//!   `brook cluster` stops every node's broker side this way before any node exits, as
//!   Kafka's `KafkaClusterTestKit.close` shuts every broker down before the controllers.
//!
//! With `admin.listener=https://...` the listener serves TLS, and with
//! `admin.basic.auth.credentials.file` every request needs HTTP Basic credentials
//! (`/metrics` too unless `admin.metrics.authentication.required=false`):
//! [`crate::admin_security`].
//!
//! Bad input (malformed JSON, an unknown action or API) is answered 400 with a message that
//! says what is wrong; the broker itself is unaffected.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::broker::Broker;
use crate::fault::{FaultEngine, FaultSpec};

fn bad_request(msg: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({ "error": msg }))).into_response()
}

async fn list_faults(State(engine): State<Arc<FaultEngine>>) -> Response {
    Json(json!({ "rules": engine.list() })).into_response()
}

async fn add_fault(
    State(engine): State<Arc<FaultEngine>>,
    body: Result<Json<FaultSpec>, JsonRejection>,
) -> Response {
    let Json(spec) = match body {
        Ok(b) => b,
        Err(e) => return bad_request(e.body_text()),
    };
    match engine.add(spec) {
        Ok(id) => (StatusCode::CREATED, Json(json!({ "id": id }))).into_response(),
        Err(e) => bad_request(e.to_string()),
    }
}

async fn clear_faults(State(engine): State<Arc<FaultEngine>>) -> Response {
    Json(json!({ "removed": engine.clear(None) })).into_response()
}

async fn clear_fault(State(engine): State<Arc<FaultEngine>>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return bad_request(format!("rule id {id:?} is not a number"));
    };
    match engine.clear(Some(id)) {
        0 => (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": format!("no rule {id}") })),
        )
            .into_response(),
        n => Json(json!({ "removed": n })).into_response(),
    }
}

/// `GET /metrics`: rendered from the broker's state at this moment.
async fn metrics(State(broker): State<Arc<Broker>>) -> Response {
    match crate::metrics::render(broker) {
        Ok(text) => ([(CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `GET /v1/events[?since=N]`. A browser's reconnect sends `Last-Event-ID` instead of `since`.
async fn events(State(broker): State<Arc<Broker>>, headers: HeaderMap, uri: Uri) -> Response {
    let since = match since_param(uri.query(), &headers) {
        Ok(s) => s,
        Err(msg) => return bad_request(msg),
    };
    Sse::new(broker.events.stream(since))
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The `since` of an event stream request: `?since=N`, else a `Last-Event-ID` header.
pub fn since_param(query: Option<&str>, headers: &HeaderMap) -> Result<Option<u64>, String> {
    let mut since = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("since", v)) => {
                since = Some(
                    v.parse::<u64>()
                        .map_err(|_| format!("since={v:?} is not a sequence number"))?,
                )
            }
            _ => return Err(format!("unknown parameter {pair:?}; only since=N")),
        }
    }
    if since.is_none() {
        since = headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
    }
    Ok(since)
}

/// `POST /controlled-shutdown`.
async fn controlled_shutdown(State(broker): State<Arc<Broker>>) -> Response {
    if !broker.config.controlled_shutdown_enable {
        let msg = "controlled.shutdown.enable is false".to_string();
        return (StatusCode::CONFLICT, Json(json!({ "error": msg }))).into_response();
    }
    match broker.controlled_shutdown().await {
        true => Json(json!({ "granted": true })).into_response(),
        false => (
            StatusCode::GATEWAY_TIMEOUT,
            Json(json!({ "error": "controlled shutdown not granted and applied in time" })),
        )
            .into_response(),
    }
}

/// `GET /`: the live page, the same file the supervisor serves.
pub async fn live_page() -> Response {
    (
        [(CONTENT_TYPE, "text/html; charset=utf-8")],
        crate::live_page::HTML,
    )
        .into_response()
}

/// The admin routes.
pub fn router(broker: Arc<Broker>) -> Router {
    let faults = Router::new()
        .route(
            "/faults",
            get(list_faults).post(add_fault).delete(clear_faults),
        )
        .route("/faults/{id}", delete(clear_fault))
        .with_state(broker.faults.clone());
    let metrics = Router::new()
        .route("/metrics", get(metrics))
        .route("/v1/events", get(events))
        .route("/", get(live_page))
        .route("/controlled-shutdown", post(controlled_shutdown))
        .with_state(broker);
    faults.merge(metrics)
}

/// Binds the admin listener.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves the admin API until shutdown.
pub async fn serve(
    listener: TcpListener,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
) {
    let events = broker.events.clone();
    let security = broker.config.admin_http.clone();
    let open = match security.metrics_authentication_required {
        true => vec![],
        false => vec!["/metrics"],
    };
    let app = router(broker.clone()).merge(crate::state_views::router(broker));
    let app = crate::admin_security::protect(app, security.credentials, open);
    let stop = async move {
        let _ = shutdown.changed().await;
        // Open event streams would hold the graceful shutdown forever.
        events.close();
    };
    let served = match security.tls {
        Some(tls) => {
            let listener = crate::admin_security::TlsListener::new(listener, tls);
            axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
        }
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
        }
    };
    if let Err(e) = served {
        tracing::error!(error = %e, "admin listener failed");
    }
}
