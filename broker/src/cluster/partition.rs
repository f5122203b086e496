//! A partition on this node: its log, its role (leader or follower), high watermark, leader
//! epoch, ISR and the followers' progress, and the requests waiting on it.
//!
//! As leader it tracks each follower's log end offset from the follower's Fetch requests and
//! advances the high watermark to the smallest log end offset in the ISR, but only while the
//! ISR has at least `min.insync.replicas` members. A follower that stays behind for
//! `replica.lag.time.max.ms` is proposed for removal from the ISR; one that catches up is
//! proposed for re-admission. Proposals go to the controller (AlterPartition); the committed
//! ISR comes back through the metadata image.
//!
//! The mutable log sits behind a short `parking_lot::Mutex` (validate, dedup, assign offsets,
//! write to the page cache). It is a blocking mutex, not tokio's, because the critical
//! section never awaits. Readers take the lock only to locate the bytes ([`FetchSlice`]) and
//! do the positional read after releasing it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};
use uuid::Uuid;

use crate::log::{FetchSlice, LogAppendInfo, LogConfig, LogError, UnifiedLog};

/// Bound on fetch requests parked on one partition; past it the oldest waiters are woken
/// early (they re-check and re-park), so a flood of idle consumers cannot grow memory.
pub const MAX_PARKED_FETCHES_PER_PARTITION: usize = 1024;

/// The errors a partition operation can return, beyond the log's own.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("ISR has {isr} member(s), fewer than min.insync.replicas={min_isr}")]
    NotEnoughReplicas { isr: usize, min_isr: i32 },
    #[error("leader epoch {requested} is older than the current {current}")]
    FencedLeaderEpoch { requested: i32, current: i32 },
    #[error("leader epoch {requested} is newer than the current {current}")]
    UnknownLeaderEpoch { requested: i32, current: i32 },
    #[error("this node is not the leader of the partition")]
    NotLeader,
    #[error("ISR shrank to {isr} below min.insync.replicas={min_isr} after the append")]
    NotEnoughReplicasAfterAppend { isr: usize, min_isr: i32 },
    #[error("the high watermark did not reach the batch within the request timeout")]
    RequestTimedOut,
}

impl PartitionError {
    /// The Kafka error code for this error.
    pub fn error_code(&self) -> i16 {
        match self {
            PartitionError::Log(e) => e.error_code(),
            PartitionError::NotEnoughReplicas { .. } => 19,
            PartitionError::FencedLeaderEpoch { .. } => 74,
            PartitionError::UnknownLeaderEpoch { .. } => 75,
            PartitionError::NotLeader => 6,
            PartitionError::NotEnoughReplicasAfterAppend { .. } => 20,
            PartitionError::RequestTimedOut => 7,
        }
    }
}

/// What a read found: the bytes to send and the offsets that frame them.
#[derive(Debug)]
pub struct PartitionRead {
    pub slice: FetchSlice,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

/// What a follower's fetches tell the leader.
#[derive(Debug, Clone, Copy)]
pub struct FollowerState {
    /// The follower's log end offset (its last fetch offset), -1 until it fetches.
    pub log_end_offset: i64,
    /// When the follower last reached the leader's log end offset.
    pub last_caught_up_ms: i64,
}

/// This node's role for the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower {
        leader: i32,
    },
    /// Not a replica any more, or no leader is known.
    None,
}

/// The replication state that changes with leadership and ISR.
#[derive(Debug, Clone)]
struct ReplicaState {
    role: Role,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    partition_epoch: i32,
    followers: HashMap<i32, FollowerState>,
    /// The leader epoch's start offset: a follower rejoins the ISR only past it.
    leader_epoch_start_offset: i64,
    /// An ISR change sent to the controller and not yet answered.
    pending_isr: Option<Vec<i32>>,
}

