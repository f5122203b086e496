//! librdkafka's consume-transform-produce offsets: `send_offsets_to_transaction` moves the
//! group's committed offset only when the transaction commits, never when it aborts, and a
//! committed-offsets read (OffsetFetch with require_stable) waits while one is open.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use brook_protocol_tests::{rd, unique_topic, Broker};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

const CALL: Duration = Duration::from_secs(30);

fn offsets(topic: &str, offset: i64) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(offset))
        .expect("partition offset");
    tpl
}

fn committed(c: &BaseConsumer, topic: &str, timeout: Duration) -> Result<Offset, String> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, 0);
    let got = c
        .committed_offsets(tpl, timeout)
        .map_err(|e| e.to_string())?;
    Ok(got.elements()[0].offset())
}

#[test]
fn send_offsets_to_transaction_commits_with_the_transaction_only() {
    let broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "3"),
        ("transaction.state.log.num.partitions", "3"),
    ]);
    let input = unique_topic("txo-in");
    let output = unique_topic("txo-out");
    let group = format!("{input}-g");
    let plain = rd::producer(&broker.bootstrap(), &[("acks", "all")]);
    for i in 0..10 {
        rd::send(
            &plain,
            rd::record(&input, i, Some(0), None, Some(b"v".as_slice())),
        );
    }
    rd::assert_all_delivered(&rd::flush(&plain, 10, CALL));
    rd::send(
        &plain,
        rd::record(&output, 0, Some(0), None, Some(b"o".as_slice())),
    );
    rd::assert_all_delivered(&rd::flush(&plain, 11, CALL));

    let consumer = rd::group_consumer(&broker.bootstrap(), &group, &[]);
    consumer.subscribe(&[&input]).expect("subscribe");
    // Polled until it holds its assignment: the group metadata then carries member and
    // generation, as in a real consume-transform-produce loop.
    let mut read = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while read < 10 {
        assert!(std::time::Instant::now() < deadline, "read {read} of 10");
        if let Some(r) = consumer.poll(Duration::from_millis(100)) {
            r.expect("consume");
            read += 1;
        }
    }
    let metadata = consumer.group_metadata().expect("group metadata");

    let p = rd::producer(
        &broker.bootstrap(),
        &[
            ("transactional.id", &format!("{group}-tx")),
            ("acks", "all"),
        ],
    );
    p.init_transactions(CALL).expect("init_transactions");

    p.begin_transaction().expect("begin");
    rd::send(
        &p,
        rd::record(&output, 1, Some(0), None, Some(b"x".as_slice())),
    );
    p.send_offsets_to_transaction(&offsets(&input, 5), &metadata, CALL)
        .expect("send_offsets_to_transaction");
    p.commit_transaction(CALL).expect("commit");
    assert_eq!(committed(&consumer, &input, CALL), Ok(Offset::Offset(5)));

    p.begin_transaction().expect("begin");
    p.send_offsets_to_transaction(&offsets(&input, 8), &metadata, CALL)
        .expect("send_offsets_to_transaction");
    p.abort_transaction(CALL).expect("abort");
    assert_eq!(
        committed(&consumer, &input, CALL),
        Ok(Offset::Offset(5)),
        "an aborted transaction's offsets are not the group's"
    );

    // While a transaction with offsets is open, librdkafka's committed-offsets read
    // (require_stable) gets UNSTABLE_OFFSET_COMMIT and retries until its timeout.
    p.begin_transaction().expect("begin");
    p.send_offsets_to_transaction(&offsets(&input, 9), &metadata, CALL)
        .expect("send_offsets_to_transaction");
    let open = committed(&consumer, &input, Duration::from_secs(2));
    assert!(
        open.is_err(),
        "committed offsets while the transaction is open: {open:?}"
    );
    p.commit_transaction(CALL).expect("commit");
    assert_eq!(committed(&consumer, &input, CALL), Ok(Offset::Offset(9)));
}
