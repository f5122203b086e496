//! Raft RPCs and forwarded controller writes over HTTP/1.1 + JSON on the controller listener.
//!
//! Server side: axum. Routes:
//! - `POST /raft/append`, `/raft/vote`, `/raft/snapshot`: openraft's AppendEntries, Vote and
//!   InstallSnapshot (chunked), answered with `Result<reply, RaftError>` as JSON;
//! - `POST /controller/request`: a [`ControllerRequest`] forwarded by a non-active node,
//!   answered with `Result<ControllerReply, ControllerError>`.
//! - `POST /controller/quorum`: DescribeQuorum from a follower, answered by the Raft leader
//!   with `Result<QuorumDescription, ControllerError>` (NOT_CONTROLLER from any other node).
//!
//! Client side: Brook's one HTTP client ([`HttpClient::send_on`]) over the connection the
//! [`ControllerChannel`] opened (TLS and SASL first when the listener is secured): one
//! connection per call, `Connection: close`, the answer bounded by [`MAX_RPC_BODY_BYTES`].
//! Loopback and LAN connects are cheap next to the Raft heartbeat interval, and a fresh
//! connection per call means a restarted peer is picked up without any reconnect logic.
//!
//! Every request carries the caller's node id in a [`NODE_ID_HEADER`] header, so that link
//! fault rules ([`FaultEngine::link_fault`], traffic `controller`) can act on both ends: an
//! outgoing call to a partitioned peer fails like a refused connection, and an incoming call
//! from a partitioned peer is answered 503 without reaching Raft; openraft sees the peer as
//! unreachable either way and backs off ([`RpcError::is_unreachable`]). A `delay` rule holds the call (within the call's timeout) or the
//! incoming request.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{de::DeserializeOwned, Serialize};

use super::error::ControllerError;
use super::quorum::{self, FollowerClocks, QuorumDescription};
use super::request::{ControllerReply, ControllerRequest};
use super::storage::LogStore;
use super::voter_control;
use super::{Inner, NodeId, TypeConfig};
use crate::clock::now_ms;
use crate::fault::{Direction, FaultEngine, LinkAction, Traffic};
use crate::log_limit::{key_of, RepeatLimiter};
use crate::net::http_client::{HttpClient, HttpError};

use super::channel::{self, ControllerChannel};

/// Largest request or response body on the controller listener. Bounds what a peer can make
/// us buffer; Raft batches (`max_payload_entries`) and snapshot chunks
/// (`snapshot_max_chunk_size`) are configured well below it.
pub const MAX_RPC_BODY_BYTES: usize = 32 << 20;

/// The header that names the calling node on every Raft and forwarded request.
pub const NODE_ID_HEADER: &str = "brook-node-id";

/// Who calls whom: the `brook-node-id` header's value, and the rules that may cut the link.
#[derive(Clone, Debug)]
pub struct Link {
    /// The calling node (this one).
    pub from: i32,
    /// The called peer.
    pub to: i32,
    /// This node's fault rules, if the node has any engine.
    pub faults: Option<Arc<FaultEngine>>,
    /// How the controller listener is secured: TLS and SASL before the request.
    pub channel: Arc<ControllerChannel>,
}

/// Why a call to a peer failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("i/o with {addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("authentication to the controller listener at {addr} failed: {reason}")]
    Authentication { addr: String, reason: String },
    #[error("call to {0} timed out")]
    Timeout(String),
    #[error("HTTP status {status} from {addr}: {reason}")]
    Status {
        addr: String,
        status: String,
        reason: String,
    },
    #[error("bad HTTP answer from {addr}: {reason}")]
    Http { addr: String, reason: String },
}

