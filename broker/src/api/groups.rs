//! Group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup (classic
//! protocol), ConsumerGroupHeartbeat (KIP-848), DescribeGroups, ListGroups, DeleteGroups.
//! The state machines live in [`crate::group`]; this file only translates the wire.

use kafka_protocol::messages::consumer_group_describe_response as cgd;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

use super::auth_helper::{authorize, authorize_cluster, authorized_operations};
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::group::classic::{JoinParams, JoinResponse, Pending, SyncResponse};
use crate::group::consumer::HeartbeatParams;
use crate::group::store::OFFSETS_TOPIC;
use crate::group::GroupError;
use crate::security::acl::{AclOperation, ResourceType};
use crate::txn::log::TRANSACTION_STATE_TOPIC;

/// FindCoordinator: a group's coordinator is the leader of its `__consumer_offsets`
/// partition (alone, this node); a transactional id's (key type 1) is the leader of its
/// `__transaction_state` partition.
pub async fn handle_find_coordinator(
    broker: &Broker,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let keys: Vec<String> = if ctx.api_version >= 4 {
        req.coordinator_keys.iter().map(|k| k.to_string()).collect()
    } else {
        vec![req.key.to_string()]
    };
    let mut coordinators: Vec<Coordinator> = Vec::with_capacity(keys.len());
    for key in keys {
        let found = match req.key_type {
            t if let Some(refused) = coordinator_denied(broker, ctx, t, &key) => Err(refused),
            0 => match broker.groups.ensure_offsets_topic().await {
                Ok(()) => group_coordinator(broker, &ctx.session.listener_name, &key),
                Err(e) => Err((e.error_code(), e.to_string())),
            },
            1 => match broker.txn.ensure_topic().await {
                Ok(()) => coordinator_of(
                    broker,
                    &ctx.session.listener_name,
                    TRANSACTION_STATE_TOPIC,
                    broker.txn.partition_for(&key),
                ),
                Err(e) => Err((e.error_code(), e.to_string())),
            },
            2 => share_coordinator(broker, &ctx.session.listener_name, &key).await,
            t => Err((
                ResponseError::InvalidRequest.code(),
                format!("unsupported key type {t}"),
            )),
        };
        let c = Coordinator::default().with_key(sb(key));
        coordinators.push(match found {
            Ok((node, host, port)) => c
                .with_node_id(node.into())
                .with_host(sb(host))
                .with_port(port),
            Err((code, message)) => c
                .with_node_id((-1).into())
                .with_host(sb(String::new()))
                .with_port(-1)
                .with_error_code(code)
                .with_error_message(Some(sb(message))),
        });
    }
    if ctx.api_version >= 4 {
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let c = coordinators.into_iter().next().unwrap_or_default();
    FindCoordinatorResponse::default()
        .with_error_code(c.error_code)
        .with_error_message(c.error_message)
        .with_node_id(c.node_id)
        .with_host(c.host)
        .with_port(c.port)
}

/// A share-partition's coordinator (key type 2, key `group:topicId:partition`): the leader of
/// the key's `__share_group_state` partition ([`crate::share::coordinator`]).
async fn share_coordinator(
    broker: &Broker,
    listener: &str,
    key: &str,
) -> Result<(i32, String, i32), (i16, String)> {
    let parts: Vec<&str> = key.rsplitn(3, ':').collect();
    if parts.len() != 3 || parts[0].parse::<i32>().is_err() || parts[2].is_empty() {
        let e = ResponseError::InvalidRequest;
        return Err((e.code(), format!("invalid share coordinator key {key:?}")));
    }
    broker
        .share_coordinator
        .ensure_topic()
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    coordinator_of(
        broker,
        listener,
        crate::share::coordinator::SHARE_GROUP_STATE_TOPIC,
        broker.share_coordinator.partition_for(key),
    )
}

/// Kafka's `getCoordinator` checks: DESCRIBE on the group or the transactional id, and
/// CLUSTER_ACTION for a share-partition's (an internal lookup of brokers).
fn coordinator_denied(
    broker: &Broker,
    ctx: &RequestContext,
    key_type: i8,
    key: &str,
) -> Option<(i16, String)> {
    let (rt, error) = match key_type {
        0 => (ResourceType::Group, ResponseError::GroupAuthorizationFailed),
        1 => (
            ResourceType::TransactionalId,
            ResponseError::TransactionalIdAuthorizationFailed,
        ),
        2 => {
            let allowed =
                super::auth_helper::authorize_cluster(broker, ctx, AclOperation::ClusterAction);
            let e = ResponseError::ClusterAuthorizationFailed;
            return (!allowed).then(|| (e.code(), e.to_string()));
        }
        _ => return None,
    };
    (!authorize(broker, ctx, AclOperation::Describe, rt, key)).then(|| denied(error))
}

/// An authorization error with Kafka's default message for it.
fn denied(e: ResponseError) -> (i16, String) {
    let message = match e {
        ResponseError::GroupAuthorizationFailed => "Group authorization failed.",
        ResponseError::TransactionalIdAuthorizationFailed => {
            "Transactional Id authorization failed."
        }
        _ => "Topic authorization failed.",
    };
    (e.code(), message.to_string())
}

/// READ on the group, which every classic and consumer group member request needs.
fn may_read_group(broker: &Broker, ctx: &RequestContext, group: &str) -> bool {
    authorize(broker, ctx, AclOperation::Read, ResourceType::Group, group)
}

const GROUP_DENIED: i16 = ResponseError::GroupAuthorizationFailed.code();

fn join_response(r: JoinResponse, version: i16) -> JoinGroupResponse {
    JoinGroupResponse::default()
        // The field exists from v9; older leaders recompute and SyncGroup keeps the old result.
        .with_skip_assignment(r.skip_assignment && version >= 9)
        .with_error_code(r.error_code)
        .with_generation_id(r.generation_id)
        .with_protocol_type(r.protocol_type.map(sb))
        .with_protocol_name(r.protocol_name.map(sb))
        .with_leader(sb(r.leader))
        .with_member_id(sb(r.member_id))
        .with_members(
            r.members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(sb(m.member_id))
                        .with_group_instance_id(m.group_instance_id.map(sb))
                        .with_metadata(m.metadata)
                })
                .collect(),
        )
}

