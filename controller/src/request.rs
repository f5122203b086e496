//! The writes the active controller decides ([`ControllerRequest`]), its answers
//! ([`ControllerReply`]), and [`decide`], which hands each request to the control manager that
//! owns it, as Kafka's `QuorumController` hands them to its `ReplicationControlManager`,
//! `ClusterControlManager`, `ConfigurationControlManager`, `ProducerIdControlManager` and
//! `AclControlManager`.
//!
//! Every decision is a pure function of the committed [`MetadataImage`]: it validates a
//! request against the image and returns the records that carry it out, plus the reply.
//! Nothing here or in the control managers touches the network, the disk or a clock, so the
//! rules are unit- and property-tested directly; `Controller` serialises calls (one at a time,
//! on an image that includes every committed record) and proposes the records through Raft.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::acl_control::{create_acls, delete_acls, AclCreateResults, AclDeleteResults};
use crate::cluster_control::{heartbeat, register_broker, shut_down_heartbeat, Registration};
use crate::configuration_control::{
    alter_broker_configs, alter_configs, alter_group_configs, ElectionPolicy,
};
use crate::error::ControllerError;
use crate::image::{MetadataImage, MetadataRecord, PartitionRegistration};
use crate::producer_id_control::allocate_producer_ids;
use crate::replication_control::{
    alter_partition, alter_partition_reassignments, create_partitions, create_topic, delete_topic,
    elect_leaders, elect_preferred_leaders, fence_broker, unregister_broker, TopicSpec,
};

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
    /// A topic mutation (CreateTopic, DeleteTopic, CreatePartitions) charged to the client's
    /// `controller_mutation_rate` bucket, which the active controller holds for the clients
    /// of every broker (Kafka's `ControllerApis` with its `ControllerMutationQuotaManager`).
    /// `decide` decides `request` alone; the controller's runner applies the quota.
    WithMutationQuota {
        quota: MutationQuotaKey,
        request: Box<ControllerRequest>,
    },
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
    /// Sets (`Some`) or removes (`None`) config overrides of a group; the caller validates
    /// them (`group::overrides`).
    AlterGroupConfigs {
        group: String,
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
        /// Every advertised listener (Kafka's `BrokerRegistrationRequest.listeners`).
        #[serde(default)]
        endpoints: Vec<crate::image::BrokerEndpoint>,
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
    /// AlterUserScramCredentials (Kafka's `ScramControlManager.alterCredentials`).
    AlterUserScramCredentials {
        deletions: Vec<(String, i8)>,
        upsertions: Vec<crate::scram_control::ScramUpsertion>,
    },
    /// AlterClientQuotas (Kafka's `ClientQuotaControlManager.alterClientQuotas`).
    AlterClientQuotas {
        alterations: Vec<crate::client_quota_control::QuotaAlteration>,
        /// Validate and answer, record nothing (`ValidateOnly`).
        validate_only: bool,
    },
    /// The credentials this node was formatted with; recorded once per cluster.
    BootstrapScramCredentials {
        credentials: Vec<(String, i8, crate::scram::ScramCredential)>,
    },
    /// The voter set a dynamic quorum was formatted with; recorded once per cluster.
    BootstrapVoters {
        bootstrap: crate::voter_set::BootstrapVoters,
    },
    /// AllocateProducerIds: a block of producer ids for `node_id`.
    AllocateProducerIds { node_id: i32 },
    /// Issued by the active controller's own liveness check.
    FenceBroker { node_id: i32 },
    /// UnregisterBroker: the broker's registration goes (decommissioning).
    UnregisterBroker { node_id: i32 },
    /// Issued by the active controller every `leader.imbalance.check.interval.seconds`
    /// (with `auto.leader.rebalance.enable`): preferred-leader elections.
    ElectPreferredLeaders,
    /// ElectLeaders from a client (Kafka's `kafka-leader-election`): the named partitions, or
    /// every partition when `None`.
    ElectLeaders {
        election: ElectionType,
        partitions: Option<Vec<(String, Vec<i32>)>>,
        /// The request's `TimeoutMs`: the active controller must begin deciding it within
        /// this long of receiving it ([`ControllerRequest::decide_within`]).
        #[serde(default)]
        timeout_ms: Option<i32>,
    },
    /// AlterPartitionReassignments: per topic and partition the target replicas, or `None`
    /// to cancel the reassignment in progress.
    AlterPartitionReassignments {
        topics: ReassignmentTargets,
        /// v1's `AllowReplicationFactorChange` (KIP-860); true below v1.
        allow_replication_factor_change: bool,
    },
    /// CreateAcls: the bindings, already past the broker's checks (`api::acls`).
    CreateAcls { acls: Vec<crate::acl::StandardAcl> },
    /// DeleteAcls: the filters.
    DeleteAcls {
        filters: Vec<crate::acl::AclBindingFilter>,
    },
    /// UpdateFeatures (Kafka's `FeatureControlManager.updateFeatures`).
    UpdateFeatures {
        updates: Vec<crate::feature_control::FeatureUpdate>,
        validate_only: bool,
    },
    /// Sets (`Some`) or removes (`None`) keys of a client-metrics subscription; the caller
    /// validates them (`telemetry`).
    AlterClientMetricsConfigs {
        name: String,
        configs: BTreeMap<String, Option<String>>,
    },
}

