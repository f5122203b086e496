//! Metadata: brokers, topics, partitions, leaders and leader epochs. Also where topics are
//! auto-created, as in Kafka.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::cluster::AUTHORIZED_OPERATIONS_OMITTED;
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::cluster::replica_manager::ReplicaError;
use crate::metadata::TopicMeta;

const NONE: i16 = 0;
const UNKNOWN_TOPIC: i16 = ResponseError::UnknownTopicOrPartition.code();

/// Answers Metadata for the listed topics (all topics when the list is null).
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
    with_authorized_operations(resp, topic_ops, cluster_ops)
}

/// Fills in authorized operations as Kafka does without an authorizer
/// (`KafkaApis.handleTopicMetadataRequest`): every supported operation on each topic found
/// and on the cluster, when the client asked (Metadata v8+).
fn with_authorized_operations(
    mut resp: MetadataResponse,
    topic_ops: bool,
    cluster_ops: bool,
) -> MetadataResponse {
    use super::cluster::{
        authorized_operations, CLUSTER_AUTHORIZED_OPERATIONS, TOPIC_AUTHORIZED_OPERATIONS,
    };
    for t in resp.topics.iter_mut().filter(|t| t.error_code == 0) {
        t.topic_authorized_operations =
            authorized_operations(topic_ops, TOPIC_AUTHORIZED_OPERATIONS);
    }
    resp.cluster_authorized_operations =
        authorized_operations(cluster_ops, CLUSTER_AUTHORIZED_OPERATIONS);
    resp
}

