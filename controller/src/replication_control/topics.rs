//! CreateTopics, CreatePartitions and DeleteTopics (Kafka's `ReplicationControlManager.
//! createTopic`, `createPartitions` and `deleteTopic`): topic name rules, and each new
//! partition's replicas, from the placer (Kafka's `StripedReplicaPlacer`, without racks) or
//! from the request's manual assignment.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::MAX_PARTITIONS_PER_REQUEST;
use crate::error::ControllerError;
use crate::image::{MetadataImage, MetadataRecord, PartitionRegistration};
use crate::request::{ControllerReply, ControllerResult};

/// Rack-unaware round-robin assignment (Kafka's `StripedReplicaPlacer` without racks): the
/// leader of partition `i` is live broker `(start + i) % n`, followers the next ones in order.
/// `start` spreads leaders of successive topics over the brokers.
pub fn assign_replicas(
    live: &[i32],
    first_index: i32,
    count: i32,
    replication_factor: i16,
    start: usize,
) -> Result<Vec<PartitionRegistration>, ControllerError> {
    if replication_factor <= 0 {
        return Err(ControllerError::InvalidReplicationFactor(
            "replication factor must be larger than 0".into(),
        ));
    }
    let rf = replication_factor as usize;
    if live.len() < rf {
        return Err(ControllerError::InvalidReplicationFactor(format!(
            "replication factor {rf} is larger than the {} available brokers",
            live.len()
        )));
    }
    let n = live.len();
    Ok((first_index..first_index + count)
        .map(|index| {
            let base = start + index as usize;
            let replicas: Vec<i32> = (0..rf).map(|j| live[(base + j) % n]).collect();
            PartitionRegistration::new(index, replicas)
        })
        .collect())
}

/// What CreateTopics asks for one topic.
pub struct TopicSpec<'a> {
    pub name: &'a str,
    /// -1 with manual assignments.
    pub partitions: i32,
    /// -1 with manual assignments.
    pub replication_factor: i16,
    /// Manual replica assignments by partition index; empty for the placer's.
    pub assignments: &'a [(i32, Vec<i32>)],
    pub configs: &'a BTreeMap<String, String>,
}

/// CreateTopics for one topic (Kafka's `ReplicationControlManager.createTopic`): the
/// placer's assignment, or a manual one validated as Kafka does.
pub fn create_topic(
    image: &MetadataImage,
    spec: &TopicSpec<'_>,
    id: Uuid,
) -> Result<ControllerResult, ControllerError> {
    let name = spec.name;
    crate::names::validate_topic_name(name).map_err(ControllerError::InvalidTopic)?;
    if image.topic_ids.contains_key(name) {
        return Err(ControllerError::TopicAlreadyExists(name.to_string()));
    }
    // Kafka refuses names that collide once '.' and '_' are treated alike (its metric
    // names), as `ReplicationControlManager.validateNewTopicNames` does.
    let metric_name = |n: &str| n.replace('.', "_");
    if let Some(other) = image
        .topic_ids
        .keys()
        .find(|t| metric_name(t) == metric_name(name))
    {
        return Err(ControllerError::InvalidTopic(format!(
            "topic {name:?} collides with existing topic {other:?}"
        )));
    }
    let parts = if spec.assignments.is_empty() {
        placed_partitions(image, spec.partitions, spec.replication_factor)?
    } else {
        manual_partitions(image, spec)?
    };
    Ok((
        vec![MetadataRecord::CreateTopic {
            name: name.to_string(),
            id,
            partitions: parts.clone(),
            configs: spec.configs.clone(),
        }],
        ControllerReply::TopicCreated {
            id,
            partitions: parts,
        },
    ))
}

/// A new topic's partitions from the placer.
fn placed_partitions(
    image: &MetadataImage,
    partitions: i32,
    replication_factor: i16,
) -> Result<Vec<PartitionRegistration>, ControllerError> {
    // Kafka checks the replication factor first.
    if replication_factor <= 0 {
        return Err(ControllerError::InvalidReplicationFactor(
            "replication factor must be larger than 0, or -1 for the default".into(),
        ));
    }
    if partitions <= 0 || partitions > MAX_PARTITIONS_PER_REQUEST {
        return Err(ControllerError::InvalidPartitions(format!(
            "number of partitions must be in 1..={MAX_PARTITIONS_PER_REQUEST}, got {partitions}"
        )));
    }
    assign_replicas(
        &image.live_brokers(),
        0,
        partitions,
        replication_factor,
        image.topics.len(),
    )
}

