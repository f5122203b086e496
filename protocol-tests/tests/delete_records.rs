//! DeleteRecords (API 21) over the raw wire, against real `brook serve` processes.
//!
//! Single node: Kafka's refusals (unknown partition, internal topic, compact-only topic, an
//! offset above the high watermark or below 0 other than -1); then a deletion moves ListOffsets
//! EARLIEST, a Fetch below it is OFFSET_OUT_OF_RANGE, the segment files wholly below it are
//! gone, the log start never moves back, and it survives a clean restart and a SIGKILL.
//!
//! Three nodes: the leader answers only once every live replica has taken the new log start
//! from its Fetch answers and reported it back (the low watermark), each replica deletes its
//! own segments below it, a replica cut off from replication makes the answer time out
//! (REQUEST_TIMED_OUT), and after the leader is SIGKILLed the new leader serves the same start.
//!
//! Every wait is a condition polled against a deadline. Lines starting `[delete-records]` say
//! what a scenario observed.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::path::Path;
use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::*;
use brook_protocol_tests::wire::*;
use brook_protocol_tests::{poll_until, poll_until_ok, unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_records_response::DeleteRecordsPartitionResult;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;

const DELETE_RECORDS_V: i16 = 2;
const FIND_COORDINATOR_V: i16 = 3;
const POLICY_VIOLATION: i16 = 44;
const REQUEST_TIMED_OUT: i16 = 7;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;
/// Small enough that every two or three one-record batches roll a segment: set through
/// `internal.segment.bytes`, as `segment.bytes` must be at least 1 MiB (Kafka 4.4).
const SEGMENT_BYTES: &str = "200";
const RECORDS: i64 = 12;
const WAIT: Duration = Duration::from_secs(45);
/// A DeleteRecords' own timeout in the cluster, below the wire client's socket timeout, so
/// that a wait that never ends shows as REQUEST_TIMED_OUT.
const DELETE_TIMEOUT_MS: i32 = 15_000;

fn say(msg: &str) {
    println!("[delete-records] {msg}");
}

/// One DeleteRecords of one partition at `version`; its partition's answer.
fn delete_records_at(
    c: &mut WireClient,
    version: i16,
    topic: &str,
    partition: i32,
    offset: i64,
    timeout_ms: i32,
) -> DeleteRecordsPartitionResult {
    let req = DeleteRecordsRequest::default()
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)])])
        .with_timeout_ms(timeout_ms);
    let resp = c.request(version, &req);
    assert_eq!(resp.topics.len(), 1, "DeleteRecords answer: {resp:?}");
    assert_eq!(resp.topics[0].name.0.as_str(), topic, "{resp:?}");
    assert_eq!(resp.topics[0].partitions.len(), 1, "{resp:?}");
    let p = resp.topics[0].partitions[0].clone();
    assert_eq!(p.partition_index, partition, "{resp:?}");
    p
}

fn delete_records(
    c: &mut WireClient,
    topic: &str,
    offset: i64,
    timeout_ms: i32,
) -> DeleteRecordsPartitionResult {
    delete_records_at(c, DELETE_RECORDS_V, topic, 0, offset, timeout_ms)
}

fn create_topic(c: &mut WireClient, topic: &str, configs: &[(&str, &str)]) {
    let req = WireClient::create_topics_request(topic, 1, 1, configs, Duration::from_secs(10));
    let resp = c.request(CREATE_TOPICS_V, &req);
    assert_eq!(
        resp.topics[0].error_code, NONE,
        "CreateTopics {topic}: {resp:?}"
    );
}

/// `RECORDS` one-record batches, offsets 0..RECORDS.
fn produce_records(c: &mut WireClient, topic: &str) {
    for i in 0..RECORDS {
        let batch = encode_batch(Producer::NONE, &[Rec::kv("k", &format!("v{i}"), 1_000 + i)]);
        let r = c.produce(topic, 0, batch);
        assert_eq!((r.error_code, r.base_offset), (NONE, i), "{r:?}");
    }
}

/// The base offsets of the `.log` segment files in a partition directory, ascending.
fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}

/// No segment lies wholly below `start`: every segment but the first begins above it.
fn no_segment_below(bases: &[i64], start: i64) -> bool {
    bases.first().is_some_and(|b| *b <= start) && bases.iter().skip(1).all(|b| *b > start)
}

fn earliest(c: &mut WireClient, topic: &str) -> i64 {
    let r = c.list_offsets(topic, 0, EARLIEST);
    assert_eq!(r.error_code, NONE, "ListOffsets EARLIEST: {r:?}");
    r.offset
}

/// The offset of the first record a Fetch at `offset` returns, or its error code.
fn first_fetched(c: &mut WireClient, topic: &str, offset: i64) -> Result<i64, i16> {
    let pd = c.fetch(topic, 0, offset);
    if pd.error_code != NONE {
        return Err(pd.error_code);
    }
    let data = pd.records.unwrap_or_default();
    let batches = brook_protocol_tests::batch::parse_batches(&data).expect("fetched batches");
    Ok(batches.first().map(|b| b.base_offset).unwrap_or(-1))
}

