//! The active controller's decisions, as pure functions of the committed [`MetadataImage`]:
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
use super::image::{MetadataImage, MetadataRecord, PartitionRegistration, TopicImage, NO_LEADER};

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
        /// Manual replica assignments (CreateTopics `Assignments`) by partition index;
        /// empty for the placer's.
        #[serde(default)]
        assignments: Vec<(i32, Vec<i32>)>,
        /// Validate and answer, record nothing (CreateTopics `validateOnly`).
        #[serde(default)]
        validate_only: bool,
    },
    /// DeleteTopics for one topic.
    DeleteTopic { name: String },
    /// Grows the topic to `total_count` partitions (Kafka's CreatePartitions semantics).
    CreatePartitions {
        name: String,
        total_count: i32,
        /// The new partitions' replicas (CreatePartitions `Assignments`), or the placer's.
        #[serde(default)]
        assignments: Option<Vec<Vec<i32>>>,
        /// Validate and answer, record nothing.
        #[serde(default)]
        validate_only: bool,
    },
    /// Sets (`Some`) or removes (`None`) topic config overrides. The caller validates keys and
    /// values (`BrokerConfig::validate_topic_configs`); the controller stores them.
    AlterConfigs {
        name: String,
        configs: BTreeMap<String, Option<String>>,
    },
    /// Sets (`Some`) or removes (`None`) dynamic broker configs of a resource (a node id or
    /// "" for the cluster default); the caller validates them (`api::configs`).
    AlterBrokerConfigs {
        resource: String,
        configs: BTreeMap<String, Option<String>>,
    },
    /// An ISR change proposed by a partition leader.
    AlterPartition(AlterPartitionRequest),
    /// BrokerRegistration.
    RegisterBroker {
        node_id: i32,
        host: String,
        port: u16,
        /// New at every start of the broker's process (Kafka's `incarnationId`).
        #[serde(default)]
        incarnation: Uuid,
        /// The broker epoch recorded at the previous clean shutdown (Kafka's
        /// `previousBrokerEpoch`); `None` after a crash.
        #[serde(default)]
        previous_epoch: Option<i64>,
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
    /// ElectLeaders from a client (Kafka's `kafka-leader-election`): the named partitions, or
    /// every partition when `None`.
    ElectLeaders {
        election: ElectionType,
        partitions: Option<Vec<(String, Vec<i32>)>>,
    },
    /// AlterPartitionReassignments: per topic and partition the target replicas, or `None`
    /// to cancel the reassignment in progress.
    AlterPartitionReassignments {
        topics: ReassignmentTargets,
        /// v1's `AllowReplicationFactorChange` (KIP-860); true below v1.
        allow_replication_factor_change: bool,
    },
}

/// Per topic, per partition: the target replicas of AlterPartitionReassignments, or `None` to
/// cancel.
pub type ReassignmentTargets = Vec<(String, Vec<(i32, Option<Vec<i32>>)>)>;

/// One topic's part of [`ReassignmentTargets`].
pub type TopicReassignmentTargets = (String, Vec<(i32, Option<Vec<i32>>)>);

/// Per topic, per partition: what AlterPartitionReassignments did.
pub type ReassignmentResults = Vec<TopicReassignmentResults>;

/// One topic's part of [`ReassignmentResults`].
pub type TopicReassignmentResults = (String, Vec<(i32, Result<(), ControllerError>)>);

/// ElectLeaders' election type (Kafka's `ElectionType`: 0 preferred, 1 unclean).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    /// Move leadership to the preferred replica if it is active and in the ISR.
    Preferred,
    /// Give a leaderless partition a leader, from outside the ISR if need be.
    Unclean,
}

/// What ElectLeaders did for one partition (Kafka's `electLeader` results).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionOutcome {
    /// A change was recorded.
    Elected,
    /// The preferred replica leads already (preferred), or there is a leader (unclean).
    NotNeeded,
    UnknownTopicOrPartition,
    /// The preferred replica cannot lead (fenced, shutting down or out of the ISR).
    PreferredLeaderNotAvailable,
    /// No replica can lead.
    EligibleLeadersNotAvailable,
}

