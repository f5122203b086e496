//! The share coordinator (Kafka's `ShareCoordinatorService` and `ShareCoordinatorShard`):
//! the durable state of every share-partition, on the compacted internal topic
//! `__share_group_state`.
//!
//! A share-partition (group, topic id, partition) belongs to the `__share_group_state`
//! partition of its key `group:topicId:partition` (Kafka's `SharePartitionKey`, the topic
//! id as Kafka prints a `Uuid`), hashed as a group id is; the leader of that partition is its
//! coordinator (FindCoordinator key type 2). Its state (Kafka's `ShareGroupOffset`) is the
//! start offset, the state epoch, the last leader epoch and the state batches (offsets with
//! their delivery state and count). A write appends a `ShareUpdate` record holding the
//! request's batches, or, for the first write of a key and every
//! `share.coordinator.snapshot.update.records.per.snapshot` updates, a `ShareSnapshot` holding
//! the whole merged state; replay reads the latest snapshot and merges the updates after it,
//! so the log cleaner may drop everything older than each key's latest records.
//!
//! The partition leader's persister ([`super::persister`]) calls the state APIs
//! (InitializeShareGroupState, Read, Write, Delete, ReadShareGroupStateSummary,
//! [`crate::api::share_state`]). A write is appended and applied in memory under one short
//! `parking_lot::Mutex`, then answered once the high watermark passes it; one that fails to
//! replicate unloads the partition, so the next request reads the log back.
//! Leadership is checked on every request as the transaction coordinator checks it: a
//! `__share_group_state` partition this node leads at a leader epoch it has not loaded is read
//! back from its log first; one it no longer leads is dropped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use parking_lot::Mutex;

use super::records::{
    decode_key, decode_value, encode_key, encode_value, SnapshotFields, StateBatch, StateValue,
    DELIVERY_COMPLETE_COUNT_UNKNOWN, SNAPSHOT_KEY_VERSION, STATE_BATCHES_MAX, UPDATE_KEY_VERSION,
};
use super::SharePartitionKey;
use crate::cluster::replica_manager::ReplicaManager;
use crate::config::{BrokerConfig, ConfigError};
use crate::txn::log::CoordinatorLog;

/// The internal topic's name, as in Kafka.
pub const SHARE_GROUP_STATE_TOPIC: &str = "__share_group_state";
/// The start offset of a share-partition with no state (Kafka's
/// `PartitionFactory.UNINITIALIZED_START_OFFSET`).
pub const UNINITIALIZED_START_OFFSET: i64 = -1;

/// `share.coordinator.*` (Kafka's `ShareCoordinatorConfig`).
#[derive(Debug, Clone)]
pub struct ShareCoordinatorConfig {
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub min_isr: i32,
    pub segment_bytes: i64,
    pub snapshot_update_records_per_snapshot: u32,
    pub write_timeout: Duration,
}

impl ShareCoordinatorConfig {
    pub fn from_broker(c: &BrokerConfig) -> Result<Self, ConfigError> {
        let get = |k: &str, min: i64, max: i64| -> Result<i64, ConfigError> {
            let kafka_default = crate::config_def::kafka_broker_key(k).and_then(|d| d.default);
            let v = c
                .values
                .get(k)
                .map(String::as_str)
                .or(kafka_default)
                .unwrap_or("");
            match v.trim().parse::<i64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(n),
                _ => Err(ConfigError::InvalidValue {
                    key: k.into(),
                    value: v.into(),
                    reason: format!("must be a number from {min} to {max}"),
                }),
            }
        };
        let int = i32::MAX as i64;
        Ok(ShareCoordinatorConfig {
            num_partitions: get("share.coordinator.state.topic.num.partitions", 1, int)? as i32,
            replication_factor: get(
                "share.coordinator.state.topic.replication.factor",
                1,
                i16::MAX as i64,
            )? as i16,
            min_isr: get("share.coordinator.state.topic.min.isr", 1, i16::MAX as i64)? as i32,
            segment_bytes: get("share.coordinator.state.topic.segment.bytes", 1, int)?,
            snapshot_update_records_per_snapshot: get(
                "share.coordinator.snapshot.update.records.per.snapshot",
                0,
                500,
            )? as u32,
            write_timeout: Duration::from_millis(
                get("share.coordinator.write.timeout.ms", 1, int)? as u64,
            ),
        })
    }
}

