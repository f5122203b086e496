//! KIP-932 share-partitions and share sessions on a partition leader (Kafka's
//! `SharePartitionManager` and `ShareSessionCache`).
//!
//! A share group reads a topic partition through a share-partition held by that partition's
//! leader ([`partition::SharePartition`]: records acquired per member under a lock, delivery
//! counts, acknowledgement). ShareFetch and ShareAcknowledge ([`crate::api::share`]) reach
//! them through this manager, under one short `parking_lot::Mutex` never held across an
//! await or a log read.
//!
//! Durable as Kafka's: a share-partition is initialized from its share coordinator's state
//! ([`SharePartitionManager::maybe_initialize`], [`persister`], [`coordinator`]), and each
//! acknowledgement, release and lock timeout is written there ([`SharePartitionManager::persist`])
//! before it is answered, so a new leader delivers again what was not acknowledged.

pub mod config;
pub mod coordinator;
pub mod partition;
pub mod persister;
pub mod records;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tokio::sync::Notify;
use uuid::Uuid;

use self::config::{AutoOffsetReset, ShareGroupSettings};
use self::partition::{AckError, AcquiredRange, LogBatch, MaxRecords, ShareLimits, SharePartition};
use crate::cluster::partition::{FetchIsolation, Partition};
use crate::config::{BrokerConfig, ConfigError};
use brook_storage::AbortedTxn;

/// Bound on fetches parked on share-partition changes at once; past it the oldest are woken
/// early (they read again and park again), as `Partition::park_fetch` does.
pub const MAX_PARKED_SHARE_FETCHES: usize = 4096;

/// ShareFetch's session epochs (Kafka's `ShareRequestMetadata`).
pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

/// (group id, topic id, partition).
pub type SharePartitionKey = (String, Uuid, i32);

/// A share session (Kafka's `ShareSession`): the partitions a member fetches, and the epoch
/// its next request must carry.
#[derive(Debug)]
struct ShareSession {
    epoch: i32,
    partitions: BTreeSet<(Uuid, i32)>,
}

/// What a ShareFetch's session epoch makes of it (Kafka's `ShareFetchContext`).
#[derive(Debug)]
pub enum FetchContext {
    /// Epoch 0: a new session with the request's partitions; the answer names them all.
    Full(Vec<(Uuid, i32)>),
    /// A later epoch: the session's partitions; the answer names those with news.
    Incremental(Vec<(Uuid, i32)>),
    /// Epoch -1: acknowledgements only, then the session closes.
    Final,
}

/// One partition's acquisition: the batches holding acquired records, and the ranges.
#[derive(Debug, Default)]
pub struct Acquired {
    pub records: Bytes,
    pub ranges: Vec<AcquiredRange>,
}

/// One share-partition as the state views show it: its offsets and epochs, and each
/// in-flight offset's state and delivery count (bounded by
/// `group.share.partition.max.record.locks`).
#[derive(Debug, Clone)]
pub struct SharePartitionView {
    pub key: SharePartitionKey,
    pub start_offset: i64,
    pub end_offset: i64,
    pub leader_epoch: i32,
    pub state_epoch: i32,
    pub in_flight: Vec<(i64, partition::RecordState, i16)>,
}

/// The share-partitions and share sessions of this node.
pub struct SharePartitionManager {
    /// The broker's `group.share.*` limits; a group's own `share.*` configs override them
    /// ([`Self::settings`]).
    pub limits: ShareLimits,
    /// `group.share.max.share.sessions`.
    max_sessions: usize,
    partitions: Mutex<HashMap<SharePartitionKey, SharePartition>>,
    sessions: Mutex<HashMap<(String, String), ShareSession>>,
    /// Share fetches waiting for records to become acquirable (a release, a lock timeout).
    waiters: Mutex<Vec<Arc<Notify>>>,
    /// Reads and writes the share-partitions' state at their share coordinators.
    pub persister: persister::Persister,
    /// One writer per share-partition at a time, so that writes reach the coordinator in
    /// the order their states were taken.
    write_locks: Mutex<HashMap<SharePartitionKey, Arc<tokio::sync::Mutex<()>>>>,
}

