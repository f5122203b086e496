//! Metadata: brokers, topics, partitions, leaders and leader epochs. Also where topics are
//! auto-created, as in Kafka: the creation is started and the answer does not wait for it
//! ([`crate::auto_topic_creation`]).

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::auth_helper::{authorize, authorize_cluster, authorized_operations};
use super::cluster::AUTHORIZED_OPERATIONS_OMITTED;
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::controller::request::MutationQuotaKey;
use crate::controller::{MetadataImage, PartitionRegistration};
use crate::security::acl::{AclOperation, ResourceType, CLUSTER_NAME};

const NONE: i16 = 0;
const UNKNOWN_TOPIC: i16 = ResponseError::UnknownTopicOrPartition.code();

/// Answers Metadata for the listed topics (all topics when the list is null, or empty at v0).
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: MetadataRequest,
) -> MetadataResponse {
    let (topic_ops, cluster_ops) = (
        req.include_topic_authorized_operations,
        req.include_cluster_authorized_operations,
    );
    let resp = metadata(broker, ctx, req).await;
    with_authorized_operations(broker, ctx, resp, topic_ops, cluster_ops)
}

/// Fills in authorized operations when the client asked (Metadata v8+), as
/// `KafkaApis.handleTopicMetadataRequest` does: each topic found gets the operations this
/// session may perform on it; the cluster gets its operations only with DESCRIBE on it
/// (else 0). Without an authorizer, every supported operation.
fn with_authorized_operations(
    broker: &Broker,
    ctx: &RequestContext,
    mut resp: MetadataResponse,
    topic_ops: bool,
    cluster_ops: bool,
) -> MetadataResponse {
    if topic_ops {
        for t in resp.topics.iter_mut().filter(|t| t.error_code == 0) {
            let name = t.name.as_ref().map_or("", |n| n.as_str());
            t.topic_authorized_operations =
                authorized_operations(broker, ctx, ResourceType::Topic, name);
        }
    }
    if cluster_ops {
        resp.cluster_authorized_operations =
            if authorize_cluster(broker, ctx, AclOperation::Describe) {
                authorized_operations(broker, ctx, ResourceType::Cluster, CLUSTER_NAME)
            } else {
                0
            };
    }
    resp
}

/// How one wanted topic fares with the authorizer (`handleTopicMetadataRequest`).
enum Access {
    Allowed,
    /// Not shown at all (an all-topics request leaves out what it may not describe).
    Hidden,
    /// Answered TOPIC_AUTHORIZATION_FAILED: by name with a zero id, by id with its id only.
    Denied(MetadataResponseTopic),
}

/// DESCRIBE on the topic, and for a missing topic that would be auto-created, CREATE on the
/// cluster or on the topic.
fn access(
    broker: &Broker,
    ctx: &RequestContext,
    name: &str,
    by_id: Option<Uuid>,
    all_topics: bool,
    creating: bool,
) -> Access {
    let denied = ResponseError::TopicAuthorizationFailed.code();
    if !authorize(
        broker,
        ctx,
        AclOperation::Describe,
        ResourceType::Topic,
        name,
    ) {
        return match (all_topics, by_id) {
            (true, _) => Access::Hidden,
            (false, Some(id)) => Access::Denied(error_topic(None, id, denied)),
            (false, None) => {
                Access::Denied(error_topic(Some(name.to_string()), Uuid::nil(), denied))
            }
        };
    }
    if creating
        && !authorize_cluster(broker, ctx, AclOperation::Create)
        && !authorize(broker, ctx, AclOperation::Create, ResourceType::Topic, name)
    {
        return Access::Denied(error_topic(Some(name.to_string()), Uuid::nil(), denied));
    }
    Access::Allowed
}