impl RpcError {
    /// Whether the Raft library should back off from the peer ([`Unreachable`]) rather than
    /// send again at once ([`NetworkError`]).
    ///
    /// openraft 0.9's `ReplicationCore` backs off (`RaftNetwork::backoff`, 500 ms by default)
    /// only after `Unreachable`; after any other error the leader's engine clears the
    /// in-flight request and sends the next one immediately. Every failure here but a
    /// timeout recurs on an immediate retry: a refused or cut connection, a peer that answers
    /// 503 (a link fault rule on its side, or a node shutting down) or any other non-200
    /// status, an answer cut short, or one this node cannot decode (a peer of another
    /// version). Retried at once, each turns into a loop of thousands of calls (and log
    /// lines) a second. A timeout is paced by the call's own TTL, and a slow follower must
    /// keep getting heartbeats, so it stays a network error. Kafka's KRaft draws the same
    /// line (`org.apache.kafka.raft.RequestManager`): a request that fails puts the
    /// connection in backoff for `controller.quorum.retry.backoff.ms`; one that times out
    /// leaves it ready at once.
    pub fn is_unreachable(&self) -> bool {
        !matches!(self, RpcError::Timeout(_))
    }
}

/// How much of a non-200 answer's body goes into [`RpcError::Status`].
const STATUS_REASON_BYTES_MAX: usize = 200;

/// POSTs `body` as JSON to `http://addr{path}` and decodes the JSON answer. Link fault
/// rules of `link.faults` for `link.to` (outgoing controller traffic) apply first.
pub async fn post_json<Req: Serialize, Resp: DeserializeOwned>(
    link: &Link,
    addr: &str,
    path: &str,
    body: &Req,
    timeout: Duration,
) -> Result<Resp, RpcError> {
    let http = |reason: String| RpcError::Http {
        addr: addr.to_string(),
        reason,
    };
    let call = async {
        let fault = link
            .faults
            .as_deref()
            .and_then(|f| f.link_fault(link.to, Traffic::Controller, Direction::Out));
        match fault {
            Some(LinkAction::Partition) => {
                return Err(RpcError::Connect {
                    addr: addr.to_string(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        format!("link to node {} partitioned by a fault rule", link.to),
                    ),
                })
            }
            Some(LinkAction::Delay(d)) => tokio::time::sleep(d).await,
            None => {}
        }
        // TLS and SASL when the listener is secured; `connect` sets TCP_NODELAY (Raft
        // heartbeats are tiny; Nagle must not hold them back).
        let stream = link
            .channel
            .connect(addr, link.from)
            .await
            .map_err(|source| connect_error(addr, source))?;
        let body = serde_json::to_vec(body).map_err(|e| http(e.to_string()))?;
        let from = link.from.to_string();
        let headers = [
            ("content-type", "application/json"),
            (NODE_ID_HEADER, from.as_str()),
            ("connection", "close"),
        ];
        // The call's own timeout (below) bounds the whole exchange.
        let client = HttpClient::new(None)
            .with_timeouts(timeout_ms(timeout), timeout_ms(timeout))
            .with_body_bytes_max(MAX_RPC_BODY_BYTES);
        let url = format!("http://{addr}{path}");
        let answer = client
            .send_on(stream, hyper::Method::POST, &url, &headers, body.into())
            .await
            .map_err(|e| rpc_error(addr, e))?;
        decode_answer(addr, answer)
    };
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| RpcError::Timeout(addr.to_string()))?
}

/// A failed connect or authentication. A refused authentication is logged at error level
/// (rate-limited per address): it does not heal by retrying, unlike a peer that is down.
fn connect_error(addr: &str, source: std::io::Error) -> RpcError {
    if source.kind() != std::io::ErrorKind::PermissionDenied {
        return RpcError::Connect {
            addr: addr.to_string(),
            source,
        };
    }
    let e = RpcError::Authentication {
        addr: addr.to_string(),
        reason: source.to_string(),
    };
    static REFUSED: RepeatLimiter = RepeatLimiter::new();
    if let Some(note) = REFUSED.admit(key_of(addr)) {
        tracing::error!("{e}{note}");
    }
    e
}

fn timeout_ms(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)
}

/// A failed exchange as the Raft network reports it: a timeout stays a timeout (retried at
/// once); the rest make the peer unreachable ([`RpcError::is_unreachable`]).
fn rpc_error(addr: &str, e: HttpError) -> RpcError {
    match e {
        HttpError::Timeout { .. } => RpcError::Timeout(addr.to_string()),
        HttpError::Io { why, .. } => RpcError::Io {
            addr: addr.to_string(),
            source: std::io::Error::other(why),
        },
        other => RpcError::Http {
            addr: addr.to_string(),
            reason: other.to_string(),
        },
    }
}

