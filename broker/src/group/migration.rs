//! Online migration between classic and KIP-848 groups (Kafka 4.4's
//! `GroupMetadataManager`: `validateOnlineUpgrade`, `convertToConsumerGroup`,
//! `validateOnlineDowngradeWithFencedMember`, `convertToClassicGroup`, and the
//! `classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup` handlers; `ConsumerGroup.fromClassicGroup`
//! and `ClassicGroup.fromConsumerGroup`).
//!
//! - **Upgrade**: a ConsumerGroupHeartbeat joining a non-empty classic group of protocol type
//!   `consumer` turns it into a KIP-848 group when `group.consumer.migration.policy` allows it
//!   and the group fits `group.consumer.max.size`. The classic members stay, as consumer-group
//!   members carrying their classic metadata (session timeout, JoinGroup protocols), each at
//!   the classic generation with its last classic assignment as both its current and target
//!   assignment; the joiner bumps the group epoch, so the next target comes from the server-side
//!   assignor.
//! - **Classic members of a KIP-848 group** keep speaking JoinGroup/SyncGroup/Heartbeat/
//!   LeaveGroup. JoinGroup is answered at once with the member epoch as generation (no leader,
//!   nobody assigns); SyncGroup hands out the member's current assignment; Heartbeat answers
//!   REBALANCE_IN_PROGRESS while the member is behind the group epoch, must revoke, or may now
//!   take partitions others released, so that it rejoins.
//! - **Downgrade**: when the last consumer-protocol member leaves (or is fenced) and classic
//!   members remain, the group becomes a classic group again (policy permitting, within
//!   `group.max.size`), Stable at the group epoch with each member's target assignment, and
//!   rebalances. A static classic member replacing the last consumer-protocol member
//!   downgrades it too: Stable with the joiner in the replaced member's place, or, when the
//!   join makes the target stale (a new subscription), rebalancing at the old epoch.
//!
//! Each conversion is one write to `__consumer_offsets`: tombstones for the old group's records
//! and the new group's records, so a coordinator that loads the partition mid-way finds
//! whichever group the last complete write left.

use super::consumer_protocol::{self, Subscription};
use super::records::ClassicMemberMetadata;
use super::*;
use crate::group::consumer::{ConsumerMember, MemberState, TopicPartitions};
use tokio::time::Duration;

/// A classic member's JoinGroup that replaced the last static member on the consumer
/// protocol: the group goes back to classic (Kafka's `classicGroupJoinToConsumerGroup`, step
/// 4), with a rebalance when its target assignment is older than its group epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Downgrade {
    pub rebalance: bool,
}

/// `group.consumer.migration.policy` (Kafka's `ConsumerGroupMigrationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationPolicy {
    Disabled,
    Upgrade,
    Downgrade,
    Bidirectional,
}

impl MigrationPolicy {
    /// The policy a config value names, case-insensitively.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "disabled" => Some(MigrationPolicy::Disabled),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            _ => None,
        }
    }

    pub fn upgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Upgrade | MigrationPolicy::Bidirectional
        )
    }

    pub fn downgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Downgrade | MigrationPolicy::Bidirectional
        )
    }
}

/// Topic name → (id, partition count), as the coordinator's metadata image answers it.
pub type TopicLookup<'a> = &'a dyn Fn(&str) -> Option<(Uuid, i32)>;

/// (topic, partitions) by name → partitions by topic id; unknown topics are dropped.
fn to_ids(parts: &[(String, Vec<i32>)], topics: TopicLookup) -> TopicPartitions {
    let mut out = TopicPartitions::new();
    for (name, ps) in parts {
        if let Some((id, _)) = topics(name) {
            out.entry(id).or_default().extend(ps.iter().copied());
        }
    }
    out.retain(|_, ps| !ps.is_empty());
    out
}

/// Partitions by topic id → a `ConsumerProtocolAssignment` blob at `version`.
fn assignment_blob(
    assigned: &TopicPartitions,
    version: i16,
    topic_name: &dyn Fn(Uuid) -> Option<String>,
) -> Bytes {
    let parts: Vec<(String, Vec<i32>)> = assigned
        .iter()
        .filter_map(|(id, ps)| Some((topic_name(*id)?, ps.iter().copied().collect())))
        .collect();
    consumer_protocol::encode_assignment_version(version, &parts)
}

