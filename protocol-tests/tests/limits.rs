//! Kafka's size and connection limits over the raw wire, against real `brook serve` processes.
//!
//! - `max.message.bytes` (topic) and `message.max.bytes` (broker): a batch one byte over the
//!   limit is MESSAGE_TOO_LARGE and never reaches the log; one at the limit is stored
//!   (Kafka's `UnifiedLog.analyzeAndValidateRecords`). librdkafka sees the same error.
//! - `cleanup.policy=compact`: a keyless record is INVALID_RECORD with one record error per
//!   keyless record (Produce v8+ `record_errors`), and nothing of the batch is stored; keyed
//!   records are (Kafka's `LogValidator.validateKey`).
//! - `segment.bytes` must fit an i32 and be at least 1 MiB: CreateTopics and
//!   IncrementalAlterConfigs answer INVALID_CONFIG; `log.segment.bytes` beyond an i32 stops the
//!   broker at start-up with a message naming the key.
//! - `max.connections.per.ip`: one connection more from an address is closed right after
//!   accept; `max.connections`: the listener stops accepting until a connection ends (Kafka's
//!   `ConnectionQuotas`).
//! - `connections.max.idle.ms`: a connection that moves no bytes for that long is closed; one
//!   that keeps talking, or sends a frame slowly, is not (Kafka's `Selector` idle expiry).
//! - `fetch.max.bytes`: one Fetch answer holds at most that many record bytes across its
//!   partitions, whatever the request asks, except a first batch larger than it (KIP-74).
//! - 10,000 idle connections stay open and served while a librdkafka producer writes, and
//!   the broker raises its own soft limit on open files to get there; the RSS per connection
//!   is printed.
//!
//! Every wait is bounded. Lines starting `[limits]` say what a scenario observed.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::*;
use brook_protocol_tests::process::{proc_status_bytes, run_brook};
use brook_protocol_tests::rd;
use brook_protocol_tests::wire::*;
use brook_protocol_tests::{poll_until_ok, unique_topic, Broker, WireClient};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;

const MESSAGE_TOO_LARGE: i16 = 10;
const INVALID_CONFIG: i16 = 40;
const INVALID_RECORD: i16 = 87;
const INCREMENTAL_ALTER_CONFIGS_V: i16 = 1;
const LATEST: i64 = -1;
/// The topic override of the size tests, below the broker's `message.max.bytes`.
const TOPIC_MAX_MESSAGE_BYTES: usize = 2_000;
/// The broker default of the size tests.
const BROKER_MESSAGE_MAX_BYTES: usize = 3_000;
const WAIT: Duration = Duration::from_secs(20);
/// How long a connection the broker must close may stay open.
const CLOSE_WITHIN: Duration = Duration::from_secs(5);
/// How long a connection past `max.connections` is watched for an answer that must not come.
const NO_ANSWER_FOR: Duration = Duration::from_millis(700);

fn say(msg: &str) {
    println!("[limits] {msg}");
}

fn create_topic(c: &mut WireClient, topic: &str, configs: &[(&str, &str)]) -> (i16, String) {
    let req = WireClient::create_topics_request(topic, 1, 1, configs, Duration::from_secs(10));
    let resp = c.request(CREATE_TOPICS_V, &req);
    let t = &resp.topics[0];
    let msg = t.error_message.as_ref().map(|m| m.to_string());
    (t.error_code, msg.unwrap_or_default())
}

fn create_topic_ok(c: &mut WireClient, topic: &str, configs: &[(&str, &str)]) {
    let (code, msg) = create_topic(c, topic, configs);
    assert_eq!(code, NONE, "CreateTopics {topic} {configs:?}: {msg}");
}

/// One uncompressed single-record batch of exactly `size` bytes (the value pads it).
fn batch_of_size(size: usize) -> Vec<u8> {
    let header_only = encode_batch(Producer::NONE, &[Rec::kv("k", "", 1_000)]).len();
    // The value's length varint grows with it, so find the padding that lands exactly.
    for pad in (size.saturating_sub(header_only + 8))..=size {
        let b = encode_batch(Producer::NONE, &[Rec::kv("k", &"x".repeat(pad), 1_000)]);
        if b.len() == size {
            return b;
        }
    }
    panic!("no single-record batch of exactly {size} bytes");
}