/// One partition of one topic hosted by this node.
pub struct Partition {
    pub topic: String,
    pub topic_id: Uuid,
    pub index: i32,
    node_id: i32,
    log: Mutex<UnifiedLog>,
    /// Invariant: `log_start_offset <= high_watermark <= log_end_offset`. Only appends move
    /// it, under the log lock; readers load it without the lock.
    high_watermark: AtomicI64,
    leader_epoch: AtomicI32,
    /// The topic's min.insync.replicas, kept here so produce needs no metadata lookup.
    min_insync_replicas: AtomicI32,
    /// Fetches waiting for data on this partition (Kafka's DelayedFetch purgatory, reduced to
    /// a wake-up list: a woken fetch re-reads everything it asked for).
    waiters: Mutex<Vec<Arc<Notify>>>,
    /// Role, ISR and followers. Locked briefly; never held across an await or the log lock.
    state: Mutex<ReplicaState>,
    /// The high watermark as a channel: acks=all produce requests wait on it (Kafka's
    /// DelayedProduce purgatory).
    hw_tx: watch::Sender<i64>,
    /// Bumped on every role or epoch change, so waiters notice lost leadership.
    role_version: watch::Sender<u64>,
}

impl Partition {
    /// Wraps an opened log and makes this node its leader at epoch 0. On a single node the
    /// whole log is committed: HW = LEO.
    pub fn new(
        topic: String,
        topic_id: Uuid,
        index: i32,
        node_id: i32,
        min_insync_replicas: i32,
        log: UnifiedLog,
    ) -> Self {
        let mut log = log;
        if let Err(e) = log.maybe_assign_epoch_start_offset(0) {
            // The cache is derived data; a failed checkpoint write costs a rebuild later.
            tracing::warn!(%topic, partition = index, error = %e, "could not persist the leader epoch cache");
        }
        Partition::build(topic, topic_id, index, node_id, min_insync_replicas, log)
    }

    fn build(
        topic: String,
        topic_id: Uuid,
        index: i32,
        node_id: i32,
        min_insync_replicas: i32,
        log: UnifiedLog,
    ) -> Self {
        let hw = log.log_end_offset();
        Partition {
            topic,
            topic_id,
            index,
            node_id,
            log: Mutex::new(log),
            high_watermark: AtomicI64::new(hw),
            leader_epoch: AtomicI32::new(0),
            min_insync_replicas: AtomicI32::new(min_insync_replicas),
            waiters: Mutex::new(Vec::new()),
            state: Mutex::new(ReplicaState {
                role: Role::Leader,
                replicas: vec![node_id],
                isr: vec![node_id],
                partition_epoch: 0,
                followers: HashMap::new(),
                leader_epoch_start_offset: 0,
                pending_isr: None,
            }),
            hw_tx: watch::channel(hw).0,
            role_version: watch::channel(0).0,
        }
    }

    /// The node leading this partition, or -1.
    pub fn leader_id(&self) -> i32 {
        match self.state.lock().role {
            Role::Leader => self.node_id,
            Role::Follower { leader } => leader,
            Role::None => -1,
        }
    }

    /// This node's role.
    pub fn role(&self) -> Role {
        self.state.lock().role.clone()
    }

    /// True when this node leads the partition.
    pub fn is_leader(&self) -> bool {
        self.state.lock().role == Role::Leader
    }

    /// The replica set.
    pub fn replicas(&self) -> Vec<i32> {
        self.state.lock().replicas.clone()
    }

    /// The partition epoch (bumped by every ISR or leader change).
    pub fn partition_epoch(&self) -> i32 {
        self.state.lock().partition_epoch
    }