/// A classic member's subscription: every protocol carries the same one, so the first is read
/// (Kafka's `deserializeSubscription`).
fn subscription_of(protocols: &[(String, Bytes)]) -> Result<Subscription, GroupError> {
    protocols
        .first()
        .and_then(|(_, m)| consumer_protocol::decode_subscription(m))
        .ok_or_else(|| {
            GroupError::InvalidRequest("malformed consumer protocol subscription".into())
        })
}

impl ConsumerGroup {
    /// Kafka's `ConsumerGroup.fromClassicGroup`: every classic member, Stable at the classic
    /// generation, owning (and targeted with) its last classic assignment.
    pub fn from_classic(
        classic: &ClassicGroup,
        topics: TopicLookup,
        now: Instant,
    ) -> Result<ConsumerGroup, GroupError> {
        let epoch = classic.generation_id;
        let mut group = ConsumerGroup::new(classic.group_id.clone(), epoch);
        // The stored topics are unknown: the joiner's heartbeat takes them as seen.
        group.topics_unknown = true;
        let protocol = classic.protocol_name.clone().unwrap_or_default();
        for cm in &classic.members {
            let subscription = consumer_protocol::decode_subscription(&cm.metadata(&protocol))
                .ok_or(GroupError::GroupIdNotFound)?;
            let assigned = consumer_protocol::assignment_partitions(&cm.assignment)
                .map(|a| to_ids(&a, topics))
                .unwrap_or_default();
            let session = Duration::from_millis(cm.session_timeout_ms.max(0) as u64);
            let mut m = ConsumerMember::new(
                &cm.member_id,
                cm.client_id.clone(),
                cm.client_host.clone(),
                cm.rebalance_timeout_ms,
                now + session,
            );
            m.instance_id = cm.group_instance_id.clone();
            m.rack_id = subscription.rack_id;
            m.member_epoch = epoch;
            m.previous_member_epoch = epoch;
            m.state = MemberState::Stable;
            let mut names = subscription.topics;
            names.sort();
            names.dedup();
            m.resolved_topics = names.clone();
            m.subscribed_topics = names;
            m.assigned = assigned.clone();
            m.classic = Some(ClassicMemberMetadata {
                session_timeout_ms: cm.session_timeout_ms,
                protocols: cm.protocols.clone(),
            });
            group.target.insert(cm.member_id.clone(), assigned);
            group.members.insert(cm.member_id.clone(), m);
        }
        Ok(group)
    }

    /// Kafka's `ConsumerGroup.supportsClassicProtocols`: a joining classic member must share
    /// one protocol with every classic member (any non-empty set in an empty group).
    pub fn supports_classic_protocols(&self, protocol_type: &str, names: &[String]) -> bool {
        if protocol_type != "consumer" {
            return false;
        }
        if self.members.is_empty() {
            return !names.is_empty();
        }
        let classic: Vec<&ClassicMemberMetadata> = self
            .members
            .values()
            .filter_map(|m| m.classic.as_ref())
            .collect();
        names.iter().any(|n| {
            classic
                .iter()
                .all(|c| c.protocols.iter().any(|(p, _)| p == n))
        })
    }

    /// Whether every member but `except` speaks the classic protocol.
    pub fn all_classic_except(&self, except: &str) -> bool {
        self.members
            .values()
            .all(|m| m.member_id == except || m.classic.is_some())
    }