/// One share-partition's durable state (Kafka's `ShareGroupOffset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupOffset {
    pub snapshot_epoch: i32,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    /// The offsets at or after the start offset whose delivery is complete, as the leader
    /// last wrote it (KIP-1226); -1 when unknown (a v0 write). The lag is derived from it.
    pub delivery_complete_count: i32,
    pub batches: Vec<StateBatch>,
    /// When the state was created and last snapshotted, as the last snapshot record holds
    /// them (Kafka's `ShareGroupOffset.createTimestamp`/`writeTimestamp`).
    pub create_timestamp_ms: i64,
    pub write_timestamp_ms: i64,
}

/// A key's state and the updates written since its last snapshot.
#[derive(Debug)]
struct Entry {
    offset: ShareGroupOffset,
    updates_since_snapshot: u32,
}

#[derive(Default)]
struct State {
    entries: HashMap<SharePartitionKey, Entry>,
    /// `__share_group_state` partition → the leader epoch it was loaded at.
    loaded: HashMap<i32, i32>,
}

/// What a WriteShareGroupState carries for one share-partition.
#[derive(Debug, Clone)]
pub struct WriteState {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    /// WriteShareGroupState v1's DeliveryCompleteCount; -1 at v0.
    pub delivery_complete_count: i32,
    pub batches: Vec<StateBatch>,
}

/// The share coordinator of this node.
pub struct ShareCoordinator {
    config: ShareCoordinatorConfig,
    replicas: Arc<ReplicaManager>,
    log: CoordinatorLog,
    state: Mutex<State>,
}

/// A share-partition's coordinator key, `group:topicId:partition` (Kafka's
/// `SharePartitionKey.asCoordinatorKey`; `Uuid.toString` is URL-safe base64 unpadded).
pub fn coordinator_key(key: &SharePartitionKey) -> String {
    use base64::Engine;
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.1.as_bytes());
    format!("{}:{}:{}", key.0, id, key.2)
}

impl ShareCoordinator {
    pub fn new(broker: &BrokerConfig, replicas: Arc<ReplicaManager>) -> Result<Self, ConfigError> {
        let config = ShareCoordinatorConfig::from_broker(broker)?;
        let log = CoordinatorLog::new(
            SHARE_GROUP_STATE_TOPIC,
            replicas.clone(),
            config.num_partitions,
            config.replication_factor,
            config.min_isr,
            config.segment_bytes,
        );
        Ok(ShareCoordinator {
            config,
            replicas,
            log,
            state: Mutex::new(State::default()),
        })
    }

    /// Creates `__share_group_state` if needed (FindCoordinator key type 2 does).
    pub async fn ensure_topic(&self) -> Result<(), ResponseError> {
        self.log
            .ensure_topic()
            .await
            .map_err(|e| e.response_error())
    }

    /// The `__share_group_state` partition of a coordinator key.
    pub fn partition_for(&self, coordinator_key: &str) -> i32 {
        self.log.partition_for(coordinator_key)
    }

    /// Checks that this node coordinates `key`, loading its partition when this node has
    /// come to lead it (Kafka's `CoordinatorRuntime` scheduleLoadOperation).
    fn acquire(&self, st: &mut State, key: &SharePartitionKey) -> Result<i32, ResponseError> {
        if self.replicas.topic(SHARE_GROUP_STATE_TOPIC).is_none() {
            return Err(ResponseError::NotCoordinator);
        }
        let index = self.partition_for(&coordinator_key(key));
        match self.log.led_epoch(index) {
            None => {
                self.unload(st, index);
                Err(ResponseError::NotCoordinator)
            }
            Some(e) if st.loaded.get(&index) == Some(&e) => Ok(index),
            Some(e) => {
                self.unload(st, index);
                self.load(st, index)?;
                st.loaded.insert(index, e);
                Ok(index)
            }
        }
    }

