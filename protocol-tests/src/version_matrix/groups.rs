//! Group cases: a classic group with one stable member and committed offsets (the fixture),
//! fresh groups for the APIs that change a group, and a KIP-848 group.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::env::{s, tn, Env, Fixture, NodeId, DATA_PARTITIONS, SESSION_TIMEOUT_MS};
use super::Meaning;

type R = Result<Meaning, String>;

const MEMBER_ID_REQUIRED: i16 = 79;
/// Versions the fixture uses, served by Brook and Kafka 4.4 alike.
const JOIN_V: i16 = 5;
const SYNC_V: i16 = 3;
const COMMIT_V: i16 = 8;

/// ConsumerProtocolSubscription v0 for one topic.
fn subscription(topic: &str) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(1);
    b.put_i16(topic.len() as i16);
    b.put_slice(topic.as_bytes());
    b.put_i32(-1);
    b.freeze()
}

/// ConsumerProtocolAssignment v0 of every data partition.
fn assignment(topic: &str) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(1);
    b.put_i16(topic.len() as i16);
    b.put_slice(topic.as_bytes());
    b.put_i32(DATA_PARTITIONS);
    (0..DATA_PARTITIONS).for_each(|p| b.put_i32(p));
    b.put_i32(-1);
    b.freeze()
}

/// Joins `group` as a new member at `v` (with the MEMBER_ID_REQUIRED round from v4).
pub fn join(env: &mut Env, node: NodeId, group: &str, v: i16) -> Result<JoinGroupResponse, String> {
    let data = env.fix.data.clone();
    let mut req = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(SESSION_TIMEOUT_MS)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))
        .with_metadata(subscription(&data))]);
    if v >= 1 {
        req.rebalance_timeout_ms = 30_000;
    }
    let what = format!("JoinGroup {group}");
    let r = env.retry_coordinator(&what, |env| env.call(node, v, &req), |r| r.error_code)?;
    if r.error_code != MEMBER_ID_REQUIRED {
        return Ok(r);
    }
    req.member_id = r.member_id;
    env.retry_coordinator(&what, |env| env.call(node, v, &req), |r| r.error_code)
}

fn sync_request(env: &Env, v: i16, group: &str, member: &str, generation: i32) -> SyncGroupRequest {
    let mut req = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(member))
        .with_assignments(vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(s(member))
                .with_assignment(assignment(&env.fix.data)),
        ]);
    if v >= 5 {
        req.protocol_type = Some(s("consumer"));
        req.protocol_name = Some(s("range"));
    }
    req
}

/// Commits `offset(p)` for every data partition of `group` as `member` (OffsetCommit v8).
fn commit(
    env: &mut Env,
    node: NodeId,
    v: i16,
    group: &str,
    member: &str,
    generation: i32,
) -> Result<OffsetCommitResponse, String> {
    let partitions = (0..DATA_PARTITIONS)
        .map(|p| {
            offset_commit_request::OffsetCommitRequestPartition::default()
                .with_partition_index(p)
                .with_committed_offset(2 * p as i64 + 1)
                .with_committed_metadata(Some(s(&format!("m{p}"))))
        })
        .collect();
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(vec![
            // v10 names the topic by id, older versions by name (the codec writes one).
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(tn(&env.fix.data))
                .with_topic_id(env.fix.data_id)
                .with_partitions(partitions),
        ]);
    let code = |r: &OffsetCommitResponse| {
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .max()
            .unwrap_or(0)
    };
    env.retry_coordinator(
        &format!("OffsetCommit {group}"),
        |env| env.call(node, v, &req),
        code,
    )
}

/// The fixture group: one member, stable, with committed offsets.
pub fn build_group(env: &mut Env) {
    let group = env.fix.group.clone();
    let node = env.coordinator(&group, 0);
    let j = join(env, node, &group, JOIN_V).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(j.error_code, 0, "JoinGroup {group}: {j:?}");
    let member = j.member_id.to_string();
    let req = sync_request(env, SYNC_V, &group, &member, j.generation_id);
    let sr = env
        .call(node, SYNC_V, &req)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sr.error_code, 0, "SyncGroup {group}: {sr:?}");
    let c = commit(env, node, COMMIT_V, &group, &member, j.generation_id)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        c.topics[0].partitions.iter().all(|p| p.error_code == 0),
        "OffsetCommit {group}: {c:?}"
    );
    env.fix.member = member;
    env.fix.generation = j.generation_id;
    env.fix.assignment = sr.assignment;
}