fn log_end(c: &mut WireClient, topic: &str) -> i64 {
    let p = c.list_offsets(topic, 0, LATEST);
    assert_eq!(p.error_code, NONE, "ListOffsets {topic}: {p:?}");
    p.offset
}

/// A batch one byte over `max` is refused and not stored; one of `max` bytes is stored whole.
fn check_size_limit(c: &mut WireClient, topic: &str, max: usize) {
    let over = c.produce(topic, 0, batch_of_size(max + 1));
    assert_eq!(
        over.error_code,
        MESSAGE_TOO_LARGE,
        "{topic}: a batch of {} bytes with a limit of {max}: {over:?}",
        max + 1
    );
    assert_eq!(
        log_end(c, topic),
        0,
        "{topic}: the oversize batch reached the log"
    );
    let at = c.produce(topic, 0, batch_of_size(max));
    assert_eq!(
        at.error_code, NONE,
        "{topic}: a batch of {max} bytes: {at:?}"
    );
    assert_eq!(at.base_offset, 0);
    let stored = c.fetch_all(topic, 0);
    assert_eq!(stored.len(), 1, "{topic}: {stored:?}");
    assert_eq!(stored[0].raw.len(), max, "{topic}: stored as sent");
    say(&format!(
        "{topic}: {} bytes refused with MESSAGE_TOO_LARGE, {max} bytes stored",
        max + 1
    ));
}

#[test]
fn batches_over_max_message_bytes_are_message_too_large() {
    let max = BROKER_MESSAGE_MAX_BYTES.to_string();
    let b = Broker::start_with(&[("message.max.bytes", &max)]);
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("limits-topic-max");
    let topic_max = TOPIC_MAX_MESSAGE_BYTES.to_string();
    create_topic_ok(&mut c, &topic, &[("max.message.bytes", &topic_max)]);
    check_size_limit(&mut c, &topic, TOPIC_MAX_MESSAGE_BYTES);
    // A lowered limit holds for the live log at once.
    let lowered = TOPIC_MAX_MESSAGE_BYTES / 2;
    let (code, msg) = alter_topic_config(&mut c, &topic, "max.message.bytes", &lowered.to_string());
    assert_eq!(
        code, NONE,
        "IncrementalAlterConfigs max.message.bytes: {msg}"
    );
    let r = c.produce(&topic, 0, batch_of_size(lowered + 1));
    assert_eq!(
        r.error_code, MESSAGE_TOO_LARGE,
        "after lowering to {lowered}: {r:?}"
    );
    let r = c.produce(&topic, 0, batch_of_size(lowered));
    assert_eq!(r.error_code, NONE, "at the lowered limit: {r:?}");
    let plain = unique_topic("limits-broker-max");
    create_topic_ok(&mut c, &plain, &[]);
    check_size_limit(&mut c, &plain, BROKER_MESSAGE_MAX_BYTES);
}

#[test]
fn librdkafka_sees_message_too_large() {
    let b = Broker::start();
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("limits-rd");
    let topic_max = TOPIC_MAX_MESSAGE_BYTES.to_string();
    create_topic_ok(&mut c, &topic, &[("max.message.bytes", &topic_max)]);
    let p = rd::producer(&b.bootstrap(), &[("linger.ms", "0")]);
    let big = vec![b'x'; TOPIC_MAX_MESSAGE_BYTES * 2];
    rd::send(&p, rd::record(&topic, 0, Some(0), Some(b"k"), Some(&big)));
    let d = rd::flush(&p, 1, WAIT);
    assert_eq!(
        d[0].code,
        Some(rdkafka::types::RDKafkaErrorCode::MessageSizeTooLarge),
        "{:?}",
        d[0]
    );
    assert_eq!(log_end(&mut c, &topic), 0);
    say(&format!("librdkafka: {:?}", d[0].error));
}

/// Produces `records` in one batch and returns the partition's answer.
fn produce_records(c: &mut WireClient, topic: &str, records: &[Rec]) -> PartitionProduceResponse {
    c.produce(topic, 0, encode_batch(Producer::NONE, records))
}

fn keyless(value: &str) -> Rec {
    Rec {
        key: None,
        value: Some(value.as_bytes().to_vec()),
        headers: vec![],
        timestamp: 1_000,
    }
}

