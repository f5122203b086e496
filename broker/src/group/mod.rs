//! The group coordinator: consumer groups (classic protocol and KIP-848) and their committed
//! offsets.
//!
//! A node coordinates the groups whose `__consumer_offsets` partition it leads (Kafka's
//! `GroupCoordinator`; FindCoordinator answers with that partition's leader). It keeps those
//! groups in memory behind one short `parking_lot::Mutex` (never held across an await).
//! Every change that must survive a restart or a failover — a committed offset, a classic
//! generation, a consumer group epoch, a deletion — is appended to `__consumer_offsets`
//! ([`store`]) before the client sees success, and a node that becomes a partition's leader
//! replays it ([`loading`]). Members are not restored: after a move they rejoin.
//!
//! Time: JoinGroup and SyncGroup answers wait on `oneshot` channels completed by other
//! requests or by deadlines. One timer task ([`GroupCoordinator::run`]) sleeps until the
//! earliest deadline of any group and is woken when a request sets an earlier one.
//!
//! Modules: [`classic`] (JoinGroup/SyncGroup/Heartbeat/LeaveGroup state machine),
//! [`consumer`] (ConsumerGroupHeartbeat, reconciliation), [`assignors`] (the server-side
//! `uniform` and `range` assignors), [`offsets`] (OffsetCommit,
//! OffsetFetch, OffsetDelete, expiry), [`migration`] (online upgrade and downgrade between
//! the classic and KIP-848 protocols), [`loading`] (loading and unloading offsets
//! partitions), [`config`] (the coordinator's settings), [`records`] (the
//! `__consumer_offsets` record layout), [`store`] (append and replay),
//! [`consumer_protocol`] (the embedded consumer protocol blobs), [`txn`] (offsets committed
//! inside transactions, pending until the transaction's marker), [`streams`] (KIP-1071
//! streams groups, with [`streams_topology`] and [`streams_assignor`]).

pub mod assignors;
pub mod classic;
pub(crate) mod config;
pub mod consumer;
pub mod consumer_protocol;
mod loading;
pub mod migration;
mod offsets;
pub mod overrides;
pub mod records;
pub mod share;
pub mod share_offsets;
pub mod share_records;
pub mod store;
pub mod streams;
pub mod streams_assignor;
pub mod streams_records;
pub mod streams_topology;
pub mod txn;

pub use config::GroupConfig;

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
use self::share::{ShareGroup, ShareHeartbeatParams, ShareHeartbeatResult};
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
/// The group epoch and target assignment epoch of a new consumer, share or streams group:
/// Kafka 4.4's `ModernGroup` and `StreamsGroup` constructors start at group epoch 1 and
/// `TargetAssignmentMetadata.INITIAL` (assignment epoch 1, timestamp 0), so a first member
/// whose subscription is new moves the group to epoch 2, and one subscribed to nothing
/// leaves it at 1 and is answered member epoch 1.
pub const INITIAL_GROUP_EPOCH: i32 = 1;

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
    #[error("Group {0} is not a classic group.")]
    NotClassicGroup(String),
    #[error("Group {0} is not a share group.")]
    NotShareGroup(String),
    /// The session may not act on the group (ACLs, `api::auth_helper`).
    #[error("group authorization failed")]
    GroupAuthorizationFailed,
    /// The session may not describe the topic (ACLs).
    #[error("topic authorization failed")]
    TopicAuthorizationFailed,
    #[error("{0}")]
    StreamsInvalidTopology(String),
    #[error("{0}")]
    StreamsInvalidTopologyEpoch(String),
    #[error("Group {0} is not a streams group.")]
    NotStreamsGroup(String),
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
            GroupError::GroupIdNotFound
            | GroupError::NotClassicGroup(_)
            | GroupError::NotShareGroup(_) => ResponseError::GroupIdNotFound,
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
            GroupError::GroupAuthorizationFailed => ResponseError::GroupAuthorizationFailed,
            GroupError::TopicAuthorizationFailed => ResponseError::TopicAuthorizationFailed,
            GroupError::StreamsInvalidTopology(_) => ResponseError::StreamsInvalidTopology,
            GroupError::StreamsInvalidTopologyEpoch(_) => {
                ResponseError::StreamsInvalidTopologyEpoch
            }
            GroupError::NotStreamsGroup(_) => ResponseError::GroupIdNotFound,
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

/// What an offset's retention counts from (the base timestamp of Kafka's
/// `OffsetExpirationConditionImpl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RetentionBase {
    /// The offset's own commit.
    CommitTimestamp,
    /// A time shared by the group's offsets: when the group became Empty.
    Since(i64),
}

impl RetentionBase {
    fn of(self, v: &OffsetValue) -> i64 {
        match self {
            RetentionBase::CommitTimestamp => v.commit_timestamp_ms,
            RetentionBase::Since(ts) => ts,
        }
    }
}

