//! Request dispatch: one handler module per API family.
//!
//! [`handle_frame`] turns one request frame into one response frame (or none, for acks=0
//! Produce). Version checks happen here, before any body is decoded, so every handler can
//! rely on its request being within the advertised range.

pub mod acls;
pub mod api_versions;
pub mod auth_helper;
pub mod client_quotas;
pub mod cluster;
pub mod configs;
pub mod delete_records;
pub mod describe_topic_partitions;
pub mod elect_leaders;
pub mod features;
pub mod fetch;
mod fetch_encode;
pub mod groups;
pub mod leader_hint;
pub mod list_offsets;
pub mod log_dirs;
pub mod metadata;
pub mod offsets;
pub mod produce;
pub mod producer_id;
pub mod producers;
pub mod quorum;
pub mod raft_voters;
pub mod reassignments;
pub mod request_quota;
pub mod sasl;
pub mod share;
pub mod share_offsets;
pub mod share_state;
pub mod streams_groups;
pub mod telemetry;
pub mod topics;
pub mod txn;
pub mod txn_markers;

use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Message;

use crate::broker::Broker;
use crate::fault::{FaultAction, RequestFacts, When};
use crate::metrics::response_errors::ResponseErrors;
pub use crate::net::codec::sb;
use crate::net::codec::{decode_header, encode_response, peek_prefix, CodecError};
use crate::security::Session;

/// One row of the ApiVersions table: what Brook advertises, and the lowest version it can
/// decode (Produce is advertised from 0 for old clients' sake but decoded from 3, as in Kafka).
#[derive(Debug, Clone, Copy)]
pub struct ApiSupport {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
    pub decode_min: i16,
}

impl crate::metrics::ServedApi for ApiSupport {
    fn key(&self) -> ApiKey {
        self.key
    }

    fn decoded_versions(&self) -> std::ops::RangeInclusive<i16> {
        self.decode_min..=self.max
    }
}

const fn api(key: ApiKey, min: i16, max: i16, decode_min: i16) -> ApiSupport {
    ApiSupport {
        key,
        min,
        max,
        decode_min,
    }
}

