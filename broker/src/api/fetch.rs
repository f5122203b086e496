//! Fetch: read committed data (up to the high watermark), long-polling with `max_wait_ms`
//! and `min_bytes` on partition events rather than a sleep loop; `min_bytes=0` answers at
//! once. A follower's fetch (replica id set) is answered by `Partition::fetch_for_follower`.
//!
//! At `isolation_level` 1 (read_committed, Kafka's `FetchIsolation.TXN_COMMITTED`) a consumer
//! reads below the last stable offset, and gets the aborted transactions overlapping what it
//! read, so it can drop their records. A parked read_committed fetch wakes when the LSO can
//! move: on every append (a marker) and every high watermark change, the partition's events.
//!
//! Incremental fetch sessions (KIP-227) live in [`crate::cluster::fetch_session`]: a fetch of a
//! session reads the session's partitions, and its answer leaves out those where nothing
//! changed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
    PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::ResponseError;
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use super::auth_helper::{authorize, authorize_cluster};
use super::{Outcome, RequestContext};
use crate::broker::Broker;
use crate::cluster::fetch_session::{FetchParams, FetchSessionCache, SessionKey};
use crate::cluster::partition::{FetchIsolation, FollowerFetch, Partition, PartitionRead};
use crate::fault::{Direction, LinkAction, Traffic};
use crate::metrics::GaugeGuard;
use crate::net::codec::CodecError;
use crate::security::acl::{AclOperation, ResourceType};

/// Upper bound on how long one fetch may be parked, whatever the client asks.
pub const FETCH_MAX_WAIT_MS_LIMIT: i32 = 60_000;

/// One requested partition, resolved once per request.
struct Wanted {
    /// Partitions of one topic entry of the answer share a group: the request's topic
    /// entry, or a run of one topic in a session's order.
    group: usize,
    topic: TopicName,
    topic_id: Uuid,
    partition_index: i32,
    fetch_offset: i64,
    partition_max_bytes: usize,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    /// A follower's own log start offset (Kafka's `FetchPartition.logStartOffset`).
    log_start_offset: i64,
    /// The partition, or the error it is answered (`ReplicaManager::partition_or_error`;
    /// UNKNOWN_TOPIC_ID for a topic id the metadata does not know).
    partition: Result<Arc<Partition>, ResponseError>,
}

/// Handles one Fetch request.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: FetchRequest,
) -> Result<Outcome, CodecError> {
    let by_id = ctx.api_version >= 13;
    // Followers fetch with their replica id: in the body up to v14, in replica_state after.
    let replica_id = if ctx.api_version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    let follower = (replica_id >= 0).then_some(replica_id);
    let isolation = FetchIsolation::from_isolation_level(req.isolation_level);
    if let Some(peer) = follower {
        if let Some(cut) = replication_link_fault(broker, peer).await {
            return Ok(cut);
        }
    }
    let version = ctx.api_version;
    let (requested, forgotten) = session_partitions(&req, version);
    let now_ms = crate::cluster::replica_manager::now_ms();
    let session = broker.fetch_sessions.new_context(
        version,
        (req.session_id, req.session_epoch),
        follower.is_some(),
        &requested,
        &forgotten,
        now_ms,
    );
    // A session error reads nothing and is answered at once, with the error alone.
    let fetched = FetchSessionCache::partitions(&session).unwrap_or(requested);
    // Kafka's `handleFetchRequest`: a follower needs CLUSTER_ACTION on the cluster, a
    // consumer READ on each topic; refused partitions answer TOPIC_AUTHORIZATION_FAILED.
    let cluster_action =
        follower.is_some() && authorize_cluster(broker, ctx, AclOperation::ClusterAction);
    let allowed = |topic: &str| match follower {
        Some(_) => cluster_action,
        None => authorize(broker, ctx, AclOperation::Read, ResourceType::Topic, topic),
    };
    let wanted = resolve(broker, by_id, &fetched, allowed);
    let max_wait = Duration::from_millis(req.max_wait_ms.clamp(0, FETCH_MAX_WAIT_MS_LIMIT) as u64);
    let deadline = Instant::now() + max_wait;
    let (max_bytes, min_bytes) = bytes_limits(broker, ctx, &req, follower);
    let read = PartitionsRead {
        broker,
        follower,
        isolation,
        wanted: &wanted,
        max_bytes,
    };
    let results = read.wait_for_min_bytes(min_bytes, deadline).await;
    if follower.is_none() {
        if let Some(throttled) = over_quota(broker, ctx, &session, &results) {
            return throttled;
        }
        count_bytes_out(&wanted, &results);
    }

    let answer = broker
        .fetch_sessions
        .answer(&session, &fetched, &results, now_ms);
    let (responses, node_endpoints) = topic_responses(broker, ctx, &wanted, results, &answer.keep);
    let resp = FetchResponse::default()
        .with_error_code(answer.error.map_or(0, |e| e.code()))
        .with_session_id(answer.session_id)
        .with_responses(responses)
        .with_node_endpoints(node_endpoints);
    broker
        .metrics
        .requests
        .record_errors(ctx.api_key, ctx.api_version, &resp);
    // The records go to the socket as the log read returned them, not copied into one buffer.
    Ok(Outcome::RespondChunks(super::fetch_encode::encode_chunks(
        &resp,
        ctx.api_version,
        ctx.correlation_id,
    )?))
}