    /// Replays partition `index` (Kafka's `ShareCoordinatorShard.replay`). As Kafka's
    /// `CoordinatorLoaderImpl`, a record of an unknown type is skipped with a warning, and one
    /// that cannot be read fails the load: what was replayed is dropped and the partition is
    /// not served (COORDINATOR_NOT_AVAILABLE) until a later request loads it.
    fn load(&self, st: &mut State, index: i32) -> Result<(), ResponseError> {
        let per_snapshot = self.config.snapshot_update_records_per_snapshot;
        let mut failed: Option<String> = None;
        let n = self
            .log
            .load_partition(index, &mut |key, value| {
                if failed.is_none() {
                    if let Err(e) = replay_record(&mut st.entries, key, value, per_snapshot) {
                        failed = Some(e);
                    }
                }
            })
            .map_err(|e| e.response_error())?;
        if let Some(e) = failed {
            tracing::error!(
                partition = index,
                error = %e,
                "loading {SHARE_GROUP_STATE_TOPIC}-{index} failed: a record cannot be deserialized"
            );
            st.entries
                .retain(|k, _| self.partition_for(&coordinator_key(k)) != index);
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        tracing::info!(
            partition = index,
            records = n,
            "loaded {SHARE_GROUP_STATE_TOPIC}-{index}"
        );
        Ok(())
    }

    fn unload(&self, st: &mut State, index: i32) {
        if st.loaded.remove(&index).is_none() {
            return;
        }
        st.entries
            .retain(|k, _| self.partition_for(&coordinator_key(k)) != index);
    }

    /// UNKNOWN_TOPIC_OR_PARTITION unless the topic partition exists (Kafka's
    /// `maybeGetWriteStateError` checks the metadata image).
    fn check_partition(&self, key: &SharePartitionKey) -> Result<(), ResponseError> {
        let exists = self
            .replicas
            .topic_by_id(key.1)
            .is_some_and(|t| key.2 >= 0 && key.2 < t.partition_count());
        if exists {
            Ok(())
        } else {
            Err(ResponseError::UnknownTopicOrPartition)
        }
    }

    /// ReadShareGroupState (Kafka's `ShareCoordinatorShard.readState`): the state, or the
    /// uninitialized start offset; a leader epoch older than the last one seen is fenced, a
    /// newer one is remembered (a new partition leader fences the old one's writes).
    pub fn read(
        &self,
        key: &SharePartitionKey,
        leader_epoch: i32,
    ) -> Result<Option<ShareGroupOffset>, ResponseError> {
        self.check_partition(key)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, key)?;
        let Some(e) = st.entries.get_mut(key) else {
            return Ok(None);
        };
        if e.offset.leader_epoch > leader_epoch {
            return Err(ResponseError::FencedLeaderEpoch);
        }
        e.offset.leader_epoch = leader_epoch;
        Ok(Some(e.offset.clone()))
    }