/// The KIP-848 fixture group: one member subscribed to the data topic.
pub fn build_consumer_group(env: &mut Env) {
    let cg = env.fix.cg.clone();
    let node = env.coordinator(&cg, 0);
    let r = consumer_heartbeat(env, node, &cg, 0).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.error_code, 0, "ConsumerGroupHeartbeat {cg}: {r:?}");
}

fn consumer_heartbeat(
    env: &mut Env,
    node: NodeId,
    group: &str,
    v: i16,
) -> Result<ConsumerGroupHeartbeatResponse, String> {
    // From v1 the member id is the client's own (KIP-1082).
    let member = if v >= 1 {
        env.fresh_uuid().to_string()
    } else {
        String::new()
    };
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(&member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![tn(&env.fix.data)]))
        .with_topic_partitions(Some(vec![]));
    env.retry_coordinator(
        &format!("ConsumerGroupHeartbeat {group}"),
        |env| env.call(node, v, &req),
        |r| r.error_code,
    )
}

pub fn find_coordinator(env: &mut Env, v: i16) -> R {
    let group = env.fix.group.clone();
    let mut req = FindCoordinatorRequest::default();
    if v >= 4 {
        req.coordinator_keys = vec![s(&group)];
    } else {
        req.key = s(&group);
    }
    let any = env.any();
    let r = env.call(any, v, &req)?;
    if v >= 4 {
        let c = r.coordinators.first().ok_or("no coordinator")?;
        return Ok(format!(
            "error {} node {} at {}:{}",
            c.error_code,
            c.node_id.0,
            c.host.as_str(),
            c.port
        ));
    }
    Ok(format!(
        "error {} node {} at {}:{}",
        r.error_code,
        r.node_id.0,
        r.host.as_str(),
        r.port
    ))
}

/// A new member of a fresh group: it leads generation 1 alone.
pub fn join_group(env: &mut Env, v: i16) -> R {
    let group = env.fresh("join");
    let node = env.coordinator(&group, 0);
    let r = join(env, node, &group, v)?;
    Ok(format!(
        "error {} generation {} protocol {:?} leads {} members {}",
        r.error_code,
        r.generation_id,
        r.protocol_name.as_ref().map(|p| p.to_string()),
        r.leader == r.member_id,
        r.members.len()
    ))
}

/// The fixture member syncs again in its stable generation: it gets its assignment back.
pub fn sync_group(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let node = env.coordinator(&f.group, 0);
    let req = sync_request(env, v, &f.group, &f.member, f.generation);
    let r = env.call(node, v, &req)?;
    Ok(format!(
        "error {} same assignment {}",
        r.error_code,
        r.assignment == f.assignment
    ))
}

/// The fixture member's heartbeat, and an unknown member's (UNKNOWN_MEMBER_ID).
pub fn heartbeat(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let node = env.coordinator(&f.group, 0);
    let mut codes = Vec::new();
    for member in [f.member.as_str(), "no-such-member"] {
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(s(&f.group)))
            .with_generation_id(f.generation)
            .with_member_id(s(member));
        codes.push(env.call(node, v, &req)?.error_code);
    }
    Ok(format!("errors (member, stranger) {codes:?}"))
}

