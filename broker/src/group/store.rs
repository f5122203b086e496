//! `__consumer_offsets`: where committed offsets and group metadata live.
//!
//! It is an ordinary Brook topic (created on first use through the `ReplicaManager`, with
//! `cleanup.policy=compact`), so its records take the same partition/log path as client
//! data and will be replicated the same way. Records are appended as non-transactional
//! batches without a producer id; on start-up every partition is read back from its log
//! start offset to its high watermark to rebuild the coordinator's state.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::records::{decode_key, partition_for, RecordKey};
use super::GroupError;
use crate::cluster::replica_manager::{now_ms, ReplicaError, ReplicaManager};
use crate::log::batch::testutil::{BatchBuilder, TestRecord};
use crate::log::batch::{decompress_records, RecordBatch, RecordIter};
use crate::log::Codec;

/// The internal topic's name, as in Kafka.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Bytes read per step while replaying a partition.
pub const REPLAY_READ_BYTES: usize = 1024 * 1024;

/// One record to write: key, and value (`None` is a tombstone).
pub type Record = (Bytes, Option<Bytes>);

/// Appends coordinator records to, and replays them from, `__consumer_offsets`.
pub struct OffsetsStore {
    replicas: Arc<ReplicaManager>,
    /// `offsets.topic.num.partitions`, used when the topic is created.
    configured_partitions: i32,
}

impl OffsetsStore {
    /// A store over the replica manager's topics.
    pub fn new(replicas: Arc<ReplicaManager>, configured_partitions: i32) -> Self {
        OffsetsStore {
            replicas,
            configured_partitions,
        }
    }

    /// The partition count in use: the existing topic's, else the configured one.
    pub fn partitions(&self) -> i32 {
        self.replicas
            .topic(OFFSETS_TOPIC)
            .map(|t| t.partitions)
            .unwrap_or(self.configured_partitions)
    }

    /// The partition that holds a group's records.
    pub fn partition_for(&self, group: &str) -> i32 {
        partition_for(group, self.partitions())
    }

    /// Creates the topic unless it exists.
    pub fn ensure_topic(&self) -> Result<(), GroupError> {
        if self.replicas.topic(OFFSETS_TOPIC).is_some() {
            return Ok(());
        }
        let mut configs = BTreeMap::new();
        configs.insert("cleanup.policy".to_string(), "compact".to_string());
        // Brook has no log cleaner yet, and time-based retention would delete committed
        // offsets of idle groups: keep the segments until compaction exists.
        configs.insert("retention.ms".to_string(), "-1".to_string());
        configs.insert("segment.bytes".to_string(), "104857600".to_string());
        match self.replicas.create_topic(
            OFFSETS_TOPIC,
            self.configured_partitions,
            1,
            configs,
            false,
        ) {
            Ok(_) | Err(ReplicaError::TopicExists(_)) => Ok(()),
            Err(e) => Err(GroupError::Storage(e.to_string())),
        }
    }

    /// Appends one batch of records to the group's partition.
    pub fn append(&self, group: &str, records: Vec<Record>) -> Result<(), GroupError> {
        if records.is_empty() {
            return Ok(());
        }
        self.ensure_topic()?;
        let index = self.partition_for(group);
        let part = self
            .replicas
            .partition(OFFSETS_TOPIC, index)
            .ok_or_else(|| GroupError::Storage(format!("{OFFSETS_TOPIC}-{index} is missing")))?;
        let now = now_ms();
        let mut b = BatchBuilder::new(now);
        b.records = records
            .into_iter()
            .map(|(k, v)| TestRecord {
                timestamp_delta: 0,
                key: Some(k.to_vec()),
                value: v.map(|v| v.to_vec()),
                headers: Vec::new(),
            })
            .collect();
        part.append_records_to_leader(b.build(), -1, now)
            .map_err(|e| match e.error_code() {
                10 => GroupError::InvalidCommitOffsetSize,
                _ => GroupError::Storage(e.to_string()),
            })?;
        Ok(())
    }

    /// Reads every record of the topic, partition by partition in offset order, and hands
    /// each (key, value) to `apply`. Undecodable records are logged and skipped.
    pub fn replay(
        &self,
        mut apply: impl FnMut(RecordKey, Option<&[u8]>),
    ) -> Result<usize, GroupError> {
        let Some(topic) = self.replicas.topic(OFFSETS_TOPIC) else {
            return Ok(0);
        };
        let mut count = 0;
        for index in 0..topic.partitions {
            let Some(part) = self.replicas.partition(OFFSETS_TOPIC, index) else {
                continue;
            };
            let (mut offset, _) = part.offsets();
            let hw = part.high_watermark();
            while offset < hw {
                let read = part
                    .read(offset, REPLAY_READ_BYTES, true)
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
                        continue;
                    }
                    count += apply_batch(&batch, &mut apply);
                }
                if offset == before {
                    // Nothing parsed: a torn tail that recovery will cut; stop here.
                    break;
                }
            }
        }
        Ok(count)
    }
}

fn apply_batch(batch: &RecordBatch<'_>, apply: &mut impl FnMut(RecordKey, Option<&[u8]>)) -> usize {
    let h = batch.header();
    let owned;
    let records: &[u8] = match h.codec() {
        Some(Codec::None) => batch.records_bytes(),
        Some(codec) => match decompress_records(codec, batch.records_bytes()) {
            Ok(b) => {
                owned = b;
                &owned
            }
            Err(e) => {
                tracing::warn!(error = %e, "skipping undecodable {OFFSETS_TOPIC} batch");
                return 0;
            }
        },
        None => return 0,
    };
    let mut n = 0;
    for r in RecordIter::new(records) {
        let Ok(r) = r else {
            tracing::warn!("skipping malformed record in {OFFSETS_TOPIC}");
            break;
        };
        let Some(key) = r.key else { continue };
        match decode_key(key) {
            Ok(k) => {
                apply(k, r.value);
                n += 1;
            }
            Err(e) => tracing::warn!(error = %e, "skipping {OFFSETS_TOPIC} record"),
        }
    }
    n
}
