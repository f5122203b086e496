//! One partition's log (Kafka's `UnifiedLog` and `LocalLog`): segments, offsets, roll,
//! retention, truncation, and the append paths for leaders, coordinators and followers.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::batch::{self, RecordBatch, HEADER_LEN};
use super::cleaner::{CleanedGroup, CleanerView, LastRecord, SegmentView};
use super::control::{parse_end_txn_marker, EndTxnMarker};
use super::decompress::BatchRecords;
use super::leader_epoch::LeaderEpochCache;
use super::loader::{
    self, apply_to_producer_state, fsync_dir, LogCheckpoints, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX,
};
use super::producer_state::{ProducerStateManager, SequenceCheck};
use super::records::{read_record, RecordBytes, RecordSink};
use super::segment::{rename_segment_files, AppendedBatch, LogSegment};
use super::txn_index::AbortedTxn;
use super::validator::{validate_produce, AppendOrigin, ValidatedBatch};
use super::verification::VerificationGuard;
use super::{
    DuplicateBatch, FetchSlice, LogAppendInfo, LogConfig, LogError, TimestampType,
    FETCH_SLICE_MAX_BYTES,
};

/// Batches up to this size are copied into a scratch buffer with their patched header and
/// written with one syscall; larger ones are written as header + untouched body (two syscalls,
/// no copy).
pub const SINGLE_WRITE_MAX_BYTES: usize = 64 * 1024;

/// One partition's log.
pub struct UnifiedLog {
    dir: PathBuf,
    config: LogConfig,
    /// Segments by base offset. Never empty; the last one is the active segment.
    segments: BTreeMap<i64, LogSegment>,
    /// The earliest offset a client may read. Invariant: first segment base <= log_start_offset
    /// <= log_end_offset. Moves forward only (retention, DeleteRecords) except on full truncation.
    log_start_offset: i64,
    /// The offset the next appended record gets. Offsets below it are dense and increasing.
    log_end_offset: i64,
    /// Everything below this offset was fsynced; recovery after a crash starts at its segment.
    /// Segments a roll finished stay above it until their [`RollFlush`] completes (Kafka's
    /// roll schedules that flush too), so a crash may leave several to recover.
    recovery_point: i64,
    /// Truncations so far: a [`RollFlush`] taken before one no longer speaks for the log.
    truncations: u64,
    /// Idempotence state as of `log_end_offset`.
    producer_state: ProducerStateManager,
    /// Which leader epoch started at which offset, for follower truncation.
    leader_epochs: LeaderEpochCache,
    /// Reused buffer for small batches (patched header + body).
    scratch: Vec<u8>,
    /// Messages appended since the last fsync (flush.messages).
    unflushed_messages: u64,
    /// Set when an fsync failed: Linux may have dropped the dirty pages, so the log refuses
    /// further writes instead of pretending (Kafka marks the log dir offline).
    failed: bool,
}

fn failed_error() -> LogError {
    LogError::Io(std::io::Error::other(
        "log is offline after an fsync failure",
    ))
}

impl UnifiedLog {
    /// Opens the log in `dir` (created if missing) without checkpointed offsets: an unclean
    /// shutdown recovers every segment.
    pub fn open(
        dir: PathBuf,
        config: LogConfig,
        had_clean_shutdown: bool,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        Self::open_at(
            dir,
            config,
            had_clean_shutdown,
            LogCheckpoints::default(),
            now_ms,
        )
    }

    /// Opens the log in `dir` (created if missing), recovering it from its recovery point when
    /// the last shutdown was not clean. The clean-shutdown marker and the log directory's
    /// checkpoints belong to the caller (Kafka's `LogManager`).
    pub fn open_at(
        dir: PathBuf,
        config: LogConfig,
        had_clean_shutdown: bool,
        checkpoints: LogCheckpoints,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        let loaded = loader::load(&dir, &config, had_clean_shutdown, checkpoints, now_ms)?;
        let leader_epochs = load_leader_epochs(
            &dir,
            &loaded.segments,
            loaded.log_start_offset,
            loaded.log_end_offset,
        )?;
        let log = UnifiedLog {
            dir,
            config,
            segments: loaded.segments,
            log_start_offset: loaded.log_start_offset,
            log_end_offset: loaded.log_end_offset,
            recovery_point: loaded.recovery_point,
            producer_state: loaded.producer_state,
            leader_epochs,
            scratch: Vec::new(),
            unflushed_messages: 0,
            failed: false,
            truncations: 0,
        };
        log.check_invariants();
        Ok(log)
    }

    /// The log's shape after every append, truncation and segment change, checked in release
    /// builds too (a few comparisons; `benches/RESULTS.md` has their cost): a violation is a
    /// bug that would otherwise serve or replicate wrong offsets, so the broker stops.
    fn check_invariants(&self) {
        assert!(
            self.log_start_offset <= self.log_end_offset,
            "log start {} > log end {}",
            self.log_start_offset,
            self.log_end_offset
        );
        let first_base = self.segments.keys().next().copied();
        assert!(
            first_base.is_some_and(|b| b <= self.log_start_offset),
            "first segment {first_base:?} starts above the log start {}",
            self.log_start_offset
        );
        assert_eq!(
            self.active().next_offset(),
            self.log_end_offset,
            "the active segment's end is the log end offset"
        );
    }

