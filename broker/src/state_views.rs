//! Read-only JSON views of a node's internals on the admin listener, for people watching a
//! node while things happen (`docs/STATE-VIEWS.md` documents every field):
//!
//! - `GET /v1/cluster`: this node, its mode and, in a cluster, the quorum and the registered
//!   brokers (from the controller's committed `MetadataImage` and openraft's metrics).
//! - `GET /v1/partitions[?topic=T]`: the partitions this node hosts (`Partition::status`), with
//!   each replica's progress on the leader and the ELRs of the image.
//! - `GET /v1/producers?topic=T&partition=P`: the producers with state on one hosted
//!   partition and their retained batches (the copy DescribeProducers takes).
//! - `GET /v1/groups`: the groups this node coordinates (`GroupCoordinator::inspect`), with
//!   their committed offsets.
//! - `GET /v1/transactions`: the transactional ids this node's transaction coordinator owns,
//!   as ListTransactions and DescribeTransactions see them.
//! - `GET /v1/share-partitions[?topic=T]`: the share-partitions this node leads (KIP-932), with
//!   their in-flight records' states and delivery counts (`SharePartitionManager::inspect`).
//!
//! Every view is built at request time from the owner of each fact; nothing here keeps state.
//! Every list an answer can grow with load has a named bound and a `truncated` flag. Bad
//! parameters get 400, an unknown topic or partition 404, both as `{"error": "..."}`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::json;

use crate::broker::Broker;
use crate::cluster::partition::{FollowerState, Partition, PartitionStatus, Role};
use crate::cluster::replica_manager::now_ms;
use crate::controller::image::MetadataImage;
use crate::group::classic::ClassicGroup;
use crate::group::consumer::ConsumerGroup;
use crate::group::consumer_protocol::assignment_partitions;
use crate::group::{GroupEntry, GroupKind};
use brook_storage::ProducerStateEntry;

/// Bound on the partitions one `/v1/partitions` answer lists.
pub const PARTITIONS_PER_ANSWER_MAX: usize = 1_000;
/// Bound on the producers one `/v1/producers` answer lists.
pub const PRODUCERS_PER_ANSWER_MAX: usize = 1_000;
/// Bound on the groups one `/v1/groups` answer lists.
pub const GROUPS_PER_ANSWER_MAX: usize = 200;
/// Bound on the members listed for one group.
pub const MEMBERS_PER_GROUP_MAX: usize = 500;
/// Bound on the committed offsets listed for one group.
pub const OFFSETS_PER_GROUP_MAX: usize = 1_000;
/// Bound on the open transactions listed for one partition.
pub const OPEN_TRANSACTIONS_PER_PARTITION_MAX: usize = 50;
/// Most aborted transactions shown per partition: the latest ones.
pub const ABORTED_TRANSACTIONS_PER_PARTITION_MAX: usize = 20;
/// Bound on the transactional ids one `/v1/transactions` answer lists.
pub const TRANSACTIONS_PER_ANSWER_MAX: usize = 200;
/// Bound on the share-partitions one `/v1/share-partitions` answer lists.
pub const SHARE_PARTITIONS_PER_ANSWER_MAX: usize = 200;
/// Bound on the runs of in-flight records listed for one share-partition.
pub const IN_FLIGHT_RUNS_PER_SHARE_PARTITION_MAX: usize = 200;
/// Bound on the query parameters read from one request.
const QUERY_PARAMS_MAX: usize = 8;

/// The state view routes, to be merged into the admin router.
pub fn router(broker: Arc<Broker>) -> Router {
    Router::new()
        .route("/v1/cluster", get(cluster))
        .route("/v1/partitions", get(partitions))
        .route("/v1/producers", get(producers))
        .route("/v1/groups", get(groups))
        .route("/v1/transactions", get(transactions))
        .route("/v1/client-metrics", get(client_metrics))
        .route("/v1/share-partitions", get(share_partitions))
        .with_state(broker)
}

