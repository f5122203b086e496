//! The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): Kafka's
//! `ClassicGroup` state machine and the join/sync logic of its `GroupMetadataManager`.
//!
//! States: `Empty` → `PreparingRebalance` (members rejoin) → `CompletingRebalance` (the
//! leader computes the assignment) → `Stable` (SyncGroup handed it out). Any membership or
//! protocol change in `CompletingRebalance` or `Stable` goes back to `PreparingRebalance`.
//!
//! JoinGroup and SyncGroup answers are delayed operations: the waiting member's
//! `oneshot::Sender` is kept in its [`ClassicMember`] and completed by an event (the last
//! member rejoins, the leader syncs) or by a deadline that the coordinator's timer task
//! drives through [`ClassicGroup::on_deadlines`]. Everything here is synchronous and takes
//! `now` explicitly, so the state machine is tested without a runtime.

use kafka_protocol::ResponseError;
use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::{Duration, Instant};

use super::GroupError;

/// Bound on member ids handed out with MEMBER_ID_REQUIRED and not yet used, per group (each
/// also expires after its session timeout), so a JoinGroup loop cannot grow a group without
/// limit when `group.max.size` is left at its default.
pub const MAX_PENDING_MEMBERS: usize = 10_000;

/// The states of a classic group, named as Kafka reports them in DescribeGroups/ListGroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassicState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl ClassicState {
    /// The name Kafka uses on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ClassicState::Empty => "Empty",
            ClassicState::PreparingRebalance => "PreparingRebalance",
            ClassicState::CompletingRebalance => "CompletingRebalance",
            ClassicState::Stable => "Stable",
            ClassicState::Dead => "Dead",
        }
    }
}

/// One member in a JoinGroup answer (sent to the leader only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// A JoinGroup answer, before encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResponse {
    pub error_code: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub members: Vec<JoinMember>,
    /// JoinGroup v9: the leader must not compute an assignment (a restarted static leader
    /// took over a stable group without a rebalance).
    pub skip_assignment: bool,
}

impl JoinResponse {
    /// An error answer that keeps the member id (MEMBER_ID_REQUIRED needs it).
    pub fn error(error_code: i16, member_id: &str) -> Self {
        JoinResponse {
            error_code,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
            skip_assignment: false,
        }
    }
}

/// A SyncGroup answer, before encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResponse {
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResponse {
    /// An error answer.
    pub fn error(error_code: i16) -> Self {
        SyncResponse {
            error_code,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// What JoinGroup and SyncGroup return: an answer now, or one to wait for.
#[derive(Debug)]
pub enum Pending<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
}

/// The fields of a JoinGroup request the state machine needs.
#[derive(Debug, Clone)]
pub struct JoinParams {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub client_id: String,
    pub client_host: String,
    /// JoinGroup v4+: an unknown member first gets MEMBER_ID_REQUIRED and a member id.
    pub require_known_member_id: bool,
}

/// Broker settings the classic protocol enforces.
#[derive(Debug, Clone, Copy)]
pub struct ClassicLimits {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_size: usize,
    pub initial_rebalance_delay_ms: i32,
}

/// One member of a classic group.
#[derive(Debug)]
pub struct ClassicMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// What the leader assigned in the current generation.
    pub assignment: Bytes,
    join_waiter: Option<oneshot::Sender<JoinResponse>>,
    sync_waiter: Option<oneshot::Sender<SyncResponse>>,
    /// The member is removed when this passes without a heartbeat, unless it is waiting in
    /// a join or a sync (those phases have their own deadlines).
    session_deadline: Instant,
}

impl ClassicMember {
    /// The metadata the member sent for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    fn awaiting_join(&self) -> bool {
        self.join_waiter.is_some()
    }
}

/// A classic group.
#[derive(Debug)]
pub struct ClassicGroup {
    pub group_id: String,
    pub state: ClassicState,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    /// Members in join order (Kafka keeps a LinkedHashMap; the first becomes leader).
    pub members: Vec<ClassicMember>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, until the member rejoins or its
    /// session timeout passes.
    pending_members: HashMap<String, Instant>,
    /// The end of the join phase (`PreparingRebalance`).
    rebalance_deadline: Option<Instant>,
    /// While set, the join phase waits out `group.initial.rebalance.delay.ms` instead of
    /// completing as soon as everyone has joined.
    initial_delay: Option<InitialDelay>,
    /// Members that have not sent SyncGroup for this generation, and until when they may.
    pending_sync: HashSet<String>,
    sync_deadline: Option<Instant>,
    /// Set when the group metadata record should be written (the leader's assignment of a
    /// generation, or the group became empty). The coordinator clears it after writing.
    pub needs_persist: bool,
    /// The leader's assignment of generation `.0` while its metadata record is on its way to
    /// the high watermark: the group stays `CompletingRebalance`, every SyncGroup stays
    /// parked, until [`Self::complete_sync`] (Kafka's `classicGroupSyncToClassicGroup`
    /// completes the generation in its append future, which `CoordinatorRuntime` completes
    /// once the write is committed).
    assignment_to_store: Option<(i32, HashMap<String, Bytes>)>,
    /// When the group entered its current state, in wall-clock ms (Kafka's
    /// `ClassicGroup.currentStateTimestamp`, written in its metadata record): an Empty
    /// group's offsets expire counting from it. `None` for a group loaded from a record
    /// that did not carry it.
    pub current_state_timestamp_ms: Option<i64>,
}

#[derive(Debug, Clone, Copy)]
struct InitialDelay {
    delay: Duration,
    remaining: Duration,
    new_member_added: bool,
}

impl ClassicGroup {
    /// A new, empty group.
    pub fn new(group_id: String) -> Self {
        ClassicGroup {
            group_id,
            state: ClassicState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: Vec::new(),
            pending_members: HashMap::new(),
            rebalance_deadline: None,
            initial_delay: None,
            pending_sync: HashSet::new(),
            sync_deadline: None,
            needs_persist: false,
            assignment_to_store: None,
            current_state_timestamp_ms: Some(crate::cluster::replica_manager::now_ms()),
        }
    }

    /// Moves the group to `state` and records when (Kafka's `ClassicGroup.transitionTo`).
    fn transition_to(&mut self, state: ClassicState) {
        self.state = state;
        self.current_state_timestamp_ms = Some(crate::cluster::replica_manager::now_ms());
    }