impl SharePartitionManager {
    /// Reads `group.share.*` (Kafka's `ShareGroupConfig`), refusing a lock duration outside
    /// its min and max as Kafka does.
    pub fn from_config(c: &BrokerConfig) -> Result<Self, ConfigError> {
        let get = |k: &str| crate::group::config::get(c, k);
        let lock = get("group.share.record.lock.duration.ms")?;
        let (min, max) = (
            get("group.share.min.record.lock.duration.ms")?,
            get("group.share.max.record.lock.duration.ms")?,
        );
        if !(min..=max).contains(&lock) {
            return Err(ConfigError::InvalidValue {
                key: "group.share.record.lock.duration.ms".into(),
                value: lock.to_string(),
                reason: format!(
                    "must be within group.share.min.record.lock.duration.ms ({min}) and group.share.max.record.lock.duration.ms ({max})"
                ),
            });
        }
        Ok(SharePartitionManager {
            limits: ShareLimits {
                lock_duration_ms: lock,
                delivery_count_limit: get("group.share.delivery.count.limit")?.clamp(1, 32767)
                    as i16,
                max_in_flight: get("group.share.partition.max.record.locks")?.max(1),
            },
            max_sessions: get("group.share.max.share.sessions")?.max(1) as usize,
            partitions: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            waiters: Mutex::new(Vec::new()),
            persister: persister::Persister::default(),
            write_locks: Mutex::new(HashMap::new()),
        })
    }

    /// A share group's settings: the broker's limits with the group's `overrides`.
    pub fn settings(
        &self,
        broker: &BrokerConfig,
        overrides: &std::collections::BTreeMap<String, String>,
    ) -> ShareGroupSettings {
        ShareGroupSettings::resolve(broker, self.limits, overrides)
    }

    // -----------------------------------------------------------------------------------------
    // Share sessions (Kafka's `SharePartitionManager.newContext` and
    // `acknowledgeSessionUpdate`)
    // -----------------------------------------------------------------------------------------

    /// The context of a ShareFetch: opens, continues or ends the member's session.
    pub fn new_context(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
        requested: &[(Uuid, i32)],
        forgotten: &[(Uuid, i32)],
        has_acks: bool,
    ) -> Result<FetchContext, ResponseError> {
        let key = (group.to_string(), member.to_string());
        let mut sessions = self.sessions.lock();
        match epoch {
            FINAL_EPOCH => {
                if !sessions.contains_key(&key) {
                    return Err(ResponseError::ShareSessionNotFound);
                }
                Ok(FetchContext::Final)
            }
            INITIAL_EPOCH => {
                if has_acks {
                    return Err(ResponseError::InvalidRequest);
                }
                sessions.remove(&key);
                if sessions.len() >= self.max_sessions {
                    return Err(ResponseError::ShareSessionLimitReached);
                }
                sessions.insert(
                    key,
                    ShareSession {
                        epoch: next_epoch(INITIAL_EPOCH),
                        partitions: requested.iter().copied().collect(),
                    },
                );
                Ok(FetchContext::Full(requested.to_vec()))
            }
            _ => {
                let s = sessions
                    .get_mut(&key)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                if s.epoch != epoch {
                    return Err(ResponseError::InvalidShareSessionEpoch);
                }
                s.partitions.extend(requested.iter().copied());
                for f in forgotten {
                    s.partitions.remove(f);
                }
                s.epoch = next_epoch(s.epoch);
                Ok(FetchContext::Incremental(
                    s.partitions.iter().copied().collect(),
                ))
            }
        }
    }

    /// A ShareAcknowledge's session check: epoch 0 is refused, -1 needs a session, any
    /// other must be the session's (and moves it on). Returns whether this is the final one.
    pub fn acknowledge_session_update(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
    ) -> Result<bool, ResponseError> {
        if epoch == INITIAL_EPOCH {
            return Err(ResponseError::InvalidShareSessionEpoch);
        }
        let mut sessions = self.sessions.lock();
        let s = sessions
            .get_mut(&(group.to_string(), member.to_string()))
            .ok_or(ResponseError::ShareSessionNotFound)?;
        if epoch == FINAL_EPOCH {
            return Ok(true);
        }
        if s.epoch != epoch {
            return Err(ResponseError::InvalidShareSessionEpoch);
        }
        s.epoch = next_epoch(s.epoch);
        Ok(false)
    }