/// A fresh group's only member leaves; its error is the top-level one before v3.
pub fn leave_group(env: &mut Env, v: i16) -> R {
    let group = env.fresh("leave");
    let node = env.coordinator(&group, 0);
    let j = join(env, node, &group, JOIN_V)?;
    let mut req = LeaveGroupRequest::default().with_group_id(GroupId(s(&group)));
    if v >= 3 {
        req.members = vec![
            leave_group_request::MemberIdentity::default().with_member_id(j.member_id.clone())
        ];
    } else {
        req.member_id = j.member_id.clone();
    }
    let r = env.call(node, v, &req)?;
    let codes: Vec<i16> = std::iter::once(r.error_code)
        .chain(r.members.iter().map(|m| m.error_code))
        .filter(|&c| c != 0)
        .collect();
    let left = r.members.iter().all(|m| m.member_id == j.member_id);
    Ok(format!(
        "join error {} leave errors {codes:?} the member answered {left}",
        j.error_code
    ))
}

/// The fixture member commits the same offsets again.
pub fn offset_commit(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let node = env.coordinator(&f.group, 0);
    let r = commit(env, node, v, &f.group, &f.member, f.generation)?;
    // The answer names the topic as the request did: by id from v10, by name before.
    let ours = r.topics.iter().all(|t| match v >= 10 {
        true => t.topic_id == f.data_id,
        false => t.name.as_str() == f.data,
    });
    Ok(format!(
        "ours {ours} (partition, error) {:?}",
        partition_codes!(r.topics)
    ))
}

pub fn offset_fetch(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let node = env.coordinator(&f.group, 0);
    let partitions: Vec<i32> = (0..DATA_PARTITIONS).collect();
    let mut req = OffsetFetchRequest::default();
    if v >= 8 {
        req.groups = vec![offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s(&f.group)))
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopics::default()
                    .with_name(tn(&f.data))
                    .with_topic_id(f.data_id)
                    .with_partition_indexes(partitions),
            ]))];
    } else {
        req.group_id = GroupId(s(&f.group));
        req.topics = Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(tn(&f.data))
                .with_partition_indexes(partitions),
        ]);
    }
    let r = env.call(node, v, &req)?;
    let fetched = |i: i32, offset: i64, metadata: &Option<StrBytes>, error: i16| {
        let metadata = metadata.as_ref().map(|m| m.to_string());
        format!("p{i} {offset} {metadata:?} error {error}")
    };
    // The answer names the topic as the request did: by id from v10, by name before.
    let ours = match v {
        10.. => r
            .groups
            .iter()
            .flat_map(|g| &g.topics)
            .all(|t| t.topic_id == f.data_id),
        8..=9 => r
            .groups
            .iter()
            .flat_map(|g| &g.topics)
            .all(|t| t.name.as_str() == f.data),
        _ => r.topics.iter().all(|t| t.name.as_str() == f.data),
    };
    let mut out: Vec<String> = if v >= 8 {
        r.groups
            .iter()
            .flat_map(|g| g.topics.iter().flat_map(|t| t.partitions.iter()))
            .map(|p| {
                fetched(
                    p.partition_index,
                    p.committed_offset,
                    &p.metadata,
                    p.error_code,
                )
            })
            .collect()
    } else {
        r.topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| {
                fetched(
                    p.partition_index,
                    p.committed_offset,
                    &p.metadata,
                    p.error_code,
                )
            })
            .collect()
    };
    out.sort();
    Ok(format!("ours {ours} {}", out.join("; ")))
}

/// Offsets committed by an admin (no member) to a fresh group, deleted for one partition.
pub fn offset_delete(env: &mut Env, v: i16) -> R {
    let group = env.fresh("offsets");
    let node = env.coordinator(&group, 0);
    commit(env, node, COMMIT_V, &group, "", -1)?;
    let req = OffsetDeleteRequest::default()
        .with_group_id(GroupId(s(&group)))
        .with_topics(vec![
            offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(tn(&env.fix.data))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default()
                        .with_partition_index(0),
                ]),
        ]);
    let r = env.call(node, v, &req)?;
    let codes = partition_codes!(r.topics);
    Ok(format!(
        "error {} (partition, error) {codes:?}",
        r.error_code
    ))
}

/// The fixture group, and one that does not exist (asked of its own coordinator): Dead
/// without error before v6, GROUP_ID_NOT_FOUND from v6 (KIP-1043): both mean "absent".
pub fn describe_groups(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let missing = env.fresh("nogroup");
    let mut out = Vec::new();
    for group in [&f.group, &missing] {
        let node = env.coordinator(group, 0);
        let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
        let r = env.call(node, v, &req)?;
        out.extend(r.groups.iter().map(|g| describe_meaning(&f, &missing, g)));
    }
    Ok(out.join("; "))
}