#[test]
fn delete_records_refusals_on_a_single_node() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    c.require_versions(&[(ApiKey::DeleteRecords, DELETE_RECORDS_V)]);
    let topic = unique_topic("delrec-refusals");
    create_topic(&mut c, &topic, &[]);
    produce_records(&mut c, &topic);

    let r = delete_records(&mut c, "delrec-no-such-topic", 1, 5_000);
    assert_eq!(
        (r.error_code, r.low_watermark),
        (UNKNOWN_TOPIC_OR_PARTITION, -1),
        "unknown topic: {r:?}"
    );
    let r = delete_records_at(&mut c, DELETE_RECORDS_V, &topic, 3, 1, 5_000);
    assert_eq!(
        r.error_code, UNKNOWN_TOPIC_OR_PARTITION,
        "unknown partition: {r:?}"
    );
    for bad in [RECORDS + 1, -2, -100] {
        let r = delete_records(&mut c, &topic, bad, 5_000);
        assert_eq!(
            (r.error_code, r.low_watermark),
            (OFFSET_OUT_OF_RANGE, -1),
            "offset {bad}: {r:?}"
        );
    }
    assert_eq!(
        earliest(&mut c, &topic),
        0,
        "a refused deletion moves nothing"
    );

    let compacted = unique_topic("delrec-compacted");
    create_topic(&mut c, &compacted, &[("cleanup.policy", "compact")]);
    let r = delete_records(&mut c, &compacted, 0, 5_000);
    assert_eq!(r.error_code, POLICY_VIOLATION, "compact-only topic: {r:?}");

    // The group coordinator creates __consumer_offsets on first use.
    let mut fc = FindCoordinatorRequest::default();
    fc.key = StrBytes::from_static_str("delrec-group");
    let resp = c.request(FIND_COORDINATOR_V, &fc);
    assert_eq!(resp.error_code, NONE, "FindCoordinator: {resp:?}");
    let r = delete_records(&mut c, "__consumer_offsets", 0, 5_000);
    assert_eq!(
        r.error_code, INVALID_TOPIC_EXCEPTION,
        "internal topic: {r:?}"
    );
}

#[test]
fn delete_records_moves_the_log_start_on_a_single_node_and_survives_restarts() {
    let mut broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    c.require_versions(&[(ApiKey::DeleteRecords, DELETE_RECORDS_V)]);
    let topic = unique_topic("delrec-single");
    create_topic(&mut c, &topic, &[("internal.segment.bytes", SEGMENT_BYTES)]);
    produce_records(&mut c, &topic);
    let dir = broker.data_dir().join(format!("{topic}-0"));
    let before = segment_bases(&dir);
    let start = 6;
    assert!(
        before.iter().filter(|b| **b <= start).count() >= 3,
        "the test needs segments wholly below {start}: {before:?}"
    );

    // v0 is served too (Kafka 4.4 serves 0-2).
    let r = delete_records_at(&mut c, 0, &topic, 0, start, 5_000);
    assert_eq!((r.error_code, r.low_watermark), (NONE, start), "{r:?}");
    assert_eq!(earliest(&mut c, &topic), start);
    let latest = c.list_offsets(&topic, 0, LATEST);
    assert_eq!(latest.offset, RECORDS, "the log end stays: {latest:?}");
    assert_eq!(
        first_fetched(&mut c, &topic, start - 1),
        Err(OFFSET_OUT_OF_RANGE)
    );
    assert_eq!(first_fetched(&mut c, &topic, 0), Err(OFFSET_OUT_OF_RANGE));
    assert_eq!(first_fetched(&mut c, &topic, start), Ok(start));
    let after = segment_bases(&dir);
    say(&format!(
        "segments before {before:?}, after deleting below {start}: {after:?}"
    ));
    assert!(
        no_segment_below(&after, start),
        "segments below {start} remain: {after:?}"
    );

    // The log start only rises.
    let r = delete_records(&mut c, &topic, 2, 5_000);
    assert_eq!((r.error_code, r.low_watermark), (NONE, start), "{r:?}");
    assert_eq!(earliest(&mut c, &topic), start);

    broker.restart();
    let mut c = WireClient::connect(&broker.bootstrap());
    assert_eq!(earliest(&mut c, &topic), start, "after a clean restart");
    assert_eq!(
        first_fetched(&mut c, &topic, start - 1),
        Err(OFFSET_OUT_OF_RANGE)
    );

    // -1 is the high watermark, here the log end. The start is not a segment boundary, so
    // only the checkpoint written before the answer can bring it back after a SIGKILL.
    let r = delete_records(&mut c, &topic, -1, 5_000);
    assert_eq!((r.error_code, r.low_watermark), (NONE, RECORDS), "{r:?}");
    let r = delete_records(&mut c, &topic, 9, 5_000);
    assert_eq!((r.error_code, r.low_watermark), (NONE, RECORDS), "{r:?}");
    let bases = segment_bases(&dir);
    assert!(
        bases.first().is_some_and(|b| *b < RECORDS),
        "the active segment stays: {bases:?}"
    );
    broker.kill9();
    broker.start_again();
    let mut c = WireClient::connect(&broker.bootstrap());
    assert_eq!(earliest(&mut c, &topic), RECORDS, "after a SIGKILL");
    let r = c.produce(
        &topic,
        0,
        encode_batch(Producer::NONE, &[Rec::kv("k", "after", 5_000)]),
    );
    assert_eq!((r.error_code, r.base_offset), (NONE, RECORDS), "{r:?}");
    assert_eq!(first_fetched(&mut c, &topic, RECORDS), Ok(RECORDS));
}

