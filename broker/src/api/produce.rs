//! Produce: validate, deduplicate and append each partition's batch, then acknowledge
//! according to `acks`. With acks=all every partition of the request is appended first, then
//! the request waits once, against one deadline, for all of them (Kafka's `DelayedProduce`
//! after `ReplicaManager.appendRecords`): a slow partition never delays the append of another.

use std::sync::Arc;

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::auth_helper::authorize;
use super::{leader_hint, sb, Outcome, RequestContext};
use crate::broker::Broker;
use crate::cluster::partition::{Partition, PartitionError};
use crate::cluster::replica_manager::now_ms;
use crate::fault::{CrashPoint, FaultEngine};
use crate::metadata::validate_topic_name;
use crate::metrics::GaugeGuard;
use crate::net::codec::CodecError;
use crate::security::acl::{AclOperation, ResourceType};
use brook_storage::batch::BatchHeader;
use brook_storage::{LogAppendInfo, LogError, VerificationGuard};

/// One partition of the request after its append: answered, or waiting for acks=all.
enum Appended {
    Done(PartitionProduceResponse),
    Waiting {
        part: Arc<Partition>,
        info: LogAppendInfo,
    },
}

fn partition_error(index: i32, error: i16, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(sb))
}

/// Handles one Produce request: every partition appended, then one wait for acks=all.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ProduceRequest,
) -> Result<Outcome, CodecError> {
    let acks = req.acks;
    // Kafka's `handleProduceRequest`: transactional records need WRITE on the transactional
    // id, else the whole request is refused.
    if !transactional_allowed(broker, ctx, &req) {
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return denied(broker, ctx, &req, code);
    }
    let now = now_ms();
    // One timeout for the whole request, as Kafka's DelayedProduce has.
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    let transactional_id = req.transactional_id.as_ref().map(|t| t.as_str());
    let mut appended: Vec<(String, Uuid, Vec<Appended>)> = Vec::with_capacity(req.topic_data.len());
    for td in req.topic_data {
        appended.push(append_topic(broker, ctx, transactional_id, td, acks, now).await);
    }
    let Some((mut topics, any_error)) = complete_all(broker, appended, deadline).await else {
        // Kafka's `SocketServer.stopProcessingRequests` closes the connection of a
        // produce still in the purgatory: no answer, the client retries elsewhere.
        return Ok(Outcome::Close(
            "the broker is shutting down with this produce parked".into(),
        ));
    };
    // The produce quota counts the whole request (Kafka's `handleProduceRequest`); an
    // acks=0 client gets no answer but its connection is muted all the same, and its
    // request time is not recorded against its request quota.
    let produce_quota = &broker.quotas.produce;
    let bandwidth_ms = super::client_quotas::record(broker, ctx, produce_quota, ctx.request_bytes);
    if acks == 0 {
        super::client_quotas::throttle(ctx, produce_quota, bandwidth_ms);
        // acks=0 clients read no responses; an error can only be signalled by closing.
        return Ok(match any_error {
            Some(code) => Outcome::Close(format!("acks=0 produce failed with error {code}")),
            None => Outcome::NoResponse,
        });
    }
    let request_ms = super::request_quota::measure(broker, ctx);
    let throttle_ms =
        super::client_quotas::throttle_larger(broker, ctx, produce_quota, bandwidth_ms, request_ms);
    let node_endpoints = leader_hints(broker, ctx, &mut topics);
    let resp = ProduceResponse::default()
        .with_responses(topics)
        .with_throttle_time_ms(throttle_ms)
        .with_node_endpoints(node_endpoints);
    super::respond(broker, ctx, &resp)
}