fn describe_meaning(
    f: &Fixture,
    missing: &str,
    g: &describe_groups_response::DescribedGroup,
) -> String {
    if g.group_id.0.as_str() == missing {
        let absent = g.error_code == 69 || (g.error_code == 0 && g.group_state.as_str() == "Dead");
        return format!(
            "missing absent {absent} (error {})",
            if absent { 0 } else { g.error_code }
        );
    }
    let members: Vec<String> = g
        .members
        .iter()
        .map(|m| {
            format!(
                "{} {} {} same assignment {}",
                m.member_id.as_str() == f.member,
                m.client_id.as_str(),
                m.client_host.as_str(),
                m.member_assignment == f.assignment
            )
        })
        .collect();
    format!(
        "error {} {} {} {} {members:?}",
        g.error_code,
        g.group_state.as_str(),
        g.protocol_type.as_str(),
        g.protocol_data.as_str()
    )
}

pub fn list_groups(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let node = env.coordinator(&f.group, 0);
    let r = env.call(node, v, &ListGroupsRequest::default())?;
    let ours: Vec<String> = r
        .groups
        .iter()
        .filter(|g| g.group_id.0.as_str() == f.group)
        .map(|g| format!("{} {}", g.group_id.as_str(), g.protocol_type.as_str()))
        .collect();
    Ok(format!("error {} {ours:?}", r.error_code))
}

/// A fresh group with only committed offsets is deleted; the fixture group has a member
/// (NON_EMPTY_GROUP).
pub fn delete_groups(env: &mut Env, v: i16) -> R {
    let f = env.fix.clone();
    let fresh = env.fresh("delete");
    let fresh_node = env.coordinator(&fresh, 0);
    commit(env, fresh_node, COMMIT_V, &fresh, "", -1)?;
    let mut out = Vec::new();
    for (group, what) in [(&fresh, "fresh"), (&f.group, "fixture")] {
        let node = env.coordinator(group, 0);
        let r = env.call(
            node,
            v,
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(group))]),
        )?;
        // v3's error message: null for a classic group, whatever the code (Kafka sets it
        // only for streams groups' topology errors).
        if let Some(m) = r.results.iter().find_map(|g| g.error_message.as_ref()) {
            return Err(format!("DeleteGroups v{v} {what}: error message {m:?}"));
        }
        out.extend(
            r.results
                .iter()
                .map(|g| format!("{what} error {}", g.error_code)),
        );
    }
    Ok(out.join("; "))
}

/// A new member of a fresh KIP-848 group gets an id and an epoch.
pub fn consumer_group_heartbeat(env: &mut Env, v: i16) -> R {
    let group = env.fresh("cg");
    let node = env.coordinator(&group, 0);
    let r = consumer_heartbeat(env, node, &group, v)?;
    Ok(format!(
        "error {} member id {} epoch {} interval {}",
        r.error_code,
        r.member_id.as_ref().is_some_and(|m| !m.is_empty()),
        r.member_epoch,
        r.heartbeat_interval_ms
    ))
}

pub fn consumer_group_describe(env: &mut Env, v: i16) -> R {
    let cg = env.fix.cg.clone();
    let node = env.coordinator(&cg, 0);
    let r = env.call(
        node,
        v,
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(&cg))]),
    )?;
    let out: Vec<String> = r
        .groups
        .iter()
        .map(|g| {
            let subs: Vec<Vec<String>> = g
                .members
                .iter()
                .map(|m| {
                    m.subscribed_topic_names
                        .iter()
                        .map(|t| t.0.to_string())
                        .collect()
                })
                .collect();
            format!(
                "error {} {} epoch {} subscriptions {subs:?}",
                g.error_code,
                g.group_state.as_str(),
                g.group_epoch
            )
        })
        .collect();
    Ok(out.join("; "))
}