/// A new topic's partitions from manual assignments (Kafka's `createTopic` with
/// `Assignments`): partition count and replication factor -1, each partition once, the
/// indexes 0.., every assignment valid and of one size, some replica of each active.
fn manual_partitions(
    image: &MetadataImage,
    spec: &TopicSpec<'_>,
) -> Result<Vec<PartitionRegistration>, ControllerError> {
    if spec.replication_factor != -1 {
        return Err(ControllerError::InvalidRequest(
            "a manual partition assignment was given, but the replication factor is not -1".into(),
        ));
    }
    if spec.partitions != -1 {
        return Err(ControllerError::InvalidRequest(
            "a manual partition assignment was given, but the partition count is not -1".into(),
        ));
    }
    if spec.assignments.len() > MAX_PARTITIONS_PER_REQUEST as usize {
        return Err(ControllerError::InvalidPartitions(format!(
            "at most {MAX_PARTITIONS_PER_REQUEST} partitions per request"
        )));
    }
    let mut parts: BTreeMap<i32, PartitionRegistration> = BTreeMap::new();
    let mut rf = None;
    for (index, replicas) in spec.assignments {
        if parts.contains_key(index) {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "partition {index} has more than one manual assignment"
            )));
        }
        validate_manual_assignment(image, replicas, rf)?;
        rf = Some(replicas.len());
        parts.insert(*index, manual_partition(image, *index, replicas)?);
    }
    if parts.keys().copied().ne(0..parts.len() as i32) {
        return Err(ControllerError::InvalidReplicaAssignment(
            "partitions must be numbered 0, 1, 2, ... without gaps".into(),
        ));
    }
    Ok(parts.into_values().collect())
}

/// One manually assigned partition: its ISR is its active replicas, its leader the first of
/// them (Kafka's `buildPartitionRegistration`).
fn manual_partition(
    image: &MetadataImage,
    index: i32,
    replicas: &[i32],
) -> Result<PartitionRegistration, ControllerError> {
    let isr: Vec<i32> = replicas
        .iter()
        .copied()
        .filter(|&r| image.is_active(r))
        .collect();
    let Some(&leader) = isr.first() else {
        return Err(ControllerError::InvalidReplicaAssignment(format!(
            "every broker of the manual assignment of partition {index} is fenced or in \
             controlled shutdown"
        )));
    };
    Ok(PartitionRegistration {
        isr,
        leader,
        ..PartitionRegistration::new(index, replicas.to_vec())
    })
}

/// Kafka's `validateManualPartitionAssignment`: not empty, registered brokers only, each
/// once, and (when given) as many replicas as the other partitions have.
pub(super) fn validate_manual_assignment(
    image: &MetadataImage,
    replicas: &[i32],
    replication_factor: Option<usize>,
) -> Result<(), ControllerError> {
    let refuse = |m: String| Err(ControllerError::InvalidReplicaAssignment(m));
    if replicas.is_empty() {
        return refuse("the manual partition assignment has an empty replica list".into());
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    for (i, b) in sorted.iter().enumerate() {
        if !image.brokers.contains_key(b) {
            return refuse(format!(
                "the manual partition assignment names broker {b}, which is not registered"
            ));
        }
        if i > 0 && sorted[i - 1] == *b {
            return refuse(format!(
                "the manual partition assignment names broker {b} more than once"
            ));
        }
    }
    match replication_factor {
        Some(rf) if rf != replicas.len() => refuse(format!(
            "the manual partition assignment has {} replicas, but the other partitions have {rf}",
            replicas.len()
        )),
        _ => Ok(()),
    }
}

/// CreatePartitions (Kafka's `ReplicationControlManager.createPartitions`): grows a topic to
/// `total_count`, with the first partition's replication factor, placed or manual.
pub fn create_partitions(
    image: &MetadataImage,
    name: &str,
    total_count: i32,
    assignments: Option<&[Vec<i32>]>,
) -> Result<ControllerResult, ControllerError> {
    let t = image
        .topic_by_name(name)
        .ok_or_else(|| ControllerError::UnknownTopicOrPartition(name.to_string()))?;
    let current = t.partitions.len() as i32;
    if total_count == current {
        return Err(ControllerError::InvalidPartitions(format!(
            "topic already has {current} partitions"
        )));
    }
    if total_count < current {
        return Err(ControllerError::InvalidPartitions(format!(
            "topic {name} has {current} partitions; {total_count} would not be an increase"
        )));
    }
    let additional = total_count - current;
    if additional > MAX_PARTITIONS_PER_REQUEST {
        return Err(ControllerError::InvalidPartitions(format!(
            "at most {MAX_PARTITIONS_PER_REQUEST} partitions per request"
        )));
    }
    let rf = t.partitions.first().map_or(1, |p| p.replicas.len());
    let parts = match assignments {
        Some(a) if a.len() != additional as usize => {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "{additional} partitions are added, but {} assignments were given",
                a.len()
            )))
        }
        Some(a) => a
            .iter()
            .zip(current..)
            .map(|(replicas, index)| {
                validate_manual_assignment(image, replicas, Some(rf))?;
                manual_partition(image, index, replicas)
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => assign_replicas(
            &image.live_brokers(),
            current,
            additional,
            rf as i16,
            image.topics.len(),
        )?,
    };
    Ok((
        vec![MetadataRecord::CreatePartitions {
            id: t.id,
            partitions: parts,
        }],
        ControllerReply::Done,
    ))
}

