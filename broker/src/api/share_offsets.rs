//! KIP-932's share group offsets admin APIs: DescribeShareGroupOffsets (90),
//! AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), and the share state a
//! DeleteGroups removes with its share group.
//!
//! As Kafka's `KafkaApis` handlers and `GroupCoordinatorService.describeShareGroupOffsets`,
//! `alterShareGroupOffsets`, `deleteShareGroupOffsets` and `deleteGroups`: the group
//! coordinator checks the group ([`crate::group::share_offsets`]), then the persister
//! ([`crate::share::persister`]) reads (ReadShareGroupStateSummary), sets
//! (InitializeShareGroupState) or removes (DeleteShareGroupState) each share-partition's state
//! at its share coordinator. Authorization: DESCRIBE on the group and on each topic to
//! describe, READ on the group and topics to alter, DELETE on the group and READ on the
//! topics to delete.
//!
//! A partition leader reads the new state at its next fetch: the group is empty, so no
//! share session of it is left, and its share-partitions were dropped when the last one
//! closed ([`crate::share::SharePartitionManager::persist_group`]).

use kafka_protocol::messages::{
    alter_share_group_offsets_request, alter_share_group_offsets_response as alter_resp,
    delete_share_group_offsets_request, delete_share_group_offsets_response as delete_resp,
    describe_share_group_offsets_response as describe_resp, AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::auth_helper::authorize;
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::group::share_offsets::StateTopics;
use crate::group::GroupError;
use crate::security::acl::{AclOperation, ResourceType};
use crate::share::coordinator::UNINITIALIZED_START_OFFSET;
use crate::share::SharePartitionKey;

/// The leader epoch Kafka answers for a share-partition whose summary could not be read
/// (`PartitionFactory.DEFAULT_LEADER_EPOCH`).
const DEFAULT_LEADER_EPOCH: i32 = 0;
/// DescribeShareGroupOffsets v1's lag when it cannot be computed (the field's default).
const LAG_UNKNOWN: i64 = -1;
/// ListOffsets' timestamp for the latest offset (`ListOffsetsRequest.LATEST_TIMESTAMP`).
const LATEST_TIMESTAMP: i64 = -1;
/// Bound on the round trip to a partition leader for its latest offset.
const LATEST_OFFSET_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn message(e: ResponseError) -> Option<kafka_protocol::protocol::StrBytes> {
    Some(sb(e.to_string()))
}

fn group_message(e: &GroupError) -> Option<kafka_protocol::protocol::StrBytes> {
    Some(sb(e.to_string()))
}

fn share_groups_enabled(broker: &Broker) -> bool {
    crate::api::features::enabled(broker, crate::features::SHARE_VERSION)
}

// ---------------------------------------------------------------------------------------------
// DescribeShareGroupOffsets
// ---------------------------------------------------------------------------------------------

/// DescribeShareGroupOffsets v0-1 (v1 adds each partition's lag).
pub async fn handle_describe_share_group_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let mut groups = Vec::with_capacity(req.groups.len());
    for g in req.groups {
        let out = describe_resp::DescribeShareGroupOffsetsResponseGroup::default()
            .with_group_id(g.group_id.clone());
        let denied = |e: ResponseError| out.clone().with_error_code(e.code());
        groups.push(if !share_groups_enabled(broker) {
            denied(ResponseError::UnsupportedVersion)
        } else if !authorize(
            broker,
            ctx,
            AclOperation::Describe,
            ResourceType::Group,
            &g.group_id,
        ) {
            denied(ResponseError::GroupAuthorizationFailed)
        } else {
            match g.topics {
                None => describe_all(broker, ctx, &g.group_id, out).await,
                Some(topics) => {
                    let topics = topics
                        .into_iter()
                        .map(|t| (t.topic_name.to_string(), t.partitions))
                        .collect();
                    out.with_topics(describe_topics(broker, ctx, &g.group_id, topics).await)
                }
            }
        });
    }
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}

