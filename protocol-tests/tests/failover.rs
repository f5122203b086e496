//! What a client sees of a leader's failover (issue 31; `benches/src/bin/failover.rs`
//! measures the times next to Kafka 4.4): KIP-951 leader hints, and a controlled shutdown
//! that answers a produce parked on the stopping leader instead of leaving it hanging.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::time::Duration;

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::streams_group_heartbeat_request::{Subtopology, Topology};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, FindCoordinatorRequest,
    HeartbeatRequest, JoinGroupRequest, ListGroupsRequest, OffsetCommitRequest, ProducerId,
    StreamsGroupDescribeRequest, StreamsGroupHeartbeatRequest, SyncGroupRequest,
    WriteTxnMarkersRequest,
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
/// JoinGroup v5 (a member id first, MEMBER_ID_REQUIRED), SyncGroup v3.
const JOIN_V: i16 = 5;
/// A JoinGroup version before MEMBER_ID_REQUIRED (v4): a new member's join parks at once.
const JOIN_V3: i16 = 3;
const SYNC_V: i16 = 3;
/// ConsumerGroupHeartbeat v1.
const CONSUMER_HEARTBEAT_V: i16 = 1;
/// StreamsGroupHeartbeat v0, StreamsGroupDescribe v0.
const STREAMS_HEARTBEAT_V: i16 = 0;
const STREAMS_GROUP_DESCRIBE_V: i16 = 0;
/// ListGroups v5: with the group type.
const LIST_GROUPS_V: i16 = 5;
/// Heartbeat v3, ConsumerGroupDescribe v0.
const HEARTBEAT_V: i16 = 3;
const CONSUMER_GROUP_DESCRIBE_V: i16 = 0;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const REBALANCE_IN_PROGRESS: i16 = 27;
const GROUP_ID_NOT_FOUND: i16 = 69;
const UNKNOWN_MEMBER_ID: i16 = 25;
/// The member epoch of a ConsumerGroupHeartbeat that leaves the group.
const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// `offsets.topic.num.partitions`, Kafka's default the cluster keeps.
const OFFSETS_PARTITIONS: i32 = 50;
/// The cut-off followers leave the ISR after `replica.lag.time.max.ms` (3 s in the
/// harness's defaults).
const ISR_SHRINK_WAIT: Duration = Duration::from_secs(20);
/// How long an answer that must wait for a commit is watched for after its record was
/// appended: an answer sent before the commit is on the socket by then.
const NO_ANSWER_WATCH: Duration = Duration::from_millis(300);

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
/// with an error instead. So are a JoinGroup waiting for a member to rejoin and a follower's
/// SyncGroup waiting for the leader's.
#[test]
fn a_stopping_leader_whose_controlled_shutdown_fails_drops_a_parked_produce_and_exits() {
    let mut c = Cluster::start(
        3,
        &[
            ("replica.lag.time.max.ms", "60000"),
            // The commit stays parked until the node stops (Kafka's default is 5 s).
            ("offsets.commit.timeout.ms", "60000"),
            // A group's first member completes its join at once.
            ("group.initial.rebalance.delay.ms", "0"),
        ],
    );
    let topic = unique_topic("failover-parked");
    c.create_topic(&topic, 1, 3, &[("min.insync.replicas", "2")]);
    let leader = c.partition_state(&topic, 0).leader;
    let group = group_coordinated_by(&c, leader);
    let (_first, _, mut joiner, _, parked_join) =
        park_join(&c, leader, &group_coordinated_by(&c, leader));
    let (_leader, mut syncer, parked_sync) =
        park_sync(&c, leader, &group_coordinated_by(&c, leader));
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
    let answer = joiner.try_receive::<JoinGroupRequest>(JOIN_V, parked_join);
    assert!(
        answer.is_err(),
        "the parked JoinGroup's connection is closed unanswered: {answer:?}"
    );
    let answer = syncer.try_receive::<SyncGroupRequest>(SYNC_V, parked_sync);
    assert!(
        answer.is_err(),
        "the parked SyncGroup's connection is closed unanswered: {answer:?}"
    );
    assert_eq!(
        c.log_lines(leader, "controlled shutdown not acknowledged")
            .len(),
        1,
        "the controlled shutdown must have failed for this case"
    );
}