/// DeleteTopics for one topic (Kafka's `ReplicationControlManager.deleteTopic`): one record;
/// every broker deletes its replicas of the topic as it applies it.
pub fn delete_topic(
    image: &MetadataImage,
    name: &str,
) -> Result<ControllerResult, ControllerError> {
    let t = image
        .topic_by_name(name)
        .ok_or_else(|| ControllerError::UnknownTopicOrPartition(name.to_string()))?;
    Ok((
        vec![MetadataRecord::DeleteTopic { id: t.id }],
        ControllerReply::Done,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn create_topic_round_robin() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 3, 2);
        let t = &img.topics[&id];
        let leaders: Vec<i32> = t.partitions.iter().map(|p| p.leader).collect();
        assert_eq!(leaders, vec![1, 2, 3]);
        assert_eq!(t.partitions[2].replicas, vec![3, 1]);
        for p in &t.partitions {
            assert_eq!(p.isr, p.replicas);
            assert_eq!((p.leader_epoch, p.partition_epoch), (0, 0));
        }
        assert_eq!(
            create(&img, "t", 1, 1, Uuid::new_v4()).unwrap_err().code(),
            36
        );
        assert_eq!(
            create(&img, "u", 1, 4, Uuid::new_v4()).unwrap_err().code(),
            38
        );
    }

    #[test]
    fn a_name_that_collides_once_dots_are_underscores_is_refused() {
        let mut img = cluster(1);
        let (records, _) = create(&img, "a.b", 1, 1, Uuid::new_v4()).unwrap();
        apply(&mut img, &records);
        let e = create(&img, "a_b", 1, 1, Uuid::new_v4()).unwrap_err();
        assert_eq!(
            e.response_error(),
            kafka_protocol::ResponseError::InvalidTopicException,
            "{e}"
        );
        assert!(e.to_string().contains("collides"), "{e}");
        assert!(create(&img, "a-b", 1, 1, Uuid::new_v4()).is_ok());
    }

    fn manual(
        img: &MetadataImage,
        partitions: i32,
        rf: i16,
        assignments: &[(i32, Vec<i32>)],
    ) -> Result<ControllerResult, ControllerError> {
        let spec = TopicSpec {
            name: "m",
            partitions,
            replication_factor: rf,
            assignments,
            configs: &BTreeMap::new(),
        };
        create_topic(img, &spec, Uuid::new_v4())
    }

    #[test]
    fn manual_replica_assignments() {
        let mut img = cluster(4);
        fence(&mut img, 4, false);
        let a = |v: &[(i32, &[i32])]| v.iter().map(|(i, r)| (*i, r.to_vec())).collect::<Vec<_>>();
        let (records, _) = manual(&img, -1, -1, &a(&[(1, &[4, 1]), (0, &[3, 2])])).unwrap();
        let MetadataRecord::CreateTopic { partitions, .. } = &records[0] else {
            panic!("unexpected record");
        };
        assert_eq!(partitions[0].replicas, vec![3, 2]);
        assert_eq!(
            (partitions[1].leader, partitions[1].isr.clone()),
            (1, vec![1]),
            "4 is fenced"
        );
        let code = |p, rf, v: &[(i32, &[i32])]| manual(&img, p, rf, &a(v)).unwrap_err().code();
        assert_eq!(code(3, -1, &[(0, &[1])]), 42, "partition count not -1");
        assert_eq!(code(-1, 1, &[(0, &[1])]), 42, "replication factor not -1");
        assert_eq!(
            code(-1, -1, &[(0, &[1]), (0, &[2])]),
            39,
            "a partition twice"
        );
        assert_eq!(code(-1, -1, &[(0, &[1]), (2, &[2])]), 39, "a gap");
        assert_eq!(code(-1, -1, &[(0, &[1, 9])]), 39, "unregistered broker");
        assert_eq!(code(-1, -1, &[(0, &[1, 1])]), 39, "a broker twice");
        assert_eq!(code(-1, -1, &[(0, &[1, 2]), (1, &[3])]), 39, "sizes differ");
        assert_eq!(code(-1, -1, &[(0, &[4])]), 39, "only fenced brokers");

        let id = with_topic(&mut img, 1, 2);
        let grow = |a: &[Vec<i32>]| create_partitions(&img, "t", 3, Some(a));
        assert_eq!(
            grow(&[vec![1, 2]]).unwrap_err().code(),
            39,
            "one assignment for two"
        );
        assert_eq!(
            grow(&[vec![1, 2], vec![3]]).unwrap_err().code(),
            39,
            "RF 1, not 2"
        );
        let (records, _) = grow(&[vec![3, 1], vec![2, 3]]).unwrap();
        apply(&mut img, &records);
        assert_eq!(img.topics[&id].partitions[2].replicas, vec![2, 3]);
    }
}