/// Every initialized share-partition of the group (Kafka's `describeShareGroupAllOffsets`),
/// less the topics the caller may not DESCRIBE; one initialized at the heartbeat and not yet
/// written is listed at start offset -1, as Kafka lists it.
async fn describe_all(
    broker: &Broker,
    ctx: &RequestContext,
    group: &str,
    out: describe_resp::DescribeShareGroupOffsetsResponseGroup,
) -> describe_resp::DescribeShareGroupOffsetsResponseGroup {
    let held = match broker.groups.share_state_topics(group) {
        Ok(held) => held,
        Err(e) => {
            return out
                .with_error_code(e.error_code())
                .with_error_message(group_message(&e))
        }
    };
    let mut topics = Vec::with_capacity(held.len());
    for (id, partitions) in held {
        let Some(name) = broker.replicas.topic_name_by_id(id) else {
            continue;
        };
        if !authorize(
            broker,
            ctx,
            AclOperation::Describe,
            ResourceType::Topic,
            &name,
        ) {
            continue;
        }
        let mut rows = Vec::with_capacity(partitions.len());
        for p in partitions {
            rows.push(describe_partition(broker, &(group.to_string(), id, p)).await);
        }
        if !rows.is_empty() {
            topics.push(
                describe_resp::DescribeShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(sb(name).into())
                    .with_topic_id(id)
                    .with_partitions(rows),
            );
        }
    }
    out.with_topics(topics)
}

/// The requested topics (Kafka's `describeShareGroupOffsets`): an unknown topic's partitions
/// start at -1 (no state, as OffsetFetch answers), an undescribable one's are
/// TOPIC_AUTHORIZATION_FAILED; after the existing topics, in that order.
async fn describe_topics(
    broker: &Broker,
    ctx: &RequestContext,
    group: &str,
    topics: Vec<(String, Vec<i32>)>,
) -> Vec<describe_resp::DescribeShareGroupOffsetsResponseTopic> {
    let (mut known, mut unknown, mut denied) = (Vec::new(), Vec::new(), Vec::new());
    for (name, partitions) in topics {
        let topic = describe_resp::DescribeShareGroupOffsetsResponseTopic::default()
            .with_topic_name(sb(name.clone()).into());
        let uninitialized = |p: i32| {
            describe_resp::DescribeShareGroupOffsetsResponsePartition::default()
                .with_partition_index(p)
                .with_start_offset(UNINITIALIZED_START_OFFSET)
        };
        if !authorize(
            broker,
            ctx,
            AclOperation::Describe,
            ResourceType::Topic,
            &name,
        ) {
            let e = ResponseError::TopicAuthorizationFailed;
            let rows = partitions
                .iter()
                .map(|&p| {
                    uninitialized(p)
                        .with_error_code(e.code())
                        .with_error_message(message(e))
                })
                .collect();
            denied.push(topic.with_partitions(rows));
            continue;
        }
        let Some(meta) = broker.replicas.topic(&name) else {
            unknown
                .push(topic.with_partitions(partitions.into_iter().map(uninitialized).collect()));
            continue;
        };
        let mut rows = Vec::with_capacity(partitions.len());
        for p in partitions {
            rows.push(describe_partition(broker, &(group.to_string(), meta.id, p)).await);
        }
        known.push(topic.with_topic_id(meta.id).with_partitions(rows));
    }
    known.extend(unknown);
    known.extend(denied);
    known
}

/// One share-partition's start offset, leader epoch and lag from its state summary; one
/// whose summary could not be read starts at -1 without an error, as Kafka 4.4 answers it.
/// The lag (v1, KIP-1226) is Kafka's `GroupCoordinatorService.computeShareGroupLagAndBuildResponse`:
/// the partition's latest offset less the start offset less the offsets past it already
/// delivered; -1 without a start offset or a delivery complete count; a failed look-up of the
/// latest offset is the partition's error.
async fn describe_partition(
    broker: &Broker,
    key: &SharePartitionKey,
) -> describe_resp::DescribeShareGroupOffsetsResponsePartition {
    let row = describe_resp::DescribeShareGroupOffsetsResponsePartition::default()
        .with_partition_index(key.2)
        .with_lag(LAG_UNKNOWN);
    match broker.share.persister.read_summary(broker, key).await {
        Ok(s) if s.start_offset == UNINITIALIZED_START_OFFSET || s.delivery_complete_count < 0 => {
            row.with_start_offset(s.start_offset)
                .with_leader_epoch(s.leader_epoch)
        }
        Ok(s) => match latest_offset(broker, key.1, key.2).await {
            Ok(latest) => row
                .with_start_offset(s.start_offset)
                .with_leader_epoch(s.leader_epoch)
                .with_lag(latest - s.start_offset - i64::from(s.delivery_complete_count)),
            Err(e) => row.with_error_code(e.code()).with_error_message(message(e)),
        },
        Err(e) => {
            tracing::debug!(error = %e, group = %key.0, "share state summary not read");
            row.with_start_offset(UNINITIALIZED_START_OFFSET)
                .with_leader_epoch(DEFAULT_LEADER_EPOCH)
        }
    }
}

