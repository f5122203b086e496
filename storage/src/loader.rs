//! Opening a partition directory and crash recovery (Kafka's `LogLoader`).
//!
//! The caller tells us whether the last shutdown was clean (it owns the marker file).
//! - Always: finish the cleaner's interrupted swaps (a `<base>.log.swap` replaces the segments
//!   it overlaps and is then recovered), delete leftover `.deleted`, `.cleaned`, `.swap` and
//!   `.tmp` files and indexes without a log, and rebuild any index that is missing or fails its
//!   sanity check (indexes are derived data).
//! - After an unclean shutdown: recover every segment from the recovery point on (the segment
//!   holding it and all later ones; the caller reads it from the log directory's
//!   `recovery-point-offset-checkpoint`), checking each batch's CRC and offsets, rebuilding the
//!   indexes, truncating at the first invalid batch and deleting the segments after it.
//!   Segments wholly below the recovery point were fsynced and are only opened.
//! - Then rebuild producer state from the newest snapshot, replaying the batches after it. The
//!   aborted transaction indexes (`.txnindex`) of recovered segments are rebuilt by the same
//!   replay, from the producer state as of the first recovered segment (a transaction aborted
//!   there may have begun in an earlier segment), as Kafka's `LogSegment.recover` does.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use super::batch::BatchHeader;
use super::batch::RecordBatch;
use super::control::parse_end_txn_marker;
use super::producer_state::{delete_snapshots_after, CompletedTxn, ProducerStateManager};
use super::segment::{
    remove_if_exists, rename_segment_files, segment_file, suffixed_file, BatchScanner, LogSegment,
    OpenedSegment, Scanned, INDEX_SUFFIX, LOG_SUFFIX, SEGMENT_FILE_SUFFIXES, TIME_INDEX_SUFFIX,
};
use super::txn_index::TXN_INDEX_SUFFIX;
use super::{LogConfig, LogError};

/// Suffixes of files left behind by interrupted operations.
const JUNK_SUFFIXES: [&str; 4] = [".deleted", ".cleaned", ".swap", ".tmp"];
/// Per-partition checkpoint files of earlier Brook versions; the log directory's
/// [`super::checkpoint`] files replace them, and loading removes them.
const LEGACY_CHECKPOINT_FILES: [&str; 2] = ["log-start-offset", "recovery-point"];

/// What the log directory's checkpoints hold for one partition; `None` where they have no
/// entry for it (a new partition, or a lost or damaged checkpoint file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogCheckpoints {
    /// Everything below it was fsynced: recovery after a crash starts at its segment.
    pub recovery_point: Option<i64>,
    /// The log start offset.
    pub log_start_offset: Option<i64>,
}

/// fsync a directory so created, renamed and deleted entries survive a crash.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

