//! `__consumer_offsets`: where committed offsets and group metadata live.
//!
//! It is an ordinary Brook topic with `cleanup.policy=compact`, so its records take the
//! same partition/log path as client data. On a single node it is created on first use
//! and every partition is read back at start-up. In a cluster it is created through the
//! controller with `offsets.topic.replication.factor` replicas and replicated like any
//! topic; the coordinator reads a partition back when this node becomes its leader.
//! Records are appended as non-transactional batches without a producer id, except
//! TxnOffsetCommit's, which are transactional batches of the committing producer (its id and
//! epoch, base sequence 0, as Kafka's `CoordinatorRuntime` writes them); the COMMIT or ABORT
//! marker the transaction coordinator later has written to the partition decides their fate,
//! and replay reads markers as well as records ([`Replayed`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::records::{decode_key, partition_for, RecordKey};
use super::GroupError;
use crate::cluster::partition::{Partition, PartitionError};
use crate::cluster::replica_manager::{now_ms, ReplicaManager};
use brook_controller::error::ControllerError;
use brook_storage::batch::RecordBatch;
use brook_storage::batch_builder::{BatchBuilder, SimpleRecord};
use brook_storage::control::parse_end_txn_marker;
use brook_storage::decompress::BatchRecords;
use brook_storage::records::{read_record, RecordBytes, RecordSink};
use brook_storage::{Codec, LogError};

/// The internal topic's name, as in Kafka (defined with Kafka's other internal topics in
/// `metadata`).
pub use crate::metadata::OFFSETS_TOPIC;
/// Bytes read per step while replaying a partition.
pub const REPLAY_READ_BYTES: usize = 1024 * 1024;

/// One record to write: key, and value (`None` is a tombstone).
pub type Record = (Bytes, Option<Bytes>);

/// Appends coordinator records to, and replays them from, `__consumer_offsets`.
pub struct OffsetsStore {
    replicas: Arc<ReplicaManager>,
    /// `offsets.topic.num.partitions`, used when the topic is created.
    configured_partitions: i32,
    /// `offsets.topic.replication.factor`, used when a cluster creates the topic.
    replication_factor: i16,
}

/// Where an append landed: the caller waits for the partition's high watermark to pass
/// `last_offset` before it tells a client that the write is durable. Record `i` of the batch
/// sits at `first_offset + i`.
pub struct Written {
    pub partition: Arc<Partition>,
    pub first_offset: i64,
    pub last_offset: i64,
}

/// The producer of a transactional write: TxnOffsetCommit's producer id and epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// One thing read back from an offsets partition, in log order.
#[derive(Debug)]
pub enum Replayed<'a> {
    /// A coordinator record at log offset `offset`; `txn` is the producer when the record is
    /// part of a transaction (a transactional batch), pending until its marker.
    Record {
        key: RecordKey,
        value: Option<&'a [u8]>,
        offset: i64,
        txn: Option<i64>,
    },
    /// A transaction marker (control batch) of `producer_id`: COMMIT or ABORT.
    Marker { producer_id: i64, commit: bool },
}

/// How long FindCoordinator waits for a newly created offsets topic to reach this node's
/// metadata image before it answers COORDINATOR_NOT_AVAILABLE (the client then retries).
const TOPIC_VISIBLE_TIMEOUT: Duration = Duration::from_secs(5);

impl OffsetsStore {
    /// A store over the replica manager's topics.
    pub fn new(
        replicas: Arc<ReplicaManager>,
        configured_partitions: i32,
        replication_factor: i16,
    ) -> Self {
        OffsetsStore {
            replicas,
            configured_partitions,
            replication_factor,
        }
    }

    /// The partition count in use: the existing topic's, else the configured one.
    pub fn partitions(&self) -> i32 {
        self.replicas
            .topic(OFFSETS_TOPIC)
            .map(|t| t.partition_count())
            .unwrap_or(self.configured_partitions)
    }

    /// The partition that holds a group's records.
    pub fn partition_for(&self, group: &str) -> i32 {
        partition_for(group, self.partitions())
    }

    /// The topic's configs, as Kafka sets them for its offsets topic
    /// (`GroupCoordinator.offsetsTopicConfigs`).
    fn topic_configs(&self) -> BTreeMap<String, String> {
        let mut configs = BTreeMap::new();
        // The log cleaner keeps the latest record per key; a compact-only log is never cut
        // by time (`retention.ms` applies to `delete` logs only).
        configs.insert("cleanup.policy".to_string(), "compact".to_string());
        configs.insert(
            "segment.bytes".to_string(),
            self.replicas.config.offsets_topic_segment_bytes.to_string(),
        );
        configs
    }