/// A partition's latest offset (its high watermark), as Kafka's
/// `NetworkPartitionMetadataClient.listLatestOffsets` asks the leader with ListOffsets
/// (LATEST, read_uncommitted): this node's own partition when it leads it, else the leader's
/// answer over the inter-broker listener.
async fn latest_offset(broker: &Broker, topic_id: Uuid, index: i32) -> Result<i64, ResponseError> {
    use kafka_protocol::messages::{list_offsets_request as lo, ListOffsetsRequest};
    use kafka_protocol::protocol::Message;
    let name = broker
        .replicas
        .topic_name_by_id(topic_id)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    if let Some(part) = broker.replicas.partition(&name, index) {
        if part.is_leader() {
            return Ok(part.high_watermark());
        }
    }
    let (_, addr) = crate::share::persister::leader_address(broker, &name, index)
        .ok_or(ResponseError::LeaderNotAvailable)?;
    let req = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![lo::ListOffsetsTopic::default()
            .with_name(sb(name).into())
            .with_partitions(vec![lo::ListOffsetsPartition::default()
                .with_partition_index(index)
                .with_timestamp(LATEST_TIMESTAMP)])]);
    let mut conn = crate::net::client::BrokerConnection::new(
        addr,
        format!("brook-share-lag-{}", broker.node_id()),
        LATEST_OFFSET_TIMEOUT,
    )
    .with_tls(broker.config.tls.inter_broker.clone())
    .with_sasl(broker.config.inter_broker_sasl.clone());
    let resp = conn
        .send(ListOffsetsRequest::VERSIONS.max, &req)
        .await
        .map_err(|_| ResponseError::NetworkException)?;
    let p = resp
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or(ResponseError::UnknownServerError)?;
    match ResponseError::try_from_code(p.error_code) {
        Some(e) => Err(e),
        None => Ok(p.offset),
    }
}

// ---------------------------------------------------------------------------------------------
// AlterShareGroupOffsets
// ---------------------------------------------------------------------------------------------

/// AlterShareGroupOffsets v0.
pub async fn handle_alter_share_group_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let group = req.group_id.to_string();
    let top_error = |e: ResponseError| {
        AlterShareGroupOffsetsResponse::default()
            .with_error_code(e.code())
            .with_error_message(message(e))
    };
    if !share_groups_enabled(broker) {
        return top_error(ResponseError::UnsupportedVersion);
    }
    if !authorize(broker, ctx, AclOperation::Read, ResourceType::Group, &group) {
        return top_error(ResponseError::GroupAuthorizationFailed);
    }
    broker.groups.prepare_write().await;
    let mut responses = Vec::with_capacity(req.topics.len());
    let mut to_alter: Vec<TopicToAlter> = Vec::new();
    for t in &req.topics {
        let (alter, refused) = check_alter_topic(broker, ctx, t);
        to_alter.extend(alter);
        responses.extend(refused);
    }
    let held: StateTopics = to_alter
        .iter()
        .map(|t| (t.id, t.partitions.iter().map(|p| p.0).collect()))
        .collect();
    let group_epoch = match broker.groups.alter_share_offsets(&group, &held) {
        Ok(epoch) => epoch,
        Err(e) => {
            return AlterShareGroupOffsetsResponse::default()
                .with_error_code(e.error_code())
                .with_error_message(group_message(&e))
        }
    };
    for t in to_alter {
        let mut rows = Vec::with_capacity(t.partitions.len());
        for (p, start) in t.partitions {
            let key: SharePartitionKey = (group.clone(), t.id, p);
            let r = initialize_at(broker, &key, group_epoch, start).await;
            rows.push(alter_row(p, r.err()));
        }
        responses.push(alter_topic(&t.name, t.id, rows));
    }
    AlterShareGroupOffsetsResponse::default().with_responses(responses)
}

/// A topic's partitions to alter: (partition, new start offset).
struct TopicToAlter {
    id: Uuid,
    name: String,
    partitions: Vec<(i32, i64)>,
}

