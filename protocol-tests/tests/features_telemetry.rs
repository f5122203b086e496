//! Feature levels (UpdateFeatures, ApiVersions' finalized features), client telemetry
//! (KIP-714: client-metrics subscriptions, GetTelemetrySubscriptions, PushTelemetry) and
//! ListConfigResources, against one `brook` process, as Kafka 4.4 answers them.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use brook_protocol_tests::cluster::admin_get;
use brook_protocol_tests::{Broker, WireClient};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const INVALID_UPDATE_VERSION: i16 = 95;
const UNSUPPORTED_VERSION: i16 = 35;
const INVALID_REQUEST: i16 = 42;
const INVALID_CONFIG: i16 = 40;
const UNKNOWN_SUBSCRIPTION_ID: i16 = 117;
const TELEMETRY_TOO_LARGE: i16 = 118;
const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
const CLIENT_METRICS: i8 = 16;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn connect_as(addr: &str, client_id: &str) -> WireClient {
    let mut c = WireClient::connect(addr);
    c.client_id = client_id.to_string();
    c
}

fn finalized(c: &mut WireClient, name: &str) -> (Option<i16>, i64) {
    let r: ApiVersionsResponse = c.request(3, &ApiVersionsRequest::default());
    let level = r
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == name)
        .map(|f| f.max_version_level);
    (level, r.finalized_features_epoch)
}

fn update(
    c: &mut WireClient,
    v: i16,
    name: &str,
    level: i16,
    ty: i8,
    validate: bool,
) -> UpdateFeaturesResponse {
    let req = UpdateFeaturesRequest::default()
        .with_feature_updates(vec![FeatureUpdateKey::default()
            .with_feature(s(name))
            .with_max_version_level(level)
            .with_upgrade_type(ty)])
        .with_validate_only(validate);
    c.request(v, &req)
}

#[test]
fn update_features_changes_finalized_levels_as_kafka_does() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let (tv, epoch) = finalized(&mut c, "transaction.version");
    assert_eq!(tv, Some(2));
    assert_eq!(finalized(&mut c, "share.version").0, Some(1));
    assert_eq!(finalized(&mut c, "streams.version").0, Some(1));

    // A downgrade without a downgrade type, an unknown feature, a level past the range.
    let r = update(&mut c, 1, "transaction.version", 1, 1, false);
    assert_eq!(r.error_code, INVALID_UPDATE_VERSION, "{r:?}");
    assert!(r
        .error_message
        .unwrap()
        .contains("without setting the upgrade type"));
    let r = update(&mut c, 1, "no.such.feature", 1, 1, false);
    assert_eq!(r.error_code, INVALID_UPDATE_VERSION);
    assert!(r
        .error_message
        .unwrap()
        .ends_with("does not support this feature."));
    let r = update(&mut c, 1, "transaction.version", 3, 1, false);
    assert_eq!(r.error_code, INVALID_UPDATE_VERSION);
    assert!(r
        .error_message
        .unwrap()
        .ends_with("only supports versions 0-2"));
    let r = update(&mut c, 2, "metadata.version", 20, 2, false);
    assert_eq!(r.error_code, INVALID_UPDATE_VERSION);

    // validate_only changes nothing; a safe downgrade does, with a new epoch.
    let r = update(&mut c, 1, "transaction.version", 1, 2, true);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.results.len(), 1, "v1 lists each feature");
    assert_eq!(finalized(&mut c, "transaction.version").0, Some(2));
    let r = update(&mut c, 2, "transaction.version", 1, 2, false);
    assert_eq!(
        (r.error_code, r.results.len()),
        (0, 0),
        "v2 lists none: {r:?}"
    );
    let (tv, new_epoch) = finalized(&mut c, "transaction.version");
    assert_eq!(tv, Some(1));
    assert!(new_epoch > epoch, "{new_epoch} > {epoch}");

    // group.version 0 turns the consumer group protocol off (Kafka's
    // `isConsumerGroupProtocolEnabled`), and back on.
    assert_eq!(
        update(&mut c, 2, "group.version", 0, 3, false).error_code,
        0
    );
    assert_eq!(
        finalized(&mut c, "group.version").0,
        None,
        "level 0 is left out"
    );
    let hb = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(s("g").into())
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30000)
        .with_subscribed_topic_names(Some(vec![s("t").into()]));
    let r: ConsumerGroupHeartbeatResponse = c.request(0, &hb);
    assert_eq!(r.error_code, UNSUPPORTED_VERSION);
    assert_eq!(
        update(&mut c, 2, "group.version", 1, 1, false).error_code,
        0
    );
    let r: ConsumerGroupHeartbeatResponse = c.request(0, &hb);
    assert_ne!(r.error_code, UNSUPPORTED_VERSION, "{r:?}");
}

