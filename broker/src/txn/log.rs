//! A coordinator's internal topic: `__transaction_state`, where the transaction coordinator
//! keeps each transactional id's state, and `__share_group_state`, where the share
//! coordinator keeps each share-partition's ([`crate::share::coordinator`]).
//!
//! An ordinary compacted Brook topic, like `__consumer_offsets` ([`crate::group::store`]):
//! created on first use (alone: here, with one replica; in a cluster: through the controller
//! with the coordinator's replication factor, e.g. `transaction.state.log.replication.factor`,
//! and its min ISR as the topic's `min.insync.replicas`). Records are written by the
//! partition's leader with acks=all, uncompressed, without a producer id (Kafka's
//! `TransactionLog`: `EnforcedRequiredAcks`, `EnforcedCompression`; the share coordinator's
//! `CoordinatorRuntime` writes the same way), and read back when this node comes to lead a
//! partition.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::TxnError;
use crate::cluster::partition::{Partition, PartitionError};
use crate::cluster::replica_manager::{now_ms, ReplicaManager};
use brook_controller::error::ControllerError;
use brook_storage::batch::RecordBatch;
use brook_storage::batch_builder::{BatchBuilder, SimpleRecord};
use brook_storage::records::RecordIter;
use brook_storage::Codec;

/// The internal topic's name, as in Kafka (defined with Kafka's other internal topics in
/// `metadata`).
pub use crate::metadata::TRANSACTION_STATE_TOPIC;
/// Bytes read per step while loading a partition (`transaction.state.log.load.buffer.size`).
pub const LOAD_READ_BYTES: usize = 5 * 1024 * 1024;
/// How long topic creation waits for the topic to reach this node's metadata.
const TOPIC_VISIBLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Appends to and loads from one coordinator's internal topic.
pub struct CoordinatorLog {
    /// `__transaction_state` or `__share_group_state`.
    topic: &'static str,
    replicas: Arc<ReplicaManager>,
    /// `transaction.state.log.num.partitions` (or the share coordinator's key).
    configured_partitions: i32,
    /// `transaction.state.log.replication.factor` (cluster only; alone it is 1).
    replication_factor: i16,
    /// `transaction.state.log.min.isr` (cluster only).
    min_isr: i32,
    /// `transaction.state.log.segment.bytes`.
    segment_bytes: i64,
}

/// Where a record landed: durable once the partition's high watermark passes `last_offset`.
pub struct Written {
    pub partition: Arc<Partition>,
    pub last_offset: i64,
}

impl CoordinatorLog {
    pub fn new(
        topic: &'static str,
        replicas: Arc<ReplicaManager>,
        configured_partitions: i32,
        replication_factor: i16,
        min_isr: i32,
        segment_bytes: i64,
    ) -> Self {
        CoordinatorLog {
            topic,
            replicas,
            configured_partitions,
            replication_factor,
            min_isr,
            segment_bytes,
        }
    }

    /// The partition count in use: the existing topic's, else the configured one.
    pub fn partitions(&self) -> i32 {
        self.replicas
            .topic(self.topic)
            .map(|t| t.partition_count())
            .unwrap_or(self.configured_partitions)
    }

    /// The partition of a key: a transactional id (Kafka's
    /// `TransactionStateManager.partitionFor`: `Utils.abs(transactionalId.hashCode) %
    /// partitions`), or a share-partition's `group:topicId:partition` (Kafka's
    /// `ShareCoordinatorService.partitionFor`, the same hash).
    pub fn partition_for(&self, key: &str) -> i32 {
        crate::group::records::partition_for(key, self.partitions())
    }

    /// Kafka's `TransactionStateManager.transactionTopicConfigs`; `min.insync.replicas` only
    /// where there are replicas to count.
    fn topic_configs(&self, clustered: bool) -> BTreeMap<String, String> {
        let mut c = BTreeMap::new();
        c.insert("cleanup.policy".to_string(), "compact".to_string());
        c.insert("compression.type".to_string(), "uncompressed".to_string());
        c.insert("segment.bytes".to_string(), self.segment_bytes.to_string());
        // Compact only: the log cleaner keeps each transactional id's latest record, and
        // time retention, which applies to `delete` logs only, never cuts it.
        c.insert(
            "unclean.leader.election.enable".to_string(),
            "false".to_string(),
        );
        if clustered {
            c.insert("min.insync.replicas".to_string(), self.min_isr.to_string());
        }
        c
    }

