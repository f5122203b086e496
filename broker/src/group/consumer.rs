//! KIP-848 consumer groups (ConsumerGroupHeartbeat): the broker computes the assignment.
//!
//! Epochs, as in Kafka's `ConsumerGroup` and `CurrentAssignmentBuilder`:
//! - the **group epoch** goes up whenever membership, subscriptions or the subscribed topics'
//!   partition counts change;
//! - the **assignment epoch** is the group epoch the target assignment was computed for;
//! - each member's **member epoch** reaches the assignment epoch once it has revoked every
//!   partition the target takes away from it.
//!
//! Reconciliation is incremental: a member first loses the partitions it must give up (it
//! stays at its epoch in `UnrevokedPartitions` until a heartbeat reports them gone), and a
//! partition is handed to its new owner only once no other member holds it or is still
//! revoking it (`UnreleasedPartitions` until then). Nothing here awaits; `now` is explicit.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tokio::time::{Duration, Instant};
use uuid::Uuid;

use super::assignors::{assign_range, assign_uniform};
use super::{records, GroupError};

/// Partitions by topic id.
pub type TopicPartitions = BTreeMap<Uuid, BTreeSet<i32>>;

/// The member epoch a member sends when it leaves the group.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;

/// The member epoch a static member sends when it leaves temporarily.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// Server-side assignors Brook implements (`group.consumer.assignors`' default names).
pub const ASSIGNORS: &[&str] = &["uniform", "range"];

/// The reconciliation state of a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// The member owns exactly its share of the current target.
    Stable,
    /// The member must revoke `pending_revocation` before it moves to the next epoch.
    UnrevokedPartitions,
    /// The member is at the target epoch, but some target partitions are still held by
    /// other members.
    UnreleasedPartitions,
}

impl MemberState {
    /// Kafka's `MemberState` byte, as stored in the current assignment record.
    pub fn to_byte(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
        }
    }

    /// The state a stored byte names; Kafka's UNKNOWN (127) and anything else read as
    /// Stable, which the next reconciliation corrects.
    pub fn from_byte(b: i8) -> Self {
        match b {
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Stable,
        }
    }
}

/// One member of a consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub rebalance_timeout_ms: i32,
    /// Topic names subscribed to by name. Sorted, deduplicated.
    pub subscribed_topics: Vec<String>,
    /// The regular expression subscribed to (RE2 syntax, whole-name match), if any.
    pub subscribed_regex: Option<String>,
    regex: Option<regex::Regex>,
    /// What the member reads: its names plus the existing topics its regex matches. Sorted.
    pub resolved_topics: Vec<String>,
    pub server_assignor: Option<String>,
    /// What the member may own now.
    pub assigned: TopicPartitions,
    /// What the member still owns but must give up.
    pub pending_revocation: TopicPartitions,
    pub(super) session_deadline: Instant,
    pub(super) revocation_deadline: Option<Instant>,
    /// Set for a member that speaks the classic protocol (online migration, [`super::migration`]).
    pub classic: Option<records::ClassicMemberMetadata>,
    /// A classic member's join or sync deadline: it was told to rejoin (or was answered its
    /// JoinGroup) and must send JoinGroup (or SyncGroup) within its rebalance timeout, or it
    /// is fenced (Kafka's consumer group join and sync timeouts).
    pub(super) classic_deadline: Option<Instant>,
}

impl ConsumerMember {
    /// A member at epoch 0 with nothing subscribed or assigned yet.
    pub(super) fn new(
        member_id: &str,
        client_id: String,
        client_host: String,
        rebalance_timeout_ms: i32,
        session_deadline: Instant,
    ) -> Self {
        ConsumerMember {
            member_id: member_id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id,
            client_host,
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            rebalance_timeout_ms,
            subscribed_topics: Vec::new(),
            subscribed_regex: None,
            regex: None,
            resolved_topics: Vec::new(),
            server_assignor: None,
            assigned: BTreeMap::new(),
            pending_revocation: BTreeMap::new(),
            session_deadline,
            revocation_deadline: None,
            classic: None,
            classic_deadline: None,
        }
    }
}

/// A ConsumerGroupHeartbeat, decoded.
#[derive(Debug, Clone, Default)]
pub struct HeartbeatParams {
    /// The request's version: from v1 the client makes its member id (KIP-1082), so an
    /// empty one is refused even when joining.
    pub api_version: i16,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Vec<(Uuid, Vec<i32>)>>,
    pub client_id: String,
    pub client_host: String,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    /// `Some` when the member must (re)read its assignment.
    pub assignment: Option<TopicPartitions>,
}

/// Settings the coordinator enforces on consumer groups.
#[derive(Debug, Clone, Copy)]
pub struct ConsumerLimits {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
    /// The least time between two target assignments (KIP-1263): the group's
    /// `consumer.assignment.interval.ms`, else the broker's `group.consumer.assignment.interval.ms`.
    pub assignment_interval_ms: i32,
}

/// Topic name → (topic id, partition count), for the topics a group subscribes to.
pub type TopicsImage = BTreeMap<String, (Uuid, i32)>;

/// A KIP-848 consumer group. Cloned before a heartbeat, to put back should the write of
/// its records fail.
#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    /// When the target of `assignment_epoch` was computed, in ms since the epoch (0: never;
    /// the tagged `AssignmentTimestamp` of Kafka's target assignment metadata record): no new
    /// target before `assignment_interval_ms` has passed since (KIP-1263).
    pub assignment_timestamp_ms: i64,
    pub members: BTreeMap<String, ConsumerMember>,
    /// The target assignment of `assignment_epoch`.
    pub target: HashMap<String, TopicPartitions>,
    /// The subscribed topics' metadata the target was computed from.
    pub(super) topics_seen: TopicsImage,
    /// Set when the group was read back from its records: `topics_seen` is not stored, so the
    /// first heartbeat takes the current topics as the ones the target was computed from,
    /// instead of taking them for a change that needs a new target.
    pub(super) topics_unknown: bool,
}