#[test]
fn compacted_topics_refuse_keyless_records() {
    let b = Broker::start();
    let mut c = WireClient::connect(&b.bootstrap());
    for policy in ["compact", "compact,delete"] {
        let topic = unique_topic("limits-compact");
        create_topic_ok(&mut c, &topic, &[("cleanup.policy", policy)]);
        let mixed = [Rec::kv("k0", "a", 1_000), keyless("b"), keyless("c")];
        let r = produce_records(&mut c, &topic, &mixed);
        assert_eq!(r.error_code, INVALID_RECORD, "{policy}: {r:?}");
        let indices: Vec<i32> = r.record_errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(
            indices,
            vec![1, 2],
            "{policy}: one error per keyless record: {r:?}"
        );
        let each = r.record_errors[0]
            .batch_index_error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default();
        assert!(each.contains("without key"), "{policy}: {each:?}");
        let message = r.error_message.as_ref().map(|m| m.to_string());
        assert!(
            message
                .as_deref()
                .is_some_and(|m| m.contains("2 record errors")),
            "{policy}: {message:?}"
        );
        assert_eq!(
            log_end(&mut c, &topic),
            0,
            "{policy}: part of the batch was stored"
        );
        // An empty key is a key.
        let keyed = [Rec::kv("k1", "a", 1_000), Rec::kv("", "b", 1_000)];
        let r = produce_records(&mut c, &topic, &keyed);
        assert_eq!(r.error_code, NONE, "{policy}: keyed records: {r:?}");
        assert_eq!(log_end(&mut c, &topic), 2);
        say(&format!(
            "cleanup.policy={policy}: keyless refused ({message:?}), keyed stored"
        ));
    }
    let plain = unique_topic("limits-delete");
    create_topic_ok(&mut c, &plain, &[]);
    let r = produce_records(&mut c, &plain, &[keyless("a")]);
    assert_eq!(
        r.error_code, NONE,
        "a delete topic takes keyless records: {r:?}"
    );
}

fn alter_topic_config(c: &mut WireClient, topic: &str, key: &str, value: &str) -> (i16, String) {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_string(key.to_string()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(value.to_string())))]),
    ]);
    let resp = c.request(INCREMENTAL_ALTER_CONFIGS_V, &req);
    let r = &resp.responses[0];
    let msg = r.error_message.as_ref().map(|m| m.to_string());
    (r.error_code, msg.unwrap_or_default())
}

#[test]
fn segment_bytes_must_fit_an_int() {
    let b = Broker::start();
    let mut c = WireClient::connect(&b.bootstrap());
    c.require_versions(&[(ApiKey::IncrementalAlterConfigs, INCREMENTAL_ALTER_CONFIGS_V)]);
    let too_big = (1u64 << 31).to_string();
    for bad in [too_big.as_str(), "1048575"] {
        let topic = unique_topic("limits-segment");
        let (code, msg) = create_topic(&mut c, &topic, &[("segment.bytes", bad)]);
        assert_eq!(
            code, INVALID_CONFIG,
            "CreateTopics segment.bytes={bad}: {msg}"
        );
        assert!(msg.contains("segment.bytes"), "{msg}");
        let m = c.metadata(&[&topic], false);
        assert_ne!(m.topics[0].error_code, NONE, "{topic} was created: {m:?}");
    }
    let topic = unique_topic("limits-segment");
    create_topic_ok(&mut c, &topic, &[("segment.bytes", "2147483647")]);
    let (code, msg) = alter_topic_config(&mut c, &topic, "segment.bytes", &too_big);
    assert_eq!(code, INVALID_CONFIG, "IncrementalAlterConfigs: {msg}");
    let (code, msg) = alter_topic_config(&mut c, &topic, "segment.bytes", "1048576");
    assert_eq!(code, NONE, "IncrementalAlterConfigs to 1 MiB: {msg}");
    say(&format!("segment.bytes={too_big}: INVALID_CONFIG ({msg})"));
}

#[test]
fn log_segment_bytes_beyond_an_int_stops_the_broker() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log_dirs = format!("log.dirs={}", dir.path().join("data").display());
    let args = [
        "serve",
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--override",
        &log_dirs,
        "--override",
        "log.segment.bytes=2147483648",
    ];
    let out = run_brook(&args, WAIT);
    let text = out.stderr + &out.stdout;
    assert!(!out.status.success(), "brook started: {text}");
    assert!(
        text.contains("log.segment.bytes"),
        "the error names the key: {text}"
    );
    say(&format!("start-up refused: {}", text.trim()));
}

