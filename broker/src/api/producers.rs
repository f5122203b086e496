//! DescribeProducers (API 61): the producers with state on each asked partition, as its
//! leader knows them (Kafka's `ReplicaManager.activeProducerState`): id, epoch, last
//! sequence, last timestamp, the coordinator epoch of its last marker and the first offset of
//! its open transaction (-1 if none). `kafka-transactions describe-producers` and
//! `find-hanging` read it.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::broker::Broker;

/// Handles one DescribeProducers request.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            // READ on the topic (Kafka's `handleDescribeProducersRequest`).
            let allowed = super::auth_helper::authorize(
                broker,
                ctx,
                crate::security::acl::AclOperation::Read,
                crate::security::acl::ResourceType::Topic,
                &t.name,
            );
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| match allowed {
                    true => describe_partition(broker, &t.name, index),
                    false => PartitionResponse::default()
                        .with_partition_index(index)
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

fn describe_partition(broker: &Broker, topic: &str, index: i32) -> PartitionResponse {
    let base = PartitionResponse::default().with_partition_index(index);
    let part = match broker.replicas.partition_or_error(topic, index) {
        Ok(part) => part,
        Err(e) => return base.with_error_code(e.code()),
    };
    if !part.is_leader() {
        return base.with_error_code(ResponseError::NotLeaderOrFollower.code());
    }
    let mut producers = part.active_producers();
    producers.sort_by_key(|p| p.producer_id);
    let active = producers
        .iter()
        .map(|p| {
            ProducerState::default()
                .with_producer_id(p.producer_id.into())
                .with_producer_epoch(p.producer_epoch as i32)
                .with_last_sequence(p.last_seq())
                .with_last_timestamp(p.last_timestamp)
                .with_coordinator_epoch(p.coordinator_epoch)
                .with_current_txn_start_offset(p.current_txn_first_offset.unwrap_or(-1))
        })
        .collect();
    base.with_active_producers(active)
}