/// The JSON body of a 200 answer from `addr`; another status is [`RpcError::Status`] with the
/// start of its body.
fn decode_answer<Resp: DeserializeOwned>(
    addr: &str,
    answer: crate::net::http_client::HttpResponse,
) -> Result<Resp, RpcError> {
    if answer.status != hyper::StatusCode::OK {
        let body = &answer.body;
        let reason = &body[..body.len().min(STATUS_REASON_BYTES_MAX)];
        return Err(RpcError::Status {
            addr: addr.to_string(),
            status: answer.status.as_str().to_string(),
            reason: String::from_utf8_lossy(reason).trim().to_string(),
        });
    }
    serde_json::from_slice(&answer.body).map_err(|e| RpcError::Http {
        addr: addr.to_string(),
        reason: e.to_string(),
    })
}

/// The axum router of the controller listener.
pub(super) fn router(inner: Arc<Inner>) -> Router {
    Router::new()
        .route("/raft/append", post(append))
        .route("/raft/vote", post(vote))
        .route("/raft/snapshot", post(snapshot))
        .route("/controller/request", post(forwarded))
        .route("/controller/quorum", post(describe_quorum))
        .route("/controller/voters", post(voters))
        .route("/controller/observe", post(observe))
        .layer(DefaultBodyLimit::max(MAX_RPC_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            inner.clone(),
            channel::authorize,
        ))
        .layer(axum::middleware::from_fn_with_state(
            inner.clone(),
            incoming_link_faults,
        ))
        .with_state(inner)
}

/// Applies link fault rules to a request from the peer its [`NODE_ID_HEADER`] names:
/// partitioned → 503 without processing; delayed → processed after the delay. Requests
/// without the header (or with a malformed one) pass.
async fn incoming_link_faults(
    State(inner): State<Arc<Inner>>,
    req: Request,
    next: Next,
) -> Response {
    let peer = req
        .headers()
        .get(NODE_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i32>().ok());
    let fault = match (&inner.faults, peer) {
        (Some(f), Some(peer)) => f
            .link_fault(peer, Traffic::Controller, Direction::In)
            .map(|a| (peer, a)),
        _ => None,
    };
    match fault {
        Some((peer, LinkAction::Partition)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("link from node {peer} partitioned by a fault rule"),
        )
            .into_response(),
        Some((_, LinkAction::Delay(d))) => {
            tokio::time::sleep(d).await;
            next.run(req).await
        }
        None => next.run(req).await,
    }
}

async fn append(
    State(inner): State<Arc<Inner>>,
    Json(req): Json<AppendEntriesRequest<TypeConfig>>,
) -> Json<Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>> {
    Json(inner.raft.append_entries(req).await)
}

async fn vote(
    State(inner): State<Arc<Inner>>,
    Json(req): Json<VoteRequest<NodeId>>,
) -> Json<Result<VoteResponse<NodeId>, RaftError<NodeId>>> {
    Json(inner.raft.vote(req).await)
}

async fn snapshot(
    State(inner): State<Arc<Inner>>,
    Json(req): Json<InstallSnapshotRequest<TypeConfig>>,
) -> Json<Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>> {
    Json(inner.raft.install_snapshot(req).await)
}

async fn forwarded(
    State(inner): State<Arc<Inner>>,
    Json(req): Json<ControllerRequest>,
) -> Json<Result<ControllerReply, ControllerError>> {
    // Never forwarded again: a node that is no longer active answers NOT_CONTROLLER and the
    // caller retries, so a request cannot bounce between two nodes with stale views.
    Json(inner.handle_locally(req).await)
}

/// DescribeQuorum forwarded by a follower: answered only by the leader, never forwarded.
async fn describe_quorum(
    State(inner): State<Arc<Inner>>,
) -> Json<Result<QuorumDescription, ControllerError>> {
    Json(quorum::describe_as_leader(&inner))
}

