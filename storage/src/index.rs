//! The sparse offset index of one segment (`<base>.index`), in Kafka's format: 8-byte entries of
//! big-endian u32 offset relative to the segment base and u32 byte position in the `.log` file.
//!
//! Kafka preallocates and memory-maps the file; we keep the entries in a `Vec` and append each
//! new entry to the file with a positional write, so the file is always "trimmed" and
//! `kafka-dump-log` reads it as it would a closed Kafka segment. The index is derived data: any
//! doubt about it (wrong length, entries out of order or past the log) means rebuild from the log.

use std::io;
use std::path::{Path, PathBuf};

use super::index_file::IndexFile;

/// Bytes per offset index entry.
pub const OFFSET_INDEX_ENTRY_BYTES: u64 = 8;

/// A position in a segment's `.log` file and the offset found there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetPosition {
    /// An absolute offset.
    pub offset: i64,
    /// A byte position in the segment's log file.
    pub position: u32,
}

/// The offset index of one segment.
pub struct OffsetIndex {
    path: PathBuf,
    file: IndexFile,
    base_offset: i64,
    /// (relative offset, position), both strictly increasing.
    entries: Vec<(u32, u32)>,
    max_entries: usize,
}

impl OffsetIndex {
    /// Opens (or creates) the index at `path`. Returns `Ok(None)` when the file exists but fails
    /// the sanity check, so the caller rebuilds it; the file is then left empty.
    pub fn open(
        path: &Path,
        base_offset: i64,
        max_index_bytes: u64,
        log_size: u64,
    ) -> io::Result<(OffsetIndex, bool)> {
        let max_entries = (max_index_bytes / OFFSET_INDEX_ENTRY_BYTES).max(1) as usize;
        let (file, contents) = IndexFile::open(path, OFFSET_INDEX_ENTRY_BYTES, max_entries as u64)?;
        let mut index = OffsetIndex {
            path: path.to_path_buf(),
            file,
            base_offset,
            entries: Vec::new(),
            max_entries,
        };
        let ok = contents.is_some_and(|buf| index.load(&buf, log_size));
        if !ok {
            index.reset()?;
        }
        Ok((index, ok))
    }

    fn load(&mut self, buf: &[u8], log_size: u64) -> bool {
        let mut prev: Option<(u32, u32)> = None;
        for chunk in buf.chunks_exact(OFFSET_INDEX_ENTRY_BYTES as usize) {
            let rel = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            let pos = u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
            // Kafka's sanity check: entries increase, and point inside the log.
            if let Some((prev_rel, prev_pos)) = prev {
                if rel <= prev_rel || pos <= prev_pos {
                    return false;
                }
            }
            if pos as u64 >= log_size {
                return false;
            }
            self.entries.push((rel, pos));
            prev = Some((rel, pos));
        }
        true
    }

    /// The file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether another entry would exceed segment.index.bytes (a reason to roll).
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    /// The last entry, or (base offset, 0) when empty.
    pub fn last_entry(&self) -> OffsetPosition {
        match self.entries.last() {
            Some(&(rel, pos)) => OffsetPosition {
                offset: self.base_offset + rel as i64,
                position: pos,
            },
            None => OffsetPosition {
                offset: self.base_offset,
                position: 0,
            },
        }
    }

    /// Adds an entry: `offset` (the last offset of a batch) is at or after byte `position`.
    pub fn append(&mut self, offset: i64, position: u32) -> io::Result<()> {
        let rel = offset - self.base_offset;
        assert!(
            (0..=u32::MAX as i64).contains(&rel),
            "offset {offset} outside segment {}",
            self.base_offset
        );
        let rel = rel as u32;
        if let Some(&(last_rel, last_pos)) = self.entries.last() {
            // Kafka appends only increasing entries; equal ones are skipped silently.
            if rel <= last_rel || position <= last_pos {
                return Ok(());
            }
        }
        let mut entry = [0u8; OFFSET_INDEX_ENTRY_BYTES as usize];
        entry[..4].copy_from_slice(&rel.to_be_bytes());
        entry[4..].copy_from_slice(&position.to_be_bytes());
        self.file.write_entry(self.entries.len(), &entry)?;
        self.entries.push((rel, position));
        Ok(())
    }

