//! Committed offsets: OffsetCommit, TxnOffsetCommit (offsets inside a transaction),
//! OffsetFetch (single group before v8, batched from v8; `require_stable` from v7) and
//! OffsetDelete. Validation and storage live in [`crate::group`].

use crate::txn::verify::{add_offsets_partition, TXN_OFFSET_COMMIT_ADDS_PARTITION_FROM};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use uuid::Uuid;

use super::auth_helper::authorize;
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::group::records::OffsetValue;
use crate::group::store::TxnProducer;
use crate::group::{CommitPartition, Committer, FetchedOffsets, GroupError};
use crate::security::acl::{AclOperation, ResourceType};

const GROUP_DENIED: i16 = ResponseError::GroupAuthorizationFailed.code();
const TOPIC_DENIED: i16 = ResponseError::TopicAuthorizationFailed.code();
const UNKNOWN_TOPIC_ID: i16 = ResponseError::UnknownTopicId.code();

/// `op` on the group.
fn may(broker: &Broker, ctx: &RequestContext, op: AclOperation, group: &str) -> bool {
    authorize(broker, ctx, op, ResourceType::Group, group)
}

/// OffsetCommit and OffsetFetch name topics by id from v10, TxnOffsetCommit from v6
/// (Kafka's `OffsetCommitRequest.useTopicIds` and its siblings).
pub const OFFSET_COMMIT_TOPIC_IDS_FROM: i16 = 10;
pub const OFFSET_FETCH_TOPIC_IDS_FROM: i16 = 10;
pub const TXN_OFFSET_COMMIT_TOPIC_IDS_FROM: i16 = 6;

/// A request topic's name: its own, or the name of its id when the version names topics by
/// id (`None` for an id the metadata does not know, nil included: Kafka's
/// `metadataCache.getTopicName`, which leaves such a topic nameless).
fn resolve(broker: &Broker, by_id: bool, name: &TopicName, id: Uuid) -> Option<TopicName> {
    match by_id {
        false => Some(name.clone()),
        true => broker
            .replicas
            .topic_name_by_id(id)
            .map(|n| TopicName(sb(n))),
    }
}

/// A topic's id by name, nil when the metadata does not know it.
fn id_of(broker: &Broker, name: &str) -> Uuid {
    broker
        .replicas
        .topic(name)
        .map(|m| m.id)
        .unwrap_or_default()
}

/// Splits a commit's partitions: the code of each one refused here (UNKNOWN_TOPIC_ID for a
/// topic id that names nothing, then TOPIC_AUTHORIZATION_FAILED without READ on the topic,
/// Kafka's `handleOffsetCommitRequest` order), in order, and the others for the coordinator.
fn readable(
    broker: &Broker,
    ctx: &RequestContext,
    partitions: Vec<(bool, CommitPartition)>,
) -> (Vec<Option<i16>>, Vec<CommitPartition>) {
    let mask: Vec<Option<i16>> = partitions
        .iter()
        .map(|(known, p)| {
            if !known {
                return Some(UNKNOWN_TOPIC_ID);
            }
            let read = AclOperation::Read;
            (!authorize(broker, ctx, read, ResourceType::Topic, &p.topic)).then_some(TOPIC_DENIED)
        })
        .collect();
    let allowed = partitions
        .into_iter()
        .zip(&mask)
        .filter_map(|((_, p), refused)| refused.is_none().then_some(p))
        .collect();
    (mask, allowed)
}

/// The coordinator's codes for the allowed partitions laid back among the refused ones.
fn with_refused(mask: &[Option<i16>], codes: Vec<i16>) -> Vec<i16> {
    let mut codes = codes.into_iter();
    mask.iter()
        .map(|refused| match refused {
            None => codes
                .next()
                .unwrap_or(ResponseError::UnknownServerError.code()),
            Some(code) => *code,
        })
        .collect()
}

