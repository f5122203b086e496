//! Log compaction: Kafka's `Cleaner` (in `LogCleaner.scala`) and the offset arithmetic of its
//! `LogCleanerManager`, for logs with `cleanup.policy=compact` (or `compact,delete`).
//!
//! One clean of a log:
//! 1. [`cleanable_offsets`] (Kafka's `LogCleanerManager.cleanableOffsets`): the dirty section
//!    runs from the cleaner checkpoint (the first dirty offset) up to the first uncleanable
//!    offset, the smallest of the active segment's base offset, the last stable offset (which
//!    is at most the high watermark) and the base offset of the first segment holding a record
//!    younger than `min.compaction.lag.ms`, rounded down to the base offset of the segment
//!    holding it: only whole segments are cleaned, and never the active one.
//! 2. [`Cleaner::build_offset_map`]: key -> latest offset over the dirty section, in a
//!    [`KeyOffsetMap`] bounded by `log.cleaner.dedupe.buffer.size` over the cleaner threads.
//!    When it fills, the clean stops where the map got to (Kafka's rule); the rest is the next
//!    clean's.
//! 3. The segments below that point, in groups that fit one segment (Kafka's
//!    `groupSegmentsBySize`), are each rewritten into `<base>.log.cleaned` (+ indexes) keeping
//!    the latest record per key at its offset, tombstones until their delete horizon, the last
//!    batch of each active producer, and transaction markers until their transaction's data is
//!    gone (Kafka's `cleanInto` and `RecordFilter`). The segment files are read without the
//!    partition lock; the swap ([`super::UnifiedLog::replace_segments`]) takes it.
//!
//! Batches are rebuilt as Kafka's `MemoryRecords.filterTo` rebuilds them: the original base
//! offset, last offset delta, producer id, epoch and base sequence, transactional and control
//! flags, partition leader epoch and codec (re-compressed), a new CRC-32C. A batch that loses
//! nothing is copied unchanged, unless it holds a tombstone or is an ended transaction's
//! marker and has no delete horizon yet: then its base timestamp becomes
//! `now + delete.retention.ms` with attribute bit 6 set (KIP-534), and a later clean past that
//! time removes the tombstones (or marker).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{
    BatchHeader, Codec, RecordBatch, CONTROL_BIT, CRC_AT, CRC_COVERED_FROM, DELETE_HORIZON_BIT,
    HEADER_LEN, LOG_OVERHEAD, MAGIC_V2, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT,
};
use super::batch_builder::{put_varint, CompressWriter};
use super::control::parse_end_txn_marker;
use super::decompress::BatchRecords;
use super::loader::CLEANED_FILE_SUFFIX;
use super::records::{read_record, RecordBytes, RecordSink};
use super::segment::{
    remove_if_exists, suffixed_file, AppendedBatch, BatchScanner, LogSegment, Scanned,
    SEGMENT_FILE_SUFFIXES,
};
use super::txn_index::AbortedTxn;
use super::{LogConfig, LogError, TimestampType};

/// The cleaner's checkpoint in each log directory, Kafka's name and text format: per
/// partition, the first dirty offset (everything below it was cleaned at least once).
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// The share of the dedupe buffer the offset map may fill (Kafka's
/// `log.cleaner.io.buffer.load.factor`, default 0.9).
pub const DEDUPE_BUFFER_LOAD_FACTOR: f64 = 0.9;
/// What one offset map entry costs besides its key bytes: the offset, the boxed slice's
/// pointer and length, and the hash table's control byte and slack. Counting it bounds the
/// map by bytes, as Kafka's `SkimpyOffsetMap` is bounded by its 24-byte slots.
pub const OFFSET_MAP_ENTRY_OVERHEAD_BYTES: usize = 48;
/// The length field of an empty batch: the header after `baseOffset` and `length`.
const EMPTY_BATCH_LENGTH: i32 = (HEADER_LEN - LOG_OVERHEAD) as i32;

/// Key -> latest offset over the dirty section (Kafka's `OffsetMap`). Keyed by the full key
/// bytes, so unlike Kafka's MD5-keyed `SkimpyOffsetMap` two keys never collide; the memory
/// bound counts the key bytes instead.
pub struct KeyOffsetMap {
    map: HashMap<Box<[u8]>, i64>,
    bytes_used: usize,
    /// The most bytes the entries may take: the thread's share of the dedupe buffer times
    /// the load factor.
    bytes_max: usize,
    /// The last offset the map covers; records past it are kept whatever their key.
    latest_offset: i64,
}

impl KeyOffsetMap {
    /// An empty map for a thread's share of `log.cleaner.dedupe.buffer.size`.
    pub fn new(dedupe_buffer_bytes: usize) -> Self {
        KeyOffsetMap {
            map: HashMap::new(),
            bytes_used: 0,
            bytes_max: (dedupe_buffer_bytes as f64 * DEDUPE_BUFFER_LOAD_FACTOR) as usize,
            latest_offset: -1,
        }
    }

    /// Forgets every entry (a new clean).
    pub fn clear(&mut self) {
        self.map = HashMap::new();
        self.bytes_used = 0;
        self.latest_offset = -1;
    }

