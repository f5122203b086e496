//! A partition on this node (Kafka's `Partition`): its log, its role (leader or follower),
//! the high watermark, leader epoch, ISR and the followers' progress, and the requests
//! waiting on it.
//!
//! **The high watermark has one owner: [`ReplicaState::high_watermark`]**, changed only by
//! [`Partition::set_high_watermark`] under the state lock, which asserts
//! `log_start_offset <= hw <= log_end_offset` (in release builds too) and notifies every
//! waiter (acks=all produce, offset commits, parked fetches) from the same place. On the
//! leader it only rises (`Partition.maybeIncrementLeaderHW`); on a follower it is
//! `min(leader's HW, own log end offset)` and may go down with the leader's.
//!
//! As leader it tracks each follower's fetches (Kafka's `Replica`) and answers them
//! ([`Partition::fetch_for_follower`]): the diverging epoch when the follower's log has
//! diverged, the follower's state, the high watermark, and ISR expansion. A follower that
//! stays behind for `replica.lag.time.max.ms` is proposed for removal from the ISR; one that
//! catches up is proposed for re-admission. Proposals go to the controller (AlterPartition);
//! the committed ISR comes back through the metadata image.
//!
//! Two blocking `parking_lot` mutexes, never held across an await: the log (validate, dedup,
//! assign offsets, write to the page cache) and the replica state. **Lock order: log, then
//! state**, on every path; the state lock alone serves readers of the role, ISR and high
//! watermark. Readers take the log lock only to locate the bytes ([`FetchSlice`]) and do the
//! positional read after releasing it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use uuid::Uuid;

use brook_storage::{
    AbortedTxn, AppendOrigin, DuplicateBatch, FetchSlice, LogAppendInfo, LogConfig, LogError,
    ProducerStateEntry, UnifiedLog, VerificationGuard,
};

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
    #[error("this node is not a follower of the partition")]
    NotFollower,
    #[error("ISR shrank to {isr} below min.insync.replicas={min_isr} after the append")]
    NotEnoughReplicasAfterAppend { isr: usize, min_isr: i32 },
    #[error("the request's wait did not complete within its timeout")]
    RequestTimedOut,
    #[error("the topic's cleanup.policy does not include delete")]
    PolicyViolation,
    /// The node stopped processing requests while this wait was parked
    /// ([`Partition::release_waits`]).
    #[error("the broker is shutting down")]
    ShuttingDown,
}

impl PartitionError {
    /// The Kafka error a client sees for this error.
    pub fn response_error(&self) -> ResponseError {
        match self {
            PartitionError::Log(e) => e.response_error(),
            PartitionError::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas,
            PartitionError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
            PartitionError::UnknownLeaderEpoch { .. } => ResponseError::UnknownLeaderEpoch,
            PartitionError::NotLeader
            | PartitionError::NotFollower
            | PartitionError::ShuttingDown => ResponseError::NotLeaderOrFollower,
            PartitionError::NotEnoughReplicasAfterAppend { .. } => {
                ResponseError::NotEnoughReplicasAfterAppend
            }
            PartitionError::RequestTimedOut => ResponseError::RequestTimedOut,
            PartitionError::PolicyViolation => ResponseError::PolicyViolation,
        }
    }

    /// Its code on the wire.
    pub fn error_code(&self) -> i16 {
        self.response_error().code()
    }
}

/// How far a consumer's fetch may read (Kafka's `FetchIsolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchIsolation {
    /// read_uncommitted: up to the high watermark.
    HighWatermark,
    /// read_committed: up to the last stable offset, with the aborted transactions.
    TxnCommitted,
}

