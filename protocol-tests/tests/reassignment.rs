//! Partition reassignment (AlterPartitionReassignments v1, ListPartitionReassignments v0) and
//! manual replica assignment (CreateTopics `Assignments`, `validate_only`) over the raw wire,
//! against real `brook serve` processes.
//!
//! Four nodes: partition 0, created on {1,2,3} by a manual assignment, moves to {2,3,4} while
//! a producer writes with acks=all. Node 4's replication is cut first, so the reassignment is
//! seen in progress (adding 4, removing 1); once the cut is lifted node 4 catches up, joins
//! the ISR, and that completes it: every acknowledged record is on the new replicas, node 1's
//! log directory is gone, and nothing is listed any more. Kafka's refusals are checked on the
//! way (unknown broker, duplicate broker, a factor change with v1's flag off, a cancellation
//! with nothing in progress).
//!
//! One node: the answers of a Kafka cluster of one broker.
//!
//! Every wait is a condition polled against a deadline. Lines starting `[reassign]` say what a
//! scenario observed.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::errors::*;
use brook_protocol_tests::wire::*;
use brook_protocol_tests::{poll_until, poll_until_ok, unique_topic, Broker, Cluster, WireClient};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

const ALTER_V: i16 = 1;
const LIST_V: i16 = 0;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const INVALID_REQUEST: i16 = 42;
const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
const WAIT: Duration = Duration::from_secs(60);
/// Bounds on the background producer: records, and time.
const PRODUCER_RECORDS_MAX: usize = 5_000;
const PRODUCER_TIME_MAX: Duration = Duration::from_secs(120);
/// Records acknowledged before the move starts, and after it is over.
const RECORDS_BEFORE: usize = 30;
const RECORDS_AFTER: usize = 30;

fn say(msg: &str) {
    println!("[reassign] {msg}");
}

fn alter(
    c: &mut WireClient,
    topic: &str,
    target: Option<&[i32]>,
    allow_rf_change: bool,
) -> AlterPartitionReassignmentsResponse {
    let req = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_allow_replication_factor_change(allow_rf_change)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(0)
                .with_replicas(
                    target.map(|t| t.iter().copied().map(BrokerId).collect()),
                )])]);
    c.request(ALTER_V, &req)
}

/// The error AlterPartitionReassignments answers for partition 0.
fn alter_code(c: &mut WireClient, topic: &str, target: Option<&[i32]>, allow: bool) -> i16 {
    let resp = alter(c, topic, target, allow);
    assert_eq!(resp.error_code, NONE, "{resp:?}");
    resp.responses[0].partitions[0].error_code
}

fn list(c: &mut WireClient, topic: Option<&str>) -> ListPartitionReassignmentsResponse {
    let topics = topic.map(|t| {
        vec![ListPartitionReassignmentsTopics::default()
            .with_name(topic_name(t))
            .with_partition_indexes(vec![0])]
    });
    let resp: ListPartitionReassignmentsResponse = c.request(
        LIST_V,
        &ListPartitionReassignmentsRequest::default().with_topics(topics),
    );
    assert_eq!(resp.error_code, NONE, "{resp:?}");
    resp
}

/// Partition 0's (replicas, adding, removing) as listed, if it is being reassigned.
fn listed(c: &mut WireClient, topic: &str) -> Option<(Vec<i32>, Vec<i32>, Vec<i32>)> {
    let resp = list(c, Some(topic));
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    resp.topics.first().map(|t| {
        let p = &t.partitions[0];
        (
            ids(&p.replicas),
            ids(&p.adding_replicas),
            ids(&p.removing_replicas),
        )
    })
}

/// CreateTopics of one topic with manual assignments (partition count and factor -1).
fn create_assigned(
    c: &mut WireClient,
    topic: &str,
    assignments: &[&[i32]],
    validate_only: bool,
) -> (i16, i32, i16) {
    let mut req = WireClient::create_topics_request(topic, -1, -1, &[], Duration::from_secs(30));
    req.validate_only = validate_only;
    req.topics[0].assignments = assignments
        .iter()
        .enumerate()
        .map(|(i, brokers)| {
            CreatableReplicaAssignment::default()
                .with_partition_index(i as i32)
                .with_broker_ids(brokers.iter().copied().map(BrokerId).collect())
        })
        .collect();
    let resp = c.request(CREATE_TOPICS_V, &req);
    let t = &resp.topics[0];
    (t.error_code, t.num_partitions, t.replication_factor)
}

