//! Metadata: brokers, topics, partitions, leaders and leader epochs. Also where topics are
//! auto-created, as in Kafka.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
use uuid::Uuid;

use super::cluster::AUTHORIZED_OPERATIONS_OMITTED;
use super::{sb, RequestContext};
use crate::cluster::replica_manager::ReplicaError;
use crate::metadata::TopicMeta;
use crate::server::Broker;

/// Answers Metadata for the listed topics (all topics when the list is null).
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: MetadataRequest,
) -> MetadataResponse {
    let rm = &broker.replicas;
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
            // Java names topics by id with an empty name (not null): look those up by id.
            .map(|mut rt| {
                if rt.name.as_ref().is_some_and(|n| n.is_empty()) && !rt.topic_id.is_nil() {
                    rt.name = None;
                }
                rt
            })
            .map(|rt| match rt.name {
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
                                    None => error_topic(Some(name), Uuid::nil(), 3),
                                },
                                Err(e) => error_topic(Some(name), Uuid::nil(), e.error_code()),
                            }
                        }
                        None => {
                            let code = if crate::metadata::validate_topic_name(&name).is_err() {
                                17
                            } else {
                                3
                            };
                            error_topic(Some(name), Uuid::nil(), code)
                        }
                    }
                }
                None => match rm.topic_by_id(rt.topic_id) {
                    Some(t) => topic_response(broker, &t),
                    None => error_topic(None, rt.topic_id, 100),
                },
            })
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
                .with_error_code(5)
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
