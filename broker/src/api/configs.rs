//! DescribeConfigs, IncrementalAlterConfigs and the legacy AlterConfigs for topic, broker and
//! group configs, answered as Kafka 4.4's `ConfigHelper` (describe), `ConfigAdminManager`
//! (request checks) and `ConfigurationControlManager` with `ControllerConfigurationValidator`
//! (alter) do.
//!
//! A broker key's value comes from four layers, highest precedence first (Kafka's
//! `DynamicBrokerConfig`): the per-broker dynamic config (resource name = node id), the
//! cluster-wide dynamic default (resource name ""), server.properties, and the default. The
//! dynamic layers live in the metadata ([`DynamicBrokerConfigs`]: brook-metadata.json on a
//! single node, the quorum image in a cluster).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as LegacyAlterConfigsResourceResponse;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::ResponseError;

use kafka_protocol::protocol::StrBytes;

use super::auth_helper::{authorize, authorize_cluster};
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::config::{DynamicBrokerConfigs, BROKER_DEFAULTS};
use crate::config_def::{self, ConfigType};
use crate::security::acl::{AclOperation, ResourceType};

/// Config resource types (Kafka's `ConfigResource.Type`).
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_GROUP: i8 = 32;
pub const RESOURCE_CLIENT_METRICS: i8 = 16;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

/// Where a config value comes from (Kafka's `DescribeConfigsResponse.ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    TopicOverride,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
    GroupOverride,
    ClientMetrics,
}

/// The wire code of a [`Source`].
pub fn config_source(s: Source) -> i8 {
    match s {
        Source::TopicOverride => 1,
        Source::DynamicBroker => 2,
        Source::DynamicDefaultBroker => 3,
        Source::StaticBroker => 4,
        Source::Default => 5,
        Source::GroupOverride => 8,
        Source::ClientMetrics => 7,
    }
}

/// One layer's value of a key.
#[derive(Debug, Clone, PartialEq)]
pub struct Synonym {
    pub name: String,
    pub value: Option<String>,
    pub source: Source,
}

/// One described config (Kafka's `DescribeConfigsResourceResult` before encoding).
#[derive(Debug, Clone)]
pub struct ConfigEntry {
    pub name: String,
    /// `None` for a key without a value (a broker key whose default is null).
    pub value: Option<String>,
    pub source: Source,
    pub ty: ConfigType,
    pub read_only: bool,
    /// Every layer that sets the key or its synonyms, highest precedence first.
    pub synonyms: Vec<Synonym>,
    pub doc: &'static str,
}

/// The broker-key layers a node resolves values from.
struct BrokerLayers<'a> {
    broker: &'a Broker,
    per_broker: BTreeMap<String, String>,
    cluster_default: BTreeMap<String, String>,
}

impl<'a> BrokerLayers<'a> {
    fn new(broker: &'a Broker, dynamic: &DynamicBrokerConfigs) -> Self {
        let layer = |name: &str| dynamic.get(name).cloned().unwrap_or_default();
        BrokerLayers {
            broker,
            per_broker: layer(&broker.node_id().to_string()),
            cluster_default: layer(""),
        }
    }

    /// Kafka's `ConfigHelper.configSynonyms`: for each layer in precedence order, each of
    /// `names` that the layer sets; then everything before the first entry for `name` is
    /// dropped (so `log.retention.hours` does not list `log.retention.ms` above itself).
    fn synonyms(&self, name: &str, names: &[&str]) -> Vec<Synonym> {
        let config = &self.broker.config;
        let static_value = |k: &str| {
            config
                .explicit
                .contains(k)
                .then(|| config.values.get(k).cloned())
                .flatten()
        };
        let default_value = |k: &str| broker_default(k).map(str::to_string);
        let mut out = Vec::new();
        for source in [
            Source::DynamicBroker,
            Source::DynamicDefaultBroker,
            Source::StaticBroker,
            Source::Default,
        ] {
            for n in names {
                let value = match source {
                    Source::DynamicBroker => self.per_broker.get(*n).cloned(),
                    Source::DynamicDefaultBroker => self.cluster_default.get(*n).cloned(),
                    Source::StaticBroker => static_value(n),
                    _ => default_value(n),
                };
                if let Some(v) = value {
                    out.push(Synonym {
                        name: n.to_string(),
                        value: Some(v),
                        source,
                    });
                }
            }
        }
        let first = out.iter().position(|s| s.name == name).unwrap_or(out.len());
        out.split_off(first)
    }
}

