//! The aborted transaction index of one segment (Kafka's `TransactionIndex` and `AbortedTxn`).
//!
//! `<20-digit base offset>.txnindex` beside the segment's `.log` holds one 34-byte entry per
//! transaction whose ABORT marker was written in that segment: version (i16, 0), producer id
//! (i64), first offset (i64), last offset (the marker's, i64) and the last stable offset at
//! the time of the abort (i64), all big-endian, in Kafka's layout so that Kafka's tools read it.
//! Entries are appended in marker order, so their last offsets increase.
//!
//! A read_committed fetch asks for the aborted transactions overlapping its range
//! ([`TransactionIndex::collect`]); the consumer drops those records. The index is derived
//! data: recovery rebuilds it by replaying the segment's markers through the producer state.
//!
//! The entries are also held in memory: a segment has at most one entry per marker batch, so
//! the segment's own size bounds them (a marker batch takes more than 61 bytes of the `.log`,
//! an entry 34 bytes of memory). The file is created on the first entry, as Kafka does.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Suffix of transaction index files.
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
/// Bytes of one entry (Kafka's `AbortedTxn.TOTAL_SIZE`).
pub const ABORTED_TXN_BYTES: usize = 34;
/// The entry format version written (Kafka's `AbortedTxn.CURRENT_VERSION`).
pub const ABORTED_TXN_VERSION: i16 = 0;

/// One aborted transaction (Kafka's `AbortedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The transaction's producer.
    pub producer_id: i64,
    /// Offset of its first record.
    pub first_offset: i64,
    /// Offset of its ABORT marker.
    pub last_offset: i64,
    /// The partition's last stable offset once the marker was written: the first offset of
    /// the next open transaction of another producer, or the marker's offset + 1. A search for
    /// a fetch range ending at or below it can stop here.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// The 34-byte entry.
    pub fn encode(&self) -> [u8; ABORTED_TXN_BYTES] {
        let mut out = [0u8; ABORTED_TXN_BYTES];
        out[0..2].copy_from_slice(&ABORTED_TXN_VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// Decodes one entry; `None` for a version this broker does not know.
    pub fn decode(buf: &[u8; ABORTED_TXN_BYTES]) -> Option<AbortedTxn> {
        let i64_at = |at: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&buf[at..at + 8]);
            i64::from_be_bytes(a)
        };
        if i16::from_be_bytes([buf[0], buf[1]]) != ABORTED_TXN_VERSION {
            return None;
        }
        Some(AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// Reads every entry of a `.txnindex` file. `Err(InvalidData)` when the file is damaged: a
/// partial entry, an unknown version, or last offsets that do not increase from the segment's
/// base offset on (Kafka's `TransactionIndex.sanityCheck`).
pub fn read_entries(path: &Path, base_offset: i64) -> io::Result<Vec<AbortedTxn>> {
    let mut buf = Vec::new();
    File::open(path)?.read_to_end(&mut buf)?;
    let damaged = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", path.display()),
        )
    };
    if buf.len() % ABORTED_TXN_BYTES != 0 {
        return Err(damaged("ends with a partial entry"));
    }
    let mut entries = Vec::with_capacity(buf.len() / ABORTED_TXN_BYTES);
    let mut previous_last = base_offset - 1;
    for chunk in buf.chunks_exact(ABORTED_TXN_BYTES) {
        let mut raw = [0u8; ABORTED_TXN_BYTES];
        raw.copy_from_slice(chunk);
        let txn = AbortedTxn::decode(&raw).ok_or_else(|| damaged("unknown entry version"))?;
        if txn.last_offset <= previous_last || txn.first_offset > txn.last_offset {
            return Err(damaged("entries out of order"));
        }
        previous_last = txn.last_offset;
        entries.push(txn);
    }
    Ok(entries)
}

/// One segment's aborted transaction index.
#[derive(Debug)]
pub struct TransactionIndex {
    path: PathBuf,
    /// Opened on the first append (or at open, if the file exists).
    file: Option<File>,
    /// The file's entries, oldest first; last offsets strictly increase.
    entries: Vec<AbortedTxn>,
}

impl TransactionIndex {
    /// An empty index at `path`; an existing file there is removed (a new segment).
    pub fn create(path: PathBuf) -> io::Result<Self> {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(TransactionIndex {
            path,
            file: None,
            entries: Vec::new(),
        })
    }