/// OffsetCommit v2-10 (v10 names topics by id).
pub async fn handle_offset_commit(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let who = Committer {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_or_epoch: req.generation_id_or_member_epoch,
        api_version: ctx.api_version,
        transactional: false,
    };
    let by_id = ctx.api_version >= OFFSET_COMMIT_TOPIC_IDS_FROM;
    let (shape, partitions) = commit_partitions(req.topics.iter().map(|t| {
        let name = resolve(broker, by_id, &t.name, t.topic_id);
        let topic = name.as_ref().map(|n| n.to_string()).unwrap_or_default();
        let parts = t.partitions.iter().map(|p| CommitPartition {
            topic: topic.clone(),
            partition: p.partition_index,
            offset: p.committed_offset,
            leader_epoch: if ctx.api_version >= 6 {
                p.committed_leader_epoch
            } else {
                -1
            },
            metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
        });
        let parts = parts.collect();
        (name, t.topic_id, parts)
    }));
    // Kafka's `handleOffsetCommitRequest`: READ on the group, then each topic's id and READ.
    let codes = if !may(broker, ctx, AclOperation::Read, &req.group_id) {
        vec![GROUP_DENIED; partitions.len()]
    } else {
        let (mask, allowed) = readable(broker, ctx, partitions);
        let codes = broker
            .groups
            .commit_offsets(&req.group_id, &who, allowed)
            .await;
        with_refused(&mask, codes)
    };
    let topics = commit_topics(shape, codes, |name, id, parts| {
        OffsetCommitResponseTopic::default()
            .with_name(name)
            .with_topic_id(id)
            .with_partitions(
                parts
                    .into_iter()
                    .map(|(p, code)| {
                        OffsetCommitResponsePartition::default()
                            .with_partition_index(p)
                            .with_error_code(code)
                    })
                    .collect(),
            )
    });
    OffsetCommitResponse::default().with_topics(topics)
}

/// TxnOffsetCommit v0-6 (Kafka's `KafkaApis.handleTxnOffsetCommitRequest` and
/// `GroupCoordinatorService.commitTransactionalOffsets`): the offsets are written as the
/// producer's transactional records and become the group's only when its transaction
/// commits. Member id, instance id and generation come from v3; the committed leader epoch
/// from v2; topic ids instead of names from v6.
pub async fn handle_txn_offset_commit(
    broker: &Broker,
    ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let v = ctx.api_version;
    let who = txn_committer(v, &req);
    let by_id = v >= TXN_OFFSET_COMMIT_TOPIC_IDS_FROM;
    let (shape, partitions) = commit_partitions(req.topics.iter().map(|t| {
        let name = resolve(broker, by_id, &t.name, t.topic_id);
        let topic = name.as_ref().map(|n| n.to_string()).unwrap_or_default();
        let parts = t.partitions.iter().map(|p| CommitPartition {
            topic: topic.clone(),
            partition: p.partition_index,
            offset: p.committed_offset,
            leader_epoch: if v >= 2 { p.committed_leader_epoch } else { -1 },
            metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
        });
        let parts = parts.collect();
        (name, t.topic_id, parts)
    }));
    let producer = TxnProducer {
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
    };
    // Kafka's `handleTxnOffsetCommitRequest`: WRITE on the transactional id, READ on the
    // group, READ on each topic.
    let txn_allowed = authorize(
        broker,
        ctx,
        AclOperation::Write,
        ResourceType::TransactionalId,
        &req.transactional_id,
    );
    let (mask, partitions) = readable(broker, ctx, partitions);
    let codes = if !txn_allowed {
        vec![ResponseError::TransactionalIdAuthorizationFailed.code(); mask.len()]
    } else if !may(broker, ctx, AclOperation::Read, &req.group_id) {
        vec![GROUP_DENIED; mask.len()]
    } else if req.group_id.is_empty() {
        with_refused(
            &mask,
            vec![GroupError::InvalidGroupId.error_code(); partitions.len()],
        )
    } else if producer.producer_id < 0 || producer.producer_epoch < 0 {
        // No producer to write for: the transaction coordinator's verification would not find
        // this id in the transaction either.
        let code = ResponseError::InvalidProducerIdMapping.code();
        with_refused(&mask, vec![code; partitions.len()])
    } else {
        let codes = write_txn_offsets(broker, v, &req, &who, producer, partitions).await;
        with_refused(&mask, codes)
    };
    txn_offset_commit_response(shape, codes)
}

