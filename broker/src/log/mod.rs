//! The storage engine: a segmented, append-only log per partition, in Kafka's on-disk layout.
//!
//! CONTRACT STUB: the signatures below are what the rest of the broker calls. The bodies are
//! placeholders until the storage engine lands; the real code splits into `batch`, `index`,
//! `time_index`, `segment`, `unified_log`, `producer_state` and `loader`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

/// Errors of the storage engine, each mapping to one Kafka error code.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("corrupt message: {0}")]
    CorruptMessage(String),
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge { size: usize, max: usize },
    #[error("out of order sequence: {0}")]
    OutOfOrderSequence(String),
    #[error("invalid producer epoch: {0}")]
    InvalidProducerEpoch(String),
    #[error("offset {offset} out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    #[error("invalid timestamp: {0}")]
    InvalidTimestamp(String),
    #[error("unsupported compression: {0}")]
    UnsupportedCompression(String),
    #[error("storage error: {0}")]
    Io(#[from] std::io::Error),
}

impl LogError {
    /// The Kafka error code a client sees for this error.
    pub fn error_code(&self) -> i16 {
        match self {
            LogError::CorruptMessage(_) => 2,
            LogError::InvalidRecord(_) => 87,
            LogError::MessageTooLarge { .. } => 10,
            LogError::OutOfOrderSequence(_) => 45,
            LogError::InvalidProducerEpoch(_) => 47,
            LogError::OffsetOutOfRange { .. } => 1,
            LogError::InvalidTimestamp(_) => 32,
            LogError::UnsupportedCompression(_) => 76,
            LogError::Io(_) => 56,
        }
    }
}

/// Which timestamp a batch carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// Per-log settings, named after Kafka's topic configs.
#[derive(Debug, Clone)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub segment_index_bytes: u64,
    pub index_interval_bytes: u64,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub flush_interval_messages: u64,
    pub message_timestamp_type: TimestampType,
    pub max_message_bytes: usize,
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_after_max_ms: i64,
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
        }
    }
}

/// What an append did.
#[derive(Debug, Clone)]
pub struct LogAppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// True when the batch was a retry of one of the producer's last five: nothing was written,
    /// and the offsets are the original ones.
    pub duplicate: bool,
    pub record_count: i64,
}

/// A region of one segment file to read without holding the partition lock.
#[derive(Debug, Clone)]
pub struct FetchSlice {
    pub file: Option<Arc<File>>,
    pub position: u64,
    pub max_len: usize,
    pub max_offset_exclusive: i64,
    pub min_one_message: bool,
}

impl FetchSlice {
    /// Positional read, cut to whole batches below `max_offset_exclusive`.
    pub fn read(&self) -> std::io::Result<Bytes> {
        Ok(Bytes::new())
    }
}

/// One partition's log.
pub struct UnifiedLog {
    dir: PathBuf,
    config: LogConfig,
}

impl UnifiedLog {
    pub fn open(
        dir: PathBuf,
        config: LogConfig,
        had_clean_shutdown: bool,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        let _ = (had_clean_shutdown, now_ms);
        Ok(UnifiedLog { dir, config })
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }
    pub fn log_start_offset(&self) -> i64 {
        0
    }
    pub fn log_end_offset(&self) -> i64 {
        0
    }
    pub fn append_as_leader(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LogAppendInfo, LogError> {
        let _ = (records, leader_epoch, now_ms);
        unimplemented!()
    }
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        max_offset_exclusive: i64,
        min_one_message: bool,
    ) -> Result<FetchSlice, LogError> {
        let _ = (
            fetch_offset,
            max_bytes,
            max_offset_exclusive,
            min_one_message,
        );
        unimplemented!()
    }
    pub fn fetch_offset_by_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let _ = timestamp_ms;
        unimplemented!()
    }
    pub fn max_timestamp_and_offset(&self) -> Result<Option<(i64, i64)>, LogError> {
        unimplemented!()
    }
    pub fn delete_old_segments(&mut self, now_ms: i64) -> Result<usize, LogError> {
        let _ = now_ms;
        unimplemented!()
    }
    pub fn flush(&mut self) -> Result<(), LogError> {
        unimplemented!()
    }
    pub fn close(&mut self) -> Result<(), LogError> {
        unimplemented!()
    }
    pub fn delete(self) -> Result<(), LogError> {
        unimplemented!()
    }
}
