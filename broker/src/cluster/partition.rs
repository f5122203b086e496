//! A partition's leader state: its log, high watermark, leader epoch and ISR, and the fetch
//! requests parked on it.
//!
//! The mutable log sits behind a short `parking_lot::Mutex` (validate, dedup, assign offsets,
//! write to the page cache). It is a blocking mutex, not tokio's, because the critical
//! section never awaits. Readers take the lock only to locate the bytes ([`FetchSlice`]) and
//! do the positional read after releasing it.

use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;
use uuid::Uuid;

use crate::log::{FetchSlice, LogAppendInfo, LogConfig, LogError, UnifiedLog};

/// Bound on fetch requests parked on one partition; past it the oldest waiters are woken
/// early (they re-check and re-park), so a flood of idle consumers cannot grow memory.
pub const MAX_PARKED_FETCHES_PER_PARTITION: usize = 1024;

/// The errors a partition operation can return, beyond the log's own.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("ISR has {isr} member(s), fewer than min.insync.replicas={min_isr}")]
    NotEnoughReplicas { isr: usize, min_isr: i32 },
    #[error("leader epoch {requested} is older than the current {current}")]
    FencedLeaderEpoch { requested: i32, current: i32 },
    #[error("leader epoch {requested} is newer than the current {current}")]
    UnknownLeaderEpoch { requested: i32, current: i32 },
}

impl PartitionError {
    /// The Kafka error code for this error.
    pub fn error_code(&self) -> i16 {
        match self {
            PartitionError::Log(e) => e.error_code(),
            PartitionError::NotEnoughReplicas { .. } => 19,
            PartitionError::FencedLeaderEpoch { .. } => 74,
            PartitionError::UnknownLeaderEpoch { .. } => 75,
        }
    }
}

/// What a read found: the bytes to send and the offsets that frame them.
#[derive(Debug)]
pub struct PartitionRead {
    pub slice: FetchSlice,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

/// One partition of one topic, led by this node.
pub struct Partition {
    pub topic: String,
    pub topic_id: Uuid,
    pub index: i32,
    node_id: i32,
    log: Mutex<UnifiedLog>,
    /// Invariant: `log_start_offset <= high_watermark <= log_end_offset`. Only appends move
    /// it, under the log lock; readers load it without the lock.
    high_watermark: AtomicI64,
    leader_epoch: AtomicI32,
    /// The topic's min.insync.replicas, kept here so produce needs no metadata lookup.
    min_insync_replicas: AtomicI32,
    /// Fetches waiting for data on this partition (Kafka's DelayedFetch purgatory, reduced to
    /// a wake-up list: a woken fetch re-reads everything it asked for).
    waiters: Mutex<Vec<Arc<Notify>>>,
}

impl Partition {
    /// Wraps an opened log and makes this node its leader at epoch 0. On a single node the
    /// whole log is committed: HW = LEO.
    pub fn new(
        topic: String,
        topic_id: Uuid,
        index: i32,
        node_id: i32,
        min_insync_replicas: i32,
        log: UnifiedLog,
    ) -> Self {
        let hw = log.log_end_offset();
        let mut log = log;
        if let Err(e) = log.maybe_assign_epoch_start_offset(0) {
            // The cache is derived data; a failed checkpoint write costs a rebuild later.
            tracing::warn!(%topic, partition = index, error = %e, "could not persist the leader epoch cache");
        }
        Partition {
            topic,
            topic_id,
            index,
            node_id,
            log: Mutex::new(log),
            high_watermark: AtomicI64::new(hw),
            leader_epoch: AtomicI32::new(0),
            min_insync_replicas: AtomicI32::new(min_insync_replicas),
            waiters: Mutex::new(Vec::new()),
        }
    }