    /// Creates the topic unless it exists (FindCoordinator does this, as in Kafka), with
    /// `transaction.state.log.replication.factor` replicas (one on a single node, which has no
    /// other broker to place them on). While a cluster has fewer live brokers than the
    /// replication factor creation fails, and the caller answers COORDINATOR_NOT_AVAILABLE.
    pub async fn ensure_topic(&self) -> Result<(), TxnError> {
        if self.replicas.topic(self.topic).is_some() {
            return Ok(());
        }
        let controller = self.replicas.controller();
        let single = controller.is_single_voter();
        let replication_factor = if single { 1 } else { self.replication_factor };
        match controller
            .create_topic(
                self.topic,
                self.configured_partitions,
                replication_factor,
                self.topic_configs(!single),
            )
            .await
        {
            Ok(_) | Err(ControllerError::TopicAlreadyExists(_)) => {}
            Err(e) => {
                tracing::info!(error = %e, topic = self.topic, "coordinator topic not created yet");
                return Err(TxnError::CoordinatorNotAvailable);
            }
        }
        let visible = self
            .replicas
            .wait_for_metadata(TOPIC_VISIBLE_TIMEOUT, |rm| rm.topic(self.topic).is_some())
            .await;
        if visible {
            Ok(())
        } else {
            Err(TxnError::CoordinatorNotAvailable)
        }
    }

    /// The local replica of partition `index`, if any.
    pub fn partition(&self, index: i32) -> Option<Arc<Partition>> {
        self.replicas.partition(self.topic, index)
    }

    /// The leader epoch of partition `index` when this node leads it: a coordinator serves a
    /// partition's keys only then, and reloads its state when the epoch changes.
    pub fn led_epoch(&self, index: i32) -> Option<i32> {
        self.partition(index)
            .filter(|p| p.is_leader())
            .map(|p| p.leader_epoch())
    }

    /// Appends one record to partition `index` as its leader, acks=all.
    pub fn append(
        &self,
        index: i32,
        key: Bytes,
        value: Option<Bytes>,
    ) -> Result<Written, TxnError> {
        let part = self.partition(index).ok_or(TxnError::NotCoordinator)?;
        let now = now_ms();
        let mut b = BatchBuilder::new(now);
        b.records = vec![SimpleRecord {
            timestamp_delta: 0,
            key: Some(key.to_vec()),
            value: value.map(|v| v.to_vec()),
            headers: Vec::new(),
        }];
        let info = part
            .append_records_to_leader(b.build(), -1, now, None)
            .map_err(write_error)?;
        Ok(Written {
            partition: part,
            last_offset: info.last_offset,
        })
    }

    /// Waits until `written` is on every in-sync replica.
    pub async fn wait_committed(
        &self,
        written: &Written,
        timeout: Duration,
    ) -> Result<(), TxnError> {
        match written
            .partition
            .wait_for_high_watermark(written.last_offset, timeout)
            .await
        {
            Ok(()) | Err(PartitionError::NotEnoughReplicasAfterAppend { .. }) => Ok(()),
            Err(e) => Err(write_error(e)),
        }
    }

    /// Reads partition `index` from its log start to its log end, handing every record's
    /// (key, value) to `apply` in offset order. A new leader reads past the high watermark:
    /// followers will truncate to its log.
    pub fn load_partition(
        &self,
        index: i32,
        apply: &mut impl FnMut(&[u8], Option<&[u8]>),
    ) -> Result<usize, TxnError> {
        let Some(part) = self.partition(index) else {
            return Ok(0);
        };
        let storage = |e: &dyn std::fmt::Display| TxnError::Storage(e.to_string());
        let mut count = 0;
        let (mut offset, end) = part.offsets();
        while offset < end {
            let read = part
                .read_to_log_end(offset, LOAD_READ_BYTES)
                .map_err(|e| storage(&e))?;
            let buf = read.slice.read().map_err(|e| storage(&e))?;
            let before = offset;
            let mut pos = 0;
            while pos < buf.len() {
                let Ok((batch, size)) = RecordBatch::parse(&buf[pos..]) else {
                    break;
                };
                pos += size;
                let h = batch.header();
                offset = h.next_offset();
                // The coordinator writes uncompressed batches only (Kafka enforces it too).
                if h.is_control() || h.codec() != Some(Codec::None) {
                    continue;
                }
                for r in RecordIter::new(batch.records_bytes()) {
                    let Ok(r) = r else {
                        tracing::warn!(topic = self.topic, "skipping a malformed record");
                        break;
                    };
                    if let Some(key) = r.key {
                        apply(key, r.value);
                        count += 1;
                    }
                }
            }
            if offset == before {
                // A torn tail that recovery will cut.
                break;
            }
        }
        Ok(count)
    }
}

/// Kafka's `TransactionStateManager.appendTransactionToLog` error mapping: a lost
/// leadership is NOT_COORDINATOR, too few replicas or a timeout COORDINATOR_NOT_AVAILABLE
/// (the client retries), anything else an internal error.
fn write_error(e: PartitionError) -> TxnError {
    match e {
        PartitionError::NotLeader | PartitionError::FencedLeaderEpoch { .. } => {
            TxnError::NotCoordinator
        }
        PartitionError::NotEnoughReplicas { .. }
        | PartitionError::NotEnoughReplicasAfterAppend { .. }
        | PartitionError::RequestTimedOut => TxnError::CoordinatorNotAvailable,
        e => TxnError::Storage(e.to_string()),
    }
}
