//! The file side that [`super::index::OffsetIndex`] and [`super::time_index::TimeIndex`]
//! share: fixed-size entries, read back whole when a segment is opened, appended one at a
//! time with a positional write (so the file is always exactly its entries, as a closed Kafka
//! segment's index is), and cut to a number of entries on truncation.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// An index file of `entry_bytes`-byte entries.
pub struct IndexFile {
    file: File,
    entry_bytes: u64,
}

impl IndexFile {
    /// Opens (or creates) the file; returns it with its whole contents, or `None` for the
    /// contents when the length is not a whole number of entries, or more than
    /// `max_entries` of them (the caller then rebuilds the index).
    pub fn open(
        path: &Path,
        entry_bytes: u64,
        max_entries: u64,
    ) -> io::Result<(IndexFile, Option<Vec<u8>>)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = file.metadata()?.len();
        let f = IndexFile { file, entry_bytes };
        if !len.is_multiple_of(entry_bytes) || len / entry_bytes > max_entries {
            return Ok((f, None));
        }
        let mut buf = vec![0u8; len as usize];
        f.file.read_exact_at(&mut buf, 0)?;
        Ok((f, Some(buf)))
    }

    /// Writes entry number `n` (the one after the last kept).
    pub fn write_entry(&self, n: usize, entry: &[u8]) -> io::Result<()> {
        // A short or long entry would shift every later one: checked in release builds too.
        assert_eq!(entry.len() as u64, self.entry_bytes, "index entry size");
        self.file.write_all_at(entry, n as u64 * self.entry_bytes)
    }

    /// Keeps the first `entries` entries.
    pub fn truncate_entries(&self, entries: usize) -> io::Result<()> {
        self.file.set_len(entries as u64 * self.entry_bytes)
    }

    /// fsync.
    pub fn flush(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    /// A second handle on the file, to fsync it without the owner (a roll's flush).
    pub fn try_clone_file(&self) -> io::Result<File> {
        self.file.try_clone()
    }
}
