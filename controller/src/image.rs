//! Metadata records and the [`MetadataImage`] they build.
//!
//! The metadata log is a sequence of [`MetadataBatch`]es; each batch is applied atomically,
//! like Kafka's atomic record batches in `__cluster_metadata`. Records carry the *result* of a
//! decision taken by the active controller (a partition's new leader, ISR and epochs), never
//! the decision's inputs, so that applying them is deterministic on every node and needs no
//! clock, no liveness state and no configuration.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::acl::StandardAcl;
use crate::client_quota_control::{QuotaEntity, QuotaValue};
use crate::scram::{ScramCredential, ScramMechanism};

/// Kafka's "no leader" value for a partition's leader id.
pub const NO_LEADER: i32 = -1;

/// One advertised listener of a registered broker (an entry of Kafka's
/// `BrokerRegistrationRecord.endPoints`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerEndpoint {
    /// The listener's name (`PLAINTEXT`, `CLIENT`, ...).
    pub name: String,
    pub host: String,
    pub port: u16,
    /// Kafka's name of the listener's security protocol.
    pub security_protocol: String,
}

/// One registered broker (Kafka's `BrokerRegistration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub node_id: i32,
    /// Host and port that followers and other brokers use: the broker's inter-broker
    /// listener (`inter.broker.listener.name`) as advertised.
    pub host: String,
    pub port: u16,
    /// Every advertised broker listener. Empty in registrations written before named
    /// listeners; `host` and `port` then stand for every listener.
    #[serde(default)]
    pub endpoints: Vec<BrokerEndpoint>,
    /// Changes on every registration, so that heartbeats from a previous incarnation of the
    /// broker are recognised as stale (STALE_BROKER_EPOCH).
    pub epoch: i64,
    /// Metadata offset of the registration record: the broker must have applied the log up
    /// to here (it knows its own registration) before it is unfenced.
    #[serde(default)]
    pub registration_offset: u64,
    /// The process incarnation that registered (Kafka's `incarnationId`).
    #[serde(default)]
    pub incarnation: Uuid,
    /// A fenced broker leads nothing and is in no ISR (with ELR off, except as the last
    /// member, which Kafka then keeps so that a clean election stays possible when it comes
    /// back; with ELR on it moves to the ELR instead).
    pub fenced: bool,
    /// Set once its controlled shutdown began (Kafka's `inControlledShutdown`): it may no
    /// longer lead or join an ISR, although it runs until its logs are closed. A new
    /// registration clears it.
    #[serde(default)]
    pub in_controlled_shutdown: bool,
}

impl BrokerRegistration {
    /// Host and port of this broker's listener named `listener_name`, as Kafka's
    /// `MetadataCache.getAliveBrokerNode(id, listenerName)` gives them to a client that came
    /// in on that listener; `None` when the broker has no such listener.
    pub fn endpoint(&self, listener_name: &str) -> Option<(&str, u16)> {
        if self.endpoints.is_empty() {
            return Some((&self.host, self.port));
        }
        self.endpoints
            .iter()
            .find(|e| e.name == listener_name)
            .map(|e| (e.host.as_str(), e.port))
    }
}

/// One partition's assignment and leadership (Kafka's `PartitionRegistration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRegistration {
    pub index: i32,
    /// The assigned replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replicas: a subset of `replicas`; contains `leader` unless the partition is
    /// leaderless. Empty only with ELR on, when its last member left (KIP-966).
    pub isr: Vec<i32>,
    /// The leader's node id, or [`NO_LEADER`].
    pub leader: i32,
    /// Bumped on every leader change; never goes backwards.
    pub leader_epoch: i32,
    /// Bumped on every change of leader or ISR; never goes backwards. AlterPartition requests
    /// must name the current value (INVALID_UPDATE_VERSION otherwise).
    pub partition_epoch: i32,
    /// Eligible leader replicas (KIP-966, Kafka's `PartitionRegistration.elr`): replicas that
    /// left the ISR while it was below min ISR and so still hold every committed record; they
    /// may lead when the ISR is empty. Disjoint from `isr`.
    #[serde(default)]
    pub elr: Vec<i32>,
    /// Kafka's `lastKnownElr`, which Kafka 4.4 uses to hold the last known leader: set to the
    /// leader of the moment when the ISR becomes empty, cleared when the partition has a
    /// leader again. With the ISR and ELR both empty, that replica may lead once it is back.
    #[serde(default)]
    pub last_known_elr: Vec<i32>,
    /// Replicas a reassignment is adding (Kafka's `PartitionRegistration.addingReplicas`):
    /// part of `replicas` already, they fetch like any follower; the reassignment completes
    /// once all of them are in the ISR.
    #[serde(default)]
    pub adding_replicas: Vec<i32>,
    /// Replicas a reassignment is removing (Kafka's `removingReplicas`): still in `replicas`
    /// (after the target ones) until the reassignment completes. Disjoint from
    /// `adding_replicas`.
    #[serde(default)]
    pub removing_replicas: Vec<i32>,
}