/// One topic of the request (Kafka's `ReplicaManager.appendRecords` for its partitions):
/// WRITE on the topic checked, then each partition's batch verified with its transaction
/// coordinator when transactional and appended. Returns the topic's name (empty for an
/// unknown v13 topic id), its id (nil before v13) and its partitions.
async fn append_topic(
    broker: &Broker,
    ctx: &RequestContext,
    transactional_id: Option<&str>,
    td: TopicProduceData,
    acks: i16,
    now: i64,
) -> (String, Uuid, Vec<Appended>) {
    // From v13 topics are named by id only.
    let (name, id) = if ctx.api_version >= 13 {
        match broker.replicas.topic_name_by_id(td.topic_id) {
            Some(n) => (n, td.topic_id),
            None => (String::new(), td.topic_id),
        }
    } else {
        (td.name.to_string(), Uuid::nil())
    };
    let mut partitions = Vec::with_capacity(td.partition_data.len());
    // WRITE on the topic (an unknown topic id is answered as such, below).
    if !name.is_empty() && !authorize(broker, ctx, AclOperation::Write, ResourceType::Topic, &name)
    {
        let code = ResponseError::TopicAuthorizationFailed.code();
        partitions.extend(
            td.partition_data
                .iter()
                .map(|pd| Appended::Done(partition_error(pd.index, code, None))),
        );
        return (name, id, partitions);
    }
    for pd in td.partition_data {
        // KIP-890 part 1: a transactional batch is checked with its coordinator first, and
        // its append carries the guard of that check.
        let verified = crate::txn::verify::verify_partition_data(
            broker,
            ctx.api_version,
            transactional_id,
            &name,
            &pd,
        )
        .await;
        partitions.push(match verified {
            Ok(guard) => append_partition(broker, ctx, &name, pd, acks, now, guard),
            Err((code, message)) => Appended::Done(partition_error(pd.index, code, message)),
        });
    }
    (name, id, partitions)
}

/// Every partition's answer, the acks=all ones once replicated or at `deadline` (one parked
/// operation per request, as Kafka's `DelayedProduce`), with the last error code seen.
/// `None` when the broker shuts down while the request is parked.
async fn complete_all(
    broker: &Broker,
    appended: Vec<(String, Uuid, Vec<Appended>)>,
    deadline: tokio::time::Instant,
) -> Option<(Vec<TopicProduceResponse>, Option<i16>)> {
    let waits = appended
        .iter()
        .any(|(_, _, ps)| ps.iter().any(|p| matches!(p, Appended::Waiting { .. })));
    let _delayed = waits.then(|| GaugeGuard::new(&broker.metrics.delayed_produces));
    let mut any_error = None;
    let mut topics = Vec::with_capacity(appended.len());
    for (name, id, partitions) in appended {
        let mut answers = Vec::with_capacity(partitions.len());
        for slot in partitions {
            let resp = complete(&broker.faults, slot, deadline).await?;
            if resp.error_code != 0 {
                tracing::debug!(topic = %name, partition = resp.index, error = resp.error_code, "produce refused");
                any_error = Some(resp.error_code);
                report_error(&name, &resp);
            }
            answers.push(resp);
        }
        topics.push(
            TopicProduceResponse::default()
                .with_name(sb(name).into())
                .with_topic_id(id)
                .with_partition_responses(answers),
        );
    }
    Some((topics, any_error))
}

/// KIP-951 (`leader_hint`): from v10, each NOT_LEADER_OR_FOLLOWER partition names the leader
/// this node knows, and the response carries that leader's endpoint, as Kafka's
/// `handleProduceRequest` does. A v13 topic named by an unknown id has no name: no hint.
fn leader_hints(
    broker: &Broker,
    ctx: &RequestContext,
    topics: &mut [TopicProduceResponse],
) -> Vec<NodeEndpoint> {
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    if ctx.api_version < leader_hint::PRODUCE_HINT_VERSION_MIN {
        return endpoints;
    }
    let listener = &ctx.session.listener_name;
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    for t in topics.iter_mut() {
        let name = match ctx.api_version >= 13 {
            true => broker.replicas.topic_name_by_id(t.topic_id),
            false => Some(t.name.to_string()),
        };
        let Some(name) = name else { continue };
        for p in t
            .partition_responses
            .iter_mut()
            .filter(|p| p.error_code == not_leader)
        {
            let hint = leader_hint::current_leader(broker, listener, &name, p.index);
            p.current_leader = LeaderIdAndEpoch::default()
                .with_leader_id(hint.leader_id.into())
                .with_leader_epoch(hint.leader_epoch);
            let Some((host, port)) = hint.endpoint else {
                continue;
            };
            if !endpoints.iter().any(|e| e.node_id.0 == hint.leader_id) {
                endpoints.push(
                    NodeEndpoint::default()
                        .with_node_id(hint.leader_id.into())
                        .with_host(sb(host))
                        .with_port(port),
                );
            }
        }
    }
    endpoints
}

