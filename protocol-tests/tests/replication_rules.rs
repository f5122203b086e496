//! Kafka's partition and fetch rules that a single node already shows, over the raw wire.
//!
//! - Effective min ISR (`Partition.effectiveMinIsr`): checks use
//!   `min(min.insync.replicas, replication factor)`, so a single node with
//!   `min.insync.replicas=2` commits acks=1 writes and accepts acks=all.
//! - A Fetch with `min_bytes=0` is answered at once, not after `max_wait_ms`
//!   (`ReplicaManager.fetchMessages`: respond when the bytes readable reach `min_bytes`).

use std::time::{Duration, Instant};

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::NONE;
use brook_protocol_tests::wire::{FETCH_V, PRODUCE_V};
use brook_protocol_tests::{unique_topic, Broker, WireClient};

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