    /// Closes a member's session and releases what it holds (Kafka's `releaseSession`): its
    /// acquired records go to other members at once instead of at the lock timeout.
    pub fn close_session(&self, group: &str, member: &str, limits: &ShareLimits) {
        self.sessions
            .lock()
            .remove(&(group.to_string(), member.to_string()));
        let mut released = false;
        for ((g, _, _), sp) in self.partitions.lock().iter_mut() {
            if g == group {
                released |= sp.release_member(member, limits);
            }
        }
        if released {
            self.wake();
        }
    }

    // -----------------------------------------------------------------------------------------
    // Share-partitions
    // -----------------------------------------------------------------------------------------

    /// Applies a member's acknowledgements to one share-partition; a RENEW restarts the
    /// record's lock for the group's `share.record.lock.duration.ms` from now (Kafka's
    /// `scheduleAcquisitionLockTimeout`), if the group allows renewal.
    pub fn acknowledge(
        &self,
        key: &SharePartitionKey,
        member: &str,
        batches: &[(i64, i64, Vec<i8>)],
        settings: &ShareGroupSettings,
    ) -> Result<(), (ResponseError, String)> {
        let now = crate::cluster::replica_manager::now_ms();
        let limits = &settings.limits;
        let renew_deadline_ms = settings
            .renew_enabled
            .then(|| now.saturating_add(limits.lock_duration_ms));
        let r = {
            let mut parts = self.partitions.lock();
            let Some(sp) = parts.get_mut(key) else {
                return Err((
                    ResponseError::InvalidRecordState,
                    "no records of this share-partition are acquired".into(),
                ));
            };
            sp.expire_locks(now, limits);
            sp.acknowledge(member, batches, limits, renew_deadline_ms)
        };
        self.wake();
        r.map_err(|e| match e {
            AckError::InvalidRecordState(m) => (ResponseError::InvalidRecordState, m),
            AckError::InvalidRequest(m) => (ResponseError::InvalidRequest, m),
        })
    }

    /// Acquires up to `max_records` of `part` for `member`, reading at most `max_bytes` of
    /// the log, up to the high watermark or, for a read_committed group, the last stable
    /// offset (Kafka's `FetchIsolation` of the share fetch), archiving the records of aborted
    /// transactions instead of handing them out.
    pub fn acquire(
        &self,
        key: &SharePartitionKey,
        member: &str,
        part: &Partition,
        max_records: MaxRecords,
        max_bytes: usize,
        settings: &ShareGroupSettings,
    ) -> Result<Acquired, ResponseError> {
        let now = crate::cluster::replica_manager::now_ms();
        let limits = &settings.limits;
        let read_limit = read_limit(part, settings.isolation);
        let (log_start, _) = part.offsets();
        // The state is read, the log read without the lock, and the acquisition made under
        // the lock again: it takes only offsets still Available or past the end then.
        let fetch_offset = {
            let mut parts = self.partitions.lock();
            let Some(sp) = parts.get_mut(key) else {
                // Not initialized ([`Self::maybe_initialize`]).
                return Ok(Acquired::default());
            };
            sp.on_log_start(log_start);
            if sp.expire_locks(now, limits) {
                drop(parts);
                self.wake();
                parts = self.partitions.lock();
            }
            let Some(sp) = parts.get(key) else {
                return Ok(Acquired::default());
            };
            if !sp.can_acquire(read_limit, limits) {
                return Ok(Acquired::default());
            }
            sp.fetch_offset()
        };
        let read = part
            .read(fetch_offset, max_bytes, true, settings.isolation)
            .map_err(|e| {
                ResponseError::try_from_code(e.error_code())
                    .unwrap_or(ResponseError::UnknownServerError)
            })?;
        let bytes = read
            .slice
            .read()
            .map_err(|_| ResponseError::KafkaStorageError)?;
        let aborted = read.aborted_transactions.as_deref().unwrap_or_default();
        let batches = split_batches(&bytes, aborted);
        let log_batches: Vec<LogBatch> = batches.iter().map(|b| b.1).collect();
        let (ranges, used) = {
            let mut parts = self.partitions.lock();
            let Some(sp) = parts.get_mut(key) else {
                return Ok(Acquired::default());
            };
            sp.acquire(member, &log_batches, max_records, now, limits)
        };
        let mut records = BytesMut::new();
        for i in used {
            let (span, _) = &batches[i];
            records.extend_from_slice(&bytes[span.clone()]);
        }
        Ok(Acquired {
            records: records.freeze(),
            ranges,
        })
    }