impl PartitionRegistration {
    /// A new partition on `replicas`: the first leads, all are in the ISR, epochs start at 0.
    pub fn new(index: i32, replicas: Vec<i32>) -> Self {
        PartitionRegistration {
            index,
            leader: replicas[0],
            isr: replicas.clone(),
            replicas,
            leader_epoch: 0,
            partition_epoch: 0,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        }
    }
}

impl PartitionRegistration {
    /// Applies a `PartitionChange` record to this partition (Kafka's
    /// `PartitionRegistration.merge`), after checking that it keeps the partition's
    /// invariants; a record of another kind is refused.
    fn merge(&mut self, record: &MetadataRecord) -> Result<(), &'static str> {
        let MetadataRecord::PartitionChange {
            leader,
            leader_epoch,
            isr,
            partition_epoch,
            elr,
            last_known_elr,
            replicas,
            adding_replicas,
            removing_replicas,
            ..
        } = record
        else {
            return Err("not a partition change record");
        };
        // Paired with the checks in `election`: epochs never go backwards, and the
        // partition epoch moves on every change.
        if *leader_epoch < self.leader_epoch || *partition_epoch <= self.partition_epoch {
            return Err("partition epochs go backwards");
        }
        let assignment = replicas.as_ref().unwrap_or(&self.replicas);
        check_assignment(assignment, adding_replicas, removing_replicas)?;
        let subset = |s: &[i32]| s.iter().all(|r| assignment.contains(r));
        if !subset(isr) || !subset(elr) || elr.iter().any(|r| isr.contains(r)) {
            return Err("ISR and ELR are not disjoint subsets of the replicas");
        }
        if *leader != NO_LEADER && !isr.contains(leader) {
            return Err("the leader is not in the ISR");
        }
        self.leader = *leader;
        self.leader_epoch = *leader_epoch;
        self.isr = isr.clone();
        self.partition_epoch = *partition_epoch;
        self.elr = elr.clone();
        self.last_known_elr = last_known_elr.clone();
        if let Some(r) = replicas {
            self.replicas = r.clone();
        }
        self.adding_replicas = adding_replicas.clone();
        self.removing_replicas = removing_replicas.clone();
        Ok(())
    }

    /// Whether a reassignment is under way (Kafka's
    /// `PartitionReassignmentReplicas.isReassignmentInProgress`).
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    pub name: String,
    /// Stable for the topic's lifetime; clients name topics by id (Produce v13, Fetch v13).
    pub id: Uuid,
    /// Indexed by partition number: `partitions[i].index == i`.
    pub partitions: Vec<PartitionRegistration>,
    /// Topic config overrides, Kafka's topic config names.
    pub configs: BTreeMap<String, String>,
}

impl TopicImage {
    /// How many partitions the topic has.
    pub fn partition_count(&self) -> i32 {
        self.partitions.len() as i32
    }

    /// The topic's replication factor: its first partition's replica count (0 without
    /// partitions).
    pub fn replication_factor(&self) -> i16 {
        self.partitions
            .first()
            .map_or(0, |p| p.replicas.len() as i16)
    }
}

/// Dynamic broker configs by resource name: a node id for one broker, "" for the cluster-wide
/// default (Kafka's `DynamicBrokerConfig` layers). The metadata owns them
/// (`MetadataImage::broker_configs`).
pub type DynamicBrokerConfigs = BTreeMap<String, BTreeMap<String, String>>;