/// The answer's (max_bytes, min_bytes). The broker's fetch.max.bytes caps what the request
/// asks, for consumers and followers alike, and min_bytes cannot exceed the cap (Kafka's
/// `KafkaApis.handleFetchRequest`). A max_bytes of 0 or less still answers the first batch
/// (KIP-74's one-batch minimum, in `read_all`).
fn bytes_limits(
    broker: &Broker,
    ctx: &RequestContext,
    req: &FetchRequest,
    follower: Option<i32>,
) -> (usize, usize) {
    let max_bytes = (req.max_bytes.max(0) as usize)
        .min(broker.config.fetch_max_bytes)
        .min(quota_window_bytes(broker, ctx, follower));
    let min_bytes = (req.min_bytes.max(0) as usize).min(max_bytes);
    (max_bytes, min_bytes)
}

/// A link rule on the follower `peer`'s replication traffic to this node: a cut link closes
/// the connection (it looks dead to the follower), a slow one delays the fetch.
async fn replication_link_fault(broker: &Broker, peer: i32) -> Option<Outcome> {
    match broker
        .faults
        .link_fault(peer, Traffic::Replication, Direction::In)
    {
        Some(LinkAction::Partition) => Some(Outcome::Close(format!(
            "link from node {peer} partitioned by a fault rule"
        ))),
        Some(LinkAction::Delay(d)) => {
            broker.fault_sleep(d).await;
            None
        }
        None => None,
    }
}

/// The request's partitions with their fetch positions, and the ones it drops from its
/// session (v7+; Kafka's `FetchRequest.fetchData` and `forgottenTopics`).
fn session_partitions(
    req: &FetchRequest,
    version: i16,
) -> (Vec<(SessionKey, FetchParams)>, Vec<SessionKey>) {
    let mut requested = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            requested.push((
                SessionKey::new(version, &t.topic, t.topic_id, p.partition),
                FetchParams {
                    fetch_offset: p.fetch_offset,
                    log_start_offset: p.log_start_offset,
                    partition_max_bytes: p.partition_max_bytes,
                    current_leader_epoch: p.current_leader_epoch,
                    last_fetched_epoch: p.last_fetched_epoch,
                },
            ));
        }
    }
    let forgotten = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |&p| SessionKey::new(version, &t.topic, t.topic_id, p))
        })
        .collect();
    (requested, forgotten)
}

/// The answer's topic entries, one per group of consecutive wanted partitions, holding the
/// partitions the session keeps (`keep`), with their leader hints and the hinted leaders'
/// endpoints.
fn topic_responses(
    broker: &Broker,
    ctx: &RequestContext,
    wanted: &[Wanted],
    results: Vec<PartitionData>,
    keep: &[bool],
) -> (Vec<FetchableTopicResponse>, Vec<NodeEndpoint>) {
    let by_id = ctx.api_version >= 13;
    let mut responses: Vec<FetchableTopicResponse> = Vec::new();
    let mut node_endpoints = Vec::new();
    let mut last_group = None;
    for ((w, mut data), &keep) in wanted.iter().zip(results).zip(keep) {
        if !keep {
            continue;
        }
        if last_group != Some(w.group) {
            last_group = Some(w.group);
            let t = FetchableTopicResponse::default().with_topic_id(w.topic_id);
            responses.push(if by_id {
                t
            } else {
                t.with_topic(w.topic.clone())
            });
        }
        leader_hint(broker, ctx, &w.topic, &mut data, &mut node_endpoints);
        if let Some(t) = responses.last_mut() {
            t.partitions.push(data);
        }
    }
    (responses, node_endpoints)
}