fn parse_base(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Suffix of a segment file the cleaner is writing (Kafka's `LogFileUtils.CLEANED_FILE_SUFFIX`).
pub const CLEANED_FILE_SUFFIX: &str = ".cleaned";
/// Suffix of a cleaned segment about to replace the segments it was made from (Kafka's
/// `SWAP_FILE_SUFFIX`).
pub const SWAP_FILE_SUFFIX: &str = ".swap";

/// Finishes the cleaner's interrupted swaps, as Kafka's `LogLoader` does: a `<base>.log.swap`
/// is a complete cleaned segment (it is renamed only after being flushed), so the segments it
/// overlaps go and it takes its final name. `.cleaned` files are left for [`clean_dir`] to
/// delete: the segments they were made from are all still there. Returns the swapped bases,
/// which the caller recovers (their indexes may be missing).
fn complete_swaps(dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut swaps = Vec::new();
    let mut logs = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(base) = name
            .strip_suffix(SWAP_FILE_SUFFIX)
            .and_then(|n| parse_base(n, LOG_SUFFIX))
        {
            swaps.push(base);
        } else if let Some(base) = parse_base(name, LOG_SUFFIX) {
            logs.push(base);
        }
    }
    swaps.sort_unstable();
    for &base in &swaps {
        let Some(next) = swap_next_offset(dir, base)? else {
            // Bytes but not one whole batch: not a segment the cleaner flushed; junk for
            // `clean_dir`. (An empty one is: every record of its group went.)
            continue;
        };
        for &old in logs.iter().filter(|&&b| b > base && b < next) {
            tracing::info!(
                base = old,
                "deleting a segment a cleaned .swap segment replaces"
            );
            for suffix in SEGMENT_FILE_SUFFIXES {
                remove_if_exists(&segment_file(dir, old, suffix))?;
            }
        }
        tracing::info!(base, "completing an interrupted swap of a cleaned segment");
        rename_segment_files(dir, base, SWAP_FILE_SUFFIX, "")?;
    }
    if !swaps.is_empty() {
        fsync_dir(dir)?;
    }
    Ok(swaps)
}

/// The offset after the last whole batch of `<base>.log.swap`: `base` for an empty file,
/// `None` for bytes that hold no whole batch.
fn swap_next_offset(dir: &Path, base: i64) -> Result<Option<i64>, LogError> {
    let file = fs::File::open(suffixed_file(dir, base, LOG_SUFFIX, SWAP_FILE_SUFFIX))?;
    let size = file.metadata()?.len();
    let mut scanner = BatchScanner::new(&file, 0, size, false);
    let mut next = (size == 0).then_some(base);
    while let Scanned::Batch { bytes, .. } = scanner.next_batch()? {
        if let Some(h) = BatchHeader::new(bytes) {
            next = Some(h.next_offset());
        }
    }
    Ok(next)
}

/// Deletes junk files and orphan indexes; returns the base offsets of the `.log` files.
fn clean_dir(dir: &Path) -> io::Result<Vec<i64>> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if JUNK_SUFFIXES.iter().any(|s| name.ends_with(s))
            || LEGACY_CHECKPOINT_FILES.contains(&name)
        {
            // Interrupted swaps were completed before this (`complete_swaps`): what is left
            // is a clean that had not finished, or index files of a swap already done.
            tracing::info!(file = name, "deleting leftover file");
            fs::remove_file(e.path())?;
        } else if let Some(base) = parse_base(name, LOG_SUFFIX) {
            logs.push(base);
        } else if let Some(base) = parse_base(name, INDEX_SUFFIX)
            .or_else(|| parse_base(name, TIME_INDEX_SUFFIX))
            .or_else(|| parse_base(name, TXN_INDEX_SUFFIX))
        {
            indexes.push((base, e.path()));
        }
    }
    logs.sort_unstable();
    for (base, path) in indexes {
        if logs.binary_search(&base).is_err() {
            fs::remove_file(path)?;
        }
    }
    Ok(logs)
}

/// What loading produced.
pub struct Loaded {
    /// Segments by base offset; never empty.
    pub segments: BTreeMap<i64, LogSegment>,
    /// The log start offset.
    pub log_start_offset: i64,
    /// The log end offset.
    pub log_end_offset: i64,
    /// The recovery point.
    pub recovery_point: i64,
    /// Producer state as of the log end offset.
    pub producer_state: ProducerStateManager,
}

/// Opens or creates the partition directory and recovers it as needed, in the steps of
/// Kafka's `LogLoader.load`: swap files completed, stray files removed, segments opened and
/// recovered, a first segment created for an empty log, then the producer state loaded.
pub fn load(
    dir: &Path,
    config: &LogConfig,
    had_clean_shutdown: bool,
    checkpoints: LogCheckpoints,
    now_ms: i64,
) -> Result<Loaded, LogError> {
    fs::create_dir_all(dir)?;
    let swapped = complete_swaps(dir)?;
    let bases = clean_dir(dir)?;
    let lso_checkpoint = checkpoints.log_start_offset;
    let recovery_point = checkpoints.recovery_point.unwrap_or(0);
    let opener = SegmentOpener {
        dir,
        config,
        now_ms,
    };
    let mut recovered =
        opener.recover_segments(&bases, had_clean_shutdown, recovery_point, &swapped)?;
    let segments = &mut recovered.segments;
    if segments.is_empty() {
        let base = lso_checkpoint.unwrap_or(0).max(0);
        segments.insert(base, opener.create(base)?);
        fsync_dir(dir)?;
    } else if recovered.truncated_at.is_some() {
        fsync_dir(dir)?;
    }

    let (&first_base, _) = segments.iter().next().expect("at least one segment");
    let log_end_offset = segments
        .values()
        .next_back()
        .expect("at least one segment")
        .next_offset();
    let log_start_offset = lso_checkpoint
        .unwrap_or(first_base)
        .max(first_base)
        .min(log_end_offset);
    let recovery_point = recovery_point.min(log_end_offset);
    let producer_state = load_producer_state(
        dir,
        segments,
        recovered.first_recovered,
        log_start_offset,
        log_end_offset,
    )?;
    Ok(Loaded {
        segments: recovered.segments,
        log_start_offset,
        log_end_offset,
        recovery_point,
        producer_state,
    })
}

