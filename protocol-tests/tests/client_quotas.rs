//! Client quotas as Kafka 4.4 serves them: AlterClientQuotas and DescribeClientQuotas over the
//! raw wire (Kafka's validation and errors, defaults, the exact/default/specified match types,
//! `strict`, `validate_only`, quotas surviving a restart), and a librdkafka producer held to its
//! `producer_byte_rate`, told so by the throttle time of its Produce answers (KIP-219), and
//! CreateTopics, CreatePartitions and DeleteTopics held to `controller_mutation_rate` (strict
//! and permissive versions, Kafka's `ControllerMutationQuotaManager`; one bucket per client
//! on the active controller, whichever broker a request comes through), and a client
//! hammering Metadata held to its `request_percentage` (Kafka's `ClientRequestQuotaManager`),
//! and the connection creation rates (per address, broker-wide, per listener).
//!
//! The tests run against Kafka 4.4 too (`scripts/differential`, through kafka-as-brook.sh);
//! the 3-node one with `KAFKA_CLUSTER_BOOTSTRAP` naming a running Kafka cluster's brokers
//! (`scripts/kafka-reference start --nodes 3`).
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brook_protocol_tests::batch::{encode_batch, Producer as BatchProducer, Rec};
use brook_protocol_tests::rd::ThrottleStats;
use brook_protocol_tests::wire::topic_name;
use brook_protocol_tests::{poll_until_ok, unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeClientQuotasRequest,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

const INVALID_REQUEST: i16 = 42;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
const UNSUPPORTED_VERSION: i16 = 35;

const EXACT: i8 = 0;
const DEFAULT: i8 = 1;
const SPECIFIED: i8 = 2;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// An entity: (type, name), `None` for the default.
type Entity<'a> = &'a [(&'a str, Option<&'a str>)];

/// One AlterClientQuotas entry: `None` as a value removes the key.
fn entry(entity: Entity, ops: &[(&str, Option<f64>)]) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(s(t))
                        .with_entity_name(n.map(s))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    OpData::default()
                        .with_key(s(k))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )
}

