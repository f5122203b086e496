//! The group coordinator: consumer groups (classic protocol and KIP-848) and their committed
//! offsets.
//!
//! This node is the coordinator of every group (one broker). The coordinator keeps all
//! groups in memory behind one short `parking_lot::Mutex` (never held across an await;
//! sharding by `__consumer_offsets` partition is the natural next step when groups become
//! many). Every change that must survive a restart — a committed offset, a classic
//! generation, a consumer group epoch, a deletion — is appended to `__consumer_offsets`
//! ([`store`]) before the client sees success, and [`GroupCoordinator::open`] replays that
//! topic at start-up. Members are not restored: after a restart they rejoin.
//!
//! Time: JoinGroup and SyncGroup answers wait on `oneshot` channels completed by other
//! requests or by deadlines. One timer task ([`GroupCoordinator::run`]) sleeps until the
//! earliest deadline of any group and is woken when a request sets an earlier one.
//!
//! Modules: [`classic`] (JoinGroup/SyncGroup/Heartbeat/LeaveGroup state machine),
//! [`consumer`] (ConsumerGroupHeartbeat, server-side assignors), [`records`] (the
//! `__consumer_offsets` record layout), [`store`] (append and replay),
//! [`consumer_protocol`] (the embedded consumer protocol blobs), [`txn`] (offsets committed
//! inside transactions, pending until the transaction's marker).

pub mod classic;
pub mod consumer;
pub mod consumer_protocol;
pub mod records;
pub mod store;
pub mod txn;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use uuid::Uuid;

use self::classic::{
    ClassicGroup, ClassicLimits, ClassicState, JoinParams, JoinResponse, Pending, SyncResponse,
};
use self::consumer::{ConsumerGroup, ConsumerLimits, HeartbeatParams, HeartbeatResult};
use self::records::{OffsetValue, RecordKey};
use self::store::{OffsetsStore, Record, Replayed, TxnProducer, Written, OFFSETS_TOPIC};
use crate::cluster::replica_manager::{now_ms, ReplicaManager};
use crate::config::{BrokerConfig, ConfigError};

/// Longest group id accepted (Kafka has no limit; the record format's i16 strings do).
pub const MAX_GROUP_ID_BYTES: usize = 4096;
/// Bound on one member's JoinGroup protocol metadata, all protocols together.
pub const MAX_MEMBER_METADATA_BYTES: usize = 256 * 1024;
/// Bound on one member's assignment in SyncGroup.
pub const MAX_MEMBER_ASSIGNMENT_BYTES: usize = 256 * 1024;
/// Bound on protocols offered in one JoinGroup.
pub const MAX_PROTOCOLS_PER_MEMBER: usize = 64;
/// Bound on topics named in one ConsumerGroupHeartbeat subscription.
pub const MAX_SUBSCRIBED_TOPICS: usize = 10_000;
/// Group metadata records larger than this are written without member blobs (restored
/// members keep their generation; they send their metadata again at the next rebalance), to
/// stay under the topic's max.message.bytes.
pub const MAX_GROUP_RECORD_MEMBER_BYTES: usize = 512 * 1024;
/// Longest time the timer task sleeps when no deadline is pending.
const IDLE_TIMER: std::time::Duration = std::time::Duration::from_secs(3600);

/// Errors of the group coordinator, each one Kafka error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("offset metadata too large")]
    OffsetMetadataTooLarge,
    #[error("coordinator not available")]
    CoordinatorNotAvailable,
    #[error("not the coordinator")]
    NotCoordinator,
    #[error("illegal generation")]
    IllegalGeneration,
    #[error("inconsistent group protocol")]
    InconsistentGroupProtocol,
    #[error("invalid group id")]
    InvalidGroupId,
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("invalid session timeout")]
    InvalidSessionTimeout,
    #[error("rebalance in progress")]
    RebalanceInProgress,
    #[error("commit too large for the offsets topic")]
    InvalidCommitOffsetSize,
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("group is not empty")]
    NonEmptyGroup,
    #[error("group id not found")]
    GroupIdNotFound,
    #[error("group max size reached")]
    GroupMaxSizeReached,
    #[error("fenced instance id")]
    FencedInstanceId,
    #[error("group subscribed to topic")]
    GroupSubscribedToTopic,
    #[error("fenced member epoch")]
    FencedMemberEpoch,
    #[error("the instance id is still used by an active member")]
    UnreleasedInstanceId,
    #[error("unsupported assignor {0}")]
    UnsupportedAssignor(String),
    #[error("stale member epoch")]
    StaleMemberEpoch,
    #[error("invalid regular expression: {0}")]
    InvalidRegularExpression(String),
    #[error("producer epoch is older than the partition's")]
    InvalidProducerEpoch,
    #[error("the partition has offsets of a transaction still open")]
    UnstableOffsetCommit,
    #[error("offsets topic: {0}")]
    Storage(String),
}

impl GroupError {
    /// The Kafka error a client sees for this error.
    pub fn response_error(&self) -> ResponseError {
        match self {
            GroupError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
            GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
            GroupError::CoordinatorNotAvailable | GroupError::Storage(_) => {
                ResponseError::CoordinatorNotAvailable
            }
            GroupError::NotCoordinator => ResponseError::NotCoordinator,
            GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
            GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
            GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
            GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
            GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
            GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
            GroupError::InvalidCommitOffsetSize => ResponseError::InvalidCommitOffsetSize,
            GroupError::InvalidRequest(_) => ResponseError::InvalidRequest,
            GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
            GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
            GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
            GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
            GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
            GroupError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
            GroupError::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId,
            GroupError::UnsupportedAssignor(_) => ResponseError::UnsupportedAssignor,
            GroupError::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
            GroupError::InvalidRegularExpression(_) => ResponseError::InvalidRegularExpression,
            GroupError::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
            GroupError::UnstableOffsetCommit => ResponseError::UnstableOffsetCommit,
        }
    }

    /// Its code on the wire.
    pub fn error_code(&self) -> i16 {
        self.response_error().code()
    }
}

/// Why the coordinator could not start.
#[derive(Debug, thiserror::Error)]
pub enum GroupOpenError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Serving without the replayed offsets would silently rewind consumers; refuse instead.
    #[error("cannot replay __consumer_offsets: {0}")]
    Replay(GroupError),
}

