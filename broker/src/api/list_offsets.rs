//! ListOffsets and OffsetForLeaderEpoch: offsets by position, by time, and by leader epoch.
//!
//! ListOffsets answers within what the asking isolation level may read (Kafka's
//! `Partition.fetchOffsetForTimestamp`): LATEST is the high watermark at read_uncommitted
//! and the last stable offset at read_committed, and an offset found by timestamp at or past
//! that bound is not answered.

use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
};
use kafka_protocol::ResponseError;

use super::auth_helper::{authorize, authorize_cluster};
use super::RequestContext;
use crate::broker::Broker;
use crate::cluster::partition::Partition;
use crate::security::acl::{AclOperation, ResourceType};

/// Special timestamps of ListOffsets.
pub mod spec {
    pub const LATEST: i64 = -1;
    pub const EARLIEST: i64 = -2;
    pub const MAX_TIMESTAMP: i64 = -3;
    pub const EARLIEST_LOCAL: i64 = -4;
    pub const LATEST_TIERED: i64 = -5;
    pub const EARLIEST_PENDING_UPLOAD: i64 = -6;

    /// The first ListOffsets version that may ask for a special timestamp (Kafka's
    /// `ReplicaManager.timestampMinSupportedVersion`): the max timestamp arrived with v7
    /// (KIP-734), the earliest local offset with v8 (KIP-405), the latest tiered offset with
    /// v9 (KIP-1005), the earliest offset not yet uploaded to remote storage with v11
    /// (KIP-1023). `None` for a negative timestamp that means nothing.
    pub fn min_version(timestamp: i64) -> Option<i16> {
        match timestamp {
            LATEST | EARLIEST => Some(1),
            MAX_TIMESTAMP => Some(7),
            EARLIEST_LOCAL => Some(8),
            LATEST_TIERED => Some(9),
            EARLIEST_PENDING_UPLOAD => Some(11),
            _ => None,
        }
    }

    /// Kafka's `ReplicaManager.isListOffsetsTimestampUnsupported`: a special timestamp
    /// asked below the version that introduced it, or one no version knows, is answered
    /// UNSUPPORTED_VERSION, before the partition is looked up.
    pub fn is_unsupported(timestamp: i64, version: i16) -> bool {
        timestamp < 0 && min_version(timestamp).is_none_or(|min| version < min)
    }
}

