//! StreamsGroupHeartbeat and StreamsGroupDescribe (KIP-1071), as Kafka's `KafkaApis`
//! serves them: gated by the `streams.version` feature, READ on the group (and DESCRIBE on
//! the topology's topics) for a heartbeat, DESCRIBE on each group for a description. The
//! internal topics a heartbeat reports missing are created here, after the answer is built,
//! as `KafkaApis.handleStreamsGroupHeartbeat` does with `createStreamsInternalTopics`.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::streams_group_describe_response as sgd;
use kafka_protocol::messages::streams_group_heartbeat_request as req_msg;
use kafka_protocol::messages::streams_group_heartbeat_response as sgh;
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;

use super::auth_helper::{authorize, authorize_cluster, authorized_operations};
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::group::streams::{StreamsHeartbeat, Tasks, TasksTuple};
use crate::group::streams_topology::{Subtopology, TopicInfo, Topology};
use crate::security::acl::{AclOperation, ResourceType};

const GROUP_DENIED: i16 = ResponseError::GroupAuthorizationFailed.code();

/// StreamsGroupHeartbeat, in the steps of Kafka's `KafkaApis.handleStreamsGroupHeartbeat`:
/// the feature and ACL checks, the coordinator's heartbeat, the creation of missing internal
/// topics, then the answer.
pub async fn handle_streams_group_heartbeat(
    broker: &Broker,
    ctx: &RequestContext,
    req: StreamsGroupHeartbeatRequest,
) -> StreamsGroupHeartbeatResponse {
    let limits = broker.groups.streams_limits(&req.group_id);
    let error = |code: i16, message: Option<String>| {
        StreamsGroupHeartbeatResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(sb))
            .with_member_epoch(-1)
            .with_heartbeat_interval_ms(limits.heartbeat_interval_ms)
    };
    if !crate::api::features::enabled(broker, crate::features::STREAMS_VERSION) {
        return error(ResponseError::UnsupportedVersion.code(), None);
    }
    if !authorize(
        broker,
        ctx,
        AclOperation::Read,
        ResourceType::Group,
        &req.group_id,
    ) {
        return error(GROUP_DENIED, None);
    }
    let topology = req.topology.as_ref().map(topology_from_request);
    if topology
        .as_ref()
        .is_some_and(|t| !topology_topics_authorized(broker, ctx, t))
    {
        return error(ResponseError::TopicAuthorizationFailed.code(), None);
    }
    let group_id = req.group_id.to_string();
    let params = heartbeat_params(ctx, req, topology);
    broker.groups.prepare_write().await;
    let r = match broker.groups.streams_heartbeat(&group_id, params).await {
        Ok(r) => r,
        Err(e) => return error(e.error_code(), Some(e.to_string())),
    };
    let mut status = r.status.clone();
    if !r.to_create.is_empty() {
        if let Some(detail) = create_internal_topics(broker, ctx, &r.to_create) {
            status.push((
                crate::group::streams::status::MISSING_INTERNAL_TOPICS,
                detail,
            ));
        }
    }
    heartbeat_response(
        broker,
        ctx,
        &group_id,
        limits.heartbeat_interval_ms,
        r,
        status,
    )
}

/// DESCRIBE on every topic the topology names, its repartition sink topics included.
fn topology_topics_authorized(broker: &Broker, ctx: &RequestContext, t: &Topology) -> bool {
    !t.all_topics()
        .iter()
        .chain(
            t.subtopologies
                .iter()
                .flat_map(|s| &s.repartition_sink_topics),
        )
        .any(|n| !authorize(broker, ctx, AclOperation::Describe, ResourceType::Topic, n))
}