    /// Kafka's `validateConsumerGroupMember`: the member by instance id (fenced if another
    /// member id holds it) or by member id.
    fn classic_member(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<&mut ConsumerMember, GroupError> {
        let id = match instance_id {
            Some(instance) => {
                let m = self
                    .members
                    .values()
                    .find(|m| m.instance_id.as_deref() == Some(instance))
                    .ok_or(GroupError::UnknownMemberId)?;
                if m.member_id != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
                m.member_id.clone()
            }
            None => member_id.to_string(),
        };
        let m = self
            .members
            .get_mut(&id)
            .ok_or(GroupError::UnknownMemberId)?;
        // `throwIfMemberDoesNotUseClassicProtocol`.
        if m.classic.is_none() {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(m)
    }

    /// Kafka's `waitingOnUnreleasedPartition`: some partition of the member's target is still
    /// held by another member.
    fn waiting_on_unreleased(&self, member_id: &str) -> bool {
        let Some(m) = self.members.get(member_id) else {
            return false;
        };
        if m.state != MemberState::UnreleasedPartitions {
            return false;
        }
        let held = self.held_by_others(member_id);
        self.target.get(member_id).is_some_and(|t| {
            t.iter().any(|(id, ps)| {
                ps.iter().any(|p| {
                    !m.assigned.get(id).is_some_and(|a| a.contains(p))
                        && held.contains_key(&(*id, *p))
                })
            })
        })
    }

    /// Kafka's `classicGroupJoinToConsumerGroup`, answered at once: the member's subscription
    /// is taken from its protocol metadata, the target recomputed if it changed, and the
    /// member reconciled against what its subscription says it owns. With the answer,
    /// whether the group is to be downgraded (`downgrade` said so of the static member the
    /// joiner replaced) and, if so, whether with a rebalance.
    #[allow(clippy::too_many_arguments)]
    pub fn classic_join(
        &mut self,
        p: JoinParams,
        topics: TopicLookup,
        all_topics: &dyn Fn() -> Vec<String>,
        limits: &ConsumerLimits,
        now: Instant,
        new_member_id: impl FnOnce() -> String,
        downgrade: &dyn Fn(&ConsumerGroup, &str) -> bool,
    ) -> Result<(JoinResponse, Option<Downgrade>), GroupError> {
        let unknown = p.member_id.is_empty();
        let member_id = if unknown {
            new_member_id()
        } else {
            p.member_id.clone()
        };
        if self.members.len() >= limits.max_size && !self.members.contains_key(&member_id) {
            return Err(GroupError::GroupMaxSizeReached);
        }
        let names: Vec<String> = p.protocols.iter().map(|(n, _)| n.clone()).collect();
        if !self.supports_classic_protocols(&p.protocol_type, &names) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        if unknown && p.require_known_member_id && p.group_instance_id.is_none() {
            let refused = JoinResponse::error(ResponseError::MemberIdRequired.code(), &member_id);
            return Ok((refused, None));
        }
        let subscription = subscription_of(&p.protocols)?;
        let replaced = match p.group_instance_id.as_deref() {
            Some(instance) => self.take_static_place(instance, &member_id, unknown)?,
            None => None,
        };
        // Kafka's step 4: the joiner replaced the last static member on the consumer
        // protocol (`validateOnlineDowngradeWithReplacedMember`).
        let downgrading = replaced.is_some() && downgrade(self, &member_id);
        let epoch_before = self.group_epoch;
        let bump = self.upsert_classic_member(&member_id, &p, &subscription, now)?;
        let owned: Vec<(Uuid, Vec<i32>)> = to_ids(&subscription.owned, topics)
            .into_iter()
            .map(|(id, ps)| (id, ps.into_iter().collect()))
            .collect();
        let mut downgraded = None;
        if downgrading {
            let rebalance = self.prepare_downgrade(
                &member_id,
                bump,
                epoch_before,
                &owned,
                now,
                topics,
                all_topics,
            );
            downgraded = Some(Downgrade { rebalance });
        } else {
            self.update_target(bump, topics, all_topics, limits.assignment_interval_ms);
            self.reconcile(&member_id, Some(&owned), now);
        }
        let m = self
            .members
            .get_mut(&member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        // The sync timeout: SyncGroup must follow within the rebalance timeout.
        m.classic_deadline =
            Some(now + Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64));
        let joined = JoinResponse {
            error_code: 0,
            generation_id: m.member_epoch,
            protocol_type: Some("consumer".into()),
            protocol_name: p.protocols.first().map(|(n, _)| n.clone()),
            leader: String::new(),
            member_id,
            members: Vec::new(),
            skip_assignment: false,
        };
        Ok((joined, downgraded))
    }

    /// The joiner that replaced the last static member on the consumer protocol, before the
    /// group goes back to classic. No new target: a group epoch past the target's (the
    /// joiner's subscription or the topics changed) makes the classic group rebalance, at the
    /// epoch it had (returns true); otherwise the joiner is reconciled against the target and
    /// the group stays Stable.
    #[allow(clippy::too_many_arguments)]
    fn prepare_downgrade(
        &mut self,
        member_id: &str,
        bump: bool,
        epoch_before: i32,
        owned: &[(Uuid, Vec<i32>)],
        now: Instant,
        topics: TopicLookup,
        all_topics: &dyn Fn() -> Vec<String>,
    ) -> bool {
        self.update_group_epoch(bump, topics, all_topics);
        let rebalance = self.assignment_epoch < self.group_epoch;
        if rebalance {
            self.group_epoch = epoch_before;
            // Not reconciled, the joiner keeps the epoch Kafka's
            // `getOrMaybeSubscribeStaticConsumerGroupMember` gives a replacing member: 0,
            // the generation it is answered.
            if let Some(m) = self.members.get_mut(member_id) {
                m.member_epoch = 0;
                m.previous_member_epoch = 0;
            }
        } else {
            self.reconcile(member_id, Some(owned), now);
        }
        rebalance
    }

    /// Creates the member or applies its JoinGroup to it; true if membership or its
    /// subscription changed (a new group epoch).
    fn upsert_classic_member(
        &mut self,
        member_id: &str,
        p: &JoinParams,
        subscription: &Subscription,
        now: Instant,
    ) -> Result<bool, GroupError> {
        let mut bump = false;
        if !self.members.contains_key(member_id) {
            bump = true;
            let m = ConsumerMember::new(
                member_id,
                p.client_id.clone(),
                p.client_host.clone(),
                p.rebalance_timeout_ms,
                now,
            );
            self.members.insert(member_id.to_string(), m);
        }
        let m = self
            .members
            .get_mut(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        bump |= update_classic_member(m, p, subscription.topics.clone(), now);
        m.rack_id = subscription.rack_id.clone().or(m.rack_id.take());
        Ok(bump)
    }

    /// A static classic member joining with an unknown member id takes the place (epoch,
    /// assignment, target) of the member holding its instance id, whose id is returned; a
    /// known member id that is not the holder's is fenced.
    fn take_static_place(
        &mut self,
        instance: &str,
        member_id: &str,
        unknown: bool,
    ) -> Result<Option<String>, GroupError> {
        let Some(old_id) = self
            .members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance) && m.member_id != member_id)
            .map(|m| m.member_id.clone())
        else {
            return Ok(None);
        };
        if !unknown {
            return Err(GroupError::FencedInstanceId);
        }
        if let Some(mut m) = self.members.remove(&old_id) {
            m.member_id = member_id.to_string();
            self.members.insert(member_id.to_string(), m);
        }
        if let Some(t) = self.target.remove(&old_id) {
            self.target.insert(member_id.to_string(), t);
        }
        Ok(Some(old_id))
    }

    /// Kafka's `classicGroupSyncToConsumerGroup`: the member's current assignment, encoded at
    /// the version of the subscription it joined with.
    #[allow(clippy::too_many_arguments)]
    pub fn classic_sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        topic_name: &dyn Fn(Uuid) -> Option<String>,
        now: Instant,
    ) -> Result<SyncResponse, GroupError> {
        let group_epoch = self.group_epoch;
        let m = self.classic_member(member_id, instance_id)?;
        if generation_id != m.member_epoch {
            return Err(GroupError::IllegalGeneration);
        }
        let (name, metadata) = m
            .classic
            .as_ref()
            .and_then(|c| c.protocols.first().cloned())
            .unwrap_or_default();
        if protocol_type.is_some_and(|t| t != "consumer")
            || protocol_name.is_some_and(|n| n != name)
        {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        // A member behind the group epoch rejoins first, unless it is still revoking (its
        // next join follows by itself).
        if group_epoch > m.member_epoch && m.state != MemberState::UnrevokedPartitions {
            join_timeout_if_absent(m, now);
            return Err(GroupError::RebalanceInProgress);
        }
        m.classic_deadline = None;
        refresh_classic_session(m, now);
        let version = consumer_protocol::blob_version(&metadata);
        Ok(SyncResponse {
            error_code: 0,
            protocol_type: protocol_type.map(str::to_string),
            protocol_name: protocol_name.map(str::to_string),
            assignment: assignment_blob(&m.assigned, version, topic_name),
        })
    }

    /// Kafka's `classicGroupHeartbeatToConsumerGroup`.
    pub fn classic_heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        let group_epoch = self.group_epoch;
        let m = self.classic_member(member_id, instance_id)?;
        if generation_id != m.member_epoch {
            return Err(GroupError::IllegalGeneration);
        }
        refresh_classic_session(m, now);
        let (epoch, state, id) = (m.member_epoch, m.state, m.member_id.clone());
        let rejoin = epoch < group_epoch
            || state == MemberState::UnrevokedPartitions
            || (state == MemberState::UnreleasedPartitions && !self.waiting_on_unreleased(&id));
        if rejoin {
            if let Some(m) = self.members.get_mut(&id) {
                join_timeout_if_absent(m, now);
            }
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Kafka's `classicGroupLeaveToConsumerGroup` for one member: removed without a new epoch
    /// (the caller bumps once for the request).
    pub fn classic_leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        let id = match instance_id {
            // By instance id, the member id may be left out (administrative removal).
            Some(instance) => {
                let m = self
                    .members
                    .values()
                    .find(|m| m.instance_id.as_deref() == Some(instance))
                    .ok_or(GroupError::UnknownMemberId)?;
                if !member_id.is_empty() && m.member_id != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
                if m.classic.is_none() {
                    return Err(GroupError::UnknownMemberId);
                }
                m.member_id.clone()
            }
            None => self.classic_member(member_id, None)?.member_id.clone(),
        };
        self.members.remove(&id);
        self.target.remove(&id);
        Ok(())
    }
}

/// Applies a JoinGroup's fields to the member; true if its subscription changed.
fn update_classic_member(
    m: &mut ConsumerMember,
    p: &JoinParams,
    mut names: Vec<String>,
    now: Instant,
) -> bool {
    if p.group_instance_id.is_some() {
        m.instance_id = p.group_instance_id.clone();
    }
    if p.rebalance_timeout_ms > 0 {
        m.rebalance_timeout_ms = p.rebalance_timeout_ms;
    }
    m.client_id = p.client_id.clone();
    m.client_host = p.client_host.clone();
    m.classic = Some(ClassicMemberMetadata {
        session_timeout_ms: p.session_timeout_ms,
        protocols: p.protocols.clone(),
    });
    refresh_classic_session(m, now);
    names.sort();
    names.dedup();
    if names != m.subscribed_topics {
        m.subscribed_topics = names;
        return true;
    }
    false
}

fn refresh_classic_session(m: &mut ConsumerMember, now: Instant) {
    let ms = m
        .classic
        .as_ref()
        .map_or(0, |c| c.session_timeout_ms.max(0));
    m.session_deadline = now + Duration::from_millis(ms as u64);
}

/// Kafka's `scheduleConsumerGroupJoinTimeoutIfAbsent`: a member told to rejoin must within
/// its rebalance timeout.
fn join_timeout_if_absent(m: &mut ConsumerMember, now: Instant) {
    if m.classic_deadline.is_none() {
        m.classic_deadline =
            Some(now + Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64));
    }
}