/// A group's answers wait for its records to commit, as Kafka's `CoordinatorRuntime`
/// completes a write only at the high watermark (issue 31). With the coordinator's followers
/// cut off, the leader's SyncGroup of a classic group and a KIP-848 ConsumerGroupHeartbeat that
/// joins are appended to `__consumer_offsets` but not answered; once the followers are let
/// through, both are, with the assignment. Brook answered both at once, so a coordinator
/// failure could reload an older generation or epoch than the members had been told.
#[test]
fn group_answers_wait_for_their_records_to_commit() {
    let c = Cluster::start(
        3,
        &[
            // Cut-off followers stay in the ISR, so nothing commits until they are let through.
            ("replica.lag.time.max.ms", "60000"),
            ("offsets.commit.timeout.ms", "60000"),
            ("group.initial.rebalance.delay.ms", "0"),
        ],
    );
    let topic = unique_topic("groupcommit");
    c.create_topic(&topic, 1, 3, &[]);
    let node = c.partition_state(&topic, 0).leader;
    let [classic, consumer] = [0, 1].map(|nth| group_coordinated_by_nth(&c, node, nth));
    let mut client = WireClient::connect(&c.address(node));
    let member = join_alone(&mut client, &classic);

    let cut = c.isolate_replication(node);
    let assignment = SyncGroupRequestAssignment::default()
        .with_member_id(s(&member))
        .with_assignment(bytes::Bytes::from_static(b"assigned"));
    let sync = SyncGroupRequest::default()
        .with_group_id(s(&classic).into())
        .with_member_id(s(&member))
        .with_generation_id(1)
        .with_assignments(vec![assignment]);
    let parked = client.send(SYNC_V, &sync);
    await_uncommitted_offsets_record(&c, node);
    assert_unanswered(&mut client, "the leader's SyncGroup");
    c.fault_remove(node, cut);
    let r = client.receive::<SyncGroupRequest>(SYNC_V, parked);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(&r.assignment[..], b"assigned");

    let cut = c.isolate_replication(node);
    let join = consumer_join(&consumer, &topic);
    let parked = client.send(CONSUMER_HEARTBEAT_V, &join);
    await_uncommitted_offsets_record(&c, node);
    assert_unanswered(&mut client, "the joining ConsumerGroupHeartbeat");
    c.fault_remove(node, cut);
    let r = client.receive::<ConsumerGroupHeartbeatRequest>(CONSUMER_HEARTBEAT_V, parked);
    // A new group at epoch 1; the member's subscription moves it to 2.
    assert_eq!((r.error_code, r.member_epoch), (0, 2), "{r:?}");
    let assigned = r.assignment.expect("an assignment");
    assert_eq!(assigned.topic_partitions.len(), 1, "{assigned:?}");
}

