//! Kafka's partition and fetch rules, over the raw wire: those a single node already shows,
//! and the partition lookup that needs a cluster.
//!
//! - Effective min ISR (`Partition.effectiveMinIsr`): checks use
//!   `min(min.insync.replicas, replication factor)`, so a single node with
//!   `min.insync.replicas=2` commits acks=1 writes and accepts acks=all.
//! - A Fetch with `min_bytes=0` is answered at once, not after `max_wait_ms`
//!   (`ReplicaManager.fetchMessages`: respond when the bytes readable reach `min_bytes`).
//! - A partition the metadata knows but this node does not host is NOT_LEADER_OR_FOLLOWER,
//!   so the client refreshes its metadata and goes to the leader; only a partition the
//!   metadata does not know is UNKNOWN_TOPIC_OR_PARTITION (`ReplicaManager.getPartitionOrError`).
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::{Duration, Instant};

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::{NONE, UNKNOWN_TOPIC_OR_PARTITION};
use brook_protocol_tests::wire::{topic_name, FETCH_V, LIST_OFFSETS_V, PRODUCE_V};
use brook_protocol_tests::{poll_until_ok, unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeProducersRequest, OffsetForLeaderEpochRequest, ProducerId,
    WriteTxnMarkersRequest,
};

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const OFFSET_FOR_LEADER_EPOCH_V: i16 = 4;
const DESCRIBE_PRODUCERS_V: i16 = 0;
const WRITE_TXN_MARKERS_V: i16 = 1;

fn records(tag: &str, n: usize) -> Vec<u8> {
    let recs: Vec<Rec> = (0..n)
        .map(|i| Rec::kv(&format!("{tag}-k{i}"), &format!("{tag}-v{i}"), 1_000))
        .collect();
    encode_batch(Producer::NONE, &recs)
}

#[test]
fn min_insync_replicas_above_the_replication_factor_is_capped_by_it() {
    let broker = Broker::start_with(&[("min.insync.replicas", "2")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("effective-min-isr");
    c.ensure_topic(&topic);

    // acks=1: acknowledged, and committed (the high watermark passes it).
    let req = WireClient::produce_request(&topic, 0, records("one", 2), 1);
    let resp = c.request(PRODUCE_V, &req);
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (NONE, 0), "acks=1: {resp:?}");
    let data = c.fetch(&topic, 0, 0);
    assert_eq!(
        data.high_watermark, 2,
        "the acks=1 records are committed on a single node: {data:?}"
    );

    // acks=all: the single replica is the whole ISR, which meets min(2, RF=1) = 1.
    let started = Instant::now();
    let p = c.produce(&topic, 0, records("all", 3));
    assert_eq!(
        (p.error_code, p.base_offset),
        (NONE, 2),
        "acks=all with min.insync.replicas=2 on RF=1: {p:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "acks=all answered at once, not at the request timeout"
    );
    let data = c.fetch(&topic, 0, 2);
    assert_eq!(data.high_watermark, 5, "{data:?}");
}

#[test]
fn fetch_with_min_bytes_zero_answers_at_once() {
    const MAX_WAIT_MS: i32 = 10_000;
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("min-bytes-zero");
    c.ensure_topic(&topic);
    let p = c.produce(&topic, 0, records("r", 1));
    assert_eq!(p.error_code, NONE, "{p:?}");

    // At the log end: nothing to read, and the client asks for nothing.
    let mut req = WireClient::fetch_request(&topic, 0, 1, MAX_WAIT_MS);
    req.min_bytes = 0;
    let started = Instant::now();
    let resp = c.request(FETCH_V, &req);
    let took = started.elapsed();
    let data = &resp.responses[0].partitions[0];
    assert_eq!(data.error_code, NONE, "{resp:?}");
    assert!(
        data.records.as_ref().is_none_or(|r| r.is_empty()),
        "{resp:?}"
    );
    assert!(
        took < Duration::from_millis(MAX_WAIT_MS as u64 / 2),
        "min_bytes=0 at the log end took {took:?} (max_wait_ms={MAX_WAIT_MS})"
    );
}

/// The error of OffsetForLeaderEpoch for partition `partition` of `topic`.
fn offset_for_leader_epoch_error(c: &mut WireClient, topic: &str, partition: i32) -> i16 {
    let req = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(-1)
                .with_leader_epoch(0)])]);
    c.request(OFFSET_FOR_LEADER_EPOCH_V, &req).topics[0].partitions[0].error_code
}