impl ControllerRequest {
    /// How long after receiving it the active controller may begin deciding a request, for
    /// the requests that carry a client's timeout (Kafka's
    /// `ControllerRequestContext.requestTimeoutMsToDeadlineNs`, which `ControllerApis`
    /// computes from the request's `timeoutMs`). A negative timeout is zero: a deadline
    /// already passed. The caller adds it to its clock's reading at receipt; this crate
    /// reads no clock.
    pub fn decide_within(&self) -> Option<Duration> {
        match self {
            ControllerRequest::ElectLeaders {
                timeout_ms: Some(ms),
                ..
            } => Some(Duration::from_millis((*ms).max(0) as u64)),
            _ => None,
        }
    }
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
    /// CreateAcls' results.
    AclsCreated(AclCreateResults),
    /// DeleteAcls' results.
    AclsDeleted(AclDeleteResults),
    /// AlterUserScramCredentials' results: user, error code, error message.
    ScramResults(Vec<crate::scram_control::ScramResult>),
    /// AlterClientQuotas' results: entity, error code, error message.
    ClientQuotaResults(Vec<crate::client_quota_control::QuotaResult>),
    /// The answer to [`ControllerRequest::WithMutationQuota`]: the mutation's reply, or
    /// `None` when the client's tokens were spent under a strict quota (THROTTLING_QUOTA_EXCEEDED),
    /// and how long the client is to be throttled, 0 for not at all.
    MutationQuota {
        reply: Option<Box<ControllerReply>>,
        throttle_ms: i32,
    },
}

/// Whose `controller_mutation_rate` bucket a topic mutation is charged to: the principal and
/// client id of the client's request (what Kafka's forwarding envelope carries to the
/// controller's `ControllerRequestContext`), and whether the quota is strict (the request's
/// version is at least the API's `strictSinceVersion`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutationQuotaKey {
    pub user: String,
    pub client_id: String,
    pub strict: bool,
}

/// How a topic mutation meets its client's quota on the active controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaCharge {
    /// Not charged: a deletion of a topic the image lacks (refused as unknown first).
    Free,
    /// Charged; with the tokens spent under a strict quota, this validate-only form is
    /// decided instead, so a mutation refused for its own reason keeps that reason (Kafka
    /// applies the quota after validating: `ReplicationControlManager`), and `None` means
    /// there is nothing more to validate.
    Charged(Option<ControllerRequest>),
}

impl ControllerRequest {
    /// How this mutation meets the quota on `image` (see [`QuotaCharge`]).
    pub fn quota_charge(&self, image: &MetadataImage) -> QuotaCharge {
        match self {
            ControllerRequest::CreateTopic { .. } | ControllerRequest::CreatePartitions { .. } => {
                let mut probe = self.clone();
                if let ControllerRequest::CreateTopic { validate_only, .. }
                | ControllerRequest::CreatePartitions { validate_only, .. } = &mut probe
                {
                    *validate_only = true;
                }
                QuotaCharge::Charged(Some(probe))
            }
            ControllerRequest::DeleteTopic { name } if image.topic_by_name(name).is_none() => {
                QuotaCharge::Free
            }
            _ => QuotaCharge::Charged(None),
        }
    }