impl ConsumerGroup {
    /// A new, empty group at `epoch` (0 for a new group; the stored epoch after a restart).
    pub fn new(group_id: String, epoch: i32) -> Self {
        ConsumerGroup {
            group_id,
            group_epoch: epoch,
            assignment_epoch: epoch,
            assignment_timestamp_ms: 0,
            members: BTreeMap::new(),
            target: HashMap::new(),
            topics_seen: BTreeMap::new(),
            topics_unknown: false,
        }
    }

    /// The group as records, in Kafka's layout: group epoch, target assignment epoch, and per
    /// member its subscription, its target assignment and its current assignment. The
    /// coordinator writes the ones that changed since its last write, and tombstones for
    /// keys no longer produced (members gone), so that a new coordinator rebuilds the group,
    /// members included, from `__consumer_offsets`.
    pub fn records(&self) -> Vec<(bytes::Bytes, bytes::Bytes)> {
        let g = &self.group_id;
        let mut out = Vec::with_capacity(2 + 3 * self.members.len());
        // Kafka writes the epoch record when the group epoch moves and the target records
        // when a target is computed: a group still at its initial epochs has neither, and
        // replay gives it those epochs back (`getOrMaybeCreatePersistedConsumerGroup`).
        if self.group_epoch != super::INITIAL_GROUP_EPOCH {
            out.push((
                records::consumer_group_metadata_key(g),
                records::consumer_group_metadata_value(self.group_epoch),
            ));
        }
        let target_computed = self.assignment_epoch != super::INITIAL_GROUP_EPOCH
            || self.assignment_timestamp_ms != 0;
        if target_computed {
            out.push((
                records::target_assignment_metadata_key(g),
                records::target_assignment_metadata_value(
                    self.assignment_epoch,
                    self.assignment_timestamp_ms,
                ),
            ));
        }
        let empty = TopicPartitions::new();
        for (id, m) in &self.members {
            out.push((
                records::consumer_member_metadata_key(g, id),
                records::consumer_member_metadata_value(&records::ConsumerMemberMetadata {
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed_topics.clone(),
                    subscribed_topic_regex: m.subscribed_regex.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    server_assignor: m.server_assignor.clone(),
                    classic: m.classic.clone(),
                }),
            ));
            let target = self.target.get(id).unwrap_or(&empty);
            if target_computed || !target.is_empty() {
                out.push((
                    records::target_assignment_member_key(g, id),
                    records::target_assignment_member_value(target),
                ));
            }
            out.push((
                records::current_member_assignment_key(g, id),
                records::current_member_assignment_value(&records::ConsumerMemberAssignment {
                    member_epoch: m.member_epoch,
                    previous_member_epoch: m.previous_member_epoch,
                    state: m.state.to_byte(),
                    assigned: m.assigned.clone(),
                    pending_revocation: m.pending_revocation.clone(),
                }),
            ));
        }
        out
    }

    /// Replay: a member's subscription record. Creates the member (at epoch 0, nothing
    /// assigned, until its assignment record) or updates it. Its session starts now.
    pub fn restore_member_metadata(
        &mut self,
        member_id: &str,
        meta: records::ConsumerMemberMetadata,
        session_deadline: Instant,
    ) {
        self.topics_unknown = true;
        let m = self.restored_member(member_id, session_deadline);
        m.instance_id = meta.instance_id;
        m.rack_id = meta.rack_id;
        m.client_id = meta.client_id;
        m.client_host = meta.client_host;
        m.subscribed_topics = meta.subscribed_topic_names;
        m.subscribed_topics.sort();
        m.subscribed_topics.dedup();
        m.resolved_topics = m.subscribed_topics.clone();
        m.regex = meta
            .subscribed_topic_regex
            .as_deref()
            .and_then(|r| compile_regex(r).ok());
        m.subscribed_regex = meta.subscribed_topic_regex.filter(|_| m.regex.is_some());
        m.rebalance_timeout_ms = meta.rebalance_timeout_ms;
        m.server_assignor = meta.server_assignor;
        // A classic member's session is its JoinGroup's session timeout.
        if let Some(c) = &meta.classic {
            m.session_deadline =
                Instant::now() + Duration::from_millis(c.session_timeout_ms.max(0) as u64);
        }
        m.classic = meta.classic;
    }