/// Opens a partition directory's segments with its log's settings.
struct SegmentOpener<'a> {
    dir: &'a Path,
    config: &'a LogConfig,
    now_ms: i64,
}

/// The segments [`SegmentOpener::recover_segments`] kept.
struct RecoveredSegments {
    /// By base offset; empty when the directory had none.
    segments: BTreeMap<i64, LogSegment>,
    /// The next offset of a segment whose end was torn; every later segment was deleted.
    truncated_at: Option<i64>,
    /// The first segment whose indexes recovery rebuilt: its `.txnindex` and every later
    /// one's are rebuilt from the producer state at its base.
    first_recovered: Option<i64>,
}

impl SegmentOpener<'_> {
    fn open(&self, base: i64) -> io::Result<OpenedSegment> {
        LogSegment::open(
            self.dir,
            base,
            self.config.index_interval_bytes,
            self.config.segment_index_bytes,
            self.now_ms,
        )
    }

    fn create(&self, base: i64) -> io::Result<LogSegment> {
        LogSegment::create(
            self.dir,
            base,
            self.config.index_interval_bytes,
            self.config.segment_index_bytes,
            self.now_ms,
        )
    }

    /// Opens the segments at `bases` and recovers (Kafka's `LogLoader.recoverLog` and
    /// `recoverSegment`) those that may hold unflushed data (after an unclean shutdown, from
    /// `recovery_point` on), whose indexes are in doubt, or that a swap just completed.
    fn recover_segments(
        &self,
        bases: &[i64],
        had_clean_shutdown: bool,
        recovery_point: i64,
        swapped: &[i64],
    ) -> Result<RecoveredSegments, LogError> {
        let mut kept = RecoveredSegments {
            segments: BTreeMap::new(),
            truncated_at: None,
            first_recovered: None,
        };
        let mut expected_next: Option<i64> = None;
        for (i, &base) in bases.iter().enumerate() {
            if kept.truncated_at.is_some() {
                // Everything after a torn segment is unflushed data from after the tear.
                tracing::warn!(base, "deleting segment after a truncated one");
                self.open(base)?.segment.delete_files()?;
                continue;
            }
            let next_base = bases.get(i + 1).copied();
            let opened = self.open(base)?;
            let mut seg = opened.segment;
            // A segment needs recovery if it may hold unflushed data or its indexes are in doubt.
            let unflushed = !had_clean_shutdown && next_base.is_none_or(|nb| nb > recovery_point);
            if unflushed || !opened.indexes_ok || swapped.contains(&base) {
                kept.first_recovered.get_or_insert(base);
                let result = seg.recover(expected_next)?;
                if result.truncated_bytes > 0 {
                    tracing::warn!(
                        base,
                        bytes = result.truncated_bytes,
                        "truncated invalid bytes at the end of a segment"
                    );
                    kept.truncated_at = Some(seg.next_offset());
                }
                if seg.is_empty() && next_base.is_some() && kept.truncated_at.is_none() && i > 0 {
                    // An empty segment in the middle is impossible in a healthy log; drop it.
                    seg.delete_files()?;
                    continue;
                }
            }
            expected_next = Some(seg.next_offset());
            kept.segments.insert(base, seg);
        }
        Ok(kept)
    }
}

