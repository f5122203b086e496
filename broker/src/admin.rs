//! The admin HTTP API, on its own loopback listener (`admin.listener=127.0.0.1:PORT`).
//!
//! - `GET /faults`: the installed fault rules and how often each fired.
//! - `POST /faults` with a JSON [`FaultSpec`]: installs a rule (a request, crash or link rule,
//!   see [`crate::fault`]), answers `{"id": N}`.
//! - `DELETE /faults`: removes every rule; `DELETE /faults/{id}`: removes one.
//! - `GET /metrics`: every metric in the Prometheus text format (docs/METRICS.md).
//! - `GET /v1/cluster`, `/v1/partitions`, `/v1/producers`, `/v1/groups`: read-only JSON views
//!   of the node's state ([`crate::state_views`], `docs/STATE-VIEWS.md`).
//!
//! Bad input (malformed JSON, an unknown action or API) is answered 400 with a message that
//! says what is wrong; the broker itself is unaffected.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::fault::{FaultEngine, FaultSpec};
use crate::server::Broker;

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
    let app = router(broker.clone()).merge(crate::state_views::router(broker));
    let stop = async move {
        let _ = shutdown.changed().await;
    };
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await
    {
        tracing::error!(error = %e, "admin listener failed");
    }
}
