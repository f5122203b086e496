//! Partition reassignment (Kafka's `ReplicationControlManager.alterPartitionReassignments`
//! and `listPartitionReassignments`, with `PartitionReassignmentReplicas` and
//! `PartitionReassignmentRevert`): a target makes the assignment the target followed by the
//! leaving replicas; `PartitionChangeBuilder` completes it once every target replica is in sync. A
//! cancellation takes the adding replicas out again.

use super::topics::validate_manual_assignment;
use crate::configuration_control::ElectionPolicy;
use crate::error::ControllerError;
use crate::image::{MetadataImage, MetadataRecord, PartitionRegistration, TopicImage};
use crate::partition_change::PartitionChangeBuilder;
use crate::request::{ControllerReply, ControllerResult, TopicReassignmentTargets};

/// AlterPartitionReassignments (Kafka's `ReplicationControlManager.
/// alterPartitionReassignments`): each partition is decided on its own and answers its own
/// error; the records of those that succeed are written together.
pub fn alter_partition_reassignments(
    image: &MetadataImage,
    topics: &[TopicReassignmentTargets],
    allow_replication_factor_change: bool,
    policy: &ElectionPolicy,
) -> ControllerResult {
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(topics.len());
    for (topic, partitions) in topics {
        let mut outcomes = Vec::with_capacity(partitions.len());
        for (index, target) in partitions {
            let outcome = reassign_one(
                image,
                topic,
                *index,
                target.as_deref(),
                allow_replication_factor_change,
                policy,
            )
            .map(|record| records.extend(record));
            outcomes.push((*index, outcome));
        }
        results.push((topic.clone(), outcomes));
    }
    (records, ControllerReply::Reassignments(results))
}

/// Kafka's `alterPartitionReassignment` for one partition: a target starts (or replaces) a
/// reassignment, `None` cancels the one in progress.
fn reassign_one(
    image: &MetadataImage,
    topic: &str,
    index: i32,
    target: Option<&[i32]>,
    allow_replication_factor_change: bool,
    policy: &ElectionPolicy,
) -> Result<Option<MetadataRecord>, ControllerError> {
    let unknown = || ControllerError::UnknownTopicOrPartition(format!("{topic}-{index}"));
    let t = image.topic_by_name(topic).ok_or_else(unknown)?;
    let p = usize::try_from(index)
        .ok()
        .and_then(|i| t.partitions.get(i))
        .ok_or_else(unknown)?;
    let acceptable = |x: i32| image.is_active(x);
    let change = match target {
        None => cancel_reassignment(policy, t, p, &acceptable)?,
        Some(target) => {
            validate_manual_assignment(image, target, None)?;
            if !allow_replication_factor_change {
                check_replication_factor_unchanged(p, target)?;
            }
            change_reassignment(policy, t, p, target, &acceptable)
        }
    };
    Ok(change.build(t.id))
}

/// KIP-860 (Kafka's `validatePartitionReplicationFactorUnchanged`): the target has as many
/// replicas as the partition has once any reassignment in progress is over.
fn check_replication_factor_unchanged(
    p: &PartitionRegistration,
    target: &[i32],
) -> Result<(), ControllerError> {
    let current = p
        .replicas
        .iter()
        .filter(|r| !p.removing_replicas.contains(r))
        .count();
    if current == target.len() {
        return Ok(());
    }
    Err(ControllerError::InvalidReplicationFactor(format!(
        "the replication factor is changed from {current} to {}",
        target.len()
    )))
}

/// Kafka's `changePartitionReassignment` (`PartitionReassignmentReplicas`): the assignment
/// becomes the target followed by the current replicas that leave; those that join are
/// `adding`, those that leave `removing`. The change builder completes it at once when the
/// ISR already holds every target replica (a reordering, or a shrink).
fn change_reassignment<'a>(
    policy: &ElectionPolicy,
    t: &TopicImage,
    p: &'a PartitionRegistration,
    target: &[i32],
    acceptable: &'a dyn Fn(i32) -> bool,
) -> PartitionChangeBuilder<'a> {
    let mut removing: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    removing.sort_unstable();
    let mut adding: Vec<i32> = target
        .iter()
        .copied()
        .filter(|r| !p.replicas.contains(r))
        .collect();
    adding.sort_unstable();
    let mut change = PartitionChangeBuilder::new(policy, t, p, p.isr.clone(), acceptable);
    change.target_replicas = target.iter().chain(&removing).copied().collect();
    change.target_adding = adding;
    change.target_removing = removing;
    change
}

