//! Online migration between classic and KIP-848 groups over the raw wire (Kafka 4.4's
//! `GroupMetadataManager`): a ConsumerGroupHeartbeat upgrades a classic group whose classic
//! member then rejoins, syncs and commits against the KIP-848 group; the consumer member's
//! leave downgrades it back; both survive a restart (the conversions are in
//! `__consumer_offsets`). And the refusals: `group.consumer.migration.policy=disabled`, a group
//! larger than `group.consumer.max.size`, a group of another protocol type, a joiner past the
//! size limit. And the downgrade when a static classic member replaces the last
//! consumer-protocol member.
// A test reads as one scenario top to bottom, so its length is exempt from clippy.toml's 70 lines.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeSet;
use std::time::Duration;

use brook_protocol_tests::{poll_until_ok, unique_topic, Broker, WireClient};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const JOIN_V: i16 = 5;
const SYNC_V: i16 = 3;
const HEARTBEAT_V: i16 = 3;
const ILLEGAL_GENERATION: i16 = 22;
const REBALANCE_IN_PROGRESS: i16 = 27;
const GROUP_ID_NOT_FOUND: i16 = 69;
const GROUP_MAX_SIZE_REACHED: i16 = 81;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn put_str(out: &mut BytesMut, v: &str) {
    out.put_i16(v.len() as i16);
    out.put_slice(v.as_bytes());
}

/// A version-0 `ConsumerProtocolSubscription` of one topic.
fn subscription(topic: &str) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(1);
    put_str(&mut out, topic);
    out.put_i32(-1);
    out.freeze()
}

/// A version-0 `ConsumerProtocolAssignment` of `partitions` of one topic.
fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(1);
    put_str(&mut out, topic);
    out.put_i32(partitions.len() as i32);
    for p in partitions {
        out.put_i32(*p);
    }
    out.put_i32(-1);
    out.freeze()
}

/// The partitions of an assignment blob (one topic).
fn partitions_of(blob: &[u8]) -> BTreeSet<i32> {
    let name_len = i16::from_be_bytes([blob[6], blob[7]]) as usize;
    let at = 8 + name_len;
    let n = i32::from_be_bytes(blob[at..at + 4].try_into().unwrap()) as usize;
    (0..n)
        .map(|i| i32::from_be_bytes(blob[at + 4 + 4 * i..at + 8 + 4 * i].try_into().unwrap()))
        .collect()
}

fn join_request(group: &str, member: &str, protocol_type: &str, topic: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(s(group).into())
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(s(member))
        .with_protocol_type(s(protocol_type))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(subscription(topic))])
}

fn sync_request(group: &str, member: &str, generation: i32) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_generation_id(generation)
}

fn heartbeat(c: &mut WireClient, group: &str, member: &str, generation: i32) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_generation_id(generation);
    c.request::<HeartbeatRequest>(HEARTBEAT_V, &req).error_code
}

/// A Stable classic group of `n` members (member i assigned partition i); each member's
/// (client, member id, generation).
fn classic_group(
    addr: &str,
    group: &str,
    topic: &str,
    protocol_type: &str,
    n: usize,
) -> Vec<(WireClient, String, i32)> {
    await_coordinator(addr, group);
    let mut members: Vec<(WireClient, String)> = (0..n)
        .map(|_| {
            let mut c = WireClient::connect(addr);
            let r: JoinGroupResponse =
                c.request(JOIN_V, &join_request(group, "", protocol_type, topic));
            assert_eq!(r.error_code, 79, "MEMBER_ID_REQUIRED");
            (c, r.member_id.to_string())
        })
        .collect();
    // Every member id is pending: the join completes when the last one joins.
    let ids: Vec<i32> = members
        .iter_mut()
        .map(|(c, m)| c.send(JOIN_V, &join_request(group, m, protocol_type, topic)))
        .collect();
    let joins: Vec<JoinGroupResponse> = members
        .iter_mut()
        .zip(ids)
        .map(|((c, _), id)| c.receive::<JoinGroupRequest>(JOIN_V, id))
        .collect();
    let generation = joins[0].generation_id;
    let leader = joins[0].leader.to_string();
    let assignments: Vec<SyncGroupRequestAssignment> = members
        .iter()
        .enumerate()
        .map(|(i, (_, m))| {
            SyncGroupRequestAssignment::default()
                .with_member_id(s(m))
                .with_assignment(assignment(topic, &[i as i32]))
        })
        .collect();
    let mut sync_ids = Vec::new();
    for (c, m) in members.iter_mut().filter(|(_, m)| *m != leader) {
        sync_ids.push(c.send(SYNC_V, &sync_request(group, m, generation)));
    }
    let (lc, _) = members.iter_mut().find(|(_, m)| *m == leader).unwrap();
    let r: SyncGroupResponse = lc.request(
        SYNC_V,
        &sync_request(group, &leader, generation).with_assignments(assignments),
    );
    assert_eq!(r.error_code, 0);
    for ((c, _), id) in members
        .iter_mut()
        .filter(|(_, m)| *m != leader)
        .zip(sync_ids)
    {
        assert_eq!(c.receive::<SyncGroupRequest>(SYNC_V, id).error_code, 0);
    }
    members
        .into_iter()
        .map(|(c, m)| (c, m, generation))
        .collect()
}