/// Produces `RECORDS` one-record batches (acks=all) to `leader`, each sent again until
/// accepted (bounded): a refused batch was not written.
fn produce_to_leader(c: &Cluster, leader: i32, topic: &str) {
    let mut wire = WireClient::connect(&c.address(leader));
    for i in 0..RECORDS {
        let batch = encode_batch(Producer::NONE, &[Rec::kv("k", &format!("v{i}"), 1_000 + i)]);
        let req = WireClient::produce_request(topic, 0, batch, -1);
        poll_until_ok(&format!("node {leader} accepts record {i}"), WAIT, || {
            let resp = wire.try_request(PRODUCE_V, &req)?;
            match resp.responses[0].partition_responses[0].error_code {
                NONE => Ok(()),
                code => Err(format!("error {code}")),
            }
        });
    }
}

#[test]
fn delete_records_reaches_every_replica_of_a_cluster() {
    let mut c = Cluster::start(3, &[]);
    let topic = unique_topic("delrec-cluster");
    c.create_topic(&topic, 1, 3, &[("internal.segment.bytes", SEGMENT_BYTES)]);
    let all = c.ids();
    let state = c.await_isr(&topic, 0, &all, WAIT);
    let leader = state.leader;
    produce_to_leader(&c, leader, &topic);
    for id in &all {
        poll_until(&format!("node {id} has every record"), WAIT, || {
            (c.log_end_offset(*id, &topic, 0) == RECORDS).then_some(())
        });
    }
    let mut wire = WireClient::connect(&c.address(leader));

    let follower = *all.iter().find(|id| **id != leader).expect("a follower");
    let r = delete_records(
        &mut WireClient::connect(&c.address(follower)),
        &topic,
        4,
        DELETE_TIMEOUT_MS,
    );
    assert_eq!(
        (r.error_code, r.low_watermark),
        (NOT_LEADER_OR_FOLLOWER, -1),
        "sent to follower {follower}: {r:?}"
    );
    assert_eq!(earliest(&mut wire, &topic), 0, "a follower moves nothing");

    // Answered once every live replica reported the new start: each has deleted its own
    // segments below it by then.
    let start = 6;
    let r = delete_records(&mut wire, &topic, start, DELETE_TIMEOUT_MS);
    assert_eq!((r.error_code, r.low_watermark), (NONE, start), "{r:?}");
    for id in &all {
        let bases = segment_bases(&c.partition_dir(*id, &topic, 0));
        say(&format!(
            "node {id} segments after deleting below {start}: {bases:?}"
        ));
        assert!(
            no_segment_below(&bases, start) && bases[0] > 0,
            "node {id} keeps segments below {start}: {bases:?}"
        );
    }

    // A follower cut off from replication never reports a higher start: the answer waits
    // for it until the request's timeout, as Kafka's DelayedDeleteRecords.
    let cut = follower;
    let rule = c.isolate_replication(cut);
    let r = delete_records(&mut wire, &topic, 8, 1_500);
    assert_eq!(
        (r.error_code, r.low_watermark),
        (REQUEST_TIMED_OUT, start),
        "node {cut} is cut off: {r:?}"
    );
    assert_eq!(
        earliest(&mut wire, &topic),
        8,
        "the leader's start moved anyway"
    );
    c.fault_remove(cut, rule);
    let r = delete_records(&mut wire, &topic, 8, DELETE_TIMEOUT_MS);
    assert_eq!(
        (r.error_code, r.low_watermark),
        (NONE, 8),
        "node {cut} is back: {r:?}"
    );

    // A new leader serves the same start.
    c.kill(leader);
    let state = c.await_leader_other_than(&topic, 0, leader, WAIT);
    say(&format!(
        "node {leader} killed, node {} leads",
        state.leader
    ));
    let mut wire = WireClient::connect(&c.address(state.leader));
    let got = poll_until_ok("the new leader answers ListOffsets", WAIT, || {
        let r = wire.list_offsets(&topic, 0, EARLIEST);
        match r.error_code {
            NONE => Ok(r.offset),
            code => Err(format!("error {code}")),
        }
    });
    assert_eq!(got, 8, "the new leader's log start");
    assert_eq!(
        first_fetched(&mut wire, &topic, 7),
        Err(OFFSET_OUT_OF_RANGE)
    );
    assert_eq!(first_fetched(&mut wire, &topic, 8), Ok(8));
}
