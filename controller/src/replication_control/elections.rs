//! Leader elections that no broker's departure forces: ElectLeaders (Kafka's
//! `ReplicationControlManager.electLeaders`, preferred or unclean) and the periodic
//! preferred-leader balancing (`maybeBalancePartitionLeaders`).

use super::MAX_PARTITIONS_PER_REQUEST;
use crate::configuration_control::ElectionPolicy;
use crate::error::ControllerError;
use crate::image::{MetadataImage, MetadataRecord, NO_LEADER};
use crate::partition_change::{Election, PartitionChangeBuilder};
use crate::request::{ControllerReply, ControllerResult, ElectionOutcome, ElectionType};

/// Bound on preferred-leader elections in one metadata write (Kafka's
/// `MAX_ELECTIONS_PER_IMBALANCE`); the rest wait for the next check.
pub const MAX_ELECTIONS_PER_IMBALANCE: usize = 1_000;

/// Whether some partition is led by a replica other than its preferred one (the first in
/// its assignment).
pub fn has_imbalanced_partitions(image: &MetadataImage) -> bool {
    image
        .topics
        .values()
        .flat_map(|t| &t.partitions)
        .any(|p| p.replicas.first().is_some_and(|&r| r != p.leader))
}

/// Kafka's preferred election (`PartitionChangeBuilder` with `Election.PREFERRED`), for every
/// imbalanced partition: leadership moves to the preferred replica when it is live and in the
/// ISR (leader epoch + 1); otherwise the partition is left as it is.
pub fn elect_preferred_leaders(
    image: &MetadataImage,
    policy: &ElectionPolicy,
) -> Vec<MetadataRecord> {
    let acceptable = |x: i32| image.is_active(x);
    let mut records = Vec::new();
    for t in image.topics.values() {
        for p in &t.partitions {
            if records.len() >= MAX_ELECTIONS_PER_IMBALANCE {
                return records;
            }
            let Some(&preferred) = p.replicas.first() else {
                continue;
            };
            if preferred == p.leader || !p.isr.contains(&preferred) || !image.is_active(preferred) {
                continue;
            }
            let mut change = PartitionChangeBuilder::new(policy, t, p, p.isr.clone(), &acceptable);
            change.election = Election::Preferred;
            records.extend(change.build(t.id));
        }
    }
    records
}

/// ElectLeaders (Kafka's `ReplicationControlManager.electLeaders`): one election per named
/// partition, or for every partition when none is named (then partitions needing none are left
/// out of the answer).
pub fn elect_leaders(
    image: &MetadataImage,
    election: ElectionType,
    partitions: Option<&[(String, Vec<i32>)]>,
    policy: &ElectionPolicy,
) -> Result<ControllerResult, ControllerError> {
    let mut records = Vec::new();
    let mut results = Vec::new();
    let named = partitions.is_some();
    let wanted: Vec<(String, Vec<i32>)> = match partitions {
        Some(p) => p.to_vec(),
        None => image
            .topics
            .values()
            .map(|t| {
                (
                    t.name.clone(),
                    t.partitions.iter().map(|p| p.index).collect(),
                )
            })
            .collect(),
    };
    for (topic, mut indexes) in wanted {
        indexes.sort_unstable();
        indexes.dedup();
        let mut outcomes = Vec::new();
        for index in indexes {
            let outcome = elect_one(image, &topic, index, election, policy, &mut records);
            if named || outcome != ElectionOutcome::NotNeeded {
                outcomes.push((index, outcome));
            }
        }
        if records.len() > MAX_PARTITIONS_PER_REQUEST as usize {
            return Err(ControllerError::InvalidRequest(format!(
                "more than {MAX_PARTITIONS_PER_REQUEST} elections in one request"
            )));
        }
        results.push((topic, outcomes));
    }
    Ok((records, ControllerReply::Elections(results)))
}

