//! KIP-932 share groups (ShareGroupHeartbeat): membership, epochs and the share assignment.
//!
//! As Kafka's `GroupMetadataManager.shareGroupHeartbeat`, `ShareGroup` and
//! `ShareGroupMember`:
//! - the **group epoch** goes up when a member joins or leaves, changes its subscription, or
//!   when a subscribed topic's partition count changes;
//! - the target assignment is recomputed when the group epoch passes the assignment epoch;
//! - a member takes its target at once (`ShareGroupAssignmentBuilder`): share groups revoke
//!   nothing, since several members may read one partition, so there is no reconciliation.
//!
//! The share-partition state (which records are acquired, by whom, how often delivered) is
//! not here: it lives on each partition's leader ([`crate::share`]). A share group's epoch,
//! members, target and current assignments and initialized share-partitions are written to
//! `__consumer_offsets` ([`super::share_records`]), so that after a coordinator move or
//! restart members carry on at their epochs with their partitions.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tokio::time::{Duration, Instant};
use uuid::Uuid;

use super::consumer::{TopicPartitions, TopicsImage};
use super::GroupError;

/// The member epoch a member sends to leave the group.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;

/// The only share assignor Kafka 4.4 ships (`group.share.assignors`).
pub const SHARE_ASSIGNOR: &str = "simple";

/// Settings the coordinator enforces on share groups (`group.share.*`).
#[derive(Debug, Clone, Copy)]
pub struct ShareLimits {
    /// `group.share.session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `group.share.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.share.max.size`.
    pub max_size: usize,
}

/// One member of a share group.
#[derive(Debug, Clone)]
pub struct ShareMember {
    pub member_id: String,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// Sorted, deduplicated.
    pub subscribed_topics: Vec<String>,
    pub assigned: TopicPartitions,
    session_deadline: Instant,
}

/// A ShareGroupHeartbeat, decoded.
#[derive(Debug, Clone, Default)]
pub struct ShareHeartbeatParams {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// The answer to a share heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    /// `Some` when the member joined or its assignment changed.
    pub assignment: Option<TopicPartitions>,
    /// Share-partitions the heartbeat marked initializing, whose state the coordinator
    /// initializes before answering (Kafka's `InitializeShareGroupStateParameters`).
    pub initialize: Option<ShareInitialize>,
}

/// An InitializeShareGroupState the group coordinator sends for a heartbeat (Kafka's
/// `GroupMetadataManager.buildInitializeShareGroupStateRequest`): the state epoch is the
/// group epoch; a topic the group already held state for starts at 0 (partitions added to
/// it), any other at -1 (the partition leader places it by `share.auto.offset.reset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareInitialize {
    pub state_epoch: i32,
    /// (topic id, partition, start offset).
    pub partitions: Vec<(Uuid, i32, i64)>,
}

/// A share group.
#[derive(Debug)]
pub struct ShareGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    /// The target assignment of `assignment_epoch`.
    pub target: HashMap<String, TopicPartitions>,
    /// The subscribed topics' metadata the target was computed from.
    topics_seen: TopicsImage,
    /// The share-partitions whose state the share coordinator holds for this group (Kafka's
    /// `ShareGroupStatePartitionMetadata` initialized topics): those a heartbeat initialized
    /// and those AlterShareGroupOffsets set ([`super::share_offsets`]). Only these are
    /// assigned. Deleted with the group or by DeleteShareGroupOffsets.
    pub state_topics: BTreeMap<Uuid, BTreeSet<i32>>,
    /// Share-partitions whose InitializeShareGroupState is in flight (Kafka's initializing
    /// topics): not assigned yet, and not asked for again until it is answered.
    pub initializing: BTreeMap<Uuid, BTreeSet<i32>>,
    /// Read back from the log: the topics the target was computed from are not known (Kafka
    /// keeps their hash; Brook writes none), so the first heartbeat takes the current ones as
    /// those instead of as a change that needs a new target.
    topics_unknown: bool,
}

impl ShareGroup {
    pub fn new(group_id: String) -> Self {
        ShareGroup {
            group_id,
            group_epoch: super::INITIAL_GROUP_EPOCH,
            assignment_epoch: super::INITIAL_GROUP_EPOCH,
            members: BTreeMap::new(),
            target: HashMap::new(),
            topics_seen: BTreeMap::new(),
            state_topics: BTreeMap::new(),
            initializing: BTreeMap::new(),
            topics_unknown: false,
        }
    }