/// The leader of partition 0 as the first node in `addrs` that answers sees it.
fn find_leader(addrs: &[(i32, String)], topic: &str) -> Option<String> {
    addrs.iter().find_map(|(_, a)| {
        let mut c = WireClient::try_connect(a, Duration::from_secs(2)).ok()?;
        let md = c
            .try_request(METADATA_V, &WireClient::metadata_request(&[topic], false))
            .ok()?;
        let leader = md.topics.first()?.partitions.first()?.leader_id.0;
        let addr = addrs.iter().find(|(id, _)| *id == leader)?;
        Some(addr.1.clone())
    })
}

/// Writes one-record batches `r0`, `r1`, ... with acks=all to the partition's leader until
/// `stop` (bounded in count and time), following the leader when it moves; returns the
/// records acknowledged. A refused record is sent again as the next one.
fn produce_until(
    addrs: Vec<(i32, String)>,
    topic: String,
    stop: Arc<AtomicBool>,
    acked: Arc<std::sync::Mutex<Vec<String>>>,
) {
    let deadline = Instant::now() + PRODUCER_TIME_MAX;
    let mut leader: Option<WireClient> = None;
    for i in 0..PRODUCER_RECORDS_MAX {
        if stop.load(Ordering::Acquire) || Instant::now() > deadline {
            return;
        }
        let c = match leader.as_mut() {
            Some(c) => c,
            None => {
                let Some(addr) = find_leader(&addrs, &topic) else {
                    continue;
                };
                let Ok(c) = WireClient::try_connect(&addr, Duration::from_secs(2)) else {
                    continue;
                };
                leader.insert(c)
            }
        };
        let value = format!("r{i}");
        let batch = encode_batch(Producer::NONE, &[Rec::kv("k", &value, 1_000 + i as i64)]);
        let req = WireClient::produce_request(&topic, 0, batch, -1);
        match c.try_request(PRODUCE_V, &req) {
            Ok(r) if r.responses[0].partition_responses[0].error_code == NONE => {
                acked.lock().unwrap().push(value);
            }
            _ => leader = None,
        }
    }
}

fn acked_count(acked: &std::sync::Mutex<Vec<String>>) -> usize {
    acked.lock().unwrap().len()
}

#[test]
fn a_partition_moves_to_new_replicas_while_a_producer_writes() {
    let c = Cluster::start(4, &[("auto.leader.rebalance.enable", "false")]);
    let topic = unique_topic("reassign");
    let mut wire = WireClient::connect(&c.address(2));
    wire.require_versions(&[
        (ApiKey::AlterPartitionReassignments, ALTER_V),
        (ApiKey::ListPartitionReassignments, LIST_V),
    ]);
    assert_eq!(
        create_assigned(&mut wire, &topic, &[&[1, 2, 3]], false).0,
        NONE
    );
    let before = c.await_isr(&topic, 0, &[1, 2, 3], WAIT);
    assert_eq!((before.replicas.clone(), before.leader), (vec![1, 2, 3], 1));
    assert_eq!(listed(&mut wire, &topic), None, "nothing in progress yet");

    // Kafka's refusals, before anything moves.
    let code = |w: &mut WireClient, t: &[i32], allow| alter_code(w, &topic, Some(t), allow);
    assert_eq!(
        code(&mut wire, &[2, 3, 9], true),
        INVALID_REPLICA_ASSIGNMENT,
        "broker 9"
    );
    assert_eq!(
        code(&mut wire, &[2, 3, 3], true),
        INVALID_REPLICA_ASSIGNMENT,
        "3 twice"
    );
    assert_eq!(
        code(&mut wire, &[2, 3], false),
        INVALID_REPLICATION_FACTOR,
        "KIP-860"
    );
    assert_eq!(
        alter_code(&mut wire, &topic, None, true),
        NO_REASSIGNMENT_IN_PROGRESS
    );

    let addrs: Vec<(i32, String)> = c.ids().into_iter().map(|id| (id, c.address(id))).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let producer = {
        let (topic, stop, acked) = (topic.clone(), stop.clone(), acked.clone());
        std::thread::spawn(move || produce_until(addrs, topic, stop, acked))
    };
    poll_until("records acknowledged before the move", WAIT, || {
        (acked_count(&acked) >= RECORDS_BEFORE).then_some(())
    });

    // Node 4 cannot fetch yet, so the reassignment stays in progress.
    let cut = c.isolate_replication(4);
    assert_eq!(code(&mut wire, &[2, 3, 4], true), NONE);
    let in_progress = listed(&mut wire, &topic);
    say(&format!("listed while node 4 is cut off: {in_progress:?}"));
    assert_eq!(in_progress, Some((vec![2, 3, 4, 1], vec![4], vec![1])));
    let all = list(&mut wire, None);
    assert!(
        all.topics.iter().any(|t| t.name.0.as_str() == topic),
        "listing every reassignment names {topic}: {all:?}"
    );
    let moving = c.partition_state(&topic, 0);
    assert_eq!(moving.replicas, vec![2, 3, 4, 1], "{moving:?}");
    assert_eq!(moving.leader, 1, "node 1 leads until the move is over");

    c.fault_remove(4, cut);
    let after = c.await_partition(&topic, 0, "moved to {2,3,4}", WAIT, |s| {
        s.replicas == [2, 3, 4] && s.isr == BTreeSet::from([2, 3, 4]) && s.leader > 1
    });
    say(&format!("after the move: {after:?}"));
    assert!(
        after.leader_epoch > before.leader_epoch,
        "{before:?} -> {after:?}"
    );
    poll_until_ok(
        "nothing listed once the move is over",
        WAIT,
        || match listed(&mut wire, &topic) {
            None => Ok(()),
            Some(l) => Err(format!("{l:?}")),
        },
    );
    poll_until(
        "node 1's log directory of the partition is deleted",
        WAIT,
        || (!c.partition_dir(1, &topic, 0).exists()).then_some(()),
    );

    let moved_at = acked_count(&acked);
    poll_until("records acknowledged after the move", WAIT, || {
        (acked_count(&acked) >= moved_at + RECORDS_AFTER).then_some(())
    });
    stop.store(true, Ordering::Release);
    producer.join().expect("producer thread");
    let acked = acked.lock().unwrap().clone();

    // Every acknowledged record is on the new leader, and each new replica holds the same log.
    c.await_identical_replicas(&topic, 0, &[2, 3, 4], WAIT);
    let leader = c.leader_of(&topic, 0);
    let read: BTreeSet<String> = WireClient::connect(&c.address(leader))
        .fetch_all(&topic, 0)
        .iter()
        .flat_map(|b| b.records.iter())
        .filter_map(|r| {
            r.value
                .as_ref()
                .map(|v| String::from_utf8_lossy(v).into_owned())
        })
        .collect();
    let lost: Vec<&String> = acked.iter().filter(|v| !read.contains(*v)).collect();
    say(&format!(
        "{} records acknowledged, {} read back from node {leader}",
        acked.len(),
        read.len()
    ));
    assert!(lost.is_empty(), "acknowledged but not read back: {lost:?}");
}

