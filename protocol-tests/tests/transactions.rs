//! Transactions with librdkafka's transactional producer: the reliability lab (three committed
//! records visible at read_committed, two aborted ones only at read_uncommitted, with the
//! markers' offset gaps), consume-transform-produce with `send_offsets_to_transaction`, and a
//! zombie fenced by a second producer with the same `transactional.id`.
//!
//! Against Kafka 4.4: `BROOK_BIN=$PWD/protocol-tests/java/scripts/kafka-as-brook.sh
//! KAFKA_LIB=$PWD/target/kafka-reference/lib cargo test -p brook-protocol-tests --test transactions`.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use brook_protocol_tests::rd::{self, Got};
use brook_protocol_tests::{unique_topic, Broker, WireClient};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};

const WAIT: Duration = Duration::from_secs(30);
const READ_UNCOMMITTED: &[(&str, &str)] = &[("isolation.level", "read_uncommitted")];

/// A broker with `partitions` partitions per auto-created topic, fast group joins and few
/// transaction log partitions.
fn broker(partitions: &str) -> Broker {
    Broker::start_with(&[
        ("num.partitions", partitions),
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "3"),
        ("transaction.state.log.num.partitions", "3"),
    ])
}

fn topic(broker: &Broker, prefix: &str) -> String {
    let t = unique_topic(prefix);
    WireClient::connect(&broker.bootstrap()).ensure_topic(&t);
    t
}

fn txn_producer(bootstrap: &str, id: &str) -> rd::RecProducer {
    let p = rd::producer(bootstrap, &[("transactional.id", id)]);
    p.init_transactions(WAIT).expect("init_transactions");
    p
}

/// Sends `values` to `partition` inside the open transaction and waits for their delivery
/// reports; returns their offsets.
fn send_all(p: &rd::RecProducer, topic: &str, partition: i32, values: &[&str]) -> Vec<i64> {
    let before = rd::delivered_count(p);
    for (i, v) in values.iter().enumerate() {
        rd::send(
            p,
            rd::record(topic, before + i, Some(partition), None, Some(v.as_bytes())),
        );
    }
    p.flush(WAIT).expect("flush inside the transaction");
    let d = p.context().deliveries.lock().unwrap()[before..].to_vec();
    rd::assert_all_delivered(&d);
    assert_eq!(d.len(), values.len(), "delivery reports");
    d.iter().map(|d| d.offset).collect()
}

/// "offset=value" per partition.
fn entries(read: &BTreeMap<i32, Vec<Got>>) -> BTreeMap<i32, Vec<String>> {
    read.iter()
        .map(|(p, msgs)| {
            let v = msgs
                .iter()
                .map(|g| {
                    let value = String::from_utf8_lossy(g.value.as_deref().unwrap_or_default());
                    format!("{}={value}", g.offset)
                })
                .collect();
            (*p, v)
        })
        .collect()
}

fn expected(parts: &[(i32, &[&str])]) -> BTreeMap<i32, Vec<String>> {
    parts
        .iter()
        .map(|(p, v)| (*p, v.iter().map(|s| s.to_string()).collect()))
        .collect()
}