/// A broker key's default: Brook's (`BROKER_DEFAULTS`, equal to Kafka's for the keys Brook
/// acts on), else Kafka 4.4's declared default. `None` for a null default; an empty value in
/// `BROKER_DEFAULTS` is Kafka's default (null, or an empty list such as
/// `controller.quorum.voters`).
fn broker_default(name: &str) -> Option<&'static str> {
    let kafka = || config_def::kafka_broker_key(name).and_then(|k| k.default);
    match BROKER_DEFAULTS.iter().find(|(d, _)| *d == name) {
        Some((_, v)) if !v.is_empty() => Some(*v),
        _ => kafka(),
    }
}

/// The broker keys DescribeConfigs lists for a broker: every key Kafka 4.4 declares, sorted by
/// name. Brook's own defaults are a subset of them apart from `BROOK_ONLY_BROKER_KEYS`, which
/// are not listed (`config_def`'s tests hold both to that).
fn described_broker_keys() -> Vec<String> {
    config_def::kafka_broker_keys()
        .iter()
        .map(|k| k.name.to_string())
        .collect()
}

/// Every topic config Kafka 4.4 lists, with its effective value for a topic with these
/// overrides (Kafka's `ConfigHelper.createTopicConfigEntry`).
pub fn topic_config_entries(
    broker: &Broker,
    dynamic: &DynamicBrokerConfigs,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let layers = BrokerLayers::new(broker, dynamic);
    config_def::TOPIC_CONFIGS
        .iter()
        .map(|key| {
            let value = broker.config.topic_value(dynamic, overrides, key.name);
            let value = value.map(|v| config_def::canonical(key.ty, &v));
            let mut synonyms = Vec::new();
            if overrides.contains_key(key.name) {
                synonyms.push(Synonym {
                    name: key.name.to_string(),
                    value: value.clone(),
                    source: Source::TopicOverride,
                });
            }
            if let Some(first) = key.synonyms.first() {
                synonyms.extend(layers.synonyms(first, &config_def::broker_config_synonyms(first)));
            }
            ConfigEntry {
                name: key.name.to_string(),
                value,
                source: synonyms.first().map_or(Source::Default, |s| s.source),
                ty: key.ty,
                read_only: false,
                synonyms,
                doc: key.doc,
            }
        })
        .collect()
}

/// The broker keys Kafka defines, with their effective values (Kafka's
/// `ConfigHelper.createBrokerConfigEntry`). For the cluster default resource (`per_broker`
/// false), only keys set at that level, each with only that layer as synonym.
fn broker_config_entries(
    broker: &Broker,
    dynamic: &DynamicBrokerConfigs,
    per_broker: bool,
) -> Vec<ConfigEntry> {
    let layers = BrokerLayers::new(broker, dynamic);
    let names: Vec<String> = if per_broker {
        described_broker_keys()
    } else {
        layers.cluster_default.keys().cloned().collect()
    };
    names
        .into_iter()
        .filter_map(|name| {
            let key = config_def::broker_key(&name)?;
            let mut synonyms = layers.synonyms(&name, &config_def::broker_config_synonyms(&name));
            if !per_broker {
                synonyms.retain(|s| s.source == Source::DynamicDefaultBroker);
            }
            let value = match synonyms.iter().find(|s| s.name == name) {
                Some(s) => s.value.clone(),
                None => broker
                    .config
                    .values
                    .get(&name)
                    .map(String::as_str)
                    .or_else(|| broker_default(&name))
                    .filter(|v| !v.is_empty())
                    .map(str::to_string),
            };
            Some(ConfigEntry {
                value: value.map(|v| config_def::canonical(key.ty, &v)),
                source: synonyms.first().map_or(Source::Default, |s| s.source),
                ty: key.ty,
                read_only: !key.dynamic,
                synonyms,
                doc: key.doc,
                name,
            })
        })
        .collect()
}

/// The group configs with their values for a group with these overrides (Kafka's
/// `ConfigHelper.createGroupConfigEntry`): an override first, then the broker layers of the
/// key's broker synonym, or the group key's own default when it has none.
fn group_config_entries(
    broker: &Broker,
    dynamic: &DynamicBrokerConfigs,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let layers = BrokerLayers::new(broker, dynamic);
    config_def::GROUP_CONFIGS
        .iter()
        .map(|key| {
            let mut synonyms = Vec::new();
            if let Some(v) = overrides.get(key.name) {
                synonyms.push(Synonym {
                    name: key.name.to_string(),
                    value: Some(v.clone()),
                    source: Source::GroupOverride,
                });
            }
            match key.broker_synonym {
                Some(b) => synonyms.extend(layers.synonyms(b, &[b])),
                None => synonyms.push(Synonym {
                    name: key.name.to_string(),
                    value: Some(key.default.to_string()),
                    source: Source::Default,
                }),
            }
            ConfigEntry {
                name: key.name.to_string(),
                value: synonyms.first().and_then(|s| s.value.clone()),
                source: synonyms.first().map_or(Source::Default, |s| s.source),
                ty: key.ty,
                read_only: false,
                synonyms,
                doc: key.doc,
            }
        })
        .collect()
}