async fn metadata(broker: &Broker, ctx: &RequestContext, req: MetadataRequest) -> MetadataResponse {
    let rm = &broker.replicas;
    if let Some(controller) = rm.controller() {
        return cluster_metadata(broker, ctx, req, controller).await;
    }
    // Before v4 there is no flag and auto-creation is always allowed.
    let allow_auto_create =
        (ctx.api_version < 4 || req.allow_auto_topic_creation) && broker.config.auto_create_topics;
    let topics: Vec<MetadataResponseTopic> = match req.topics {
        None => rm
            .topics()
            .iter()
            .map(|t| topic_response(broker, t))
            .collect(),
        Some(list) => list
            .into_iter()
            // Java names topics by id with an empty (not null) name: a non-zero id wins.
            .map(
                |rt| match rt.name.filter(|n| rt.topic_id.is_nil() || !n.is_empty()) {
                    Some(name) => {
                        let name = name.to_string();
                        match rm.topic(&name) {
                            Some(t) => topic_response(broker, &t),
                            None if allow_auto_create => {
                                match rm.create_topic(&name, -1, -1, Default::default(), false) {
                                    Ok(t) => topic_response(broker, &t),
                                    // A concurrent request created it first.
                                    Err(ReplicaError::TopicExists(_)) => match rm.topic(&name) {
                                        Some(t) => topic_response(broker, &t),
                                        None => error_topic(Some(name), Uuid::nil(), UNKNOWN_TOPIC),
                                    },
                                    Err(e) => error_topic(Some(name), Uuid::nil(), e.error_code()),
                                }
                            }
                            None => {
                                let code = if crate::metadata::validate_topic_name(&name).is_err() {
                                    ResponseError::InvalidTopicException.code()
                                } else {
                                    UNKNOWN_TOPIC
                                };
                                error_topic(Some(name), Uuid::nil(), code)
                            }
                        }
                    }
                    None => match rm.topic_by_id(rt.topic_id) {
                        Some(t) => topic_response(broker, &t),
                        None => {
                            error_topic(None, rt.topic_id, ResponseError::UnknownTopicId.code())
                        }
                    },
                },
            )
            .collect(),
    };
    let node = MetadataResponseBroker::default()
        .with_node_id(broker.node_id().into())
        .with_host(sb(broker.advertised_host.clone()))
        .with_port(broker.advertised_port);
    MetadataResponse::default()
        .with_brokers(vec![node])
        .with_cluster_id(Some(sb(rm.cluster_id())))
        // Must be a live broker in this response, or Java Admin waits forever (KAFKA-FACTS §5).
        .with_controller_id(broker.node_id().into())
        .with_topics(topics)
        .with_cluster_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

fn error_topic(name: Option<String>, id: Uuid, code: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(code)
        .with_name(name.map(|n| sb(n).into()))
        .with_topic_id(id)
        .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

fn topic_response(broker: &Broker, t: &TopicMeta) -> MetadataResponseTopic {
    let partitions = (0..t.partitions)
        .map(|p| match broker.replicas.partition(&t.name, p) {
            Some(part) => {
                let isr: Vec<_> = part.isr().into_iter().map(Into::into).collect();
                MetadataResponsePartition::default()
                    .with_partition_index(p)
                    .with_leader_id(part.leader_id().into())
                    .with_leader_epoch(part.leader_epoch())
                    .with_replica_nodes(isr.clone())
                    .with_isr_nodes(isr)
            }
            None => MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_error_code(ResponseError::LeaderNotAvailable.code())
                .with_leader_id((-1).into()),
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(sb(t.name.clone()).into()))
        .with_topic_id(t.id)
        .with_is_internal(t.name.starts_with("__"))
        .with_partitions(partitions)
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

/// Metadata in cluster mode, from the committed metadata image: live brokers, leaders,
/// leader epochs, replicas and ISRs as the controller decided them.
async fn cluster_metadata(
    broker: &Broker,
    ctx: &RequestContext,
    req: MetadataRequest,
    controller: &crate::controller::Controller,
) -> MetadataResponse {
    let allow_auto_create =
        (ctx.api_version < 4 || req.allow_auto_topic_creation) && broker.config.auto_create_topics;
    let mut image = controller.image().borrow().clone();
    let mut wanted: Vec<(Option<String>, Uuid)> = match &req.topics {
        None => image
            .topics
            .values()
            .map(|t| (Some(t.name.clone()), t.id))
            .collect(),
        Some(list) => list
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
    };
    // Auto-create what is missing, then answer from the image that includes it.
    let mut created = false;
    for (name, _) in &wanted {
        if let Some(name) = name {
            if allow_auto_create
                && image.topic_by_name(name).is_none()
                && crate::metadata::validate_topic_name(name).is_ok()
            {
                let rf = broker.config.default_replication_factor;
                match controller
                    .create_topic(name, broker.config.num_partitions, rf, Default::default())
                    .await
                {
                    Ok(_) => created = true,
                    Err(e) => tracing::info!(topic = %name, error = %e, "auto-creation failed"),
                }
            }
        }
    }
    if created {
        image = controller.image().borrow().clone();
    }
    let live: Vec<i32> = image.live_brokers();
    let topics = wanted
        .drain(..)
        .map(|(name, id)| {
            let topic = match &name {
                Some(n) => image.topic_by_name(n),
                None => image.topics.get(&id),
            };
            let Some(t) = topic else {
                let code = match &name {
                    Some(n) if crate::metadata::validate_topic_name(n).is_err() => {
                        ResponseError::InvalidTopicException.code()
                    }
                    Some(_) => UNKNOWN_TOPIC,
                    None => ResponseError::UnknownTopicId.code(),
                };
                return error_topic(name, id, code);
            };
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
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
                })
                .collect();
            MetadataResponseTopic::default()
                .with_name(Some(sb(t.name.clone()).into()))
                .with_topic_id(t.id)
                .with_is_internal(t.name.starts_with("__"))
                .with_partitions(partitions)
                .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
        })
        .collect();
    let brokers = image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .map(|b| {
            MetadataResponseBroker::default()
                .with_node_id(b.node_id.into())
                .with_host(sb(b.host.clone()))
                .with_port(b.port as i32)
        })
        .collect();
    // controller_id must be a live broker in this answer (KAFKA-FACTS §5).
    let controller_id = controller
        .active_controller_id()
        .filter(|id| live.contains(id))
        .or_else(|| live.first().copied())
        .unwrap_or(broker.node_id());
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(sb(broker.replicas.cluster_id())))
        .with_controller_id(controller_id.into())
        .with_topics(topics)
        .with_cluster_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}
