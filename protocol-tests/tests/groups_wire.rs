//! Group APIs over the raw wire: the classic join/sync/heartbeat/commit cycle, and bad input
//! (unknown groups, wrong generations, empty protocol lists, oversized metadata, bad epochs)
//! answered with Kafka's error codes, without disturbing other groups; and a KIP-848
//! regex subscription over internal topics, `__` topics and topics created later.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::time::Duration;

use brook_protocol_tests::{poll_until, poll_until_ok, unique_topic, Broker, WireClient};
use bytes::Bytes;
use kafka_protocol::messages::consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

const JOIN_V: i16 = 5;
const SYNC_V: i16 = 3;
const HEARTBEAT_V: i16 = 3;
const COMMIT_V: i16 = 8;
const FETCH_V: i16 = 7;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn join(c: &mut WireClient, group: &str, member: &str, metadata: Bytes) -> JoinGroupResponse {
    let req = JoinGroupRequest::default()
        .with_group_id(s(group).into())
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(metadata)]);
    c.request(JOIN_V, &req)
}

fn heartbeat(c: &mut WireClient, group: &str, member: &str, generation: i32) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_generation_id(generation);
    c.request::<HeartbeatRequest>(HEARTBEAT_V, &req).error_code
}

fn commit(
    c: &mut WireClient,
    group: &str,
    member: &str,
    generation: i32,
    topic: &str,
    offset: i64,
) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_generation_id_or_member_epoch(generation)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(s(topic).into())
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_metadata(Some(s("m")))])]);
    c.request::<OffsetCommitRequest>(COMMIT_V, &req).topics[0].partitions[0].error_code
}

/// Joins a one-member group and syncs; returns (member id, generation).
fn stable_member(c: &mut WireClient, group: &str) -> (String, i32) {
    let r = join(c, group, "", Bytes::from_static(b"meta"));
    assert_eq!(r.error_code, 79, "MEMBER_ID_REQUIRED first");
    let member = r.member_id.to_string();
    assert!(!member.is_empty());
    let r = join(c, group, &member, Bytes::from_static(b"meta"));
    assert_eq!(r.error_code, 0);
    assert_eq!(r.leader.as_str(), member);
    assert_eq!(r.members.len(), 1);
    let generation = r.generation_id;
    let sync = SyncGroupRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(&member))
        .with_generation_id(generation)
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s(&member))
            .with_assignment(Bytes::from_static(b"assigned"))]);
    let r: SyncGroupResponse = c.request(SYNC_V, &sync);
    assert_eq!(r.error_code, 0);
    assert_eq!(&r.assignment[..], b"assigned");
    (member, generation)
}