fn to_result(
    e: ConfigEntry,
    include_synonyms: bool,
    include_documentation: bool,
) -> DescribeConfigsResourceResult {
    let sensitive = e.ty.is_sensitive();
    let synonyms = if include_synonyms {
        e.synonyms
            .into_iter()
            .map(|s| {
                // Kafka's `ConfigHelper.configSynonyms` hides a sensitive key's values in
                // every layer, as the entry's own.
                DescribeConfigsSynonym::default()
                    .with_name(sb(s.name))
                    .with_value(s.value.filter(|_| !sensitive).map(sb))
                    .with_source(config_source(s.source))
            })
            .collect()
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_config_type(e.ty.code())
        .with_name(sb(e.name))
        .with_value(e.value.filter(|_| !sensitive).map(sb))
        .with_config_source(config_source(e.source))
        .with_read_only(e.read_only)
        .with_is_sensitive(sensitive)
        .with_documentation(include_documentation.then(|| sb(e.doc)))
        .with_synonyms(synonyms)
}

/// Kafka's `ConfigHelper.resourceNameToBrokerId` and its check against this node.
fn check_broker_name(broker: &Broker, name: &str) -> Result<bool, String> {
    if name.is_empty() {
        return Ok(false);
    }
    let id: i32 = name
        .parse()
        .map_err(|_| format!("Broker id must be an integer, but it is: {name}"))?;
    if id != broker.node_id() {
        return Err(format!(
            "Unexpected broker id, expected {} or empty string, but received {name}",
            broker.node_id()
        ));
    }
    Ok(true)
}

/// The entries of one resource, or its error.
fn describe_resource(
    broker: &Broker,
    dynamic: &DynamicBrokerConfigs,
    resource_type: i8,
    name: &str,
) -> Result<Vec<ConfigEntry>, (ResponseError, Option<String>)> {
    let invalid = |m: String| (ResponseError::InvalidRequest, Some(m));
    match resource_type {
        RESOURCE_TOPIC => match broker.replicas.topic(name) {
            Some(t) => Ok(topic_config_entries(broker, dynamic, &t.configs)),
            None => Err((ResponseError::UnknownTopicOrPartition, None)),
        },
        RESOURCE_BROKER => {
            let per_broker = check_broker_name(broker, name).map_err(invalid)?;
            Ok(broker_config_entries(broker, dynamic, per_broker))
        }
        RESOURCE_GROUP if name.is_empty() => Err(invalid("Group name must not be empty".into())),
        // Brook stores no per-group overrides: every group has the broker's values.
        RESOURCE_GROUP => Ok(group_config_entries(
            broker,
            dynamic,
            &broker.replicas.group_configs(name),
        )),
        RESOURCE_CLIENT_METRICS if name.is_empty() => Err(invalid(
            "Client metrics subscription name must not be empty".into(),
        )),
        RESOURCE_CLIENT_METRICS => Ok(client_metrics_entries(broker, name)),
        other => Err(invalid(format!("Unsupported resource type: {other}"))),
    }
}

/// A client-metrics subscription's keys as set, each from the subscription (Kafka's
/// `ConfigHelper` for CLIENT_METRICS: no defaults, no synonyms, typed by
/// `ClientMetricsConfigs.configType`).
fn client_metrics_entries(broker: &Broker, name: &str) -> Vec<ConfigEntry> {
    let image = broker.replicas.image();
    let Some(configs) = image.client_metrics_configs.get(name) else {
        return Vec::new();
    };
    configs
        .iter()
        .map(|(k, v)| ConfigEntry {
            name: k.clone(),
            value: Some(v.clone()),
            source: Source::ClientMetrics,
            ty: if k == crate::telemetry::INTERVAL_MS_CONFIG {
                ConfigType::Int
            } else {
                ConfigType::List
            },
            read_only: false,
            synonyms: Vec::new(),
            doc: "",
        })
        .collect()
}

/// Kafka's `ConfigHelper` and `KafkaApis` checks of a config resource: `op` on the cluster
/// for broker-level resources, on the topic or the group for theirs; the error a refused
/// resource answers.
fn config_access(
    broker: &Broker,
    ctx: &RequestContext,
    op: AclOperation,
    resource_type: i8,
    name: &str,
) -> Option<(i16, String)> {
    let (allowed, error) = match resource_type {
        RESOURCE_TOPIC => (
            authorize(broker, ctx, op, ResourceType::Topic, name),
            (
                ResponseError::TopicAuthorizationFailed,
                "Topic authorization failed.",
            ),
        ),
        RESOURCE_GROUP => (
            authorize(broker, ctx, op, ResourceType::Group, name),
            (
                ResponseError::GroupAuthorizationFailed,
                "Group authorization failed.",
            ),
        ),
        _ => (
            authorize_cluster(broker, ctx, op),
            (
                ResponseError::ClusterAuthorizationFailed,
                "Cluster authorization failed.",
            ),
        ),
    };
    (!allowed).then(|| (error.0.code(), error.1.to_string()))
}

/// Answers DescribeConfigs.
pub async fn handle_describe_configs(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let dynamic = broker.replicas.dynamic_broker_configs();
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let op = AclOperation::DescribeConfigs;
            if let Some((code, message)) =
                config_access(broker, ctx, op, r.resource_type, &r.resource_name)
            {
                return result
                    .with_error_code(code)
                    .with_error_message(Some(sb(message)));
            }
            match describe_resource(broker, &dynamic, r.resource_type, &r.resource_name) {
                Err((e, message)) => result
                    .with_error_code(e.code())
                    .with_error_message(message.map(sb)),
                Ok(entries) => {
                    let wanted: Option<Vec<String>> = r
                        .configuration_keys
                        .filter(|ks| !ks.is_empty())
                        .map(|ks| ks.iter().map(|k| k.to_string()).collect());
                    let configs = entries
                        .into_iter()
                        .filter(|e| wanted.as_ref().is_none_or(|w| w.contains(&e.name)))
                        .map(|e| to_result(e, req.include_synonyms, req.include_documentation))
                        .collect();
                    result.with_configs(configs)
                }
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// The type of a key for APPEND and SUBTRACT: a topic key, else a broker key.
fn key_type(name: &str) -> Option<ConfigType> {
    config_def::topic_key(name)
        .map(|k| k.ty)
        .or_else(|| config_def::broker_key(name).map(|k| k.ty))
}

/// Applies SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) to a resource's overrides.
fn apply_ops(
    current: &BTreeMap<String, String>,
    ops: &[ConfigOp],
) -> Result<BTreeMap<String, String>, String> {
    let mut next = current.clone();
    for (name, op, value) in ops {
        match *op {
            OP_SET => {
                let v = value
                    .clone()
                    .ok_or_else(|| format!("SET of {name} needs a value"))?;
                next.insert(name.clone(), v);
            }
            OP_DELETE => {
                next.remove(name);
            }
            OP_APPEND | OP_SUBTRACT => {
                if key_type(name) != Some(ConfigType::List) {
                    return Err(format!(
                        "{name} is not a list; APPEND and SUBTRACT apply to lists only"
                    ));
                }
                let v = value.clone().unwrap_or_default();
                let mut items: Vec<String> = next
                    .get(name)
                    .map(|s| {
                        config_def::list_items(s)
                            .into_iter()
                            .map(String::from)
                            .collect()
                    })
                    .unwrap_or_default();
                for item in config_def::list_items(&v) {
                    if *op == OP_APPEND {
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
fn only_replication_throttles(ops: &[ConfigOp]) -> bool {
    use crate::config::REPLICATION_THROTTLE_BROKER_KEYS as KEYS;
    !ops.is_empty() && ops.iter().all(|(name, _, _)| KEYS.contains(&name.as_str()))
}

/// Replication throttle rates are validated as Kafka does (a LONG of at least 0) and
/// accepted; Brook does not throttle replication, so nothing is stored.
fn accept_replication_throttles(ops: &[ConfigOp]) -> Result<(), String> {
    for (name, _, value) in ops.iter().filter(|(_, op, _)| *op == OP_SET) {
        let v = value.as_deref().unwrap_or_default();
        crate::config::validate_throttle_rate(name, v).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Sets (`Some`) or removes (`None`): what changed from `current` to `next`.
fn diff(
    current: &BTreeMap<String, String>,
    next: &BTreeMap<String, String>,
) -> BTreeMap<String, Option<String>> {
    let mut d: BTreeMap<String, Option<String>> = next
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    for k in current.keys().filter(|k| !next.contains_key(*k)) {
        d.insert(k.clone(), None);
    }
    d
}

type AlterOutcome = Result<(), (i16, String)>;

/// One operation on a config key: its name, IncrementalAlterConfigs' operation code (`OP_*`)
/// and the value.
type ConfigOp = (String, i8, Option<String>);

/// One resource's type, name and error (none when it was altered).
type ResourceAnswer = (i8, StrBytes, Option<(i16, String)>);

fn invalid_config(msg: impl Into<String>) -> (i16, String) {
    (ResponseError::InvalidConfig.code(), msg.into())
}

/// A topic resource: validated as Kafka's `ControllerConfigurationValidator` does, stored
/// canonical (see `config::canonical_topic_configs`).
async fn alter_topic(
    broker: &Broker,
    name: &str,
    ops: &[ConfigOp],
    validate_only: bool,
) -> AlterOutcome {
    let Some(topic) = broker.replicas.topic(name) else {
        return Err((
            ResponseError::UnknownTopicOrPartition.code(),
            // QuorumController.ConfigResourceExistenceChecker's message.
            format!("The topic '{name}' does not exist."),
        ));
    };
    let next = apply_ops(&topic.configs, ops).map_err(invalid_config)?;
    let dynamic = broker.replicas.dynamic_broker_configs();
    broker
        .config
        .validate_topic_configs(&dynamic, &next)
        .map_err(|e| invalid_config(e.to_string()))?;
    let next = crate::config::canonical_topic_configs(&next);
    if validate_only {
        return Ok(());
    }
    broker
        .replicas
        .controller()
        .alter_configs(name, diff(&topic.configs, &next))
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    broker.replicas.wait_caught_up().await;
    Ok(())
}

/// A group's overrides changed: the resulting set is validated as Kafka's controller does
/// (`GroupConfig.validate`, INVALID_CONFIG) and stored in the metadata log. The group need
/// not exist; an empty name is refused as on describe.
async fn alter_group(
    broker: &Broker,
    name: &str,
    ops: &[ConfigOp],
    validate_only: bool,
) -> AlterOutcome {
    if name.is_empty() {
        return Err((
            ResponseError::InvalidRequest.code(),
            "Group name must not be empty".into(),
        ));
    }
    let current = broker.replicas.group_configs(name);
    let next = apply_ops(&current, ops).map_err(invalid_config)?;
    crate::group::overrides::validate(&broker.config, &next).map_err(invalid_config)?;
    if validate_only {
        return Ok(());
    }
    broker
        .replicas
        .controller()
        .alter_group_configs(name, diff(&current, &next))
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    broker.replicas.wait_caught_up().await;
    Ok(())
}

/// A client-metrics subscription's keys changed: the resulting set is validated as Kafka's
/// `ClientMetricsConfigs.validate` does and stored in the metadata log.
async fn alter_client_metrics(
    broker: &Broker,
    name: &str,
    ops: &[ConfigOp],
    validate_only: bool,
) -> AlterOutcome {
    let current = broker
        .replicas
        .image()
        .client_metrics_configs
        .get(name)
        .cloned()
        .unwrap_or_default();
    let next = apply_ops(&current, ops).map_err(invalid_config)?;
    crate::telemetry::validate_subscription(name, &next)?;
    if validate_only {
        return Ok(());
    }
    broker
        .replicas
        .controller()
        .alter_client_metrics_configs(name, diff(&current, &next))
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    broker.replicas.wait_caught_up().await;
    Ok(())
}

/// Checks broker keys being set as Kafka's `DynamicBrokerConfig.validateConfigs` does
/// (static keys refused, values typed and ranged), plus Brook's own limit: only the keys it
/// applies at run time (`config_def::dynamic_key_applied`).
fn validate_broker_changes(
    per_broker: bool,
    changes: &BTreeMap<String, Option<String>>,
) -> Result<(), (i16, String)> {
    // A listener's store keys are checked by building the stores (`alter_broker`).
    let stores = |k: &&str| crate::security::ssl::reload::listener_store_key(k).is_some();
    if !per_broker {
        if let Some(k) = changes.keys().map(String::as_str).find(stores) {
            return Err(invalid_config(format!(
                "Cannot update these configs at default cluster level, broker id must be specified: [{k}]"
            )));
        }
    }
    let set = || changes.keys().map(String::as_str).filter(|k| !stores(k));
    let not_dynamic: Vec<&str> = set()
        .filter(|k| config_def::broker_key(k).is_none_or(|d| !d.dynamic))
        .collect();
    if !not_dynamic.is_empty() {
        return Err(invalid_config(format!(
            "Cannot update these configs dynamically: [{}]",
            not_dynamic.join(", ")
        )));
    }
    if !per_broker {
        if let Some(k) = set().find(|k| *k == "listeners") {
            return Err(invalid_config(format!(
                "Cannot update these configs at default cluster level, broker id must be specified: [{k}]"
            )));
        }
    }
    if let Some(k) = set().find(|k| !config_def::brook_acts_on(k)) {
        return Err(invalid_config(format!(
            "Brook does not act on {k}; it is accepted and described only"
        )));
    }
    if let Some(k) = set().find(|k| !config_def::dynamic_key_applied(k)) {
        return Err(invalid_config(format!(
            "Brook does not apply {k} at run time; set it in server.properties"
        )));
    }
    for (k, v) in changes {
        let (Some(key), Some(v)) = (config_def::broker_key(k), v) else {
            continue;
        };
        config_def::validate(key.name, key.ty, key.validator, v).map_err(invalid_config)?;
    }
    Ok(())
}

/// A broker resource: this node's id, or "" for the cluster default. Stored in the metadata
/// quorum, as a record every node applies.
async fn alter_broker(
    broker: &Broker,
    name: &str,
    ops: &[ConfigOp],
    validate_only: bool,
) -> AlterOutcome {
    let per_broker =
        check_broker_name(broker, name).map_err(|m| (ResponseError::InvalidRequest.code(), m))?;
    let dynamic = broker.replicas.dynamic_broker_configs();
    let current = dynamic.get(name).cloned().unwrap_or_default();
    let next = apply_ops(&current, ops).map_err(invalid_config)?;
    let changes = diff(&current, &next);
    validate_broker_changes(per_broker, &changes)?;
    // Kafka's `SslFactory.validateReconfiguration`: the new stores are read and checked
    // before the change is stored, and installed once it is.
    let reloaded = match per_broker {
        true => broker
            .tls
            .prepare(
                &broker.config.values,
                &next,
                changes.keys().map(String::as_str),
            )
            .map_err(invalid_config)?,
        false => Vec::new(),
    };
    let mut proposed = dynamic.clone();
    proposed.insert(name.to_string(), next.clone());
    for t in broker.replicas.topics() {
        broker
            .config
            .log_config(&proposed, &t.configs)
            .map_err(|e| invalid_config(e.to_string()))?;
    }
    if validate_only {
        return Ok(());
    }
    broker
        .replicas
        .controller()
        .alter_broker_configs(name, changes)
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    broker.replicas.wait_caught_up().await;
    broker.tls.install(reloaded);
    Ok(())
}

/// IncrementalAlterConfigs' operations (Kafka's `AlterConfigOp.OpType`).
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// Marks every resource that appears more than once in a request (Kafka's
/// `ConfigAdminManager.preprocess`: each copy is refused, none is applied).
fn repeated_resources(keys: &[(i8, &str)]) -> Vec<bool> {
    // Counted once: a request may name very many resources.
    let mut counts: BTreeMap<(i8, &str), usize> = BTreeMap::new();
    for k in keys {
        *counts.entry(*k).or_default() += 1;
    }
    keys.iter().map(|k| counts[k] > 1).collect()
}

/// The checks `ConfigAdminManager.preprocess` makes on one resource's config list before it
/// goes to the controller: no key twice, and a value for every key that is not deleted.
fn check_config_list<'a>(
    names: impl Iterator<Item = &'a str> + Clone,
    without_value: impl Iterator<Item = &'a str>,
) -> AlterOutcome {
    let invalid = |m: String| Err((ResponseError::InvalidRequest.code(), m));
    let mut seen = std::collections::BTreeSet::new();
    if !names.clone().all(|n| seen.insert(n)) {
        return invalid("Error due to duplicate config keys".into());
    }
    let nulls: Vec<&str> = without_value.collect();
    if !nulls.is_empty() {
        return invalid(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        ));
    }
    Ok(())
}

/// Applies one resource's operations, whichever API they came from.
async fn alter_resource(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    ops: &[ConfigOp],
    validate_only: bool,
) -> AlterOutcome {
    match resource_type {
        RESOURCE_TOPIC => alter_topic(broker, name, ops, validate_only).await,
        RESOURCE_BROKER if only_replication_throttles(ops) => {
            accept_replication_throttles(ops).map_err(invalid_config)
        }
        RESOURCE_BROKER => alter_broker(broker, name, ops, validate_only).await,
        RESOURCE_GROUP => alter_group(broker, name, ops, validate_only).await,
        RESOURCE_CLIENT_METRICS => alter_client_metrics(broker, name, ops, validate_only).await,
        other => Err((
            ResponseError::InvalidRequest.code(),
            format!("Unknown resource type {other}"),
        )),
    }
}

/// One resource's answer, in either API's response type (the two have the same fields).
macro_rules! resource_response {
    ($ty:ty, $resource_type:expr, $name:expr, $error:expr) => {{
        let resp = <$ty>::default()
            .with_resource_type($resource_type)
            .with_resource_name($name);
        match $error {
            None => resp,
            Some((code, msg)) => resp.with_error_code(code).with_error_message(Some(sb(msg))),
        }
    }};
}

/// One resource of an alter request after its own checks: its operations, or its error.
struct Planned {
    resource_type: i8,
    name: StrBytes,
    ops: Result<Vec<ConfigOp>, (i16, String)>,
}

/// Refuses every resource named twice, then applies the others in request order; each
/// resource's type, name and error (Kafka's `ConfigAdminManager.preprocess`, then the
/// controller).
async fn alter_all(
    broker: &Broker,
    ctx: &RequestContext,
    planned: Vec<Planned>,
    validate_only: bool,
) -> Vec<ResourceAnswer> {
    let keys: Vec<(i8, &str)> = planned
        .iter()
        .map(|p| (p.resource_type, p.name.as_str()))
        .collect();
    let repeated = repeated_resources(&keys);
    let mut out = Vec::with_capacity(planned.len());
    for (p, repeated) in planned.into_iter().zip(repeated) {
        let outcome = match p.ops {
            _ if repeated => Err((
                ResponseError::InvalidRequest.code(),
                "Each resource must appear at most once.".into(),
            )),
            Err(e) => Err(e),
            // ALTER_CONFIGS, checked after the request's own (Kafka's
            // `handleIncrementalAlterConfigsRequest`).
            Ok(_)
                if let Some(refused) = config_access(
                    broker,
                    ctx,
                    AclOperation::AlterConfigs,
                    p.resource_type,
                    &p.name,
                ) =>
            {
                Err(refused)
            }
            Ok(ops) => alter_resource(broker, p.resource_type, &p.name, &ops, validate_only).await,
        };
        out.push((p.resource_type, p.name, outcome.err()));
    }
    out
}

/// Answers IncrementalAlterConfigs for topics and brokers. Group configs are described with
/// their broker defaults but not stored, so altering them is refused.
pub async fn handle_incremental_alter_configs(
    broker: &Broker,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let planned = req
        .resources
        .into_iter()
        .map(|r| {
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
            let names = ops.iter().map(|(n, _, _)| n.as_str());
            let without_value = ops
                .iter()
                .filter(|(_, op, v)| *op != OP_DELETE && v.is_none())
                .map(|(n, _, _)| n.as_str());
            let checked = check_config_list(names, without_value);
            Planned {
                resource_type: r.resource_type,
                name: r.resource_name,
                ops: checked.map(|()| ops),
            }
        })
        .collect();
    let responses = alter_all(broker, ctx, planned, req.validate_only)
        .await
        .into_iter()
        .map(|(resource_type, name, error)| {
            resource_response!(AlterConfigsResourceResponse, resource_type, name, error)
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// The resource's current overrides: a topic's configs, or the dynamic broker configs stored
/// under the name (a node id, or "" for the cluster default).
fn current_overrides(broker: &Broker, resource_type: i8, name: &str) -> BTreeMap<String, String> {
    match resource_type {
        RESOURCE_TOPIC => broker
            .replicas
            .topic(name)
            .map(|t| t.configs.clone())
            .unwrap_or_default(),
        RESOURCE_BROKER => broker
            .replicas
            .dynamic_broker_configs()
            .get(name)
            .cloned()
            .unwrap_or_default(),
        RESOURCE_GROUP => broker.replicas.group_configs(name),
        RESOURCE_CLIENT_METRICS => broker
            .replicas
            .image()
            .client_metrics_configs
            .get(name)
            .cloned()
            .unwrap_or_default(),
        _ => BTreeMap::new(),
    }
}

/// The legacy AlterConfigs request's keys are the resource's whole new set of overrides:
/// each changed one is set, and every current override it leaves out is deleted (Kafka's
/// `ConfigurationControlManager.legacyAlterConfigResource`, which also rewrites unchanged
/// broker keys to make brokers reload them; Brook applies the image directly).
fn replace_ops(
    current: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Vec<ConfigOp> {
    diff(current, new)
        .into_iter()
        .map(|(k, v)| match v {
            Some(v) => (k, OP_SET, Some(v)),
            None => (k, OP_DELETE, None),
        })
        .collect()
}

/// Answers the legacy AlterConfigs (API 33, which librdkafka's and kafka-python's
/// `alter_configs` send): Kafka's `ConfigAdminManager.preprocess(AlterConfigsRequestData)`
/// checks, then each resource's overrides replaced as a whole through the same validation and
/// storage as IncrementalAlterConfigs.
pub async fn handle_alter_configs(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let planned = req
        .resources
        .into_iter()
        .map(|r| {
            let names = r.configs.iter().map(|c| c.name.as_str());
            let without_value = r
                .configs
                .iter()
                .filter(|c| c.value.is_none())
                .map(|c| c.name.as_str());
            let ops = check_config_list(names, without_value).map(|()| {
                // No key twice and every value present: checked just above.
                let new: BTreeMap<String, String> = r
                    .configs
                    .iter()
                    .map(|c| {
                        (
                            c.name.to_string(),
                            c.value.as_deref().unwrap_or_default().to_string(),
                        )
                    })
                    .collect();
                legacy_ops(broker, r.resource_type, &r.resource_name, new)
            });
            Planned {
                resource_type: r.resource_type,
                name: r.resource_name,
                ops,
            }
        })
        .collect();
    let responses = alter_all(broker, ctx, planned, req.validate_only)
        .await
        .into_iter()
        .map(|(resource_type, name, error)| {
            resource_response!(
                LegacyAlterConfigsResourceResponse,
                resource_type,
                name,
                error
            )
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

/// The operations of a legacy AlterConfigs resource: replace its overrides with `new`.
/// Replication throttles alone are accepted and not stored, so they replace nothing.
fn legacy_ops(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    new: BTreeMap<String, String>,
) -> Vec<ConfigOp> {
    let sets: Vec<ConfigOp> = new
        .iter()
        .map(|(k, v)| (k.clone(), OP_SET, Some(v.clone())))
        .collect();
    if resource_type == RESOURCE_BROKER && only_replication_throttles(&sets) {
        return sets;
    }
    replace_ops(&current_overrides(broker, resource_type, name), &new)
}

/// Answers ListConfigResources (KIP-1142, Kafka's `KafkaApis.handleListConfigResources`):
/// v0 lists the client-metrics subscriptions and takes no types; v1 lists the named types
/// (every type when none is named): topics, this broker (Kafka lists every registered one),
/// broker loggers, groups with config overrides, and client-metrics subscriptions; an
/// unknown type is UNSUPPORTED_VERSION.
pub fn handle_list_config_resources(
    broker: &Broker,
    ctx: &RequestContext,
    req: kafka_protocol::messages::ListConfigResourcesRequest,
) -> kafka_protocol::messages::ListConfigResourcesResponse {
    use kafka_protocol::messages::list_config_resources_response::ConfigResource;
    use kafka_protocol::messages::ListConfigResourcesResponse;
    const ALL: [i8; 5] = [
        RESOURCE_TOPIC,
        RESOURCE_BROKER,
        RESOURCE_BROKER_LOGGER,
        RESOURCE_CLIENT_METRICS,
        RESOURCE_GROUP,
    ];
    if !super::auth_helper::authorize_cluster(broker, ctx, AclOperation::DescribeConfigs) {
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let types: Vec<i8> = match (ctx.api_version, req.resource_types.is_empty()) {
        (0, _) => vec![RESOURCE_CLIENT_METRICS],
        (_, true) => ALL.to_vec(),
        _ => req.resource_types.clone(),
    };
    if types.iter().any(|t| !ALL.contains(t)) {
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let image = broker.replicas.image();
    let mut out: Vec<(i8, String)> = Vec::new();
    for t in types {
        let names: Vec<String> = match t {
            RESOURCE_TOPIC => image.topic_ids.keys().cloned().collect(),
            RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => {
                image.brokers.keys().map(|id| id.to_string()).collect()
            }
            RESOURCE_GROUP => image.group_configs.keys().cloned().collect(),
            _ => image.client_metrics_configs.keys().cloned().collect(),
        };
        out.extend(names.into_iter().map(|n| (t, n)));
    }
    let resources = out
        .into_iter()
        .map(|(t, n)| {
            let r = ConfigResource::default().with_resource_name(sb(n));
            if ctx.api_version >= 1 {
                r.with_resource_type(t)
            } else {
                r
            }
        })
        .collect();
    ListConfigResourcesResponse::default().with_config_resources(resources)
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

    #[test]
    fn broker_changes_are_checked_as_kafka_does() {
        let set = |k: &str, v: &str| BTreeMap::from([(k.to_string(), Some(v.to_string()))]);
        let e = validate_broker_changes(true, &set("node.id", "2")).unwrap_err();
        assert_eq!(e.1, "Cannot update these configs dynamically: [node.id]");
        let e = validate_broker_changes(false, &set("listeners", "PLAINTEXT://:1")).unwrap_err();
        assert!(
            e.1.starts_with("Cannot update these configs at default cluster level"),
            "{}",
            e.1
        );
        let e = validate_broker_changes(true, &set("log.retention.ms", "-5")).unwrap_err();
        assert_eq!(
            e.1,
            "Invalid value -5 for configuration log.retention.ms: Value must be at least -1"
        );
        assert!(validate_broker_changes(true, &set("log.retention.ms", "1000")).is_ok());
        assert!(validate_broker_changes(true, &set("max.connections", "5")).is_err());
        assert_eq!(e.0, ResponseError::InvalidConfig.code());
        // Dynamic in Kafka, not acted on by Brook: refused as such, not as a static key.
        let e = validate_broker_changes(true, &set("background.threads", "4")).unwrap_err();
        assert_eq!(
            e.1,
            "Brook does not act on background.threads; it is accepted and described only"
        );
        let e = validate_broker_changes(true, &set("no.such.key", "4")).unwrap_err();
        assert_eq!(
            e.1,
            "Cannot update these configs dynamically: [no.such.key]"
        );
    }
}
