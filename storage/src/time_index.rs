//! The sparse time index of one segment (`<base>.timeindex`), in Kafka's format: 12-byte entries
//! of big-endian i64 timestamp and u32 offset relative to the segment base.
//!
//! Each entry records the largest timestamp seen so far in the segment and the offset (the last
//! offset of the batch) where it was seen, so timestamps in the index never decrease. Like the
//! offset index, entries live in a `Vec` and are appended to the file one at a time.

use std::io;
use std::path::Path;

use super::index_file::IndexFile;

/// Bytes per time index entry.
pub const TIME_INDEX_ENTRY_BYTES: u64 = 12;

/// A timestamp and the offset it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// Milliseconds since the epoch.
    pub timestamp: i64,
    /// Absolute offset.
    pub offset: i64,
}

/// The time index of one segment.
pub struct TimeIndex {
    file: IndexFile,
    base_offset: i64,
    /// (timestamp, relative offset); timestamps strictly increase, offsets do not decrease.
    entries: Vec<(i64, u32)>,
    max_entries: usize,
}

impl TimeIndex {
    /// Opens (or creates) the time index. The bool is false when the file failed the sanity
    /// check; the index is then emptied for the caller to rebuild.
    pub fn open(
        path: &Path,
        base_offset: i64,
        max_index_bytes: u64,
        next_offset_bound: i64,
    ) -> io::Result<(TimeIndex, bool)> {
        let max_entries = (max_index_bytes / TIME_INDEX_ENTRY_BYTES).max(2) as usize;
        // One extra entry is allowed past max: the final entry written when a segment rolls.
        let (file, contents) =
            IndexFile::open(path, TIME_INDEX_ENTRY_BYTES, max_entries as u64 + 1)?;
        let mut index = TimeIndex {
            file,
            base_offset,
            entries: Vec::new(),
            max_entries,
        };
        let ok = contents.is_some_and(|buf| index.load(&buf, next_offset_bound));
        if !ok {
            index.reset()?;
        }
        Ok((index, ok))
    }

    fn load(&mut self, buf: &[u8], next_offset_bound: i64) -> bool {
        for chunk in buf.chunks_exact(TIME_INDEX_ENTRY_BYTES as usize) {
            let mut t = [0u8; 8];
            t.copy_from_slice(&chunk[..8]);
            let ts = i64::from_be_bytes(t);
            let rel = u32::from_be_bytes([chunk[8], chunk[9], chunk[10], chunk[11]]);
            if let Some(&(prev_ts, prev_rel)) = self.entries.last() {
                if ts <= prev_ts || rel < prev_rel {
                    return false;
                }
            }
            if self.base_offset + rel as i64 >= next_offset_bound.max(self.base_offset + 1) {
                return false;
            }
            self.entries.push((ts, rel));
        }
        true
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the index reached segment.index.bytes (a reason to roll).
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    /// The last entry, if any.
    pub fn last_entry(&self) -> Option<TimestampOffset> {
        self.entries.last().map(|&(ts, rel)| TimestampOffset {
            timestamp: ts,
            offset: self.base_offset + rel as i64,
        })
    }

    /// Appends (timestamp, offset) if the timestamp is larger than the last entry's.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64) -> io::Result<()> {
        if let Some(&(last_ts, _)) = self.entries.last() {
            if timestamp <= last_ts {
                return Ok(());
            }
        }
        let rel = offset - self.base_offset;
        assert!(
            (0..=u32::MAX as i64).contains(&rel),
            "offset {offset} outside segment {}",
            self.base_offset
        );
        let mut entry = [0u8; TIME_INDEX_ENTRY_BYTES as usize];
        entry[..8].copy_from_slice(&timestamp.to_be_bytes());
        entry[8..].copy_from_slice(&(rel as u32).to_be_bytes());
        self.file.write_entry(self.entries.len(), &entry)?;
        self.entries.push((timestamp, rel as u32));
        Ok(())
    }

    /// The last entry whose timestamp is strictly smaller than `target`: every record at or
    /// before its offset has a timestamp below `target`, so a search may start after it. Returns
    /// the base offset (and no timestamp) if there is none.
    pub fn lookup_below(&self, target: i64) -> TimestampOffset {
        let n = self.entries.partition_point(|&(ts, _)| ts < target);
        match n {
            0 => TimestampOffset {
                timestamp: -1,
                offset: self.base_offset,
            },
            i => {
                let (ts, rel) = self.entries[i - 1];
                TimestampOffset {
                    timestamp: ts,
                    offset: self.base_offset + rel as i64,
                }
            }
        }
    }

    /// Removes entries for offsets >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let rel = offset - self.base_offset;
        let keep = if rel <= 0 {
            0
        } else {
            self.entries.partition_point(|&(_, r)| (r as i64) < rel)
        };
        self.entries.truncate(keep);
        self.file.truncate_entries(keep)
    }

    /// Removes all entries.
    pub fn reset(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.file.truncate_entries(0)
    }

    /// fsync.
    pub fn flush(&self) -> io::Result<()> {
        self.file.flush()
    }

    /// A second handle on the file, to fsync it later without the segment.
    pub fn try_clone_file(&self) -> io::Result<std::fs::File> {
        self.file.try_clone_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_lookup_reload() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("00000000000000000050.timeindex");
        let (mut t, ok) = TimeIndex::open(&p, 50, 1200, i64::MAX).unwrap();
        assert!(ok);
        t.maybe_append(1000, 55).unwrap();
        t.maybe_append(1000, 58).unwrap(); // not larger: skipped
        t.maybe_append(2000, 60).unwrap();
        t.maybe_append(3000, 70).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.lookup_below(500).offset, 50);
        assert_eq!(t.lookup_below(1000).offset, 50);
        assert_eq!(
            t.lookup_below(1001),
            TimestampOffset {
                timestamp: 1000,
                offset: 55
            }
        );
        assert_eq!(
            t.lookup_below(2500),
            TimestampOffset {
                timestamp: 2000,
                offset: 60
            }
        );
        assert_eq!(
            t.lookup_below(9999),
            TimestampOffset {
                timestamp: 3000,
                offset: 70
            }
        );
        drop(t);
        let (t, ok) = TimeIndex::open(&p, 50, 1200, 71).unwrap();
        assert!(ok);
        assert_eq!(
            t.last_entry(),
            Some(TimestampOffset {
                timestamp: 3000,
                offset: 70
            })
        );
        let (_, ok) = TimeIndex::open(&p, 50, 1200, 65).unwrap();
        assert!(!ok, "entries past the log end are corrupt");
    }

    #[test]
    fn truncate() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.timeindex");
        let (mut t, _) = TimeIndex::open(&p, 0, 1200, i64::MAX).unwrap();
        t.maybe_append(10, 1).unwrap();
        t.maybe_append(20, 5).unwrap();
        t.truncate_to(5).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 12);
    }
}