/// The committed metadata, identical on every node once it has applied the same log prefix
/// (Kafka's `MetadataImage`). A single node's comes from its own one-voter quorum.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataImage {
    /// Registered brokers by node id, fenced or not.
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    /// Topics by id.
    pub topics: BTreeMap<Uuid, TopicImage>,
    /// Name → id, kept in step with `topics`.
    pub topic_ids: BTreeMap<String, Uuid>,
    /// The first producer id not yet handed out in a block.
    pub next_producer_id_block: i64,
    /// Raft log index of the last applied entry (Kafka's metadata offset).
    pub metadata_offset: u64,
    /// Dynamic broker configs by resource name: a node id, or "" for the cluster default
    /// (Kafka's `ConfigRecord`s of resource type BROKER).
    #[serde(default)]
    pub broker_configs: crate::image::DynamicBrokerConfigs,
    /// Group config overrides by group id (Kafka's `ConfigRecord`s of resource type GROUP):
    /// the group need not exist.
    #[serde(default)]
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// ACLs by id (Kafka's `AclsImage`). Replaced (copy on write) only when an ACL record is
    /// applied, so a node's authorizer tells a change by pointer.
    #[serde(default)]
    pub acls: Arc<BTreeMap<Uuid, StandardAcl>>,
    /// SCRAM credentials by user, then by mechanism name (Kafka's `ScramImage`).
    #[serde(default)]
    pub scram_credentials: BTreeMap<String, BTreeMap<String, ScramCredential>>,
    /// Whether the bootstrap credentials (`brook format --add-scram`) have been recorded.
    #[serde(default)]
    pub scram_bootstrapped: bool,
    /// Feature levels set by UpdateFeatures (Kafka's `FeaturesImage`, from
    /// `FeatureLevelRecord`s); a feature never set is at its bootstrap level
    /// ([`MetadataImage::feature_level`]), as if formatted with it.
    #[serde(default)]
    pub feature_levels: BTreeMap<String, i16>,
    /// Client-metrics subscriptions by name (Kafka's `ConfigRecord`s of resource type
    /// CLIENT_METRICS, KIP-714): `metrics`, `interval.ms` and `match`.
    #[serde(default)]
    pub client_metrics_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Client quotas by entity, then key (Kafka's `ClientQuotasImage`). Replaced (copy on
    /// write) only when a `ClientQuota` record is applied, so the quota managers tell a
    /// change by pointer. Stored as a list of pairs: an entity is a map, not a JSON key.
    #[serde(default, with = "client_quota_entries")]
    pub client_quotas: Arc<ClientQuotas>,
    /// Each voter's directory id, as the quorum recorded it (the `VoterDirectoryId` of
    /// Kafka's `VotersRecord`): from the formatted voter set or an AddRaftVoter. A static
    /// voter (`controller.quorum.voters`) has none, as in Kafka. Kept after a voter leaves:
    /// the Raft membership says who votes; this names only their directories.
    #[serde(default)]
    pub voter_directory_ids: BTreeMap<i32, Uuid>,
}

/// Every entity's quotas (Kafka's `ClientQuotasImage`).
pub type ClientQuotas = BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>;

/// `ClientQuotas` as JSON: a list of (entity, quotas) pairs.
mod client_quota_entries {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serializer};

    use super::{ClientQuotas, QuotaEntity, QuotaValue};

    pub fn serialize<S: Serializer>(q: &Arc<ClientQuotas>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(q.iter())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<ClientQuotas>, D::Error> {
        let pairs: Vec<(QuotaEntity, BTreeMap<String, QuotaValue>)> = Vec::deserialize(d)?;
        Ok(Arc::new(pairs.into_iter().collect()))
    }
}