/// The coordinator's settings, read from the broker config with Kafka's key names.
#[derive(Debug, Clone, Copy)]
pub struct GroupConfig {
    pub classic: ClassicLimits,
    pub consumer: ConsumerLimits,
    /// `offsets.topic.num.partitions`.
    pub offsets_partitions: i32,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes`, in ms.
    pub offsets_retention_ms: i64,
    /// `offsets.topic.replication.factor`: used when a cluster creates the offsets topic.
    /// As in Kafka, creation fails while fewer brokers are alive.
    pub offsets_replication_factor: i16,
    /// `offsets.commit.timeout.ms`: how long a commit waits for the offsets partition's
    /// high watermark before it is answered COORDINATOR_NOT_AVAILABLE.
    pub offsets_commit_timeout_ms: i32,
}

impl GroupConfig {
    /// Reads the group keys from the broker config.
    pub fn from_broker(c: &BrokerConfig) -> Result<Self, ConfigError> {
        let get = |k: &str| -> Result<i64, ConfigError> {
            let v = c.values.get(k).cloned().unwrap_or_default();
            v.trim()
                .parse::<i64>()
                .map_err(|_| ConfigError::InvalidValue {
                    key: k.into(),
                    value: v.clone(),
                    reason: "not a number".into(),
                })
        };
        let positive_i32 = |k: &str| -> Result<i32, ConfigError> {
            let v = get(k)?;
            if v <= 0 || v > i32::MAX as i64 {
                return Err(ConfigError::InvalidValue {
                    key: k.into(),
                    value: v.to_string(),
                    reason: "must be a positive 32-bit number".into(),
                });
            }
            Ok(v as i32)
        };
        let delay = get("group.initial.rebalance.delay.ms")?;
        if !(0..=i32::MAX as i64).contains(&delay) {
            return Err(ConfigError::InvalidValue {
                key: "group.initial.rebalance.delay.ms".into(),
                value: delay.to_string(),
                reason: "must be 0 or more".into(),
            });
        }
        let max_size = positive_i32("group.max.size")? as usize;
        // KIP-848 timing: the broker's own interval and timeout must sit within their bounds,
        // and the interval below the timeout. Kafka refuses to start otherwise.
        let bounded = |name: &str| -> Result<i32, ConfigError> {
            let key = |bound: &str| format!("group.consumer.{bound}{name}");
            let (value, min, max) = (
                positive_i32(&key(""))?,
                positive_i32(&key("min."))?,
                positive_i32(&key("max."))?,
            );
            let fail = |k: String, v: i32, reason: String| ConfigError::InvalidValue {
                key: k,
                value: v.to_string(),
                reason,
            };
            if max < min {
                return Err(fail(
                    key("max."),
                    max,
                    format!("must be greater than or equal to {} ({min})", key("min.")),
                ));
            }
            if !(min..=max).contains(&value) {
                return Err(fail(
                    key(""),
                    value,
                    format!(
                        "must be within {} ({min}) and {} ({max})",
                        key("min."),
                        key("max.")
                    ),
                ));
            }
            Ok(value)
        };
        let heartbeat_interval_ms = bounded("heartbeat.interval.ms")?;
        let session_timeout_ms = bounded("session.timeout.ms")?;
        if heartbeat_interval_ms >= session_timeout_ms {
            return Err(ConfigError::InvalidValue {
                key: "group.consumer.heartbeat.interval.ms".into(),
                value: heartbeat_interval_ms.to_string(),
                reason: "must be less than group.consumer.session.timeout.ms".into(),
            });
        }
        Ok(GroupConfig {
            classic: ClassicLimits {
                min_session_timeout_ms: positive_i32("group.min.session.timeout.ms")?,
                max_session_timeout_ms: positive_i32("group.max.session.timeout.ms")?,
                max_size,
                initial_rebalance_delay_ms: delay as i32,
            },
            consumer: ConsumerLimits {
                session_timeout_ms,
                heartbeat_interval_ms,
                max_size: positive_i32("group.consumer.max.size")? as usize,
            },
            offsets_partitions: positive_i32("offsets.topic.num.partitions")?,
            offset_metadata_max_bytes: positive_i32("offset.metadata.max.bytes")? as usize,
            offsets_retention_ms: positive_i32("offsets.retention.minutes")? as i64 * 60_000,
            offsets_replication_factor: {
                let rf = positive_i32("offsets.topic.replication.factor")?;
                i16::try_from(rf).map_err(|_| ConfigError::InvalidValue {
                    key: "offsets.topic.replication.factor".into(),
                    value: rf.to_string(),
                    reason: "must fit a 16-bit number".into(),
                })?
            },
            offsets_commit_timeout_ms: positive_i32("offsets.commit.timeout.ms")?,
        })
    }
}

/// Which protocol a group speaks.
#[derive(Debug)]
pub enum GroupKind {
    Classic(ClassicGroup),
    Consumer(ConsumerGroup),
}

/// A committed (or pending) offset and the log offset of its record in the group's
/// `__consumer_offsets` partition (Kafka's `OffsetAndMetadata.recordOffset`). When a
/// transaction commits, its offsets replace committed ones only if their records are later in
/// the log, so the log order decides between transactional and plain commits, as it will
/// after compaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredOffset {
    pub value: OffsetValue,
    pub record_offset: i64,
}

/// (topic, partition) → offset.
pub type OffsetMap = BTreeMap<(String, i32), StoredOffset>;

/// A group and its committed offsets.
#[derive(Debug)]
pub struct GroupEntry {
    pub kind: GroupKind,
    /// (topic, partition) → committed offset.
    pub offsets: OffsetMap,
    /// Offsets written by TxnOffsetCommit inside transactions still open, by producer id
    /// (Kafka's `pendingTransactionalOffsets`, per group): they become committed offsets when
    /// the producer's COMMIT marker reaches the group's offsets partition, and vanish with its
    /// ABORT marker ([`GroupCoordinator::complete_txn_offsets`]).
    pub pending_txn: BTreeMap<i64, OffsetMap>,
    /// KIP-848 groups: the records last written for the group (key → value), so that only
    /// changes are written and a key no longer produced gets a tombstone.
    pub persisted: HashMap<Bytes, Bytes>,
}

impl GroupEntry {
    fn classic(group_id: &str) -> Self {
        GroupEntry {
            kind: GroupKind::Classic(ClassicGroup::new(group_id.to_string())),
            offsets: BTreeMap::new(),
            pending_txn: BTreeMap::new(),
            persisted: HashMap::new(),
        }
    }

    fn is_empty(&self) -> bool {
        match &self.kind {
            GroupKind::Classic(g) => g.is_empty(),
            GroupKind::Consumer(g) => g.members.is_empty(),
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        match &self.kind {
            GroupKind::Classic(g) => g.next_deadline(),
            GroupKind::Consumer(g) => g.next_deadline(),
        }
    }

    /// The state name Kafka reports.
    pub fn state_str(&self) -> &'static str {
        match &self.kind {
            GroupKind::Classic(g) => g.state.as_str(),
            GroupKind::Consumer(g) => g.state_str(),
        }
    }

    /// "classic" or "consumer" (ListGroups v5 group type).
    pub fn type_str(&self) -> &'static str {
        match &self.kind {
            GroupKind::Classic(_) => "classic",
            GroupKind::Consumer(_) => "consumer",
        }
    }

    /// The protocol type reported by ListGroups and DescribeGroups.
    pub fn protocol_type(&self) -> String {
        match &self.kind {
            GroupKind::Classic(g) => g.protocol_type.clone().unwrap_or_default(),
            GroupKind::Consumer(_) => "consumer".into(),
        }
    }
}

/// OffsetFetch's answer for one group: per topic, (partition, committed offset if any, or the
/// partition's error: UNSTABLE_OFFSET_COMMIT while a transaction's offsets are pending).
pub type FetchedOffsets = Vec<(String, Vec<(i32, Result<Option<OffsetValue>, GroupError>)>)>;

/// One partition's commit request.
#[derive(Debug, Clone)]
pub struct CommitPartition {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// Who commits: the group membership fields of OffsetCommit.
#[derive(Debug, Clone)]
pub struct Committer {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_or_epoch: i32,
    /// OffsetCommit v9+ answers GROUP_ID_NOT_FOUND for a missing group, older versions
    /// ILLEGAL_GENERATION.
    pub api_version: i16,
    /// TxnOffsetCommit: Kafka's looser membership rules (no member information is fine in
    /// any state, a rebalance does not refuse it) and ILLEGAL_GENERATION for a missing group.
    pub transactional: bool,
}

/// A member in a group description.
#[derive(Debug, Clone)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// DescribeGroups' view of a group.
#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub state: String,
    pub protocol_type: String,
    pub protocol_data: String,
    pub members: Vec<MemberDescription>,
}

/// ConsumerGroupDescribe's view of a KIP-848 group: each member with its target assignment.
#[derive(Debug, Clone)]
pub struct ConsumerGroupDescription {
    pub state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<(consumer::ConsumerMember, consumer::TopicPartitions)>,
}

/// ListGroups' view of a group.
#[derive(Debug, Clone)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
    pub group_type: String,
}

/// What `/metrics` reports of the groups this node holds.
#[derive(Debug, Default)]
pub struct GroupCounts {
    /// Groups by (type, state).
    pub by_state: BTreeMap<(&'static str, &'static str), usize>,
    /// By type, the sum of the groups' generations (classic) or group epochs (consumer):
    /// their rebalances over their lifetime.
    pub rebalances: BTreeMap<&'static str, u64>,
}

/// The group coordinator of this node.
pub struct GroupCoordinator {
    config: GroupConfig,
    replicas: Arc<ReplicaManager>,
    store: OffsetsStore,
    /// Cluster mode (`process.roles` includes controller): groups follow the leadership of
    /// their offsets partitions. Alone, this node coordinates every group.
    clustered: bool,
    state: Mutex<State>,
    /// Wakes the timer task when a request sets a deadline earlier than the one it sleeps to.
    timer: Notify,
}

#[derive(Default)]
struct State {
    groups: HashMap<String, GroupEntry>,
    /// The deadline the timer task sleeps until.
    timer_at: Option<Instant>,
    shut_down: bool,
    /// Cluster mode: the offsets partitions whose groups are in memory, with the leader
    /// epoch at which they were read back. A group is served only while this node leads its
    /// partition at that epoch.
    loaded: HashMap<i32, i32>,
}

impl GroupCoordinator {
    /// Reads the config and replays `__consumer_offsets`.
    pub fn open(
        broker: &BrokerConfig,
        replicas: Arc<ReplicaManager>,
    ) -> Result<Self, GroupOpenError> {
        let config = GroupConfig::from_broker(broker)?;
        let store = OffsetsStore::new(
            replicas.clone(),
            config.offsets_partitions,
            config.offsets_replication_factor,
        );
        let mut groups: HashMap<String, GroupEntry> = HashMap::new();
        let consumer_session =
            std::time::Duration::from_millis(config.consumer.session_timeout_ms as u64);
        // In a cluster nothing is led yet: each partition is read back when this node becomes
        // its leader (see `acquire_partition`).
        let clustered = crate::controller::ControllerConfig::from_broker_config(broker)
            .ok()
            .flatten()
            .is_some();
        let mut n = 0;
        if !clustered {
            let partitions = replicas.topic(OFFSETS_TOPIC).map_or(0, |t| t.partitions);
            for index in 0..partitions {
                let (loaded, records) = load_partition(&store, index, consumer_session)
                    .map_err(GroupOpenError::Replay)?;
                groups.extend(loaded);
                n += records;
            }
        }
        if n > 0 {
            tracing::info!(
                records = n,
                groups = groups.len(),
                "replayed __consumer_offsets"
            );
        }
        Ok(GroupCoordinator {
            config,
            replicas,
            store,
            clustered,
            state: Mutex::new(State {
                groups,
                ..State::default()
            }),
            timer: Notify::new(),
        })
    }

    /// The coordinator's settings.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// The session a KIP-848 member read back from the log starts with.
    fn consumer_session(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.config.consumer.session_timeout_ms as u64)
    }

    /// Creates `__consumer_offsets` if needed (FindCoordinator does, as Kafka does).
    pub async fn ensure_offsets_topic(&self) -> Result<(), GroupError> {
        match self.replicas.controller() {
            Some(controller) => self.store.ensure_topic_in_cluster(controller).await,
            None => self.store.ensure_topic(),
        }
    }

    /// The offsets partition that holds a group's records.
    pub fn offsets_partition_for(&self, group_id: &str) -> i32 {
        self.store.partition_for(group_id)
    }

    /// Cluster mode: this node coordinates a group only while it leads the group's offsets
    /// partition. Single node: every group, read back at start-up.
    fn acquire(&self, st: &mut State, group_id: &str) -> Result<(), GroupError> {
        if !self.clustered {
            return Ok(());
        }
        let Some(topic) = self.replicas.topic(OFFSETS_TOPIC) else {
            return Err(GroupError::CoordinatorNotAvailable);
        };
        self.acquire_partition(st, records::partition_for(group_id, topic.partitions))
    }

    /// Checks this node's leadership of offsets partition `index`. Led at a leader epoch not
    /// loaded yet: the partition's groups are read back from the log first (leadership moved
    /// here, or away and back, so what is in memory may be stale). Not led: its groups are
    /// dropped, their parked requests answered NOT_COORDINATOR, and so is this request.
    fn acquire_partition(&self, st: &mut State, index: i32) -> Result<(), GroupError> {
        let epoch = self
            .replicas
            .partition(OFFSETS_TOPIC, index)
            .filter(|p| p.is_leader())
            .map(|p| p.leader_epoch());
        match epoch {
            None => {
                self.unload(st, index);
                Err(GroupError::NotCoordinator)
            }
            Some(e) if st.loaded.get(&index) == Some(&e) => Ok(()),
            Some(e) => {
                self.unload(st, index);
                let (groups, n) = load_partition(&self.store, index, self.consumer_session())?;
                tracing::info!(
                    partition = index,
                    leader_epoch = e,
                    records = n,
                    groups = groups.len(),
                    "loaded groups of {OFFSETS_TOPIC}-{index}"
                );
                // Restored members have session deadlines: make the timer see them.
                let earliest = groups.values().filter_map(|g| g.next_deadline()).min();
                st.groups.extend(groups);
                st.loaded.insert(index, e);
                if let Some(d) = earliest {
                    if st.timer_at.is_none_or(|t| d < t) {
                        st.timer_at = Some(d);
                        self.timer.notify_one();
                    }
                }
                Ok(())
            }
        }
    }

    /// Drops the groups of offsets partition `index` from memory (this node no longer leads
    /// it); their parked JoinGroup/SyncGroup requests are answered NOT_COORDINATOR, which
    /// sends the clients to look up the new coordinator.
    fn unload(&self, st: &mut State, index: i32) {
        if st.loaded.remove(&index).is_none() {
            return;
        }
        let partitions = self.store.partitions();
        let gone: Vec<String> = st
            .groups
            .keys()
            .filter(|g| records::partition_for(g, partitions) == index)
            .cloned()
            .collect();
        for g in &gone {
            if let Some(mut e) = st.groups.remove(g) {
                if let GroupKind::Classic(c) = &mut e.kind {
                    c.fail_waiters(GroupError::NotCoordinator.error_code());
                }
            }
        }
        tracing::info!(
            partition = index,
            groups = gone.len(),
            "unloaded groups of {OFFSETS_TOPIC}-{index}"
        );
    }

    /// Cluster mode: brings every offsets partition in line with this node's leadership
    /// (loads newly led ones, drops lost ones). Run after each metadata image and before
    /// ListGroups, so that groups are known without waiting for a client to touch them.
    fn acquire_all(&self, st: &mut State) {
        if !self.clustered {
            return;
        }
        let Some(topic) = self.replicas.topic(OFFSETS_TOPIC) else {
            return;
        };
        for index in 0..topic.partitions {
            if let Err(e) = self.acquire_partition(st, index) {
                if e != GroupError::NotCoordinator {
                    tracing::warn!(partition = index, error = %e, "could not load groups");
                }
            }
        }
    }

    /// After a change to `group`: persist what must be, and make the timer see a new
    /// earlier deadline.
    fn after_change(&self, st: &mut State, group_id: &str) {
        let Some(entry) = st.groups.get_mut(group_id) else {
            return;
        };
        let (write, desired): (Vec<Record>, Option<HashMap<Bytes, Bytes>>) = match &mut entry.kind {
            GroupKind::Classic(g) if g.needs_persist => {
                g.needs_persist = false;
                (
                    vec![(
                        records::group_metadata_key(group_id),
                        Some(classic_record(g)),
                    )],
                    None,
                )
            }
            GroupKind::Consumer(g) => {
                let desired: HashMap<Bytes, Bytes> = g.records().into_iter().collect();
                let write = record_changes(&entry.persisted, &desired);
                (write, Some(desired))
            }
            _ => (Vec::new(), None),
        };
        if !write.is_empty() {
            match self.store.append(group_id, write) {
                Ok(_) => {
                    if let Some(d) = desired {
                        entry.persisted = d;
                    }
                }
                // Kept as it was: the next change writes the difference again.
                Err(e) => {
                    tracing::warn!(group = group_id, error = %e, "could not write group metadata")
                }
            }
        }
        if let Some(d) = entry.next_deadline() {
            if st.timer_at.is_none_or(|t| d < t) {
                st.timer_at = Some(d);
                self.timer.notify_one();
            }
        }
    }

    fn check_group_id(group_id: &str) -> Result<(), GroupError> {
        if group_id.is_empty() || group_id.len() > MAX_GROUP_ID_BYTES {
            return Err(GroupError::InvalidGroupId);
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Classic protocol
    // -----------------------------------------------------------------------------------------

    /// JoinGroup.
    pub fn join_group(
        &self,
        group_id: &str,
        params: JoinParams,
    ) -> Result<Pending<JoinResponse>, GroupError> {
        Self::check_group_id(group_id)?;
        if params.protocols.len() > MAX_PROTOCOLS_PER_MEMBER
            || params
                .protocols
                .iter()
                .map(|(n, m)| n.len() + m.len())
                .sum::<usize>()
                > MAX_MEMBER_METADATA_BYTES
        {
            return Err(GroupError::InvalidRequest(
                "protocol metadata exceeds the coordinator's bound".into(),
            ));
        }
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::NotCoordinator);
        }
        self.acquire(&mut st, group_id)?;
        let unknown_member = params.member_id.is_empty();
        let entry = match st.groups.get_mut(group_id) {
            Some(e) => e,
            None if unknown_member => st
                .groups
                .entry(group_id.to_string())
                .or_insert_with(|| GroupEntry::classic(group_id)),
            None => return Err(GroupError::UnknownMemberId),
        };
        let group = classic_or_convert(entry)?;
        let client_id = params.client_id.clone();
        let result = group.join(params, &self.config.classic, Instant::now(), || {
            format!("{client_id}-{}", Uuid::new_v4())
        });
        self.after_change(&mut st, group_id);
        result
    }

    /// SyncGroup.
    #[allow(clippy::too_many_arguments)]
    pub fn sync_group(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> Result<Pending<SyncResponse>, GroupError> {
        Self::check_group_id(group_id)?;
        if assignments
            .iter()
            .any(|(_, a)| a.len() > MAX_MEMBER_ASSIGNMENT_BYTES)
        {
            return Err(GroupError::InvalidRequest(
                "assignment exceeds the coordinator's bound".into(),
            ));
        }
        let mut st = self.state.lock();
        if st.shut_down {
            // The timer task has already answered parked requests; nothing would answer this.
            return Err(GroupError::NotCoordinator);
        }
        self.acquire(&mut st, group_id)?;
        let group = classic_mut(&mut st, group_id)?;
        let r = group.sync(
            member_id,
            group_instance_id,
            generation_id,
            protocol_type,
            protocol_name,
            assignments,
            Instant::now(),
        );
        self.after_change(&mut st, group_id);
        r
    }

    /// Heartbeat.
    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        Self::check_group_id(group_id)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let group = classic_mut(&mut st, group_id)?;
        let r = group.heartbeat(member_id, group_instance_id, generation_id, Instant::now());
        self.after_change(&mut st, group_id);
        r
    }

    /// LeaveGroup: one result per (member id, instance id).
    pub fn leave_group(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        Self::check_group_id(group_id)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let group = classic_mut(&mut st, group_id)?;
        let now = Instant::now();
        let results = members
            .iter()
            .map(|(m, i)| group.leave(m, i.as_deref(), &self.config.classic, now))
            .collect();
        self.after_change(&mut st, group_id);
        Ok(results)
    }

    // -----------------------------------------------------------------------------------------
    // KIP-848
    // -----------------------------------------------------------------------------------------

    /// ConsumerGroupHeartbeat.
    pub fn consumer_heartbeat(
        &self,
        group_id: &str,
        params: HeartbeatParams,
    ) -> Result<HeartbeatResult, GroupError> {
        if group_id.is_empty() || group_id.len() > MAX_GROUP_ID_BYTES {
            return Err(GroupError::InvalidRequest("group id is invalid".into()));
        }
        if params
            .subscribed_topic_names
            .as_ref()
            .is_some_and(|t| t.len() > MAX_SUBSCRIBED_TOPICS)
        {
            return Err(GroupError::InvalidRequest(
                "too many subscribed topics".into(),
            ));
        }
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::NotCoordinator);
        }
        self.acquire(&mut st, group_id)?;
        let joining = params.member_epoch == 0;
        let entry = match st.groups.get_mut(group_id) {
            Some(e) => e,
            None if joining => st.groups.entry(group_id.to_string()).or_insert(GroupEntry {
                kind: GroupKind::Consumer(ConsumerGroup::new(group_id.to_string(), 0)),
                offsets: BTreeMap::new(),
                pending_txn: BTreeMap::new(),
                persisted: HashMap::new(),
            }),
            None => return Err(GroupError::UnknownMemberId),
        };
        if let GroupKind::Classic(c) = &entry.kind {
            if !c.is_empty() {
                return Err(GroupError::GroupIdNotFound);
            }
            // An empty classic group (offsets only) becomes a consumer group, keeping its
            // offsets, as Kafka's online upgrade of empty groups does.
            let epoch = c.generation_id.max(0);
            entry.kind = GroupKind::Consumer(ConsumerGroup::new(group_id.to_string(), epoch));
        }
        let GroupKind::Consumer(group) = &mut entry.kind else {
            return Err(GroupError::GroupIdNotFound);
        };
        let replicas = &self.replicas;
        let topics = |name: &str| replicas.topic(name).map(|t| (t.id, t.partitions));
        let all_topics = || replicas.topics().into_iter().map(|t| t.name).collect();
        let r = group.heartbeat(
            params,
            &topics,
            &all_topics,
            &self.config.consumer,
            Instant::now(),
            || Uuid::new_v4().to_string(),
        );
        self.after_change(&mut st, group_id);
        r
    }

    /// Resolves a topic id to its name (the KIP-848 assignment names topics by id).
    pub fn topic_name(&self, id: Uuid) -> Option<String> {
        self.replicas.topic_name_by_id(id)
    }

    // -----------------------------------------------------------------------------------------
    // Offsets
    // -----------------------------------------------------------------------------------------

    /// OffsetCommit: validates the committer, writes the offsets, applies them, and answers
    /// once the offsets partition's high watermark has passed them (every in-sync replica
    /// has them, so they survive the coordinator's failure). Returns one error code per
    /// partition, in request order.
    pub async fn commit_offsets(
        &self,
        group_id: &str,
        who: &Committer,
        partitions: Vec<CommitPartition>,
    ) -> Vec<i16> {
        self.commit(group_id, who, partitions, None).await
    }

    /// OffsetCommit, or with `txn` TxnOffsetCommit: the offsets are then written as that
    /// producer's transactional batch and kept pending for the group.
    async fn commit(
        &self,
        group_id: &str,
        who: &Committer,
        partitions: Vec<CommitPartition>,
        txn: Option<TxnProducer>,
    ) -> Vec<i16> {
        let (codes, written) = self.commit_offsets_now(group_id, who, partitions, txn);
        match self.wait_committed(written).await {
            Ok(()) => codes,
            Err(e) => codes
                .into_iter()
                .map(|c| if c == 0 { e.error_code() } else { c })
                .collect(),
        }
    }

    /// Waits until a coordinator write is on every in-sync replica, for at most
    /// `offsets.commit.timeout.ms`.
    async fn wait_committed(&self, written: Option<Written>) -> Result<(), GroupError> {
        let Some(w) = written else {
            return Ok(());
        };
        let timeout =
            std::time::Duration::from_millis(self.config.offsets_commit_timeout_ms as u64);
        self.store.wait_committed(&w, timeout).await
    }

    /// The part of OffsetCommit (and TxnOffsetCommit) done under the coordinator's lock.
    fn commit_offsets_now(
        &self,
        group_id: &str,
        who: &Committer,
        partitions: Vec<CommitPartition>,
        txn: Option<TxnProducer>,
    ) -> (Vec<i16>, Option<Written>) {
        let fail = |e: GroupError, n: usize| (vec![e.error_code(); n], None);
        if let Err(e) = Self::check_group_id(group_id) {
            return fail(e, partitions.len());
        }
        let mut st = self.state.lock();
        if let Err(e) = self.acquire(&mut st, group_id) {
            return fail(e, partitions.len());
        }
        if let Err(e) = self.validate_commit(&mut st, group_id, who) {
            return fail(e, partitions.len());
        }
        let now = now_ms();
        let mut codes = Vec::with_capacity(partitions.len());
        let mut records: Vec<Record> = Vec::new();
        let mut accepted = Vec::new();
        for p in partitions {
            let code = self.check_commit_partition(&p);
            if code == 0 {
                let v = OffsetValue {
                    offset: p.offset,
                    leader_epoch: p.leader_epoch,
                    metadata: p.metadata.unwrap_or_default(),
                    commit_timestamp_ms: now,
                };
                records.push((
                    records::offset_commit_key(group_id, &p.topic, p.partition),
                    Some(records::offset_commit_value(&v)),
                ));
                accepted.push(((p.topic, p.partition), v));
            }
            codes.push(code);
        }
        let appended = match txn {
            None => self.store.append(group_id, records),
            Some(p) => self.store.append_transactional(group_id, p, records),
        };
        let written = match appended {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(group = group_id, error = %e, "offset commit not written");
                let code = e.error_code();
                let codes = codes
                    .iter()
                    .map(|c| if *c == 0 { code } else { *c })
                    .collect();
                return (codes, None);
            }
        };
        if let (Some(entry), Some(w)) = (st.groups.get_mut(group_id), &written) {
            let target = match txn {
                None => &mut entry.offsets,
                Some(p) => entry.pending_txn.entry(p.producer_id).or_default(),
            };
            // One batch: record i sits at first_offset + i.
            for ((key, value), record_offset) in accepted.into_iter().zip(w.first_offset..) {
                target.insert(
                    key,
                    StoredOffset {
                        value,
                        record_offset,
                    },
                );
            }
        }
        (codes, written)
    }

    fn check_commit_partition(&self, p: &CommitPartition) -> i16 {
        match self.replicas.topic(&p.topic) {
            Some(t) if p.partition >= 0 && p.partition < t.partitions => {}
            _ => return GroupError::UnknownTopicOrPartition.error_code(),
        }
        if p.metadata
            .as_ref()
            .is_some_and(|m| m.len() > self.config.offset_metadata_max_bytes)
        {
            return GroupError::OffsetMetadataTooLarge.error_code();
        }
        0
    }

    fn validate_commit(
        &self,
        st: &mut State,
        group_id: &str,
        who: &Committer,
    ) -> Result<(), GroupError> {
        let entry = match st.groups.get_mut(group_id) {
            Some(e) => e,
            None if who.generation_or_epoch < 0 => {
                // A simple consumer or the admin client: Kafka creates an empty classic group.
                st.groups
                    .entry(group_id.to_string())
                    .or_insert_with(|| GroupEntry::classic(group_id))
            }
            None if who.api_version >= 9 && !who.transactional => {
                return Err(GroupError::GroupIdNotFound)
            }
            None => return Err(GroupError::IllegalGeneration),
        };
        match &entry.kind {
            GroupKind::Classic(g) => g.validate_offset_commit(
                &who.member_id,
                who.group_instance_id.as_deref(),
                who.generation_or_epoch,
                who.transactional,
            ),
            // Kafka's TxnOffsetCommit answers a stale member epoch ILLEGAL_GENERATION
            // (OffsetMetadataManager.validateTransactionalOffsetCommit).
            GroupKind::Consumer(g) => g
                .validate_offset_commit(&who.member_id, who.generation_or_epoch)
                .map_err(|e| match e {
                    GroupError::StaleMemberEpoch if who.transactional => {
                        GroupError::IllegalGeneration
                    }
                    e => e,
                }),
        }
    }

    /// OffsetFetch for one group. `topics: None` means every committed partition. With a
    /// member (v9, KIP-848), its epoch is checked. Unknown partitions read offset -1. With
    /// `require_stable` (v7+), a partition with transactional offsets still pending answers
    /// UNSTABLE_OFFSET_COMMIT, and the client asks again (Kafka's
    /// `OffsetMetadataManager.fetchOffsets`).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        member: Option<(&str, i32)>,
        topics: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
    ) -> Result<FetchedOffsets, GroupError> {
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let entry = st.groups.get(group_id);
        if let (
            Some((id, epoch)),
            Some(GroupEntry {
                kind: GroupKind::Consumer(g),
                ..
            }),
        ) = (member, entry)
        {
            if !id.is_empty() || epoch >= 0 {
                g.validate_offset_fetch(id, epoch)?;
            }
        }
        let lookup = |t: &str, p: i32| {
            let key = (t.to_string(), p);
            match entry {
                Some(e) if require_stable && e.has_pending_txn_offset(&key) => {
                    Err(GroupError::UnstableOffsetCommit)
                }
                Some(e) => Ok(e.offsets.get(&key).map(|o| o.value.clone())),
                None => Ok(None),
            }
        };
        Ok(match topics {
            Some(list) => list
                .into_iter()
                .map(|(t, ps)| {
                    let parts = ps.into_iter().map(|p| (p, lookup(&t, p))).collect();
                    (t, parts)
                })
                .collect(),
            None => {
                type Found = Result<Option<OffsetValue>, GroupError>;
                let mut by_topic: BTreeMap<String, Vec<(i32, Found)>> = BTreeMap::new();
                if let Some(e) = entry {
                    for (t, p) in e.offsets.keys() {
                        by_topic
                            .entry(t.clone())
                            .or_default()
                            .push((*p, lookup(t, *p)));
                    }
                }
                by_topic.into_iter().collect()
            }
        })
    }

    /// OffsetDelete: removes offsets of topics the group no longer reads. Per-partition
    /// codes in request order, once the tombstones are on every in-sync replica.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<i16>, GroupError> {
        let (codes, written) = self.delete_offsets_now(group_id, partitions)?;
        self.wait_committed(written).await?;
        Ok(codes)
    }

    fn delete_offsets_now(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<(Vec<i16>, Option<Written>), GroupError> {
        Self::check_group_id(group_id)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let entry = st
            .groups
            .get_mut(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        let subscribed: Option<BTreeSet<String>> = match &entry.kind {
            GroupKind::Classic(g) if g.state == ClassicState::Dead => {
                return Err(GroupError::GroupIdNotFound)
            }
            GroupKind::Classic(g) if g.is_empty() => Some(BTreeSet::new()),
            GroupKind::Classic(g) => match g.subscribed_topics() {
                Some(t) => Some(t.into_iter().collect()),
                // Kafka refuses OffsetDelete on a non-empty group whose subscriptions it
                // cannot read.
                None => return Err(GroupError::NonEmptyGroup),
            },
            GroupKind::Consumer(g) => Some(g.subscribed_topics()),
        };
        let subscribed = subscribed.unwrap_or_default();
        let mut codes = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        let mut removed = Vec::new();
        for (t, p) in partitions {
            if subscribed.contains(t) {
                codes.push(GroupError::GroupSubscribedToTopic.error_code());
                continue;
            }
            // Kafka writes the tombstone for a pending transactional offset too; it drops the
            // pending one, so a later COMMIT does not bring the offset back.
            let key = (t.clone(), *p);
            if entry.offsets.contains_key(&key) || entry.has_pending_txn_offset(&key) {
                records.push((records::offset_commit_key(group_id, t, *p), None));
                removed.push(key);
            }
            codes.push(0);
        }
        let written = self.store.append(group_id, records)?;
        for k in removed {
            entry.remove_offset(&k);
        }
        Ok((codes, written))
    }

    // -----------------------------------------------------------------------------------------
    // Administration
    // -----------------------------------------------------------------------------------------

    /// DescribeGroups for one group; `None` for an unknown group (Kafka answers it as Dead).
    pub fn describe(&self, group_id: &str) -> Result<Option<GroupDescription>, GroupError> {
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let Some(entry) = st.groups.get(group_id) else {
            return Ok(None);
        };
        Ok(Some(match &entry.kind {
            GroupKind::Classic(g) => {
                let protocol = g.protocol_name.clone().unwrap_or_default();
                let stable = g.state == ClassicState::Stable;
                GroupDescription {
                    state: g.state.as_str().into(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    protocol_data: if stable {
                        protocol.clone()
                    } else {
                        String::new()
                    },
                    members: g
                        .members
                        .iter()
                        .map(|m| MemberDescription {
                            member_id: m.member_id.clone(),
                            group_instance_id: m.group_instance_id.clone(),
                            client_id: m.client_id.clone(),
                            client_host: m.client_host.clone(),
                            metadata: if stable {
                                m.metadata(&protocol)
                            } else {
                                Bytes::new()
                            },
                            assignment: if stable {
                                m.assignment.clone()
                            } else {
                                Bytes::new()
                            },
                        })
                        .collect(),
                }
            }
            GroupKind::Consumer(g) => GroupDescription {
                state: g.state_str().into(),
                protocol_type: "consumer".into(),
                protocol_data: String::new(),
                members: g
                    .members
                    .values()
                    .map(|m| {
                        let assignment: Vec<(String, Vec<i32>)> = m
                            .assigned
                            .iter()
                            .filter_map(|(id, ps)| {
                                Some((self.topic_name(*id)?, ps.iter().copied().collect()))
                            })
                            .collect();
                        MemberDescription {
                            member_id: m.member_id.clone(),
                            group_instance_id: m.instance_id.clone(),
                            client_id: m.client_id.clone(),
                            client_host: m.client_host.clone(),
                            metadata: consumer_protocol::encode_subscription(&m.resolved_topics),
                            assignment: consumer_protocol::encode_assignment(&assignment),
                        }
                    })
                    .collect(),
            },
        }))
    }

    /// ConsumerGroupDescribe for one group: GROUP_ID_NOT_FOUND unless it is a KIP-848 group
    /// (the Java admin then falls back to DescribeGroups, as against Kafka).
    pub fn describe_consumer_group(
        &self,
        group_id: &str,
    ) -> Result<ConsumerGroupDescription, GroupError> {
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let Some(GroupEntry {
            kind: GroupKind::Consumer(g),
            ..
        }) = st.groups.get(group_id)
        else {
            return Err(GroupError::GroupIdNotFound);
        };
        Ok(ConsumerGroupDescription {
            state: g.state_str().into(),
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            assignor: g
                .members
                .values()
                .find_map(|m| m.server_assignor.clone())
                .unwrap_or_else(|| "uniform".into()),
            members: g
                .members
                .values()
                .map(|m| {
                    let target = g.target.get(&m.member_id).cloned().unwrap_or_default();
                    (m.clone(), target)
                })
                .collect(),
        })
    }

    /// Runs `f` over the groups this node coordinates (their partitions loaded first, as
    /// ListGroups does), under the coordinator's lock: the admin state views read the groups
    /// where they live instead of keeping a copy. `f` must not block.
    pub fn inspect<R>(&self, f: impl FnOnce(&HashMap<String, GroupEntry>) -> R) -> R {
        let mut st = self.state.lock();
        self.acquire_all(&mut st);
        f(&st.groups)
    }

    /// ListGroups, filtered by state and type names (case-insensitive; empty = all). In a
    /// cluster: the groups this node coordinates, as in Kafka (the admin client asks every
    /// broker).
    pub fn list(&self, states: &[String], types: &[String]) -> Vec<ListedGroup> {
        let mut st = self.state.lock();
        self.acquire_all(&mut st);
        let mut out: Vec<ListedGroup> = st
            .groups
            .iter()
            .filter(
                |(_, e)| !matches!(&e.kind, GroupKind::Classic(g) if g.state == ClassicState::Dead),
            )
            .filter(|(_, e)| {
                states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(e.state_str()))
            })
            .filter(|(_, e)| {
                types.is_empty() || types.iter().any(|t| t.eq_ignore_ascii_case(e.type_str()))
            })
            .map(|(id, e)| ListedGroup {
                group_id: id.clone(),
                protocol_type: e.protocol_type(),
                state: e.state_str().into(),
                group_type: e.type_str().into(),
            })
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// The groups held in memory, for `/metrics`. Unlike [`Self::list`] it loads nothing:
    /// a scrape must not change what the node holds.
    pub fn counts(&self) -> GroupCounts {
        let st = self.state.lock();
        let mut out = GroupCounts::default();
        for e in st.groups.values() {
            // Each completed rebalance is a new classic generation or consumer group epoch.
            let rebalances = match &e.kind {
                GroupKind::Classic(g) if g.state == ClassicState::Dead => continue,
                GroupKind::Classic(g) => g.generation_id,
                GroupKind::Consumer(g) => g.group_epoch,
            };
            *out.by_state
                .entry((e.type_str(), e.state_str()))
                .or_insert(0) += 1;
            *out.rebalances.entry(e.type_str()).or_insert(0) += rebalances.max(0) as u64;
        }
        out
    }

    /// DeleteGroups for one group: only empty groups; their offsets go too. Answered once
    /// the tombstones are on every in-sync replica.
    pub async fn delete_group(&self, group_id: &str) -> Result<(), GroupError> {
        let written = self.delete_group_now(group_id)?;
        self.wait_committed(written).await
    }

    fn delete_group_now(&self, group_id: &str) -> Result<Option<Written>, GroupError> {
        Self::check_group_id(group_id)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let entry = st
            .groups
            .get_mut(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        if let GroupKind::Classic(g) = &entry.kind {
            if g.state == ClassicState::Dead {
                return Err(GroupError::GroupIdNotFound);
            }
        }
        if !entry.is_empty() {
            return Err(GroupError::NonEmptyGroup);
        }
        // Committed offsets and pending transactional ones alike get a tombstone (Kafka's
        // `OffsetMetadataManager.deleteAllOffsets`), one per partition.
        let partitions: BTreeSet<&(String, i32)> = entry
            .offsets
            .keys()
            .chain(entry.pending_txn.values().flat_map(|o| o.keys()))
            .collect();
        let mut records: Vec<Record> = partitions
            .into_iter()
            .map(|(t, p)| (records::offset_commit_key(group_id, t, *p), None))
            .collect();
        // The group's own record, and every KIP-848 record written for it (its target
        // assignment epoch, or records left from before a downgrade to the classic
        // protocol): any one left would bring the group back at the next replay.
        let mut keys: BTreeSet<Bytes> = entry.persisted.keys().cloned().collect();
        keys.insert(match &entry.kind {
            GroupKind::Classic(_) => records::group_metadata_key(group_id),
            GroupKind::Consumer(_) => records::consumer_group_metadata_key(group_id),
        });
        records.extend(keys.into_iter().map(|k| (k, None)));
        let written = self.store.append(group_id, records)?;
        if let Some(mut e) = st.groups.remove(group_id) {
            if let GroupKind::Classic(g) = &mut e.kind {
                g.mark_dead();
            }
        }
        Ok(written)
    }

    /// Drops offsets of empty groups older than `offsets.retention.minutes` (Kafka's
    /// offset expiration), writing tombstones.
    fn expire_offsets(&self, st: &mut State) {
        let now = now_ms();
        let retention = self.config.offsets_retention_ms;
        let mut expired_groups = Vec::new();
        for (id, e) in st.groups.iter_mut() {
            if !e.is_empty() {
                continue;
            }
            let old: Vec<(String, i32)> = e
                .offsets
                .iter()
                // Kafka keeps an offset while a transaction's offset for it is pending.
                .filter(|(k, v)| {
                    now - v.value.commit_timestamp_ms >= retention && !e.has_pending_txn_offset(k)
                })
                .map(|(k, _)| k.clone())
                .collect();
            if old.is_empty() {
                continue;
            }
            let records = old
                .iter()
                .map(|(t, p)| (records::offset_commit_key(id, t, *p), None))
                .collect();
            if self.store.append(id, records).is_ok() {
                for k in old {
                    e.offsets.remove(&k);
                }
                if e.offsets.is_empty() {
                    expired_groups.push(id.clone());
                }
            }
        }
        for id in expired_groups {
            tracing::info!(group = %id, "offsets expired");
        }
    }

    // -----------------------------------------------------------------------------------------
    // Timers and shutdown
    // -----------------------------------------------------------------------------------------

    /// Runs every passed deadline; returns the next one.
    fn tick(&self, now: Instant) -> Option<Instant> {
        let mut st = self.state.lock();
        self.acquire_all(&mut st);
        let ids: Vec<String> = st
            .groups
            .iter()
            .filter(|(_, e)| e.next_deadline().is_some_and(|d| d <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            if let Some(e) = st.groups.get_mut(id) {
                match &mut e.kind {
                    GroupKind::Classic(g) => g.on_deadlines(&self.config.classic, now),
                    GroupKind::Consumer(g) => g.on_deadlines(now),
                }
            }
            self.after_change(&mut st, id);
        }
        let next = st.groups.values().filter_map(|e| e.next_deadline()).min();
        st.timer_at = next;
        next
    }

    /// The timer task: session timeouts, rebalance timeouts, join and sync deadlines, and
    /// periodic offset expiration. At shutdown, every parked JoinGroup/SyncGroup is answered
    /// NOT_COORDINATOR so that connections can finish.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let expiry_period = std::time::Duration::from_secs(600);
        let mut next_expiry = Instant::now() + expiry_period;
        // Each applied metadata image may move leadership of offsets partitions: the tick
        // that follows loads or drops their groups.
        let mut images = self.replicas.metadata_applied();
        loop {
            let now = Instant::now();
            let next = self.tick(now).unwrap_or(now + IDLE_TIMER);
            if now >= next_expiry {
                let mut st = self.state.lock();
                self.expire_offsets(&mut st);
                next_expiry = now + expiry_period;
            }
            // Deadlines are cleared when they fire, so `next` is in the future; the floor
            // only guards against a spin should one ever be left behind.
            let wake = next
                .min(next_expiry)
                .max(now + std::time::Duration::from_millis(1));
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = self.timer.notified() => {}
                r = images.changed() => if r.is_err() { break },
                _ = shutdown.changed() => break,
            }
        }
        self.shutdown();
    }

    /// Answers every parked request and refuses new joins.
    pub fn shutdown(&self) {
        let mut st = self.state.lock();
        st.shut_down = true;
        for e in st.groups.values_mut() {
            if let GroupKind::Classic(g) = &mut e.kind {
                g.fail_waiters(GroupError::NotCoordinator.error_code());
            }
        }
    }
}

/// The classic group for sync/heartbeat/leave; an unknown group is UNKNOWN_MEMBER_ID (the
/// Java client then rejoins), a KIP-848 group is GROUP_ID_NOT_FOUND, as in Kafka.
fn classic_mut<'a>(st: &'a mut State, group_id: &str) -> Result<&'a mut ClassicGroup, GroupError> {
    match st.groups.get_mut(group_id).map(|e| &mut e.kind) {
        Some(GroupKind::Classic(g)) => Ok(g),
        Some(GroupKind::Consumer(_)) => Err(GroupError::GroupIdNotFound),
        None => Err(GroupError::UnknownMemberId),
    }
}

/// The classic group of an entry, converting an empty KIP-848 group (downgrade).
fn classic_or_convert(entry: &mut GroupEntry) -> Result<&mut ClassicGroup, GroupError> {
    if let GroupKind::Consumer(c) = &entry.kind {
        if !c.members.is_empty() {
            return Err(GroupError::GroupIdNotFound);
        }
        entry.kind = GroupKind::Classic(ClassicGroup::new(c.group_id.clone()));
    }
    match &mut entry.kind {
        GroupKind::Classic(g) => Ok(g),
        GroupKind::Consumer(_) => Err(GroupError::GroupIdNotFound),
    }
}

/// The records to write to go from `persisted` to `desired`: changed or new values, and
/// tombstones for keys no longer desired. Keys in a stable order (a write is one batch).
fn record_changes(
    persisted: &HashMap<Bytes, Bytes>,
    desired: &HashMap<Bytes, Bytes>,
) -> Vec<Record> {
    let mut out: Vec<Record> = desired
        .iter()
        .filter(|(k, v)| persisted.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .chain(
            persisted
                .keys()
                .filter(|k| !desired.contains_key(*k))
                .map(|k| (k.clone(), None)),
        )
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn classic_record(g: &ClassicGroup) -> Bytes {
    let protocol = g.protocol_name.clone().unwrap_or_default();
    let blobs: usize = g
        .members
        .iter()
        .map(|m| m.metadata(&protocol).len() + m.assignment.len())
        .sum();
    let with_blobs = blobs <= MAX_GROUP_RECORD_MEMBER_BYTES;
    records::group_metadata_value(&records::GroupMetadataValue {
        protocol_type: g.protocol_type.clone().unwrap_or_default(),
        generation: g.generation_id,
        protocol: g.protocol_name.clone(),
        leader: g.leader_id.clone(),
        current_state_timestamp_ms: now_ms(),
        members: g
            .members
            .iter()
            .map(|m| records::MemberRecord {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                subscription: if with_blobs {
                    m.metadata(&protocol)
                } else {
                    Bytes::new()
                },
                assignment: if with_blobs {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect(),
    })
}

/// Reads offsets partition `index` back: its groups with their members, committed offsets
/// and the offsets of transactions still open. Returns them and the number of records read.
fn load_partition(
    store: &OffsetsStore,
    index: i32,
    consumer_session: std::time::Duration,
) -> Result<(HashMap<String, GroupEntry>, usize), GroupError> {
    let mut groups: HashMap<String, GroupEntry> = HashMap::new();
    let n = store.replay_partition(index, &mut |item| match item {
        Replayed::Record {
            key,
            value,
            offset,
            txn,
        } => replay_record(&mut groups, key, value, offset, txn, consumer_session),
        // Every group read here lives on this partition, where the marker is.
        Replayed::Marker {
            producer_id,
            commit,
        } => {
            for e in groups.values_mut() {
                e.end_txn(producer_id, commit);
            }
        }
    })?;
    note_persisted(&mut groups);
    Ok((groups, n))
}

/// Applies one replayed record (at log offset `offset`, in a transaction of producer `txn`
/// if set) to the groups being rebuilt.
fn replay_record(
    groups: &mut HashMap<String, GroupEntry>,
    key: RecordKey,
    value: Option<&[u8]>,
    offset: i64,
    txn: Option<i64>,
    consumer_session: std::time::Duration,
) {
    match key {
        RecordKey::OffsetCommit {
            group,
            topic,
            partition,
        } => match value {
            Some(v) => match records::decode_offset_value(v) {
                Ok(value) => {
                    let e = groups
                        .entry(group.clone())
                        .or_insert_with(|| GroupEntry::classic(&group));
                    let stored = StoredOffset {
                        value,
                        record_offset: offset,
                    };
                    let target = match txn {
                        None => &mut e.offsets,
                        Some(producer_id) => e.pending_txn.entry(producer_id).or_default(),
                    };
                    target.insert((topic, partition), stored);
                }
                Err(e) => tracing::warn!(error = %e, "skipping offset record"),
            },
            None => {
                if let Some(e) = groups.get_mut(&group) {
                    e.remove_offset(&(topic, partition));
                }
            }
        },
        RecordKey::GroupMetadata { group } => match value {
            Some(v) => match records::decode_group_metadata_value(v) {
                Ok(meta) => {
                    let e = groups
                        .entry(group.clone())
                        .or_insert_with(|| GroupEntry::classic(&group));
                    e.kind = GroupKind::Classic(ClassicGroup::from_record(
                        group.clone(),
                        meta,
                        Instant::now(),
                    ));
                }
                Err(e) => tracing::warn!(error = %e, "skipping group record"),
            },
            None => {
                groups.remove(&group);
            }
        },
        RecordKey::ConsumerGroupMetadata { group } => match value {
            Some(v) => match records::decode_consumer_group_metadata_value(v) {
                Ok(epoch) => consumer_for_replay(groups, &group).group_epoch = epoch,
                Err(e) => tracing::warn!(error = %e, "skipping consumer group record"),
            },
            None => {
                groups.remove(&group);
            }
        },
        RecordKey::ConsumerMemberMetadata { group, member } => match value {
            Some(v) => match records::decode_consumer_member_metadata_value(v) {
                Ok(meta) => consumer_for_replay(groups, &group).restore_member_metadata(
                    &member,
                    meta,
                    Instant::now() + consumer_session,
                ),
                Err(e) => tracing::warn!(error = %e, "skipping consumer member record"),
            },
            None => {
                if let Some(GroupKind::Consumer(g)) = groups.get_mut(&group).map(|e| &mut e.kind) {
                    g.restore_member_removed(&member);
                }
            }
        },
        RecordKey::CurrentMemberAssignment { group, member } => {
            if let Some(v) = value {
                match records::decode_current_member_assignment_value(v) {
                    Ok(a) => consumer_for_replay(groups, &group).restore_member_assignment(
                        &member,
                        a,
                        Instant::now() + consumer_session,
                    ),
                    Err(e) => tracing::warn!(error = %e, "skipping member assignment record"),
                }
            }
        }
        RecordKey::TargetAssignmentMember { group, member } => match value {
            Some(v) => match records::decode_target_assignment_member_value(v) {
                Ok(t) => {
                    consumer_for_replay(groups, &group).target.insert(member, t);
                }
                Err(e) => tracing::warn!(error = %e, "skipping target assignment record"),
            },
            None => {
                if let Some(GroupKind::Consumer(g)) = groups.get_mut(&group).map(|e| &mut e.kind) {
                    g.target.remove(&member);
                }
            }
        },
        RecordKey::TargetAssignmentMetadata { group } => {
            if let Some(v) = value {
                match records::decode_target_assignment_metadata_value(v) {
                    Ok(epoch) => consumer_for_replay(groups, &group).assignment_epoch = epoch,
                    Err(e) => tracing::warn!(error = %e, "skipping target assignment record"),
                }
            }
        }
        RecordKey::Other(_) => {}
    }
}

/// The KIP-848 group a replayed record belongs to: created if new, converted (keeping its
/// offsets) if it was only an offsets holder so far.
fn consumer_for_replay<'a>(
    groups: &'a mut HashMap<String, GroupEntry>,
    group: &str,
) -> &'a mut ConsumerGroup {
    let e = groups
        .entry(group.to_string())
        .or_insert_with(|| GroupEntry::classic(group));
    if !matches!(e.kind, GroupKind::Consumer(_)) {
        e.kind = GroupKind::Consumer(ConsumerGroup::new(group.to_string(), 0));
    }
    match &mut e.kind {
        GroupKind::Consumer(g) => g,
        GroupKind::Classic(_) => unreachable!("converted just above"),
    }
}

/// After replay: what each KIP-848 group's records are now, so that the next change writes
/// only differences (and tombstones for members that go).
fn note_persisted(groups: &mut HashMap<String, GroupEntry>) {
    for e in groups.values_mut() {
        if let GroupKind::Consumer(g) = &e.kind {
            e.persisted = g.records().into_iter().collect();
        }
    }
}

#[cfg(test)]
mod tests;