fn join_error(e: GroupError, member_id: String, version: i16) -> JoinGroupResponse {
    join_response(JoinResponse::error(e.error_code(), &member_id), version)
}

/// JoinGroup: answered when the rebalance completes (or right away for errors and for
/// MEMBER_ID_REQUIRED).
pub async fn handle_join_group(
    broker: &Broker,
    ctx: &RequestContext,
    req: JoinGroupRequest,
) -> JoinGroupResponse {
    if !may_read_group(broker, ctx, &req.group_id) {
        // Kafka's `JoinGroupRequest.getErrorResponse`: no member id.
        return join_response(JoinResponse::error(GROUP_DENIED, ""), ctx.api_version);
    }
    let member_id = req.member_id.to_string();
    let params = JoinParams {
        member_id: member_id.clone(),
        group_instance_id: req.group_instance_id.map(|s| s.to_string()),
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata))
            .collect(),
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout doubles as one.
        rebalance_timeout_ms: if ctx.api_version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host(),
        require_known_member_id: ctx.api_version >= 4,
    };
    broker.groups.prepare_write().await;
    let r = match broker.groups.join_group(&req.group_id, params) {
        Ok(Pending::Now(r)) => r,
        Ok(Pending::Wait(rx)) => rx.await.unwrap_or_else(|_| {
            JoinResponse::error(ResponseError::CoordinatorNotAvailable.code(), &member_id)
        }),
        Err(e) => return join_error(e, member_id, ctx.api_version),
    };
    join_response(r, ctx.api_version)
}

fn sync_response(r: SyncResponse) -> SyncGroupResponse {
    SyncGroupResponse::default()
        .with_error_code(r.error_code)
        .with_protocol_type(r.protocol_type.map(sb))
        .with_protocol_name(r.protocol_name.map(sb))
        .with_assignment(r.assignment)
}

/// SyncGroup: the leader's assignments complete the generation; followers wait for them.
pub async fn handle_sync_group(
    broker: &Broker,
    ctx: &RequestContext,
    req: SyncGroupRequest,
) -> SyncGroupResponse {
    if !may_read_group(broker, ctx, &req.group_id) {
        return sync_response(SyncResponse::error(GROUP_DENIED));
    }
    let (pt, pn) = if ctx.api_version >= 5 {
        (
            req.protocol_type.as_ref().map(|s| s.to_string()),
            req.protocol_name.as_ref().map(|s| s.to_string()),
        )
    } else {
        (None, None)
    };
    let assignments = req
        .assignments
        .into_iter()
        .map(|a| (a.member_id.to_string(), a.assignment))
        .collect();
    let r = match broker
        .groups
        .sync_group(
            &req.group_id,
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
            pt.as_deref(),
            pn.as_deref(),
            assignments,
        )
        .await
    {
        Ok(Pending::Now(r)) => r,
        Ok(Pending::Wait(rx)) => rx
            .await
            .unwrap_or_else(|_| SyncResponse::error(ResponseError::CoordinatorNotAvailable.code())),
        Err(e) => SyncResponse::error(e.error_code()),
    };
    sync_response(r)
}

