//! Topic auto-creation for Metadata, as Kafka's `DefaultAutoTopicCreationManager` does it in
//! KRaft mode: the creation is sent to the controller and the Metadata request is answered
//! at once, without waiting for it. A missing topic with a valid name is answered
//! UNKNOWN_TOPIC_OR_PARTITION with no partitions, whether this request started its creation
//! or one is already in flight; an invalid name is INVALID_TOPIC_EXCEPTION. Clients retry
//! Metadata until the topic appears with its partitions.
//!
//! A topic other than the internal ones is charged to the asking client's strict
//! `controller_mutation_rate`, as in Kafka: its `AutoTopicCreationManager` sends the creation
//! to the controller (`KRaftTopicCreator.createTopicWithPrincipal`) in an envelope with the
//! Metadata request's principal and client id, as CreateTopics at the newest version the
//! controller takes, and `ControllerApis.handleCreateTopics` charges it with
//! `newQuotaFor(request, strictSinceVersion = 6)`: strict. Topics refused over the quota are
//! not created; the client's retry asks again.
//!
//! The internal topics are created as their coordinators create them (Kafka's
//! `creatableTopic`): `__consumer_offsets` with the offsets topic's partitions, replication
//! factor and configs, `__transaction_state` with the transaction log's; any other topic with
//! `num.partitions` and `default.replication.factor`.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::Mutex;

use crate::cluster::replica_manager::ReplicaManager;
use crate::group::store::OFFSETS_TOPIC;
use crate::group::GroupCoordinator;
use crate::metadata::validate_topic_name;
use crate::txn::log::TRANSACTION_STATE_TOPIC;
use crate::txn::TransactionCoordinator;
use brook_controller::error::ControllerError;
use brook_controller::request::ControllerRequest;
use brook_controller::request::MutationQuotaKey;

/// Most auto-creations in flight at once. A Metadata request naming more missing topics
/// than this starts no creation for the rest: they are answered UNKNOWN_TOPIC_OR_PARTITION,
/// and the client's retry starts them once earlier ones are done.
pub const AUTO_CREATIONS_IN_FLIGHT_MAX: usize = 1024;

/// Starts auto-creations and remembers which are in flight (Kafka's `inflightTopics`).
pub struct AutoTopicCreationManager {
    replicas: Arc<ReplicaManager>,
    groups: Arc<GroupCoordinator>,
    txn: Arc<TransactionCoordinator>,
    num_partitions: i32,
    replication_factor: i16,
    in_flight: Arc<Mutex<HashSet<String>>>,
}

