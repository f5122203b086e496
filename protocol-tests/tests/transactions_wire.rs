//! The partition side of transactions over the raw wire: transactional batches with producer
//! ids from InitProducerId, COMMIT and ABORT markers written by WriteTxnMarkers (sent by the
//! test, standing in for a transaction coordinator), then Fetch and ListOffsets at
//! read_committed and read_uncommitted: the last stable offset, `aborted_transactions`, the
//! markers' offsets, a parked read_committed fetch woken by a marker, DescribeProducers; and in
//! a 3-node cluster, a new leader serving the same LSO and aborted list after the old leader
//! is killed.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use brook_protocol_tests::batch::{encode_batch, parse_batches, ParsedBatch, Producer, Rec};
use brook_protocol_tests::errors::*;
use brook_protocol_tests::wire::*;
use brook_protocol_tests::{poll_until_ok, unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_producers_response::ProducerState;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, ProducerId, WriteTxnMarkersRequest,
};

const WRITE_TXN_MARKERS_V: i16 = 1;
const DESCRIBE_PRODUCERS_V: i16 = 0;
const INVALID_RECORD: i16 = 87;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// The marker control types (Kafka's `ControlRecordType`).
const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// Records stamped now: the markers the broker writes carry the current time, and records
/// from 1970 would make it roll a segment (segment.ms) between data and markers.
fn recs(tag: &str, n: usize) -> Vec<Rec> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64;
    (0..n)
        .map(|i| {
            Rec::kv(
                &format!("{tag}-k{i}"),
                &format!("{tag}-v{i}"),
                now + i as i64,
            )
        })
        .collect()
}

/// A transactional batch: `encode_batch` with attribute bit 4 set and the CRC redone.
fn txn_batch(pid: i64, epoch: i16, base_sequence: i32, records: &[Rec]) -> Vec<u8> {
    let mut b = encode_batch(
        Producer {
            id: pid,
            epoch,
            base_sequence,
        },
        records,
    );
    b[22] |= 0x10;
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn markers_request(
    topic: &str,
    partition: i32,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> WriteTxnMarkersRequest {
    let mut t = WritableTxnMarkerTopic::default();
    t.name = topic_name(topic);
    t.partition_indexes = vec![partition];
    let mut m = WritableTxnMarker::default();
    m.producer_id = ProducerId(pid);
    m.producer_epoch = epoch;
    m.transaction_result = commit;
    m.coordinator_epoch = 0;
    m.topics = vec![t];
    let mut req = WriteTxnMarkersRequest::default();
    req.markers = vec![m];
    req
}

/// Sends one marker and returns the partition's error code.
fn write_marker(c: &mut WireClient, topic: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    let resp = c.request(
        WRITE_TXN_MARKERS_V,
        &markers_request(topic, 0, pid, epoch, commit),
    );
    assert_eq!(resp.markers.len(), 1, "{resp:?}");
    assert_eq!(resp.markers[0].producer_id.0, pid);
    let t = &resp.markers[0].topics[0];
    assert_eq!(t.name.0.as_str(), topic);
    t.partitions[0].error_code
}

/// One Fetch of partition 0 at `isolation_level` (0 read_uncommitted, 1 read_committed).
fn fetch_at(
    c: &mut WireClient,
    topic: &str,
    offset: i64,
    isolation: i8,
    wait_ms: i32,
) -> PartitionData {
    let mut req = WireClient::fetch_request(topic, 0, offset, wait_ms);
    req.isolation_level = isolation;
    let resp = c.request(FETCH_V, &req);
    assert_eq!(resp.error_code, 0, "{resp:?}");
    resp.responses[0].partitions[0].clone()
}

fn batches(pd: &PartitionData) -> Vec<ParsedBatch> {
    parse_batches(&pd.records.clone().unwrap_or_default()).expect("fetched batches parse")
}

/// (producer id, first offset) of each aborted transaction; `None` when the field is null.
fn aborted(pd: &PartitionData) -> Option<Vec<(i64, i64)>> {
    pd.aborted_transactions.as_ref().map(|l| {
        l.iter()
            .map(|t| (t.producer_id.0, t.first_offset))
            .collect()
    })
}

/// The control type of a marker batch (its key's second i16).
fn control_type(b: &ParsedBatch) -> i16 {
    assert!(b.is_control(), "not a control batch: {b:?}");
    assert_eq!(b.attributes & 0x10, 0x10, "markers are transactional");
    assert_eq!(b.records.len(), 1);
    let key = b.records[0].key.as_ref().expect("marker key");
    i16::from_be_bytes([key[2], key[3]])
}

fn list_latest(c: &mut WireClient, topic: &str, isolation: i8) -> i64 {
    let mut req = WireClient::list_offsets_request(topic, 0, -1);
    req.isolation_level = isolation;
    let resp = c.request(LIST_OFFSETS_V, &req);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "{resp:?}");
    p.offset
}

fn describe_producers(c: &mut WireClient, topic: &str) -> Vec<ProducerState> {
    let mut t = TopicRequest::default();
    t.name = topic_name(topic);
    t.partition_indexes = vec![0];
    let mut req = DescribeProducersRequest::default();
    req.topics = vec![t];
    let resp = c.request(DESCRIBE_PRODUCERS_V, &req);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "{resp:?}");
    p.active_producers.clone()
}