    /// The node leading this partition.
    pub fn leader_id(&self) -> i32 {
        self.node_id
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    /// The replicas and the in-sync replicas (one node for now).
    pub fn isr(&self) -> Vec<i32> {
        vec![self.node_id]
    }

    /// The high watermark, read without the lock.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// Log start offset and log end offset.
    pub fn offsets(&self) -> (i64, i64) {
        let log = self.log.lock();
        (log.log_start_offset(), log.log_end_offset())
    }

    /// Checks a client's view of the leader epoch (`-1` means "not known").
    pub fn check_leader_epoch(&self, requested: i32) -> Result<(), PartitionError> {
        let current = self.leader_epoch();
        if requested < 0 || requested == current {
            Ok(())
        } else if requested < current {
            Err(PartitionError::FencedLeaderEpoch { requested, current })
        } else {
            Err(PartitionError::UnknownLeaderEpoch { requested, current })
        }
    }

    /// Appends one produce batch as leader. `required_acks == -1` enforces min.insync.replicas
    /// before the append, as Kafka does.
    pub fn append_records_to_leader(
        &self,
        records: Bytes,
        required_acks: i16,
        now_ms: i64,
    ) -> Result<LogAppendInfo, PartitionError> {
        let isr = self.isr().len();
        let min_insync_replicas = self.min_insync_replicas.load(Ordering::Acquire);
        if required_acks == -1 && (isr as i32) < min_insync_replicas {
            return Err(PartitionError::NotEnoughReplicas {
                isr,
                min_isr: min_insync_replicas,
            });
        }
        let info = {
            let mut log = self.log.lock();
            let info = log.append_as_leader(records, self.leader_epoch(), now_ms)?;
            // Single node: the ISR is this node alone, so everything appended is committed.
            let leo = log.log_end_offset();
            assert!(
                log.log_start_offset() <= leo,
                "log start offset beyond log end offset"
            );
            self.high_watermark.store(leo, Ordering::Release);
            info
        };
        if !info.duplicate {
            self.wake_fetchers();
        }
        Ok(info)
    }

    /// Locates up to `max_bytes` from `fetch_offset`, bounded by the high watermark.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_message: bool,
    ) -> Result<PartitionRead, PartitionError> {
        let log = self.log.lock();
        let hw = self.high_watermark();
        let slice = log.read(fetch_offset, max_bytes, hw, min_one_message)?;
        Ok(PartitionRead {
            slice,
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: log.log_start_offset(),
        })
    }

    /// The end offset of a leader epoch, and the largest epoch at or below it.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.log.lock().end_offset_for_epoch(epoch)
    }

    /// The first offset whose timestamp is at or after `timestamp_ms`.
    pub fn offset_for_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, i64)>, PartitionError> {
        Ok(self.log.lock().fetch_offset_by_timestamp(timestamp_ms)?)
    }

    /// The record with the largest timestamp.
    pub fn max_timestamp(&self) -> Result<Option<(i64, i64)>, PartitionError> {
        Ok(self.log.lock().max_timestamp_and_offset()?)
    }

    /// Applies new topic configs to the log.
    pub fn update_config(&self, config: LogConfig, min_insync_replicas: i32) {
        self.min_insync_replicas
            .store(min_insync_replicas, Ordering::Release);
        self.log.lock().set_config(config);
    }

    /// Runs retention; returns how many segments were deleted.
    pub fn delete_old_segments(&self, now_ms: i64) -> Result<usize, PartitionError> {
        Ok(self.log.lock().delete_old_segments(now_ms)?)
    }

    /// Forgets producers idle for longer than `expiration_ms`.
    pub fn remove_expired_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.log
            .lock()
            .remove_expired_producers(now_ms, expiration_ms)
    }

    /// Flushes and closes the log (clean shutdown).
    pub fn close(&self) -> Result<(), PartitionError> {
        Ok(self.log.lock().close()?)
    }

    /// Parks a fetch on this partition until the next append.
    pub fn park_fetch(&self, waiter: &Arc<Notify>) {
        let mut w = self.waiters.lock();
        if w.len() >= MAX_PARKED_FETCHES_PER_PARTITION {
            let half = w.len() / 2;
            for old in w.drain(..half) {
                old.notify_one();
            }
        }
        w.push(waiter.clone());
    }

    fn wake_fetchers(&self) {
        let waiters = std::mem::take(&mut *self.waiters.lock());
        for w in waiters {
            // notify_one stores a permit if the fetch has not started waiting yet, so a wake
            // between "check for data" and "await" is never lost.
            w.notify_one();
        }
    }

    /// Deletes the partition's directory. The caller has already made the partition
    /// unreachable; readers still holding a segment file keep reading the unlinked inode.
    pub fn delete_dir(&self) -> std::io::Result<()> {
        let log = self.log.lock();
        let dir = log.dir().to_path_buf();
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Rename first, as Kafka does, so a crash mid-delete never leaves a half-deleted
        // directory that start-up would mistake for a live partition.
        let doomed = dir.with_file_name(format!("{name}.{}-delete", Uuid::new_v4().simple()));
        std::fs::rename(&dir, &doomed)?;
        std::fs::remove_dir_all(&doomed)
    }
}