/// Splits a requested topic (Kafka's `KafkaApis.handleAlterShareGroupOffsetsRequest` and
/// `GroupMetadataManager.alterShareGroupOffsets`) into the partitions to alter and the
/// answer for the others: TOPIC_AUTHORIZATION_FAILED without READ, UNKNOWN_TOPIC_OR_PARTITION
/// for a topic or partition that does not exist.
fn check_alter_topic(
    broker: &Broker,
    ctx: &RequestContext,
    t: &alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic,
) -> (
    Option<TopicToAlter>,
    Option<alter_resp::AlterShareGroupOffsetsResponseTopic>,
) {
    let name = t.topic_name.to_string();
    let meta = broker.replicas.topic(&name);
    let error = if !authorize(broker, ctx, AclOperation::Read, ResourceType::Topic, &name) {
        Some(ResponseError::TopicAuthorizationFailed)
    } else if meta.is_none() {
        Some(ResponseError::UnknownTopicOrPartition)
    } else {
        None
    };
    let id = meta.as_ref().map_or(Uuid::nil(), |m| m.id);
    let count = meta.as_ref().map_or(0, |m| m.partition_count());
    let mut rows = Vec::new();
    let mut valid = Vec::new();
    for p in &t.partitions {
        let missing = !(0..count).contains(&p.partition_index);
        match error.or(missing.then_some(ResponseError::UnknownTopicOrPartition)) {
            Some(e) => rows.push(alter_row(p.partition_index, Some(e))),
            None => valid.push((p.partition_index, p.start_offset)),
        }
    }
    let refused = (!rows.is_empty()).then(|| alter_topic(&name, id, rows));
    let alter = (!valid.is_empty()).then_some(TopicToAlter {
        id,
        name,
        partitions: valid,
    });
    (alter, refused)
}

/// Initializes a share-partition's state at `start_offset` (Kafka's `persisterInitialize`
/// with the group epoch as the state epoch). Brook's group epoch is not durable, so the state
/// epoch is also one past the one held: an InitializeShareGroupState of an older epoch would
/// be fenced, and a partition leader still holding the old state is fenced at its next write.
async fn initialize_at(
    broker: &Broker,
    key: &SharePartitionKey,
    group_epoch: i32,
    start_offset: i64,
) -> Result<(), ResponseError> {
    let persister = &broker.share.persister;
    let held = persister.read_summary(broker, key).await?;
    let state_epoch = group_epoch.max(held.state_epoch.saturating_add(1));
    persister
        .initialize(broker, key, state_epoch, start_offset)
        .await
}

fn alter_row(
    partition: i32,
    error: Option<ResponseError>,
) -> alter_resp::AlterShareGroupOffsetsResponsePartition {
    let row = alter_resp::AlterShareGroupOffsetsResponsePartition::default()
        .with_partition_index(partition);
    match error {
        Some(e) => row.with_error_code(e.code()).with_error_message(message(e)),
        None => row,
    }
}

fn alter_topic(
    name: &str,
    id: Uuid,
    partitions: Vec<alter_resp::AlterShareGroupOffsetsResponsePartition>,
) -> alter_resp::AlterShareGroupOffsetsResponseTopic {
    alter_resp::AlterShareGroupOffsetsResponseTopic::default()
        .with_topic_name(sb(name).into())
        .with_topic_id(id)
        .with_partitions(partitions)
}

// ---------------------------------------------------------------------------------------------
// DeleteShareGroupOffsets
// ---------------------------------------------------------------------------------------------

/// DeleteShareGroupOffsets v0.
pub async fn handle_delete_share_group_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let group = req.group_id.to_string();
    let top_error = |code: i16, msg| {
        DeleteShareGroupOffsetsResponse::default()
            .with_error_code(code)
            .with_error_message(msg)
    };
    if !share_groups_enabled(broker) {
        let e = ResponseError::UnsupportedVersion;
        return top_error(e.code(), message(e));
    }
    if !authorize(
        broker,
        ctx,
        AclOperation::Delete,
        ResourceType::Group,
        &group,
    ) {
        let e = ResponseError::GroupAuthorizationFailed;
        return top_error(e.code(), message(e));
    }
    // Kafka's order: the topics the caller may not READ, the deleted topics, the topics
    // without state, then those whose state could not be deleted.
    let (mut denied, mut refused, requested) = split_delete_topics(broker, ctx, &req.topics);
    let (mut deleted, mut failed) = (Vec::new(), Vec::new());
    let ids: Vec<Uuid> = requested.iter().map(|(_, id)| *id).collect();
    let held = match broker.groups.share_offsets_to_delete(&group, &ids) {
        Ok(held) => held,
        Err(e) => return top_error(e.error_code(), group_message(&e)),
    };
    let mut forgotten = Vec::new();
    for (name, id) in requested {
        let Some(partitions) = held.get(&id) else {
            let e = ResponseError::UnknownTopicOrPartition;
            let why = "There is no offset information to delete.".to_string();
            refused.push(delete_row(&name, Uuid::nil(), Some((e, why))));
            continue;
        };
        match delete_state(broker, &group, id, partitions.iter().copied()).await {
            Ok(()) => {
                forgotten.push(id);
                deleted.push(delete_row(&name, id, None));
            }
            Err(e) => failed.push(delete_row(&name, id, Some((e, e.to_string())))),
        }
    }
    broker.groups.forget_share_state(&group, &forgotten);
    denied.extend(deleted);
    denied.extend(refused);
    denied.extend(failed);
    DeleteShareGroupOffsetsResponse::default().with_responses(denied)
}

