//! KIP-1071 streams groups (StreamsGroupHeartbeat): the broker keeps the application's
//! topology, decides its internal topics' partition counts ([`super::streams_topology`]),
//! assigns tasks to members ([`super::streams_assignor`]) and moves each member towards its
//! target one heartbeat at a time.
//!
//! Mirrors Kafka's `GroupMetadataManager.streamsGroupHeartbeat`, `StreamsGroup`,
//! `StreamsGroupMember` and `streams.CurrentAssignmentBuilder`. A task is a (subtopology,
//! partition) pair; a member owns active, standby and warm-up tasks (`TasksTuple`). Tasks
//! move only after their previous owner gave them up: an active task is not handed out while
//! another member still holds it, nor while another member of the same process holds it as a
//! standby.
//!
//! Persisted in `__consumer_offsets` as Kafka's streams records ([`super::streams_records`]):
//! after a coordinator move or restart the new coordinator reads the group back, members,
//! epochs, topology and assignments, and its members carry on at their epochs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::streams_assignor::{assign, AssignMember};
use super::streams_topology::{configure, ConfiguredTopology, Topology};
use super::GroupError;

/// Subtopology id → partitions: the tasks of one kind.
pub type Tasks = BTreeMap<String, BTreeSet<i32>>;

/// Epoch -2: a static member leaves for a while.
const LEAVE_STATIC_EPOCH: i32 = -2;

/// Status codes of StreamsGroupHeartbeatResponse (Kafka's `StreamsGroupHeartbeatResponse.Status`).
pub mod status {
    pub const STALE_TOPOLOGY: i8 = 0;
    pub const MISSING_SOURCE_TOPICS: i8 = 1;
    pub const INCORRECTLY_PARTITIONED_TOPICS: i8 = 2;
    pub const MISSING_INTERNAL_TOPICS: i8 = 3;
    pub const SHUTDOWN_APPLICATION: i8 = 4;
    pub const ASSIGNMENT_DELAYED: i8 = 5;
}

/// A member's active, standby and warm-up tasks (Kafka's `TasksTuple`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TasksTuple {
    pub active: Tasks,
    pub standby: Tasks,
    pub warmup: Tasks,
}

impl TasksTuple {
    pub fn is_empty(&self) -> bool {
        [&self.active, &self.standby, &self.warmup]
            .iter()
            .all(|t| t.values().all(|p| p.is_empty()))
    }

    /// Whether any task of `other` is held here as the same kind (`TasksTuple.containsAny`).
    fn contains_any(&self, other: &TasksTuple) -> bool {
        intersects(&self.active, &other.active)
            || intersects(&self.standby, &other.standby)
            || intersects(&self.warmup, &other.warmup)
    }
}

fn intersects(a: &Tasks, b: &Tasks) -> bool {
    a.iter()
        .any(|(s, ps)| b.get(s).is_some_and(|q| !ps.is_disjoint(q)))
}

fn has(t: &Tasks, subtopology: &str, partition: i32) -> bool {
    t.get(subtopology).is_some_and(|p| p.contains(&partition))
}

fn add(t: &mut Tasks, subtopology: &str, partition: i32) {
    t.entry(subtopology.to_string())
        .or_default()
        .insert(partition);
}

/// A member's reconciliation state (Kafka's `streams.MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    /// The member must give up `pending_revocation` before it moves to the next epoch.
    UnrevokedTasks,
    /// At the target epoch, but some target tasks are still held by others.
    UnreleasedTasks,
}

impl MemberState {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberState::Stable => "STABLE",
            MemberState::UnrevokedTasks => "UNREVOKED_TASKS",
            MemberState::UnreleasedTasks => "UNRELEASED_TASKS",
        }
    }
}

/// One member of a streams group (Kafka's `StreamsGroupMember`).
#[derive(Debug, Clone)]
pub struct StreamsMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub rebalance_timeout_ms: i32,
    pub topology_epoch: i32,
    /// The Kafka Streams instance the member belongs to; its members share state stores.
    pub process_id: String,
    pub user_endpoint: Option<(String, u16)>,
    pub client_tags: BTreeMap<String, String>,
    /// What the member may own now.
    pub assigned: TasksTuple,
    /// What the member still owns but must give up.
    pub pending_revocation: TasksTuple,
    pub(super) session_deadline: Instant,
    pub(super) revocation_deadline: Option<Instant>,
}

impl StreamsMember {
    pub(super) fn new(member_id: &str, session_deadline: Instant) -> Self {
        StreamsMember {
            member_id: member_id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            member_epoch: 0,
            previous_member_epoch: -1,
            state: MemberState::Stable,
            rebalance_timeout_ms: -1,
            topology_epoch: -1,
            process_id: String::new(),
            user_endpoint: None,
            client_tags: BTreeMap::new(),
            assigned: TasksTuple::default(),
            pending_revocation: TasksTuple::default(),
            session_deadline,
            revocation_deadline: None,
        }
    }