/// A refused request: its HTTP status and what is wrong, answered as `{"error": "..."}`.
struct ViewError {
    status: StatusCode,
    msg: String,
}

impl IntoResponse for ViewError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.msg }))).into_response()
    }
}

fn bad_request(msg: String) -> ViewError {
    ViewError {
        status: StatusCode::BAD_REQUEST,
        msg,
    }
}

fn not_found(msg: String) -> ViewError {
    ViewError {
        status: StatusCode::NOT_FOUND,
        msg,
    }
}

/// The first `max` of `items` mapped by `f`, and whether any were left out: how every list of
/// an answer is bounded. Only the kept items are mapped.
fn bounded<T, U>(
    items: impl ExactSizeIterator<Item = T>,
    max: usize,
    f: impl FnMut(T) -> U,
) -> (Vec<U>, bool) {
    let truncated = items.len() > max;
    (items.take(max).map(f).collect(), truncated)
}

/// The query string as key → value, accepting only the `allowed` keys. Topic names use only
/// `[a-zA-Z0-9._-]`, so values are taken as written: a percent-encoded value cannot name a
/// topic and ends as an unknown one.
fn query(uri: &Uri, allowed: &[&str]) -> Result<BTreeMap<String, String>, ViewError> {
    let mut out = BTreeMap::new();
    let pairs = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty());
    for (n, pair) in pairs.enumerate() {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if n >= QUERY_PARAMS_MAX || !allowed.contains(&k) {
            let known = allowed.join(", ");
            let msg = format!("unknown query parameter {k:?} (known: {known})");
            return Err(bad_request(msg));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

// ------------------------------------------------------------------------------- cluster

#[derive(Serialize)]
struct ClusterView {
    node_id: i32,
    mode: &'static str,
    controller: Option<ControllerView>,
}

#[derive(Serialize)]
struct ControllerView {
    active_controller_id: Option<i32>,
    raft_leader_id: Option<i32>,
    raft_term: u64,
    metadata_offset: u64,
    broker_epoch: Option<i64>,
    brokers: Vec<BrokerView>,
}

#[derive(Serialize)]
struct BrokerView {
    id: i32,
    host: String,
    port: u16,
    epoch: i64,
    fenced: bool,
    in_controlled_shutdown: bool,
}

async fn cluster(State(broker): State<Arc<Broker>>) -> Json<ClusterView> {
    // A single node's one-voter quorum is its own business: it is shown as no quorum.
    let quorum = Some(broker.replicas.controller()).filter(|c| !c.is_single_voter());
    let controller = quorum.map(|c| {
        let image = c.image().borrow().clone();
        // KRaft combined mode: the active controller is the Raft leader, one fact read once.
        let (leader, term) = c.raft_leader_and_term();
        ControllerView {
            active_controller_id: leader,
            raft_leader_id: leader,
            raft_term: term,
            metadata_offset: image.metadata_offset,
            broker_epoch: c.broker_epoch(),
            // Bounded by the quorum: every broker is a voter in combined mode.
            brokers: image.brokers.values().map(broker_view).collect(),
        }
    });
    let mode = if controller.is_some() {
        "cluster"
    } else {
        "single"
    };
    Json(ClusterView {
        node_id: broker.node_id(),
        mode,
        controller,
    })
}

fn broker_view(b: &crate::controller::image::BrokerRegistration) -> BrokerView {
    BrokerView {
        id: b.node_id,
        host: b.host.clone(),
        port: b.port,
        epoch: b.epoch,
        fenced: b.fenced,
        in_controlled_shutdown: b.in_controlled_shutdown,
    }
}

// ---------------------------------------------------------------------------- partitions

#[derive(Serialize)]
struct PartitionsView {
    partitions: Vec<PartitionView>,
    truncated: bool,
}

#[derive(Serialize)]
struct PartitionView {
    topic: String,
    topic_id: String,
    partition: i32,
    role: &'static str,
    leader: i32,
    leader_epoch: i32,
    partition_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    pending_isr: Option<Vec<i32>>,
    elr: Option<Vec<i32>>,
    last_known_elr: Option<Vec<i32>>,
    log_start_offset: i64,
    log_end_offset: i64,
    high_watermark: i64,
    last_stable_offset: i64,
    replica_states: Option<Vec<ReplicaView>>,
    /// The partition's open transactions, earliest first (Kafka's `ongoingTxns` of the
    /// partition's `ProducerStateManager`); the first one's first offset bounds the last
    /// stable offset.
    open_transactions: Vec<OpenTransactionView>,
    open_transactions_truncated: bool,
    /// The latest aborted transactions, oldest first: the offsets from the first record to
    /// the ABORT marker that read_committed consumers skip.
    aborted_transactions: Vec<AbortedTransactionView>,
}

#[derive(Serialize)]
struct AbortedTransactionView {
    producer_id: i64,
    first_offset: i64,
    marker_offset: i64,
}

#[derive(Serialize)]
struct OpenTransactionView {
    producer_id: i64,
    producer_epoch: i16,
    first_offset: i64,
    first_batch_timestamp: Option<i64>,
}

#[derive(Serialize)]
struct ReplicaView {
    id: i32,
    log_start_offset: i64,
    log_end_offset: i64,
    last_caught_up_ms: i64,
    last_fetch_ms: i64,
    lag: Option<i64>,
}

async fn partitions(
    State(broker): State<Arc<Broker>>,
    uri: Uri,
) -> Result<Json<PartitionsView>, ViewError> {
    let q = query(&uri, &["topic"])?;
    let topic = q.get("topic");
    if let Some(t) = topic.filter(|t| broker.replicas.topic(t).is_none()) {
        return Err(not_found(format!("unknown topic {t:?}")));
    }
    let mut hosted: Vec<Arc<Partition>> = broker
        .replicas
        .all_partitions()
        .into_iter()
        .filter(|p| topic.is_none_or(|t| &p.topic == t))
        .collect();
    hosted.sort_by(|a, b| (&a.topic, a.index).cmp(&(&b.topic, b.index)));
    let image = Some(broker.replicas.controller())
        .filter(|c| !c.is_single_voter())
        .map(|c| c.image().borrow().clone());
    let node_id = broker.node_id();
    let (partitions, truncated) = bounded(hosted.iter(), PARTITIONS_PER_ANSWER_MAX, |p| {
        partition_view(p, node_id, image.as_deref())
    });
    Ok(Json(PartitionsView {
        partitions,
        truncated,
    }))
}

fn role_name(role: &Role) -> (&'static str, Option<i32>) {
    match role {
        Role::Leader => ("leader", None),
        Role::Follower { leader } => ("follower", Some(*leader)),
        Role::None => ("none", Some(-1)),
    }
}

fn partition_view(p: &Partition, node_id: i32, image: Option<&MetadataImage>) -> PartitionView {
    let s = p.status();
    let (role, leader) = role_name(&s.role);
    let registration = image.and_then(|i| i.partition(p.topic_id, p.index));
    let replica_states = (s.role == Role::Leader).then(|| replica_views(&s, node_id));
    // One more than the bound, to tell a full list from a cut one.
    let mut open = p.open_transactions(OPEN_TRANSACTIONS_PER_PARTITION_MAX + 1);
    let open_transactions_truncated = open.len() > OPEN_TRANSACTIONS_PER_PARTITION_MAX;
    open.truncate(OPEN_TRANSACTIONS_PER_PARTITION_MAX);
    PartitionView {
        topic: p.topic.clone(),
        topic_id: p.topic_id.to_string(),
        partition: p.index,
        role,
        leader: leader.unwrap_or(node_id),
        leader_epoch: s.leader_epoch,
        partition_epoch: s.partition_epoch,
        elr: registration.map(|r| r.elr.clone()),
        last_known_elr: registration.map(|r| r.last_known_elr.clone()),
        replica_states,
        replicas: s.replicas,
        isr: s.isr,
        pending_isr: s.pending_isr,
        log_start_offset: s.log_start_offset,
        log_end_offset: s.log_end_offset,
        high_watermark: s.high_watermark,
        last_stable_offset: s.last_stable_offset,
        open_transactions: open
            .into_iter()
            .map(|t| OpenTransactionView {
                producer_id: t.producer_id,
                producer_epoch: t.producer_epoch,
                first_offset: t.first_offset,
                first_batch_timestamp: t.first_batch_timestamp,
            })
            .collect(),
        open_transactions_truncated,
        aborted_transactions: p
            .aborted_transactions(ABORTED_TRANSACTIONS_PER_PARTITION_MAX)
            .into_iter()
            .map(|t| AbortedTransactionView {
                producer_id: t.producer_id,
                first_offset: t.first_offset,
                marker_offset: t.last_offset,
            })
            .collect(),
    }
}

/// Every replica as the leader sees it: itself from its own log, the others from their
/// fetches. Lag counts offsets the replica lacks of the leader's log; unknown before its
/// first fetch.
fn replica_views(s: &PartitionStatus, node_id: i32) -> Vec<ReplicaView> {
    let me = ReplicaView {
        id: node_id,
        log_start_offset: s.log_start_offset,
        log_end_offset: s.log_end_offset,
        last_caught_up_ms: now_ms(),
        last_fetch_ms: now_ms(),
        lag: Some(0),
    };
    let others = s
        .followers
        .iter()
        .map(|(id, f): &(i32, FollowerState)| ReplicaView {
            id: *id,
            log_start_offset: f.log_start_offset,
            log_end_offset: f.log_end_offset,
            last_caught_up_ms: f.last_caught_up_ms,
            last_fetch_ms: f.last_fetch_time_ms,
            lag: (f.log_end_offset >= 0).then(|| s.log_end_offset - f.log_end_offset),
        });
    std::iter::once(me).chain(others).collect()
}

// ----------------------------------------------------------------------------- producers

#[derive(Serialize)]
struct ProducersView {
    topic: String,
    partition: i32,
    role: &'static str,
    producers: Vec<ProducerView>,
    truncated: bool,
}

#[derive(Serialize)]
struct ProducerView {
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    last_sequence: i32,
    last_timestamp: i64,
    current_txn_first_offset: Option<i64>,
    batches: Vec<BatchView>,
}

#[derive(Serialize)]
struct BatchView {
    first_sequence: i32,
    last_sequence: i32,
    first_offset: i64,
    last_offset: i64,
    timestamp: i64,
}

/// Bound on the client instances one `/v1/client-metrics` answer lists.
pub const CLIENT_INSTANCES_PER_ANSWER_MAX: usize = 200;

/// `GET /v1/client-metrics`: every KIP-714 client instance this node heard from, its
/// subscription and its last pushed metrics (`telemetry::ClientMetricsManager`).
async fn client_metrics(
    State(broker): State<Arc<Broker>>,
    uri: Uri,
) -> Result<Json<serde_json::Value>, ViewError> {
    query(&uri, &[])?;
    let all = broker.telemetry.snapshot();
    let truncated = all.len() > CLIENT_INSTANCES_PER_ANSWER_MAX;
    let clients: Vec<serde_json::Value> = all
        .into_iter()
        .take(CLIENT_INSTANCES_PER_ANSWER_MAX)
        .map(|(id, c)| {
            json!({
                "client_instance_id": id.to_string(),
                "client_id": c.selectors.client_id,
                "client_source_address": c.selectors.client_source_address,
                "subscription_id": c.subscription_id,
                "requested_metrics": c.metrics,
                "push_interval_ms": c.push_interval_ms,
                "pushes": c.pushes,
                "terminating": c.terminating,
                "metrics": c.last_points,
            })
        })
        .collect();
    Ok(Json(json!({ "clients": clients, "truncated": truncated })))
}

/// The hosted partition `?topic=T&partition=P` names, or the 400/404 answer.
fn named_partition(broker: &Broker, uri: &Uri) -> Result<Arc<Partition>, ViewError> {
    let q = query(uri, &["topic", "partition"])?;
    let (Some(topic), Some(index)) = (q.get("topic"), q.get("partition")) else {
        let msg = "topic and partition are both required".to_string();
        return Err(bad_request(msg));
    };
    let Ok(index) = index.parse::<i32>() else {
        let msg = format!("partition {index:?} is not a number");
        return Err(bad_request(msg));
    };
    let Some(meta) = broker.replicas.topic(topic) else {
        return Err(not_found(format!("unknown topic {topic:?}")));
    };
    if !(0..meta.partition_count()).contains(&index) {
        let msg = format!("topic {topic:?} has no partition {index}");
        return Err(bad_request(msg));
    }
    broker.replicas.partition(topic, index).ok_or_else(|| {
        let msg = format!("partition {topic}-{index} is not hosted by this node");
        not_found(msg)
    })
}

async fn producers(
    State(broker): State<Arc<Broker>>,
    uri: Uri,
) -> Result<Json<ProducersView>, ViewError> {
    let part = named_partition(&broker, &uri)?;
    // The copy DescribeProducers takes under the log lock.
    let mut all = part.active_producers();
    all.sort_by_key(|p| p.producer_id);
    let (producers, truncated) = bounded(all.iter(), PRODUCERS_PER_ANSWER_MAX, producer_view);
    Ok(Json(ProducersView {
        topic: part.topic.clone(),
        partition: part.index,
        role: role_name(&part.role()).0,
        producers,
        truncated,
    }))
}

fn producer_view(p: &ProducerStateEntry) -> ProducerView {
    ProducerView {
        producer_id: p.producer_id,
        producer_epoch: p.producer_epoch,
        coordinator_epoch: p.coordinator_epoch,
        last_sequence: p.last_seq(),
        last_timestamp: p.last_timestamp,
        current_txn_first_offset: p.current_txn_first_offset,
        batches: p
            .batches()
            .map(|b| BatchView {
                first_sequence: b.first_seq,
                last_sequence: b.last_seq,
                first_offset: b.first_offset,
                last_offset: b.last_offset(),
                timestamp: b.timestamp,
            })
            .collect(),
    }
}

// -------------------------------------------------------------------------------- groups

#[derive(Serialize)]
struct GroupsView {
    groups: Vec<GroupView>,
    truncated: bool,
}

#[derive(Serialize)]
struct GroupView {
    group_id: String,
    protocol: &'static str,
    state: &'static str,
    generation: i32,
    assignment_epoch: Option<i32>,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader_id: Option<String>,
    members: Vec<MemberView>,
    members_truncated: bool,
    /// Committed offsets by topic and partition (Kafka's `OffsetMetadataManager`), without
    /// those of transactions still open.
    offsets: Vec<CommittedOffsetView>,
    offsets_truncated: bool,
}

#[derive(Serialize)]
struct CommittedOffsetView {
    topic: String,
    partition: i32,
    committed_offset: i64,
    leader_epoch: i32,
    commit_timestamp_ms: i64,
}

#[derive(Serialize)]
struct MemberView {
    member_id: String,
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    member_epoch: Option<i32>,
    member_state: Option<String>,
    assignment: Option<Vec<TopicAssignment>>,
}

#[derive(Serialize)]
struct TopicAssignment {
    topic: String,
    partitions: Vec<i32>,
}

async fn groups(
    State(broker): State<Arc<Broker>>,
    uri: Uri,
) -> Result<Json<GroupsView>, ViewError> {
    query(&uri, &[])?;
    let topic_name = |id: uuid::Uuid| {
        broker
            .replicas
            .topic_name_by_id(id)
            .unwrap_or_else(|| id.to_string())
    };
    let (groups, truncated) = broker.groups.inspect(|all| {
        let mut ids: Vec<&String> = all
            .iter()
            .filter(|(_, e)| e.state_str() != "Dead")
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        let (views, truncated) = bounded(ids.into_iter(), GROUPS_PER_ANSWER_MAX, |id| {
            all.get(id).map(|e| group_view(id, e, &topic_name))
        });
        (views.into_iter().flatten().collect(), truncated)
    });
    Ok(Json(GroupsView { groups, truncated }))
}

fn group_view(
    id: &str,
    entry: &GroupEntry,
    topic_name: &dyn Fn(uuid::Uuid) -> String,
) -> GroupView {
    let mut view = match &entry.kind {
        GroupKind::Classic(g) => classic_view(g),
        GroupKind::Consumer(g) => consumer_view(g, topic_name),
        GroupKind::Share(g) => share_view(g, topic_name),
        GroupKind::Streams(g) => streams_view(g),
    };
    view.group_id = id.to_string();
    view.state = entry.state_str();
    (view.offsets, view.offsets_truncated) = bounded(
        entry.offsets.iter(),
        OFFSETS_PER_GROUP_MAX,
        |((topic, partition), o)| CommittedOffsetView {
            topic: topic.clone(),
            partition: *partition,
            committed_offset: o.value.offset,
            leader_epoch: o.value.leader_epoch,
            commit_timestamp_ms: o.value.commit_timestamp_ms,
        },
    );
    view
}

fn empty_group(protocol: &'static str, generation: i32) -> GroupView {
    GroupView {
        group_id: String::new(),
        protocol,
        state: "",
        generation,
        assignment_epoch: None,
        protocol_type: None,
        protocol_name: None,
        leader_id: None,
        members: Vec::new(),
        members_truncated: false,
        offsets: Vec::new(),
        offsets_truncated: false,
    }
}

fn classic_view(g: &ClassicGroup) -> GroupView {
    let mut view = empty_group("classic", g.generation_id);
    view.protocol_type = g.protocol_type.clone();
    view.protocol_name = g.protocol_name.clone();
    view.leader_id = g.leader_id.clone();
    (view.members, view.members_truncated) =
        bounded(g.members.iter(), MEMBERS_PER_GROUP_MAX, |m| MemberView {
            member_id: m.member_id.clone(),
            group_instance_id: m.group_instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            member_epoch: None,
            member_state: None,
            // Readable only when the group speaks the "consumer" embedded protocol.
            assignment: assignment_partitions(&m.assignment).map(|a| {
                a.into_iter()
                    .map(|(topic, partitions)| TopicAssignment { topic, partitions })
                    .collect()
            }),
        });
    view
}

fn consumer_view(g: &ConsumerGroup, topic_name: &dyn Fn(uuid::Uuid) -> String) -> GroupView {
    let mut view = empty_group("consumer", g.group_epoch);
    view.assignment_epoch = Some(g.assignment_epoch);
    view.protocol_type = Some("consumer".into());
    (view.members, view.members_truncated) =
        bounded(g.members.values(), MEMBERS_PER_GROUP_MAX, |m| MemberView {
            member_id: m.member_id.clone(),
            group_instance_id: m.instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            member_epoch: Some(m.member_epoch),
            member_state: Some(format!("{:?}", m.state)),
            assignment: Some(
                m.assigned
                    .iter()
                    .map(|(id, parts)| TopicAssignment {
                        topic: topic_name(*id),
                        partitions: parts.iter().copied().collect(),
                    })
                    .collect(),
            ),
        });
    view
}

fn share_view(
    g: &crate::group::share::ShareGroup,
    topic_name: &dyn Fn(uuid::Uuid) -> String,
) -> GroupView {
    let mut view = empty_group("share", g.group_epoch);
    view.assignment_epoch = Some(g.assignment_epoch);
    view.protocol_type = Some("share".into());
    (view.members, view.members_truncated) =
        bounded(g.members.values(), MEMBERS_PER_GROUP_MAX, |m| MemberView {
            member_id: m.member_id.clone(),
            group_instance_id: None,
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            member_epoch: Some(m.member_epoch),
            member_state: None,
            assignment: Some(
                m.assigned
                    .iter()
                    .map(|(id, parts)| TopicAssignment {
                        topic: topic_name(*id),
                        partitions: parts.iter().copied().collect(),
                    })
                    .collect(),
            ),
        });
    view
}

/// A streams group: each member's active tasks, as (subtopology id, partitions).
fn streams_view(g: &crate::group::streams::StreamsGroup) -> GroupView {
    let mut view = empty_group("streams", g.group_epoch);
    view.assignment_epoch = Some(g.assignment_epoch);
    view.protocol_type = Some("streams".into());
    (view.members, view.members_truncated) =
        bounded(g.members.values(), MEMBERS_PER_GROUP_MAX, |m| MemberView {
            member_id: m.member_id.clone(),
            group_instance_id: m.instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            member_epoch: Some(m.member_epoch),
            member_state: Some(m.state.as_str().to_string()),
            assignment: Some(
                m.assigned
                    .active
                    .iter()
                    .map(|(s, parts)| TopicAssignment {
                        topic: s.clone(),
                        partitions: parts.iter().copied().collect(),
                    })
                    .collect(),
            ),
        });
    view
}

// -------------------------------------------------------------------------- transactions

#[derive(Serialize)]
struct TransactionsView {
    transactions: Vec<TransactionView>,
    truncated: bool,
}

#[derive(Serialize)]
struct TransactionView {
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    state: &'static str,
    txn_timeout_ms: i32,
    txn_start_timestamp: i64,
    partitions: Vec<TopicAssignment>,
}

/// `GET /v1/transactions`: every transactional id this node coordinates, as
/// ListTransactions lists it and DescribeTransactions describes it (Kafka's
/// `TransactionStateManager.listTransactionStates` and `describeTransactions`). An id that
/// ends between the two calls is left out.
async fn transactions(
    State(broker): State<Arc<Broker>>,
    uri: Uri,
) -> Result<Json<TransactionsView>, ViewError> {
    query(&uri, &[])?;
    let filter = crate::txn::ListFilter {
        duration_ms: -1,
        ..Default::default()
    };
    let listed = broker.txn.list(&filter);
    let (views, truncated) = bounded(listed.iter(), TRANSACTIONS_PER_ANSWER_MAX, |l| {
        let d = broker.txn.describe(&l.transactional_id).ok()?;
        let mut partitions: Vec<TopicAssignment> = Vec::new();
        for (topic, partition) in d.partitions {
            match partitions.last_mut() {
                Some(last) if last.topic == topic => last.partitions.push(partition),
                _ => partitions.push(TopicAssignment {
                    topic,
                    partitions: vec![partition],
                }),
            }
        }
        Some(TransactionView {
            transactional_id: l.transactional_id.clone(),
            producer_id: d.producer_id,
            producer_epoch: d.producer_epoch,
            state: d.state.name(),
            txn_timeout_ms: d.txn_timeout_ms,
            txn_start_timestamp: d.txn_start_timestamp,
            partitions,
        })
    });
    Ok(Json(TransactionsView {
        transactions: views.into_iter().flatten().collect(),
        truncated,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_keeps_the_first_max_and_says_so() {
        assert_eq!(bounded(1..4, 3, |i| i * 10), (vec![10, 20, 30], false));
        assert_eq!(bounded(1..5, 3, |i| i * 10), (vec![10, 20, 30], true));
        assert_eq!(
            bounded(std::iter::empty::<i32>(), 3, |i| i),
            (vec![], false)
        );
        let mut mapped = 0;
        let _ = bounded(0..1000, 2, |_| mapped += 1);
        assert_eq!(mapped, 2, "only kept items are mapped");
    }

    #[test]
    fn query_accepts_only_known_keys() {
        let uri: Uri = "/v1/producers?topic=t&partition=3".parse().expect("uri");
        let q = query(&uri, &["topic", "partition"])
            .ok()
            .expect("known keys");
        assert_eq!(q.get("topic").map(String::as_str), Some("t"));
        assert_eq!(q.get("partition").map(String::as_str), Some("3"));
        let uri: Uri = "/v1/groups?x=1".parse().expect("uri");
        let refused = query(&uri, &[]).expect_err("unknown key refused");
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        let many = format!(
            "/v1/partitions?{}",
            ["topic=a"; QUERY_PARAMS_MAX + 1].join("&")
        );
        let uri: Uri = many.parse().expect("uri");
        assert!(query(&uri, &["topic"]).is_err(), "too many parameters");
        let uri: Uri = "/v1/partitions".parse().expect("uri");
        assert!(query(&uri, &["topic"]).is_ok_and(|q| q.is_empty()));
    }
}

// ------------------------------------------------------------------------ share-partitions

#[derive(Serialize)]
struct SharePartitionsView {
    share_partitions: Vec<SharePartitionView>,
    truncated: bool,
}

#[derive(Serialize)]
struct SharePartitionView {
    group_id: String,
    topic: String,
    partition: i32,
    start_offset: i64,
    end_offset: i64,
    leader_epoch: i32,
    state_epoch: i32,
    in_flight: Vec<InFlightRun>,
    in_flight_truncated: bool,
}

/// Consecutive in-flight offsets in one state with one delivery count.
#[derive(Serialize, PartialEq)]
struct InFlightRun {
    first_offset: i64,
    last_offset: i64,
    state: &'static str,
    delivery_count: i16,
}

async fn share_partitions(
    State(broker): State<Arc<Broker>>,
    uri: Uri,
) -> Result<Json<SharePartitionsView>, ViewError> {
    let q = query(&uri, &["topic"])?;
    let topic_id = match q.get("topic") {
        // An unknown topic holds no share-partition.
        Some(t) => match broker.replicas.topic(t) {
            Some(topic) => Some(topic.id),
            None => {
                return Ok(Json(SharePartitionsView {
                    share_partitions: Vec::new(),
                    truncated: false,
                }))
            }
        },
        None => None,
    };
    let (found, truncated) = broker
        .share
        .inspect(topic_id, SHARE_PARTITIONS_PER_ANSWER_MAX);
    let share_partitions = found
        .into_iter()
        .filter_map(|v| {
            let topic = broker.replicas.topic_name_by_id(v.key.1)?;
            let runs = in_flight_runs(&v.in_flight);
            let in_flight_truncated = runs.len() > IN_FLIGHT_RUNS_PER_SHARE_PARTITION_MAX;
            Some(SharePartitionView {
                group_id: v.key.0,
                topic,
                partition: v.key.2,
                start_offset: v.start_offset,
                end_offset: v.end_offset,
                leader_epoch: v.leader_epoch,
                state_epoch: v.state_epoch,
                in_flight: runs
                    .into_iter()
                    .take(IN_FLIGHT_RUNS_PER_SHARE_PARTITION_MAX)
                    .collect(),
                in_flight_truncated,
            })
        })
        .collect();
    Ok(Json(SharePartitionsView {
        share_partitions,
        truncated,
    }))
}

/// Kafka's `RecordState` names, run by run.
fn in_flight_runs(
    records: &[(i64, crate::share::partition::RecordState, i16)],
) -> Vec<InFlightRun> {
    use crate::share::partition::RecordState;
    let mut runs: Vec<InFlightRun> = Vec::new();
    for &(offset, state, delivery_count) in records {
        let state = match state {
            RecordState::Available => "Available",
            RecordState::Acquired => "Acquired",
            RecordState::Acknowledged => "Acknowledged",
            RecordState::Archived => "Archived",
        };
        match runs.last_mut() {
            Some(r)
                if r.last_offset + 1 == offset
                    && r.state == state
                    && r.delivery_count == delivery_count =>
            {
                r.last_offset = offset;
            }
            _ => runs.push(InFlightRun {
                first_offset: offset,
                last_offset: offset,
                state,
                delivery_count,
            }),
        }
    }
    runs
}