    /// Records `offset` as the latest for `key`; false, changing nothing, when a new key does
    /// not fit (the map is full).
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        if let Some(o) = self.map.get_mut(key) {
            *o = offset;
            return true;
        }
        let cost = key.len() + OFFSET_MAP_ENTRY_OVERHEAD_BYTES;
        if self.bytes_used + cost > self.bytes_max {
            return false;
        }
        self.bytes_used += cost;
        self.map.insert(key.into(), offset);
        true
    }

    /// The latest offset of `key`, if mapped.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.map.get(key).copied()
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key is mapped.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The last offset covered.
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    /// Moves the covered range forward to `offset`.
    pub fn update_latest_offset(&mut self, offset: i64) {
        self.latest_offset = self.latest_offset.max(offset);
    }

    /// Share of the bound in use, 0 to 1.
    pub fn utilization(&self) -> f64 {
        self.bytes_used as f64 / self.bytes_max.max(1) as f64
    }
}

/// A segment as the cleaner sees it, taken under the partition lock: its file is read
/// afterwards without the lock (a non-active segment does not change; the swap checks that
/// it is still the same file and size).
#[derive(Clone)]
pub struct SegmentView {
    /// The segment's base offset.
    pub base_offset: i64,
    /// The offset after its last batch.
    pub next_offset: i64,
    /// Its `.log` file.
    pub log: Arc<File>,
    /// Bytes of the `.log` file.
    pub size: u64,
    /// Bytes of its offset index.
    pub offset_index_bytes: u64,
    /// Bytes of its time index.
    pub time_index_bytes: u64,
    /// Its largest record timestamp (or mtime), for `min.compaction.lag.ms`.
    pub largest_timestamp: i64,
    /// Its first batch's timestamp, for `max.compaction.lag.ms`.
    pub first_batch_timestamp: Option<i64>,
    /// The `.log` file's mtime, which the cleaned segment keeps (Kafka's rule).
    pub last_modified_ms: i64,
}

/// What the cleaner keeps of a producer's last write (Kafka's `LastRecord`): the last offset
/// of its last data batch, or for a producer with markers only, the epoch of its last marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastRecord {
    /// The last offset of the producer's last data batch.
    pub last_data_offset: Option<i64>,
    /// The producer's epoch.
    pub producer_epoch: i16,
}

/// One log as the cleaner sees it at the start of a clean.
pub struct CleanerView {
    /// The partition directory.
    pub dir: PathBuf,
    /// The log's settings.
    pub config: LogConfig,
    /// The log start offset.
    pub log_start_offset: i64,
    /// The active segment's base offset; the cleaner never reaches it.
    pub active_base_offset: i64,
    /// The log end offset.
    pub log_end_offset: i64,
    /// The last stable offset (at most the high watermark).
    pub last_stable_offset: i64,
    /// The non-active segments, oldest first.
    pub segments: Vec<SegmentView>,
    /// Every aborted transaction of the log, from all segments' `.txnindex`, active included
    /// (an aborted transaction's data may sit in cleaned segments with its marker in the
    /// active one).
    pub aborted: Vec<AbortedTxn>,
    /// The producers in the producer state and their last write (Kafka's
    /// `UnifiedLog.lastRecordsOfActiveProducers`).
    pub active_producers: HashMap<i64, LastRecord>,
}

impl CleanerView {
    /// The aborted transactions overlapping `[start, end)`.
    fn aborted_between(&self, start: i64, end: i64) -> Vec<AbortedTxn> {
        self.aborted
            .iter()
            .filter(|t| t.last_offset >= start && t.first_offset < end)
            .copied()
            .collect()
    }

    /// The segment holding `offset` or the first one after it, by index in `segments`.
    fn segment_index_at(&self, offset: i64) -> usize {
        self.segments
            .iter()
            .position(|s| s.next_offset > offset)
            .unwrap_or(self.segments.len())
    }
}

/// Where a log's dirty section lies and how dirty it is (Kafka's `OffsetsToClean` and
/// `LogToClean`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogToClean {
    /// The first offset not yet cleaned.
    pub first_dirty_offset: i64,
    /// The base offset of the first segment that cannot be cleaned now.
    pub first_uncleanable_offset: i64,
    /// Bytes of the segments below the dirty section.
    pub clean_bytes: u64,
    /// Bytes of the dirty segments that can be cleaned now.
    pub cleanable_bytes: u64,
    /// How long past `max.compaction.lag.ms` the oldest dirty segment is (0 if it is not).
    pub max_compaction_delay_ms: i64,
    /// The checkpointed offset was out of the log's range and was reset.
    pub force_update_checkpoint: bool,
}

impl LogToClean {
    /// Dirty bytes over all bytes (Kafka's `cleanableRatio`).
    pub fn cleanable_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.cleanable_bytes;
        if total == 0 {
            return 0.0;
        }
        self.cleanable_bytes as f64 / total as f64
    }

    /// Whether the log is due (Kafka's `grabFilthiestCompactedLog` filter): dirty enough, or
    /// holding a segment past `max.compaction.lag.ms`.
    pub fn is_due(&self, min_cleanable_dirty_ratio: f64) -> bool {
        self.cleanable_bytes > 0
            && (self.max_compaction_delay_ms > 0
                || self.cleanable_ratio() > min_cleanable_dirty_ratio)
    }
}

/// The first dirty offset from the checkpoint, reset to the log start offset when the
/// checkpoint is below it or past the log end (Kafka's `cleanableOffsets`).
fn first_dirty_offset(view: &CleanerView, checkpoint: Option<i64>) -> (i64, bool) {
    let start = view.log_start_offset;
    match checkpoint {
        None => (start, false),
        Some(c) if c < start => (start, true),
        // Past the log end: the log was truncated below it; clean it all again.
        Some(c) if c > view.log_end_offset => (start, true),
        Some(c) => (c, false),
    }
}

