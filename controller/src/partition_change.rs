//! One partition's change, decided as Kafka's `PartitionChangeBuilder` decides it: the target
//! ISR moves the ELR, a leader is elected when the current one may no longer lead (preferred,
//! online or unclean), a reassignment completes once its target replicas are in sync, and the
//! record carries the partition's new state in full. Every change of a partition's leader, ISR
//! or ELR goes through `PartitionChangeBuilder`, whichever control manager asks for it, so the
//! election and ELR rules live in one place.

use uuid::Uuid;

use crate::configuration_control::ElectionPolicy;
use crate::image::{MetadataRecord, PartitionRegistration, TopicImage, NO_LEADER};

/// The kind of election a change runs (Kafka's `PartitionChangeBuilder.Election`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Election {
    /// The preferred replica (first in the assignment) if it may lead.
    Preferred,
    /// Any replica of the ISR (or, with the ISR empty, of the ELR).
    Online,
    /// As `Online`, then any live replica (data loss accepted).
    Unclean,
}

/// One partition change, decided as Kafka's `PartitionChangeBuilder.build`: the target ISR
/// moves the ELR, a leader is elected when the current one may no longer lead, then the ELR
/// and the last known leader are settled. Every change of leader, ISR or ELR goes through
/// here, so the ELR rules live in one place.
pub(super) struct PartitionChangeBuilder<'a> {
    old: &'a PartitionRegistration,
    target_isr: Vec<i32>,
    /// The assignment and the reassignment's adding and removing replicas after the change
    /// (Kafka's `targetReplicas`, `targetAdding`, `targetRemoving`).
    pub(super) target_replicas: Vec<i32>,
    pub(super) target_adding: Vec<i32>,
    pub(super) target_removing: Vec<i32>,
    target_elr: Vec<i32>,
    min_isr: usize,
    elr_enabled: bool,
    pub(super) election: Election,
    /// A replica whose broker restarted after an unclean shutdown: it may have lost
    /// unflushed records, so it leaves the ELR (Kafka's `uncleanShutdownReplicas`).
    pub(super) unclean_shutdown: Option<i32>,
    /// Whether a replica's broker may lead (live, not the one being removed).
    acceptable: &'a dyn Fn(i32) -> bool,
}

impl<'a> PartitionChangeBuilder<'a> {
    pub(super) fn new(
        policy: &ElectionPolicy,
        topic: &TopicImage,
        old: &'a PartitionRegistration,
        target_isr: Vec<i32>,
        acceptable: &'a dyn Fn(i32) -> bool,
    ) -> Self {
        PartitionChangeBuilder {
            old,
            target_isr,
            target_replicas: old.replicas.clone(),
            target_adding: old.adding_replicas.clone(),
            target_removing: old.removing_replicas.clone(),
            target_elr: old.elr.clone(),
            min_isr: policy.effective_min_isr(topic, old),
            elr_enabled: policy.elr_enabled,
            election: if policy.unclean_for(topic) {
                Election::Unclean
            } else {
                Election::Online
            },
            unclean_shutdown: None,
            acceptable,
        }
    }

    /// Kafka's `maybePopulateTargetElr`: at or above min ISR the ELR is empty (a min-ISR
    /// quorum holds every committed record again). Below it, the old ISR members that leave
    /// join the ELR, as long as they did not shut down uncleanly: while the ISR is below min
    /// ISR the high watermark does not move, so they hold everything committed.
    fn populate_target_elr(&mut self) {
        if !self.elr_enabled {
            return;
        }
        if self.target_isr.len() >= self.min_isr {
            self.target_elr.clear();
            return;
        }
        let mut elr: Vec<i32> = self
            .target_elr
            .iter()
            .chain(&self.old.isr)
            .copied()
            .filter(|r| !self.target_isr.contains(r) && self.unclean_shutdown != Some(*r))
            .collect();
        elr.sort_unstable();
        elr.dedup();
        self.target_elr = elr;
    }

    /// Kafka's `isValidNewLeader`: in the ISR, or in the ELR while the ISR is empty.
    fn valid_leader(&self, r: i32) -> bool {
        (self.target_isr.contains(&r)
            || (self.target_isr.is_empty() && self.target_elr.contains(&r)))
            && (self.acceptable)(r)
    }

    /// Kafka's `canElectLastKnownLeader`: with the ISR and the ELR both empty, the replica
    /// that led when the ISR emptied may lead again once it is back.
    fn last_known_leader(&self) -> Option<i32> {
        match self.old.last_known_elr.as_slice() {
            [r] if self.elr_enabled
                && self.target_isr.is_empty()
                && self.target_elr.is_empty()
                && (self.acceptable)(*r) =>
            {
                Some(*r)
            }
            _ => None,
        }
    }