    /// ReadShareGroupStateSummary: the state without its batches.
    pub fn read_summary(
        &self,
        key: &SharePartitionKey,
    ) -> Result<Option<ShareGroupOffset>, ResponseError> {
        self.check_partition(key)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, key)?;
        Ok(st.entries.get(key).map(|e| ShareGroupOffset {
            batches: Vec::new(),
            ..e.offset.clone()
        }))
    }

    /// WriteShareGroupState (Kafka's `ShareCoordinatorShard.writeState` and
    /// `generateShareStateRecord`).
    pub async fn write(&self, key: &SharePartitionKey, w: WriteState) -> Result<(), ResponseError> {
        self.check_partition(key)?;
        validate_batches(&w.batches)?;
        let written = {
            let mut st = self.state.lock();
            let index = self.acquire(&mut st, key)?;
            let per_snapshot = self.config.snapshot_update_records_per_snapshot;
            let (version, value) = match st.entries.get(key) {
                // Kafka's `maybeGetWriteStateError`: a share-partition never initialized
                // (InitializeShareGroupState) is not written (WRITE_UNINITIALIZED_SHARE_PARTITION,
                // INVALID_REQUEST), before the epochs are checked.
                None => return Err(ResponseError::InvalidRequest),
                // -1 is "not given" (Kafka's `maybeGetWriteStateError` skips it).
                Some(e) if w.leader_epoch != -1 && e.offset.leader_epoch > w.leader_epoch => {
                    return Err(ResponseError::FencedLeaderEpoch)
                }
                Some(e) if w.state_epoch != -1 && e.offset.state_epoch > w.state_epoch => {
                    return Err(ResponseError::FencedStateEpoch)
                }
                Some(e) if e.updates_since_snapshot >= per_snapshot => {
                    (SNAPSHOT_KEY_VERSION, snapshot_of(Some(&e.offset), &w))
                }
                Some(e) => {
                    let (start, count) = written_start_and_count(Some(&e.offset), &w);
                    (
                        UPDATE_KEY_VERSION,
                        StateValue {
                            snapshot_epoch: e.offset.snapshot_epoch,
                            snapshot: None,
                            leader_epoch: w.leader_epoch,
                            start_offset: start,
                            delivery_complete_count: count,
                            batches: combine(&[], &w.batches, start),
                        },
                    )
                }
            };
            let record_key = encode_key(version, &key.0, key.1, key.2);
            let written = self
                .log
                .append(index, record_key, Some(encode_value(&value)))
                .map_err(|e| e.response_error())?;
            replay(&mut st.entries, key.clone(), value, per_snapshot);
            written
        };
        self.committed(key, &written).await
    }

    /// InitializeShareGroupState (Kafka's `ShareCoordinatorShard.initializeState`): a snapshot
    /// with the state epoch and start offset and no batches; FENCED_STATE_EPOCH for an older
    /// state epoch than the one held.
    pub async fn initialize(
        &self,
        key: &SharePartitionKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ResponseError> {
        self.check_partition(key)?;
        let written = {
            let mut st = self.state.lock();
            let index = self.acquire(&mut st, key)?;
            let current = st.entries.get(key).map(|e| &e.offset);
            if current.is_some_and(|c| c.state_epoch > state_epoch) {
                return Err(ResponseError::FencedStateEpoch);
            }
            let now = crate::cluster::replica_manager::now_ms();
            // Kafka's `ShareGroupOffset.fromRequest`: leader epoch 0, created and written now.
            let value = StateValue {
                snapshot_epoch: current.map_or(0, |c| c.snapshot_epoch.wrapping_add(1)),
                snapshot: Some(SnapshotFields {
                    state_epoch,
                    create_timestamp_ms: now,
                    write_timestamp_ms: now,
                }),
                leader_epoch: 0,
                start_offset,
                // Kafka's `ShareGroupOffset.fromRequest`: nothing delivered yet at a start.
                delivery_complete_count: if start_offset == UNINITIALIZED_START_OFFSET {
                    DELIVERY_COMPLETE_COUNT_UNKNOWN
                } else {
                    0
                },
                batches: Vec::new(),
            };
            let record_key = encode_key(SNAPSHOT_KEY_VERSION, &key.0, key.1, key.2);
            let written = self
                .log
                .append(index, record_key, Some(encode_value(&value)))
                .map_err(|e| e.response_error())?;
            let per_snapshot = self.config.snapshot_update_records_per_snapshot;
            replay(&mut st.entries, key.clone(), value, per_snapshot);
            written
        };
        self.committed(key, &written).await
    }

    /// DeleteShareGroupState (Kafka's `ShareCoordinatorShard.deleteState`): tombstones for the
    /// key's snapshot and update records.
    pub async fn delete(&self, key: &SharePartitionKey) -> Result<(), ResponseError> {
        let written = {
            let mut st = self.state.lock();
            let index = self.acquire(&mut st, key)?;
            if !st.entries.contains_key(key) {
                return Ok(());
            }
            let mut last = None;
            for version in [SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION] {
                let record_key = encode_key(version, &key.0, key.1, key.2);
                last = Some(
                    self.log
                        .append(index, record_key, None)
                        .map_err(|e| e.response_error())?,
                );
            }
            st.entries.remove(key);
            last
        };
        match written {
            Some(w) => self.committed(key, &w).await,
            None => Ok(()),
        }
    }

    /// Waits for a write to replicate; a failure unloads its partition, so the state applied
    /// in memory is read back from the log by the next request.
    async fn committed(
        &self,
        key: &SharePartitionKey,
        written: &crate::txn::log::Written,
    ) -> Result<(), ResponseError> {
        let r = self
            .log
            .wait_committed(written, self.config.write_timeout)
            .await;
        if let Err(e) = r {
            let index = self.partition_for(&coordinator_key(key));
            let mut st = self.state.lock();
            self.unload(&mut st, index);
            return Err(e.response_error());
        }
        Ok(())
    }
}

/// A request's batches: each with its first offset at most its last, and not too many.
fn validate_batches(batches: &[StateBatch]) -> Result<(), ResponseError> {
    if batches.len() > STATE_BATCHES_MAX
        || batches
            .iter()
            .any(|b| b.last_offset < b.first_offset || b.first_offset < 0)
    {
        return Err(ResponseError::InvalidRequest);
    }
    Ok(())
}