/// Which protocol a group speaks.
#[derive(Debug)]
pub enum GroupKind {
    Classic(ClassicGroup),
    Consumer(ConsumerGroup),
    /// KIP-932: kept in memory only ([`share`]).
    Share(ShareGroup),
    /// KIP-1071: persisted as Kafka's streams records ([`streams_records`]).
    Streams(streams::StreamsGroup),
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
    /// KIP-848 and streams groups: the records last written for the group (key → value), so
    /// that only changes are written and a key no longer produced gets a tombstone.
    pub persisted: HashMap<Bytes, Bytes>,
}

impl GroupEntry {
    fn classic(group_id: &str) -> Self {
        Self::of(GroupKind::Classic(ClassicGroup::new(group_id.to_string())))
    }

    /// A new group of `kind`, without offsets or records written.
    fn of(kind: GroupKind) -> Self {
        GroupEntry {
            kind,
            offsets: BTreeMap::new(),
            pending_txn: BTreeMap::new(),
            persisted: HashMap::new(),
        }
    }

    fn is_empty(&self) -> bool {
        match &self.kind {
            GroupKind::Classic(g) => g.is_empty(),
            GroupKind::Consumer(g) => g.members.is_empty(),
            GroupKind::Share(g) => g.members.is_empty(),
            GroupKind::Streams(g) => g.members.is_empty(),
        }
    }

    /// What a committed offset's retention counts from, or `None` while the group's offsets
    /// do not expire (Kafka's `Group.offsetExpirationCondition`): a classic group with a
    /// protocol type counts from when it became Empty (from the commit for a record without
    /// that time), and while Stable with the consumer protocol expires only unsubscribed
    /// topics' offsets from their commit; in any other state nothing. A group without a
    /// protocol type (offsets only) and a KIP-848 group count from each commit.
    fn offset_retention_base(&self) -> Option<RetentionBase> {
        let GroupKind::Classic(g) = &self.kind else {
            return Some(RetentionBase::CommitTimestamp);
        };
        if g.protocol_type.is_none() {
            return Some(RetentionBase::CommitTimestamp);
        }
        match g.state {
            ClassicState::Empty => Some(
                g.current_state_timestamp_ms
                    .map_or(RetentionBase::CommitTimestamp, RetentionBase::Since),
            ),
            ClassicState::Stable if g.subscribed_topics().is_some() => {
                Some(RetentionBase::CommitTimestamp)
            }
            _ => None,
        }
    }