impl ElectionOutcome {
    /// The Kafka error this outcome answers, `None` for success.
    pub fn error(self) -> Option<kafka_protocol::ResponseError> {
        use kafka_protocol::ResponseError as E;
        match self {
            ElectionOutcome::Elected => None,
            ElectionOutcome::NotNeeded => Some(E::ElectionNotNeeded),
            ElectionOutcome::UnknownTopicOrPartition => Some(E::UnknownTopicOrPartition),
            ElectionOutcome::PreferredLeaderNotAvailable => Some(E::PreferredLeaderNotAvailable),
            ElectionOutcome::EligibleLeadersNotAvailable => Some(E::EligibleLeadersNotAvailable),
        }
    }
}

/// Per topic, per partition: what ElectLeaders did.
pub type ElectionResults = Vec<(String, Vec<(i32, ElectionOutcome)>)>;

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
    /// ElectLeaders' results.
    Elections(ElectionResults),
    /// AlterPartitionReassignments' results.
    Reassignments(ReassignmentResults),
}

/// Records plus reply: what a request turns into.
pub type Decision = (Vec<MetadataRecord>, ControllerReply);

/// Decides one request against `image`.
pub fn decide(
    image: &MetadataImage,
    req: &ControllerRequest,
    policy: &ElectionPolicy,
) -> Result<Decision, ControllerError> {
    match req {
        ControllerRequest::CreateTopic {
            name,
            partitions,
            replication_factor,
            configs,
            assignments,
            validate_only,
        } => {
            let spec = TopicSpec {
                name,
                partitions: *partitions,
                replication_factor: *replication_factor,
                assignments,
                configs,
            };
            only_validated(create_topic(image, &spec, Uuid::new_v4()), *validate_only)
        }
        ControllerRequest::DeleteTopic { name } => {
            let t = image
                .topic_by_name(name)
                .ok_or_else(|| ControllerError::UnknownTopicOrPartition(name.clone()))?;
            Ok((
                vec![MetadataRecord::DeleteTopic { id: t.id }],
                ControllerReply::Done,
            ))
        }
        ControllerRequest::CreatePartitions {
            name,
            total_count,
            assignments,
            validate_only,
        } => only_validated(
            create_partitions(image, name, *total_count, assignments.as_deref()),
            *validate_only,
        ),
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
        ControllerRequest::AlterBrokerConfigs { resource, configs } => Ok((
            vec![MetadataRecord::AlterBrokerConfigs {
                resource: resource.clone(),
                configs: configs.clone(),
            }],
            ControllerReply::Done,
        )),
        ControllerRequest::AlterPartition(r) => alter_partition(image, r, policy),
        ControllerRequest::RegisterBroker {
            node_id,
            host,
            port,
            incarnation,
            previous_epoch,
        } => Ok(register_broker(
            image,
            &Registration {
                node_id: *node_id,
                host,
                port: *port,
                incarnation: *incarnation,
                previous_epoch: *previous_epoch,
            },
            policy,
        )),
        ControllerRequest::Heartbeat {
            node_id,
            epoch,
            metadata_offset,
            want_shut_down: false,
        } => heartbeat(image, *node_id, *epoch, *metadata_offset, policy),
        ControllerRequest::Heartbeat {
            node_id,
            epoch,
            metadata_offset,
            want_shut_down: true,
        } => shut_down_heartbeat(image, *node_id, *epoch, *metadata_offset, policy),
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
        ControllerRequest::FenceBroker { node_id } => {
            Ok((fence_broker(image, *node_id, policy), ControllerReply::Done))
        }
        ControllerRequest::ElectLeaders {
            election,
            partitions,
        } => elect_leaders(image, *election, partitions.as_deref(), policy),
        ControllerRequest::ElectPreferredLeaders => Ok((
            elect_preferred_leaders(image, policy),
            ControllerReply::Done,
        )),
        ControllerRequest::AlterPartitionReassignments {
            topics,
            allow_replication_factor_change,
        } => Ok(alter_partition_reassignments(
            image,
            topics,
            *allow_replication_factor_change,
            policy,
        )),
    }
}