/// A group write that cannot be appended — too few in-sync replicas once the coordinator's
/// followers fell out of the ISR (`min.insync.replicas=2`) — is answered as Kafka's
/// coordinator answers it, COORDINATOR_NOT_AVAILABLE, and leaves the group as Kafka's
/// reverted timeline does: the leader's SyncGroup fails every parked SyncGroup and the group
/// rebalances (Brook answered it and went Stable); a ConsumerGroupHeartbeat that would have
/// created its group leaves no group behind (Brook answered it and kept the group); a
/// StreamsGroupHeartbeat joining a second member leaves the streams group at its epoch with
/// its one member, so the first member's next heartbeat sees epoch 2 (Brook answered the
/// joiner, kept it and moved the group to epoch 3).
#[test]
fn a_group_write_that_cannot_be_appended_answers_the_error_and_keeps_no_trace() {
    let c = Cluster::start(
        3,
        &[
            ("group.initial.rebalance.delay.ms", "0"),
            ("group.streams.initial.rebalance.delay.ms", "0"),
        ],
    );
    let topic = unique_topic("groupfail");
    c.create_topic(&topic, 1, 3, &[]);
    let node = c.partition_state(&topic, 0).leader;
    let [classic, consumer, streams, upgraded] =
        [0, 1, 2, 3].map(|nth| group_coordinated_by_nth(&c, node, nth));
    let mut client = WireClient::connect(&c.address(node));
    let member = join_alone(&mut client, &classic);
    let r = streams_heartbeat(&mut client, &streams, "streams-1", 0, &topic);
    // A new group at epoch 1; the first member moves it to 2.
    assert_eq!((r.error_code, r.member_epoch), (0, 2), "{r:?}");
    join_alone_with(&mut client, &upgraded, consumer_subscription(&topic));
    c.isolate_replication(node);
    for group in [&classic, &consumer, &streams, &upgraded] {
        let partition = brook::group::records::partition_for(group, OFFSETS_PARTITIONS);
        c.await_isr("__consumer_offsets", partition, &[node], ISR_SHRINK_WAIT);
    }

    let sync = SyncGroupRequest::default()
        .with_group_id(s(&classic).into())
        .with_member_id(s(&member))
        .with_generation_id(1);
    let r = client.request(SYNC_V, &sync);
    assert_eq!(r.error_code, COORDINATOR_NOT_AVAILABLE, "{r:?}");
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(s(&classic).into())
        .with_member_id(s(&member))
        .with_generation_id(1);
    let r = client.request(HEARTBEAT_V, &heartbeat);
    assert_eq!(
        r.error_code, REBALANCE_IN_PROGRESS,
        "the group rebalances: {r:?}"
    );

    let join = consumer_join(&consumer, &topic);
    let r = client.request(CONSUMER_HEARTBEAT_V, &join);
    assert_eq!(r.error_code, COORDINATOR_NOT_AVAILABLE, "{r:?}");
    let describe =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![s(&consumer).into()]);
    let d = client.request(CONSUMER_GROUP_DESCRIBE_V, &describe);
    assert_eq!(
        d.groups[0].error_code, GROUP_ID_NOT_FOUND,
        "the heartbeat left no group: {d:?}"
    );

    let r = streams_heartbeat(&mut client, &streams, "streams-2", 0, &topic);
    assert_eq!(r.error_code, COORDINATOR_NOT_AVAILABLE, "{r:?}");
    let r = streams_heartbeat(&mut client, &streams, "streams-1", 2, &topic);
    assert_eq!(
        (r.error_code, r.member_epoch),
        (0, 2),
        "the group is as before the failed join: {r:?}"
    );
    let describe = StreamsGroupDescribeRequest::default().with_group_ids(vec![s(&streams).into()]);
    let d = client.request(STREAMS_GROUP_DESCRIBE_V, &describe);
    let g = &d.groups[0];
    let members: Vec<&str> = g.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!((g.group_epoch, members), (2, vec!["streams-1"]), "{d:?}");

    // A ConsumerGroupHeartbeat joining a classic group would upgrade it; the write of the
    // conversion fails, so the group stays classic (Brook answered and kept the conversion).
    let r = client.request(
        CONSUMER_HEARTBEAT_V,
        &join.with_group_id(s(&upgraded).into()),
    );
    assert_eq!(r.error_code, COORDINATOR_NOT_AVAILABLE, "{r:?}");
    let listed = client.request(LIST_GROUPS_V, &ListGroupsRequest::default());
    let g = listed
        .groups
        .iter()
        .find(|g| g.group_id.as_str() == upgraded);
    assert_eq!(
        g.map(|g| g.group_type.as_str()),
        Some("classic"),
        "{listed:?}"
    );
}

