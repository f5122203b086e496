//! CreateTopics, DeleteTopics and CreatePartitions, held to the client's
//! `controller_mutation_rate` (Kafka's `ControllerApis` with its `ControllerMutationQuota`):
//! each topic goes to the active controller with the client's principal and client id, as
//! Kafka's forwarding envelope carries them, and the controller charges the client's bucket
//! there, so a client's requests through every broker share one bucket. Each topic takes as
//! many tokens as partitions it creates or deletes once the controller has accepted it, so a
//! refused topic costs nothing. From CreateTopics v6, DeleteTopics v5
//! and CreatePartitions v3 the quota is strict: a topic asked for once the tokens are spent
//! gets THROTTLING_QUOTA_EXCEEDED (after the controller's own validation, as Kafka applies
//! the quota last); older versions are accepted and throttled. Either way the answer carries
//! the throttle time and the connection is muted for it (KIP-219).

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse,
};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::auth_helper::{authorize, authorize_cluster};
use super::configs::{config_source, topic_config_entries};
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::cluster::replica_manager::now_ms;
use crate::controller::request::MutationQuotaKey;
use crate::controller::{ControllerReply, ControllerRequest};
use crate::quota::KeptThrottle;
use crate::security::acl::{AclOperation, ResourceType};

/// Kafka's message for a topic refused by the authorizer (`ControllerApis`).
const AUTHORIZATION_FAILED: &str = "Authorization failed.";

/// The versions from which a request's mutation quota is strict (the `strictSinceVersion`s
/// Kafka's `ControllerApis` passes).
const CREATE_TOPICS_STRICT_SINCE: i16 = 6;
const DELETE_TOPICS_STRICT_SINCE: i16 = 5;
const CREATE_PARTITIONS_STRICT_SINCE: i16 = 3;

/// `Errors.THROTTLING_QUOTA_EXCEEDED`'s message, what Kafka answers a refused topic with.
const THROTTLING_QUOTA_EXCEEDED: &str = "The throttling quota has been exceeded.";

/// One request's controller mutation quota as the broker taking it sees it: whose bucket
/// the controller charges (Kafka's `newQuotaFor(request, strictSince)` on the controller,
/// from the forwarded principal and client id) and the throttle time it last answered.
struct MutationQuota {
    key: MutationQuotaKey,
    throttle: KeptThrottle,
}

fn mutation_quota(ctx: &RequestContext, strict_since: i16) -> MutationQuota {
    MutationQuota {
        key: MutationQuotaKey {
            user: ctx.session.principal.name.clone(),
            client_id: ctx.client_id.as_deref().unwrap_or("").to_string(),
            strict: ctx.api_version >= strict_since,
        },
        throttle: KeptThrottle::default(),
    }
}

/// `req` decided by the active controller against the client's bucket: its reply, or
/// THROTTLING_QUOTA_EXCEEDED; a throttle time in the controller's answer is kept for ours.
async fn charged(
    broker: &Broker,
    quota: &mut MutationQuota,
    req: ControllerRequest,
) -> Result<ControllerReply, Refusal> {
    let (reply, throttle_ms) = broker
        .replicas
        .controller()
        .submit_mutation(req, quota.key.clone())
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    if throttle_ms > 0 {
        quota.throttle.keep(i64::from(throttle_ms), now_ms());
    }
    reply.ok_or_else(throttled)
}

/// The answer's throttle time: the one the controller answered, less the time since, for
/// which the connection is muted after the answer (Kafka's `sendForwardedResponse`).
fn throttle_answer(broker: &Broker, ctx: &RequestContext, quota: &MutationQuota) -> i32 {
    let ms = quota.throttle.left_ms(now_ms());
    if ms > 0 {
        broker.quotas.controller_mutation.throttle(ms);
        ctx.throttle.set(ms);
    }
    ms
}

/// A reply of another kind than the request's: a bug between broker and controller.
fn unexpected(reply: ControllerReply) -> Refusal {
    (
        ResponseError::UnknownServerError.code(),
        format!("unexpected controller reply {reply:?}"),
    )
}

fn throttled() -> Refusal {
    (
        ResponseError::ThrottlingQuotaExceeded.code(),
        THROTTLING_QUOTA_EXCEEDED.to_string(),
    )
}

/// `op` on the cluster or else on the topic (Kafka's `ControllerApis` checks).
fn may(broker: &Broker, ctx: &RequestContext, op: AclOperation, topic: &str) -> bool {
    authorize_cluster(broker, ctx, op) || authorize(broker, ctx, op, ResourceType::Topic, topic)
}