/// A change to the cluster metadata. Serialized into the Raft log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataRecord {
    /// A broker (re-)registers; it starts fenced, as in Kafka, until its first heartbeat.
    RegisterBroker {
        node_id: i32,
        host: String,
        port: u16,
        epoch: i64,
        #[serde(default)]
        incarnation: Uuid,
        /// Every advertised listener (absent in records written before named listeners).
        #[serde(default)]
        endpoints: Vec<BrokerEndpoint>,
    },
    /// The broker (at this epoch) is fenced; the ISR and leader changes that go with it are
    /// separate `PartitionChange` records in the same batch.
    FenceBroker { node_id: i32, epoch: i64 },
    /// The broker (at this epoch) is unfenced.
    UnfenceBroker { node_id: i32, epoch: i64 },
    /// The broker's registration (at this epoch) is removed (Kafka's
    /// `UnregisterBrokerRecord`); the ISR and leader changes that go with it are separate
    /// `PartitionChange` records in the same batch.
    UnregisterBroker { node_id: i32, epoch: i64 },
    /// The broker (at this epoch) began a controlled shutdown (Kafka's
    /// `BrokerRegistrationChangeRecord` with `InControlledShutdown`).
    BrokerInControlledShutdown { node_id: i32, epoch: i64 },
    /// A topic with its full initial assignment.
    CreateTopic {
        name: String,
        id: Uuid,
        partitions: Vec<PartitionRegistration>,
        configs: BTreeMap<String, String>,
    },
    /// Removes a topic and its partitions.
    DeleteTopic { id: Uuid },
    /// Appends partitions to a topic; their indexes continue the existing ones.
    CreatePartitions {
        id: Uuid,
        partitions: Vec<PartitionRegistration>,
    },
    /// Sets (`Some`) or removes (`None`) topic config overrides.
    AlterConfigs {
        id: Uuid,
        configs: BTreeMap<String, Option<String>>,
    },
    /// Sets (`Some`) or removes (`None`) dynamic broker configs of one resource: a node id, or
    /// "" for the cluster default (Kafka's `ConfigRecord` with resource type BROKER).
    AlterBrokerConfigs {
        resource: String,
        configs: BTreeMap<String, Option<String>>,
    },
    /// Sets (`Some`) or removes (`None`) config overrides of one group (Kafka's `ConfigRecord`
    /// with resource type GROUP).
    AlterGroupConfigs {
        group: String,
        configs: BTreeMap<String, Option<String>>,
    },
    /// The new leadership state of one partition, in full.
    PartitionChange {
        topic_id: Uuid,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
        isr: Vec<i32>,
        partition_epoch: i32,
        /// Kafka's `PartitionChangeRecord.eligibleLeaderReplicas`, in full.
        #[serde(default)]
        elr: Vec<i32>,
        /// Kafka's `PartitionChangeRecord.lastKnownElr`, in full.
        #[serde(default)]
        last_known_elr: Vec<i32>,
        /// The assignment, in full (Kafka's `PartitionChangeRecord.replicas`); `None` only in
        /// records written before reassignments existed, which left it unchanged.
        #[serde(default)]
        replicas: Option<Vec<i32>>,
        /// Kafka's `PartitionChangeRecord.addingReplicas`, in full.
        #[serde(default)]
        adding_replicas: Vec<i32>,
        /// Kafka's `PartitionChangeRecord.removingReplicas`, in full.
        #[serde(default)]
        removing_replicas: Vec<i32>,
    },
    /// A block of producer ids was handed to `node_id`; `next_block` is the first id after it.
    AllocateProducerIds { node_id: i32, next_block: i64 },
    /// An ACL was created (Kafka's `AccessControlEntryRecord`).
    AccessControlEntry { id: Uuid, acl: StandardAcl },
    /// An ACL was deleted (Kafka's `RemoveAccessControlEntryRecord`).
    RemoveAccessControlEntry { id: Uuid },
    /// A user's SCRAM credential for one mechanism, new or replaced (Kafka's
    /// `UserScramCredentialRecord`; `mechanism` is Kafka's type id).
    UserScramCredential {
        name: String,
        mechanism: i8,
        credential: ScramCredential,
    },
    /// A user's SCRAM credential is removed (Kafka's `RemoveUserScramCredentialRecord`).
    RemoveUserScramCredential { name: String, mechanism: i8 },
    /// The bootstrap credentials have been recorded; later bootstraps record nothing.
    ScramBootstrapped,
    /// One key of one entity's client quotas set (`Some`) or removed (`None`) (Kafka's
    /// `ClientQuotaRecord`).
    ClientQuota {
        entity: QuotaEntity,
        key: String,
        value: Option<QuotaValue>,
    },
    /// A feature's finalized level (Kafka's `FeatureLevelRecord`); 0 turns it off.
    FeatureLevel { name: String, level: i16 },
    /// A voter's directory id (Kafka's `VotersRecord.Voter`: its `ReplicaKey`), recorded
    /// before the membership change that adds the voter, or from the formatted voter set.
    VoterDirectoryId { voter_id: i32, directory_id: Uuid },
    /// Sets (`Some`) or removes (`None`) keys of one client-metrics subscription (Kafka's
    /// `ConfigRecord` with resource type CLIENT_METRICS).
    AlterClientMetricsConfigs {
        name: String,
        configs: BTreeMap<String, Option<String>>,
    },
}

/// Sets (`Some`) or removes (`None`) each changed key of a config layer.
fn apply_changes(layer: &mut BTreeMap<String, String>, changes: &BTreeMap<String, Option<String>>) {
    for (k, v) in changes {
        match v {
            Some(v) => layer.insert(k.clone(), v.clone()),
            None => layer.remove(k),
        };
    }
}

/// Applies `changes` to the config layer of `name` in `layers`, removing the layer once it
/// has no keys left.
fn apply_layer_changes(
    layers: &mut BTreeMap<String, BTreeMap<String, String>>,
    name: &str,
    changes: &BTreeMap<String, Option<String>>,
) {
    let layer = layers.entry(name.to_string()).or_default();
    apply_changes(layer, changes);
    if layer.is_empty() {
        layers.remove(name);
    }
}