/// The lab: a transaction of three records (two on partition 0, one on 1) commits; one of two
/// records on partition 0 aborts. The commit marker takes 0:2 and 1:1, the aborted records sit
/// at 0:3 and 0:4, and the abort marker takes 0:5.
#[test]
fn lab_committed_visible_aborted_invisible() {
    let b = broker("3");
    let bootstrap = b.bootstrap();
    let t = topic(&b, "rdtxn-lab");
    let p = txn_producer(&bootstrap, &format!("{t}-producer"));
    p.begin_transaction().expect("begin");
    let mut offsets = send_all(&p, &t, 0, &["mid-1", "mid-2"]);
    offsets.extend(send_all(&p, &t, 1, &["mid-3"]));
    p.commit_transaction(WAIT).expect("commit");
    p.begin_transaction().expect("begin");
    offsets.extend(send_all(&p, &t, 0, &["mid-4", "mid-5"]));
    p.abort_transaction(WAIT).expect("abort");
    assert_eq!(offsets, vec![0, 1, 0, 3, 4], "acknowledged offsets");

    let committed = rd::read_to_end(&bootstrap, &t, &[0, 1, 2], WAIT);
    assert_eq!(
        entries(&committed),
        expected(&[(0, &["0=mid-1", "1=mid-2"]), (1, &["0=mid-3"]), (2, &[])]),
        "read_committed: the committed three only"
    );
    let all = rd::read_to_end_with(&bootstrap, &t, &[0, 1, 2], READ_UNCOMMITTED, WAIT);
    assert_eq!(
        entries(&all),
        expected(&[
            (0, &["0=mid-1", "1=mid-2", "3=mid-4", "4=mid-5"]),
            (1, &["0=mid-3"]),
            (2, &[]),
        ]),
        "read_uncommitted: all five, the markers skipped"
    );
    let c = rd::consumer(&bootstrap, &[]);
    let ends: Vec<i64> = (0..3)
        .map(|p| c.fetch_watermarks(&t, p, WAIT).expect("watermarks").1)
        .collect();
    assert_eq!(ends, vec![6, 2, 0], "high watermarks, markers included");
}

/// A second producer with the same transactional.id fences the first: the first one's open
/// transaction is aborted, and its commit fails with librdkafka's fatal fencing error.
#[test]
fn zombie_is_fenced() {
    let b = broker("1");
    let bootstrap = b.bootstrap();
    let t = topic(&b, "rdtxn-zombie");
    let id = format!("{t}-producer");
    let zombie = txn_producer(&bootstrap, &id);
    zombie.begin_transaction().expect("begin");
    assert_eq!(send_all(&zombie, &t, 0, &["zombie"]), vec![0]);
    let successor = txn_producer(&bootstrap, &id);
    match zombie.commit_transaction(WAIT) {
        Err(KafkaError::Transaction(e)) => {
            assert!(e.is_fatal(), "fencing is fatal: {e}");
            assert_eq!(e.code(), RDKafkaErrorCode::Fenced, "{e}");
        }
        other => panic!("the zombie's commit: {other:?}"),
    }
    successor.begin_transaction().expect("begin");
    send_all(&successor, &t, 0, &["successor"]);
    successor.commit_transaction(WAIT).expect("commit");

    let committed = entries(&rd::read_to_end(&bootstrap, &t, &[0], WAIT));
    assert_eq!(committed[&0].len(), 1, "{committed:?}");
    assert!(committed[&0][0].ends_with("=successor"), "{committed:?}");
    let all = entries(&rd::read_to_end_with(
        &bootstrap,
        &t,
        &[0],
        READ_UNCOMMITTED,
        WAIT,
    ));
    assert_eq!(
        all[&0][0], "0=zombie",
        "the zombie's record stays, aborted: {all:?}"
    );
}

const CTP_RECORDS: usize = 300;
const CTP_PARTITIONS: i32 = 3;
const CTP_TXN_MAX: usize = 25;

/// The group's committed offsets of the input partitions (-1001, librdkafka's "invalid", where
/// none), read with OffsetFetch as a read_committed consumer asks (require_stable).
fn group_committed(c: &BaseConsumer, input: &str) -> Vec<i64> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..CTP_PARTITIONS {
        tpl.add_partition(input, p);
    }
    let got = c.committed_offsets(tpl, WAIT).expect("committed offsets");
    (0..CTP_PARTITIONS)
        .map(|p| {
            match got
                .find_partition(input, p)
                .expect("partition in answer")
                .offset()
            {
                Offset::Offset(o) => o,
                _ => -1001,
            }
        })
        .collect()
}

/// Assigns the input partitions at the group's committed offsets (the beginning where none).
fn rewind(c: &BaseConsumer, input: &str) -> Vec<i64> {
    let committed = group_committed(c, input);
    let mut tpl = TopicPartitionList::new();
    for (p, o) in committed.iter().enumerate() {
        let at = if *o >= 0 {
            Offset::Offset(*o)
        } else {
            Offset::Beginning
        };
        tpl.add_partition_offset(input, p as i32, at).unwrap();
    }
    c.assign(&tpl).expect("assign");
    committed.iter().map(|o| (*o).max(0)).collect()
}