/// Answers CreateTopics.
pub async fn handle_create_topics(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut quota = mutation_quota(ctx, CREATE_TOPICS_STRICT_SINCE);
    let mut seen = std::collections::HashSet::new();
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.name.to_string();
        let result = CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_num_partitions(-1)
            .with_replication_factor(-1);
        if !seen.insert(name.clone()) {
            topics.push(
                result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(sb(format!("topic {name} is listed twice")))),
            );
            continue;
        }
        if !may(broker, ctx, AclOperation::Create, &name) {
            topics.push(
                result
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(sb(AUTHORIZATION_FAILED))),
            );
            continue;
        }
        let mut configs = BTreeMap::new();
        for c in &t.configs {
            if let Some(v) = &c.value {
                configs.insert(c.name.to_string(), v.to_string());
            }
        }
        let outcome = create_topic(broker, &mut quota, &name, &t, configs, req.validate_only).await;
        topics.push(created_topic_result(broker, ctx, &name, result, outcome));
    }
    CreateTopicsResponse::default()
        .with_throttle_time_ms(throttle_answer(broker, ctx, &quota))
        .with_topics(topics)
}

type Refusal = (i16, String);

/// A topic's CreateTopics answer: its error, or its id, partitions, replication factor and
/// configs; the configs only with DESCRIBE_CONFIGS on the topic (Kafka's
/// `ControllerApis.createTopics` and its `describableTopicNames`).
fn created_topic_result(
    broker: &Broker,
    ctx: &RequestContext,
    name: &str,
    result: CreatableTopicResult,
    outcome: Result<crate::controller::TopicImage, Refusal>,
) -> CreatableTopicResult {
    let describable = || {
        authorize(
            broker,
            ctx,
            AclOperation::DescribeConfigs,
            ResourceType::Topic,
            name,
        )
    };
    match outcome {
        Ok(meta) if !describable() => result
            .with_topic_id(meta.id)
            .with_topic_config_error_code(ResponseError::TopicAuthorizationFailed.code()),
        Ok(meta) => {
            let dynamic = broker.replicas.dynamic_broker_configs();
            let entries = topic_config_entries(broker, &dynamic, &meta.configs)
                .into_iter()
                .map(|e| {
                    CreatableTopicConfigs::default()
                        .with_name(sb(e.name))
                        .with_value(e.value.map(sb))
                        .with_config_source(config_source(e.source))
                })
                .collect();
            result
                .with_topic_id(meta.id)
                .with_num_partitions(meta.partition_count())
                .with_replication_factor(meta.replication_factor())
                .with_configs(Some(entries))
        }
        Err((code, msg)) => result
            .with_error_code(code)
            .with_error_message(Some(sb(msg))),
    }
}

