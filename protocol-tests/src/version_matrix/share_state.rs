//! The share coordinator's state APIs (83-87): each case initializes the state of a fresh share
//! group's partition 0 of the data topic at its share coordinator (FindCoordinator key type 2,
//! key `group:topicId:partition`), then reads, writes, summarizes or deletes it.

use base64::Engine;
use kafka_protocol::messages::*;

use super::env::{s, Env, NodeId};
use super::Meaning;

type R = Result<Meaning, String>;

/// A fresh group, its share coordinator, and the InitializeShareGroupState answer's code
/// (start offset 0, state epoch 0), sent at `v`.
fn initialized(env: &mut Env, v: i16) -> Result<(String, NodeId, i16), String> {
    use initialize_share_group_state_request as init;
    let group = env.fresh("ss");
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(env.fix.data_id.as_bytes());
    let node = share_coordinator(env, &format!("{group}:{id}:0"))?;
    let req = InitializeShareGroupStateRequest::default()
        .with_group_id(s(&group))
        .with_topics(vec![init::InitializeStateData::default()
            .with_topic_id(env.fix.data_id)
            .with_partitions(vec![init::PartitionData::default()
                .with_partition(0)
                .with_state_epoch(0)
                .with_start_offset(0)])]);
    let r = env.retry_coordinator(
        &format!("InitializeShareGroupState {group}"),
        |env| env.call(node, v, &req),
        |r| r.results[0].partitions[0].error_code,
    )?;
    Ok((group, node, r.results[0].partitions[0].error_code))
}

/// The coordinator of a share-partition key: FindCoordinator v6 (key type 2 exists from v6),
/// which names it among its coordinators.
fn share_coordinator(env: &mut Env, key: &str) -> Result<NodeId, String> {
    let req = FindCoordinatorRequest::default()
        .with_key_type(2)
        .with_coordinator_keys(vec![s(key)]);
    let any = env.any();
    env.retry_coordinator(
        &format!("FindCoordinator {key}"),
        |env| env.call(any, 6, &req),
        |r| r.coordinators.first().map_or(-1, |c| c.error_code),
    )
    .and_then(|r| match r.coordinators.first() {
        Some(c) if c.error_code == 0 => Ok(c.node_id.0),
        _ => Err(format!("no share coordinator: {r:?}")),
    })
}

pub fn initialize_share_group_state(env: &mut Env, v: i16) -> R {
    let (_, _, code) = initialized(env, v)?;
    Ok(format!("error {code}"))
}

/// (error, start offset, state epoch, batches) of a ReadShareGroupState at `v`.
fn read(env: &mut Env, node: NodeId, group: &str, v: i16) -> Result<String, String> {
    use read_share_group_state_request as read;
    let req = ReadShareGroupStateRequest::default()
        .with_group_id(s(group))
        .with_topics(vec![read::ReadStateData::default()
            .with_topic_id(env.fix.data_id)
            .with_partitions(vec![read::PartitionData::default()
                .with_partition(0)
                .with_leader_epoch(0)])]);
    let r = env.call(node, v, &req)?;
    let p = &r.results[0].partitions[0];
    let batches: Vec<(i64, i64, i8, i16)> = p
        .state_batches
        .iter()
        .map(|b| {
            (
                b.first_offset,
                b.last_offset,
                b.delivery_state,
                b.delivery_count,
            )
        })
        .collect();
    Ok(format!(
        "error {} start {} state epoch {} batches {batches:?}",
        p.error_code, p.start_offset, p.state_epoch
    ))
}

pub fn read_share_group_state(env: &mut Env, v: i16) -> R {
    let (group, node, _) = initialized(env, 0)?;
    read(env, node, &group, v)
}

pub fn write_share_group_state(env: &mut Env, v: i16) -> R {
    use write_share_group_state_request as write;
    let (group, node, _) = initialized(env, 0)?;
    let req = WriteShareGroupStateRequest::default()
        .with_group_id(s(&group))
        .with_topics(vec![write::WriteStateData::default()
            .with_topic_id(env.fix.data_id)
            .with_partitions(vec![write::PartitionData::default()
                .with_partition(0)
                .with_state_epoch(0)
                .with_leader_epoch(0)
                .with_start_offset(1)
                .with_delivery_complete_count(1)
                .with_state_batches(vec![write::StateBatch::default()
                    .with_first_offset(1)
                    .with_last_offset(2)
                    .with_delivery_state(0)
                    .with_delivery_count(1)])])]);
    let r = env.call(node, v, &req)?;
    let code = r.results[0].partitions[0].error_code;
    // v1's DeliveryCompleteCount (KIP-1226) is stored: the summary answers it (v0 carries
    // none, -1).
    let count = summary(env, node, &group, 1)?.delivery_complete_count;
    if count != if v >= 1 { 1 } else { -1 } {
        return Err(format!("v{v} write left delivery complete count {count}"));
    }
    Ok(format!(
        "error {code}, then {}",
        read(env, node, &group, 0)?
    ))
}

pub fn delete_share_group_state(env: &mut Env, v: i16) -> R {
    use delete_share_group_state_request as delete;
    let (group, node, _) = initialized(env, 0)?;
    let req = DeleteShareGroupStateRequest::default()
        .with_group_id(s(&group))
        .with_topics(vec![delete::DeleteStateData::default()
            .with_topic_id(env.fix.data_id)
            .with_partitions(vec![
                delete::PartitionData::default().with_partition(0)
            ])]);
    let r = env.call(node, v, &req)?;
    let code = r.results[0].partitions[0].error_code;
    Ok(format!(
        "error {code}, then {}",
        read(env, node, &group, 0)?
    ))
}

/// The one partition of a ReadShareGroupStateSummary at `v`.
fn summary(
    env: &mut Env,
    node: NodeId,
    group: &str,
    v: i16,
) -> Result<read_share_group_state_summary_response::PartitionResult, String> {
    use read_share_group_state_summary_request as summary;
    let req = ReadShareGroupStateSummaryRequest::default()
        .with_group_id(s(group))
        .with_topics(vec![summary::ReadStateSummaryData::default()
            .with_topic_id(env.fix.data_id)
            .with_partitions(vec![summary::PartitionData::default()
                .with_partition(0)
                .with_leader_epoch(0)])]);
    let r = env.call(node, v, &req)?;
    r.results
        .first()
        .and_then(|t| t.partitions.first())
        .cloned()
        .ok_or_else(|| format!("no partition in {r:?}"))
}

pub fn read_share_group_state_summary(env: &mut Env, v: i16) -> R {
    let (group, node, _) = initialized(env, 0)?;
    let p = summary(env, node, &group, v)?;
    // v1's DeliveryCompleteCount (KIP-1226): an initialized start has delivered nothing.
    if v >= 1 && p.delivery_complete_count != 0 {
        return Err(format!(
            "v{v} answered delivery complete count {}",
            p.delivery_complete_count
        ));
    }
    Ok(format!(
        "error {} start {} state epoch {}",
        p.error_code, p.start_offset, p.state_epoch
    ))
}