/// Kafka's `cancelPartitionReassignment` (`PartitionReassignmentRevert`): the replicas being
/// added leave the assignment and the ISR; those being removed stay. If the ISR held only
/// added replicas, the first original replica becomes the ISR, which is an unclean election
/// and so needs `unclean.leader.election.enable`.
fn cancel_reassignment<'a>(
    policy: &ElectionPolicy,
    t: &TopicImage,
    p: &'a PartitionRegistration,
    acceptable: &'a dyn Fn(i32) -> bool,
) -> Result<PartitionChangeBuilder<'a>, ControllerError> {
    if !p.is_reassigning() {
        return Err(ControllerError::NoReassignmentInProgress(format!(
            "{}-{}",
            t.name, p.index
        )));
    }
    let original: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| !p.adding_replicas.contains(r))
        .collect();
    let mut isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|r| !p.adding_replicas.contains(r))
        .collect();
    if isr.is_empty() {
        let Some(&first) = original.first() else {
            return Err(ControllerError::InvalidReplicaAssignment(
                "the reassignment is adding every replica".into(),
            ));
        };
        if !policy.unclean_for(t) {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "reverting the reassignment of {}-{} would need an unclean leader election",
                t.name, p.index
            )));
        }
        isr.push(first);
    }
    let mut change = PartitionChangeBuilder::new(policy, t, p, isr, acceptable);
    change.target_replicas = original;
    change.target_adding.clear();
    change.target_removing.clear();
    Ok(change)
}

