//! The supervisor's HTTP API: node operations (kill, restart, start, pause, resume), the
//! nodes' fault APIs forwarded, and every node's views and events merged (see the module
//! comment of [`super`]).

use super::*;

async fn list_nodes(State(sup): State<Arc<Supervisor>>) -> Response {
    Json(json!({ "nodes": sup.views() })).into_response()
}

fn node_id(raw: &str) -> Result<i32, OpError> {
    raw.parse().map_err(|_| {
        OpError(
            StatusCode::BAD_REQUEST,
            format!("node id {raw:?} is not a number"),
        )
    })
}

async fn kill_node(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(id): UrlPath<String>,
    uri: Uri,
) -> Result<Json<NodeView>, OpError> {
    let id = node_id(&id)?;
    let mut sig = Sig::Kill;
    for pair in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        sig = match pair {
            "signal=kill" | "signal=KILL" | "signal=9" => Sig::Kill,
            "signal=term" | "signal=TERM" | "signal=15" => Sig::Term,
            other => {
                return Err(OpError(
                    StatusCode::BAD_REQUEST,
                    format!("unknown parameter {other:?}; use signal=kill or signal=term"),
                ))
            }
        };
    }
    sup.signal(id, sig).await.map(Json)
}

async fn restart_node(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<NodeView>, OpError> {
    let id = node_id(&id)?;
    sup.view(id)?;
    sup.stop(id).await?;
    sup.start(id).await.map(Json)
}

async fn start_node(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<NodeView>, OpError> {
    let id = node_id(&id)?;
    sup.start(id).await.map(Json)
}

async fn pause_node(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<NodeView>, OpError> {
    sup.pause(node_id(&id)?, true).await.map(Json)
}

async fn resume_node(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<NodeView>, OpError> {
    sup.pause(node_id(&id)?, false).await.map(Json)
}

/// `GET /v1/{view}`: the same view of every node, under its id.
async fn merged_view(State(sup): State<Arc<Supervisor>>, uri: Uri) -> Response {
    let targets = sup.targets();
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.to_string());
    match tokio::task::spawn_blocking(move || crate::supervisor_views::merged_get(&targets, &path))
        .await
    {
        Ok(v) => Json(v).into_response(),
        Err(e) => OpError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `GET /v1/events[?since=N]`: the merged stream.
async fn merged_events(
    State(sup): State<Arc<Supervisor>>,
    headers: axum::http::HeaderMap,
    uri: Uri,
) -> Response {
    match brook::admin::since_param(uri.query(), &headers) {
        Ok(since) => axum::response::sse::Sse::new(sup.events.stream(since))
            .keep_alive(axum::response::sse::KeepAlive::default())
            .into_response(),
        Err(msg) => OpError(StatusCode::BAD_REQUEST, msg).into_response(),
    }
}

/// The admin listener of node `id`, or why there is none.
pub(super) fn node_admin(sup: &Supervisor, id: i32) -> Result<SocketAddr, OpError> {
    sup.view(id)?
        .admin
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .ok_or_else(|| {
            OpError(
                StatusCode::CONFLICT,
                format!("node {id} has no admin listener"),
            )
        })
}

/// `GET /nodes/{id}/metrics`: the node's Prometheus text, for the live page's plots (a page
/// served by the supervisor cannot read another origin's `/metrics`).
async fn node_metrics(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Response, OpError> {
    let admin = node_admin(&sup, node_id(&id)?)?;
    let answer =
        tokio::task::spawn_blocking(move || crate::supervisor_views::forward_metrics(admin))
            .await
            .map_err(|e| OpError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    match answer {
        Ok((status, text)) => Ok((
            status,
            [(
                axum::http::header::CONTENT_TYPE,
                brook::metrics::CONTENT_TYPE,
            )],
            text,
        )
            .into_response()),
        Err(e) => Err(OpError(StatusCode::BAD_GATEWAY, e)),
    }
}

/// `/nodes/{id}/faults[/{rule}]`: forwarded to the node's admin listener as it came.
async fn node_faults(
    State(sup): State<Arc<Supervisor>>,
    method: axum::http::Method,
    uri: Uri,
    body: Option<Json<Value>>,
) -> Result<Response, OpError> {
    let rest = uri.path().strip_prefix("/nodes/").unwrap_or("");
    let (raw_id, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let admin = node_admin(&sup, node_id(raw_id)?)?;
    let path = format!("/{tail}");
    let method = method.as_str().to_string();
    let body = body.map(|Json(b)| b);
    let answer = tokio::task::spawn_blocking(move || {
        crate::supervisor_views::forward(&method, admin, &path, body)
    })
    .await
    .map_err(|e| OpError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    match answer {
        Ok((status, v)) => Ok((status, Json(v)).into_response()),
        Err(e) => Err(OpError(StatusCode::BAD_GATEWAY, e)),
    }
}

pub(super) fn router(sup: Arc<Supervisor>) -> Router {
    let faults = get(node_faults).post(node_faults).delete(node_faults);
    Router::new()
        .route("/", get(brook::admin::live_page))
        .route("/nodes", get(list_nodes))
        .route("/nodes/{id}/kill", post(kill_node))
        .route("/nodes/{id}/restart", post(restart_node))
        .route("/nodes/{id}/start", post(start_node))
        .route("/nodes/{id}/pause", post(pause_node))
        .route("/nodes/{id}/resume", post(resume_node))
        .route("/nodes/{id}/metrics", get(node_metrics))
        .route("/nodes/{id}/faults", faults.clone())
        .route("/nodes/{id}/faults/{rule}", faults)
        .route("/v1/events", get(merged_events))
        .route("/v1/cluster", get(merged_view))
        .route("/v1/partitions", get(merged_view))
        .route("/v1/producers", get(merged_view))
        .route("/v1/groups", get(merged_view))
        .route("/v1/transactions", get(merged_view))
        .route("/v1/client-metrics", get(merged_view))
        .route("/v1/share-partitions", get(merged_view))
        .route("/v1/labs", get(super::labs::list))
        .route("/v1/labs/{name}/step", post(super::labs::step))
        .route("/v1/labs/{name}/reset", post(super::labs::reset))
        .with_state(sup)
}
