//! DescribeConfigs and IncrementalAlterConfigs over the raw wire, against what Kafka 4.4's
//! `ConfigHelper` and `ConfigurationControlManager` answer: every 4.4 topic key, broker keys
//! with their sources, read-only flags, types and synonyms, dynamic broker configs (per
//! broker and cluster default) in both modes, and ApiVersions' features and Metadata's
//! authorized operations as Kafka gives them without an authorizer. The legacy AlterConfigs
//! (API 33) through librdkafka's `alter_configs`, which replaces a resource's overrides.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::{Duration, Instant};

use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::wire::{topic_name, CREATE_TOPICS_V, METADATA_V};
use brook_protocol_tests::{unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    ApiVersionsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const GROUP: i8 = 32;
// Config sources.
const TOPIC_CONFIG: i8 = 1;
const DYNAMIC_BROKER: i8 = 2;
const DYNAMIC_DEFAULT: i8 = 3;
const STATIC_BROKER: i8 = 4;
const DEFAULT: i8 = 5;

fn describe(
    c: &mut WireClient,
    resource_type: i8,
    name: &str,
) -> Result<Vec<DescribeConfigsResourceResult>, (i16, Option<String>)> {
    let req = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_string()))])
        .with_include_synonyms(true)
        .with_include_documentation(true);
    let r = c.request(4, &req).results.remove(0);
    match r.error_code {
        NONE => Ok(r.configs),
        code => Err((code, r.error_message.map(|m| m.to_string()))),
    }
}

fn entry(configs: &[DescribeConfigsResourceResult], name: &str) -> DescribeConfigsResourceResult {
    configs
        .iter()
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} not described"))
        .clone()
}

/// (name, value, source) of each synonym.
fn synonyms(e: &DescribeConfigsResourceResult) -> Vec<(String, Option<String>, i8)> {
    e.synonyms
        .iter()
        .map(|s| {
            (
                s.name.to_string(),
                s.value.as_ref().map(|v| v.to_string()),
                s.source,
            )
        })
        .collect()
}

fn syn(name: &str, value: &str, source: i8) -> (String, Option<String>, i8) {
    (name.to_string(), Some(value.to_string()), source)
}

/// Sends SET operations on one resource; the error code and message.
fn alter(
    c: &mut WireClient,
    resource_type: i8,
    name: &str,
    set: &[(&str, &str)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let configs = set
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.to_string()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(v.to_string())))
        })
        .collect();
    let req = IncrementalAlterConfigsRequest::default()
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configs(configs)])
        .with_validate_only(validate_only);
    let r = c.request(1, &req).responses.remove(0);
    (r.error_code, r.error_message.map(|m| m.to_string()))
}

fn create_topic(c: &mut WireClient, name: &str) {
    let req = WireClient::create_topics_request(name, 1, 1, &[], Duration::from_secs(10));
    let resp = c.request(CREATE_TOPICS_V, &req);
    assert_eq!(resp.topics[0].error_code, NONE, "{resp:?}");
}

