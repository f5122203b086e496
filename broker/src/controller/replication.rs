//! The active controller's decisions, as pure functions of the committed [`ClusterImage`]:
//! Kafka's `ReplicationControlManager`, `ClusterControlManager` and `PartitionChangeBuilder`
//! reduced to what Brook needs.
//!
//! Each function validates a request against the image and returns the records that carry it
//! out, plus the reply. Nothing here touches the network, the disk or a clock, so the rules
//! are unit- and property-tested directly; `Controller` serialises calls (one at a time, on
//! an image that includes every committed record) and proposes the records through Raft.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::ControllerError;
use super::image::{ClusterImage, MetadataRecord, PartitionRegistration, NO_LEADER};

/// Producer ids handed out per AllocateProducerIds, as Kafka's `ProducerIdsBlock` size.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// Upper bound on partitions created by one request (Kafka's MAX_PARTITIONS_PER_BATCH),
/// which also bounds the size of one Raft entry.
pub const MAX_PARTITIONS_PER_REQUEST: i32 = 10_000;

/// Topic config key that enables unclean leader election.
pub const UNCLEAN_KEY: &str = "unclean.leader.election.enable";

/// A write to the metadata, as sent to the active controller (possibly forwarded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerRequest {
    /// CreateTopics for one topic.
    CreateTopic {
        name: String,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    },
    /// DeleteTopics for one topic.
    DeleteTopic { name: String },
    /// Grows the topic to `total_count` partitions (Kafka's CreatePartitions semantics).
    CreatePartitions { name: String, total_count: i32 },
    /// Sets (`Some`) or removes (`None`) topic config overrides. The caller validates keys and
    /// values (`BrokerConfig::validate_topic_configs`); the controller stores them.
    AlterConfigs {
        name: String,
        configs: BTreeMap<String, Option<String>>,
    },
    /// An ISR change proposed by a partition leader.
    AlterPartition(AlterPartitionRequest),
    /// BrokerRegistration.
    RegisterBroker {
        node_id: i32,
        host: String,
        port: u16,
    },
    /// BrokerHeartbeat.
    Heartbeat {
        node_id: i32,
        epoch: i64,
        /// The last metadata offset the broker has applied (Kafka's currentMetadataOffset).
        metadata_offset: u64,
        /// The broker is stopping and asks for its leaderships to be moved first (Kafka's
        /// `wantShutDown`, controlled shutdown).
        #[serde(default)]
        want_shut_down: bool,
    },
    /// AllocateProducerIds: a block of producer ids for `node_id`.
    AllocateProducerIds { node_id: i32 },
    /// Issued by the active controller's own liveness check.
    FenceBroker { node_id: i32 },
    /// Issued by the active controller every `leader.imbalance.check.interval.seconds`
    /// (with `auto.leader.rebalance.enable`): preferred-leader elections.
    ElectPreferredLeaders,
}

/// Kafka's AlterPartition for one partition: the leader proposes a new ISR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartitionRequest {
    pub topic_id: Uuid,
    pub partition: i32,
    /// The node asking, which must be the partition's current leader.
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

/// The active controller's answer to a [`ControllerRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerReply {
    /// Applied; nothing to report.
    Done,
    /// The new topic's id and assignment.
    TopicCreated {
        id: Uuid,
        partitions: Vec<PartitionRegistration>,
    },
    /// The partition's state after an AlterPartition.
    Partition(PartitionRegistration),
    /// The broker epoch to heartbeat with.
    BrokerRegistered { epoch: i64 },
    /// Whether the broker is fenced after the heartbeat, and whether a broker that asked to
    /// shut down may now (it leads nothing: Kafka's `shouldShutDown`).
    Heartbeat {
        fenced: bool,
        #[serde(default)]
        should_shut_down: bool,
    },
    /// Producer ids `first_id..first_id + size`.
    ProducerIds { first_id: i64, size: i64 },
}

/// Records plus reply: what a request turns into.
pub type Decision = (Vec<MetadataRecord>, ControllerReply);