    /// Whether members consume `topic`, so its offsets stay (`Group.isSubscribedToTopic`).
    /// A classic group whose subscriptions cannot be read counts every topic as subscribed
    /// when it uses the consumer protocol type, and none otherwise; an empty one none.
    fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        match &self.kind {
            GroupKind::Classic(g) if g.members.is_empty() => false,
            GroupKind::Classic(g) => g.subscribed_topics().map_or_else(
                || g.protocol_type.as_deref() == Some("consumer"),
                |topics| topics.contains(topic),
            ),
            GroupKind::Consumer(g) => g.subscribed_topics().contains(topic),
            GroupKind::Share(g) => g.subscribed_topics().contains(topic),
            GroupKind::Streams(g) => g.subscribed_topics().contains(topic),
        }
    }

    /// The offsets past `offsets.retention.minutes`, and whether they are all of the group's
    /// (Kafka's `OffsetMetadataManager.cleanupExpiredOffsets`). An offset with a pending
    /// transactional offset stays, and a group with an open transaction is never counted as
    /// all expired. Kafka returns "all expired" for a group without committed offsets even
    /// then; Brook keeps such a group, whose pending offsets the marker still needs.
    fn expired_offsets(&self, now_ms: i64, retention_ms: i64) -> (Vec<(String, i32)>, bool) {
        let no_open_txn = self.pending_txn.is_empty();
        if self.offsets.is_empty() {
            return (Vec::new(), no_open_txn);
        }
        let Some(base) = self.offset_retention_base() else {
            return (Vec::new(), false);
        };
        let mut expired = Vec::new();
        for (k, v) in &self.offsets {
            if !self.is_subscribed_to_topic(&k.0)
                && now_ms - base.of(&v.value) >= retention_ms
                && !self.has_pending_txn_offset(k)
            {
                expired.push(k.clone());
            }
        }
        let all = expired.len() == self.offsets.len() && no_open_txn;
        (expired, all)
    }

    fn next_deadline(&self) -> Option<Instant> {
        match &self.kind {
            GroupKind::Classic(g) => g.next_deadline(),
            GroupKind::Consumer(g) => g.next_deadline(),
            GroupKind::Share(g) => g.next_deadline(),
            GroupKind::Streams(g) => g.next_deadline(),
        }
    }

    /// The state name Kafka reports.
    pub fn state_str(&self) -> &'static str {
        match &self.kind {
            GroupKind::Classic(g) => g.state.as_str(),
            GroupKind::Consumer(g) => g.state_str(),
            GroupKind::Share(g) => g.state_str(),
            GroupKind::Streams(g) => g.state_str(),
        }
    }

    /// "classic", "consumer", "share" or "streams" (ListGroups v5 group type).
    pub fn type_str(&self) -> &'static str {
        match &self.kind {
            GroupKind::Classic(_) => "classic",
            GroupKind::Consumer(_) => "consumer",
            GroupKind::Share(_) => "share",
            GroupKind::Streams(_) => "streams",
        }
    }

    /// The protocol type reported by ListGroups and DescribeGroups.
    pub fn protocol_type(&self) -> String {
        match &self.kind {
            GroupKind::Classic(g) => g.protocol_type.clone().unwrap_or_default(),
            GroupKind::Consumer(_) => "consumer".into(),
            GroupKind::Share(_) => "share".into(),
            GroupKind::Streams(_) => "streams".into(),
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

/// ShareGroupDescribe's view of a share group.
#[derive(Debug, Clone)]
pub struct ShareGroupDescription {
    pub state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: Vec<share::ShareMember>,
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
    /// Groups follow the leadership of their offsets partitions (a single node leads them
    /// all).
    store: OffsetsStore,
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
    /// Reads the config. Nothing is read back yet: each offsets partition is, when this node
    /// is found to lead it (see `acquire_partition`).
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
        Ok(GroupCoordinator {
            config,
            replicas,
            store,
            state: Mutex::new(State::default()),
            timer: Notify::new(),
        })
    }

    /// The coordinator's settings.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// A KIP-848 group's limits: the broker's, with the group's own
    /// `consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms` and
    /// `consumer.assignment.interval.ms` when set ([`overrides::group_timing`]).
    pub fn consumer_limits(&self, group_id: &str) -> ConsumerLimits {
        let mut limits = self.config.consumer;
        let configs = self.replicas.group_configs(group_id);
        if !configs.is_empty() {
            let defaults = (limits.session_timeout_ms, limits.heartbeat_interval_ms);
            let (session_ms, heartbeat_ms) =
                overrides::group_timing(&self.replicas.config, &configs, "consumer", defaults);
            limits.session_timeout_ms = session_ms;
            limits.heartbeat_interval_ms = heartbeat_ms;
            // Kafka's `GroupMetadataManager.consumerGroupAssignmentIntervalMs`: the group's
            // `consumer.assignment.interval.ms`, else the broker's.
            let interval = overrides::clamped(
                &self.replicas.config,
                &configs,
                "consumer.assignment.interval.ms",
            );
            if let Some(ms) = interval {
                limits.assignment_interval_ms = ms as i32;
            }
        }
        limits
    }

    /// A share group's limits: the broker's, with the group's own `share.session.timeout.ms`
    /// and `share.heartbeat.interval.ms` when set, read at each heartbeat as Kafka's
    /// `GroupMetadataManager.shareGroupHeartbeat` does.
    pub fn share_limits(&self, group_id: &str) -> share::ShareLimits {
        let mut limits = self.config.share;
        let configs = self.replicas.group_configs(group_id);
        if !configs.is_empty() {
            let defaults = (limits.session_timeout_ms, limits.heartbeat_interval_ms);
            let (session_ms, heartbeat_ms) =
                overrides::group_timing(&self.replicas.config, &configs, "share", defaults);
            limits.session_timeout_ms = session_ms;
            limits.heartbeat_interval_ms = heartbeat_ms;
        }
        limits
    }

    /// The session a KIP-848 member read back from the log starts with.
    fn consumer_session(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.config.consumer.session_timeout_ms as u64)
    }

    /// The session a share member read back from the log starts with.
    fn share_session(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.config.share.session_timeout_ms.max(0) as u64)
    }

    /// The session a streams member read back from the log starts with.
    fn streams_session(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.config.streams.session_timeout_ms.max(0) as u64)
    }

    /// Creates `__consumer_offsets` if needed (FindCoordinator does, as Kafka does).
    pub async fn ensure_offsets_topic(&self) -> Result<(), GroupError> {
        self.store.ensure_topic().await
    }

    /// Before a request that may write a group's records: creates `__consumer_offsets` if it
    /// does not exist yet, as FindCoordinator does, for clients that did not ask
    /// FindCoordinator first. A failure is left to the write, which answers
    /// COORDINATOR_NOT_AVAILABLE.
    pub async fn prepare_write(&self) {
        if self.replicas.topic(OFFSETS_TOPIC).is_none() {
            let _ = self.ensure_offsets_topic().await;
        }
    }

    /// The offsets partition that holds a group's records.
    pub fn offsets_partition_for(&self, group_id: &str) -> i32 {
        self.store.partition_for(group_id)
    }

    /// After a change to `group`: persist what must be, and make the timer see a new
    /// earlier deadline. Returns the write, for a caller that answers once it is committed;
    /// a failed append is logged, and the next change writes the difference again.
    fn after_change(&self, st: &mut State, group_id: &str) -> Option<Written> {
        match self.after_change_or_error(st, group_id) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(group = group_id, error = %e, "could not write group metadata");
                None
            }
        }
    }

    /// [`Self::after_change`] for a caller that answers a failed append itself.
    fn after_change_or_error(
        &self,
        st: &mut State,
        group_id: &str,
    ) -> Result<Option<Written>, GroupError> {
        let Some(entry) = st.groups.get_mut(group_id) else {
            return Ok(None);
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
            GroupKind::Streams(g) => {
                let desired: HashMap<Bytes, Bytes> = g.records().into_iter().collect();
                let write =
                    streams_records::kafka_order(record_changes(&entry.persisted, &desired));
                (write, Some(desired))
            }
            GroupKind::Share(g) => {
                let replicas = &self.replicas;
                let desired: HashMap<Bytes, Bytes> = g
                    .records(&|id| replicas.topic_name_by_id(id))
                    .into_iter()
                    .collect();
                (record_changes(&entry.persisted, &desired), Some(desired))
            }
            _ => (Vec::new(), None),
        };
        let mut written = Ok(None);
        if !write.is_empty() {
            written = self.store.append(group_id, write);
            // On failure `persisted` is kept as it was: the next change writes the
            // difference again.
            if let (Ok(_), Some(d)) = (&written, desired) {
                entry.persisted = d;
            }
        }
        if let Some(d) = entry.next_deadline() {
            if st.timer_at.is_none_or(|t| d < t) {
                st.timer_at = Some(d);
                self.timer.notify_one();
            }
        }
        written
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
        let created = !st.groups.contains_key(group_id);
        let entry = match st.groups.get_mut(group_id) {
            Some(e) => e,
            None if unknown_member => st
                .groups
                .entry(group_id.to_string())
                .or_insert_with(|| GroupEntry::classic(group_id)),
            None => return Err(GroupError::UnknownMemberId),
        };
        if matches!(&entry.kind, GroupKind::Consumer(c) if !c.members.is_empty()) {
            return self.classic_join_consumer_group(&mut st, group_id, params);
        }
        let converted = match &entry.kind {
            GroupKind::Consumer(c) => Some(c.clone()),
            _ => None,
        };
        let group = classic_or_convert(entry)?;
        let client_id = params.client_id.clone();
        let mut result = group.join(params, &self.config.classic, Instant::now(), || {
            format!("{client_id}-{}", Uuid::new_v4())
        });
        if created || converted.is_some() {
            if let Err(e) = self.write_new_classic_group(&mut st, group_id) {
                result = revert_new_classic_group(&mut st, group_id, converted, result, &e);
            }
        }
        self.after_change(&mut st, group_id);
        result
    }

    /// Kafka's `classicGroupJoinToClassicGroup` for a group its JoinGroup created, or took
    /// over from an empty KIP-848 group: whatever the join's outcome (MEMBER_ID_REQUIRED, a
    /// join parked for the initial rebalance, an error), one write of tombstones for the old
    /// group's records and `GroupCoordinatorRecordHelpers.newEmptyGroupMetadataRecord`, so
    /// that a coordinator that loads the partition finds the group, Empty. Not waited for;
    /// a failed append is returned, for the caller to revert the group.
    fn write_new_classic_group(&self, st: &mut State, group_id: &str) -> Result<(), GroupError> {
        let Some(entry) = st.groups.get_mut(group_id) else {
            return Ok(());
        };
        let GroupKind::Classic(g) = &entry.kind else {
            return Ok(());
        };
        let key = records::group_metadata_key(group_id);
        let mut write: Vec<Record> = entry
            .persisted
            .keys()
            .filter(|k| **k != key)
            .map(|k| (k.clone(), None))
            .collect();
        write.sort_by(|a, b| a.0.cmp(&b.0));
        let empty = records::GroupMetadataValue {
            protocol_type: String::new(),
            generation: 0,
            protocol: None,
            leader: None,
            current_state_timestamp_ms: g.current_state_timestamp_ms.unwrap_or(-1),
            members: Vec::new(),
        };
        write.push((key, Some(records::group_metadata_value(&empty))));
        if let Err(e) = self.store.append(group_id, write) {
            tracing::warn!(group = group_id, error = %e, "could not write the new group's empty metadata");
            return Err(e);
        }
        entry.persisted.clear();
        Ok(())
    }

    /// SyncGroup. The leader's assignment is answered, to every member, once the group's
    /// metadata record carrying it is committed (on every in-sync replica), so that a new
    /// coordinator reads back the generation members were told about; a failed or timed-out
    /// write answers them all the error and rebalances (Kafka's
    /// `classicGroupSyncToClassicGroup` through `CoordinatorRuntime`).
    #[allow(clippy::too_many_arguments)]
    pub async fn sync_group(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> Result<Pending<SyncResponse>, GroupError> {
        let (answer, stored) = self.sync_group_now(
            group_id,
            member_id,
            group_instance_id,
            generation_id,
            protocol_type,
            protocol_name,
            assignments,
        )?;
        if let Some(written) = stored {
            let committed = match written {
                Ok(w) => self.wait_committed(w).await,
                Err(e) => Err(e),
            };
            let mut st = self.state.lock();
            if let Some(GroupKind::Classic(g)) = st.groups.get_mut(group_id).map(|e| &mut e.kind) {
                g.complete_sync(
                    generation_id,
                    committed,
                    &self.config.classic,
                    Instant::now(),
                );
            }
            self.after_change(&mut st, group_id);
        }
        Ok(answer)
    }

    /// The part of SyncGroup done under the coordinator's lock; with the write of the
    /// leader's assignment, when this was the leader's SyncGroup.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn sync_group_now(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> Result<
        (
            Pending<SyncResponse>,
            Option<Result<Option<Written>, GroupError>>,
        ),
        GroupError,
    > {
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
        if let Some(GroupKind::Consumer(g)) = st.groups.get_mut(group_id).map(|e| &mut e.kind) {
            let topic_name = |id| self.replicas.topic_name_by_id(id);
            return g
                .classic_sync(
                    member_id,
                    group_instance_id,
                    generation_id,
                    protocol_type,
                    protocol_name,
                    &topic_name,
                    Instant::now(),
                )
                .map(|r| (Pending::Now(r), None));
        }
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
        // This was the leader's SyncGroup, whose assignment waits for its record.
        let storing = r.is_ok()
            && group.leader_id.as_deref() == Some(member_id)
            && group.storing_assignment(generation_id);
        let written = self.after_change_or_error(&mut st, group_id);
        if storing {
            return r.map(|answer| (answer, Some(written)));
        }
        if let Err(e) = written {
            tracing::warn!(group = group_id, error = %e, "could not write group metadata");
        }
        r.map(|answer| (answer, None))
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
        if let Some(GroupKind::Consumer(g)) = st.groups.get_mut(group_id).map(|e| &mut e.kind) {
            let r =
                g.classic_heartbeat(member_id, group_instance_id, generation_id, Instant::now());
            self.after_change(&mut st, group_id);
            return r;
        }
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
        if let Some(GroupKind::Consumer(g)) = st.groups.get_mut(group_id).map(|e| &mut e.kind) {
            let results: Vec<Result<(), GroupError>> = members
                .iter()
                .map(|(m, i)| g.classic_leave(m, i.as_deref()))
                .collect();
            // One new group epoch for the request (Kafka's `classicGroupLeaveToConsumerGroup`).
            if results.iter().any(|r| r.is_ok()) {
                g.bump_epoch();
            }
            self.after_change(&mut st, group_id);
            return Ok(results);
        }
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

    /// ConsumerGroupHeartbeat, answered once the group's records it wrote are on every
    /// in-sync replica (Kafka's `CoordinatorRuntime` completes a write on the high
    /// watermark), so that a new coordinator reads back the epoch and assignment the member
    /// was told about.
    pub async fn consumer_heartbeat(
        &self,
        group_id: &str,
        params: HeartbeatParams,
    ) -> Result<HeartbeatResult, GroupError> {
        let (result, written) = self.consumer_heartbeat_now(group_id, params)?;
        self.wait_committed(written).await?;
        Ok(result)
    }

    /// The part of ConsumerGroupHeartbeat done under the coordinator's lock, in the steps of
    /// Kafka's `GroupMetadataManager.consumerGroupHeartbeat`: find or create the group
    /// (online upgrade of a classic group), the downgrade on the last consumer-protocol
    /// member's leave, then the member's heartbeat and the write of its records.
    fn consumer_heartbeat_now(
        &self,
        group_id: &str,
        params: HeartbeatParams,
    ) -> Result<(HeartbeatResult, Option<Written>), GroupError> {
        check_consumer_heartbeat(group_id, &params)?;
        consumer::validate_request(&params)?;
        let limits = self.consumer_limits(group_id);
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::NotCoordinator);
        }
        self.acquire(&mut st, group_id)?;
        let created = !st.groups.contains_key(group_id);
        if consumer_group_or_create(&mut st, group_id, params.member_epoch == 0)? {
            return self.upgrade_and_heartbeat(&mut st, group_id, params, &limits);
        }
        if let Some(left) = self.downgrade_on_leave(&mut st, group_id, &params)? {
            return Ok((left, None));
        }
        self.consumer_group_member_heartbeat(&mut st, group_id, params, &limits, created)
    }

    /// The last consumer-protocol member leaving a group of classic members downgrades it
    /// (Kafka's `validateOnlineDowngradeWithFencedMember`, then `convertToClassicGroup`):
    /// the leave's answer when it did.
    fn downgrade_on_leave(
        &self,
        st: &mut State,
        group_id: &str,
        params: &HeartbeatParams,
    ) -> Result<Option<HeartbeatResult>, GroupError> {
        let Some(GroupKind::Consumer(group)) = st.groups.get(group_id).map(|e| &e.kind) else {
            return Err(GroupError::GroupIdNotFound);
        };
        if params.member_epoch == consumer::LEAVE_GROUP_MEMBER_EPOCH
            && group.members.contains_key(&params.member_id)
            && self.downgrade_allowed(group, &params.member_id)
        {
            let member_id = params.member_id.clone();
            self.downgrade(st, group_id, &member_id, true)?;
            return Ok(Some(HeartbeatResult {
                member_id,
                member_epoch: consumer::LEAVE_GROUP_MEMBER_EPOCH,
                assignment: None,
            }));
        }
        Ok(None)
    }

    /// The member's heartbeat in its consumer group, then the write of the group's changed
    /// records; a failed write restores the group as it was (or removes it if `created`).
    fn consumer_group_member_heartbeat(
        &self,
        st: &mut State,
        group_id: &str,
        params: HeartbeatParams,
        limits: &ConsumerLimits,
        created: bool,
    ) -> Result<(HeartbeatResult, Option<Written>), GroupError> {
        let Some(GroupKind::Consumer(group)) = st.groups.get_mut(group_id).map(|e| &mut e.kind)
        else {
            return Err(GroupError::GroupIdNotFound);
        };
        let before = (!created).then(|| group.clone());
        let replicas = &self.replicas;
        let topics = |name: &str| replicas.topic(name).map(|t| (t.id, t.partition_count()));
        let all_topics = || replicas.topics().iter().map(|t| t.name.clone()).collect();
        let r = group.heartbeat(params, &topics, &all_topics, limits, Instant::now(), || {
            Uuid::new_v4().to_string()
        });
        match self.after_change_or_error(st, group_id) {
            Ok(written) => r.map(|r| (r, written)),
            Err(e) => {
                restore_consumer_group(st, group_id, before);
                Err(e)
            }
        }
    }

    /// Resolves a topic id to its name (the KIP-848 assignment names topics by id).
    pub fn topic_name(&self, id: Uuid) -> Option<String> {
        self.replicas.topic_name_by_id(id)
    }

    // -----------------------------------------------------------------------------------------
    // KIP-932 share groups
    // -----------------------------------------------------------------------------------------

    /// ShareGroupHeartbeat (Kafka's `GroupMetadataManager.shareGroupHeartbeat`, with its
    /// request checks `throwIfShareGroupHeartbeatRequestIsInvalid`).
    pub fn share_heartbeat(
        &self,
        group_id: &str,
        params: ShareHeartbeatParams,
    ) -> Result<ShareHeartbeatResult, GroupError> {
        let blank = |s: &str| s.trim().is_empty();
        if blank(&params.member_id) {
            return Err(GroupError::InvalidRequest(
                "MemberId can't be empty.".into(),
            ));
        }
        if blank(group_id) || group_id.len() > MAX_GROUP_ID_BYTES {
            return Err(GroupError::InvalidRequest("GroupId can't be empty.".into()));
        }
        if params.rack_id.as_deref().is_some_and(blank) {
            return Err(GroupError::InvalidRequest("RackId can't be empty.".into()));
        }
        let topics = params.subscribed_topic_names.as_ref();
        if params.member_epoch == 0 && topics.is_none_or(|t| t.is_empty()) {
            return Err(GroupError::InvalidRequest(
                "SubscribedTopicNames must be set in first request.".into(),
            ));
        }
        if params.member_epoch < share::LEAVE_GROUP_MEMBER_EPOCH {
            return Err(GroupError::InvalidRequest("MemberEpoch is invalid.".into()));
        }
        if topics.is_some_and(|t| t.len() > MAX_SUBSCRIBED_TOPICS) {
            return Err(GroupError::InvalidRequest(
                "too many subscribed topics".into(),
            ));
        }
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::NotCoordinator);
        }
        self.acquire(&mut st, group_id)?;
        let entry = match st.groups.get_mut(group_id) {
            Some(e) => e,
            None if params.member_epoch == 0 => {
                st.groups.entry(group_id.to_string()).or_insert(GroupEntry {
                    kind: GroupKind::Share(ShareGroup::new(group_id.to_string())),
                    offsets: BTreeMap::new(),
                    pending_txn: BTreeMap::new(),
                    persisted: HashMap::new(),
                })
            }
            None => return Err(GroupError::GroupIdNotFound),
        };
        let GroupKind::Share(group) = &mut entry.kind else {
            return Err(GroupError::NotShareGroup(group_id.into()));
        };
        let replicas = &self.replicas;
        let topics = |name: &str| replicas.topic(name).map(|t| (t.id, t.partition_count()));
        let r = group.heartbeat(
            params,
            &topics,
            &self.share_limits(group_id),
            Instant::now(),
        );
        self.after_change(&mut st, group_id);
        r
    }

    /// ShareGroupDescribe for one group: GROUP_ID_NOT_FOUND unless it is a share group.
    pub fn describe_share_group(
        &self,
        group_id: &str,
    ) -> Result<ShareGroupDescription, GroupError> {
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        match st.groups.get(group_id).map(|e| &e.kind) {
            Some(GroupKind::Share(g)) => Ok(ShareGroupDescription {
                state: g.state_str().into(),
                group_epoch: g.group_epoch,
                assignment_epoch: g.assignment_epoch,
                members: g.members.values().cloned().collect(),
            }),
            Some(_) => Err(GroupError::NotShareGroup(group_id.into())),
            None => Err(GroupError::GroupIdNotFound),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Offsets
    // -----------------------------------------------------------------------------------------

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
            GroupKind::Classic(g) => describe_classic(g),
            // Kafka's `describeGroups` reads classic groups only: any other is Dead, with
            // GROUP_ID_NOT_FOUND from v6.
            GroupKind::Share(_) | GroupKind::Streams(_) => {
                return Err(GroupError::NotClassicGroup(group_id.into()))
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
                GroupKind::Share(g) => g.group_epoch,
                GroupKind::Streams(g) => g.group_epoch,
            };
            *out.by_state
                .entry((e.type_str(), e.state_str()))
                .or_insert(0) += 1;
            *out.rebalances.entry(e.type_str()).or_insert(0) += rebalances.max(0) as u64;
        }
        out
    }

    /// DeleteGroups for one group: only groups in the `Empty` state; their offsets go too. Answered once
    /// the tombstones are on every in-sync replica.
    pub async fn delete_group(&self, group_id: &str) -> Result<(), GroupError> {
        let written = self.delete_group_now(group_id)?;
        self.wait_committed(written).await
    }

    fn delete_group_now(&self, group_id: &str) -> Result<Option<Written>, GroupError> {
        Self::check_group_id(group_id)?;
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let entry = existing_group_mut(&mut st, group_id)?;
        match &entry.kind {
            GroupKind::Classic(g) => g.validate_delete()?,
            // Kafka's `ConsumerGroup.validateDeleteGroup`: only an Empty group, one without
            // members.
            GroupKind::Consumer(g) if !g.members.is_empty() => {
                return Err(GroupError::NonEmptyGroup)
            }
            GroupKind::Consumer(_) => {}
            GroupKind::Share(g) if !g.members.is_empty() => return Err(GroupError::NonEmptyGroup),
            GroupKind::Share(_) => {}
            GroupKind::Streams(g) if !g.members.is_empty() => {
                return Err(GroupError::NonEmptyGroup)
            }
            GroupKind::Streams(_) => {}
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
        records.extend(group_record_tombstones(group_id, entry));
        let written = self.store.append(group_id, records)?;
        if let Some(mut e) = st.groups.remove(group_id) {
            if let GroupKind::Classic(g) = &mut e.kind {
                g.mark_dead();
            }
        }
        Ok(written)
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
                    GroupKind::Consumer(_) => {}
                    GroupKind::Share(g) => g.on_deadlines(now),
                    GroupKind::Streams(g) => g.on_deadlines(&self.streams_limits(id), now),
                }
            }
            self.consumer_deadlines(&mut st, id, now);
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
        let expiry_period =
            std::time::Duration::from_millis(self.config.offsets_retention_check_interval_ms);
        let mut next_expiry = Instant::now() + expiry_period;
        // Each applied metadata image may move leadership of offsets partitions: the tick
        // that follows loads or drops their groups.
        let mut images = self.replicas.metadata_applied();
        loop {
            let now = Instant::now();
            let next = self.tick(now).unwrap_or(now + IDLE_TIMER);
            if now >= next_expiry {
                let mut st = self.state.lock();
                self.cleanup_group_metadata(&mut st);
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

/// Puts a KIP-848 group back as it was before a heartbeat whose records could not be
/// appended, or removes it if the heartbeat created it (`before` is `None`): the heartbeat
/// leaves no trace, as Kafka's `CoordinatorRuntime` reverts its timeline to the snapshot
/// taken before the write (`failCurrentBatch`). A write that was appended but is never
/// committed is not reverted, there as here: the log a new leader keeps decides.
/// DescribeGroups' view of a classic group: protocol, metadata and assignments only once it
/// is Stable, as Kafka's `ClassicGroup` describes them.
fn describe_classic(g: &ClassicGroup) -> GroupDescription {
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

/// The coordinator's bounds on a ConsumerGroupHeartbeat, checked before its group is looked
/// up: a group id of Kafka's size and a bounded subscription.
fn check_consumer_heartbeat(group_id: &str, params: &HeartbeatParams) -> Result<(), GroupError> {
    // Kafka's `throwIfEmptyString(groupId, ...)`; the length bound is Brook's own.
    if group_id.trim().is_empty() {
        return Err(GroupError::InvalidRequest("GroupId can't be empty.".into()));
    }
    if group_id.len() > MAX_GROUP_ID_BYTES {
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
    Ok(())
}

/// A JoinGroup whose new group's empty metadata record could not be appended: the group is
/// reverted as Kafka's `CoordinatorRuntime` reverts its timeline snapshot (removed, or the
/// empty KIP-848 group it took over is back), and a join still parked is answered the append
/// error as `GroupMetadataManager.classicGroupJoinToClassicGroup`'s append future answers it
/// (`appendGroupMetadataErrorToResponseError`: NOT_ENOUGH_REPLICAS and a timeout are
/// COORDINATOR_NOT_AVAILABLE, a lost leadership NOT_COORDINATOR). An answer already given
/// (MEMBER_ID_REQUIRED) stays, as Kafka's completed response future does.
fn revert_new_classic_group(
    st: &mut State,
    group_id: &str,
    converted: Option<ConsumerGroup>,
    result: Result<Pending<JoinResponse>, GroupError>,
    error: &GroupError,
) -> Result<Pending<JoinResponse>, GroupError> {
    restore_consumer_group(st, group_id, converted);
    match result {
        Ok(Pending::Wait(_)) => Ok(Pending::Now(JoinResponse::error(error.error_code(), ""))),
        other => other,
    }
}

/// Finds the consumer group a ConsumerGroupHeartbeat is for, creating it when a member joins
/// (Kafka's `getOrMaybeCreateConsumerGroup`); an empty classic group (offsets only) becomes a
/// consumer group, keeping its offsets, as Kafka's online upgrade of empty groups does.
/// True when the group is a non-empty classic group a joining member upgrades.
fn consumer_group_or_create(
    st: &mut State,
    group_id: &str,
    joining: bool,
) -> Result<bool, GroupError> {
    let entry = match st.groups.get_mut(group_id) {
        Some(e) => e,
        None if joining => st.groups.entry(group_id.to_string()).or_insert_with(|| {
            GroupEntry::of(GroupKind::Consumer(ConsumerGroup::new(
                group_id.to_string(),
                INITIAL_GROUP_EPOCH,
            )))
        }),
        None => return Err(GroupError::UnknownMemberId),
    };
    if let GroupKind::Classic(c) = &entry.kind {
        if !c.is_empty() && joining {
            return Ok(true);
        }
        if !c.is_empty() {
            return Err(GroupError::GroupIdNotFound);
        }
        // Kafka's `getOrMaybeCreateConsumerGroup`: an empty classic group is deleted
        // (`maybeDeleteEmptyClassicGroup`) and a new consumer group takes its place.
        entry.kind = GroupKind::Consumer(ConsumerGroup::new(
            group_id.to_string(),
            INITIAL_GROUP_EPOCH,
        ));
    }
    if !matches!(entry.kind, GroupKind::Consumer(_)) {
        return Err(GroupError::GroupIdNotFound);
    }
    Ok(false)
}

fn restore_consumer_group(st: &mut State, group_id: &str, before: Option<ConsumerGroup>) {
    match before {
        None => {
            st.groups.remove(group_id);
        }
        Some(g) => {
            if let Some(e) = st.groups.get_mut(group_id) {
                e.kind = GroupKind::Consumer(g);
            }
        }
    }
}

/// The group an admin request names (DeleteGroups, OffsetDelete); a dead classic group is
/// gone already, so it answers GROUP_ID_NOT_FOUND as an unknown one does.
fn existing_group_mut<'a>(
    st: &'a mut State,
    group_id: &str,
) -> Result<&'a mut GroupEntry, GroupError> {
    match st.groups.get_mut(group_id) {
        Some(GroupEntry {
            kind: GroupKind::Classic(g),
            ..
        }) if g.state == ClassicState::Dead => Err(GroupError::GroupIdNotFound),
        Some(entry) => Ok(entry),
        None => Err(GroupError::GroupIdNotFound),
    }
}

/// The classic group for sync/heartbeat/leave; an unknown group is UNKNOWN_MEMBER_ID (the
/// Java client then rejoins), a KIP-848 group is GROUP_ID_NOT_FOUND, as in Kafka.
fn classic_mut<'a>(st: &'a mut State, group_id: &str) -> Result<&'a mut ClassicGroup, GroupError> {
    match st.groups.get_mut(group_id).map(|e| &mut e.kind) {
        Some(GroupKind::Classic(g)) => Ok(g),
        Some(GroupKind::Consumer(_) | GroupKind::Share(_) | GroupKind::Streams(_)) => {
            Err(GroupError::GroupIdNotFound)
        }
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
        GroupKind::Consumer(_) | GroupKind::Share(_) | GroupKind::Streams(_) => {
            Err(GroupError::GroupIdNotFound)
        }
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

/// Tombstones for a group's own records: its metadata record and every KIP-848 record written
/// for it (its target assignment epoch, or records left from before a downgrade to the
/// classic protocol). Any one left would bring the group back at the next replay (Kafka's
/// `createGroupTombstoneRecords`).
fn group_record_tombstones(group_id: &str, entry: &GroupEntry) -> Vec<Record> {
    let mut keys: BTreeSet<Bytes> = entry.persisted.keys().cloned().collect();
    match &entry.kind {
        GroupKind::Classic(_) => keys.insert(records::group_metadata_key(group_id)),
        GroupKind::Consumer(_) => keys.insert(records::consumer_group_metadata_key(group_id)),
        GroupKind::Share(_) => {
            keys.extend(share_records::group_keys(group_id));
            true
        }
        GroupKind::Streams(_) => {
            keys.extend(streams_records::group_keys(group_id));
            let tombstones = keys.into_iter().map(|k| (k, None)).collect();
            return streams_records::kafka_order(tombstones);
        }
    };
    keys.into_iter().map(|k| (k, None)).collect()
}

fn classic_record(g: &ClassicGroup) -> Bytes {
    let protocol = g.protocol_name.clone().unwrap_or_default();
    let blobs: usize = g
        .members
        .iter()
        .map(|m| m.metadata(&protocol).len() + g.recorded_assignment(m).len())
        .sum();
    let with_blobs = blobs <= MAX_GROUP_RECORD_MEMBER_BYTES;
    records::group_metadata_value(&records::GroupMetadataValue {
        protocol_type: g.protocol_type.clone().unwrap_or_default(),
        generation: g.generation_id,
        protocol: g.protocol_name.clone(),
        leader: g.leader_id.clone(),
        current_state_timestamp_ms: g.current_state_timestamp_ms.unwrap_or(-1),
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
                    g.recorded_assignment(m)
                } else {
                    Bytes::new()
                },
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests;