/// Where the dirty section ends, as a segment base offset (Kafka's `cleanableOffsets` and
/// `calculateCleanableBytes`): never the active segment, nothing at or past the last stable
/// offset, nothing younger than `min.compaction.lag.ms`.
fn first_uncleanable_offset(view: &CleanerView, first_dirty: i64, now_ms: i64) -> i64 {
    let lag_ms = view.config.min_compaction_lag_ms.max(0);
    let too_young = view
        .segments
        .iter()
        .filter(|s| s.next_offset > first_dirty)
        .find(|s| lag_ms > 0 && s.largest_timestamp > now_ms.saturating_sub(lag_ms))
        .map(|s| s.base_offset);
    let raw = [
        Some(view.active_base_offset),
        Some(view.last_stable_offset),
        too_young,
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(view.active_base_offset)
    .max(first_dirty);
    // Round down to the base of the segment holding it: only whole segments are cleaned.
    view.segments
        .iter()
        .find(|s| s.next_offset > raw)
        .map_or(view.active_base_offset, |s| s.base_offset)
}

/// How long past `max.compaction.lag.ms` the oldest dirty non-active segment is (Kafka's
/// `LogCleanerManager.maxCompactionDelay`).
fn max_compaction_delay_ms(view: &CleanerView, first_dirty: i64, now_ms: i64) -> i64 {
    let earliest = view
        .segments
        .iter()
        .filter(|s| s.next_offset > first_dirty)
        .filter_map(|s| s.first_batch_timestamp)
        .filter(|&t| t > 0)
        .min()
        .unwrap_or(i64::MAX);
    let clean_until = now_ms.saturating_sub(view.config.max_compaction_lag_ms.max(0));
    if earliest < clean_until {
        clean_until - earliest
    } else {
        0
    }
}

/// The dirty section of `view` and its sizes, from the checkpointed first dirty offset.
pub fn cleanable_offsets(view: &CleanerView, checkpoint: Option<i64>, now_ms: i64) -> LogToClean {
    let (first_dirty, force_update_checkpoint) = first_dirty_offset(view, checkpoint);
    let uncleanable = first_uncleanable_offset(view, first_dirty, now_ms);
    let clean_bytes = view
        .segments
        .iter()
        .filter(|s| s.next_offset <= first_dirty)
        .map(|s| s.size)
        .sum();
    let cleanable_bytes = view
        .segments
        .iter()
        .filter(|s| s.next_offset > first_dirty.min(uncleanable) && s.base_offset < uncleanable)
        .map(|s| s.size)
        .sum();
    LogToClean {
        first_dirty_offset: first_dirty,
        first_uncleanable_offset: uncleanable,
        clean_bytes,
        cleanable_bytes,
        max_compaction_delay_ms: max_compaction_delay_ms(view, first_dirty, now_ms),
        force_update_checkpoint,
    }
}

/// Groups consecutive segments whose total log bytes fit `max_bytes` and whose index bytes
/// fit `max_index_bytes`, and whose offsets fit a segment's 32-bit relative offsets (Kafka's
/// `groupSegmentsBySize`). Each group becomes one cleaned segment.
pub fn group_segments_by_size(
    segments: &[SegmentView],
    max_bytes: u64,
    max_index_bytes: u64,
    first_uncleanable_offset: i64,
) -> Vec<Vec<SegmentView>> {
    let mut groups = Vec::new();
    let mut i = 0;
    while i < segments.len() {
        let first = &segments[i];
        let mut group = vec![first.clone()];
        let (mut log, mut idx, mut tidx) =
            (first.size, first.offset_index_bytes, first.time_index_bytes);
        i += 1;
        while let Some(next) = segments.get(i) {
            // Kafka bounds the group's last offset by the next segment's base (or the round's
            // end) rather than scanning for it.
            let last = segments
                .get(i + 1)
                .map_or(first_uncleanable_offset, |s| s.base_offset)
                - 1;
            let fits = log + next.size <= max_bytes
                && idx + next.offset_index_bytes <= max_index_bytes
                && tidx + next.time_index_bytes <= max_index_bytes
                && (next.size == 0 || last - first.base_offset <= i32::MAX as i64);
            if !fits {
                break;
            }
            log += next.size;
            idx += next.offset_index_bytes;
            tidx += next.time_index_bytes;
            group.push(next.clone());
            i += 1;
        }
        groups.push(group);
    }
    groups
}

/// Transaction state while the cleaner walks the log (Kafka's `CleanedTransactionMetadata`):
/// which producers are inside an aborted or a committed transaction, so that aborted data is
/// dropped and a marker is dropped only once its transaction's data is gone.
#[derive(Default)]
pub struct CleanedTransactionMetadata {
    ongoing_committed: HashSet<i64>,
    /// Per producer: its aborted transaction and the last offset of a batch of it seen.
    ongoing_aborted: HashMap<i64, (AbortedTxn, Option<i64>)>,
    /// Aborted transactions not yet reached, by first offset.
    pending: BinaryHeap<Reverse<(i64, i64, i64, i64)>>,
}

impl CleanedTransactionMetadata {
    /// Adds the aborted transactions of the range about to be walked.
    pub fn add_aborted(&mut self, txns: &[AbortedTxn]) {
        for t in txns {
            self.pending.push(Reverse((
                t.first_offset,
                t.producer_id,
                t.last_offset,
                t.last_stable_offset,
            )));
        }
    }

    fn consume_aborted_up_to(&mut self, offset: i64) {
        while let Some(Reverse((first, pid, last, lso))) = self.pending.peek().copied() {
            if first > offset {
                break;
            }
            self.pending.pop();
            let txn = AbortedTxn {
                producer_id: pid,
                first_offset: first,
                last_offset: last,
                last_stable_offset: lso,
            };
            self.ongoing_aborted.entry(pid).or_insert((txn, None));
        }
    }

    /// A data batch: true if it belongs to an aborted transaction (it can go).
    pub fn on_batch_read(&mut self, h: &BatchHeader<'_>) -> bool {
        self.consume_aborted_up_to(h.last_offset());
        if !h.is_transactional() {
            return false;
        }
        match self.ongoing_aborted.get_mut(&h.producer_id()) {
            Some((_, last_seen)) => {
                *last_seen = Some(h.last_offset());
                true
            }
            None => {
                self.ongoing_committed.insert(h.producer_id());
                false
            }
        }
    }

    /// A control batch: whether it can go, and the aborted transaction the cleaned segment's
    /// `.txnindex` keeps when an ABORT marker stays (its transaction still has data).
    pub fn on_control_batch_read(&mut self, batch: &RecordBatch<'_>) -> (bool, Option<AbortedTxn>) {
        let h = batch.header();
        self.consume_aborted_up_to(h.last_offset());
        if h.record_count() == 0 {
            // An empty control batch was cleaned before.
            return (true, None);
        }
        match parse_end_txn_marker(batch) {
            Ok(Some(m)) if !m.commit => match self.ongoing_aborted.remove(&h.producer_id()) {
                Some((txn, Some(_))) => (false, Some(txn)),
                _ => (true, None),
            },
            Ok(Some(_)) => (!self.ongoing_committed.remove(&h.producer_id()), None),
            _ => (false, None),
        }
    }
}

/// Counters of one clean (Kafka's `CleanerStats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanerStats {
    /// Bytes read while building the offset map.
    pub map_bytes_read: u64,
    /// Records read while cleaning.
    pub messages_read: u64,
    /// Bytes read while cleaning.
    pub bytes_read: u64,
    /// Records written to cleaned segments.
    pub messages_written: u64,
    /// Bytes written to cleaned segments.
    pub bytes_written: u64,
    /// Groups of segments swapped for a cleaned segment.
    pub segments_swapped: u64,
}