/// Decides one request against `image`. `default_unclean` is the broker-level
/// `unclean.leader.election.enable`; a topic override wins.
pub fn decide(
    image: &ClusterImage,
    req: &ControllerRequest,
    default_unclean: bool,
) -> Result<Decision, ControllerError> {
    match req {
        ControllerRequest::CreateTopic {
            name,
            partitions,
            replication_factor,
            configs,
        } => create_topic(
            image,
            name,
            *partitions,
            *replication_factor,
            configs,
            Uuid::new_v4(),
        ),
        ControllerRequest::DeleteTopic { name } => {
            let t = image
                .topic_by_name(name)
                .ok_or_else(|| ControllerError::UnknownTopicOrPartition(name.clone()))?;
            Ok((
                vec![MetadataRecord::DeleteTopic { id: t.id }],
                ControllerReply::Done,
            ))
        }
        ControllerRequest::CreatePartitions { name, total_count } => {
            create_partitions(image, name, *total_count)
        }
        ControllerRequest::AlterConfigs { name, configs } => {
            let t = image
                .topic_by_name(name)
                .ok_or_else(|| ControllerError::UnknownTopicOrPartition(name.clone()))?;
            Ok((
                vec![MetadataRecord::AlterConfigs {
                    id: t.id,
                    configs: configs.clone(),
                }],
                ControllerReply::Done,
            ))
        }
        ControllerRequest::AlterPartition(r) => alter_partition(image, r),
        ControllerRequest::RegisterBroker {
            node_id,
            host,
            port,
        } => Ok(register_broker(
            image,
            *node_id,
            host,
            *port,
            default_unclean,
        )),
        ControllerRequest::Heartbeat {
            node_id,
            epoch,
            metadata_offset,
            want_shut_down: false,
        } => heartbeat(image, *node_id, *epoch, *metadata_offset, default_unclean),
        ControllerRequest::Heartbeat {
            node_id,
            epoch,
            metadata_offset,
            want_shut_down: true,
        } => shut_down_heartbeat(image, *node_id, *epoch, *metadata_offset, default_unclean),
        ControllerRequest::AllocateProducerIds { node_id } => {
            let first_id = image.next_producer_id_block;
            Ok((
                vec![MetadataRecord::AllocateProducerIds {
                    node_id: *node_id,
                    next_block: first_id + PRODUCER_ID_BLOCK_SIZE,
                }],
                ControllerReply::ProducerIds {
                    first_id,
                    size: PRODUCER_ID_BLOCK_SIZE,
                },
            ))
        }
        ControllerRequest::FenceBroker { node_id } => Ok((
            fence_broker(image, *node_id, default_unclean),
            ControllerReply::Done,
        )),
        ControllerRequest::ElectPreferredLeaders => {
            Ok((elect_preferred_leaders(image), ControllerReply::Done))
        }
    }
}

/// Bound on preferred-leader elections in one metadata write (Kafka's
/// `MAX_ELECTIONS_PER_IMBALANCE`); the rest wait for the next check.
pub const MAX_ELECTIONS_PER_IMBALANCE: usize = 1_000;

/// Whether some partition is led by a replica other than its preferred one (the first in
/// its assignment).
pub fn has_imbalanced_partitions(image: &ClusterImage) -> bool {
    image
        .topics
        .values()
        .flat_map(|t| &t.partitions)
        .any(|p| p.replicas.first().is_some_and(|&r| r != p.leader))
}

/// Kafka's preferred election (`PartitionChangeBuilder` with `Election.PREFERRED`), for every
/// imbalanced partition: leadership moves to the preferred replica when it is live and in the
/// ISR (leader epoch + 1); otherwise the partition is left as it is.
pub fn elect_preferred_leaders(image: &ClusterImage) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for t in image.topics.values() {
        for p in &t.partitions {
            if records.len() >= MAX_ELECTIONS_PER_IMBALANCE {
                return records;
            }
            let Some(&preferred) = p.replicas.first() else {
                continue;
            };
            if preferred == p.leader || !p.isr.contains(&preferred) || !image.is_live(preferred) {
                continue;
            }
            records.extend(change_record(t.id, p, preferred, p.isr.clone()));
        }
    }
    records
}

/// Whether unclean election is enabled for a topic.
fn unclean_for(image: &ClusterImage, topic_id: Uuid, default_unclean: bool) -> bool {
    image
        .topics
        .get(&topic_id)
        .and_then(|t| t.configs.get(UNCLEAN_KEY))
        .map(|v| v == "true")
        .unwrap_or(default_unclean)
}