/// Kafka's `electLeader` for one partition.
fn elect_one(
    image: &MetadataImage,
    topic: &str,
    index: i32,
    election: ElectionType,
    policy: &ElectionPolicy,
    records: &mut Vec<MetadataRecord>,
) -> ElectionOutcome {
    let Some(t) = image.topic_by_name(topic) else {
        return ElectionOutcome::UnknownTopicOrPartition;
    };
    let Some(p) = usize::try_from(index)
        .ok()
        .and_then(|i| t.partitions.get(i))
    else {
        return ElectionOutcome::UnknownTopicOrPartition;
    };
    let not_needed = match election {
        ElectionType::Preferred => p.replicas.first() == Some(&p.leader),
        ElectionType::Unclean => p.leader != NO_LEADER,
    };
    if not_needed {
        return ElectionOutcome::NotNeeded;
    }
    let acceptable = |x: i32| image.is_active(x);
    let mut change = PartitionChangeBuilder::new(policy, t, p, p.isr.clone(), &acceptable);
    change.election = match election {
        ElectionType::Preferred => Election::Preferred,
        ElectionType::Unclean => Election::Unclean,
    };
    match change.build(t.id) {
        Some(record) => {
            records.push(record);
            ElectionOutcome::Elected
        }
        None if election == ElectionType::Preferred => ElectionOutcome::PreferredLeaderNotAvailable,
        None => ElectionOutcome::EligibleLeadersNotAvailable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::replication_control::unfence_broker;
    use crate::request::ElectionResults;

    #[test]
    fn preferred_leaders_come_back_when_live_and_in_sync() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 3, 3);
        assert!(!has_imbalanced_partitions(&img));
        assert!(elect_preferred_leaders(&img, &no_elr(false)).is_empty());
        let preferred: Vec<i32> = img.topics[&id]
            .partitions
            .iter()
            .map(|p| p.replicas[0])
            .collect();
        // Node 1 dies: partitions it led move away, and it leaves their ISRs.
        fence(&mut img, 1, false);
        assert!(has_imbalanced_partitions(&img));
        assert!(
            elect_preferred_leaders(&img, &no_elr(false)).is_empty(),
            "a fenced preferred replica is not elected"
        );
        // Back, but not in sync yet: still nothing.
        let d = unfence_broker(&img, 1, &no_elr(false));
        apply(&mut img, &d);
        assert!(elect_preferred_leaders(&img, &no_elr(false)).is_empty());
        // It catches up and rejoins the ISRs: leadership goes back, epoch + 1.
        for p in img.topics[&id].partitions.clone() {
            if !p.isr.contains(&1) {
                let mut isr = p.isr.clone();
                isr.push(1);
                apply(
                    &mut img,
                    &[MetadataRecord::PartitionChange {
                        topic_id: id,
                        partition: p.index,
                        leader: p.leader,
                        leader_epoch: p.leader_epoch,
                        isr,
                        partition_epoch: p.partition_epoch + 1,
                        elr: Vec::new(),
                        last_known_elr: Vec::new(),
                        replicas: None,
                        adding_replicas: Vec::new(),
                        removing_replicas: Vec::new(),
                    }],
                );
            }
        }
        let before: Vec<i32> = img.topics[&id]
            .partitions
            .iter()
            .map(|p| p.leader_epoch)
            .collect();
        let d = elect_preferred_leaders(&img, &no_elr(false));
        assert!(!d.is_empty());
        apply(&mut img, &d);
        let t = &img.topics[&id];
        assert_eq!(
            t.partitions.iter().map(|p| p.leader).collect::<Vec<_>>(),
            preferred
        );
        for (p, e) in t.partitions.iter().zip(before) {
            assert_eq!(p.leader_epoch, e + i32::from(p.replicas[0] == 1), "{p:?}");
        }
        assert!(!has_imbalanced_partitions(&img));
    }

    fn elect(
        img: &mut MetadataImage,
        election: ElectionType,
        partitions: Option<&[(String, Vec<i32>)]>,
    ) -> ElectionResults {
        let (records, reply) = elect_leaders(img, election, partitions, &ELR).unwrap();
        apply(img, &records);
        let ControllerReply::Elections(r) = reply else {
            panic!("{reply:?}")
        };
        r
    }

    /// Kafka's `electLeader` outcomes, preferred and unclean.
    #[test]
    fn elect_leaders_preferred_and_unclean() {
        use ElectionOutcome::*;
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        let t0 = vec![("t".to_string(), vec![0, 5])];
        let preferred = |img: &mut MetadataImage| elect(img, ElectionType::Preferred, Some(&t0));
        assert_eq!(
            preferred(&mut img),
            vec![(
                "t".into(),
                vec![(0, NotNeeded), (5, UnknownTopicOrPartition)]
            )]
        );
        // Leadership moves away from the preferred replica, which comes back into the ISR.
        fence_with(&mut img, 1, &ELR);
        assert_eq!(state(&img, id).0, 2);
        assert_eq!(
            preferred(&mut img)[0].1[0],
            (0, PreferredLeaderNotAvailable)
        );
        come_back(&mut img, 1, true);
        shrink_or_expand(&mut img, id, &[2, 3, 1], &ELR);
        let epoch = img.partition(id, 0).unwrap().leader_epoch;
        assert_eq!(preferred(&mut img)[0].1[0], (0, Elected));
        assert_eq!(state(&img, id).0, 1);
        assert_eq!(img.partition(id, 0).unwrap().leader_epoch, epoch + 1);
        // Every partition: those needing no election are left out.
        assert_eq!(
            elect(&mut img, ElectionType::Preferred, None),
            vec![("t".into(), vec![])]
        );

        // Unclean: only for a leaderless partition, from any active replica.
        let unclean = |img: &mut MetadataImage| elect(img, ElectionType::Unclean, Some(&t0));
        assert_eq!(unclean(&mut img)[0].1[0], (0, NotNeeded));
        fence_with(&mut img, 3, &ELR);
        fence_with(&mut img, 2, &ELR);
        fence_with(&mut img, 1, &ELR);
        assert_eq!(state(&img, id).0, NO_LEADER);
        come_back(&mut img, 3, false);
        assert_eq!(
            state(&img, id).0,
            NO_LEADER,
            "a crashed replica outside the ELR"
        );
        assert_eq!(unclean(&mut img)[0].1[0], (0, Elected));
        assert_eq!(state(&img, id), (3, vec![3], vec![], vec![]));
        fence_with(&mut img, 3, &ELR);
        assert_eq!(unclean(&mut img)[0].1[0], (0, EligibleLeadersNotAvailable));
    }
}