/// One group of segments cleaned into `<base>.*.cleaned`, ready to be swapped in.
pub struct CleanedGroup {
    /// The cleaned segment's base offset: the first replaced segment's.
    pub base_offset: i64,
    /// The segments it replaces, as they were when the clean began.
    pub replaced: Vec<SegmentView>,
}

/// The result of a clean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanOutcome {
    /// The first offset not cleaned: the next clean's first dirty offset (the checkpoint).
    pub next_dirty_offset: i64,
    /// Counters.
    pub stats: CleanerStats,
    /// False when the clean stopped early (shutdown, or the log changed under it); the
    /// checkpoint then stays.
    pub completed: bool,
}

/// What a clean needs from its caller: when to stop, and how to swap a cleaned group in
/// under the partition lock (false: the log changed and the group was not swapped).
pub struct CleanContext<'a> {
    /// Checked between batches (Kafka's `checkDone`).
    pub stop: &'a dyn Fn() -> bool,
    /// Swaps a group in; see [`super::UnifiedLog::replace_segments`].
    pub swap: &'a mut dyn FnMut(&CleanedGroup) -> Result<bool, LogError>,
}

/// The cleaner of one thread (Kafka's `Cleaner`): its offset map is reused between cleans.
pub struct Cleaner {
    map: KeyOffsetMap,
}

/// What a data or control batch becomes in the cleaned segment (Kafka's `BatchRetention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BatchRetention {
    /// Dropped, records and all.
    Delete,
    /// Dropped if no record stays.
    DeleteEmpty,
    /// Kept as an empty batch if no record stays (producer state, the round's last offset).
    RetainEmpty,
}

/// The per-batch facts the record filter needs.
struct BatchDecision {
    retention: BatchRetention,
    /// Every record goes (an aborted batch, or an ended transaction's marker past its horizon).
    discard_records: bool,
    /// A control batch whose transaction has no data left: it gets a delete horizon.
    marker_for_empty_txn: bool,
}

impl Cleaner {
    /// A cleaner with a `dedupe_buffer_bytes` offset map.
    pub fn new(dedupe_buffer_bytes: usize) -> Self {
        Cleaner {
            map: KeyOffsetMap::new(dedupe_buffer_bytes),
        }
    }