    /// Initializes a share-partition this node leads, unless it did at this leader epoch
    /// (Kafka's `SharePartition.maybeInitialize`): its state is read from its share
    /// coordinator; one with none starts where the group's `share.auto.offset.reset` puts it,
    /// and that start offset is written first (InitializeShareGroupState), so that a new
    /// leader starts there too.
    pub async fn maybe_initialize(
        &self,
        broker: &crate::broker::Broker,
        key: &SharePartitionKey,
        part: &Partition,
        settings: &ShareGroupSettings,
    ) -> Result<(), ResponseError> {
        let leader_epoch = part.leader_epoch();
        {
            let mut parts = self.partitions.lock();
            match parts.get(key) {
                Some(sp) if sp.leader_epoch == leader_epoch => return Ok(()),
                // Led before, at another epoch: what it held may have changed since.
                Some(_) => drop(parts.remove(key)),
                None => {}
            }
        }
        let read = self.persister.read(broker, key, leader_epoch).await?;
        let mut sp = if read.start_offset >= 0 {
            SharePartition::from_state(read.start_offset, &read.batches)
        } else {
            let now = crate::cluster::replica_manager::now_ms();
            let start = initial_offset(part, settings.auto_offset_reset, now)?;
            // The group coordinator initialized the state at start -1 with the group epoch
            // (at least 1): as Kafka's `SharePartition.maybeInitialize`, the start is only
            // held here and written by the first write. State epoch 0 means no state (a
            // share-partition fetched without an assignment): it is initialized here first,
            // as the share coordinator refuses writes to one never initialized.
            if read.state_epoch == 0 {
                self.persister
                    .initialize(broker, key, read.state_epoch, start)
                    .await?;
            }
            SharePartition::new(start)
        };
        sp.leader_epoch = leader_epoch;
        sp.state_epoch = read.state_epoch;
        self.partitions.lock().entry(key.clone()).or_insert(sp);
        self.wake();
        Ok(())
    }

    /// Writes a share-partition's state to its share coordinator if it changed (Kafka's
    /// `SharePartition.writeShareGroupState`, after an acknowledgement, a release or a lock
    /// timeout). A failed write leaves the state to be written by the next one.
    pub async fn persist(
        &self,
        broker: &crate::broker::Broker,
        key: &SharePartitionKey,
    ) -> Result<(), ResponseError> {
        let lock = self
            .write_locks
            .lock()
            .entry(key.clone())
            .or_default()
            .clone();
        let _writing = lock.lock().await;
        let state = {
            let mut parts = self.partitions.lock();
            parts.get_mut(key).and_then(|sp| {
                let w = sp.take_dirty_state()?;
                Some(coordinator::WriteState {
                    state_epoch: sp.state_epoch,
                    leader_epoch: sp.leader_epoch,
                    start_offset: w.start_offset,
                    delivery_complete_count: w.delivery_complete_count,
                    batches: w.batches,
                })
            })
        };
        let Some(w) = state else {
            return Ok(());
        };
        let r = self.persister.write(broker, key, &w).await;
        match r {
            Ok(()) => {}
            // The state was initialized again since this node read it (AlterShareGroupOffsets,
            // or a new leader): this copy is stale, and the next fetch reads the state back
            // (Kafka's `SharePartitionManager.fencedSharePartitionHandler`).
            Err(ResponseError::FencedStateEpoch | ResponseError::FencedLeaderEpoch) => {
                self.partitions.lock().remove(key);
            }
            Err(_) => {
                if let Some(sp) = self.partitions.lock().get_mut(key) {
                    sp.mark_dirty();
                }
            }
        }
        r
    }