#[test]
fn classic_cycle_and_bad_input() {
    let broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "2"),
    ]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("gw");
    c.ensure_topic(&topic);
    let group = format!("{topic}-g");
    let other = format!("{topic}-other");
    let (other_member, other_gen) = stable_member(&mut c, &other);

    let (member, generation) = stable_member(&mut c, &group);
    assert_eq!(heartbeat(&mut c, &group, &member, generation), 0);
    assert_eq!(
        heartbeat(&mut c, &group, &member, generation + 1),
        22,
        "ILLEGAL_GENERATION"
    );
    assert_eq!(
        heartbeat(&mut c, &group, "nobody", generation),
        25,
        "UNKNOWN_MEMBER_ID"
    );
    assert_eq!(
        heartbeat(&mut c, "no-such-group", "x", 1),
        25,
        "unknown group"
    );

    assert_eq!(commit(&mut c, &group, &member, generation, &topic, 42), 0);
    assert_eq!(
        commit(&mut c, &group, &member, generation + 5, &topic, 43),
        22
    );
    assert_eq!(
        commit(&mut c, &group, "", -1, &topic, 44),
        25,
        "admin commit into a live group"
    );
    assert_eq!(
        commit(&mut c, &group, &member, generation, "no-such-topic", 1),
        3
    );
    let fetch = OffsetFetchRequest::default()
        .with_group_id(s(&group).into())
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(s(&topic).into())
            .with_partition_indexes(vec![0, 1])]));
    let r: OffsetFetchResponse = c.request(FETCH_V, &fetch);
    assert_eq!(r.error_code, 0);
    let parts = &r.topics[0].partitions;
    assert_eq!(parts[0].committed_offset, 42);
    assert_eq!(parts[0].metadata.as_deref(), Some("m"));
    assert_eq!(parts[1].committed_offset, -1, "nothing committed");

    // Bad JoinGroups.
    let empty = JoinGroupRequest::default()
        .with_group_id(s(&group).into())
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"));
    assert_eq!(
        c.request::<JoinGroupRequest>(JOIN_V, &empty).error_code,
        23,
        "no protocols"
    );
    let short = empty
        .clone()
        .with_session_timeout_ms(1)
        .with_protocols(vec![
            JoinGroupRequestProtocol::default().with_name(s("range"))
        ]);
    assert_eq!(
        c.request::<JoinGroupRequest>(JOIN_V, &short).error_code,
        26,
        "session timeout"
    );
    let r = join(&mut c, &group, "", Bytes::from(vec![0u8; 300 * 1024]));
    assert_eq!(r.error_code, 42, "metadata above MAX_MEMBER_METADATA_BYTES");
    let odd = JoinGroupRequest::default()
        .with_group_id(s(&group).into())
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default().with_name(s("roundrobin"))
        ]);
    assert_eq!(
        c.request::<JoinGroupRequest>(JOIN_V, &odd).error_code,
        23,
        "no common protocol"
    );
    assert_eq!(join(&mut c, &group, "made-up", Bytes::new()).error_code, 25);
    assert_eq!(
        join(&mut c, "", "", Bytes::new()).error_code,
        24,
        "INVALID_GROUP_ID"
    );

    // Admin APIs.
    let d: DeleteGroupsResponse = c.request(
        2,
        &DeleteGroupsRequest::default().with_groups_names(vec![s(&group).into(), s("nope").into()]),
    );
    assert_eq!(d.results[0].error_code, 68, "NON_EMPTY_GROUP");
    assert_eq!(d.results[1].error_code, 69, "GROUP_ID_NOT_FOUND");
    let d: DescribeGroupsResponse = c.request(
        5,
        &DescribeGroupsRequest::default().with_groups(vec![s(&group).into(), s("nope").into()]),
    );
    assert_eq!(d.groups[0].group_state.as_str(), "Stable");
    assert_eq!(d.groups[0].members.len(), 1);
    assert_eq!(d.groups[1].group_state.as_str(), "Dead");
    assert_eq!(
        d.groups[1].error_code, 0,
        "v5: an unknown group is Dead, no error"
    );
    let d: DescribeGroupsResponse = c.request(
        6,
        &DescribeGroupsRequest::default().with_groups(vec![s("nope").into()]),
    );
    assert_eq!(d.groups[0].error_code, 69, "v6: GROUP_ID_NOT_FOUND");
    let l: ListGroupsResponse = c.request(
        4,
        &ListGroupsRequest::default().with_states_filter(vec![s("stable")]),
    );
    assert!(l.groups.iter().any(|g| g.group_id.as_str() == group));

    // KIP-848 on the classic group's id is refused; bad heartbeats get their codes.
    let hb = |member: &str, epoch: i32| {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(s(&format!("{topic}-848")).into())
            .with_member_id(s(member))
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(10_000)
            .with_subscribed_topic_names(Some(vec![s(&topic).into()]))
            .with_topic_partitions(Some(vec![]))
    };
    let r: ConsumerGroupHeartbeatResponse =
        c.request(1, &hb("m-1", 0).with_group_id(s(&group).into()));
    assert_eq!(r.error_code, 69, "a classic group is not a consumer group");
    let r: ConsumerGroupHeartbeatResponse = c.request(1, &hb("m-1", 0));
    assert_eq!(r.error_code, 0);
    // A new group at epoch 1; the first member's subscription moves it to 2.
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.assignment.expect("assignment").topic_partitions.len(), 1);
    let r: ConsumerGroupHeartbeatResponse = c.request(1, &hb("m-1", 9));
    assert_eq!(r.error_code, 110, "FENCED_MEMBER_EPOCH");
    let r: ConsumerGroupHeartbeatResponse =
        c.request(1, &hb("m-2", 0).with_server_assignor(Some(s("magic"))));
    assert_eq!(r.error_code, 112, "UNSUPPORTED_ASSIGNOR");
    let r: ConsumerGroupHeartbeatResponse = c.request(1, &hb("m-3", 3));
    assert_eq!(r.error_code, 25, "UNKNOWN_MEMBER_ID");
    let r: ConsumerGroupHeartbeatResponse = c.request(1, &hb("m-1", -1));
    assert_eq!((r.error_code, r.member_epoch), (0, -1), "leave");

    // Leave; the member is gone. The other group never noticed any of this.
    let leave = LeaveGroupRequest::default()
        .with_group_id(s(&group).into())
        .with_member_id(s(&member));
    assert_eq!(c.request::<LeaveGroupRequest>(1, &leave).error_code, 0);
    assert_eq!(heartbeat(&mut c, &group, &member, generation), 25);
    assert_eq!(heartbeat(&mut c, &other, &other_member, other_gen), 0);
    let mut fresh = WireClient::connect(&broker.bootstrap());
    assert_eq!(heartbeat(&mut fresh, &other, &other_member, other_gen), 0);
}

/// Heartbeats (generation 1) until the answer is REBALANCE_IN_PROGRESS (bounded).
fn await_rebalance(c: &mut WireClient, group: &str, member: &str) {
    brook_protocol_tests::poll_until(
        "REBALANCE_IN_PROGRESS",
        std::time::Duration::from_secs(10),
        || (heartbeat(c, group, member, 1) == 27).then_some(()),
    );
}

fn join_timeouts(
    c: &mut WireClient,
    group: &str,
    member: &str,
    session_ms: i32,
    rebalance_ms: i32,
) -> i32 {
    let req = JoinGroupRequest::default()
        .with_group_id(s(group).into())
        .with_session_timeout_ms(session_ms)
        .with_rebalance_timeout_ms(rebalance_ms)
        .with_member_id(s(member))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default().with_name(s("range"))
        ]);
    c.send(JOIN_V, &req)
}