fn error_topic(name: Option<String>, id: Uuid, code: i16) -> MetadataResponseTopic {
    let internal = name
        .as_deref()
        .is_some_and(crate::metadata::is_internal_topic);
    MetadataResponseTopic::default()
        .with_error_code(code)
        .with_is_internal(internal)
        .with_name(name.map(|n| sb(n).into()))
        .with_topic_id(id)
        .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

/// A Metadata answer with `code` on every named topic, for fault injection.
pub fn error_response(req: &MetadataRequest, code: i16) -> MetadataResponse {
    let topics = req
        .topics
        .iter()
        .flatten()
        .map(|t| error_topic(t.name.as_ref().map(|n| n.to_string()), t.topic_id, code))
        .collect();
    MetadataResponse::default()
        .with_topics(topics)
        .with_controller_id((-1).into())
}

/// Metadata from the committed metadata image: live brokers, leaders, leader epochs,
/// replicas and ISRs as the controller decided them.
async fn metadata(broker: &Broker, ctx: &RequestContext, req: MetadataRequest) -> MetadataResponse {
    let controller = broker.replicas.controller();
    let allow_auto_create =
        (ctx.api_version < 4 || req.allow_auto_topic_creation) && broker.config.auto_create_topics;
    // The image this node has applied, not the quorum's newest: a leader named here has taken
    // its role, so a produce that follows is not refused NOT_LEADER_OR_FOLLOWER while the
    // node still opens the partition's log (Kafka's broker answers from its metadata cache,
    // which a publisher fills in step with `ReplicaManager.applyDelta`).
    let image = broker.replicas.image();
    // Kafka's `MetadataRequest.isAllTopics`: a null list, or at v0 (which has no null) an
    // empty one.
    let all_topics = match &req.topics {
        None => true,
        Some(list) => list.is_empty() && ctx.api_version == 0,
    };
    let lookup = TopicLookup {
        broker,
        ctx,
        image: &image,
        live: image.live_brokers(),
        all_topics,
        allow_auto_create,
    };
    let topics = wanted_topics(&req, &image, all_topics)
        .into_iter()
        .filter_map(|(name, id)| lookup.topic_metadata(name, id))
        .collect();
    // controller_id must be a live broker in this answer (KAFKA-FACTS §5).
    let controller_id =
        image.controller_id_for_clients(controller.active_controller_id(), broker.node_id());
    MetadataResponse::default()
        .with_brokers(alive_brokers(&image, &ctx.session.listener_name))
        .with_cluster_id(Some(sb(broker.replicas.cluster_id())))
        .with_controller_id(controller_id.into())
        .with_topics(topics)
        .with_cluster_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

/// The topics asked, by name or (v10+) by id, or every topic of the image.
fn wanted_topics(
    req: &MetadataRequest,
    image: &MetadataImage,
    all_topics: bool,
) -> Vec<(Option<String>, Uuid)> {
    match &req.topics {
        Some(list) if !all_topics => list
            .iter()
            .map(|t| {
                let name = t
                    .name
                    .as_ref()
                    .map(|n| n.to_string())
                    .filter(|n| t.topic_id.is_nil() || !n.is_empty());
                (name, t.topic_id)
            })
            .collect(),
        _ => image
            .topics
            .values()
            .map(|t| (Some(t.name.clone()), t.id))
            .collect(),
    }
}

/// What one Metadata request looks topics up in (Kafka's `KafkaApis.getTopicMetadata` over
/// its `MetadataCache`).
struct TopicLookup<'a> {
    broker: &'a Broker,
    ctx: &'a RequestContext,
    image: &'a MetadataImage,
    /// Registered, unfenced brokers: a leader or replica elsewhere is offline.
    live: Vec<i32>,
    all_topics: bool,
    allow_auto_create: bool,
}

impl TopicLookup<'_> {
    /// One asked topic's entry; `None` when the authorizer hides it.
    fn topic_metadata(&self, name: Option<String>, id: Uuid) -> Option<MetadataResponseTopic> {
        let topic = match &name {
            Some(n) => self.image.topic_by_name(n),
            None => self.image.topics.get(&id),
        };
        if self.broker.authorizer().is_some() {
            let (shown, by_id) = match (&name, topic) {
                (Some(n), _) => (n.as_str(), None),
                (None, Some(t)) => (t.name.as_str(), Some(id)),
                (None, None) => ("", None),
            };
            let creating = topic.is_none() && name.is_some() && self.allow_auto_create;
            if !shown.is_empty() {
                match access(
                    self.broker,
                    self.ctx,
                    shown,
                    by_id,
                    self.all_topics,
                    creating,
                ) {
                    Access::Allowed => {}
                    Access::Hidden => return None,
                    Access::Denied(t) => return Some(t),
                }
            }
        }
        let Some(t) = topic else {
            return Some(self.missing_topic(name, id));
        };
        let partitions = t
            .partitions
            .iter()
            .map(|p| partition_metadata(p, &self.live))
            .collect();
        Some(
            MetadataResponseTopic::default()
                .with_name(Some(sb(t.name.clone()).into()))
                .with_topic_id(t.id)
                .with_is_internal(crate::metadata::is_internal_topic(&t.name))
                .with_partitions(partitions)
                .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED),
        )
    }

    /// Whose `controller_mutation_rate` an auto-creation is charged to: this request's
    /// principal and client id, strictly (Kafka's auto-creation is a CreateTopics at the
    /// controller's newest version in an envelope with them: `KRaftTopicCreator`).
    fn quota_key(&self) -> MutationQuotaKey {
        MutationQuotaKey {
            user: self.ctx.session.principal.name.clone(),
            client_id: self.ctx.client_id.as_deref().unwrap_or("").to_string(),
            strict: true,
        }
    }

    /// Kafka's `getTopicMetadata`: a missing topic asked by name is auto-created when
    /// allowed, else only its name is checked.
    fn missing_topic(&self, name: Option<String>, id: Uuid) -> MetadataResponseTopic {
        let code = match &name {
            Some(n) if self.allow_auto_create => self
                .broker
                .auto_topics
                .create_topic(n, self.quota_key())
                .code(),
            Some(n) if crate::metadata::validate_topic_name(n).is_err() => {
                ResponseError::InvalidTopicException.code()
            }
            Some(_) => UNKNOWN_TOPIC,
            None => ResponseError::UnknownTopicId.code(),
        };
        error_topic(name, id, code)
    }
}