/// The answer to a heartbeat the coordinator accepted: the group's `streams.*` settings
/// (or Kafka's defaults), the statuses, the member's tasks and the endpoints' partitions.
fn heartbeat_response(
    broker: &Broker,
    ctx: &RequestContext,
    group_id: &str,
    heartbeat_interval_ms: i32,
    r: crate::group::streams::StreamsHeartbeatResult,
    status: Vec<(i8, String)>,
) -> StreamsGroupHeartbeatResponse {
    let settings = broker.replicas.group_configs(group_id);
    let recovery_lag = settings
        .get("streams.acceptable.recovery.lag")
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(ACCEPTABLE_RECOVERY_LAG_DEFAULT);
    let offset_interval_ms = settings
        .get("streams.task.offset.interval.ms")
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(TASK_OFFSET_INTERVAL_MS_DEFAULT);
    StreamsGroupHeartbeatResponse::default()
        .with_member_id(sb(r.member_id))
        .with_member_epoch(r.member_epoch)
        .with_heartbeat_interval_ms(heartbeat_interval_ms)
        .with_acceptable_recovery_lag_legacy(if ctx.api_version == 0 {
            recovery_lag.min(i32::MAX as i64) as i32
        } else {
            0
        })
        .with_acceptable_recovery_lag(if ctx.api_version >= 1 {
            recovery_lag
        } else {
            -1
        })
        .with_task_offset_interval_ms(offset_interval_ms)
        .with_status((!status.is_empty()).then(|| {
            status
                .into_iter()
                .map(|(code, detail)| {
                    sgh::Status::default()
                        .with_status_code(code)
                        .with_status_detail(sb(detail))
                })
                .collect()
        }))
        .with_active_tasks(r.tasks.as_ref().map(|t| task_ids(&t.active)))
        .with_standby_tasks(r.tasks.as_ref().map(|t| task_ids(&t.standby)))
        .with_warmup_tasks(r.tasks.as_ref().map(|t| task_ids(&t.warmup)))
        .with_endpoint_information_epoch(r.endpoint_information_epoch)
        .with_partitions_by_user_endpoint(r.partitions_by_endpoint.map(endpoints_to_partitions))
}

/// Tasks as the heartbeat answer lists them.
fn task_ids(t: &Tasks) -> Vec<sgh::TaskIds> {
    t.iter()
        .map(|(s, ps)| {
            sgh::TaskIds::default()
                .with_subtopology_id(sb(s.clone()))
                .with_partitions(ps.iter().copied().collect())
        })
        .collect()
}

/// Each endpoint's active and standby partitions, as the heartbeat answer lists them.
fn endpoints_to_partitions(
    eps: Vec<crate::group::streams::EndpointPartitions>,
) -> Vec<sgh::EndpointToPartitions> {
    eps.into_iter()
        .map(|e| {
            let parts = |m: &BTreeMap<String, BTreeSet<i32>>| {
                m.iter()
                    .map(|(t, ps)| {
                        sgh::TopicPartition::default()
                            .with_topic(sb(t.clone()).into())
                            .with_partitions(ps.iter().copied().collect())
                    })
                    .collect()
            };
            sgh::EndpointToPartitions::default()
                .with_user_endpoint(
                    sgh::Endpoint::default()
                        .with_host(sb(e.endpoint.0.clone()))
                        .with_port(e.endpoint.1),
                )
                .with_active_partitions(parts(&e.active))
                .with_standby_partitions(parts(&e.standby))
        })
        .collect()
}

/// Kafka's `group.streams.acceptable.recovery.lag` default.
const ACCEPTABLE_RECOVERY_LAG_DEFAULT: i64 = 10_000;
/// Kafka's `group.streams.task.offset.interval.ms` default.
const TASK_OFFSET_INTERVAL_MS_DEFAULT: i32 = 60_000;