    /// The group as its last metadata record left it, when this node starts coordinating it
    /// (restart, or a move of its offsets partition's leadership). As in Kafka, a group with
    /// members comes back Stable in its generation, each member with a fresh session
    /// timeout: members that are still alive keep heartbeating and committing without a
    /// rebalance, and the others expire.
    pub fn from_record(
        group_id: String,
        meta: super::records::GroupMetadataValue,
        now: Instant,
    ) -> Self {
        let mut g = ClassicGroup::new(group_id);
        g.generation_id = meta.generation;
        g.protocol_type = Some(meta.protocol_type).filter(|t| !t.is_empty());
        g.current_state_timestamp_ms = Some(meta.current_state_timestamp_ms).filter(|ts| *ts >= 0);
        if meta.members.is_empty() {
            return g;
        }
        let protocol = meta.protocol.clone().unwrap_or_default();
        g.protocol_name = meta.protocol;
        g.leader_id = meta.leader;
        g.state = ClassicState::Stable;
        g.members = meta
            .members
            .into_iter()
            .map(|m| ClassicMember {
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                protocols: vec![(protocol.clone(), m.subscription)],
                assignment: m.assignment,
                join_waiter: None,
                sync_waiter: None,
                session_deadline: now + Duration::from_millis(m.session_timeout_ms.max(0) as u64),
            })
            .collect();
        g
    }