/// Records applied together (one Raft entry).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataBatch(pub Vec<MetadataRecord>);

impl std::fmt::Display for MetadataBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MetadataBatch({} records)", self.0.len())
    }
}

impl MetadataImage {
    /// Whether this image holds the registration of `incarnation` of broker `node`, unfenced:
    /// the process that registered it may serve (Kafka's `BrokerLifecycleManager` waits for
    /// its own registration to be caught up and unfenced). A registration left by a previous
    /// run of the node has another incarnation and does not count, however recent its offset.
    pub fn registered_and_unfenced(&self, node: i32, incarnation: Uuid) -> bool {
        self.brokers
            .get(&node)
            .is_some_and(|b| !b.fenced && b.incarnation == incarnation)
    }
    /// A feature's finalized level: the one recorded last, else the level a new cluster
    /// starts with (`features::FEATURES`); 0 for a feature Brook does not know.
    pub fn feature_level(&self, name: &str) -> i16 {
        self.feature_levels
            .get(name)
            .copied()
            .unwrap_or_else(|| crate::features::feature(name).map_or(0, |f| f.bootstrap))
    }

    /// `user`'s SCRAM credential for `mechanism`.
    pub fn scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Option<&ScramCredential> {
        self.scram_credentials.get(user)?.get(mechanism.name())
    }

    /// The topic named `name`.
    pub fn topic_by_name(&self, name: &str) -> Option<&TopicImage> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    /// One partition.
    pub fn partition(&self, topic_id: Uuid, partition: i32) -> Option<&PartitionRegistration> {
        let p = usize::try_from(partition).ok()?;
        self.topics.get(&topic_id)?.partitions.get(p)
    }

    /// Whether `node_id` is registered and not fenced.
    pub fn is_live(&self, node_id: i32) -> bool {
        self.brokers.get(&node_id).is_some_and(|b| !b.fenced)
    }

    /// Whether `node_id` may lead and join ISRs: live and not shutting down (Kafka's
    /// `ClusterControlManager.isActive`).
    pub fn is_active(&self, node_id: i32) -> bool {
        self.brokers
            .get(&node_id)
            .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
    }

    /// The controller id an answer to clients names (Metadata, DescribeCluster): the active
    /// controller when it is a live broker, else the first live broker, else `fallback`, so
    /// that clients always get a broker they can reach (KAFKA-FACTS §5).
    pub fn controller_id_for_clients(&self, active: Option<i32>, fallback: i32) -> i32 {
        let live = self.live_brokers();
        active
            .filter(|id| live.contains(id))
            .or_else(|| live.first().copied())
            .unwrap_or(fallback)
    }