/// Heartbeat.
pub async fn handle_heartbeat(
    broker: &Broker,
    ctx: &RequestContext,
    req: HeartbeatRequest,
) -> HeartbeatResponse {
    if !may_read_group(broker, ctx, &req.group_id) {
        return HeartbeatResponse::default().with_error_code(GROUP_DENIED);
    }
    let code = match broker.groups.heartbeat(
        &req.group_id,
        &req.member_id,
        req.group_instance_id.as_deref(),
        req.generation_id,
    ) {
        Ok(()) => 0,
        Err(e) => e.error_code(),
    };
    HeartbeatResponse::default().with_error_code(code)
}

/// LeaveGroup: one member before v3, a batch from v3.
pub async fn handle_leave_group(
    broker: &Broker,
    ctx: &RequestContext,
    req: LeaveGroupRequest,
) -> LeaveGroupResponse {
    if !may_read_group(broker, ctx, &req.group_id) {
        return LeaveGroupResponse::default().with_error_code(GROUP_DENIED);
    }
    let members: Vec<(String, Option<String>)> = if ctx.api_version >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    match broker.groups.leave_group(&req.group_id, &members) {
        Err(e) => LeaveGroupResponse::default().with_error_code(e.error_code()),
        Ok(results) if ctx.api_version < 3 => LeaveGroupResponse::default().with_error_code(
            results
                .first()
                .and_then(|r| r.as_ref().err())
                .map_or(0, |e| e.error_code()),
        ),
        Ok(results) => LeaveGroupResponse::default().with_members(
            members
                .into_iter()
                .zip(results)
                .map(|((m, i), r)| {
                    MemberResponse::default()
                        .with_member_id(sb(m))
                        .with_group_instance_id(i.map(sb))
                        .with_error_code(r.err().map_or(0, |e| e.error_code()))
                })
                .collect(),
        ),
    }
}

/// ConsumerGroupHeartbeat (KIP-848).
pub async fn handle_consumer_group_heartbeat(
    broker: &Broker,
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let interval = broker
        .groups
        .consumer_limits(&req.group_id)
        .heartbeat_interval_ms;
    if !crate::api::features::enabled(broker, crate::features::GROUP_VERSION) {
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    }
    if let Some(code) = consumer_heartbeat_denied(broker, ctx, &req) {
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code)
            .with_member_epoch(-1)
            .with_heartbeat_interval_ms(interval);
    }
    let params = HeartbeatParams {
        api_version: ctx.api_version,
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.map(|s| s.to_string()),
        rack_id: req.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .map(|ts| ts.into_iter().map(|t| t.to_string()).collect()),
        subscribed_topic_regex: req.subscribed_topic_regex.map(|s| s.to_string()),
        server_assignor: req.server_assignor.map(|s| s.to_string()),
        owned: req.topic_partitions.map(|tps| {
            tps.into_iter()
                .map(|tp| (tp.topic_id, tp.partitions))
                .collect()
        }),
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host(),
    };
    broker.groups.prepare_write().await;
    match broker
        .groups
        .consumer_heartbeat(&req.group_id, params)
        .await
    {
        Ok(r) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(sb(r.member_id)))
            .with_member_epoch(r.member_epoch)
            .with_heartbeat_interval_ms(interval)
            .with_assignment(r.assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(id)
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
        Err(e) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(e.error_code())
            .with_error_message(Some(sb(e.to_string())))
            .with_member_epoch(-1)
            .with_heartbeat_interval_ms(interval),
    }
}

/// Kafka's `handleConsumerGroupHeartbeat` checks: READ on the group, then DESCRIBE on
/// every subscribed topic named (clients may not learn of topics they cannot describe).
fn consumer_heartbeat_denied(
    broker: &Broker,
    ctx: &RequestContext,
    req: &ConsumerGroupHeartbeatRequest,
) -> Option<i16> {
    if !may_read_group(broker, ctx, &req.group_id) {
        return Some(GROUP_DENIED);
    }
    let topics = req.subscribed_topic_names.iter().flatten();
    let all_described = topics
        .into_iter()
        .all(|t| authorize(broker, ctx, AclOperation::Describe, ResourceType::Topic, t));
    (!all_described).then_some(ResponseError::TopicAuthorizationFailed.code())
}

