//! LeaderEpochCache: which leader epoch started at which offset.
//!
//! Followers use it to find where their log diverges from a new leader's (KIP-101,
//! KIP-279): they ask the leader for the end offset of their latest epoch
//! (OffsetForLeaderEpoch, or Fetch's diverging-epoch answer) and truncate there. It is kept
//! in Kafka's `leader-epoch-checkpoint` format:
//!
//! ```text
//! 0            <- version
//! 2            <- number of entries
//! 0 0          <- epoch, start offset
//! 3 1200
//! ```
//!
//! It is derived data: every batch carries its partitionLeaderEpoch, so a missing or corrupt
//! checkpoint is rebuilt by scanning batch headers.

use std::path::{Path, PathBuf};

use super::{checkpoint, LogError};

/// The checkpoint file in the partition directory.
pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
/// Bound on entries kept: each leader change adds one; older ones fall off the front as
/// retention advances the log start offset, so this only guards against corrupt input.
pub const MAX_LEADER_EPOCH_ENTRIES: usize = 100_000;

/// No epoch known.
pub const UNDEFINED_EPOCH: i32 = -1;
/// No offset known.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// One leader epoch and the first offset written in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// The cache. Invariant: epochs and start offsets both strictly increase along `entries`.
#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// Loads the checkpoint from `dir`; `None` when it is missing or unreadable (the caller
    /// rebuilds from the log).
    pub fn load(dir: &Path) -> Option<Self> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
        if std::fs::metadata(&path).ok()?.len() > checkpoint::CHECKPOINT_MAX_BYTES {
            return None;
        }
        let text = std::fs::read_to_string(&path).ok()?;
        let entries = checkpoint::parse_entries(&text, |parts| match parts {
            [epoch, start] => Some(EpochEntry {
                epoch: epoch.parse().ok()?,
                start_offset: start.parse().ok()?,
            }),
            _ => None,
        })
        .ok()?;
        let increasing = entries
            .windows(2)
            .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset <= w[1].start_offset);
        if entries.len() > MAX_LEADER_EPOCH_ENTRIES || !increasing {
            return None;
        }
        Some(LeaderEpochCache { path, entries })
    }

    /// An empty cache that will persist to `dir`.
    pub fn empty(dir: &Path) -> Self {
        LeaderEpochCache {
            path: dir.join(LEADER_EPOCH_CHECKPOINT_FILE),
            entries: Vec::new(),
        }
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The latest epoch, if any batch was written.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// The epoch `offset` was written in: that of the last entry starting at or before it
    /// (Kafka's `LeaderEpochFileCache.epochForOffset`); `None` before the first entry.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .take_while(|e| e.start_offset <= offset)
            .last()
            .map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`, if it is newer than the latest epoch.
    /// Returns true when the cache changed (the caller then persists it).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 {
            return false;
        }
        match self.entries.last() {
            Some(last) if epoch <= last.epoch => false,
            Some(last) if start_offset < last.start_offset => {
                // A newer epoch cannot start before an older one; keep the cache consistent
                // by dropping entries the new one supersedes (Kafka does the same).
                self.entries.retain(|e| e.start_offset < start_offset);
                self.entries.push(EpochEntry {
                    epoch,
                    start_offset,
                });
                true
            }
            _ => {
                self.entries.push(EpochEntry {
                    epoch,
                    start_offset,
                });
                if self.entries.len() > MAX_LEADER_EPOCH_ENTRIES {
                    self.entries.remove(0);
                }
                true
            }
        }
    }

    /// The end offset of `requested` epoch, and the largest epoch at or below it, as the
    /// leader answers OffsetForLeaderEpoch:
    /// - the latest epoch ends at the log end offset;
    /// - an older epoch ends where the next higher epoch starts;
    /// - an epoch newer than every known one, or no epochs at all: undefined;
    /// - an epoch older than the first: the first epoch's start offset, with the requested epoch.
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH || self.entries.is_empty() {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match self.entries.iter().rev().find(|e| e.epoch <= requested) {
            Some(floor) => (floor.epoch, higher.start_offset),
            None => (requested, higher.start_offset),
        }
    }

    /// Drops entries that start at or after `end_offset` (truncation of the log's tail).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        before != self.entries.len()
    }

    /// Forgets history below `start_offset` (retention): entries wholly below it go, and the
    /// epoch in force at `start_offset` is kept with its start moved up to it.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let keep_from = self
            .entries
            .iter()
            .rposition(|e| e.start_offset <= start_offset);
        match keep_from {
            Some(i) => {
                let changed = i > 0 || self.entries[0].start_offset != start_offset;
                self.entries.drain(..i);
                self.entries[0].start_offset = start_offset;
                changed
            }
            None => false,
        }
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Writes the checkpoint atomically (temp file, fsync, rename, directory fsync).
    pub fn persist(&self) -> Result<(), LogError> {
        let lines = self
            .entries
            .iter()
            .map(|e| format!("{} {}", e.epoch, e.start_offset));
        checkpoint::write_atomically(&self.path, &checkpoint::format_entries(lines))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_epoch_of_an_offset_is_that_of_the_last_entry_starting_at_or_before_it() {
        assert_eq!(cache(&[]).epoch_for_offset(0), None);
        let c = cache(&[(2, 5), (4, 9)]);
        assert_eq!(c.epoch_for_offset(4), None);
        assert_eq!(c.epoch_for_offset(5), Some(2));
        assert_eq!(c.epoch_for_offset(8), Some(2));
        assert_eq!(c.epoch_for_offset(9), Some(4));
        assert_eq!(c.epoch_for_offset(1_000), Some(4));
    }

    use super::*;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::empty(Path::new("/nonexistent"));
        for (e, o) in entries {
            c.assign(*e, *o);
        }
        c
    }

    #[test]
    fn end_offsets_follow_kafka_rules() {
        let c = cache(&[(1, 0), (3, 100), (5, 250)]);
        assert_eq!(
            c.end_offset_for(5, 300),
            (5, 300),
            "latest epoch ends at the log end"
        );
        assert_eq!(c.end_offset_for(3, 300), (3, 250));
        assert_eq!(
            c.end_offset_for(4, 300),
            (3, 250),
            "a missing epoch answers its floor"
        );
        assert_eq!(
            c.end_offset_for(0, 300),
            (0, 0),
            "older than the first epoch"
        );
        assert_eq!(
            c.end_offset_for(6, 300),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        assert_eq!(
            cache(&[]).end_offset_for(0, 0),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
    }

    #[test]
    fn assign_ignores_old_epochs_and_supersedes_later_starts() {
        let mut c = cache(&[(1, 0), (2, 10)]);
        assert!(!c.assign(2, 20));
        assert!(!c.assign(1, 30));
        assert!(c.assign(4, 5));
        assert_eq!(
            c.entries(),
            &[
                EpochEntry {
                    epoch: 1,
                    start_offset: 0
                },
                EpochEntry {
                    epoch: 4,
                    start_offset: 5
                }
            ]
        );
    }

    #[test]
    fn truncation_from_both_ends() {
        let mut c = cache(&[(1, 0), (3, 100), (5, 250)]);
        assert!(c.truncate_from_end(250));
        assert_eq!(c.latest_epoch(), Some(3));
        assert!(c.truncate_from_start(120));
        assert_eq!(
            c.entries(),
            &[EpochEntry {
                epoch: 3,
                start_offset: 120
            }]
        );
    }

    #[test]
    fn checkpoint_round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochCache::empty(dir.path());
        c.assign(0, 0);
        c.assign(2, 42);
        c.persist().unwrap();
        let loaded = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(loaded.entries(), c.entries());
        std::fs::write(
            dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE),
            "0\n2\n3 10\n1 20\n",
        )
        .unwrap();
        assert!(
            LeaderEpochCache::load(dir.path()).is_none(),
            "epochs going backwards are rejected"
        );
        std::fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE), "0\n5\n1 0\n").unwrap();
        assert!(
            LeaderEpochCache::load(dir.path()).is_none(),
            "a short file is rejected"
        );
    }
}
