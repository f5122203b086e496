//! Durable Raft storage under `<log.dirs>/__cluster_metadata/`: the log, the vote, the commit
//! index and the state machine's snapshot.
//!
//! Files (all JSON, small, because metadata is small):
//! - `log.jsonl`: one entry per line, `<crc32c as 8 hex digits> <entry JSON>`. Appends are
//!   fsynced before openraft is told they are durable. A torn or corrupt tail (kill -9 during
//!   a write) is cut off on load: those entries were never acknowledged.
//! - `vote.json`: written atomically and fsynced before the vote is used (Raft safety).
//! - `committed.json`: the commit index, so a restarted node re-applies its committed entries
//!   without waiting for a leader. Not fsynced: losing it only delays the re-apply.
//! - `purged.json`: the last log id removed by log compaction.
//! - `snapshot.json`: the last snapshot (its meta and the [`MetadataImage`]), written
//!   atomically. The state machine is rebuilt from it plus the log on start, so "last applied"
//!   is durable as the snapshot's last log id plus the committed entries after it.
//!
//! Truncation and purging rewrite `log.jsonl` whole (write a temp file, fsync, rename). That
//! is linear in the log's size, which the snapshot policy keeps small
//! (`SNAPSHOT_LOGS_SINCE_LAST`).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::{BufRead, Cursor, Read as _, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, RaftLogReader, RaftSnapshotBuilder,
    SnapshotMeta, StorageError, StoredMembership, Vote,
};
use parking_lot::Mutex;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tokio::sync::watch;

use super::image::MetadataImage;
use super::{NodeId, TypeConfig};

// Defined in `metadata` with Kafka's other internal topic names, so that `security`'s
// bootstrap credentials find the directory without importing `controller`.
pub use crate::metadata::METADATA_DIR;
const LOG_FILE: &str = "log.jsonl";
const VOTE_FILE: &str = "vote.json";
const COMMITTED_FILE: &str = "committed.json";
const PURGED_FILE: &str = "purged.json";
const SNAPSHOT_FILE: &str = "snapshot.json";

/// Longest accepted line in `log.jsonl`; a longer one is treated as corruption rather than
/// read into memory.
pub const MAX_LOG_LINE_BYTES: usize = 64 << 20;

type Node = openraft::BasicNode;
type StorageResult<T> = Result<T, StorageError<NodeId>>;

fn io_error(
    subject: ErrorSubject<NodeId>,
    verb: ErrorVerb,
    e: std::io::Error,
) -> StorageError<NodeId> {
    StorageError::from_io_error(subject, verb, e)
}

/// Writes `value` as JSON to `dir/name` atomically; `durable` adds the fsyncs.
fn write_json_atomic<T: Serialize>(
    dir: &Path,
    name: &str,
    value: &T,
    durable: bool,
) -> std::io::Result<()> {
    let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    brook_storage::checkpoint::replace_file(&dir.join(name), durable, |f| f.write_all(&body))
}

/// Reads `dir/name` as JSON; a missing file is `None`.
fn read_json<T: DeserializeOwned>(dir: &Path, name: &str) -> std::io::Result<Option<T>> {
    match std::fs::read(dir.join(name)) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{name}: {e}"))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn encode_line(entry: &Entry<TypeConfig>) -> std::io::Result<Vec<u8>> {
    let json = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
    let mut line = format!("{:08x} ", crc32c::crc32c(&json)).into_bytes();
    line.extend_from_slice(&json);
    line.push(b'\n');
    Ok(line)
}

fn decode_line(line: &[u8]) -> Option<Entry<TypeConfig>> {
    let line = line.strip_suffix(b"\n")?;
    let (crc, json) = (line.get(..8)?, line.get(9..)?);
    let crc = u32::from_str_radix(std::str::from_utf8(crc).ok()?, 16).ok()?;
    if crc32c::crc32c(json) != crc {
        return None;
    }
    serde_json::from_slice(json).ok()
}