impl FetchIsolation {
    /// From a Fetch or ListOffsets `isolation_level` (1 = read_committed).
    pub fn from_isolation_level(level: i8) -> Self {
        if level == 1 {
            FetchIsolation::TxnCommitted
        } else {
            FetchIsolation::HighWatermark
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
    /// read_committed only: the aborted transactions overlapping the slice's segment from the
    /// fetch offset on, a superset of those the bytes read will overlap
    /// ([`PartitionRead::aborted_within`] narrows it once they are read).
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
}

impl PartitionRead {
    /// The aborted transactions overlapping the records actually read (`records`, whole
    /// batches from the slice): those beginning before the end of the last batch. `None` for
    /// read_uncommitted, as Kafka leaves the field null then.
    pub fn aborted_within(&self, records: &[u8]) -> Option<Vec<AbortedTxn>> {
        let all = self.aborted_transactions.as_ref()?;
        let Some(end) = brook_storage::next_offset_after(records) else {
            return Some(Vec::new());
        };
        Some(
            all.iter()
                .filter(|t| t.first_offset < end)
                .copied()
                .collect(),
        )
    }
}

/// A follower as the leader sees it, from its fetches (Kafka's `Replica` and `ReplicaState`).
#[derive(Debug, Clone, Copy)]
pub struct FollowerState {
    /// The follower's log end offset (its last fetch offset), -1 until it fetches.
    pub log_end_offset: i64,
    /// The leader's log end offset when the follower's last fetch arrived, -1 before one.
    pub last_fetch_leader_log_end_offset: i64,
    /// When the follower's last fetch arrived, 0 before one.
    pub last_fetch_time_ms: i64,
    /// The latest time at which the follower was known to have everything the leader had.
    pub last_caught_up_ms: i64,
    /// The follower's log start offset as its last fetch reported it, -1 until it fetches
    /// (Kafka's `ReplicaState.logStartOffset`): the leader's low watermark counts it.
    pub log_start_offset: i64,
}

impl FollowerState {
    /// The state a new leader starts a follower with (`Replica.resetReplicaState`): nothing
    /// known of its log; an ISR member gets a full lag window from now, any other replica none,
    /// so that it holds nothing back until it fetches.
    fn reset(now_ms: i64, in_isr: bool) -> FollowerState {
        FollowerState {
            log_end_offset: -1,
            last_fetch_leader_log_end_offset: -1,
            last_fetch_time_ms: 0,
            last_caught_up_ms: if in_isr { now_ms } else { 0 },
            log_start_offset: -1,
        }
    }

    /// Records a fetch at `fetch_offset` that arrived at `now_ms` while the leader's log
    /// ended at `leader_log_end_offset` (`Replica.updateFetchStateOrThrow`). The follower was
    /// caught up now if it reached the leader's current log end, or at its previous fetch if
    /// it reached the log end of that moment: under continuous produce a fetch never reaches
    /// the current end, since records arrive during every round trip. `log_start_offset` is
    /// the one the follower reported in the same fetch.
    fn update_fetch_state(
        &mut self,
        (fetch_offset, log_start_offset): (i64, i64),
        now_ms: i64,
        leader_log_end_offset: i64,
    ) {
        if fetch_offset >= leader_log_end_offset {
            self.last_caught_up_ms = self.last_caught_up_ms.max(now_ms);
        } else if fetch_offset >= self.last_fetch_leader_log_end_offset {
            self.last_caught_up_ms = self.last_caught_up_ms.max(self.last_fetch_time_ms);
        }
        self.log_end_offset = fetch_offset;
        self.log_start_offset = log_start_offset;
        self.last_fetch_leader_log_end_offset = self
            .last_fetch_leader_log_end_offset
            .max(leader_log_end_offset);
        self.last_fetch_time_ms = now_ms;
    }

    /// Caught up: the follower had the leader's whole log less than `lag_max_ms` ago.
    /// Kafka's `ReplicaState.isCaughtUp` also counts a follower whose log end offset equals the
    /// leader's, however long ago it fetched, so an idle partition never drops a silent
    /// follower; Brook drops it after the lag window, as its scenario tests expect.
    fn is_caught_up(&self, now_ms: i64, lag_max_ms: i64) -> bool {
        now_ms - self.last_caught_up_ms <= lag_max_ms
    }
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

/// The replication state: role, ISR, followers and the high watermark, under one lock.
#[derive(Debug, Clone)]
struct ReplicaState {
    role: Role,
    replicas: Vec<i32>,
    /// The ISR committed by the controller.
    isr: Vec<i32>,
    partition_epoch: i32,
    /// Leader only: every other replica's fetch progress.
    followers: HashMap<i32, FollowerState>,
    /// The leader epoch's start offset: a follower rejoins the ISR only past it.
    leader_epoch_start_offset: i64,
    /// An ISR change sent to the controller and not yet answered.
    pending_isr: Option<Vec<i32>>,
    /// The one high watermark of this replica. Invariant:
    /// `log_start_offset <= high_watermark <= log_end_offset`. Changed only by
    /// [`Partition::set_high_watermark`]; on the leader it only rises.
    high_watermark: i64,
    /// How many times this replica has become leader. An acks=all wait belongs to one
    /// leadership: a leader epoch bump that keeps this node leader (a reassignment) does not
    /// end it, as in Kafka; losing the leadership does, even when it comes back before the
    /// waiter looks (the new leadership may have truncated the offset it waits for).
    leaderships: u64,
}

impl ReplicaState {
    /// The maximal ISR (KIP-497, Kafka's `PartitionState.maximalIsr`): the committed ISR plus
    /// a replica whose addition is pending at the controller. Its log end offsets bound the
    /// high watermark and complete acks=all: a joining replica may be committed to the ISR,
    /// and then elected, at any moment, so nothing it lacks may count as committed. A pending
    /// shrink keeps counting the replicas it removes until the controller agrees.
    fn in_maximal_isr(&self, id: i32) -> bool {
        self.isr.contains(&id) || self.pending_isr.as_ref().is_some_and(|p| p.contains(&id))
    }

    /// The size of the maximal ISR ([`Self::in_maximal_isr`]).
    fn maximal_isr_size(&self) -> usize {
        let joining = self.pending_isr.iter().flatten();
        self.isr.len() + joining.filter(|id| !self.isr.contains(id)).count()
    }
}

/// What the leader answers one partition of a follower's fetch.
#[derive(Debug)]
pub enum FollowerFetch {
    /// The follower's last fetched epoch ends before its fetch offset on the leader: it must
    /// truncate to `end_offset` of `epoch` (the largest epoch at or below its own) and fetch
    /// again. No records.
    Diverging {
        epoch: i32,
        end_offset: i64,
        high_watermark: i64,
        log_start_offset: i64,
    },
    /// Records from the fetch offset, and an ISR to propose if the fetch brought the follower
    /// back in sync.
    Records {
        read: PartitionRead,
        isr_proposal: Option<Vec<i32>>,
    },
}

/// DeleteRecords' offset that stands for the high watermark (Kafka's
/// `DeleteRecordsRequest.HIGH_WATERMARK`).
pub const DELETE_RECORDS_HIGH_WATERMARK: i64 = -1;

/// What a DeleteRecords did on the leader (Kafka's `LogDeleteRecordsResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteRecordsResult {
    /// The offset asked for, [`DELETE_RECORDS_HIGH_WATERMARK`] resolved: the answer waits until
    /// the low watermark reaches it.
    pub requested_offset: i64,
    /// The low watermark just after the log start offset moved.
    pub low_watermark: i64,
    /// Whether this log's start offset moved (so the log start checkpoint is due).
    pub log_start_moved: bool,
}

/// One open transaction on a partition, as the admin state views show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTransaction {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_offset: i64,
    /// Timestamp of the batch at `first_offset`, while the producer's retained batches
    /// (the last five) still hold it.
    pub first_batch_timestamp: Option<i64>,
}

/// One consistent reading of a partition's state, taken under both locks at once (log, then
/// state) for the admin state views. Nothing keeps it: it is built per request.
#[derive(Debug, Clone)]
pub struct PartitionStatus {
    pub role: Role,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// An ISR change sent to the controller and not yet answered.
    pub pending_isr: Option<Vec<i32>>,
    /// Leader only: each other replica's fetch progress, by replica id.
    pub followers: Vec<(i32, FollowerState)>,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
}

/// Whether a broker may join an ISR now, as this node's last applied metadata image says
/// (Kafka's `Partition.isReplicaIsrEligible`: registered, not fenced, not in controlled
/// shutdown). Shared by every partition of the node; read only for a replica outside the
/// maximal ISR, never on the path of a follower already in it.
pub type IsrEligibility = Arc<dyn Fn(i32) -> bool + Send + Sync>;

/// One partition of one topic hosted by this node.
pub struct Partition {
    pub topic: String,
    pub topic_id: Uuid,
    pub index: i32,
    node_id: i32,
    /// Shared with the blocking task that fsyncs the segments a roll finished.
    log: Arc<Mutex<UnifiedLog>>,
    /// Set while that task runs: one at a time per partition.
    roll_flush_running: Arc<AtomicBool>,
    leader_epoch: AtomicI32,
    /// The topic's min.insync.replicas, kept here so produce needs no metadata lookup.
    min_insync_replicas: AtomicI32,
    /// replica.lag.time.max.ms: how long a follower may stay behind and still count.
    replica_lag_time_max_ms: i64,
    /// Which replicas may join the ISR ([`IsrEligibility`]); every broker until
    /// [`Self::with_isr_eligibility`] gives the node's metadata.
    isr_eligible: IsrEligibility,
    /// Fetches waiting for data on this partition (Kafka's DelayedFetch purgatory, reduced to
    /// a wake-up list: a woken fetch re-reads everything it asked for).
    waiters: Mutex<Vec<Arc<Notify>>>,
    /// Role, ISR, followers and the high watermark. Taken after the log lock, never before.
    state: Mutex<ReplicaState>,
    /// Bumped, under the state lock, on every high watermark, role or leader epoch change, and
    /// when a log start offset the low watermark counts rises (this log's, or on the leader a
    /// follower's): acks=all produce requests (Kafka's DelayedProduce purgatory) and
    /// DeleteRecords (DelayedDeleteRecords) wait on it and re-read the state. It carries no
    /// copy of either watermark.
    changes: watch::Sender<u64>,
    /// Set once the node stops processing requests ([`Partition::release_waits`]): the
    /// waits on `changes` end with [`PartitionError::ShuttingDown`].
    waits_released: AtomicBool,
    /// Client traffic through this partition, for `/metrics` (summed there by topic).
    pub traffic: PartitionTraffic,
}

/// Client traffic through one partition, counted where it happens: Produce appends on the
/// leader and consumer Fetch answers (Kafka's `BrokerTopicMetrics`, kept per partition so
/// that a topic's counts go when its partitions go, and labels stay bounded by what exists).
#[derive(Debug, Default)]
pub struct PartitionTraffic {
    bytes_in: AtomicU64,
    records_in: AtomicU64,
    bytes_out: AtomicU64,
}

impl PartitionTraffic {
    /// A Produce batch appended (not a deduplicated retry): its bytes and header count.
    pub fn record_in(&self, bytes: usize, records: i64) {
        self.bytes_in.fetch_add(bytes as u64, Ordering::Relaxed);
        self.records_in
            .fetch_add(records.max(0) as u64, Ordering::Relaxed);
    }

    /// Record bytes answered to a consumer's Fetch.
    pub fn record_out(&self, bytes: usize) {
        self.bytes_out.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Bytes in, records in, bytes out.
    pub fn snapshot(&self) -> [u64; 3] {
        [
            self.bytes_in.load(Ordering::Relaxed),
            self.records_in.load(Ordering::Relaxed),
            self.bytes_out.load(Ordering::Relaxed),
        ]
    }
}

/// A leader's replication health, as Kafka's `Partition.isUnderReplicated` and
/// `isUnderMinIsr` define it; both false unless this node leads the partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicationHealth {
    /// The ISR is smaller than the replica set.
    pub under_replicated: bool,
    /// The ISR is below the effective min.insync.replicas.
    pub under_min_isr: bool,
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
        replica_lag_time_max_ms: i64,
        log: UnifiedLog,
    ) -> Self {
        let mut log = log;
        if let Err(e) = log.maybe_assign_epoch_start_offset(0) {
            // The cache is derived data; a failed checkpoint write costs a rebuild later.
            tracing::warn!(%topic, partition = index, error = %e, "could not persist the leader epoch cache");
        }
        Partition::build(
            (topic, topic_id, index, node_id),
            min_insync_replicas,
            replica_lag_time_max_ms,
            log,
            true,
        )
    }

    /// Wraps an opened log for a partition whose role the metadata image will set. Its high
    /// watermark is only known from a leader: it starts at the log start offset.
    pub fn new_replica(
        topic: String,
        topic_id: Uuid,
        index: i32,
        node_id: i32,
        min_insync_replicas: i32,
        replica_lag_time_max_ms: i64,
        log: UnifiedLog,
    ) -> Self {
        Partition::build(
            (topic, topic_id, index, node_id),
            min_insync_replicas,
            replica_lag_time_max_ms,
            log,
            false,
        )
    }

    /// `single_node`: this node leads at epoch 0 with itself as the only replica, HW = LEO;
    /// otherwise no role, and a leader epoch below any real one so that the first registration
    /// always applies.
    fn build(
        (topic, topic_id, index, node_id): (String, Uuid, i32, i32),
        min_insync_replicas: i32,
        replica_lag_time_max_ms: i64,
        log: UnifiedLog,
        single_node: bool,
    ) -> Self {
        let (role, members, high_watermark, leader_epoch) = if single_node {
            (Role::Leader, vec![node_id], log.log_end_offset(), 0)
        } else {
            (Role::None, Vec::new(), log.log_start_offset(), -1)
        };
        check_offsets(&log, high_watermark);
        let state = ReplicaState {
            role,
            replicas: members.clone(),
            isr: members,
            partition_epoch: 0,
            followers: HashMap::new(),
            leader_epoch_start_offset: 0,
            pending_isr: None,
            high_watermark,
            leaderships: u64::from(single_node),
        };
        Partition {
            topic,
            topic_id,
            index,
            node_id,
            log: Arc::new(Mutex::new(log)),
            roll_flush_running: Arc::new(AtomicBool::new(false)),
            leader_epoch: AtomicI32::new(leader_epoch),
            min_insync_replicas: AtomicI32::new(min_insync_replicas),
            replica_lag_time_max_ms,
            isr_eligible: Arc::new(|_| true),
            waiters: Mutex::new(Vec::new()),
            state: Mutex::new(state),
            changes: watch::channel(0).0,
            waits_released: AtomicBool::new(false),
            traffic: PartitionTraffic::default(),
        }
    }

