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
//! not here: it lives on each partition's leader ([`crate::share`]). Share groups are kept in
//! memory only: a coordinator move or restart loses membership, and members rejoin at
//! epoch 0 (Kafka writes `ShareGroup*` records to `__consumer_offsets`; Brook does not yet).

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
    /// The share-partitions whose state the share coordinator may hold for this group
    /// (Kafka's `ShareGroupStatePartitionMetadata` initialized topics): every partition of a
    /// topic its members subscribed to, and those AlterShareGroupOffsets set
    /// ([`super::share_offsets`]). Deleted with the group or by DeleteShareGroupOffsets.
    pub state_topics: BTreeMap<Uuid, BTreeSet<i32>>,
}

impl ShareGroup {
    pub fn new(group_id: String) -> Self {
        ShareGroup {
            group_id,
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: HashMap::new(),
            topics_seen: BTreeMap::new(),
            state_topics: BTreeMap::new(),
        }
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
        let image = self.topics_image(topics);
        if image != self.topics_seen {
            self.topics_seen = image;
            bump = true;
        }
        self.note_state_topics();
        if bump {
            self.group_epoch += 1;
        }
        if self.group_epoch > self.assignment_epoch {
            self.target = assign_simple(&self.members, &self.topics_seen, &self.target);
            self.assignment_epoch = self.group_epoch;
        }
        Ok(self.reconcile(&p.member_id, joining))
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
        }
    }

    /// Kafka's heartbeat initializes every partition of the subscribed topics
    /// (`GroupMetadataManager.computeShareGroupInitializationTopics`), again after
    /// DeleteShareGroupOffsets removed one.
    fn note_state_topics(&mut self) {
        for (id, n) in self.topics_seen.values() {
            let held = self.state_topics.entry(*id).or_default();
            if held.len() < *n as usize {
                held.extend(0..*n);
            }
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
/// twin): every subscribed partition is assigned, each shared by about
/// `ceil(members / partitions)` members, each member holding about the same number of
/// partitions (balance first), keeping what members held before where balance allows
/// (stickiness).
pub fn assign_simple(
    members: &BTreeMap<String, ShareMember>,
    image: &TopicsImage,
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
    let mut holders: HashMap<(Uuid, i32), usize> = HashMap::new();
    let mut count: HashMap<&str, usize> = HashMap::new();
    // Stickiness: keep previous partitions while within the member's and partition's quota.
    for (id, m) in members {
        let ok: BTreeSet<(Uuid, i32)> = eligible(m).into_iter().collect();
        let prev = previous.get(id).into_iter().flat_map(|tp| {
            tp.iter()
                .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
        });
        for tp in prev {
            let c = count.entry(id).or_default();
            let h = holders.entry(tp).or_default();
            if ok.contains(&tp) && *c < desired[id.as_str()] && *h < sharing {
                *c += 1;
                *h += 1;
                out.entry(id.clone())
                    .or_default()
                    .entry(tp.0)
                    .or_default()
                    .insert(tp.1);
            }
        }
    }
    // Fill: each member takes the least-shared partitions it does not hold yet.
    for (id, m) in members {
        let mut options = eligible(m);
        while count.get(id.as_str()).copied().unwrap_or(0) < desired[id.as_str()] {
            let held = &out[id];
            options.retain(|tp| !held.get(&tp.0).is_some_and(|ps| ps.contains(&tp.1)));
            let Some(&best) = options
                .iter()
                .min_by_key(|tp| (holders.get(*tp).copied().unwrap_or(0), **tp))
            else {
                break;
            };
            *holders.entry(best).or_default() += 1;
            *count.entry(id).or_default() += 1;
            out.entry(id.clone())
                .or_default()
                .entry(best.0)
                .or_default()
                .insert(best.1);
        }
    }
    out
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

    fn count(a: &TopicPartitions) -> usize {
        a.values().map(|p| p.len()).sum()
    }

    #[test]
    fn more_members_than_partitions_share_each_partition() {
        let t = Uuid::new_v4();
        let image: TopicsImage = [("t".to_string(), (t, 1))].into();
        let members: BTreeMap<_, _> = [member("a", &["t"]), member("b", &["t"])].into();
        let out = assign_simple(&members, &image, &HashMap::new());
        assert_eq!(out["a"][&t], BTreeSet::from([0]));
        assert_eq!(out["b"][&t], BTreeSet::from([0]));
    }

    #[test]
    fn partitions_spread_evenly_and_stick() {
        let t = Uuid::new_v4();
        let image: TopicsImage = [("t".to_string(), (t, 4))].into();
        let members: BTreeMap<_, _> = [member("a", &["t"]), member("b", &["t"])].into();
        let first = assign_simple(&members, &image, &HashMap::new());
        assert_eq!((count(&first["a"]), count(&first["b"])), (2, 2));
        let again = assign_simple(&members, &image, &first);
        assert_eq!(again, first);
        let three: BTreeMap<_, _> = [
            member("a", &["t"]),
            member("b", &["t"]),
            member("c", &["t"]),
        ]
        .into();
        let next = assign_simple(&three, &image, &first);
        let total: usize = next.values().map(count).sum();
        assert_eq!(total, 4);
        assert!(next.values().all(|a| (1..=2).contains(&count(a))));
    }
}