#[test]
fn rebalance_timeout_and_session_timeout_remove_members() {
    let broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "1"),
        ("group.min.session.timeout.ms", "100"),
    ]);
    let group = unique_topic("timeouts");
    let mut a = WireClient::connect(&broker.bootstrap());
    let mut b = WireClient::connect(&broker.bootstrap());

    // A: a stable one-member group.
    let cid = join_timeouts(&mut a, &group, "", 10_000, 1_000);
    let r = a.receive::<JoinGroupRequest>(JOIN_V, cid);
    assert_eq!(r.error_code, 79);
    let a_id = r.member_id.to_string();
    let cid = join_timeouts(&mut a, &group, &a_id, 10_000, 1_000);
    let r = a.receive::<JoinGroupRequest>(JOIN_V, cid);
    assert_eq!(r.error_code, 0);
    let sync = SyncGroupRequest::default()
        .with_group_id(s(&group).into())
        .with_member_id(s(&a_id))
        .with_generation_id(r.generation_id);
    assert_eq!(a.request::<SyncGroupRequest>(SYNC_V, &sync).error_code, 0);

    // B joins; its JoinGroup is parked until A rejoins or the rebalance timeout passes.
    let cid = join_timeouts(&mut b, &group, "", 500, 1_000);
    let b_id = b
        .receive::<JoinGroupRequest>(JOIN_V, cid)
        .member_id
        .to_string();
    let started = std::time::Instant::now();
    let parked = join_timeouts(&mut b, &group, &b_id, 500, 1_000);
    // A keeps heartbeating (its session stays alive) but never rejoins. B's join travels on
    // another connection: wait until the broker has seen it.
    await_rebalance(&mut a, &group, &a_id);
    let r = b.receive::<JoinGroupRequest>(JOIN_V, parked);
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(900),
        "answered at the rebalance timeout"
    );
    assert_eq!(r.error_code, 0);
    assert_eq!(r.leader.as_str(), b_id, "A was dropped, B leads");
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.generation_id, 2);
    assert_eq!(
        heartbeat(&mut a, &group, &a_id, 1),
        25,
        "A is no longer a member"
    );

    // B syncs, then goes silent: its 500 ms session expires and the group empties.
    let sync = SyncGroupRequest::default()
        .with_group_id(s(&group).into())
        .with_member_id(s(&b_id))
        .with_generation_id(2);
    assert_eq!(b.request::<SyncGroupRequest>(SYNC_V, &sync).error_code, 0);
    brook_protocol_tests::poll_until(
        "the group to become Empty",
        std::time::Duration::from_secs(10),
        || {
            let d: DescribeGroupsResponse = b.request(
                5,
                &DescribeGroupsRequest::default().with_groups(vec![s(&group).into()]),
            );
            (d.groups[0].group_state.as_str() == "Empty").then_some(())
        },
    );
    assert_eq!(heartbeat(&mut b, &group, &b_id, 2), 25);
}

/// A JoinGroup and a SyncGroup parked at shutdown get no answer: their connections are
/// closed, as Kafka's `SocketServer.stopProcessingRequests` closes every connection with a
/// request still parked (Brook answered them NOT_COORDINATOR).
#[test]
fn shutdown_closes_a_parked_join_and_sync_and_exits_promptly() {
    let mut broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "1"),
    ]);
    let group = unique_topic("shutdown");
    let mut a = WireClient::connect(&broker.bootstrap());
    let mut b = WireClient::connect(&broker.bootstrap());
    // A is stable and will never rejoin; B's join waits for up to a minute.
    let (a_id, _) = stable_member(&mut a, &group);
    let cid = join_timeouts(&mut b, &group, "", 10_000, 60_000);
    let b_id = b
        .receive::<JoinGroupRequest>(JOIN_V, cid)
        .member_id
        .to_string();
    let parked = join_timeouts(&mut b, &group, &b_id, 10_000, 60_000);
    await_rebalance(&mut a, &group, &a_id);
    // Another group in CompletingRebalance: D's SyncGroup waits for the leader C's.
    let synced = format!("{group}-sync");
    let mut c = WireClient::connect(&broker.bootstrap());
    let mut d = WireClient::connect(&broker.bootstrap());
    let (c_id, _) = stable_member(&mut c, &synced);
    let cid = join_timeouts(&mut d, &synced, "", 10_000, 60_000);
    let d_id = d
        .receive::<JoinGroupRequest>(JOIN_V, cid)
        .member_id
        .to_string();
    let d_join = join_timeouts(&mut d, &synced, &d_id, 10_000, 60_000);
    await_rebalance(&mut c, &synced, &c_id);
    let c_join = join_timeouts(&mut c, &synced, &c_id, 10_000, 60_000);
    assert_eq!(
        c.receive::<JoinGroupRequest>(JOIN_V, c_join).generation_id,
        2
    );
    assert_eq!(
        d.receive::<JoinGroupRequest>(JOIN_V, d_join).generation_id,
        2
    );
    let sync = SyncGroupRequest::default()
        .with_group_id(s(&synced).into())
        .with_member_id(s(&d_id))
        .with_generation_id(2);
    let parked_sync = d.send(SYNC_V, &sync);
    let started = std::time::Instant::now();
    let status = broker.stop();
    assert!(status.success(), "clean exit: {status}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "did not wait out the rebalance"
    );
    let r = b.try_receive::<JoinGroupRequest>(JOIN_V, parked);
    assert!(r.is_err(), "the parked join's connection is closed: {r:?}");
    let r = d.try_receive::<SyncGroupRequest>(SYNC_V, parked_sync);
    assert!(r.is_err(), "the parked sync's connection is closed: {r:?}");
}