fn alter(c: &mut WireClient, name: &str, configs: &[(&str, &str)]) -> (i16, String) {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(CLIENT_METRICS)
            .with_resource_name(s(name))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        AlterableConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            ),
    ]);
    let r: IncrementalAlterConfigsResponse = c.request(1, &req);
    let x = &r.responses[0];
    (
        x.error_code,
        x.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

/// An OTLP `MetricsData` with one gauge point named `name` of value `v` (hand-encoded:
/// resource metrics 1 > scope metrics 2 > metric 2 > name 1, gauge 5 > data point 1 >
/// as_double 4).
fn otlp(name: &str, v: f64) -> Vec<u8> {
    fn len(field: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![(field << 3) | 2, body.len() as u8];
        out.extend_from_slice(body);
        out
    }
    let mut point = vec![(4 << 3) | 1];
    point.extend_from_slice(&v.to_le_bytes());
    let gauge = len(1, &point);
    let mut metric = len(1, name.as_bytes());
    metric.extend(len(5, &gauge));
    len(1, &len(2, &len(2, &metric)))
}

#[test]
fn client_metrics_subscriptions_and_pushes() {
    let broker = Broker::start_with(&[
        ("admin.listener", "127.0.0.1:0"),
        ("telemetry.max.bytes", "1000"),
    ]);
    let admin = broker.admin_address();
    let mut c = WireClient::connect(&broker.bootstrap());

    // Without a subscription a client gets no metrics to send.
    let get = |c: &mut WireClient, id: uuid::Uuid| -> GetTelemetrySubscriptionsResponse {
        c.request(
            0,
            &GetTelemetrySubscriptionsRequest::default().with_client_instance_id(id),
        )
    };
    let r = get(&mut c, uuid::Uuid::nil());
    assert_eq!(r.error_code, 0);
    assert!(r.requested_metrics.is_empty());
    assert_eq!(r.push_interval_ms, 300_000);
    assert_eq!(r.accepted_compression_types, vec![4, 3, 1, 2]);

    // ClientMetricsConfigs' validation.
    assert_eq!(
        alter(&mut c, "sub", &[("interval.ms", "50")]).0,
        INVALID_REQUEST
    );
    assert_eq!(alter(&mut c, "sub", &[("nope", "1")]).0, INVALID_REQUEST);
    assert_eq!(
        alter(&mut c, "sub", &[("match", "bad_selector=x")]).0,
        INVALID_CONFIG
    );
    let ok = alter(
        &mut c,
        "sub",
        &[
            ("metrics", "org.apache.kafka.producer."),
            ("interval.ms", "1000"),
            ("match", "client_id=tele.*"),
        ],
    );
    assert_eq!(ok.0, 0, "{ok:?}");
    let d: DescribeConfigsResponse = c.request(
        4,
        &DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(CLIENT_METRICS)
                .with_resource_name(s("sub")),
        ]),
    );
    let names: Vec<String> = d.results[0]
        .configs
        .iter()
        .map(|e| e.name.to_string())
        .collect();
    assert_eq!(names, ["interval.ms", "match", "metrics"], "{d:?}");

    // ListConfigResources: v0 the subscriptions, v1 by type.
    let l: ListConfigResourcesResponse = c.request(0, &ListConfigResourcesRequest::default());
    assert_eq!(
        l.config_resources
            .iter()
            .map(|r| r.resource_name.to_string())
            .collect::<Vec<_>>(),
        ["sub"]
    );
    let l: ListConfigResourcesResponse = c.request(
        1,
        &ListConfigResourcesRequest::default().with_resource_types(vec![4]),
    );
    assert_eq!(l.config_resources.len(), 1, "{l:?}");
    assert_eq!(l.config_resources[0].resource_type, 4);

    // The subscription matches client ids starting with "tele" only.
    let mut other = WireClient::connect(&broker.bootstrap());
    let r = get(&mut other, uuid::Uuid::nil());
    assert!(r.requested_metrics.is_empty(), "{r:?}");
    let mut tele = connect_as(&broker.bootstrap(), "telemetry-client");
    let r = get(&mut tele, uuid::Uuid::nil());
    assert_eq!(r.requested_metrics, vec![s("org.apache.kafka.producer.")]);
    assert_eq!(r.push_interval_ms, 1000);
    let (id, sub) = (r.client_instance_id, r.subscription_id);
    assert_eq!(get(&mut tele, id).error_code, THROTTLING_QUOTA_EXCEEDED);

    let push = |c: &mut WireClient, sub: i32, metrics: Vec<u8>, terminating: bool| -> i16 {
        let req = PushTelemetryRequest::default()
            .with_client_instance_id(id)
            .with_subscription_id(sub)
            .with_terminating(terminating)
            .with_metrics(metrics.into());
        let r: PushTelemetryResponse = c.request(0, &req);
        r.error_code
    };
    assert_eq!(
        push(&mut tele, sub + 1, Vec::new(), false),
        UNKNOWN_SUBSCRIPTION_ID
    );
    assert_eq!(
        push(&mut tele, sub, vec![0; 1001], true),
        TELEMETRY_TOO_LARGE
    );
    // Terminated: the instance takes no more pushes.
    assert_eq!(push(&mut tele, sub, Vec::new(), false), INVALID_REQUEST);

    let mut tele2 = connect_as(&broker.bootstrap(), "telemetry-2");
    let r = get(&mut tele2, uuid::Uuid::nil());
    let req = PushTelemetryRequest::default()
        .with_client_instance_id(r.client_instance_id)
        .with_subscription_id(r.subscription_id)
        .with_metrics(otlp("org.apache.kafka.producer.record.send.rate", 2.5).into());
    let p: PushTelemetryResponse = tele2.request(0, &req);
    assert_eq!(p.error_code, 0);
    let bad = PushTelemetryRequest::default()
        .with_client_instance_id(r.client_instance_id)
        .with_subscription_id(r.subscription_id)
        .with_terminating(true)
        .with_metrics(vec![0xff, 0xff].into());
    let p: PushTelemetryResponse = tele2.request(0, &bad);
    assert_eq!(p.error_code, 87, "INVALID_RECORD");

    let metrics = admin_get(&admin, "/metrics").expect("metrics");
    let line = format!(
        "brook_client_metric{{client_instance_id=\"{}\",client_id=\"telemetry-2\",metric=\"org.apache.kafka.producer.record.send.rate\",attributes=\"\"}} 2.5",
        r.client_instance_id
    );
    assert!(metrics.contains(&line), "{line} in\n{metrics}");
    let view = admin_get(&admin, "/v1/client-metrics").expect("view");
    assert!(
        view.contains("org.apache.kafka.producer.record.send.rate"),
        "{view}"
    );
}