    /// Takes the node's view of which brokers may join an ISR ([`IsrEligibility`]).
    pub fn with_isr_eligibility(mut self, isr_eligible: IsrEligibility) -> Self {
        self.isr_eligible = isr_eligible;
        self
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

    /// Under-replicated and under-min-ISR, read under the state lock (for `/metrics`).
    pub fn replication_health(&self) -> ReplicationHealth {
        let st = self.state.lock();
        let leader = st.role == Role::Leader;
        ReplicationHealth {
            under_replicated: leader && st.isr.len() < st.replicas.len(),
            under_min_isr: leader && (st.isr.len() as i32) < self.effective_min_isr(&st),
        }
    }

    /// The number of producers with state in this partition's log.
    pub fn producer_count(&self) -> usize {
        self.log.lock().producer_state().len()
    }

    /// The high watermark.
    pub fn high_watermark(&self) -> i64 {
        self.state.lock().high_watermark
    }

    /// Role, epochs, replicas, ISR, followers and offsets read together, so that the offsets
    /// agree with each other (`hw <= leo`) as they did at one instant.
    pub fn status(&self) -> PartitionStatus {
        let log = self.log.lock();
        let st = self.state.lock();
        let mut followers: Vec<(i32, FollowerState)> =
            st.followers.iter().map(|(id, f)| (*id, *f)).collect();
        followers.sort_by_key(|(id, _)| *id);
        PartitionStatus {
            role: st.role.clone(),
            leader_epoch: self.leader_epoch(),
            partition_epoch: st.partition_epoch,
            replicas: st.replicas.clone(),
            isr: st.isr.clone(),
            pending_isr: st.pending_isr.clone(),
            followers,
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            high_watermark: st.high_watermark,
            last_stable_offset: log.last_stable_offset(st.high_watermark),
        }
    }

    /// Bytes in the log's segment files (`UnifiedLog::size_in_bytes`), for DescribeLogDirs.
    pub fn size_in_bytes(&self) -> u64 {
        self.log.lock().size_in_bytes()
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

    /// The only writer of the high watermark. Checks `log_start <= hw <= leo` against the
    /// log as it is now (the caller holds the log lock, then the state lock) and wakes every
    /// waiter when the value changed.
    fn set_high_watermark(&self, log: &mut UnifiedLog, st: &mut ReplicaState, hw: i64) {
        check_offsets(log, hw);
        assert!(
            st.role != Role::Leader || hw >= st.high_watermark,
            "the leader's high watermark went down from {} to {hw}",
            st.high_watermark
        );
        // Ended transactions whose marker the high watermark passed become stable: the last
        // stable offset is derived from this value, never stored (Kafka's
        // `UnifiedLog.updateHighWatermarkMetadata` -> `onHighWatermarkUpdated`).
        log.on_high_watermark_updated(hw);
        if hw != st.high_watermark {
            st.high_watermark = hw;
            self.changes.send_modify(|v| *v += 1);
            self.wake_fetchers();
        }
    }

    /// Kafka's `Partition.effectiveMinIsr` ([`crate::config::effective_min_isr`]).
    fn effective_min_isr(&self, st: &ReplicaState) -> i32 {
        let min_isr = self.min_insync_replicas.load(Ordering::Acquire);
        crate::config::effective_min_isr(min_isr, st.replicas.len())
    }

    /// Leader: raises the high watermark to the smallest log end offset among the replicas
    /// that count, never while the committed ISR is below the effective min ISR
    /// (`Partition.maybeIncrementLeaderHW`). A replica counts when it is in the maximal ISR
    /// ([`ReplicaState::in_maximal_isr`]), or when it is caught up and eligible to join the ISR
    /// ([`Self::should_wait_for_replica_to_join_isr`]): without that, under steady produce the
    /// high watermark runs ahead of a catching-up follower, whose log end offset then never
    /// reaches it, and the follower never rejoins. Returns true if it rose.
    fn maybe_increment_leader_hw(
        &self,
        log: &mut UnifiedLog,
        st: &mut ReplicaState,
        now_ms: i64,
    ) -> bool {
        if st.role != Role::Leader || (st.isr.len() as i32) < self.effective_min_isr(st) {
            return false;
        }
        let leo = log.log_end_offset();
        // Every replica that counts has a follower state (-1 until it fetches, which holds
        // the high watermark where it is).
        let mut hw = leo;
        for (id, f) in &st.followers {
            if f.log_end_offset < hw
                && (st.in_maximal_isr(*id)
                    || self.should_wait_for_replica_to_join_isr(*id, f, now_ms))
            {
                hw = f.log_end_offset;
            }
        }
        if hw > st.high_watermark {
            self.set_high_watermark(log, st, hw);
            true
        } else {
            false
        }
    }

    /// A replica outside the ISR holds the high watermark while it is caught up and may join
    /// (Kafka's `shouldWaitForReplicaToJoinIsr` in `Partition.maybeIncrementLeaderHW`:
    /// `ReplicaState.isCaughtUp` and `isReplicaIsrEligible`). A fenced or shutting-down broker
    /// holds nothing back. Only asked of a replica behind the candidate high watermark, so
    /// `isCaughtUp`'s "log end offset equals the leader's" case never applies here.
    fn should_wait_for_replica_to_join_isr(&self, id: i32, f: &FollowerState, now_ms: i64) -> bool {
        f.is_caught_up(now_ms, self.replica_lag_time_max_ms) && (self.isr_eligible)(id)
    }

    /// Appends one produce batch as leader. `required_acks == -1` enforces the effective min
    /// ISR before the append, as Kafka does; waiting for the high watermark is the caller's
    /// ([`Self::wait_for_high_watermark`]), outside every lock.
    /// `verification` is the KIP-890 guard the append carries where the log checks it
    /// ([`Self::maybe_start_transaction_verification`]), `None` where it does not.
    pub fn append_records_to_leader(
        &self,
        records: Bytes,
        required_acks: i16,
        now_ms: i64,
        verification: Option<VerificationGuard>,
    ) -> Result<LogAppendInfo, PartitionError> {
        let origin = AppendOrigin::Client;
        self.append_to_leader(records, required_acks, now_ms, origin, verification, 0)
    }

    /// Leader: before the transaction coordinator is asked about a producer's batch, the
    /// verification entry its append will be checked against (Kafka's
    /// `Partition.maybeStartTransactionVerification`); the sentinel inside an ongoing
    /// transaction. Under the log lock, so it is ordered against the markers.
    pub fn maybe_start_transaction_verification(
        &self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
        supports_epoch_bump: bool,
        now_ms: i64,
    ) -> Result<VerificationGuard, PartitionError> {
        let mut log = self.log.lock();
        if self.state.lock().role != Role::Leader {
            return Err(PartitionError::NotLeader);
        }
        let v2 = supports_epoch_bump;
        Ok(log.maybe_start_transaction_verification(producer_id, sequence, epoch, v2, now_ms)?)
    }

    /// Appends a COMMIT or ABORT marker a transaction coordinator asked for (WriteTxnMarkers),
    /// with the coordinator origin and acks=all, as Kafka's `KafkaApis` does: at the current
    /// leader epoch, no sequence check, the marker's producer and coordinator epochs checked
    /// (strictly newer at `transaction_version` 2, the version WriteTxnMarkers v2 names).
    /// The caller waits for the high watermark.
    pub fn append_marker_to_leader(
        &self,
        marker: Bytes,
        transaction_version: i8,
        now_ms: i64,
    ) -> Result<LogAppendInfo, PartitionError> {
        let origin = AppendOrigin::Coordinator;
        self.append_to_leader(marker, -1, now_ms, origin, None, transaction_version)
    }

    /// Appends a batch written by one of this broker's coordinators (Kafka's
    /// `AppendOrigin.COORDINATOR`): the group coordinator's transactional offset commits. The
    /// producer epoch is checked, sequences are not (the coordinator writes every
    /// transactional batch of a producer from sequence 0, as Kafka's `CoordinatorRuntime`
    /// does).
    pub fn append_records_as_coordinator(
        &self,
        records: Bytes,
        required_acks: i16,
        now_ms: i64,
    ) -> Result<LogAppendInfo, PartitionError> {
        let origin = AppendOrigin::Coordinator;
        self.append_to_leader(records, required_acks, now_ms, origin, None, 0)
    }

    fn append_to_leader(
        &self,
        records: Bytes,
        required_acks: i16,
        now_ms: i64,
        origin: AppendOrigin,
        verification: Option<VerificationGuard>,
        marker_transaction_version: i8,
    ) -> Result<LogAppendInfo, PartitionError> {
        let appended = self.append_to_leader_locked(
            records,
            required_acks,
            now_ms,
            origin,
            verification,
            marker_transaction_version,
        );
        self.flush_rolled_segments();
        appended
    }

    fn append_to_leader_locked(
        &self,
        records: Bytes,
        required_acks: i16,
        now_ms: i64,
        origin: AppendOrigin,
        verification: Option<VerificationGuard>,
        marker_transaction_version: i8,
    ) -> Result<LogAppendInfo, PartitionError> {
        let mut log = self.log.lock();
        {
            let st = self.state.lock();
            if st.role != Role::Leader {
                return Err(PartitionError::NotLeader);
            }
            let min_isr = self.effective_min_isr(&st);
            if required_acks == -1 && (st.isr.len() as i32) < min_isr {
                return Err(PartitionError::NotEnoughReplicas {
                    isr: st.isr.len(),
                    min_isr,
                });
            }
        }
        let info = match origin {
            AppendOrigin::Coordinator => {
                let tv = marker_transaction_version;
                log.append_as_coordinator(records, self.leader_epoch(), now_ms, tv)?
            }
            _ => match verification {
                Some(guard) => {
                    log.append_as_leader_verified(records, self.leader_epoch(), now_ms, guard)?
                }
                None => log.append_as_leader(records, self.leader_epoch(), now_ms)?,
            },
        };
        match &info.duplicate {
            None => {
                let mut st = self.state.lock();
                self.maybe_increment_leader_hw(&mut log, &mut st, now_ms);
                drop(st);
                self.wake_fetchers();
            }
            Some(dup) => {
                drop(log);
                self.report_duplicate(dup);
            }
        }
        Ok(info)
    }

    /// Puts `duplicate_batch` on the event stream: the log's producer state matched a retry
    /// with one of the producer's retained batches and answered with its offsets. The log
    /// publishes nothing (as Kafka's `UnifiedLog`); the partition owns the fact for the stream.
    fn report_duplicate(&self, dup: &DuplicateBatch) {
        crate::events::emit(|| crate::events::EventKind::DuplicateBatch {
            topic: self.topic.clone(),
            partition: self.index,
            producer_id: dup.producer_id,
            producer_epoch: dup.producer_epoch,
            first_sequence: dup.first_sequence,
            last_sequence: dup.last_sequence,
            first_offset: dup.first_offset,
        });
    }

    /// Waits until the high watermark passes `last_offset` (acks=all), for at most `timeout`.
    /// Fails if leadership changes meanwhile, and with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the
    /// ISR shrank below the effective min ISR by the time the batch was committed.
    pub async fn wait_for_high_watermark(
        &self,
        last_offset: i64,
        timeout: std::time::Duration,
    ) -> Result<(), PartitionError> {
        self.wait_for_high_watermark_until(last_offset, Instant::now() + timeout)
            .await
    }

    /// [`Self::wait_for_high_watermark`] against a deadline shared by several partitions (one
    /// Produce request waits once, as Kafka's `DelayedProduce`).
    pub async fn wait_for_high_watermark_until(
        &self,
        last_offset: i64,
        deadline: Instant,
    ) -> Result<(), PartitionError> {
        // Subscribed before the first check, so a change between check and await is seen.
        let mut changes = self.changes.subscribe();
        let leadership = self.state.lock().leaderships;
        loop {
            if let Some(done) = self.check_enough_replicas_reach_offset(last_offset + 1, leadership)
            {
                return done;
            }
            if self.waits_released.load(Ordering::Acquire) {
                return Err(PartitionError::ShuttingDown);
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(PartitionError::NotLeader),
                Err(_) => {
                    // One last look: the answer is the state at the deadline.
                    return self
                        .check_enough_replicas_reach_offset(last_offset + 1, leadership)
                        .unwrap_or(Err(PartitionError::RequestTimedOut));
                }
            }
        }
    }

    /// Ends every wait for the high watermark, now and later, with
    /// [`PartitionError::ShuttingDown`]: the node stops processing requests, so no follower
    /// fetch will move the high watermark again. Kafka's `BrokerServer.shutdown` calls
    /// `SocketServer.stopProcessingRequests` after its controlled shutdown, which closes every
    /// connection with whatever is parked in the purgatories; without this, a node whose
    /// controlled shutdown was not acknowledged (it still leads) would hold its exit for the
    /// parked requests' whole timeouts (a client's `request.timeout.ms`, 30 s).
    pub fn release_waits(&self) {
        self.waits_released.store(true, Ordering::Release);
        self.changes.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// `Some` once an acks=all produce up to `required_offset` is decided
    /// (`Partition.checkEnoughReplicasReachOffset`): done when the high watermark reached it,
    /// with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the replicas that count are then fewer than
    /// the effective min ISR; NOT_LEADER_OR_FOLLOWER once the leadership it was appended under
    /// (`leadership`, a count of [`ReplicaState::leaderships`]) has ended. Kafka fails it only
    /// when the node is no longer leader: a leader epoch bump that keeps this node leader (a
    /// reassignment removing a replica) leaves the wait going.
    fn check_enough_replicas_reach_offset(
        &self,
        required_offset: i64,
        leadership: u64,
    ) -> Option<Result<(), PartitionError>> {
        let st = self.state.lock();
        if st.role != Role::Leader || st.leaderships != leadership {
            return Some(Err(PartitionError::NotLeader));
        }
        if st.high_watermark < required_offset {
            return None;
        }
        let min_isr = self.effective_min_isr(&st);
        let counted = st.maximal_isr_size();
        if (counted as i32) < min_isr {
            Some(Err(PartitionError::NotEnoughReplicasAfterAppend {
                isr: counted,
                min_isr,
            }))
        } else {
            Some(Ok(()))
        }
    }

    /// Leader: answers one partition of follower `replica`'s fetch (the follower side of
    /// Kafka's `Partition.fetchRecords`): the diverging epoch if the follower's log has
    /// diverged, else the records from `fetch_offset` up to the log end. A fetch that reads
    /// updates the follower's state (`updateFollowerFetchState`), which may raise the high
    /// watermark, bring the follower back into the ISR, and, with the follower's
    /// `log_start_offset`, raise the low watermark a DeleteRecords waits for.
    pub fn fetch_for_follower(
        &self,
        replica: i32,
        (fetch_offset, log_start_offset): (i64, i64),
        last_fetched_epoch: i32,
        max_bytes: usize,
        now_ms: i64,
    ) -> Result<FollowerFetch, PartitionError> {
        let mut log = self.log.lock();
        let mut st = self.state.lock();
        if st.role != Role::Leader || !st.followers.contains_key(&replica) {
            return Err(PartitionError::NotLeader);
        }
        if last_fetched_epoch >= 0 {
            let (epoch, end_offset) = log.end_offset_for_epoch(last_fetched_epoch);
            if epoch < last_fetched_epoch || end_offset < fetch_offset {
                return Ok(FollowerFetch::Diverging {
                    epoch,
                    end_offset,
                    high_watermark: st.high_watermark,
                    log_start_offset: log.log_start_offset(),
                });
            }
        }
        let leo = log.log_end_offset();
        let slice = log.read(fetch_offset, max_bytes, leo, true)?;
        let mut start_rose = false;
        if let Some(f) = st.followers.get_mut(&replica) {
            start_rose = log_start_offset > f.log_start_offset;
            f.update_fetch_state((fetch_offset, log_start_offset), now_ms, leo);
        }
        let isr_proposal = self.maybe_expand_isr(&mut st, replica);
        let hw_rose = self.maybe_increment_leader_hw(&mut log, &mut st, now_ms);
        if start_rose && !hw_rose {
            // A DeleteRecords may be waiting for this follower's log start.
            self.changes.send_modify(|v| *v += 1);
        }
        let hw = st.high_watermark;
        Ok(FollowerFetch::Records {
            read: PartitionRead {
                slice,
                high_watermark: hw,
                last_stable_offset: log.last_stable_offset(hw),
                log_start_offset: log.log_start_offset(),
                aborted_transactions: None,
            },
            isr_proposal,
        })
    }

    /// Leader: the ISR to propose when `replica` is in sync and not in the ISR, with no other
    /// change in flight (`Partition.maybeExpandIsr`). In sync: its log end offset reached the
    /// high watermark and the current leader epoch's start offset, so that it cannot become
    /// leader without the committed records.
    fn maybe_expand_isr(&self, st: &mut ReplicaState, replica: i32) -> Option<Vec<i32>> {
        let f = st.followers.get(&replica)?;
        let in_sync = f.log_end_offset >= st.high_watermark
            && f.log_end_offset >= st.leader_epoch_start_offset;
        // `Partition.canAddReplicaToIsr`: the controller would refuse an ineligible replica
        // (INELIGIBLE_REPLICA), so it is not proposed at every fetch.
        if st.isr.contains(&replica) || st.pending_isr.is_some() || !in_sync {
            return None;
        }
        if !(self.isr_eligible)(replica) {
            return None;
        }
        let mut isr = st.isr.clone();
        isr.push(replica);
        isr.sort_unstable();
        st.pending_isr = Some(isr.clone());
        Some(isr)
    }

    /// Leader: an ISR without the followers that are not caught up, if any must go
    /// (`Partition.getOutOfSyncReplicas`). The leader itself always stays.
    pub fn isr_shrink_proposal(&self, now_ms: i64) -> Option<Vec<i32>> {
        let mut st = self.state.lock();
        if st.role != Role::Leader || st.pending_isr.is_some() {
            return None;
        }
        let lag_max_ms = self.replica_lag_time_max_ms;
        let out_of_sync = |id: &i32| {
            st.followers
                .get(id)
                .is_none_or(|f| !f.is_caught_up(now_ms, lag_max_ms))
        };
        let laggards: Vec<i32> = st
            .isr
            .iter()
            .copied()
            .filter(|id| *id != self.node_id)
            .filter(out_of_sync)
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
    pub fn complete_isr_change(&self, committed: Option<(i32, Vec<i32>)>, now_ms: i64) {
        let mut log = self.log.lock();
        let mut st = self.state.lock();
        st.pending_isr = None;
        if let Some((partition_epoch, isr)) = committed {
            if partition_epoch >= st.partition_epoch {
                st.partition_epoch = partition_epoch;
                let old = std::mem::replace(&mut st.isr, isr);
                self.report_isr_change(&old, &st);
            }
        }
        self.maybe_increment_leader_hw(&mut log, &mut st, now_ms);
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
        let mut log = self.log.lock();
        let mut st = self.state.lock();
        let current_epoch = self.leader_epoch();
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
        let role_changed = role != st.role || leader_epoch != current_epoch;
        if role == Role::Leader && leader_epoch != current_epoch {
            self.report_leader_elected(&st.role, leader_epoch, &isr);
        }
        st.replicas = replicas;
        let old_isr = std::mem::replace(&mut st.isr, isr);
        st.partition_epoch = partition_epoch;
        if role_changed {
            if role == Role::Leader && st.role != Role::Leader {
                st.leaderships += 1;
            }
            st.role = role.clone();
            st.pending_isr = None;
            st.followers.clear();
            self.leader_epoch.store(leader_epoch, Ordering::Release);
            if role == Role::Leader {
                if let Err(e) = log.maybe_assign_epoch_start_offset(leader_epoch) {
                    tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "could not persist the leader epoch cache");
                }
                st.leader_epoch_start_offset = log.log_end_offset();
            }
        }
        if st.role == Role::Leader {
            self.report_isr_change(&old_isr, &st);
            self.track_followers(&mut st, now_ms);
            self.maybe_increment_leader_hw(&mut log, &mut st, now_ms);
        }
        drop(st);
        drop(log);
        if role_changed {
            self.changes.send_modify(|v| *v += 1);
            self.wake_fetchers();
            tracing::info!(topic = %self.topic, partition = self.index, ?role, leader_epoch, "partition role changed");
            return Some(role);
        }
        None
    }

    /// Puts `isr_shrink` / `isr_expand` on the event stream for a committed ISR change. Only
    /// the leader after the change reports it, so each change appears once in a cluster; a
    /// first registration (no ISR known before) is no change. The same points where Kafka's
    /// `Partition` logs an ISR update: an AlterPartition answer and a new registration.
    fn report_isr_change(&self, old: &[i32], st: &ReplicaState) {
        if st.role != Role::Leader || old.is_empty() || old == st.isr.as_slice() {
            return;
        }
        let removed: Vec<i32> = old
            .iter()
            .filter(|r| !st.isr.contains(r))
            .copied()
            .collect();
        let added: Vec<i32> = st
            .isr
            .iter()
            .filter(|r| !old.contains(r))
            .copied()
            .collect();
        if !removed.is_empty() {
            crate::events::emit(|| crate::events::EventKind::IsrShrink {
                topic: self.topic.clone(),
                partition: self.index,
                isr: st.isr.clone(),
                removed,
                partition_epoch: st.partition_epoch,
            });
        }
        if !added.is_empty() {
            crate::events::emit(|| crate::events::EventKind::IsrExpand {
                topic: self.topic.clone(),
                partition: self.index,
                isr: st.isr.clone(),
                added,
                partition_epoch: st.partition_epoch,
            });
        }
    }

    /// Puts `leader_elected` on the event stream: this node leads at a new leader epoch.
    fn report_leader_elected(&self, before: &Role, leader_epoch: i32, isr: &[i32]) {
        let previous_leader = match before {
            Role::Leader => self.node_id,
            Role::Follower { leader } => *leader,
            Role::None => -1,
        };
        crate::events::emit(|| crate::events::EventKind::LeaderElected {
            topic: self.topic.clone(),
            partition: self.index,
            leader: self.node_id,
            leader_epoch,
            previous_leader,
            isr: isr.to_vec(),
        });
    }

    /// Leader: one follower state per other replica; a new replica starts reset, a removed
    /// one is forgotten (Kafka's `remoteReplicasMap`).
    fn track_followers(&self, st: &mut ReplicaState, now_ms: i64) {
        let others: Vec<i32> = st
            .replicas
            .iter()
            .copied()
            .filter(|id| *id != self.node_id)
            .collect();
        st.followers.retain(|id, _| others.contains(id));
        for id in others {
            let in_isr = st.isr.contains(&id);
            st.followers
                .entry(id)
                .or_insert_with(|| FollowerState::reset(now_ms, in_isr));
        }
    }

    /// Refuses follower-only work (appending fetched batches, truncating) unless this node
    /// follows the partition. Called with the log lock held: the role cannot change until it
    /// is released, since `apply_registration` takes the log lock too.
    fn check_follower(&self) -> Result<(), PartitionError> {
        match self.state.lock().role {
            Role::Follower { .. } => Ok(()),
            _ => Err(PartitionError::NotFollower),
        }
    }

    /// Follower: appends batches fetched from the leader and takes the leader's high
    /// watermark, bounded by this log: `min(leader's HW, own log end offset)`, which can go
    /// down as well as up (Kafka's follower `updateHighWatermark`). Then takes the leader's log
    /// start offset (`ReplicaFetcherThread.processPartitionData`), so records a client deleted
    /// on the leader go here too; this replica's next fetch reports its new start, which the
    /// leader's low watermark counts. `leader` is the answer's (high watermark, log start
    /// offset).
    pub fn append_as_follower(
        &self,
        records: Bytes,
        leader: (i64, i64),
        now_ms: i64,
    ) -> Result<i64, PartitionError> {
        let appended = self.append_as_follower_locked(records, leader, now_ms);
        self.flush_rolled_segments();
        appended
    }

    /// Runs the fsync a segment roll left pending ([`UnifiedLog::roll_flush`]) on a blocking
    /// thread, outside the log lock, one at a time per partition, so that no produce waits
    /// for it (Kafka's `UnifiedLog.roll` schedules the same flush on its scheduler). The
    /// recovery point moves when it completes. Without a runtime (unit tests) it runs here.
    /// Called with no lock held.
    fn flush_rolled_segments(&self) {
        if !self.log.lock().roll_flush_pending()
            || self.roll_flush_running.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let log = Arc::clone(&self.log);
        let running = Arc::clone(&self.roll_flush_running);
        let (topic, index) = (self.topic.clone(), self.index);
        let work = move || loop {
            let flushed = flush_pending_rolls(&log, &topic, index);
            running.store(false, Ordering::Release);
            // A roll between the last look and the store above saw the flag still set and
            // left its flush to this task.
            if !flushed || !log.lock().roll_flush_pending() || running.swap(true, Ordering::AcqRel)
            {
                break;
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(work);
            }
            Err(_) => work(),
        }
    }

    fn append_as_follower_locked(
        &self,
        records: Bytes,
        (leader_high_watermark, leader_log_start_offset): (i64, i64),
        now_ms: i64,
    ) -> Result<i64, PartitionError> {
        let mut log = self.log.lock();
        self.check_follower()?;
        if !records.is_empty() {
            log.append_as_follower(records)?;
        }
        let leo = log.log_end_offset();
        let mut st = self.state.lock();
        // Never below the log start: a leader's high watermark can trail what this replica's
        // own retention already removed.
        let hw = leader_high_watermark.min(leo).max(log.log_start_offset());
        self.set_high_watermark(&mut log, &mut st, hw);
        drop(st);
        // Bounded by this replica's high watermark, which the log start may not pass; a
        // follower behind it takes the rest at a later fetch.
        let start = leader_log_start_offset.min(hw);
        if log.maybe_increment_log_start_offset(start, hw)? {
            self.delete_segments_below_log_start(&mut log, now_ms, hw);
            let _st = self.state.lock();
            self.changes.send_modify(|v| *v += 1);
        }
        Ok(leo)
    }

    /// Deletes the segments wholly below a log start offset that just moved, at once rather
    /// than at the next retention run (Kafka leaves them to it), so that DeleteRecords frees
    /// the disk it names. A failure leaves them to retention: the start offset has moved
    /// either way, and nothing below it is served.
    fn delete_segments_below_log_start(&self, log: &mut UnifiedLog, now_ms: i64, hw: i64) {
        if let Err(e) = log.delete_log_start_offset_breached_segments(now_ms, hw) {
            tracing::warn!(topic = %self.topic, partition = self.index, error = %e, "could not delete segments below the log start offset");
        }
    }

    /// Leader: a client's DeleteRecords (Kafka's `Partition.deleteRecordsOnLeader`). Moves the
    /// log start offset to `offset` ([`DELETE_RECORDS_HIGH_WATERMARK`]: to the high
    /// watermark), never past the high watermark and never backwards, and deletes the segments
    /// wholly below it. Refused unless this node leads (NOT_LEADER_OR_FOLLOWER), unless the
    /// topic's cleanup.policy includes delete (POLICY_VIOLATION), and for an offset below 0
    /// or above the high watermark (OFFSET_OUT_OF_RANGE). The caller waits for the low
    /// watermark ([`Self::wait_for_low_watermark_until`]); `alive` says which brokers count.
    pub fn delete_records_on_leader(
        &self,
        offset: i64,
        now_ms: i64,
        alive: impl Fn(i32) -> bool,
    ) -> Result<DeleteRecordsResult, PartitionError> {
        let mut log = self.log.lock();
        // The role cannot change while the log lock is held (`apply_registration` takes it).
        let hw = {
            let st = self.state.lock();
            if st.role != Role::Leader {
                return Err(PartitionError::NotLeader);
            }
            st.high_watermark
        };
        if !log.config().cleanup_policy_delete {
            return Err(PartitionError::PolicyViolation);
        }
        let requested_offset = if offset == DELETE_RECORDS_HIGH_WATERMARK {
            hw
        } else {
            offset
        };
        if requested_offset < 0 {
            return Err(PartitionError::Log(LogError::OffsetOutOfRange {
                offset: requested_offset,
                log_start_offset: log.log_start_offset(),
                log_end_offset: log.log_end_offset(),
            }));
        }
        let log_start_moved = log.maybe_increment_log_start_offset(requested_offset, hw)?;
        if log_start_moved {
            tracing::info!(topic = %self.topic, partition = self.index, log_start_offset = requested_offset, "log start offset moved by DeleteRecords");
            self.delete_segments_below_log_start(&mut log, now_ms, hw);
        }
        let st = self.state.lock();
        if log_start_moved {
            self.changes.send_modify(|v| *v += 1);
        }
        Ok(DeleteRecordsResult {
            requested_offset,
            low_watermark: Self::low_watermark(&log, &st, alive),
            log_start_moved,
        })
    }

    /// The smallest log start offset over this log and the followers on live brokers, -1 for
    /// one that has not fetched since this node became leader (Kafka's
    /// `Partition.lowWatermarkIfLeader`). Every replica counts, not only the ISR: a replica
    /// outside it still serves its log once it returns, so it must drop the records too.
    fn low_watermark(log: &UnifiedLog, st: &ReplicaState, alive: impl Fn(i32) -> bool) -> i64 {
        st.followers
            .iter()
            .filter(|(id, _)| alive(**id))
            .map(|(_, f)| f.log_start_offset)
            .fold(log.log_start_offset(), i64::min)
    }

    /// Leader: the low watermark ([`Self::low_watermark`]); NOT_LEADER_OR_FOLLOWER elsewhere.
    pub fn low_watermark_if_leader(
        &self,
        alive: impl Fn(i32) -> bool,
    ) -> Result<i64, PartitionError> {
        let log = self.log.lock();
        let st = self.state.lock();
        if st.role != Role::Leader {
            return Err(PartitionError::NotLeader);
        }
        Ok(Self::low_watermark(&log, &st, alive))
    }

    /// Waits until the low watermark reaches `required_offset`, until `deadline` (Kafka's
    /// `DelayedDeleteRecords`): it rises when a follower reports a higher log start in its
    /// fetch. `liveness` changes when the set of live brokers may have (a metadata image was
    /// applied), so a replica fenced meanwhile stops counting. Returns the low watermark
    /// reached; REQUEST_TIMED_OUT at the deadline, NOT_LEADER_OR_FOLLOWER if leadership moved.
    pub async fn wait_for_low_watermark_until(
        &self,
        required_offset: i64,
        deadline: Instant,
        alive: impl Fn(i32) -> bool,
        mut liveness: watch::Receiver<u64>,
    ) -> Result<i64, PartitionError> {
        // Subscribed before the first check, so a change between check and await is seen.
        let mut changes = self.changes.subscribe();
        let mut liveness_open = true;
        loop {
            let low_watermark = self.low_watermark_if_leader(&alive)?;
            if low_watermark >= required_offset {
                return Ok(low_watermark);
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Err(PartitionError::NotLeader);
                    }
                }
                changed = liveness.changed(), if liveness_open => {
                    liveness_open = changed.is_ok();
                }
                _ = tokio::time::sleep_until(deadline) => {
                    // One last look: the answer is the state at the deadline.
                    let low_watermark = self.low_watermark_if_leader(&alive)?;
                    return if low_watermark >= required_offset {
                        Ok(low_watermark)
                    } else {
                        Err(PartitionError::RequestTimedOut)
                    };
                }
            }
        }
    }

    /// Follower: removes everything at or after `offset` (divergence from the leader).
    pub fn truncate_to(&self, offset: i64) -> Result<(), PartitionError> {
        let mut log = self.log.lock();
        self.check_follower()?;
        log.truncate_to(offset)?;
        let mut st = self.state.lock();
        // The high watermark never exceeds the log end; a truncated follower's HW drops.
        let hw = st
            .high_watermark
            .min(log.log_end_offset())
            .max(log.log_start_offset());
        self.set_high_watermark(&mut log, &mut st, hw);
        Ok(())
    }

    /// Follower: restarts the log empty at `offset` (it fell below the leader's log start).
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), PartitionError> {
        let mut log = self.log.lock();
        self.check_follower()?;
        log.truncate_fully_and_start_at(offset)?;
        let mut st = self.state.lock();
        self.set_high_watermark(&mut log, &mut st, offset);
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

    /// Locates up to `max_bytes`, bounded by the log end offset, without any follower
    /// bookkeeping: for the group coordinator reading back an offsets partition it has just
    /// come to lead.
    pub fn read_to_log_end(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
    ) -> Result<PartitionRead, PartitionError> {
        let log = self.log.lock();
        let leo = log.log_end_offset();
        let slice = log.read(fetch_offset, max_bytes, leo, true)?;
        let hw = self.state.lock().high_watermark;
        Ok(PartitionRead {
            slice,
            high_watermark: hw,
            last_stable_offset: log.last_stable_offset(hw),
            log_start_offset: log.log_start_offset(),
            aborted_transactions: None,
        })
    }

    /// A receiver that changes whenever the high watermark, the role or the leader epoch
    /// changes.
    pub fn role_changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Locates up to `max_bytes` from `fetch_offset`, bounded by the high watermark, or at
    /// read_committed by the last stable offset, with the aborted transactions that may
    /// overlap (Kafka's `UnifiedLog.read` with `FetchIsolation.TXN_COMMITTED`). The bytes are
    /// read after the locks are released; the in-memory `.txnindex` entries are scanned here.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_message: bool,
        isolation: FetchIsolation,
    ) -> Result<PartitionRead, PartitionError> {
        let log = self.log.lock();
        let hw = {
            let st = self.state.lock();
            if st.role != Role::Leader {
                return Err(PartitionError::NotLeader);
            }
            st.high_watermark
        };
        let lso = log.last_stable_offset(hw);
        let max_offset = match isolation {
            FetchIsolation::HighWatermark => hw,
            FetchIsolation::TxnCommitted => lso,
        };
        let slice = log.read(fetch_offset, max_bytes, max_offset, min_one_message)?;
        let aborted_transactions = (isolation == FetchIsolation::TxnCommitted).then(|| {
            let upper = log.read_upper_bound(fetch_offset, max_offset);
            log.collect_aborted_transactions(fetch_offset, upper)
        });
        Ok(PartitionRead {
            slice,
            high_watermark: hw,
            last_stable_offset: lso,
            log_start_offset: log.log_start_offset(),
            aborted_transactions,
        })
    }