/// Kafka's election rule (`PartitionChangeBuilder.electLeader`): the first replica, in
/// assignment order, that is in `isr` and live. Failing that, with unclean election enabled,
/// the first live replica, and the ISR shrinks to it (it may lack committed data; Kafka
/// accepts that loss when unclean election is on). Otherwise no leader, ISR unchanged.
pub fn elect_leader(
    replicas: &[i32],
    isr: &[i32],
    is_live: impl Fn(i32) -> bool,
    unclean: bool,
) -> (i32, Vec<i32>) {
    if let Some(&r) = replicas.iter().find(|&&r| isr.contains(&r) && is_live(r)) {
        return (r, isr.to_vec());
    }
    if unclean {
        if let Some(&r) = replicas.iter().find(|&&r| is_live(r)) {
            return (r, vec![r]);
        }
    }
    (NO_LEADER, isr.to_vec())
}

/// The record moving `old` to (`leader`, `isr`), or `None` if nothing changes. The leader
/// epoch moves with the leader; the partition epoch with any change.
fn change_record(
    topic_id: Uuid,
    old: &PartitionRegistration,
    leader: i32,
    isr: Vec<i32>,
) -> Option<MetadataRecord> {
    if leader == old.leader && isr == old.isr {
        return None;
    }
    Some(MetadataRecord::PartitionChange {
        topic_id,
        partition: old.index,
        leader,
        leader_epoch: old.leader_epoch + i32::from(leader != old.leader),
        isr,
        partition_epoch: old.partition_epoch + 1,
    })
}

/// Fences a broker (missed heartbeats): it leaves every ISR it is in, unless it is the last
/// member (Kafka keeps the last one so that a clean election is possible when it returns);
/// partitions it led get a new leader from the remaining ISR, or none.
pub fn fence_broker(
    image: &ClusterImage,
    node_id: i32,
    default_unclean: bool,
) -> Vec<MetadataRecord> {
    let Some(b) = image.brokers.get(&node_id).filter(|b| !b.fenced) else {
        return Vec::new();
    };
    let mut records = move_replica_away(image, node_id, default_unclean);
    records.push(MetadataRecord::FenceBroker {
        node_id,
        epoch: b.epoch,
    });
    records
}

/// Takes `node_id` out of every ISR it is in (unless it is the last member) and out of every
/// leadership, electing from the remaining ISR (or, with unclean election, any other live
/// replica): what fencing and controlled shutdown share.
fn move_replica_away(
    image: &ClusterImage,
    node_id: i32,
    default_unclean: bool,
) -> Vec<MetadataRecord> {
    let is_live = |x: i32| x != node_id && image.is_live(x);
    let mut records = Vec::new();
    for t in image.topics.values() {
        let unclean = unclean_for(image, t.id, default_unclean);
        for p in &t.partitions {
            if !p.isr.contains(&node_id) && p.leader != node_id {
                continue;
            }
            let isr: Vec<i32> = if p.isr.len() > 1 {
                p.isr.iter().copied().filter(|&r| r != node_id).collect()
            } else {
                p.isr.clone()
            };
            let (leader, isr) = if p.leader == node_id || p.leader == NO_LEADER {
                elect_leader(&p.replicas, &isr, is_live, unclean)
            } else {
                (p.leader, isr)
            };
            records.extend(change_record(t.id, p, leader, isr));
        }
    }
    records
}

/// Unfences a broker; leaderless partitions that can now elect a leader do so.
pub fn unfence_broker(
    image: &ClusterImage,
    node_id: i32,
    default_unclean: bool,
) -> Vec<MetadataRecord> {
    let Some(b) = image.brokers.get(&node_id).filter(|b| b.fenced) else {
        return Vec::new();
    };
    let is_live = |x: i32| x == node_id || image.is_live(x);
    let mut records = vec![MetadataRecord::UnfenceBroker {
        node_id,
        epoch: b.epoch,
    }];
    for t in image.topics.values() {
        let unclean = unclean_for(image, t.id, default_unclean);
        for p in t.partitions.iter().filter(|p| p.leader == NO_LEADER) {
            let (leader, isr) = elect_leader(&p.replicas, &p.isr, is_live, unclean);
            records.extend(change_record(t.id, p, leader, isr));
        }
    }
    records
}