    /// Registered, unfenced brokers in id order.
    pub fn live_brokers(&self) -> Vec<i32> {
        self.brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| b.node_id)
            .collect()
    }

    /// Applies one batch. `metadata_offset` must already be the batch's own log offset.
    /// Records that do not fit the image (a topic deleted in between, an
    /// epoch going backwards) are skipped with a warning: the active controller validated them
    /// against this same image, so a skip means a bug, and skipping keeps every node identical.
    pub fn apply_batch(&mut self, batch: &MetadataBatch) {
        for record in &batch.0 {
            if let Err(reason) = self.apply(record) {
                tracing::warn!(?record, reason, "metadata record skipped");
            }
        }
    }

    /// Applies one record. Like Kafka's `MetadataDelta.replay`, each record goes to the part
    /// of the image it changes: the cluster's brokers, the topics, the configurations, the
    /// SCRAM credentials, the ACLs; the one-field records are applied here.
    pub fn apply(&mut self, record: &MetadataRecord) -> Result<(), &'static str> {
        use MetadataRecord as R;
        match record {
            R::RegisterBroker { .. }
            | R::FenceBroker { .. }
            | R::UnfenceBroker { .. }
            | R::UnregisterBroker { .. }
            | R::BrokerInControlledShutdown { .. } => self.replay_cluster(record)?,
            R::CreateTopic { .. }
            | R::DeleteTopic { .. }
            | R::CreatePartitions { .. }
            | R::AlterConfigs { .. }
            | R::PartitionChange { .. } => self.replay_topics(record)?,
            R::UserScramCredential { .. } | R::RemoveUserScramCredential { .. } => {
                self.replay_scram(record)?;
            }
            R::ClientQuota { .. }
            | R::AlterClientMetricsConfigs { .. }
            | R::AlterBrokerConfigs { .. }
            | R::AlterGroupConfigs { .. } => self.replay_configs(record)?,
            R::AccessControlEntry { .. } | R::RemoveAccessControlEntry { .. } => {
                self.replay_acls(record)?;
            }
            R::ScramBootstrapped => self.scram_bootstrapped = true,
            R::VoterDirectoryId {
                voter_id,
                directory_id,
            } => {
                self.voter_directory_ids.insert(*voter_id, *directory_id);
            }
            R::FeatureLevel { name, level } => {
                self.feature_levels.insert(name.clone(), *level);
            }
            R::AllocateProducerIds { next_block, .. } => {
                if *next_block <= self.next_producer_id_block {
                    return Err("producer id blocks go backwards");
                }
                self.next_producer_id_block = *next_block;
            }
        }
        Ok(())
    }

    /// The brokers' registrations and states (Kafka's `ClusterDelta.replay`). A record naming
    /// a broker's epoch applies only to that registration of the broker.
    fn replay_cluster(&mut self, record: &MetadataRecord) -> Result<(), &'static str> {
        use MetadataRecord as R;
        match record {
            R::RegisterBroker {
                node_id,
                host,
                port,
                epoch,
                incarnation,
                endpoints,
            } => {
                self.brokers.insert(
                    *node_id,
                    BrokerRegistration {
                        node_id: *node_id,
                        host: host.clone(),
                        port: *port,
                        endpoints: endpoints.clone(),
                        epoch: *epoch,
                        incarnation: *incarnation,
                        // During application `metadata_offset` is this entry's own offset.
                        registration_offset: self.metadata_offset,
                        fenced: true,
                        in_controlled_shutdown: false,
                    },
                );
            }
            R::FenceBroker { node_id, epoch } => {
                self.registered_broker(*node_id, *epoch)?.fenced = true;
            }
            R::UnfenceBroker { node_id, epoch } => {
                self.registered_broker(*node_id, *epoch)?.fenced = false;
            }
            R::UnregisterBroker { node_id, epoch } => {
                self.registered_broker(*node_id, *epoch)?;
                self.brokers.remove(node_id);
            }
            R::BrokerInControlledShutdown { node_id, epoch } => {
                self.registered_broker(*node_id, *epoch)?
                    .in_controlled_shutdown = true;
            }
            _ => return Err("not a broker record"),
        }
        Ok(())
    }

    /// Broker `node_id`'s registration, when it is the one of broker epoch `epoch`.
    fn registered_broker(
        &mut self,
        node_id: i32,
        epoch: i64,
    ) -> Result<&mut BrokerRegistration, &'static str> {
        let b = self.brokers.get_mut(&node_id).ok_or("unknown broker")?;
        if b.epoch != epoch {
            return Err("stale broker epoch");
        }
        Ok(b)
    }

    /// Topics, their partitions and their configs (Kafka's `TopicsDelta.replay`, and
    /// `ConfigurationsDelta.replay` for a topic's configs).
    fn replay_topics(&mut self, record: &MetadataRecord) -> Result<(), &'static str> {
        use MetadataRecord as R;
        match record {
            R::CreateTopic {
                name,
                id,
                partitions,
                configs,
            } => self.create_topic(name, *id, partitions, configs)?,
            R::DeleteTopic { id } => {
                let t = self.topics.remove(id).ok_or("unknown topic id")?;
                self.topic_ids.remove(&t.name);
            }
            R::CreatePartitions { id, partitions } => {
                let t = self.topics.get_mut(id).ok_or("unknown topic id")?;
                let first = t.partitions.len();
                if partitions
                    .iter()
                    .enumerate()
                    .any(|(i, p)| p.index as usize != first + i)
                {
                    return Err("new partition indexes do not continue the topic's");
                }
                t.partitions.extend(partitions.iter().cloned());
            }
            R::AlterConfigs { id, configs } => {
                let t = self.topics.get_mut(id).ok_or("unknown topic id")?;
                apply_changes(&mut t.configs, configs);
            }
            R::PartitionChange {
                topic_id,
                partition,
                ..
            } => {
                let t = self.topics.get_mut(topic_id).ok_or("unknown topic id")?;
                usize::try_from(*partition)
                    .ok()
                    .and_then(|i| t.partitions.get_mut(i))
                    .ok_or("unknown partition")?
                    .merge(record)?;
            }
            _ => return Err("not a topic record"),
        }
        Ok(())
    }

    /// A new topic (Kafka's `TopicRecord` and its `PartitionRecord`s, applied together).
    fn create_topic(
        &mut self,
        name: &str,
        id: Uuid,
        partitions: &[PartitionRegistration],
        configs: &BTreeMap<String, String>,
    ) -> Result<(), &'static str> {
        if self.topic_ids.contains_key(name) || self.topics.contains_key(&id) {
            return Err("topic exists");
        }
        if partitions
            .iter()
            .enumerate()
            .any(|(i, p)| p.index as usize != i)
        {
            return Err("partition indexes are not dense");
        }
        self.topic_ids.insert(name.to_string(), id);
        self.topics.insert(
            id,
            TopicImage {
                name: name.to_string(),
                id,
                partitions: partitions.to_vec(),
                configs: configs.clone(),
            },
        );
        Ok(())
    }

    /// SCRAM credentials (Kafka's `ScramDelta.replay`): a user without credentials is gone.
    fn replay_scram(&mut self, record: &MetadataRecord) -> Result<(), &'static str> {
        match record {
            MetadataRecord::UserScramCredential {
                name,
                mechanism,
                credential,
            } => {
                let m =
                    ScramMechanism::from_type_id(*mechanism).ok_or("unknown SCRAM mechanism")?;
                self.scram_credentials
                    .entry(name.clone())
                    .or_default()
                    .insert(m.name().to_string(), credential.clone());
            }
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                let m =
                    ScramMechanism::from_type_id(*mechanism).ok_or("unknown SCRAM mechanism")?;
                let user = self
                    .scram_credentials
                    .get_mut(name)
                    .ok_or("no such SCRAM credential")?;
                user.remove(m.name()).ok_or("no such SCRAM credential")?;
                if user.is_empty() {
                    self.scram_credentials.remove(name);
                }
            }
            _ => return Err("not a SCRAM record"),
        }
        Ok(())
    }

    /// Client quotas (Kafka's `ClientQuotasDelta.replay`) and the broker, group and client
    /// metrics config layers (`ConfigurationsDelta.replay`).
    fn replay_configs(&mut self, record: &MetadataRecord) -> Result<(), &'static str> {
        match record {
            MetadataRecord::ClientQuota { entity, key, value } => {
                // Kafka's `ClientQuotaControlManager.replay`: an entity without keys is gone.
                let quotas = Arc::make_mut(&mut self.client_quotas);
                let keys = quotas.entry(entity.clone()).or_default();
                match value {
                    Some(v) => keys.insert(key.clone(), *v),
                    None => keys.remove(key),
                };
                if keys.is_empty() {
                    quotas.remove(entity);
                }
            }
            MetadataRecord::AlterClientMetricsConfigs { name, configs } => {
                apply_layer_changes(&mut self.client_metrics_configs, name, configs);
            }
            MetadataRecord::AlterBrokerConfigs { resource, configs } => {
                apply_layer_changes(&mut self.broker_configs, resource, configs);
            }
            MetadataRecord::AlterGroupConfigs { group, configs } => {
                apply_layer_changes(&mut self.group_configs, group, configs);
            }
            _ => return Err("not a config record"),
        }
        Ok(())
    }

    /// ACLs (Kafka's `AclsDelta.replay`): ids are unique, a removal names an existing one.
    fn replay_acls(&mut self, record: &MetadataRecord) -> Result<(), &'static str> {
        match record {
            MetadataRecord::AccessControlEntry { id, acl } => {
                if self.acls.contains_key(id) {
                    return Err("ACL id exists");
                }
                Arc::make_mut(&mut self.acls).insert(*id, acl.clone());
            }
            MetadataRecord::RemoveAccessControlEntry { id } => {
                if !self.acls.contains_key(id) {
                    return Err("unknown ACL id");
                }
                Arc::make_mut(&mut self.acls).remove(id);
            }
            _ => return Err("not an ACL record"),
        }
        Ok(())
    }
}

