//! CreateTopics, DeleteTopics and CreatePartitions.

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
use uuid::Uuid;

use super::configs::{config_source, topic_config_entries};
use super::{sb, RequestContext};
use crate::server::Broker;

const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const INVALID_REQUEST: i16 = 42;
const UNKNOWN_TOPIC_ID: i16 = 100;

/// Answers CreateTopics.
pub async fn handle_create_topics(
    broker: &Broker,
    _ctx: &RequestContext,
    req: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut seen = std::collections::HashSet::new();
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.to_string();
            let result = CreatableTopicResult::default()
                .with_name(t.name.clone())
                .with_num_partitions(-1)
                .with_replication_factor(-1);
            if !seen.insert(name.clone()) {
                return result
                    .with_error_code(INVALID_REQUEST)
                    .with_error_message(Some(sb(format!("topic {name} is listed twice"))));
            }
            let (partitions, rf) =
                if t.assignments.is_empty() {
                    (t.num_partitions, t.replication_factor)
                } else {
                    if t.num_partitions != -1 || t.replication_factor != -1 {
                        return result.with_error_code(INVALID_REQUEST).with_error_message(Some(sb(
                        "both numPartitions or replicationFactor and replicasAssignments were set",
                    )));
                    }
                    let node = broker.node_id();
                    let ok = t
                        .assignments
                        .iter()
                        .all(|a| a.broker_ids.len() == 1 && a.broker_ids[0].0 == node);
                    if !ok {
                        return result
                            .with_error_code(INVALID_REPLICA_ASSIGNMENT)
                            .with_error_message(Some(sb(format!(
                                "replica assignments may only name broker {node}"
                            ))));
                    }
                    (t.assignments.len() as i32, 1)
                };
            let mut configs = BTreeMap::new();
            for c in &t.configs {
                if let Some(v) = &c.value {
                    configs.insert(c.name.to_string(), v.to_string());
                }
            }
            match broker
                .replicas
                .create_topic(&name, partitions, rf, configs, req.validate_only)
            {
                Ok(meta) => {
                    let entries = topic_config_entries(broker, &meta.configs)
                        .into_iter()
                        .map(|e| {
                            CreatableTopicConfigs::default()
                                .with_name(sb(e.name))
                                .with_value(Some(sb(e.value)))
                                .with_config_source(config_source(e.source))
                        })
                        .collect();
                    result
                        .with_topic_id(meta.id)
                        .with_num_partitions(meta.partitions)
                        .with_replication_factor(meta.replication_factor)
                        .with_configs(Some(entries))
                }
                Err(e) => result
                    .with_error_code(e.error_code())
                    .with_error_message(Some(sb(e.to_string()))),
            }
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

/// Answers DeleteTopics (by name, or by id from v6).
pub async fn handle_delete_topics(
    broker: &Broker,
    _ctx: &RequestContext,
    req: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
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
    let responses = targets
        .into_iter()
        .map(|(name, id)| {
            let name = match name {
                Some(n) => n,
                None => match broker.replicas.topic_name_by_id(id) {
                    Some(n) => n,
                    None => {
                        return DeletableTopicResult::default()
                            .with_topic_id(id)
                            .with_error_code(UNKNOWN_TOPIC_ID);
                    }
                },
            };
            let result = DeletableTopicResult::default().with_name(Some(sb(name.clone()).into()));
            match broker.replicas.delete_topic(&name) {
                Ok(meta) => result.with_topic_id(meta.id),
                Err(e) => result
                    .with_topic_id(id)
                    .with_error_code(e.error_code())
                    .with_error_message(Some(sb(e.to_string()))),
            }
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}

/// Answers CreatePartitions.
pub async fn handle_create_partitions(
    broker: &Broker,
    _ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let results = req
        .topics
        .into_iter()
        .map(|t| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            if let Some(assignments) = &t.assignments {
                let node = broker.node_id();
                if !assignments
                    .iter()
                    .all(|a| a.broker_ids.len() == 1 && a.broker_ids[0].0 == node)
                {
                    return result
                        .with_error_code(INVALID_REPLICA_ASSIGNMENT)
                        .with_error_message(Some(sb(format!(
                            "replica assignments may only name broker {node}"
                        ))));
                }
            }
            match broker
                .replicas
                .create_partitions(&t.name.to_string(), t.count, req.validate_only)
            {
                Ok(()) => result,
                Err(e) => result
                    .with_error_code(e.error_code())
                    .with_error_message(Some(sb(e.to_string()))),
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}