/// Starts the creation of missing internal topics the session may create (CREATE on the
/// cluster or on the topic, as Kafka's `handleStreamsGroupHeartbeat` checks); returns the
/// detail of a status naming those it may not.
fn create_internal_topics(
    broker: &Broker,
    ctx: &RequestContext,
    topics: &[crate::group::streams_topology::TopicToCreate],
) -> Option<String> {
    let cluster = authorize_cluster(broker, ctx, AclOperation::Create);
    let (allowed, denied): (Vec<_>, Vec<_>) = topics.iter().partition(|t| {
        cluster
            || authorize(
                broker,
                ctx,
                AclOperation::Create,
                ResourceType::Topic,
                &t.name,
            )
    });
    broker
        .auto_topics
        .create_streams_internal_topics(allowed.into_iter().cloned().collect());
    (!denied.is_empty()).then(|| {
        let names: Vec<&str> = denied.iter().map(|t| t.name.as_str()).collect();
        format!("Unauthorized to CREATE on topics {}.", names.join(", "))
    })
}

fn heartbeat_params(
    ctx: &RequestContext,
    req: StreamsGroupHeartbeatRequest,
    topology: Option<Topology>,
) -> StreamsHeartbeat {
    let tasks = |t: Vec<req_msg::TaskIds>| -> Tasks {
        t.into_iter()
            .filter(|t| !t.partitions.is_empty())
            .map(|t| {
                (
                    t.subtopology_id.to_string(),
                    t.partitions.into_iter().collect(),
                )
            })
            .collect()
    };
    // Kafka requires all three lists or none; a request with only some is taken as none.
    let owned = match (req.active_tasks, req.standby_tasks, req.warmup_tasks) {
        (Some(a), Some(s), Some(w)) => Some(TasksTuple {
            active: tasks(a),
            standby: tasks(s),
            warmup: tasks(w),
        }),
        _ => None,
    };
    StreamsHeartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        endpoint_information_epoch: req.endpoint_information_epoch,
        instance_id: req.instance_id.map(|s| s.to_string()),
        rack_id: req.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        topology,
        owned,
        process_id: req.process_id.map(|s| s.to_string()),
        user_endpoint: req.user_endpoint.map(|e| (e.host.to_string(), e.port)),
        client_tags: req.client_tags.map(|kvs| {
            kvs.into_iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect()
        }),
        shutdown_application: req.shutdown_application,
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host(),
    }
}

fn topic_info(t: &req_msg::TopicInfo) -> TopicInfo {
    TopicInfo {
        name: t.name.to_string(),
        partitions: t.partitions,
        replication_factor: t.replication_factor,
        configs: t
            .topic_configs
            .iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect(),
    }
}

fn topology_from_request(t: &req_msg::Topology) -> Topology {
    Topology {
        epoch: t.epoch,
        subtopologies: t
            .subtopologies
            .iter()
            .map(|s| Subtopology {
                id: s.subtopology_id.to_string(),
                source_topics: s.source_topics.iter().map(|t| t.to_string()).collect(),
                repartition_sink_topics: s
                    .repartition_sink_topics
                    .iter()
                    .map(|t| t.to_string())
                    .collect(),
                state_changelog_topics: s.state_changelog_topics.iter().map(topic_info).collect(),
                repartition_source_topics: s
                    .repartition_source_topics
                    .iter()
                    .map(topic_info)
                    .collect(),
                copartition_groups: s
                    .copartition_groups
                    .iter()
                    .map(|g| (g.source_topics.clone(), g.repartition_source_topics.clone()))
                    .collect(),
            })
            .collect(),
    }
}

