//! The log cleaner's threads and bookkeeping (Kafka's `LogCleaner`, its `CleanerThread`s and
//! `LogCleanerManager`): which compacted log to clean next, one at a time per log, and the
//! `cleaner-offset-checkpoint` file of the log directory.
//!
//! Each of `log.cleaner.threads` threads loops: take the dirtiest compacted log that is due
//! (dirty ratio above `min.cleanable.dirty.ratio`, or a segment past
//! `max.compaction.lag.ms`) and not being cleaned by another thread, clean it
//! ([`brook_storage::cleaner::Cleaner`]), checkpoint where it got to; sleep
//! `log.cleaner.backoff.ms` when nothing is due. Every replica's log is cleaned, leader or
//! follower, as in Kafka. The partition lock is taken to look at the log and to swap a
//! cleaned segment in, never while segment files are read or written.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::partition::Partition;
use super::replica_manager::{now_ms, ReplicaManager};
use crate::config::LogCleanerConfig;
use crate::fault::{CrashPoint, FaultEngine};
use brook_storage::checkpoint::{self, OffsetMap};
use brook_storage::cleaner::{
    cleanable_offsets, CleanContext, CleanOutcome, CleanedGroup, Cleaner, CleanerView, LogToClean,
    CLEANER_OFFSET_CHECKPOINT,
};
use brook_storage::LogError;

/// The offset map of one thread is at most this, whatever the dedupe buffer (Kafka caps a
/// thread's share at `Int.MaxValue` bytes).
pub const DEDUPE_BUFFER_PER_THREAD_BYTES_MAX: u64 = i32::MAX as u64;

/// The cleaner of one log directory.
pub struct LogCleaner {
    config: LogCleanerConfig,
    replicas: Arc<ReplicaManager>,
    faults: Arc<FaultEngine>,
    /// Partitions a thread is cleaning (Kafka's `inProgress`).
    in_progress: Mutex<HashSet<(String, i32)>>,
    /// Partitions whose clean panicked: skipped until restart (Kafka's uncleanable
    /// partitions), so that one bad log does not stop the thread cleaning the others.
    uncleanable: Mutex<HashSet<(String, i32)>>,
    /// The first dirty offset per partition, as in `cleaner-offset-checkpoint`.
    checkpoints: Mutex<OffsetMap>,
    stop: AtomicBool,
    /// Wakes sleeping threads at shutdown.
    wake: (Mutex<()>, Condvar),
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// A log picked for cleaning.
struct Picked {
    partition: Arc<Partition>,
    view: CleanerView,
    ltc: LogToClean,
}

impl LogCleaner {
    /// Reads the checkpoint and starts the threads (none when `log.cleaner.enable` is false).
    pub fn start(replicas: Arc<ReplicaManager>, faults: Arc<FaultEngine>) -> Arc<LogCleaner> {
        let config = replicas.config.log_cleaner;
        let checkpoints =
            checkpoint::read_offsets(&replicas.config.log_dir, CLEANER_OFFSET_CHECKPOINT)
                .unwrap_or_else(|e| {
                    // A lost checkpoint costs a clean from the log start, nothing else.
                    tracing::warn!(error = %e, "ignoring a damaged cleaner checkpoint");
                    OffsetMap::new()
                });
        let cleaner = Arc::new(LogCleaner {
            config,
            replicas,
            faults,
            in_progress: Mutex::new(HashSet::new()),
            uncleanable: Mutex::new(HashSet::new()),
            checkpoints: Mutex::new(checkpoints),
            stop: AtomicBool::new(false),
            wake: (Mutex::new(()), Condvar::new()),
            threads: Mutex::new(Vec::new()),
        });
        let threads = if config.enable { config.threads } else { 0 };
        for id in 0..threads {
            let c = Arc::clone(&cleaner);
            let spawned = std::thread::Builder::new()
                .name(format!("log-cleaner-{id}"))
                .spawn(move || c.run());
            match spawned {
                Ok(h) => cleaner.threads.lock().push(h),
                Err(e) => tracing::error!(error = %e, "could not start a log cleaner thread"),
            }
        }
        cleaner
    }