/// Waits until `group`'s coordinator is up: FindCoordinator creates the offsets topic, as a
/// client's first lookup does, and a JoinGroup of nobody ("unknown" member id) answers
/// UNKNOWN_MEMBER_ID rather than NOT_COORDINATOR (16), COORDINATOR_NOT_AVAILABLE (15) or
/// COORDINATOR_LOAD_IN_PROGRESS (14), as Kafka does while it creates and loads the topic.
fn await_coordinator(addr: &str, group: &str) {
    let mut c = WireClient::connect(addr);
    let find = FindCoordinatorRequest::default().with_key(s(group));
    poll_until_ok("the coordinator", Duration::from_secs(30), || {
        match c.request::<FindCoordinatorRequest>(3, &find).error_code {
            0 => Ok(()),
            e => Err(format!("FindCoordinator: {e}")),
        }
    });
    let probe = join_request(group, "unknown", "consumer", "t");
    poll_until_ok(
        "the coordinator loaded",
        Duration::from_secs(30),
        || match c.request::<JoinGroupRequest>(JOIN_V, &probe).error_code {
            14..=16 => Err("not yet".to_string()),
            _ => Ok(()),
        },
    );
}

fn consumer_heartbeat(
    c: &mut WireClient,
    group: &str,
    member: &str,
    epoch: i32,
    topic: &str,
) -> ConsumerGroupHeartbeatResponse {
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![s(topic).into()]))
        .with_topic_partitions(Some(vec![]));
    c.request(1, &req)
}

/// ListGroups v5: (type, state) of `group`.
fn listed(c: &mut WireClient, group: &str) -> (String, String) {
    let r: ListGroupsResponse = c.request(5, &ListGroupsRequest::default());
    let g = r
        .groups
        .iter()
        .find(|g| g.group_id.as_str() == group)
        .unwrap_or_else(|| panic!("{group} not listed"));
    (g.group_type.to_string(), g.group_state.to_string())
}

/// ConsumerGroupDescribe: (member id, member type) of each member, or the group's error.
fn described(c: &mut WireClient, group: &str) -> Result<BTreeSet<(String, i8)>, i16> {
    let r: ConsumerGroupDescribeResponse = c.request(
        1,
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![s(group).into()]),
    );
    let g = &r.groups[0];
    if g.error_code != 0 {
        return Err(g.error_code);
    }
    Ok(g.members
        .iter()
        .map(|m| (m.member_id.to_string(), m.member_type))
        .collect())
}

fn committed(c: &mut WireClient, group: &str, topic: &str) -> i64 {
    let r: OffsetFetchResponse = c.request(
        7,
        &OffsetFetchRequest::default()
            .with_group_id(s(group).into())
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(s(topic).into())
                .with_partition_indexes(vec![0])])),
    );
    r.topics[0].partitions[0].committed_offset
}

