//! What a client sees of a leader's failover (issue 31; `benches/src/bin/failover.rs`
//! measures the times next to Kafka 4.4): KIP-951 leader hints, and a controlled shutdown
//! that answers a produce parked on the stopping leader instead of leaving it hanging.

use std::time::Duration;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    FindCoordinatorRequest, OffsetCommitRequest, ProducerId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;

use brook_protocol_tests::batch::{encode_batch, Producer, Rec};
use brook_protocol_tests::cluster::{admin_get, Cluster};
use brook_protocol_tests::wire::WireClient;
use brook_protocol_tests::{poll_until_ok, unique_topic};

/// NOT_LEADER_OR_FOLLOWER.
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// Produce v11: past v10, where `CurrentLeader` and `NodeEndpoints` appear; names topics.
const PRODUCE_V: i16 = 11;
/// OffsetCommit v8: names topics, generation and member id as the classic protocol's.
const OFFSET_COMMIT_V: i16 = 8;
/// FindCoordinator v3: one key, a node id in the answer.
const FIND_COORDINATOR_V: i16 = 3;
/// WriteTxnMarkers v1 (Kafka 4 serves 1 and 2).
const WRITE_TXN_MARKERS_V: i16 = 1;
/// The producer a marker of the test ends a transaction of (none began one: a marker is
/// appended all the same, as Kafka's).
const MARKER_PRODUCER_ID: i64 = 4_000;
/// Group ids tried to find one a given node coordinates (3 nodes lead the partitions).
const GROUP_CANDIDATES: usize = 60;

/// A produce parked on the leader (its followers cut off, so acks=all waits) when the leader
/// gets SIGTERM: the controlled shutdown moves the leadership while the node still serves
/// and applies metadata (Kafka's `BrokerServer.shutdown` waits for its controlled shutdown
/// before it stops processing requests), so the parked produce is answered
/// NOT_LEADER_OR_FOLLOWER naming the new leader, its epoch and its endpoint (KIP-951,
/// Kafka's `KafkaApis.handleProduceRequest`), before the node exits. Then the restarted
/// node, a follower now, answers a produce the same way.
#[test]
fn a_stopping_leader_answers_a_parked_produce_with_the_new_leader() {
    // A follower must not leave the ISR while cut off: the produce stays parked.
    let mut c = Cluster::start(3, &[("replica.lag.time.max.ms", "60000")]);
    let topic = unique_topic("failover-hint");
    c.create_topic(&topic, 1, 3, &[("min.insync.replicas", "2")]);
    let old = c.partition_state(&topic, 0);
    let leader = old.leader;
    c.isolate_replication(leader);
    let mut client = WireClient::connect(&c.address(leader));
    let batch = encode_batch(Producer::NONE, &[Rec::kv("k", "parked", 1_700_000_000_000)]);
    let mut req = WireClient::produce_request(&topic, 0, batch.clone(), -1);
    req.timeout_ms = 60_000;
    let parked = client.send(PRODUCE_V, &req);
    // The produce is parked once the leader has appended it: its log end moved, its high
    // watermark did not (the leader's partition view, docs/STATE-VIEWS.md).
    let view = format!("/v1/partitions?topic={topic}");
    poll_until_ok(
        "the parked produce is appended",
        Duration::from_secs(10),
        || {
            let body = admin_get(&c.admin_address(leader), &view)?;
            let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
            match v["partitions"][0]["log_end_offset"].as_i64() {
                Some(n) if n >= 1 => Ok(()),
                other => Err(format!("log end {other:?} in {v}")),
            }
        },
    );
    c.stop(leader);
    let resp = client
        .try_receive::<kafka_protocol::messages::ProduceRequest>(PRODUCE_V, parked)
        .unwrap_or_else(|e| panic!("the parked produce got no answer before the exit: {e}"));
    let new = c.partition_state(&topic, 0);
    assert_ne!(new.leader, leader, "the leadership moved: {new:?}");
    assert_hint(&resp, &c, new.leader, old.leader_epoch);
    c.start_node(leader);
    let mut client = WireClient::connect(&c.address(leader));
    let req = WireClient::produce_request(&topic, 0, batch, -1);
    let resp = client.request(PRODUCE_V, &req);
    assert_hint(&resp, &c, new.leader, old.leader_epoch);
}

