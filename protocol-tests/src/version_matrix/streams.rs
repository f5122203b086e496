//! Streams group cases (KIP-1071): a fresh streams group per case, one member whose topology
//! has one stateless subtopology reading the data topic.

use kafka_protocol::messages::streams_group_heartbeat_request::{Subtopology, Topology};
use kafka_protocol::messages::*;

use super::env::{s, tn, Env};
use super::Meaning;

type R = Result<Meaning, String>;

/// Joins a fresh streams group at version `v`; returns (group, member id, answer).
fn join(env: &mut Env, v: i16) -> Result<(String, String, StreamsGroupHeartbeatResponse), String> {
    let group = env.fresh("stg");
    let member = env.fresh_uuid().to_string();
    let node = env.coordinator(&group, 0);
    let topology =
        Topology::default()
            .with_epoch(0)
            .with_subtopologies(vec![Subtopology::default()
                .with_subtopology_id(s("0"))
                .with_source_topics(vec![tn(&env.fix.data)])]);
    let req = StreamsGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(&group)))
        .with_member_id(s(&member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_process_id(Some(s(&member)))
        .with_topology(Some(topology))
        .with_active_tasks(Some(vec![]))
        .with_standby_tasks(Some(vec![]))
        .with_warmup_tasks(Some(vec![]));
    let r = env.retry_coordinator(
        &format!("StreamsGroupHeartbeat {group}"),
        |env| env.call(node, v, &req),
        |r| r.error_code,
    )?;
    Ok((group, member, r))
}

pub fn streams_group_heartbeat(env: &mut Env, v: i16) -> R {
    let (_, member, r) = join(env, v)?;
    Ok(format!(
        "error {} own member id {} epoch {} interval {}",
        r.error_code,
        r.member_id.as_str() == member,
        r.member_epoch,
        r.heartbeat_interval_ms
    ))
}

pub fn streams_group_describe(env: &mut Env, v: i16) -> R {
    let (group, _, _) = join(env, 0)?;
    let node = env.coordinator(&group, 0);
    let r = env.call(
        node,
        v,
        &StreamsGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(&group))]),
    )?;
    let g = r.groups.first().ok_or("no group in the answer")?;
    let sources: Vec<String> = g
        .topology
        .iter()
        .flat_map(|t| t.subtopologies.iter().flatten())
        .flat_map(|s| s.source_topics.iter().map(|t| t.to_string()))
        .collect();
    Ok(format!(
        "error {} epoch {} members {} sources {sources:?}",
        g.error_code,
        g.group_epoch,
        g.members.len(),
    ))
}