/// Producer state as of the log end offset (Kafka's `UnifiedLog.rebuildProducerState` when
/// the log is loaded). When recovery rebuilt segments from `first_recovered` on, their
/// transaction indexes are rebuilt too, by a replay from that segment's base.
fn load_producer_state(
    dir: &Path,
    segments: &mut BTreeMap<i64, LogSegment>,
    first_recovered: Option<i64>,
    log_start_offset: i64,
    log_end_offset: i64,
) -> Result<ProducerStateManager, LogError> {
    Ok(match first_recovered {
        None => rebuild_producer_state(dir, segments, log_start_offset, log_end_offset)?,
        Some(from) => {
            let mut state = rebuild_producer_state(dir, segments, log_start_offset, from)?;
            for seg in segments.range_mut(from..).map(|(_, s)| s) {
                seg.txn_index_mut().reset()?;
            }
            replay(&mut state, segments, from, log_end_offset, true)?;
            state.advance_to(log_end_offset);
            state
        }
    })
}

/// Producer state as of `end_offset`: the newest usable snapshot at or below it plus a replay
/// of the batches after it, up to `end_offset`. Snapshots past it are deleted (they describe
/// truncated data, or data the caller replays itself).
pub fn rebuild_producer_state(
    dir: &Path,
    segments: &mut BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    end_offset: i64,
) -> Result<ProducerStateManager, LogError> {
    delete_snapshots_after(dir, end_offset)?;
    let first_base = segments.keys().next().copied().unwrap_or(log_start_offset);
    let mut state = match ProducerStateManager::load_latest_snapshot(dir, i64::MIN, end_offset)? {
        Some(s) => s,
        None => {
            let mut s = ProducerStateManager::new();
            s.reset(first_base);
            s
        }
    };
    let start = state.map_end_offset().max(first_base);
    replay(&mut state, segments, start, end_offset, false)?;
    state.advance_to(end_offset);
    Ok(state)
}

/// Replays the stored batches with base offsets in `[from, to)` into `state`. With
/// `rebuild_txn_index`, each transaction an ABORT marker ends gets its entry in the
/// `.txnindex` of the segment holding the marker (whose index the caller emptied).
fn replay(
    state: &mut ProducerStateManager,
    segments: &mut BTreeMap<i64, LogSegment>,
    from: i64,
    to: i64,
    rebuild_txn_index: bool,
) -> Result<(), LogError> {
    for seg in segments.values_mut() {
        if seg.next_offset() <= from || seg.base_offset() >= to {
            continue;
        }
        let mut aborted = Vec::new();
        seg.for_each_batch_from(from, |_, batch| {
            let base = batch.header().base_offset();
            if base >= to {
                return Ok(false);
            }
            if base >= from {
                if let Some(txn) = apply_to_producer_state(state, &batch) {
                    if txn.is_aborted {
                        aborted.push(txn.aborted_txn());
                    }
                }
            }
            Ok(true)
        })?;
        if rebuild_txn_index {
            for txn in aborted {
                seg.txn_index_mut().append(txn)?;
            }
        }
    }
    Ok(())
}

/// Replays one stored batch into producer state without sequence checks (recovery and
/// followers). Returns the transaction a COMMIT or ABORT marker ended, if any.
pub fn apply_to_producer_state(
    state: &mut ProducerStateManager,
    batch: &RecordBatch<'_>,
) -> Option<CompletedTxn> {
    let h = batch.header();
    if !h.has_producer_id() {
        state.advance_to(h.next_offset());
        return None;
    }
    if h.is_control() {
        // Only coordinators write control batches, and their markers are checked then; a
        // control batch of another kind (or unreadable) ends nothing.
        let Some(marker) = parse_end_txn_marker(batch).ok().flatten() else {
            state.advance_to(h.next_offset());
            return None;
        };
        return state.append_marker(
            h.producer_id(),
            h.producer_epoch(),
            marker,
            h.base_offset(),
            h.max_timestamp(),
        );
    }
    state.update(
        h.producer_id(),
        h.producer_epoch(),
        h.base_sequence(),
        h.last_sequence(),
        h.base_offset(),
        h.last_offset(),
        h.max_timestamp(),
        h.is_transactional(),
    );
    None
}