/// AlterClientQuotas; each entry's (error code, message), in the answer's order.
fn alter(
    c: &mut WireClient,
    version: i16,
    entries: Vec<EntryData>,
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let req = AlterClientQuotasRequest::default()
        .with_entries(entries)
        .with_validate_only(validate_only);
    let r = c.request(version, &req);
    r.entries
        .iter()
        .map(|e| {
            (
                e.error_code,
                e.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

/// A DescribeClientQuotas filter: (entity type, match type, match).
type Filter<'a> = &'a [(&'a str, i8, Option<&'a str>)];

/// One described entity and its values, sorted.
type Described = (Vec<(String, Option<String>)>, Vec<(String, f64)>);

/// DescribeClientQuotas: the top-level error, or the entries (sorted, for comparison).
fn describe(
    c: &mut WireClient,
    version: i16,
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> Result<Vec<Described>, (i16, String)> {
    let req = DescribeClientQuotasRequest::default()
        .with_components(
            components
                .iter()
                .map(|(t, m, n)| {
                    ComponentData::default()
                        .with_entity_type(s(t))
                        .with_match_type(*m)
                        .with_match(n.map(s))
                })
                .collect(),
        )
        .with_strict(strict);
    let r = c.request(version, &req);
    if r.error_code != 0 {
        let message = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        return Err((r.error_code, message));
    }
    let mut entries: Vec<Described> = r
        .entries
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let mut entity: Vec<_> = e
                .entity
                .iter()
                .map(|d| {
                    let name = d.entity_name.as_ref().map(|n| n.to_string());
                    (d.entity_type.to_string(), name)
                })
                .collect();
            entity.sort();
            let mut values: Vec<_> = e
                .values
                .iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            values.sort_by(|a, b| a.0.cmp(&b.0));
            (entity, values)
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

/// Kafka answers AlterClientQuotas once the controller committed the change; a broker's
/// DescribeClientQuotas reads its own metadata, which follows shortly after.
fn await_described(c: &mut WireClient, want: &[Described]) {
    poll_until_ok(
        "DescribeClientQuotas to show the change",
        Duration::from_secs(15),
        || match describe(c, 1, &[], false) {
            Ok(got) if got == want => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
}

fn ent(pairs: Entity) -> Vec<(String, Option<String>)> {
    let mut v: Vec<_> = pairs
        .iter()
        .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
        .collect();
    v.sort();
    v
}

fn vals(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Kafka's validation, one refused entry at a time: (entry, error code, message).
fn refused_entries() -> Vec<(EntryData, &'static str)> {
    vec![
        (
            entry(&[("user", Some("alice"))], &[("bogus_rate", Some(1.0))]),
            "Invalid configuration key bogus_rate",
        ),
        (
            entry(
                &[("user", Some("alice"))],
                &[("producer_byte_rate", Some(1.5))],
            ),
            "producer_byte_rate cannot be a fractional value.",
        ),
        (
            entry(
                &[("client-id", Some("c"))],
                &[("consumer_byte_rate", Some(0.0))],
            ),
            "Quota consumer_byte_rate must be greater than 0",
        ),
        (
            entry(
                &[("group", Some("g"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            "Unhandled client quota entity type: group",
        ),
        (
            entry(&[("user", Some(""))], &[("producer_byte_rate", Some(1.0))]),
            "Empty user not supported",
        ),
        (
            entry(
                &[("ip", Some("10.0.0.1"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            "Invalid configuration key producer_byte_rate",
        ),
        (
            entry(&[], &[("producer_byte_rate", Some(1.0))]),
            "Invalid empty client quota entity",
        ),
    ]
}

/// The quotas the test sets: a user's, the default client-id's, a client-id's under the
/// default user, and the default IP's.
fn set_quotas() -> Vec<EntryData> {
    vec![
        entry(
            &[("user", Some("alice"))],
            &[("producer_byte_rate", Some(1024.0))],
        ),
        entry(
            &[("client-id", None)],
            &[("consumer_byte_rate", Some(2048.0))],
        ),
        entry(
            &[("user", None), ("client-id", Some("app"))],
            &[
                ("request_percentage", Some(12.5)),
                ("controller_mutation_rate", Some(3.0)),
            ],
        ),
        entry(&[("ip", None)], &[("connection_creation_rate", Some(50.0))]),
    ]
}

/// How DescribeClientQuotas describes [`set_quotas`]' entities.
struct Expected {
    alice: Described,
    default_client: Described,
    default_user_app: Described,
    default_ip: Described,
}

fn expected() -> Expected {
    let alice = (
        ent(&[("user", Some("alice"))]),
        vals(&[("producer_byte_rate", 1024.0)]),
    );
    let default_client = (
        ent(&[("client-id", None)]),
        vals(&[("consumer_byte_rate", 2048.0)]),
    );
    let default_user_app = (
        ent(&[("user", None), ("client-id", Some("app"))]),
        vals(&[
            ("controller_mutation_rate", 3.0),
            ("request_percentage", 12.5),
        ]),
    );
    let default_ip = (
        ent(&[("ip", None)]),
        vals(&[("connection_creation_rate", 50.0)]),
    );
    Expected {
        alice,
        default_client,
        default_user_app,
        default_ip,
    }
}

/// Kafka's match types and `strict` over [`set_quotas`]' entities.
fn filters_match(c: &mut WireClient, e: &Expected) {
    let (alice, default_client, default_user_app, default_ip) = (
        &e.alice,
        &e.default_client,
        &e.default_user_app,
        &e.default_ip,
    );
    let cases: Vec<(Filter, bool, Vec<Described>)> = vec![
        (
            &[("user", EXACT, Some("alice"))],
            false,
            vec![alice.clone()],
        ),
        (
            &[("client-id", DEFAULT, None)],
            false,
            vec![default_client.clone()],
        ),
        (
            &[("user", DEFAULT, None)],
            false,
            vec![default_user_app.clone()],
        ),
        (&[("user", DEFAULT, None)], true, vec![]),
        (&[("ip", DEFAULT, None)], false, vec![default_ip.clone()]),
        (&[("user", SPECIFIED, None)], true, vec![alice.clone()]),
        (
            &[("user", SPECIFIED, None), ("client-id", EXACT, Some("app"))],
            true,
            vec![default_user_app.clone()],
        ),
    ];
    for (components, strict, want) in &cases {
        let mut want = want.clone();
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            describe(c, 1, components, *strict),
            Ok(want),
            "{components:?} strict={strict}"
        );
    }
    // `user` specified, not strict: every entity with a user part.
    let mut users = vec![alice.clone(), default_user_app.clone()];
    users.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        describe(c, 0, &[("user", SPECIFIED, None)], false),
        Ok(users)
    );
}

/// The filters Kafka refuses, with its errors.
fn filter_errors(c: &mut WireClient) {
    let bad: &[(Filter, i16, &str)] = &[
        (&[("group", SPECIFIED, None)], UNSUPPORTED_VERSION, "Unsupported entity type group"),
        (
            &[("user", EXACT, None)],
            INVALID_REQUEST,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            &[("user", DEFAULT, Some("x"))],
            INVALID_REQUEST,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        (
            &[("user", SPECIFIED, None), ("user", DEFAULT, None)],
            INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.",
        ),
        (
            &[("ip", SPECIFIED, None), ("user", SPECIFIED, None)],
            INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.",
        ),
    ];
    for (components, code, message) in bad {
        assert_eq!(
            describe(c, 1, components, false),
            Err((*code, message.to_string())),
            "{components:?}"
        );
    }
}

#[test]
fn alter_and_describe_client_quotas_as_kafka_answers_them() {
    let mut b = Broker::start();
    let mut c = WireClient::connect(&b.bootstrap());
    for (e, message) in refused_entries() {
        let got = alter(&mut c, 1, vec![e], false);
        assert_eq!(
            got,
            vec![(INVALID_REQUEST, Some(message.to_string()))],
            "{message}"
        );
    }
    // validate_only answers as a real change would, and changes nothing.
    let checked = alter(
        &mut c,
        0,
        vec![entry(
            &[("user", Some("bob"))],
            &[("producer_byte_rate", Some(10.0))],
        )],
        true,
    );
    assert_eq!(checked, vec![(0, None)]);
    assert_eq!(describe(&mut c, 1, &[], false), Ok(vec![]));

    let ok = alter(&mut c, 1, set_quotas(), false);
    assert_eq!(ok, vec![(0, None); 4]);

    let e = expected();
    let mut expect_all = vec![
        e.alice.clone(),
        e.default_client.clone(),
        e.default_user_app.clone(),
        e.default_ip.clone(),
    ];
    expect_all.sort_by(|a, b| a.0.cmp(&b.0));
    await_described(&mut c, &expect_all);
    filters_match(&mut c, &e);
    filter_errors(&mut c);

    // Removing the last key removes the entity.
    let removed = alter(
        &mut c,
        1,
        vec![entry(
            &[("ip", None)],
            &[("connection_creation_rate", None)],
        )],
        false,
    );
    assert_eq!(removed, vec![(0, None)]);
    let mut kept: Vec<Described> = expect_all
        .into_iter()
        .filter(|x| x != &e.default_ip)
        .collect();
    kept.sort_by(|a, b| a.0.cmp(&b.0));
    await_described(&mut c, &kept);

    // The quotas are in the metadata log: a restarted node has them.
    drop(c);
    b.restart();
    let mut c = WireClient::connect(&b.bootstrap());
    await_described(&mut c, &kept);
}

/// The quota the producer is held to: 100 KiB/s.
const QUOTA_BYTES_PER_SECOND: f64 = 100.0 * 1024.0;
/// How long the producer sends as fast as it can.
const SEND_FOR: Duration = Duration::from_secs(5);
/// Measured from here on, once the burst the first window allows is spent.
const MEASURE_FROM: Duration = Duration::from_secs(2);
const RECORD_BYTES: usize = 8 * 1024;
/// Bounds the send loop whatever the broker does.
const RECORDS_MAX: usize = 20_000;

#[test]
fn a_producer_is_held_to_its_producer_byte_rate() {
    // Two samples of one second: the first window's burst is one quota's worth, so the rate
    // settles within the test's few seconds (Kafka's defaults, 11 samples, allow ten).
    let b = Broker::start_with(&[
        ("quota.window.num", "2"),
        ("quota.window.size.seconds", "1"),
        ("admin.listener", "127.0.0.1:0"),
    ]);
    let mut c = WireClient::connect(&b.bootstrap());
    c.ensure_topic("held");
    let set = alter(
        &mut c,
        1,
        vec![entry(
            &[("client-id", Some("held-producer"))],
            &[("producer_byte_rate", Some(QUOTA_BYTES_PER_SECOND))],
        )],
        false,
    );
    assert_eq!(set, vec![(0, None)]);

    let (p, max_throttle) = held_producer(&b.bootstrap());
    let payload = vec![7u8; RECORD_BYTES];
    let start = Instant::now();
    let mut sent_at_measure = None;
    let mut sent = 0usize;
    while start.elapsed() < SEND_FOR && sent < RECORDS_MAX {
        let rec: BaseRecord<'_, [u8], [u8], ()> = BaseRecord::to("held").payload(&payload[..]);
        match p.send(rec) {
            Ok(()) => sent += 1,
            // The local queue is full: the broker is holding the producer back.
            Err(_) => {
                p.poll(Duration::from_millis(10));
            }
        }
        p.poll(Duration::ZERO);
        if sent_at_measure.is_none() && start.elapsed() >= MEASURE_FROM {
            sent_at_measure = Some((sent - p.in_flight_count() as usize, Instant::now()));
        }
    }
    let acked_at_end = sent - p.in_flight_count() as usize;
    let (acked_at_measure, measured_from) = sent_at_measure.expect("ran past MEASURE_FROM");
    let rate = (acked_at_end - acked_at_measure) as f64 * RECORD_BYTES as f64
        / measured_from.elapsed().as_secs_f64();
    p.flush(Duration::from_secs(30)).expect("flush");
    // Let one more statistics interval report the last throttles.
    p.poll(Duration::from_millis(300));
    let ratio = rate / QUOTA_BYTES_PER_SECOND;
    let max_ms = max_throttle.load(Ordering::Relaxed);
    eprintln!("measured {rate:.0} B/s (quota ratio {ratio:.2}), largest throttle {max_ms} ms");
    assert!(
        (0.6..=1.4).contains(&ratio),
        "measured {rate:.0} B/s against a quota of {QUOTA_BYTES_PER_SECOND} B/s"
    );
    assert!(max_ms > 0, "no Produce answer carried a throttle time");
    assert_throttle_metric(&b);
}

/// A librdkafka producer as `held-producer` with a small queue (so that a held-back broker
/// holds the sends back), and the largest throttle time its statistics report.
fn held_producer(bootstrap: &str) -> (BaseProducer<ThrottleStats>, Arc<AtomicI64>) {
    let stats = ThrottleStats::default();
    let max_throttle = stats.throttle_ms_max.clone();
    let p = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "held-producer")
        .set("linger.ms", "5")
        .set("batch.size", "16384")
        .set("queue.buffering.max.kbytes", "64")
        .set("statistics.interval.ms", "200")
        .create_with_context(stats)
        .expect("create producer");
    (p, max_throttle)
}

fn assert_throttle_metric(b: &Broker) {
    // On Brook, /metrics counts the throttle time by quota type (Kafka's READY line, behind
    // kafka-as-brook.sh, names no admin listener).
    if let Some(admin) = b
        .ready_line()
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("admin="))
    {
        let body = scrape_metrics(admin);
        let line = body
            .lines()
            .find(|l| l.starts_with("brook_quota_throttle_time_ms_total{quota_type=\"Produce\"}"))
            .unwrap_or_else(|| panic!("no produce throttle metric in\n{body}"));
        let ms: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        assert!(ms > 0.0, "{line}");
    }
}

/// `GET /metrics` on the admin listener, the body.
fn scrape_metrics(admin: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).expect("connect admin listener");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read /metrics");
    raw.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// `controller_mutation_rate` of the default client-id: 2 partitions/s, each client-id its
/// own bucket of `controller.quota.window.num` (2) windows of 1 s, so a burst of 4.
const MUTATIONS_PER_SECOND: f64 = 2.0;

#[test]
fn topic_mutations_are_held_to_the_controller_mutation_rate() {
    let b = Broker::start_with(&[
        ("controller.quota.window.num", "2"),
        ("controller.quota.window.size.seconds", "1"),
    ]);
    set_default_mutation_rate(&b);
    strict_create_topics(&b);
    permissive_create_topics(&b);
    strict_delete_and_grow(&b);
}

/// Sets [`MUTATIONS_PER_SECOND`] as the default client-id's `controller_mutation_rate` and
/// waits until it is enforced; returns the client that set it.
fn set_default_mutation_rate(b: &Broker) -> WireClient {
    let mut admin = mutator(b, "unlimited");
    let set = alter(
        &mut admin,
        1,
        vec![entry(
            &[("client-id", None)],
            &[("controller_mutation_rate", Some(MUTATIONS_PER_SECOND))],
        )],
        false,
    );
    assert_eq!(set, vec![(0, None)]);
    await_mutation_quota(&b.bootstrap(), "", 5);
    admin
}

/// Waits until `controller_mutation_rate` is enforced through `addr` (quotas reach the
/// controller through the metadata log): each probe, a client id of its own, creates a topic
/// of `partitions` that spends its bucket and then one more, refused once enforced.
fn await_mutation_quota(addr: &str, prefix: &str, partitions: i32) {
    let mut attempt = 0;
    poll_until_ok(
        "the mutation quota enforced",
        Duration::from_secs(30),
        || {
            attempt += 1;
            let mut c = WireClient::connect(addr);
            c.client_id = format!("{prefix}probe-{attempt}");
            let first = format!("{prefix}probe-{attempt}-a");
            let second = format!("{prefix}probe-{attempt}-b");
            let r = create_topics(&mut c, 6, &[(&first, partitions), (&second, 1)]);
            (r.1[1] == THROTTLING_QUOTA_EXCEEDED)
                .then_some(())
                .ok_or(format!("not yet enforced: {r:?}"))
        },
    );
}

/// A raw client with its own client-id (its own bucket).
fn mutator(b: &Broker, client_id: &str) -> WireClient {
    let mut c = WireClient::connect(&b.bootstrap());
    c.client_id = client_id.into();
    c
}

/// CreateTopics at `version`: the answer's throttle time and each topic's error code.
fn create_topics(c: &mut WireClient, version: i16, topics: &[(&str, i32)]) -> (i32, Vec<i16>) {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(
            topics
                .iter()
                .map(|(name, n)| {
                    CreatableTopic::default()
                        .with_name(topic_name(name))
                        .with_num_partitions(*n)
                        .with_replication_factor(1)
                })
                .collect(),
        );
    let r = c.request(version, &req);
    let codes = topics
        .iter()
        .map(|(name, _)| {
            r.topics
                .iter()
                .find(|t| t.name.0.as_str() == *name)
                .map_or(-1, |t| t.error_code)
        })
        .collect();
    (r.throttle_time_ms, codes)
}

/// The window a throttle time from a bucket at about `deficit` partitions below zero falls
/// in: what refilling it takes, less at most the time the request `took` (the broker
/// subtracts what passed between charging the bucket and answering, Kafka's
/// `AbstractControllerMutationQuota.throttleTime`; under load that is not bounded).
fn refill_ms(deficit: f64, took: Duration) -> std::ops::RangeInclusive<i32> {
    let ms = (deficit / MUTATIONS_PER_SECOND * 1000.0) as i32;
    ms - took.as_millis() as i32..=ms
}

/// v6: the topic that spends the bucket passes, the next is refused with a throttle time;
/// an existing topic is refused as existing first, and costs nothing.
fn strict_create_topics(b: &Broker) {
    let mut admin = mutator(b, "unlimited-2");
    assert_eq!(create_topics(&mut admin, 6, &[("exists", 1)]).1, vec![0]);
    let mut c = mutator(b, "strict");
    let topics = [("s1", 3), ("s2", 3), ("exists", 1), ("s3", 1)];
    let sent = Instant::now();
    let (throttle_ms, codes) = create_topics(&mut c, 6, &topics);
    let took = sent.elapsed();
    assert_eq!(
        codes,
        vec![0, 0, TOPIC_ALREADY_EXISTS, THROTTLING_QUOTA_EXCEEDED]
    );
    assert!(
        refill_ms(2.0, took).contains(&throttle_ms),
        "{throttle_ms} after {took:?}"
    );
    // The refused topic does not exist.
    let md = admin.metadata(&["s3"], false);
    assert_ne!(md.topics[0].error_code, 0, "s3 was created");
}

/// v5: every topic is created, and the answer carries the time to refill the bucket.
fn permissive_create_topics(b: &Broker) {
    let mut c = mutator(b, "permissive");
    let sent = Instant::now();
    let (throttle_ms, codes) = create_topics(&mut c, 5, &[("p1", 3), ("p2", 3)]);
    let took = sent.elapsed();
    assert_eq!(codes, vec![0, 0]);
    assert!(
        refill_ms(2.0, took).contains(&throttle_ms),
        "{throttle_ms} after {took:?}"
    );
}

/// DeleteTopics v5 and CreatePartitions v3 are strict too. The second request goes on
/// another connection of the same client-id: the first is muted for the throttle time,
/// the bucket is the client-id's.
fn strict_delete_and_grow(b: &Broker) {
    let mut c = mutator(b, "deleter");
    // Three topics of 3 partitions from a bucket of 4: two go, one is refused (which one
    // is not fixed: Kafka's controller takes them in hash order).
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topic_names(["s1", "s2", "p1"].iter().map(|n| topic_name(n)).collect());
    let sent = Instant::now();
    let r = c.request(5, &req);
    let took = sent.elapsed();
    let mut codes: Vec<i16> = r.responses.iter().map(|t| t.error_code).collect();
    codes.sort();
    assert_eq!(codes, vec![0, 0, THROTTLING_QUOTA_EXCEEDED]);
    assert!(
        refill_ms(2.0, took).contains(&r.throttle_time_ms),
        "{} after {took:?}",
        r.throttle_time_ms
    );

    let mut again = mutator(b, "deleter");
    let grow = CreatePartitionsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name("p2"))
            .with_count(4)
            .with_assignments(None)]);
    let r = again.request(3, &grow);
    assert_eq!(r.results[0].error_code, THROTTLING_QUOTA_EXCEEDED);
    assert!(r.throttle_time_ms > 0, "{}", r.throttle_time_ms);
}

/// `request_percentage` of the hammering client: 1% of one thread, 10 ms of request time a
/// second.
const REQUEST_PERCENTAGE: f64 = 1.0;
/// Bounds the hammering whatever the broker does.
const HAMMER_REQUESTS_MAX: usize = 50_000;
const HAMMER_FOR: Duration = Duration::from_secs(10);

#[test]
fn a_client_hammering_cheap_requests_is_held_to_its_request_percentage() {
    let b = Broker::start_with(&[
        ("quota.window.num", "2"),
        ("quota.window.size.seconds", "1"),
    ]);
    let mut admin = WireClient::connect(&b.bootstrap());
    let set = alter(
        &mut admin,
        1,
        vec![entry(
            &[("client-id", Some("hammer"))],
            &[("request_percentage", Some(REQUEST_PERCENTAGE))],
        )],
        false,
    );
    assert_eq!(set, vec![(0, None)]);
    let mut c = mutator(&b, "hammer");
    let start = Instant::now();
    let mut sent = 0;
    let throttle_ms = loop {
        assert!(
            sent < HAMMER_REQUESTS_MAX && start.elapsed() < HAMMER_FOR,
            "{sent} Metadata requests in {:?}, none throttled",
            start.elapsed()
        );
        sent += 1;
        let t = c.metadata(&[], false).throttle_time_ms;
        if t > 0 {
            break t;
        }
    };
    // Kafka bounds a request-time throttle by one window (`quota.window.size.seconds`).
    assert!(throttle_ms <= 1000, "{throttle_ms}");
    // Hammering on, the client is muted (KIP-219) most of the time: the throttle times
    // handed out fill most of the time, and (muted, not just told) no more than it. The
    // hammering starts as the first throttled answer arrives, so that answer's mute is part
    // of its time: Kafka's first Metadata answer on a fresh node can already carry a whole
    // window (its first request takes over 10 ms of handler time), muting the first second.
    let (all_ms, muted_ms, elapsed) = hammer_on(&mut c, HAMMER_ON);
    let elapsed_ms = elapsed.as_millis() as i64;
    let first_ms = i64::from(throttle_ms).min(elapsed_ms);
    eprintln!(
        "first throttle after {sent} requests ({throttle_ms} ms); then {all_ms} ms of \
         throttle in {elapsed_ms} ms"
    );
    assert!(all_ms > 0, "throttled once, never again in {elapsed_ms} ms");
    assert!(
        (first_ms + all_ms) * 2 >= elapsed_ms,
        "{first_ms} + {all_ms} of {elapsed_ms} ms"
    );
    assert!(
        first_ms + muted_ms <= elapsed_ms + 100,
        "{first_ms} + {muted_ms} ms throttled in {elapsed_ms} ms: not muted"
    );
}

/// A produce over both its byte-rate quota and its request quota: the answer carries the
/// larger throttle, and only the quota that gave it counts it (Kafka's
/// `handleProduceRequest`: `requestHelper.throttle` on the produce manager when the bandwidth
/// throttle is larger, on the request manager otherwise). One client whose byte rate gives
/// the larger throttle, one whose request time does (capped at one window, 1 s).
#[test]
fn a_produce_over_two_quotas_is_throttled_by_the_larger_and_counted_once() {
    let b = Broker::start_with(&[
        ("quota.window.num", "2"),
        ("quota.window.size.seconds", "1"),
        ("admin.listener", "127.0.0.1:0"),
    ]);
    let mut admin = WireClient::connect(&b.bootstrap());
    admin.ensure_topic("two-quotas");
    // One produce request of about 2,100 bytes: 800 B/s gives (2100 - 800) / 800 windows,
    // about 1.6 s; 2,000 B/s gives about 50 ms. Any request time is far over 0.0001 %.
    let clients = [("bandwidth-larger", 800.0), ("request-larger", 2_000.0)];
    for (client_id, bytes_per_second) in clients {
        let set = alter(
            &mut admin,
            1,
            vec![entry(
                &[("client-id", Some(client_id))],
                &[
                    ("producer_byte_rate", Some(bytes_per_second)),
                    ("request_percentage", Some(0.0001)),
                ],
            )],
            false,
        );
        assert_eq!(set, vec![(0, None)]);
    }
    let value = "v".repeat(2_000);
    let mut throttles = Vec::new();
    for (client_id, _) in clients {
        let mut c = mutator(&b, client_id);
        let batch = encode_batch(
            BatchProducer::NONE,
            &[Rec::kv("k", &value, 1_700_000_000_000)],
        );
        let req = WireClient::produce_request("two-quotas", 0, batch, -1);
        let resp = c.request(9, &req);
        let code = resp.responses[0].partition_responses[0].error_code;
        assert_eq!(code, 0, "{client_id}: {resp:?}");
        throttles.push(resp.throttle_time_ms);
    }
    eprintln!("throttle times: {throttles:?}");
    assert!(
        throttles[0] > 1_000,
        "the byte rate's throttle: {throttles:?}"
    );
    assert_eq!(
        throttles[1], 1_000,
        "the request quota's, one window: {throttles:?}"
    );
    // On Brook, /metrics counts the throttles by quota type: one each (Kafka's READY line,
    // behind kafka-as-brook.sh, names no admin listener; its JMX is not read here).
    if let Some(admin) = b
        .ready_line()
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("admin="))
    {
        let body = scrape_metrics(admin);
        let counted = |t: &str| -> f64 {
            let prefix = format!("brook_quota_throttled_requests_total{{quota_type=\"{t}\"}} ");
            body.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {prefix} in\n{body}"))
        };
        assert_eq!((counted("Produce"), counted("Request")), (1.0, 1.0));
    }
}

/// How long the hammering goes on once throttled.
const HAMMER_ON: Duration = Duration::from_millis(1500);

/// Metadata requests for `period`: the throttle times of all answers, of all but the last
/// (whose mute falls after the period), and the time taken.
fn hammer_on(c: &mut WireClient, period: Duration) -> (i64, i64, Duration) {
    let start = Instant::now();
    let (mut all_ms, mut last_ms) = (0i64, 0i64);
    for _ in 0..HAMMER_REQUESTS_MAX {
        if start.elapsed() >= period {
            break;
        }
        last_ms = c.metadata(&[], false).throttle_time_ms as i64;
        all_ms += last_ms;
    }
    (all_ms, all_ms - last_ms, start.elapsed())
}

/// One connection of a burst: answered, or closed unanswered after this long.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Probe {
    Answered(Duration),
    Closed(Duration),
}

/// Opens `n` connections at once, sends an ApiVersions v0 on each, and reads each answer:
/// what each connection saw, timed from the first connect, and the client address used.
fn burst(bootstrap: &str, n: usize) -> (Vec<Probe>, std::net::IpAddr) {
    use std::io::{Read, Write};
    // ApiVersions v0: api key 18, version 0, correlation id 1, client id "burst", no body.
    let mut frame = vec![0, 0, 0, 0, 0, 18, 0, 0, 0, 0, 0, 1, 0, 5];
    frame.extend_from_slice(b"burst");
    let size = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    let t0 = Instant::now();
    let mut streams: Vec<std::net::TcpStream> = (0..n)
        .map(|_| std::net::TcpStream::connect(bootstrap).expect("connect"))
        .collect();
    let ip = streams[0].local_addr().expect("local address").ip();
    for s in &mut streams {
        // A throttled connection may already be closed; its read below says so.
        let _ = s.write_all(&frame);
    }
    let probes = streams
        .iter_mut()
        .map(|s| {
            s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            let mut size = [0u8; 4];
            match s.read_exact(&mut size) {
                Ok(()) => Probe::Answered(t0.elapsed()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    panic!("no answer and no close within 15 s")
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    panic!("no answer and no close within 15 s")
                }
                Err(_) => Probe::Closed(t0.elapsed()),
            }
        })
        .collect();
    (probes, ip)
}

fn answered(probes: &[Probe]) -> usize {
    probes
        .iter()
        .filter(|p| matches!(p, Probe::Answered(_)))
        .count()
}

/// Kafka's `ConnectionQuotas.recordIpConnectionMaybeThrottle`: a new connection from an
/// address over its `connection_creation_rate` is accepted, left unanswered for the throttle
/// time and closed; the address's own `ip` entity wins over the default one.
#[test]
fn an_address_over_its_connection_creation_rate_has_new_connections_closed() {
    // Rates over one second at least: 5 per second allows 5 connections at once.
    let b = Broker::start_with(&[
        ("quota.window.num", "2"),
        ("quota.window.size.seconds", "1"),
    ]);
    let mut admin = WireClient::connect(&b.bootstrap());
    let rate = |ip: Option<&str>, v: f64| {
        vec![entry(
            &[("ip", ip)],
            &[("connection_creation_rate", Some(v))],
        )]
    };
    assert_eq!(
        alter(&mut admin, 1, rate(None, 5.0), false),
        vec![(0, None)]
    );
    // Quotas reach the listeners through the metadata log: wait for the first burst held.
    let (probes, ip) = poll_until_ok(
        "the default ip quota enforced",
        Duration::from_secs(10),
        || {
            let (probes, ip) = burst(&b.bootstrap(), 12);
            (answered(&probes) < 12)
                .then_some((probes.clone(), ip))
                .ok_or(format!("every connection answered: {probes:?}"))
        },
    );
    // The address's rate started with this burst: 5 connections pass, the rest are closed.
    assert!(answered(&probes) <= 6, "{probes:?}");
    for p in &probes {
        if let Probe::Closed(after) = p {
            // (6 - 5) / 5 of the one-second window: 200 ms.
            assert!(
                *after >= Duration::from_millis(100),
                "closed at once: {probes:?}"
            );
        }
    }
    let own = ip.to_string();
    assert_eq!(
        alter(&mut admin, 1, rate(Some(&own), 1000.0), false),
        vec![(0, None)]
    );
    poll_until_ok(
        "the address's own quota applied",
        Duration::from_secs(10),
        || {
            let (probes, _) = burst(&b.bootstrap(), 12);
            (answered(&probes) == 12)
                .then_some(())
                .ok_or(format!("still throttled: {probes:?}"))
        },
    );
}

/// Kafka's `ConnectionQuotas.waitForConnectionSlot`: over `max.connection.creation.rate` the
/// broker holds each new connection before serving it, so a burst is served, but spread out.
#[test]
fn max_connection_creation_rate_spreads_a_burst_out() {
    assert_burst_spread_out_by("max.connection.creation.rate");
}

/// A broker with `key` at 5 new connections a second (over two windows of 1 s): a burst of
/// 10 is served 5 at once, then each held 200 ms or more, so the last after 800 ms or more.
fn assert_burst_spread_out_by(key: &str) {
    let b = Broker::start_with(&[
        (key, "5"),
        ("quota.window.num", "2"),
        ("quota.window.size.seconds", "1"),
    ]);
    let (probes, _) = burst(&b.bootstrap(), 10);
    let last = last_answered(&probes);
    assert!(last >= Duration::from_millis(800), "{probes:?}");
}

/// When the last connection of a burst was answered (every one must be).
fn last_answered(probes: &[Probe]) -> Duration {
    assert_eq!(answered(probes), probes.len(), "{probes:?}");
    probes
        .iter()
        .map(|p| match p {
            Probe::Answered(t) | Probe::Closed(t) => *t,
        })
        .max()
        .unwrap_or_default()
}

/// Kafka's `ListenerConnectionQuota`: `listener.name.<l>.max.connection.creation.rate` holds
/// new connections on that listener as the broker-wide key does on all of them.
#[test]
fn a_listener_creation_rate_spreads_a_burst_on_that_listener() {
    assert_burst_spread_out_by("listener.name.plaintext.max.connection.creation.rate");
}

/// Kafka's `ConnectionQuotas.protectedListener` and `ListenerConnectionQuota`: with a second
/// listener, the inter-broker one (PLAINTEXT) neither waits on nor counts in the broker-wide
/// `max.connection.creation.rate`, but is held to its own rate, which without a
/// `listener.name.` key is the broker-wide value (`valuesWithPrefixOverride`).
#[test]
fn the_inter_broker_listener_is_held_to_its_own_rate_not_the_brokers() {
    let b = Broker::start_with(&[
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        ),
        (
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
            "PLAIN",
        ),
        (
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";"#,
        ),
        ("max.connection.creation.rate", "5"),
        ("quota.window.num", "2"),
        ("quota.window.size.seconds", "1"),
    ]);
    let (probes, _) = burst(&b.listener_address("PLAINTEXT"), 10);
    let last = last_answered(&probes);
    assert!(last >= Duration::from_millis(800), "not held: {probes:?}");
    // Had those 10 counted in the broker's rate, 5 more on the other listener would wait.
    let (probes, _) = burst(&b.listener_address("SASL_PLAINTEXT"), 5);
    let last = last_answered(&probes);
    assert!(last < Duration::from_millis(500), "held: {probes:?}");
}

/// A cluster's brokers for the shared-bucket test: `KAFKA_CLUSTER_BOOTSTRAP`, a running
/// Kafka 4.4 cluster's addresses (`scripts/kafka-reference start --nodes 3` prints them), or
/// a 3-node Brook cluster started here (kept alive with the addresses).
fn three_brokers() -> (Option<Cluster>, Vec<String>) {
    if let Ok(list) = std::env::var("KAFKA_CLUSTER_BOOTSTRAP") {
        let addrs: Vec<String> = list.split(',').map(str::to_string).collect();
        assert_eq!(
            addrs.len(),
            3,
            "KAFKA_CLUSTER_BOOTSTRAP names 3 brokers: {list}"
        );
        return (None, addrs);
    }
    let c = Cluster::start(3, &[]);
    let addrs = c.ids().iter().map(|id| c.address(*id)).collect();
    (Some(c), addrs)
}

/// Kafka's `ControllerApis` charges `controller_mutation_rate` on the active controller,
/// from the principal and client id the forwarding broker passes on: one client id's
/// requests through two brokers take tokens from one bucket. A strict CreateTopics (v6)
/// that spends a bucket of 11 tokens (1 a second, `controller.quota.window.num` 11 windows
/// of 1 s, the defaults) 9 tokens below zero through one broker leaves the same client id
/// refused through another for the next 9 s.
#[test]
fn one_client_id_through_two_brokers_spends_one_mutation_bucket() {
    let (_cluster, addrs) = three_brokers();
    let client = |i: usize, id: &str| {
        let mut c = WireClient::connect(&addrs[i]);
        c.client_id = id.into();
        c
    };
    let run = unique_topic("shared");
    let quota = vec![entry(
        &[("client-id", None)],
        &[("controller_mutation_rate", Some(1.0))],
    )];
    assert_eq!(
        alter(&mut client(0, "admin"), 1, quota, false),
        vec![(0, None)]
    );
    await_mutation_quota(&addrs[0], &format!("{run}-"), 12);
    let shared = format!("{run}-client");
    let first = format!("{run}-a");
    let (_, codes) = create_topics(&mut client(0, &shared), 6, &[(&first, 20)]);
    assert_eq!(codes, vec![0]);
    let second = format!("{run}-b");
    let (throttle_ms, codes) = create_topics(&mut client(1, &shared), 6, &[(&second, 1)]);
    assert_eq!(
        codes,
        vec![THROTTLING_QUOTA_EXCEEDED],
        "another broker, another bucket"
    );
    assert!((1..=9000).contains(&throttle_ms), "{throttle_ms}");
}

/// Partitions of an auto-created topic in the auto-creation test: far more than the bucket
/// holds, so it stays below zero for many seconds after (38 partitions at 2 a second: 19 s).
const AUTO_CREATED_PARTITIONS: &str = "40";

/// Kafka's `AutoTopicCreationManager` sends a Metadata request's auto-creation to the
/// controller as a CreateTopics in an envelope with the client's principal and client id, at
/// the newest version (`KRaftTopicCreator.createTopicWithPrincipal`), so the controller's
/// `ControllerApis.handleCreateTopics` charges it to that client's strict
/// `controller_mutation_rate` (`newQuotaFor(request, strictSinceVersion = 6)`): a client
/// whose auto-created topic spent its bucket is refused its next CreateTopics, while another
/// client id is not.
#[test]
fn auto_created_topics_are_charged_to_the_clients_controller_mutation_rate() {
    let b = Broker::start_with(&[
        ("controller.quota.window.num", "2"),
        ("controller.quota.window.size.seconds", "1"),
        ("num.partitions", AUTO_CREATED_PARTITIONS),
        ("auto.create.topics.enable", "true"),
    ]);
    let mut admin = set_default_mutation_rate(&b);

    let topic = unique_topic("auto-charged");
    let mut creator = mutator(&b, "auto-creator");
    let md = creator.metadata(&[&topic], true);
    assert_eq!(md.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    // The creation is answered before it is done: wait for the topic, through a client that
    // creates nothing.
    poll_until_ok("the auto-created topic", Duration::from_secs(30), || {
        let md = admin.metadata(&[&topic], false);
        let t = &md.topics[0];
        (t.error_code == 0 && t.partitions.len().to_string() == AUTO_CREATED_PARTITIONS)
            .then_some(())
            .ok_or(format!("not created yet: {t:?}"))
    });
    let next = format!("{topic}-next");
    let (throttle_ms, codes) = create_topics(&mut creator, 6, &[(&next, 1)]);
    assert_eq!(
        codes,
        vec![THROTTLING_QUOTA_EXCEEDED],
        "the auto-created topic was not charged to its client"
    );
    assert!(throttle_ms > 0, "{throttle_ms}");
    let mut other = mutator(&b, "auto-bystander");
    assert_eq!(create_topics(&mut other, 6, &[(&next, 1)]).1, vec![0]);
}