    /// The fields of Kafka's `StreamsGroupMemberMetadataValue`: a change is a new group epoch.
    #[allow(clippy::type_complexity)]
    fn metadata(
        &self,
    ) -> (
        &Option<String>,
        &Option<String>,
        &str,
        &str,
        i32,
        i32,
        &str,
        &Option<(String, u16)>,
        &BTreeMap<String, String>,
    ) {
        (
            &self.instance_id,
            &self.rack_id,
            &self.client_id,
            &self.client_host,
            self.rebalance_timeout_ms,
            self.topology_epoch,
            &self.process_id,
            &self.user_endpoint,
            &self.client_tags,
        )
    }
}

/// A StreamsGroupHeartbeat, decoded.
#[derive(Debug, Clone, Default)]
pub struct StreamsHeartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub endpoint_information_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub topology: Option<Topology>,
    /// The tasks the member owns; `None` when it did not say (unchanged).
    pub owned: Option<TasksTuple>,
    pub process_id: Option<String>,
    pub user_endpoint: Option<(String, u16)>,
    pub client_tags: Option<BTreeMap<String, String>>,
    pub shutdown_application: bool,
    pub client_id: String,
    pub client_host: String,
}

/// One user endpoint and the topic partitions its member serves (Interactive Queries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPartitions {
    pub endpoint: (String, u16),
    pub active: BTreeMap<String, BTreeSet<i32>>,
    pub standby: BTreeMap<String, BTreeSet<i32>>,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, Default)]
pub struct StreamsHeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    /// `Some` when the member must (re)read its tasks.
    pub tasks: Option<TasksTuple>,
    pub endpoint_information_epoch: i32,
    pub partitions_by_endpoint: Option<Vec<EndpointPartitions>>,
    /// (status code, detail).
    pub status: Vec<(i8, String)>,
    /// Internal topics the broker must create: (name, partitions, replication factor or -1,
    /// configs).
    pub to_create: Vec<super::streams_topology::TopicToCreate>,
}

/// The `group.streams.*` settings the coordinator enforces.
#[derive(Debug, Clone, Copy)]
pub struct StreamsLimits {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub num_standby_replicas: i32,
    pub max_size: usize,
    /// `group.streams.initial.rebalance.delay.ms`, or the group's
    /// `streams.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay_ms: i32,
}

/// A streams group. Cloned before a heartbeat, to put back should the write of its records
/// fail.
#[derive(Debug, Clone)]
pub struct StreamsGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, StreamsMember>,
    /// The target assignment of `assignment_epoch`, by member.
    pub target: HashMap<String, TasksTuple>,
    pub topology: Option<Topology>,
    pub configured: Option<ConfiguredTopology>,
    /// The topology epoch whose topics were found valid, -1 if none.
    pub validated_topology_epoch: i32,
    /// A hash of the partition counts of the topology's topics the configuration was
    /// computed from ([`metadata_hash`]): a change reconfigures and is a new group epoch
    /// (Kafka's metadata hash; persisted in the group's epoch record).
    pub(super) metadata_hash: i64,
    endpoint_information_epoch: i32,
    /// The standby count the target was computed with (Kafka's last assignment configs).
    pub(super) standby_seen: i32,
    shutdown_requested_by: Option<String>,
    /// While set, no target assignment is computed: the first member joined the empty group
    /// and others get the initial rebalance delay to join (Kafka's timer under
    /// `streamsInitialRebalanceKey`, whose expiry runs `computeDelayedTargetAssignment`).
    /// Not persisted, as Kafka's timers are not: a new coordinator assigns at once.
    initial_rebalance_deadline: Option<Instant>,
}

impl StreamsGroup {
    pub fn new(group_id: String) -> Self {
        StreamsGroup {
            group_id,
            group_epoch: super::INITIAL_GROUP_EPOCH,
            assignment_epoch: super::INITIAL_GROUP_EPOCH,
            members: BTreeMap::new(),
            target: HashMap::new(),
            topology: None,
            configured: None,
            validated_topology_epoch: -1,
            metadata_hash: 0,
            endpoint_information_epoch: 0,
            standby_seen: 0,
            shutdown_requested_by: None,
            initial_rebalance_deadline: None,
        }
    }