    /// The permits (partitions created or deleted) a decided mutation takes from the
    /// bucket (Kafka's `applyPartitionChangeQuota` arguments): `image` is the image it was
    /// decided on, `reply` its reply.
    pub fn mutation_permits(&self, image: &MetadataImage, reply: &ControllerReply) -> usize {
        let existing = |name: &str| image.topic_by_name(name).map_or(0, |t| t.partitions.len());
        match (self, reply) {
            (
                ControllerRequest::CreateTopic { .. },
                ControllerReply::TopicCreated { partitions, .. },
            ) => partitions.len(),
            (ControllerRequest::DeleteTopic { name }, _) => existing(name),
            (
                ControllerRequest::CreatePartitions {
                    name, total_count, ..
                },
                _,
            ) => (*total_count.max(&0) as usize).saturating_sub(existing(name)),
            _ => 0,
        }
    }
}

/// Records plus reply: what a request turns into (Kafka's `ControllerResult`).
pub type ControllerResult = (Vec<MetadataRecord>, ControllerReply);

/// Decides one request against `image`. Like Kafka's `QuorumController`, a request goes to the
/// control manager that owns what it changes: topics, partitions and leaders to the
/// replication control (`ReplicationControlManager`), brokers to the cluster control
/// (`ClusterControlManager`), configs to the configuration control
/// (`ConfigurationControlManager`); the others are one call each.
pub fn decide(
    image: &MetadataImage,
    req: &ControllerRequest,
    policy: &ElectionPolicy,
) -> Result<ControllerResult, ControllerError> {
    use ControllerRequest as Q;
    match req {
        Q::CreateTopic { .. }
        | Q::DeleteTopic { .. }
        | Q::CreatePartitions { .. }
        | Q::AlterPartition(_)
        | Q::ElectLeaders { .. }
        | Q::ElectPreferredLeaders
        | Q::AlterPartitionReassignments { .. } => decide_replication(image, req, policy),
        Q::WithMutationQuota { request, .. } => decide(image, request, policy),
        Q::RegisterBroker { .. }
        | Q::Heartbeat { .. }
        | Q::FenceBroker { .. }
        | Q::UnregisterBroker { .. } => decide_cluster(image, req, policy),
        Q::AlterConfigs { .. }
        | Q::AlterBrokerConfigs { .. }
        | Q::AlterGroupConfigs { .. }
        | Q::AlterClientMetricsConfigs { .. } => decide_configs(image, req),
        Q::AlterUserScramCredentials {
            deletions,
            upsertions,
        } => Ok(crate::scram_control::alter_credentials(
            image, deletions, upsertions,
        )),
        Q::BootstrapScramCredentials { credentials } => {
            Ok(crate::scram_control::bootstrap(image, credentials))
        }
        Q::BootstrapVoters { bootstrap } => Ok(crate::voter_set::bootstrap(image, bootstrap)),
        Q::AlterClientQuotas {
            alterations,
            validate_only,
        } => only_validated(
            Ok(crate::client_quota_control::alter_client_quotas(
                image,
                alterations,
            )),
            *validate_only,
        ),
        Q::AllocateProducerIds { node_id } => Ok(allocate_producer_ids(image, *node_id)),
        Q::CreateAcls { acls } => create_acls(image, acls),
        Q::DeleteAcls { filters } => delete_acls(image, filters),
        Q::UpdateFeatures {
            updates,
            validate_only,
        } => crate::feature_control::update_features(image, policy, updates, *validate_only),
    }
}

/// A request `decide` sent to a control manager that does not own it.
fn not_owned(manager: &str) -> ControllerError {
    ControllerError::InvalidRequest(format!("a request {manager} does not decide"))
}