    /// Replay: the member `member_id`, created (epoch 0, nothing assigned) if its records have
    /// not been read yet. Its session starts at `session_deadline` minus the session timeout,
    /// as Kafka's `onLoaded` schedules every loaded share member's session timeout.
    pub(super) fn restored_member(
        &mut self,
        member_id: &str,
        session_deadline: Instant,
    ) -> &mut ShareMember {
        self.topics_unknown = true;
        self.members
            .entry(member_id.to_string())
            .or_insert_with(|| ShareMember {
                member_id: member_id.to_string(),
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                member_epoch: 0,
                previous_member_epoch: 0,
                subscribed_topics: Vec::new(),
                assigned: BTreeMap::new(),
                session_deadline,
            })
    }

    /// Kafka's `ShareGroup.ShareGroupState`: Empty without members, Stable with.
    pub fn state_str(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    /// Every topic some member subscribes to.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed_topics.iter().cloned())
            .collect()
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.members.values().map(|m| m.session_deadline).min()
    }

    /// Session timeouts: a member that stopped heartbeating is removed (Kafka's
    /// `shareGroupFenceMember` from `scheduleShareGroupSessionTimeout`).
    pub fn on_deadlines(&mut self, now: Instant) {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_deadline <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.group_id, member = %id, "share group member session expired");
            self.remove_member(&id);
        }
    }

    fn remove_member(&mut self, member_id: &str) {
        if self.members.remove(member_id).is_some() {
            self.target.remove(member_id);
            self.group_epoch += 1;
        }
    }

    /// One heartbeat (Kafka's `GroupMetadataManager.shareGroupHeartbeat`). `topics` resolves a
    /// topic name to (id, partition count).
    pub fn heartbeat(
        &mut self,
        p: ShareHeartbeatParams,
        topics: &dyn Fn(&str) -> Option<(Uuid, i32)>,
        limits: &ShareLimits,
        now: Instant,
    ) -> Result<ShareHeartbeatResult, GroupError> {
        if p.member_epoch == LEAVE_GROUP_MEMBER_EPOCH {
            if !self.members.contains_key(&p.member_id) {
                return Err(GroupError::UnknownMemberId);
            }
            self.remove_member(&p.member_id);
            return Ok(ShareHeartbeatResult {
                member_id: p.member_id,
                member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
                assignment: None,
                initialize: None,
            });
        }
        let joining = p.member_epoch == 0;
        if !self.members.contains_key(&p.member_id) {
            if !joining {
                return Err(GroupError::UnknownMemberId);
            }
            // Kafka's `throwIfShareGroupIsFull`.
            if self.members.len() >= limits.max_size {
                return Err(GroupError::GroupMaxSizeReached);
            }
        }
        let member_id = p.member_id.clone();
        let mut bump = self.update_member(p, limits, now)?;
        let image = self.topics_image(topics);
        if image != self.topics_seen {
            bump |= !self.topics_unknown;
            self.topics_seen = image;
        }
        self.topics_unknown = false;
        // Kafka's `initializedAssignmentPending`: partitions initialized since the target
        // was computed are assigned by a new one.
        if bump || self.initialized_assignment_pending() {
            self.group_epoch += 1;
        }
        if self.group_epoch > self.assignment_epoch {
            self.target = assign_simple(
                &self.members,
                &self.topics_seen,
                &self.state_topics,
                &self.target,
            );
            self.assignment_epoch = self.group_epoch;
        }
        let mut r = self.reconcile(&member_id, joining);
        r.initialize = self.initialize_new_partitions();
        Ok(r)
    }

    /// The heartbeating member, added if new, with the request's fields (Kafka's
    /// `getOrMaybeSubscribeShareGroupMember` and `ShareGroupMember.Builder`); true when its
    /// subscription changed.
    fn update_member(
        &mut self,
        p: ShareHeartbeatParams,
        limits: &ShareLimits,
        now: Instant,
    ) -> Result<bool, GroupError> {
        let session = Duration::from_millis(limits.session_timeout_ms.max(0) as u64);
        let member = self
            .members
            .entry(p.member_id.clone())
            .or_insert_with(|| ShareMember {
                member_id: p.member_id.clone(),
                rack_id: None,
                client_id: p.client_id.clone(),
                client_host: p.client_host.clone(),
                member_epoch: 0,
                previous_member_epoch: 0,
                subscribed_topics: Vec::new(),
                assigned: BTreeMap::new(),
                session_deadline: now + session,
            });
        check_member_epoch(member, p.member_epoch)?;
        let mut bump = false;
        if let Some(rack) = p.rack_id {
            member.rack_id = Some(rack);
        }
        member.client_id = p.client_id;
        member.client_host = p.client_host;
        if let Some(mut names) = p.subscribed_topic_names {
            names.sort();
            names.dedup();
            if names != member.subscribed_topics {
                member.subscribed_topics = names;
                bump = true;
            }
        }
        member.session_deadline = now + session;
        Ok(bump)
    }

    /// Kafka's `GroupMetadataManager.initializedAssignmentPending`: some subscribed topic's
    /// initialized partitions differ from those the target assigns.
    fn initialized_assignment_pending(&self) -> bool {
        if self.members.is_empty() {
            return false;
        }
        let mut targeted: BTreeMap<Uuid, BTreeSet<i32>> = BTreeMap::new();
        for tp in self.target.values() {
            for (id, ps) in tp {
                targeted.entry(*id).or_default().extend(ps);
            }
        }
        self.topics_seen.values().any(|(id, _)| {
            self.state_topics
                .get(id)
                .is_some_and(|held| targeted.get(id) != Some(held))
        })
    }

    /// The partitions of subscribed topics neither initialized nor initializing, now marked
    /// initializing (Kafka's `maybeCreateInitializeShareGroupStateRequest`, which writes the
    /// `ShareGroupStatePartitionMetadata` record with them); again after
    /// DeleteShareGroupOffsets removed a topic's state.
    fn initialize_new_partitions(&mut self) -> Option<ShareInitialize> {
        let mut partitions = Vec::new();
        for (id, n) in self.topics_seen.values() {
            let known = self.state_topics.contains_key(id) || self.initializing.contains_key(id);
            let start = if known { 0 } else { -1 };
            let held = self.state_topics.get(id);
            let pending = self.initializing.entry(*id).or_default();
            for p in 0..*n {
                if !held.is_some_and(|h| h.contains(&p)) && pending.insert(p) {
                    partitions.push((*id, p, start));
                }
            }
            if pending.is_empty() {
                self.initializing.remove(id);
            }
        }
        (!partitions.is_empty()).then_some(ShareInitialize {
            state_epoch: self.group_epoch,
            partitions,
        })
    }

    /// The answer to a heartbeat's InitializeShareGroupState (Kafka's
    /// `GroupCoordinatorService.performShareGroupStateMetadataInitialize` for those
    /// initialized, `uninitializeShareGroupState` for those that failed, which a later
    /// heartbeat asks for again).
    pub fn initialized(&mut self, done: &[(Uuid, i32)], failed: &[(Uuid, i32)]) {
        for (id, p) in done.iter().chain(failed) {
            if let Some(ps) = self.initializing.get_mut(id) {
                ps.remove(p);
                if ps.is_empty() {
                    self.initializing.remove(id);
                }
            }
        }
        for (id, p) in done {
            self.state_topics.entry(*id).or_default().insert(*p);
        }
    }

    /// The member takes the target of the assignment epoch (`ShareGroupAssignmentBuilder`).
    fn reconcile(&mut self, member_id: &str, joining: bool) -> ShareHeartbeatResult {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let epoch = self.assignment_epoch;
        let Some(m) = self.members.get_mut(member_id) else {
            return ShareHeartbeatResult {
                member_id: member_id.to_string(),
                member_epoch: epoch,
                assignment: None,
                initialize: None,
            };
        };
        let changed = m.assigned != target;
        if m.member_epoch != epoch {
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = epoch;
        }
        m.assigned = target;
        ShareHeartbeatResult {
            member_id: member_id.to_string(),
            member_epoch: m.member_epoch,
            assignment: (joining || changed).then(|| m.assigned.clone()),
            initialize: None,
        }
    }

    /// The subscribed topics that exist, with their ids and partition counts.
    fn topics_image(&self, topics: &dyn Fn(&str) -> Option<(Uuid, i32)>) -> TopicsImage {
        self.subscribed_topics()
            .into_iter()
            .filter_map(|t| topics(&t).map(|v| (t, v)))
            .collect()
    }
}

