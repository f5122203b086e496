//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3) and timestamp lookups, over the
//! raw wire and through librdkafka (watermarks, offsets_for_times), and the version each
//! special timestamp needs.

use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::*;
use brook_protocol_tests::rd;
use brook_protocol_tests::wire::*;
use brook_protocol_tests::{unique_topic, Broker, WireClient};
use kafka_protocol::messages::ApiKey;
use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};

const EARLIEST: i64 = -2;
const LATEST: i64 = -1;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// Record timestamps by offset: increasing except offset 5, which holds the maximum.
const TS: [i64; 10] = [
    1_000, 2_000, 3_000, 4_000, 5_000, 9_000_000, 6_000, 7_000, 8_000, 9_000,
];

/// Writes the ten records: offsets 0-3 in one batch, then one batch per record.
fn seed(c: &mut WireClient, topic: &str) {
    let recs: Vec<Rec> = TS
        .iter()
        .enumerate()
        .map(|(i, ts)| Rec::kv(&format!("k{i}"), &format!("v{i}"), *ts))
        .collect();
    let r = c.produce(topic, 0, encode_batch(Producer::NONE, &recs[0..4]));
    assert_eq!((r.error_code, r.base_offset), (NONE, 0), "{r:?}");
    for (i, rec) in recs.iter().enumerate().skip(4) {
        let r = c.produce(
            topic,
            0,
            encode_batch(Producer::NONE, std::slice::from_ref(rec)),
        );
        assert_eq!((r.error_code, r.base_offset), (NONE, i as i64), "{r:?}");
    }
}

#[test]
fn list_offsets_raw() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    c.require_versions(&[
        (ApiKey::ListOffsets, LIST_OFFSETS_V),
        (ApiKey::Produce, PRODUCE_V),
    ]);
    let topic = unique_topic("list-offsets");
    c.ensure_topic(&topic);

    // Empty partition.
    for (ts, what) in [(EARLIEST, "earliest"), (LATEST, "latest")] {
        let r = c.list_offsets(&topic, 0, ts);
        assert_eq!(
            (r.error_code, r.offset),
            (NONE, 0),
            "{what} of an empty partition: {r:?}"
        );
    }

    seed(&mut c, &topic);

    let check = |c: &mut WireClient, ts: i64, offset: i64, timestamp: i64, what: &str| {
        let r = c.list_offsets(&topic, 0, ts);
        assert_eq!(
            (r.error_code, r.offset, r.timestamp),
            (NONE, offset, timestamp),
            "ListOffsets v{LIST_OFFSETS_V} {what} (timestamp {ts}): want offset {offset} timestamp {timestamp}, got {r:?}"
        );
    };
    check(&mut c, EARLIEST, 0, -1, "earliest");
    check(&mut c, LATEST, 10, -1, "latest");
    check(&mut c, MAX_TIMESTAMP, 5, 9_000_000, "max timestamp");
    check(&mut c, 0, 0, 1_000, "timestamp before all records");
    check(&mut c, 1_000, 0, 1_000, "exact timestamp of offset 0");
    check(&mut c, 3_500, 3, 4_000, "timestamp inside the first batch");
    check(&mut c, 4_000, 3, 4_000, "exact timestamp of offset 3");
    // The first offset whose timestamp is >= 5500 is offset 5 (9000000), not offset 6 (6000).
    check(
        &mut c,
        5_500,
        5,
        9_000_000,
        "timestamp between offsets 4 and 5",
    );
    check(
        &mut c,
        8_500,
        5,
        9_000_000,
        "timestamp answered by the max-timestamp record",
    );
    check(&mut c, 9_000_000, 5, 9_000_000, "the max timestamp itself");
    check(&mut c, 9_000_001, -1, -1, "timestamp after all records");

    // Unknown partition.
    let r = c.list_offsets(&topic, 7, LATEST);
    assert_eq!(
        r.error_code, UNKNOWN_TOPIC_OR_PARTITION,
        "ListOffsets of partition 7: {r:?}"
    );
}

#[test]
fn list_offsets_through_librdkafka() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("list-offsets-rd");
    c.ensure_topic(&topic);
    seed(&mut c, &topic);

    let consumer = rd::consumer(&broker.bootstrap(), &[]);
    let (low, high) = consumer
        .fetch_watermarks(&topic, 0, Duration::from_secs(20))
        .expect("fetch_watermarks");
    assert_eq!((low, high), (0, 10), "watermarks");

    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Offset(3_500))
        .unwrap();
    let res = consumer
        .offsets_for_times(tpl, Duration::from_secs(20))
        .expect("offsets_for_times");
    let e = res.find_partition(&topic, 0).expect("partition in result");
    assert!(
        e.error().is_ok(),
        "offsets_for_times error: {:?}",
        e.error()
    );
    assert_eq!(e.offset(), Offset::Offset(3), "offsets_for_times(3500)");

    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Offset(9_000_001))
        .unwrap();
    let res = consumer
        .offsets_for_times(tpl, Duration::from_secs(20))
        .expect("offsets_for_times");
    let e = res.find_partition(&topic, 0).expect("partition in result");
    assert_eq!(
        e.offset(),
        Offset::End,
        "offsets_for_times after the last timestamp"
    );
}

/// Kafka's `ReplicaManager.isListOffsetsTimestampUnsupported`: each special timestamp is
/// answered only from the version that introduced it (latest and earliest v1, max timestamp
/// v7 with KIP-734, earliest local v8, latest tiered v9); below it, and for a negative
/// timestamp that means nothing, the answer is UNSUPPORTED_VERSION, before the partition is
/// looked up.
#[test]
fn special_timestamps_need_the_version_that_introduced_them() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("list-offsets-gate");
    c.ensure_topic(&topic);
    seed(&mut c, &topic);
    let cases = [
        (LATEST, 1, 10),
        (EARLIEST, 1, 0),
        (MAX_TIMESTAMP, 7, 5),
        (EARLIEST_LOCAL, 8, 0),
        (LATEST_TIERED, 9, -1),
        (-6, i16::MAX, -1),
    ];
    let list = |c: &mut WireClient, partition: i32, ts: i64, version: i16| {
        let req = WireClient::list_offsets_request(&topic, partition, ts);
        let resp: kafka_protocol::messages::ListOffsetsResponse = c.request(version, &req);
        resp.topics[0].partitions[0].clone()
    };
    for version in 1..=10 {
        for (ts, since, offset) in cases {
            let r = list(&mut c, 0, ts, version);
            let want = if version < since {
                (UNSUPPORTED_VERSION, -1)
            } else {
                (NONE, offset)
            };
            assert_eq!(
                (r.error_code, r.offset),
                want,
                "ListOffsets v{version} timestamp {ts}: {r:?}"
            );
        }
    }
    // The version gate comes before the partition lookup.
    let r = list(&mut c, 7, MAX_TIMESTAMP, 6);
    assert_eq!(
        r.error_code, UNSUPPORTED_VERSION,
        "v6 max timestamp of partition 7: {r:?}"
    );
    let r = list(&mut c, 7, MAX_TIMESTAMP, 7);
    assert_eq!(
        r.error_code, UNKNOWN_TOPIC_OR_PARTITION,
        "v7 max timestamp of partition 7: {r:?}"
    );
}
