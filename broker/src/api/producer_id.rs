//! InitProducerId: producer ids and epochs for idempotent producers.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};

use super::RequestContext;
use crate::server::Broker;

/// COORDINATOR_NOT_AVAILABLE: returned for transactional producers until the transaction
/// coordinator exists.
const COORDINATOR_NOT_AVAILABLE: i16 = 15;

/// Hands out a fresh producer id with epoch 0. An idempotent producer that asks to bump its
/// epoch (it sends its old id and epoch) gets a new id instead, as Kafka does for producers
/// without a transactional id.
pub async fn handle(
    broker: &Broker,
    _ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let resp = InitProducerIdResponse::default()
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    if req.transactional_id.as_ref().is_some_and(|t| !t.is_empty()) {
        return resp.with_error_code(COORDINATOR_NOT_AVAILABLE);
    }
    match broker.replicas.next_producer_id().await {
        Ok(id) => resp.with_producer_id(id.into()).with_producer_epoch(0),
        Err(code) => {
            tracing::error!(code, "could not allocate a producer id");
            resp.with_error_code(code)
        }
    }
}