/// Kafka's `throwIfShareGroupMemberEpochIsInvalid`: the member's epoch, or its previous one
/// (the answer with the new epoch may have been lost).
fn check_member_epoch(member: &ShareMember, received: i32) -> Result<(), GroupError> {
    if received > member.member_epoch
        || (received < member.member_epoch && received != member.previous_member_epoch)
    {
        return Err(GroupError::FencedMemberEpoch);
    }
    Ok(())
}

/// Kafka's share `SimpleAssignor` (`SimpleHomogeneousAssignmentBuilder` and its heterogeneous
/// twin): every subscribed partition whose state is initialized (`assignable`, Kafka's
/// `withTopicAssignablePartitionsMap`) is assigned, each shared by about
/// `ceil(members / partitions)` members, each member holding about the same number of
/// partitions (balance first), keeping what members held before where balance allows
/// (stickiness).
pub fn assign_simple(
    members: &BTreeMap<String, ShareMember>,
    image: &TopicsImage,
    assignable: &BTreeMap<Uuid, BTreeSet<i32>>,
    previous: &HashMap<String, TopicPartitions>,
) -> HashMap<String, TopicPartitions> {
    let mut out: HashMap<String, TopicPartitions> = members
        .keys()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    // Each member's assignable partitions: those of its subscribed topics.
    let eligible = |m: &ShareMember| -> Vec<(Uuid, i32)> {
        m.subscribed_topics
            .iter()
            .filter_map(|t| image.get(t))
            .flat_map(|&(id, n)| (0..n).map(move |p| (id, p)))
            .filter(|(id, p)| assignable.get(id).is_some_and(|ps| ps.contains(p)))
            .collect()
    };
    let all: BTreeSet<(Uuid, i32)> = members.values().flat_map(&eligible).collect();
    if all.is_empty() || members.is_empty() {
        return out;
    }
    let n_members = members.len();
    let n_parts = all.len();
    let sharing = n_members.div_ceil(n_parts);
    // Slots spread evenly over members: the first (total % members) get one more.
    let total = sharing * n_parts;
    let desired: HashMap<&str, usize> = members
        .keys()
        .enumerate()
        .map(|(i, m)| {
            let base = total / n_members;
            (m.as_str(), base + usize::from(i < total % n_members))
        })
        .collect();
    let mut slots = Slots {
        desired,
        sharing,
        holders: HashMap::new(),
        count: HashMap::new(),
    };
    // Stickiness: keep previous partitions while within the member's and partition's quota.
    for (id, m) in members {
        let ok: BTreeSet<(Uuid, i32)> = eligible(m).into_iter().collect();
        let prev = previous.get(id).into_iter().flat_map(|tp| {
            tp.iter()
                .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
        });
        for tp in prev {
            if ok.contains(&tp) && slots.take(id, tp) {
                insert(&mut out, id, tp);
            }
        }
    }
    // Fill: each member takes the least-shared partitions it does not hold yet.
    for (id, m) in members {
        let mut options = eligible(m);
        while slots.count.get(id.as_str()).copied().unwrap_or(0) < slots.desired[id.as_str()] {
            let held = &out[id];
            options.retain(|tp| !held.get(&tp.0).is_some_and(|ps| ps.contains(&tp.1)));
            let Some(&best) = options
                .iter()
                .min_by_key(|tp| (slots.holders.get(*tp).copied().unwrap_or(0), **tp))
            else {
                break;
            };
            *slots.holders.entry(best).or_default() += 1;
            *slots.count.entry(id.clone()).or_default() += 1;
            insert(&mut out, id, best);
        }
    }
    out
}