/// A reassignment's replica lists are consistent: the assignment names each broker once and
/// is not empty; the adding and removing replicas are disjoint parts of it.
fn check_assignment(
    replicas: &[i32],
    adding: &[i32],
    removing: &[i32],
) -> Result<(), &'static str> {
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.is_empty() || sorted.len() != replicas.len() {
        return Err("the assignment is empty or names a replica twice");
    }
    let subset = |s: &[i32]| s.iter().all(|r| replicas.contains(r));
    if !subset(adding) || !subset(removing) || adding.iter().any(|r| removing.contains(r)) {
        return Err("adding and removing replicas are not disjoint parts of the assignment");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(index: i32, replicas: &[i32]) -> PartitionRegistration {
        PartitionRegistration::new(index, replicas.to_vec())
    }

    #[test]
    fn records_build_the_image() {
        let mut img = MetadataImage::default();
        let id = Uuid::new_v4();
        img.apply_batch(&MetadataBatch(vec![
            MetadataRecord::RegisterBroker {
                node_id: 1,
                host: "h".into(),
                port: 1,
                epoch: 7,
                incarnation: Uuid::nil(),
                endpoints: Vec::new(),
            },
            MetadataRecord::UnfenceBroker {
                node_id: 1,
                epoch: 7,
            },
            MetadataRecord::CreateTopic {
                name: "t".into(),
                id,
                partitions: vec![part(0, &[1, 2])],
                configs: BTreeMap::new(),
            },
            MetadataRecord::CreatePartitions {
                id,
                partitions: vec![part(1, &[2, 1])],
            },
            MetadataRecord::AlterConfigs {
                id,
                configs: [("retention.ms".to_string(), Some("5".to_string()))].into(),
            },
            MetadataRecord::PartitionChange {
                topic_id: id,
                partition: 0,
                leader: 2,
                leader_epoch: 1,
                isr: vec![2],
                partition_epoch: 1,
                elr: Vec::new(),
                last_known_elr: Vec::new(),
                replicas: None,
                adding_replicas: Vec::new(),
                removing_replicas: Vec::new(),
            },
            MetadataRecord::AllocateProducerIds {
                node_id: 1,
                next_block: 1000,
            },
        ]));
        assert!(img.is_live(1));
        let t = img.topic_by_name("t").unwrap();
        assert_eq!(t.partitions.len(), 2);
        assert_eq!(t.configs["retention.ms"], "5");
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 1));
        assert_eq!(p.isr, vec![2]);
        assert_eq!(img.next_producer_id_block, 1000);

        // A stale change is refused and leaves the image untouched.
        let before = img.clone();
        let stale = MetadataRecord::PartitionChange {
            topic_id: id,
            partition: 0,
            leader: 1,
            leader_epoch: 0,
            isr: vec![1],
            partition_epoch: 2,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
            replicas: None,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        };
        assert!(img.apply(&stale).is_err());
        assert_eq!(img, before);

        img.apply(&MetadataRecord::DeleteTopic { id }).unwrap();
        assert!(img.topic_by_name("t").is_none());
        assert!(img.topics.is_empty());
    }

    #[test]
    fn fencing_needs_the_current_epoch() {
        let mut img = MetadataImage::default();
        img.apply(&MetadataRecord::RegisterBroker {
            node_id: 3,
            host: "h".into(),
            port: 1,
            epoch: 2,
            incarnation: Uuid::nil(),
            endpoints: Vec::new(),
        })
        .unwrap();
        assert!(!img.is_live(3), "registered brokers start fenced");
        assert!(img
            .apply(&MetadataRecord::UnfenceBroker {
                node_id: 3,
                epoch: 1
            })
            .is_err());
        img.apply(&MetadataRecord::UnfenceBroker {
            node_id: 3,
            epoch: 2,
        })
        .unwrap();
        assert_eq!(img.live_brokers(), vec![3]);
    }

    /// A node may serve once the image holds its own process's registration, unfenced,
    /// whenever that was committed. Before, the rule was "registered at an offset past the one
    /// the node read when its controller started"; under load the registration could commit
    /// before that read, and the node then waited for a registration that had already
    /// happened (a single node failed to start after 30 s in a loaded test run).
    #[test]
    fn this_processs_unfenced_registration_makes_it_ready_whenever_it_was_committed() {
        let (previous, current) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let register = |img: &mut MetadataImage, epoch, incarnation| {
            img.apply(&MetadataRecord::RegisterBroker {
                node_id: 1,
                host: "h".into(),
                port: 1,
                epoch,
                incarnation,
                endpoints: Vec::new(),
            })
            .unwrap();
            img.apply(&MetadataRecord::UnfenceBroker { node_id: 1, epoch })
                .unwrap();
        };
        let mut img = MetadataImage::default();
        // What a restarted node replays from its own log: the previous run's registration,
        // unfenced. It is not this process's.
        register(&mut img, 1, previous);
        assert!(!img.registered_and_unfenced(1, current));
        img.apply(&MetadataRecord::RegisterBroker {
            node_id: 1,
            host: "h".into(),
            port: 1,
            epoch: 2,
            incarnation: current,
            endpoints: Vec::new(),
        })
        .unwrap();
        assert!(
            !img.registered_and_unfenced(1, current),
            "fenced until unfenced"
        );
        img.apply(&MetadataRecord::UnfenceBroker {
            node_id: 1,
            epoch: 2,
        })
        .unwrap();
        assert!(img.registered_and_unfenced(1, current));
        assert!(!img.registered_and_unfenced(2, current), "another node's");
    }
}