/// A voter change forwarded to the active controller: never forwarded again.
async fn voters(
    State(inner): State<Arc<Inner>>,
    Json(change): Json<voter_control::VoterChange>,
) -> Json<Result<(), ControllerError>> {
    Json(inner.change_voters(change, true).await)
}

/// An observer asking to be taken in (`controller.quorum.bootstrap.servers`).
async fn observe(
    State(inner): State<Arc<Inner>>,
    Json(req): Json<voter_control::ObserveRequest>,
) -> Json<Result<(), ControllerError>> {
    Json(voter_control::observe(&inner, req).await)
}

/// Creates a [`PeerClient`] per Raft peer.
pub struct NetworkFactory {
    /// This node's id, sent in [`NODE_ID_HEADER`].
    pub node_id: i32,
    /// This node's fault rules, for link faults.
    pub faults: Option<Arc<FaultEngine>>,
    /// The local Raft log: its last index when an AppendEntries is sent.
    pub log: LogStore,
    /// Where accepted AppendEntries are recorded for DescribeQuorum.
    pub clocks: Arc<FollowerClocks>,
    /// How the controller listener is secured.
    pub channel: Arc<ControllerChannel>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            target,
            addr: node.addr.clone(),
            link: Link {
                from: self.node_id,
                to: i32::try_from(target).unwrap_or(i32::MAX),
                faults: self.faults.clone(),
                channel: self.channel.clone(),
            },
            log: self.log.clone(),
            clocks: self.clocks.clone(),
        }
    }
}

/// Sends Raft RPCs to one peer.
pub struct PeerClient {
    target: NodeId,
    addr: String,
    link: Link,
    log: LogStore,
    clocks: Arc<FollowerClocks>,
}

impl PeerClient {
    async fn call<Req, Resp, E>(
        &self,
        path: &str,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let answer: Result<Resp, E> =
            post_json(&self.link, &self.addr, path, req, option.hard_ttl())
                .await
                .map_err(|e| {
                    if e.is_unreachable() {
                        RPCError::Unreachable(Unreachable::new(&e))
                    } else {
                        RPCError::Network(NetworkError::new(&e))
                    }
                })?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let sent_ms = now_ms();
        let leader_last_index = self.log.last_index();
        let answer = self.call("/raft/append", &rpc, &option).await;
        if let Ok(a) = &answer {
            self.clocks
                .record(self.target, &rpc, sent_ms, leader_last_index, a);
        }
        answer
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call("/raft/snapshot", &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call("/raft/vote", &rpc, &option).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A peer that answers every call with `answer` and closes.
    async fn peer_answering(answer: &'static str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(answer.as_bytes()).await;
            }
        });
        addr
    }

    async fn call(addr: &str) -> RpcError {
        let link = Link {
            from: 1,
            to: 2,
            faults: None,
            channel: Arc::new(ControllerChannel::plaintext()),
        };
        let timeout = Duration::from_secs(5);
        post_json::<_, serde_json::Value>(&link, addr, "/raft/append", &(), timeout)
            .await
            .expect_err("the call fails")
    }

    #[tokio::test]
    async fn a_peer_that_cannot_serve_is_unreachable() {
        let busy = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 7\r\n\r\ncut off";
        let e = call(&peer_answering(busy).await).await;
        assert!(
            matches!(&e, RpcError::Status { status, reason, .. } if status == "503" && reason == "cut off"),
            "{e:?}"
        );
        assert!(e.is_unreachable());
        // Any other status, an answer cut short or one that does not decode recurs as well.
        let other = "HTTP/1.1 422 Unprocessable Entity\r\ncontent-length: 0\r\n\r\n";
        assert!(call(&peer_answering(other).await).await.is_unreachable());
        assert!(call(&peer_answering("HTTP/1.1 200 OK").await)
            .await
            .is_unreachable());
        let garbled = "HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\n{{{";
        assert!(call(&peer_answering(garbled).await).await.is_unreachable());
        // Nobody listening.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = closed.local_addr().unwrap().to_string();
        drop(closed);
        assert!(call(&addr).await.is_unreachable());
    }

    #[test]
    fn a_timeout_is_retried_at_once() {
        assert!(!RpcError::Timeout("127.0.0.1:1".into()).is_unreachable());
    }
}