/// A connection answers ApiVersions.
fn answers(c: &mut WireClient) -> Result<(), String> {
    let req = kafka_protocol::messages::ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("limits"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    c.try_request(API_VERSIONS_V, &req).map(|_| ())
}

#[test]
fn max_connections_per_ip_closes_the_extra_connection() {
    let b = Broker::start_with(&[("max.connections.per.ip", "2")]);
    let addr = b.bootstrap();
    let mut first = WireClient::connect(&addr);
    let mut second = WireClient::connect(&addr);
    answers(&mut first).expect("first connection");
    answers(&mut second).expect("second connection");
    let mut third = WireClient::connect(&addr);
    third
        .expect_closed(CLOSE_WITHIN)
        .expect("the third connection from 127.0.0.1 is closed");
    answers(&mut first).expect("first connection after the refusal");
    answers(&mut second).expect("second connection after the refusal");
    drop(first);
    // The broker frees the slot once it sees the close; until then a new one is refused.
    let mut again = poll_until_ok("a new connection once one closed", WAIT, || {
        let mut c = WireClient::try_connect(&addr, CLOSE_WITHIN).map_err(|e| e.to_string())?;
        answers(&mut c).map(|_| c)
    });
    answers(&mut second).expect("second connection still works");
    answers(&mut again).expect("the new connection keeps working");
    say("max.connections.per.ip=2: third closed, first two served, a new one after a close");
}

#[test]
fn max_connections_holds_new_connections_until_one_closes() {
    let b = Broker::start_with(&[("max.connections", "1")]);
    let addr = b.bootstrap();
    let mut first = WireClient::connect(&addr);
    answers(&mut first).expect("first connection");
    // The kernel completes the handshake, but the broker does not take the connection.
    let mut second = WireClient::connect(&addr);
    let req = kafka_protocol::messages::ApiVersionsRequest::default();
    let cid = second.send(API_VERSIONS_V, &req);
    second
        .stream()
        .set_read_timeout(Some(NO_ANSWER_FOR))
        .unwrap();
    let early = second.read_frame();
    assert!(
        early.is_err(),
        "a connection past max.connections=1 was served: {early:?}"
    );
    answers(&mut first).expect("first connection still works");
    drop(first);
    second.stream().set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    second
        .try_receive::<kafka_protocol::messages::ApiVersionsRequest>(API_VERSIONS_V, cid)
        .expect("the waiting connection is served once the first closed");
    say("max.connections=1: the second connection waited, then was served");
}

/// One ApiVersions answered on `c`.
fn api_versions_request() -> kafka_protocol::messages::ApiVersionsRequest {
    kafka_protocol::messages::ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("limits"))
        .with_client_software_version(StrBytes::from_static_str("1"))
}

/// The idle limit of the idle test: long enough that a loaded machine's scheduling never
/// looks like idleness between the test's own steps, which are at most `IDLE_STEP` apart.
const IDLE_MAX_MS: u64 = 3_000;
const IDLE_STEP: Duration = Duration::from_millis(600);