/// The requested topics the caller may not READ, those that do not exist, and the others
/// with their ids.
fn split_delete_topics(
    broker: &Broker,
    ctx: &RequestContext,
    topics: &[delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic],
) -> (DeleteRows, DeleteRows, Vec<(String, Uuid)>) {
    let (mut denied, mut refused, mut requested) = (Vec::new(), Vec::new(), Vec::new());
    for t in topics {
        let name = t.topic_name.to_string();
        if !authorize(broker, ctx, AclOperation::Read, ResourceType::Topic, &name) {
            let e = ResponseError::TopicAuthorizationFailed;
            denied.push(delete_row(&name, Uuid::nil(), Some((e, e.to_string()))));
            continue;
        }
        match broker.replicas.topic(&name) {
            Some(meta) => requested.push((name, meta.id)),
            None => {
                let e = ResponseError::UnknownTopicOrPartition;
                refused.push(delete_row(&name, Uuid::nil(), Some((e, e.to_string()))));
            }
        }
    }
    (denied, refused, requested)
}

type DeleteRows = Vec<delete_resp::DeleteShareGroupOffsetsResponseTopic>;

fn delete_row(
    name: &str,
    id: Uuid,
    error: Option<(ResponseError, String)>,
) -> delete_resp::DeleteShareGroupOffsetsResponseTopic {
    let row = delete_resp::DeleteShareGroupOffsetsResponseTopic::default()
        .with_topic_name(sb(name).into())
        .with_topic_id(id);
    match error {
        Some((e, why)) => row
            .with_error_code(e.code())
            .with_error_message(Some(sb(why))),
        None => row,
    }
}

/// Deletes the state of `partitions` of topic `id`; the first error is the answer (Kafka's
/// `persisterDeleteToGroupIdErrorMap` keeps one error per group or topic).
async fn delete_state(
    broker: &Broker,
    group: &str,
    id: Uuid,
    partitions: impl Iterator<Item = i32>,
) -> Result<(), ResponseError> {
    let mut first = Ok(());
    for p in partitions {
        let key: SharePartitionKey = (group.to_string(), id, p);
        if let Err(e) = broker.share.persister.delete(broker, &key).await {
            first = first.and(Err(e));
        }
    }
    first
}

// ---------------------------------------------------------------------------------------------
// DeleteGroups
// ---------------------------------------------------------------------------------------------

/// DeleteGroups' share step (Kafka's `GroupCoordinatorService.deleteShareGroups`): an empty
/// share group's state is deleted at the share coordinators before the group is, so that a
/// group of the same name starts again where `share.auto.offset.reset` puts it. A share
/// group with members is NON_EMPTY_GROUP; a failed delete is the group's error, and the group
/// stays. Not a share group: nothing to do.
pub async fn delete_share_group_state(broker: &Broker, group: &str) -> Result<(), i16> {
    let held = match broker.groups.share_group_state_to_delete(group) {
        Ok(Some(held)) => held,
        Ok(None) => return Ok(()),
        Err(e) => return Err(e.error_code()),
    };
    for (id, partitions) in held {
        // A deleted topic's state goes with it (Kafka's `maybeCleanupShareGroupState`).
        if broker.replicas.topic_by_id(id).is_none() {
            continue;
        }
        delete_state(broker, group, id, partitions.into_iter())
            .await
            .map_err(|e| e.code())?;
    }
    Ok(())
}
