//! Kafka's `ReplicationControlManager`: topics and their partitions, as the active controller
//! decides them. This module holds AlterPartition (ISR changes proposed by partition
//! leaders) and what fencing, unfencing and a broker's shutdown do to its partitions
//! (`handleBrokerFenced`, `handleBrokerUnfenced`, `handleBrokerUncleanShutdown`); topic
//! creation and deletion ([`topics`]), leader elections ([`elections`]) and partition
//! reassignments ([`reassignment`]) are its submodules. Every change of one partition is
//! built by `PartitionChangeBuilder`.

pub mod elections;
pub mod reassignment;
pub mod topics;

pub use elections::{elect_leaders, elect_preferred_leaders, has_imbalanced_partitions};
pub use reassignment::{alter_partition_reassignments, list_partition_reassignments};
pub use topics::{create_partitions, create_topic, delete_topic, TopicSpec};

use super::configuration_control::ElectionPolicy;
use super::error::ControllerError;
use super::image::{MetadataImage, MetadataRecord, NO_LEADER};
use super::partition_change::{change_record, PartitionChangeBuilder};
use super::request::{AlterPartitionRequest, ControllerReply, ControllerResult};

/// Upper bound on partitions created by one request (Kafka's MAX_PARTITIONS_PER_BATCH),
/// which also bounds the size of one Raft entry.
pub const MAX_PARTITIONS_PER_REQUEST: i32 = 10_000;

/// Fences a broker (missed heartbeats): it leaves every ISR it is in (with ELR off, except as
/// the last member, which Kafka then keeps so that a clean election is possible when it
/// returns); partitions it led get a new leader from the remaining ISR, or the ELR, or none.
pub fn fence_broker(
    image: &MetadataImage,
    node_id: i32,
    policy: &ElectionPolicy,
) -> Vec<MetadataRecord> {
    let Some(b) = image.brokers.get(&node_id).filter(|b| !b.fenced) else {
        return Vec::new();
    };
    let mut records = move_replica_away(image, node_id, policy);
    records.push(MetadataRecord::FenceBroker {
        node_id,
        epoch: b.epoch,
    });
    records
}

/// UnregisterBroker (Kafka's `ReplicationControlManager.unregisterBroker` and
/// `handleBrokerUnregistered`): the broker leaves every ISR and leadership, as when fenced,
/// and its registration is removed. BROKER_ID_NOT_REGISTERED for a broker not registered.
pub fn unregister_broker(
    image: &MetadataImage,
    node_id: i32,
    policy: &ElectionPolicy,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let b = image
        .brokers
        .get(&node_id)
        .ok_or(ControllerError::BrokerIdNotRegistered(node_id))?;
    let mut records = move_replica_away(image, node_id, policy);
    records.push(MetadataRecord::UnregisterBroker {
        node_id,
        epoch: b.epoch,
    });
    Ok(records)
}

/// Takes `node_id` out of every ISR it is in and out of every leadership, electing from what
/// remains: what fencing and controlled shutdown share (Kafka's `generateLeaderAndIsrUpdates`
/// with `brokerToRemove`).
pub(super) fn move_replica_away(
    image: &MetadataImage,
    node_id: i32,
    policy: &ElectionPolicy,
) -> Vec<MetadataRecord> {
    remove_replica(image, node_id, policy, false)
}

/// A broker restarted after an unclean shutdown (Kafka's `handleBrokerShutdown` with
/// `isCleanShutdown` false, ELR on): it leaves every ISR and every ELR, since it may have lost
/// records it had acknowledged as a follower.
pub(super) fn remove_unclean_replica(
    image: &MetadataImage,
    node_id: i32,
    policy: &ElectionPolicy,
) -> Vec<MetadataRecord> {
    remove_replica(image, node_id, policy, true)
}

/// Kafka's `generateLeaderAndIsrUpdates` for one broker that may not lead: every partition
/// whose ISR holds it (and, after an unclean shutdown, whose ELR holds it; else that it leads)
/// moves to the ISR without it, through `PartitionChangeBuilder`.
fn remove_replica(
    image: &MetadataImage,
    node_id: i32,
    policy: &ElectionPolicy,
    unclean_shutdown: bool,
) -> Vec<MetadataRecord> {
    let acceptable = |x: i32| x != node_id && image.is_active(x);
    let mut records = Vec::new();
    for t in image.topics.values() {
        for p in &t.partitions {
            let also = if unclean_shutdown {
                p.elr.contains(&node_id)
            } else {
                p.leader == node_id
            };
            if !p.isr.contains(&node_id) && !also {
                continue;
            }
            let isr = p.isr.iter().copied().filter(|&r| r != node_id).collect();
            let mut change = PartitionChangeBuilder::new(policy, t, p, isr, &acceptable);
            change.unclean_shutdown = unclean_shutdown.then_some(node_id);
            records.extend(change.build(t.id));
        }
    }
    records
}