    /// Opens the index of an existing segment. A missing file is an empty index. Returns
    /// false with an empty index when the file is damaged: the segment must be recovered,
    /// which rebuilds it.
    pub fn open(path: PathBuf, base_offset: i64) -> io::Result<(Self, bool)> {
        let entries = match read_entries(&path, base_offset) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                tracing::warn!(error = %e, "transaction index is damaged; it will be rebuilt");
                let mut index = TransactionIndex::create(path)?;
                index.entries.clear();
                return Ok((index, false));
            }
            Err(e) => return Err(e),
        };
        let file = if entries.is_empty() {
            None
        } else {
            Some(OpenOptions::new().append(true).open(&path)?)
        };
        Ok((
            TransactionIndex {
                path,
                file,
                entries,
            },
            true,
        ))
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// Appends an entry. Its last offset must exceed every earlier one (markers are appended
    /// in offset order); anything else is a bug in the caller.
    pub fn append(&mut self, txn: AbortedTxn) -> io::Result<()> {
        if let Some(last) = self.entries.last() {
            assert!(
                txn.last_offset > last.last_offset,
                "aborted transaction ending at {} appended after one ending at {} in {}",
                txn.last_offset,
                last.last_offset,
                self.path.display()
            );
        }
        if self.file.is_none() {
            self.file = Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?,
            );
        }
        let file = self.file.as_mut().expect("opened above");
        file.write_all(&txn.encode())?;
        self.entries.push(txn);
        Ok(())
    }

    /// Removes the entries whose marker is at or after `offset` (log truncation).
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = self.entries.partition_point(|t| t.last_offset < offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        if let Some(file) = &self.file {
            file.set_len((keep * ABORTED_TXN_BYTES) as u64)?;
        }
        Ok(())
    }

    /// Removes every entry (before a rebuild).
    pub fn reset(&mut self) -> io::Result<()> {
        self.truncate_to(i64::MIN)
    }

    /// fsyncs the file, if there is one.
    pub fn flush(&self) -> io::Result<()> {
        match &self.file {
            Some(f) => f.sync_all(),
            None => Ok(()),
        }
    }

    /// A second handle on the file, if there is one, to fsync it later without the segment.
    pub fn try_clone_file(&self) -> io::Result<Option<File>> {
        self.file.as_ref().map(File::try_clone).transpose()
    }

    /// The aborted transactions overlapping `[fetch_offset, upper_bound_offset)`, and whether
    /// the search is complete (Kafka's `collectAbortedTxns`): an entry whose last stable
    /// offset reaches the upper bound proves no later segment holds an overlapping one.
    pub fn collect(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
        out: &mut Vec<AbortedTxn>,
    ) -> bool {
        for txn in &self.entries {
            if txn.last_offset >= fetch_offset && txn.first_offset < upper_bound_offset {
                out.push(*txn);
            }
            if txn.last_stable_offset >= upper_bound_offset {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn entry_layout_is_kafkas_byte_for_byte() {
        let entry = txn(0x0102_0304_0506_0708, 5, 9, 10).encode();
        #[rustfmt::skip]
        let expected: [u8; 34] = [
            0, 0,                                           // version 0
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // producer id
            0, 0, 0, 0, 0, 0, 0, 5,                         // first offset
            0, 0, 0, 0, 0, 0, 0, 9,                         // last offset
            0, 0, 0, 0, 0, 0, 0, 10,                        // last stable offset
        ];
        assert_eq!(entry, expected);
        assert_eq!(
            AbortedTxn::decode(&expected),
            Some(txn(0x0102_0304_0506_0708, 5, 9, 10))
        );
    }

    #[test]
    fn file_round_trip_truncation_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{:020}{TXN_INDEX_SUFFIX}", 100));
        let mut index = TransactionIndex::create(path.clone()).unwrap();
        assert!(!path.exists(), "the file is created on the first entry");
        index.append(txn(1, 100, 103, 104)).unwrap();
        index.append(txn(2, 101, 110, 111)).unwrap();
        index.append(txn(1, 112, 115, 116)).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * 34);
        let (back, ok) = TransactionIndex::open(path.clone(), 100).unwrap();
        assert!(ok);
        assert_eq!(back.entries(), index.entries());

        index.truncate_to(110).unwrap();
        assert_eq!(index.entries(), &[txn(1, 100, 103, 104)]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 34);
        index.append(txn(3, 105, 107, 108)).unwrap();
        let (back, _) = TransactionIndex::open(path.clone(), 100).unwrap();
        assert_eq!(back.entries().len(), 2);

        // A torn entry marks the index damaged.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&[0; 5])
            .unwrap();
        let (back, ok) = TransactionIndex::open(path.clone(), 100).unwrap();
        assert!(!ok);
        assert!(back.entries().is_empty());
    }

    #[test]
    fn collect_finds_overlaps_and_stops_at_the_last_stable_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = TransactionIndex::create(dir.path().join("0.txnindex")).unwrap();
        index.append(txn(1, 0, 3, 4)).unwrap();
        index.append(txn(2, 2, 8, 9)).unwrap();
        index.append(txn(3, 10, 12, 13)).unwrap();
        let mut out = Vec::new();
        assert!(
            index.collect(4, 9, &mut out),
            "the second entry's LSO reaches 9"
        );
        assert_eq!(out, vec![txn(2, 2, 8, 9)]);
        out.clear();
        assert!(
            !index.collect(0, 100, &mut out),
            "may continue in a later segment"
        );
        assert_eq!(out.len(), 3);
    }
}