/// The simple assignor's quotas: slots per member, members per partition, and those taken.
struct Slots<'a> {
    desired: HashMap<&'a str, usize>,
    sharing: usize,
    holders: HashMap<(Uuid, i32), usize>,
    count: HashMap<String, usize>,
}

impl Slots<'_> {
    /// Takes a slot of `member` on `tp` when both quotas allow it.
    fn take(&mut self, member: &str, tp: (Uuid, i32)) -> bool {
        let c = self.count.entry(member.to_string()).or_default();
        let h = self.holders.entry(tp).or_default();
        if *c < self.desired[member] && *h < self.sharing {
            *c += 1;
            *h += 1;
            true
        } else {
            false
        }
    }
}

fn insert(out: &mut HashMap<String, TopicPartitions>, member: &str, tp: (Uuid, i32)) {
    out.entry(member.to_string())
        .or_default()
        .entry(tp.0)
        .or_default()
        .insert(tp.1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[&str]) -> (String, ShareMember) {
        (
            id.to_string(),
            ShareMember {
                member_id: id.into(),
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                member_epoch: 0,
                previous_member_epoch: 0,
                subscribed_topics: topics.iter().map(|t| t.to_string()).collect(),
                assigned: BTreeMap::new(),
                session_deadline: Instant::now(),
            },
        )
    }

    fn all(t: Uuid, n: i32) -> BTreeMap<Uuid, BTreeSet<i32>> {
        [(t, (0..n).collect())].into()
    }

    /// Kafka's share assignment covers initialized partitions only: a heartbeat asks for
    /// their initialization, and the one after it is answered assigns them.
    #[test]
    fn partitions_are_assigned_once_initialized() {
        let t = Uuid::new_v4();
        let mut g = ShareGroup::new("g".into());
        let limits = ShareLimits {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: 200,
        };
        let topics = |name: &str| (name == "t").then_some((t, 2));
        let hb = |g: &mut ShareGroup, epoch: i32| {
            let p = ShareHeartbeatParams {
                member_id: "m".into(),
                member_epoch: epoch,
                subscribed_topic_names: Some(vec!["t".into()]),
                ..Default::default()
            };
            g.heartbeat(p, &topics, &limits, Instant::now()).unwrap()
        };
        let first = hb(&mut g, 0);
        assert_eq!(first.assignment, Some(BTreeMap::new()));
        let init = first.initialize.expect("initialization asked for");
        // The join moved the group from its initial epoch 1 to 2 (Kafka's `ModernGroup`).
        assert_eq!(init.state_epoch, 2);
        assert_eq!(init.partitions, vec![(t, 0, -1), (t, 1, -1)]);
        let pending = hb(&mut g, first.member_epoch);
        assert_eq!((pending.assignment, pending.initialize), (None, None));
        g.initialized(&[(t, 0), (t, 1)], &[]);
        let assigned = hb(&mut g, pending.member_epoch);
        assert_eq!(assigned.member_epoch, 3);
        assert_eq!(assigned.assignment, Some(all(t, 2)));
    }

    fn count(a: &TopicPartitions) -> usize {
        a.values().map(|p| p.len()).sum()
    }

    #[test]
    fn more_members_than_partitions_share_each_partition() {
        let t = Uuid::new_v4();
        let image: TopicsImage = [("t".to_string(), (t, 1))].into();
        let members: BTreeMap<_, _> = [member("a", &["t"]), member("b", &["t"])].into();
        let out = assign_simple(&members, &image, &all(t, 1), &HashMap::new());
        assert_eq!(out["a"][&t], BTreeSet::from([0]));
        assert_eq!(out["b"][&t], BTreeSet::from([0]));
    }

    #[test]
    fn partitions_spread_evenly_and_stick() {
        let t = Uuid::new_v4();
        let image: TopicsImage = [("t".to_string(), (t, 4))].into();
        let members: BTreeMap<_, _> = [member("a", &["t"]), member("b", &["t"])].into();
        let first = assign_simple(&members, &image, &all(t, 4), &HashMap::new());
        assert_eq!((count(&first["a"]), count(&first["b"])), (2, 2));
        let again = assign_simple(&members, &image, &all(t, 4), &first);
        assert_eq!(again, first);
        let three: BTreeMap<_, _> = [
            member("a", &["t"]),
            member("b", &["t"]),
            member("c", &["t"]),
        ]
        .into();
        let next = assign_simple(&three, &image, &all(t, 4), &first);
        let total: usize = next.values().map(count).sum();
        assert_eq!(total, 4);
        assert!(next.values().all(|a| (1..=2).contains(&count(a))));
    }
}