/// Topics, partitions, their leaders and ISRs, and reassignments (Kafka's
/// `ReplicationControlManager`).
fn decide_replication(
    image: &MetadataImage,
    req: &ControllerRequest,
    policy: &ElectionPolicy,
) -> Result<ControllerResult, ControllerError> {
    use ControllerRequest as Q;
    match req {
        Q::CreateTopic {
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
        Q::DeleteTopic { name } => delete_topic(image, name),
        Q::CreatePartitions {
            name,
            total_count,
            assignments,
            validate_only,
        } => only_validated(
            create_partitions(image, name, *total_count, assignments.as_deref()),
            *validate_only,
        ),
        Q::AlterPartition(r) => alter_partition(image, r, policy),
        Q::ElectLeaders {
            election,
            partitions,
            ..
        } => elect_leaders(image, *election, partitions.as_deref(), policy),
        Q::ElectPreferredLeaders => Ok((
            elect_preferred_leaders(image, policy),
            ControllerReply::Done,
        )),
        Q::AlterPartitionReassignments {
            topics,
            allow_replication_factor_change,
        } => Ok(alter_partition_reassignments(
            image,
            topics,
            *allow_replication_factor_change,
            policy,
        )),
        _ => Err(not_owned("ReplicationControlManager")),
    }
}

/// Brokers' registrations, heartbeats, fencing and unregistration (Kafka's
/// `ClusterControlManager`, with the leader moves `ReplicationControlManager` makes for them).
fn decide_cluster(
    image: &MetadataImage,
    req: &ControllerRequest,
    policy: &ElectionPolicy,
) -> Result<ControllerResult, ControllerError> {
    use ControllerRequest as Q;
    match req {
        Q::RegisterBroker {
            node_id,
            host,
            port,
            incarnation,
            previous_epoch,
            endpoints,
        } => Ok(register_broker(
            image,
            &Registration {
                node_id: *node_id,
                host,
                port: *port,
                incarnation: *incarnation,
                previous_epoch: *previous_epoch,
                endpoints,
            },
            policy,
        )),
        Q::Heartbeat {
            node_id,
            epoch,
            metadata_offset,
            want_shut_down: false,
        } => heartbeat(image, *node_id, *epoch, *metadata_offset, policy),
        Q::Heartbeat {
            node_id,
            epoch,
            metadata_offset,
            want_shut_down: true,
        } => shut_down_heartbeat(image, *node_id, *epoch, *metadata_offset, policy),
        Q::FenceBroker { node_id } => {
            Ok((fence_broker(image, *node_id, policy), ControllerReply::Done))
        }
        Q::UnregisterBroker { node_id } => Ok((
            unregister_broker(image, *node_id, policy)?,
            ControllerReply::Done,
        )),
        _ => Err(not_owned("ClusterControlManager")),
    }
}

/// Topic, broker, group and client metrics configs (Kafka's `ConfigurationControlManager`).
fn decide_configs(
    image: &MetadataImage,
    req: &ControllerRequest,
) -> Result<ControllerResult, ControllerError> {
    use ControllerRequest as Q;
    match req {
        Q::AlterConfigs { name, configs } => alter_configs(image, name, configs),
        Q::AlterBrokerConfigs { resource, configs } => Ok(alter_broker_configs(resource, configs)),
        Q::AlterGroupConfigs { group, configs } => Ok(alter_group_configs(group, configs)),
        Q::AlterClientMetricsConfigs { name, configs } => Ok((
            vec![MetadataRecord::AlterClientMetricsConfigs {
                name: name.clone(),
                configs: configs.clone(),
            }],
            ControllerReply::Done,
        )),
        _ => Err(not_owned("ConfigurationControlManager")),
    }
}

/// A validate-only request is decided in full and answered as if done, but records nothing
/// (Kafka's `validateOnly`).
fn only_validated(
    decision: Result<ControllerResult, ControllerError>,
    validate_only: bool,
) -> Result<ControllerResult, ControllerError> {
    let (records, reply) = decision?;
    Ok((if validate_only { Vec::new() } else { records }, reply))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

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
}