/// Every API Brook serves, with the versions it really serves (KAFKA-FACTS §1).
pub const SUPPORTED_APIS: &[ApiSupport] = &[
    api(ApiKey::Produce, 0, 13, ProduceRequest::VERSIONS.min),
    api(ApiKey::Fetch, 4, 18, 4),
    api(ApiKey::ListOffsets, 1, 11, 1),
    api(ApiKey::Metadata, 0, 13, 0),
    api(ApiKey::DescribeTopicPartitions, 0, 0, 0),
    api(ApiKey::ApiVersions, 0, 5, 0),
    api(ApiKey::CreateTopics, 2, 7, 2),
    api(ApiKey::DeleteTopics, 1, 6, 1),
    api(ApiKey::DeleteRecords, 0, 2, 0),
    api(ApiKey::InitProducerId, 0, 5, 0),
    api(ApiKey::OffsetForLeaderEpoch, 2, 4, 2),
    api(ApiKey::DescribeConfigs, 1, 4, 1),
    api(ApiKey::CreatePartitions, 0, 3, 0),
    api(ApiKey::AlterConfigs, 0, 2, 0),
    api(ApiKey::IncrementalAlterConfigs, 0, 1, 0),
    api(ApiKey::DescribeCluster, 0, 2, 0),
    api(ApiKey::ElectLeaders, 0, 2, 0),
    api(ApiKey::AlterPartitionReassignments, 0, 1, 0),
    api(ApiKey::ListPartitionReassignments, 0, 0, 0),
    // librdkafka enables lz4 only when FindCoordinator is advertised.
    api(ApiKey::FindCoordinator, 0, 6, 0),
    api(ApiKey::JoinGroup, 0, 9, 0),
    api(ApiKey::SyncGroup, 0, 5, 0),
    api(ApiKey::Heartbeat, 0, 4, 0),
    api(ApiKey::LeaveGroup, 0, 5, 0),
    api(ApiKey::OffsetCommit, 2, 10, 2),
    api(ApiKey::OffsetFetch, 1, 10, 1),
    api(ApiKey::TxnOffsetCommit, 0, 6, 0),
    api(ApiKey::OffsetDelete, 0, 0, 0),
    api(ApiKey::DescribeGroups, 0, 6, 0),
    api(ApiKey::ListGroups, 0, 5, 0),
    api(ApiKey::DeleteGroups, 0, 3, 0),
    api(ApiKey::ConsumerGroupHeartbeat, 0, 1, 0),
    api(ApiKey::ConsumerGroupDescribe, 0, 1, 0),
    // KIP-932 share groups: Kafka 4.4's versions (ShareFetch and ShareAcknowledge v2 add the
    // RENEW acknowledge type, KIP-1222).
    api(ApiKey::ShareGroupHeartbeat, 1, 1, 1),
    api(ApiKey::ShareGroupDescribe, 1, 1, 1),
    api(ApiKey::ShareFetch, 1, 2, 1),
    api(ApiKey::ShareAcknowledge, 1, 2, 1),
    // The share coordinator's state APIs (partition leaders' persisters call them).
    api(ApiKey::InitializeShareGroupState, 0, 0, 0),
    api(ApiKey::ReadShareGroupState, 0, 0, 0),
    api(ApiKey::WriteShareGroupState, 0, 1, 0),
    api(ApiKey::DeleteShareGroupState, 0, 0, 0),
    api(ApiKey::ReadShareGroupStateSummary, 0, 1, 0),
    // The share group offsets admin APIs (DescribeShareGroupOffsets v1 adds the lag, KIP-1226).
    api(ApiKey::DescribeShareGroupOffsets, 0, 1, 0),
    api(ApiKey::AlterShareGroupOffsets, 0, 0, 0),
    api(ApiKey::DeleteShareGroupOffsets, 0, 0, 0),
    // KIP-1071 streams groups.
    api(ApiKey::StreamsGroupHeartbeat, 0, 1, 0),
    api(ApiKey::StreamsGroupDescribe, 0, 1, 0),
    // Transactions: version 1 (AddPartitionsToTxn and AddOffsetsToTxn from clients, EndTxn
    // up to v4) and version 2 (`transaction.version` finalized at 2 in ApiVersions; EndTxn
    // v5 bumps the epoch at every transaction).
    api(ApiKey::AddPartitionsToTxn, 0, 5, 0),
    api(ApiKey::AddOffsetsToTxn, 0, 4, 0),
    api(ApiKey::EndTxn, 0, 5, 0),
    api(ApiKey::DescribeTransactions, 0, 0, 0),
    api(ApiKey::ListTransactions, 0, 2, 0),
    // Transactions, partition side: markers from coordinators, and producer state.
    api(ApiKey::WriteTxnMarkers, 1, 2, 1),
    api(ApiKey::DescribeProducers, 0, 0, 0),
    // Operations tools: kafka-log-dirs and kafka-metadata-quorum (v0 of DescribeLogDirs was
    // removed in Kafka 4.0).
    api(ApiKey::DescribeLogDirs, 1, 5, 1),
    api(ApiKey::DescribeQuorum, 0, 2, 0),
    // KIP-853 voter changes and broker decommissioning (kafka-metadata-quorum, kafka-cluster).
    api(ApiKey::AddRaftVoter, 0, 1, 0),
    api(ApiKey::RemoveRaftVoter, 0, 0, 0),
    api(ApiKey::UnregisterBroker, 0, 0, 0),
    // ACLs (Kafka 4.0 removed v0 of the three).
    api(ApiKey::DescribeAcls, 1, 3, 1),
    api(ApiKey::CreateAcls, 1, 3, 1),
    api(ApiKey::DeleteAcls, 1, 3, 1),
    // SASL (the exchange itself runs in security::sasl) and SCRAM credentials.
    api(ApiKey::SaslHandshake, 0, 1, 0),
    api(ApiKey::SaslAuthenticate, 0, 2, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0, 0),
    api(ApiKey::DescribeUserScramCredentials, 0, 0, 0),
    // Client quotas (byte rates enforced on Produce and Fetch, crate::quota).
    api(ApiKey::DescribeClientQuotas, 0, 1, 0),
    api(ApiKey::AlterClientQuotas, 0, 1, 0),
    // Feature levels (`kafka-features`), client telemetry (KIP-714) and config resources.
    api(ApiKey::UpdateFeatures, 0, 2, 0),
    api(ApiKey::GetTelemetrySubscriptions, 0, 0, 0),
    api(ApiKey::PushTelemetry, 0, 0, 0),
    api(ApiKey::ListConfigResources, 0, 1, 0),
];