/// A snapshot of the merged state: the first of a key (epoch 0), or the next after
/// `share.coordinator.snapshot.update.records.per.snapshot` updates.
fn snapshot_of(current: Option<&ShareGroupOffset>, w: &WriteState) -> StateValue {
    let (start, count) = written_start_and_count(current, w);
    let now = crate::cluster::replica_manager::now_ms();
    StateValue {
        snapshot_epoch: current.map_or(0, |c| c.snapshot_epoch.wrapping_add(1)),
        // Kafka's `generateShareStateRecord` stamps a new snapshot as created and written now.
        snapshot: Some(SnapshotFields {
            state_epoch: match (w.state_epoch, current) {
                (-1, Some(c)) => c.state_epoch,
                (s, _) => s,
            },
            create_timestamp_ms: now,
            write_timestamp_ms: now,
        }),
        leader_epoch: match (w.leader_epoch, current) {
            (-1, Some(c)) => c.leader_epoch,
            (l, _) => l,
        },
        start_offset: start,
        delivery_complete_count: count,
        batches: combine(current.map_or(&[], |c| &c.batches), &w.batches, start),
    }
}

/// The start offset and delivery complete count a write leaves (Kafka's
/// `ShareCoordinatorShard.generateShareStateRecord`): the start never moves back (a write's
/// -1 keeps it); the count is the write's at a newer start, the larger of both at the same
/// start, and the held one when the write's start is older.
fn written_start_and_count(current: Option<&ShareGroupOffset>, w: &WriteState) -> (i64, i32) {
    let Some(c) = current else {
        return (w.start_offset, w.delivery_complete_count);
    };
    let count = match w.start_offset.cmp(&c.start_offset) {
        std::cmp::Ordering::Greater => w.delivery_complete_count,
        std::cmp::Ordering::Equal => w.delivery_complete_count.max(c.delivery_complete_count),
        std::cmp::Ordering::Less => c.delivery_complete_count,
    };
    (w.start_offset.max(c.start_offset), count)
}

/// Replays one stored record: a tombstone removes its key, a record of an unknown type is
/// skipped with a warning (Kafka's `UnknownRecordTypeException`), one that cannot be read is
/// the error that fails the load (Kafka's "Deserializing record ... failed").
fn replay_record(
    entries: &mut HashMap<SharePartitionKey, Entry>,
    key: &[u8],
    value: Option<&[u8]>,
    per_snapshot: u32,
) -> Result<(), String> {
    let Some((version, group, topic_id, partition)) = decode_key(key)? else {
        tracing::warn!(
            record_type = key.get(..2).map(|t| i16::from_be_bytes([t[0], t[1]])),
            "unknown record type in {SHARE_GROUP_STATE_TOPIC}, ignoring it"
        );
        return Ok(());
    };
    let k = (group, topic_id, partition);
    match value {
        None => {
            entries.remove(&k);
        }
        Some(v) => {
            let v = decode_value(v, version == SNAPSHOT_KEY_VERSION)
                .map_err(|e| format!("record of {}:{}:{}: {e}", k.0, k.1, k.2))?;
            replay(entries, k, v, per_snapshot);
        }
    }
    Ok(())
}