    /// Whether the group has no members (pending ones included).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.pending_members.is_empty()
    }

    fn member_index(&self, member_id: &str) -> Option<usize> {
        self.members.iter().position(|m| m.member_id == member_id)
    }

    /// Looks up a member.
    pub fn member(&self, member_id: &str) -> Option<&ClassicMember> {
        self.members.iter().find(|m| m.member_id == member_id)
    }

    fn static_member_id(&self, instance_id: &str) -> Option<String> {
        self.members
            .iter()
            .find(|m| m.group_instance_id.as_deref() == Some(instance_id))
            .map(|m| m.member_id.clone())
    }

    /// Kafka's `validateMember`: a static member must present the member id currently bound
    /// to its instance id, or it is fenced.
    pub fn validate_member(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(instance) = group_instance_id {
            match self.static_member_id(instance) {
                Some(existing) if existing != member_id => {
                    return Err(GroupError::FencedInstanceId)
                }
                Some(_) => return Ok(()),
                None => {}
            }
        }
        if self.member_index(member_id).is_none() {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(())
    }

    /// The protocols every member supports.
    fn candidate_protocols(&self) -> Vec<String> {
        let Some(first) = self.members.first() else {
            return Vec::new();
        };
        first
            .protocols
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| {
                self.members
                    .iter()
                    .all(|m| m.protocols.iter().any(|(p, _)| p == n))
            })
            .collect()
    }

    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let candidates = self.candidate_protocols();
        protocols.iter().any(|(n, _)| candidates.contains(n))
    }

    /// Each member votes for its most preferred candidate protocol; the most votes win.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: Vec<(String, usize)> = candidates.iter().map(|c| (c.clone(), 0)).collect();
        for m in &self.members {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(n)) {
                if let Some(v) = votes.iter_mut().find(|(c, _)| c == name) {
                    v.1 += 1;
                }
            }
        }
        // max_by_key returns the last maximum; iterate reversed so ties go to the first
        // member's preference order.
        votes
            .into_iter()
            .rev()
            .max_by_key(|(_, n)| *n)
            .map(|(c, _)| c)
    }

    fn max_rebalance_timeout(&self) -> Duration {
        let ms = self
            .members
            .iter()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
            .max(0);
        Duration::from_millis(ms as u64)
    }

    // -----------------------------------------------------------------------------------------
    // JoinGroup
    // -----------------------------------------------------------------------------------------

    /// Handles a JoinGroup. `new_member_id` makes a member id for an unknown member.
    pub fn join(
        &mut self,
        p: JoinParams,
        limits: &ClassicLimits,
        now: Instant,
        new_member_id: impl FnOnce() -> String,
    ) -> Result<Pending<JoinResponse>, GroupError> {
        if p.session_timeout_ms < limits.min_session_timeout_ms
            || p.session_timeout_ms > limits.max_session_timeout_ms
        {
            return Err(GroupError::InvalidSessionTimeout);
        }
        if p.protocol_type.is_empty() || p.protocols.is_empty() {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        if self.state == ClassicState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if !self.supports_protocols(&p.protocol_type, &p.protocols) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        if p.member_id.is_empty() {
            self.join_unknown_member(p, limits, now, new_member_id)
        } else {
            self.join_known_member(p, limits, now)
        }
    }

    fn join_unknown_member(
        &mut self,
        p: JoinParams,
        limits: &ClassicLimits,
        now: Instant,
        new_member_id: impl FnOnce() -> String,
    ) -> Result<Pending<JoinResponse>, GroupError> {
        let member_id = new_member_id();
        if let Some(instance) = p.group_instance_id.clone() {
            if let Some(old_id) = self.static_member_id(&instance) {
                // A static member restarted: the new incarnation takes over the old member's
                // place and the old one is fenced (KIP-345).
                self.replace_static_member(&old_id, &member_id);
                let idx = self
                    .member_index(&member_id)
                    .ok_or(GroupError::UnknownMemberId)?;
                // As Kafka: in a stable group, a rejoin that leaves the selected protocol as
                // it is does not rebalance (the metadata bytes differ anyway: owned partitions
                // and generation are gone after a restart).
                let old_protocols =
                    std::mem::replace(&mut self.members[idx].protocols, p.protocols.clone());
                let unchanged = self.select_protocol() == self.protocol_name;
                if !unchanged {
                    self.members[idx].protocols = old_protocols;
                }
                if self.state == ClassicState::Stable && unchanged {
                    // The member gets the current generation and, through SyncGroup, its
                    // old assignment.
                    let m = &mut self.members[idx];
                    m.session_timeout_ms = p.session_timeout_ms;
                    m.rebalance_timeout_ms = p.rebalance_timeout_ms;
                    m.client_id = p.client_id;
                    m.client_host = p.client_host;
                    m.session_deadline = now + Duration::from_millis(p.session_timeout_ms as u64);
                    self.needs_persist = true;
                    let mut r = self.join_response_for(idx);
                    r.skip_assignment = self.leader_id.as_deref() == Some(member_id.as_str());
                    return Ok(Pending::Now(r));
                }
                return Ok(self.update_member_and_rebalance(idx, p, limits, now));
            }
        }
        if self.members.len() + self.pending_members.len() >= limits.max_size
            || self.pending_members.len() >= MAX_PENDING_MEMBERS
        {
            return Err(GroupError::GroupMaxSizeReached);
        }
        if p.require_known_member_id && p.group_instance_id.is_none() {
            // KIP-394: the member must come back with this id; until then it counts as a
            // pending member so that the rebalance waits for it.
            let deadline = now + Duration::from_millis(p.session_timeout_ms as u64);
            self.pending_members.insert(member_id.clone(), deadline);
            return Ok(Pending::Now(JoinResponse::error(
                ResponseError::MemberIdRequired.code(),
                &member_id,
            )));
        }
        Ok(self.add_member_and_rebalance(member_id, p, limits, now))
    }

    fn join_known_member(
        &mut self,
        p: JoinParams,
        limits: &ClassicLimits,
        now: Instant,
    ) -> Result<Pending<JoinResponse>, GroupError> {
        if self.pending_members.remove(&p.member_id).is_some() {
            let member_id = p.member_id.clone();
            return Ok(self.add_member_and_rebalance(member_id, p, limits, now));
        }
        self.validate_member(&p.member_id, p.group_instance_id.as_deref())?;
        let idx = self
            .member_index(&p.member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        match self.state {
            ClassicState::PreparingRebalance => {
                Ok(self.update_member_and_rebalance(idx, p, limits, now))
            }
            ClassicState::CompletingRebalance => {
                if self.members[idx].same_protocols(&p.protocols) {
                    // The member missed the join answer (a retry): send it again.
                    self.members[idx].session_deadline =
                        now + Duration::from_millis(p.session_timeout_ms as u64);
                    Ok(Pending::Now(self.join_response_for(idx)))
                } else {
                    Ok(self.update_member_and_rebalance(idx, p, limits, now))
                }
            }
            ClassicState::Stable => {
                let is_leader = self.leader_id.as_deref() == Some(p.member_id.as_str());
                if is_leader || !self.members[idx].same_protocols(&p.protocols) {
                    // The leader rejoining means it wants a new assignment (metadata changed).
                    Ok(self.update_member_and_rebalance(idx, p, limits, now))
                } else {
                    self.members[idx].session_deadline =
                        now + Duration::from_millis(p.session_timeout_ms as u64);
                    let mut r = self.join_response_for(idx);
                    r.members.clear();
                    Ok(Pending::Now(r))
                }
            }
            ClassicState::Empty | ClassicState::Dead => Err(GroupError::UnknownMemberId),
        }
    }

    fn replace_static_member(&mut self, old_id: &str, new_id: &str) {
        let Some(idx) = self.member_index(old_id) else {
            return;
        };
        let m = &mut self.members[idx];
        if let Some(w) = m.join_waiter.take() {
            let _ = w.send(JoinResponse::error(
                ResponseError::FencedInstanceId.code(),
                old_id,
            ));
        }
        if let Some(w) = m.sync_waiter.take() {
            let _ = w.send(SyncResponse::error(ResponseError::FencedInstanceId.code()));
        }
        m.member_id = new_id.to_string();
        if self.leader_id.as_deref() == Some(old_id) {
            self.leader_id = Some(new_id.to_string());
        }
        if self.pending_sync.remove(old_id) {
            self.pending_sync.insert(new_id.to_string());
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        member_id: String,
        p: JoinParams,
        limits: &ClassicLimits,
        now: Instant,
    ) -> Pending<JoinResponse> {
        let (tx, rx) = oneshot::channel();
        if self.members.is_empty() {
            self.protocol_type = Some(p.protocol_type.clone());
        }
        self.members.push(ClassicMember {
            member_id,
            group_instance_id: p.group_instance_id,
            client_id: p.client_id,
            client_host: p.client_host,
            rebalance_timeout_ms: p.rebalance_timeout_ms,
            session_timeout_ms: p.session_timeout_ms,
            protocol_type: p.protocol_type,
            protocols: p.protocols,
            assignment: Bytes::new(),
            join_waiter: Some(tx),
            sync_waiter: None,
            session_deadline: now + Duration::from_millis(p.session_timeout_ms as u64),
        });
        if let Some(d) = self.initial_delay.as_mut() {
            d.new_member_added = true;
        }
        self.maybe_prepare_rebalance(limits, now);
        Pending::Wait(rx)
    }

    fn update_member_and_rebalance(
        &mut self,
        idx: usize,
        p: JoinParams,
        limits: &ClassicLimits,
        now: Instant,
    ) -> Pending<JoinResponse> {
        let (tx, rx) = oneshot::channel();
        let m = &mut self.members[idx];
        m.protocols = p.protocols;
        m.protocol_type = p.protocol_type;
        m.rebalance_timeout_ms = p.rebalance_timeout_ms;
        m.session_timeout_ms = p.session_timeout_ms;
        m.client_id = p.client_id;
        m.client_host = p.client_host;
        m.session_deadline = now + Duration::from_millis(p.session_timeout_ms as u64);
        if let Some(old) = m.join_waiter.replace(tx) {
            // A second JoinGroup from the same member supersedes the first.
            let _ = old.send(JoinResponse::error(
                ResponseError::RebalanceInProgress.code(),
                &m.member_id,
            ));
        }
        self.maybe_prepare_rebalance(limits, now);
        Pending::Wait(rx)
    }

    fn maybe_prepare_rebalance(&mut self, limits: &ClassicLimits, now: Instant) {
        match self.state {
            ClassicState::PreparingRebalance => self.try_complete_join(now),
            ClassicState::Dead => {}
            _ => self.prepare_rebalance(limits, now),
        }
    }

    /// Puts a `group_rebalance` event on the stream: the group entered `self.state`.
    fn report_phase(&self) {
        crate::events::emit(|| crate::events::EventKind::GroupRebalance {
            group_id: self.group_id.clone(),
            protocol: "classic",
            phase: self.state.as_str(),
            generation: self.generation_id,
            members: self.members.len(),
        });
    }

    /// Moves to `PreparingRebalance`: pending syncs are answered REBALANCE_IN_PROGRESS and
    /// the join phase gets its deadline.
    fn prepare_rebalance(&mut self, limits: &ClassicLimits, now: Instant) {
        if self.state == ClassicState::CompletingRebalance {
            for m in &mut self.members {
                m.assignment = Bytes::new();
                if let Some(w) = m.sync_waiter.take() {
                    let _ = w.send(SyncResponse::error(
                        ResponseError::RebalanceInProgress.code(),
                    ));
                }
            }
        }
        self.pending_sync.clear();
        self.sync_deadline = None;
        self.assignment_to_store = None;
        let was_empty = self.state == ClassicState::Empty;
        self.transition_to(ClassicState::PreparingRebalance);
        self.report_phase();
        let timeout = self.max_rebalance_timeout();
        let delay = Duration::from_millis(limits.initial_rebalance_delay_ms.max(0) as u64);
        if was_empty && !delay.is_zero() {
            let first = delay.min(timeout);
            self.initial_delay = Some(InitialDelay {
                delay,
                remaining: timeout.saturating_sub(first),
                new_member_added: false,
            });
            self.rebalance_deadline = Some(now + first);
        } else {
            self.initial_delay = None;
            self.rebalance_deadline = Some(now + timeout);
            self.try_complete_join(now);
        }
    }

    /// A group just converted from a KIP-848 group whose last consumer-protocol member left
    /// rebalances, so that its members rejoin (Kafka's `convertToClassicGroup`).
    pub(super) fn rebalance_after_downgrade(&mut self, limits: &ClassicLimits, now: Instant) {
        self.prepare_rebalance(limits, now);
    }

    fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.iter().all(|m| m.awaiting_join())
    }

    fn try_complete_join(&mut self, now: Instant) {
        if self.state == ClassicState::PreparingRebalance
            && self.initial_delay.is_none()
            && self.all_members_joined()
        {
            self.complete_join(now);
        }
    }

    /// Ends the join phase: members that did not rejoin are dropped, a new generation
    /// starts, and every waiting member gets its answer (the leader with all members).
    fn complete_join(&mut self, now: Instant) {
        self.initial_delay = None;
        self.rebalance_deadline = None;
        // Dynamic members that did not rejoin in time are removed; static members stay (they
        // keep their place across restarts, KIP-345).
        self.members
            .retain(|m| m.awaiting_join() || m.group_instance_id.is_some());
        if !self.members.is_empty() && !self.members.iter().any(|m| m.awaiting_join()) {
            // Only static members that have not rejoined remain: wait for them or for their
            // sessions to expire.
            let wait = self
                .members
                .iter()
                .map(|m| m.session_timeout_ms)
                .max()
                .unwrap_or(0);
            self.rebalance_deadline = Some(now + Duration::from_millis(wait.max(0) as u64));
            return;
        }
        let leader_joined = self
            .leader_id
            .as_deref()
            .and_then(|l| self.member(l))
            .is_some_and(|m| m.awaiting_join());
        if !leader_joined {
            self.leader_id = self
                .members
                .iter()
                .find(|m| m.awaiting_join())
                .map(|m| m.member_id.clone());
        }
        self.generation_id = self.generation_id.wrapping_add(1);
        if self.members.is_empty() {
            self.transition_to(ClassicState::Empty);
            self.protocol_name = None;
            self.leader_id = None;
            self.needs_persist = true;
            self.report_phase();
            return;
        }
        self.protocol_name = self.select_protocol();
        self.transition_to(ClassicState::CompletingRebalance);
        self.report_phase();
        for idx in 0..self.members.len() {
            if let Some(w) = self.members[idx].join_waiter.take() {
                let mut r = self.join_response_for(idx);
                if self.leader_id.as_deref() != Some(r.member_id.as_str()) {
                    r.members.clear();
                }
                let _ = w.send(r);
            }
            let m = &mut self.members[idx];
            m.session_deadline = now + Duration::from_millis(m.session_timeout_ms as u64);
        }
        self.pending_sync = self.members.iter().map(|m| m.member_id.clone()).collect();
        self.sync_deadline = Some(now + self.max_rebalance_timeout());
    }

    /// The current generation's join answer for member `idx` (members listed only for the
    /// leader).
    fn join_response_for(&self, idx: usize) -> JoinResponse {
        let member_id = self.members[idx].member_id.clone();
        let is_leader = self.leader_id.as_deref() == Some(member_id.as_str());
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = if is_leader {
            self.members
                .iter()
                .map(|m| JoinMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    metadata: m.metadata(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinResponse {
            error_code: 0,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader_id.clone().unwrap_or_default(),
            member_id,
            members,
            skip_assignment: false,
        }
    }

    // -----------------------------------------------------------------------------------------
    // SyncGroup, Heartbeat, LeaveGroup
    // -----------------------------------------------------------------------------------------

    /// Handles a SyncGroup. The leader's assignments complete the generation.
    #[allow(clippy::too_many_arguments)]
    pub fn sync(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) -> Result<Pending<SyncResponse>, GroupError> {
        if self.state == ClassicState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.validate_member(member_id, group_instance_id)?;
        if generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        if protocol_type.is_some_and(|t| Some(t) != self.protocol_type.as_deref())
            || protocol_name.is_some_and(|n| Some(n) != self.protocol_name.as_deref())
        {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        let idx = self
            .member_index(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        match self.state {
            ClassicState::Empty | ClassicState::Dead => Err(GroupError::UnknownMemberId),
            ClassicState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            ClassicState::CompletingRebalance => {
                self.pending_sync.remove(member_id);
                let (tx, rx) = oneshot::channel();
                let m = &mut self.members[idx];
                m.session_deadline = now + Duration::from_millis(m.session_timeout_ms as u64);
                if let Some(old) = m.sync_waiter.replace(tx) {
                    let _ = old.send(SyncResponse::error(
                        ResponseError::RebalanceInProgress.code(),
                    ));
                }
                if self.leader_id.as_deref() == Some(member_id) {
                    // Members the leader left out get an empty assignment, as in Kafka.
                    let assignment = self
                        .members
                        .iter()
                        .map(|m| {
                            let a = assignments.iter().find(|(id, _)| *id == m.member_id);
                            let a = a.map(|(_, a)| a.clone()).unwrap_or_default();
                            (m.member_id.clone(), a)
                        })
                        .collect();
                    self.assignment_to_store = Some((self.generation_id, assignment));
                    self.needs_persist = true;
                }
                Ok(Pending::Wait(rx))
            }
            ClassicState::Stable => {
                self.pending_sync.remove(member_id);
                let m = &mut self.members[idx];
                m.session_deadline = now + Duration::from_millis(m.session_timeout_ms as u64);
                Ok(Pending::Now(SyncResponse {
                    error_code: 0,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment: self.members[idx].assignment.clone(),
                }))
            }
        }
    }

    /// The assignment of `m` the group's metadata record carries: the one being stored
    /// while a leader's SyncGroup waits for its record, else the member's.
    pub fn recorded_assignment(&self, m: &ClassicMember) -> Bytes {
        match &self.assignment_to_store {
            Some((_, a)) => a.get(&m.member_id).cloned().unwrap_or_default(),
            None => m.assignment.clone(),
        }
    }

    /// Whether a leader's assignment of `generation` waits for its metadata record.
    pub fn storing_assignment(&self, generation: i32) -> bool {
        matches!(self.assignment_to_store, Some((g, _)) if g == generation)
    }

    /// The end of a leader's SyncGroup of `generation`, once its metadata record is
    /// committed or its write failed (the append future's callback of Kafka's
    /// `classicGroupSyncToClassicGroup`). Nothing happens if the group has moved on (another
    /// join started a rebalance meanwhile). Committed: the assignment becomes the members',
    /// the group `Stable`, and every parked SyncGroup is answered. Failed: every parked
    /// SyncGroup gets the error (Kafka's `resetAndPropagateAssignmentWithError`) and the
    /// group rebalances.
    pub fn complete_sync(
        &mut self,
        generation: i32,
        committed: Result<(), GroupError>,
        limits: &ClassicLimits,
        now: Instant,
    ) {
        if self.state != ClassicState::CompletingRebalance || self.generation_id != generation {
            return;
        }
        let Some((_, assignment)) = self.assignment_to_store.take_if(|(g, _)| *g == generation)
        else {
            return;
        };
        if let Err(e) = committed {
            for m in &mut self.members {
                m.assignment = Bytes::new();
                if let Some(w) = m.sync_waiter.take() {
                    let _ = w.send(SyncResponse::error(e.error_code()));
                }
            }
            tracing::info!(group = %self.group_id, generation, error = %e, "storing the group assignment failed: rebalancing");
            self.maybe_prepare_rebalance(limits, now);
            return;
        }
        for m in &mut self.members {
            m.assignment = assignment.get(&m.member_id).cloned().unwrap_or_default();
        }
        self.transition_to(ClassicState::Stable);
        self.report_phase();
        let (pt, pn) = (self.protocol_type.clone(), self.protocol_name.clone());
        for m in &mut self.members {
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(SyncResponse {
                    error_code: 0,
                    protocol_type: pt.clone(),
                    protocol_name: pn.clone(),
                    assignment: m.assignment.clone(),
                });
            }
        }
    }

    /// Handles a Heartbeat: refreshes the session, and tells the member about a rebalance.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        match self.state {
            ClassicState::Dead => return Err(GroupError::CoordinatorNotAvailable),
            ClassicState::Empty => return Err(GroupError::UnknownMemberId),
            _ => {}
        }
        self.validate_member(member_id, group_instance_id)?;
        if generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        let idx = self
            .member_index(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        let m = &mut self.members[idx];
        m.session_deadline = now + Duration::from_millis(m.session_timeout_ms as u64);
        if self.state == ClassicState::PreparingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Removes one member on LeaveGroup. `member_id` may be empty for a static member
    /// leaving by instance id (v3+).
    pub fn leave(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        limits: &ClassicLimits,
        now: Instant,
    ) -> Result<(), GroupError> {
        if self.state == ClassicState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let id = match group_instance_id {
            Some(instance) => {
                let bound = self
                    .static_member_id(instance)
                    .ok_or(GroupError::UnknownMemberId)?;
                if !member_id.is_empty() && bound != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
                bound
            }
            None => member_id.to_string(),
        };
        if self.pending_members.remove(&id).is_some() {
            self.try_complete_join(now);
            return Ok(());
        }
        if self.member_index(&id).is_none() {
            return Err(GroupError::UnknownMemberId);
        }
        self.remove_member(&id, ResponseError::UnknownMemberId.code(), limits, now);
        Ok(())
    }

    /// Removes a member (left, expired or fenced) and rebalances the rest.
    fn remove_member(
        &mut self,
        member_id: &str,
        waiter_code: i16,
        limits: &ClassicLimits,
        now: Instant,
    ) {
        let Some(idx) = self.member_index(member_id) else {
            return;
        };
        let mut m = self.members.remove(idx);
        if let Some(w) = m.join_waiter.take() {
            let _ = w.send(JoinResponse::error(waiter_code, member_id));
        }
        if let Some(w) = m.sync_waiter.take() {
            let _ = w.send(SyncResponse::error(waiter_code));
        }
        self.pending_sync.remove(member_id);
        if self.leader_id.as_deref() == Some(member_id) {
            self.leader_id = self.members.first().map(|m| m.member_id.clone());
        }
        match self.state {
            ClassicState::PreparingRebalance => self.try_complete_join(now),
            ClassicState::Stable | ClassicState::CompletingRebalance => {
                self.prepare_rebalance(limits, now)
            }
            ClassicState::Empty | ClassicState::Dead => {}
        }
        if self.members.is_empty() && self.state == ClassicState::PreparingRebalance {
            // Nobody left to wait for: finish the (empty) generation right away.
            if self.pending_members.is_empty() {
                self.complete_join(now);
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Deadlines
    // -----------------------------------------------------------------------------------------

    /// The earliest deadline this group is waiting for.
    pub fn next_deadline(&self) -> Option<Instant> {
        let sessions = self
            .members
            .iter()
            .filter(|m| m.join_waiter.is_none() && m.sync_waiter.is_none())
            .map(|m| m.session_deadline);
        sessions
            .chain(self.pending_members.values().copied())
            .chain(self.rebalance_deadline)
            .chain(self.sync_deadline)
            .min()
    }

    /// Runs every deadline that has passed: session expiry, the end of the join phase,
    /// members that never sent SyncGroup.
    pub fn on_deadlines(&mut self, limits: &ClassicLimits, now: Instant) {
        let expired_pending: Vec<String> = self
            .pending_members
            .iter()
            .filter(|(_, d)| **d <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired_pending {
            self.pending_members.remove(&id);
            self.try_complete_join(now);
        }
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.join_waiter.is_none() && m.sync_waiter.is_none())
            .filter(|m| m.session_deadline <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.group_id, member = %id, "session timeout: removing member");
            self.remove_member(&id, ResponseError::UnknownMemberId.code(), limits, now);
        }
        if self.rebalance_deadline.is_some_and(|d| d <= now)
            && self.state == ClassicState::PreparingRebalance
        {
            match self.initial_delay {
                Some(d) if d.new_member_added && !d.remaining.is_zero() => {
                    let step = d.delay.min(d.remaining);
                    self.initial_delay = Some(InitialDelay {
                        delay: d.delay,
                        remaining: d.remaining - step,
                        new_member_added: false,
                    });
                    self.rebalance_deadline = Some(now + step);
                }
                _ => self.complete_join(now),
            }
        }
        if self.sync_deadline.is_some_and(|d| d <= now) {
            self.sync_deadline = None;
            let laggards: Vec<String> = self.pending_sync.drain().collect();
            if matches!(
                self.state,
                ClassicState::CompletingRebalance | ClassicState::Stable
            ) && !laggards.is_empty()
            {
                for id in laggards {
                    tracing::info!(group = %self.group_id, member = %id, "no SyncGroup within the rebalance timeout: removing member");
                    self.remove_member(&id, ResponseError::RebalanceInProgress.code(), limits, now);
                }
            }
        }
    }

    /// Answers every waiting member with `error_code` (used at shutdown and on deletion).
    pub fn fail_waiters(&mut self, error_code: i16) {
        for m in &mut self.members {
            if let Some(w) = m.join_waiter.take() {
                let _ = w.send(JoinResponse::error(error_code, &m.member_id));
            }
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(SyncResponse::error(error_code));
            }
        }
    }

    /// Kafka's `ClassicGroup.validateDeleteGroup`: decided by the state alone. An `Empty`
    /// group is deleted even with members still pending (a JoinGroup answered
    /// MEMBER_ID_REQUIRED); their rejoin then finds no group and is answered
    /// UNKNOWN_MEMBER_ID, as Kafka's `classicGroupJoinToClassicGroup` does.
    pub fn validate_delete(&self) -> Result<(), GroupError> {
        match self.state {
            ClassicState::Empty => Ok(()),
            ClassicState::Dead => Err(GroupError::GroupIdNotFound),
            ClassicState::PreparingRebalance
            | ClassicState::CompletingRebalance
            | ClassicState::Stable => Err(GroupError::NonEmptyGroup),
        }
    }

    /// Marks the group deleted.
    pub fn mark_dead(&mut self) {
        self.fail_waiters(ResponseError::CoordinatorNotAvailable.code());
        self.transition_to(ClassicState::Dead);
    }

    /// Checks an OffsetCommit against the group (Kafka's `ClassicGroup.validateOffsetCommit`).
    /// A commit with generation -1 and no member id is an admin or simple-consumer commit,
    /// allowed only while the group is empty.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        transactional: bool,
    ) -> Result<(), GroupError> {
        if self.state == ClassicState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if generation_id < 0 && member_id.is_empty() && group_instance_id.is_none() {
            // TxnOffsetCommit below v3 carries no member information at all: Kafka accepts it
            // in any state (ClassicGroup.validateOffsetCommit).
            if self.state == ClassicState::Empty || transactional {
                return Ok(());
            }
            return Err(GroupError::UnknownMemberId);
        }
        if generation_id < 0 && self.state == ClassicState::Empty {
            return Ok(());
        }
        self.validate_member(member_id, group_instance_id)?;
        if generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        // A transactional commit is not refused during a rebalance, as in Kafka.
        if self.state == ClassicState::CompletingRebalance && !transactional {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// The topics members subscribe to, read from their "consumer" protocol metadata; `None`
    /// when the group does not use the consumer protocol type (Kafka then assumes nothing).
    pub fn subscribed_topics(&self) -> Option<HashSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol_name.clone()?;
        let mut topics = HashSet::new();
        for m in &self.members {
            topics.extend(super::consumer_protocol::subscription_topics(
                &m.metadata(&protocol),
            )?);
        }
        Some(topics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ClassicLimits = ClassicLimits {
        min_session_timeout_ms: 6000,
        max_session_timeout_ms: 1_800_000,
        max_size: 3,
        initial_rebalance_delay_ms: 0,
    };

    fn params(member_id: &str) -> JoinParams {
        JoinParams {
            member_id: member_id.into(),
            group_instance_id: None,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"m"))],
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            require_known_member_id: true,
        }
    }

    fn now_answer<T: std::fmt::Debug>(p: Pending<T>) -> T {
        match p {
            Pending::Now(t) => t,
            Pending::Wait(_) => panic!("expected an immediate answer"),
        }
    }

    fn waiting<T>(p: Pending<T>) -> oneshot::Receiver<T> {
        match p {
            Pending::Wait(rx) => rx,
            Pending::Now(_) => panic!("expected a delayed answer"),
        }
    }

    /// The leader's SyncGroup of generation `gen`, its metadata record then committed.
    fn leader_sync(
        g: &mut ClassicGroup,
        (id, instance): (&str, Option<&str>),
        gen: i32,
        assignment: Vec<(String, Bytes)>,
        now: Instant,
    ) -> oneshot::Receiver<SyncResponse> {
        let rx = waiting(
            g.sync(id, instance, gen, None, None, assignment, now)
                .unwrap(),
        );
        assert_eq!(
            g.state,
            ClassicState::CompletingRebalance,
            "until committed"
        );
        g.complete_sync(gen, Ok(()), &LIMITS, now);
        rx
    }

    /// Joins a new member through MEMBER_ID_REQUIRED; returns its id and join receiver.
    fn join_new(
        g: &mut ClassicGroup,
        id: &str,
        now: Instant,
    ) -> (String, oneshot::Receiver<JoinResponse>) {
        let r = now_answer(g.join(params(""), &LIMITS, now, || id.to_string()).unwrap());
        assert_eq!(r.error_code, ResponseError::MemberIdRequired.code());
        assert_eq!(r.member_id, id);
        let rx = waiting(g.join(params(id), &LIMITS, now, || unreachable!()).unwrap());
        (id.to_string(), rx)
    }

    #[test]
    fn single_member_join_sync_heartbeat() {
        let now = Instant::now();
        let mut g = ClassicGroup::new("g".into());
        let (id, mut rx) = join_new(&mut g, "m1", now);
        let r = rx.try_recv().unwrap();
        assert_eq!(r.error_code, 0);
        assert_eq!(r.generation_id, 1);
        assert_eq!(r.leader, "m1");
        assert_eq!(r.protocol_name.as_deref(), Some("range"));
        assert_eq!(r.members.len(), 1);
        assert_eq!(g.state, ClassicState::CompletingRebalance);
        let mut srx = waiting(
            g.sync(
                &id,
                None,
                1,
                None,
                None,
                vec![(id.clone(), Bytes::from_static(b"a1"))],
                now,
            )
            .unwrap(),
        );
        assert!(g.needs_persist);
        assert!(srx.try_recv().is_err(), "answered once the record commits");
        assert_eq!(g.state, ClassicState::CompletingRebalance);
        g.complete_sync(1, Ok(()), &LIMITS, now);
        let s = srx.try_recv().unwrap();
        assert_eq!(s.assignment, Bytes::from_static(b"a1"));
        assert_eq!(g.state, ClassicState::Stable);
        g.heartbeat(&id, None, 1, now).unwrap();
        assert_eq!(
            g.heartbeat(&id, None, 0, now),
            Err(GroupError::IllegalGeneration)
        );
        assert_eq!(
            g.heartbeat("x", None, 1, now),
            Err(GroupError::UnknownMemberId)
        );
    }

    #[test]
    fn a_failed_assignment_write_answers_every_sync_the_error_and_rebalances() {
        let now = Instant::now();
        let mut g = ClassicGroup::new("g".into());
        let (m1, mut rx1) = join_new(&mut g, "m1", now);
        let (m2, mut rx2) = join_new(&mut g, "m2", now);
        rx1.try_recv().unwrap();
        let mut rx1 = waiting(
            g.join(params(&m1), &LIMITS, now, || unreachable!())
                .unwrap(),
        );
        rx1.try_recv().unwrap();
        rx2.try_recv().unwrap();
        let gen = g.generation_id;
        let mut s2 = waiting(g.sync(&m2, None, gen, None, None, vec![], now).unwrap());
        let asg = vec![(m1.clone(), Bytes::from_static(b"x"))];
        let mut s1 = waiting(g.sync(&m1, None, gen, None, None, asg, now).unwrap());
        assert!(g.storing_assignment(gen));
        // A completion of another generation is not this write's.
        g.complete_sync(gen - 1, Ok(()), &LIMITS, now);
        assert!(s1.try_recv().is_err() && s2.try_recv().is_err());
        g.complete_sync(gen, Err(GroupError::CoordinatorNotAvailable), &LIMITS, now);
        let code = ResponseError::CoordinatorNotAvailable.code();
        assert_eq!(s1.try_recv().unwrap().error_code, code);
        assert_eq!(s2.try_recv().unwrap().error_code, code);
        assert_eq!(g.state, ClassicState::PreparingRebalance);
        assert!(g.members.iter().all(|m| m.assignment.is_empty()));
        assert!(!g.storing_assignment(gen));
    }

    #[test]
    fn second_member_waits_for_first_to_rejoin() {
        let now = Instant::now();
        let mut g = ClassicGroup::new("g".into());
        let (m1, mut rx1) = join_new(&mut g, "m1", now);
        rx1.try_recv().unwrap();
        leader_sync(&mut g, (&m1, None), 1, vec![], now);
        let (_m2, mut rx2) = join_new(&mut g, "m2", now);
        assert_eq!(g.state, ClassicState::PreparingRebalance);
        assert!(rx2.try_recv().is_err(), "m2 waits for m1");
        assert_eq!(
            g.heartbeat(&m1, None, 1, now),
            Err(GroupError::RebalanceInProgress)
        );
        let mut rx1 = waiting(
            g.join(params(&m1), &LIMITS, now, || unreachable!())
                .unwrap(),
        );
        let r1 = rx1.try_recv().unwrap();
        let r2 = rx2.try_recv().unwrap();
        assert_eq!(r1.generation_id, 2);
        assert_eq!(r1.leader, "m1", "the old leader stays leader");
        assert_eq!(r1.members.len(), 2);
        assert!(r2.members.is_empty());
    }

    #[test]
    fn members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() {
        let now = Instant::now();
        let mut g = ClassicGroup::new("g".into());
        let (m1, mut rx1) = join_new(&mut g, "m1", now);
        rx1.try_recv().unwrap();
        leader_sync(&mut g, (&m1, None), 1, vec![], now);
        let (m2, mut rx2) = join_new(&mut g, "m2", now);
        // m1 never rejoins; its session is kept alive by heartbeats.
        let later = now + Duration::from_millis(5_000);
        let _ = g.heartbeat(&m1, None, 1, later);
        g.on_deadlines(&LIMITS, now + Duration::from_millis(30_000));
        let r2 = rx2.try_recv().unwrap();
        assert_eq!(r2.error_code, 0);
        assert_eq!(r2.leader, m2);
        assert!(g.member(&m1).is_none());
        assert_eq!(g.members.len(), 1);
    }

    #[test]
    fn session_expiry_removes_member_and_rebalances() {
        let now = Instant::now();
        let mut g = ClassicGroup::new("g".into());
        let (m1, mut rx1) = join_new(&mut g, "m1", now);
        let (m2, mut rx2) = join_new(&mut g, "m2", now);
        // m1 joined alone first (generation 1), then m2 triggered generation 2 which m1 has
        // not rejoined yet; complete it by rejoining m1.
        rx1.try_recv().unwrap();
        let mut rx1 = waiting(
            g.join(params(&m1), &LIMITS, now, || unreachable!())
                .unwrap(),
        );
        rx1.try_recv().unwrap();
        rx2.try_recv().unwrap();
        let gen = g.generation_id;
        leader_sync(&mut g, (&m1, None), gen, vec![], now);
        g.sync(&m2, None, gen, None, None, vec![], now).unwrap();
        assert_eq!(g.state, ClassicState::Stable);
        let t = now + Duration::from_millis(8_000);
        g.heartbeat(&m2, None, gen, t).unwrap();
        g.on_deadlines(&LIMITS, now + Duration::from_millis(10_000));
        assert!(g.member(&m1).is_none(), "m1 expired");
        assert_eq!(g.state, ClassicState::PreparingRebalance);
    }

    #[test]
    fn bad_joins_get_kafka_errors() {
        let now = Instant::now();
        let mut g = ClassicGroup::new("g".into());
        let mut p = params("");
        p.session_timeout_ms = 10;
        assert_eq!(
            g.join(p, &LIMITS, now, || "x".into()).unwrap_err(),
            GroupError::InvalidSessionTimeout
        );
        let mut p = params("");
        p.protocols.clear();
        assert_eq!(
            g.join(p, &LIMITS, now, || "x".into()).unwrap_err(),
            GroupError::InconsistentGroupProtocol
        );
        let (_m1, _rx) = join_new(&mut g, "m1", now);
        let mut p = params("");
        p.protocols = vec![("roundrobin".into(), Bytes::new())];
        assert_eq!(
            g.join(p, &LIMITS, now, || "x".into()).unwrap_err(),
            GroupError::InconsistentGroupProtocol
        );
        assert_eq!(
            g.join(params("unknown"), &LIMITS, now, || "x".into())
                .unwrap_err(),
            GroupError::UnknownMemberId
        );
        join_new(&mut g, "m2", now);
        join_new(&mut g, "m3", now);
        assert_eq!(
            g.join(params(""), &LIMITS, now, || "m4".into())
                .unwrap_err(),
            GroupError::GroupMaxSizeReached
        );
    }

    #[test]
    fn static_member_replacement_fences_old_id() {
        let now = Instant::now();
        let mut g = ClassicGroup::new("g".into());
        let mut p = params("");
        p.group_instance_id = Some("i1".into());
        let mut rx = waiting(g.join(p.clone(), &LIMITS, now, || "a".into()).unwrap());
        rx.try_recv().unwrap();
        let asg = vec![("a".to_string(), Bytes::from_static(b"x"))];
        leader_sync(&mut g, ("a", Some("i1")), 1, asg, now);
        assert_eq!(g.state, ClassicState::Stable);
        // The restarted instance takes over without a rebalance and keeps its assignment.
        let r = now_answer(g.join(p, &LIMITS, now, || "b".into()).unwrap());
        assert_eq!((r.error_code, r.generation_id), (0, 1));
        assert_eq!(r.member_id, "b");
        assert!(r.skip_assignment, "the leader must not reassign");
        assert_eq!(g.state, ClassicState::Stable);
        let s = now_answer(g.sync("b", Some("i1"), 1, None, None, vec![], now).unwrap());
        assert_eq!(s.assignment, Bytes::from_static(b"x"));
        assert!(g.member("a").is_none());
        assert_eq!(
            g.heartbeat("a", Some("i1"), g.generation_id, now),
            Err(GroupError::FencedInstanceId)
        );
    }

    #[test]
    fn leave_during_stable_triggers_rebalance_and_empty_group_persists() {
        let now = Instant::now();
        let mut g = ClassicGroup::new("g".into());
        let (m1, mut rx1) = join_new(&mut g, "m1", now);
        rx1.try_recv().unwrap();
        leader_sync(&mut g, (&m1, None), 1, vec![], now);
        g.needs_persist = false;
        g.leave(&m1, None, &LIMITS, now).unwrap();
        assert_eq!(g.state, ClassicState::Empty);
        assert!(g.needs_persist);
        assert_eq!(g.generation_id, 2);
        assert_eq!(
            g.leave(&m1, None, &LIMITS, now),
            Err(GroupError::UnknownMemberId)
        );
    }

    #[test]
    fn offset_commit_validation() {
        let now = Instant::now();
        let mut g = ClassicGroup::new("g".into());
        g.validate_offset_commit("", None, -1, false).unwrap();
        let (m1, mut rx1) = join_new(&mut g, "m1", now);
        rx1.try_recv().unwrap();
        assert_eq!(
            g.validate_offset_commit(&m1, None, 1, false),
            Err(GroupError::RebalanceInProgress)
        );
        // TxnOffsetCommit: no rebalance check, and no member information is fine.
        g.validate_offset_commit(&m1, None, 1, true).unwrap();
        g.validate_offset_commit("", None, -1, true).unwrap();
        leader_sync(&mut g, (&m1, None), 1, vec![], now);
        g.validate_offset_commit(&m1, None, 1, false).unwrap();
        assert_eq!(
            g.validate_offset_commit(&m1, None, 0, false),
            Err(GroupError::IllegalGeneration)
        );
        assert_eq!(
            g.validate_offset_commit(&m1, None, 0, true),
            Err(GroupError::IllegalGeneration)
        );
        assert_eq!(
            g.validate_offset_commit("", None, -1, false),
            Err(GroupError::UnknownMemberId)
        );
        g.validate_offset_commit("", None, -1, true).unwrap();
    }

    #[test]
    fn initial_delay_holds_the_first_join() {
        let limits = ClassicLimits {
            initial_rebalance_delay_ms: 3000,
            ..LIMITS
        };
        let now = Instant::now();
        let mut g = ClassicGroup::new("g".into());
        let _ = g.join(params(""), &limits, now, || "m1".into()).unwrap();
        let mut rx = waiting(
            g.join(params("m1"), &limits, now, || unreachable!())
                .unwrap(),
        );
        assert!(rx.try_recv().is_err());
        g.on_deadlines(&limits, now + Duration::from_millis(3000));
        assert_eq!(rx.try_recv().unwrap().generation_id, 1);
    }
}