/// Each of `topics` by its id, with its partition count (Metadata v12 carries the ids).
fn ids_of(c: &mut WireClient, topics: &[&str]) -> BTreeMap<Uuid, (String, usize)> {
    let md = c.metadata(topics, false);
    md.topics
        .iter()
        .map(|t| {
            assert_eq!(t.error_code, 0, "{t:?}");
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            (t.topic_id, (name, t.partitions.len()))
        })
        .collect()
}

/// What a ConsumerGroupHeartbeat answer assigns: topic name and partition count.
fn assigned(
    r: &ConsumerGroupHeartbeatResponse,
    ids: &BTreeMap<Uuid, (String, usize)>,
) -> BTreeMap<String, usize> {
    r.assignment
        .iter()
        .flat_map(|a| a.topic_partitions.iter())
        .map(|tp| {
            let name = ids
                .get(&tp.topic_id)
                .map(|(n, _)| n.clone())
                .unwrap_or_else(|| format!("unknown id {}", tp.topic_id));
            (name, tp.partitions.len())
        })
        .collect()
}

/// franz-go's Test848RegexBrokerResolves: a KIP-848 pattern is matched by the coordinator
/// against every topic, as Kafka 4.4's `TopicRegexResolver` does (it filters by DESCRIBE
/// authorization only): `__consumer_offsets` and a user topic named `__…` are assigned like
/// any other, and a matching topic created after the subscription joins the assignment.
#[test]
fn a_kip848_regex_matches_internal_topics_double_underscore_topics_and_later_topics() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let prefix = unique_topic("rx");
    let orders = format!("{prefix}orders");
    let events = format!("__{prefix}events");
    let other = format!("{prefix}other");
    let late = format!("{prefix}orders-late");
    for t in [&orders, &events, &other] {
        c.ensure_topic(t);
    }
    let group = format!("{prefix}-group");
    // The group's coordinator lookup creates `__consumer_offsets`, as a client's does.
    let find = FindCoordinatorRequest::default()
        .with_key(s(&group))
        .with_key_type(0);
    assert_eq!(c.request(3, &find).error_code, 0);
    let regex = format!(".*(?:(?:__consumer_offsets)|(?:{events})|(?:{prefix}orders)).*");
    let hb = |epoch: i32| {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(s(&group).into())
            .with_member_id(s("m-1"))
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(10_000)
    };
    let r: ConsumerGroupHeartbeatResponse = c.request(
        1,
        &hb(0)
            .with_subscribed_topic_regex(Some(s(&regex)))
            .with_topic_partitions(Some(vec![])),
    );
    assert_eq!(r.error_code, 0, "{r:?}");
    let ids = ids_of(&mut c, &["__consumer_offsets", &orders, &events, &other]);
    let offsets_partitions = ids
        .values()
        .find(|(n, _)| n == "__consumer_offsets")
        .map(|(_, n)| *n)
        .expect("__consumer_offsets");
    let want: BTreeMap<String, usize> = [
        ("__consumer_offsets".to_string(), offsets_partitions),
        (events.clone(), 1),
        (orders.clone(), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(assigned(&r, &ids), want, "{r:?}");

    // A matching topic created after the subscription is assigned at a later heartbeat
    // (Kafka: at its next regex refresh, at most 10 s after the last one).
    c.ensure_topic(&late);
    let ids = ids_of(&mut c, &["__consumer_offsets", &orders, &events, &late]);
    let mut epoch = r.member_epoch;
    let got = poll_until_ok(&format!("{late} assigned"), Duration::from_secs(30), || {
        let r: ConsumerGroupHeartbeatResponse = c.request(1, &hb(epoch));
        if r.error_code != 0 {
            return Err(format!("{r:?}"));
        }
        epoch = r.member_epoch;
        let got = assigned(&r, &ids);
        if got.contains_key(&late) {
            Ok(got)
        } else {
            Err(format!("{r:?}"))
        }
    });
    let mut want = want;
    want.insert(late.clone(), 1);
    assert_eq!(got, want);
}

/// Kafka's `ClassicGroup.validateDeleteGroup` decides by the group's state alone: a group
/// whose only member is pending (its JoinGroup answered MEMBER_ID_REQUIRED) is Empty, and
/// DeleteGroups deletes it. The pending member goes with the group: its rejoin finds no
/// group and is answered UNKNOWN_MEMBER_ID (`classicGroupJoinToClassicGroup`), and a join
/// with no member id starts a new group.
#[test]
fn delete_groups_deletes_an_empty_group_with_only_a_pending_member() {
    let broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "2"),
    ]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let group = unique_topic("pending-only");
    let describe = |c: &mut WireClient| -> describe_groups_response::DescribedGroup {
        let req = DescribeGroupsRequest::default().with_groups(vec![s(&group).into()]);
        c.request::<DescribeGroupsRequest>(5, &req).groups[0].clone()
    };

    let r = join(&mut c, &group, "", Bytes::from_static(b"meta"));
    assert_eq!(r.error_code, 79, "MEMBER_ID_REQUIRED: {r:?}");
    let pending = r.member_id.to_string();
    let d = describe(&mut c);
    assert_eq!(
        (d.group_state.as_str(), d.members.len()),
        ("Empty", 0),
        "a group with only a pending member: {d:?}"
    );

    let del: DeleteGroupsResponse = c.request(
        2,
        &DeleteGroupsRequest::default().with_groups_names(vec![s(&group).into()]),
    );
    assert_eq!(
        del.results[0].error_code, 0,
        "DeleteGroups of an Empty group: {del:?}"
    );
    assert_eq!(describe(&mut c).group_state.as_str(), "Dead");

    let r = join(&mut c, &group, &pending, Bytes::from_static(b"meta"));
    assert_eq!(
        r.error_code, 25,
        "the pending member's rejoin: UNKNOWN_MEMBER_ID: {r:?}"
    );
    let r = join(&mut c, &group, "", Bytes::from_static(b"meta"));
    assert_eq!(r.error_code, 79, "a new join starts over: {r:?}");
}