    /// Kafka's `StreamsGroup.StreamsGroupState` names.
    pub fn state_str(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if !self.configured.as_ref().is_some_and(|c| c.is_ready()) {
            "NotReady"
        } else if self.group_epoch > self.assignment_epoch {
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

    /// The source and repartition topics the group reads (its offsets stay while it does).
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.topology
            .as_ref()
            .map(|t| t.input_topics())
            .unwrap_or_default()
    }

    fn bump_epoch(&mut self) {
        self.group_epoch = self.group_epoch.wrapping_add(1).max(1);
        crate::events::emit(|| crate::events::EventKind::GroupRebalance {
            group_id: self.group_id.clone(),
            protocol: "streams",
            phase: "Assigning",
            generation: self.group_epoch,
            members: self.members.len(),
        });
    }

    /// Handles a StreamsGroupHeartbeat (Kafka's `streamsGroupHeartbeat`). `partitions`
    /// gives an existing topic's partition count.
    pub fn heartbeat(
        &mut self,
        p: StreamsHeartbeat,
        limits: &StreamsLimits,
        partitions: &dyn Fn(&str) -> Option<i32>,
        now: Instant,
    ) -> Result<StreamsHeartbeatResult, GroupError> {
        validate_request(&p)?;
        if p.member_epoch < 0 {
            return self.leave(&p.member_id, p.member_epoch);
        }
        let session = Duration::from_millis(limits.session_timeout_ms.max(0) as u64);
        let joining = p.member_epoch == 0;
        let was_empty = self.members.is_empty();
        let (before, mut bump) = self.member_for(&p, limits, now + session)?;
        let mut status = Vec::new();
        if let Some(t) = &p.topology {
            bump |= self.maybe_set_topology(t)?;
        }
        let m = self
            .members
            .get_mut(&p.member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        m.session_deadline = now + session;
        if let Some(t) = &self.topology {
            if m.topology_epoch < t.epoch {
                status.push((
                    status::STALE_TOPOLOGY,
                    format!(
                        "The member's topology epoch {} is behind the group's topology epoch {}.",
                        m.topology_epoch, t.epoch
                    ),
                ));
            }
        }
        bump |= self.reconfigure(partitions);
        if let (Some(c), Some(owned)) = (&self.configured, &p.owned) {
            if c.is_ready() {
                c.check_tasks(owned)?;
            }
        }
        if limits.num_standby_replicas != self.standby_seen {
            self.standby_seen = limits.num_standby_replicas;
            bump = true;
        }
        if bump {
            self.bump_epoch();
        }
        self.update_target(limits, bump && was_empty, now, &mut status);
        self.reconcile(&p.member_id, p.owned.as_ref(), now);
        if p.shutdown_application {
            self.shutdown_requested_by = Some(p.member_id.clone());
        }
        self.answer(&p, joining, before, status)
    }

    /// The member a heartbeat is from: a joining one is created (or taken back), any other
    /// must exist at the epoch it names (Kafka's `throwIfStreamsGroupMemberEpochIsInvalid`).
    /// Updates its metadata; returns its tasks before this heartbeat, and whether the group
    /// needs a new epoch (a new member or changed metadata).
    fn member_for(
        &mut self,
        p: &StreamsHeartbeat,
        limits: &StreamsLimits,
        session_deadline: Instant,
    ) -> Result<(Option<TasksTuple>, bool), GroupError> {
        let exists = self.members.contains_key(&p.member_id);
        if p.member_epoch == 0 && !exists && self.members.len() >= limits.max_size {
            return Err(GroupError::GroupMaxSizeReached);
        }
        if p.member_epoch != 0 {
            let m = self
                .members
                .get(&p.member_id)
                .ok_or(GroupError::UnknownMemberId)?;
            if p.member_epoch > m.member_epoch {
                return Err(GroupError::FencedMemberEpoch);
            }
            if p.member_epoch < m.member_epoch {
                let owned_ok = p.owned.as_ref().is_some_and(|o| contained(o, &m.assigned));
                if !(p.member_epoch == m.previous_member_epoch && owned_ok) {
                    return Err(GroupError::FencedMemberEpoch);
                }
            }
        }
        let m = self
            .members
            .entry(p.member_id.clone())
            .or_insert_with(|| StreamsMember::new(&p.member_id, session_deadline));
        let before = exists.then(|| m.assigned.clone());
        let old = m.clone();
        if p.rack_id.is_some() {
            m.rack_id = p.rack_id.clone();
        }
        if p.rebalance_timeout_ms != -1 {
            m.rebalance_timeout_ms = p.rebalance_timeout_ms;
        }
        if let Some(t) = &p.topology {
            m.topology_epoch = t.epoch;
        }
        m.client_id = p.client_id.clone();
        m.client_host = p.client_host.clone();
        if let Some(id) = &p.process_id {
            m.process_id = id.clone();
        }
        if let Some(tags) = &p.client_tags {
            m.client_tags = tags.clone();
        }
        if p.user_endpoint.is_some() {
            m.user_endpoint = p.user_endpoint.clone();
        }
        let changed = !exists || old.metadata() != m.metadata();
        Ok((before, changed))
    }

    /// The first topology a member brings initializes the group's (Kafka's
    /// `maybeUpdateTopology`); a later one with the same epoch must be the same topology.
    fn maybe_set_topology(&mut self, t: &Topology) -> Result<bool, GroupError> {
        match &self.topology {
            None => {
                self.topology = Some(t.clone());
                self.configured = None;
                Ok(true)
            }
            Some(current) if current.epoch == t.epoch && current != t => {
                Err(GroupError::StreamsInvalidTopologyEpoch(format!(
                    "Topology epoch {} is already used by a different topology.",
                    t.epoch
                )))
            }
            Some(_) => Ok(false),
        }
    }

    /// Reconfigures the topology's topics when their partition counts changed or it was
    /// never configured (Kafka's `InternalTopicManager.configureTopics` behind the metadata
    /// hash check). Returns whether the group needs a new epoch.
    fn reconfigure(&mut self, partitions: &dyn Fn(&str) -> Option<i32>) -> bool {
        let Some(topology) = &self.topology else {
            return false;
        };
        let seen: BTreeMap<String, i32> = topology
            .all_topics()
            .into_iter()
            .map(|t| {
                let n = partitions(&t).unwrap_or(-1);
                (t, n)
            })
            .collect();
        let hash = metadata_hash(&seen);
        let mut bump = false;
        if hash != self.metadata_hash || self.configured.is_none() {
            bump = hash != self.metadata_hash;
            self.configured = Some(configure(topology, partitions));
            self.metadata_hash = hash;
        }
        let validated = match &self.configured {
            Some(c) if c.is_ready() => topology.epoch,
            _ => -1,
        };
        if validated != self.validated_topology_epoch {
            self.validated_topology_epoch = validated;
            bump = true;
        }
        bump
    }

    /// The target assignment a heartbeat reconciles its member towards (Kafka's
    /// `streamsGroupHeartbeat` calling `maybeUpdateStreamsTargetAssignment`): while the
    /// initial rebalance delay runs, none is computed, the member is reconciled towards an
    /// empty target at the assignment epoch and told ASSIGNMENT_DELAYED; otherwise a new
    /// group epoch gets a new target. `first_join`: the heartbeat bumped the epoch of an empty
    /// group.
    fn update_target(
        &mut self,
        limits: &StreamsLimits,
        first_join: bool,
        now: Instant,
        status: &mut Vec<(i8, String)>,
    ) {
        if first_join {
            self.schedule_initial_rebalance(limits, now);
        }
        if self.initial_rebalance_pending(now) {
            status.push((
                status::ASSIGNMENT_DELAYED,
                "Assignment delayed due to the configured initial rebalance delay.".into(),
            ));
        } else if self.group_epoch > self.assignment_epoch {
            self.compute_target(limits);
        }
    }

    /// The first member of an empty group starts the initial rebalance delay, unless it is 0
    /// or already running (Kafka's `streamsGroupHeartbeat`: `timer.scheduleIfAbsent` under
    /// `streamsInitialRebalanceKey` when the group epoch is bumped on an empty group).
    ///
    /// The member must be answered a member epoch above 0: the Kafka Streams 4.4 client
    /// (`StreamsGroupHeartbeatRequestManager.HeartbeatState.buildRequestData`) sends the
    /// topology and RebalanceTimeoutMs only while JOINING, so its next heartbeat at epoch 0
    /// would be refused with INVALID_REQUEST. It is given the assignment epoch: a group emptied
    /// before has it at its group epoch (see [`Self::remove_epoch`]), and a new group at
    /// [`super::INITIAL_GROUP_EPOCH`] while the join moved the group epoch to 2 (Kafka 4.4's
    /// `StreamsGroup` starts at `TargetAssignmentMetadata.INITIAL`; StreamsGroupDescribe:
    /// group epoch 2, assignment epoch 1, measured with streams_wire.rs
    /// `a_streams_client_joining_a_new_group_waits_out_the_initial_rebalance_delay`).
    fn schedule_initial_rebalance(&mut self, limits: &StreamsLimits, now: Instant) {
        let delay = Duration::from_millis(limits.initial_rebalance_delay_ms.max(0) as u64);
        if delay.is_zero() || self.initial_rebalance_pending(now) {
            return;
        }
        self.initial_rebalance_deadline = Some(now + delay);
    }

    /// Whether the initial rebalance delay still holds the target assignment back; a passed
    /// deadline is cleared (Kafka's timer has fired).
    fn initial_rebalance_pending(&mut self, now: Instant) -> bool {
        match self.initial_rebalance_deadline {
            Some(d) if d > now => true,
            Some(_) => {
                self.initial_rebalance_deadline = None;
                false
            }
            None => false,
        }
    }

    /// The initial rebalance delay ran out: the target assignment of the members that
    /// joined meanwhile is computed (Kafka's `computeDelayedTargetAssignment`; nothing when
    /// the group emptied or is assigned already).
    fn on_initial_rebalance_deadline(&mut self, limits: &StreamsLimits, now: Instant) {
        if self.initial_rebalance_pending(now) {
            return;
        }
        if !self.members.is_empty() && self.group_epoch > self.assignment_epoch {
            self.compute_target(limits);
        }
    }

    /// A new target assignment at the group epoch (Kafka's `TargetAssignmentBuilder` with
    /// the `sticky` assignor); with a topology not ready, every member's target is empty.
    fn compute_target(&mut self, limits: &StreamsLimits) {
        let empty = BTreeMap::new();
        let (tasks, stateful) = match &self.configured {
            Some(c) if c.is_ready() => (&c.tasks, c.stateful.clone()),
            _ => (&empty, BTreeSet::new()),
        };
        let members: Vec<AssignMember> = self
            .members
            .values()
            .map(|m| AssignMember {
                member_id: m.member_id.clone(),
                process_id: m.process_id.clone(),
                previous: self.target.get(&m.member_id).cloned().unwrap_or_default(),
            })
            .collect();
        let standby = limits.num_standby_replicas.max(0) as usize;
        self.target = assign(&members, tasks, &stateful, standby);
        self.assignment_epoch = self.group_epoch;
    }

    /// Who holds each task now, other than `except`: the process of each active task's
    /// holder, and the processes holding each task as a standby or warm-up (Kafka's
    /// `currentActiveTaskProcessId`, `currentStandbyTaskProcessIds`,
    /// `currentWarmupTaskProcessIds`).
    #[allow(clippy::type_complexity)]
    fn holders(
        &self,
        except: &str,
    ) -> (
        HashMap<(String, i32), String>,
        HashMap<(String, i32), BTreeSet<String>>,
    ) {
        let mut active = HashMap::new();
        let mut others: HashMap<(String, i32), BTreeSet<String>> = HashMap::new();
        for m in self.members.values().filter(|m| m.member_id != except) {
            for set in [&m.assigned, &m.pending_revocation] {
                for (s, ps) in &set.active {
                    for p in ps {
                        active.insert((s.clone(), *p), m.process_id.clone());
                    }
                }
                for t in [&set.standby, &set.warmup] {
                    for (s, ps) in t {
                        for p in ps {
                            others
                                .entry((s.clone(), *p))
                                .or_default()
                                .insert(m.process_id.clone());
                        }
                    }
                }
            }
        }
        (active, others)
    }

    /// Moves one member towards its target (Kafka's `streams.CurrentAssignmentBuilder`).
    fn reconcile(&mut self, member_id: &str, owned: Option<&TasksTuple>, now: Instant) {
        let (active_holder, other_holders) = self.holders(member_id);
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let epoch = self.assignment_epoch;
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        match m.state {
            MemberState::Stable if m.member_epoch == epoch => return,
            // Waits until the member no longer reports the tasks it must give up.
            MemberState::UnrevokedTasks
                if owned.is_none_or(|o| o.contains_any(&m.pending_revocation)) =>
            {
                return
            }
            _ => {}
        }
        let process = m.process_id.clone();
        let held_by_process = |s: &str, p: i32| {
            other_holders
                .get(&(s.to_string(), p))
                .is_some_and(|ps| ps.contains(&process))
        };
        let active_unreleased = |s: &str, p: i32| {
            active_holder.contains_key(&(s.to_string(), p)) || held_by_process(s, p)
        };
        let other_unreleased = |s: &str, p: i32| {
            active_holder.get(&(s.to_string(), p)) == Some(&process) || held_by_process(s, p)
        };
        let (a_keep, a_revoke, a_new, a_wait) =
            difference(&m.assigned.active, &target.active, &active_unreleased);
        let (s_keep, s_revoke, s_new, s_wait) =
            difference(&m.assigned.standby, &target.standby, &other_unreleased);
        let (w_keep, w_revoke, w_new, w_wait) =
            difference(&m.assigned.warmup, &target.warmup, &other_unreleased);
        let revoke = TasksTuple {
            active: a_revoke,
            standby: s_revoke,
            warmup: w_revoke,
        };
        let kept = TasksTuple {
            active: a_keep,
            standby: s_keep,
            warmup: w_keep,
        };
        let unreleased = a_wait || s_wait || w_wait;
        if !revoke.is_empty() && owned.is_none_or(|o| o.contains_any(&revoke)) {
            // It stays at its epoch until it has given them up.
            m.assigned = kept;
            m.pending_revocation = revoke;
            m.state = MemberState::UnrevokedTasks;
            let timeout = Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64);
            m.revocation_deadline = Some(now + timeout);
            return;
        }
        let mut assigned = kept;
        merge(&mut assigned.active, a_new);
        merge(&mut assigned.standby, s_new);
        merge(&mut assigned.warmup, w_new);
        set_epoch(m, epoch);
        m.assigned = assigned;
        m.pending_revocation = TasksTuple::default();
        m.revocation_deadline = None;
        m.state = if unreleased {
            MemberState::UnreleasedTasks
        } else {
            MemberState::Stable
        };
    }

    /// The response: tasks when joining or when they changed, the endpoint information when
    /// the member's epoch of it is old, and the statuses.
    fn answer(
        &mut self,
        p: &StreamsHeartbeat,
        joining: bool,
        before: Option<TasksTuple>,
        mut status: Vec<(i8, String)>,
    ) -> Result<StreamsHeartbeatResult, GroupError> {
        let m = self
            .members
            .get(&p.member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        let changed = joining || before.as_ref() != Some(&m.assigned);
        let tasks = changed.then(|| m.assigned.clone());
        if changed && m.user_endpoint.is_some() {
            self.endpoint_information_epoch += 1;
        }
        let partitions_by_endpoint = (self.endpoint_information_epoch
            != p.endpoint_information_epoch)
            .then(|| self.endpoint_partitions());
        let mut to_create = Vec::new();
        if let Some(c) = &self.configured {
            if let Some(s) = &c.status {
                status.push(s.clone());
                to_create = c.to_create.clone();
            }
        }
        if let Some(by) = &self.shutdown_requested_by {
            status.push((
                status::SHUTDOWN_APPLICATION,
                format!("Streams group member {by} encountered a fatal error and requested a shutdown for the entire application."),
            ));
        }
        Ok(StreamsHeartbeatResult {
            member_id: m.member_id.clone(),
            member_epoch: m.member_epoch,
            tasks,
            endpoint_information_epoch: self.endpoint_information_epoch,
            partitions_by_endpoint,
            status,
            to_create,
        })
    }

    /// Each member's user endpoint with the input partitions of its tasks (Kafka's
    /// `EndpointToPartitionsManager`).
    fn endpoint_partitions(&self) -> Vec<EndpointPartitions> {
        let Some(topology) = &self.topology else {
            return Vec::new();
        };
        let to_partitions = |tasks: &Tasks| {
            let mut out: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
            for (s, ps) in tasks {
                for topic in topology.subtopology_inputs(s) {
                    out.entry(topic).or_default().extend(ps.iter().copied());
                }
            }
            out
        };
        self.members
            .values()
            .filter_map(|m| {
                Some(EndpointPartitions {
                    endpoint: m.user_endpoint.clone()?,
                    active: to_partitions(&m.assigned.active),
                    standby: to_partitions(&m.assigned.standby),
                })
            })
            .collect()
    }

    /// A member leaves (epoch -1, or -2 for a static member): its tasks go to the others.
    fn leave(&mut self, member_id: &str, epoch: i32) -> Result<StreamsHeartbeatResult, GroupError> {
        if self.members.remove(member_id).is_none() {
            return Err(GroupError::UnknownMemberId);
        }
        self.target.remove(member_id);
        if self.shutdown_requested_by.as_deref() == Some(member_id) && self.members.is_empty() {
            self.shutdown_requested_by = None;
        }
        self.remove_epoch();
        Ok(StreamsHeartbeatResult {
            member_id: member_id.to_string(),
            member_epoch: epoch,
            ..Default::default()
        })
    }

    /// Removes a member whose session or revocation deadline passed.
    pub fn fence(&mut self, member_id: &str) {
        if self.members.remove(member_id).is_some() {
            self.target.remove(member_id);
            self.remove_epoch();
        }
    }

    /// The new group epoch after a member left or was fenced; the last one also moves the
    /// (empty) target assignment to it (Kafka's `streamsGroupFenceMember` writes the target
    /// assignment epoch record when the group becomes empty), so that a member joining the
    /// empty group during the initial rebalance delay is given that epoch.
    fn remove_epoch(&mut self) {
        self.bump_epoch();
        if self.members.is_empty() {
            self.assignment_epoch = self.group_epoch;
        }
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.members
            .values()
            .flat_map(|m| [Some(m.session_deadline), m.revocation_deadline])
            .chain([self.initial_rebalance_deadline])
            .flatten()
            .min()
    }

    /// Fences members whose session or revocation deadline passed, and ends a passed initial
    /// rebalance delay.
    pub fn on_deadlines(&mut self, limits: &StreamsLimits, now: Instant) {
        if self.initial_rebalance_deadline.is_some_and(|d| d <= now) {
            self.on_initial_rebalance_deadline(limits, now);
        }
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline <= now || m.revocation_deadline.is_some_and(|d| d <= now)
            })
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.group_id, member = %id, "streams group member timed out: fencing it");
            self.fence(&id);
        }
    }

    /// Kafka's `StreamsGroup.validateOffsetCommit`: an empty group accepts commits without a
    /// member; otherwise the member must exist and commit at its current epoch.
    pub fn validate_offset_commit(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if epoch > m.member_epoch {
            return Err(GroupError::FencedMemberEpoch);
        }
        if epoch < m.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// OffsetFetch v9 from a member checks its epoch.
    pub fn validate_offset_fetch(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if epoch != m.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }
}