impl ClassicGroup {
    /// Kafka's `ClassicGroup.fromConsumerGroup`: every member but `leaving`, Stable at the
    /// group epoch, each assigned its target assignment (encoded at the version of its
    /// metadata for the selected protocol); the first member leads.
    pub fn from_consumer(
        g: &ConsumerGroup,
        leaving: &str,
        topic_name: &dyn Fn(Uuid) -> Option<String>,
        now: Instant,
    ) -> ClassicGroup {
        let members: Vec<&ConsumerMember> = g
            .members
            .values()
            .filter(|m| m.member_id != leaving)
            .collect();
        let record = records::GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: g.group_epoch,
            protocol: None,
            leader: members.first().map(|m| m.member_id.clone()),
            current_state_timestamp_ms: now_ms(),
            members: members
                .iter()
                .map(|m| records::MemberRecord {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.classic.as_ref().map_or(0, |c| c.session_timeout_ms),
                    subscription: Bytes::new(),
                    assignment: Bytes::new(),
                })
                .collect(),
        };
        let mut classic = ClassicGroup::from_record(g.group_id.clone(), record, now);
        for cm in &mut classic.members {
            if let Some(c) = g
                .members
                .get(&cm.member_id)
                .and_then(|m| m.classic.as_ref())
            {
                cm.protocols = c.protocols.clone();
            }
        }
        classic.protocol_name = classic.select_protocol();
        let protocol = classic.protocol_name.clone().unwrap_or_default();
        let empty = TopicPartitions::new();
        for cm in &mut classic.members {
            let version = consumer_protocol::blob_version(&cm.metadata(&protocol));
            let target = g.target.get(&cm.member_id).unwrap_or(&empty);
            cm.assignment = assignment_blob(target, version, topic_name);
        }
        classic
    }
}