/// A group created by a JoinGroup that completes no generation (a first join answered
/// MEMBER_ID_REQUIRED) is written to `__consumer_offsets` as Kafka's
/// `classicGroupJoinToClassicGroup` writes a new group
/// (`GroupCoordinatorRecordHelpers.newEmptyGroupMetadataRecord`), so a restarted coordinator
/// lists and describes it, Empty with no protocol type. Brook kept it in memory only: after
/// the restart it was gone.
#[test]
fn a_group_created_by_a_join_that_completes_no_generation_survives_a_restart() {
    let mut broker = Broker::start_with(&[("offsets.topic.num.partitions", "1")]);
    let group = unique_topic("joined-only");
    let mut c = WireClient::connect(&broker.bootstrap());
    // FindCoordinator creates the offsets topic, as a client's first lookup does; Kafka
    // answers COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS
    // until it is created and loaded.
    let find = FindCoordinatorRequest::default().with_key(s(&group));
    poll_until_ok("the coordinator", Duration::from_secs(30), || {
        match c.request::<FindCoordinatorRequest>(3, &find).error_code {
            0 => Ok(()),
            e => Err(format!("FindCoordinator: {e}")),
        }
    });
    let r = poll_until_ok("the first join", Duration::from_secs(30), || {
        match join(&mut c, &group, "", Bytes::from_static(b"meta")) {
            r if r.error_code == 79 => Ok(r),
            r if [14, 15, 16].contains(&r.error_code) => Err(format!("{r:?}")),
            r => panic!("MEMBER_ID_REQUIRED expected: {r:?}"),
        }
    });
    assert!(!r.member_id.is_empty(), "{r:?}");
    broker.restart();
    let mut c = WireClient::connect(&broker.bootstrap());
    let listed = poll_until_ok("the group listed", Duration::from_secs(30), || {
        let r: ListGroupsResponse = c.request(4, &ListGroupsRequest::default());
        let g = r.groups.iter().find(|g| g.group_id.as_str() == group);
        match (r.error_code, g) {
            (0, Some(g)) => Ok(g.clone()),
            _ => Err(format!("{r:?}")),
        }
    });
    assert_eq!(
        (listed.protocol_type.as_str(), listed.group_state.as_str()),
        ("", "Empty"),
        "{listed:?}"
    );
    let req = DescribeGroupsRequest::default().with_groups(vec![s(&group).into()]);
    let d = c.request::<DescribeGroupsRequest>(5, &req).groups[0].clone();
    assert_eq!(
        (
            d.error_code,
            d.group_state.as_str(),
            d.protocol_type.as_str(),
            d.members.len()
        ),
        (0, "Empty", "", 0),
        "{d:?}"
    );
}

fn leave(c: &mut WireClient, group: &str, member: &str) {
    let req = LeaveGroupRequest::default()
        .with_group_id(s(group).into())
        .with_members(vec![
            leave_group_request::MemberIdentity::default().with_member_id(s(member))
        ]);
    let r: LeaveGroupResponse = c.request(4, &req);
    assert_eq!(r.error_code, 0, "LeaveGroup: {r:?}");
}

fn listed_groups(c: &mut WireClient) -> Vec<(String, String)> {
    let r: ListGroupsResponse = c.request(4, &ListGroupsRequest::default());
    r.groups
        .iter()
        .map(|g| (g.group_id.to_string(), g.group_state.to_string()))
        .collect()
}

/// `offsets.retention.check.interval.ms` runs Kafka's group metadata cleanup
/// (`GroupCoordinatorShard.cleanupGroupMetadata`): a classic group that emptied without
/// committing is deleted at the next check, while one that emptied with a committed offset
/// keeps it (and itself) until `offsets.retention.minutes` have passed since it emptied.
#[test]
fn the_retention_check_deletes_empty_groups_without_offsets_and_keeps_committed_ones() {
    let broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "2"),
        ("offsets.retention.check.interval.ms", "200"),
    ]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("retained");
    let req = WireClient::create_topics_request(&topic, 1, 1, &[], Duration::from_secs(10));
    let created: CreateTopicsResponse = c.request(7, &req);
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let (kept, bare) = (unique_topic("kept"), unique_topic("bare"));
    let (member, generation) = stable_member(&mut c, &kept);
    assert_eq!(commit(&mut c, &kept, &member, generation, &topic, 7), 0);
    leave(&mut c, &kept, &member);
    let (member, _) = stable_member(&mut c, &bare);
    leave(&mut c, &bare, &member);

    poll_until(
        "the group without offsets is deleted",
        Duration::from_secs(10),
        || {
            let groups = listed_groups(&mut c);
            (!groups.iter().any(|(g, _)| *g == bare)).then_some(())
        },
    );
    // The check that deleted it saw the other group too.
    let groups = listed_groups(&mut c);
    assert!(
        groups.contains(&(kept.clone(), "Empty".to_string())),
        "the group with an offset stays: {groups:?}"
    );
    let req = OffsetFetchRequest::default()
        .with_group_id(s(&kept).into())
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(s(&topic).into())
            .with_partition_indexes(vec![0])]));
    let r: OffsetFetchResponse = c.request(FETCH_V, &req);
    let topics = r.topics;
    assert_eq!(topics[0].partitions[0].committed_offset, 7, "{topics:?}");
}

