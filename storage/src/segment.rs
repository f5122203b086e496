//! One log segment: `<base>.log` with its `.index`, `.timeindex` and `.txnindex`, named by
//! the 20-digit zero-padded base offset as Kafka names them.
//!
//! The `.log` file is shared as an `Arc<File>` so fetches can read it with positional reads
//! outside the partition lock; appends use positional writes at `size`, so readers that bound
//! themselves by a size snapshot never see a half-written batch.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{batch_size_at, BatchHeader, RecordBatch, HEADER_LEN, LOG_OVERHEAD, MAGIC_V2};
use super::index::{OffsetIndex, OffsetPosition};
use super::time_index::{TimeIndex, TimestampOffset};
use super::txn_index::{TransactionIndex, TXN_INDEX_SUFFIX};
use super::LogError;

/// Suffix of segment data files.
pub const LOG_SUFFIX: &str = ".log";
/// Suffix of offset index files.
pub const INDEX_SUFFIX: &str = ".index";
/// Suffix of time index files.
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// Bytes read per syscall when scanning whole batches (recovery, replay, timestamp search).
pub const SCAN_CHUNK_BYTES: usize = 64 * 1024;
/// Bytes read per syscall when scanning only headers: the fetch path scans at most about
/// index.interval.bytes (4 KiB by default) past an index entry, under the partition lock.
pub const HEADER_SCAN_CHUNK_BYTES: usize = 8 * 1024;
/// The largest batch a scan will buffer. Larger `length` fields are treated as corruption: Kafka
/// caps batches at max.message.bytes, and nothing legitimate comes near this.
pub const MAX_BATCH_BYTES_ON_DISK: usize = 256 * 1024 * 1024;

/// `<dir>/<20-digit base><suffix>`.
pub fn segment_file(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}{suffix}"))
}

/// `<dir>/<20-digit base><suffix><file_suffix>`: a segment file in one of the cleaner's
/// temporary states (`file_suffix` is `.cleaned` or `.swap`, or empty for the final name).
pub fn suffixed_file(dir: &Path, base_offset: i64, suffix: &str, file_suffix: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}{suffix}{file_suffix}"))
}

/// The four files of a segment, the `.log` last: a rename in this order leaves a renamed
/// `.log` only once its indexes are renamed too (the loader relies on it for `.swap`).
pub const SEGMENT_FILE_SUFFIXES: [&str; 4] = [
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LOG_SUFFIX,
];