impl GroupCoordinator {
    /// JoinGroup for a non-empty KIP-848 group: answered at once.
    pub(super) fn classic_join_consumer_group(
        &self,
        st: &mut State,
        group_id: &str,
        params: JoinParams,
    ) -> Result<Pending<JoinResponse>, GroupError> {
        let limits = self.consumer_limits(group_id);
        let replicas = &self.replicas;
        let topics = |name: &str| replicas.topic(name).map(|t| (t.id, t.partition_count()));
        let all_topics = || replicas.topics().iter().map(|t| t.name.clone()).collect();
        let Some(GroupKind::Consumer(g)) = st.groups.get_mut(group_id).map(|e| &mut e.kind) else {
            return Err(GroupError::GroupIdNotFound);
        };
        let before = g.clone();
        let (joined, downgrade) = g.classic_join(
            params,
            &topics,
            &all_topics,
            &limits,
            Instant::now(),
            || Uuid::new_v4().to_string(),
            &|g, joiner| self.downgrade_on_replacement_allowed(g, joiner),
        )?;
        // Kafka's step 4: the joiner replaced the last static member on the consumer protocol.
        // The group goes back to classic with the joiner in the replaced member's place and
        // its target assignment (`convertToClassicGroup` with a joining member), rebalancing
        // if that target is stale.
        match downgrade {
            Some(Downgrade { rebalance }) => {
                // Kafka answers this join once the conversion's records are appended; a
                // failed append reverts the join with it and answers the error.
                if let Err(e) = self.downgrade(st, group_id, "", rebalance) {
                    restore_consumer_group(st, group_id, Some(before));
                    return Err(e);
                }
            }
            None => {
                self.after_change(st, group_id);
            }
        }
        Ok(Pending::Now(joined))
    }