    /// The followers' progress as the leader sees it.
    pub fn followers(&self) -> HashMap<i32, FollowerState> {
        self.state.lock().followers.clone()
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    /// The in-sync replicas.
    pub fn isr(&self) -> Vec<i32> {
        self.state.lock().isr.clone()
    }

    /// The high watermark, read without the lock.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// Log start offset and log end offset.
    pub fn offsets(&self) -> (i64, i64) {
        let log = self.log.lock();
        (log.log_start_offset(), log.log_end_offset())
    }

    /// Checks a client's view of the leader epoch (`-1` means "not known").
    pub fn check_leader_epoch(&self, requested: i32) -> Result<(), PartitionError> {
        let current = self.leader_epoch();
        if requested < 0 || requested == current {
            Ok(())
        } else if requested < current {
            Err(PartitionError::FencedLeaderEpoch { requested, current })
        } else {
            Err(PartitionError::UnknownLeaderEpoch { requested, current })
        }
    }

    /// Appends one produce batch as leader. `required_acks == -1` enforces min.insync.replicas
    /// before the append, as Kafka does; waiting for the high watermark is the caller's
    /// ([`Self::wait_for_high_watermark`]), outside every lock.
    pub fn append_records_to_leader(
        &self,
        records: Bytes,
        required_acks: i16,
        now_ms: i64,
    ) -> Result<LogAppendInfo, PartitionError> {
        let min_insync_replicas = self.min_insync_replicas.load(Ordering::Acquire);
        {
            let st = self.state.lock();
            if st.role != Role::Leader {
                return Err(PartitionError::NotLeader);
            }
            if required_acks == -1 && (st.isr.len() as i32) < min_insync_replicas {
                return Err(PartitionError::NotEnoughReplicas {
                    isr: st.isr.len(),
                    min_isr: min_insync_replicas,
                });
            }
        }
        let (info, leo) = {
            let mut log = self.log.lock();
            let info = log.append_as_leader(records, self.leader_epoch(), now_ms)?;
            let leo = log.log_end_offset();
            assert!(
                log.log_start_offset() <= leo,
                "log start offset beyond log end offset"
            );
            (info, leo)
        };
        if !info.duplicate {
            self.maybe_advance_high_watermark(leo);
            self.wake_fetchers();
        }
        Ok(info)
    }

    /// Waits until the high watermark passes `last_offset` (acks=all), for at most `timeout`.
    /// Fails if leadership changes meanwhile, and with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the
    /// ISR shrank below min.insync.replicas by the time the batch was committed.
    pub async fn wait_for_high_watermark(
        &self,
        last_offset: i64,
        timeout: std::time::Duration,
    ) -> Result<(), PartitionError> {
        let mut hw_rx = self.hw_tx.subscribe();
        let mut role_rx = self.role_version.subscribe();
        role_rx.borrow_and_update();
        let wait = async {
            loop {
                if *hw_rx.borrow_and_update() > last_offset {
                    return Ok(());
                }
                tokio::select! {
                    r = hw_rx.changed() => if r.is_err() { return Err(PartitionError::NotLeader) },
                    _ = role_rx.changed() => return Err(PartitionError::NotLeader),
                }
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Err(_) => Err(PartitionError::RequestTimedOut),
            Ok(Err(e)) => Err(e),
            Ok(Ok(())) => {
                let min_isr = self.min_insync_replicas.load(Ordering::Acquire);
                let st = self.state.lock();
                if st.role != Role::Leader {
                    Err(PartitionError::NotLeader)
                } else if (st.isr.len() as i32) < min_isr {
                    Err(PartitionError::NotEnoughReplicasAfterAppend {
                        isr: st.isr.len(),
                        min_isr,
                    })
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Leader: recomputes the high watermark from the ISR's log end offsets. It only moves
    /// forward, and only while the ISR has at least min.insync.replicas members.
    fn maybe_advance_high_watermark(&self, leader_leo: i64) {
        let min_isr = self.min_insync_replicas.load(Ordering::Acquire);
        let candidate = {
            let st = self.state.lock();
            if st.role != Role::Leader || (st.isr.len() as i32) < min_isr {
                return;
            }
            let mut hw = leader_leo;
            for id in &st.isr {
                if *id == self.node_id {
                    continue;
                }
                match st.followers.get(id) {
                    Some(f) if f.log_end_offset >= 0 => hw = hw.min(f.log_end_offset),
                    _ => return,
                }
            }
            hw
        };
        self.raise_high_watermark(candidate);
    }

    fn raise_high_watermark(&self, candidate: i64) {
        let old = self.high_watermark.fetch_max(candidate, Ordering::AcqRel);
        if candidate > old {
            self.hw_tx.send_replace(candidate);
            self.wake_fetchers();
        }
    }

    /// Leader: records a follower's fetch at `fetch_offset`. Returns an ISR to propose when
    /// the follower has caught up and is not in the ISR yet.
    pub fn record_follower_fetch(
        &self,
        replica: i32,
        fetch_offset: i64,
        now_ms: i64,
    ) -> Option<Vec<i32>> {
        let leo = self.log.lock().log_end_offset();
        let hw = self.high_watermark();
        let proposal = {
            let mut st = self.state.lock();
            if st.role != Role::Leader || !st.replicas.contains(&replica) {
                return None;
            }
            let f = st.followers.entry(replica).or_insert(FollowerState {
                log_end_offset: -1,
                last_caught_up_ms: now_ms,
            });
            f.log_end_offset = fetch_offset;
            if fetch_offset >= leo {
                f.last_caught_up_ms = now_ms;
            }
            let rejoin = !st.isr.contains(&replica)
                && st.pending_isr.is_none()
                && fetch_offset >= hw
                && fetch_offset >= st.leader_epoch_start_offset;
            if rejoin {
                let mut isr = st.isr.clone();
                isr.push(replica);
                isr.sort_unstable();
                st.pending_isr = Some(isr.clone());
                Some(isr)
            } else {
                None
            }
        };
        self.maybe_advance_high_watermark(leo);
        proposal
    }

    /// Leader: an ISR without the followers that have not caught up for `lag_max_ms`, if any
    /// must go. The leader itself always stays.
    pub fn isr_shrink_proposal(&self, now_ms: i64, lag_max_ms: i64) -> Option<Vec<i32>> {
        let mut st = self.state.lock();
        if st.role != Role::Leader || st.pending_isr.is_some() {
            return None;
        }
        let laggards: Vec<i32> = st
            .isr
            .iter()
            .copied()
            .filter(|id| *id != self.node_id)
            .filter(|id| {
                st.followers
                    .get(id)
                    .is_none_or(|f| now_ms - f.last_caught_up_ms > lag_max_ms)
            })
            .collect();
        if laggards.is_empty() {
            return None;
        }
        let isr: Vec<i32> = st
            .isr
            .iter()
            .copied()
            .filter(|id| !laggards.contains(id))
            .collect();
        st.pending_isr = Some(isr.clone());
        Some(isr)
    }

    /// Leader: the controller answered an ISR proposal (`None` when it failed).
    pub fn complete_isr_change(&self, committed: Option<(i32, Vec<i32>)>) {
        {
            let mut st = self.state.lock();
            st.pending_isr = None;
            if let Some((partition_epoch, isr)) = committed {
                if partition_epoch >= st.partition_epoch {
                    st.partition_epoch = partition_epoch;
                    st.isr = isr;
                }
            }
        }
        let leo = self.log.lock().log_end_offset();
        self.maybe_advance_high_watermark(leo);
    }

    /// Applies the partition's registration from the metadata image: leader, leader epoch,
    /// partition epoch, replicas and ISR. Stale registrations (older epochs) are ignored.
    /// Returns the new role when it changed.
    pub fn apply_registration(
        &self,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        now_ms: i64,
    ) -> Option<Role> {
        let current_epoch = self.leader_epoch();
        let mut st = self.state.lock();
        if leader_epoch < current_epoch
            || (leader_epoch == current_epoch && partition_epoch < st.partition_epoch)
        {
            return None;
        }
        let role = if !replicas.contains(&self.node_id) || leader < 0 {
            Role::None
        } else if leader == self.node_id {
            Role::Leader
        } else {
            Role::Follower { leader }
        };
        let epoch_changed = leader_epoch != current_epoch;
        let role_changed = role != st.role || epoch_changed;
        st.replicas = replicas;
        st.isr = isr;
        st.partition_epoch = partition_epoch;
        if role_changed {
            st.role = role.clone();
            st.pending_isr = None;
            st.followers.clear();
            if role == Role::Leader {
                // A new leader gives every follower a full lag window to show up.
                for id in st.replicas.clone() {
                    if id != self.node_id {
                        st.followers.insert(
                            id,
                            FollowerState {
                                log_end_offset: -1,
                                last_caught_up_ms: now_ms,
                            },
                        );
                    }
                }
            }
            self.leader_epoch.store(leader_epoch, Ordering::Release);
        }
        drop(st);
        if role_changed {
            if role == Role::Leader {
                let mut log = self.log.lock();
                if let Err(e) = log.maybe_assign_epoch_start_offset(leader_epoch) {
                    tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "could not persist the leader epoch cache");
                }
                let start = log.log_end_offset();
                drop(log);
                self.state.lock().leader_epoch_start_offset = start;
            }
            self.role_version.send_modify(|v| *v += 1);
            self.wake_fetchers();
            tracing::info!(topic = %self.topic, partition = self.index, ?role, leader_epoch, "partition role changed");
            return Some(role);
        }
        let leo = self.log.lock().log_end_offset();
        self.maybe_advance_high_watermark(leo);
        None
    }

    /// Follower: appends batches fetched from the leader and takes the leader's high
    /// watermark, bounded by this log's end.
    pub fn append_as_follower(
        &self,
        records: Bytes,
        leader_high_watermark: i64,
    ) -> Result<i64, PartitionError> {
        let leo = {
            let mut log = self.log.lock();
            if !records.is_empty() {
                log.append_as_follower(records)?;
            }
            let leo = log.log_end_offset();
            let hw = leader_high_watermark.min(leo);
            log.set_high_watermark(hw.max(self.high_watermark()));
            leo
        };
        self.raise_high_watermark(leader_high_watermark.min(leo));
        Ok(leo)
    }

    /// Follower: removes everything at or after `offset` (divergence from the leader).
    pub fn truncate_to(&self, offset: i64) -> Result<(), PartitionError> {
        let mut log = self.log.lock();
        log.truncate_to(offset)?;
        let leo = log.log_end_offset();
        drop(log);
        // The high watermark never exceeds the log end; a truncated follower's HW drops.
        if self.high_watermark() > leo {
            self.high_watermark.store(leo, Ordering::Release);
            self.hw_tx.send_replace(leo);
        }
        Ok(())
    }

    /// Follower: restarts the log empty at `offset` (it fell below the leader's log start).
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), PartitionError> {
        self.log.lock().truncate_fully_and_start_at(offset)?;
        self.high_watermark.store(offset, Ordering::Release);
        self.hw_tx.send_replace(offset);
        Ok(())
    }

    /// The log end offset and the latest leader epoch in the log (for follower fetches).
    pub fn fetch_position(&self) -> (i64, i32, i64) {
        let log = self.log.lock();
        (
            log.log_end_offset(),
            log.latest_epoch().unwrap_or(-1),
            log.log_start_offset(),
        )
    }

    /// Locates up to `max_bytes`, bounded by the log end offset: for a follower's fetch, and
    /// for the group coordinator reading back an offsets partition it has just come to lead.
    pub fn read_for_follower(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
    ) -> Result<PartitionRead, PartitionError> {
        let log = self.log.lock();
        let leo = log.log_end_offset();
        let slice = log.read(fetch_offset, max_bytes, leo, true)?;
        let hw = self.high_watermark();
        Ok(PartitionRead {
            slice,
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: log.log_start_offset(),
        })
    }

    /// A receiver that changes whenever the role or leader epoch changes.
    pub fn role_changes(&self) -> watch::Receiver<u64> {
        self.role_version.subscribe()
    }

    /// Locates up to `max_bytes` from `fetch_offset`, bounded by the high watermark.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_message: bool,
    ) -> Result<PartitionRead, PartitionError> {
        if !self.is_leader() {
            return Err(PartitionError::NotLeader);
        }
        let log = self.log.lock();
        let hw = self.high_watermark();
        let slice = log.read(fetch_offset, max_bytes, hw, min_one_message)?;
        Ok(PartitionRead {
            slice,
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: log.log_start_offset(),
        })
    }

    /// The end offset of a leader epoch, and the largest epoch at or below it.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.log.lock().end_offset_for_epoch(epoch)
    }

    /// The first offset whose timestamp is at or after `timestamp_ms`.
    pub fn offset_for_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, i64)>, PartitionError> {
        Ok(self.log.lock().fetch_offset_by_timestamp(timestamp_ms)?)
    }

    /// The record with the largest timestamp.
    pub fn max_timestamp(&self) -> Result<Option<(i64, i64)>, PartitionError> {
        Ok(self.log.lock().max_timestamp_and_offset()?)
    }

    /// Applies new topic configs to the log.
    pub fn update_config(&self, config: LogConfig, min_insync_replicas: i32) {
        self.min_insync_replicas
            .store(min_insync_replicas, Ordering::Release);
        self.log.lock().set_config(config);
    }

    /// Runs retention; returns how many segments were deleted.
    pub fn delete_old_segments(&self, now_ms: i64) -> Result<usize, PartitionError> {
        let mut log = self.log.lock();
        // Retention never deletes what followers may not have copied yet.
        log.set_high_watermark(self.high_watermark());
        Ok(log.delete_old_segments(now_ms)?)
    }

    /// Forgets producers idle for longer than `expiration_ms`.
    pub fn remove_expired_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.log
            .lock()
            .remove_expired_producers(now_ms, expiration_ms)
    }

