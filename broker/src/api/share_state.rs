//! The share coordinator's state APIs (KIP-932, API keys 83-87): InitializeShareGroupState,
//! ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and
//! ReadShareGroupStateSummary, sent by partition leaders' persisters
//! ([`crate::share::persister`]) to the share coordinator ([`crate::share::coordinator`]).
//!
//! WriteShareGroupState and ReadShareGroupStateSummary v1 (KIP-1226) carry the delivery
//! complete count, from which DescribeShareGroupOffsets v1 derives the lag.
//!
//! Internal APIs: each needs CLUSTER_ACTION on the cluster, as Kafka's `KafkaApis` checks;
//! without it every partition is answered CLUSTER_AUTHORIZATION_FAILED. Each partition is
//! answered on its own (Kafka's `ShareCoordinatorService` splits a request by key).

use kafka_protocol::messages::{
    delete_share_group_state_response as delete_resp,
    initialize_share_group_state_response as init_resp,
    read_share_group_state_response as read_resp,
    read_share_group_state_summary_response as summary_resp,
    write_share_group_state_response as write_resp, DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse, InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use kafka_protocol::ResponseError;

use super::auth_helper::authorize_cluster;
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::security::acl::AclOperation;
use crate::share::coordinator::{WriteState, UNINITIALIZED_START_OFFSET};
use crate::share::records::StateBatch;
use crate::share::SharePartitionKey;

/// CLUSTER_AUTHORIZATION_FAILED unless the caller may act as a broker.
fn check(broker: &Broker, ctx: &RequestContext) -> Result<(), ResponseError> {
    if authorize_cluster(broker, ctx, AclOperation::ClusterAction) {
        Ok(())
    } else {
        Err(ResponseError::ClusterAuthorizationFailed)
    }
}

fn message(e: ResponseError) -> Option<kafka_protocol::protocol::StrBytes> {
    Some(sb(e.to_string()))
}

/// InitializeShareGroupState.
pub async fn handle_initialize(
    broker: &Broker,
    ctx: &RequestContext,
    req: InitializeShareGroupStateRequest,
) -> InitializeShareGroupStateResponse {
    let allowed = check(broker, ctx);
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let key: SharePartitionKey = (req.group_id.to_string(), t.topic_id, p.partition);
            let r = match allowed {
                Ok(()) => {
                    broker
                        .share_coordinator
                        .initialize(&key, p.state_epoch, p.start_offset)
                        .await
                }
                Err(e) => Err(e),
            };
            let mut out = init_resp::PartitionResult::default().with_partition(p.partition);
            if let Err(e) = r {
                out = out.with_error_code(e.code()).with_error_message(message(e));
            }
            partitions.push(out);
        }
        results.push(
            init_resp::InitializeStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    InitializeShareGroupStateResponse::default().with_results(results)
}

/// ReadShareGroupState.
pub async fn handle_read(
    broker: &Broker,
    ctx: &RequestContext,
    req: ReadShareGroupStateRequest,
) -> ReadShareGroupStateResponse {
    let allowed = check(broker, ctx);
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let key: SharePartitionKey = (req.group_id.to_string(), t.topic_id, p.partition);
            let r = allowed.and_then(|()| broker.share_coordinator.read(&key, p.leader_epoch));
            let out = read_resp::PartitionResult::default().with_partition(p.partition);
            partitions.push(match r {
                Ok(None) => out.with_start_offset(UNINITIALIZED_START_OFFSET),
                Ok(Some(s)) => out
                    .with_state_epoch(s.state_epoch)
                    .with_start_offset(s.start_offset)
                    .with_state_batches(
                        s.batches
                            .iter()
                            .map(|b| {
                                read_resp::StateBatch::default()
                                    .with_first_offset(b.first_offset)
                                    .with_last_offset(b.last_offset)
                                    .with_delivery_state(b.delivery_state)
                                    .with_delivery_count(b.delivery_count)
                            })
                            .collect(),
                    ),
                Err(e) => out
                    .with_start_offset(UNINITIALIZED_START_OFFSET)
                    .with_error_code(e.code())
                    .with_error_message(message(e)),
            });
        }
        results.push(
            read_resp::ReadStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    ReadShareGroupStateResponse::default().with_results(results)
}

/// WriteShareGroupState.
pub async fn handle_write(
    broker: &Broker,
    ctx: &RequestContext,
    req: WriteShareGroupStateRequest,
) -> WriteShareGroupStateResponse {
    let allowed = check(broker, ctx);
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let key: SharePartitionKey = (req.group_id.to_string(), t.topic_id, p.partition);
            let w = WriteState {
                state_epoch: p.state_epoch,
                leader_epoch: p.leader_epoch,
                start_offset: p.start_offset,
                // -1 from a v0 request (the codec's default).
                delivery_complete_count: p.delivery_complete_count,
                batches: p
                    .state_batches
                    .iter()
                    .map(|b| StateBatch {
                        first_offset: b.first_offset,
                        last_offset: b.last_offset,
                        delivery_state: b.delivery_state,
                        delivery_count: b.delivery_count,
                    })
                    .collect(),
            };
            let r = match allowed {
                Ok(()) => broker.share_coordinator.write(&key, w).await,
                Err(e) => Err(e),
            };
            let mut out = write_resp::PartitionResult::default().with_partition(p.partition);
            if let Err(e) = r {
                out = out.with_error_code(e.code()).with_error_message(message(e));
            }
            partitions.push(out);
        }
        results.push(
            write_resp::WriteStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    WriteShareGroupStateResponse::default().with_results(results)
}

/// DeleteShareGroupState.
pub async fn handle_delete(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteShareGroupStateRequest,
) -> DeleteShareGroupStateResponse {
    let allowed = check(broker, ctx);
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let key: SharePartitionKey = (req.group_id.to_string(), t.topic_id, p.partition);
            let r = match allowed {
                Ok(()) => broker.share_coordinator.delete(&key).await,
                Err(e) => Err(e),
            };
            let mut out = delete_resp::PartitionResult::default().with_partition(p.partition);
            if let Err(e) = r {
                out = out.with_error_code(e.code()).with_error_message(message(e));
            }
            partitions.push(out);
        }
        results.push(
            delete_resp::DeleteStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    DeleteShareGroupStateResponse::default().with_results(results)
}

/// ReadShareGroupStateSummary.
pub async fn handle_read_summary(
    broker: &Broker,
    ctx: &RequestContext,
    req: ReadShareGroupStateSummaryRequest,
) -> ReadShareGroupStateSummaryResponse {
    let allowed = check(broker, ctx);
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let key: SharePartitionKey = (req.group_id.to_string(), t.topic_id, p.partition);
            let r = allowed.and_then(|()| broker.share_coordinator.read_summary(&key));
            let out = summary_resp::PartitionResult::default().with_partition(p.partition);
            partitions.push(match r {
                Ok(None) => out.with_start_offset(UNINITIALIZED_START_OFFSET),
                Ok(Some(s)) => out
                    .with_state_epoch(s.state_epoch)
                    .with_leader_epoch(s.leader_epoch)
                    .with_start_offset(s.start_offset)
                    // Dropped at v0 (an ignorable field).
                    .with_delivery_complete_count(s.delivery_complete_count),
                Err(e) => out
                    .with_start_offset(UNINITIALIZED_START_OFFSET)
                    .with_error_code(e.code())
                    .with_error_message(message(e)),
            });
        }
        results.push(
            summary_resp::ReadStateSummaryResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    ReadShareGroupStateSummaryResponse::default().with_results(results)
}