/// The same parked produce, but the stopping leader's controlled shutdown is never
/// acknowledged (its controller traffic is cut), so it still leads when it stops serving.
/// Kafka's `BrokerServer.shutdown` then goes on to `SocketServer.stopProcessingRequests`,
/// which closes the connection with the produce still in the purgatory: the node exits a few
/// seconds after SIGTERM and the client sees a closed connection (and retries). Brook did
/// the same only once the produce's own timeout (60 s here; a client's
/// `request.timeout.ms`, 30 s, in general) had run out, holding its exit that long.
///
/// An OffsetCommit parked on the same node as group coordinator (its `__consumer_offsets`
/// record waits for the high watermark) is closed unanswered the same way; Brook answered it
/// with an error instead.
#[test]
fn a_stopping_leader_whose_controlled_shutdown_fails_drops_a_parked_produce_and_exits() {
    let mut c = Cluster::start(
        3,
        &[
            ("replica.lag.time.max.ms", "60000"),
            // The commit stays parked until the node stops (Kafka's default is 5 s).
            ("offsets.commit.timeout.ms", "60000"),
        ],
    );
    let topic = unique_topic("failover-parked");
    c.create_topic(&topic, 1, 3, &[("min.insync.replicas", "2")]);
    let leader = c.partition_state(&topic, 0).leader;
    let group = group_coordinated_by(&c, leader);
    c.isolate_replication(leader);
    let mut committer = WireClient::connect(&c.address(leader));
    let commit = committer.send(OFFSET_COMMIT_V, &offset_commit(&group, &topic));
    let mut coordinator = WireClient::connect(&c.address(leader));
    let markers = coordinator.send(WRITE_TXN_MARKERS_V, &commit_marker(&topic));
    c.cut_link(leader, "*", "controller");
    let mut client = WireClient::connect(&c.address(leader));
    let batch = encode_batch(Producer::NONE, &[Rec::kv("k", "parked", 1_700_000_000_000)]);
    let mut req = WireClient::produce_request(&topic, 0, batch, -1);
    req.timeout_ms = 60_000;
    let parked = client.send(PRODUCE_V, &req);
    let view = format!("/v1/partitions?topic={topic}");
    poll_until_ok(
        "the parked produce is appended",
        Duration::from_secs(10),
        || {
            let body = admin_get(&c.admin_address(leader), &view)?;
            let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
            match v["partitions"][0]["log_end_offset"].as_i64() {
                Some(n) if n >= 1 => Ok(()),
                other => Err(format!("log end {other:?} in {v}")),
            }
        },
    );
    let stopping = std::time::Instant::now();
    c.stop(leader);
    let took = stopping.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "SIGTERM to exit took {took:?} with a produce parked (controlled shutdown ~3 s)"
    );
    let answer = client.try_receive::<kafka_protocol::messages::ProduceRequest>(PRODUCE_V, parked);
    assert!(
        answer.is_err(),
        "the parked produce's connection is closed unanswered: {answer:?}"
    );
    let answer = coordinator.try_receive::<WriteTxnMarkersRequest>(WRITE_TXN_MARKERS_V, markers);
    assert!(
        answer.is_err(),
        "the parked WriteTxnMarkers' connection is closed unanswered: {answer:?}"
    );
    let answer = committer.try_receive::<OffsetCommitRequest>(OFFSET_COMMIT_V, commit);
    assert!(
        answer.is_err(),
        "the parked offset commit's connection is closed unanswered: {answer:?}"
    );
    assert_eq!(
        c.log_lines(leader, "controlled shutdown not acknowledged")
            .len(),
        1,
        "the controlled shutdown must have failed for this case"
    );
}

/// A group whose coordinator is `node` (the leader of the group's `__consumer_offsets`
/// partition), found by asking FindCoordinator about a few group ids; the first lookup
/// creates the topic, as a client's does.
fn group_coordinated_by(c: &Cluster, node: i32) -> String {
    let mut client = WireClient::connect(&c.address(node));
    let prefix = unique_topic("failover-group");
    for i in 0..GROUP_CANDIDATES {
        let group = format!("{prefix}-{i}");
        let find = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(group.clone()))
            .with_key_type(0);
        let coordinator = poll_until_ok("FindCoordinator", Duration::from_secs(20), || {
            let r = client.request(FIND_COORDINATOR_V, &find);
            match r.error_code {
                0 => Ok(r.node_id.0),
                e => Err(format!("error {e}")),
            }
        });
        if coordinator == node {
            return group;
        }
    }
    panic!("none of {GROUP_CANDIDATES} groups is coordinated by node {node}");
}

/// A commit of offset 1 of `topic`'s partition 0 for `group`, outside any generation (as an
/// assign-only consumer's).
fn offset_commit(group: &str, topic: &str) -> OffsetCommitRequest {
    let s = |v: &str| StrBytes::from_string(v.to_string());
    OffsetCommitRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(""))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(s(topic).into())
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)])])
}

/// A COMMIT marker on `topic`'s partition 0 for a producer, as a transaction coordinator
/// sends one (it waits for the high watermark as a produce with acks=all does).
fn commit_marker(topic: &str) -> WriteTxnMarkersRequest {
    WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(MARKER_PRODUCER_ID))
        .with_producer_epoch(0)
        .with_transaction_result(true)
        .with_coordinator_epoch(0)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(StrBytes::from_string(topic.to_string()).into())
            .with_partition_indexes(vec![0])])])
}

/// `resp` answers its one partition NOT_LEADER_OR_FOLLOWER naming `leader` at an epoch past
/// `old_epoch`, and carries `leader`'s endpoint.
fn assert_hint(
    resp: &kafka_protocol::messages::ProduceResponse,
    c: &Cluster,
    leader: i32,
    old_epoch: i32,
) {
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, NOT_LEADER_OR_FOLLOWER, "{resp:?}");
    assert_eq!(p.current_leader.leader_id.0, leader, "{resp:?}");
    assert!(p.current_leader.leader_epoch > old_epoch, "{resp:?}");
    let e = resp
        .node_endpoints
        .iter()
        .find(|e| e.node_id.0 == leader)
        .unwrap_or_else(|| panic!("no endpoint of node {leader}: {resp:?}"));
    assert_eq!(format!("{}:{}", e.host.as_str(), e.port), c.address(leader));
}