/// Consume-transform-produce: the input's records are copied as "out-" + value by transactions
/// of at most 25 records that commit the input offsets with send_offsets_to_transaction; every
/// third transaction aborts, and the consumer goes back to the committed offsets. The group's
/// committed offsets move only on commit; at the end the output holds every input exactly once.
#[test]
fn consume_transform_produce_exactly_once() {
    let b = broker("3");
    let bootstrap = b.bootstrap();
    let input = topic(&b, "rdtxn-in");
    let output = topic(&b, "rdtxn-out");
    let group = format!("{input}-g");
    let values: Vec<String> = (0..CTP_RECORDS).map(|i| format!("in-{i}")).collect();
    {
        let p = rd::producer(&bootstrap, &[("enable.idempotence", "true")]);
        for (i, v) in values.iter().enumerate() {
            let part = (i as i32) % CTP_PARTITIONS;
            rd::send(
                &p,
                rd::record(&input, i, Some(part), None, Some(v.as_bytes())),
            );
        }
        rd::assert_all_delivered(&rd::flush(&p, CTP_RECORDS, WAIT));
    }

    let producer = txn_producer(&bootstrap, &format!("{group}-copier"));
    let consumer = rd::group_consumer(&bootstrap, &group, &[("isolation.level", "read_committed")]);
    let mut committed = rewind(&consumer, &input);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut txns = 0;
    while committed.iter().sum::<i64>() < CTP_RECORDS as i64 {
        assert!(
            Instant::now() < deadline,
            "copy unfinished; committed {committed:?}"
        );
        let mut batch = Vec::new();
        while batch.len() < CTP_TXN_MAX {
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => batch.push((
                    m.partition(),
                    m.offset(),
                    m.payload().unwrap_or_default().to_vec(),
                )),
                Some(Err(e)) => panic!("consumer: {e}"),
                None => break,
            }
        }
        if batch.is_empty() {
            continue;
        }
        txns += 1;
        let abort = txns % 3 == 0;
        producer.begin_transaction().expect("begin");
        let mut next = committed.clone();
        for (i, (part, offset, value)) in batch.iter().enumerate() {
            let out = format!("out-{}", String::from_utf8_lossy(value));
            rd::send(
                &producer,
                rd::record(&output, i, Some(*part), None, Some(out.as_bytes())),
            );
            next[*part as usize] = offset + 1;
        }
        let mut tpl = TopicPartitionList::new();
        for (p, o) in next.iter().enumerate() {
            tpl.add_partition_offset(&input, p as i32, Offset::Offset(*o))
                .unwrap();
        }
        let cgm = consumer.group_metadata().expect("group metadata");
        producer
            .send_offsets_to_transaction(&tpl, &cgm, WAIT)
            .expect("send_offsets_to_transaction");
        if abort {
            producer.flush(WAIT).expect("flush before abort");
            producer.abort_transaction(WAIT).expect("abort");
            rewind(&consumer, &input);
        } else {
            producer.commit_transaction(WAIT).expect("commit");
            committed = next;
        }
        assert_eq!(
            group_committed(&consumer, &input)
                .iter()
                .map(|o| (*o).max(0))
                .collect::<Vec<_>>(),
            committed,
            "the group's committed offsets after transaction {txns} ({})",
            if abort { "aborted" } else { "committed" }
        );
    }

    let parts: Vec<i32> = (0..CTP_PARTITIONS).collect();
    let out = rd::read_to_end(&bootstrap, &output, &parts, WAIT);
    for p in &parts {
        let got: Vec<String> = out[p]
            .iter()
            .map(|g| String::from_utf8_lossy(g.value.as_deref().unwrap_or_default()).into_owned())
            .collect();
        let want: Vec<String> = values
            .iter()
            .enumerate()
            .filter(|(i, _)| (*i as i32) % CTP_PARTITIONS == *p)
            .map(|(_, v)| format!("out-{v}"))
            .collect();
        assert_eq!(
            got, want,
            "partition {p}: every input exactly once, in order"
        );
    }
}
