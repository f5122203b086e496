//! WriteTxnMarkers (API 27): a transaction coordinator asks this node, as leader of some
//! partitions, to end a producer's transaction on each of them with a COMMIT or ABORT control
//! batch (Kafka's `KafkaApis.handleWriteTxnMarkersRequest`).
//!
//! This handler is the interface between the coordinator and the partition leaders: a remote
//! coordinator sends the request over TCP, a local one may call [`handle`] directly. Every
//! marker of the request is appended first (coordinator origin: control batches allowed, no
//! sequence check, the producer and coordinator epochs checked), then the request waits once,
//! against one deadline, until every marker is below its partition's high watermark, since
//! Kafka appends markers with `requiredAcks = -1`. A marker on a `__consumer_offsets`
//! partition then completes the producer's transactional offset commits in the group
//! coordinator.
//!
//! Served versions: 1 and 2 (Kafka 4 removed v0, KIP-896). v2 adds each marker's transaction
//! version, which Kafka passes to the append (`ReplicaManager.appendRecords`, then
//! `ProducerAppendInfo.checkProducerEpoch`) and to the group coordinator's
//! `completeTransaction` for `__consumer_offsets`; here both are the marker's append.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use super::RequestContext;
use crate::broker::Broker;
use crate::cluster::partition::Partition;
use crate::cluster::replica_manager::now_ms;
use crate::group::store::OFFSETS_TOPIC;
use brook_storage::control::{build_end_txn_marker, EndTxnMarker};

/// How long the markers of one request may wait for replication: Kafka uses the broker's
/// `request.timeout.ms` (default 30000).
pub const WRITE_TXN_MARKERS_TIMEOUT_MS: u64 = 30_000;

/// One partition of one marker: appended and waiting, or answered.
enum Slot {
    Waiting {
        part: Arc<Partition>,
        last_offset: i64,
    },
    Done(i16),
}

/// Handles one WriteTxnMarkers request.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    // Only coordinators write markers: CLUSTER_ACTION on the cluster, else every partition
    // is refused (Kafka's `handleWriteTxnMarkersRequest`).
    let allowed = super::auth_helper::authorize_cluster(
        broker,
        ctx,
        crate::security::acl::AclOperation::ClusterAction,
    );
    let now = now_ms();
    // (marker index, topic name, partition index, slot), in request order.
    let mut slots: Vec<(usize, TopicName, i32, Slot)> = Vec::new();
    for (mi, m) in req.markers.iter().enumerate() {
        let marker = EndTxnMarker {
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
        };
        let batch = build_end_txn_marker(m.producer_id.0, m.producer_epoch, marker, now);
        for t in &m.topics {
            for &index in &t.partition_indexes {
                let slot = match broker.replicas.partition_or_error(&t.name, index) {
                    _ if !allowed => {
                        Slot::Done(kafka_protocol::ResponseError::ClusterAuthorizationFailed.code())
                    }
                    Err(e) => Slot::Done(e.code()),
                    Ok(part) => append_marker(part, m, &t.name, index, batch.clone(), now),
                };
                slots.push((mi, t.name.clone(), index, slot));
            }
        }
    }

    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(WRITE_TXN_MARKERS_TIMEOUT_MS);
    let mut markers: Vec<WritableTxnMarkerResult> = req
        .markers
        .iter()
        .map(|m| WritableTxnMarkerResult::default().with_producer_id(m.producer_id))
        .collect();
    for (mi, name, index, slot) in slots {
        let code = match slot {
            Slot::Done(code) => code,
            Slot::Waiting { part, last_offset } => {
                match part
                    .wait_for_high_watermark_until(last_offset, deadline)
                    .await
                {
                    Ok(()) => 0,
                    Err(e) => e.error_code(),
                }
            }
        };
        let m = &req.markers[mi];
        if code == 0 && name.0.as_str() == OFFSETS_TOPIC {
            // The marker is committed: the producer's pending offsets become the groups'
            // committed offsets, or vanish (Kafka's `onTransactionCompleted`).
            broker
                .groups
                .complete_txn_offsets(index, m.producer_id.0, m.transaction_result);
        }
        push_result(&mut markers[mi], name, index, code);
    }
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// Appends `m`'s marker batch to partition `index` of `topic`, this node leading it, as
/// Kafka's `handleWriteTxnMarkersRequest` does through `ReplicaManager.appendRecords` with
/// the coordinator's origin; the marker then waits for the high watermark.
fn append_marker(
    part: Arc<Partition>,
    m: &WritableTxnMarker,
    topic: &TopicName,
    index: i32,
    batch: Bytes,
    now: i64,
) -> Slot {
    // v2 names the transaction's version (v1 reads 0): at 2 the marker's epoch is the
    // one its coordinator bumped, and must be newer than the producer's.
    match part.append_marker_to_leader(batch, m.transaction_version, now) {
        Ok(info) => {
            crate::events::emit(|| crate::events::EventKind::TxnMarker {
                topic: topic.to_string(),
                partition: index,
                producer_id: m.producer_id.0,
                producer_epoch: m.producer_epoch,
                committed: m.transaction_result,
                coordinator_epoch: m.coordinator_epoch,
                offset: info.last_offset,
            });
            Slot::Waiting {
                part,
                last_offset: info.last_offset,
            }
        }
        Err(e) => Slot::Done(e.error_code()),
    }
}

/// Adds one partition's answer under its topic, keeping the request's topic order.
fn push_result(marker: &mut WritableTxnMarkerResult, name: TopicName, index: i32, code: i16) {
    let partition = WritableTxnMarkerPartitionResult::default()
        .with_partition_index(index)
        .with_error_code(code);
    match marker.topics.iter_mut().find(|t| t.name == name) {
        Some(t) => t.partitions.push(partition),
        None => marker.topics.push(
            WritableTxnMarkerTopicResult::default()
                .with_name(name)
                .with_partitions(vec![partition]),
        ),
    }
}