/// Renames the files of segment `base_offset` from `from` to `to` file suffix (Kafka's
/// `LogSegment.changeFileSuffixes`). A missing index is skipped (an empty `.txnindex` is never
/// created); a missing `.log` is an error. The caller fsyncs the directory.
pub fn rename_segment_files(dir: &Path, base_offset: i64, from: &str, to: &str) -> io::Result<()> {
    for suffix in SEGMENT_FILE_SUFFIXES {
        let src = suffixed_file(dir, base_offset, suffix, from);
        let dst = suffixed_file(dir, base_offset, suffix, to);
        match std::fs::rename(&src, &dst) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound && suffix != LOG_SUFFIX => {
                // No such index: the destination must not keep another segment's index.
                remove_if_exists(&dst)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Removes `path`; a missing file is not an error.
pub fn remove_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The outcome of a step of [`BatchScanner`].
pub enum Scanned<'a> {
    /// A batch starting at `position`; `bytes` holds the whole batch in full mode, otherwise at
    /// least the 61-byte header.
    Batch {
        position: u64,
        size: usize,
        bytes: &'a [u8],
    },
    /// Clean end of the range.
    End,
    /// Bytes at `position` that are not a complete v2 batch (torn write or corruption).
    Invalid { position: u64, reason: String },
}

/// Walks the batches of a log file range with large positional reads. Every length read from disk
/// is checked against the range before it is trusted.
pub struct BatchScanner<'f> {
    file: &'f File,
    position: u64,
    end: u64,
    full: bool,
    buf: Vec<u8>,
    buf_start: u64,
}

impl<'f> BatchScanner<'f> {
    /// Scans `[start, end)`; `full` reads whole batches, otherwise only headers are guaranteed.
    pub fn new(file: &'f File, start: u64, end: u64, full: bool) -> Self {
        BatchScanner {
            file,
            position: start,
            end,
            full,
            buf: Vec::new(),
            buf_start: start,
        }
    }

    /// The position of the next batch.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Makes `[pos, pos+need)` available in the buffer; false if the range ends first.
    fn fill(&mut self, pos: u64, need: usize) -> io::Result<bool> {
        if pos + need as u64 > self.end {
            return Ok(false);
        }
        let have_from = pos.checked_sub(self.buf_start);
        if let Some(off) = have_from {
            if off as usize + need <= self.buf.len() {
                return Ok(true);
            }
        }
        let chunk = if self.full {
            SCAN_CHUNK_BYTES
        } else {
            HEADER_SCAN_CHUNK_BYTES
        };
        let want = need.max(chunk).min((self.end - pos) as usize);
        self.buf.resize(want, 0);
        let mut got = 0;
        while got < want {
            let n = self.file.read_at(&mut self.buf[got..], pos + got as u64)?;
            if n == 0 {
                break;
            }
            got += n;
        }
        self.buf.truncate(got);
        self.buf_start = pos;
        Ok(got >= need)
    }

    /// The next batch, the end, or the first invalid bytes.
    pub fn next_batch(&mut self) -> io::Result<Scanned<'_>> {
        let pos = self.position;
        if pos >= self.end {
            return Ok(Scanned::End);
        }
        if !self.fill(pos, LOG_OVERHEAD)? {
            return Ok(Scanned::Invalid {
                position: pos,
                reason: "partial batch header".into(),
            });
        }
        let off = (pos - self.buf_start) as usize;
        let Some(size) = batch_size_at(&self.buf[off..]) else {
            return Ok(Scanned::Invalid {
                position: pos,
                reason: "batch length too small".into(),
            });
        };
        if size > MAX_BATCH_BYTES_ON_DISK || pos + size as u64 > self.end {
            return Ok(Scanned::Invalid {
                position: pos,
                reason: format!("batch of {size} bytes runs past the end"),
            });
        }
        let need = if self.full { size } else { HEADER_LEN };
        if !self.fill(pos, need)? {
            return Ok(Scanned::Invalid {
                position: pos,
                reason: "short read".into(),
            });
        }
        let off = (pos - self.buf_start) as usize;
        let bytes = &self.buf[off..off + need];
        if bytes[16] as i8 != MAGIC_V2 {
            return Ok(Scanned::Invalid {
                position: pos,
                reason: format!("magic {}", bytes[16] as i8),
            });
        }
        self.position = pos + size as u64;
        Ok(Scanned::Batch {
            position: pos,
            size,
            bytes,
        })
    }
}

/// What a segment knows about one appended batch.
#[derive(Debug, Clone, Copy)]
pub struct AppendedBatch {
    /// The batch's last offset.
    pub last_offset: i64,
    /// Its maxTimestamp (the append time for LogAppendTime).
    pub max_timestamp: i64,
}

/// Result of recovering a segment.
#[derive(Debug, Clone, Copy)]
pub struct RecoveryResult {
    /// Bytes removed from the end of the log file.
    pub truncated_bytes: u64,
    /// The offset after the last valid batch, or `None` if the segment holds no valid batch.
    pub next_offset: Option<i64>,
}

/// One segment of a partition's log.
pub struct LogSegment {
    base_offset: i64,
    dir: PathBuf,
    log: Arc<File>,
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    /// Aborted transactions whose ABORT marker is in this segment.
    txn_index: TransactionIndex,
    index_interval_bytes: u64,
    bytes_since_last_index_entry: u64,
    /// Largest batch maxTimestamp so far, and the last offset of that batch.
    max_timestamp_so_far: TimestampOffset,
    /// The first batch's maxTimestamp; segment.ms counts from it (Kafka's rule).
    rolling_based_timestamp: Option<i64>,
    created_ms: i64,
    /// The offset after the last batch (== base offset while empty).
    next_offset: i64,
}

/// Outcome of opening an existing segment.
pub struct OpenedSegment {
    /// The segment.
    pub segment: LogSegment,
    /// False if an index was missing or failed its sanity check and has to be rebuilt.
    pub indexes_ok: bool,
}