    /// The last stable offset: read_committed consumers read below it. Derived from the high
    /// watermark and the producer state on every call, never stored.
    pub fn last_stable_offset(&self) -> i64 {
        let log = self.log.lock();
        let hw = self.state.lock().high_watermark;
        log.last_stable_offset(hw)
    }

    /// The producers with state on this partition (DescribeProducers), copied under the lock.
    pub fn active_producers(&self) -> Vec<ProducerStateEntry> {
        self.log.lock().producer_state().iter().cloned().collect()
    }

    /// The open transactions on this partition, earliest first, at most `max` of them: the
    /// first offset, the producer, and the timestamp of the batch that opened the transaction
    /// while the producer's retained batches still hold it (for its age on the live page).
    pub fn open_transactions(&self, max: usize) -> Vec<OpenTransaction> {
        let log = self.log.lock();
        log.producer_state()
            .ongoing_transactions()
            .take(max)
            .map(|(first_offset, p)| OpenTransaction {
                producer_id: p.producer_id,
                producer_epoch: p.producer_epoch,
                first_offset,
                first_batch_timestamp: p
                    .batches()
                    .find(|b| b.first_offset == first_offset)
                    .map(|b| b.timestamp),
            })
            .collect()
    }

    /// The last `max` aborted transactions of the log, oldest first: each one's producer,
    /// first offset and ABORT marker offset, from the segments' transaction indexes (the
    /// ranges read_committed consumers are told to skip; Kafka's
    /// `LocalLog.collectAbortedTransactions` over the whole log). For the admin state views.
    pub fn aborted_transactions(&self, max: usize) -> Vec<AbortedTxn> {
        let log = self.log.lock();
        let mut all =
            log.collect_aborted_transactions(log.log_start_offset(), log.log_end_offset());
        let cut = all.len().saturating_sub(max);
        all.drain(..cut);
        all
    }