    /// Cleans `view` from `ltc.first_dirty_offset` (Kafka's `Cleaner.doClean`): builds the
    /// offset map over the dirty section, then cleans every segment group below where the map
    /// got to and swaps each in through `ctx`.
    pub fn clean(
        &mut self,
        view: &CleanerView,
        ltc: &LogToClean,
        now_ms: i64,
        ctx: &mut CleanContext<'_>,
    ) -> Result<CleanOutcome, LogError> {
        let mut stats = CleanerStats::default();
        let upper = ltc.first_uncleanable_offset;
        if !self.build_offset_map(view, ltc.first_dirty_offset, upper, ctx.stop, &mut stats)? {
            return Ok(CleanOutcome {
                next_dirty_offset: ltc.first_dirty_offset,
                stats,
                completed: false,
            });
        }
        let end_offset = self.map.latest_offset() + 1;
        let below: Vec<SegmentView> = view
            .segments
            .iter()
            .filter(|s| s.base_offset < end_offset && s.base_offset < upper)
            .cloned()
            .collect();
        let groups = group_segments_by_size(
            &below,
            view.config.segment_bytes,
            view.config.segment_index_bytes,
            upper,
        );
        let mut txns = CleanedTransactionMetadata::default();
        for group in groups {
            let done =
                self.clean_segments(view, group, now_ms, upper, &mut txns, ctx, &mut stats)?;
            if !done {
                return Ok(CleanOutcome {
                    next_dirty_offset: ltc.first_dirty_offset,
                    stats,
                    completed: false,
                });
            }
        }
        Ok(CleanOutcome {
            next_dirty_offset: end_offset.max(ltc.first_dirty_offset),
            stats,
            completed: true,
        })
    }

    /// Fills the offset map from the dirty section `[start, end)` (Kafka's `buildOffsetMap`);
    /// false if `stop` turned true.
    fn build_offset_map(
        &mut self,
        view: &CleanerView,
        start: i64,
        end: i64,
        stop: &dyn Fn() -> bool,
        stats: &mut CleanerStats,
    ) -> Result<bool, LogError> {
        self.map.clear();
        let mut txns = CleanedTransactionMetadata::default();
        txns.add_aborted(&view.aborted_between(start, end));
        let first = view.segment_index_at(start);
        let dirty: Vec<&SegmentView> = view.segments[first..]
            .iter()
            .take_while(|s| s.base_offset < end)
            .collect();
        for (i, seg) in dirty.iter().enumerate() {
            let next_start = dirty.get(i + 1).map_or(end, |s| s.base_offset);
            match self.map_segment(seg, start, &mut txns, stop, stats)? {
                MapProgress::Stopped => return Ok(false),
                MapProgress::Full => break,
                MapProgress::Done => self.map.update_latest_offset(next_start - 1),
            }
        }
        Ok(true)
    }

    /// Adds one segment's keys to the map (Kafka's `buildOffsetMapForSegment`).
    fn map_segment(
        &mut self,
        seg: &SegmentView,
        start: i64,
        txns: &mut CleanedTransactionMetadata,
        stop: &dyn Fn() -> bool,
        stats: &mut CleanerStats,
    ) -> Result<MapProgress, LogError> {
        let mut scanner = BatchScanner::new(&seg.log, 0, seg.size, true);
        while let Some(bytes) = next_whole_batch(&mut scanner, seg)? {
            if stop() {
                return Ok(MapProgress::Stopped);
            }
            stats.map_bytes_read += bytes.len() as u64;
            let batch = parse_checked(bytes)?;
            let h = batch.header();
            if h.is_control() {
                txns.on_control_batch_read(&batch);
            } else if !txns.on_batch_read(&h) && !self.map_batch(&batch, start)? {
                return Ok(MapProgress::Full);
            }
            if h.last_offset() >= start {
                self.map.update_latest_offset(h.last_offset());
            }
        }
        Ok(MapProgress::Done)
    }

