//! Brook's storage engine (`brook-storage`): a segmented, append-only log per partition, in
//! Kafka's on-disk layout.
//!
//! **The boundary.** This crate is the only code that writes the files of a partition
//! directory (segments' `.log`, `.index`, `.timeindex` and `.txnindex`, producer state
//! snapshots, `leader-epoch-checkpoint`) or reads them while the broker runs, and the only one
//! that knows the format of the log directory's offset checkpoint files. The broker reaches
//! them only through it ([`UnifiedLog`], [`cleaner`], [`checkpoint`]); what it does itself is
//! delete a whole partition directory, and the offline `brook dump-log` command reads segment
//! files with this crate's parsers. This crate depends on no other workspace crate: it knows
//! nothing of replication, requests or the event stream, and reports what happened through
//! what its calls return (an append's [`LogAppendInfo`], with a [`DuplicateBatch`] for a
//! retry), as Kafka's `UnifiedLog` does. Cargo enforces it: nothing of the broker is in scope
//! here.
//!
//! Layout of a partition directory (Kafka's, so `kafka-dump-log` reads the segments):
//! - `<20-digit base offset>.log`, `.index`, `.timeindex`: the segments ([`segment`]);
//! - `<20-digit offset>.snapshot`: producer state snapshots ([`producer_state`]);
//! - `leader-epoch-checkpoint` ([`leader_epoch`]).
//!
//! The log directory itself holds the per-partition offset checkpoints in Kafka's text format
//! ([`checkpoint`]): recovery points, log start offsets and high watermarks. Their owner is
//! the caller (`ReplicaManager`); a log takes its recovery point and log start offset at open
//! ([`loader::LogCheckpoints`]).
//!
//! Modules: [`batch`] (the v2 batch view and produce validation), [`checkpoint`] (offset
//! checkpoint files), [`cleaner`] (log compaction), [`decompress`] (compressed records
//! streamed in bounded memory), [`index`] and [`time_index`]
//! (sparse indexes), [`segment`], [`producer_state`] (idempotence), [`verification`] (the
//! KIP-890 guard of a transaction's first append), [`loader`] (open and
//! crash recovery) and [`unified_log`] (the per-partition log the broker calls).
//!
//! Threading: the caller holds each `UnifiedLog` in a `parking_lot::Mutex`. Everything here runs
//! under that lock and stays short; [`UnifiedLog::read`] only locates data and the caller runs
//! [`FetchSlice::read`] after releasing the lock, and a roll's fsync is handed back to the
//! caller ([`UnifiedLog::roll_flush`]) to run without it.
//!
//! `batch::testutil`: valid client-like batches for tests and benchmarks, never for production
//! code (`scripts/check_features.py` checks that only test code names it).
#![forbid(unsafe_code)]
// Test functions may be long (a scenario reads top to bottom); the rest is held to clippy.toml's 70 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod batch;
pub mod batch_builder;
pub mod checkpoint;
pub mod cleaner;
pub mod control;
pub mod decompress;
pub mod index;
pub mod index_file;
pub mod leader_epoch;
pub mod loader;
pub mod producer_state;
pub mod records;
pub mod segment;
pub mod time_index;
pub mod txn_index;
pub mod unified_log;
pub mod validator;
pub mod verification;

#[cfg(test)]
mod cleaner_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;

pub use batch::{BatchHeader, Codec, RecordBatch};
pub use producer_state::{BatchMetadata, CompletedTxn, ProducerStateEntry, ProducerStateManager};
pub use txn_index::AbortedTxn;
pub use unified_log::UnifiedLog;
pub use validator::AppendOrigin;
pub use verification::{VerificationGuard, VerificationStateEntry};

/// Upper bound of one [`FetchSlice`] read, whatever the caller asks for: fetch.max.bytes and
/// max.message.bytes are far below it, so it only guards against nonsense sizes.
pub const FETCH_SLICE_MAX_BYTES: usize = 128 * 1024 * 1024;

/// How many keyless records of one batch a produce answer lists in `record_errors`. Kafka
/// lists every one; a batch of tiny keyless records holds tens of thousands, and the client
/// fails the whole batch either way (records past the list get the batch's error), so the
/// list is cut here and the error message still gives the full count.
pub const KEYLESS_RECORDS_LISTED_MAX: usize = 1000;