/// Rejoins a classic member of a KIP-848 group until it is at the group's epoch: JoinGroup is
/// answered at once with its member epoch; SyncGroup hands out its partitions. Bounded.
fn rejoin(c: &mut WireClient, group: &str, member: &str, topic: &str) -> (i32, BTreeSet<i32>) {
    for _ in 0..5 {
        let j: JoinGroupResponse =
            c.request(JOIN_V, &join_request(group, member, "consumer", topic));
        assert_eq!(j.error_code, 0, "join");
        assert_eq!(j.protocol_name.as_ref().map(|n| n.as_str()), Some("range"));
        assert!(j.members.is_empty(), "nobody computes the assignment");
        let r: SyncGroupResponse = c.request(SYNC_V, &sync_request(group, member, j.generation_id));
        assert_eq!(r.error_code, 0, "sync");
        if heartbeat(c, group, member, j.generation_id) == 0 {
            return (j.generation_id, partitions_of(&r.assignment));
        }
    }
    panic!("{member} never caught up with the group epoch");
}

#[test]
fn a_classic_group_upgrades_and_downgrades_across_a_restart() {
    let mut broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "1"),
        ("num.partitions", "2"),
        ("group.consumer.max.size", "2"),
    ]);
    let addr = broker.bootstrap();
    let mut c = WireClient::connect(&addr);
    let topic = unique_topic("mig");
    c.ensure_topic(&topic);
    let group = format!("{topic}-g");
    let mut classic = classic_group(&addr, &group, &topic, "consumer", 1);
    let (mut mc, member, generation) = classic.remove(0);
    let commit = OffsetCommitRequest::default()
        .with_group_id(s(&group).into())
        .with_member_id(s(&member))
        .with_generation_id_or_member_epoch(generation)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(s(&topic).into())
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(42)])]);
    let r: OffsetCommitResponse = mc.request(8, &commit);
    assert_eq!(r.topics[0].partitions[0].error_code, 0);

    // Upgrade: the joiner gets the next epoch; the classic member stays, as a classic member.
    let r = consumer_heartbeat(&mut c, &group, "kip848-1", 0, &topic);
    assert_eq!(r.error_code, 0, "upgrade");
    assert_eq!(r.member_epoch, generation + 1);
    assert_eq!(listed(&mut c, &group).0, "consumer");
    let members = described(&mut c, &group).expect("a consumer group");
    assert_eq!(
        members,
        BTreeSet::from([(member.clone(), 0), ("kip848-1".to_string(), 1)])
    );
    assert_eq!(
        heartbeat(&mut mc, &group, &member, generation),
        REBALANCE_IN_PROGRESS
    );

    // A restart reloads the converted group, classic member included.
    drop(mc);
    broker.restart();
    let mut c = WireClient::connect(&addr);
    let mut mc = WireClient::connect(&addr);
    assert_eq!(described(&mut c, &group), Ok(members));
    assert_eq!(committed(&mut c, &group, &topic), 42);

    // The classic member rejoins against the KIP-848 group and ends with one partition; the
    // KIP-848 member gets the other once it is released.
    let (epoch, owned) = rejoin(&mut mc, &group, &member, &topic);
    assert_eq!(owned.len(), 1, "{owned:?}");
    let r = consumer_heartbeat(&mut c, &group, "kip848-1", epoch, &topic);
    assert_eq!(r.error_code, 0);
    let theirs: usize = r
        .assignment
        .expect("assignment")
        .topic_partitions
        .iter()
        .map(|t| t.partitions.len())
        .sum();
    assert_eq!(theirs, 1);
    let r: OffsetCommitResponse = mc.request(
        8,
        &commit.clone().with_generation_id_or_member_epoch(epoch + 7),
    );
    assert_eq!(
        r.topics[0].partitions[0].error_code, 22,
        "ILLEGAL_GENERATION"
    );
    let r: OffsetCommitResponse = mc.request(8, &commit.with_generation_id_or_member_epoch(epoch));
    assert_eq!(r.topics[0].partitions[0].error_code, 0);

    // Downgrade: the last consumer-protocol member leaves; the classic group rebalances.
    let r = consumer_heartbeat(&mut c, &group, "kip848-1", -1, &topic);
    assert_eq!((r.error_code, r.member_epoch), (0, -1));
    assert_eq!(
        listed(&mut c, &group),
        ("classic".to_string(), "PreparingRebalance".to_string())
    );
    assert_eq!(described(&mut c, &group), Err(GROUP_ID_NOT_FOUND));
    broker.restart();
    let mut c = WireClient::connect(&addr);
    let mut mc = WireClient::connect(&addr);
    assert_eq!(listed(&mut c, &group).0, "classic");
    let j: JoinGroupResponse =
        mc.request(JOIN_V, &join_request(&group, &member, "consumer", &topic));
    assert_eq!(j.error_code, 0);
    assert_eq!(
        j.leader.as_str(),
        member,
        "the classic group's leader again"
    );
    assert_eq!(committed(&mut c, &group, &topic), 42);
}

