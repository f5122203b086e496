//! `brook_tools::wait`, the helper for tests that drive Brook, against a real 3-node cluster: it
//! sees the ISR shrink when a follower dies and come back when it returns, the high
//! watermark reach what librdkafka had acknowledged, and a librdkafka consumer group become
//! Stable on its coordinator; a condition that never holds ends in a timeout naming it.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use brook_protocol_tests::{rd, unique_topic, Cluster};
use brook_tools::wait::{Views, WaitError};
use rdkafka::consumer::Consumer;
use rdkafka::producer::BaseRecord;

/// Bound on each wait: an ISR shrink takes `broker.session.timeout.ms` (the harness's 3 s) or
/// `replica.lag.time.max.ms`, a group's first rebalance a few heartbeats.
const WAIT: Duration = Duration::from_secs(40);
const RECORDS: usize = 20;

#[test]
fn waits_follow_the_isr_the_high_watermark_and_a_group() {
    let mut cluster = Cluster::start(3, &[]);
    let topic = unique_topic("wait");
    cluster.create_topic(&topic, 1, 3, &[]);
    let leader = cluster.partition_state(&topic, 0).leader;
    let views = Views::new(cluster.admin_address(leader));
    let full = views
        .wait_for_isr_size(&topic, 0, 3, WAIT)
        .expect("a full ISR");
    assert_eq!(full["role"], "leader", "{full}");

    let follower = cluster.other_than(leader);
    cluster.kill(follower);
    let shrunk = views
        .wait_for_isr_size(&topic, 0, 2, WAIT)
        .expect("the ISR without the dead follower");
    assert!(
        !shrunk["isr"]
            .as_array()
            .expect("isr")
            .contains(&follower.into()),
        "{shrunk}"
    );

    let p = rd::producer(&cluster.bootstrap(), &[("acks", "all")]);
    for i in 0..RECORDS {
        let key = i.to_string();
        rd::send(
            &p,
            BaseRecord::with_opaque_to(&topic, i)
                .key(key.as_bytes())
                .payload(b"v"),
        );
    }
    let delivered = rd::flush(&p, RECORDS, WAIT);
    rd::assert_all_delivered(&delivered);
    let hw = views
        .wait_for_high_watermark(&topic, 0, RECORDS as i64, WAIT)
        .expect("the acknowledged records under the high watermark");
    assert_eq!(hw, RECORDS as i64);

    cluster.start_node(follower);
    views
        .wait_for_isr_size(&topic, 0, 3, WAIT)
        .expect("the follower back in the ISR");

    let group = unique_topic("wait-group");
    let coordinator = cluster
        .find_coordinator(leader, &group)
        .expect("the group's coordinator");
    let consumer = rd::group_consumer(&cluster.bootstrap(), &group, &[]);
    consumer.subscribe(&[topic.as_str()]).expect("subscribe");
    // librdkafka serves the rebalance from poll: keep polling until the wait is over.
    let stop = Arc::new(AtomicBool::new(false));
    let polling = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = consumer.poll(Duration::from_millis(50));
            }
        })
    };
    let stable =
        Views::new(cluster.admin_address(coordinator)).wait_for_stable_group(&group, 1, WAIT);
    stop.store(true, Ordering::Relaxed);
    polling.join().expect("the polling thread");
    let stable = stable.expect("the group Stable on its coordinator");
    assert_eq!(stable["protocol"], "classic", "{stable}");
    assert_eq!(
        stable["members"].as_array().map(Vec::len),
        Some(1),
        "{stable}"
    );

    match views.wait_for_high_watermark(&topic, 0, 1_000, Duration::from_millis(300)) {
        Err(WaitError::Timeout {
            what, last_seen, ..
        }) => {
            assert!(what.contains("at least 1000"), "{what}");
            assert!(last_seen.contains("\"high_watermark\":20"), "{last_seen}");
        }
        other => panic!("a high watermark of 1000 was never written: {other:?}"),
    }
}