/// Errors of the storage engine, each mapping to one Kafka error code.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// CORRUPT_MESSAGE (2): bad CRC, impossible framing, unknown magic or codec.
    #[error("corrupt message: {0}")]
    CorruptMessage(String),
    /// INVALID_RECORD (87): a well-formed batch that breaks a produce rule.
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// INVALID_RECORD (87) with one record error per keyless record: a compacted topic takes
    /// only keyed records (Kafka's `LogValidator.validateKey`). `record_indices` holds the
    /// first [`KEYLESS_RECORDS_LISTED_MAX`] of the `count` keyless records.
    #[error("One or more records have been rejected due to {count} record errors: a compacted topic cannot accept a record without a key")]
    KeylessRecordsOnCompactedTopic {
        record_indices: Vec<i32>,
        count: usize,
    },
    /// MESSAGE_TOO_LARGE (10): the batch exceeds max.message.bytes.
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge { size: usize, max: usize },
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45): a sequence gap, or a new epoch not starting at 0.
    #[error("out of order sequence: {0}")]
    OutOfOrderSequence(String),
    /// INVALID_PRODUCER_EPOCH (47): an epoch older than the producer's current one.
    #[error("invalid producer epoch: {0}")]
    InvalidProducerEpoch(String),
    /// INVALID_TXN_STATE (48): a non-transactional batch from a producer with an open
    /// transaction.
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
    /// TRANSACTION_COORDINATOR_FENCED (52): a marker from an older coordinator epoch.
    #[error("transaction coordinator fenced: {0}")]
    TransactionCoordinatorFenced(String),
    /// OFFSET_OUT_OF_RANGE (1): outside [log start offset, log end offset].
    #[error("offset {offset} out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    /// INVALID_TIMESTAMP (32): outside message.timestamp.before/after.max.ms.
    #[error("invalid timestamp: {0}")]
    InvalidTimestamp(String),
    /// UNSUPPORTED_COMPRESSION_TYPE (76): for the caller's API-version checks (zstd before
    /// Produce v7); the storage engine itself does not return it.
    #[error("unsupported compression: {0}")]
    UnsupportedCompression(String),
    /// KAFKA_STORAGE_ERROR (56): an I/O failure, or a log taken offline by a failed fsync.
    #[error("storage error: {0}")]
    Io(#[from] std::io::Error),
    /// A follower's batch does not continue the log (its base offset is not the log end
    /// offset). Internal to replication: UNKNOWN_SERVER_ERROR (-1) if it ever reaches a client.
    #[error("unexpected append offset {actual}, expected {expected}")]
    UnexpectedAppendOffset { expected: i64, actual: i64 },
}

impl LogError {
    /// The Kafka error a client sees for this error.
    pub fn response_error(&self) -> ResponseError {
        match self {
            LogError::CorruptMessage(_) => ResponseError::CorruptMessage,
            LogError::InvalidRecord(_) => ResponseError::InvalidRecord,
            LogError::KeylessRecordsOnCompactedTopic { .. } => ResponseError::InvalidRecord,
            LogError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
            LogError::OutOfOrderSequence(_) => ResponseError::OutOfOrderSequenceNumber,
            LogError::InvalidProducerEpoch(_) => ResponseError::InvalidProducerEpoch,
            LogError::InvalidTxnState(_) => ResponseError::InvalidTxnState,
            LogError::TransactionCoordinatorFenced(_) => {
                ResponseError::TransactionCoordinatorFenced
            }
            LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            LogError::InvalidTimestamp(_) => ResponseError::InvalidTimestamp,
            LogError::UnsupportedCompression(_) => ResponseError::UnsupportedCompressionType,
            LogError::Io(_) => ResponseError::KafkaStorageError,
            LogError::UnexpectedAppendOffset { .. } => ResponseError::UnknownServerError,
        }
    }

    /// Its code on the wire.
    pub fn error_code(&self) -> i16 {
        self.response_error().code()
    }
}

/// Which timestamp a batch carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// The producer's timestamp (attribute bit 3 clear).
    CreateTime,
    /// The broker's append time, written into maxTimestamp (attribute bit 3 set).
    LogAppendTime,
}

/// Per-log settings, named after Kafka's topic configs.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// segment.bytes: roll when the active segment would grow past this.
    pub segment_bytes: u64,
    /// segment.ms: roll when the first batch of the active segment is this old.
    pub segment_ms: i64,
    /// segment.index.bytes: the most index data per segment; a full index rolls the segment.
    pub segment_index_bytes: u64,
    /// index.interval.bytes: bytes between offset index entries.
    pub index_interval_bytes: u64,
    /// retention.ms: delete segments whose newest record is older; -1 keeps forever.
    pub retention_ms: i64,
    /// retention.bytes: delete oldest segments while the log is larger; -1 for no limit.
    pub retention_bytes: i64,
    /// flush.messages: fsync after this many messages (u64::MAX: never, Kafka's default).
    pub flush_interval_messages: u64,
    /// message.timestamp.type.
    pub message_timestamp_type: TimestampType,
    /// max.message.bytes: the largest batch accepted.
    pub max_message_bytes: usize,
    /// message.timestamp.before.max.ms: how far in the past a CreateTime timestamp may be.
    pub message_timestamp_before_max_ms: i64,
    /// message.timestamp.after.max.ms: how far in the future a CreateTime timestamp may be.
    pub message_timestamp_after_max_ms: i64,
    /// cleanup.policy includes `delete` (Kafka's `LogConfig.delete`): only such logs let a
    /// client delete records (DeleteRecords); a compact-only log refuses with POLICY_VIOLATION.
    pub cleanup_policy_delete: bool,
    /// cleanup.policy includes `compact` (Kafka's `LogConfig.compact`): produce refuses
    /// records without a key, which takes a per-record key check that other logs skip.
    pub cleanup_policy_compact: bool,
    /// delete.retention.ms: how long the cleaner keeps a tombstone (and an ended
    /// transaction's marker) after the clean that first saw it (Kafka's delete horizon).
    pub delete_retention_ms: i64,
    /// min.compaction.lag.ms: a segment whose newest record is younger is not cleaned.
    pub min_compaction_lag_ms: i64,
    /// max.compaction.lag.ms: a dirty segment whose first batch is older is cleaned whatever
    /// the dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// min.cleanable.dirty.ratio: the cleaner takes a log once dirty bytes / all cleanable
    /// bytes exceed it.
    pub min_cleanable_dirty_ratio: f64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            flush_interval_messages: u64::MAX,
            message_timestamp_type: TimestampType::CreateTime,
            max_message_bytes: 1_048_588,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 3_600_000,
            cleanup_policy_delete: true,
            cleanup_policy_compact: false,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
        }
    }
}