/// The error of DescribeProducers for partition `partition` of `topic`.
fn describe_producers_error(c: &mut WireClient, topic: &str, partition: i32) -> i16 {
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(topic_name(topic))
        .with_partition_indexes(vec![partition])]);
    c.request(DESCRIBE_PRODUCERS_V, &req).topics[0].partitions[0].error_code
}

/// The error of a commit marker written to partition `partition` of `topic`.
fn write_txn_marker_error(c: &mut WireClient, topic: &str, partition: i32) -> i16 {
    let req = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(1))
        .with_producer_epoch(0)
        .with_transaction_result(true)
        .with_coordinator_epoch(0)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(vec![partition])])]);
    c.request(WRITE_TXN_MARKERS_V, &req).markers[0].topics[0].partitions[0].error_code
}

#[test]
fn a_partition_known_but_not_hosted_here_is_not_leader_or_follower() {
    let c = Cluster::start(3, &[]);
    let topic = unique_topic("not-hosted");
    c.create_topic(&topic, 1, 1, &[]);
    let state = c.partition_state(&topic, 0);
    let outsider = c
        .ids()
        .into_iter()
        .find(|id| !state.replicas.contains(id))
        .expect("a node that hosts no replica of an RF=1 topic");
    let mut wire = WireClient::connect(&c.address(outsider));

    // Until the outsider applies the topic's metadata it does not know the partition; once it
    // has, the partition is one it does not host.
    let req = WireClient::list_offsets_request(&topic, 0, -1);
    poll_until_ok(
        &format!("node {outsider} answers NOT_LEADER_OR_FOLLOWER for {topic}-0"),
        Duration::from_secs(20),
        || {
            let r = wire.try_request(LIST_OFFSETS_V, &req)?;
            match r.topics[0].partitions[0].error_code {
                NOT_LEADER_OR_FOLLOWER => Ok(()),
                code => Err(format!("ListOffsets error {code}")),
            }
        },
    );
    let batch = || encode_batch(Producer::NONE, &[Rec::kv("k", "v", 1_000)]);
    let produced = wire.produce(&topic, 0, batch());
    assert_eq!(
        produced.error_code, NOT_LEADER_OR_FOLLOWER,
        "Produce: {produced:?}"
    );
    let fetched = wire.fetch(&topic, 0, 0);
    assert_eq!(
        fetched.error_code, NOT_LEADER_OR_FOLLOWER,
        "Fetch: {fetched:?}"
    );
    for (api, code) in [
        (
            "OffsetForLeaderEpoch",
            offset_for_leader_epoch_error(&mut wire, &topic, 0),
        ),
        (
            "DescribeProducers",
            describe_producers_error(&mut wire, &topic, 0),
        ),
        (
            "WriteTxnMarkers",
            write_txn_marker_error(&mut wire, &topic, 0),
        ),
    ] {
        assert_eq!(code, NOT_LEADER_OR_FOLLOWER, "{api} on node {outsider}");
    }

    // A partition the metadata does not know stays UNKNOWN_TOPIC_OR_PARTITION.
    let produced = wire.produce(&topic, 5, batch());
    assert_eq!(
        produced.error_code, UNKNOWN_TOPIC_OR_PARTITION,
        "Produce to partition 5: {produced:?}"
    );
    let listed = wire.list_offsets(&topic, 5, -1);
    assert_eq!(
        listed.error_code, UNKNOWN_TOPIC_OR_PARTITION,
        "ListOffsets of partition 5: {listed:?}"
    );

    // The leader itself serves the partition.
    let mut leader = WireClient::connect(&c.address(state.leader));
    let produced = leader.produce(&topic, 0, batch());
    assert_eq!(
        produced.error_code, NONE,
        "Produce to the leader: {produced:?}"
    );
}
