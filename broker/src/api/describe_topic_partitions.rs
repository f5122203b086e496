//! DescribeTopicPartitions (KIP-966): partitions with their eligible leader replicas and last
//! known ELR, paged by a cursor. Java's Admin `describeTopics` (so `kafka-topics --describe`)
//! uses it instead of Metadata when the broker serves it. Kafka's
//! `DescribeTopicPartitionsRequestHandler` and `KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse`.

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::auth_helper::{authorize, authorized_operations};
use super::cluster::AUTHORIZED_OPERATIONS_OMITTED;
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::controller::MetadataImage;
use crate::security::acl::{AclOperation, ResourceType};

/// Kafka's `max.request.partition.size.limit` default: the most partitions one answer holds,
/// whatever the request's `response_partition_limit`.
pub const RESPONSE_PARTITIONS_MAX: i32 = 2000;

/// One partition as this API describes it.
struct PartitionView {
    index: i32,
    leader: i32,
    leader_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    elr: Vec<i32>,
    last_known_elr: Vec<i32>,
    offline: Vec<i32>,
}

/// One topic, its partitions in index order.
struct TopicView {
    name: String,
    id: Uuid,
    partitions: Vec<PartitionView>,
}

/// Answers DescribeTopicPartitions: the named topics (every topic when none is named) from the
/// cursor's topic and partition on, in name order, at most `response_partition_limit`
/// partitions (capped at [`RESPONSE_PARTITIONS_MAX`]), with a next cursor when more remain.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let all = req.topics.is_empty();
    let (cursor_topic, cursor_partition) = req
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.to_string(), c.partition_index))
        .unwrap_or_default();
    let mut names: Vec<String> = if all {
        topic_names(broker)
    } else {
        req.topics.iter().map(|t| t.name.to_string()).collect()
    };
    names.retain(|n| *n >= cursor_topic);
    names.sort_unstable();
    names.dedup();
    // Kafka refuses a cursor outside the named topics, or at a negative partition.
    let bad_cursor =
        req.cursor.is_some() && (cursor_partition < 0 || (!all && !names.contains(&cursor_topic)));
    if bad_cursor {
        return invalid_request(&req);
    }
    let limit = req
        .response_partition_limit
        .clamp(1, RESPONSE_PARTITIONS_MAX);
    let mut remaining = usize::try_from(limit).unwrap_or(1);
    let mut resp = DescribeTopicPartitionsResponse::default();
    // Kafka's `DescribeTopicPartitionsRequestHandler`: topics without DESCRIBE are left out
    // of an all-topics answer, and answered TOPIC_AUTHORIZATION_FAILED (after the others)
    // when named.
    let denied = retain_described(broker, ctx, &mut names, all);
    for name in names {
        if remaining == 0 {
            // Every partition of the previous topic fitted: go on at this topic's start.
            resp.next_cursor = Some(cursor(&name, 0));
            break;
        }
        let start = if name == cursor_topic {
            cursor_partition
        } else {
            0
        };
        let Some(view) = topic_view(broker, &name) else {
            if !all {
                resp.topics.push(unknown_topic(&name));
            }
            continue;
        };
        let from = usize::try_from(start)
            .unwrap_or(0)
            .min(view.partitions.len());
        let upto = view.partitions.len().min(from + remaining);
        let next = (upto < view.partitions.len()).then_some(upto);
        remaining -= upto - from;
        let ops = authorized_operations(broker, ctx, ResourceType::Topic, &name);
        resp.topics.push(topic_response(&view, ops, from, upto));
        if let Some(next) = next {
            resp.next_cursor = Some(cursor(&name, i32::try_from(next).unwrap_or(i32::MAX)));
            break;
        }
    }
    resp.topics.extend(denied);
    resp
}

/// Keeps the names the session may describe; the answers for the others when named.
fn retain_described(
    broker: &Broker,
    ctx: &RequestContext,
    names: &mut Vec<String>,
    all: bool,
) -> Vec<DescribeTopicPartitionsResponseTopic> {
    let mut denied = Vec::new();
    names.retain(|n| {
        let ok = authorize(broker, ctx, AclOperation::Describe, ResourceType::Topic, n);
        if !ok && !all {
            denied.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_name(Some(sb(n.clone()).into()))
                    .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED),
            );
        }
        ok
    });
    denied
}

/// Every topic's name, from the metadata this node serves.
fn topic_names(broker: &Broker) -> Vec<String> {
    broker.replicas.image().topic_ids.keys().cloned().collect()
}

/// One topic as the image this node has applied describes it, as Metadata answers (Kafka's
/// `DescribeTopicPartitionsRequestHandler` reads the broker's metadata cache, which follows
/// `ReplicaManager.applyDelta`; see `api/metadata.rs`).
fn topic_view(broker: &Broker, name: &str) -> Option<TopicView> {
    image_topic_view(&broker.replicas.image(), name)
}

fn image_topic_view(image: &MetadataImage, name: &str) -> Option<TopicView> {
    let t = image.topic_by_name(name)?;
    let partitions = t
        .partitions
        .iter()
        .map(|p| PartitionView {
            index: p.index,
            leader: if image.is_live(p.leader) {
                p.leader
            } else {
                -1
            },
            leader_epoch: p.leader_epoch,
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            elr: p.elr.clone(),
            last_known_elr: p.last_known_elr.clone(),
            offline: p
                .replicas
                .iter()
                .copied()
                .filter(|&r| !image.is_live(r))
                .collect(),
        })
        .collect();
    Some(TopicView {
        name: t.name.clone(),
        id: t.id,
        partitions,
    })
}

fn brokers(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().map(|&r| r.into()).collect()
}

fn topic_response(
    view: &TopicView,
    authorized_ops: i32,
    from: usize,
    upto: usize,
) -> DescribeTopicPartitionsResponseTopic {
    let partitions = view.partitions[from..upto]
        .iter()
        .map(|p| {
            DescribeTopicPartitionsResponsePartition::default()
                .with_partition_index(p.index)
                .with_leader_id(p.leader.into())
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(brokers(&p.replicas))
                .with_isr_nodes(brokers(&p.isr))
                .with_eligible_leader_replicas(Some(brokers(&p.elr)))
                .with_last_known_elr(Some(brokers(&p.last_known_elr)))
                .with_offline_replicas(brokers(&p.offline))
        })
        .collect();
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(sb(view.name.clone()).into()))
        .with_topic_id(view.id)
        .with_is_internal(crate::metadata::is_internal_topic(&view.name))
        .with_partitions(partitions)
        // DescribeTopicPartitions has no flag: Kafka always fills in the operations, all of
        // them without an authorizer (`DescribeTopicPartitionsRequestHandler`).
        .with_topic_authorized_operations(authorized_ops)
}

fn unknown_topic(name: &str) -> DescribeTopicPartitionsResponseTopic {
    let error = if crate::metadata::validate_topic_name(name).is_err() {
        ResponseError::InvalidTopicException
    } else {
        ResponseError::UnknownTopicOrPartition
    };
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(error.code())
        .with_name(Some(sb(name.to_string()).into()))
        .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(sb(topic.to_string()).into())
        .with_partition_index(partition)
}

/// Kafka's error answer to this request (`DescribeTopicPartitionsRequest.getErrorResponse`):
/// the error on every named topic.
fn invalid_request(req: &DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_name(Some(t.name.clone()))
                .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
        })
        .collect();
    DescribeTopicPartitionsResponse::default().with_topics(topics)
}