/// Replay of the group's records ([`super::streams_records::replay`]).
impl StreamsGroup {
    pub(super) fn restore_metadata(&mut self, v: super::streams_records::MetadataValue) {
        self.group_epoch = v.epoch;
        self.metadata_hash = v.metadata_hash;
        self.validated_topology_epoch = v.validated_topology_epoch;
        if let Some(n) = v.num_standby_replicas {
            self.standby_seen = n;
        }
    }

    /// The topology is configured again against the topics at the next heartbeat.
    pub(super) fn restore_topology(&mut self, t: Topology) {
        self.topology = Some(t);
        self.configured = None;
    }

    pub(super) fn restore_topology_removed(&mut self) {
        self.topology = None;
        self.configured = None;
    }

    /// A member read back: created at epoch 0 with nothing assigned until its records say
    /// more; its session starts at `session_deadline`.
    pub(super) fn restored_member(
        &mut self,
        member_id: &str,
        session_deadline: Instant,
    ) -> &mut StreamsMember {
        self.members
            .entry(member_id.to_string())
            .or_insert_with(|| StreamsMember::new(member_id, session_deadline))
    }
}

/// A hash of (topic, partition count) pairs, 0 for none. It stands where Kafka's metadata
/// hash (`Utils.computeGroupHash` over topic ids, names, partitions and racks) does and is
/// only ever compared with itself: FNV-1a, so that it is the same after a restart.
fn metadata_hash(seen: &BTreeMap<String, i32>) -> i64 {
    if seen.is_empty() {
        return 0;
    }
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = FNV_OFFSET;
    for (topic, n) in seen {
        for b in topic.bytes().chain([0]).chain(n.to_be_bytes()) {
            h = (h ^ b as u64).wrapping_mul(FNV_PRIME);
        }
    }
    h as i64
}