#[test]
fn conversions_refused_as_kafka_refuses_them() {
    let disabled = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "1"),
        ("group.consumer.migration.policy", "DISABLED"),
    ]);
    let sized = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "1"),
        ("group.consumer.max.size", "2"),
    ]);
    let topic = unique_topic("migx");
    let refused = |broker: &Broker, group: &str, protocol_type: &str, n: usize, code: i16| {
        let addr = broker.bootstrap();
        let mut c = WireClient::connect(&addr);
        c.ensure_topic(&topic);
        let mut members = classic_group(&addr, group, &topic, protocol_type, n);
        let r = consumer_heartbeat(&mut c, group, "kip848-x", 0, &topic);
        assert_eq!(r.error_code, code, "{group}");
        // Nothing changed: the classic group and its members are as they were.
        assert_eq!(listed(&mut c, group), ("classic".into(), "Stable".into()));
        for (mc, m, generation) in &mut members {
            assert_eq!(heartbeat(mc, group, m, *generation), 0, "{group}");
        }
    };
    refused(
        &disabled,
        "policy-disabled",
        "consumer",
        1,
        GROUP_ID_NOT_FOUND,
    );
    refused(&sized, "larger-than-max", "consumer", 3, GROUP_ID_NOT_FOUND);
    refused(&sized, "other-protocol", "connect", 1, GROUP_ID_NOT_FOUND);
    refused(
        &sized,
        "joiner-past-max",
        "consumer",
        2,
        GROUP_MAX_SIZE_REACHED,
    );
}

/// A group upgraded by a static consumer-protocol member (`instance-1`) next to one classic
/// member, each owning one partition of `topic`'s two: (the admin client, the classic
/// member's client and id, the static member's partitions and epoch).
struct StaticUpgraded {
    c: WireClient,
    mc: WireClient,
    member: String,
    static_owned: BTreeSet<i32>,
    epoch: i32,
}

fn static_upgraded(addr: &str, group: &str, topic: &str) -> StaticUpgraded {
    let mut c = WireClient::connect(addr);
    c.ensure_topic(topic);
    let (mut mc, member, _) = classic_group(addr, group, topic, "consumer", 1).remove(0);

    // A static consumer-protocol member upgrades the group and gets a partition once the
    // classic member has rejoined and released it.
    let static_heartbeat = |c: &mut WireClient, epoch: i32| {
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(s(group).into())
            .with_member_id(s("kip848-static"))
            .with_instance_id(Some(s("instance-1")))
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![s(topic).into()]))
            .with_topic_partitions(Some(vec![]));
        c.request::<ConsumerGroupHeartbeatRequest>(1, &req)
    };
    let r = static_heartbeat(&mut c, 0);
    assert_eq!(r.error_code, 0, "upgrade");
    assert_eq!(listed(&mut c, group).0, "consumer");
    let (epoch, classic_owned) = rejoin(&mut mc, group, &member, topic);
    let r = static_heartbeat(&mut c, epoch);
    assert_eq!(r.error_code, 0);
    let static_owned: BTreeSet<i32> = r
        .assignment
        .expect("assignment")
        .topic_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    assert_eq!(static_owned.len(), 1, "{static_owned:?}");
    assert!(static_owned.is_disjoint(&classic_owned));
    StaticUpgraded {
        c,
        mc,
        member,
        static_owned,
        epoch: r.member_epoch,
    }
}