/// Two more group writes that cannot be appended (as above, too few in-sync replicas), each
/// reverted as Kafka's `CoordinatorRuntime` reverts a failed write. A JoinGroup (v3, so it
/// parks for the join phase) creating a classic group is answered COORDINATOR_NOT_AVAILABLE
/// and leaves no group (`classicGroupJoinToClassicGroup`'s append future); a v5 JoinGroup
/// answered MEMBER_ID_REQUIRED keeps its answer but its group is gone, so the rejoin with
/// the id is UNKNOWN_MEMBER_ID (Brook answered both and kept the group). The last
/// consumer-protocol member leaving a group of classic members would downgrade it: the
/// leave is answered COORDINATOR_NOT_AVAILABLE and the group stays a consumer group with
/// both members (Brook answered the leave and kept the classic group).
#[test]
fn a_failed_new_group_or_downgrade_write_is_reverted() {
    let c = Cluster::start(3, &[("group.initial.rebalance.delay.ms", "0")]);
    let topic = unique_topic("groupfail");
    c.create_topic(&topic, 1, 3, &[]);
    let node = c.partition_state(&topic, 0).leader;
    let [fresh_v3, fresh_v5, mixed] = [0, 1, 2].map(|nth| group_coordinated_by_nth(&c, node, nth));
    let mut client = WireClient::connect(&c.address(node));
    let join = consumer_join(&mixed, &topic);
    let r = client.request(CONSUMER_HEARTBEAT_V, &join);
    assert_eq!((r.error_code, r.member_epoch), (0, 2), "{r:?}");
    let metadata = consumer_subscription(&topic);
    let first = client.request(JOIN_V, &member_join(&mixed, "", metadata.clone()));
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED: {first:?}");
    let r = client.request(JOIN_V, &member_join(&mixed, &first.member_id, metadata));
    assert_eq!(r.error_code, 0, "the classic member joined: {r:?}");
    c.isolate_replication(node);
    for group in [&fresh_v3, &fresh_v5, &mixed] {
        let partition = brook::group::records::partition_for(group, OFFSETS_PARTITIONS);
        c.await_isr("__consumer_offsets", partition, &[node], ISR_SHRINK_WAIT);
    }

    let m = || bytes::Bytes::from_static(b"m");
    let r = client.request(JOIN_V3, &member_join(&fresh_v3, "", m()));
    assert_eq!(r.error_code, COORDINATOR_NOT_AVAILABLE, "{r:?}");
    let r = client.request(JOIN_V, &member_join(&fresh_v5, "", m()));
    assert_eq!(r.error_code, 79, "MEMBER_ID_REQUIRED: {r:?}");
    let r = client.request(JOIN_V, &member_join(&fresh_v5, &r.member_id, m()));
    assert_eq!(
        r.error_code, UNKNOWN_MEMBER_ID,
        "the group was reverted: {r:?}"
    );

    let leave = join.with_member_epoch(LEAVE_GROUP_MEMBER_EPOCH);
    let r = client.request(CONSUMER_HEARTBEAT_V, &leave);
    assert_eq!(r.error_code, COORDINATOR_NOT_AVAILABLE, "{r:?}");

    let listed = client.request(LIST_GROUPS_V, &ListGroupsRequest::default());
    let kinds: Vec<(&str, &str)> = listed
        .groups
        .iter()
        .filter(|g| {
            [&fresh_v3, &fresh_v5, &mixed]
                .iter()
                .any(|n| *n == g.group_id.as_str())
        })
        .map(|g| (g.group_id.as_str(), g.group_type.as_str()))
        .collect();
    assert_eq!(kinds, vec![(mixed.as_str(), "consumer")], "{listed:?}");
    let describe = ConsumerGroupDescribeRequest::default().with_group_ids(vec![s(&mixed).into()]);
    let d = client.request(CONSUMER_GROUP_DESCRIBE_V, &describe);
    assert_eq!(d.groups[0].members.len(), 2, "both members stay: {d:?}");
}