fn set_epoch(m: &mut StreamsMember, epoch: i32) {
    if m.member_epoch != epoch {
        m.previous_member_epoch = m.member_epoch;
        m.member_epoch = epoch;
    }
}

fn merge(into: &mut Tasks, from: Tasks) {
    for (s, ps) in from {
        into.entry(s).or_default().extend(ps);
    }
}

/// Whether every task of `owned` is in `assigned`, kind by kind.
fn contained(owned: &TasksTuple, assigned: &TasksTuple) -> bool {
    let sub = |o: &Tasks, a: &Tasks| o.iter().all(|(s, ps)| ps.iter().all(|p| has(a, s, *p)));
    sub(&owned.active, &assigned.active)
        && sub(&owned.standby, &assigned.standby)
        && sub(&owned.warmup, &assigned.warmup)
}

/// Kafka's `computeAssignmentDifference`: (kept = current ∩ target, to revoke = current −
/// target, to assign = target − current − unreleased, whether any was unreleased).
fn difference(
    current: &Tasks,
    target: &Tasks,
    unreleased: &dyn Fn(&str, i32) -> bool,
) -> (Tasks, Tasks, Tasks, bool) {
    let (mut keep, mut revoke, mut new) = (Tasks::new(), Tasks::new(), Tasks::new());
    let mut waiting = false;
    for (s, ps) in current {
        for p in ps {
            if has(target, s, *p) {
                add(&mut keep, s, *p);
            } else {
                add(&mut revoke, s, *p);
            }
        }
    }
    for (s, ps) in target {
        for p in ps {
            if has(current, s, *p) {
                continue;
            }
            if unreleased(s, *p) {
                waiting = true;
            } else {
                add(&mut new, s, *p);
            }
        }
    }
    (keep, revoke, new, waiting)
}