struct LogInner {
    dir: PathBuf,
    /// Open for appending; replaced after a rewrite.
    file: std::fs::File,
    entries: BTreeMap<u64, Entry<TypeConfig>>,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
}

impl LogInner {
    /// Rewrites the log file from `entries` (after truncate or purge).
    fn rewrite(&mut self) -> std::io::Result<()> {
        let entries = &self.entries;
        brook_storage::checkpoint::replace_file(&self.dir.join(LOG_FILE), true, |f| {
            entries
                .values()
                .try_for_each(|e| f.write_all(&encode_line(e)?))
        })?;
        self.file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.join(LOG_FILE))?;
        Ok(())
    }
}

/// The Raft log and vote. Cheap to clone: clones share one log.
///
/// A `parking_lot::Mutex`, not tokio's, because no critical section awaits; the file writes
/// inside it are small (metadata entries) and block the calling task only briefly.
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<LogInner>>,
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, cutting off a torn tail.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(LOG_FILE);
        let mut entries = BTreeMap::new();
        let mut good_len: u64 = 0;
        let mut torn = false;
        if let Ok(f) = std::fs::File::open(&path) {
            let mut reader = std::io::BufReader::new(f);
            let mut line = Vec::new();
            loop {
                line.clear();
                let n = (&mut reader)
                    .take(MAX_LOG_LINE_BYTES as u64)
                    .read_until(b'\n', &mut line)?;
                if n == 0 {
                    break;
                }
                match decode_line(&line) {
                    Some(e) => {
                        entries.insert(e.log_id.index, e);
                        good_len += n as u64;
                    }
                    None => {
                        torn = true;
                        break;
                    }
                }
            }
        }
        if torn {
            tracing::warn!(path = %path.display(), good_len, "metadata log has a torn or corrupt tail; cutting it off");
            let f = std::fs::OpenOptions::new().write(true).open(&path)?;
            f.set_len(good_len)?;
            f.sync_all()?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        Ok(LogStore {
            inner: Arc::new(Mutex::new(LogInner {
                dir: dir.to_path_buf(),
                file,
                entries,
                vote: read_json(dir, VOTE_FILE)?,
                committed: read_json(dir, COMMITTED_FILE)?,
                last_purged: read_json(dir, PURGED_FILE)?,
            })),
        })
    }
}

impl LogStore {
    /// The index of the last committed entry, as openraft last saved it.
    pub fn committed_index(&self) -> Option<u64> {
        self.inner.lock().committed.map(|c| c.index)
    }

