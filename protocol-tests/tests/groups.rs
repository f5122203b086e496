//! Consumer groups with librdkafka: subscribe, commit, leave, and a rejoining group that
//! resumes from the committed offsets while a second member takes half the partitions.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::{Duration, Instant};

use brook_protocol_tests::{poll_until, rd, unique_topic, Broker};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Message, Offset};

const WAIT: Duration = Duration::from_secs(60);

fn produce(bootstrap: &str, topic: &str, from: usize, n: usize) {
    let p = rd::producer(bootstrap, &[]);
    let values: Vec<String> = (from..from + n).map(|i| format!("v{i}")).collect();
    for (i, v) in values.iter().enumerate() {
        rd::send(
            &p,
            rd::record(topic, i, Some((i % 2) as i32), None, Some(v.as_bytes())),
        );
    }
    rd::assert_all_delivered(&rd::flush(&p, n, WAIT));
}

/// Polls `c` until `n` messages arrived; returns (partition, offset) pairs.
fn poll_n(c: &BaseConsumer, n: usize) -> Vec<(i32, i64)> {
    let mut out = Vec::new();
    let deadline = Instant::now() + WAIT;
    while out.len() < n {
        assert!(
            Instant::now() < deadline,
            "got {} of {n} messages",
            out.len()
        );
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            out.push((m.partition(), m.offset()));
        }
    }
    out
}

#[test]
fn subscribe_commit_and_rejoin_resumes_from_committed_offsets() {
    let broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "3"),
        ("num.partitions", "2"),
    ]);
    let bootstrap = broker.bootstrap();
    let topic = unique_topic("rdgroup");
    let group = format!("{topic}-g");
    produce(&bootstrap, &topic, 0, 10);

    {
        let c = rd::group_consumer(&bootstrap, &group, &[]);
        c.subscribe(&[&topic]).expect("subscribe");
        let got = poll_n(&c, 10);
        assert_eq!(got.len(), 10);
        c.commit_consumer_state(CommitMode::Sync).expect("commit");
        let committed = c.committed(WAIT).expect("committed");
        for p in 0..2 {
            let off = committed
                .find_partition(&topic, p)
                .map(|e| e.offset())
                .expect("committed offset listed");
            assert_eq!(off, Offset::Offset(5), "partition {p}");
        }
        // Dropping the consumer leaves the group.
    }

    produce(&bootstrap, &topic, 10, 4);
    let a = rd::group_consumer(&bootstrap, &group, &[]);
    a.subscribe(&[&topic]).expect("subscribe");
    let got = poll_n(&a, 4);
    for (p, o) in &got {
        assert!(
            *o >= 5,
            "partition {p} offset {o} was committed before: must not be re-read"
        );
    }
    a.commit_consumer_state(CommitMode::Sync).expect("commit");

    // A second member joins: the group rebalances and the two split the partitions.
    let b = rd::group_consumer(&bootstrap, &group, &[]);
    b.subscribe(&[&topic]).expect("subscribe");
    poll_until("both members to own one partition", WAIT, || {
        let _ = a.poll(Duration::from_millis(50));
        let _ = b.poll(Duration::from_millis(50));
        let na = a.assignment().map(|t| t.count()).unwrap_or(0);
        let nb = b.assignment().map(|t| t.count()).unwrap_or(0);
        (na == 1 && nb == 1).then_some(())
    });
}

#[test]
fn kip848_consumer_protocol_subscribe_and_commit() {
    let broker = Broker::start_with(&[
        ("offsets.topic.num.partitions", "3"),
        ("num.partitions", "2"),
        ("group.consumer.heartbeat.interval.ms", "500"),
        ("group.consumer.min.heartbeat.interval.ms", "500"),
    ]);
    let bootstrap = broker.bootstrap();
    let topic = unique_topic("rd848");
    let group = format!("{topic}-g");
    produce(&bootstrap, &topic, 0, 10);
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", &group)
        .set("group.protocol", "consumer")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("create KIP-848 consumer");
    c.subscribe(&[&topic]).expect("subscribe");
    let got = poll_n(&c, 10);
    assert_eq!(got.len(), 10);
    c.commit_consumer_state(CommitMode::Sync).expect("commit");
    let committed = c.committed(WAIT).expect("committed");
    for p in 0..2 {
        let off = committed
            .find_partition(&topic, p)
            .map(|e| e.offset())
            .expect("committed offset listed");
        assert_eq!(off, Offset::Offset(5), "partition {p}");
    }
}