/// Kafka's `throwIfStreamsGroupHeartbeatRequestIsInvalid` and
/// `throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures`.
pub(super) fn validate_request(p: &StreamsHeartbeat) -> Result<(), GroupError> {
    let invalid = |m: &str| Err(GroupError::InvalidRequest(m.into()));
    if p.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if p.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if p.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    if p.member_epoch == 0 {
        if p.rebalance_timeout_ms == -1 {
            return invalid("RebalanceTimeoutMs must be provided in first request.");
        }
        if p.owned.as_ref().is_some_and(|o| !o.is_empty()) {
            return invalid("ActiveTasks must be empty when (re-)joining.");
        }
        let Some(t) = &p.topology else {
            return invalid("Topology must be non-null when (re-)joining.");
        };
        t.validate()?;
    } else if p.member_epoch == LEAVE_STATIC_EPOCH && p.instance_id.is_none() {
        return invalid("InstanceId can't be null.");
    } else if p.member_epoch < LEAVE_STATIC_EPOCH {
        return invalid(&format!(
            "MemberEpoch is {}, but must be greater than or equal to -2.",
            p.member_epoch
        ));
    }
    if p.member_epoch != 0 && p.topology.is_some() {
        return invalid("Topology can only be provided when (re-)joining.");
    }
    Ok(())
}