/// The controller validates the request (manual assignments included), charges the client's
/// bucket, and assigns and commits the topic, or for `validate_only` only answers; a client
/// out of tokens under a strict quota has the topic validated only, and refused if it is
/// valid; an accepted topic (validated only or not, as Kafka counts both) takes its
/// partitions' tokens. The answer waits until this node's image has the topic, so a
/// Metadata request right after sees it.
async fn create_topic(
    broker: &Broker,
    quota: &mut MutationQuota,
    name: &str,
    t: &kafka_protocol::messages::create_topics_request::CreatableTopic,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<crate::controller::TopicImage, Refusal> {
    crate::metadata::validate_topic_name(name)
        .map_err(|m| (ResponseError::InvalidTopicException.code(), m))?;
    broker
        .config
        .validate_topic_configs(&broker.replicas.dynamic_broker_configs(), &configs)
        .map_err(|e| (ResponseError::InvalidConfig.code(), e.to_string()))?;
    // -1 takes the broker's default, except with manual assignments, where the controller
    // requires -1.
    let manual = !t.assignments.is_empty();
    let partitions = match t.num_partitions {
        -1 if !manual => broker.config.num_partitions,
        p => p,
    };
    let rf = match t.replication_factor {
        -1 if !manual => broker.config.default_replication_factor,
        rf => rf,
    };
    let req = ControllerRequest::CreateTopic {
        name: name.to_string(),
        partitions,
        replication_factor: rf,
        configs: configs.clone(),
        assignments: t
            .assignments
            .iter()
            .map(|a| {
                (
                    a.partition_index,
                    a.broker_ids.iter().map(|b| b.0).collect(),
                )
            })
            .collect(),
        validate_only,
    };
    let (id, parts) = match charged(broker, quota, req).await? {
        ControllerReply::TopicCreated { id, partitions } => (id, partitions),
        other => return Err(unexpected(other)),
    };
    if !validate_only {
        broker
            .replicas
            .wait_for_metadata(std::time::Duration::from_secs(10), |rm| {
                rm.topic(name).is_some()
            })
            .await;
    }
    Ok(crate::controller::TopicImage {
        name: name.into(),
        // A validate-only answer names no topic that exists.
        id: if validate_only { Uuid::nil() } else { id },
        partitions: parts,
        configs,
    })
}

/// Answers DeleteTopics (by name, or by id from v6).
pub async fn handle_delete_topics(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let mut quota = mutation_quota(ctx, DELETE_TOPICS_STRICT_SINCE);
    let mut targets: Vec<(Option<String>, Uuid)> = req
        .topic_names
        .iter()
        .map(|n| (Some(n.to_string()), Uuid::nil()))
        .collect();
    targets.extend(
        req.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.to_string()), t.topic_id)),
    );
    let mut responses = Vec::with_capacity(targets.len());
    for (name, id) in targets {
        let name = match name.or_else(|| broker.replicas.topic_name_by_id(id)) {
            Some(n) => n,
            None => {
                responses.push(
                    DeletableTopicResult::default()
                        .with_topic_id(id)
                        .with_error_code(ResponseError::UnknownTopicId.code()),
                );
                continue;
            }
        };
        let result = DeletableTopicResult::default().with_name(Some(sb(name.clone()).into()));
        // DELETE on the cluster, or DESCRIBE and DELETE on the topic.
        let allowed = authorize_cluster(broker, ctx, AclOperation::Delete)
            || (authorize(
                broker,
                ctx,
                AclOperation::Describe,
                ResourceType::Topic,
                &name,
            ) && authorize(
                broker,
                ctx,
                AclOperation::Delete,
                ResourceType::Topic,
                &name,
            ));
        if !allowed {
            responses.push(
                result
                    .with_topic_id(id)
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(sb(AUTHORIZATION_FAILED))),
            );
            continue;
        }
        let outcome = delete_within_quota(broker, &mut quota, &name, id).await;
        responses.push(match outcome {
            Ok(id) => result.with_topic_id(id),
            Err((code, msg)) => result
                .with_topic_id(id)
                .with_error_code(code)
                .with_error_message(Some(sb(msg))),
        });
    }
    DeleteTopicsResponse::default()
        .with_throttle_time_ms(throttle_answer(broker, ctx, &quota))
        .with_responses(responses)
}

/// Deletes `name` through the controller, held to the mutation quota: a topic the
/// controller knows takes its partition count in tokens, and under a strict quota with none
/// left is refused (Kafka checks the topic exists before it applies the quota).
async fn delete_within_quota(
    broker: &Broker,
    quota: &mut MutationQuota,
    name: &str,
    id: Uuid,
) -> Result<Uuid, Refusal> {
    let id = broker.replicas.topic(name).map_or(id, |t| t.id);
    let req = ControllerRequest::DeleteTopic {
        name: name.to_string(),
    };
    charged(broker, quota, req).await?;
    broker.replicas.wait_caught_up().await;
    Ok(id)
}

/// Answers CreatePartitions.
pub async fn handle_create_partitions(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut quota = mutation_quota(ctx, CREATE_PARTITIONS_STRICT_SINCE);
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
        let name = t.name.to_string();
        if !may(broker, ctx, AclOperation::Alter, &name) {
            results.push(
                result
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(sb(AUTHORIZATION_FAILED))),
            );
            continue;
        }
        let assignments = t.assignments.as_ref().map(|a| {
            a.iter()
                .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                .collect()
        });
        let outcome = grow_within_quota(
            broker,
            &mut quota,
            &name,
            t.count,
            assignments,
            req.validate_only,
        )
        .await;
        results.push(match outcome {
            Ok(()) => result,
            Err((code, msg)) => result
                .with_error_code(code)
                .with_error_message(Some(sb(msg))),
        });
    }
    CreatePartitionsResponse::default()
        .with_throttle_time_ms(throttle_answer(broker, ctx, &quota))
        .with_results(results)
}

/// Grows `name` to `count` partitions through the controller, held to the mutation quota:
/// the partitions added take their tokens; under a strict quota with none left the request
/// is validated only and, if valid, refused.
async fn grow_within_quota(
    broker: &Broker,
    quota: &mut MutationQuota,
    name: &str,
    count: i32,
    assignments: Option<Vec<Vec<i32>>>,
    validate_only: bool,
) -> Result<(), Refusal> {
    let req = ControllerRequest::CreatePartitions {
        name: name.to_string(),
        total_count: count,
        assignments,
        validate_only,
    };
    charged(broker, quota, req).await?;
    if !validate_only {
        broker.replicas.wait_caught_up().await;
    }
    Ok(())
}