    /// Kafka's `electLeader`: the leader, and whether the election was unclean. The current
    /// leader stays if it may (for a preferred election, only if the preferred one may not).
    fn elect(&self) -> (i32, bool) {
        let replicas = &self.target_replicas;
        let preferred = replicas.first().copied().filter(|&r| self.valid_leader(r));
        let candidates = match self.election {
            Election::Preferred => preferred
                .into_iter()
                .chain(Some(self.old.leader).filter(|&l| self.valid_leader(l)))
                .chain(
                    replicas
                        .iter()
                        .skip(1)
                        .copied()
                        .filter(|&r| self.valid_leader(r)),
                )
                .next(),
            Election::Online | Election::Unclean => Some(self.old.leader)
                .filter(|&l| self.valid_leader(l))
                .or_else(|| replicas.iter().copied().find(|&r| self.valid_leader(r))),
        };
        if let Some(r) = candidates {
            return (r, false);
        }
        if let Some(r) = self.last_known_leader() {
            return (r, true);
        }
        if self.election == Election::Unclean {
            if let Some(&r) = replicas.iter().find(|&&r| (self.acceptable)(r)) {
                return (r, true);
            }
        }
        (NO_LEADER, false)
    }

    /// The record of the change, or `None` if nothing changes.
    pub(super) fn build(self, topic_id: Uuid) -> Option<MetadataRecord> {
        self.next().map(|next| change_record(topic_id, &next))
    }

    /// The partition after the change, or `None` if nothing changes (Kafka's `build`). The
    /// leader epoch moves with the leader; the partition epoch with any change.
    pub(super) fn next(mut self) -> Option<PartitionRegistration> {
        let old = self.old;
        self.complete_reassignment();
        self.populate_target_elr();
        // tryElection: an ELR member elected becomes the whole ISR; an unclean leader too.
        let (leader, unclean) = self.elect();
        let mut forced_isr = None;
        if leader != old.leader {
            if self.target_elr.contains(&leader) {
                self.target_isr = vec![leader];
                self.target_elr.retain(|&r| r != leader);
            }
            if unclean {
                forced_isr = Some(vec![leader]);
            }
        }
        // maybeUpdateRecordElr: an unclean election empties the ELR.
        if forced_isr.is_some() || !self.elr_enabled {
            self.target_elr.clear();
        }
        // Without ELR the last ISR member stays in the ISR.
        let isr = match forced_isr {
            Some(isr) => isr,
            None if self.target_isr.is_empty() && !self.elr_enabled => old.isr.clone(),
            None => std::mem::take(&mut self.target_isr),
        };
        let last_known_elr = self.settle_last_known_leader(&isr, leader);
        let next = PartitionRegistration {
            leader,
            leader_epoch: old.leader_epoch + i32::from(self.bumps_leader_epoch(leader)),
            isr,
            partition_epoch: old.partition_epoch + 1,
            elr: self.target_elr,
            last_known_elr,
            replicas: self.target_replicas,
            adding_replicas: self.target_adding,
            removing_replicas: self.target_removing,
            index: old.index,
        };
        let unchanged = PartitionRegistration {
            partition_epoch: old.partition_epoch,
            leader_epoch: old.leader_epoch,
            ..next.clone()
        };
        (unchanged != *old).then_some(next)
    }

    /// Kafka's `completeReassignmentIfNeeded` (`PartitionReassignmentReplicas.
    /// maybeCompleteReassignment`): once the target ISR holds every replica the reassignment
    /// keeps, the removed replicas leave the ISR and the assignment, and it is over. With
    /// nothing of the target in the ISR yet, nothing happens.
    fn complete_reassignment(&mut self) {
        if self.target_adding.is_empty() && self.target_removing.is_empty() {
            return;
        }
        let removing = &self.target_removing;
        let isr: Vec<i32> = self
            .target_isr
            .iter()
            .copied()
            .filter(|r| !removing.contains(r))
            .collect();
        let replicas: Vec<i32> = self
            .target_replicas
            .iter()
            .copied()
            .filter(|r| !removing.contains(r))
            .collect();
        if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|r| isr.contains(r)) {
            return;
        }
        self.target_isr = isr;
        self.target_replicas = replicas;
        self.target_adding.clear();
        self.target_removing.clear();
    }

    /// The leader epoch moves with the leader, and also when a replica leaves the
    /// assignment (Kafka's `triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`), so the
    /// removed replica's fetches are fenced.
    fn bumps_leader_epoch(&self, leader: i32) -> bool {
        leader != self.old.leader
            || !self
                .old
                .replicas
                .iter()
                .all(|r| self.target_replicas.contains(r))
    }

    /// Kafka's `maybeUpdateLastKnownLeader`: the first time the ISR empties, the leader of the
    /// moment is remembered; once the partition has a leader again, it is forgotten.
    fn settle_last_known_leader(&self, isr: &[i32], leader: i32) -> Vec<i32> {
        let old = self.old;
        if !self.elr_enabled {
            return old.last_known_elr.clone();
        }
        if isr.is_empty() && !old.isr.is_empty() && old.last_known_elr != [old.leader] {
            return vec![old.leader];
        }
        if leader != NO_LEADER {
            return Vec::new();
        }
        old.last_known_elr.clone()
    }
}