/// Whether transactional records may be written: WRITE on the request's transactional id.
fn transactional_allowed(broker: &Broker, ctx: &RequestContext, req: &ProduceRequest) -> bool {
    broker.authorizer().is_none()
        || !has_transactional_records(req)
        || req.transactional_id.as_ref().is_some_and(|t| {
            authorize(
                broker,
                ctx,
                AclOperation::Write,
                ResourceType::TransactionalId,
                t,
            )
        })
}

/// Kafka's `RequestUtils.hasTransactionalRecords`: a partition's first batch is
/// transactional.
fn has_transactional_records(req: &ProduceRequest) -> bool {
    req.topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .filter_map(|pd| pd.records.as_ref())
        .any(|r| BatchHeader::new(r).is_some_and(|h| h.is_transactional()))
}

/// A refused request: every partition answers `code`; acks=0 closes the connection.
fn denied(
    broker: &Broker,
    ctx: &RequestContext,
    req: &ProduceRequest,
    code: i16,
) -> Result<Outcome, CodecError> {
    if req.acks == 0 {
        return Ok(Outcome::Close(format!(
            "acks=0 produce refused with error {code}"
        )));
    }
    super::respond(broker, ctx, &error_response(req, code))
}

/// Puts a `produce_error` event on the stream for the answers worth watching: a sequence
/// gap, or too few in-sync replicas (before or after the append).
fn report_error(topic: &str, resp: &PartitionProduceResponse) {
    if !matches!(
        ResponseError::try_from_code(resp.error_code),
        Some(
            ResponseError::OutOfOrderSequenceNumber
                | ResponseError::NotEnoughReplicas
                | ResponseError::NotEnoughReplicasAfterAppend
        )
    ) {
        return;
    }
    crate::events::emit(|| crate::events::EventKind::ProduceError {
        topic: topic.to_string(),
        partition: resp.index,
        error: crate::metrics::error_name(resp.error_code),
        error_code: resp.error_code,
        message: resp.error_message.as_ref().map(|m| m.to_string()),
    });
}

/// Validates and appends one partition's batch, with the verification guard the log checks
/// (if any); acks=all leaves it waiting.
fn append_partition(
    broker: &Broker,
    ctx: &RequestContext,
    name: &str,
    pd: PartitionProduceData,
    acks: i16,
    now: i64,
    verification: Option<VerificationGuard>,
) -> Appended {
    let refuse = |code: i16, message: Option<String>| {
        Appended::Done(partition_error(pd.index, code, message))
    };
    if !matches!(acks, -1..=1) {
        return refuse(ResponseError::InvalidRequiredAcks.code(), None);
    }
    if name.is_empty() && ctx.api_version >= 13 {
        return refuse(ResponseError::UnknownTopicId.code(), None);
    }
    if let Err(msg) = validate_topic_name(name) {
        return refuse(ResponseError::InvalidTopicException.code(), Some(msg));
    }
    if name == crate::group::store::OFFSETS_TOPIC
        || name == crate::txn::log::TRANSACTION_STATE_TOPIC
    {
        // Internal topics are written by their coordinator only, as in Kafka (ReplicaManager
        // refuses them unless the append is internal).
        let msg = format!("cannot append to internal topic {name}");
        return refuse(ResponseError::InvalidTopicException.code(), Some(msg));
    }
    let part = match broker.replicas.partition_or_error(name, pd.index) {
        Ok(part) => part,
        Err(e) => return refuse(e.code(), None),
    };
    let Some(records) = pd.records.clone() else {
        return refuse(
            ResponseError::InvalidRecord.code(),
            Some("records are null".into()),
        );
    };
    // zstd arrived with Produce v7; older requests may not carry it.
    if ctx.api_version < 7 && BatchHeader::new(&records).is_some_and(|h| h.codec_id() == 4) {
        let msg = "zstd needs Produce v7 or later".to_string();
        return refuse(ResponseError::UnsupportedCompressionType.code(), Some(msg));
    }
    let batch_bytes = records.len();
    match part.append_records_to_leader(records, acks, now, verification) {
        Err(PartitionError::Log(LogError::KeylessRecordsOnCompactedTopic {
            record_indices,
            count,
        })) => Appended::Done(keyless_records_response(
            pd.index,
            name,
            &record_indices,
            count,
        )),
        Err(e) => refuse(e.error_code(), Some(e.to_string())),
        Ok(info) => {
            if info.duplicate.is_none() {
                // The count comes from the batch header, already parsed by the append.
                part.traffic.record_in(batch_bytes, info.record_count);
            }
            broker
                .faults
                .crash_point(CrashPoint::AfterLeaderAppend, &part.topic, part.index);
            if acks == -1 {
                // A retried duplicate waits too: its original may not be committed yet.
                Appended::Waiting { part, info }
            } else {
                broker.faults.crash_point(
                    CrashPoint::AfterReplicationBeforeAck,
                    &part.topic,
                    part.index,
                );
                Appended::Done(appended_response(pd.index, &info))
            }
        }
    }
}