/// A (re-)registration. The new epoch is above every epoch handed out before: the metadata
/// offset only grows and registrations are decided one at a time.
///
/// A broker that registers again while its previous incarnation is still unfenced restarted
/// without being noticed (faster than the session timeout). Its previous incarnation is
/// fenced first, so it leaves the ISRs and gives up leadership, as Kafka 4 does on an
/// unclean restart (KIP-966): what it had not flushed may be gone.
pub fn register_broker(
    image: &ClusterImage,
    node_id: i32,
    host: &str,
    port: u16,
    default_unclean: bool,
) -> Decision {
    let epoch = image.metadata_offset as i64 + 1;
    debug_assert!(image.brokers.get(&node_id).is_none_or(|b| b.epoch < epoch));
    let mut records = fence_broker(image, node_id, default_unclean);
    records.push(MetadataRecord::RegisterBroker {
        node_id,
        host: host.to_string(),
        port,
        epoch,
    });
    (records, ControllerReply::BrokerRegistered { epoch })
}

/// A heartbeat from a registered broker unfences it if it was fenced and has caught up with
/// the metadata log as far as its own registration (Kafka's BrokerHeartbeatManager: a broker
/// that does not yet know the current partition states must not lead).
pub fn heartbeat(
    image: &ClusterImage,
    node_id: i32,
    epoch: i64,
    metadata_offset: u64,
    default_unclean: bool,
) -> Result<Decision, ControllerError> {
    let b = image
        .brokers
        .get(&node_id)
        .ok_or(ControllerError::BrokerIdNotRegistered(node_id))?;
    if b.epoch != epoch {
        return Err(ControllerError::StaleBrokerEpoch {
            request: epoch,
            current: b.epoch,
        });
    }
    if b.fenced && metadata_offset < b.registration_offset {
        return Ok((Vec::new(), heartbeat_reply(true, false)));
    }
    let records = if b.fenced {
        unfence_broker(image, node_id, default_unclean)
    } else {
        Vec::new()
    };
    Ok((records, heartbeat_reply(false, false)))
}

fn heartbeat_reply(fenced: bool, should_shut_down: bool) -> ControllerReply {
    ControllerReply::Heartbeat {
        fenced,
        should_shut_down,
    }
}

/// A heartbeat with `want_shut_down` (Kafka's controlled shutdown,
/// `ReplicationControlManager.processBrokerHeartbeat` entering `CONTROLLED_SHUTDOWN`): the
/// broker leaves every ISR it is in (but the last member's place) and every partition it leads
/// gets a new leader from the rest of the ISR, as when it is fenced, but while it still runs,
/// so clients move before it stops. Once the records are committed it leads nothing, and the
/// reply lets it shut down. A fenced broker leads nothing already.
pub fn shut_down_heartbeat(
    image: &ClusterImage,
    node_id: i32,
    epoch: i64,
    metadata_offset: u64,
    default_unclean: bool,
) -> Result<Decision, ControllerError> {
    // The usual checks (registered, current epoch); a fenced broker is not unfenced.
    heartbeat(image, node_id, epoch, metadata_offset, default_unclean)?;
    if image.brokers.get(&node_id).is_some_and(|b| b.fenced) {
        return Ok((Vec::new(), heartbeat_reply(true, true)));
    }
    Ok((
        move_replica_away(image, node_id, default_unclean),
        heartbeat_reply(false, true),
    ))
}

/// Kafka's AlterPartition validation (`validateAlterPartitionData`), in Kafka's order.
pub fn alter_partition(
    image: &ClusterImage,
    r: &AlterPartitionRequest,
) -> Result<Decision, ControllerError> {
    let p = match image.topics.get(&r.topic_id) {
        None => return Err(ControllerError::UnknownTopicId(r.topic_id)),
        Some(t) => usize::try_from(r.partition)
            .ok()
            .and_then(|i| t.partitions.get(i))
            .ok_or_else(|| {
                ControllerError::UnknownTopicOrPartition(format!("{}-{}", t.name, r.partition))
            })?,
    };
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
    if let Some(x) = r.new_isr.iter().find(|&&x| !image.is_live(x)) {
        return Err(ControllerError::IneligibleReplica(format!(
            "replica {x} is fenced or not registered"
        )));
    }
    // Only the partition epoch moves: the leader stays.
    let next = PartitionRegistration {
        isr: r.new_isr.clone(),
        partition_epoch: p.partition_epoch + 1,
        ..p.clone()
    };
    let record = MetadataRecord::PartitionChange {
        topic_id: r.topic_id,
        partition: r.partition,
        leader: next.leader,
        leader_epoch: next.leader_epoch,
        isr: next.isr.clone(),
        partition_epoch: next.partition_epoch,
    };
    Ok((vec![record], ControllerReply::Partition(next)))
}

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
            PartitionRegistration {
                index,
                leader: replicas[0],
                isr: replicas.clone(),
                replicas,
                leader_epoch: 0,
                partition_epoch: 0,
            }
        })
        .collect())
}

