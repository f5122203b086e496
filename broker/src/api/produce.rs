//! Produce: validate, deduplicate and append each partition's batch, then acknowledge
//! according to `acks`.

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use uuid::Uuid;

use super::{sb, Outcome, RequestContext};
use crate::cluster::replica_manager::now_ms;
use crate::log::batch::BatchHeader;
use crate::metadata::validate_topic_name;
use crate::net::codec::{encode_response, CodecError};
use crate::server::Broker;

/// Kafka error codes used here.
mod code {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const INVALID_TOPIC: i16 = 17;
    pub const INVALID_REQUIRED_ACKS: i16 = 21;
    pub const INVALID_RECORD: i16 = 87;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
}

fn partition_error(index: i32, error: i16, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(sb))
}

/// Handles one Produce request.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ProduceRequest,
) -> Result<Outcome, CodecError> {
    let acks = req.acks;
    let mut any_error = None;
    let mut topics = Vec::with_capacity(req.topic_data.len());
    let now = now_ms();
    // One timeout for the whole request, as Kafka's DelayedProduce has.
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    for td in req.topic_data {
        // From v13 topics are named by id only.
        let (name, id) = if ctx.api_version >= 13 {
            match broker.replicas.topic_name_by_id(td.topic_id) {
                Some(n) => (n, td.topic_id),
                None => (String::new(), td.topic_id),
            }
        } else {
            (td.name.to_string(), Uuid::nil())
        };
        let mut partitions = Vec::with_capacity(td.partition_data.len());
        for pd in td.partition_data {
            let resp = if !matches!(acks, -1..=1) {
                partition_error(pd.index, code::INVALID_REQUIRED_ACKS, None)
            } else if name.is_empty() && ctx.api_version >= 13 {
                partition_error(pd.index, code::UNKNOWN_TOPIC_ID, None)
            } else if let Err(msg) = validate_topic_name(&name) {
                partition_error(pd.index, code::INVALID_TOPIC, Some(msg))
            } else if name == crate::group::store::OFFSETS_TOPIC {
                // Internal topics are written by their coordinator only, as in Kafka.
                partition_error(
                    pd.index,
                    code::INVALID_TOPIC,
                    Some(format!("cannot append to internal topic {name}")),
                )
            } else if let Some(part) = broker.replicas.partition(&name, pd.index) {
                match pd.records {
                    None => partition_error(
                        pd.index,
                        code::INVALID_RECORD,
                        Some("records are null".into()),
                    ),
                    // zstd arrived with Produce v7; older requests may not carry it.
                    Some(records)
                        if ctx.api_version < 7
                            && BatchHeader::new(&records).is_some_and(|h| h.codec_id() == 4) =>
                    {
                        partition_error(
                            pd.index,
                            code::UNSUPPORTED_COMPRESSION_TYPE,
                            Some("zstd needs Produce v7 or later".into()),
                        )
                    }
                    Some(records) => {
                        match append_and_wait(&broker.faults, &part, records, acks, now, deadline)
                            .await
                        {
                            Ok(info) => PartitionProduceResponse::default()
                                .with_index(pd.index)
                                .with_error_code(code::NONE)
                                .with_base_offset(info.first_offset)
                                .with_log_append_time_ms(info.log_append_time_ms)
                                .with_log_start_offset(info.log_start_offset),
                            Err(e) => {
                                tracing::debug!(topic = %name, partition = pd.index, error = %e, "produce refused");
                                partition_error(pd.index, e.error_code(), Some(e.to_string()))
                            }
                        }
                    }
                }
            } else {
                partition_error(pd.index, code::UNKNOWN_TOPIC_OR_PARTITION, None)
            };
            if resp.error_code != code::NONE {
                any_error = Some(resp.error_code);
            }
            partitions.push(resp);
        }
        topics.push(
            TopicProduceResponse::default()
                .with_name(sb(name).into())
                .with_topic_id(id)
                .with_partition_responses(partitions),
        );
    }
    if acks == 0 {
        // acks=0 clients read no responses; an error can only be signalled by closing.
        return Ok(match any_error {
            Some(code) => Outcome::Close(format!("acks=0 produce failed with error {code}")),
            None => Outcome::NoResponse,
        });
    }
    let resp = ProduceResponse::default().with_responses(topics);
    Ok(Outcome::Respond(encode_response(
        ctx.api_key,
        ctx.api_version,
        ctx.correlation_id,
        &resp,
    )?))
}

/// A Produce answer with `code` for every partition, for fault injection.
pub fn error_response(req: &ProduceRequest, code: i16) -> ProduceResponse {
    let topics = req
        .topic_data
        .iter()
        .map(|td| {
            let parts = td
                .partition_data
                .iter()
                .map(|pd| partition_error(pd.index, code, None))
                .collect();
            TopicProduceResponse::default()
                .with_name(td.name.clone())
                .with_topic_id(td.topic_id)
                .with_partition_responses(parts)
        })
        .collect();
    ProduceResponse::default().with_responses(topics)
}

/// Appends, then for acks=all waits until the high watermark passes the batch (a retried
/// duplicate waits too: its original may not be committed yet).
async fn append_and_wait(
    faults: &crate::fault::FaultEngine,
    part: &std::sync::Arc<crate::cluster::partition::Partition>,
    records: bytes::Bytes,
    acks: i16,
    now: i64,
    deadline: tokio::time::Instant,
) -> Result<crate::log::LogAppendInfo, crate::cluster::partition::PartitionError> {
    use crate::fault::CrashPoint;
    let info = part.append_records_to_leader(records, acks, now)?;
    faults.crash_point(CrashPoint::AfterLeaderAppend, &part.topic, part.index);
    if acks == -1 {
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        part.wait_for_high_watermark(info.last_offset, remaining)
            .await?;
    }
    faults.crash_point(
        CrashPoint::AfterReplicationBeforeAck,
        &part.topic,
        part.index,
    );
    Ok(info)
}