/// A validate-only request is decided in full and answered as if done, but records nothing
/// (Kafka's `validateOnly`).
fn only_validated(
    decision: Result<Decision, ControllerError>,
    validate_only: bool,
) -> Result<Decision, ControllerError> {
    let (records, reply) = decision?;
    Ok((if validate_only { Vec::new() } else { records }, reply))
}

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
            let mut change = PartitionChange::new(policy, t, p, p.isr.clone(), &acceptable);
            change.election = Election::Preferred;
            records.extend(change.build(t.id));
        }
    }
    records
}

/// What the decisions depend on besides the image: the controller's configuration and
/// finalized features (Kafka's `ConfigurationControlManager` and `FeatureControlManager`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionPolicy {
    /// Broker-level `unclean.leader.election.enable`; a topic override wins.
    pub default_unclean: bool,
    /// Broker-level `min.insync.replicas`; a topic override wins.
    pub default_min_isr: i32,
    /// Eligible leader replicas (KIP-966, `eligible.leader.replicas.version` 1).
    pub elr_enabled: bool,
}

impl ElectionPolicy {
    /// Whether unclean election is enabled for a topic.
    fn unclean_for(&self, t: &TopicImage) -> bool {
        t.configs
            .get(UNCLEAN_KEY)
            .map(|v| v == "true")
            .unwrap_or(self.default_unclean)
    }

    /// Kafka's `getTopicEffectiveMinIsr`: the topic's `min.insync.replicas`, at most its
    /// replication factor.
    fn effective_min_isr(&self, t: &TopicImage, p: &PartitionRegistration) -> usize {
        let configured = t
            .configs
            .get("min.insync.replicas")
            .and_then(|v| v.parse::<i32>().ok())
            .unwrap_or(self.default_min_isr);
        usize::try_from(configured)
            .unwrap_or(0)
            .min(p.replicas.len())
    }
}

/// The kind of election a change runs (Kafka's `PartitionChangeBuilder.Election`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Election {
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
struct PartitionChange<'a> {
    old: &'a PartitionRegistration,
    target_isr: Vec<i32>,
    /// The assignment and the reassignment's adding and removing replicas after the change
    /// (Kafka's `targetReplicas`, `targetAdding`, `targetRemoving`).
    target_replicas: Vec<i32>,
    target_adding: Vec<i32>,
    target_removing: Vec<i32>,
    target_elr: Vec<i32>,
    min_isr: usize,
    elr_enabled: bool,
    election: Election,
    /// A replica whose broker restarted after an unclean shutdown: it may have lost
    /// unflushed records, so it leaves the ELR (Kafka's `uncleanShutdownReplicas`).
    unclean_shutdown: Option<i32>,
    /// Whether a replica's broker may lead (live, not the one being removed).
    acceptable: &'a dyn Fn(i32) -> bool,
}