/// INVALID_RECORD with one record error per keyless record, as Kafka answers a compacted
/// topic (`LogValidator.validateKey`, then `processRecordErrors`): the partition's message
/// counts the errors and repeats the first three. Fields of Produce v8+; older versions drop
/// them in encoding.
fn keyless_records_response(
    index: i32,
    topic: &str,
    record_indices: &[i32],
    count: usize,
) -> PartitionProduceResponse {
    let reason = format!(
        "Compacted topic cannot accept message without key in topic partition {topic}-{index}"
    );
    let shown: Vec<String> = record_indices
        .iter()
        .take(3)
        .map(|i| format!("RecordError(batchIndex={i}, message='{reason}')"))
        .collect();
    let message = format!(
        "One or more records have been rejected due to {count} record errors in total, and only showing the first three errors at most: [{}]",
        shown.join(", ")
    );
    let errors = record_indices
        .iter()
        .map(|&i| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(i)
                .with_batch_index_error_message(Some(sb(reason.clone())))
        })
        .collect();
    partition_error(index, ResponseError::InvalidRecord.code(), Some(message))
        .with_record_errors(errors)
}

/// The answer for one partition: at once, or once the high watermark passed its batch
/// (acks=all), by the request's one deadline.
async fn complete(
    faults: &FaultEngine,
    slot: Appended,
    deadline: tokio::time::Instant,
) -> Option<PartitionProduceResponse> {
    let (part, info) = match slot {
        Appended::Done(resp) => return Some(resp),
        Appended::Waiting { part, info } => (part, info),
    };
    match part
        .wait_for_high_watermark_until(info.last_offset, deadline)
        .await
    {
        Ok(()) => {
            faults.crash_point(
                CrashPoint::AfterReplicationBeforeAck,
                &part.topic,
                part.index,
            );
            Some(appended_response(part.index, &info))
        }
        // The node stopped serving while this produce was parked: no answer.
        Err(PartitionError::ShuttingDown) => None,
        Err(e) => Some(partition_error(
            part.index,
            e.error_code(),
            Some(e.to_string()),
        )),
    }
}

fn appended_response(index: i32, info: &LogAppendInfo) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(0)
        .with_base_offset(info.first_offset)
        .with_log_append_time_ms(info.log_append_time_ms)
        .with_log_start_offset(info.log_start_offset)
}

/// A Produce answer with `code` for every partition, for fault injection.
pub fn error_response(req: &ProduceRequest, code: i16) -> ProduceResponse {
    let topics = req
        .topic_data
        .iter()
        .map(|td| {
            let parts = td
                .partition_data
                .iter()
                .map(|pd| partition_error(pd.index, code, None))
                .collect();
            TopicProduceResponse::default()
                .with_name(td.name.clone())
                .with_topic_id(td.topic_id)
                .with_partition_responses(parts)
        })
        .collect();
    ProduceResponse::default().with_responses(topics)
}