#[test]
fn broker_configs_have_kafkas_sources_types_and_synonyms() {
    let broker = Broker::start_with(&[("log.retention.hours", "24")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let configs = describe(&mut c, BROKER, "1").unwrap();

    let hours = entry(&configs, "log.retention.hours");
    assert_eq!(hours.value.as_deref(), Some("24"));
    assert_eq!(
        (hours.config_source, hours.read_only, hours.config_type),
        (STATIC_BROKER, true, 3)
    );
    assert_eq!(
        synonyms(&hours),
        [
            syn("log.retention.hours", "24", STATIC_BROKER),
            syn("log.retention.hours", "168", DEFAULT)
        ]
    );
    assert!(hours.documentation.is_some());
    // A key with a null default: no value, the default source, dynamic, LONG.
    let ms = entry(&configs, "log.retention.ms");
    assert_eq!(ms.value, None);
    assert_eq!(
        (ms.config_source, ms.read_only, ms.config_type),
        (DEFAULT, false, 5)
    );
    assert!(synonyms(&ms).is_empty());
    let node = entry(&configs, "node.id");
    assert!(node.read_only && !node.is_sensitive);
    // Brook's own keys are not Kafka's, so they are not listed.
    assert!(configs.iter().all(|c| c.name.as_str() != "admin.listener"));
    assert!(configs
        .iter()
        .all(|c| c.name.as_str() != "admin.event.buffer.len.max"));

    let e = describe(&mut c, BROKER, "2").unwrap_err();
    assert_eq!(e.0, ResponseError::InvalidRequest.code());
    assert_eq!(
        e.1.as_deref(),
        Some("Unexpected broker id, expected 1 or empty string, but received 2")
    );
    // Nothing set at the cluster-default level yet.
    assert!(describe(&mut c, BROKER, "").unwrap().is_empty());
}

/// Every broker key Kafka 4.4 declares is described, as Kafka describes it; those Brook does
/// not act on have Kafka's default, type and dynamic flag, can be set in server.properties
/// (then STATIC_BROKER_CONFIG), and a password's value is hidden in every layer.
#[test]
fn every_kafka_broker_key_is_described_with_kafkas_default() {
    let broker = Broker::start_with(&[
        ("num.replica.fetchers", "3"),
        ("ssl.keystore.password", "secret"),
    ]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let configs = describe(&mut c, BROKER, "1").unwrap();
    let names: std::collections::BTreeSet<&str> = configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names.len(), configs.len(), "each key once");
    assert!(configs.len() >= 340, "{} keys", configs.len());
    for key in [
        "background.threads",
        "queued.max.requests",
        "sasl.enabled.mechanisms",
        "socket.request.max.bytes",
        "log.cleaner.threads",
        "quota.window.num",
    ] {
        assert!(names.contains(key), "{key} not described");
    }

    let threads = entry(&configs, "background.threads");
    assert_eq!(threads.value.as_deref(), Some("10"));
    assert_eq!(
        (
            threads.config_source,
            threads.read_only,
            threads.config_type
        ),
        (DEFAULT, false, 3),
        "Kafka's default, dynamic, INT"
    );
    assert_eq!(
        synonyms(&threads),
        [syn("background.threads", "10", DEFAULT)]
    );
    let queued = entry(&configs, "queued.max.requests");
    assert_eq!(
        (queued.value.as_deref(), queued.read_only),
        (Some("500"), true)
    );

    let fetchers = entry(&configs, "num.replica.fetchers");
    assert_eq!(fetchers.value.as_deref(), Some("3"));
    assert_eq!(
        synonyms(&fetchers),
        [
            syn("num.replica.fetchers", "3", STATIC_BROKER),
            syn("num.replica.fetchers", "1", DEFAULT)
        ]
    );

    let password = entry(&configs, "ssl.keystore.password");
    assert!(password.is_sensitive, "{password:?}");
    assert_eq!(
        (
            password.value.as_ref(),
            password.config_source,
            password.config_type
        ),
        (None, STATIC_BROKER, 9)
    );
    assert_eq!(
        synonyms(&password),
        [("ssl.keystore.password".to_string(), None, STATIC_BROKER)]
    );
}

#[test]
fn every_kafka_topic_key_is_described_validated_and_accepted() {
    let broker = Broker::start_with(&[("log.retention.hours", "24")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("cfg");
    create_topic(&mut c, &topic);
    let configs = describe(&mut c, TOPIC, &topic).unwrap();
    for key in [
        "delete.retention.ms",
        "flush.ms",
        "min.cleanable.dirty.ratio",
        "max.compaction.lag.ms",
        "preallocate",
        "compression.zstd.level",
        "local.retention.ms",
        "remote.storage.enable",
        "segment.jitter.ms",
        "leader.replication.throttled.replicas",
        "max.decompressed.message.bytes",
    ] {
        assert!(
            configs.iter().any(|c| c.name.as_str() == key),
            "{key} missing"
        );
    }
    // Gone in Kafka 4.
    assert!(configs
        .iter()
        .all(|c| c.name.as_str() != "message.downconversion.enable"));
    // The value derives from log.retention.hours, but Kafka lists synonyms from
    // log.retention.ms on only, so there are none.
    let retention = entry(&configs, "retention.ms");
    assert_eq!(retention.value.as_deref(), Some("86400000"));
    assert_eq!(retention.config_source, DEFAULT);
    assert!(synonyms(&retention).is_empty());
    let ratio = entry(&configs, "min.cleanable.dirty.ratio");
    assert_eq!(
        (ratio.value.as_deref(), ratio.config_type),
        (Some("0.5"), 6)
    );
    assert_eq!(
        synonyms(&ratio),
        [syn("log.cleaner.min.cleanable.ratio", "0.5", DEFAULT)]
    );

    // Kafka's validation and messages.
    let (code, msg) = alter(
        &mut c,
        TOPIC,
        &topic,
        &[("min.cleanable.dirty.ratio", "1.5")],
        false,
    );
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert_eq!(
        msg.as_deref(),
        Some("Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1")
    );
    let (code, msg) = alter(
        &mut c,
        TOPIC,
        &topic,
        &[("message.downconversion.enable", "true")],
        false,
    );
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert_eq!(
        msg.as_deref(),
        Some("Unknown topic config name: message.downconversion.enable")
    );
    let (code, _) = alter(
        &mut c,
        TOPIC,
        &topic,
        &[("remote.storage.enable", "true")],
        false,
    );
    assert_eq!(code, ResponseError::InvalidConfig.code());
    let (code, msg) = alter(
        &mut c,
        TOPIC,
        &topic,
        &[
            ("min.compaction.lag.ms", "10"),
            ("max.compaction.lag.ms", "5"),
        ],
        false,
    );
    assert_eq!(code, ResponseError::InvalidConfig.code(), "{msg:?}");

    // Keys Brook does not act on are stored and described like any other.
    let (code, msg) = alter(
        &mut c,
        TOPIC,
        &topic,
        &[("delete.retention.ms", "1000"), ("preallocate", "True")],
        false,
    );
    assert_eq!(code, NONE, "{msg:?}");
    let configs = describe(&mut c, TOPIC, &topic).unwrap();
    let dr = entry(&configs, "delete.retention.ms");
    assert_eq!(
        (dr.value.as_deref(), dr.config_source),
        (Some("1000"), TOPIC_CONFIG)
    );
    assert_eq!(
        synonyms(&dr),
        [
            syn("delete.retention.ms", "1000", TOPIC_CONFIG),
            syn("log.cleaner.delete.retention.ms", "86400000", DEFAULT)
        ]
    );
    assert_eq!(
        entry(&configs, "preallocate").value.as_deref(),
        Some("true")
    );
}

#[test]
fn dynamic_broker_configs_layer_persist_and_apply() {
    let mut broker = Broker::start_with(&[("log.retention.hours", "24")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("dyn");
    create_topic(&mut c, &topic);

    let (code, msg) = alter(&mut c, BROKER, "1", &[("node.id", "5")], false);
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert_eq!(
        msg.as_deref(),
        Some("Cannot update these configs dynamically: [node.id]")
    );
    let (code, msg) = alter(&mut c, BROKER, "", &[("log.retention.ms", "-5")], false);
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert_eq!(
        msg.as_deref(),
        Some("Invalid value -5 for configuration log.retention.ms: Value must be at least -1")
    );
    // validate_only changes nothing.
    assert_eq!(
        alter(&mut c, BROKER, "", &[("log.retention.ms", "60000")], true).0,
        NONE
    );
    assert!(describe(&mut c, BROKER, "").unwrap().is_empty());

    assert_eq!(
        alter(&mut c, BROKER, "", &[("log.retention.ms", "60000")], false).0,
        NONE
    );
    assert_eq!(
        alter(
            &mut c,
            BROKER,
            "1",
            &[("log.segment.bytes", "2097152")],
            false
        )
        .0,
        NONE
    );
    let check = |c: &mut WireClient| {
        let defaults = describe(c, BROKER, "").unwrap();
        assert_eq!(defaults.len(), 1, "{defaults:?}");
        assert_eq!(defaults[0].config_source, DYNAMIC_DEFAULT);
        let configs = describe(c, BROKER, "1").unwrap();
        let ms = entry(&configs, "log.retention.ms");
        assert_eq!(
            (ms.value.as_deref(), ms.config_source),
            (Some("60000"), DYNAMIC_DEFAULT)
        );
        let seg = entry(&configs, "log.segment.bytes");
        assert_eq!(
            (seg.value.as_deref(), seg.config_source),
            (Some("2097152"), DYNAMIC_BROKER)
        );
        let t = describe(c, TOPIC, &topic).unwrap();
        let retention = entry(&t, "retention.ms");
        assert_eq!(retention.value.as_deref(), Some("60000"));
        assert_eq!(
            synonyms(&retention),
            [
                syn("log.retention.ms", "60000", DYNAMIC_DEFAULT),
                syn("log.retention.hours", "24", STATIC_BROKER),
                syn("log.retention.hours", "168", DEFAULT)
            ]
        );
        assert_eq!(entry(&t, "segment.bytes").value.as_deref(), Some("2097152"));
    };
    check(&mut c);
    broker.restart();
    let mut c = WireClient::connect(&broker.bootstrap());
    check(&mut c);
}

#[test]
fn group_configs_are_described_with_broker_defaults() {
    let broker = Broker::start_with(&[("group.consumer.session.timeout.ms", "50000")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let configs = describe(&mut c, GROUP, "g1").unwrap();
    let session = entry(&configs, "consumer.session.timeout.ms");
    assert_eq!(session.value.as_deref(), Some("50000"));
    assert_eq!(session.config_source, STATIC_BROKER);
    assert_eq!(
        synonyms(&session),
        [
            syn("group.consumer.session.timeout.ms", "50000", STATIC_BROKER),
            syn("group.consumer.session.timeout.ms", "45000", DEFAULT)
        ]
    );
    // Every group key Kafka 4.4 declares, share and streams ones with Kafka's defaults.
    assert_eq!(configs.len(), 21);
    let isolation = entry(&configs, "share.isolation.level");
    assert_eq!(
        synonyms(&isolation),
        [syn("share.isolation.level", "read_uncommitted", DEFAULT)]
    );
    let e = describe(&mut c, GROUP, "").unwrap_err();
    assert_eq!(e.0, ResponseError::InvalidRequest.code());
}

#[test]
fn features_and_authorized_operations_are_kafkas() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let v = c.request(3, &ApiVersionsRequest::default());
    let finalized: Vec<(String, i16)> = v
        .finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.max_version_level))
        .collect();
    for want in [
        ("metadata.version", 33),
        ("transaction.version", 2),
        ("group.version", 1),
        ("eligible.leader.replicas.version", 1),
    ] {
        assert!(
            finalized.contains(&(want.0.to_string(), want.1)),
            "{finalized:?}"
        );
    }
    // Static voters: kraft.version 0, which Kafka leaves out of the finalized list.
    assert!(finalized.iter().all(|(n, _)| n != "kraft.version"));

    let topic = unique_topic("ops");
    create_topic(&mut c, &topic);
    let mut req = WireClient::metadata_request(&[&topic], false);
    req.include_topic_authorized_operations = true;
    let m = c.request(METADATA_V, &req);
    assert_eq!(m.topics[0].topic_authorized_operations, 3576);
    let m = c.request(METADATA_V, &WireClient::metadata_request(&[&topic], false));
    assert_eq!(m.topics[0].topic_authorized_operations, i32::MIN);
    let d = c.request(
        0,
        &DescribeClusterRequest::default().with_include_cluster_authorized_operations(true),
    );
    assert_eq!(d.cluster_authorized_operations, 8096);
}

#[test]
fn cluster_default_configs_reach_every_node() {
    let cluster = Cluster::start(3, &[]);
    let mut c = WireClient::connect(&cluster.address(1));
    let (code, msg) = alter(&mut c, BROKER, "", &[("log.retention.ms", "120000")], false);
    assert_eq!(code, NONE, "{msg:?}");
    let (code, msg) = alter(
        &mut c,
        BROKER,
        "1",
        &[("log.retention.bytes", "1000000")],
        false,
    );
    assert_eq!(code, NONE, "{msg:?}");
    for id in 1..=3 {
        let mut n = WireClient::connect(&cluster.address(id));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let configs = describe(&mut n, BROKER, &id.to_string()).unwrap();
            let ms = entry(&configs, "log.retention.ms");
            let bytes = entry(&configs, "log.retention.bytes");
            let want_bytes = if id == 1 {
                (Some("1000000"), DYNAMIC_BROKER)
            } else {
                (Some("-1"), DEFAULT)
            };
            if ms.value.as_deref() == Some("120000")
                && (bytes.value.as_deref(), bytes.config_source) == want_bytes
            {
                assert_eq!(ms.config_source, DYNAMIC_DEFAULT);
                break;
            }
            assert!(Instant::now() < deadline, "node {id}: {ms:?} {bytes:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// librdkafka's `alter_configs` sends the legacy AlterConfigs (API 33), whose keys replace a
/// resource's whole set of overrides (Kafka's `legacyAlterConfigResource`): what the request
/// leaves out goes back to its default. Bad values and unknown topics get Kafka's errors, as do
/// the checks of `ConfigAdminManager.preprocess` (a resource twice, a null value).
#[test]
fn legacy_alter_configs_replaces_the_overrides() {
    use futures_executor::block_on;
    use rdkafka::admin::{
        AdminClient, AdminOptions, AlterConfig, OwnedResourceSpecifier, ResourceSpecifier,
    };
    use rdkafka::client::DefaultClientContext;
    use rdkafka::ClientConfig;

    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("legacy-alter");
    let req = WireClient::create_topics_request(
        &topic,
        1,
        1,
        &[("cleanup.policy", "compact"), ("retention.ms", "1000")],
        Duration::from_secs(10),
    );
    assert_eq!(c.request(CREATE_TOPICS_V, &req).topics[0].error_code, NONE);

    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .create()
        .expect("admin client");
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let alter = |configs: &[AlterConfig<'_>]| {
        block_on(admin.alter_configs(configs, &opts)).expect("AlterConfigs answered")
    };

    let set = AlterConfig::new(ResourceSpecifier::Topic(&topic)).set("retention.ms", "5000");
    assert_eq!(
        alter(&[set]),
        [Ok(OwnedResourceSpecifier::Topic(topic.clone()))]
    );
    let configs = describe(&mut c, TOPIC, &topic).unwrap();
    let retention = entry(&configs, "retention.ms");
    assert_eq!(
        (retention.value.as_deref(), retention.config_source),
        (Some("5000"), TOPIC_CONFIG)
    );
    // cleanup.policy was left out of the new set, so it is back to the broker's default.
    let policy = entry(&configs, "cleanup.policy");
    assert_eq!(
        (policy.value.as_deref(), policy.config_source),
        (Some("delete"), DEFAULT)
    );

    let configs = describe(&mut c, TOPIC, &topic).unwrap();
    assert_eq!(
        entry(&configs, "retention.ms").value.as_deref(),
        Some("5000")
    );

    // A broker key Brook applies at run time, on this node.
    let node = AlterConfig::new(ResourceSpecifier::Broker(1)).set("log.retention.ms", "60000");
    assert_eq!(alter(&[node]), [Ok(OwnedResourceSpecifier::Broker(1))]);
    let ms = entry(&describe(&mut c, BROKER, "1").unwrap(), "log.retention.ms");
    assert_eq!(
        (ms.value.as_deref(), ms.config_source),
        (Some("60000"), DYNAMIC_BROKER)
    );
    // An empty set deletes every override of the node.
    let clear = AlterConfig::new(ResourceSpecifier::Broker(1));
    assert_eq!(alter(&[clear]), [Ok(OwnedResourceSpecifier::Broker(1))]);
    let ms = entry(&describe(&mut c, BROKER, "1").unwrap(), "log.retention.ms");
    assert_ne!(ms.config_source, DYNAMIC_BROKER, "{ms:?}");

    // Errors, on the wire: the rdkafka crate reports every AlterConfigs resource as a success
    // (it does not read librdkafka's per-resource error), so they are checked here.
    use kafka_protocol::messages::alter_configs_request::{
        AlterConfigsResource as LegacyResource, AlterableConfig as LegacyConfig,
    };
    use kafka_protocol::messages::AlterConfigsRequest;
    let resource_of = |name: &str, value: Option<&str>| {
        LegacyResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configs(vec![LegacyConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(value.map(|v| StrBytes::from_string(v.to_string())))])
    };
    let resource = |value: Option<&str>| resource_of(&topic, value);
    let bad_and_missing = AlterConfigsRequest::default().with_resources(vec![
        resource(Some("-5")),
        resource_of("no-such-topic", Some("5000")),
    ]);
    let answers: Vec<_> = c
        .request(2, &bad_and_missing)
        .responses
        .iter()
        .map(|r| (r.error_code, r.error_message.as_deref().map(str::to_string)))
        .collect();
    assert_eq!(
        answers,
        [
            (
                ResponseError::InvalidConfig.code(),
                Some(
                    "Invalid value -5 for configuration retention.ms: Value must be at least -1"
                        .to_string()
                )
            ),
            (
                ResponseError::UnknownTopicOrPartition.code(),
                Some("The topic 'no-such-topic' does not exist.".to_string())
            ),
        ]
    );
    let twice = AlterConfigsRequest::default()
        .with_resources(vec![resource(Some("1")), resource(Some("2"))]);
    let resp = c.request(2, &twice);
    let answers: Vec<_> = resp
        .responses
        .iter()
        .map(|r| (r.error_code, r.error_message.as_deref().map(str::to_string)))
        .collect();
    let once = Some("Each resource must appear at most once.".to_string());
    assert_eq!(
        answers,
        [
            (ResponseError::InvalidRequest.code(), once.clone()),
            (ResponseError::InvalidRequest.code(), once)
        ]
    );
    let null = AlterConfigsRequest::default().with_resources(vec![resource(None)]);
    let r = c.request(2, &null).responses.remove(0);
    assert_eq!(
        (r.error_code, r.error_message.as_deref()),
        (
            ResponseError::InvalidRequest.code(),
            Some("Null value not supported for : retention.ms")
        )
    );
    let configs = describe(&mut c, TOPIC, &topic).unwrap();
    assert_eq!(
        entry(&configs, "retention.ms").value.as_deref(),
        Some("5000")
    );
}

/// A dynamic cluster default of `min.insync.replicas` moves the partition (acks=all) and the
/// controller (the ELR) together, as in Kafka (`kafka-configs --entity-type brokers
/// --entity-default --add-config min.insync.replicas=3`): both resolve it through
/// `BrokerConfig::min_insync_replicas`.
#[test]
fn a_dynamic_min_insync_replicas_default_moves_acks_all_and_the_elr() {
    use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
    use kafka_protocol::messages::DescribeTopicPartitionsRequest;

    let wait = Duration::from_secs(30);
    let mut cluster = Cluster::start(3, &[]);
    let topic = unique_topic("dyn-min-isr");
    cluster.create_topic(&topic, 1, 3, &[]);
    let s = cluster.await_isr(&topic, 0, &[1, 2, 3], wait);
    let (leader, gone) = (s.leader, s.followers()[0]);
    let mut c = WireClient::connect(&cluster.address(leader));
    let (code, msg) = alter(&mut c, BROKER, "", &[("min.insync.replicas", "3")], false);
    assert_eq!(code, NONE, "{msg:?}");

    cluster.stop(gone);
    let rest: Vec<i32> = [1, 2, 3].into_iter().filter(|&n| n != gone).collect();
    cluster.await_isr(&topic, 0, &rest, wait);
    // The controller: the ISR left below min ISR, so the replica that left stays eligible.
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![TopicRequest::default().with_name(topic_name(&topic))]);
    let resp = c.request(0, &req);
    let elr: Vec<i32> = resp.topics[0].partitions[0]
        .eligible_leader_replicas
        .iter()
        .flatten()
        .map(|b| b.0)
        .collect();
    assert_eq!(elr, [gone], "{resp:?}");
    // The partition: acks=all is refused below the dynamic min ISR...
    let record = || encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_700_000_000_000)]);
    let p = c.produce(&topic, 0, record());
    assert_eq!(
        p.error_code,
        ResponseError::NotEnoughReplicas.code(),
        "{p:?}"
    );
    // ...and accepted once it is lowered again. The answer to the alter means the quorum
    // committed it; the leader applies it from its metadata image right after (as Kafka's
    // brokers do), so the retriable error may be answered until then.
    let (code, msg) = alter(&mut c, BROKER, "", &[("min.insync.replicas", "2")], false);
    assert_eq!(code, NONE, "{msg:?}");
    let deadline = Instant::now() + wait;
    loop {
        let p = c.produce(&topic, 0, record());
        if p.error_code == NONE {
            break;
        }
        assert_eq!(
            p.error_code,
            ResponseError::NotEnoughReplicas.code(),
            "{p:?}"
        );
        assert!(Instant::now() < deadline, "min ISR 2 never applied: {p:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