    /// Kafka's `validateOnlineDowngradeWithReplacedMember`, checked after the joiner took
    /// the replaced member's place: every other member is on the classic protocol, the
    /// policy allows a downgrade and the members fit a classic group.
    fn downgrade_on_replacement_allowed(&self, g: &ConsumerGroup, joiner: &str) -> bool {
        g.all_classic_except(joiner)
            && self.config.migration_policy.downgrade_enabled()
            && g.members.len() <= self.config.classic.max_size
    }

    /// Kafka's `validateOnlineUpgrade`.
    fn upgrade_allowed(&self, classic: &ClassicGroup, limits: &ConsumerLimits) -> bool {
        self.config.migration_policy.upgrade_enabled()
            && classic.protocol_type.as_deref() == Some("consumer")
            && classic.members.len() <= limits.max_size
    }

    /// Kafka's `validateOnlineDowngradeWithFencedMember`: `leaving` was the last member on
    /// the consumer protocol, others remain, the policy allows it and they fit a classic
    /// group.
    pub(super) fn downgrade_allowed(&self, g: &ConsumerGroup, leaving: &str) -> bool {
        g.all_classic_except(leaving)
            && g.members.len() > 1
            && self.config.migration_policy.downgrade_enabled()
            && g.members.len() - 1 <= self.config.classic.max_size
    }