/// The record that moves a partition to `next`, in full.
pub(super) fn change_record(topic_id: Uuid, next: &PartitionRegistration) -> MetadataRecord {
    MetadataRecord::PartitionChange {
        topic_id,
        partition: next.index,
        leader: next.leader,
        leader_epoch: next.leader_epoch,
        isr: next.isr.clone(),
        partition_epoch: next.partition_epoch,
        elr: next.elr.clone(),
        last_known_elr: next.last_known_elr.clone(),
        replicas: Some(next.replicas.clone()),
        adding_replicas: next.adding_replicas.clone(),
        removing_replicas: next.removing_replicas.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_control::{heartbeat, register_broker, shut_down_heartbeat};
    use crate::fixtures::*;
    use crate::image::MetadataImage;
    use crate::replication_control::{alter_partition, fence_broker};
    use proptest::prelude::*;

    /// Kafka's PartitionChangeBuilderTest ELR cases: shrinking below min ISR keeps the replica
    /// that leaves eligible; back at min ISR the ELR is empty again.
    #[test]
    fn isr_below_min_isr_keeps_the_replicas_that_leave_eligible() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        shrink_or_expand(&mut img, id, &[1, 2], &ELR);
        assert_eq!(
            state(&img, id),
            (1, vec![1, 2], vec![], vec![]),
            "at min ISR"
        );
        shrink_or_expand(&mut img, id, &[1], &ELR);
        assert_eq!(state(&img, id), (1, vec![1], vec![2], vec![]));
        shrink_or_expand(&mut img, id, &[1, 3], &ELR);
        assert_eq!(state(&img, id), (1, vec![1, 3], vec![], vec![]));
        // Without ELR the same shrink keeps nothing.
        shrink_or_expand(&mut img, id, &[1], &no_elr(false));
        assert_eq!(state(&img, id), (1, vec![1], vec![], vec![]));
    }

    /// The last ISR member leaves the ISR when fenced (into the ELR); a replica that shut down
    /// cleanly while the ISR was below min ISR leads when it is back, before the last leader.
    #[test]
    fn a_clean_elr_member_leads_when_the_isr_is_empty() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        fence_with(&mut img, 3, &ELR);
        assert_eq!(state(&img, id), (1, vec![1, 2], vec![], vec![]));
        let (records, _) = shut_down_heartbeat(&img, 2, 1, 0, &ELR).unwrap();
        apply(&mut img, &records);
        assert_eq!(state(&img, id), (1, vec![1], vec![2], vec![]));
        // Broker 2 is still unfenced (its session has not ended) but shutting down: the leader
        // dying now must not make it lead.
        assert!(img.is_live(2) && !img.is_active(2));
        fence_with(&mut img, 1, &ELR);
        let p = img.partition(id, 0).unwrap().clone();
        assert_eq!(state(&img, id), (NO_LEADER, vec![], vec![1, 2], vec![1]));
        come_back(&mut img, 2, true);
        let q = img.partition(id, 0).unwrap();
        assert_eq!(state(&img, id), (2, vec![2], vec![1], vec![]));
        assert_eq!(q.leader_epoch, p.leader_epoch + 1);
        // Broker 3 was out of the ISR and the ELR: it never becomes eligible by coming back.
        come_back(&mut img, 3, true);
        assert_eq!(state(&img, id), (2, vec![2], vec![1], vec![]));
        // It catches up: the ISR is back at min ISR and the ELR empties.
        shrink_or_expand(&mut img, id, &[2, 3], &ELR);
        assert_eq!(state(&img, id), (2, vec![2, 3], vec![], vec![]));
    }

    /// A broker that restarts after a crash may have lost what it acknowledged: it leaves the
    /// ELR. With the ISR and ELR empty, the last known leader leads again once it is back.
    #[test]
    fn an_unclean_restart_leaves_the_elr() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        fence_with(&mut img, 3, &ELR);
        fence_with(&mut img, 2, &ELR);
        assert_eq!(state(&img, id), (1, vec![1], vec![2], vec![]));
        fence_with(&mut img, 1, &ELR);
        assert_eq!(state(&img, id), (NO_LEADER, vec![], vec![1, 2], vec![1]));
        come_back(&mut img, 2, false);
        assert_eq!(state(&img, id), (NO_LEADER, vec![], vec![1], vec![1]));
        come_back(&mut img, 1, false);
        assert_eq!(state(&img, id), (1, vec![1], vec![], vec![]));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Fence(i32),
        Heartbeat(i32),
        Shrink(i32),
        Restart(i32, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1..=4i32).prop_map(Op::Fence),
            (1..=4i32).prop_map(Op::Heartbeat),
            (1..=4i32).prop_map(Op::Shrink),
            (1..=4i32, any::<bool>()).prop_map(|(n, clean)| Op::Restart(n, clean)),
        ]
    }

    fn decide_op(
        img: &MetadataImage,
        id: Uuid,
        op: &Op,
        policy: &ElectionPolicy,
    ) -> Vec<MetadataRecord> {
        match *op {
            Op::Fence(n) => fence_broker(img, n, policy),
            Op::Heartbeat(n) => {
                let epoch = img.brokers[&n].epoch;
                heartbeat(img, n, epoch, img.metadata_offset, policy)
                    .unwrap()
                    .0
            }
            Op::Shrink(keep) => {
                // The leader of partition 0 drops every follower except `keep`.
                let p = &img.topics[&id].partitions[0];
                let isr: Vec<i32> = p
                    .isr
                    .iter()
                    .copied()
                    .filter(|&r| r == p.leader || r == keep)
                    .collect();
                let r = isr_proposal(img, id, isr);
                alter_partition(img, &r, policy)
                    .map(|d| d.0)
                    .unwrap_or_default()
            }
            Op::Restart(n, clean) => {
                let previous = clean.then(|| img.brokers[&n].epoch);
                register_broker(img, &restart(n, previous), policy).0
            }
        }
    }

    proptest! {
        /// Leader epochs and partition epochs never go backwards; the leader is live and in the
        /// ISR; ISR and ELR are disjoint, and the ELR is empty at or above min ISR; a new leader
        /// comes from the ISR, the ELR or the last known leader unless unclean election is on;
        /// the ISR is empty only with ELR on.
        #[test]
        fn election_invariants(
            ops in proptest::collection::vec(op(), 1..60),
            unclean: bool,
            elr: bool,
        ) {
            let policy = ElectionPolicy { elr_enabled: elr, ..if elr { ELR } else { no_elr(false) } };
            let policy = ElectionPolicy { default_unclean: unclean, ..policy };
            let mut img = cluster(4);
            let id = with_topic(&mut img, 4, 3);
            for op in ops {
                let before = img.topics[&id].partitions.clone();
                img.metadata_offset += 1;
                let records = decide_op(&img, id, &op, &policy);
                for r in &records {
                    prop_assert!(img.apply(r).is_ok(), "record refused: {:?}", r);
                }
                for (old, new) in before.iter().zip(&img.topics[&id].partitions) {
                    prop_assert!(new.leader_epoch >= old.leader_epoch);
                    prop_assert!(new.partition_epoch >= old.partition_epoch);
                    prop_assert!(elr || !new.isr.is_empty());
                    prop_assert!(new.elr.iter().all(|r| !new.isr.contains(r)), "{:?}", new);
                    if new.isr.len() >= policy.default_min_isr as usize {
                        prop_assert!(new.elr.is_empty(), "{:?}", new);
                    }
                    if new.leader != NO_LEADER {
                        prop_assert!(new.isr.contains(&new.leader));
                        prop_assert!(img.is_live(new.leader));
                    }
                    if new.leader != old.leader {
                        prop_assert!(new.leader_epoch == old.leader_epoch + 1);
                        let eligible = old.isr.contains(&new.leader)
                            || old.elr.contains(&new.leader)
                            || old.last_known_elr.contains(&new.leader);
                        if new.leader != NO_LEADER && !unclean {
                            prop_assert!(eligible, "leader {} not eligible in {:?}", new.leader, old);
                        }
                    }
                }
            }
        }
    }
}