/// CreateTopics for one topic.
pub fn create_topic(
    image: &ClusterImage,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &BTreeMap<String, String>,
    id: Uuid,
) -> Result<Decision, ControllerError> {
    crate::metadata::validate_topic_name(name).map_err(ControllerError::InvalidTopic)?;
    if image.topic_ids.contains_key(name) {
        return Err(ControllerError::TopicAlreadyExists(name.to_string()));
    }
    if partitions <= 0 || partitions > MAX_PARTITIONS_PER_REQUEST {
        return Err(ControllerError::InvalidPartitions(format!(
            "number of partitions must be in 1..={MAX_PARTITIONS_PER_REQUEST}, got {partitions}"
        )));
    }
    let parts = assign_replicas(
        &image.live_brokers(),
        0,
        partitions,
        replication_factor,
        image.topics.len(),
    )?;
    Ok((
        vec![MetadataRecord::CreateTopic {
            name: name.to_string(),
            id,
            partitions: parts.clone(),
            configs: configs.clone(),
        }],
        ControllerReply::TopicCreated {
            id,
            partitions: parts,
        },
    ))
}

/// CreatePartitions: grows a topic to `total_count`, with the first partition's replication
/// factor.
pub fn create_partitions(
    image: &ClusterImage,
    name: &str,
    total_count: i32,
) -> Result<Decision, ControllerError> {
    let t = image
        .topic_by_name(name)
        .ok_or_else(|| ControllerError::UnknownTopicOrPartition(name.to_string()))?;
    let current = t.partitions.len() as i32;
    if total_count <= current {
        return Err(ControllerError::InvalidPartitions(format!(
            "topic has {current} partitions; the new count {total_count} must be larger"
        )));
    }
    if total_count - current > MAX_PARTITIONS_PER_REQUEST {
        return Err(ControllerError::InvalidPartitions(format!(
            "at most {MAX_PARTITIONS_PER_REQUEST} partitions per request"
        )));
    }
    let rf = t.partitions.first().map_or(1, |p| p.replicas.len()) as i16;
    let parts = assign_replicas(
        &image.live_brokers(),
        current,
        total_count - current,
        rf,
        image.topics.len(),
    )?;
    Ok((
        vec![MetadataRecord::CreatePartitions {
            id: t.id,
            partitions: parts,
        }],
        ControllerReply::Done,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Brokers 1..=n registered and unfenced.
    fn cluster(n: i32) -> ClusterImage {
        let mut img = ClusterImage::default();
        for id in 1..=n {
            img.apply(&MetadataRecord::RegisterBroker {
                node_id: id,
                host: "127.0.0.1".into(),
                port: 9000 + id as u16,
                epoch: 1,
            })
            .unwrap();
            img.apply(&MetadataRecord::UnfenceBroker {
                node_id: id,
                epoch: 1,
            })
            .unwrap();
        }
        img
    }

    fn apply(img: &mut ClusterImage, d: &[MetadataRecord]) {
        for r in d {
            img.apply(r).unwrap();
        }
    }

    fn fence(img: &mut ClusterImage, node_id: i32, unclean: bool) {
        let records = fence_broker(img, node_id, unclean);
        apply(img, &records);
    }

    fn with_topic(img: &mut ClusterImage, partitions: i32, rf: i16) -> Uuid {
        let id = Uuid::new_v4();
        let (records, _) = create_topic(img, "t", partitions, rf, &BTreeMap::new(), id).unwrap();
        apply(img, &records);
        id
    }

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
            create_topic(&img, "t", 1, 1, &BTreeMap::new(), Uuid::new_v4())
                .unwrap_err()
                .code(),
            36
        );
        assert_eq!(
            create_topic(&img, "u", 1, 4, &BTreeMap::new(), Uuid::new_v4())
                .unwrap_err()
                .code(),
            38
        );
    }

    #[test]
    fn controlled_shutdown_moves_leadership_before_the_broker_stops() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 3, 3);
        let led_by_1 = |img: &ClusterImage| {
            img.topics[&id]
                .partitions
                .iter()
                .filter(|p| p.leader == 1)
                .count()
        };
        assert_eq!(led_by_1(&img), 1);
        let (records, reply) = shut_down_heartbeat(&img, 1, 1, 0, false).unwrap();
        apply(&mut img, &records);
        assert_eq!(reply, heartbeat_reply(false, true));
        assert_eq!(led_by_1(&img), 0, "every leadership moved");
        for p in &img.topics[&id].partitions {
            assert!(!p.isr.contains(&1), "out of the ISR: {p:?}");
            assert!(p.leader > 0, "still led: {p:?}");
        }
        // Unlike fencing, the broker stays registered and unfenced until it stops.
        assert!(img.is_live(1));
        // A stale broker epoch is refused as in any heartbeat.
        assert_eq!(
            shut_down_heartbeat(&img, 1, 7, 0, false)
                .unwrap_err()
                .code(),
            77
        );
    }

    #[test]
    fn fencing_moves_leadership_within_the_isr() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        let records = fence_broker(&img, 1, false);
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
        let (records, _) = heartbeat(&img, 1, 1, 0, false).unwrap();
        apply(&mut img, &records);
        assert_eq!(img.partition(id, 0).unwrap().leader, NO_LEADER);
        // ...the last ISR member coming back does.
        let (records, _) = heartbeat(&img, 2, 1, 0, false).unwrap();
        apply(&mut img, &records);
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch), (2, 3));
    }

    #[test]
    fn fast_restart_gives_up_leadership() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        assert_eq!(img.partition(id, 0).unwrap().leader, 1);
        img.metadata_offset = 10;
        let (records, reply) = register_broker(&img, 1, "127.0.0.1", 9001, false);
        apply(&mut img, &records);
        assert_eq!(reply, ControllerReply::BrokerRegistered { epoch: 11 });
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch), (2, 1));
        assert_eq!(p.isr, vec![2, 3]);
        assert!(!img.is_live(1));
        assert_eq!(img.brokers[&1].epoch, 11);
        // Its old epoch is refused; the new one unfences it.
        assert_eq!(heartbeat(&img, 1, 1, 20, false).unwrap_err().code(), 77);
        // Registered at offset 10: a broker that has not applied that far stays fenced.
        assert_eq!(img.brokers[&1].registration_offset, 10);
        let (records, reply) = heartbeat(&img, 1, 11, 9, false).unwrap();
        assert!(records.is_empty());
        assert_eq!(reply, heartbeat_reply(true, false));
        let (records, _) = heartbeat(&img, 1, 11, 10, false).unwrap();
        apply(&mut img, &records);
        assert!(img.is_live(1));
    }

    #[test]
    fn preferred_leaders_come_back_when_live_and_in_sync() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 3, 3);
        assert!(!has_imbalanced_partitions(&img));
        assert!(elect_preferred_leaders(&img).is_empty());
        let preferred: Vec<i32> = img.topics[&id]
            .partitions
            .iter()
            .map(|p| p.replicas[0])
            .collect();
        // Node 1 dies: partitions it led move away, and it leaves their ISRs.
        fence(&mut img, 1, false);
        assert!(has_imbalanced_partitions(&img));
        assert!(
            elect_preferred_leaders(&img).is_empty(),
            "a fenced preferred replica is not elected"
        );
        // Back, but not in sync yet: still nothing.
        let d = unfence_broker(&img, 1, false);
        apply(&mut img, &d);
        assert!(elect_preferred_leaders(&img).is_empty());
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
                    }],
                );
            }
        }
        let before: Vec<i32> = img.topics[&id]
            .partitions
            .iter()
            .map(|p| p.leader_epoch)
            .collect();
        let d = elect_preferred_leaders(&img);
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

    #[test]
    fn unclean_election_picks_a_live_replica() {
        let mut img = cluster(2);
        let id = with_topic(&mut img, 1, 2);
        fence(&mut img, 2, false);
        assert_eq!(img.partition(id, 0).unwrap().isr, vec![1]);
        fence(&mut img, 1, false);
        assert_eq!(img.partition(id, 0).unwrap().leader, NO_LEADER);
        // Broker 2 returns; it is not in the ISR, so only an unclean election makes it leader.
        let (records, _) = heartbeat(&img, 2, 1, 0, true).unwrap();
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
        let (records, reply) = alter_partition(&img, &req(1, 0, 0, &[1, 2])).unwrap();
        apply(&mut img, &records);
        let p = img.partition(id, 0).unwrap().clone();
        assert_eq!(reply, ControllerReply::Partition(p.clone()));
        assert_eq!((p.leader_epoch, p.partition_epoch), (0, 1));
        assert_eq!(p.isr, vec![1, 2]);

        let code_in = |img: &ClusterImage, r| alter_partition(img, &r).unwrap_err().code();
        let code = |r| code_in(&img, r);
        assert_eq!(code(req(1, 0, 0, &[1])), 108, "stale partition epoch");
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

    #[test]
    fn producer_id_blocks_do_not_overlap() {
        let mut img = cluster(1);
        let req = ControllerRequest::AllocateProducerIds { node_id: 1 };
        let (r1, a) = decide(&img, &req, false).unwrap();
        apply(&mut img, &r1);
        let (_, b) = decide(&img, &req, false).unwrap();
        assert_eq!(
            (a, b),
            (
                ControllerReply::ProducerIds {
                    first_id: 0,
                    size: 1000
                },
                ControllerReply::ProducerIds {
                    first_id: 1000,
                    size: 1000
                }
            )
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Fence(i32),
        Heartbeat(i32),
        Shrink(i32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1..=4i32).prop_map(Op::Fence),
            (1..=4i32).prop_map(Op::Heartbeat),
            (1..=4i32).prop_map(Op::Shrink),
        ]
    }

    proptest! {
        /// Leader epochs and partition epochs never go backwards; a new leader always comes
        /// from the ISR before the change unless unclean election is on; the leader is in the
        /// ISR; the ISR is never empty.
        #[test]
        fn election_invariants(ops in proptest::collection::vec(op(), 1..60), unclean: bool) {
            let mut img = cluster(4);
            let id = with_topic(&mut img, 4, 3);
            for op in ops {
                let before = img.topics[&id].partitions.clone();
                let records = match op {
                    Op::Fence(n) => fence_broker(&img, n, unclean),
                    Op::Heartbeat(n) => heartbeat(&img, n, 1, 0, unclean).unwrap().0,
                    Op::Shrink(keep) => {
                        // The leader of partition 0 drops every follower except `keep`.
                        let p = &before[0];
                        let isr: Vec<i32> = p.isr.iter().copied()
                            .filter(|&r| r == p.leader || r == keep).collect();
                        let r = AlterPartitionRequest {
                            topic_id: id, partition: 0, leader_id: p.leader,
                            leader_epoch: p.leader_epoch, partition_epoch: p.partition_epoch,
                            new_isr: isr,
                        };
                        alter_partition(&img, &r).map(|d| d.0).unwrap_or_default()
                    }
                };
                for r in &records {
                    prop_assert!(img.apply(r).is_ok(), "record refused: {:?}", r);
                }
                for (old, new) in before.iter().zip(&img.topics[&id].partitions) {
                    prop_assert!(new.leader_epoch >= old.leader_epoch);
                    prop_assert!(new.partition_epoch >= old.partition_epoch);
                    prop_assert!(!new.isr.is_empty());
                    if new.leader != NO_LEADER {
                        prop_assert!(new.isr.contains(&new.leader));
                        prop_assert!(img.is_live(new.leader));
                    }
                    if new.leader != old.leader {
                        prop_assert!(new.leader_epoch == old.leader_epoch + 1);
                        if new.leader != NO_LEADER && !unclean {
                            prop_assert!(old.isr.contains(&new.leader),
                                "leader {} not from ISR {:?}", new.leader, old.isr);
                        }
                    }
                }
            }
        }
    }
}