#[test]
fn idle_connections_close_after_connections_max_idle_ms() {
    let b = Broker::start_with(&[("connections.max.idle.ms", &IDLE_MAX_MS.to_string())]);
    let addr = b.bootstrap();
    let mut idle = WireClient::connect(&addr);
    answers(&mut idle).expect("idle connection's first request");
    let idle_since = std::time::Instant::now();

    // One connection keeps talking for longer than the limit: it stays open.
    let mut busy = WireClient::connect(&addr);
    let talk_until = idle_since + Duration::from_millis(IDLE_MAX_MS * 3 / 2);
    let mut requests = 0;
    while std::time::Instant::now() < talk_until {
        answers(&mut busy).expect("a connection that keeps talking is served");
        requests += 1;
        std::thread::sleep(IDLE_STEP);
    }

    // The idle one was closed, and not before the limit.
    idle.expect_closed(Duration::from_millis(IDLE_MAX_MS) + CLOSE_WITHIN)
        .expect("the idle connection is closed");
    let closed_after = idle_since.elapsed();
    assert!(
        closed_after >= Duration::from_millis(IDLE_MAX_MS),
        "closed after {closed_after:?}, before connections.max.idle.ms={IDLE_MAX_MS}"
    );

    // A frame sent a few bytes at a time over longer than the limit is read and answered:
    // every byte read restarts the clock.
    let mut slow = WireClient::connect(&addr);
    let key = ApiKey::ApiVersions;
    let header_v = key.request_header_version(API_VERSIONS_V);
    let (cid, payload) = slow.encode_request(
        key,
        API_VERSIONS_V,
        header_v,
        &api_versions_request(),
        API_VERSIONS_V,
    );
    let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&payload);
    let chunks: Vec<&[u8]> = frame.chunks(frame.len().div_ceil(8)).collect();
    let started = std::time::Instant::now();
    for chunk in &chunks {
        std::io::Write::write_all(slow.stream(), chunk).expect("slow frame chunk");
        std::thread::sleep(IDLE_STEP);
    }
    let spread = started.elapsed();
    assert!(
        spread > Duration::from_millis(IDLE_MAX_MS),
        "sent in {spread:?}"
    );
    slow.try_receive::<kafka_protocol::messages::ApiVersionsRequest>(API_VERSIONS_V, cid)
        .expect("a frame sent slowly is answered");
    // Meanwhile the busy connection said nothing for longer than the limit.
    busy.expect_closed(CLOSE_WITHIN)
        .expect("the once busy connection, idle during the slow frame, is closed");
    say(&format!(
        "connections.max.idle.ms={IDLE_MAX_MS}: idle closed after {closed_after:?}, \
         {requests} requests kept one open, a frame spread over {spread:?} answered"
    ));
}

/// The broker cap of the fetch test, and the batches it reads.
const FETCH_MAX_BYTES: usize = 64 * 1024;
const FETCH_BATCH_BYTES: usize = 10_000;
const FETCH_PARTITIONS: i32 = 4;
const FETCH_BATCHES_PER_PARTITION: usize = 4;

#[test]
fn fetch_answers_hold_at_most_fetch_max_bytes() {
    let b = Broker::start_with(&[("fetch.max.bytes", &FETCH_MAX_BYTES.to_string())]);
    let mut c = WireClient::connect(&b.bootstrap());
    let topic = unique_topic("fetch-max");
    let req = WireClient::create_topics_request(&topic, FETCH_PARTITIONS, 1, &[], WAIT);
    assert_eq!(c.request(CREATE_TOPICS_V, &req).topics[0].error_code, NONE);
    for p in 0..FETCH_PARTITIONS {
        for _ in 0..FETCH_BATCHES_PER_PARTITION {
            let r = c.produce(&topic, p, batch_of_size(FETCH_BATCH_BYTES));
            assert_eq!(r.error_code, NONE, "{r:?}");
        }
    }
    // Every partition at once, each allowed 1 MiB, the whole answer 4 MiB: the broker's cap
    // applies instead.
    let mut fetch = WireClient::fetch_request(&topic, 0, 0, 500);
    let first = fetch.topics[0].partitions[0].clone();
    fetch.topics[0].partitions = (0..FETCH_PARTITIONS)
        .map(|p| first.clone().with_partition(p))
        .collect();
    let resp = c.request(FETCH_V, &fetch);
    let sizes: Vec<usize> = resp.responses[0]
        .partitions
        .iter()
        .map(|p| {
            assert_eq!(p.error_code, NONE, "{p:?}");
            p.records.as_ref().map_or(0, |r| r.len())
        })
        .collect();
    let total: usize = sizes.iter().sum();
    assert!(
        total > 0 && total <= FETCH_MAX_BYTES,
        "fetch.max.bytes={FETCH_MAX_BYTES}: answered {total} record bytes ({sizes:?})"
    );

    // A batch larger than the cap still comes back alone, or the consumer would stall.
    let big = unique_topic("fetch-max-big");
    create_topic_ok(&mut c, &big, &[]);
    let r = c.produce(&big, 0, batch_of_size(FETCH_MAX_BYTES * 2));
    assert_eq!(r.error_code, NONE, "{r:?}");
    let p = c.fetch(&big, 0, 0);
    assert_eq!(
        p.records.as_ref().map_or(0, |r| r.len()),
        FETCH_MAX_BYTES * 2,
        "the one oversize batch: {p:?}"
    );
    say(&format!(
        "fetch.max.bytes={FETCH_MAX_BYTES}: {total} bytes of {} stored answered ({sizes:?}); \
         a {} byte batch answered whole",
        FETCH_BATCH_BYTES * FETCH_BATCHES_PER_PARTITION * FETCH_PARTITIONS as usize,
        FETCH_MAX_BYTES * 2
    ));
}