    /// Persists every share-partition of `group` that changed (a closed share session
    /// released what its member held); failures are logged, as Kafka logs them. When no
    /// share session of the group is left on this node, its written share-partitions are
    /// dropped (Kafka's `ShareGroupListener.onGroupEmpty`), so that the next fetch reads
    /// their state again: AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups
    /// change it only while the group is empty.
    pub async fn persist_group(&self, broker: &crate::broker::Broker, group: &str) {
        let keys: Vec<SharePartitionKey> = self
            .partitions
            .lock()
            .keys()
            .filter(|k| k.0 == group)
            .cloned()
            .collect();
        let mut written = Vec::with_capacity(keys.len());
        for key in keys {
            match self.persist(broker, &key).await {
                Ok(()) => written.push(key),
                Err(e) => tracing::warn!(error = %e, group, "share state not written"),
            }
        }
        let sessions = self.sessions.lock();
        if sessions.keys().any(|(g, _)| g == group) {
            return;
        }
        let mut parts = self.partitions.lock();
        for key in written {
            if parts.get(&key).is_some_and(|sp| !sp.is_dirty()) {
                parts.remove(&key);
            }
        }
    }

    /// The earliest acquisition lock deadline among `keys`, for a parked fetch.
    pub fn next_lock_deadline_ms(&self, keys: &[SharePartitionKey]) -> Option<i64> {
        let parts = self.partitions.lock();
        keys.iter()
            .filter_map(|k| parts.get(k)?.next_lock_deadline_ms())
            .min()
    }

    /// The share-partitions this node holds (of one topic when `topic_id` is given), in key
    /// order, at most `max` (and whether any were left out), with their in-flight records:
    /// what `GET /v1/share-partitions` shows. Only those kept are copied under the lock.
    pub fn inspect(&self, topic_id: Option<Uuid>, max: usize) -> (Vec<SharePartitionView>, bool) {
        let parts = self.partitions.lock();
        let mut keys: Vec<&SharePartitionKey> = parts
            .keys()
            .filter(|k| topic_id.is_none_or(|id| k.1 == id))
            .collect();
        keys.sort();
        let truncated = keys.len() > max;
        let views = keys
            .into_iter()
            .take(max)
            .filter_map(|k| {
                let sp = parts.get(k)?;
                Some(SharePartitionView {
                    key: k.clone(),
                    start_offset: sp.start_offset(),
                    end_offset: sp.end_offset(),
                    leader_epoch: sp.leader_epoch,
                    state_epoch: sp.state_epoch,
                    in_flight: sp.in_flight(),
                })
            })
            .collect();
        (views, truncated)
    }

    /// Parks a share fetch until records may have become acquirable.
    pub fn park(&self, waiter: &Arc<Notify>) {
        let mut w = self.waiters.lock();
        if w.len() >= MAX_PARKED_SHARE_FETCHES {
            let half = w.len() / 2;
            for old in w.drain(..half) {
                old.notify_one();
            }
        }
        w.push(waiter.clone());
    }

    fn wake(&self) {
        let waiters = std::mem::take(&mut *self.waiters.lock());
        for w in waiters {
            w.notify_one();
        }
    }
}

/// Kafka's `ShareRequestMetadata.nextEpoch`: after `i32::MAX` comes 1 again.
fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 || epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// The end of what a share fetch may read: the high watermark, or the last stable offset at
/// read_committed.
fn read_limit(part: &Partition, isolation: FetchIsolation) -> i64 {
    match isolation {
        FetchIsolation::HighWatermark => part.high_watermark(),
        FetchIsolation::TxnCommitted => part.last_stable_offset(),
    }
}

/// Where a new share-partition starts (Kafka's `SharePartition.startOffsetDuringInitialization`
/// through `ReplicaManagerPartitionMetadataProvider`): the log start, the high watermark, or
/// the first offset at or after now minus the duration; OFFSET_NOT_AVAILABLE when no record
/// is that recent, and the next fetch tries again, as Kafka's initialization fails then.
fn initial_offset(
    part: &Partition,
    reset: AutoOffsetReset,
    now_ms: i64,
) -> Result<i64, ResponseError> {
    match reset {
        AutoOffsetReset::Earliest => Ok(part.offsets().0),
        AutoOffsetReset::Latest => Ok(part.high_watermark()),
        AutoOffsetReset::ByDurationMs(ms) => part
            .offset_for_timestamp(now_ms.saturating_sub(ms))
            .map_err(|e| e.response_error())?
            .map(|(offset, _)| offset)
            .ok_or(ResponseError::OffsetNotAvailable),
    }
}