    /// Replay: a member's current assignment record. A member still revoking gets a fresh
    /// rebalance timeout to finish, as Kafka reschedules it on load.
    pub fn restore_member_assignment(
        &mut self,
        member_id: &str,
        a: records::ConsumerMemberAssignment,
        session_deadline: Instant,
    ) {
        let m = self.restored_member(member_id, session_deadline);
        m.member_epoch = a.member_epoch;
        m.previous_member_epoch = a.previous_member_epoch;
        m.state = MemberState::from_byte(a.state);
        m.assigned = a.assigned;
        m.pending_revocation = a.pending_revocation;
        m.revocation_deadline = (m.state == MemberState::UnrevokedPartitions)
            .then(|| Instant::now() + Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64));
    }

    /// Replay: a member's subscription tombstone (it left or was fenced).
    pub fn restore_member_removed(&mut self, member_id: &str) {
        self.members.remove(member_id);
    }

    fn restored_member(
        &mut self,
        member_id: &str,
        session_deadline: Instant,
    ) -> &mut ConsumerMember {
        self.members
            .entry(member_id.to_string())
            .or_insert_with(|| {
                ConsumerMember::new(
                    member_id,
                    String::new(),
                    String::new(),
                    -1,
                    session_deadline,
                )
            })
    }

    /// Kafka's state names: Empty, Assigning (target behind), Reconciling, Stable.
    pub fn state_str(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.assignment_epoch < self.group_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.member_epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Every topic some member subscribes to.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.resolved_topics.iter().cloned())
            .collect()
    }

    /// Recomputes every member's resolved topics (names plus regex matches among `all`);
    /// true if any member's changed.
    ///
    /// A pattern is matched against every topic of the metadata, internal ones
    /// (`__consumer_offsets`, `__transaction_state`) and user topics named `__…` included:
    /// Kafka 4.4's `TopicRegexResolver.resolveRegularExpressions` filters only by DESCRIBE
    /// authorization, never by name. Kafka resolves asynchronously
    /// (`GroupMetadataManager.maybeUpdateRegularExpressions`): when a pattern is new, when a
    /// metadata image brought new topics, or every `group.consumer.regex.refresh.interval.ms`,
    /// at most once per 10 s per group. Brook resolves at every heartbeat instead, so a topic
    /// created after the subscription joins the assignment at the member's next heartbeat,
    /// as soon as Kafka's fastest refresh and never later.
    pub(super) fn resolve_subscriptions(&mut self, all: &dyn Fn() -> Vec<String>) -> bool {
        let needs_names = self.members.values().any(|m| m.regex.is_some());
        let names = if needs_names { all() } else { Vec::new() };
        let mut changed = false;
        for m in self.members.values_mut() {
            let mut resolved = m.subscribed_topics.clone();
            if let Some(re) = &m.regex {
                resolved.extend(names.iter().filter(|n| re.is_match(n)).cloned());
            }
            resolved.sort();
            resolved.dedup();
            if resolved != m.resolved_topics {
                m.resolved_topics = resolved;
                changed = true;
            }
        }
        changed
    }

    /// A new group epoch: the target assignment is computed anew (Kafka's `Assigning`), which
    /// the event stream reports.
    pub(super) fn bump_epoch(&mut self) {
        self.group_epoch = self.group_epoch.wrapping_add(1).max(1);
        crate::events::emit(|| crate::events::EventKind::GroupRebalance {
            group_id: self.group_id.clone(),
            protocol: "consumer",
            phase: "Assigning",
            generation: self.group_epoch,
            members: self.members.len(),
        });
    }

    /// Handles a ConsumerGroupHeartbeat. `topics` resolves topic names to (id, partitions),
    /// `all_topics` lists every topic (for regex subscriptions); `new_member_id` makes an id
    /// for a v0 member that sent none. The steps of Kafka's
    /// `GroupMetadataManager.consumerGroupHeartbeat`: leave, member join or epoch check,
    /// member update, subscription metadata and target assignment, reconcile.
    pub fn heartbeat(
        &mut self,
        p: HeartbeatParams,
        topics: &dyn Fn(&str) -> Option<(Uuid, i32)>,
        all_topics: &dyn Fn() -> Vec<String>,
        limits: &ConsumerLimits,
        now: Instant,
        new_member_id: impl FnOnce() -> String,
    ) -> Result<HeartbeatResult, GroupError> {
        let session = Duration::from_millis(limits.session_timeout_ms.max(0) as u64);
        if p.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            return self.leave_static(&p.member_id, now + session);
        }
        if p.member_epoch < 0 {
            return self.leave(&p.member_id, p.member_epoch);
        }
        let member_id = if p.member_id.is_empty() {
            new_member_id()
        } else {
            p.member_id.clone()
        };
        let full = p.member_epoch == 0;
        self.join_or_check_epoch(&p, &member_id, limits, now + session)?;
        // A join by itself is no new group epoch: only a changed subscription is (Kafka's
        // `hasMemberSubscriptionChanged`), so a member subscribed to nothing joins a new
        // group at its initial epoch, and a static member taking its own place back keeps it.
        let bump = self.update_member(&p, &member_id, now + session)?;
        self.update_target(bump, topics, all_topics, limits.assignment_interval_ms);
        self.reconcile_member(&p, member_id, full, now)
    }

    /// A member joining with epoch 0 takes a static member's place or starts from nothing;
    /// any other epoch must be the member's current or, owning nothing it should not, its
    /// previous one (Kafka's `getOrMaybeSubscribeStaticConsumerGroupMember`,
    /// `getOrMaybeSubscribeDynamicConsumerGroupMember` and `throwIfConsumerGroupIsFull`).
    /// True when a static member's place was taken.
    fn join_or_check_epoch(
        &mut self,
        p: &HeartbeatParams,
        member_id: &str,
        limits: &ConsumerLimits,
        session_deadline: Instant,
    ) -> Result<bool, GroupError> {
        if p.member_epoch != 0 {
            self.check_member_epoch(p, member_id)?;
            return Ok(false);
        }
        if let Some(instance) = p.instance_id.as_deref() {
            if self.replace_static_member(instance, member_id, session_deadline)? {
                return Ok(true);
            }
        }
        if !self.members.contains_key(member_id) && self.members.len() >= limits.max_size {
            return Err(GroupError::GroupMaxSizeReached);
        }
        // A new member, or one rejoining after being fenced: it starts from nothing.
        if let Some(old) = self.members.remove(member_id) {
            tracing::debug!(group = %self.group_id, member = %old.member_id, "member rejoined with epoch 0");
        }
        self.target.remove(member_id);
        self.members.insert(
            member_id.to_string(),
            ConsumerMember::new(
                member_id,
                p.client_id.clone(),
                p.client_host.clone(),
                p.rebalance_timeout_ms,
                session_deadline,
            ),
        );
        Ok(false)
    }

    /// A known member's epoch must be its current one, or its previous one when it owns
    /// nothing it should not (Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`).
    fn check_member_epoch(&self, p: &HeartbeatParams, member_id: &str) -> Result<(), GroupError> {
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if p.member_epoch != m.member_epoch {
            let owned_subset = p.owned.as_ref().is_some_and(|owned| {
                owned.iter().all(|(t, parts)| {
                    parts
                        .iter()
                        .all(|x| m.assigned.get(t).is_some_and(|s| s.contains(x)))
                })
            });
            // A member that missed the answer moving it to the current epoch comes back
            // with the previous one; that is fine as long as it owns nothing it should not.
            if !(p.member_epoch == m.previous_member_epoch && owned_subset) {
                return Err(GroupError::FencedMemberEpoch);
            }
        }
        Ok(())
    }

    /// The member's new session deadline and the fields the request set (step 1 of Kafka's
    /// `consumerGroupHeartbeat`, "create or update the member"): true when the group epoch
    /// must move, because its subscribed topics, regex or server assignor changed (Kafka's
    /// `hasMemberSubscriptionChanged`).
    fn update_member(
        &mut self,
        p: &HeartbeatParams,
        member_id: &str,
        session_deadline: Instant,
    ) -> Result<bool, GroupError> {
        let mut bump = false;
        let Some(m) = self.members.get_mut(member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        m.session_deadline = session_deadline;
        if p.rebalance_timeout_ms > 0 {
            m.rebalance_timeout_ms = p.rebalance_timeout_ms;
        }
        if p.instance_id.is_some() {
            m.instance_id = p.instance_id.clone();
        }
        if p.rack_id.is_some() {
            m.rack_id = p.rack_id.clone();
        }
        if !p.client_id.is_empty() {
            m.client_id = p.client_id.clone();
        }
        if let Some(names) = &p.subscribed_topic_names {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            if names != m.subscribed_topics {
                m.subscribed_topics = names;
                bump = true;
            }
        }
        if let Some(re) = &p.subscribed_topic_regex {
            let re = Some(re.clone()).filter(|r| !r.is_empty());
            if re != m.subscribed_regex {
                m.regex = re.as_deref().map(compile_regex).transpose()?;
                m.subscribed_regex = re;
                bump = true;
            }
        }
        if p.server_assignor.is_some() && p.server_assignor != m.server_assignor {
            m.server_assignor = p.server_assignor.clone();
            bump = true;
        }
        Ok(bump)
    }

    /// Moves the member towards its target (Kafka's `maybeReconcile`) and answers: the
    /// assignment is sent on a join (`full`), when the member's epoch or assignment changed,
    /// or when what it says it owns differs from its assignment.
    fn reconcile_member(
        &mut self,
        p: &HeartbeatParams,
        member_id: String,
        full: bool,
        now: Instant,
    ) -> Result<HeartbeatResult, GroupError> {
        let before = self
            .members
            .get(&member_id)
            .map(|m| (m.member_epoch, m.assigned.clone()))
            .ok_or(GroupError::UnknownMemberId)?;
        self.reconcile(&member_id, p.owned.as_deref(), now);
        let m = self
            .members
            .get(&member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        let owned_differs = p.owned.as_ref().is_some_and(|owned| {
            let owned: TopicPartitions = owned
                .iter()
                .filter(|(_, ps)| !ps.is_empty())
                .map(|(t, ps)| (*t, ps.iter().copied().collect()))
                .collect();
            owned != m.assigned
        });
        let send = full || before.0 != m.member_epoch || before.1 != m.assigned || owned_differs;
        Ok(HeartbeatResult {
            member_id,
            member_epoch: m.member_epoch,
            assignment: send.then(|| m.assigned.clone()),
        })
    }

    /// After a member's heartbeat or join: a new group epoch if `bump` (its membership or
    /// subscription changed), if a regex now matches other topics, or if a subscribed topic's
    /// id or partition count changed; then a new target if the group epoch moved past it and
    /// `interval_ms` passed since the last one (Kafka 4.4's `maybeUpdateTargetAssignment`).
    /// A postponed target is computed by a later heartbeat of any member: Kafka 4.4 has no
    /// timer for it in consumer groups, and computes it inline whatever
    /// `group.consumer.assignor.offload.enable` says (the key is read by nothing else).
    pub(super) fn update_target(
        &mut self,
        bump: bool,
        topics: &dyn Fn(&str) -> Option<(Uuid, i32)>,
        all_topics: &dyn Fn() -> Vec<String>,
        interval_ms: i32,
    ) {
        self.update_group_epoch(bump, topics, all_topics);
        let now_ms = crate::cluster::replica_manager::now_ms();
        if self.assignment_epoch < self.group_epoch
            && can_compute_next_target_assignment(self.assignment_timestamp_ms, interval_ms, now_ms)
        {
            self.compute_target();
        }
    }

    /// The group epoch part of [`Self::update_target`] (Kafka's `updateSubscriptionMetadata`):
    /// a new epoch when `bump`, a regex resolves to other topics, or the subscribed topics'
    /// metadata changed; the target is left as it is.
    pub(super) fn update_group_epoch(
        &mut self,
        mut bump: bool,
        topics: &dyn Fn(&str) -> Option<(Uuid, i32)>,
        all_topics: &dyn Fn() -> Vec<String>,
    ) {
        if self.resolve_subscriptions(all_topics) {
            bump = true;
        }
        if bump {
            self.bump_epoch();
        }
        // Partition counts or topic ids changed (a subscribed topic was created, grown or
        // recreated): that changes the target too.
        let image: TopicsImage = self
            .subscribed_topics()
            .into_iter()
            .filter_map(|t| topics(&t).map(|meta| (t, meta)))
            .collect();
        if image != self.topics_seen {
            if self.assignment_epoch == self.group_epoch && !self.topics_unknown {
                self.bump_epoch();
            }
            self.topics_seen = image;
        }
        self.topics_unknown = false;
    }

    /// Epoch -2: a static member leaves for now. It keeps its partitions (nobody else gets
    /// them) until its session expires or a member with its instance id takes its place.
    fn leave_static(
        &mut self,
        member_id: &str,
        session_deadline: Instant,
    ) -> Result<HeartbeatResult, GroupError> {
        let m = self
            .members
            .get_mut(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if m.instance_id.is_none() {
            return self.leave(member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH);
        }
        if m.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
        }
        m.session_deadline = session_deadline;
        m.revocation_deadline = None;
        Ok(HeartbeatResult {
            member_id: member_id.to_string(),
            member_epoch: LEAVE_GROUP_STATIC_MEMBER_EPOCH,
            assignment: None,
        })
    }

    /// A joining member with an instance id takes over the static member that left with
    /// epoch -2 (KIP-848's static membership): same epoch, same partitions, no rebalance.
    /// The instance id of a member still active is UNRELEASED_INSTANCE_ID.
    fn replace_static_member(
        &mut self,
        instance: &str,
        member_id: &str,
        session_deadline: Instant,
    ) -> Result<bool, GroupError> {
        let Some(old_id) = self
            .members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance) && m.member_id != member_id)
            .map(|m| m.member_id.clone())
        else {
            return Ok(false);
        };
        let Some(mut m) = self.members.remove(&old_id) else {
            return Ok(false);
        };
        if m.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            self.members.insert(old_id, m);
            return Err(GroupError::UnreleasedInstanceId);
        }
        m.member_id = member_id.to_string();
        m.member_epoch = m.previous_member_epoch;
        m.session_deadline = session_deadline;
        self.members.insert(member_id.to_string(), m);
        if let Some(t) = self.target.remove(&old_id) {
            self.target.insert(member_id.to_string(), t);
        }
        Ok(true)
    }

    fn leave(&mut self, member_id: &str, epoch: i32) -> Result<HeartbeatResult, GroupError> {
        if self.members.remove(member_id).is_none() {
            return Err(GroupError::UnknownMemberId);
        }
        self.target.remove(member_id);
        self.bump_epoch();
        Ok(HeartbeatResult {
            member_id: member_id.to_string(),
            member_epoch: epoch,
            assignment: None,
        })
    }

    /// Removes a member that timed out or failed to revoke in time.
    pub fn fence(&mut self, member_id: &str) {
        if self.members.remove(member_id).is_some() {
            self.target.remove(member_id);
            self.bump_epoch();
        }
    }

    fn compute_target(&mut self) {
        let assignor = self
            .members
            .values()
            .find_map(|m| m.server_assignor.clone())
            .unwrap_or_else(|| "uniform".to_string());
        let subs: BTreeMap<String, Vec<String>> = self
            .members
            .iter()
            .map(|(id, m)| (id.clone(), m.resolved_topics.clone()))
            .collect();
        self.target = if assignor == "range" {
            assign_range(&subs, &self.topics_seen)
        } else {
            assign_uniform(&subs, &self.topics_seen, &self.target)
        };
        self.assignment_epoch = self.group_epoch;
        // Kafka's `TargetAssignmentBuilder.build` stamps the metadata record with the time
        // the computation finished.
        self.assignment_timestamp_ms = crate::cluster::replica_manager::now_ms();
    }

    /// Partitions held (assigned or still being revoked) by members other than `except`.
    pub(super) fn held_by_others(&self, except: &str) -> HashMap<(Uuid, i32), String> {
        let mut held = HashMap::new();
        for (id, m) in &self.members {
            if id == except {
                continue;
            }
            for set in [&m.assigned, &m.pending_revocation] {
                for (t, ps) in set {
                    for p in ps {
                        held.insert((*t, *p), id.clone());
                    }
                }
            }
        }
        held
    }

    /// Moves one member towards the target assignment (Kafka's `CurrentAssignmentBuilder`).
    pub(super) fn reconcile(
        &mut self,
        member_id: &str,
        owned: Option<&[(Uuid, Vec<i32>)]>,
        now: Instant,
    ) {
        let held = self.held_by_others(member_id);
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let epoch = self.assignment_epoch;
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        if m.state == MemberState::UnrevokedPartitions {
            let still_owned = owned.is_none_or(|owned| {
                owned.iter().any(|(t, ps)| {
                    ps.iter()
                        .any(|p| m.pending_revocation.get(t).is_some_and(|s| s.contains(p)))
                })
            });
            if still_owned {
                return;
            }
            m.pending_revocation.clear();
            m.revocation_deadline = None;
            m.state = MemberState::Stable;
        }
        if m.state == MemberState::Stable && m.member_epoch == epoch {
            return;
        }
        let mut kept: TopicPartitions = BTreeMap::new();
        let mut revoke: TopicPartitions = BTreeMap::new();
        for (t, ps) in &m.assigned {
            for p in ps {
                if target.get(t).is_some_and(|s| s.contains(p)) {
                    kept.entry(*t).or_default().insert(*p);
                } else {
                    revoke.entry(*t).or_default().insert(*p);
                }
            }
        }
        if !revoke.is_empty() {
            m.assigned = kept;
            m.pending_revocation = revoke;
            m.state = MemberState::UnrevokedPartitions;
            m.revocation_deadline =
                Some(now + Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64));
            return;
        }
        let mut unreleased = false;
        let mut next = kept;
        for (t, ps) in &target {
            for p in ps {
                if held.contains_key(&(*t, *p)) {
                    unreleased = true;
                } else {
                    next.entry(*t).or_default().insert(*p);
                }
            }
        }
        m.assigned = next;
        if m.member_epoch != epoch {
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = epoch;
        }
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
    }

    /// The earliest session or revocation deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.members
            .values()
            .flat_map(|m| {
                [
                    Some(m.session_deadline),
                    m.revocation_deadline,
                    m.classic_deadline,
                ]
            })
            .flatten()
            .min()
    }

    /// The members whose session, revocation, join or sync deadline passed.
    pub fn expired_members(&self, now: Instant) -> Vec<String> {
        self.members
            .values()
            .filter(|m| {
                m.session_deadline <= now
                    || m.revocation_deadline.is_some_and(|d| d <= now)
                    || m.classic_deadline.is_some_and(|d| d <= now)
            })
            .map(|m| m.member_id.clone())
            .collect()
    }

    /// Fences members whose deadline passed.
    pub fn on_deadlines(&mut self, now: Instant) {
        for id in self.expired_members(now) {
            tracing::info!(group = %self.group_id, member = %id, "consumer group member timed out: fencing it");
            self.fence(&id);
        }
    }

    /// Kafka's `ConsumerGroup.validateOffsetCommit`: an empty group accepts admin commits;
    /// otherwise the member must exist and commit at its current epoch.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        if member_epoch < 0 && member_id.is_empty() {
            return if self.members.is_empty() {
                Ok(())
            } else {
                Err(GroupError::UnknownMemberId)
            };
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        // A classic member commits with its generation, the member epoch (Kafka's
        // `ConsumerGroup.validateMemberEpoch`).
        if m.classic.is_some() && member_epoch != m.member_epoch {
            return Err(GroupError::IllegalGeneration);
        }
        if member_epoch > m.member_epoch {
            return Err(GroupError::FencedMemberEpoch);
        }
        if member_epoch < m.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// OffsetFetch v9 from a member checks its epoch (a stale member must not read offsets
    /// committed after it lost its partitions).
    pub fn validate_offset_fetch(
        &self,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if member_epoch != m.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }
}