/// The committing member as the request's version carries it: member id, instance id and
/// generation from v3 (`TxnOffsetCommitRequestData`'s fields' versions).
fn txn_committer(v: i16, req: &TxnOffsetCommitRequest) -> Committer {
    Committer {
        member_id: if v >= 3 {
            req.member_id.to_string()
        } else {
            String::new()
        },
        group_instance_id: req
            .group_instance_id
            .as_ref()
            .filter(|_| v >= 3)
            .map(|s| s.to_string()),
        generation_or_epoch: if v >= 3 { req.generation_id } else { -1 },
        api_version: v,
        transactional: true,
    }
}

/// The authorized, valid commit's write (`GroupCoordinatorService.commitTransactionalOffsets`):
/// for transaction version 2 the offsets partition joins the transaction first, then the
/// offsets are written as the producer's transactional records; one code per partition.
async fn write_txn_offsets(
    broker: &Broker,
    v: i16,
    req: &TxnOffsetCommitRequest,
    who: &Committer,
    producer: TxnProducer,
    partitions: Vec<CommitPartition>,
) -> Vec<i16> {
    // Transaction version 2 (v5+): the client sent no AddOffsetsToTxn; the offsets
    // partition joins the transaction here, before anything is written.
    let added = if v >= TXN_OFFSET_COMMIT_ADDS_PARTITION_FROM {
        add_offsets_partition(
            broker,
            &req.transactional_id,
            producer.producer_id,
            producer.producer_epoch,
            broker.groups.offsets_partition_for(&req.group_id),
        )
        .await
    } else {
        Ok(())
    };
    match added {
        Ok(()) => {
            broker
                .groups
                .commit_txn_offsets(&req.group_id, who, producer, partitions)
                .await
        }
        Err(code) => vec![code; partitions.len()],
    }
}