impl<'a> PartitionChange<'a> {
    fn new(
        policy: &ElectionPolicy,
        topic: &TopicImage,
        old: &'a PartitionRegistration,
        target_isr: Vec<i32>,
        acceptable: &'a dyn Fn(i32) -> bool,
    ) -> Self {
        PartitionChange {
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
    fn build(self, topic_id: Uuid) -> Option<MetadataRecord> {
        self.next().map(|next| change_record(topic_id, &next))
    }

    /// The partition after the change, or `None` if nothing changes (Kafka's `build`). The
    /// leader epoch moves with the leader; the partition epoch with any change.
    fn next(mut self) -> Option<PartitionRegistration> {
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
fn change_record(topic_id: Uuid, next: &PartitionRegistration) -> MetadataRecord {
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

/// ElectLeaders (Kafka's `ReplicationControlManager.electLeaders`): one election per named
/// partition, or for every partition when none is named (then partitions needing none are left
/// out of the answer).
pub fn elect_leaders(
    image: &MetadataImage,
    election: ElectionType,
    partitions: Option<&[(String, Vec<i32>)]>,
    policy: &ElectionPolicy,
) -> Result<Decision, ControllerError> {
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
    let mut change = PartitionChange::new(policy, t, p, p.isr.clone(), &acceptable);
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

/// Takes `node_id` out of every ISR it is in and out of every leadership, electing from what
/// remains: what fencing and controlled shutdown share (Kafka's `generateLeaderAndIsrUpdates`
/// with `brokerToRemove`).
fn move_replica_away(
    image: &MetadataImage,
    node_id: i32,
    policy: &ElectionPolicy,
) -> Vec<MetadataRecord> {
    remove_replica(image, node_id, policy, false)
}

/// A broker restarted after an unclean shutdown (Kafka's `handleBrokerShutdown` with
/// `isCleanShutdown` false, ELR on): it leaves every ISR and every ELR, since it may have lost
/// records it had acknowledged as a follower.
fn remove_unclean_replica(
    image: &MetadataImage,
    node_id: i32,
    policy: &ElectionPolicy,
) -> Vec<MetadataRecord> {
    remove_replica(image, node_id, policy, true)
}

/// Kafka's `generateLeaderAndIsrUpdates` for one broker that may not lead: every partition
/// whose ISR holds it (and, after an unclean shutdown, whose ELR holds it; else that it leads)
/// moves to the ISR without it, through [`PartitionChange`].
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
            let mut change = PartitionChange::new(policy, t, p, isr, &acceptable);
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
            let change = PartitionChange::new(policy, t, p, p.isr.clone(), &acceptable);
            records.extend(change.build(t.id));
        }
    }
    records
}

/// What a broker registers with (Kafka's `BrokerRegistrationRequest`).
pub struct Registration<'a> {
    pub node_id: i32,
    pub host: &'a str,
    pub port: u16,
    pub incarnation: Uuid,
    pub previous_epoch: Option<i64>,
}

/// A (re-)registration. The new epoch is above every epoch handed out before: the metadata
/// offset only grows and registrations are decided one at a time.
///
/// A broker that registers again while its previous incarnation is still unfenced restarted
/// without being noticed (faster than the session timeout). Its previous incarnation is
/// fenced first, so it leaves the ISRs and gives up leadership.
///
/// A new incarnation then ends the previous one (Kafka's `ClusterControlManager.registerBroker`
/// and `ReplicationControlManager.handleBrokerShutdown`): its shutdown was clean only if it
/// names the epoch it was registered with. After an unclean one, with ELR on, it leaves every
/// ISR and ELR (it may have lost records it had acknowledged); after a clean one it leaves
/// the ISRs only, as at fencing.
pub fn register_broker(
    image: &MetadataImage,
    reg: &Registration<'_>,
    policy: &ElectionPolicy,
) -> Decision {
    let epoch = image.metadata_offset as i64 + 1;
    let node_id = reg.node_id;
    let existing = image.brokers.get(&node_id);
    debug_assert!(existing.is_none_or(|b| b.epoch < epoch));
    let mut records = fence_broker(image, node_id, policy);
    if existing.is_none_or(|b| b.incarnation != reg.incarnation) {
        let clean = existing.is_some_and(|b| reg.previous_epoch == Some(b.epoch));
        // The shutdown's changes are decided on the image as fencing leaves it.
        let mut fenced = image.clone();
        for r in &records {
            if let Err(reason) = fenced.apply(r) {
                tracing::warn!(?r, reason, "fencing record does not apply");
            }
        }
        records.extend(if clean || !policy.elr_enabled {
            move_replica_away(&fenced, node_id, policy)
        } else {
            remove_unclean_replica(&fenced, node_id, policy)
        });
    }
    records.push(MetadataRecord::RegisterBroker {
        node_id,
        host: reg.host.to_string(),
        port: reg.port,
        epoch,
        incarnation: reg.incarnation,
    });
    (records, ControllerReply::BrokerRegistered { epoch })
}

/// A heartbeat from a registered broker unfences it if it was fenced and has caught up with
/// the metadata log as far as its own registration (Kafka's BrokerHeartbeatManager: a broker
/// that does not yet know the current partition states must not lead).
pub fn heartbeat(
    image: &MetadataImage,
    node_id: i32,
    epoch: i64,
    metadata_offset: u64,
    policy: &ElectionPolicy,
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
        unfence_broker(image, node_id, policy)
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
/// broker is marked as in controlled shutdown (it may no longer lead or join an ISR), leaves
/// every ISR it is in and every partition it leads gets a new leader, as when it is fenced
/// (`PartitionChange`: into the ELR where the ISR is below min ISR), but while it still runs,
/// so clients move before it stops. Once the records are committed it leads nothing, and the
/// reply lets it shut down. A fenced broker leads nothing already.
pub fn shut_down_heartbeat(
    image: &MetadataImage,
    node_id: i32,
    epoch: i64,
    metadata_offset: u64,
    policy: &ElectionPolicy,
) -> Result<Decision, ControllerError> {
    // The usual checks (registered, current epoch); a fenced broker is not unfenced.
    heartbeat(image, node_id, epoch, metadata_offset, policy)?;
    let Some(b) = image.brokers.get(&node_id).filter(|b| !b.fenced) else {
        return Ok((Vec::new(), heartbeat_reply(true, true)));
    };
    // Marked first, so that no later election (an ELR one above all) picks it while it stops.
    let mut records = Vec::new();
    if !b.in_controlled_shutdown {
        records.push(MetadataRecord::BrokerInControlledShutdown { node_id, epoch });
    }
    records.extend(move_replica_away(image, node_id, policy));
    Ok((records, heartbeat_reply(false, true)))
}

/// Kafka's AlterPartition validation (`validateAlterPartitionData`), in Kafka's order, then
/// the change through the same rules as every other (`PartitionChangeBuilder`): an ISR
/// shrinking below min ISR moves the replicas that leave into the ELR.
pub fn alter_partition(
    image: &MetadataImage,
    r: &AlterPartitionRequest,
    policy: &ElectionPolicy,
) -> Result<Decision, ControllerError> {
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
    let change = PartitionChange::new(policy, t, p, r.new_isr.clone(), &acceptable);
    let Some(next) = change.next() else {
        // Nothing changes: the partition as it is (Kafka answers with the current state).
        return Ok((Vec::new(), ControllerReply::Partition(p.clone())));
    };
    Ok((
        vec![change_record(r.topic_id, &next)],
        ControllerReply::Partition(next),
    ))
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
) -> Result<Decision, ControllerError> {
    let name = spec.name;
    crate::metadata::validate_topic_name(name).map_err(ControllerError::InvalidTopic)?;
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
        index,
        replicas: replicas.to_vec(),
        isr,
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        elr: Vec::new(),
        last_known_elr: Vec::new(),
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    })
}

/// Kafka's `validateManualPartitionAssignment`: not empty, registered brokers only, each
/// once, and (when given) as many replicas as the other partitions have.
fn validate_manual_assignment(
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
) -> Result<Decision, ControllerError> {
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

/// AlterPartitionReassignments (Kafka's `ReplicationControlManager.
/// alterPartitionReassignments`): each partition is decided on its own and answers its own
/// error; the records of those that succeed are written together.
pub fn alter_partition_reassignments(
    image: &MetadataImage,
    topics: &[TopicReassignmentTargets],
    allow_replication_factor_change: bool,
    policy: &ElectionPolicy,
) -> Decision {
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
) -> PartitionChange<'a> {
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
    let mut change = PartitionChange::new(policy, t, p, p.isr.clone(), acceptable);
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
) -> Result<PartitionChange<'a>, ControllerError> {
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
    let mut change = PartitionChange::new(policy, t, p, isr, acceptable);
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
    use proptest::prelude::*;