/// What an append did.
#[derive(Debug, Clone)]
pub struct LogAppendInfo {
    /// Offset of the first record.
    pub first_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    /// The log start offset after the append (for the Produce response).
    pub log_start_offset: i64,
    /// `Some` when the batch was a retry of one of the producer's last five: nothing was
    /// written, and the offsets are the original ones.
    pub duplicate: Option<DuplicateBatch>,
    /// Number of records in the batch (or batches, for a follower append).
    pub record_count: i64,
}

/// A client's retry that the producer state matched with one of the producer's retained
/// batches (Kafka's `maybeDuplicate` in `UnifiedLog.analyzeAndValidateProducerState`). The log
/// publishes nothing itself: the caller learns of the duplicate from the append's result and
/// reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DuplicateBatch {
    /// The retry's producer id.
    pub producer_id: i64,
    /// The retry's producer epoch (the retained batch's: a duplicate has the current epoch).
    pub producer_epoch: i16,
    /// The retry's first sequence (equal to the retained batch's).
    pub first_sequence: i32,
    /// The retry's last sequence (equal to the retained batch's).
    pub last_sequence: i32,
    /// Where the retained batch was written: the offset the retry is answered with.
    pub first_offset: i64,
}

/// A region of one segment file to read without holding the partition lock.
///
/// `UnifiedLog::read` fills it under the lock: `position` is the start of the batch holding the
/// fetch offset, and `max_len` is already bounded by the segment's size at that moment, so bytes
/// appended later are never read. With `min_one_message`, `max_len` covers at least the whole
/// first batch (KIP-74).
#[derive(Debug, Clone)]
pub struct FetchSlice {
    /// The segment's `.log` file; `None` for an empty result.
    pub file: Option<Arc<File>>,
    /// Byte position of the first batch.
    pub position: u64,
    /// Bytes to read at most.
    pub max_len: usize,
    /// Batches whose base offset is at or above this (the high watermark) are cut off.
    pub max_offset_exclusive: i64,
    /// Whether the first batch is returned even if larger than the requested max bytes.
    pub min_one_message: bool,
}

impl FetchSlice {
    /// A slice that reads nothing.
    pub fn empty(max_offset_exclusive: i64) -> Self {
        FetchSlice {
            file: None,
            position: 0,
            max_len: 0,
            max_offset_exclusive,
            min_one_message: false,
        }
    }

    /// Positional read, cut to whole batches below `max_offset_exclusive`. Runs without the
    /// partition lock. A concurrent truncation can only make the read shorter; the cut drops any
    /// partial batch.
    pub fn read(&self) -> std::io::Result<Bytes> {
        let Some(file) = &self.file else {
            return Ok(Bytes::new());
        };
        let len = self.max_len.min(FETCH_SLICE_MAX_BYTES);
        if len == 0 {
            return Ok(Bytes::new());
        }
        let mut buf = vec![0u8; len];
        let mut got = 0;
        while got < len {
            let n = file.read_at(&mut buf[got..], self.position + got as u64)?;
            if n == 0 {
                break;
            }
            got += n;
        }
        let keep = whole_batches_below(&buf[..got], self.max_offset_exclusive);
        buf.truncate(keep);
        Ok(Bytes::from(buf))
    }
}

/// The offset after the last whole batch in `buf` (a fetch's records), `None` if it holds none.
pub fn next_offset_after(buf: &[u8]) -> Option<i64> {
    let mut pos = 0;
    let mut next = None;
    while let Some(size) = batch::batch_size_at(&buf[pos..]) {
        if pos + size > buf.len() {
            break;
        }
        let h = BatchHeader::new(&buf[pos..])?;
        next = Some(h.next_offset());
        pos += size;
    }
    next
}

/// Length of the prefix of `buf` made of whole batches with base offset < `max_offset_exclusive`.
fn whole_batches_below(buf: &[u8], max_offset_exclusive: i64) -> usize {
    let mut pos = 0;
    while let Some(size) = batch::batch_size_at(&buf[pos..]) {
        if pos + size > buf.len() {
            break;
        }
        let Some(h) = BatchHeader::new(&buf[pos..]) else {
            break;
        };
        if h.base_offset() >= max_offset_exclusive {
            break;
        }
        pos += size;
    }
    pos
}