/// Kafka 4.4's `GroupMetadataManager.canComputeNextTargetAssignment`: a new target may be
/// computed when there was none yet (`last_ms` 0), when the interval is 0, or once
/// `interval_ms` passed since the last one.
pub(super) fn can_compute_next_target_assignment(
    last_ms: i64,
    interval_ms: i32,
    now_ms: i64,
) -> bool {
    last_ms == 0 || interval_ms == 0 || now_ms >= last_ms.saturating_add(i64::from(interval_ms))
}

/// Kafka 4.4's `GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid`, in its
/// order and with its messages, then the subscription regex (`Utils`'
/// `throwIfRegularExpressionIsInvalid`) and the server assignor. Called before the group is
/// looked up, as Kafka checks a request before routing it to its coordinator shard.
pub(super) fn validate_request(p: &HeartbeatParams) -> Result<(), GroupError> {
    let invalid = |m: &str| Err(GroupError::InvalidRequest(m.into()));
    let blank = |s: &str| s.trim().is_empty();
    if (p.api_version >= 1 || p.member_epoch > 0 || p.member_epoch == LEAVE_GROUP_MEMBER_EPOCH)
        && blank(&p.member_id)
    {
        return invalid("MemberId can't be empty.");
    }
    if p.instance_id.as_deref().is_some_and(blank) {
        return invalid("InstanceId can't be empty.");
    }
    if p.rack_id.as_deref().is_some_and(blank) {
        return invalid("RackId can't be empty.");
    }
    if p.member_epoch == 0 {
        if p.rebalance_timeout_ms == -1 {
            return invalid("RebalanceTimeoutMs must be provided in first request.");
        }
        if p.owned.as_ref().is_some_and(|o| !o.is_empty()) {
            return invalid("TopicPartitions must be empty when (re-)joining.");
        }
        if p.subscribed_topic_names.is_none() && p.subscribed_topic_regex.is_none() {
            return invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when \
                 (re-)joining.",
            );
        }
    } else if p.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        if p.instance_id.is_none() {
            return invalid("InstanceId can't be null.");
        }
    } else if p.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        return invalid("MemberEpoch is invalid.");
    }
    if let Some(r) = p
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        compile_regex(r)?;
    }
    if let Some(a) = &p.server_assignor {
        if !ASSIGNORS.contains(&a.as_str()) {
            return Err(GroupError::UnsupportedAssignor(a.clone()));
        }
    }
    Ok(())
}