    /// The leader epoch `offset` was written in, or -1 when the leader epoch cache does not
    /// know (ListOffsets answers it, as Kafka's `UnifiedLog.fetchOffsetByTimestamp`).
    pub fn epoch_for_offset(&self, offset: i64) -> i32 {
        self.log.lock().epoch_for_offset(offset).unwrap_or(-1)
    }

    /// Leader whose high watermark has not yet reached the start offset of its leader epoch:
    /// a new leader that cannot yet tell what its predecessor committed, so ListOffsets answers
    /// OFFSET_NOT_AVAILABLE for what lies there (Kafka's `Partition.fetchOffsetForTimestamp`).
    pub fn high_watermark_lags_epoch_start(&self) -> bool {
        let st = self.state.lock();
        st.role == Role::Leader && st.leader_epoch_start_offset > st.high_watermark
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

    /// Runs retention; returns how many segments were deleted. Retention never deletes what
    /// followers may not have copied yet: nothing at or above the high watermark.
    pub fn delete_old_segments(&self, now_ms: i64) -> Result<usize, PartitionError> {
        let mut log = self.log.lock();
        let hw = self.state.lock().high_watermark;
        Ok(log.delete_old_segments(now_ms, hw)?)
    }

    /// Whether the log is compacted (`cleanup.policy` includes `compact`).
    pub fn is_compacted(&self) -> bool {
        self.log.lock().config().cleanup_policy_compact
    }

    /// The log as the cleaner sees it; the segment files are read after the lock is released.
    pub fn cleaner_view(&self) -> brook_storage::cleaner::CleanerView {
        let log = self.log.lock();
        let hw = self.state.lock().high_watermark;
        log.cleaner_view(hw)
    }

    /// Swaps a cleaned segment in under the partition lock, a few renames and deletes long
    /// (`UnifiedLog::replace_segments`); false if the log changed since the clean began.
    pub fn replace_cleaned_segments(
        &self,
        group: &brook_storage::cleaner::CleanedGroup,
        after_swap: &dyn Fn(),
    ) -> Result<bool, PartitionError> {
        Ok(self.log.lock().replace_segments(group, after_swap)?)
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

    /// Parks a fetch on this partition until the next append or high watermark change.
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

    /// Replica just opened: starts from the high watermark of the log directory's
    /// `replication-offset-checkpoint`, bounded by the log (Kafka's `Partition.createLog`), so
    /// a restarted replica that is elected before any follower fetches still serves what was
    /// committed. Called before the partition takes a role.
    pub fn restore_high_watermark(&self, checkpointed: i64) {
        let mut log = self.log.lock();
        let mut st = self.state.lock();
        let hw = checkpointed.clamp(log.log_start_offset(), log.log_end_offset());
        self.set_high_watermark(&mut log, &mut st, hw);
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

/// `log_start_offset <= hw <= log_end_offset`: checked on every write of the high watermark,
/// in release builds too (a high watermark past the log end would let readers see offsets
/// that do not exist, or acknowledge records that could still be lost).
fn check_offsets(log: &UnifiedLog, hw: i64) {
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    assert!(
        start <= hw && hw <= end,
        "high watermark {hw} outside [log start {start}, log end {end}]"
    );
}

/// fsyncs every segment rolls left unflushed, the log lock taken only to look and to record
/// the outcome. False if the log failed (a failed fsync fails the log, as Kafka takes the
/// log directory offline).
fn flush_pending_rolls(log: &Mutex<UnifiedLog>, topic: &str, index: i32) -> bool {
    loop {
        let flush = match log.lock().roll_flush() {
            Ok(Some(flush)) => flush,
            Ok(None) => return true,
            Err(e) => {
                tracing::warn!(%topic, partition = index, error = %e, "no fsync of rolled segments: the log failed");
                return false;
            }
        };
        let synced = flush.sync();
        if let Err(e) = log.lock().complete_roll_flush(&flush, synced) {
            tracing::error!(%topic, partition = index, error = %e, "fsync of rolled segments failed");
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brook_storage::batch::testutil::build_batch;

    const LAG_MS: i64 = 30_000;

    /// A follower of node 2 for `t-0`, replicas [1, 2, 3], this node 1.
    fn follower(dir: &std::path::Path) -> Partition {
        let log = UnifiedLog::open(dir.join("t-0"), LogConfig::default(), true, 0).unwrap();
        let p = Partition::new_replica("t".into(), Uuid::new_v4(), 0, 1, 2, LAG_MS, log);
        let role = p.apply_registration(2, 1, 1, vec![1, 2, 3], vec![1, 2, 3], 0);
        assert_eq!(role, Some(Role::Follower { leader: 2 }));
        p
    }

    /// Batches as a leader at epoch 1 would send them: offsets assigned from `base`.
    fn fetched(base: i64, n: usize) -> Bytes {
        let mut b = build_batch(n, 10, 0).to_vec();
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b[12..16].copy_from_slice(&1i32.to_be_bytes());
        Bytes::from(b)
    }

    /// The leader of `t-0` at epoch 1: replicas [1, 2, 3], ISR `isr`, this node 1.
    fn leader(dir: &std::path::Path, isr: Vec<i32>) -> Partition {
        let log = UnifiedLog::open(dir.join("t-0"), LogConfig::default(), true, 0).unwrap();
        let p = Partition::new_replica("t".into(), Uuid::new_v4(), 0, 1, 2, LAG_MS, log);
        let role = p.apply_registration(1, 1, 1, vec![1, 2, 3], isr, 0);
        assert_eq!(role, Some(Role::Leader));
        p
    }

    fn fetch(p: &Partition, replica: i32, offset: i64, now_ms: i64) -> Option<Vec<i32>> {
        match p.fetch_for_follower(replica, (offset, 0), -1, 1 << 20, now_ms) {
            Ok(FollowerFetch::Records { isr_proposal, .. }) => isr_proposal,
            other => panic!("fetch of replica {replica} at {offset}: {other:?}"),
        }
    }

    #[test]
    fn a_replica_joining_the_isr_bounds_the_high_watermark_until_it_has_the_records() {
        let dir = tempfile::tempdir().unwrap();
        let p = leader(dir.path(), vec![1, 2]);
        // Wall-clock times: a replica that never fetched was last caught up at 0.
        let t = 1_000_000;
        p.append_records_to_leader(build_batch(5, 10, 0), -1, t, None)
            .unwrap();
        fetch(&p, 2, 5, t + 1);
        assert_eq!(p.high_watermark(), 5, "committed on the ISR [1, 2]");
        // Replica 3 reaches the high watermark: it is proposed for the ISR.
        assert_eq!(fetch(&p, 3, 5, t + 2), Some(vec![1, 2, 3]));
        p.append_records_to_leader(build_batch(5, 10, 0), -1, t + 3, None)
            .unwrap();
        fetch(&p, 2, 10, t + 4);
        assert_eq!(
            p.high_watermark(),
            5,
            "the joining replica, at 5, holds the high watermark back while pending"
        );
        fetch(&p, 3, 10, t + 5);
        assert_eq!(p.high_watermark(), 10);
    }

    /// Steady produce: each fetch of replica 3 reaches the leader's log end of its previous
    /// fetch (caught up) but never the high watermark, which replica 2 moves on meanwhile.
    /// Returns the high watermark after replica 3 is caught up at 5 and replica 2 reaches 15,
    /// and replica 3's ISR proposal when it then fetches at 10.
    fn catching_up_under_load(eligible: bool) -> (i64, Option<Vec<i32>>) {
        let dir = tempfile::tempdir().unwrap();
        let p = leader(dir.path(), vec![1, 2])
            .with_isr_eligibility(Arc::new(move |id| id != 3 || eligible));
        let t = 1_000_000;
        p.append_records_to_leader(build_batch(5, 10, 0), -1, t, None)
            .unwrap();
        fetch(&p, 2, 5, t + 1);
        assert_eq!(fetch(&p, 3, 0, t + 2), None, "far behind");
        p.append_records_to_leader(build_batch(5, 10, 0), -1, t + 3, None)
            .unwrap();
        fetch(&p, 2, 10, t + 3);
        assert_eq!(p.high_watermark(), 10);
        // At 5 replica 3 has what the leader had at its previous fetch: caught up, below the
        // high watermark, so not yet in sync.
        assert_eq!(fetch(&p, 3, 5, t + 4), None);
        p.append_records_to_leader(build_batch(5, 10, 0), -1, t + 5, None)
            .unwrap();
        fetch(&p, 2, 15, t + 6);
        let hw = p.high_watermark();
        (hw, fetch(&p, 3, 10, t + 7))
    }

    #[test]
    fn a_caught_up_replica_eligible_for_the_isr_holds_the_high_watermark_until_it_joins() {
        let (hw, proposal) = catching_up_under_load(true);
        assert_eq!(
            hw, 10,
            "replica 3, caught up at 5, keeps the HW from passing 10"
        );
        assert_eq!(
            proposal,
            Some(vec![1, 2, 3]),
            "at 10 it reached the HW: it joins"
        );
    }

    #[test]
    fn an_ineligible_replica_holds_nothing_back_and_is_not_proposed() {
        let (hw, proposal) = catching_up_under_load(false);
        assert_eq!(
            hw, 15,
            "a fenced or shutting-down replica does not hold the HW"
        );
        assert_eq!(proposal, None);
    }

    #[test]
    fn a_follower_reaching_the_log_end_of_its_previous_fetch_stays_caught_up() {
        let dir = tempfile::tempdir().unwrap();
        let p = leader(dir.path(), vec![1, 2, 3]);
        let mut now = 0;
        let mut leo = 0;
        // Each round: records arrive, then the followers fetch up to the end of their previous
        // fetch, never to the current end. Rounds are a third of the lag window apart.
        for _ in 0..10 {
            let fetched_to = leo;
            p.append_records_to_leader(build_batch(3, 10, 0), 1, now, None)
                .unwrap();
            leo += 3;
            now += LAG_MS / 3;
            fetch(&p, 2, fetched_to, now);
            fetch(&p, 3, fetched_to, now);
            assert_eq!(p.isr_shrink_proposal(now), None, "at {now} ms");
        }
        // A follower that stops fetching leaves after the lag window.
        assert_eq!(p.isr_shrink_proposal(now + LAG_MS + 1), Some(vec![1]));
    }

    #[test]
    fn delete_records_answers_once_every_live_replica_reports_the_new_log_start() {
        let dir = tempfile::tempdir().unwrap();
        let p = leader(dir.path(), vec![1, 2, 3]);
        p.append_records_to_leader(build_batch(10, 10, 0), -1, 0, None)
            .unwrap();
        fetch(&p, 2, 10, 1);
        fetch(&p, 3, 10, 1);
        assert_eq!(p.high_watermark(), 10);
        let all = |_: i32| true;
        let r = p.delete_records_on_leader(4, 2, all).unwrap();
        assert_eq!((r.requested_offset, r.log_start_moved), (4, true));
        assert_eq!(p.offsets().0, 4, "the leader's log start moved");
        assert_eq!(r.low_watermark, 0, "the followers still report 0");
        let fetch_with_start = |replica: i32, start: i64| {
            p.fetch_for_follower(replica, (10, start), -1, 1 << 20, 3)
                .unwrap();
        };
        fetch_with_start(2, 4);
        assert_eq!(p.low_watermark_if_leader(all).unwrap(), 0, "replica 3 lags");
        assert_eq!(
            p.low_watermark_if_leader(|id| id != 3).unwrap(),
            4,
            "a fenced replica does not count"
        );
        fetch_with_start(3, 4);
        assert_eq!(p.low_watermark_if_leader(all).unwrap(), 4);
    }

    #[test]
    fn delete_records_resolves_minus_one_refuses_bad_offsets_and_never_moves_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = Partition::new(
            "t".into(),
            Uuid::new_v4(),
            0,
            1,
            1,
            LAG_MS,
            UnifiedLog::open(dir.path().join("t-0"), LogConfig::default(), true, 0).unwrap(),
        );
        p.append_records_to_leader(build_batch(10, 10, 0), -1, 0, None)
            .unwrap();
        let out_of_range = ResponseError::OffsetOutOfRange.code();
        for bad in [11, -2] {
            let e = p.delete_records_on_leader(bad, 1, |_| true).unwrap_err();
            assert_eq!(e.error_code(), out_of_range, "offset {bad}");
        }
        let r = p.delete_records_on_leader(7, 1, |_| true).unwrap();
        assert_eq!((r.requested_offset, r.low_watermark), (7, 7));
        let r = p.delete_records_on_leader(3, 1, |_| true).unwrap();
        assert!(!r.log_start_moved);
        assert_eq!((r.requested_offset, r.low_watermark), (3, 7));
        let r = p
            .delete_records_on_leader(DELETE_RECORDS_HIGH_WATERMARK, 1, |_| true)
            .unwrap();
        assert_eq!((r.requested_offset, r.low_watermark), (10, 10));
        assert_eq!(p.offsets(), (10, 10));
    }

    #[test]
    fn delete_records_refuses_compacted_topics_and_followers() {
        let dir = tempfile::tempdir().unwrap();
        let f = follower(&dir.path().join("f"));
        let e = f.delete_records_on_leader(0, 0, |_| true).unwrap_err();
        assert_eq!(e.error_code(), ResponseError::NotLeaderOrFollower.code());
        let config = LogConfig {
            cleanup_policy_delete: false,
            ..LogConfig::default()
        };
        let log = UnifiedLog::open(dir.path().join("c-0"), config, true, 0).unwrap();
        let p = Partition::new("c".into(), Uuid::new_v4(), 0, 1, 1, LAG_MS, log);
        let e = p.delete_records_on_leader(0, 0, |_| true).unwrap_err();
        assert_eq!(e.error_code(), ResponseError::PolicyViolation.code());
    }

    /// Segments of about one batch, so that every append rolls.
    fn rolling_config() -> LogConfig {
        LogConfig {
            segment_bytes: 512,
            ..LogConfig::default()
        }
    }

    #[test]
    fn the_segments_a_roll_finished_are_fsynced_after_the_append_leader_and_follower() {
        let dir = tempfile::tempdir().unwrap();
        let log = UnifiedLog::open(dir.path().join("l-0"), rolling_config(), true, 0).unwrap();
        let p = Partition::new_replica("l".into(), Uuid::new_v4(), 0, 1, 2, LAG_MS, log);
        assert_eq!(
            p.apply_registration(1, 1, 1, vec![1], vec![1], 0),
            Some(Role::Leader)
        );
        for i in 0..5 {
            p.append_records_to_leader(build_batch(5, 100, 0), 1, i, None)
                .unwrap();
        }
        let bases = p.log.lock().segment_base_offsets();
        assert!(bases.len() > 2, "the appends rolled: {bases:?}");
        // No runtime here, so the flush ran inline: everything but the active segment is
        // on disk once the append returned.
        assert_eq!(p.recovery_point(), *bases.last().unwrap());

        let log = UnifiedLog::open(dir.path().join("f-0"), rolling_config(), true, 0).unwrap();
        let f = Partition::new_replica("f".into(), Uuid::new_v4(), 0, 1, 2, LAG_MS, log);
        assert_eq!(
            f.apply_registration(2, 1, 1, vec![1, 2], vec![1, 2], 0),
            Some(Role::Follower { leader: 2 })
        );
        for i in 0..20 {
            f.append_as_follower(fetched(i * 5, 5), (0, 0), 0).unwrap();
        }
        let bases = f.log.lock().segment_base_offsets();
        assert!(bases.len() > 2, "the appends rolled: {bases:?}");
        assert_eq!(f.recovery_point(), *bases.last().unwrap());
    }

    #[test]
    fn a_follower_takes_the_leaders_log_start_within_its_high_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let p = follower(dir.path());
        p.append_as_follower(fetched(0, 10), (4, 6), 0).unwrap();
        assert_eq!(p.offsets().0, 4, "not past this replica's high watermark");
        p.append_as_follower(Bytes::new(), (10, 6), 0).unwrap();
        assert_eq!(p.offsets().0, 6);
        p.append_as_follower(Bytes::new(), (10, 2), 0).unwrap();
        assert_eq!(p.offsets().0, 6, "the log start never goes back");
    }

    #[test]
    fn follower_high_watermark_follows_the_leaders_down_and_stays_within_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let p = follower(dir.path());
        p.append_as_follower(fetched(0, 10), (8, 0), 0).unwrap();
        assert_eq!(p.high_watermark(), 8);
        // The leader's answer is bounded by what this replica has.
        p.append_as_follower(Bytes::new(), (50, 0), 0).unwrap();
        assert_eq!(p.high_watermark(), 10);
        // A new leader whose high watermark is lower: the follower's goes down with it.
        p.append_as_follower(Bytes::new(), (6, 0), 0).unwrap();
        assert_eq!(p.high_watermark(), 6);
    }
}