/// Sets one of `group`'s configs (IncrementalAlterConfigs SET on the GROUP resource, 32).
fn set_group_config(c: &mut WireClient, group: &str, key: &str, value: &str) {
    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s(group))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s(key))
                    .with_config_operation(0)
                    .with_value(Some(s(value))),
            ]),
    ]);
    let r: IncrementalAlterConfigsResponse = c.request(1, &alter);
    assert_eq!(r.responses[0].error_code, 0, "{r:?}");
}

/// A group's own `consumer.heartbeat.interval.ms` (IncrementalAlterConfigs on the GROUP
/// resource, Kafka's `GroupConfig`) is the interval its KIP-848 members are told; other
/// groups keep the broker's.
#[test]
fn a_groups_heartbeat_interval_override_reaches_its_members() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("hb-topic");
    c.ensure_topic(&topic);
    let (tuned, plain) = (unique_topic("hb-tuned"), unique_topic("hb-plain"));
    set_group_config(&mut c, &tuned, "consumer.heartbeat.interval.ms", "7000");
    for (group, want) in [(&tuned, 7000), (&plain, 5000)] {
        await_coordinator(&mut c, group);
        let hb = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(s(group).into())
            .with_member_id(s(&format!("{group}-m")))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(10_000)
            .with_subscribed_topic_names(Some(vec![s(&topic).into()]))
            .with_topic_partitions(Some(vec![]));
        let r: ConsumerGroupHeartbeatResponse = c.request(1, &hb);
        assert_eq!(r.error_code, 0, "{r:?}");
        assert_eq!(r.heartbeat_interval_ms, want, "group {group}");
    }
}

/// A KIP-848 heartbeat of `member` at `epoch` in `group`, subscribed to `topic`, saying it
/// owns `owned` (partitions of the topic `topic_id`).
fn consumer_heartbeat(
    c: &mut WireClient,
    group: &str,
    member: &str,
    epoch: i32,
    (topic, topic_id): (&str, Uuid),
    owned: &[i32],
) -> ConsumerGroupHeartbeatResponse {
    // A joining member must send an empty list (INVALID_REQUEST otherwise).
    let owned: Vec<_> = (!owned.is_empty())
        .then(|| {
            consumer_group_heartbeat_request::TopicPartitions::default()
                .with_topic_id(topic_id)
                .with_partitions(owned.to_vec())
        })
        .into_iter()
        .collect();
    let hb = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![s(topic).into()]))
        .with_topic_partitions(Some(owned));
    let r: ConsumerGroupHeartbeatResponse = c.request(1, &hb);
    assert_eq!(r.error_code, 0, "{member}: {r:?}");
    r
}

/// Waits until `group`'s coordinator answers: FindCoordinator creates `__consumer_offsets`,
/// and Kafka answers COORDINATOR_NOT_AVAILABLE (15), COORDINATOR_LOAD_IN_PROGRESS (14) or
/// NOT_COORDINATOR (16) until its partition is loaded. The probe is a ConsumerGroupDescribe,
/// which changes nothing.
fn await_coordinator(c: &mut WireClient, group: &str) {
    poll_until_ok(
        &format!("{group}'s coordinator"),
        Duration::from_secs(30),
        || {
            let find = FindCoordinatorRequest::default()
                .with_key(s(group))
                .with_key_type(0);
            let f: FindCoordinatorResponse = c.request(3, &find);
            if f.error_code != 0 {
                return Err(format!("{f:?}"));
            }
            let describe =
                ConsumerGroupDescribeRequest::default().with_group_ids(vec![s(group).into()]);
            let d: ConsumerGroupDescribeResponse = c.request(0, &describe);
            match d.groups[0].error_code {
                14..=16 => Err(format!("{d:?}")),
                _ => Ok(()),
            }
        },
    );
}

/// A group's (group epoch, target assignment epoch) as ConsumerGroupDescribe shows them.
fn group_and_assignment_epochs(c: &mut WireClient, group: &str) -> (i32, i32) {
    let describe = ConsumerGroupDescribeRequest::default().with_group_ids(vec![s(group).into()]);
    let d: ConsumerGroupDescribeResponse = c.request(0, &describe);
    assert_eq!(d.groups[0].error_code, 0, "{d:?}");
    (d.groups[0].group_epoch, d.groups[0].assignment_epoch)
}

/// One KIP-848 member's view: its epoch and the partitions it was last told it owns.
struct Member {
    id: String,
    epoch: i32,
    owned: Vec<i32>,
}

impl Member {
    /// Heartbeats once, taking the epoch and assignment the answer gives.
    fn heartbeat(&mut self, c: &mut WireClient, group: &str, topic: (&str, Uuid)) {
        let r = consumer_heartbeat(c, group, &self.id, self.epoch, topic, &self.owned);
        self.epoch = r.member_epoch;
        if let Some(a) = r.assignment {
            self.owned = a
                .topic_partitions
                .iter()
                .flat_map(|tp| tp.partitions.iter().copied())
                .collect();
        }
    }
}