/// Bound on the compiled size of a subscription regex.
pub const MAX_REGEX_BYTES: usize = 1 << 20;

/// Compiles a subscription pattern to match whole topic names (Kafka uses RE2/J `matches()`).
fn compile_regex(r: &str) -> Result<regex::Regex, GroupError> {
    regex::RegexBuilder::new(&format!("^(?:{r})$"))
        .size_limit(MAX_REGEX_BYTES)
        .build()
        .map_err(|e| GroupError::InvalidRegularExpression(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ConsumerLimits = ConsumerLimits {
        session_timeout_ms: 45_000,
        heartbeat_interval_ms: 5000,
        max_size: 10,
        assignment_interval_ms: 0,
    };

    fn tid() -> Uuid {
        Uuid::from_u128(7)
    }

    fn topics(name: &str) -> Option<(Uuid, i32)> {
        match name {
            "t" => Some((tid(), 6)),
            "t-extra" => Some((Uuid::from_u128(8), 2)),
            _ => None,
        }
    }

    fn no_names() -> Vec<String> {
        vec!["t".into()]
    }

    /// Kafka 4.4's `canComputeNextTargetAssignment` cases.
    #[test]
    fn a_target_waits_for_the_assignment_interval() {
        assert!(
            can_compute_next_target_assignment(0, 1000, 5),
            "no target yet"
        );
        assert!(
            can_compute_next_target_assignment(100, 0, 100),
            "interval 0"
        );
        assert!(!can_compute_next_target_assignment(100, 1000, 1099));
        assert!(can_compute_next_target_assignment(100, 1000, 1100));
        // A joiner within the interval bumps the group epoch only; the target stays behind.
        let mut g = ConsumerGroup::new("g".into(), crate::group::INITIAL_GROUP_EPOCH);
        let limits = ConsumerLimits {
            assignment_interval_ms: 60_000,
            ..LIMITS
        };
        let now = Instant::now();
        for id in ["a", "b"] {
            g.heartbeat(join(id), &topics, &no_names, &limits, now, || id.into())
                .unwrap();
        }
        assert_eq!((g.group_epoch, g.assignment_epoch), (3, 2));
        assert_eq!(g.members["b"].member_epoch, 2);
        assert!(g.assignment_timestamp_ms > 0);
        // An interval of 0 computes it at the next heartbeat.
        g.heartbeat(
            hb("a", 2, &g.members["a"].assigned.clone()),
            &topics,
            &no_names,
            &LIMITS,
            now,
            || unreachable!(),
        )
        .unwrap();
        assert_eq!(g.assignment_epoch, 3);
    }

    #[test]
    fn regex_subscriptions_follow_topic_names() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new("g".into(), crate::group::INITIAL_GROUP_EPOCH);
        let mut p = join("a");
        p.subscribed_topic_names = None;
        p.subscribed_topic_regex = Some("t.*".into());
        let names = || vec!["t".to_string(), "__consumer_offsets".to_string()];
        let r = g
            .heartbeat(p, &topics, &names, &LIMITS, now, || unreachable!())
            .unwrap();
        assert_eq!(count(&r.assignment.unwrap()), 6);
        // A new matching topic appears: the group epoch moves and the member gets it too.
        let names = || vec!["t".to_string(), "t-extra".to_string(), "other".to_string()];
        let owned = g.members["a"].assigned.clone();
        let r = g
            .heartbeat(
                hb("a", 2, &owned),
                &topics,
                &names,
                &LIMITS,
                now,
                || unreachable!(),
            )
            .unwrap();
        assert_eq!(r.member_epoch, 3);
        assert_eq!(count(&r.assignment.unwrap()), 8);
        let mut bad = join("b");
        bad.subscribed_topic_regex = Some("(".into());
        let e = validate_request(&bad);
        assert!(
            matches!(e, Err(GroupError::InvalidRegularExpression(_))),
            "{e:?}"
        );
    }

    fn join(id: &str) -> HeartbeatParams {
        HeartbeatParams {
            member_id: id.into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            owned: Some(vec![]),
            ..Default::default()
        }
    }

    fn hb(id: &str, epoch: i32, owned: &TopicPartitions) -> HeartbeatParams {
        HeartbeatParams {
            member_id: id.into(),
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            owned: Some(
                owned
                    .iter()
                    .map(|(t, ps)| (*t, ps.iter().copied().collect()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn count(a: &TopicPartitions) -> usize {
        a.values().map(|s| s.len()).sum()
    }

    #[test]
    fn partitions_move_only_after_revocation() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new("g".into(), crate::group::INITIAL_GROUP_EPOCH);
        let r1 = g
            .heartbeat(
                join("a"),
                &topics,
                &no_names,
                &LIMITS,
                now,
                || unreachable!(),
            )
            .unwrap();
        assert_eq!(r1.member_epoch, 2);
        let a_owned = r1.assignment.unwrap();
        assert_eq!(count(&a_owned), 6);
        // b joins: the target gives b three partitions, but a still owns them.
        let r2 = g
            .heartbeat(
                join("b"),
                &topics,
                &no_names,
                &LIMITS,
                now,
                || unreachable!(),
            )
            .unwrap();
        assert_eq!(r2.member_epoch, 3);
        assert_eq!(count(&r2.assignment.unwrap()), 0, "nothing is free yet");
        assert_eq!(g.members["b"].state, MemberState::UnreleasedPartitions);
        // a is told to keep three: it must revoke the others first.
        let r1 = g
            .heartbeat(
                hb("a", 2, &a_owned),
                &topics,
                &no_names,
                &LIMITS,
                now,
                || unreachable!(),
            )
            .unwrap();
        assert_eq!(r1.member_epoch, 2, "epoch stays until revocation is done");
        let a_new = r1.assignment.unwrap();
        assert_eq!(count(&a_new), 3);
        assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
        // b still cannot get them.
        let r2 = g
            .heartbeat(
                hb("b", 3, &BTreeMap::new()),
                &topics,
                &no_names,
                &LIMITS,
                now,
                || unreachable!(),
            )
            .unwrap();
        assert!(r2.assignment.is_none() || count(&r2.assignment.unwrap()) == 0);
        // a reports the revocation done.
        let r1 = g
            .heartbeat(
                hb("a", 2, &a_new),
                &topics,
                &no_names,
                &LIMITS,
                now,
                || unreachable!(),
            )
            .unwrap();
        assert_eq!(r1.member_epoch, 3);
        let r2 = g
            .heartbeat(
                hb("b", 3, &BTreeMap::new()),
                &topics,
                &no_names,
                &LIMITS,
                now,
                || unreachable!(),
            )
            .unwrap();
        let b_new = r2.assignment.unwrap();
        assert_eq!(count(&b_new), 3);
        assert!(a_new[&tid()].is_disjoint(&b_new[&tid()]));
        assert_eq!(g.state_str(), "Stable");
    }

    #[test]
    fn fencing_and_leaving() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new("g".into(), crate::group::INITIAL_GROUP_EPOCH);
        g.heartbeat(
            join("a"),
            &topics,
            &no_names,
            &LIMITS,
            now,
            || unreachable!(),
        )
        .unwrap();
        let e = g
            .heartbeat(
                hb("a", 5, &BTreeMap::new()),
                &topics,
                &no_names,
                &LIMITS,
                now,
                || unreachable!(),
            )
            .unwrap_err();
        assert_eq!(e, GroupError::FencedMemberEpoch);
        let e = g
            .heartbeat(
                hb("zz", 1, &BTreeMap::new()),
                &topics,
                &no_names,
                &LIMITS,
                now,
                || unreachable!(),
            )
            .unwrap_err();
        assert_eq!(e, GroupError::UnknownMemberId);
        let mut leave = hb("a", -1, &BTreeMap::new());
        leave.owned = None;
        let r = g
            .heartbeat(leave, &topics, &no_names, &LIMITS, now, || unreachable!())
            .unwrap();
        assert_eq!(r.member_epoch, -1);
        assert!(g.members.is_empty());
        assert_eq!(g.state_str(), "Empty");
    }

    #[test]
    fn a_member_that_does_not_revoke_in_time_is_fenced() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new("g".into(), crate::group::INITIAL_GROUP_EPOCH);
        let a = g
            .heartbeat(
                join("a"),
                &topics,
                &no_names,
                &LIMITS,
                now,
                || unreachable!(),
            )
            .unwrap();
        let a_owned = a.assignment.unwrap();
        g.heartbeat(
            join("b"),
            &topics,
            &no_names,
            &LIMITS,
            now,
            || unreachable!(),
        )
        .unwrap();
        g.heartbeat(
            hb("a", 2, &a_owned),
            &topics,
            &no_names,
            &LIMITS,
            now,
            || unreachable!(),
        )
        .unwrap();
        assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
        // a never reports the revocation; b keeps heartbeating.
        let later = now + Duration::from_millis(30_000);
        g.heartbeat(
            hb("b", 3, &BTreeMap::new()),
            &topics,
            &no_names,
            &LIMITS,
            later,
            || unreachable!(),
        )
        .unwrap();
        g.on_deadlines(later);
        assert!(
            !g.members.contains_key("a"),
            "fenced after the rebalance timeout"
        );
        let r = g
            .heartbeat(
                hb("b", 3, &BTreeMap::new()),
                &topics,
                &no_names,
                &LIMITS,
                later,
                || unreachable!(),
            )
            .unwrap();
        assert_eq!(
            count(&r.assignment.unwrap()),
            6,
            "b gets everything once a is gone"
        );
    }

    #[test]
    fn static_member_takes_its_place_back() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new("g".into(), crate::group::INITIAL_GROUP_EPOCH);
        let mut j = join("a");
        j.instance_id = Some("i".into());
        let r = g
            .heartbeat(j, &topics, &no_names, &LIMITS, now, || unreachable!())
            .unwrap();
        let owned = r.assignment.unwrap();
        let epoch = g.group_epoch;
        let mut bye = hb("a", 2, &owned);
        bye.member_epoch = -2;
        let r = g
            .heartbeat(bye, &topics, &no_names, &LIMITS, now, || unreachable!())
            .unwrap();
        assert_eq!(r.member_epoch, -2);
        assert!(g.members.contains_key("a"), "kept for its session");
        let mut back = join("a2");
        back.instance_id = Some("i".into());
        let r = g
            .heartbeat(back, &topics, &no_names, &LIMITS, now, || unreachable!())
            .unwrap();
        assert_eq!(r.member_epoch, 2);
        assert_eq!(r.assignment.unwrap(), owned, "same partitions");
        assert_eq!(g.group_epoch, epoch, "no rebalance");
        let mut twin = join("a3");
        twin.instance_id = Some("i".into());
        let e = g.heartbeat(twin, &topics, &no_names, &LIMITS, now, || unreachable!());
        assert_eq!(e.unwrap_err(), GroupError::UnreleasedInstanceId);
    }

    #[test]
    fn session_timeout_fences() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new("g".into(), crate::group::INITIAL_GROUP_EPOCH);
        g.heartbeat(
            join("a"),
            &topics,
            &no_names,
            &LIMITS,
            now,
            || unreachable!(),
        )
        .unwrap();
        assert_eq!(g.next_deadline(), Some(now + Duration::from_millis(45_000)));
        g.on_deadlines(now + Duration::from_millis(45_000));
        assert!(g.members.is_empty());
    }

    #[test]
    fn commit_epoch_checks() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new("g".into(), crate::group::INITIAL_GROUP_EPOCH);
        g.validate_offset_commit("", -1).unwrap();
        g.heartbeat(
            join("a"),
            &topics,
            &no_names,
            &LIMITS,
            now,
            || unreachable!(),
        )
        .unwrap();
        g.validate_offset_commit("a", 2).unwrap();
        assert_eq!(
            g.validate_offset_commit("a", 0),
            Err(GroupError::StaleMemberEpoch)
        );
        assert_eq!(
            g.validate_offset_commit("a", 3),
            Err(GroupError::FencedMemberEpoch)
        );
        assert_eq!(
            g.validate_offset_commit("b", 2),
            Err(GroupError::UnknownMemberId)
        );
    }
}