/// The whole batches in `buf`: each one's byte span, offsets, and whether its offsets are to
/// be archived instead of handed out: a control batch, or a transactional batch of a
/// transaction in `aborted` (read_committed). Which batches are aborted is found as Kafka's
/// `SharePartition.filterAbortedTransactionalRecords` (and the consumer's `CompletedFetch`)
/// does: a producer is aborting from its aborted transaction's first offset until its ABORT
/// marker.
fn split_batches(buf: &[u8], aborted: &[AbortedTxn]) -> Vec<(std::ops::Range<usize>, LogBatch)> {
    use brook_storage::batch::batch_size_at;
    use brook_storage::{BatchHeader, RecordBatch};
    let mut pending: Vec<AbortedTxn> = aborted.to_vec();
    pending.sort_by_key(|t| std::cmp::Reverse(t.first_offset));
    let mut aborting: std::collections::HashSet<i64> = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(size) = batch_size_at(&buf[pos..]) {
        if pos + size > buf.len() {
            break;
        }
        let Some(h) = BatchHeader::new(&buf[pos..]) else {
            break;
        };
        let mut archive = h.is_control();
        if h.has_producer_id() {
            while pending
                .last()
                .is_some_and(|t| t.first_offset <= h.last_offset())
            {
                if let Some(t) = pending.pop() {
                    aborting.insert(t.producer_id);
                }
            }
            let abort_marker = h.is_control()
                && RecordBatch::parse(&buf[pos..pos + size])
                    .ok()
                    .and_then(|(b, _)| brook_storage::control::parse_end_txn_marker(&b).ok())
                    .flatten()
                    .is_some_and(|m| !m.commit);
            if abort_marker {
                aborting.remove(&h.producer_id());
            } else if h.is_transactional() && aborting.contains(&h.producer_id()) {
                archive = true;
            }
        }
        out.push((
            pos..pos + size,
            LogBatch {
                base_offset: h.base_offset(),
                last_offset: h.last_offset(),
                archive,
            },
        ));
        pos += size;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use brook_storage::batch::set_base_offset;
    use brook_storage::batch_builder::BatchBuilder;
    use brook_storage::control::{build_end_txn_marker, EndTxnMarker};

    fn data(producer_id: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new(0)
            .idempotent(producer_id, 0, 0)
            .records(1, 4);
        b.transactional = true;
        b.build().to_vec()
    }

    fn marker(producer_id: i64, commit: bool) -> Vec<u8> {
        let m = EndTxnMarker {
            commit,
            coordinator_epoch: 0,
        };
        build_end_txn_marker(producer_id, 0, m, 0).to_vec()
    }

    #[test]
    fn read_committed_archives_the_batches_of_aborted_transactions_only() {
        // 0: producer 1 (aborted), 1: producer 2 (committed), 2: ABORT of 1, 3: COMMIT of 2,
        // 4: producer 1 again, in a later transaction.
        let mut log = Vec::new();
        let batches = [data(1), data(2), marker(1, false), marker(2, true), data(1)];
        for (offset, mut b) in batches.into_iter().enumerate() {
            set_base_offset(&mut b, offset as i64);
            log.extend(b);
        }
        let aborted = [AbortedTxn {
            producer_id: 1,
            first_offset: 0,
            last_offset: 2,
            last_stable_offset: 3,
        }];
        let archived = |aborted: &[AbortedTxn]| -> Vec<bool> {
            split_batches(&log, aborted)
                .iter()
                .map(|(_, b)| b.archive)
                .collect()
        };
        assert_eq!(archived(&aborted), [true, false, true, true, false]);
        assert_eq!(archived(&[]), [false, false, true, true, false]);
    }
}