/// StreamsGroupDescribe's view of a streams group.
#[derive(Debug, Clone)]
pub struct StreamsGroupDescription {
    pub state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub topology: Option<Topology>,
    /// Each member with its target assignment.
    pub members: Vec<(StreamsMember, TasksTuple)>,
}

impl super::GroupCoordinator {
    /// A streams group's limits: the broker's `group.streams.*`, with the group's own
    /// `streams.session.timeout.ms`, `streams.heartbeat.interval.ms`,
    /// `streams.num.standby.replicas` and `streams.initial.rebalance.delay.ms` when set
    /// (read at each heartbeat, as Kafka's `streamsGroupHeartbeat` does).
    pub fn streams_limits(&self, group_id: &str) -> StreamsLimits {
        let mut limits = self.config.streams;
        let configs = self.replicas.group_configs(group_id);
        if !configs.is_empty() {
            let defaults = (limits.session_timeout_ms, limits.heartbeat_interval_ms);
            let (session_ms, heartbeat_ms) = super::overrides::group_timing(
                &self.replicas.config,
                &configs,
                "streams",
                defaults,
            );
            limits.session_timeout_ms = session_ms;
            limits.heartbeat_interval_ms = heartbeat_ms;
            let standby = super::overrides::clamped(
                &self.replicas.config,
                &configs,
                "streams.num.standby.replicas",
            );
            if let Some(n) = standby {
                limits.num_standby_replicas = n.max(0) as i32;
            }
            let delay = super::overrides::clamped(
                &self.replicas.config,
                &configs,
                "streams.initial.rebalance.delay.ms",
            );
            if let Some(ms) = delay {
                limits.initial_rebalance_delay_ms = ms.clamp(0, i32::MAX as i64) as i32;
            }
        }
        limits
    }