/// Applies one record (Kafka's `handleShareSnapshot` / `handleShareUpdate`): a snapshot
/// replaces the state, an update merges into it. The leader epoch held never goes back
/// (Kafka's `maybeUpdateLeaderEpochMap`; an initialize snapshot carries 0).
fn replay(
    entries: &mut HashMap<SharePartitionKey, Entry>,
    key: SharePartitionKey,
    v: StateValue,
    per_snapshot: u32,
) {
    match (v.snapshot, entries.get_mut(&key)) {
        (Some(s), held) => {
            let (updates, leader_epoch) = held.map_or((0, v.leader_epoch), |e| {
                (
                    e.updates_since_snapshot,
                    e.offset.leader_epoch.max(v.leader_epoch),
                )
            });
            let e = Entry {
                offset: ShareGroupOffset {
                    snapshot_epoch: v.snapshot_epoch,
                    state_epoch: s.state_epoch,
                    leader_epoch,
                    start_offset: v.start_offset,
                    delivery_complete_count: v.delivery_complete_count,
                    batches: v.batches,
                    create_timestamp_ms: s.create_timestamp_ms,
                    write_timestamp_ms: s.write_timestamp_ms,
                },
                updates_since_snapshot: if updates >= per_snapshot { 0 } else { updates },
            };
            entries.insert(key, e);
        }
        (None, Some(e)) => {
            let o = &mut e.offset;
            if v.start_offset != -1 {
                o.start_offset = v.start_offset;
            }
            o.leader_epoch = o.leader_epoch.max(v.leader_epoch);
            // Kafka's `ShareCoordinatorShard.merge` takes the update's count as it is.
            o.delivery_complete_count = v.delivery_complete_count;
            o.batches = combine(&o.batches, &v.batches, o.start_offset);
            e.updates_since_snapshot += 1;
        }
        (None, None) => {
            // Kafka's `ShareGroupOffset.fromRecord(ShareUpdateValue)`: state epoch and
            // timestamps 0.
            let offset = ShareGroupOffset {
                snapshot_epoch: v.snapshot_epoch,
                state_epoch: 0,
                leader_epoch: v.leader_epoch,
                start_offset: v.start_offset,
                delivery_complete_count: v.delivery_complete_count,
                batches: v.batches,
                create_timestamp_ms: 0,
                write_timestamp_ms: 0,
            };
            entries.insert(
                key,
                Entry {
                    offset,
                    updates_since_snapshot: 0,
                },
            );
        }
    }
}