    /// A ConsumerGroupHeartbeat for a non-empty classic group: converts it if allowed and the
    /// heartbeat succeeds on the converted group (otherwise the group stays classic, as Kafka
    /// applies nothing of a failed request).
    pub(super) fn upgrade_and_heartbeat(
        &self,
        st: &mut State,
        group_id: &str,
        params: HeartbeatParams,
        limits: &ConsumerLimits,
    ) -> Result<(HeartbeatResult, Option<Written>), GroupError> {
        let replicas = &self.replicas;
        let topics = |name: &str| replicas.topic(name).map(|t| (t.id, t.partition_count()));
        let all_topics = || replicas.topics().iter().map(|t| t.name.clone()).collect();
        let entry = st
            .groups
            .get_mut(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        let GroupKind::Classic(classic) = &mut entry.kind else {
            return Err(GroupError::GroupIdNotFound);
        };
        if !self.upgrade_allowed(classic, limits) {
            tracing::info!(
                group = group_id,
                "classic group not upgraded to a consumer group"
            );
            return Err(GroupError::GroupIdNotFound);
        }
        let now = Instant::now();
        let mut group = ConsumerGroup::from_classic(classic, &topics, now)?;
        let result = group.heartbeat(params, &topics, &all_topics, limits, now, || {
            Uuid::new_v4().to_string()
        })?;
        // Members waiting in a join or sync rejoin for the new rebalance.
        classic.fail_waiters(ResponseError::RebalanceInProgress.code());
        let before = std::mem::replace(&mut entry.kind, GroupKind::Consumer(group));
        let persisted_before = entry.persisted.clone();
        // The classic group's record gets its tombstone in the write of the new group's
        // records (a key persisted but no longer desired gets one).
        entry
            .persisted
            .insert(records::group_metadata_key(group_id), Bytes::new());
        match self.after_change_or_error(st, group_id) {
            Ok(written) => {
                tracing::info!(
                    group = group_id,
                    "classic group upgraded to a consumer group"
                );
                Ok((result, written))
            }
            // The conversion could not be appended: the group stays classic, as Kafka's
            // `CoordinatorRuntime` reverts its timeline to the snapshot taken before the
            // write (`failCurrentBatch`).
            Err(e) => {
                if let Some(entry) = st.groups.get_mut(group_id) {
                    entry.kind = before;
                    entry.persisted = persisted_before;
                }
                Err(e)
            }
        }
    }

    /// Converts the KIP-848 group to a classic group without `leaving` (none: ""), writes the
    /// change (tombstones for the KIP-848 records, the classic group's record) and, when a
    /// member left or a replacing static member found the target stale, rebalances.
    pub(super) fn downgrade(
        &self,
        st: &mut State,
        group_id: &str,
        leaving: &str,
        rebalance: bool,
    ) -> Result<(), GroupError> {
        let Some(entry) = st.groups.get_mut(group_id) else {
            return Ok(());
        };
        let GroupKind::Consumer(g) = &entry.kind else {
            return Ok(());
        };
        let now = Instant::now();
        let mut classic =
            ClassicGroup::from_consumer(g, leaving, &|id| self.replicas.topic_name_by_id(id), now);
        let mut write: Vec<Record> = entry
            .persisted
            .keys()
            .filter(|k| **k != records::group_metadata_key(group_id))
            .map(|k| (k.clone(), None))
            .collect();
        write.sort_by(|a, b| a.0.cmp(&b.0));
        write.push((
            records::group_metadata_key(group_id),
            Some(classic_record(&classic)),
        ));
        // A failed append leaves the consumer group as it was, as Kafka's `CoordinatorRuntime`
        // reverts the timeline snapshot of a write whose records could not be appended.
        if let Err(e) = self.store.append(group_id, write) {
            tracing::warn!(group = group_id, error = %e, "could not write the downgraded group: it stays a consumer group");
            return Err(e);
        }
        entry.persisted.clear();
        if rebalance {
            classic.rebalance_after_downgrade(&self.config.classic, now);
        }
        entry.kind = GroupKind::Classic(classic);
        tracing::info!(
            group = group_id,
            "consumer group downgraded to a classic group"
        );
        self.after_change(st, group_id);
        Ok(())
    }

    /// A consumer group's passed deadlines: each expired member is fenced, or, when it was
    /// the last consumer-protocol member among classic ones, the group is downgraded.
    pub(super) fn consumer_deadlines(&self, st: &mut State, group_id: &str, now: Instant) {
        let Some(GroupEntry {
            kind: GroupKind::Consumer(g),
            ..
        }) = st.groups.get(group_id)
        else {
            return;
        };
        let expired = g.expired_members(now);
        for id in expired {
            let Some(GroupEntry {
                kind: GroupKind::Consumer(g),
                ..
            }) = st.groups.get_mut(group_id)
            else {
                return;
            };
            if self.downgrade_allowed(g, &id) {
                // A failed write keeps the expired member; the next tick tries again.
                let _ = self.downgrade(st, group_id, &id, true);
                return;
            }
            tracing::info!(group = group_id, member = %id, "consumer group member timed out: fencing it");
            g.fence(&id);
        }
    }
}