/// ListPartitionReassignments (Kafka's `listPartitionReassignments`): the named partitions,
/// or every partition, that are being reassigned.
pub fn list_partition_reassignments<'a>(
    image: &'a MetadataImage,
    topics: Option<&[(String, Vec<i32>)]>,
) -> Vec<(&'a str, Vec<&'a PartitionRegistration>)> {
    let reassigning = |t: &'a TopicImage, indexes: Option<&[i32]>| {
        let parts: Vec<&PartitionRegistration> = match indexes {
            None => t.partitions.iter().filter(|p| p.is_reassigning()).collect(),
            Some(ix) => ix
                .iter()
                .filter_map(|&i| usize::try_from(i).ok().and_then(|i| t.partitions.get(i)))
                .filter(|p| p.is_reassigning())
                .collect(),
        };
        (!parts.is_empty()).then_some((t.name.as_str(), parts))
    };
    match topics {
        None => image
            .topics
            .values()
            .filter_map(|t| reassigning(t, None))
            .collect(),
        Some(named) => named
            .iter()
            .filter_map(|(name, ix)| reassigning(image.topic_by_name(name)?, Some(ix)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::replication_control::alter_partition;
    use crate::request::AlterPartitionRequest;
    use uuid::Uuid;

    /// AlterPartitionReassignments of partition 0 of topic "t" to `target` (`None` cancels);
    /// applies what succeeded and returns that partition's outcome.
    fn reassign(
        img: &mut MetadataImage,
        target: Option<&[i32]>,
        allow_rf_change: bool,
        policy: &ElectionPolicy,
    ) -> Result<(), ControllerError> {
        let topics = vec![("t".to_string(), vec![(0, target.map(<[i32]>::to_vec))])];
        let (records, reply) = alter_partition_reassignments(img, &topics, allow_rf_change, policy);
        apply(img, &records);
        let ControllerReply::Reassignments(mut results) = reply else {
            panic!("unexpected reply {reply:?}");
        };
        results.remove(0).1.remove(0).1
    }

    fn assignment(img: &MetadataImage, id: Uuid) -> (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>) {
        let p = img.partition(id, 0).unwrap();
        let (r, a, rm, isr) = (
            &p.replicas,
            &p.adding_replicas,
            &p.removing_replicas,
            &p.isr,
        );
        (r.clone(), a.clone(), rm.clone(), isr.clone())
    }

    #[test]
    fn a_reassignment_adds_then_completes_when_the_new_replicas_are_in_sync() {
        let mut img = cluster(4);
        let id = with_topic(&mut img, 1, 3);
        assert_eq!(img.partition(id, 0).unwrap().replicas, vec![1, 2, 3]);
        reassign(&mut img, Some(&[2, 3, 4]), true, &ELR).unwrap();
        // Stage 1: the target first, then the replicas that leave; nobody has left yet.
        assert_eq!(
            assignment(&img, id),
            (vec![2, 3, 4, 1], vec![4], vec![1], vec![1, 2, 3])
        );
        let p = img.partition(id, 0).unwrap().clone();
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 0, 1));
        let listed = list_partition_reassignments(&img, None);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].1[0].adding_replicas, vec![4]);

        // The leader adds 4 to the ISR: that completes it. 1 leaves the assignment and the
        // ISR, and since it led, the first target replica in the ISR leads (epoch + 1).
        let r = AlterPartitionRequest {
            topic_id: id,
            partition: 0,
            leader_id: 1,
            leader_epoch: 0,
            partition_epoch: 1,
            new_isr: vec![1, 2, 3, 4],
        };
        let (records, reply) = alter_partition(&img, &r, &ELR).unwrap();
        apply(&mut img, &records);
        assert_eq!(
            assignment(&img, id),
            (vec![2, 3, 4], vec![], vec![], vec![2, 3, 4])
        );
        let p = img.partition(id, 0).unwrap().clone();
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 2));
        assert_eq!(reply, ControllerReply::Partition(p));
        assert!(list_partition_reassignments(&img, None).is_empty());
    }

    #[test]
    fn a_reordering_or_a_shrink_completes_at_once() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        reassign(&mut img, Some(&[3, 2, 1]), true, &ELR).unwrap();
        assert_eq!(
            assignment(&img, id),
            (vec![3, 2, 1], vec![], vec![], vec![1, 2, 3])
        );
        assert_eq!(img.partition(id, 0).unwrap().leader_epoch, 0, "nobody left");
        reassign(&mut img, Some(&[3, 2]), true, &ELR).unwrap();
        assert_eq!(
            assignment(&img, id),
            (vec![3, 2], vec![], vec![], vec![2, 3])
        );
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch), (3, 1), "1 led and left");
        assert_eq!(
            reassign(&mut img, Some(&[3, 2]), true, &ELR),
            Ok(()),
            "the same target again changes nothing"
        );
        assert_eq!(img.partition(id, 0).unwrap().partition_epoch, 2);
    }

    #[test]
    fn a_cancelled_reassignment_reverts() {
        let mut img = cluster(4);
        let id = with_topic(&mut img, 1, 3);
        reassign(&mut img, Some(&[2, 3, 4]), true, &ELR).unwrap();
        reassign(&mut img, None, true, &ELR).unwrap();
        // Kafka's revert keeps the assignment's order without the added replicas; 4 leaves,
        // so the leader epoch moves.
        assert_eq!(
            assignment(&img, id),
            (vec![2, 3, 1], vec![], vec![], vec![1, 2, 3])
        );
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 1, 2));
        assert_eq!(
            reassign(&mut img, None, true, &ELR).unwrap_err().code(),
            85,
            "NO_REASSIGNMENT_IN_PROGRESS"
        );
    }

    #[test]
    fn reverting_to_replicas_outside_the_isr_needs_unclean_election() {
        let mut img = cluster(4);
        let id = with_topic(&mut img, 1, 1);
        reassign(&mut img, Some(&[4]), true, &no_elr(false)).unwrap();
        assert_eq!(
            assignment(&img, id),
            (vec![4, 1], vec![4], vec![1], vec![1])
        );
        // 4 catches up, then 1 drops out: only the added replica is in sync.
        let p = img.partition(id, 0).unwrap().clone();
        let change = MetadataRecord::PartitionChange {
            topic_id: id,
            partition: 0,
            leader: 4,
            leader_epoch: p.leader_epoch + 1,
            isr: vec![4],
            partition_epoch: p.partition_epoch + 1,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            replicas: Some(vec![4, 1]),
            adding_replicas: vec![4],
            removing_replicas: vec![1],
        };
        apply(&mut img, &[change]);
        assert_eq!(
            reassign(&mut img, None, true, &no_elr(false))
                .unwrap_err()
                .code(),
            39,
            "INVALID_REPLICA_ASSIGNMENT without unclean election"
        );
        reassign(&mut img, None, true, &no_elr(true)).unwrap();
        assert_eq!(assignment(&img, id), (vec![1], vec![], vec![], vec![1]));
        assert_eq!(img.partition(id, 0).unwrap().leader, 1);
    }

    #[test]
    fn reassignment_targets_are_validated_as_kafka_does() {
        let mut img = cluster(4);
        with_topic(&mut img, 1, 3);
        let code = |img: &mut MetadataImage, t: &[i32], allow: bool| {
            reassign(img, Some(t), allow, &ELR).unwrap_err().code()
        };
        assert_eq!(code(&mut img, &[], true), 39, "empty");
        assert_eq!(code(&mut img, &[1, 2, 9], true), 39, "unregistered broker");
        assert_eq!(code(&mut img, &[1, 2, 2], true), 39, "a broker twice");
        assert_eq!(
            code(&mut img, &[1, 2], false),
            38,
            "RF change not allowed (KIP-860)"
        );
        reassign(&mut img, Some(&[1, 2]), true, &ELR).unwrap();
        reassign(&mut img, Some(&[2, 3, 4]), true, &ELR).unwrap();
        // In progress: the factor counted is the target's (3), not the assignment's (4).
        reassign(&mut img, Some(&[2, 3, 1]), false, &ELR).unwrap();
        let topics = vec![
            ("t".to_string(), vec![(5, None)]),
            ("nope".to_string(), vec![(0, None)]),
        ];
        let (records, reply) = alter_partition_reassignments(&img, &topics, true, &ELR);
        assert!(records.is_empty());
        let ControllerReply::Reassignments(results) = reply else {
            panic!("unexpected reply");
        };
        for (_, parts) in results {
            assert_eq!(parts[0].1.as_ref().unwrap_err().code(), 3);
        }
    }
}
