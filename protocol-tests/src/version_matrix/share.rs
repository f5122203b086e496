//! Share group cases (KIP-932): a fresh share group per case, one member subscribed to the
//! data topic, reading partition 0 from its leader.

use kafka_protocol::messages::*;

use super::env::{s, tn, Env, NodeId};
use super::Meaning;

type R = Result<Meaning, String>;

/// The ShareGroupHeartbeat version every case joins with (Kafka 4.4 serves only v1).
const HEARTBEAT_V: i16 = 1;

/// Joins a fresh share group; returns (group, member id, heartbeat answer).
fn join(env: &mut Env, v: i16) -> Result<(String, String, ShareGroupHeartbeatResponse), String> {
    let group = env.fresh("sg");
    let member = env.fresh_uuid().to_string();
    let node: NodeId = env.coordinator(&group, 0);
    let req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(&group)))
        .with_member_id(s(&member))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![tn(&env.fix.data)]));
    let r = env.retry_coordinator(
        &format!("ShareGroupHeartbeat {group}"),
        |env| env.call(node, v, &req),
        |r| r.error_code,
    )?;
    Ok((group, member, r))
}

pub fn share_group_heartbeat(env: &mut Env, v: i16) -> R {
    let (_, member, r) = join(env, v)?;
    let assigned: usize = r
        .assignment
        .iter()
        .flat_map(|a| &a.topic_partitions)
        .map(|t| t.partitions.len())
        .sum();
    Ok(format!(
        "error {} own member id {} epoch {} assigned {assigned}",
        r.error_code,
        r.member_id.as_deref() == Some(member.as_str()),
        r.member_epoch
    ))
}

pub fn share_group_describe(env: &mut Env, v: i16) -> R {
    let (group, _, _) = join(env, HEARTBEAT_V)?;
    let node = env.coordinator(&group, 0);
    let r = env.call(
        node,
        v,
        &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(&group))]),
    )?;
    let g = r.groups.first().ok_or("no group in the answer")?;
    Ok(format!(
        "error {} {} epoch {} assignor {} members {}",
        g.error_code,
        g.group_state.as_str(),
        g.group_epoch,
        g.assignor_name.as_str(),
        g.members.len()
    ))
}

/// Opens a share session on partition 0 of the data topic (epoch 0, no wait).
fn open_session(
    env: &mut Env,
    v: i16,
) -> Result<(NodeId, String, String, ShareFetchResponse), String> {
    let (group, member, _) = join(env, HEARTBEAT_V)?;
    let data = env.fix.data.clone();
    let leader = env.leader_of(&data, 0);
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s(&group))))
        .with_member_id(Some(s(&member)))
        .with_share_session_epoch(0)
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(100)
        .with_batch_size(100)
        .with_topics(vec![share_fetch_request::FetchTopic::default()
            .with_topic_id(env.fix.data_id)
            .with_partitions(vec![
                share_fetch_request::FetchPartition::default().with_partition_index(0),
            ])]);
    let r = env.call(leader, v, &req)?;
    Ok((leader, group, member, r))
}

pub fn share_fetch(env: &mut Env, v: i16) -> R {
    let (leader, group, member, r) = open_session(env, v)?;
    if v >= 2 {
        // v2's IsRenewAck (KIP-1222): a renewal fetch that asks for records is refused.
        let renew = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(s(&group))))
            .with_member_id(Some(s(&member)))
            .with_share_session_epoch(1)
            .with_max_records(100)
            .with_is_renew_ack(true);
        let refused = env.call(leader, v, &renew)?;
        if refused.error_code != 42 {
            return Err(format!(
                "a renewal fetch asking for records got error {}, not INVALID_REQUEST",
                refused.error_code
            ));
        }
    }
    let parts: Vec<String> = r
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| format!("{}:{}", p.partition_index, p.error_code))
        .collect();
    Ok(format!("error {} partitions {parts:?}", r.error_code))
}

pub fn share_acknowledge(env: &mut Env, v: i16) -> R {
    let (leader, group, member, _) = open_session(env, 1)?;
    let req = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s(&group))))
        .with_member_id(Some(s(&member)))
        .with_share_session_epoch(1);
    let r = env.call(leader, v, &req)?;
    if v >= 2 && r.error_code == 0 && r.acquisition_lock_timeout_ms <= 0 {
        return Err(format!(
            "v2 answered lock timeout {}",
            r.acquisition_lock_timeout_ms
        ));
    }
    // Epoch 0 is never valid for ShareAcknowledge.
    let zero = env.call(leader, v, &req.clone().with_share_session_epoch(0))?;
    Ok(format!(
        "error {} epoch 0 error {}",
        r.error_code, zero.error_code
    ))
}

/// AlterShareGroupOffsets of a fresh group (created empty by the alter): partition 0 of the
/// data topic to offset 0, and partition 999 (UNKNOWN_TOPIC_OR_PARTITION). Returns the group.
fn altered(env: &mut Env, v: i16) -> Result<(String, AlterShareGroupOffsetsResponse), String> {
    use alter_share_group_offsets_request::*;
    let group = env.fresh("so");
    let node = env.coordinator(&group, 0);
    let partition = |p: i32| {
        AlterShareGroupOffsetsRequestPartition::default()
            .with_partition_index(p)
            .with_start_offset(0)
    };
    let req = AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(&group)))
        .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
            .with_topic_name(tn(&env.fix.data))
            .with_partitions(vec![partition(0), partition(999)])]);
    let r = env.retry_coordinator(
        &format!("AlterShareGroupOffsets {group}"),
        |env| env.call(node, v, &req),
        |r| r.error_code,
    )?;
    Ok((group, r))
}

pub fn alter_share_group_offsets(env: &mut Env, v: i16) -> R {
    let (_, r) = altered(env, v)?;
    Ok(format!(
        "error {} partitions {:?}",
        r.error_code,
        partition_codes!(r.responses)
    ))
}

pub fn describe_share_group_offsets(env: &mut Env, v: i16) -> R {
    use describe_share_group_offsets_request::*;
    let (group, _) = altered(env, 0)?;
    let node = env.coordinator(&group, 0);
    let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(s(&group)))
            .with_topics(Some(vec![DescribeShareGroupOffsetsRequestTopic::default()
                .with_topic_name(tn(&env.fix.data))
                .with_partitions(vec![0])])),
    ]);
    let r = env.call(node, v, &req)?;
    let g = r.groups.first().ok_or("no group in the answer")?;
    let starts: Vec<(i32, i64, i16)> = g
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| (p.partition_index, p.start_offset, p.error_code))
        .collect();
    // v1's lag (KIP-1226): a share-partition set to start at 0, with nothing delivered, lags
    // by its whole log; v0 has no lag.
    let lags: Vec<i64> = g
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.lag)
        .collect();
    if v >= 1 && lags.iter().any(|&l| l < 0) {
        return Err(format!("v{v} answered lags {lags:?}"));
    }
    Ok(format!("error {} partitions {starts:?}", g.error_code))
}

pub fn delete_share_group_offsets(env: &mut Env, v: i16) -> R {
    use delete_share_group_offsets_request::*;
    let (group, _) = altered(env, 0)?;
    let node = env.coordinator(&group, 0);
    let req = DeleteShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(&group)))
        .with_topics(vec![
            DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(tn(&env.fix.data))
        ]);
    let r = env.call(node, v, &req)?;
    let topics: Vec<i16> = r.responses.iter().map(|t| t.error_code).collect();
    Ok(format!("error {} topics {topics:?}", r.error_code))
}
