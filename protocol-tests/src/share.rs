//! Share group requests (KIP-932) as a share consumer sends them, built in one place for the
//! raw-wire tests (`tests/share_wire.rs`) and the live page's share member (`bin/live_share.rs`).

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// (first offset, last offset, acknowledge type) of one acknowledgement batch.
pub type Ack = (i64, i64, i8);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A ShareGroupHeartbeat; the subscription when `topic` is given.
pub fn heartbeat_request(
    group: &str,
    member: &str,
    epoch: i32,
    topic: Option<&str>,
) -> ShareGroupHeartbeatRequest {
    ShareGroupHeartbeatRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names(topic.map(|t| vec![s(t).into()]))
}

/// A ShareFetch of partition 0 of `topic_id` at share session epoch `epoch`, with `acks`
/// piggybacked: up to 100 records, waiting up to `max_wait_ms`.
pub fn fetch_request(
    group: &str,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &[Ack],
    max_wait_ms: i32,
) -> ShareFetchRequest {
    use kafka_protocol::messages::share_fetch_request::*;
    ShareFetchRequest::default()
        .with_group_id(Some(s(group).into()))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(100)
        .with_batch_size(100)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(
                    acks.iter()
                        .map(|&(a, b, t)| {
                            AcknowledgementBatch::default()
                                .with_first_offset(a)
                                .with_last_offset(b)
                                .with_acknowledge_types(vec![t])
                        })
                        .collect(),
                )])])
}

/// A ShareAcknowledge of partition 0 of `topic_id` at share session epoch `epoch`, with v2's
/// `IsRenewAck`.
pub fn acknowledge_request(
    is_renew_ack: bool,
    group: &str,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &[Ack],
) -> ShareAcknowledgeRequest {
    use kafka_protocol::messages::share_acknowledge_request::*;
    ShareAcknowledgeRequest::default()
        .with_is_renew_ack(is_renew_ack)
        .with_group_id(Some(s(group).into()))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![AcknowledgeTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![AcknowledgePartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(
                    acks.iter()
                        .map(|&(a, b, t)| {
                            AcknowledgementBatch::default()
                                .with_first_offset(a)
                                .with_last_offset(b)
                                .with_acknowledge_types(vec![t])
                        })
                        .collect(),
                )])])
}