    /// Puts the batch's keyed records at or after `start` in the map; false when it filled.
    /// Reads one record at a time, values passed over (Kafka's `buildOffsetMapForSegment`
    /// over `batch.streamingIterator`): a compressed batch is streamed, never held.
    fn map_batch(&mut self, batch: &RecordBatch<'_>, start: i64) -> Result<bool, LogError> {
        let h = batch.header();
        let mut records = BatchRecords::open(batch)?;
        let mut key = Vec::new();
        while records.has_more()? {
            let sink = RecordSink {
                key: Some(&mut key),
                value: None,
            };
            let Some(r) = read_record(&mut records, sink, false) else {
                return Err(records.settle(malformed()));
            };
            let offset = h.base_offset() + r.offset_delta as i64;
            if r.has_key && offset >= start && !self.map.put(&key, offset) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Cleans one group into `<base>.log.cleaned` and swaps it in (Kafka's `cleanSegments`);
    /// false when stopped or when the log changed under the clean.
    #[allow(clippy::too_many_arguments)]
    fn clean_segments(
        &mut self,
        view: &CleanerView,
        group: Vec<SegmentView>,
        now_ms: i64,
        upper: i64,
        txns: &mut CleanedTransactionMetadata,
        ctx: &mut CleanContext<'_>,
        stats: &mut CleanerStats,
    ) -> Result<bool, LogError> {
        let base = group[0].base_offset;
        let written = self.write_cleaned(view, &group, now_ms, upper, txns, ctx.stop, stats);
        let swapped = match written {
            Ok(true) => (ctx.swap)(&CleanedGroup {
                base_offset: base,
                replaced: group,
            }),
            other => other,
        };
        if !matches!(swapped, Ok(true)) {
            delete_cleaned_files(&view.dir, base)?;
        } else {
            stats.segments_swapped += 1;
        }
        swapped
    }

    /// Writes and flushes the cleaned segment of `group`; false if stopped.
    #[allow(clippy::too_many_arguments)]
    fn write_cleaned(
        &mut self,
        view: &CleanerView,
        group: &[SegmentView],
        now_ms: i64,
        upper: i64,
        txns: &mut CleanedTransactionMetadata,
        stop: &dyn Fn() -> bool,
        stats: &mut CleanerStats,
    ) -> Result<bool, LogError> {
        let c = &view.config;
        let mut dest = LogSegment::create_with_suffix(
            &view.dir,
            group[0].base_offset,
            CLEANED_FILE_SUFFIX,
            c.index_interval_bytes,
            c.segment_index_bytes,
            now_ms,
        )?;
        for (i, seg) in group.iter().enumerate() {
            let seg_upper = group.get(i + 1).map_or(seg.next_offset, |s| s.base_offset);
            txns.add_aborted(&view.aborted_between(seg.base_offset, seg_upper));
            let mut into = CleanInto {
                map: &self.map,
                view,
                dest: &mut dest,
                txns,
                now_ms,
                upper,
                stats,
            };
            if !into.segment(seg, stop)? {
                return Ok(false);
            }
        }
        dest.on_become_inactive()?;
        dest.flush()?;
        if let Some(last) = group.last() {
            set_mtime(dest.log_file(), last.last_modified_ms)?;
        }
        Ok(true)
    }
}

enum MapProgress {
    Done,
    Full,
    Stopped,
}

/// One segment cleaned into the destination segment (Kafka's `cleanInto` and its
/// `RecordFilter`).
struct CleanInto<'a> {
    map: &'a KeyOffsetMap,
    view: &'a CleanerView,
    dest: &'a mut LogSegment,
    txns: &'a mut CleanedTransactionMetadata,
    now_ms: i64,
    /// The round's first uncleanable offset.
    upper: i64,
    stats: &'a mut CleanerStats,
}

impl CleanInto<'_> {
    /// Filters every batch of `seg` into the destination; false if stopped.
    fn segment(&mut self, seg: &SegmentView, stop: &dyn Fn() -> bool) -> Result<bool, LogError> {
        let mut scanner = BatchScanner::new(&seg.log, 0, seg.size, true);
        while let Some(bytes) = next_whole_batch(&mut scanner, seg)? {
            if stop() {
                return Ok(false);
            }
            let batch = parse_checked(bytes)?;
            self.stats.bytes_read += bytes.len() as u64;
            self.batch(&batch)?;
        }
        Ok(true)
    }

    /// Kafka's `checkBatchRetention`.
    fn decide(&mut self, batch: &RecordBatch<'_>) -> Result<BatchDecision, LogError> {
        let h = batch.header();
        let can_discard = if h.is_control() {
            let (discard, keep_index) = self.txns.on_control_batch_read(batch);
            if let Some(txn) = keep_index {
                self.dest.txn_index_mut().append(txn)?;
            }
            discard
        } else {
            self.txns.on_batch_read(&h)
        };
        let discard_records = if h.is_control() {
            can_discard && delete_horizon(&h).is_some_and(|t| t <= self.now_ms)
        } else {
            can_discard
        };
        let retention = if h.has_producer_id() && self.is_last_of_producer(&h) {
            BatchRetention::RetainEmpty
        } else if h.next_offset() == self.upper {
            // The round's last batch stays, even empty, so its last offset is not lost.
            BatchRetention::RetainEmpty
        } else if discard_records {
            BatchRetention::Delete
        } else {
            BatchRetention::DeleteEmpty
        };
        Ok(BatchDecision {
            retention,
            discard_records,
            marker_for_empty_txn: can_discard && h.is_control(),
        })
    }

    /// Kafka's `isBatchLastRecordOfProducer`: the batch holding an active producer's last
    /// sequence, or its last marker when it has no data, keeps its header.
    fn is_last_of_producer(&self, h: &BatchHeader<'_>) -> bool {
        self.view
            .active_producers
            .get(&h.producer_id())
            .is_some_and(|last| match last.last_data_offset {
                Some(o) => h.last_offset() == o,
                None => h.is_control() && h.producer_epoch() == last.producer_epoch,
            })
    }

    /// Kafka's `shouldRetainRecord`.
    fn keep_record(
        &self,
        h: &BatchHeader<'_>,
        offset: i64,
        key: Option<&[u8]>,
        tombstone: bool,
    ) -> bool {
        if offset > self.map.latest_offset() {
            return true;
        }
        let Some(key) = key else {
            // A keyless record on a compacted log is invalid and goes.
            return false;
        };
        let latest = self.map.get(key).is_none_or(|found| offset >= found);
        let keep_deletes = delete_horizon(h).is_none_or(|t| self.now_ms < t);
        latest && (!tombstone || keep_deletes)
    }

    /// Filters one batch and writes what stays (Kafka's `MemoryRecords.filterTo`). A first
    /// pass decides which records stay; a batch that changes is rebuilt by a second pass that
    /// streams the retained records into the compressor, so that neither pass holds the
    /// decompressed batch (Kafka's `filterTo` keeps the retained records themselves).
    fn batch(&mut self, batch: &RecordBatch<'_>) -> Result<(), LogError> {
        let d = self.decide(batch)?;
        if d.retention == BatchRetention::Delete {
            return Ok(());
        }
        let h = batch.header();
        let kept = self.retained(batch, &d)?;
        self.stats.messages_read += kept.total as u64;
        let set_horizon =
            (kept.tombstones || d.marker_for_empty_txn) && delete_horizon(&h).is_none();
        let out = if kept.count == 0 {
            if d.retention != BatchRetention::RetainEmpty {
                return Ok(());
            }
            empty_batch(&h)
        } else if kept.count == kept.total && !set_horizon {
            batch.bytes().to_vec()
        } else {
            let horizon = if set_horizon {
                Some(
                    self.now_ms
                        .saturating_add(self.view.config.delete_retention_ms),
                )
            } else {
                delete_horizon(&h)
            };
            rebuild_batch(batch, &kept, horizon)?
        };
        self.write(&out, &h, kept.count)
    }

    /// The first pass: which records of `batch` stay (Kafka's `RecordFilter`).
    fn retained(
        &self,
        batch: &RecordBatch<'_>,
        d: &BatchDecision,
    ) -> Result<RetainedRecords, LogError> {
        let h = batch.header();
        let mut records = BatchRecords::open(batch)?;
        let mut kept = RetainedRecords::default();
        let mut key = Vec::new();
        while records.has_more()? {
            let sink = RecordSink {
                key: Some(&mut key),
                value: None,
            };
            let Some(r) = read_record(&mut records, sink, false) else {
                return Err(records.settle(malformed()));
            };
            let offset = h.base_offset() + r.offset_delta as i64;
            let key = r.has_key.then_some(&key[..]);
            let keep = !d.discard_records
                && (h.is_control() || self.keep_record(&h, offset, key, !r.has_value));
            let ts = h.base_timestamp().wrapping_add(r.timestamp_delta);
            kept.push(keep, !r.has_value, ts);
        }
        Ok(kept)
    }

    fn write(&mut self, out: &[u8], h: &BatchHeader<'_>, records: usize) -> Result<(), LogError> {
        let written = BatchHeader::new(out).ok_or_else(|| {
            LogError::CorruptMessage("the cleaner built a batch shorter than a header".into())
        })?;
        debug_assert_eq!(written.last_offset(), h.last_offset(), "offsets are kept");
        self.dest.append(
            out,
            AppendedBatch {
                last_offset: h.last_offset(),
                max_timestamp: written.max_timestamp(),
            },
        )?;
        self.stats.messages_written += records as u64;
        self.stats.bytes_written += out.len() as u64;
        Ok(())
    }
}

/// The next batch of a non-active segment, `None` at its end. Bytes that are not a whole
/// batch are an error: a clean that stopped there would swap in a segment without the rest.
fn next_whole_batch<'s>(
    scanner: &'s mut BatchScanner<'_>,
    seg: &SegmentView,
) -> Result<Option<&'s [u8]>, LogError> {
    match scanner.next_batch()? {
        Scanned::Batch { bytes, .. } => Ok(Some(bytes)),
        Scanned::End => Ok(None),
        Scanned::Invalid { position, reason } => Err(LogError::CorruptMessage(format!(
            "segment {} at byte {position}: {reason}; not cleaned",
            seg.base_offset
        ))),
    }
}