impl AutoTopicCreationManager {
    pub fn new(
        replicas: Arc<ReplicaManager>,
        groups: Arc<GroupCoordinator>,
        txn: Arc<TransactionCoordinator>,
        num_partitions: i32,
        replication_factor: i16,
    ) -> AutoTopicCreationManager {
        AutoTopicCreationManager {
            replicas,
            groups,
            txn,
            num_partitions,
            replication_factor,
            in_flight: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// Kafka's `createTopics` for one missing topic: the error its Metadata answer carries.
    /// A valid name not already in flight has its creation started in the background,
    /// charged to `quota` (the asking client's bucket).
    pub fn create_topic(&self, name: &str, quota: MutationQuotaKey) -> ResponseError {
        if validate_topic_name(name).is_err() {
            return ResponseError::InvalidTopicException;
        }
        {
            let mut in_flight = self.in_flight.lock();
            if in_flight.len() >= AUTO_CREATIONS_IN_FLIGHT_MAX || !in_flight.insert(name.into()) {
                return ResponseError::UnknownTopicOrPartition;
            }
        }
        let creation = Creation {
            name: name.to_string(),
            replicas: self.replicas.clone(),
            groups: self.groups.clone(),
            txn: self.txn.clone(),
            num_partitions: self.num_partitions,
            replication_factor: self.replication_factor,
            quota,
        };
        let in_flight = self.in_flight.clone();
        tokio::spawn(async move {
            creation.run().await;
            // Cleared once the controller answered, as Kafka's completion handler does.
            in_flight.lock().remove(&creation.name);
        });
        ResponseError::UnknownTopicOrPartition
    }
}

impl AutoTopicCreationManager {
    /// Kafka's `createStreamsInternalTopics`: starts the creation of a streams group's
    /// missing internal topics with the partitions, replication factor (-1: the default)
    /// and configs its topology asks for. Topics already in flight are skipped; the
    /// group's next heartbeat sees them once created, and asks again if one failed.
    pub fn create_streams_internal_topics(
        &self,
        topics: Vec<crate::group::streams_topology::TopicToCreate>,
    ) {
        for t in topics {
            if validate_topic_name(&t.name).is_err() {
                continue;
            }
            {
                let mut in_flight = self.in_flight.lock();
                if in_flight.len() >= AUTO_CREATIONS_IN_FLIGHT_MAX
                    || !in_flight.insert(t.name.clone())
                {
                    continue;
                }
            }
            let replicas = self.replicas.clone();
            let in_flight = self.in_flight.clone();
            let rf = if t.replication_factor > 0 {
                t.replication_factor
            } else {
                self.replication_factor
            };
            tokio::spawn(async move {
                let controller = replicas.controller();
                let created = controller
                    .create_topic(&t.name, t.partitions, rf, t.configs.clone())
                    .await;
                match created {
                    Ok(_) | Err(ControllerError::TopicAlreadyExists(_)) => {
                        tracing::info!(topic = %t.name, "created streams internal topic")
                    }
                    Err(error) => {
                        tracing::info!(topic = %t.name, %error, "streams internal topic creation failed")
                    }
                }
                in_flight.lock().remove(&t.name);
            });
        }
    }
}

/// One auto-creation, owned by its background task.
struct Creation {
    name: String,
    replicas: Arc<ReplicaManager>,
    groups: Arc<GroupCoordinator>,
    txn: Arc<TransactionCoordinator>,
    num_partitions: i32,
    replication_factor: i16,
    /// The asking client's `controller_mutation_rate` bucket.
    quota: MutationQuotaKey,
}

impl Creation {
    /// Sends the creation to the controller; its failure is only logged, since the client
    /// that asked was answered already and retries.
    async fn run(&self) {
        let name = self.name.as_str();
        let created = match name {
            OFFSETS_TOPIC => self
                .groups
                .ensure_offsets_topic()
                .await
                .map_err(|e| e.to_string()),
            TRANSACTION_STATE_TOPIC => self.txn.ensure_topic().await.map_err(|e| e.to_string()),
            _ => self.create_with_defaults().await,
        };
        match created {
            Ok(()) => tracing::info!(topic = %name, "auto-created"),
            Err(error) => tracing::info!(topic = %name, %error, "auto-creation failed"),
        }
    }

    /// A topic other than the internal ones: `num.partitions` and
    /// `default.replication.factor`, no config overrides, charged to the client's bucket.
    async fn create_with_defaults(&self) -> Result<(), String> {
        let controller = self.replicas.controller();
        let req = ControllerRequest::CreateTopic {
            name: self.name.clone(),
            partitions: self.num_partitions,
            replication_factor: self.replication_factor,
            configs: Default::default(),
            assignments: Vec::new(),
            validate_only: false,
        };
        match controller.submit_mutation(req, self.quota.clone()).await {
            Ok((Some(_), _)) => Ok(()),
            // Refused over the client's strict quota, as Kafka's controller refuses it
            // THROTTLING_QUOTA_EXCEEDED; the client asked already and asks again.
            Ok((None, _)) => Err("the client's controller_mutation_rate is exceeded".into()),
            // Created meanwhile (by an earlier creation this node's image had not shown yet,
            // or by another node's): nothing to do.
            Err(ControllerError::TopicAlreadyExists(_)) => {
                tracing::debug!(topic = %self.name, "auto-creation found the topic created");
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }
}