/// DescribeGroups. An unknown group is described as Dead with no error before v6, and is
/// GROUP_ID_NOT_FOUND from v6 (KIP-1043), as in Kafka.
pub async fn handle_describe_groups(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let groups = req
        .groups
        .iter()
        .map(|g| {
            // Kafka's `handleDescribeGroupsRequest`: DESCRIBE on each group.
            if !authorize(broker, ctx, AclOperation::Describe, ResourceType::Group, g) {
                return DescribedGroup::default()
                    .with_group_id(g.clone())
                    .with_error_code(GROUP_DENIED)
                    .with_group_state(sb(""))
                    .with_authorized_operations(i32::MIN);
            }
            let base = DescribedGroup::default()
                .with_group_id(g.clone())
                .with_authorized_operations(if req.include_authorized_operations {
                    authorized_operations(broker, ctx, ResourceType::Group, g)
                } else {
                    i32::MIN
                });
            match broker.groups.describe(g) {
                Err(e) => base
                    .with_group_state(sb(""))
                    .with_error_code(e.error_code()),
                Ok(None) if ctx.api_version >= 6 => base
                    .with_group_state(sb("Dead"))
                    .with_error_code(GroupError::GroupIdNotFound.error_code())
                    .with_error_message(Some(sb(format!("group {} not found", g.as_str())))),
                Ok(None) => base.with_group_state(sb("Dead")),
                Ok(Some(d)) => base
                    .with_group_state(sb(d.state))
                    .with_protocol_type(sb(d.protocol_type))
                    .with_protocol_data(sb(d.protocol_data))
                    .with_members(
                        d.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(sb(m.member_id))
                                    .with_group_instance_id(m.group_instance_id.map(sb))
                                    .with_client_id(sb(m.client_id))
                                    .with_client_host(sb(m.client_host))
                                    .with_member_metadata(m.metadata)
                                    .with_member_assignment(m.assignment)
                            })
                            .collect(),
                    ),
            }
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

/// ListGroups, with the states filter (v4+) and the types filter (v5+).
pub async fn handle_list_groups(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let states: Vec<String> = if ctx.api_version >= 4 {
        req.states_filter.iter().map(|s| s.to_string()).collect()
    } else {
        Vec::new()
    };
    let types: Vec<String> = if ctx.api_version >= 5 {
        req.types_filter.iter().map(|s| s.to_string()).collect()
    } else {
        Vec::new()
    };
    // Kafka's `handleListGroupsRequest`: DESCRIBE on the cluster lists every group, else
    // only those the session may describe.
    let everything = authorize_cluster(broker, ctx, AclOperation::Describe);
    let groups = broker
        .groups
        .list(&states, &types)
        .into_iter()
        .filter(|g| {
            everything
                || authorize(
                    broker,
                    ctx,
                    AclOperation::Describe,
                    ResourceType::Group,
                    &g.group_id,
                )
        })
        .map(|g| {
            ListedGroup::default()
                .with_group_id(sb(g.group_id).into())
                .with_protocol_type(sb(g.protocol_type))
                .with_group_state(sb(g.state))
                .with_group_type(sb(g.group_type))
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

/// DeleteGroups v0-3. v3's `ErrorMessage` stays null: Kafka's `GroupCoordinatorShard.deleteGroups`
/// answers classic and consumer groups with a code alone (the message carries a streams
/// group's topology errors, and Brook has no streams groups).
pub async fn handle_delete_groups(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(req.groups_names.len());
    for g in &req.groups_names {
        // DELETE on each group (Kafka's `handleDeleteGroupsRequest`).
        let allowed = authorize(broker, ctx, AclOperation::Delete, ResourceType::Group, g);
        let code = if !allowed {
            GROUP_DENIED
        } else if let Err(code) = super::share_offsets::delete_share_group_state(broker, g).await {
            code
        } else {
            match broker.groups.delete_group(g).await {
                Ok(()) => 0,
                Err(e) => e.error_code(),
            }
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(g.clone())
                .with_error_code(code),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}

/// ConsumerGroupDescribe (KIP-848 groups; others get GROUP_ID_NOT_FOUND, as in Kafka): per
/// group, as Kafka's `KafkaApis.handleConsumerGroupDescribe`, the DESCRIBE check, then the
/// coordinator's description.
pub async fn handle_consumer_group_describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let groups = req
        .group_ids
        .iter()
        .map(|g| {
            if !authorize(broker, ctx, AclOperation::Describe, ResourceType::Group, g) {
                return cgd::DescribedGroup::default()
                    .with_group_id(g.clone())
                    .with_error_code(GROUP_DENIED)
                    .with_error_message(Some(sb(denied(ResponseError::GroupAuthorizationFailed).1)))
                    .with_authorized_operations(i32::MIN);
            }
            let base = cgd::DescribedGroup::default()
                .with_group_id(g.clone())
                .with_authorized_operations(if req.include_authorized_operations {
                    authorized_operations(broker, ctx, ResourceType::Group, g)
                } else {
                    i32::MIN
                });
            match broker.groups.describe_consumer_group(g) {
                Err(e) => base
                    .with_error_code(e.error_code())
                    .with_error_message(Some(sb(format!(
                        "group {} is not a consumer group",
                        g.as_str()
                    )))),
                Ok(d) => base
                    .with_group_state(sb(d.state))
                    .with_group_epoch(d.group_epoch)
                    .with_assignment_epoch(d.assignment_epoch)
                    .with_assignor_name(sb(d.assignor))
                    .with_members(
                        d.members
                            .iter()
                            .map(|(m, target)| described_member(broker, m, target))
                            .collect(),
                    ),
            }
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

/// A member as ConsumerGroupDescribe describes it, with its current and target assignments.
fn described_member(
    broker: &Broker,
    m: &crate::group::consumer::ConsumerMember,
    target: &crate::group::consumer::TopicPartitions,
) -> cgd::Member {
    cgd::Member::default()
        .with_member_id(sb(m.member_id.clone()))
        .with_instance_id(m.instance_id.clone().map(sb))
        .with_rack_id(m.rack_id.clone().map(sb))
        .with_member_epoch(m.member_epoch)
        .with_client_id(sb(m.client_id.clone()))
        .with_client_host(sb(m.client_host.clone()))
        .with_subscribed_topic_names(
            m.subscribed_topics
                .iter()
                .map(|t| sb(t.clone()).into())
                .collect(),
        )
        .with_subscribed_topic_regex(m.subscribed_regex.clone().map(sb))
        .with_assignment(described_assignment(broker, &m.assigned))
        .with_target_assignment(described_assignment(broker, target))
        .with_member_type(if m.classic.is_some() { 0 } else { 1 })
}

/// An assignment as ConsumerGroupDescribe describes it: topics by id and name.
fn described_assignment(
    broker: &Broker,
    tp: &crate::group::consumer::TopicPartitions,
) -> cgd::Assignment {
    cgd::Assignment::default().with_topic_partitions(
        tp.iter()
            .map(|(id, ps)| {
                cgd::TopicPartitions::default()
                    .with_topic_id(*id)
                    .with_topic_name(sb(broker.groups.topic_name(*id).unwrap_or_default()).into())
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

/// The node that coordinates `group`: the leader of the group's `__consumer_offsets`
/// partition in the committed image, as in Kafka. A partition
/// without a live leader is ResponseError::CoordinatorNotAvailable.code(); the client asks again.
fn group_coordinator(
    broker: &Broker,
    listener: &str,
    group: &str,
) -> Result<(i32, String, i32), (i16, String)> {
    coordinator_of(
        broker,
        listener,
        OFFSETS_TOPIC,
        broker.groups.offsets_partition_for(group),
    )
}

/// The coordinator for partition `index` of an internal topic: its leader, at its endpoint
/// on `listener` (Kafka's `MetadataCache.getAliveBrokerNode(id, listenerName)`).
fn coordinator_of(
    broker: &Broker,
    listener: &str,
    topic: &str,
    index: i32,
) -> Result<(i32, String, i32), (i16, String)> {
    let controller = broker.replicas.controller();
    let unavailable = |why: String| (GroupError::CoordinatorNotAvailable.error_code(), why);
    let image = controller.image().borrow().clone();
    let leader = image
        .topic_by_name(topic)
        .and_then(|t| t.partitions.iter().find(|p| p.index == index))
        .map(|p| p.leader)
        .ok_or_else(|| unavailable(format!("{topic}-{index} is not in the metadata yet")))?;
    let live = image.brokers.get(&leader).filter(|b| !b.fenced);
    match live.and_then(|b| Some((b.node_id, b.endpoint(listener)?))) {
        Some((id, (host, port))) => Ok((id, host.to_string(), port as i32)),
        None => Err(unavailable(format!("{topic}-{index} has no live leader"))),
    }
}