/// Kafka's `PersisterStateBatchCombiner.combineStateBatches`: `newer` laid over `current`
/// (a later batch wins where ranges overlap), nothing below `start_offset`, and neighbouring
/// batches with the same state and count joined.
pub fn combine(current: &[StateBatch], newer: &[StateBatch], start_offset: i64) -> Vec<StateBatch> {
    let mut out: Vec<StateBatch> = current.to_vec();
    for n in newer {
        let mut next = Vec::with_capacity(out.len() + 2);
        for c in out {
            if c.last_offset < n.first_offset || c.first_offset > n.last_offset {
                next.push(c);
                continue;
            }
            if c.first_offset < n.first_offset {
                next.push(StateBatch {
                    last_offset: n.first_offset - 1,
                    ..c
                });
            }
            if c.last_offset > n.last_offset {
                next.push(StateBatch {
                    first_offset: n.last_offset + 1,
                    ..c
                });
            }
        }
        next.push(*n);
        out = next;
    }
    out.retain(|b| b.last_offset >= start_offset);
    for b in &mut out {
        b.first_offset = b.first_offset.max(start_offset);
    }
    out.sort_by_key(|b| b.first_offset);
    let mut joined: Vec<StateBatch> = Vec::with_capacity(out.len());
    for b in out {
        match joined.last_mut() {
            Some(l)
                if l.last_offset + 1 == b.first_offset
                    && l.delivery_state == b.delivery_state
                    && l.delivery_count == b.delivery_count =>
            {
                l.last_offset = b.last_offset
            }
            _ => joined.push(b),
        }
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn b(first: i64, last: i64, state: i8, count: i16) -> StateBatch {
        StateBatch {
            first_offset: first,
            last_offset: last,
            delivery_state: state,
            delivery_count: count,
        }
    }

    #[test]
    fn newer_batches_win_and_the_start_offset_cuts() {
        let current = [b(0, 9, 0, 1)];
        let newer = [b(3, 5, 2, 1), b(9, 12, 0, 2)];
        assert_eq!(
            combine(&current, &newer, 2),
            [b(2, 2, 0, 1), b(3, 5, 2, 1), b(6, 8, 0, 1), b(9, 12, 0, 2)]
        );
        assert_eq!(
            combine(&[b(0, 4, 0, 1)], &[b(5, 9, 0, 1)], 0),
            [b(0, 9, 0, 1)]
        );
        assert!(combine(&current, &[], 10).is_empty());
    }

    #[test]
    fn updates_merge_into_the_snapshot_and_a_snapshot_replaces() {
        let key: SharePartitionKey = ("g".into(), Uuid::from_u128(1), 0);
        let mut entries = HashMap::new();
        let snapshot = StateValue {
            snapshot_epoch: 0,
            snapshot: Some(SnapshotFields {
                state_epoch: 0,
                create_timestamp_ms: 10,
                write_timestamp_ms: 10,
            }),
            leader_epoch: 1,
            start_offset: 0,
            delivery_complete_count: 0,
            batches: vec![b(0, 9, 0, 1)],
        };
        replay(&mut entries, key.clone(), snapshot.clone(), 2);
        let update = StateValue {
            snapshot: None,
            start_offset: 5,
            delivery_complete_count: 2,
            batches: vec![b(5, 6, 2, 1)],
            ..snapshot.clone()
        };
        replay(&mut entries, key.clone(), update, 2);
        let e = &entries[&key];
        assert_eq!(e.offset.start_offset, 5);
        assert_eq!(e.offset.batches, [b(5, 6, 2, 1), b(7, 9, 0, 1)]);
        assert_eq!(e.updates_since_snapshot, 1);
        assert_eq!(e.offset.delivery_complete_count, 2);
        replay(&mut entries, key.clone(), snapshot, 2);
        assert_eq!(entries[&key].offset.batches, [b(0, 9, 0, 1)]);
        assert_eq!(entries[&key].offset.create_timestamp_ms, 10);
    }

    /// As Kafka's loader: an unknown record type is skipped, an unreadable value (here one
    /// of Brook's older layout, a 2-byte snapshot epoch) is an error naming the key, and a
    /// snapshot never moves the held leader epoch back (an initialize writes 0).
    #[test]
    fn replay_skips_unknown_types_and_refuses_unreadable_values() {
        let id = Uuid::from_u128(1);
        let mut entries = HashMap::new();
        let mut other = encode_key(UPDATE_KEY_VERSION, "g", id, 0).to_vec();
        other[1] = 9;
        assert_eq!(
            replay_record(&mut entries, &other, Some(&[0, 0]), 5),
            Ok(())
        );
        let key = encode_key(SNAPSHOT_KEY_VERSION, "g", id, 0);
        let old = [
            0u8, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 5, 1, 0,
        ];
        let err = replay_record(&mut entries, &key, Some(&old), 5).unwrap_err();
        assert!(err.starts_with("record of g:"), "{err}");
        assert!(entries.is_empty());
        let snapshot = |leader_epoch| StateValue {
            snapshot_epoch: 0,
            snapshot: Some(SnapshotFields {
                state_epoch: 0,
                create_timestamp_ms: 1,
                write_timestamp_ms: 1,
            }),
            leader_epoch,
            start_offset: 0,
            delivery_complete_count: 0,
            batches: Vec::new(),
        };
        let v = encode_value(&snapshot(4));
        assert_eq!(replay_record(&mut entries, &key, Some(&v), 5), Ok(()));
        replay(&mut entries, ("g".into(), id, 0), snapshot(0), 5);
        assert_eq!(entries[&("g".to_string(), id, 0)].offset.leader_epoch, 4);
        assert_eq!(replay_record(&mut entries, &key, None, 5), Ok(()));
        assert!(entries.is_empty());
    }

    #[test]
    fn a_write_never_moves_the_start_back_and_keeps_the_count_as_kafka() {
        let held = ShareGroupOffset {
            snapshot_epoch: 0,
            state_epoch: 0,
            leader_epoch: 0,
            start_offset: 5,
            delivery_complete_count: 3,
            batches: Vec::new(),
            create_timestamp_ms: 0,
            write_timestamp_ms: 0,
        };
        let w = |start_offset, delivery_complete_count| WriteState {
            state_epoch: 0,
            leader_epoch: 0,
            start_offset,
            delivery_complete_count,
            batches: Vec::new(),
        };
        assert_eq!(written_start_and_count(Some(&held), &w(8, 1)), (8, 1));
        assert_eq!(written_start_and_count(Some(&held), &w(5, 2)), (5, 3));
        assert_eq!(written_start_and_count(Some(&held), &w(5, 4)), (5, 4));
        assert_eq!(written_start_and_count(Some(&held), &w(2, 9)), (5, 3));
        assert_eq!(written_start_and_count(Some(&held), &w(-1, -1)), (5, 3));
        assert_eq!(written_start_and_count(None, &w(0, 5)), (0, 5));
    }

    #[test]
    fn the_coordinator_key_prints_the_topic_id_as_kafka() {
        let id = Uuid::from_u128(0);
        assert_eq!(
            coordinator_key(&("g".into(), id, 3)),
            "g:AAAAAAAAAAAAAAAAAAAAAA:3"
        );
    }
}