/// The response's topics in request order, each partition with its code
/// (`TxnOffsetCommitResponse.Builder`).
fn txn_offset_commit_response(shape: Vec<CommitShape>, codes: Vec<i16>) -> TxnOffsetCommitResponse {
    let topics = commit_topics(shape, codes, |name, id, parts| {
        TxnOffsetCommitResponseTopic::default()
            .with_name(name)
            .with_topic_id(id)
            .with_partitions(
                parts
                    .into_iter()
                    .map(|(p, code)| {
                        TxnOffsetCommitResponsePartition::default()
                            .with_partition_index(p)
                            .with_error_code(code)
                    })
                    .collect(),
            )
    });
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// One request topic of a commit: (name, id, partition indexes), the name `None` for an id
/// the metadata does not know.
type CommitShape = (Option<TopicName>, Uuid, Vec<i32>);

/// A commit request's topics in request order, and its partitions flattened for the
/// coordinator, each with whether its topic is known.
fn commit_partitions(
    topics: impl Iterator<Item = (Option<TopicName>, Uuid, Vec<CommitPartition>)>,
) -> (Vec<CommitShape>, Vec<(bool, CommitPartition)>) {
    let mut shape = Vec::new();
    let mut all = Vec::new();
    for (name, id, parts) in topics {
        shape.push((
            name.clone(),
            id,
            parts.iter().map(|p| p.partition).collect(),
        ));
        all.extend(parts.into_iter().map(|p| (name.is_some(), p)));
    }
    (shape, all)
}

/// The response topics of a commit: the codes, in request order, laid back over the
/// request's shape with the version's own message types (an unknown id answers nameless).
fn commit_topics<T>(
    shape: Vec<CommitShape>,
    codes: Vec<i16>,
    topic: impl Fn(TopicName, Uuid, Vec<(i32, i16)>) -> T,
) -> Vec<T> {
    let mut codes = codes.into_iter();
    shape
        .into_iter()
        .map(|(name, id, idx)| {
            let parts = idx
                .into_iter()
                .map(|p| {
                    let code = codes
                        .next()
                        .unwrap_or(ResponseError::UnknownServerError.code());
                    (p, code)
                })
                .collect();
            topic(name.unwrap_or_default(), id, parts)
        })
        .collect()
}

fn fetch_group(
    broker: &Broker,
    group: &str,
    member: Option<(&str, i32)>,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Result<FetchedOffsets, GroupError> {
    if group.is_empty() {
        return Err(GroupError::InvalidGroupId);
    }
    broker
        .groups
        .fetch_offsets(group, member, topics, require_stable)
}

/// What the response says of one partition.
struct Fetched {
    offset: i64,
    leader_epoch: i32,
    metadata: String,
    error_code: i16,
}

/// A partition's committed offset; -1, -1, "" when nothing is committed, or with its error.
fn fetched_fields(v: Result<Option<OffsetValue>, GroupError>) -> Fetched {
    let none = |error_code| Fetched {
        offset: -1,
        leader_epoch: -1,
        metadata: String::new(),
        error_code,
    };
    match v {
        Ok(Some(v)) => Fetched {
            offset: v.offset,
            leader_epoch: v.leader_epoch,
            metadata: v.metadata,
            error_code: 0,
        },
        Ok(None) => none(0),
        Err(e) => none(e.error_code()),
    }
}

/// The response topics for what was found, built with the version's own message types
/// (v8+ batch groups and name their structs differently).
fn found_topics<T, P>(
    found: FetchedOffsets,
    topic: impl Fn(TopicName, Vec<P>) -> T,
    partition: impl Fn(i32, Fetched) -> P,
) -> Vec<T> {
    found
        .into_iter()
        .map(|(t, ps)| {
            let parts = ps
                .into_iter()
                .map(|(p, v)| partition(p, fetched_fields(v)))
                .collect();
            topic(sb(t).into(), parts)
        })
        .collect()
}

/// Kafka's `handleOffsetFetchRequest` topic checks (DESCRIBE): an all-topics fetch leaves
/// out the topics the session may not describe; a named one answers them
/// TOPIC_AUTHORIZATION_FAILED, with nothing of what is committed.
fn described(
    broker: &Broker,
    ctx: &RequestContext,
    found: FetchedOffsets,
    all_topics: bool,
) -> FetchedOffsets {
    found
        .into_iter()
        .filter_map(|(t, ps)| {
            if authorize(broker, ctx, AclOperation::Describe, ResourceType::Topic, &t) {
                return Some((t, ps));
            }
            let refused = ps
                .into_iter()
                .map(|(p, _)| (p, Err(GroupError::TopicAuthorizationFailed)))
                .collect();
            (!all_topics).then_some((t, refused))
        })
        .collect()
}

/// OffsetFetch v1-10 (v10 names topics by id).
pub async fn handle_offset_fetch(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetFetchRequest,
) -> OffsetFetchResponse {
    if ctx.api_version >= 8 {
        let by_id = ctx.api_version >= OFFSET_FETCH_TOPIC_IDS_FROM;
        let groups = req
            .groups
            .into_iter()
            .map(|g| fetch_batched_group(broker, ctx, g, by_id, req.require_stable))
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let topics = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.to_string(), t.partition_indexes))
            .collect()
    });
    let req_topics: Vec<(String, Vec<i32>)> = topics.clone().unwrap_or_default();
    let all_topics = topics.is_none();
    // RequireStable exists from v7 (the codec reads false below).
    let fetched = if may(broker, ctx, AclOperation::Describe, &req.group_id) {
        fetch_group(broker, &req.group_id, None, topics, req.require_stable)
            .map(|found| described(broker, ctx, found, all_topics))
    } else {
        Err(GroupError::GroupAuthorizationFailed)
    };
    match fetched {
        Ok(found) => OffsetFetchResponse::default().with_topics(found_topics(
            found,
            |name, ps| {
                OffsetFetchResponseTopic::default()
                    .with_name(name)
                    .with_partitions(ps)
            },
            |p, f| {
                OffsetFetchResponsePartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(f.offset)
                    .with_committed_leader_epoch(f.leader_epoch)
                    .with_metadata(Some(sb(f.metadata)))
                    .with_error_code(f.error_code)
            },
        )),
        // v1 has no top-level error code: the error goes to every partition asked for.
        Err(e) if ctx.api_version < 2 => OffsetFetchResponse::default().with_topics(
            req_topics
                .into_iter()
                .map(|(t, ps)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(sb(t).into())
                        .with_partitions(
                            ps.into_iter()
                                .map(|p| {
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(-1)
                                        .with_error_code(e.error_code())
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
        Err(e) => OffsetFetchResponse::default().with_error_code(e.error_code()),
    }
}

/// One group of a batched OffsetFetch (v8+; Kafka's `fetchOffsetsForGroup` and
/// `fetchAllOffsetsForGroup`). From v10 topics are named by id: a requested id the metadata
/// does not know answers UNKNOWN_TOPIC_ID on each of its partitions, after the found topics;
/// an all-topics fetch leaves out the topics that have no id any more (deleted).
fn fetch_batched_group(
    broker: &Broker,
    ctx: &RequestContext,
    g: offset_fetch_request::OffsetFetchRequestGroup,
    by_id: bool,
    require_stable: bool,
) -> OffsetFetchResponseGroup {
    let all_topics = g.topics.is_none();
    let mut unknown_ids = Vec::new();
    let topics = g.topics.map(|ts| {
        ts.into_iter()
            .filter_map(|t| match resolve(broker, by_id, &t.name, t.topic_id) {
                Some(name) => Some((name.to_string(), t.partition_indexes)),
                None => {
                    unknown_ids.push((t.topic_id, t.partition_indexes));
                    None
                }
            })
            .collect()
    });
    let member_id = g.member_id.as_ref().map(|m| m.to_string());
    let member = member_id.as_deref().map(|m| (m, g.member_epoch));
    let group = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
    if !may(broker, ctx, AclOperation::Describe, &g.group_id) {
        return group.with_error_code(GROUP_DENIED);
    }
    let found = match fetch_group(broker, &g.group_id, member, topics, require_stable) {
        Ok(found) => described(broker, ctx, found, all_topics),
        Err(e) => return group.with_error_code(e.error_code()),
    };
    let mut topics = found_topics(
        found,
        |name, ps| {
            let id = if by_id {
                id_of(broker, &name)
            } else {
                Uuid::nil()
            };
            OffsetFetchResponseTopics::default()
                .with_name(name)
                .with_topic_id(id)
                .with_partitions(ps)
        },
        |p, f| {
            OffsetFetchResponsePartitions::default()
                .with_partition_index(p)
                .with_committed_offset(f.offset)
                .with_committed_leader_epoch(f.leader_epoch)
                .with_metadata(Some(sb(f.metadata)))
                .with_error_code(f.error_code)
        },
    );
    if by_id {
        topics.retain(|t| !t.topic_id.is_nil());
    }
    topics.extend(unknown_ids.into_iter().map(|(id, ps)| {
        OffsetFetchResponseTopics::default()
            .with_topic_id(id)
            .with_partitions(
                ps.into_iter()
                    .map(|p| {
                        OffsetFetchResponsePartitions::default()
                            .with_partition_index(p)
                            .with_committed_offset(-1)
                            .with_error_code(UNKNOWN_TOPIC_ID)
                    })
                    .collect(),
            )
    }));
    group.with_topics(topics)
}

/// OffsetDelete v0.
pub async fn handle_offset_delete(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    // Kafka's `handleDeleteOffsetsRequest`: DELETE on the group, READ on each topic.
    if !may(broker, ctx, AclOperation::Delete, &req.group_id) {
        return OffsetDeleteResponse::default().with_error_code(GROUP_DENIED);
    }
    let mut known = Vec::new();
    let mut unknown_code = Vec::new();
    for t in &req.topics {
        let meta = broker.replicas.topic(&t.name);
        let readable = authorize(
            broker,
            ctx,
            AclOperation::Read,
            ResourceType::Topic,
            &t.name,
        );
        for p in &t.partitions {
            let exists = meta
                .as_ref()
                .is_some_and(|m| p.partition_index >= 0 && p.partition_index < m.partition_count());
            let exists = match readable {
                true => Some(exists),
                false => None,
            };
            unknown_code.push(exists);
            let exists = exists == Some(true);
            if exists {
                known.push((t.name.to_string(), p.partition_index));
            }
        }
    }
    let codes = match broker.groups.delete_offsets(&req.group_id, &known).await {
        Ok(c) => c,
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.error_code()),
    };
    let mut codes = codes.into_iter();
    let mut unknown = unknown_code.into_iter();
    let topics = req
        .topics
        .iter()
        .map(|t| {
            OffsetDeleteResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let code = match unknown.next().flatten() {
                                None => TOPIC_DENIED,
                                Some(false) => GroupError::UnknownTopicOrPartition.error_code(),
                                Some(true) => codes.next().unwrap_or(-1),
                            };
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
