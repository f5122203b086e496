//! Eligible leader replicas (KIP-966) on a real 5-node cluster, as Kafka 4.4's controller
//! applies them (`PartitionChangeBuilder`, `ReplicationControlManager.handleBrokerShutdown`):
//!
//! - A replica that leaves an ISR already below `min.insync.replicas` joins the ELR: the high
//!   watermark cannot move while the ISR is below min ISR, so it holds every committed record.
//!   When the last ISR member dies, the ISR empties into the ELR, and an ELR member that comes
//!   back after a clean shutdown leads.
//! - A replica that restarts after a crash (no clean-shutdown marker naming its broker epoch)
//!   may have lost what it acknowledged as a follower: it leaves the ELR, and does not lead.
//!   The last leader of the partition leads again when it is back (Kafka's last known leader).
//!
//! The topic has two replicas and five voters, so that both replicas can be down while the
//! metadata quorum keeps a majority. Every wait is a condition polled against a deadline.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use brook_protocol_tests::cluster::PartitionState;
use brook_protocol_tests::rd;
use brook_protocol_tests::wire::topic_name;
use brook_protocol_tests::{unique_topic, Cluster, WireClient};
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::{BrokerId, DescribeTopicPartitionsRequest};

const RECORDS: usize = 200;
const CHANGE_WAIT: Duration = Duration::from_secs(45);
const READ_WAIT: Duration = Duration::from_secs(60);
const DELIVERY_WAIT: Duration = Duration::from_secs(60);

/// One 5-node cluster at a time: the tests of this file take turns.
fn serial() -> MutexGuard<'static, ()> {
    static CLUSTER: Mutex<()> = Mutex::new(());
    CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

fn say(msg: &str) {
    println!("[elr] {msg}");
}

/// A 5-node cluster with an RF=2 topic at min.insync.replicas=2, and `RECORDS` records
/// acknowledged with acks=all by an idempotent producer. Returns the acknowledged values.
fn setup(prefix: &str) -> (MutexGuard<'static, ()>, Cluster, String, Vec<String>) {
    let turn = serial();
    let c = Cluster::start(5, &[]);
    let topic = unique_topic(prefix);
    c.create_topic(&topic, 1, 2, &[("min.insync.replicas", "2")]);
    let p = rd::producer(
        &c.bootstrap(),
        &[("acks", "all"), ("enable.idempotence", "true")],
    );
    let values: Vec<String> = (0..RECORDS).map(|i| format!("acked-{i}")).collect();
    for (i, v) in values.iter().enumerate() {
        rd::send(&p, rd::record(&topic, i, Some(0), None, Some(v.as_bytes())));
    }
    rd::assert_all_delivered(&rd::flush(&p, RECORDS, DELIVERY_WAIT));
    (turn, c, topic, values)
}

/// What every live node says of the partition, once they agree and `cond` holds.
fn await_state(
    c: &Cluster,
    topic: &str,
    what: &str,
    cond: impl Fn(&PartitionState) -> bool,
) -> PartitionState {
    c.await_partition(topic, 0, what, CHANGE_WAIT, cond)
}

/// The partition's ELR and last known ELR as every live node's DescribeTopicPartitions
/// answers them (Kafka's `kafka-topics --describe` columns `Elr` and `LastKnownElr`); panics if
/// the nodes disagree.
fn elr(c: &Cluster, topic: &str) -> (Vec<i32>, Vec<i32>) {
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![TopicRequest::default().with_name(topic_name(topic))]);
    let ids = |v: &Option<Vec<BrokerId>>| v.iter().flatten().map(|b| b.0).collect::<Vec<i32>>();
    let answers: Vec<(Vec<i32>, Vec<i32>)> = c
        .live_ids()
        .into_iter()
        .map(|n| {
            let resp = WireClient::connect(&c.address(n)).request(0, &req);
            let p = &resp.topics[0].partitions[0];
            (ids(&p.eligible_leader_replicas), ids(&p.last_known_elr))
        })
        .collect();
    assert!(
        answers.windows(2).all(|w| w[0] == w[1]),
        "nodes disagree on the ELR: {answers:?}"
    );
    answers[0].clone()
}

