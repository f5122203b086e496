//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3) and timestamp lookups, over the
//! raw wire and through librdkafka (watermarks, offsets_for_times); the version each special
//! timestamp needs; and a new leader of a 3-node cluster whose high watermark has not caught up.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::*;
use brook_protocol_tests::rd;
use brook_protocol_tests::wire::*;
use brook_protocol_tests::{poll_until, unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
use kafka_protocol::messages::{ApiKey, BrokerId};
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

/// ListOffsets at `version` on one connection: (error, offset, timestamp, leader epoch).
fn offsets_at(c: &mut WireClient, version: i16, topic: &str, ts: i64) -> (i16, i64, i64, i32) {
    let req = WireClient::list_offsets_request(topic, 0, ts);
    let r = c
        .try_request(version, &req)
        .unwrap_or_else(|e| panic!("ListOffsets v{version} ({ts}): {e}"));
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp, p.leader_epoch)
}

/// A new leader whose high watermark has not reached the start of its leader epoch cannot
/// tell what its predecessor committed (Kafka's `Partition.fetchOffsetForTimestamp`): LATEST
/// is OFFSET_NOT_AVAILABLE from v5 and LEADER_NOT_AVAILABLE before, where Brook once answered
/// its lagging high watermark. Once the high watermark catches up, a timestamp lookup answers
/// the leader epoch its record was written in (`UnifiedLog.fetchOffsetByTimestamp`), not the
/// current one.
#[test]
fn list_offsets_on_a_new_leader_waits_for_its_high_watermark() {
    const WAIT: Duration = Duration::from_secs(60);
    const OFFSET_NOT_AVAILABLE: i16 = 78;
    // No ISR shrink while node 3 is cut off: the new leader's high watermark must stay behind.
    let mut c = Cluster::start(
        3,
        &[
            ("replica.lag.time.max.ms", "60000"),
            ("auto.leader.rebalance.enable", "false"),
        ],
    );
    let topic = unique_topic("list-offsets-new-leader");
    let mut admin = WireClient::connect(&c.address(2));
    let mut req = WireClient::create_topics_request(&topic, -1, -1, &[], WAIT);
    req.topics[0].assignments = vec![CreatableReplicaAssignment::default()
        .with_partition_index(0)
        .with_broker_ids(vec![BrokerId(1), BrokerId(2), BrokerId(3)])];
    let created = admin.request(CREATE_TOPICS_V, &req);
    assert_eq!(created.topics[0].error_code, NONE, "{created:?}");
    let before = c.await_isr(&topic, 0, &[1, 2, 3], WAIT);
    assert_eq!(before.leader, 1);

    // Node 3 stops copying; acks=1 records reach node 2, and the high watermark stays at 0.
    let _cut = c.isolate_replication(3);
    let mut leader = WireClient::connect(&c.address(1));
    let recs: Vec<Rec> = (0..3)
        .map(|i| Rec::kv(&format!("k{i}"), &format!("v{i}"), 1_000 * (i + 1)))
        .collect();
    let req = WireClient::produce_request(&topic, 0, encode_batch(Producer::NONE, &recs), 1);
    let r = leader.request(PRODUCE_V, &req);
    assert_eq!(
        r.responses[0].partition_responses[0].error_code, NONE,
        "{r:?}"
    );
    poll_until("node 2 has copied the records", WAIT, || {
        (c.partition_dir(2, &topic, 0)
            .join("00000000000000000000.log"))
        .metadata()
        .ok()
        .filter(|m| m.len() > 0)
    });

    // Node 1 dies; node 2, first in the assignment, leads with epoch start 3 and HW 0.
    c.kill(1);
    let after = c.await_partition(&topic, 0, "node 2 leads", WAIT, |s| s.leader == 2);
    let mut new_leader = WireClient::connect(&c.address(2));
    assert_eq!(
        offsets_at(&mut new_leader, 5, &topic, LATEST).0,
        OFFSET_NOT_AVAILABLE,
        "v5: the high watermark lags the epoch's start"
    );
    assert_eq!(
        offsets_at(&mut new_leader, 4, &topic, LATEST).0,
        LEADER_NOT_AVAILABLE,
        "v4 has no OFFSET_NOT_AVAILABLE"
    );
    assert_eq!(
        offsets_at(&mut new_leader, 7, &topic, 2_000).0,
        OFFSET_NOT_AVAILABLE,
        "a record past the high watermark cannot be answered yet"
    );

    // Node 3 copies from node 2: the high watermark reaches 3.
    c.fault_clear(3);
    let latest = poll_until("the new leader's high watermark reaches 3", WAIT, || {
        let got = offsets_at(&mut new_leader, 7, &topic, LATEST);
        (got.0 == NONE).then_some(got)
    });
    assert_eq!(latest, (NONE, 3, -1, after.leader_epoch));
    // Written under node 1's epoch, which the new leader's epoch follows.
    assert_eq!(
        offsets_at(&mut new_leader, 7, &topic, 2_000),
        (NONE, 1, 2_000, before.leader_epoch)
    );
    assert_eq!(
        offsets_at(&mut new_leader, 7, &topic, EARLIEST),
        (NONE, 0, -1, before.leader_epoch)
    );
    assert!(after.leader_epoch > before.leader_epoch, "{after:?}");
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