    /// Brokers 1..=n registered and unfenced.
    fn cluster(n: i32) -> MetadataImage {
        let mut img = MetadataImage::default();
        for id in 1..=n {
            img.apply(&MetadataRecord::RegisterBroker {
                node_id: id,
                host: "127.0.0.1".into(),
                port: 9000 + id as u16,
                epoch: 1,
                incarnation: Uuid::nil(),
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

    fn apply(img: &mut MetadataImage, d: &[MetadataRecord]) {
        for r in d {
            img.apply(r).unwrap();
        }
    }

    /// The rules without ELR (Kafka with `eligible.leader.replicas.version` 0), min ISR 1.
    fn no_elr(unclean: bool) -> ElectionPolicy {
        ElectionPolicy {
            default_unclean: unclean,
            default_min_isr: 1,
            elr_enabled: false,
        }
    }

    /// Kafka 4.4's rules for a new cluster (ELR on), with `min.insync.replicas=2`.
    const ELR: ElectionPolicy = ElectionPolicy {
        default_unclean: false,
        default_min_isr: 2,
        elr_enabled: true,
    };

    fn fence(img: &mut MetadataImage, node_id: i32, unclean: bool) {
        fence_with(img, node_id, &no_elr(unclean));
    }

    fn fence_with(img: &mut MetadataImage, node_id: i32, policy: &ElectionPolicy) {
        let records = fence_broker(img, node_id, policy);
        apply(img, &records);
    }

    /// A registration of broker `node_id` from a new process.
    fn restart(node_id: i32, previous_epoch: Option<i64>) -> Registration<'static> {
        Registration {
            node_id,
            host: "127.0.0.1",
            port: 9000 + node_id as u16,
            incarnation: Uuid::new_v4(),
            previous_epoch,
        }
    }

    /// CreateTopics with the placer's assignment.
    fn create(
        img: &MetadataImage,
        name: &str,
        partitions: i32,
        rf: i16,
        id: Uuid,
    ) -> Result<Decision, ControllerError> {
        let spec = TopicSpec {
            name,
            partitions,
            replication_factor: rf,
            assignments: &[],
            configs: &BTreeMap::new(),
        };
        create_topic(img, &spec, id)
    }

    fn with_topic(img: &mut MetadataImage, partitions: i32, rf: i16) -> Uuid {
        let id = Uuid::new_v4();
        let (records, _) = create(img, "t", partitions, rf, id).unwrap();
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

    #[test]
    fn controlled_shutdown_moves_leadership_before_the_broker_stops() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 3, 3);
        let led_by_1 = |img: &MetadataImage| {
            img.topics[&id]
                .partitions
                .iter()
                .filter(|p| p.leader == 1)
                .count()
        };
        assert_eq!(led_by_1(&img), 1);
        let (records, reply) = shut_down_heartbeat(&img, 1, 1, 0, &no_elr(false)).unwrap();
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
            shut_down_heartbeat(&img, 1, 7, 0, &no_elr(false))
                .unwrap_err()
                .code(),
            77
        );
    }

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
    fn fast_restart_gives_up_leadership() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        assert_eq!(img.partition(id, 0).unwrap().leader, 1);
        img.metadata_offset = 10;
        let (records, reply) = register_broker(&img, &restart(1, None), &no_elr(false));
        apply(&mut img, &records);
        assert_eq!(reply, ControllerReply::BrokerRegistered { epoch: 11 });
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch), (2, 1));
        assert_eq!(p.isr, vec![2, 3]);
        assert!(!img.is_live(1));
        assert_eq!(img.brokers[&1].epoch, 11);
        // Its old epoch is refused; the new one unfences it.
        assert_eq!(
            heartbeat(&img, 1, 1, 20, &no_elr(false))
                .unwrap_err()
                .code(),
            77
        );
        // Registered at offset 10: a broker that has not applied that far stays fenced.
        assert_eq!(img.brokers[&1].registration_offset, 10);
        let (records, reply) = heartbeat(&img, 1, 11, 9, &no_elr(false)).unwrap();
        assert!(records.is_empty());
        assert_eq!(reply, heartbeat_reply(true, false));
        let (records, _) = heartbeat(&img, 1, 11, 10, &no_elr(false)).unwrap();
        apply(&mut img, &records);
        assert!(img.is_live(1));
    }

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

    #[test]
    fn producer_id_blocks_do_not_overlap() {
        let mut img = cluster(1);
        let req = ControllerRequest::AllocateProducerIds { node_id: 1 };
        let (r1, a) = decide(&img, &req, &no_elr(false)).unwrap();
        apply(&mut img, &r1);
        let (_, b) = decide(&img, &req, &no_elr(false)).unwrap();
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

    /// The ISR of partition 0 as its leader proposes it (AlterPartition).
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

    fn manual(
        img: &MetadataImage,
        partitions: i32,
        rf: i16,
        assignments: &[(i32, Vec<i32>)],
    ) -> Result<Decision, ControllerError> {
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

    #[test]
    fn validate_only_records_nothing() {
        let img = cluster(3);
        let create = ControllerRequest::CreateTopic {
            name: "v".into(),
            partitions: 2,
            replication_factor: 3,
            configs: BTreeMap::new(),
            assignments: Vec::new(),
            validate_only: true,
        };
        let (records, reply) = decide(&img, &create, &ELR).unwrap();
        assert!(records.is_empty());
        assert!(
            matches!(reply, ControllerReply::TopicCreated { partitions, .. } if partitions.len() == 2)
        );
        let too_many = ControllerRequest::CreateTopic {
            name: "v".into(),
            partitions: 2,
            replication_factor: 4,
            configs: BTreeMap::new(),
            assignments: Vec::new(),
            validate_only: true,
        };
        assert_eq!(decide(&img, &too_many, &ELR).unwrap_err().code(), 38);
        let mut img = img;
        with_topic(&mut img, 1, 1);
        let grow = ControllerRequest::CreatePartitions {
            name: "t".into(),
            total_count: 3,
            assignments: None,
            validate_only: true,
        };
        assert!(decide(&img, &grow, &ELR).unwrap().0.is_empty());
    }

    fn shrink_or_expand(
        img: &mut MetadataImage,
        id: Uuid,
        new_isr: &[i32],
        policy: &ElectionPolicy,
    ) {
        let p = img.partition(id, 0).unwrap().clone();
        let r = AlterPartitionRequest {
            topic_id: id,
            partition: 0,
            leader_id: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: new_isr.to_vec(),
        };
        let (records, _) = alter_partition(img, &r, policy).unwrap();
        apply(img, &records);
    }

    fn state(img: &MetadataImage, id: Uuid) -> (i32, Vec<i32>, Vec<i32>, Vec<i32>) {
        let p = img.partition(id, 0).unwrap();
        (
            p.leader,
            p.isr.clone(),
            p.elr.clone(),
            p.last_known_elr.clone(),
        )
    }

    /// Registers `node_id` from a new process, then unfences it.
    fn come_back(img: &mut MetadataImage, node_id: i32, clean: bool) {
        let previous = clean.then(|| img.brokers[&node_id].epoch);
        img.metadata_offset += 1;
        let (records, reply) = register_broker(img, &restart(node_id, previous), &ELR);
        apply(img, &records);
        let ControllerReply::BrokerRegistered { epoch } = reply else {
            panic!("{reply:?}");
        };
        let (records, _) = heartbeat(img, node_id, epoch, img.metadata_offset, &ELR).unwrap();
        apply(img, &records);
        assert!(img.is_live(node_id));
    }

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

    /// A second registration of the same process (after STALE_BROKER_EPOCH) is no restart:
    /// the epoch it names is no longer the registered one, and that must not count as unclean.
    #[test]
    fn re_registering_the_same_incarnation_keeps_the_elr() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        fence_with(&mut img, 3, &ELR);
        fence_with(&mut img, 2, &ELR);
        assert_eq!(state(&img, id), (1, vec![1], vec![2], vec![]));
        let reg = restart(2, Some(1));
        for offset in [10, 20] {
            img.metadata_offset = offset;
            let (records, _) = register_broker(&img, &reg, &ELR);
            apply(&mut img, &records);
            assert_eq!(
                state(&img, id),
                (1, vec![1], vec![2], vec![]),
                "at {offset}"
            );
        }
        // The same epoch from a new process after a crash would have been unclean.
        img.metadata_offset = 30;
        let (records, _) = register_broker(&img, &restart(2, Some(1)), &ELR);
        apply(&mut img, &records);
        assert_eq!(state(&img, id), (1, vec![1], vec![], vec![]));
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
                let r = AlterPartitionRequest {
                    topic_id: id,
                    partition: 0,
                    leader_id: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    new_isr: isr,
                };
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