    /// The index of the last entry in the log (or of the last purged one, if the log is empty).
    pub fn last_index(&self) -> Option<u64> {
        let inner = self.inner.lock();
        inner
            .entries
            .keys()
            .next_back()
            .copied()
            .or(inner.last_purged.map(|l| l.index))
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry<TypeConfig>>> {
        let inner = self.inner.lock();
        Ok(inner.entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let inner = self.inner.lock();
        let last = inner.entries.values().next_back().map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id: inner.last_purged,
            last_log_id: last.or(inner.last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StorageResult<()> {
        let mut inner = self.inner.lock();
        write_json_atomic(&inner.dir, VOTE_FILE, vote, true)
            .map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Write, e))?;
        inner.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote<NodeId>>> {
        Ok(self.inner.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> StorageResult<()> {
        let mut inner = self.inner.lock();
        write_json_atomic(&inner.dir, COMMITTED_FILE, &committed, false)
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, e))?;
        inner.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId<NodeId>>> {
        Ok(self.inner.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let result = (|| {
            let mut inner = self.inner.lock();
            let mut buf = Vec::new();
            let mut batch = Vec::new();
            for e in entries {
                buf.extend_from_slice(&encode_line(&e)?);
                batch.push(e);
            }
            inner.file.write_all(&buf)?;
            inner.file.sync_data()?;
            for e in batch {
                inner.entries.insert(e.log_id.index, e);
            }
            Ok::<_, std::io::Error>(())
        })();
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::new(e.kind(), e.to_string())));
                Err(io_error(ErrorSubject::Logs, ErrorVerb::Write, e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let mut inner = self.inner.lock();
        inner.entries.split_off(&log_id.index);
        inner
            .rewrite()
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let mut inner = self.inner.lock();
        assert!(
            inner.last_purged.is_none_or(|p| p <= log_id),
            "purges move forward"
        );
        write_json_atomic(&inner.dir, PURGED_FILE, &log_id, true)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
        inner.last_purged = Some(log_id);
        let keep = inner.entries.split_off(&(log_id.index + 1));
        inner.entries = keep;
        inner
            .rewrite()
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }
}

/// A snapshot as persisted and as sent to followers.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, Node>,
    image: MetadataImage,
}

struct SmInner {
    dir: PathBuf,
    image: MetadataImage,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, Node>,
    snapshot: Option<StoredSnapshot>,
    /// Makes snapshot ids unique even when two are built at the same log id.
    snapshot_seq: u64,
}

/// The state machine: applies committed batches to the [`MetadataImage`] and publishes every
/// new image on a watch channel. Cheap to clone: clones share one image.
#[derive(Clone)]
pub struct StateMachine {
    inner: Arc<Mutex<SmInner>>,
    image_tx: Arc<watch::Sender<Arc<MetadataImage>>>,
}

impl StateMachine {
    /// Loads the last snapshot from `dir`; entries after it are re-applied by openraft.
    pub fn open(dir: &Path) -> std::io::Result<(Self, watch::Receiver<Arc<MetadataImage>>)> {
        std::fs::create_dir_all(dir)?;
        let snapshot: Option<StoredSnapshot> = read_json(dir, SNAPSHOT_FILE)?;
        let (image, last_applied, membership) = match &snapshot {
            Some(s) => (
                s.image.clone(),
                s.meta.last_log_id,
                s.meta.last_membership.clone(),
            ),
            None => (MetadataImage::default(), None, StoredMembership::default()),
        };
        let (tx, rx) = watch::channel(Arc::new(image.clone()));
        Ok((
            StateMachine {
                inner: Arc::new(Mutex::new(SmInner {
                    dir: dir.to_path_buf(),
                    image,
                    last_applied,
                    membership,
                    snapshot,
                    snapshot_seq: 0,
                })),
                image_tx: Arc::new(tx),
            },
            rx,
        ))
    }

    fn publish(&self, image: &MetadataImage) {
        self.image_tx.send_replace(Arc::new(image.clone()));
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let mut inner = self.inner.lock();
        inner.snapshot_seq += 1;
        let meta = SnapshotMeta {
            last_log_id: inner.last_applied,
            last_membership: inner.membership.clone(),
            snapshot_id: format!(
                "{}-{}",
                inner.last_applied.map_or(0, |l| l.index),
                inner.snapshot_seq
            ),
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            image: inner.image.clone(),
        };
        let data = serde_json::to_vec(&stored.image).map_err(|e| {
            io_error(
                ErrorSubject::Snapshot(None),
                ErrorVerb::Write,
                std::io::Error::other(e),
            )
        })?;
        write_json_atomic(&inner.dir, SNAPSHOT_FILE, &stored, true)
            .map_err(|e| io_error(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
        inner.snapshot = Some(stored);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(
        &mut self,
    ) -> StorageResult<(Option<LogId<NodeId>>, StoredMembership<NodeId, Node>)> {
        let inner = self.inner.lock();
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<()>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut inner = self.inner.lock();
        let mut replies = Vec::new();
        for e in entries {
            assert!(
                inner.last_applied < Some(e.log_id),
                "metadata log entries applied in order"
            );
            inner.last_applied = Some(e.log_id);
            inner.image.metadata_offset = e.log_id.index;
            match e.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(batch) => inner.image.apply_batch(&batch),
                EntryPayload::Membership(m) => {
                    inner.membership = StoredMembership::new(Some(e.log_id), m);
                }
            }
            replies.push(());
        }
        self.publish(&inner.image);
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, Node>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StorageResult<()> {
        let image: MetadataImage = serde_json::from_slice(snapshot.get_ref()).map_err(|e| {
            io_error(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Read,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            image: image.clone(),
        };
        let mut inner = self.inner.lock();
        write_json_atomic(&inner.dir, SNAPSHOT_FILE, &stored, true).map_err(|e| {
            io_error(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Write,
                e,
            )
        })?;
        inner.image = image;
        inner.last_applied = meta.last_log_id;
        inner.membership = meta.last_membership.clone();
        inner.snapshot = Some(stored);
        self.publish(&inner.image);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let inner = self.inner.lock();
        let Some(s) = &inner.snapshot else {
            return Ok(None);
        };
        let data = serde_json::to_vec(&s.image).map_err(|e| {
            io_error(
                ErrorSubject::Snapshot(None),
                ErrorVerb::Read,
                std::io::Error::other(e),
            )
        })?;
        Ok(Some(Snapshot {
            meta: s.meta.clone(),
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn entry(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    struct Builder;

    impl openraft::testing::StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir>
        for Builder
    {
        async fn build(
            &self,
        ) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError<NodeId>> {
            let dir = tempfile::tempdir().expect("temp dir");
            let log = LogStore::open(dir.path()).expect("open log");
            let (sm, _) = StateMachine::open(dir.path()).expect("open state machine");
            Ok((dir, log, sm))
        }
    }

    /// openraft's own conformance suite for log stores and state machines.
    #[test]
    fn openraft_storage_suite() {
        openraft::testing::Suite::test_all(Builder).unwrap();
    }

    /// What was appended, voted, truncated and purged is what a reopened store reports.
    #[tokio::test]
    async fn log_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut store = LogStore::open(dir.path()).unwrap();
            // Appended by hand: `LogFlushed` callbacks can only be made by openraft.
            for i in 1..=5 {
                let mut inner = store.inner.lock();
                let line = encode_line(&entry(i)).unwrap();
                inner.file.write_all(&line).unwrap();
                inner.entries.insert(i, entry(i));
            }
            store.save_vote(&Vote::new_committed(1, 1)).await.unwrap();
            store
                .truncate(LogId::new(CommittedLeaderId::new(1, 1), 5))
                .await
                .unwrap();
            store
                .purge(LogId::new(CommittedLeaderId::new(1, 1), 1))
                .await
                .unwrap();
        }
        let mut store = LogStore::open(dir.path()).unwrap();
        assert_eq!(
            store.read_vote().await.unwrap(),
            Some(Vote::new_committed(1, 1))
        );
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(1));
        assert_eq!(state.last_log_id.map(|l| l.index), Some(4));
        let entries = store.try_get_log_entries(0..10).await.unwrap();
        let indexes: Vec<u64> = entries.iter().map(|e| e.log_id.index).collect();
        assert_eq!(indexes, vec![2, 3, 4]);
    }

    #[test]
    fn torn_tail_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut body = Vec::new();
        for i in 1..=3 {
            body.extend(encode_line(&entry(i)).unwrap());
        }
        let good = body.len();
        body.extend_from_slice(b"0000abcd {\"log_id\":");
        std::fs::write(dir.path().join(LOG_FILE), &body).unwrap();
        let store = LogStore::open(dir.path()).unwrap();
        assert_eq!(store.inner.lock().entries.len(), 3);
        assert_eq!(
            std::fs::metadata(dir.path().join(LOG_FILE)).unwrap().len() as usize,
            good
        );
    }

    #[test]
    fn corrupt_line_is_detected() {
        let mut line = encode_line(&entry(1)).unwrap();
        assert!(decode_line(&line).is_some());
        let n = line.len();
        line[n - 3] ^= 1;
        assert!(decode_line(&line).is_none());
    }
}
