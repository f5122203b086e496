//! DescribeConfigs and IncrementalAlterConfigs for topic configs (and read-only broker
//! configs).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::ResponseError;

use super::{sb, RequestContext};
use crate::config::TOPIC_CONFIG_KEYS;
use crate::server::Broker;

/// Config resource types.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// Where a config value comes from, as DescribeConfigs reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    TopicOverride,
    StaticBroker,
    Default,
}

/// The wire code of a [`Source`].
pub fn config_source(s: Source) -> i8 {
    match s {
        Source::TopicOverride => 1,
        Source::StaticBroker => 4,
        Source::Default => 5,
    }
}

/// One effective config value.
#[derive(Debug, Clone)]
pub struct ConfigEntry {
    pub name: String,
    pub value: String,
    pub source: Source,
    /// The value the entry would have without the override, when there is one.
    pub default: Option<(String, Source)>,
}

/// Kafka's config type codes (BOOLEAN 1, STRING 2, INT 3, LONG 5, LIST 7), as `ConfigDef` declares
/// each key in `ServerConfigs`/`SocketServerConfigs` and `LogConfig` (`max.connections*` are INT).
fn config_type(key: &str) -> i8 {
    match key {
        "unclean.leader.election.enable" | "auto.create.topics.enable" | "delete.topic.enable" => 1,
        "cleanup.policy"
        | "log.cleanup.policy"
        | "listeners"
        | "advertised.listeners"
        | "log.dirs" => 7,
        "retention.bytes"
        | "retention.ms"
        | "segment.ms"
        | "flush.messages"
        | "message.timestamp.before.max.ms"
        | "message.timestamp.after.max.ms"
        | "log.retention.bytes"
        | "log.retention.ms"
        | "log.roll.ms"
        | "log.flush.interval.messages" => 5,
        "max.message.bytes"
        | "min.insync.replicas"
        | "segment.bytes"
        | "segment.index.bytes"
        | "index.interval.bytes"
        | "node.id"
        | "num.partitions"
        | "message.max.bytes"
        | "max.connections"
        | "max.connections.per.ip"
        | "log.segment.bytes" => 3,
        _ => 2,
    }
}

/// Every topic config with its effective value for a topic with these overrides.
pub fn topic_config_entries(
    broker: &Broker,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    TOPIC_CONFIG_KEYS
        .iter()
        .map(|(topic_key, broker_key)| {
            let default_source = if broker.config.explicit.contains(*broker_key) {
                Source::StaticBroker
            } else {
                Source::Default
            };
            let default_value = broker.config.topic_default(topic_key).unwrap_or_default();
            match overrides.get(*topic_key) {
                Some(v) => ConfigEntry {
                    name: topic_key.to_string(),
                    value: v.clone(),
                    source: Source::TopicOverride,
                    default: Some((default_value, default_source)),
                },
                None => ConfigEntry {
                    name: topic_key.to_string(),
                    value: default_value,
                    source: default_source,
                    default: None,
                },
            }
        })
        .collect()
}

fn broker_config_entries(broker: &Broker) -> Vec<ConfigEntry> {
    broker
        .config
        .values
        .iter()
        .map(|(k, v)| ConfigEntry {
            name: k.clone(),
            value: v.clone(),
            source: if broker.config.explicit.contains(k) {
                Source::StaticBroker
            } else {
                Source::Default
            },
            default: None,
        })
        .collect()
}

fn to_result(e: ConfigEntry, include_synonyms: bool) -> DescribeConfigsResourceResult {
    let mut synonyms = Vec::new();
    if include_synonyms {
        synonyms.push(
            DescribeConfigsSynonym::default()
                .with_name(sb(e.name.clone()))
                .with_value(Some(sb(e.value.clone())))
                .with_source(config_source(e.source)),
        );
        if let Some((v, s)) = &e.default {
            synonyms.push(
                DescribeConfigsSynonym::default()
                    .with_name(sb(e.name.clone()))
                    .with_value(Some(sb(v.clone())))
                    .with_source(config_source(*s)),
            );
        }
    }
    DescribeConfigsResourceResult::default()
        .with_config_type(config_type(&e.name))
        .with_name(sb(e.name))
        .with_value(Some(sb(e.value)))
        .with_config_source(config_source(e.source))
        .with_synonyms(synonyms)
}

/// Answers DescribeConfigs.
pub async fn handle_describe_configs(
    broker: &Broker,
    _ctx: &RequestContext,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.to_string();
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let entries = match r.resource_type {
                RESOURCE_TOPIC => match broker.replicas.topic(&name) {
                    Some(t) => topic_config_entries(broker, &t.configs),
                    None => {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(sb(format!("topic {name} does not exist"))))
                    }
                },
                RESOURCE_BROKER if name.is_empty() || name == broker.node_id().to_string() => {
                    broker_config_entries(broker)
                }
                RESOURCE_BROKER => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(sb(format!("unknown broker {name}"))))
                }
                other => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(sb(format!("unsupported resource type {other}"))))
                }
            };
            let wanted: Option<Vec<String>> = r
                .configuration_keys
                .map(|ks| ks.iter().map(|k| k.to_string()).collect());
            let configs = entries
                .into_iter()
                .filter(|e| wanted.as_ref().is_none_or(|w| w.contains(&e.name)))
                .map(|e| to_result(e, req.include_synonyms))
                .collect();
            result.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Applies SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) to a topic's overrides.