#[test]
fn markers_lso_and_aborted_transactions_at_read_committed() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    c.require_versions(&[
        (ApiKey::WriteTxnMarkers, WRITE_TXN_MARKERS_V),
        (ApiKey::DescribeProducers, DESCRIBE_PRODUCERS_V),
        (ApiKey::Fetch, FETCH_V),
    ]);
    let topic = unique_topic("txn-wire");
    c.ensure_topic(&topic);
    let r = c.produce(&topic, 0, encode_batch(Producer::NONE, &recs("plain", 1)));
    assert_eq!((r.error_code, r.base_offset), (NONE, 0));
    let (a, a_epoch) = c.init_producer_id();
    let (b, b_epoch) = c.init_producer_id();
    let r = c.produce(&topic, 0, txn_batch(a, a_epoch, 0, &recs("A", 2))); // 1-2
    assert_eq!((r.error_code, r.base_offset), (NONE, 1), "{r:?}");
    let r = c.produce(&topic, 0, txn_batch(b, b_epoch, 0, &recs("B", 1))); // 3
    assert_eq!((r.error_code, r.base_offset), (NONE, 3), "{r:?}");

    // Both transactions open: read_committed stops at A's first offset.
    let pd = fetch_at(&mut c, &topic, 0, 1, 0);
    assert_eq!((pd.high_watermark, pd.last_stable_offset), (4, 1), "{pd:?}");
    let got = batches(&pd);
    assert_eq!(
        got.iter().map(|b| b.base_offset).collect::<Vec<_>>(),
        vec![0]
    );
    assert_eq!(aborted(&pd), Some(vec![]));
    assert_eq!(
        list_latest(&mut c, &topic, 1),
        1,
        "ListOffsets latest at read_committed"
    );
    assert_eq!(
        list_latest(&mut c, &topic, 0),
        4,
        "ListOffsets latest at read_uncommitted"
    );
    let pd = fetch_at(&mut c, &topic, 0, 0, 0);
    assert_eq!(
        batches(&pd).len(),
        3,
        "read_uncommitted sees the open transactions"
    );
    assert_eq!(
        aborted(&pd),
        None,
        "read_uncommitted: no aborted list, as Kafka"
    );

    let producers = describe_producers(&mut c, &topic);
    let find = |ps: &[ProducerState], pid: i64| {
        ps.iter()
            .find(|p| p.producer_id.0 == pid)
            .cloned()
            .expect("producer listed")
    };
    assert_eq!(find(&producers, a).current_txn_start_offset, 1);
    assert_eq!(find(&producers, b).current_txn_start_offset, 3);
    assert_eq!(find(&producers, a).last_sequence, 1);

    // A read_committed consumer parked at the LSO is woken by the ABORT marker of A, which
    // moves the LSO to B's first offset without any new data.
    let addr = broker.bootstrap();
    let parked_topic = topic.clone();
    let parked = std::thread::spawn(move || {
        let mut c = WireClient::connect(&addr);
        let started = Instant::now();
        let pd = fetch_at(&mut c, &parked_topic, 1, 1, 30_000);
        (pd, started.elapsed())
    });
    // Let the fetch park first: it answers at once only if the LSO moved already, which
    // the assertions below tell apart from a wake-up.
    poll_until_ok(
        "the parked fetch to be waiting",
        Duration::from_secs(10),
        || {
            if parked.is_finished() {
                return Err("the fetch returned before any marker".into());
            }
            Ok(())
        },
    );
    assert_eq!(write_marker(&mut c, &topic, a, a_epoch, false), NONE);
    let (pd, waited) = parked.join().unwrap();
    assert!(
        waited < Duration::from_secs(20),
        "the marker must wake the parked fetch, not its 30 s deadline ({waited:?})"
    );
    assert_eq!(pd.last_stable_offset, 3, "{pd:?}");
    let got = batches(&pd);
    assert_eq!(
        got.iter().map(|b| b.base_offset).collect::<Vec<_>>(),
        vec![1]
    );
    assert_eq!(aborted(&pd), Some(vec![(a, 1)]));

    // Older producer epoch, unknown partition, and a client writing a marker are refused.
    assert_eq!(
        write_marker(&mut c, &topic, b, b_epoch - 1, true),
        INVALID_PRODUCER_EPOCH
    );
    let resp = c.request(
        WRITE_TXN_MARKERS_V,
        &markers_request(&topic, 7, b, b_epoch, true),
    );
    assert_eq!(
        resp.markers[0].topics[0].partitions[0].error_code,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    let mut client_marker = txn_batch(b, b_epoch, 1, &recs("C", 1));
    client_marker[22] |= 0x20;
    let crc = crc32c::crc32c(&client_marker[21..]);
    client_marker[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(
        c.produce(&topic, 0, client_marker).error_code,
        INVALID_RECORD
    );

    assert_eq!(write_marker(&mut c, &topic, b, b_epoch, true), NONE); // COMMIT at 5
    let pd = fetch_at(&mut c, &topic, 0, 1, 0);
    assert_eq!((pd.high_watermark, pd.last_stable_offset), (6, 6), "{pd:?}");

    let got = batches(&pd);
    assert_eq!(
        got.iter()
            .map(|b| (b.base_offset, b.is_control()))
            .collect::<Vec<_>>(),
        vec![(0, false), (1, false), (3, false), (4, true), (5, true)],
        "the markers take offsets 4 and 5"
    );
    assert_eq!(
        (control_type(&got[3]), control_type(&got[4])),
        (ABORT, COMMIT)
    );
    assert_eq!((got[3].producer_id, got[4].producer_id), (a, b));
    assert_eq!((got[3].base_sequence, got[3].producer_epoch), (-1, a_epoch));
    assert_eq!(aborted(&pd), Some(vec![(a, 1)]));
    // A fetch past the aborted transaction does not list it.
    assert_eq!(aborted(&fetch_at(&mut c, &topic, 5, 1, 0)), Some(vec![]));
    assert_eq!(list_latest(&mut c, &topic, 1), 6);
    let producers = describe_producers(&mut c, &topic);
    assert_eq!(find(&producers, a).current_txn_start_offset, -1);
    assert_eq!(find(&producers, b).current_txn_start_offset, -1);
}

/// One 3-node cluster at a time.
fn serial() -> MutexGuard<'static, ()> {
    static CLUSTER: Mutex<()> = Mutex::new(());
    CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Retries `f` against the current leader until it gives `Ok` (a new leader may still be
/// applying its leadership).
fn on_leader<T>(
    c: &Cluster,
    topic: &str,
    what: &str,
    mut f: impl FnMut(&mut WireClient) -> Result<T, String>,
) -> T {
    poll_until_ok(what, Duration::from_secs(45), || {
        let leader = c.leader_of(topic, 0);
        let mut w = WireClient::try_connect(&c.address(leader), Duration::from_secs(5))
            .map_err(|e| format!("connect to {leader}: {e}"))?;
        f(&mut w)
    })
}

#[test]
fn a_new_leader_serves_the_same_lso_and_aborted_transactions() {
    let _serial = serial();
    let mut c = Cluster::start(3, &[]);
    let topic = unique_topic("txn-failover");
    c.create_topic(&topic, 1, 3, &[("min.insync.replicas", "2")]);
    let leader = c.leader_of(&topic, 0);
    let mut w = WireClient::connect(&c.address(leader));
    let (a, ea) = w.init_producer_id();
    let (b, eb) = w.init_producer_id();
    let (x, ex) = w.init_producer_id();
    assert_eq!(
        w.produce(&topic, 0, txn_batch(a, ea, 0, &recs("A", 2)))
            .error_code,
        NONE
    ); // 0-1
    assert_eq!(
        w.produce(&topic, 0, txn_batch(b, eb, 0, &recs("B", 1)))
            .error_code,
        NONE
    ); // 2
    assert_eq!(write_marker(&mut w, &topic, a, ea, false), NONE); // ABORT at 3
    assert_eq!(
        w.produce(&topic, 0, txn_batch(x, ex, 0, &recs("X", 1)))
            .error_code,
        NONE
    ); // 4
    assert_eq!(write_marker(&mut w, &topic, b, eb, true), NONE); // COMMIT at 5
                                                                 // Open transaction X holds the LSO at 4; A is aborted.
    let before = fetch_at(&mut w, &topic, 0, 1, 0);
    assert_eq!(
        (before.high_watermark, before.last_stable_offset),
        (6, 4),
        "{before:?}"
    );
    assert_eq!(aborted(&before), Some(vec![(a, 0)]));
    // Both followers have everything before the leader dies.
    c.await_isr(&topic, 0, &[1, 2, 3], Duration::from_secs(45));
    poll_until_ok(
        "followers reach the log end",
        Duration::from_secs(45),
        || {
            let ends: Vec<i64> = c
                .ids()
                .into_iter()
                .filter(|&n| n != leader)
                .map(|n| c.log_end_offset(n, &topic, 0))
                .collect();
            if ends.iter().all(|&e| e == 6) {
                Ok(())
            } else {
                Err(format!("{ends:?}"))
            }
        },
    );
    drop(w);
    c.kill(leader);
    c.await_leader_other_than(&topic, 0, leader, Duration::from_secs(45));
    let after = on_leader(&c, &topic, "the new leader serves read_committed", |w| {
        let mut req = WireClient::fetch_request(&topic, 0, 0, 0);
        req.isolation_level = 1;
        let resp = w.try_request(FETCH_V, &req)?;
        let pd = resp.responses[0].partitions[0].clone();
        // Its high watermark reaches the old one once a follower has fetched from it.
        if pd.error_code != 0 || pd.high_watermark < 6 {
            return Err(format!("{pd:?}"));
        }
        Ok(pd)
    });
    assert_eq!(after.last_stable_offset, 4, "{after:?}");
    assert_eq!(aborted(&after), Some(vec![(a, 0)]));
    assert_eq!(
        batches(&after)
            .iter()
            .map(|b| b.base_offset)
            .collect::<Vec<_>>(),
        vec![0, 2, 3],
        "read_committed stops before the open transaction"
    );
    // The new leader ends X with its own marker, and the LSO moves to the log end.
    let code = on_leader(
        &c,
        &topic,
        "the new leader takes X's marker",
        |w| match write_marker(w, &topic, x, ex, false) {
            NOT_LEADER_OR_FOLLOWER => Err("not leader yet".into()),
            code => Ok(code),
        },
    );
    assert_eq!(code, NONE);
    let pd = on_leader(&c, &topic, "read_committed after X's abort", |w| {
        let mut req = WireClient::fetch_request(&topic, 0, 0, 0);
        req.isolation_level = 1;
        let pd = w.try_request(FETCH_V, &req)?.responses[0].partitions[0].clone();
        if pd.last_stable_offset == 7 {
            Ok(pd)
        } else {
            Err(format!("{pd:?}"))
        }
    });
    assert_eq!(aborted(&pd), Some(vec![(a, 0), (x, 4)]));
}

/// librdkafka reads read_committed by default: it must skip the records of a transaction the
/// broker lists as aborted, and the markers, and deliver the committed ones (with an empty
/// aborted list it delivered aborted records).
#[test]
fn librdkafka_read_committed_skips_an_aborted_transaction() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("txn-rd");
    c.ensure_topic(&topic);
    let (a, ea) = c.init_producer_id();
    let (b, eb) = c.init_producer_id();
    assert_eq!(
        c.produce(&topic, 0, encode_batch(Producer::NONE, &recs("before", 1)))
            .error_code,
        NONE
    );
    assert_eq!(
        c.produce(&topic, 0, txn_batch(a, ea, 0, &recs("aborted", 2)))
            .error_code,
        NONE
    );
    assert_eq!(
        c.produce(&topic, 0, txn_batch(b, eb, 0, &recs("committed", 2)))
            .error_code,
        NONE
    );
    assert_eq!(write_marker(&mut c, &topic, a, ea, false), NONE);
    assert_eq!(
        c.produce(&topic, 0, txn_batch(b, eb, 2, &recs("committed-late", 1)))
            .error_code,
        NONE
    );
    assert_eq!(write_marker(&mut c, &topic, b, eb, true), NONE);
    assert_eq!(
        c.produce(&topic, 0, encode_batch(Producer::NONE, &recs("after", 1)))
            .error_code,
        NONE
    );
    let got = brook_protocol_tests::rd::read_to_end(
        &broker.bootstrap(),
        &topic,
        &[0],
        Duration::from_secs(30),
    );
    let values: Vec<String> = got[&0]
        .iter()
        .map(|g| String::from_utf8_lossy(g.value.as_deref().unwrap_or_default()).into_owned())
        .collect();
    assert_eq!(
        values,
        vec![
            "before-v0",
            "committed-v0",
            "committed-v1",
            "committed-late-v0",
            "after-v0"
        ]
    );
}