fn set(ids: &[i32]) -> BTreeSet<i32> {
    ids.iter().copied().collect()
}

/// Every record of the partition, read back once both replicas are in the ISR again.
fn read_values(c: &Cluster, topic: &str) -> Vec<String> {
    rd::read_to_end(&c.bootstrap(), topic, &[0], READ_WAIT)
        .remove(&0)
        .unwrap_or_default()
        .iter()
        .map(|g| String::from_utf8_lossy(g.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

#[test]
fn a_cleanly_stopped_follower_leads_when_the_last_isr_member_dies() {
    let (_turn, mut c, topic, acked) = setup("elr-clean");
    let s = c.partition_state(&topic, 0);
    let (a, b) = (s.leader, s.followers()[0]);
    say(&format!(
        "replicas {:?}: leader {a}, follower {b}",
        s.replicas
    ));

    // Controlled shutdown of the follower: the ISR drops below min ISR, so it stays eligible.
    c.stop(b);
    await_state(&c, &topic, "ISR == [leader]", |s| s.isr == set(&[a]));
    // The leader dies: the ISR empties (into the ELR) and the partition is leaderless.
    c.kill(a);
    let leaderless = await_state(&c, &topic, "an empty ISR and no leader", |s| {
        s.isr.is_empty() && s.leader == -1
    });
    say(&format!("after killing {a}: {leaderless:?}"));
    let mut both = vec![a, b];
    both.sort_unstable();
    assert_eq!(
        elr(&c, &topic),
        (both, vec![a]),
        "ELR, and the last known leader"
    );

    // The ELR member that shut down cleanly comes back and leads, alone in the ISR, without
    // waiting for the dead leader.
    c.start_node(b);
    let led = await_state(&c, &topic, "the clean ELR member leading", |s| {
        s.leader == b && s.isr == set(&[b])
    });
    assert!(led.leader_epoch > leaderless.leader_epoch, "{led:?}");
    say(&format!("{b} leads from the ELR: {led:?}"));
    assert_eq!(
        elr(&c, &topic),
        (vec![a], vec![]),
        "{b} left the ELR for the ISR"
    );

    // The old leader comes back after its crash, catches up from the new one and rejoins.
    c.start_node(a);
    c.await_isr(&topic, 0, &[a, b], CHANGE_WAIT);
    assert_eq!(
        elr(&c, &topic),
        (vec![], vec![]),
        "at min ISR the ELR is empty"
    );
    assert_eq!(
        read_values(&c, &topic),
        acked,
        "every acks=all record, once, in order"
    );
}

#[test]
fn a_follower_restarted_after_a_crash_leaves_the_elr() {
    let (_turn, mut c, topic, acked) = setup("elr-unclean");
    let s = c.partition_state(&topic, 0);
    let (a, b) = (s.leader, s.followers()[0]);
    say(&format!(
        "replicas {:?}: leader {a}, follower {b}",
        s.replicas
    ));

    c.kill(b);
    await_state(&c, &topic, "ISR == [leader]", |s| s.isr == set(&[a]));
    c.kill(a);
    await_state(&c, &topic, "an empty ISR and no leader", |s| {
        s.isr.is_empty() && s.leader == -1
    });

    // The follower is back after a crash: every live node lists it as an unfenced broker, so
    // its registration and unfencing are applied, and it was not elected.
    c.start_node(b);
    for n in c.live_ids() {
        let s = c
            .partition_state_from(n, &topic, 0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (s.leader, s.isr.clone()),
            (-1, BTreeSet::new()),
            "node {n}: a replica restarted after a crash must not lead from the ELR"
        );
    }
    assert_eq!(elr(&c, &topic), (vec![a], vec![a]), "{b} left the ELR");
    say(&format!("{b} is back after a crash and does not lead"));

    // The last known leader comes back and leads; the follower then rejoins.
    c.start_node(a);
    let led = await_state(&c, &topic, "the last known leader leading", |s| {
        s.leader == a
    });
    say(&format!("the last leader {a} leads again: {led:?}"));
    c.await_isr(&topic, 0, &[a, b], CHANGE_WAIT);
    assert_eq!(
        read_values(&c, &topic),
        acked,
        "every acks=all record, once, in order"
    );
}