/// Finds an API's row in the table.
pub fn support(key: ApiKey) -> Option<&'static ApiSupport> {
    SUPPORTED_APIS.iter().find(|a| a.key == key)
}

/// What a handler wants the connection to do.
pub enum Outcome {
    /// Send this response frame.
    Respond(Bytes),
    /// Send this response frame, given as chunks to write in order with vectored writes
    /// (a Fetch answer, whose records are not copied into one buffer).
    RespondChunks(Vec<Bytes>),
    /// Send nothing (acks=0 Produce that succeeded).
    NoResponse,
    /// Close the connection (acks=0 Produce that failed: the client learns of it that way).
    Close(String),
}

/// The request header fields handlers need.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    /// The connection's principal, listener and peer address: what authorization checks and
    /// group members' client hosts read.
    pub session: Arc<Session>,
    /// The request's size: header and body, without the length prefix (Kafka's
    /// `Request.sizeInBytes`, what a produce quota counts).
    pub request_bytes: usize,
    /// How long the connection is muted after the answer (KIP-219): set by a handler whose
    /// client went over a quota, read by `connection`.
    pub throttle: ThrottleSlot,
    /// The time the request's handling has been polled (`request_quota`).
    pub request_time: request_quota::RequestTimer,
}

/// A request's channel throttle time in ms (Kafka's `ThrottledChannel`), 0 for none.
#[derive(Debug, Clone, Default)]
pub struct ThrottleSlot(Arc<std::sync::atomic::AtomicI32>);

