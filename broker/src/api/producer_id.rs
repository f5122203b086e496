//! InitProducerId: producer ids and epochs for idempotent and transactional producers.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};
use kafka_protocol::ResponseError;

use super::auth_helper::{authorize, authorize_by_resource_type, authorize_cluster};
use super::RequestContext;
use crate::broker::Broker;
use crate::security::acl::{AclOperation, ResourceType};

/// InitProducerId knows PRODUCER_FENCED from v4; older clients get INVALID_PRODUCER_EPOCH.
const PRODUCER_FENCED_FROM_V4: i16 = 4;

/// Kafka's `handleInitProducerIdRequest` checks: WRITE on the transactional id; without
/// one, IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
fn denied(broker: &Broker, ctx: &RequestContext, req: &InitProducerIdRequest) -> Option<i16> {
    match req.transactional_id.as_ref() {
        Some(id) => (!authorize(
            broker,
            ctx,
            AclOperation::Write,
            ResourceType::TransactionalId,
            id,
        ))
        .then_some(ResponseError::TransactionalIdAuthorizationFailed.code()),
        None => (!authorize_cluster(broker, ctx, AclOperation::IdempotentWrite)
            && !authorize_by_resource_type(broker, ctx, AclOperation::Write, ResourceType::Topic))
        .then_some(ResponseError::ClusterAuthorizationFailed.code()),
    }
}

/// Without a transactional id: a fresh producer id with epoch 0 (an idempotent producer
/// that asks to bump its epoch gets a new id instead, as Kafka does). With one: the
/// transaction coordinator's answer (Kafka's `handleInitProducerIdRequest`).
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    if let Some(code) = denied(broker, ctx, &req) {
        return resp.with_error_code(code);
    }
    if let Some(id) = req.transactional_id.as_ref() {
        // KIP-360: both of producer id and epoch, or neither.
        let expected = match (req.producer_id.0, req.producer_epoch) {
            (-1, -1) => None,
            (-1, _) | (_, -1) => {
                return resp.with_error_code(ResponseError::InvalidRequest.code());
            }
            (pid, epoch) => Some((pid, epoch)),
        };
        return match broker
            .txn
            .init_producer_id(id, req.transaction_timeout_ms, expected)
            .await
        {
            Ok((pid, epoch)) => resp.with_producer_id(pid.into()).with_producer_epoch(epoch),
            Err(e) => {
                resp.with_error_code(e.code_for_version(ctx.api_version, PRODUCER_FENCED_FROM_V4))
            }
        };
    }
    match broker.replicas.next_producer_id().await {
        Ok(id) => resp.with_producer_id(id.into()).with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = ?e, "could not allocate a producer id");
            resp.with_error_code(e.code())
        }
    }
}