#[test]
fn manual_assignments_and_validate_only_on_a_cluster() {
    let c = Cluster::start(3, &[]);
    let mut wire = WireClient::connect(&c.address(1));
    let topic = unique_topic("assigned");
    // Kafka's validation of manual assignments.
    let code = |w: &mut WireClient, a: &[&[i32]]| create_assigned(w, &topic, a, false).0;
    assert_eq!(
        code(&mut wire, &[&[1, 7]]),
        INVALID_REPLICA_ASSIGNMENT,
        "broker 7"
    );
    assert_eq!(
        code(&mut wire, &[&[1, 1]]),
        INVALID_REPLICA_ASSIGNMENT,
        "1 twice"
    );
    assert_eq!(
        code(&mut wire, &[&[1, 2], &[3]]),
        INVALID_REPLICA_ASSIGNMENT,
        "sizes"
    );
    let mut req = WireClient::create_topics_request(&topic, 2, -1, &[], Duration::from_secs(30));
    req.topics[0].assignments = vec![CreatableReplicaAssignment::default()
        .with_partition_index(0)
        .with_broker_ids(vec![BrokerId(1)])];
    let resp = wire.request(CREATE_TOPICS_V, &req);
    assert_eq!(
        resp.topics[0].error_code, INVALID_REQUEST,
        "count with assignments"
    );

    // validate_only answers as if created and creates nothing.
    let answer = create_assigned(&mut wire, &topic, &[&[3, 1], &[2, 3]], true);
    assert_eq!(answer, (NONE, 2, 2));
    let md = wire.metadata(&[&topic], false);
    assert_eq!(
        md.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION,
        "{md:?}"
    );
    let mut placed = WireClient::create_topics_request(&topic, 3, 3, &[], Duration::from_secs(30));
    placed.validate_only = true;
    let resp = wire.request(CREATE_TOPICS_V, &placed);
    assert_eq!(resp.topics[0].error_code, NONE, "{resp:?}");
    placed.topics[0].replication_factor = 4;
    let resp = wire.request(CREATE_TOPICS_V, &placed);
    assert_eq!(
        resp.topics[0].error_code, INVALID_REPLICATION_FACTOR,
        "{resp:?}"
    );

    assert_eq!(
        create_assigned(&mut wire, &topic, &[&[3, 1], &[2, 3]], false),
        (NONE, 2, 2)
    );
    let p0 = c.await_isr(&topic, 0, &[1, 3], WAIT);
    let p1 = c.await_isr(&topic, 1, &[2, 3], WAIT);
    assert_eq!((p0.replicas, p0.leader), (vec![3, 1], 3));
    assert_eq!((p1.replicas, p1.leader), (vec![2, 3], 2));
}