    /// Flushes and closes the log (clean shutdown).
    pub fn close(&self) -> Result<(), PartitionError> {
        Ok(self.log.lock().close()?)
    }

    /// Parks a fetch on this partition until the next append.
    pub fn park_fetch(&self, waiter: &Arc<Notify>) {
        let mut w = self.waiters.lock();
        if w.len() >= MAX_PARKED_FETCHES_PER_PARTITION {
            let half = w.len() / 2;
            for old in w.drain(..half) {
                old.notify_one();
            }
        }
        w.push(waiter.clone());
    }

    fn wake_fetchers(&self) {
        let waiters = std::mem::take(&mut *self.waiters.lock());
        for w in waiters {
            // notify_one stores a permit if the fetch has not started waiting yet, so a wake
            // between "check for data" and "await" is never lost.
            w.notify_one();
        }
    }

    /// Wraps an opened log for a partition whose role the metadata image will set.
    pub fn new_replica(
        topic: String,
        topic_id: Uuid,
        index: i32,
        node_id: i32,
        min_insync_replicas: i32,
        log: UnifiedLog,
    ) -> Self {
        let p = Partition::build(topic, topic_id, index, node_id, min_insync_replicas, log);
        {
            let mut st = p.state.lock();
            st.role = Role::None;
            st.replicas.clear();
            st.isr.clear();
        }
        // Start below any real epoch so the first registration always applies.
        p.leader_epoch.store(-1, Ordering::Release);
        // A replica's HW is only known from its leader; start from the log start.
        let start = p.log.lock().log_start_offset();
        p.high_watermark.store(start, Ordering::Release);
        p.hw_tx.send_replace(start);
        p
    }