impl LogSegment {
    /// Creates an empty segment (files truncated if they exist).
    pub fn create(
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u64,
        index_max_bytes: u64,
        now_ms: i64,
    ) -> io::Result<LogSegment> {
        Self::create_with_suffix(
            dir,
            base_offset,
            "",
            index_interval_bytes,
            index_max_bytes,
            now_ms,
        )
    }

    /// Creates an empty segment whose files carry `file_suffix` after their usual names, as
    /// the cleaner writes `<base>.log.cleaned` (Kafka's `LogSegment.open` with a file suffix).
    /// Such a segment is written, flushed and dropped; [`rename_segment_files`] moves it.
    pub fn create_with_suffix(
        dir: &Path,
        base_offset: i64,
        file_suffix: &str,
        index_interval_bytes: u64,
        index_max_bytes: u64,
        now_ms: i64,
    ) -> io::Result<LogSegment> {
        let file = |suffix: &str| suffixed_file(dir, base_offset, suffix, file_suffix);
        let log_path = file(LOG_SUFFIX);
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&log_path)?;
        let idx_path = file(INDEX_SUFFIX);
        let tidx_path = file(TIME_INDEX_SUFFIX);
        let _ = std::fs::remove_file(&idx_path);
        let _ = std::fs::remove_file(&tidx_path);
        let (offset_index, _) = OffsetIndex::open(&idx_path, base_offset, index_max_bytes, 0)?;
        let (time_index, _) =
            TimeIndex::open(&tidx_path, base_offset, index_max_bytes, base_offset)?;
        let txn_index = TransactionIndex::create(file(TXN_INDEX_SUFFIX))?;
        Ok(LogSegment {
            base_offset,
            dir: dir.to_path_buf(),
            log: Arc::new(log),
            size: 0,
            offset_index,
            time_index,
            txn_index,
            index_interval_bytes,
            bytes_since_last_index_entry: 0,
            max_timestamp_so_far: TimestampOffset {
                timestamp: -1,
                offset: base_offset,
            },
            rolling_based_timestamp: None,
            created_ms: now_ms,
            next_offset: base_offset,
        })
    }

    /// Opens an existing segment without a full scan: indexes are loaded and checked, and only
    /// the bytes after the last offset index entry are walked to find the next offset and the
    /// largest timestamp. Any invalid bytes found there are reported by `indexes_ok = false`
    /// so the caller recovers the segment.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u64,
        index_max_bytes: u64,
        now_ms: i64,
    ) -> io::Result<OpenedSegment> {
        let log_path = segment_file(dir, base_offset, LOG_SUFFIX);
        let log = OpenOptions::new().read(true).write(true).open(&log_path)?;
        let size = log.metadata()?.len();
        let idx_path = segment_file(dir, base_offset, INDEX_SUFFIX);
        let tidx_path = segment_file(dir, base_offset, TIME_INDEX_SUFFIX);
        let idx_existed = idx_path.exists();
        let tidx_existed = tidx_path.exists();
        let (offset_index, idx_ok) =
            OffsetIndex::open(&idx_path, base_offset, index_max_bytes, size)?;
        // Bound for the time index check is not known yet; check it after the tail scan.
        let created_ms = modified_ms(&log).unwrap_or(now_ms);
        let (time_index, _) = TimeIndex::open(&tidx_path, base_offset, index_max_bytes, i64::MAX)?;
        let (txn_index, txn_idx_ok) = TransactionIndex::open(
            segment_file(dir, base_offset, TXN_INDEX_SUFFIX),
            base_offset,
        )?;
        let mut seg = LogSegment {
            base_offset,
            dir: dir.to_path_buf(),
            log: Arc::new(log),
            size,
            offset_index,
            time_index,
            txn_index,
            index_interval_bytes,
            bytes_since_last_index_entry: 0,
            max_timestamp_so_far: TimestampOffset {
                timestamp: -1,
                offset: base_offset,
            },
            rolling_based_timestamp: None,
            created_ms,
            next_offset: base_offset,
        };
        let files_ok =
            idx_ok && txn_idx_ok && (idx_existed || size == 0) && (tidx_existed || size == 0);
        if let Some(last) = seg.time_index.last_entry() {
            seg.max_timestamp_so_far = last;
        }
        let tail_ok = seg.scan_tail()?;
        if seg.rolling_based_timestamp.is_none() && size > 0 {
            seg.rolling_based_timestamp = seg.first_batch_max_timestamp()?;
        }
        let ok = files_ok && tail_ok && seg.indexes_end_within_log();
        Ok(OpenedSegment {
            segment: seg,
            indexes_ok: ok,
        })
    }

    /// Walks the batches after the last offset index entry, setting the next offset, the
    /// bytes since that entry, the largest timestamp and (when the walk starts at the
    /// segment's first batch) the timestamp `segment.ms` rolls by. False when the tail holds
    /// invalid bytes or a batch whose offsets do not belong here.
    fn scan_tail(&mut self) -> io::Result<bool> {
        let start = self.offset_index.last_entry();
        let mut next_offset = if start.position == 0 {
            self.base_offset
        } else {
            start.offset + 1
        };
        let mut first = start.position == 0;
        let mut scanner = BatchScanner::new(&self.log, start.position as u64, self.size, false);
        let mut tail_bytes = 0u64;
        let mut ok = true;
        loop {
            match scanner.next_batch()? {
                Scanned::Batch {
                    size: bsize, bytes, ..
                } => {
                    let h = BatchHeader::new(bytes).expect("scanner returns whole headers");
                    if first {
                        self.rolling_based_timestamp = Some(h.max_timestamp());
                        first = false;
                    }
                    if h.base_offset() < self.base_offset || h.last_offset() < h.base_offset() {
                        ok = false;
                        break;
                    }
                    if h.max_timestamp() > self.max_timestamp_so_far.timestamp {
                        self.max_timestamp_so_far = TimestampOffset {
                            timestamp: h.max_timestamp(),
                            offset: h.last_offset(),
                        };
                    }
                    next_offset = h.next_offset();
                    tail_bytes += bsize as u64;
                }
                Scanned::End => break,
                Scanned::Invalid { .. } => {
                    ok = false;
                    break;
                }
            }
        }
        self.next_offset = next_offset;
        self.bytes_since_last_index_entry = tail_bytes;
        Ok(ok)
    }

    /// The first batch's max timestamp, read from its header (for `segment.ms`).
    fn first_batch_max_timestamp(&self) -> io::Result<Option<i64>> {
        let mut scanner = BatchScanner::new(&self.log, 0, self.size, false);
        Ok(match scanner.next_batch()? {
            Scanned::Batch { bytes, .. } => BatchHeader::new(bytes).map(|h| h.max_timestamp()),
            _ => None,
        })
    }

    /// Whether the time and transaction indexes end at offsets the log holds: an entry past
    /// the next offset is for a batch or a marker the log lost.
    fn indexes_end_within_log(&self) -> bool {
        let next_offset = self.next_offset;
        if let Some(last) = self.time_index.last_entry() {
            if last.offset >= next_offset.max(self.base_offset + 1) {
                return false;
            }
        }
        self.txn_index
            .entries()
            .last()
            .is_none_or(|t| t.last_offset < next_offset)
    }

    /// The first offset this segment may hold.
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    /// Bytes in the `.log` file.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// The offset after the last batch (the base offset if empty).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    /// Whether no batch was appended.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    /// Shared handle to the `.log` file for lock-free positional reads.
    pub fn log_file(&self) -> &Arc<File> {
        &self.log
    }
    /// The largest timestamp so far and the last offset of its batch.
    pub fn max_timestamp_so_far(&self) -> TimestampOffset {
        self.max_timestamp_so_far
    }
    /// The timestamp retention compares: the largest record timestamp, or the creation/mtime if
    /// the segment has none (Kafka uses the file's last-modified time then).
    pub fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp_so_far.timestamp >= 0 {
            self.max_timestamp_so_far.timestamp
        } else {
            self.created_ms
        }
    }
    /// Number of offset index entries.
    pub fn offset_index_entries(&self) -> usize {
        self.offset_index.len()
    }
    /// Number of time index entries.
    pub fn time_index_entries(&self) -> usize {
        self.time_index.len()
    }
    /// The first batch's maxTimestamp, if known (max.compaction.lag.ms counts from it, as
    /// Kafka's `getFirstBatchTimestampForSegments`).
    pub fn first_batch_timestamp(&self) -> Option<i64> {
        self.rolling_based_timestamp
    }
    /// The `.log` file's last-modified time in ms (Kafka's `LogSegment.lastModified`).
    pub fn last_modified_ms(&self) -> i64 {
        self.log
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(self.created_ms, |d| d.as_millis() as i64)
    }

    /// Kafka's `shouldRoll`: size, age (segment.ms from the first batch's timestamp), full
    /// indexes, or an offset that no longer fits a u32 relative offset.
    pub fn should_roll(
        &self,
        batch_size: usize,
        batch_max_timestamp: i64,
        batch_last_offset: i64,
        segment_bytes: u64,
        segment_ms: i64,
        now_ms: i64,
    ) -> bool {
        if self.is_empty() {
            return false;
        }
        let waited_ms = match self.rolling_based_timestamp {
            Some(ts) if ts >= 0 => batch_max_timestamp.saturating_sub(ts),
            _ => now_ms.saturating_sub(self.created_ms),
        };
        self.size + batch_size as u64 > segment_bytes
            || waited_ms > segment_ms
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || batch_last_offset - self.base_offset > u32::MAX as i64
    }

    /// Appends one batch that already carries its final offsets. Updates the sparse indexes
    /// every `index.interval.bytes`, as Kafka does: the entry maps the batch's last offset to
    /// the batch's start position.
    pub fn append(&mut self, bytes: &[u8], info: AppendedBatch) -> io::Result<()> {
        self.check_offsets(bytes, info);
        let position = self.size;
        self.log.write_all_at(bytes, position)?;
        self.after_write(bytes.len() as u64, position, info)
    }

    /// Appends a batch given as a patched header followed by the untouched rest of the batch:
    /// two writes and no copy of the body.
    pub fn append_parts(
        &mut self,
        header: &[u8],
        body: &[u8],
        info: AppendedBatch,
    ) -> io::Result<()> {
        self.check_offsets(header, info);
        let position = self.size;
        self.log.write_all_at(header, position)?;
        self.log
            .write_all_at(body, position + header.len() as u64)?;
        self.after_write((header.len() + body.len()) as u64, position, info)
    }

    /// A batch starts at or after this segment's next offset (at it on a leader; a compacted
    /// leader's follower may see a gap) and ends at or after its start, as Kafka's
    /// `LogSegment.append` and `UnifiedLog`'s offset checks require; asserted in release
    /// builds too, before anything is written. `header` begins with the batch's base offset.
    fn check_offsets(&self, header: &[u8], info: AppendedBatch) {
        let base = header
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(i64::from_be_bytes);
        assert!(
            base.is_some_and(|b| b >= self.next_offset && b <= info.last_offset),
            "batch offsets {base:?}..={} do not continue segment {} at {}",
            info.last_offset,
            self.base_offset,
            self.next_offset
        );
    }

    fn after_write(&mut self, len: u64, position: u64, info: AppendedBatch) -> io::Result<()> {
        if self.rolling_based_timestamp.is_none() {
            self.rolling_based_timestamp = Some(info.max_timestamp);
        }
        if info.max_timestamp > self.max_timestamp_so_far.timestamp {
            self.max_timestamp_so_far = TimestampOffset {
                timestamp: info.max_timestamp,
                offset: info.last_offset,
            };
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            self.offset_index
                .append(info.last_offset, position as u32)?;
            self.time_index.maybe_append(
                self.max_timestamp_so_far.timestamp,
                self.max_timestamp_so_far.offset,
            )?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += len;
        self.size = position + len;
        self.next_offset = info.last_offset + 1;
        Ok(())
    }

    /// Called when this segment stops being the active one: Kafka writes a final time index
    /// entry so the largest timestamp is known without a scan at the next start.
    pub fn on_become_inactive(&mut self) -> io::Result<()> {
        if self.max_timestamp_so_far.timestamp >= 0 {
            self.time_index.maybe_append(
                self.max_timestamp_so_far.timestamp,
                self.max_timestamp_so_far.offset,
            )?;
        }
        Ok(())
    }

    /// The position of the batch that contains `offset` (or the first batch after it), and that
    /// batch's size and header. `None` if every batch here ends before `offset`.
    pub fn find_batch(&self, offset: i64) -> io::Result<Option<(u64, usize)>> {
        let start = self.offset_index.lookup(offset);
        self.find_batch_from(offset, start)
    }

    fn find_batch_from(
        &self,
        offset: i64,
        start: OffsetPosition,
    ) -> io::Result<Option<(u64, usize)>> {
        let mut scanner = BatchScanner::new(&self.log, start.position as u64, self.size, false);
        loop {
            match scanner.next_batch()? {
                Scanned::Batch {
                    position,
                    size,
                    bytes,
                } => {
                    let h = BatchHeader::new(bytes).expect("whole header");
                    if h.last_offset() >= offset {
                        return Ok(Some((position, size)));
                    }
                }
                Scanned::End | Scanned::Invalid { .. } => return Ok(None),
            }
        }
    }

    /// Calls `f` with each whole batch from the one containing `from_offset` to the end; `f`
    /// returns false to stop. Invalid bytes end the walk.
    pub fn for_each_batch_from<F>(&self, from_offset: i64, mut f: F) -> Result<(), LogError>
    where
        F: FnMut(u64, RecordBatch<'_>) -> Result<bool, LogError>,
    {
        let Some((start, _)) = self.find_batch(from_offset)? else {
            return Ok(());
        };
        self.for_each_batch_at(start, &mut f)
    }

    /// Like [`Self::for_each_batch_from`], starting at the batch whose maxTimestamp-so-far
    /// entry in the time index is the last one below `timestamp`.
    pub fn for_each_batch_from_timestamp<F>(&self, timestamp: i64, mut f: F) -> Result<(), LogError>
    where
        F: FnMut(u64, RecordBatch<'_>) -> Result<bool, LogError>,
    {
        let below = self.time_index.lookup_below(timestamp);
        let start = self.offset_index.lookup(below.offset);
        self.for_each_batch_at(start.position as u64, &mut f)
    }

    fn for_each_batch_at<F>(&self, start: u64, f: &mut F) -> Result<(), LogError>
    where
        F: FnMut(u64, RecordBatch<'_>) -> Result<bool, LogError>,
    {
        let mut scanner = BatchScanner::new(&self.log, start, self.size, true);
        loop {
            match scanner.next_batch()? {
                Scanned::Batch {
                    position, bytes, ..
                } => {
                    let (batch, _) = RecordBatch::parse(bytes)?;
                    if !f(position, batch)? {
                        return Ok(());
                    }
                }
                Scanned::End | Scanned::Invalid { .. } => return Ok(()),
            }
        }
    }

    /// Rebuilds both indexes and the in-memory state from the `.log` file, checking each batch's
    /// CRC and offsets, and truncates the file at the first invalid batch (a torn tail).
    /// `expected_first_offset` is where the first batch may start at the earliest (the previous
    /// segment's end), if known.
    /// The aborted transaction index is emptied; the caller rebuilds it by replaying markers
    /// through the producer state (it needs the transactions begun in earlier segments).
    pub fn recover(&mut self, expected_first_offset: Option<i64>) -> io::Result<RecoveryResult> {
        self.offset_index.reset()?;
        self.time_index.reset()?;
        self.txn_index.reset()?;
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp_so_far = TimestampOffset {
            timestamp: -1,
            offset: self.base_offset,
        };
        self.rolling_based_timestamp = None;
        let file_size = self.log.metadata()?.len();
        let log = Arc::clone(&self.log);
        let mut scanner = BatchScanner::new(&log, 0, file_size, true);
        let mut valid_end = 0u64;
        let mut expected = expected_first_offset;
        let mut next_offset = None;
        self.size = 0;
        self.next_offset = self.base_offset;
        while let Scanned::Batch {
            position, bytes, ..
        } = scanner.next_batch()?
        {
            let Ok((batch, _)) = RecordBatch::parse(bytes) else {
                break;
            };
            let h = batch.header();
            let offsets_ok = h.base_offset() >= self.base_offset
                && h.last_offset_delta() >= 0
                && h.last_offset() - self.base_offset <= u32::MAX as i64
                // A cleaned log has gaps between batches (Kafka's `LogSegment.recover` does
                // not ask for dense offsets), so a batch may start past the previous end.
                && expected.is_none_or(|e| h.base_offset() >= e);
            if !offsets_ok || !batch.is_crc_valid() {
                break;
            }
            let info = AppendedBatch {
                last_offset: h.last_offset(),
                max_timestamp: h.max_timestamp(),
            };
            // Same indexing rule as append, without rewriting the data.
            self.after_write(bytes.len() as u64, position, info)?;
            valid_end = position + bytes.len() as u64;
            expected = Some(h.next_offset());
            next_offset = Some(h.next_offset());
        }
        let truncated_bytes = file_size - valid_end;
        if truncated_bytes > 0 {
            self.log.set_len(valid_end)?;
        }
        self.size = valid_end;
        Ok(RecoveryResult {
            truncated_bytes,
            next_offset,
        })
    }

    /// Removes every batch at or after `offset`; returns the bytes removed. `offset` must be at
    /// a batch boundary or inside a batch (the whole batch goes).
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<u64> {
        let cut = match self.find_batch(offset)? {
            Some((pos, _)) => pos,
            None => return Ok(0),
        };
        let removed = self.size - cut;
        self.log.set_len(cut)?;
        self.size = cut;
        self.offset_index.truncate_to_position(cut)?;
        self.time_index.truncate_to(offset)?;
        self.txn_index.truncate_to(offset)?;
        // Recompute what depends on the removed tail.
        self.max_timestamp_so_far = TimestampOffset {
            timestamp: -1,
            offset: self.base_offset,
        };
        self.next_offset = self.base_offset;
        self.rolling_based_timestamp = None;
        let mut scanner = BatchScanner::new(&self.log, 0, self.size, false);
        let mut last_indexed_pos = self.offset_index.last_entry().position as u64;
        if self.offset_index.is_empty() {
            last_indexed_pos = 0;
        }
        let mut since = 0u64;
        while let Scanned::Batch {
            position,
            size,
            bytes,
        } = scanner.next_batch()?
        {
            let h = BatchHeader::new(bytes).expect("whole header");
            if self.rolling_based_timestamp.is_none() {
                self.rolling_based_timestamp = Some(h.max_timestamp());
            }
            if h.max_timestamp() > self.max_timestamp_so_far.timestamp {
                self.max_timestamp_so_far = TimestampOffset {
                    timestamp: h.max_timestamp(),
                    offset: h.last_offset(),
                };
            }
            self.next_offset = h.next_offset();
            if position >= last_indexed_pos {
                since += size as u64;
            }
        }
        self.bytes_since_last_index_entry = since;
        Ok(removed)
    }

    /// fsync the log and its indexes.
    pub fn flush(&self) -> io::Result<()> {
        self.log.sync_all()?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()
    }

    /// Second handles on every file [`LogSegment::flush`] syncs, to sync them later without
    /// holding the segment (the flush a roll leaves to a background task).
    pub fn sync_handles(&self) -> io::Result<Vec<File>> {
        let mut files = vec![
            self.log.try_clone()?,
            self.offset_index.try_clone_file()?,
            self.time_index.try_clone_file()?,
        ];
        files.extend(self.txn_index.try_clone_file()?);
        Ok(files)
    }

    /// The aborted transaction index.
    pub fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }

    /// The aborted transaction index, for appends and rebuilds.
    pub fn txn_index_mut(&mut self) -> &mut TransactionIndex {
        &mut self.txn_index
    }

    /// Deletes the files of this segment.
    pub fn delete_files(&self) -> io::Result<()> {
        for suffix in [
            LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
        ] {
            match std::fs::remove_file(segment_file(&self.dir, self.base_offset, suffix)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The file's modification time in ms since the epoch, when the file system has one.
fn modified_ms(file: &File) -> Option<i64> {
    file.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
}