/// A stored batch whose CRC holds. A rebuilt batch gets a new CRC, so cleaning a damaged
/// one would hide the damage for good.
fn parse_checked(bytes: &[u8]) -> Result<RecordBatch<'_>, LogError> {
    let (batch, _) = RecordBatch::parse(bytes)?;
    if !batch.is_crc_valid() {
        return Err(LogError::CorruptMessage(format!(
            "batch at offset {} fails its CRC; not cleaned",
            batch.header().base_offset()
        )));
    }
    Ok(batch)
}

/// The batch's delete horizon, if the cleaner set one (KIP-534: attribute bit 6, stored in the
/// base timestamp).
fn delete_horizon(h: &BatchHeader<'_>) -> Option<i64> {
    (h.attributes() & DELETE_HORIZON_BIT != 0).then(|| h.base_timestamp())
}

fn malformed() -> LogError {
    LogError::InvalidRecord("malformed record framing".into())
}

/// What the first pass over a batch decided: one bit per record (kept or not), and what the
/// rebuild needs of the kept ones.
#[derive(Default)]
struct RetainedRecords {
    bits: Vec<u64>,
    total: usize,
    count: usize,
    tombstones: bool,
    first_timestamp: Option<i64>,
    max_timestamp: Option<i64>,
}

impl RetainedRecords {
    fn push(&mut self, keep: bool, tombstone: bool, timestamp: i64) {
        let i = self.total;
        self.total += 1;
        if i / 64 == self.bits.len() {
            self.bits.push(0);
        }
        if keep {
            self.bits[i / 64] |= 1 << (i % 64);
            self.count += 1;
            self.tombstones |= tombstone;
            self.first_timestamp.get_or_insert(timestamp);
            self.max_timestamp = Some(self.max_timestamp.map_or(timestamp, |m| m.max(timestamp)));
        }
    }