    /// Whether the topic exists; appends need it ([`Self::ensure_topic`] creates it).
    fn require_topic(&self) -> Result<(), GroupError> {
        match self.replicas.topic(OFFSETS_TOPIC) {
            Some(_) => Ok(()),
            None => Err(GroupError::CoordinatorNotAvailable),
        }
    }

    /// Creates the topic through the controller unless it exists, with
    /// `offsets.topic.replication.factor` replicas (one on a single node, which has no other
    /// broker to place them on), and waits until this node's image has it. While fewer
    /// brokers are alive than the replication factor the controller refuses, and the caller
    /// answers COORDINATOR_NOT_AVAILABLE, as Kafka does.
    pub async fn ensure_topic(&self) -> Result<(), GroupError> {
        if self.replicas.topic(OFFSETS_TOPIC).is_some() {
            return Ok(());
        }
        let controller = self.replicas.controller();
        let replication_factor = if controller.is_single_voter() {
            1
        } else {
            self.replication_factor
        };
        match controller
            .create_topic(
                OFFSETS_TOPIC,
                self.configured_partitions,
                replication_factor,
                self.topic_configs(),
            )
            .await
        {
            Ok(_) | Err(ControllerError::TopicAlreadyExists(_)) => {}
            Err(e) => {
                tracing::info!(error = %e, "{OFFSETS_TOPIC} not created yet");
                return Err(GroupError::CoordinatorNotAvailable);
            }
        }
        let visible = self
            .replicas
            .wait_for_metadata(TOPIC_VISIBLE_TIMEOUT, |rm| {
                rm.topic(OFFSETS_TOPIC).is_some()
            })
            .await;
        if visible {
            Ok(())
        } else {
            Err(GroupError::CoordinatorNotAvailable)
        }
    }

    /// Appends one batch of records to the group's partition, as its leader with acks=all
    /// (min.insync.replicas is checked first). Returns where it landed, or `None` when there
    /// was nothing to write.
    pub fn append(&self, group: &str, records: Vec<Record>) -> Result<Option<Written>, GroupError> {
        self.append_batch(group, records, None)
    }

    /// Like [`Self::append`], as one transactional batch of `producer` (Kafka's transactional
    /// coordinator write): its records stay outside the committed offsets until the
    /// transaction's marker. The partition checks the producer epoch: an older one than the
    /// partition has seen is refused (INVALID_PRODUCER_EPOCH).
    pub fn append_transactional(
        &self,
        group: &str,
        producer: TxnProducer,
        records: Vec<Record>,
    ) -> Result<Option<Written>, GroupError> {
        self.append_batch(group, records, Some(producer))
    }

    fn append_batch(
        &self,
        group: &str,
        records: Vec<Record>,
        txn: Option<TxnProducer>,
    ) -> Result<Option<Written>, GroupError> {
        if records.is_empty() {
            return Ok(None);
        }
        self.require_topic()?;
        let index = self.partition_for(group);
        let part = self
            .replicas
            .partition(OFFSETS_TOPIC, index)
            .ok_or(GroupError::NotCoordinator)?;
        let now = now_ms();
        let mut b = BatchBuilder::new(now);
        b.records = records
            .into_iter()
            .map(|(k, v)| SimpleRecord {
                timestamp_delta: 0,
                key: Some(k.to_vec()),
                value: v.map(|v| v.to_vec()),
                headers: Vec::new(),
            })
            .collect();
        let info = match txn {
            None => part.append_records_to_leader(b.build(), -1, now, None),
            Some(p) => {
                b = b.idempotent(p.producer_id, p.producer_epoch, 0);
                b.transactional = true;
                part.append_records_as_coordinator(b.build(), -1, now)
            }
        }
        .map_err(write_error)?;
        Ok(Some(Written {
            partition: part,
            first_offset: info.first_offset,
            last_offset: info.last_offset,
        }))
    }

    /// Waits until `written` is below the high watermark, i.e. on every in-sync replica.
    pub async fn wait_committed(
        &self,
        written: &Written,
        timeout: Duration,
    ) -> Result<(), GroupError> {
        match written
            .partition
            .wait_for_high_watermark(written.last_offset, timeout)
            .await
        {
            // The high watermark passed the records: they are committed, even if the ISR
            // shrank meanwhile (Kafka's coordinator completes its write on the high watermark).
            Ok(()) | Err(PartitionError::NotEnoughReplicasAfterAppend { .. }) => Ok(()),
            Err(e) => Err(write_error(e)),
        }
    }