/// Two members heartbeat in turn until the second owns a partition; returns when.
fn until_second_member_owns_a_partition(
    c: &mut WireClient,
    group: &str,
    topic: (&str, Uuid),
    members: &mut [Member; 2],
) -> std::time::Instant {
    poll_until_ok(
        "the second member owns a partition",
        Duration::from_secs(30),
        || {
            for m in members.iter_mut() {
                m.heartbeat(c, group, topic);
            }
            if members[1].owned.is_empty() {
                return Err(format!(
                    "owned {:?} / {:?}",
                    members[0].owned, members[1].owned
                ));
            }
            Ok(std::time::Instant::now())
        },
    )
}

/// KIP-1263 (Kafka 4.4's `GroupMetadataManager.maybeUpdateTargetAssignment` and
/// `canComputeNextTargetAssignment`): a member joining right after the group's first target
/// bumps the group epoch at once, but the target assignment epoch stays behind until
/// `group.consumer.assignment.interval.ms` (1 s) has passed since that target; the joiner
/// gets the old assignment epoch and nothing until a heartbeat after the interval computes
/// the new target. A group whose `consumer.assignment.interval.ms` is 0 gets it at once.
#[test]
fn a_consumer_groups_target_assignment_waits_for_the_assignment_interval() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("ai-topic");
    let req = WireClient::create_topics_request(&topic, 2, 1, &[], Duration::from_secs(10));
    let r: CreateTopicsResponse = c.request(5, &req);
    assert_eq!(r.topics[0].error_code, 0, "{r:?}");
    c.ensure_topic(&topic);
    let topic_id = *ids_of(&mut c, &[&topic]).keys().next().expect("topic id");
    let (slow, eager) = (unique_topic("ai-slow"), unique_topic("ai-eager"));
    set_group_config(&mut c, &eager, "consumer.assignment.interval.ms", "0");
    for (group, interval_ms) in [(&slow, 1000u128), (&eager, 0)] {
        let tp = (topic.as_str(), topic_id);
        await_coordinator(&mut c, group);
        let new_member = |id: &str| Member {
            id: format!("{group}-{id}"),
            epoch: 0,
            owned: vec![],
        };
        let mut members = [new_member("m1"), new_member("m2")];
        // The group's first target is computed at once: no target was computed before.
        let first_sent = std::time::Instant::now();
        members[0].heartbeat(&mut c, group, tp);
        let first = members[0].epoch;
        assert_eq!(members[0].owned.len(), 2, "{group}");
        members[1].heartbeat(&mut c, group, tp);
        let (group_epoch, assignment_epoch) = group_and_assignment_epochs(&mut c, group);
        assert_eq!(
            group_epoch,
            first + 1,
            "{group}: the join bumps the group epoch at once"
        );
        if interval_ms > 0 {
            assert_eq!(
                (assignment_epoch, members[1].epoch, members[1].owned.len()),
                (first, first, 0),
                "{group}: the target waits for the interval; the joiner gets the old assignment epoch"
            );
        } else {
            assert_eq!(
                (assignment_epoch, members[1].epoch),
                (first + 1, first + 1),
                "{group}: with an interval of 0 the target follows the join"
            );
        }
        let owned_at = until_second_member_owns_a_partition(&mut c, group, tp, &mut members);
        let waited = owned_at.duration_since(first_sent).as_millis();
        assert!(
            waited >= interval_ms,
            "{group}: the second member owned a partition {waited} ms after the first target"
        );
        let epochs = group_and_assignment_epochs(&mut c, group);
        assert_eq!(epochs, (first + 1, first + 1), "{group}");
    }
}

/// A ConsumerGroupHeartbeat breaking one of Kafka 4.4's request rules
/// (`GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid`) is answered
/// INVALID_REQUEST with Kafka's message; at v0 a joining member without an id gets one made
/// for it, at v1 (KIP-1082, the client makes its id) it is refused.
#[test]
fn a_consumer_group_heartbeat_breaking_kafkas_request_rules_is_refused_with_its_message() {
    let broker = Broker::start();
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("hb-rules");
    c.ensure_topic(&topic);
    let group = unique_topic("hb-rules-group");
    await_coordinator(&mut c, &group);
    let join = |member: &str| {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(s(&group).into())
            .with_member_id(s(member))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(10_000)
            .with_subscribed_topic_names(Some(vec![s(&topic).into()]))
            .with_topic_partitions(Some(vec![]))
    };
    let owned = consumer_group_heartbeat_request::TopicPartitions::default()
        .with_topic_id(Uuid::new_v4())
        .with_partitions(vec![0]);
    let cases: Vec<(&str, i16, ConsumerGroupHeartbeatRequest)> = vec![
        ("MemberId can't be empty.", 1, join("")),
        ("MemberId can't be empty.", 0, join(" ").with_member_epoch(3)),
        ("GroupId can't be empty.", 1, join("m").with_group_id(s(" ").into())),
        ("InstanceId can't be empty.", 1, join("m").with_instance_id(Some(s("")))),
        ("RackId can't be empty.", 1, join("m").with_rack_id(Some(s(" ")))),
        (
            "RebalanceTimeoutMs must be provided in first request.",
            1,
            join("m").with_rebalance_timeout_ms(-1),
        ),
        (
            "TopicPartitions must be empty when (re-)joining.",
            1,
            join("m").with_topic_partitions(Some(vec![owned])),
        ),
        (
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            1,
            join("m").with_subscribed_topic_names(None),
        ),
        ("InstanceId can't be null.", 1, join("m").with_member_epoch(-2)),
        ("MemberEpoch is invalid.", 1, join("m").with_member_epoch(-3)),
    ];
    for (message, version, request) in cases {
        let r: ConsumerGroupHeartbeatResponse = c.request(version, &request);
        assert_eq!(r.error_code, 42, "{message}: {r:?}");
        let got = r.error_message.as_ref().map(|m| m.to_string());
        assert!(
            got.as_deref().is_some_and(|m| m.contains(message)),
            "{message}: {got:?}"
        );
    }
    // None of them made a member; a v0 join without an id is given one.
    let r: ConsumerGroupHeartbeatResponse = c.request(0, &join(""));
    assert_eq!(r.error_code, 0, "{r:?}");
    assert!(
        r.member_id.as_ref().is_some_and(|m| !m.is_empty()),
        "no member id made"
    );
    // A new group starts at epoch 1 and the member's new subscription moves it to 2
    // (Kafka 4.4's `ModernGroup` and `hasMemberSubscriptionChanged`).
    assert_eq!(r.member_epoch, 2, "{r:?}");
}