/// KIP-951 (`leader_hint`): from v16, a partition answered NOT_LEADER_OR_FOLLOWER or
/// FENCED_LEADER_EPOCH names the leader this node knows, and the response carries its
/// endpoint, as Kafka's `handleFetchRequest` does.
fn leader_hint(
    broker: &Broker,
    ctx: &RequestContext,
    topic: &str,
    data: &mut PartitionData,
    endpoints: &mut Vec<NodeEndpoint>,
) {
    let hinted = [
        ResponseError::NotLeaderOrFollower.code(),
        ResponseError::FencedLeaderEpoch.code(),
    ];
    if ctx.api_version < super::leader_hint::FETCH_HINT_VERSION_MIN
        || !hinted.contains(&data.error_code)
    {
        return;
    }
    let listener = &ctx.session.listener_name;
    let hint = super::leader_hint::current_leader(broker, listener, topic, data.partition_index);
    data.current_leader = LeaderIdAndEpoch::default()
        .with_leader_id(hint.leader_id.into())
        .with_leader_epoch(hint.leader_epoch);
    if let Some((host, port)) = hint.endpoint {
        if !endpoints.iter().any(|e| e.node_id.0 == hint.leader_id) {
            endpoints.push(
                NodeEndpoint::default()
                    .with_node_id(hint.leader_id.into())
                    .with_host(super::sb(host))
                    .with_port(port),
            );
        }
    }
}

/// The most a consumer may fetch at once without being throttled, given nothing fetched
/// lately (Kafka's `getMaxValueInQuotaWindow` cap on `fetchMaxBytes`); no cap for followers
/// or clients without a fetch quota.
fn quota_window_bytes(broker: &Broker, ctx: &RequestContext, follower: Option<i32>) -> usize {
    if follower.is_some() {
        return usize::MAX;
    }
    let quotas = broker.replicas.image().client_quotas.clone();
    let client_id = ctx.client_id.as_deref().unwrap_or("");
    broker
        .quotas
        .fetch
        .max_value_in_quota_window(&quotas, &ctx.session.principal.name, client_id)
        .map_or(usize::MAX, |v| v as usize)
}

/// A consumer's fetch against its fetch and request quotas (Kafka's `handleFetchRequest`):
/// the answer's record bytes are recorded; over either quota, they are taken back and the answer is the
/// session's throttled one, no partitions and the throttle time (KIP-219), with the
/// session left as it was (Kafka's `FetchContext.getThrottledResponse`). Kafka counts the
/// whole answer's encoded size; Brook counts its record bytes, all but a few bytes per
/// partition of it.
fn over_quota(
    broker: &Broker,
    ctx: &RequestContext,
    session: &crate::cluster::fetch_session::FetchContext,
    results: &[PartitionData],
) -> Option<Result<Outcome, CodecError>> {
    let bytes: usize = results
        .iter()
        .filter_map(|p| p.records.as_ref().map(|r| r.len()))
        .sum();
    let manager = &broker.quotas.fetch;
    let bandwidth_ms = super::client_quotas::record(broker, ctx, manager, bytes);
    // The request quota throttles the same way (a follower's fetch, exempt, never gets here).
    let request_ms = super::request_quota::measure(broker, ctx);
    let throttle_ms =
        super::client_quotas::throttle_larger(broker, ctx, manager, bandwidth_ms, request_ms);
    if throttle_ms == 0 {
        return None;
    }
    let now = crate::cluster::replica_manager::now_ms();
    let client_id = ctx.client_id.as_deref().unwrap_or("");
    manager.unrecord(&ctx.session.principal.name, client_id, bytes as f64, now);
    let (session_id, error) = FetchSessionCache::throttled(session);
    let resp = FetchResponse::default()
        .with_throttle_time_ms(throttle_ms)
        .with_error_code(error.map_or(0, |e| e.code()))
        .with_session_id(session_id);
    broker
        .metrics
        .requests
        .record_errors(ctx.api_key, ctx.api_version, &resp);
    Some(
        super::fetch_encode::encode_chunks(&resp, ctx.api_version, ctx.correlation_id)
            .map(Outcome::RespondChunks),
    )
}