    /// Reads one partition from its log start offset to its log end offset, handing each
    /// record and each transaction marker to `apply` in log order. A new leader reads past
    /// the high watermark: its log is the one followers will truncate to, so every record in
    /// it becomes committed once they catch up.
    pub fn replay_partition(
        &self,
        index: i32,
        apply: &mut impl FnMut(Replayed<'_>),
    ) -> Result<usize, GroupError> {
        let Some(part) = self.replicas.partition(OFFSETS_TOPIC, index) else {
            return Ok(0);
        };
        let mut count = 0;
        let (mut offset, end) = part.offsets();
        while offset < end {
            let read = part
                .read_to_log_end(offset, REPLAY_READ_BYTES)
                .map_err(|e| GroupError::Storage(e.to_string()))?;
            let buf = read
                .slice
                .read()
                .map_err(|e| GroupError::Storage(e.to_string()))?;
            if buf.is_empty() {
                break;
            }
            let mut pos = 0;
            let before = offset;
            while pos < buf.len() {
                let Ok((batch, size)) = RecordBatch::parse(&buf[pos..]) else {
                    break;
                };
                pos += size;
                let h = batch.header();
                offset = h.next_offset();
                if h.is_control() {
                    // Other control types (none is written here) and broken markers are
                    // skipped, like undecodable records.
                    match parse_end_txn_marker(&batch) {
                        Ok(Some(m)) => apply(Replayed::Marker {
                            producer_id: h.producer_id(),
                            commit: m.commit,
                        }),
                        Ok(None) => {}
                        Err(e) => tracing::warn!(error = %e, "skipping {OFFSETS_TOPIC} marker"),
                    }
                    continue;
                }
                count += apply_batch(&batch, apply);
            }
            if offset == before {
                // Nothing parsed: a torn tail that recovery will cut; stop here.
                break;
            }
        }
        Ok(count)
    }
}

/// Kafka's mapping of a coordinator write's failure to what the client sees: a lost
/// leadership sends it to look for the new coordinator; too few replicas or a timeout make
/// it retry here.
fn write_error(e: PartitionError) -> GroupError {
    match e {
        PartitionError::NotLeader | PartitionError::FencedLeaderEpoch { .. } => {
            GroupError::NotCoordinator
        }
        PartitionError::NotEnoughReplicas { .. }
        | PartitionError::NotEnoughReplicasAfterAppend { .. }
        | PartitionError::RequestTimedOut => GroupError::CoordinatorNotAvailable,
        // A transactional write of a producer epoch older than the partition has seen: the
        // producer is a zombie (Kafka answers the error as the log raised it).
        PartitionError::Log(LogError::InvalidProducerEpoch(_)) => GroupError::InvalidProducerEpoch,
        e if e.response_error() == ResponseError::MessageTooLarge => {
            GroupError::InvalidCommitOffsetSize
        }
        e => GroupError::Storage(e.to_string()),
    }
}

/// Whether a compressed batch decodes to its end, checked before any of its records is applied
/// so that a batch whose compressed bytes are damaged is skipped whole.
fn check_decodes(batch: &RecordBatch<'_>) -> Result<(), LogError> {
    if batch.header().codec() == Some(Codec::None) {
        return Ok(());
    }
    let mut records = BatchRecords::open(batch)?;
    let mut framed = true;
    while records.has_more()? {
        // Past a malformed record (judged record by record when applying), only the bytes.
        if !framed || read_record(&mut records, RecordSink::default(), false).is_none() {
            framed = false;
            let _ = records.skip(DECODE_CHECK_STEP_BYTES);
        }
    }
    Ok(())
}

/// How far [`check_decodes`] reads at a time past a malformed record.
const DECODE_CHECK_STEP_BYTES: usize = 64 * 1024;

fn apply_batch(batch: &RecordBatch<'_>, apply: &mut impl FnMut(Replayed<'_>)) -> usize {
    let h = batch.header();
    let txn = h.is_transactional().then(|| h.producer_id());
    // One record at a time (Kafka's `GroupMetadataManager` loads through the batch's
    // streaming iterator): a compressed batch is never held decompressed.
    let mut records = match check_decodes(batch).and_then(|()| BatchRecords::open(batch)) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "skipping undecodable {OFFSETS_TOPIC} batch");
            return 0;
        }
    };
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut n = 0;
    loop {
        match records.has_more() {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                tracing::warn!(error = %e, "skipping the rest of an undecodable {OFFSETS_TOPIC} batch");
                break;
            }
        }
        let sink = RecordSink {
            key: Some(&mut key),
            value: Some(&mut value),
        };
        let Some(r) = read_record(&mut records, sink, false) else {
            tracing::warn!("skipping malformed record in {OFFSETS_TOPIC}");
            break;
        };
        if !r.has_key {
            continue;
        }
        match decode_key(&key) {
            Ok(k) => {
                apply(Replayed::Record {
                    key: k,
                    value: r.has_value.then_some(&value[..]),
                    offset: h.base_offset() + r.offset_delta as i64,
                    txn,
                });
                n += 1;
            }
            Err(e) => tracing::warn!(error = %e, "skipping {OFFSETS_TOPIC} record"),
        }
    }
    n
}