/// The ConsumerGroupHeartbeat of "member-848" joining `group` subscribed to `topic`.
fn consumer_join(group: &str, topic: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s("member-848"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(10_000)
        .with_subscribed_topic_names(Some(vec![s(topic).into()]))
        .with_topic_partitions(Some(vec![]))
}

/// A version 0 `ConsumerProtocolSubscription` to `topic`, no user data.
fn consumer_subscription(topic: &str) -> bytes::Bytes {
    let mut out = Vec::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    out.extend_from_slice(topic.as_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    bytes::Bytes::from(out)
}

/// A StreamsGroupHeartbeat of `member` at `epoch` whose topology reads `topic` (no internal
/// topics); the topology and the full member fields come with the join (epoch 0).
fn streams_heartbeat(
    client: &mut WireClient,
    group: &str,
    member: &str,
    epoch: i32,
    topic: &str,
) -> kafka_protocol::messages::StreamsGroupHeartbeatResponse {
    let joining = epoch == 0;
    let topology =
        Topology::default()
            .with_epoch(0)
            .with_subtopologies(vec![Subtopology::default()
                .with_subtopology_id(s("0"))
                .with_source_topics(vec![s(topic).into()])]);
    let req = StreamsGroupHeartbeatRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if joining { 30_000 } else { -1 })
        .with_process_id(joining.then(|| s(member)))
        .with_topology(joining.then_some(topology))
        .with_active_tasks(joining.then(Vec::new))
        .with_standby_tasks(joining.then(Vec::new))
        .with_warmup_tasks(joining.then(Vec::new));
    client.request(STREAMS_HEARTBEAT_V, &req)
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A JoinGroup of one member (v5: MEMBER_ID_REQUIRED, then again with the id); returns its
/// member id, the leader of generation 1.
fn join_alone(client: &mut WireClient, group: &str) -> String {
    join_alone_with(client, group, bytes::Bytes::from_static(b"m"))
}

/// [`join_alone`] with `metadata` as the member's protocol metadata.
fn join_alone_with(client: &mut WireClient, group: &str, metadata: bytes::Bytes) -> String {
    let first = client.request(JOIN_V, &member_join(group, "", metadata.clone()));
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED: {first:?}");
    let r = client.request(JOIN_V, &member_join(group, &first.member_id, metadata));
    assert_eq!((r.error_code, r.generation_id), (0, 1), "{r:?}");
    assert_eq!(r.leader, r.member_id);
    r.member_id.to_string()
}

/// A JoinGroup of `member` ("" for a new one) with one "range" protocol.
fn member_join(group: &str, member: &str, metadata: bytes::Bytes) -> JoinGroupRequest {
    let protocol = JoinGroupRequestProtocol::default()
        .with_name(s("range"))
        .with_metadata(metadata);
    JoinGroupRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_protocol_type(s("consumer"))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocols(vec![protocol])
}

/// A second member's JoinGroup parked on `node`, waiting for the first member (leader of
/// generation 1, which does not rejoin) for the rebalance timeout: (first member's client and
/// id, the second's client, id and request's correlation id).
fn park_join(c: &Cluster, node: i32, group: &str) -> (WireClient, String, WireClient, String, i32) {
    let m = || bytes::Bytes::from_static(b"m");
    let mut first = WireClient::connect(&c.address(node));
    let first_id = join_alone(&mut first, group);
    let mut second = WireClient::connect(&c.address(node));
    let r = second.request(JOIN_V, &member_join(group, "", m()));
    assert_eq!(r.error_code, 79, "MEMBER_ID_REQUIRED: {r:?}");
    let second_id = r.member_id.to_string();
    let parked = second.send(JOIN_V, &member_join(group, &second_id, m()));
    assert_unanswered(&mut second, "the second member's JoinGroup");
    (first, first_id, second, second_id, parked)
}

/// A follower's SyncGroup parked on `node`, waiting for the leader's: the clients of both
/// members, the follower's last, with the follower's correlation id.
fn park_sync(c: &Cluster, node: i32, group: &str) -> (WireClient, WireClient, i32) {
    let (mut first, first_id, mut second, second_id, parked) = park_join(c, node, group);
    let r = first.request(
        JOIN_V,
        &member_join(group, &first_id, bytes::Bytes::from_static(b"m")),
    );
    assert_eq!((r.error_code, r.generation_id), (0, 2), "{r:?}");
    let joined = second.receive::<JoinGroupRequest>(JOIN_V, parked);
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let (leader, (mut follower, follower_id)) = if r.leader.as_str() == first_id {
        (first, (second, second_id))
    } else {
        (second, (first, first_id))
    };
    let sync = SyncGroupRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(&follower_id))
        .with_generation_id(2);
    let parked = follower.send(SYNC_V, &sync);
    assert_unanswered(&mut follower, "the follower's SyncGroup");
    (leader, follower, parked)
}

/// Waits until some `__consumer_offsets` partition on `node` holds a record above its high
/// watermark: a coordinator write was appended and waits for the followers.
fn await_uncommitted_offsets_record(c: &Cluster, node: i32) {
    let view = "/v1/partitions?topic=__consumer_offsets";
    poll_until_ok(
        "a group record appended, not committed",
        Duration::from_secs(10),
        || {
            let body = admin_get(&c.admin_address(node), view)?;
            let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
            let parts = v["partitions"].as_array().cloned().unwrap_or_default();
            let pending = parts.iter().any(|p| {
                let (leo, hw) = (p["log_end_offset"].as_i64(), p["high_watermark"].as_i64());
                matches!((leo, hw), (Some(leo), Some(hw)) if leo > hw)
            });
            pending
                .then_some(())
                .ok_or_else(|| "all committed".to_string())
        },
    );
}

/// Nothing arrives on `client` for [`NO_ANSWER_WATCH`].
fn assert_unanswered(client: &mut WireClient, what: &str) {
    let stream = client.stream();
    stream.set_read_timeout(Some(NO_ANSWER_WATCH)).unwrap();
    let peeked = stream.peek(&mut [0u8; 1]);
    stream
        .set_read_timeout(Some(brook_protocol_tests::wire::IO_TIMEOUT))
        .unwrap();
    let waiting = matches!(&peeked, Err(e) if matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    ));
    assert!(
        waiting,
        "{what} was answered before its record committed: {peeked:?}"
    );
}

/// A group whose coordinator is `node` (the leader of the group's `__consumer_offsets`
/// partition), found by asking FindCoordinator about a few group ids; the first lookup
/// creates the topic, as a client's does.
fn group_coordinated_by(c: &Cluster, node: i32) -> String {
    group_coordinated_by_nth(c, node, 0)
}

/// The `nth` (from 0) of the groups [`group_coordinated_by`] finds for `node`.
fn group_coordinated_by_nth(c: &Cluster, node: i32, nth: usize) -> String {
    let mut found = 0;
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
            if found == nth {
                return group;
            }
            found += 1;
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