/// One partition's entry: its leader when that broker is live (else LEADER_NOT_AVAILABLE),
/// its replicas, ISR and offline replicas (Kafka's `KRaftMetadataCache.getPartitionMetadata`).
fn partition_metadata(p: &PartitionRegistration, live: &[i32]) -> MetadataResponsePartition {
    let offline: Vec<_> = p
        .replicas
        .iter()
        .filter(|r| !live.contains(r))
        .map(|r| (*r).into())
        .collect();
    let leader_known = p.leader >= 0 && live.contains(&p.leader);
    MetadataResponsePartition::default()
        .with_partition_index(p.index)
        .with_error_code(if leader_known {
            NONE
        } else {
            ResponseError::LeaderNotAvailable.code()
        })
        .with_leader_id(if leader_known { p.leader } else { -1 }.into())
        .with_leader_epoch(p.leader_epoch)
        .with_replica_nodes(p.replicas.iter().map(|r| (*r).into()).collect())
        .with_isr_nodes(p.isr.iter().map(|r| (*r).into()).collect())
        .with_offline_replicas(offline)
}

/// The endpoints of the listener the request came in on (Kafka's
/// `MetadataCache.getAliveBrokerNodes(listenerName)`).
fn alive_brokers(image: &MetadataImage, listener: &str) -> Vec<MetadataResponseBroker> {
    image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .filter_map(|b| {
            let (host, port) = b.endpoint(listener)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(b.node_id.into())
                    .with_host(sb(host.to_string()))
                    .with_port(port as i32),
            )
        })
        .collect()
}