/// StreamsGroupDescribe (streams groups; any other group is GROUP_ID_NOT_FOUND, as in
/// Kafka).
pub async fn handle_streams_group_describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: StreamsGroupDescribeRequest,
) -> StreamsGroupDescribeResponse {
    let groups = req
        .group_ids
        .iter()
        .map(|g| {
            if !authorize(broker, ctx, AclOperation::Describe, ResourceType::Group, g) {
                return sgd::DescribedGroup::default()
                    .with_group_id(g.clone())
                    .with_error_code(GROUP_DENIED)
                    .with_authorized_operations(i32::MIN);
            }
            let base = sgd::DescribedGroup::default()
                .with_group_id(g.clone())
                .with_authorized_operations(if req.include_authorized_operations {
                    authorized_operations(broker, ctx, ResourceType::Group, g)
                } else {
                    i32::MIN
                });
            match broker.groups.describe_streams_group(g) {
                Err(e) => base
                    .with_error_code(e.error_code())
                    .with_error_message(Some(sb(e.to_string()))),
                Ok(d) => described(base, d),
            }
        })
        .collect();
    StreamsGroupDescribeResponse::default().with_groups(groups)
}

fn described(
    base: sgd::DescribedGroup,
    d: crate::group::streams::StreamsGroupDescription,
) -> sgd::DescribedGroup {
    let task_ids = |t: &Tasks| {
        t.iter()
            .map(|(s, ps)| {
                sgd::TaskIds::default()
                    .with_subtopology_id(sb(s.clone()))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect()
    };
    let assignment = |t: &TasksTuple| {
        sgd::Assignment::default()
            .with_active_tasks(task_ids(&t.active))
            .with_standby_tasks(task_ids(&t.standby))
            .with_warmup_tasks(task_ids(&t.warmup))
    };
    let members = d
        .members
        .iter()
        .map(|(m, target)| {
            sgd::Member::default()
                .with_member_id(sb(m.member_id.clone()))
                .with_member_epoch(m.member_epoch)
                .with_instance_id(m.instance_id.clone().map(sb))
                .with_rack_id(m.rack_id.clone().map(sb))
                .with_client_id(sb(m.client_id.clone()))
                .with_client_host(sb(m.client_host.clone()))
                .with_topology_epoch(m.topology_epoch)
                .with_process_id(sb(m.process_id.clone()))
                .with_user_endpoint(
                    m.user_endpoint
                        .clone()
                        .map(|(h, p)| sgd::Endpoint::default().with_host(sb(h)).with_port(p)),
                )
                .with_client_tags(
                    m.client_tags
                        .iter()
                        .map(|(k, v)| {
                            sgd::KeyValue::default()
                                .with_key(sb(k.clone()))
                                .with_value(sb(v.clone()))
                        })
                        .collect(),
                )
                .with_assignment(assignment(&m.assigned))
                .with_target_assignment(assignment(target))
        })
        .collect();
    base.with_group_state(sb(d.state))
        .with_group_epoch(d.group_epoch)
        .with_assignment_epoch(d.assignment_epoch)
        .with_topology(d.topology.map(described_topology))
        .with_members(members)
}

fn described_topology(t: Topology) -> sgd::Topology {
    let info = |t: &TopicInfo| {
        sgd::TopicInfo::default()
            .with_name(sb(t.name.clone()).into())
            .with_partitions(t.partitions)
            .with_replication_factor(t.replication_factor)
            .with_topic_configs(
                t.configs
                    .iter()
                    .map(|(k, v)| {
                        sgd::KeyValue::default()
                            .with_key(sb(k.clone()))
                            .with_value(sb(v.clone()))
                    })
                    .collect(),
            )
    };
    let names = |v: &[String]| v.iter().map(|t| sb(t.clone()).into()).collect();
    sgd::Topology::default()
        .with_epoch(t.epoch)
        .with_subtopologies(Some(
            t.subtopologies
                .iter()
                .map(|s| {
                    sgd::Subtopology::default()
                        .with_subtopology_id(sb(s.id.clone()))
                        .with_source_topics(names(&s.source_topics))
                        .with_repartition_sink_topics(names(&s.repartition_sink_topics))
                        .with_state_changelog_topics(
                            s.state_changelog_topics.iter().map(info).collect(),
                        )
                        .with_repartition_source_topics(
                            s.repartition_source_topics.iter().map(info).collect(),
                        )
                })
                .collect(),
        ))
}