/// Answers ListOffsets.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let read_committed = req.isolation_level == 1;
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.to_string();
            // DESCRIBE on the topic (Kafka's `handleListOffsetRequest`).
            let allowed = authorize(
                broker,
                ctx,
                AclOperation::Describe,
                ResourceType::Topic,
                &name,
            );
            let partitions = t
                .partitions
                .iter()
                .map(|p| match allowed {
                    true => list_partition(broker, ctx.api_version, &name, p, read_committed),
                    false => ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// One partition's offset, in the order of Kafka's `ReplicaManager.fetchOffset`: the
/// timestamp's version gate, then the partition lookup, the leader and its epoch.
fn list_partition(
    broker: &Broker,
    version: i16,
    name: &str,
    p: &ListOffsetsPartition,
    read_committed: bool,
) -> ListOffsetsPartitionResponse {
    let base = ListOffsetsPartitionResponse::default()
        .with_partition_index(p.partition_index)
        .with_timestamp(-1)
        .with_offset(-1);
    if spec::is_unsupported(p.timestamp, version) {
        return base.with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let part = match broker.replicas.partition_or_error(name, p.partition_index) {
        Ok(part) => part,
        Err(e) => return base.with_error_code(e.code()),
    };
    if !part.is_leader() {
        return base.with_error_code(ResponseError::NotLeaderOrFollower.code());
    }
    if let Err(e) = part.check_leader_epoch(p.current_leader_epoch) {
        return base.with_error_code(e.error_code());
    }
    match answer(&part, p.timestamp, read_committed, version) {
        Ok(Some(found)) => found.response(base, version),
        // No record at or after the timestamp that may be read: Kafka answers -1/-1.
        Ok(None) => base,
        Err(e) => base.with_error_code(e.code()),
    }
}

/// What ListOffsets found in one partition.
struct Found {
    timestamp: i64,
    offset: i64,
    /// The leader epoch the offset was written in (the current one for LATEST).
    leader_epoch: i32,
}

impl Found {
    fn response(
        self,
        base: ListOffsetsPartitionResponse,
        version: i16,
    ) -> ListOffsetsPartitionResponse {
        // `LeaderEpoch` arrived with v4 and is not ignorable (ListOffsetsResponse.json): below
        // v4 it keeps its default, or the answer cannot be encoded.
        let leader_epoch = if version >= 4 { self.leader_epoch } else { -1 };
        base.with_timestamp(self.timestamp)
            .with_offset(self.offset)
            .with_leader_epoch(leader_epoch)
    }
}

/// One partition's answer, as Kafka's `Partition.fetchOffsetForTimestamp`,
/// `UnifiedLog.fetchOffsetByTimestamp` and `ReplicaManager.fetchOffset` give it:
/// - LATEST is the last fetchable offset (the high watermark, or the last stable offset at
///   read_committed) with the current leader epoch;
/// - EARLIEST is the log start offset with the epoch it was written in;
/// - a timestamp or MAX_TIMESTAMP finds a record with the epoch it was written in, and answers
///   nothing (-1/-1) for one at or past the last fetchable offset.
///
/// A new leader whose high watermark lags the start of its epoch does not know yet what its
/// predecessor committed: LATEST, and a lookup that finds nothing fetchable, answer
/// OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5, which lacks that code).
fn answer(
    part: &Partition,
    timestamp: i64,
    read_committed: bool,
    version: i16,
) -> Result<Option<Found>, ResponseError> {
    let last_fetchable = if read_committed {
        part.last_stable_offset()
    } else {
        part.high_watermark()
    };
    let not_available = || {
        if version >= 5 {
            ResponseError::OffsetNotAvailable
        } else {
            ResponseError::LeaderNotAvailable
        }
    };
    let lagging = part.high_watermark_lags_epoch_start();
    let found = match timestamp {
        spec::LATEST if lagging => return Err(not_available()),
        spec::LATEST => {
            return Ok(Some(Found {
                timestamp: -1,
                offset: last_fetchable,
                leader_epoch: part.leader_epoch(),
            }))
        }
        spec::EARLIEST | spec::EARLIEST_LOCAL => {
            let log_start = part.offsets().0;
            return Ok(Some(Found {
                timestamp: -1,
                offset: log_start,
                leader_epoch: part.epoch_for_offset(log_start),
            }));
        }
        // Brook has no tiered storage: Kafka answers both -1/-1 with epoch -1 on a log
        // without remote storage (`UnifiedLog.fetchOffsetByTimestamp` and
        // `fetchEarliestPendingUploadOffset`).
        spec::LATEST_TIERED | spec::EARLIEST_PENDING_UPLOAD => {
            return Ok(Some(Found {
                timestamp: -1,
                offset: -1,
                leader_epoch: -1,
            }))
        }
        spec::MAX_TIMESTAMP => part.max_timestamp().map_err(|e| e.response_error())?,
        // Other negative timestamps were refused by the version gate.
        // The log answers (offset, timestamp); the arms here are (timestamp, offset).
        ts => part
            .offset_for_timestamp(ts)
            .map_err(|e| e.response_error())?
            .map(|(offset, ts)| (ts, offset)),
    };
    match found {
        Some((timestamp, offset)) if offset < last_fetchable => Ok(Some(Found {
            timestamp,
            offset,
            leader_epoch: part.epoch_for_offset(offset),
        })),
        _ if lagging => Err(not_available()),
        // No record at or after the timestamp that may be read: Kafka answers -1/-1.
        _ => Ok(None),
    }
}

/// Answers OffsetForLeaderEpoch from the partition's leader epoch cache: the end offset of
/// the requested epoch (the log end offset for the latest one).
pub async fn handle_offset_for_leader_epoch(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    // Kafka's `handleOffsetForLeaderEpochRequest`: CLUSTER_ACTION (brokers) allows every
    // topic; else DESCRIBE on each (consumers, KIP-320).
    let cluster_action = authorize_cluster(broker, ctx, AclOperation::ClusterAction);
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.topic.to_string();
            let allowed = cluster_action
                || authorize(
                    broker,
                    ctx,
                    AclOperation::Describe,
                    ResourceType::Topic,
                    &name,
                );
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let base = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    if !allowed {
                        return base
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let part = match broker.replicas.partition_or_error(&name, p.partition) {
                        Ok(part) => part,
                        Err(e) => return base.with_error_code(e.code()),
                    };
                    // Kafka's `Partition.lastOffsetForLeaderEpoch`: the current epoch is
                    // checked first, then only the leader answers (consumers and followers
                    // alike), from its leader epoch cache (`LeaderEpochFileCache.endOffsetFor`):
                    // an older epoch ends where the next one starts, so a consumer that read
                    // past that point knows its position was truncated (KIP-320). Answering the
                    // log end for every epoch made every position look valid, or, on a
                    // follower, made librdkafka reset its consumers.
                    if let Err(e) = part.check_leader_epoch(p.current_leader_epoch) {
                        return base.with_error_code(e.error_code());
                    }
                    if !part.is_leader() {
                        return base.with_error_code(ResponseError::NotLeaderOrFollower.code());
                    }
                    let (epoch, end_offset) = part.end_offset_for_epoch(p.leader_epoch);
                    tracing::debug!(
                        topic = %name, partition = p.partition, replica = req.replica_id.0,
                        current_leader_epoch = p.current_leader_epoch,
                        requested_epoch = p.leader_epoch, epoch, end_offset,
                        "OffsetForLeaderEpoch answered"
                    );
                    base.with_leader_epoch(epoch).with_end_offset(end_offset)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

/// A ListOffsets answer with `code` for every partition, for fault injection.
pub fn error_response(req: &ListOffsetsRequest, code: i16) -> ListOffsetsResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let parts = t
                .partitions
                .iter()
                .map(|p| {
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_timestamp(-1)
                        .with_offset(-1)
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(parts)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