    fn contains(&self, i: usize) -> bool {
        self.bits
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
}

/// A header with no records in place of a batch whose records all went (Kafka's
/// `DefaultRecordBatch.writeEmptyHeader`): offsets, producer fields, flags and leader epoch
/// kept, no codec, both timestamps the batch's maxTimestamp.
fn empty_batch(h: &BatchHeader<'_>) -> Vec<u8> {
    let keep = TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT;
    let ts = h.max_timestamp();
    let mut out = Vec::with_capacity(HEADER_LEN);
    put_header(
        &mut out,
        h,
        EMPTY_BATCH_LENGTH,
        h.attributes() & keep,
        ts,
        ts,
        0,
    );
    seal_crc(&mut out);
    out
}

/// Writes the 61-byte header with `h`'s offsets, leader epoch and producer fields.
fn put_header(
    out: &mut Vec<u8>,
    h: &BatchHeader<'_>,
    length: i32,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    record_count: i32,
) {
    out.extend_from_slice(&h.base_offset().to_be_bytes());
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&h.partition_leader_epoch().to_be_bytes());
    out.push(MAGIC_V2 as u8);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&attributes.to_be_bytes());
    out.extend_from_slice(&h.last_offset_delta().to_be_bytes());
    out.extend_from_slice(&base_timestamp.to_be_bytes());
    out.extend_from_slice(&max_timestamp.to_be_bytes());
    out.extend_from_slice(&h.producer_id().to_be_bytes());
    out.extend_from_slice(&h.producer_epoch().to_be_bytes());
    out.extend_from_slice(&h.base_sequence().to_be_bytes());
    out.extend_from_slice(&record_count.to_be_bytes());
}

/// Computes and stores the CRC-32C of a whole batch.
fn seal_crc(out: &mut [u8]) {
    let crc = crc32c::crc32c(&out[CRC_COVERED_FROM..]);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Rebuilds a batch from its kept records (Kafka's `buildRetainedRecordsInto`): same base
/// offset, last offset delta, producer fields, flags and codec; the base timestamp is the
/// delete horizon when there is one, else the first kept record's; each record's timestamp
/// delta is rewritten against it, the rest of the record copied. The second pass: the batch's
/// records are read again and the kept ones streamed into the compressor.
fn rebuild_batch(
    batch: &RecordBatch<'_>,
    kept: &RetainedRecords,
    horizon: Option<i64>,
) -> Result<Vec<u8>, LogError> {
    let h = batch.header();
    let bad = || LogError::CorruptMessage("malformed record in a cleaned batch".into());
    let base_ts = horizon
        .or(kept.first_timestamp)
        .unwrap_or(h.base_timestamp());
    let codec = h.codec().unwrap_or(Codec::None);
    let mut body = CompressWriter::new(codec);
    let mut records = BatchRecords::open(batch)?;
    let mut prefix = Vec::new();
    let mut i = 0;
    while records.has_more()? {
        let r = read_record(&mut records, RecordSink::default(), true).ok_or_else(bad)?;
        let rest = r.body_len - r.prefix_len;
        if kept.contains(i) {
            let ts = h.base_timestamp().wrapping_add(r.timestamp_delta);
            prefix.clear();
            prefix.push(r.attributes as u8);
            put_varint(&mut prefix, ts.wrapping_sub(base_ts));
            put_varint(&mut prefix, r.offset_delta as i64);
            let mut length = Vec::new();
            put_varint(&mut length, (prefix.len() + rest) as i64);
            body.write_all(&length)?;
            body.write_all(&prefix)?;
            records.copy_to(rest, &mut body).ok_or_else(bad)?;
        } else {
            records.skip(rest).ok_or_else(bad)?;
        }
        i += 1;
    }
    let body = body.finish()?;
    let max_ts = if h.timestamp_type() == TimestampType::LogAppendTime {
        h.max_timestamp()
    } else {
        kept.max_timestamp.unwrap_or(base_ts)
    };
    let mut attributes = h.attributes() & !DELETE_HORIZON_BIT;
    if horizon.is_some() {
        attributes |= DELETE_HORIZON_BIT;
    }
    let length = (HEADER_LEN - LOG_OVERHEAD + body.len()) as i32;
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    put_header(
        &mut out,
        &h,
        length,
        attributes,
        base_ts,
        max_ts,
        kept.count as i32,
    );
    out.extend_from_slice(&body);
    seal_crc(&mut out);
    Ok(out)
}

/// Keeps the replaced segments' mtime on the cleaned one (Kafka's `setLastModified`):
/// retention of `compact,delete` logs and `min.compaction.lag.ms` fall back on it.
fn set_mtime(file: &File, ms: i64) -> std::io::Result<()> {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    file.set_modified(t)
}

/// Cleans a log the caller holds directly, with no partition around it (tests, benchmarks):
/// the view at a high watermark of the log end, the clean, and each swap on `log`. `None`
/// when the log is not due and `force` is false.
pub fn clean_in_place(
    cleaner: &mut Cleaner,
    log: &mut super::UnifiedLog,
    checkpoint: Option<i64>,
    now_ms: i64,
    force: bool,
) -> Result<Option<CleanOutcome>, LogError> {
    let view = log.cleaner_view(log.log_end_offset());
    let ltc = cleanable_offsets(&view, checkpoint, now_ms);
    if !force && !ltc.is_due(view.config.min_cleanable_dirty_ratio) {
        return Ok(None);
    }
    let stop = || false;
    let mut swap = |g: &CleanedGroup| log.replace_segments(g, &|| {});
    let mut ctx = CleanContext {
        stop: &stop,
        swap: &mut swap,
    };
    cleaner.clean(&view, &ltc, now_ms, &mut ctx).map(Some)
}

/// Removes `<base>.*.cleaned` (an aborted clean).
pub fn delete_cleaned_files(dir: &Path, base: i64) -> Result<(), LogError> {
    for suffix in SEGMENT_FILE_SUFFIXES {
        remove_if_exists(&suffixed_file(dir, base, suffix, CLEANED_FILE_SUFFIX))?;
    }
    Ok(())
}