#[test]
fn reassignment_on_a_single_node_answers_as_a_one_broker_cluster() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("reassign-one");
    let req = WireClient::create_topics_request(&topic, 1, 1, &[], Duration::from_secs(10));
    assert_eq!(c.request(CREATE_TOPICS_V, &req).topics[0].error_code, NONE);
    assert_eq!(
        alter_code(&mut c, &topic, Some(&[1]), false),
        NONE,
        "already there"
    );
    assert_eq!(
        alter_code(&mut c, &topic, Some(&[2]), true),
        INVALID_REPLICA_ASSIGNMENT
    );
    assert_eq!(
        alter_code(&mut c, &topic, Some(&[1, 1]), true),
        INVALID_REPLICA_ASSIGNMENT
    );
    assert_eq!(
        alter_code(&mut c, &topic, None, true),
        NO_REASSIGNMENT_IN_PROGRESS
    );
    assert_eq!(
        alter_code(&mut c, "no-such-topic", Some(&[1]), true),
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert!(list(&mut c, None).topics.is_empty());
}

/// An acks=all produce in flight when a reassignment removes a replica: the controller bumps
/// the leader epoch, the leader stays leader, and the produce completes once the remaining ISR
/// has the record (Kafka's `Partition.checkEnoughReplicasReachOffset` fails a waiting produce
/// only when this node is no longer leader). Failing it instead, with NOT_LEADER_OR_FOLLOWER,
/// makes a producer without idempotence write the record twice when it retries.
#[test]
fn an_acks_all_produce_survives_a_leader_epoch_bump_that_keeps_the_leader() {
    // No ISR shrink while the followers are cut: the produce must stay in flight.
    let c = Cluster::start(
        3,
        &[
            ("auto.leader.rebalance.enable", "false"),
            ("replica.lag.time.max.ms", "60000"),
        ],
    );
    let topic = unique_topic("reassign-epoch");
    let mut admin = WireClient::connect(&c.address(2));
    assert_eq!(
        create_assigned(&mut admin, &topic, &[&[1, 2, 3]], false).0,
        NONE
    );
    let before = c.await_isr(&topic, 0, &[1, 2, 3], WAIT);
    assert_eq!(before.leader, 1);
    let mut producer = WireClient::connect(&c.address(1));
    // Every node's Metadata can name node 1 leader a moment before node 1 has applied that
    // leadership to its partition (Kafka's broker also publishes the image to its metadata
    // cache before ReplicaManager.applyDelta): NOT_LEADER_OR_FOLLOWER until then, retried as a
    // client retries it. Nothing is appended by a refused produce.
    let r = poll_until_ok("node 1 accepts the first record as leader", WAIT, || {
        let r = producer.produce(
            &topic,
            0,
            encode_batch(Producer::NONE, &[Rec::kv("k", "first", 1_000)]),
        );
        match r.error_code {
            NOT_LEADER_OR_FOLLOWER => Err(format!("{r:?}")),
            _ => Ok(r),
        }
    });
    assert_eq!((r.error_code, r.base_offset), (NONE, 0), "{r:?}");

    // Neither follower can fetch: the next record waits for the high watermark.
    let cut2 = c.isolate_replication(2);
    let _cut3 = c.isolate_replication(3);
    let req = WireClient::produce_request(
        &topic,
        0,
        encode_batch(Producer::NONE, &[Rec::kv("k", "in-flight", 2_000)]),
        -1,
    );
    let in_flight = producer.send(PRODUCE_V, &req);

    // Removing node 3 bumps the leader epoch; node 1 stays leader with ISR {1, 2}.
    assert_eq!(alter_code(&mut admin, &topic, Some(&[1, 2]), true), NONE);
    let after = c.await_partition(&topic, 0, "node 3 removed", WAIT, |s| {
        s.replicas == vec![1, 2] && s.leader == 1
    });
    assert!(after.leader_epoch > before.leader_epoch, "{after:?}");
    say(&format!(
        "leader epoch {} -> {}",
        before.leader_epoch, after.leader_epoch
    ));

    // Node 2 catches up: the produce completes, once, at offset 1.
    c.fault_remove(2, cut2);
    let resp = producer.receive::<kafka_protocol::messages::ProduceRequest>(PRODUCE_V, in_flight);
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(
        (p.error_code, p.base_offset),
        (NONE, 1),
        "the in-flight acks=all produce across the epoch bump: {resp:?}"
    );
    let offsets: Vec<i64> = producer
        .fetch_all(&topic, 0)
        .iter()
        .map(|b| b.base_offset)
        .collect();
    assert_eq!(offsets, vec![0, 1]);
}