fn apply_ops(
    current: &BTreeMap<String, String>,
    ops: &[(String, i8, Option<String>)],
) -> Result<BTreeMap<String, String>, String> {
    let mut next = current.clone();
    for (name, op, value) in ops {
        match op {
            0 => {
                let v = value
                    .clone()
                    .ok_or_else(|| format!("SET of {name} needs a value"))?;
                next.insert(name.clone(), v);
            }
            1 => {
                next.remove(name);
            }
            2 | 3 => {
                if config_type(name) != 7 {
                    return Err(format!(
                        "{name} is not a list; APPEND and SUBTRACT apply to lists only"
                    ));
                }
                let v = value.clone().unwrap_or_default();
                let mut items: Vec<String> = next
                    .get(name)
                    .map(|s| {
                        s.split(',')
                            .map(|x| x.trim().to_string())
                            .filter(|x| !x.is_empty())
                            .collect()
                    })
                    .unwrap_or_default();
                for item in v.split(',').map(str::trim).filter(|x| !x.is_empty()) {
                    if *op == 2 {
                        if !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    } else {
                        items.retain(|i| i != item);
                    }
                }
                next.insert(name.clone(), items.join(","));
            }
            other => return Err(format!("unknown config operation {other}")),
        }
    }
    Ok(next)
}

/// Whether a broker resource's changes are only the replication throttles that
/// `kafka-reassign-partitions` sets and clears.
fn only_replication_throttles(
    configs: &[kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
) -> bool {
    use crate::config::REPLICATION_THROTTLE_BROKER_KEYS as KEYS;
    !configs.is_empty() && configs.iter().all(|c| KEYS.contains(&c.name.as_str()))
}

/// Replication throttle rates are validated as Kafka does (a LONG of at least 0) and
/// accepted; Brook does not throttle replication, so nothing is stored.
fn accept_replication_throttles(
    configs: &[kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
) -> Result<(), String> {
    for c in configs.iter().filter(|c| c.config_operation == 0) {
        let v = c.value.as_deref().unwrap_or_default();
        crate::config::validate_throttle_rate(&c.name, v).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Answers IncrementalAlterConfigs for topics. Broker configs are static in Brook.
pub async fn handle_incremental_alter_configs(
    broker: &Broker,
    _ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        let name = r.resource_name.to_string();
        let resp = AlterConfigsResourceResponse::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone());
        if r.resource_type == RESOURCE_BROKER && only_replication_throttles(&r.configs) {
            responses.push(match accept_replication_throttles(&r.configs) {
                Ok(()) => resp,
                Err(msg) => resp
                    .with_error_code(ResponseError::InvalidConfig.code())
                    .with_error_message(Some(sb(msg))),
            });
            continue;
        }
        if r.resource_type != RESOURCE_TOPIC {
            responses.push(
                resp.with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(sb("only topic configs can be altered; broker configs are read from server.properties"))),
            );
            continue;
        }
        let Some(topic) = broker.replicas.topic(&name) else {
            responses.push(
                resp.with_error_code(ResponseError::UnknownTopicOrPartition.code())
                    .with_error_message(Some(sb(format!("topic {name} does not exist")))),
            );
            continue;
        };
        let ops: Vec<_> = r
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.config_operation,
                    c.value.as_ref().map(|v| v.to_string()),
                )
            })
            .collect();
        let next = match apply_ops(&topic.configs, &ops) {
            Ok(n) => n,
            Err(msg) => {
                responses.push(
                    resp.with_error_code(ResponseError::InvalidConfig.code())
                        .with_error_message(Some(sb(msg))),
                );
                continue;
            }
        };
        let outcome = match broker.replicas.controller() {
            Some(controller) => match broker.config.validate_topic_configs(&next) {
                Err(e) => Err((ResponseError::InvalidConfig.code(), e.to_string())),
                Ok(()) if req.validate_only => Ok(()),
                Ok(()) => {
                    // The controller takes changes: new values, and None for removed keys.
                    let mut diff: BTreeMap<String, Option<String>> = next
                        .iter()
                        .map(|(k, v)| (k.clone(), Some(v.clone())))
                        .collect();
                    for k in topic.configs.keys().filter(|k| !next.contains_key(*k)) {
                        diff.insert(k.clone(), None);
                    }
                    controller
                        .alter_configs(&name, diff)
                        .await
                        .map_err(|e| (e.code(), e.to_string()))
                }
            },
            None => broker
                .replicas
                .set_topic_configs(&name, next, req.validate_only)
                .map_err(|e| (e.error_code(), e.to_string())),
        };
        responses.push(match outcome {
            Ok(()) => resp,
            Err((code, msg)) => resp.with_error_code(code).with_error_message(Some(sb(msg))),
        });
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_operations() {
        let cur = BTreeMap::from([("cleanup.policy".to_string(), "delete".to_string())]);
        let next = apply_ops(
            &cur,
            &[("cleanup.policy".into(), 2, Some("compact".into()))],
        )
        .unwrap();
        assert_eq!(next["cleanup.policy"], "delete,compact");
        let next = apply_ops(
            &next,
            &[("cleanup.policy".into(), 3, Some("delete".into()))],
        )
        .unwrap();
        assert_eq!(next["cleanup.policy"], "compact");
        assert!(apply_ops(&cur, &[("retention.ms".into(), 2, Some("1".into()))]).is_err());
        let next = apply_ops(&cur, &[("cleanup.policy".into(), 1, None)]).unwrap();
        assert!(next.is_empty());
    }
}