/// Finds the partitions `fetched` names: by topic id from v13, by name before. Consecutive
/// partitions of one topic share an answer entry.
fn resolve(
    broker: &Broker,
    by_id: bool,
    fetched: &[(SessionKey, FetchParams)],
    allowed: impl Fn(&str) -> bool,
) -> Vec<Wanted> {
    let mut wanted: Vec<Wanted> = Vec::with_capacity(fetched.len());
    let mut group = 0;
    let mut name: Option<String> = None;
    let mut authorized = true;
    for (i, (key, params)) in fetched.iter().enumerate() {
        let same_topic = i > 0 && {
            let prev = &fetched[i - 1].0;
            prev.topic_id == key.topic_id && prev.topic == key.topic
        };
        if !same_topic {
            group = i;
            name = if by_id {
                broker.replicas.topic_name_by_id(key.topic_id)
            } else {
                Some(key.topic.to_string())
            };
            authorized = name.as_deref().is_none_or(&allowed);
        }
        let partition = match name.as_deref() {
            None => Err(ResponseError::UnknownTopicId),
            Some(_) if !authorized => Err(ResponseError::TopicAuthorizationFailed),
            Some(n) => broker.replicas.partition_or_error(n, key.partition),
        };
        wanted.push(Wanted {
            group,
            topic: key.topic.clone(),
            topic_id: key.topic_id,
            partition_index: key.partition,
            fetch_offset: params.fetch_offset,
            partition_max_bytes: params.partition_max_bytes.max(0) as usize,
            current_leader_epoch: params.current_leader_epoch,
            last_fetched_epoch: params.last_fetched_epoch,
            log_start_offset: params.log_start_offset,
            partition,
        });
    }
    wanted
}

/// Counts the record bytes a consumer is answered, per partition (Kafka's BytesOutPerSec;
/// follower fetches are replication, not client traffic). Counted once, on the answer: a
/// parked fetch reads several times.
fn count_bytes_out(wanted: &[Wanted], results: &[PartitionData]) {
    for (w, data) in wanted.iter().zip(results) {
        if let (Ok(p), Some(records)) = (&w.partition, &data.records) {
            p.traffic.record_out(records.len());
        }
    }
}

/// One fetch's reads: the wanted partitions, read as a consumer (at `isolation`) or as
/// follower `follower`, within `max_bytes` for the whole answer.
struct PartitionsRead<'a> {
    broker: &'a Broker,
    follower: Option<i32>,
    isolation: FetchIsolation,
    wanted: &'a [Wanted],
    max_bytes: usize,
}

impl PartitionsRead<'_> {
    /// Reads until `min_bytes` are readable (at once for 0), any partition has an error or a
    /// diverging epoch, or `deadline` passes, parked on the partitions' events in between
    /// (Kafka's `ReplicaManager.fetchMessages` and its `DelayedFetch`).
    async fn wait_for_min_bytes(&self, min_bytes: usize, deadline: Instant) -> Vec<PartitionData> {
        let waiter = Arc::new(Notify::new());
        let mut parked = false;
        // Raised from the first wait to the answer (Kafka's Fetch purgatory).
        let mut delayed: Option<GaugeGuard> = None;
        loop {
            let (results, bytes, any_error) = self.read_all();
            if bytes >= min_bytes
                || any_error
                || Instant::now() >= deadline
                || self.wanted.is_empty()
            {
                return results;
            }
            if !parked {
                // Park first, then read again: an append between the read above and the park
                // would otherwise be missed until the deadline.
                for w in self.wanted {
                    if let Ok(p) = &w.partition {
                        p.park_fetch(&waiter);
                    }
                }
                parked = true;
                continue;
            }
            delayed.get_or_insert_with(|| GaugeGuard::new(&self.broker.metrics.delayed_fetches));
            if tokio::time::timeout_at(deadline, waiter.notified())
                .await
                .is_err()
            {
                return self.read_all().0;
            }
            parked = false;
        }
    }

    /// Reads every wanted partition once. Returns the answers, the bytes found, and whether
    /// any partition has an error (which answers the fetch at once, as Kafka does).
    fn read_all(&self) -> (Vec<PartitionData>, usize, bool) {
        let now = crate::cluster::replica_manager::now_ms();
        let mut out = Vec::with_capacity(self.wanted.len());
        let mut total = 0usize;
        let mut any_error = false;
        for w in self.wanted {
            let budget = w
                .partition_max_bytes
                .min(self.max_bytes.saturating_sub(total));
            // KIP-74: the first partition with data may exceed the limits by one whole batch,
            // so that a batch larger than max_bytes never stalls a consumer.
            let min_one = total == 0;
            let PartitionAnswer { data, error } = self.read_partition(w, budget, min_one, now);
            any_error |= error;
            // Errors and diverging epochs carry no records.
            total += data.records.as_ref().map_or(0, |r| r.len());
            out.push(data);
        }
        (out, total, any_error)
    }

    /// One partition's answer (Kafka's `ReplicaManager.readFromLog` for one partition).
    fn read_partition(
        &self,
        w: &Wanted,
        budget: usize,
        min_one: bool,
        now: i64,
    ) -> PartitionAnswer {
        let base = PartitionData::default().with_partition_index(w.partition_index);
        let part = match &w.partition {
            Ok(part) => part,
            Err(e) => return PartitionAnswer::error(error_data(base, e.code())),
        };
        if let Err(e) = part.check_leader_epoch(w.current_leader_epoch) {
            return PartitionAnswer::error(error_data(base, e.error_code()));
        }
        let read = match self.follower {
            None => {
                tracing::trace!(topic = %part.topic, partition = part.index, fetch_offset = w.fetch_offset, current_leader_epoch = w.current_leader_epoch, "consumer fetch");
                part.read(w.fetch_offset, budget, min_one, self.isolation)
            }
            Some(replica) => match part.fetch_for_follower(
                replica,
                (w.fetch_offset, w.log_start_offset),
                w.last_fetched_epoch,
                budget,
                now,
            ) {
                Ok(FollowerFetch::Diverging {
                    epoch,
                    end_offset,
                    high_watermark,
                    log_start_offset,
                }) => {
                    // The follower must truncate before it fetches again: no records.
                    return PartitionAnswer::error(
                        base.with_high_watermark(high_watermark)
                            .with_last_stable_offset(high_watermark)
                            .with_log_start_offset(log_start_offset)
                            .with_diverging_epoch(
                                EpochEndOffset::default()
                                    .with_epoch(epoch)
                                    .with_end_offset(end_offset),
                            )
                            .with_records(Some(Bytes::new())),
                    );
                }
                Ok(FollowerFetch::Records { read, isr_proposal }) => {
                    if let Some(isr) = isr_proposal {
                        tracing::info!(topic = %part.topic, partition = part.index, ?isr, "expanding ISR");
                        self.broker.replicas.propose_isr(part, isr);
                    }
                    Ok(read)
                }
                Err(e) => Err(e),
            },
        };
        match read {
            Ok(read) => read_data(part, base, read),
            Err(e) => {
                let (log_start, _) = part.offsets();
                let hw = part.high_watermark();
                PartitionAnswer::error(
                    error_data(base, e.error_code())
                        .with_high_watermark(hw)
                        .with_last_stable_offset(part.last_stable_offset())
                        .with_log_start_offset(log_start),
                )
            }
        }
    }
}