impl ThrottleSlot {
    /// Mutes the channel for at least `ms` after the answer.
    pub fn set(&self, ms: i32) {
        self.0.fetch_max(ms, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn get(&self) -> i32 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl RequestContext {
    /// The client host groups record for a member: the address as Java's
    /// `InetAddress.toString` prints one without a host name (`/127.0.0.1`), what Kafka's
    /// `GroupMetadataManager` stores (`context.clientAddress.toString()`) for classic and
    /// consumer-protocol members, and DescribeGroups and ConsumerGroupDescribe answer.
    pub fn client_host(&self) -> String {
        self.session
            .client_address
            .map(|ip| format!("/{ip}"))
            .unwrap_or_default()
    }
}

/// A request that was parked — a write waiting for a high watermark (OffsetCommit and
/// TxnOffsetCommit on `__consumer_offsets`, WriteTxnMarkers, group heartbeats whose records
/// must commit), or a JoinGroup/SyncGroup waiting for the rebalance — and ended after the
/// node stopped processing requests gets no answer: Kafka's `BrokerServer.shutdown` calls
/// `SocketServer.stopProcessingRequests` after its controlled shutdown, which closes every
/// connection with whatever is still parked in the purgatories, so the client sees a closed
/// connection and retries elsewhere rather than an error from a node going away (a produce
/// does the same in `produce::handle`).
fn unless_stopped(
    broker: &Broker,
    answer: Result<Outcome, CodecError>,
) -> Result<Outcome, CodecError> {
    if *broker.shutting_down.borrow() {
        return Ok(Outcome::Close(
            "the broker stopped processing requests with this write parked".into(),
        ));
    }
    answer
}

/// Counts a handler's response's error codes, records the request's time against the
/// client's request quota (raising the answer's throttle time if that is over it), then
/// encodes it.
pub(crate) fn respond<T>(
    broker: &Broker,
    ctx: &RequestContext,
    resp: &T,
) -> Result<Outcome, CodecError>
where
    T: kafka_protocol::protocol::Encodable + ResponseErrors + request_quota::ThrottleTimeField,
{
    broker
        .metrics
        .requests
        .record_errors(ctx.api_key, ctx.api_version, resp);
    let throttle_ms = request_quota::record(broker, ctx);
    if throttle_ms > 0 {
        if let Some(raised) = request_quota::with_throttle(resp, throttle_ms) {
            return encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, &raised)
                .map(Outcome::Respond);
        }
    }
    Ok(Outcome::Respond(encode_response(
        ctx.api_key,
        ctx.api_version,
        ctx.correlation_id,
        resp,
    )?))
}

/// A Produce or Fetch topic's name: from v13 both name topics by id only.
fn topic_name(broker: &Broker, ctx: &RequestContext, id: uuid::Uuid, name: &TopicName) -> String {
    if ctx.api_version >= 13 {
        broker.replicas.topic_name_by_id(id).unwrap_or_default()
    } else {
        name.to_string()
    }
}

/// The topics and partitions a request touches, for fault rules that match on them.
fn request_facts(broker: &Broker, ctx: &RequestContext, req: &RequestKind) -> RequestFacts {
    let mut partitions = Vec::new();
    match req {
        RequestKind::Produce(r) => {
            for t in &r.topic_data {
                let name = topic_name(broker, ctx, t.topic_id, &t.name);
                partitions.extend(t.partition_data.iter().map(|p| (name.clone(), p.index)));
            }
        }
        RequestKind::Fetch(r) => {
            for t in &r.topics {
                let name = topic_name(broker, ctx, t.topic_id, &t.topic);
                partitions.extend(t.partitions.iter().map(|p| (name.clone(), p.partition)));
            }
        }
        RequestKind::ListOffsets(r) => {
            for t in &r.topics {
                partitions.extend(
                    t.partitions
                        .iter()
                        .map(|p| (t.name.to_string(), p.partition_index)),
                );
            }
        }
        RequestKind::DeleteRecords(r) => {
            for t in &r.topics {
                partitions.extend(
                    t.partitions
                        .iter()
                        .map(|p| (t.name.to_string(), p.partition_index)),
                );
            }
        }
        RequestKind::AddPartitionsToTxn(r) => {
            // A client's (v3 and below) or a leader's verification (v4+, in transactions).
            let topics = r.transactions.iter().flat_map(|t| &t.topics);
            for t in r.v3_and_below_topics.iter().chain(topics) {
                partitions.extend(t.partitions.iter().map(|&p| (t.name.to_string(), p)));
            }
        }
        RequestKind::WriteTxnMarkers(r) => {
            for t in r.markers.iter().flat_map(|m| &m.topics) {
                partitions.extend(t.partition_indexes.iter().map(|&p| (t.name.to_string(), p)));
            }
        }
        _ => {}
    }
    RequestFacts {
        api_key: ctx.api_key as i16,
        client_id: ctx.client_id.clone(),
        partitions,
    }
}

/// Handles one request frame.
pub async fn handle_frame(
    broker: &Broker,
    frame: Bytes,
    session: &Arc<Session>,
) -> Result<(RequestContext, Outcome), CodecError> {
    let prefix = peek_prefix(&frame);
    let key =
        ApiKey::try_from(prefix.api_key).map_err(|_| CodecError::UnknownApiKey(prefix.api_key))?;
    let row = support(key).ok_or(CodecError::UnknownApiKey(prefix.api_key))?;
    let version = prefix.api_version;
    let mut ctx = RequestContext {
        api_key: key,
        api_version: version,
        correlation_id: prefix.correlation_id,
        client_id: None,
        session: session.clone(),
        request_bytes: frame.len(),
        throttle: ThrottleSlot::default(),
        request_time: Default::default(),
    };
    if version < row.decode_min || version > row.max {
        if key == ApiKey::ApiVersions {
            // Kafka answers an ApiVersions it cannot parse with a v0 body and error 35, so
            // that the client can retry with a version both sides know.
            return Ok((
                ctx,
                Outcome::Respond(api_versions::unsupported_version(prefix.correlation_id)?),
            ));
        }
        return Err(CodecError::Malformed(format!(
            "{key:?} v{version} is not supported"
        )));
    }
    let mut body = frame;
    let header = decode_header(key, version, &mut body)?;
    ctx.client_id = header.client_id.as_ref().map(|c| c.to_string());
    let req = RequestKind::decode(key, &mut body, version)
        .map_err(|e| CodecError::Malformed(format!("{key:?} v{version} body: {e}")))?;

    let fault = if broker.faults.is_empty() {
        None
    } else {
        broker.faults.decide(&request_facts(broker, &ctx, &req))
    };
    if let Some(outcome) = fault_before_processing(broker, &ctx, &req, fault.as_ref()).await? {
        return Ok((ctx, outcome));
    }

    // Each poll of the handling is timed, for the request quota (`request_quota`).
    let outcome = {
        let mut handling = std::pin::pin!(process(broker, &ctx, req));
        std::future::poll_fn(|cx| ctx.request_time.poll(|| handling.as_mut().poll(cx))).await?
    };
    let outcome = fault_after_processing(broker, fault, outcome).await;
    Ok((ctx, outcome))
}

/// What a fault rule does before the request is processed: drop it, close the connection,
/// answer its error (after its delay), or delay it. `Some` when the rule answers in place of
/// the processing; a request still waiting when shutdown starts is not processed.
async fn fault_before_processing(
    broker: &Broker,
    ctx: &RequestContext,
    req: &RequestKind,
    fault: Option<&FaultAction>,
) -> Result<Option<Outcome>, CodecError> {
    let shutting_down = || Outcome::Close("shutting down during a fault delay".into());
    match fault {
        Some(FaultAction::DropRequest) => Ok(Some(Outcome::NoResponse)),
        Some(FaultAction::Close { when: When::Before }) => Ok(Some(Outcome::Close(
            "fault rule: close before processing".into(),
        ))),
        Some(FaultAction::Error {
            error_code,
            delay_ms,
            ..
        }) => {
            if let Some(ms) = delay_ms {
                if !broker
                    .fault_sleep(std::time::Duration::from_millis(*ms))
                    .await
                {
                    return Ok(Some(shutting_down()));
                }
            }
            error_response(broker, ctx, req, *error_code).map(Some)
        }
        Some(FaultAction::Delay {
            delay_ms,
            when: When::Before,
        }) => {
            let slept = broker
                .fault_sleep(std::time::Duration::from_millis(*delay_ms))
                .await;
            Ok((!slept).then(shutting_down))
        }
        _ => Ok(None),
    }
}

/// What a fault rule does once the request is processed: drop the answer, close the
/// connection instead of answering, or delay the answer.
async fn fault_after_processing(
    broker: &Broker,
    fault: Option<FaultAction>,
    outcome: Outcome,
) -> Outcome {
    match fault {
        Some(FaultAction::DropResponse) => Outcome::NoResponse,
        Some(FaultAction::Close { when: When::After }) => {
            Outcome::Close("fault rule: close after processing".into())
        }
        Some(FaultAction::Delay {
            delay_ms,
            when: When::After,
        }) => {
            broker
                .fault_sleep(std::time::Duration::from_millis(delay_ms))
                .await;
            outcome
        }
        _ => outcome,
    }
}

/// `respond(broker, ctx, &handler(broker, ctx, request).await)` as a dispatch answer, the shape
/// of nearly every API's arm; `stopped:` first wraps it in `unless_stopped` (the writes a
/// stopping broker must not park).
macro_rules! answer {
    (stopped: $broker:ident, $ctx:ident, $handler:path, $req:expr) => {
        ControlFlow::Break(unless_stopped(
            $broker,
            respond($broker, $ctx, &$handler($broker, $ctx, $req).await),
        ))
    };
    ($broker:ident, $ctx:ident, $handler:path, $req:expr) => {
        ControlFlow::Break(respond($broker, $ctx, &$handler($broker, $ctx, $req).await))
    };
}

/// A family dispatcher's answer: `Break` with the request's outcome when the family owns its
/// API, `Continue` with the request handed back for the next family.
type Dispatch = ControlFlow<Result<Outcome, CodecError>, RequestKind>;

/// Kafka's `KafkaApis.handle`: one match on the request's API key calling its handler. Here
/// the match is split by API family (the log and metadata, the group coordinator, transactions
/// and security), each dispatcher handing back the requests it does not own.
async fn process(
    broker: &Broker,
    ctx: &RequestContext,
    req: RequestKind,
) -> Result<Outcome, CodecError> {
    let req = match process_log_and_metadata(broker, ctx, req).await {
        ControlFlow::Break(answer) => return answer,
        ControlFlow::Continue(req) => req,
    };
    let req = match process_group_coordinator(broker, ctx, req).await {
        ControlFlow::Break(answer) => return answer,
        ControlFlow::Continue(req) => req,
    };
    match process_txn_and_security(broker, ctx, req).await {
        ControlFlow::Break(answer) => answer,
        ControlFlow::Continue(other) => {
            Err(CodecError::UnknownApiKey(ctx.api_key as i16)).inspect_err(|_| drop(other))
        }
    }
}

/// The APIs of the replica manager, the metadata cache and the controller's topic, partition,
/// config and quorum calls (`KafkaApis.handleProduceRequest`, `handleFetchRequest`,
/// `handleTopicMetadataRequest`, ... and the requests forwarded to the controller).
async fn process_log_and_metadata(b: &Broker, c: &RequestContext, req: RequestKind) -> Dispatch {
    match req {
        RequestKind::Produce(r) => ControlFlow::Break(produce::handle(b, c, r).await),
        RequestKind::Fetch(r) => ControlFlow::Break(fetch::handle(b, c, r).await),
        RequestKind::ApiVersions(r) => answer!(b, c, api_versions::handle, r),
        RequestKind::Metadata(r) => answer!(b, c, metadata::handle, r),
        RequestKind::ElectLeaders(r) => answer!(b, c, elect_leaders::handle, r),
        RequestKind::AlterPartitionReassignments(r) => {
            answer!(b, c, reassignments::handle_alter, r)
        }
        RequestKind::ListPartitionReassignments(r) => answer!(b, c, reassignments::handle_list, r),
        RequestKind::DescribeTopicPartitions(r) => {
            answer!(b, c, describe_topic_partitions::handle, r)
        }
        RequestKind::DeleteRecords(r) => answer!(b, c, delete_records::handle, r),
        RequestKind::DescribeLogDirs(r) => answer!(b, c, log_dirs::handle, r),
        RequestKind::DescribeQuorum(r) => answer!(b, c, quorum::handle, r),
        RequestKind::ListOffsets(r) => answer!(b, c, list_offsets::handle, r),
        RequestKind::OffsetForLeaderEpoch(r) => {
            answer!(b, c, list_offsets::handle_offset_for_leader_epoch, r)
        }
        RequestKind::InitProducerId(r) => answer!(b, c, producer_id::handle, r),
        RequestKind::CreateTopics(r) => answer!(b, c, topics::handle_create_topics, r),
        RequestKind::DeleteTopics(r) => answer!(b, c, topics::handle_delete_topics, r),
        RequestKind::CreatePartitions(r) => answer!(b, c, topics::handle_create_partitions, r),
        RequestKind::DescribeConfigs(r) => answer!(b, c, configs::handle_describe_configs, r),
        RequestKind::AlterConfigs(r) => answer!(b, c, configs::handle_alter_configs, r),
        RequestKind::IncrementalAlterConfigs(r) => {
            answer!(b, c, configs::handle_incremental_alter_configs, r)
        }
        RequestKind::ListConfigResources(r) => ControlFlow::Break(respond(
            b,
            c,
            &configs::handle_list_config_resources(b, c, r),
        )),
        RequestKind::DescribeCluster(r) => answer!(b, c, cluster::handle_describe_cluster, r),
        RequestKind::AddRaftVoter(r) => answer!(b, c, raft_voters::handle_add, r),
        RequestKind::RemoveRaftVoter(r) => answer!(b, c, raft_voters::handle_remove, r),
        RequestKind::UnregisterBroker(r) => {
            answer!(b, c, raft_voters::handle_unregister_broker, r)
        }
        other => ControlFlow::Continue(other),
    }
}

/// The group coordinator's APIs: classic, consumer (KIP-848), streams and share groups, their
/// offsets and the share-group state (`KafkaApis.handleJoinGroupRequest`, ...,
/// `handleShareFetchRequest`, `handleReadShareGroupStateRequest`).
async fn process_group_coordinator(b: &Broker, c: &RequestContext, req: RequestKind) -> Dispatch {
    match req {
        RequestKind::FindCoordinator(r) => answer!(b, c, groups::handle_find_coordinator, r),
        RequestKind::JoinGroup(r) => answer!(stopped: b, c, groups::handle_join_group, r),
        RequestKind::SyncGroup(r) => answer!(stopped: b, c, groups::handle_sync_group, r),
        RequestKind::Heartbeat(r) => answer!(b, c, groups::handle_heartbeat, r),
        RequestKind::LeaveGroup(r) => answer!(b, c, groups::handle_leave_group, r),
        RequestKind::ConsumerGroupHeartbeat(r) => {
            answer!(stopped: b, c, groups::handle_consumer_group_heartbeat, r)
        }
        RequestKind::ConsumerGroupDescribe(r) => {
            answer!(b, c, groups::handle_consumer_group_describe, r)
        }
        RequestKind::StreamsGroupHeartbeat(r) => {
            answer!(stopped: b, c, streams_groups::handle_streams_group_heartbeat, r)
        }
        RequestKind::StreamsGroupDescribe(r) => {
            answer!(b, c, streams_groups::handle_streams_group_describe, r)
        }
        RequestKind::DescribeGroups(r) => answer!(b, c, groups::handle_describe_groups, r),
        RequestKind::ListGroups(r) => answer!(b, c, groups::handle_list_groups, r),
        RequestKind::DeleteGroups(r) => answer!(b, c, groups::handle_delete_groups, r),
        RequestKind::OffsetCommit(r) => answer!(stopped: b, c, offsets::handle_offset_commit, r),
        RequestKind::OffsetFetch(r) => answer!(b, c, offsets::handle_offset_fetch, r),
        RequestKind::OffsetDelete(r) => answer!(b, c, offsets::handle_offset_delete, r),
        RequestKind::TxnOffsetCommit(r) => {
            answer!(stopped: b, c, offsets::handle_txn_offset_commit, r)
        }
        other => process_share_groups(b, c, other).await,
    }
}

/// Share groups' APIs (KIP-932): the group, its fetches and acknowledgements, its state
/// (the share coordinator's `*ShareGroupState` calls) and its offsets.
async fn process_share_groups(b: &Broker, c: &RequestContext, req: RequestKind) -> Dispatch {
    match req {
        RequestKind::ShareGroupHeartbeat(r) => {
            answer!(b, c, share::handle_share_group_heartbeat, r)
        }
        RequestKind::ShareGroupDescribe(r) => answer!(b, c, share::handle_share_group_describe, r),
        RequestKind::ShareFetch(r) => answer!(b, c, share::handle_share_fetch, r),
        RequestKind::ShareAcknowledge(r) => answer!(b, c, share::handle_share_acknowledge, r),
        RequestKind::InitializeShareGroupState(r) => {
            answer!(b, c, share_state::handle_initialize, r)
        }
        RequestKind::ReadShareGroupState(r) => answer!(b, c, share_state::handle_read, r),
        RequestKind::WriteShareGroupState(r) => answer!(b, c, share_state::handle_write, r),
        RequestKind::DeleteShareGroupState(r) => answer!(b, c, share_state::handle_delete, r),
        RequestKind::ReadShareGroupStateSummary(r) => {
            answer!(b, c, share_state::handle_read_summary, r)
        }
        RequestKind::DescribeShareGroupOffsets(r) => {
            answer!(b, c, share_offsets::handle_describe_share_group_offsets, r)
        }
        RequestKind::AlterShareGroupOffsets(r) => {
            answer!(b, c, share_offsets::handle_alter_share_group_offsets, r)
        }
        RequestKind::DeleteShareGroupOffsets(r) => {
            answer!(b, c, share_offsets::handle_delete_share_group_offsets, r)
        }
        other => ControlFlow::Continue(other),
    }
}

/// The transaction coordinator's APIs, the ACL, SASL, SCRAM and quota calls, features and
/// client telemetry (`KafkaApis.handleEndTxnRequest`, `handleCreateAcls`,
/// `handleSaslAuthenticateRequest`, ...).
async fn process_txn_and_security(b: &Broker, c: &RequestContext, req: RequestKind) -> Dispatch {
    match req {
        RequestKind::AddPartitionsToTxn(r) => answer!(b, c, txn::handle_add_partitions_to_txn, r),
        RequestKind::AddOffsetsToTxn(r) => answer!(b, c, txn::handle_add_offsets_to_txn, r),
        RequestKind::EndTxn(r) => answer!(b, c, txn::handle_end_txn, r),
        RequestKind::DescribeTransactions(r) => {
            answer!(b, c, txn::handle_describe_transactions, r)
        }
        RequestKind::ListTransactions(r) => answer!(b, c, txn::handle_list_transactions, r),
        RequestKind::WriteTxnMarkers(r) => answer!(stopped: b, c, txn_markers::handle, r),
        RequestKind::DescribeProducers(r) => answer!(b, c, producers::handle, r),
        RequestKind::DescribeAcls(r) => ControlFlow::Break(
            acls::handle_describe_acls(b, c, r)
                .await
                .and_then(|resp| respond(b, c, &resp)),
        ),
        RequestKind::CreateAcls(r) => ControlFlow::Break(
            acls::handle_create_acls(b, c, r)
                .await
                .and_then(|resp| respond(b, c, &resp)),
        ),
        RequestKind::DeleteAcls(r) => ControlFlow::Break(
            acls::handle_delete_acls(b, c, r)
                .await
                .and_then(|resp| respond(b, c, &resp)),
        ),
        RequestKind::SaslHandshake(r) => answer!(b, c, sasl::handle_sasl_handshake, r),
        RequestKind::SaslAuthenticate(r) => answer!(b, c, sasl::handle_sasl_authenticate, r),
        RequestKind::AlterUserScramCredentials(r) => {
            answer!(b, c, sasl::handle_alter_user_scram_credentials, r)
        }
        RequestKind::DescribeUserScramCredentials(r) => {
            answer!(b, c, sasl::handle_describe_user_scram_credentials, r)
        }
        RequestKind::DescribeClientQuotas(r) => {
            answer!(b, c, client_quotas::handle_describe_client_quotas, r)
        }
        RequestKind::AlterClientQuotas(r) => {
            answer!(b, c, client_quotas::handle_alter_client_quotas, r)
        }
        RequestKind::UpdateFeatures(r) => answer!(b, c, features::handle_update_features, r),
        RequestKind::GetTelemetrySubscriptions(r) => ControlFlow::Break(respond(
            b,
            c,
            &telemetry::handle_get_telemetry_subscriptions(b, c, r),
        )),
        RequestKind::PushTelemetry(r) => {
            ControlFlow::Break(respond(b, c, &telemetry::handle_push_telemetry(b, c, r)))
        }
        other => ControlFlow::Continue(other),
    }
}

/// The answer Kafka gives a request sent in the middle of the SASL exchange: its own error
/// response with ILLEGAL_SASL_STATE (`AbstractRequest.getErrorResponse`), for the APIs Brook
/// has an error form of (`error_response`); `None` for the others, which get the close only.
pub async fn illegal_sasl_state_response(
    broker: &Broker,
    frame: Bytes,
    session: &Arc<Session>,
) -> Option<Bytes> {
    let prefix = peek_prefix(&frame);
    let key = ApiKey::try_from(prefix.api_key).ok()?;
    let row = support(key)?;
    let version = prefix.api_version;
    if version < row.decode_min || version > row.max {
        return None;
    }
    let mut body = frame;
    let header = decode_header(key, version, &mut body).ok()?;
    let req = RequestKind::decode(key, &mut body, version).ok()?;
    let ctx = RequestContext {
        api_key: key,
        api_version: version,
        correlation_id: prefix.correlation_id,
        client_id: header.client_id.as_ref().map(|c| c.to_string()),
        session: session.clone(),
        request_bytes: 0,
        throttle: ThrottleSlot::default(),
        request_time: Default::default(),
    };
    let code = kafka_protocol::ResponseError::IllegalSaslState.code();
    match error_response(broker, &ctx, &req, code) {
        Ok(Outcome::Respond(bytes)) => Some(bytes),
        _ => None,
    }
}

/// APIs whose answers a fault rule's `error` action can fill with an error code.
pub const ERROR_FAULT_APIS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::InitProducerId,
    ApiKey::Metadata,
];

/// Answers a request with `code` in every partition (or at the top level), unprocessed.
fn error_response(
    broker: &Broker,
    ctx: &RequestContext,
    req: &RequestKind,
    code: i16,
) -> Result<Outcome, CodecError> {
    match req {
        RequestKind::Produce(r) if r.acks == 0 => Ok(Outcome::Close(format!(
            "fault rule: acks=0 produce failed with error {code}"
        ))),
        RequestKind::Produce(r) => respond(broker, ctx, &produce::error_response(r, code)),
        RequestKind::Fetch(r) => respond(broker, ctx, &fetch::error_response(ctx, r, code)),
        RequestKind::ListOffsets(r) => respond(broker, ctx, &list_offsets::error_response(r, code)),
        RequestKind::InitProducerId(_) => respond(
            broker,
            ctx,
            &InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id((-1).into())
                .with_producer_epoch(-1),
        ),
        RequestKind::Metadata(r) => respond(broker, ctx, &metadata::error_response(r, code)),
        _ => Ok(Outcome::Close(format!(
            "fault rule: no error form for {:?}; closing",
            ctx.api_key
        ))),
    }
}
