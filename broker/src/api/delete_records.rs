//! DeleteRecords (API 21, v0-2): a client moves partitions' log start offsets forward, which
//! `kafka-delete-records` and `Admin.deleteRecords` send to each partition's leader (Kafka's
//! `KafkaApis.handleDeleteRecordsRequest`, `ReplicaManager.deleteRecords`).
//!
//! Per partition, in Kafka's order: a partition the metadata does not know is
//! UNKNOWN_TOPIC_OR_PARTITION; an internal topic is refused with INVALID_TOPIC_EXCEPTION;
//! a partition this node does not host or lead is NOT_LEADER_OR_FOLLOWER
//! (`ReplicaManager::partition_or_error`); the rest is
//! `Partition::delete_records_on_leader` (offset -1 is the high watermark, POLICY_VIOLATION
//! and OFFSET_OUT_OF_RANGE). Then the request waits once, against the request's one deadline
//! (`timeout_ms`), until each moved partition's low watermark (the smallest log start offset
//! over its live replicas, which followers take from the leader and report in their next
//! fetch) reaches the offset asked for (Kafka's `DelayedDeleteRecords`); a partition still
//! short at the deadline answers REQUEST_TIMED_OUT with the low watermark it had at first.
//!
//! Unlike Kafka, the `log-start-offset-checkpoint` is written before the answer whenever a
//! log start moved, not only by the periodic task: a deletion the client was told of survives
//! a SIGKILL of the leader, even with the segments below it still on disk.

use kafka_protocol::messages::delete_records_request::DeleteRecordsPartition;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::RequestContext;
use crate::broker::Broker;
use crate::cluster::partition::{DeleteRecordsResult, PartitionError};
use crate::cluster::replica_manager::{now_ms, OffsetCheckpoint};
use crate::metadata::is_internal_topic;
use crate::security::acl::{AclOperation, ResourceType};

/// Kafka's `DeleteRecordsResponse.INVALID_LOW_WATERMARK`: the low watermark of a refused
/// partition.
const INVALID_LOW_WATERMARK: i64 = -1;

/// One partition after the deletion on the leader: answered, or waiting for its replicas.
enum Deleted {
    Done(DeleteRecordsPartitionResult),
    Waiting {
        partition_index: i32,
        topic: String,
        result: DeleteRecordsResult,
    },
}

/// Handles one DeleteRecords request.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let deadline = Instant::now() + std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    let now = now_ms();
    let mut any_moved = false;
    let deleted: Vec<(_, Vec<Deleted>)> = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = t.name.to_string();
            // DELETE on the topic (Kafka's `handleDeleteRecordsRequest`).
            let allowed = super::auth_helper::authorize(
                broker,
                ctx,
                AclOperation::Delete,
                ResourceType::Topic,
                &topic,
            );
            let parts = t
                .partitions
                .iter()
                .map(|p| {
                    if !allowed {
                        return refused(p.partition_index, ResponseError::TopicAuthorizationFailed);
                    }
                    let d = delete_partition(broker, &topic, p, now);
                    any_moved |=
                        matches!(&d, Deleted::Waiting { result, .. } if result.log_start_moved);
                    d
                })
                .collect();
            (t.name, parts)
        })
        .collect();
    if any_moved {
        persist_log_start_offsets(broker).await;
    }
    let mut topics = Vec::with_capacity(deleted.len());
    for (name, parts) in deleted {
        let mut results = Vec::with_capacity(parts.len());
        for d in parts {
            results.push(complete(broker, d, deadline).await);
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(name)
                .with_partitions(results),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

fn refused(partition_index: i32, error: ResponseError) -> Deleted {
    Deleted::Done(
        DeleteRecordsPartitionResult::default()
            .with_partition_index(partition_index)
            .with_low_watermark(INVALID_LOW_WATERMARK)
            .with_error_code(error.code()),
    )
}

/// Moves one partition's log start offset on this node, its leader.
fn delete_partition(broker: &Broker, topic: &str, p: &DeleteRecordsPartition, now: i64) -> Deleted {
    let index = p.partition_index;
    let found = broker.replicas.partition_or_error(topic, index);
    if let Err(e @ ResponseError::UnknownTopicOrPartition) = found {
        return refused(index, e);
    }
    // Kafka's internal topics, whose records clients may not delete.
    if is_internal_topic(topic) {
        return refused(index, ResponseError::InvalidTopicException);
    }
    let part = match found {
        Ok(part) => part,
        Err(e) => return refused(index, e),
    };
    match part.delete_records_on_leader(p.offset, now, |id| broker.replicas.is_broker_alive(id)) {
        Ok(result) => Deleted::Waiting {
            partition_index: index,
            topic: topic.to_string(),
            result,
        },
        Err(e) => Deleted::Done(
            DeleteRecordsPartitionResult::default()
                .with_partition_index(index)
                .with_low_watermark(INVALID_LOW_WATERMARK)
                .with_error_code(e.error_code()),
        ),
    }
}

/// Waits, until the request's deadline, for a partition's low watermark to reach the offset
/// asked for.
async fn complete(broker: &Broker, d: Deleted, deadline: Instant) -> DeleteRecordsPartitionResult {
    let (partition_index, topic, result) = match d {
        Deleted::Done(r) => return r,
        Deleted::Waiting {
            partition_index,
            topic,
            result,
        } => (partition_index, topic, result),
    };
    let base = DeleteRecordsPartitionResult::default().with_partition_index(partition_index);
    if result.low_watermark >= result.requested_offset {
        return base.with_low_watermark(result.low_watermark);
    }
    let part = match broker.replicas.partition_or_error(&topic, partition_index) {
        Ok(part) => part,
        Err(e) => {
            return base
                .with_low_watermark(INVALID_LOW_WATERMARK)
                .with_error_code(e.code())
        }
    };
    let waited = part
        .wait_for_low_watermark_until(
            result.requested_offset,
            deadline,
            |id| broker.replicas.is_broker_alive(id),
            broker.replicas.metadata_applied(),
        )
        .await;
    match waited {
        Ok(low_watermark) => base.with_low_watermark(low_watermark),
        // Kafka's expired DelayedDeleteRecords keeps the low watermark of the deletion.
        Err(PartitionError::RequestTimedOut) => base
            .with_low_watermark(result.low_watermark)
            .with_error_code(ResponseError::RequestTimedOut.code()),
        Err(e) => base
            .with_low_watermark(INVALID_LOW_WATERMARK)
            .with_error_code(e.error_code()),
    }
}

/// Writes the log start offset checkpoint off the async threads (it fsyncs). A failure is
/// logged: the offset still moved in memory, and the periodic write tries again.
async fn persist_log_start_offsets(broker: &Broker) {
    let replicas = broker.replicas.clone();
    let written = tokio::task::spawn_blocking(move || {
        replicas.write_checkpoint(OffsetCheckpoint::LogStartOffset)
    })
    .await;
    match written {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "could not write the log start offset checkpoint"),
        Err(e) => tracing::warn!(error = %e, "the log start offset checkpoint task failed"),
    }
}