    /// Stops the threads: a clean in progress stops at its next batch and leaves its
    /// `.cleaned` files behind for deletion; then waits for them.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        {
            let _g = self.wake.0.lock();
            self.wake.1.notify_all();
        }
        for h in std::mem::take(&mut *self.threads.lock()) {
            let _ = h.join();
        }
    }

    /// The checkpointed first dirty offset of a partition.
    pub fn checkpoint_of(&self, topic: &str, partition: i32) -> Option<i64> {
        self.checkpoints
            .lock()
            .get(&(topic.to_string(), partition))
            .copied()
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Kafka's `CleanerThread.doWork`.
    fn run(&self) {
        let threads = self.config.threads.max(1) as u64;
        let share =
            (self.config.dedupe_buffer_bytes / threads).min(DEDUPE_BUFFER_PER_THREAD_BYTES_MAX);
        let mut cleaner = Cleaner::new(share as usize);
        while !self.stopped() {
            if !self.clean_filthiest(&mut cleaner) {
                let mut g = self.wake.0.lock();
                if !self.stopped() {
                    self.wake
                        .1
                        .wait_for(&mut g, Duration::from_millis(self.config.backoff_ms));
                }
            }
        }
    }

    /// Cleans the dirtiest due log, if any; true if one was cleaned.
    pub fn clean_filthiest(&self, cleaner: &mut Cleaner) -> bool {
        let now = now_ms();
        let Some(picked) = self.grab_filthiest(now) else {
            return false;
        };
        let key = (picked.partition.topic.clone(), picked.partition.index);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.clean_log(cleaner, &picked, now)
        }));
        match result {
            Ok(Ok(outcome)) => self.done_cleaning(&picked, &outcome),
            Ok(Err(e)) => {
                tracing::warn!(topic = %key.0, partition = key.1, error = %e, "log cleaning failed")
            }
            Err(_) => {
                tracing::error!(topic = %key.0, partition = key.1, "log cleaning panicked; the partition is no longer cleaned");
                self.uncleanable.lock().insert(key.clone());
            }
        }
        self.in_progress.lock().remove(&key);
        true
    }

    /// Kafka's `grabFilthiestCompactedLog`: the due log with the largest dirty ratio, marked
    /// in progress.
    fn grab_filthiest(&self, now: i64) -> Option<Picked> {
        let mut best: Option<Picked> = None;
        for p in self.replicas.all_partitions() {
            let key = (p.topic.clone(), p.index);
            let skipped =
                self.in_progress.lock().contains(&key) || self.uncleanable.lock().contains(&key);
            if skipped || !p.is_compacted() {
                continue;
            }
            let view = p.cleaner_view();
            let ltc = cleanable_offsets(&view, self.checkpoint_of(&key.0, key.1), now);
            if ltc.force_update_checkpoint {
                self.update_checkpoint(&key, ltc.first_dirty_offset);
            }
            let due = ltc.is_due(view.config.min_cleanable_dirty_ratio);
            if due
                && best
                    .as_ref()
                    .is_none_or(|b| ltc.cleanable_ratio() > b.ltc.cleanable_ratio())
            {
                best = Some(Picked {
                    partition: p,
                    view,
                    ltc,
                });
            }
        }
        let picked = best?;
        let key = (picked.partition.topic.clone(), picked.partition.index);
        // Another thread may have taken it since the look above.
        self.in_progress.lock().insert(key).then_some(picked)
    }

    /// One clean, with the crash points around the swap.
    fn clean_log(
        &self,
        cleaner: &mut Cleaner,
        picked: &Picked,
        now: i64,
    ) -> Result<CleanOutcome, LogError> {
        let p = &picked.partition;
        let stop = || self.stopped();
        let mut swap = |group: &CleanedGroup| -> Result<bool, LogError> {
            self.faults
                .crash_point(CrashPoint::CleanerAfterCleaned, &p.topic, p.index);
            let after_swap = || {
                self.faults
                    .crash_point(CrashPoint::CleanerAfterSwap, &p.topic, p.index)
            };
            p.replace_cleaned_segments(group, &after_swap)
                .map_err(|e| LogError::Io(std::io::Error::other(e.to_string())))
        };
        let mut ctx = CleanContext {
            stop: &stop,
            swap: &mut swap,
        };
        cleaner.clean(&picked.view, &picked.ltc, now, &mut ctx)
    }

    /// Kafka's `doneCleaning`: checkpoints where the clean got to.
    fn done_cleaning(&self, picked: &Picked, outcome: &CleanOutcome) {
        let p = &picked.partition;
        tracing::info!(
            topic = %p.topic,
            partition = p.index,
            from = picked.ltc.first_dirty_offset,
            to = outcome.next_dirty_offset,
            completed = outcome.completed,
            read_bytes = outcome.stats.bytes_read,
            written_bytes = outcome.stats.bytes_written,
            segments = outcome.stats.segments_swapped,
            "log cleaned"
        );
        if outcome.completed {
            self.update_checkpoint(&(p.topic.clone(), p.index), outcome.next_dirty_offset);
        }
    }

    /// Sets one partition's entry and rewrites the file, without the partitions this node no
    /// longer has (Kafka's `updateCheckpoints`).
    fn update_checkpoint(&self, key: &(String, i32), offset: i64) {
        let mut cps = self.checkpoints.lock();
        cps.insert(key.clone(), offset);
        let live: HashSet<(String, i32)> = self
            .replicas
            .all_partitions()
            .iter()
            .map(|p| (p.topic.clone(), p.index))
            .collect();
        cps.retain(|k, _| live.contains(k));
        let dir = &self.replicas.config.log_dir;
        if let Err(e) = checkpoint::write_offsets(dir, CLEANER_OFFSET_CHECKPOINT, &cps) {
            tracing::warn!(error = %e, "could not write the cleaner checkpoint");
        }
    }
}