    /// Replica just opened: starts from the high watermark of the log directory's
    /// `replication-offset-checkpoint`, bounded by the log (Kafka's `Partition.createLog`), so
    /// a restarted replica that is elected before any follower fetches still serves what was
    /// committed.
    pub fn restore_high_watermark(&self, checkpointed: i64) {
        let (start, end) = self.offsets();
        let hw = checkpointed.clamp(start, end);
        self.high_watermark.store(hw, Ordering::Release);
        self.hw_tx.send_replace(hw);
    }

    /// Everything below this offset of the log is on disk (for the recovery-point checkpoint).
    pub fn recovery_point(&self) -> i64 {
        self.log.lock().recovery_point()
    }

    /// Deletes the partition's directory. The caller has already made the partition
    /// unreachable; readers still holding a segment file keep reading the unlinked inode.
    pub fn delete_dir(&self) -> std::io::Result<()> {
        let log = self.log.lock();
        let dir = log.dir().to_path_buf();
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Rename first, as Kafka does, so a crash mid-delete never leaves a half-deleted
        // directory that start-up would mistake for a live partition.
        let doomed = dir.with_file_name(format!("{name}.{}-delete", Uuid::new_v4().simple()));
        std::fs::rename(&dir, &doomed)?;
        std::fs::remove_dir_all(&doomed)
    }
}