/// A partition's answer from what its log read returned: the records, the offsets, and the
/// aborted transactions overlapping the records (read_committed).
fn read_data(part: &Partition, base: PartitionData, read: PartitionRead) -> PartitionAnswer {
    let records = match read.slice.read() {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(topic = %part.topic, partition = part.index, error = %e, "fetch read failed");
            let code = ResponseError::KafkaStorageError.code();
            return PartitionAnswer::error(error_data(base, code));
        }
    };
    let aborted = read.aborted_within(&records).map(|list| {
        list.iter()
            .map(|t| {
                AbortedTransaction::default()
                    .with_producer_id(t.producer_id.into())
                    .with_first_offset(t.first_offset)
            })
            .collect()
    });
    PartitionAnswer {
        data: base
            .with_high_watermark(read.high_watermark)
            .with_last_stable_offset(read.last_stable_offset)
            .with_log_start_offset(read.log_start_offset)
            .with_aborted_transactions(aborted)
            .with_records(Some(records)),
        error: false,
    }
}

/// One partition's answer to a read; `error` for an error or a follower's diverging epoch,
/// which answer the fetch at once.
struct PartitionAnswer {
    data: PartitionData,
    error: bool,
}

impl PartitionAnswer {
    fn error(data: PartitionData) -> PartitionAnswer {
        PartitionAnswer { data, error: true }
    }
}

fn error_data(base: PartitionData, code: i16) -> PartitionData {
    base.with_error_code(code)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_records(Some(Bytes::new()))
}

/// A Fetch answer with `code` for every partition, for fault injection.
pub fn error_response(ctx: &RequestContext, req: &FetchRequest, code: i16) -> FetchResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let parts = t
                .partitions
                .iter()
                .map(|p| {
                    error_data(
                        PartitionData::default().with_partition_index(p.partition),
                        code,
                    )
                })
                .collect();
            let r = FetchableTopicResponse::default()
                .with_topic_id(t.topic_id)
                .with_partitions(parts);
            if ctx.api_version >= 13 {
                r
            } else {
                r.with_topic(t.topic.clone())
            }
        })
        .collect();
    FetchResponse::default().with_responses(topics)
}