    /// StreamsGroupHeartbeat, answered once the group's records it wrote are on every
    /// in-sync replica (Kafka's `CoordinatorRuntime` completes a write on the high
    /// watermark), so that a new coordinator reads back what the member was told.
    pub async fn streams_heartbeat(
        &self,
        group_id: &str,
        params: StreamsHeartbeat,
    ) -> Result<StreamsHeartbeatResult, GroupError> {
        let (result, written) = self.streams_heartbeat_now(group_id, params)?;
        self.wait_committed(written).await?;
        Ok(result)
    }

    /// The part of StreamsGroupHeartbeat done under the coordinator's lock. A joining member
    /// creates the group, or takes over a group id that has nothing but committed offsets;
    /// any other kind of group is GROUP_ID_NOT_FOUND, as in Kafka's `getOrCreateStreamsGroup`.
    fn streams_heartbeat_now(
        &self,
        group_id: &str,
        params: StreamsHeartbeat,
    ) -> Result<(StreamsHeartbeatResult, Option<super::store::Written>), GroupError> {
        if group_id.is_empty() || group_id.len() > super::MAX_GROUP_ID_BYTES {
            return Err(GroupError::InvalidRequest("GroupId can't be empty.".into()));
        }
        // Before the group is looked at: a bad request creates nothing.
        validate_request(&params)?;
        let limits = self.streams_limits(group_id);
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::NotCoordinator);
        }
        self.acquire(&mut st, group_id)?;
        let joining = params.member_epoch == 0;
        let created = !st.groups.contains_key(group_id);
        let entry = match st.groups.get_mut(group_id) {
            Some(e) => e,
            None if joining => st
                .groups
                .entry(group_id.to_string())
                .or_insert_with(|| super::GroupEntry::classic(group_id)),
            None => return Err(GroupError::GroupIdNotFound),
        };
        // What the group was, to put back should the write fail.
        let before = match &entry.kind {
            _ if created => Before::Absent,
            super::GroupKind::Streams(g) => Before::Streams(g.clone()),
            _ if !(joining && entry.is_empty()) => {
                return Err(GroupError::NotStreamsGroup(group_id.into()))
            }
            _ => Before::Other(std::mem::replace(
                &mut entry.kind,
                super::GroupKind::Streams(StreamsGroup::new(group_id.to_string())),
            )),
        };
        if created {
            entry.kind = super::GroupKind::Streams(StreamsGroup::new(group_id.to_string()));
        }
        let super::GroupKind::Streams(g) = &mut entry.kind else {
            return Err(GroupError::NotStreamsGroup(group_id.into()));
        };
        let partitions = |t: &str| self.replicas.topic(t).map(|m| m.partition_count());
        let result = g.heartbeat(params, &limits, &partitions, Instant::now());
        match self.after_change_or_error(&mut st, group_id) {
            Ok(written) => Ok((result?, written)),
            Err(e) => {
                before.restore(&mut st.groups, group_id);
                Err(e)
            }
        }
    }

    /// StreamsGroupDescribe for one group: GROUP_ID_NOT_FOUND unless it is a streams group.
    pub fn describe_streams_group(
        &self,
        group_id: &str,
    ) -> Result<StreamsGroupDescription, GroupError> {
        let mut st = self.state.lock();
        self.acquire(&mut st, group_id)?;
        let g = match st.groups.get(group_id).map(|e| &e.kind) {
            Some(super::GroupKind::Streams(g)) => g,
            Some(_) => return Err(GroupError::NotStreamsGroup(group_id.into())),
            None => return Err(GroupError::GroupIdNotFound),
        };
        Ok(StreamsGroupDescription {
            state: g.state_str().into(),
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            topology: g.topology.clone(),
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
}

/// A streams group as it was before a heartbeat whose records could not be appended: the
/// heartbeat leaves no trace, as Kafka's `CoordinatorRuntime` reverts its timeline to the
/// snapshot taken before the write (`failCurrentBatch`). A write that was appended but is
/// never committed is not reverted, there as here: the log a new leader keeps decides.
enum Before {
    /// The heartbeat created the group.
    Absent,
    Streams(StreamsGroup),
    /// An empty group of another kind (committed offsets only) the heartbeat took over.
    Other(super::GroupKind),
}

impl Before {
    fn restore(self, groups: &mut HashMap<String, super::GroupEntry>, group_id: &str) {
        let kind = match self {
            Before::Absent => {
                groups.remove(group_id);
                return;
            }
            Before::Streams(g) => super::GroupKind::Streams(g),
            Before::Other(kind) => kind,
        };
        if let Some(e) = groups.get_mut(group_id) {
            e.kind = kind;
        }
    }
}