const IDLE_CONNECTIONS: usize = 10_000;
/// Descriptors the test process needs beyond its connections.
const SPARE_DESCRIPTORS: u64 = 200;
/// The soft limit the broker is started with: a common default, far below its connections.
const STARTING_SOFT_LIMIT: u64 = 1_024;
const IDLE_PRODUCER_RECORDS: usize = 1_000;

fn open_file_limits() -> (u64, u64) {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) }, 0);
    (l.rlim_cur, l.rlim_max)
}

fn set_soft_open_file_limit(soft: u64) {
    let (_, hard) = open_file_limits();
    let l = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads the struct it is given.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) }, 0);
}

/// Sends ApiVersions on every connection, then reads every answer.
fn every_connection_answers(conns: &mut [WireClient], when: &str) {
    let cids: Vec<i32> = conns
        .iter_mut()
        .enumerate()
        .map(|(i, c)| {
            c.try_send(API_VERSIONS_V, &api_versions_request())
                .unwrap_or_else(|e| panic!("{when}: connection {i}: {e}"))
        })
        .collect();
    for (i, (c, cid)) in conns.iter_mut().zip(cids).enumerate() {
        c.try_receive::<kafka_protocol::messages::ApiVersionsRequest>(API_VERSIONS_V, cid)
            .unwrap_or_else(|e| panic!("{when}: connection {i}: {e}"));
    }
}

#[test]
fn ten_thousand_idle_connections_stay_served_while_a_producer_writes() {
    let (_, hard) = open_file_limits();
    let needed = IDLE_CONNECTIONS as u64 + SPARE_DESCRIPTORS;
    assert!(
        hard >= needed,
        "the hard limit on open files is {hard}; this test needs {needed} (ulimit -Hn)"
    );
    // The broker starts with a low soft limit, as a shell's default gives it, and must raise
    // its own; this process needs the hard one for its side of the connections.
    set_soft_open_file_limit(STARTING_SOFT_LIMIT);
    let b = Broker::start();
    set_soft_open_file_limit(hard);
    let pid = b.pid().expect("broker pid");
    let addr = b.bootstrap();
    let topic = unique_topic("many-conns");
    create_topic_ok(&mut WireClient::connect(&addr), &topic, &[]);
    let rss_before = proc_status_bytes(pid, "VmRSS:");

    let mut conns: Vec<WireClient> = (0..IDLE_CONNECTIONS)
        .map(|i| {
            WireClient::try_connect(&addr, IO_TIMEOUT)
                .unwrap_or_else(|e| panic!("connection {i}: {e}"))
        })
        .collect();
    every_connection_answers(&mut conns, "once connected");
    let rss_connected = proc_status_bytes(pid, "VmRSS:");

    let producer = rd::producer(&addr, &[("acks", "all"), ("enable.idempotence", "true")]);
    for i in 0..IDLE_PRODUCER_RECORDS {
        let value = i.to_string();
        rd::send(
            &producer,
            rd::record(&topic, i, Some(0), None, Some(value.as_bytes())),
        );
    }
    let delivered = rd::flush(&producer, IDLE_PRODUCER_RECORDS, WAIT);
    rd::assert_all_delivered(&delivered);
    assert_eq!(
        log_end(&mut WireClient::connect(&addr), &topic),
        IDLE_PRODUCER_RECORDS as i64
    );

    every_connection_answers(&mut conns, "after the producer");
    let per_connection = rss_connected.saturating_sub(rss_before) / IDLE_CONNECTIONS as u64;
    say(&format!(
        "{IDLE_CONNECTIONS} idle connections (broker started with a soft limit of \
         {STARTING_SOFT_LIMIT}): RSS {} MiB before, {} MiB with them ({} KiB each); \
         {IDLE_PRODUCER_RECORDS} acks=all records delivered meanwhile",
        rss_before >> 20,
        rss_connected >> 20,
        per_connection >> 10
    ));
}