    /// The latest leader epoch written to this log, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.leader_epochs.latest_epoch()
    }

    /// Records that `epoch` starts at the log end offset, as a partition does when it becomes
    /// leader, so that OffsetForLeaderEpoch and ListOffsets know the epoch before any batch
    /// of it is written.
    pub fn maybe_assign_epoch_start_offset(&mut self, epoch: i32) -> Result<(), LogError> {
        if self.leader_epochs.assign(epoch, self.log_end_offset) {
            self.leader_epochs.persist()?;
        }
        Ok(())
    }

    /// The end offset of `epoch` and the largest epoch at or below it (OffsetForLeaderEpoch).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.leader_epochs
            .end_offset_for(epoch, self.log_end_offset)
    }

    /// The leader epoch `offset` was written in, from the leader epoch cache (ListOffsets).
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.leader_epochs.epoch_for_offset(offset)
    }

    /// The leader epoch cache's entries (epoch, start offset), oldest first.
    pub fn leader_epoch_entries(&self) -> &[super::leader_epoch::EpochEntry] {
        self.leader_epochs.entries()
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The current config.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// Replaces the config (topic config change); applies to the next append/roll/retention.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }
    /// The earliest readable offset.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    /// The offset of the next appended record.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }
    /// Everything below this offset is known to be on disk.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    /// Producer idempotence state (for admin views and the last stable offset).
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producer_state
    }
    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }
    /// Total bytes in all `.log` files.
    pub fn size_in_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size()).sum()
    }

    fn active(&self) -> &LogSegment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has an active segment")
    }
    fn active_mut(&mut self) -> &mut LogSegment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has an active segment")
    }
    fn check_usable(&self) -> Result<(), LogError> {
        if self.failed {
            return Err(failed_error());
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Appends
    // -----------------------------------------------------------------------------------------

    /// Validates a producer's batch (one batch, Kafka's v2 rules), checks idempotence, assigns
    /// offsets and writes it. A retry of one of the producer's last five batches returns the
    /// original offsets with `duplicate` set to what it repeated, and writes nothing.
    pub fn append_as_leader(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LogAppendInfo, LogError> {
        self.append_with_origin(
            &records,
            leader_epoch,
            now_ms,
            AppendOrigin::Client,
            None,
            0,
        )
    }

    /// [`Self::append_as_leader`] for an append subject to KIP-890 verification, carrying the
    /// guard [`Self::maybe_start_transaction_verification`] gave (the sentinel where it gave
    /// none, or the request never verified). A transactional batch outside an ongoing
    /// transaction is refused with INVALID_TXN_STATE unless the guard is still the producer's
    /// (Kafka's `UnifiedLog.appendAsLeader` with `requestVerificationGuard`).
    pub fn append_as_leader_verified(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
        now_ms: i64,
        guard: VerificationGuard,
    ) -> Result<LogAppendInfo, LogError> {
        let origin = AppendOrigin::Client;
        self.append_with_origin(&records, leader_epoch, now_ms, origin, Some(guard), 0)
    }

    /// Before a leader asks the transaction coordinator about a producer's transactional
    /// batch (Kafka's `UnifiedLog.maybeStartTransactionVerification`): an epoch older than
    /// the producer's is refused at once; inside an ongoing transaction of this epoch there is
    /// nothing to verify (the sentinel); otherwise the producer's verification entry is
    /// created or joined, and its guard returned for the append to carry.
    /// `supports_epoch_bump`: the request is of transaction version 2 (Produce v12+).
    pub fn maybe_start_transaction_verification(
        &mut self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
        supports_epoch_bump: bool,
        now_ms: i64,
    ) -> Result<VerificationGuard, LogError> {
        if let Some(e) = self.producer_state.get(producer_id) {
            if epoch < e.producer_epoch {
                return Err(LogError::InvalidProducerEpoch(format!(
                    "producer {producer_id} epoch {epoch} is older than the current epoch {}",
                    e.producer_epoch
                )));
            }
        }
        if self
            .producer_state
            .has_ongoing_transaction(producer_id, epoch)
        {
            return Ok(VerificationGuard::SENTINEL);
        }
        Ok(self.producer_state.maybe_create_verification_state_entry(
            producer_id,
            sequence,
            epoch,
            supports_epoch_bump,
            now_ms,
        ))
    }

    /// Like [`Self::append_as_leader`] for the broker's own coordinators: control batches
    /// (transaction markers) are allowed and sequences are not checked, only epochs.
    pub fn append_as_coordinator(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
        now_ms: i64,
        marker_transaction_version: i8,
    ) -> Result<LogAppendInfo, LogError> {
        self.append_with_origin(
            &records,
            leader_epoch,
            now_ms,
            AppendOrigin::Coordinator,
            None,
            marker_transaction_version,
        )
    }

    /// `marker_transaction_version`: the transaction version a coordinator's marker was sent
    /// with (WriteTxnMarkers v2; 0 for anything else), which decides its epoch check.
    fn append_with_origin(
        &mut self,
        records: &[u8],
        leader_epoch: i32,
        now_ms: i64,
        origin: AppendOrigin,
        verification: Option<VerificationGuard>,
        marker_transaction_version: i8,
    ) -> Result<LogAppendInfo, LogError> {
        self.check_usable()?;
        let v = validate_produce(records, &self.config, now_ms, origin)?;
        let log_append_time = self.config.message_timestamp_type == TimestampType::LogAppendTime;
        let mut marker = None;
        if v.producer_id >= 0 && !v.is_control {
            let check = self.producer_state.check(
                v.producer_id,
                v.producer_epoch,
                v.base_sequence,
                v.last_sequence,
                v.is_transactional,
                origin,
                verification,
            )?;
            if let SequenceCheck::Duplicate(b) = check {
                return Ok(LogAppendInfo {
                    first_offset: b.first_offset,
                    last_offset: b.last_offset(),
                    log_append_time_ms: if log_append_time { b.timestamp } else { -1 },
                    log_start_offset: self.log_start_offset,
                    duplicate: Some(DuplicateBatch {
                        producer_id: v.producer_id,
                        producer_epoch: v.producer_epoch,
                        first_sequence: v.base_sequence,
                        last_sequence: v.last_sequence,
                        first_offset: b.first_offset,
                    }),
                    record_count: b.last_offset_delta as i64 + 1,
                });
            }
        } else if v.is_control {
            // Only coordinators get here (validation refuses clients' control batches). A
            // marker is one record, COMMIT or ABORT, of a producer (Kafka's
            // `EndTransactionMarker.deserialize` and `ProducerAppendInfo.appendEndTxnMarker`).
            let (parsed, _) = RecordBatch::parse(records)?;
            let m = parse_end_txn_marker(&parsed)?.ok_or_else(|| {
                LogError::InvalidRecord("a control batch must hold a COMMIT or ABORT marker".into())
            })?;
            if v.producer_id < 0 || v.record_count != 1 {
                return Err(LogError::InvalidRecord(
                    "a transaction marker is one record of a producer".into(),
                ));
            }
            self.producer_state.check_marker(
                v.producer_id,
                v.producer_epoch,
                m.coordinator_epoch,
                marker_transaction_version,
            )?;
            marker = Some(m);
        }
        self.write_validated(records, &v, marker, leader_epoch, now_ms, log_append_time)
    }

    /// Offset assignment and the write, for a batch that passed validation and producer checks.
    fn write_validated(
        &mut self,
        records: &[u8],
        v: &ValidatedBatch,
        marker: Option<EndTxnMarker>,
        leader_epoch: i32,
        now_ms: i64,
        log_append_time: bool,
    ) -> Result<LogAppendInfo, LogError> {
        let first_offset = self.log_end_offset;
        let last_offset = first_offset + v.record_count as i64 - 1;
        let max_timestamp = if log_append_time {
            now_ms
        } else {
            v.max_timestamp
        };
        self.maybe_roll(v.size, max_timestamp, last_offset, now_ms)?;
        let append_time_ms = log_append_time.then_some(now_ms);
        let header =
            assign_offsets_in_header(records, v, first_offset, leader_epoch, append_time_ms);
        let info = AppendedBatch {
            last_offset,
            max_timestamp,
        };
        self.write_patched(&header, &records[HEADER_LEN..], info)?;
        self.log_end_offset = last_offset + 1;
        if self.leader_epochs.assign(leader_epoch, first_offset) {
            self.leader_epochs.persist()?;
        }
        self.update_producer_state(v, marker, first_offset, last_offset, max_timestamp)?;
        self.producer_state.advance_to(self.log_end_offset);
        self.after_append(v.record_count as u64)?;
        self.check_invariants();
        Ok(LogAppendInfo {
            first_offset,
            last_offset,
            log_append_time_ms: if log_append_time { now_ms } else { -1 },
            log_start_offset: self.log_start_offset,
            duplicate: None,
            record_count: v.record_count as i64,
        })
    }

    /// Writes a batch whose header was patched to the active segment: in one write, through
    /// the reused scratch buffer, when it is at most [`SINGLE_WRITE_MAX_BYTES`], else header
    /// and body as two parts.
    fn write_patched(
        &mut self,
        header: &[u8; HEADER_LEN],
        body: &[u8],
        info: AppendedBatch,
    ) -> Result<(), LogError> {
        if HEADER_LEN + body.len() > SINGLE_WRITE_MAX_BYTES {
            return Ok(self.active_mut().append_parts(header, body, info)?);
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.extend_from_slice(header);
        scratch.extend_from_slice(body);
        debug_assert!(
            RecordBatch::parse(&scratch)
                .map(|(b, _)| b.is_crc_valid())
                .unwrap_or(false),
            "CRC must hold after patching"
        );
        let r = self.active_mut().append(&scratch, info);
        self.scratch = scratch;
        Ok(r?)
    }

    /// The producer state after a written batch (Kafka's `ProducerAppendInfo.append` and
    /// `appendEndTxnMarker`): a marker completes its producer's transaction, and an aborted
    /// one goes to the `.txnindex`; a producer's batch moves its sequence and epoch.
    fn update_producer_state(
        &mut self,
        v: &ValidatedBatch,
        marker: Option<EndTxnMarker>,
        first_offset: i64,
        last_offset: i64,
        max_timestamp: i64,
    ) -> Result<(), LogError> {
        if let Some(marker) = marker {
            let completed = self.producer_state.append_marker(
                v.producer_id,
                v.producer_epoch,
                marker,
                first_offset,
                max_timestamp,
            );
            self.index_aborted(completed)?;
        } else if v.producer_id >= 0 {
            self.producer_state.update(
                v.producer_id,
                v.producer_epoch,
                v.base_sequence,
                v.last_sequence,
                first_offset,
                last_offset,
                max_timestamp,
                v.is_transactional,
            );
        }
        Ok(())
    }

    /// Appends batches copied from the leader. They already carry offsets and leader epochs and
    /// are written unchanged after a CRC check; none may start below the end of what precedes
    /// it (gaps are a compacted leader's). Producer state is updated without sequence checks.
    pub fn append_as_follower(&mut self, records: Bytes) -> Result<LogAppendInfo, LogError> {
        self.check_usable()?;
        // Validate the whole set first so that a bad batch in the middle writes nothing.
        let record_count = self.check_follower_batches(&records)?;
        let first_offset = self.log_end_offset;
        if records.is_empty() {
            return Ok(LogAppendInfo {
                first_offset,
                last_offset: first_offset - 1,
                log_append_time_ms: -1,
                log_start_offset: self.log_start_offset,
                duplicate: None,
                record_count: 0,
            });
        }
        self.write_follower_batches(&records)?;
        self.producer_state.advance_to(self.log_end_offset);
        self.after_append(record_count as u64)?;
        self.check_invariants();
        Ok(LogAppendInfo {
            first_offset,
            last_offset: self.log_end_offset - 1,
            log_append_time_ms: -1,
            log_start_offset: self.log_start_offset,
            duplicate: None,
            record_count,
        })
    }

    /// Checks every batch a follower is about to append (CRC, offsets not going back) and
    /// returns their record count.
    fn check_follower_batches(&self, records: &[u8]) -> Result<i64, LogError> {
        let mut pos = 0;
        let mut expected = self.log_end_offset;
        let mut record_count = 0i64;
        while pos < records.len() {
            let (b, size) = RecordBatch::parse(&records[pos..])?;
            let h = b.header();
            if !b.is_crc_valid() {
                return Err(LogError::CorruptMessage(format!(
                    "batch at offset {} fails its CRC",
                    h.base_offset()
                )));
            }
            // A gap is a cleaned leader's log (compaction removes batches); going back is not
            // allowed (Kafka's `UnexpectedAppendOffsetException`).
            if h.base_offset() < expected || h.last_offset_delta() < 0 {
                return Err(LogError::UnexpectedAppendOffset {
                    expected,
                    actual: h.base_offset(),
                });
            }
            expected = h.next_offset();
            record_count += h.last_offset_delta() as i64 + 1;
            pos += size;
        }
        Ok(record_count)
    }

    /// Writes checked follower batches as they are, moving the log end offset, the leader
    /// epoch cache and the producer state batch by batch.
    fn write_follower_batches(&mut self, records: &[u8]) -> Result<(), LogError> {
        let mut pos = 0;
        let mut epochs_changed = false;
        while pos < records.len() {
            let (b, size) = RecordBatch::parse(&records[pos..])?;
            let h = b.header();
            self.maybe_roll(size, h.max_timestamp(), h.last_offset(), i64::MIN)?;
            self.active_mut().append(
                b.bytes(),
                AppendedBatch {
                    last_offset: h.last_offset(),
                    max_timestamp: h.max_timestamp(),
                },
            )?;
            self.log_end_offset = h.next_offset();
            epochs_changed |= self
                .leader_epochs
                .assign(h.partition_leader_epoch(), h.base_offset());
            let completed = apply_to_producer_state(&mut self.producer_state, &b);
            self.index_aborted(completed)?;
            pos += size;
        }
        if epochs_changed {
            self.leader_epochs.persist()?;
        }
        Ok(())
    }

    /// Appends an aborted transaction to the active segment's `.txnindex`: the segment the
    /// ABORT marker was just written to (Kafka's `LogSegment.updateTxnIndex`).
    fn index_aborted(&mut self, completed: Option<super::CompletedTxn>) -> Result<(), LogError> {
        let Some(txn) = completed.filter(|t| t.is_aborted) else {
            return Ok(());
        };
        if let Err(e) = self.active_mut().txn_index_mut().append(txn.aborted_txn()) {
            // The producer state already moved on: the log must not take more writes.
            self.failed = true;
            return Err(e.into());
        }
        Ok(())
    }

    fn after_append(&mut self, messages: u64) -> Result<(), LogError> {
        self.unflushed_messages += messages;
        if self.unflushed_messages >= self.config.flush_interval_messages {
            self.flush()?;
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Roll
    // -----------------------------------------------------------------------------------------

    /// `now_ms == i64::MIN` (followers) disables the segment.ms check based on wall time.
    fn maybe_roll(
        &mut self,
        batch_size: usize,
        max_timestamp: i64,
        last_offset: i64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let c = &self.config;
        let should = self.active().should_roll(
            batch_size,
            max_timestamp,
            last_offset,
            c.segment_bytes,
            c.segment_ms,
            now_ms.max(0),
        );
        if should {
            self.roll(now_ms.max(0))?;
        }
        Ok(())
    }

    /// Starts a new active segment at the log end offset and snapshots producer state there.
    pub fn roll(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.check_usable()?;
        let new_base = self.log_end_offset;
        if self.active().base_offset() == new_base {
            // The active segment is empty already; nothing to roll.
            return Ok(());
        }
        self.active_mut().on_become_inactive()?;
        let seg = LogSegment::create(
            &self.dir,
            new_base,
            self.config.index_interval_bytes,
            self.config.segment_index_bytes,
            now_ms,
        )?;
        self.segments.insert(new_base, seg);
        self.sync_dir()?;
        self.producer_state.advance_to(new_base);
        self.producer_state.write_snapshot(&self.dir, false)?;
        // The finished segment is not fsynced here, under the caller's lock: a full segment
        // takes about half a second, which every produce to the partition would wait out.
        // Kafka's `UnifiedLog.roll` schedules `flushUptoOffsetExclusive(newSegment.baseOffset)`
        // instead; here the owner asks `roll_flush` and runs it outside its lock. Until it
        // completes the recovery point stays below the finished segment, and the loader
        // recovers every segment above the recovery point.
        self.check_invariants();
        Ok(())
    }

    /// Whether a roll left segments below the active one unflushed (see [`RollFlush`]).
    pub fn roll_flush_pending(&self) -> bool {
        self.recovery_point < self.active().base_offset()
    }

    /// The fsync of every segment below the active one that holds data at or above the
    /// recovery point, to run without the log (Kafka's `UnifiedLog.flush` fsyncs outside the
    /// log's lock and then takes it to move the recovery point). `None` if nothing is pending.
    pub fn roll_flush(&self) -> Result<Option<RollFlush>, LogError> {
        self.check_usable()?;
        let upto = self.active().base_offset();
        let rp = self.recovery_point;
        if upto <= rp {
            return Ok(None);
        }
        let mut files = Vec::new();
        for seg in self.unflushed_segments_below(upto) {
            files.extend(seg.sync_handles()?);
        }
        Ok(Some(RollFlush {
            upto,
            truncations: self.truncations,
            files,
        }))
    }

    /// Records a [`RollFlush`]'s outcome: the recovery point moves up to its end, unless the
    /// log was truncated since it was taken (the offsets it covered may hold other records
    /// now; Kafka's `LocalLog.markFlushed` only compares offsets). A failed fsync fails the
    /// log, as a failed flush does.
    pub fn complete_roll_flush(
        &mut self,
        flush: &RollFlush,
        synced: std::io::Result<()>,
    ) -> Result<(), LogError> {
        if let Err(e) = synced {
            self.failed = true;
            return Err(e.into());
        }
        if flush.truncations == self.truncations && flush.upto > self.recovery_point {
            self.recovery_point = flush.upto.min(self.log_end_offset);
        }
        Ok(())
    }

    fn sync_dir(&mut self) -> Result<(), LogError> {
        if let Err(e) = fsync_dir(&self.dir) {
            self.failed = true;
            return Err(e.into());
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Transactions: the last stable offset and the aborted transactions
    // -----------------------------------------------------------------------------------------

    /// The earliest offset not yet stable, never below the log start offset (Kafka's
    /// `UnifiedLog.firstUnstableOffset`); `None` when every transaction has ended and its
    /// marker is below the high watermark.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producer_state
            .first_unstable_offset()
            .map(|o| o.max(self.log_start_offset))
    }

    /// The last stable offset for a high watermark (Kafka's `UnifiedLog.lastStableOffset`):
    /// the first unstable offset if below it, else the high watermark. read_committed
    /// consumers read below it. The high watermark's owner is the caller (`Partition`).
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        match self.first_unstable_offset() {
            Some(o) if o < high_watermark => o,
            _ => high_watermark,
        }
    }

    /// The high watermark moved (the partition calls this from its one writer of it): ended
    /// transactions whose marker it passed become stable (`onHighWatermarkUpdated`).
    pub fn on_high_watermark_updated(&mut self, high_watermark: i64) {
        self.producer_state
            .on_high_watermark_updated(high_watermark);
    }

    /// The aborted transactions overlapping `[start_offset, upper_bound_offset)`, from the
    /// `.txnindex` of the segment holding `start_offset` on, until an entry's last stable
    /// offset shows no later one can overlap (Kafka's `LocalLog.collectAbortedTransactions`).
    pub fn collect_aborted_transactions(
        &self,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> Vec<AbortedTxn> {
        let floor = self
            .segments
            .range(..=start_offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let mut out = Vec::new();
        for seg in self.segments.range(floor..).map(|(_, s)| s) {
            if seg
                .txn_index()
                .collect(start_offset, upper_bound_offset, &mut out)
            {
                break;
            }
        }
        out
    }

    /// Where a read from `fetch_offset` can end at most: the next segment's base offset (a
    /// read never crosses a segment) or `max_offset_exclusive`. The aborted transactions up
    /// to it cover whatever the read returns.
    pub fn read_upper_bound(&self, fetch_offset: i64, max_offset_exclusive: i64) -> i64 {
        let next_base = self
            .segments
            .range(fetch_offset + 1..)
            .next()
            .map_or(self.log_end_offset, |(b, _)| *b);
        next_base.min(max_offset_exclusive)
    }

    // -----------------------------------------------------------------------------------------
    // Reads
    // -----------------------------------------------------------------------------------------

    /// Locates the data for a fetch; the caller reads it with [`FetchSlice::read`] after
    /// releasing the partition lock. Offsets outside [log start, log end] are out of range; a
    /// fetch at the log end offset is empty; a fetch inside a batch starts at that batch.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        max_offset_exclusive: i64,
        min_one_message: bool,
    ) -> Result<FetchSlice, LogError> {
        if fetch_offset < self.log_start_offset || fetch_offset > self.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: fetch_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        if fetch_offset == self.log_end_offset || fetch_offset >= max_offset_exclusive {
            return Ok(FetchSlice::empty(max_offset_exclusive));
        }
        let floor = self
            .segments
            .range(..=fetch_offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        for seg in self.segments.range(floor..).map(|(_, s)| s) {
            // A fetch offset at the end of one segment continues in the next.
            if let Some((position, first_batch_size)) = seg.find_batch(fetch_offset)? {
                let available = (seg.size() - position) as usize;
                let wanted = if min_one_message {
                    max_bytes.max(first_batch_size)
                } else {
                    max_bytes
                };
                return Ok(FetchSlice {
                    file: Some(Arc::clone(seg.log_file())),
                    position,
                    max_len: wanted.min(available).min(FETCH_SLICE_MAX_BYTES),
                    max_offset_exclusive,
                    min_one_message,
                });
            }
        }
        Ok(FetchSlice::empty(max_offset_exclusive))
    }

    /// The first record with a timestamp >= `timestamp_ms`, as (offset, timestamp); `None` if
    /// every record is older. LogAppendTime batches give all their records the batch's
    /// maxTimestamp. Compressed batches are streamed for reading only.
    pub fn fetch_offset_by_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        for seg in self.segments.values() {
            if seg.max_timestamp_so_far().timestamp < timestamp_ms
                || seg.next_offset() <= self.log_start_offset
            {
                continue;
            }
            let mut found = None;
            let lso = self.log_start_offset;
            seg.for_each_batch_from_timestamp(timestamp_ms, |_, b| {
                let h = b.header();
                if h.max_timestamp() < timestamp_ms || h.last_offset() < lso {
                    return Ok(true);
                }
                found =
                    first_record_matching(&b, |offset, ts| offset >= lso && ts >= timestamp_ms)?;
                Ok(found.is_none())
            })?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// The record with the largest timestamp, as (timestamp, offset) (ListOffsets MAX_TIMESTAMP).
    /// Ties go to the earliest record.
    pub fn max_timestamp_and_offset(&self) -> Result<Option<(i64, i64)>, LogError> {
        let mut best: Option<&LogSegment> = None;
        for seg in self.segments.values() {
            if seg.is_empty() {
                continue;
            }
            if best.is_none_or(|b| {
                seg.max_timestamp_so_far().timestamp > b.max_timestamp_so_far().timestamp
            }) {
                best = Some(seg);
            }
        }
        let Some(seg) = best else { return Ok(None) };
        let target = seg.max_timestamp_so_far();
        let mut found = None;
        seg.for_each_batch_from(target.offset, |_, b| {
            let h = b.header();
            if h.max_timestamp() != target.timestamp {
                return Ok(true);
            }
            let first = first_record_matching(&b, |_, ts| ts == target.timestamp)?;
            // If the records cannot tell (e.g. the codec fails), the batch's last offset stands in.
            found = Some(first.map_or((target.timestamp, h.last_offset()), |(o, t)| (t, o)));
            Ok(false)
        })?;
        Ok(found.or(Some((target.timestamp, target.offset))))
    }

    // -----------------------------------------------------------------------------------------
    // Retention and truncation
    // -----------------------------------------------------------------------------------------

    /// Deletes whole segments past retention.ms or beyond retention.bytes, and segments wholly
    /// below the log start offset; advances the log start offset. Never deletes data at or above
    /// the high watermark. If the active segment is due, the log is rolled first (Kafka's rule),
    /// so the log start offset can reach the log end offset. Returns segments deleted.
    /// `high_watermark` is the partition's (its owner); the log keeps no copy.
    pub fn delete_old_segments(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
    ) -> Result<usize, LogError> {
        self.check_usable()?;
        let mut deleted = 0;
        // Time and size retention apply to `delete` logs only; a compact-only log loses only
        // what the log start offset passed (Kafka's `UnifiedLog.deleteOldSegments`).
        let delete = self.config.cleanup_policy_delete;
        let retention_ms = if delete { self.config.retention_ms } else { -1 };
        if retention_ms >= 0 {
            deleted += self.delete_segments_while(now_ms, high_watermark, |seg, _| {
                now_ms.saturating_sub(seg.largest_timestamp()) > retention_ms
            })?;
        }
        let retention_bytes = if delete {
            self.config.retention_bytes
        } else {
            -1
        };
        if retention_bytes >= 0 {
            let mut excess = self.size_in_bytes() as i64 - retention_bytes;
            deleted += self.delete_segments_while(now_ms, high_watermark, |seg, _| {
                if excess - seg.size() as i64 >= 0 {
                    excess -= seg.size() as i64;
                    true
                } else {
                    false
                }
            })?;
        }
        deleted += self.delete_log_start_offset_breached_segments(now_ms, high_watermark)?;
        Ok(deleted)
    }

    /// Deletes the segments wholly below the log start offset: those whose next segment
    /// starts at or below it (Kafka's `deleteLogStartOffsetBreachedSegments`). The active
    /// segment always stays, so this never rolls. Returns segments deleted.
    pub fn delete_log_start_offset_breached_segments(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
    ) -> Result<usize, LogError> {
        self.check_usable()?;
        let lso = self.log_start_offset;
        let active_base = self.active().base_offset();
        self.delete_segments_while(now_ms, high_watermark, |seg, upper| {
            seg.base_offset() != active_base && upper <= lso
        })
    }

    /// Deletes segments from the oldest while `predicate(segment, its upper offset bound)` holds.
    fn delete_segments_while<F>(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
        mut predicate: F,
    ) -> Result<usize, LogError>
    where
        F: FnMut(&LogSegment, i64) -> bool,
    {
        let hw = high_watermark.min(self.log_end_offset);
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        let mut doomed = Vec::new();
        for (i, &base) in bases.iter().enumerate() {
            let seg = &self.segments[&base];
            let is_last = i + 1 == bases.len();
            let upper = bases.get(i + 1).copied().unwrap_or(self.log_end_offset);
            if !predicate(seg, upper) || upper > hw || (is_last && seg.is_empty()) {
                break;
            }
            doomed.push(base);
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        if doomed.len() == bases.len() {
            self.roll(now_ms)?;
        }
        for base in &doomed {
            if let Some(seg) = self.segments.remove(base) {
                seg.delete_files()?;
            }
        }
        self.sync_dir()?;
        let first = *self
            .segments
            .keys()
            .next()
            .expect("the active segment remains");
        if first > self.log_start_offset {
            self.log_start_offset = first;
            self.producer_state.on_log_start_offset_incremented(first);
            if self.leader_epochs.truncate_from_start(first) {
                self.leader_epochs.persist()?;
            }
        }
        self.check_invariants();
        Ok(doomed.len())
    }

    // -----------------------------------------------------------------------------------------
    // Compaction: what the cleaner reads, and the swap
    // -----------------------------------------------------------------------------------------

    /// The log as the cleaner sees it (`high_watermark` is the partition's): the non-active
    /// segments' files and sizes, every aborted transaction, and each producer's last write.
    /// Short: no file is read here.
    pub fn cleaner_view(&self, high_watermark: i64) -> CleanerView {
        let active_base = self.active().base_offset();
        let segments = self
            .segments
            .range(..active_base)
            .map(|(_, s)| segment_view(s))
            .collect();
        let aborted = self
            .segments
            .values()
            .flat_map(|s| s.txn_index().entries().iter().copied())
            .collect();
        let active_producers = self
            .producer_state
            .iter()
            .map(|e| {
                let last = LastRecord {
                    last_data_offset: e.batches().last().map(|b| b.last_offset()),
                    producer_epoch: e.producer_epoch,
                };
                (e.producer_id, last)
            })
            .collect();
        CleanerView {
            dir: self.dir.clone(),
            config: self.config.clone(),
            log_start_offset: self.log_start_offset,
            active_base_offset: active_base,
            log_end_offset: self.log_end_offset,
            last_stable_offset: self.last_stable_offset(high_watermark),
            segments,
            aborted,
            active_producers,
        }
    }

    /// Swaps the cleaned segment `<base>.*.cleaned` in for `group.replaced` (Kafka's
    /// `UnifiedLog.replaceSegments`), in Kafka's crash-safe order: the cleaned files are
    /// renamed to `.swap`, the replaced segments deleted, then the `.swap` files take their
    /// final names; a crash anywhere leaves either the old segments (and junk the loader
    /// deletes) or a `.swap` the loader completes. `after_swap` runs once the old segments are
    /// gone and only the `.swap` holds the data (a crash point). Returns false, touching
    /// nothing, if a replaced segment is gone or changed since the clean began (retention,
    /// truncation): the caller deletes the cleaned files.
    pub fn replace_segments(
        &mut self,
        group: &CleanedGroup,
        after_swap: &dyn Fn(),
    ) -> Result<bool, LogError> {
        self.check_usable()?;
        if !self.still_holds(&group.replaced) {
            return Ok(false);
        }
        let base = group.base_offset;
        let dir = self.dir.clone();
        let result = (|| -> Result<LogSegment, LogError> {
            rename_segment_files(&dir, base, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)?;
            fsync_dir(&dir)?;
            for old in &group.replaced {
                if let Some(seg) = self.segments.remove(&old.base_offset) {
                    seg.delete_files()?;
                }
            }
            fsync_dir(&dir)?;
            after_swap();
            rename_segment_files(&dir, base, SWAP_FILE_SUFFIX, "")?;
            fsync_dir(&dir)?;
            let c = &self.config;
            let opened =
                LogSegment::open(&dir, base, c.index_interval_bytes, c.segment_index_bytes, 0)?;
            // The cleaner wrote and flushed these indexes a moment ago. (A rebuild here could
            // not restore the `.txnindex`: that takes the producer state of the whole log.)
            debug_assert!(opened.indexes_ok, "a cleaned segment's indexes must check");
            Ok(opened.segment)
        })();
        match result {
            Ok(seg) => {
                self.segments.insert(base, seg);
                self.check_invariants();
                Ok(true)
            }
            Err(e) => {
                // Half-swapped: the files on disk are what a restart must sort out (the
                // loader completes a .swap); this process must not write over them.
                self.failed = true;
                Err(e)
            }
        }
    }

    /// Whether every segment of `replaced` is still here, non-active, same file, same size.
    fn still_holds(&self, replaced: &[SegmentView]) -> bool {
        let active_base = self.active().base_offset();
        replaced.iter().all(|v| {
            v.base_offset < active_base
                && self
                    .segments
                    .get(&v.base_offset)
                    .is_some_and(|s| Arc::ptr_eq(s.log_file(), &v.log) && s.size() == v.size)
        })
    }

    /// Moves the log start offset forward to `offset` (Kafka's `maybeIncrementLogStartOffset`):
    /// a client's DeleteRecords on the leader, or a follower taking its leader's log start.
    /// Never past the high watermark (OFFSET_OUT_OF_RANGE), never backwards (a lower offset
    /// changes nothing). Leader epochs and producer markers below it are forgotten. Whole
    /// segments below it stay until [`Self::delete_log_start_offset_breached_segments`].
    /// Returns true if it moved.
    pub fn maybe_increment_log_start_offset(
        &mut self,
        offset: i64,
        high_watermark: i64,
    ) -> Result<bool, LogError> {
        self.check_usable()?;
        if offset > high_watermark.min(self.log_end_offset) {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        if offset <= self.log_start_offset {
            return Ok(false);
        }
        self.log_start_offset = offset;
        self.producer_state.on_log_start_offset_incremented(offset);
        if self.leader_epochs.truncate_from_start(offset) {
            self.leader_epochs.persist()?;
        }
        self.check_invariants();
        Ok(true)
    }

    /// Removes every record at or after `offset` (follower truncation). Producer state is rebuilt
    /// from the newest snapshot at or below the new end. Returns true if anything was removed.
    pub fn truncate_to(&mut self, offset: i64) -> Result<bool, LogError> {
        self.check_usable()?;
        if offset >= self.log_end_offset {
            // No record goes, but an epoch this replica started as leader and never wrote to
            // (it starts at the log end) does: the leader it follows may not have it, and a
            // follower that kept it would fetch with it again (Kafka's `UnifiedLog.truncateTo`).
            if self.leader_epochs.truncate_from_end(self.log_end_offset) {
                self.leader_epochs.persist()?;
            }
            return Ok(false);
        }
        if offset < self.log_start_offset {
            self.truncate_fully_and_start_at(offset)?;
            return Ok(true);
        }
        let doomed: Vec<i64> = self.segments.range(offset + 1..).map(|(b, _)| *b).collect();
        for base in doomed {
            if self.segments.len() == 1 {
                break;
            }
            if let Some(seg) = self.segments.remove(&base) {
                seg.delete_files()?;
            }
        }
        self.active_mut().truncate_to(offset)?;
        self.log_end_offset = self.active().next_offset();
        assert!(
            self.log_end_offset <= offset,
            "truncation must not leave offsets >= {offset}"
        );
        self.sync_dir()?;
        self.truncations += 1;
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        if self.leader_epochs.truncate_from_end(self.log_end_offset) {
            self.leader_epochs.persist()?;
        }
        self.producer_state = loader::rebuild_producer_state(
            &self.dir,
            &mut self.segments,
            self.log_start_offset,
            self.log_end_offset,
        )?;
        self.check_invariants();
        Ok(true)
    }

    /// Deletes all data and restarts the log empty at `offset` (a follower far behind the
    /// leader's log start).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        self.check_usable()?;
        for (_, seg) in std::mem::take(&mut self.segments) {
            seg.delete_files()?;
        }
        let seg = LogSegment::create(
            &self.dir,
            offset,
            self.config.index_interval_bytes,
            self.config.segment_index_bytes,
            0,
        )?;
        self.segments.insert(offset, seg);
        self.sync_dir()?;
        super::producer_state::delete_snapshots_after(&self.dir, i64::MIN)?;
        self.producer_state.reset(offset);
        self.leader_epochs.clear();
        self.leader_epochs.persist()?;
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.truncations += 1;
        self.recovery_point = offset;
        self.check_invariants();
        Ok(())
    }

    /// Drops producers idle longer than `expiration_ms` (producer.id.expiration.ms, 1 day in
    /// Kafka) so the producer map stays bounded. Returns how many were removed.
    pub fn remove_expired_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producer_state.remove_expired(now_ms, expiration_ms)
    }

    // -----------------------------------------------------------------------------------------
    // Durability and lifecycle
    // -----------------------------------------------------------------------------------------

    /// fsyncs every segment holding data above the recovery point, then moves the recovery
    /// point to the log end offset. A failed fsync takes the log offline: it is never retried.
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.flush_below(self.log_end_offset)?;
        self.unflushed_messages = 0;
        Ok(())
    }

    /// fsyncs every segment that holds data between the recovery point and `offset` (a segment
    /// boundary or the log end offset), then moves the recovery point up to `offset` (Kafka's
    /// `UnifiedLog.flush`). The recovery point is checkpointed by the log directory's owner.
    /// The segments below `offset` that may hold data at or above the recovery point: what
    /// a flush up to `offset` must fsync.
    fn unflushed_segments_below(&self, offset: i64) -> impl Iterator<Item = &LogSegment> {
        let rp = self.recovery_point;
        self.segments
            .range(..offset)
            .map(|(_, s)| s)
            .filter(move |seg| seg.next_offset() > rp || seg.base_offset() >= rp)
    }

    fn flush_below(&mut self, offset: i64) -> Result<(), LogError> {
        self.check_usable()?;
        let rp = self.recovery_point;
        if offset <= rp {
            return Ok(());
        }
        let mut result = Ok(());
        for seg in self.unflushed_segments_below(offset) {
            if let Err(e) = seg.flush() {
                result = Err(e);
                break;
            }
        }
        if let Err(e) = result {
            self.failed = true;
            return Err(e.into());
        }
        self.recovery_point = offset;
        Ok(())
    }

    /// Flushes everything and writes a producer state snapshot at the log end offset so the
    /// next open replays nothing. The caller writes its clean-shutdown marker after this.
    pub fn close(&mut self) -> Result<(), LogError> {
        self.flush()?;
        self.producer_state.advance_to(self.log_end_offset);
        self.producer_state.write_snapshot(&self.dir, true)?;
        Ok(())
    }

    /// Deletes the partition directory and everything in it.
    pub fn delete(self) -> Result<(), LogError> {
        let dir = self.dir.clone();
        drop(self);
        fs::remove_dir_all(&dir)?;
        if let Some(parent) = dir.parent() {
            let _ = fsync_dir(parent);
        }
        Ok(())
    }
}

/// The batch's header with its offsets assigned in place (Kafka's
/// `LogValidator.assignOffsetsNonCompressed` and its in-place path for compressed batches):
/// base offset and leader epoch lie outside the CRC; a new max timestamp (the log append time,
/// or the corrected create time) needs a new CRC, computed over the patched header and the
/// untouched body.
fn assign_offsets_in_header(
    records: &[u8],
    v: &ValidatedBatch,
    first_offset: i64,
    leader_epoch: i32,
    log_append_time_ms: Option<i64>,
) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&records[..HEADER_LEN]);
    batch::set_base_offset(&mut header, first_offset);
    batch::set_partition_leader_epoch(&mut header, leader_epoch);
    let new_max_ts = match log_append_time_ms {
        Some(now_ms) => Some((TimestampType::LogAppendTime, now_ms)),
        None => v
            .corrected_max_timestamp
            .map(|t| (TimestampType::CreateTime, t)),
    };
    if let Some((ts_type, ts)) = new_max_ts {
        set_max_timestamp_split(&mut header, &records[HEADER_LEN..], ts_type, ts);
    }
    header
}

/// Like [`batch::set_max_timestamp`] on a header held apart from its body.
fn set_max_timestamp_split(
    header: &mut [u8; HEADER_LEN],
    body: &[u8],
    ts_type: TimestampType,
    ts: i64,
) {
    batch::set_max_timestamp(header, ts_type, ts);
    // set_max_timestamp computed the CRC over the header alone; extend it over the body.
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[batch::CRC_COVERED_FROM..]), body);
    header[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// The first record of `b` for which `pred(offset, timestamp)` holds, as (offset, timestamp).
fn first_record_matching<P>(
    b: &RecordBatch<'_>,
    mut pred: P,
) -> Result<Option<(i64, i64)>, LogError>
where
    P: FnMut(i64, i64) -> bool,
{
    let h = b.header();
    if h.timestamp_type() == TimestampType::LogAppendTime {
        // Every record carries the append time.
        let ts = h.max_timestamp();
        for offset in h.base_offset()..=h.last_offset() {
            if pred(offset, ts) {
                return Ok(Some((offset, ts)));
            }
        }
        return Ok(None);
    }
    // Each record's offset and timestamp only: keys and values are passed over, and a
    // compressed batch is streamed, never held.
    if h.codec().is_none() {
        return Ok(None);
    }
    let mut records = BatchRecords::open(b)?;
    while records.has_more()? {
        let framing = LogError::InvalidRecord("malformed record framing".into());
        let Some(r) = read_record(&mut records, RecordSink::default(), false) else {
            return Err(records.settle(framing));
        };
        let offset = h.base_offset() + r.offset_delta as i64;
        let ts = h.base_timestamp().wrapping_add(r.timestamp_delta);
        if pred(offset, ts) {
            return Ok(Some((offset, ts)));
        }
    }
    Ok(None)
}

/// Loads the leader epoch checkpoint, or rebuilds it from batch headers when it is missing
/// or unreadable, then trims it to the log's bounds.
fn load_leader_epochs(
    dir: &Path,
    segments: &BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    log_end_offset: i64,
) -> Result<LeaderEpochCache, LogError> {
    let (mut cache, mut changed) = match LeaderEpochCache::load(dir) {
        Some(c) => (c, false),
        None => {
            let mut c = LeaderEpochCache::empty(dir);
            for seg in segments.values() {
                seg.for_each_batch_from(seg.base_offset(), |_, b| {
                    let h = b.header();
                    c.assign(h.partition_leader_epoch(), h.base_offset());
                    Ok(true)
                })?;
            }
            (c, true)
        }
    };
    changed |= cache.truncate_from_end(log_end_offset);
    changed |= cache.truncate_from_start(log_start_offset);
    if changed {
        cache.persist()?;
    }
    Ok(cache)
}

/// What the cleaner needs of one segment.
fn segment_view(s: &LogSegment) -> SegmentView {
    SegmentView {
        base_offset: s.base_offset(),
        next_offset: s.next_offset(),
        log: Arc::clone(s.log_file()),
        size: s.size(),
        offset_index_bytes: s.offset_index_entries() as u64
            * super::index::OFFSET_INDEX_ENTRY_BYTES,
        time_index_bytes: s.time_index_entries() as u64 * super::time_index::TIME_INDEX_ENTRY_BYTES,
        largest_timestamp: s.largest_timestamp(),
        first_batch_timestamp: s.first_batch_timestamp(),
        last_modified_ms: s.last_modified_ms(),
    }
}

/// The fsync a roll leaves to its caller: second handles on the files of the finished
/// segments, and the offset the recovery point may move to once they are synced.
#[derive(Debug)]
pub struct RollFlush {
    upto: i64,
    truncations: u64,
    files: Vec<std::fs::File>,
}

impl RollFlush {
    /// fsyncs every file; blocking, so the broker runs it off its async workers.
    pub fn sync(&self) -> std::io::Result<()> {
        for f in &self.files {
            f.sync_all()?;
        }
        Ok(())
    }

    /// The recovery point after it completes.
    pub fn upto(&self) -> i64 {
        self.upto
    }
}