    /// The entry with the largest offset <= `target`, or (base offset, 0) if none.
    pub fn lookup(&self, target: i64) -> OffsetPosition {
        let rel = target - self.base_offset;
        if rel < 0 {
            return OffsetPosition {
                offset: self.base_offset,
                position: 0,
            };
        }
        let rel = rel.min(u32::MAX as i64) as u32;
        let n = self.entries.partition_point(|&(r, _)| r <= rel);
        match n {
            0 => OffsetPosition {
                offset: self.base_offset,
                position: 0,
            },
            i => {
                let (r, p) = self.entries[i - 1];
                OffsetPosition {
                    offset: self.base_offset + r as i64,
                    position: p,
                }
            }
        }
    }

    /// Removes entries for offsets >= `offset` (used by log truncation).
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let rel = offset - self.base_offset;
        let keep = if rel <= 0 {
            0
        } else {
            self.entries.partition_point(|&(r, _)| (r as i64) < rel)
        };
        self.entries.truncate(keep);
        self.file.truncate_entries(keep)
    }

    /// Removes entries pointing at or beyond `position` in the log.
    pub fn truncate_to_position(&mut self, position: u64) -> io::Result<()> {
        let keep = self
            .entries
            .partition_point(|&(_, p)| (p as u64) < position);
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
    fn lookup_append_reload() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("00000000000000000100.index");
        let (mut idx, ok) = OffsetIndex::open(&p, 100, 1024, 1 << 20).unwrap();
        assert!(ok);
        assert_eq!(
            idx.lookup(150),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        idx.append(110, 4000).unwrap();
        idx.append(120, 8000).unwrap();
        idx.append(120, 9000).unwrap(); // not increasing: ignored
        idx.append(135, 12000).unwrap();
        assert_eq!(idx.len(), 3);
        assert_eq!(
            idx.lookup(99),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        assert_eq!(
            idx.lookup(109),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        assert_eq!(
            idx.lookup(110),
            OffsetPosition {
                offset: 110,
                position: 4000
            }
        );
        assert_eq!(
            idx.lookup(125),
            OffsetPosition {
                offset: 120,
                position: 8000
            }
        );
        assert_eq!(
            idx.lookup(10_000),
            OffsetPosition {
                offset: 135,
                position: 12000
            }
        );
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 24);
        drop(idx);
        let (idx, ok) = OffsetIndex::open(&p, 100, 1024, 1 << 20).unwrap();
        assert!(ok);
        assert_eq!(idx.len(), 3);
        assert_eq!(
            idx.last_entry(),
            OffsetPosition {
                offset: 135,
                position: 12000
            }
        );
    }

    #[test]
    fn corrupt_index_is_reported_and_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.index");
        std::fs::write(&p, [0u8; 13]).unwrap();
        let (idx, ok) = OffsetIndex::open(&p, 0, 1024, 1 << 20).unwrap();
        assert!(!ok);
        assert!(idx.is_empty());
        // entries beyond the log size
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&5u32.to_be_bytes());
        bytes.extend_from_slice(&5000u32.to_be_bytes());
        std::fs::write(&p, &bytes).unwrap();
        let (_, ok) = OffsetIndex::open(&p, 0, 1024, 4000).unwrap();
        assert!(!ok);
    }

    #[test]
    fn truncate_and_full() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.index");
        let (mut idx, _) = OffsetIndex::open(&p, 0, 24, 1 << 20).unwrap();
        idx.append(10, 100).unwrap();
        idx.append(20, 200).unwrap();
        idx.append(30, 300).unwrap();
        assert!(idx.is_full());
        idx.truncate_to(20).unwrap();
        assert_eq!(idx.len(), 1);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 8);
        idx.truncate_to_position(100).unwrap();
        assert!(idx.is_empty());
    }
}