/// Unfences a broker; leaderless partitions that can now elect a leader do so.
pub fn unfence_broker(
    image: &MetadataImage,
    node_id: i32,
    policy: &ElectionPolicy,
) -> Vec<MetadataRecord> {
    let Some(b) = image.brokers.get(&node_id).filter(|b| b.fenced) else {
        return Vec::new();
    };
    let acceptable = |x: i32| x == node_id || image.is_active(x);
    let mut records = vec![MetadataRecord::UnfenceBroker {
        node_id,
        epoch: b.epoch,
    }];
    for t in image.topics.values() {
        for p in t.partitions.iter().filter(|p| p.leader == NO_LEADER) {
            let change = PartitionChangeBuilder::new(policy, t, p, p.isr.clone(), &acceptable);
            records.extend(change.build(t.id));
        }
    }
    records
}

/// Kafka's AlterPartition validation (`validateAlterPartitionData`), in Kafka's order, then
/// the change through the same rules as every other (`PartitionChangeBuilder`): an ISR
/// shrinking below min ISR moves the replicas that leave into the ELR.
pub fn alter_partition(
    image: &MetadataImage,
    r: &AlterPartitionRequest,
    policy: &ElectionPolicy,
) -> Result<ControllerResult, ControllerError> {
    let t = image
        .topics
        .get(&r.topic_id)
        .ok_or(ControllerError::UnknownTopicId(r.topic_id))?;
    let p = usize::try_from(r.partition)
        .ok()
        .and_then(|i| t.partitions.get(i))
        .ok_or_else(|| {
            ControllerError::UnknownTopicOrPartition(format!("{}-{}", t.name, r.partition))
        })?;
    // A leader that knows newer epochs than ours talked to a newer controller.
    if r.leader_epoch > p.leader_epoch || r.partition_epoch > p.partition_epoch {
        return Err(ControllerError::NotController { active: None });
    }
    if r.leader_epoch < p.leader_epoch {
        return Err(ControllerError::FencedLeaderEpoch {
            request: r.leader_epoch,
            current: p.leader_epoch,
        });
    }
    if r.leader_id != p.leader {
        return Err(ControllerError::InvalidRequest(format!(
            "node {} is not the leader ({})",
            r.leader_id, p.leader
        )));
    }
    if r.partition_epoch < p.partition_epoch {
        return Err(ControllerError::InvalidUpdateVersion {
            request: r.partition_epoch,
            current: p.partition_epoch,
        });
    }
    let mut dedup = r.new_isr.clone();
    dedup.sort_unstable();
    dedup.dedup();
    if r.new_isr.is_empty()
        || dedup.len() != r.new_isr.len()
        || r.new_isr.iter().any(|x| !p.replicas.contains(x))
    {
        return Err(ControllerError::InvalidRequest(format!(
            "ISR {:?} is not a subset of replicas {:?}",
            r.new_isr, p.replicas
        )));
    }
    if !r.new_isr.contains(&p.leader) {
        return Err(ControllerError::InvalidRequest(format!(
            "ISR {:?} does not contain the leader {}",
            r.new_isr, p.leader
        )));
    }
    if let Some(x) = r.new_isr.iter().find(|&&x| !image.is_active(x)) {
        return Err(ControllerError::IneligibleReplica(format!(
            "replica {x} is fenced, shutting down or not registered"
        )));
    }
    // The leader is in the new ISR and live, so it stays: only the partition epoch moves.
    let acceptable = |x: i32| image.is_active(x);
    let change = PartitionChangeBuilder::new(policy, t, p, r.new_isr.clone(), &acceptable);
    let Some(next) = change.next() else {
        // Nothing changes: the partition as it is (Kafka answers with the current state).
        return Ok((Vec::new(), ControllerReply::Partition(p.clone())));
    };
    Ok((
        vec![change_record(r.topic_id, &next)],
        ControllerReply::Partition(next),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_control::heartbeat;
    use crate::fixtures::*;
    use uuid::Uuid;

    #[test]
    fn fencing_moves_leadership_within_the_isr() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        let records = fence_broker(&img, 1, &no_elr(false));
        apply(&mut img, &records);
        let p = img.partition(id, 0).unwrap();
        assert_eq!(p.leader, 2);
        assert_eq!(p.isr, vec![2, 3]);
        assert_eq!((p.leader_epoch, p.partition_epoch), (1, 1));
        assert!(!img.is_live(1));

        // Fencing a follower shrinks the ISR without a leader change.
        fence(&mut img, 3, false);
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 2));
        assert_eq!(p.isr, vec![2]);

        // The last ISR member stays in the ISR; the partition goes leaderless.
        fence(&mut img, 2, false);
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch), (NO_LEADER, 2));
        assert_eq!(p.isr, vec![2]);

        // A broker outside the ISR coming back does not lead (clean election only)...
        let (records, _) = heartbeat(&img, 1, 1, 0, &no_elr(false)).unwrap();
        apply(&mut img, &records);
        assert_eq!(img.partition(id, 0).unwrap().leader, NO_LEADER);
        // ...the last ISR member coming back does.
        let (records, _) = heartbeat(&img, 2, 1, 0, &no_elr(false)).unwrap();
        apply(&mut img, &records);
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch), (2, 3));
    }

    #[test]
    fn unregistering_moves_leadership_and_removes_the_registration() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        assert_eq!(
            unregister_broker(&img, 9, &no_elr(false)),
            Err(ControllerError::BrokerIdNotRegistered(9))
        );
        let records = unregister_broker(&img, 1, &no_elr(false)).unwrap();
        apply(&mut img, &records);
        assert!(!img.brokers.contains_key(&1));
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.isr.clone()), (2, vec![2, 3]));
        // A fenced broker goes as well.
        fence(&mut img, 3, false);
        let records = unregister_broker(&img, 3, &no_elr(false)).unwrap();
        apply(&mut img, &records);
        assert!(!img.brokers.contains_key(&3));
    }

    #[test]
    fn unclean_election_picks_a_live_replica() {
        let mut img = cluster(2);
        let id = with_topic(&mut img, 1, 2);
        fence(&mut img, 2, false);
        assert_eq!(img.partition(id, 0).unwrap().isr, vec![1]);
        fence(&mut img, 1, false);
        assert_eq!(img.partition(id, 0).unwrap().leader, NO_LEADER);
        // Broker 2 returns; it is not in the ISR, so only an unclean election makes it leader.
        let (records, _) = heartbeat(&img, 2, 1, 0, &no_elr(true)).unwrap();
        apply(&mut img, &records);
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    }

    #[test]
    fn alter_partition_fencing_rules() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        let req =
            |leader_id, leader_epoch, partition_epoch, new_isr: &[i32]| AlterPartitionRequest {
                topic_id: id,
                partition: 0,
                leader_id,
                leader_epoch,
                partition_epoch,
                new_isr: new_isr.to_vec(),
            };
        let (records, reply) =
            alter_partition(&img, &req(1, 0, 0, &[1, 2]), &no_elr(false)).unwrap();
        apply(&mut img, &records);
        let p = img.partition(id, 0).unwrap().clone();
        assert_eq!(reply, ControllerReply::Partition(p.clone()));
        assert_eq!((p.leader_epoch, p.partition_epoch), (0, 1));
        assert_eq!(p.isr, vec![1, 2]);

        let code_in =
            |img: &MetadataImage, r| alter_partition(img, &r, &no_elr(false)).unwrap_err().code();
        let code = |r| code_in(&img, r);
        assert_eq!(
            code(req(1, 0, 0, &[1])),
            95,
            "stale partition epoch: INVALID_UPDATE_VERSION"
        );
        assert_eq!(code(req(2, 0, 1, &[2])), 42, "not the leader");
        assert_eq!(code(req(1, 0, 1, &[2])), 42, "ISR without the leader");
        assert_eq!(code(req(1, 0, 1, &[1, 4])), 42, "ISR outside the replicas");
        assert_eq!(code(req(1, 1, 1, &[1])), 41, "newer leader epoch than ours");

        fence(&mut img, 1, false);
        let code = |r| code_in(&img, r);
        assert_eq!(code(req(1, 0, 1, &[1])), 74, "old leader is fenced");
        let p = img.partition(id, 0).unwrap();
        assert_eq!(
            code(req(2, p.leader_epoch, p.partition_epoch, &[2, 1])),
            107,
            "fenced replica in the ISR"
        );
        let mut bad = req(2, 1, 2, &[2]);
        bad.topic_id = Uuid::new_v4();
        assert_eq!(code(bad), 100);
        let mut bad = req(2, 1, 2, &[2]);
        bad.partition = 5;
        assert_eq!(code(bad), 3);
    }
}