fn static_join(group: &str, member: &str, topic: &str) -> JoinGroupRequest {
    let mut join = join_request(group, member, "consumer", topic);
    join.group_instance_id = Some(s("instance-1"));
    join
}

/// Kafka's `validateOnlineDowngradeWithReplacedMember`: a classic JoinGroup with the
/// `group.instance.id` of the last consumer-protocol member takes its place, and the group is
/// classic again at once (no rebalance), the joiner holding the replaced member's partitions.
#[test]
fn a_static_classic_member_replacing_the_last_consumer_member_downgrades_the_group() {
    let broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "1"),
        ("num.partitions", "2"),
    ]);
    let addr = broker.bootstrap();
    let topic = unique_topic("migstatic");
    let group = format!("{topic}-g");
    let StaticUpgraded {
        mut c,
        mut mc,
        member,
        static_owned,
        ..
    } = static_upgraded(&addr, &group, &topic);

    // A classic consumer with the same instance id replaces it: the group is classic again,
    // Stable, and the joiner syncs the replaced member's partition.
    let mut joiner = WireClient::connect(&addr);
    let j: JoinGroupResponse = joiner.request(JOIN_V, &static_join(&group, "", &topic));
    assert_eq!(j.error_code, 0, "static join");
    assert_eq!(
        listed(&mut c, &group),
        ("classic".to_string(), "Stable".to_string()),
        "downgraded at once, without a rebalance"
    );
    assert_eq!(described(&mut c, &group), Err(GROUP_ID_NOT_FOUND));
    let sync = sync_request(&group, &j.member_id, j.generation_id)
        .with_group_instance_id(Some(s("instance-1")));
    let r: SyncGroupResponse = joiner.request(SYNC_V, &sync);
    assert_eq!(r.error_code, 0, "sync");
    assert_eq!(partitions_of(&r.assignment), static_owned);
    assert_eq!(heartbeat(&mut mc, &group, &member, j.generation_id), 0);
}

/// The same replacement, but the joiner subscribes to another topic: Kafka's
/// `classicGroupJoinToConsumerGroup` computes no new target when it downgrades, so the target
/// is stale and the classic group rebalances, from the epoch the consumer group had
/// (`convertToClassicGroup` with a rebalance). Brook computed the new target and left the
/// group Stable.
#[test]
fn a_static_replacement_with_another_subscription_downgrades_the_group_into_a_rebalance() {
    let broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "1"),
        ("num.partitions", "2"),
    ]);
    let addr = broker.bootstrap();
    let topic = unique_topic("migstale");
    let other = unique_topic("migother");
    let group = format!("{topic}-g");
    let StaticUpgraded {
        mut c,
        mut mc,
        member,
        epoch,
        ..
    } = static_upgraded(&addr, &group, &topic);
    c.ensure_topic(&other);

    let mut joiner = WireClient::connect(&addr);
    let j: JoinGroupResponse = joiner.request(JOIN_V, &static_join(&group, "", &other));
    assert_eq!(
        (j.error_code, j.generation_id),
        (0, 0),
        "answered with a replacing member's epoch, 0: {j:?}"
    );
    assert_eq!(
        listed(&mut c, &group),
        ("classic".to_string(), "PreparingRebalance".to_string()),
        "downgraded into a rebalance"
    );
    let sync = sync_request(&group, &j.member_id, j.generation_id)
        .with_group_instance_id(Some(s("instance-1")));
    let r: SyncGroupResponse = joiner.request(SYNC_V, &sync);
    assert_eq!(r.error_code, ILLEGAL_GENERATION, "sync: {r:?}");

    // Both members rejoin: the next generation follows the consumer group's epoch.
    let parked = joiner.send(JOIN_V, &static_join(&group, &j.member_id, &other));
    let r: JoinGroupResponse =
        mc.request(JOIN_V, &join_request(&group, &member, "consumer", &topic));
    let rj = joiner.receive::<JoinGroupRequest>(JOIN_V, parked);
    assert_eq!(
        (
            r.error_code,
            r.generation_id,
            rj.error_code,
            rj.generation_id
        ),
        (0, epoch + 1, 0, epoch + 1),
        "{r:?} {rj:?}"
    );
}
