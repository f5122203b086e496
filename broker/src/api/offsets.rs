//! Committed offsets: OffsetCommit, OffsetFetch (single group before v8, batched from v8)
//! and OffsetDelete. Validation and storage live in [`crate::group`].

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
use kafka_protocol::messages::*;

use super::{sb, RequestContext};
use crate::group::records::OffsetValue;
use crate::group::{CommitPartition, Committer, FetchedOffsets, GroupError};
use crate::server::Broker;

/// OffsetCommit v2-9.
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
    };
    let mut shape: Vec<(TopicName, Vec<i32>)> = Vec::new();
    let mut partitions = Vec::new();
    for t in &req.topics {
        let mut idx = Vec::new();
        for p in &t.partitions {
            idx.push(p.partition_index);
            partitions.push(CommitPartition {
                topic: t.name.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: if ctx.api_version >= 6 {
                    p.committed_leader_epoch
                } else {
                    -1
                },
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            });
        }
        shape.push((t.name.clone(), idx));
    }
    let codes = broker
        .groups
        .commit_offsets(&req.group_id, &who, partitions)
        .await;
    let mut codes = codes.into_iter();
    let topics = shape
        .into_iter()
        .map(|(name, idx)| {
            OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(
                    idx.into_iter()
                        .map(|p| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(codes.next().unwrap_or(-1))
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

fn fetch_group(
    broker: &Broker,
    group: &str,
    member: Option<(&str, i32)>,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Result<FetchedOffsets, GroupError> {
    if group.is_empty() {
        return Err(GroupError::InvalidGroupId);
    }
    broker.groups.fetch_offsets(group, member, topics)
}

/// The (offset, leader epoch, metadata) of a partition; -1, -1, "" when nothing is committed.
fn fetched_fields(v: Option<OffsetValue>) -> (i64, i32, String) {
    match v {
        Some(v) => (v.offset, v.leader_epoch, v.metadata),
        None => (-1, -1, String::new()),
    }
}

/// The response topics for what was found, built with the version's own message types
/// (v8+ batch groups and name their structs differently).
fn found_topics<T, P>(
    found: FetchedOffsets,
    topic: impl Fn(TopicName, Vec<P>) -> T,
    partition: impl Fn(i32, (i64, i32, String)) -> P,
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

/// OffsetFetch v1-9.
pub async fn handle_offset_fetch(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetFetchRequest,
) -> OffsetFetchResponse {
    if ctx.api_version >= 8 {
        let groups = req
            .groups
            .into_iter()
            .map(|g| {
                let topics = g.topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| (t.name.to_string(), t.partition_indexes))
                        .collect()
                });
                let member_id = g.member_id.as_ref().map(|m| m.to_string());
                let member = member_id.as_deref().map(|m| (m, g.member_epoch));
                match fetch_group(broker, &g.group_id, member, topics) {
                    Ok(found) => OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_topics(found_topics(
                            found,
                            |name, ps| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(name)
                                    .with_partitions(ps)
                            },
                            |p, (o, e, m)| {
                                OffsetFetchResponsePartitions::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(o)
                                    .with_committed_leader_epoch(e)
                                    .with_metadata(Some(sb(m)))
                            },
                        )),
                    Err(e) => OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(e.error_code()),
                }
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let topics = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.to_string(), t.partition_indexes))
            .collect()
    });
    let req_topics: Vec<(String, Vec<i32>)> = topics.clone().unwrap_or_default();
    match fetch_group(broker, &req.group_id, None, topics) {
        Ok(found) => OffsetFetchResponse::default().with_topics(found_topics(
            found,
            |name, ps| {
                OffsetFetchResponseTopic::default()
                    .with_name(name)
                    .with_partitions(ps)
            },
            |p, (o, e, m)| {
                OffsetFetchResponsePartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(o)
                    .with_committed_leader_epoch(e)
                    .with_metadata(Some(sb(m)))
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

/// OffsetDelete v0.
pub async fn handle_offset_delete(
    broker: &Broker,
    _ctx: &RequestContext,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let mut known = Vec::new();
    let mut unknown_code = Vec::new();
    for t in &req.topics {
        let meta = broker.replicas.topic(&t.name);
        for p in &t.partitions {
            let exists = meta
                .as_ref()
                .is_some_and(|m| p.partition_index >= 0 && p.partition_index < m.partitions);
            unknown_code.push(!exists);
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
                            let code = if unknown.next().unwrap_or(true) {
                                GroupError::UnknownTopicOrPartition.error_code()
                            } else {
                                codes.next().unwrap_or(-1)
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