/// `__consumer_offsets` record key versions of a consumer group (Kafka's
/// `ConsumerGroupMetadataKey` and `ConsumerGroupTargetAssignmentMetadataKey`, …MemberKey,
/// `ConsumerGroupCurrentMemberAssignmentKey`).
const GROUP_EPOCH_RECORD: i16 = 3;
const TARGET_METADATA_RECORD: i16 = 6;
const TARGET_MEMBER_RECORD: i16 = 7;
const CURRENT_ASSIGNMENT_RECORD: i16 = 8;

/// `group`'s records in partition 0 of a one-partition `__consumer_offsets`, as (key
/// version, the value's first field: an epoch in the records above).
fn group_records(c: &mut WireClient, group: &str) -> Vec<(i16, Option<i32>)> {
    let mut out = Vec::new();
    for b in c.fetch_all("__consumer_offsets", 0) {
        for r in b.records {
            let Some(key) = r.key.filter(|k| k.len() >= 4) else {
                continue;
            };
            let version = i16::from_be_bytes([key[0], key[1]]);
            let len = i16::from_be_bytes([key[2], key[3]]).max(0) as usize;
            if key.get(4..4 + len) != Some(group.as_bytes()) {
                continue;
            }
            let epoch = r
                .value
                .filter(|v| v.len() >= 6)
                .map(|v| i32::from_be_bytes([v[2], v[3], v[4], v[5]]));
            out.push((version, epoch));
        }
    }
    out
}

/// Kafka 4.4's `ModernGroup` starts a new consumer group at group epoch 1 and
/// `TargetAssignmentMetadata.INITIAL` (assignment epoch 1), and a join moves the group epoch
/// only when the member's subscription is new (`GroupMetadataManager.consumerGroupHeartbeat`,
/// `hasMemberSubscriptionChanged`): a first member subscribed to a topic, existing or not, is
/// answered epoch 2 and one record of epoch 2 is written; one subscribed to nothing is answered
/// epoch 1 and neither the epoch record nor any target record is written. Brook started
/// groups at 0 and bumped on every join, answering 1 in all three cases.
#[test]
fn a_new_consumer_group_starts_at_epoch_1_and_a_new_subscription_moves_it_to_2() {
    let broker = Broker::start_with(&[("offsets.topic.num.partitions", "1")]);
    let mut c = WireClient::connect(&broker.bootstrap());
    let topic = unique_topic("epoch1-topic");
    c.ensure_topic(&topic);
    let missing = unique_topic("epoch1-missing");
    let cases = [
        (vec![s(&topic).into()], 2, 1),
        (vec![s(&missing).into()], 2, 1),
        (vec![], 1, 0),
    ];
    for (i, (names, epoch, epoch_records)) in cases.into_iter().enumerate() {
        let group = unique_topic(&format!("epoch1-group-{i}"));
        await_coordinator(&mut c, &group);
        let join = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(s(&group).into())
            .with_member_id(s(&Uuid::new_v4().to_string()))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(names))
            .with_topic_partitions(Some(vec![]));
        let r: ConsumerGroupHeartbeatResponse = c.request(1, &join);
        assert_eq!((r.error_code, r.member_epoch), (0, epoch), "{group}: {r:?}");
        assert_eq!(
            group_and_assignment_epochs(&mut c, &group),
            (epoch, epoch),
            "{group}"
        );
        let records = group_records(&mut c, &group);
        let count = |version: i16| records.iter().filter(|(v, _)| *v == version).count();
        let epochs: Vec<_> = records
            .iter()
            .filter(|(v, _)| *v == GROUP_EPOCH_RECORD)
            .map(|(_, e)| *e)
            .collect();
        assert_eq!(
            epochs,
            vec![Some(epoch); epoch_records],
            "{group}: {records:?}"
        );
        assert_eq!(
            (count(TARGET_METADATA_RECORD), count(TARGET_MEMBER_RECORD)),
            (epoch_records, epoch_records),
            "{group}: {records:?}"
        );
        let current: Vec<_> = records
            .iter()
            .filter(|(v, _)| *v == CURRENT_ASSIGNMENT_RECORD)
            .map(|(_, e)| *e)
            .collect();
        assert_eq!(current, vec![Some(epoch)], "{group}: {records:?}");
    }
}
