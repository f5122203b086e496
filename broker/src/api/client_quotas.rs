//! DescribeClientQuotas and AlterClientQuotas (Kafka's `KafkaApis.handleDescribeClientQuotasRequest`
//! and `ControllerApis.handleAlterClientQuotas`): Describe reads the applied image's quotas
//! through Kafka's filter, Alter goes to the active controller (`ClientQuotaControlManager`)
//! and answers once the change is in this broker's image. Both need the cluster's
//! DESCRIBE_CONFIGS / ALTER_CONFIGS when an authorizer is configured.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as AlterEntityData, EntryData as AlterEntryData,
};
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::ResponseError;

use super::auth_helper::authorize_cluster;
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::controller::client_quota_control::{
    QuotaAlteration, QuotaEntity, QuotaFilter, QuotaValue,
};
use crate::security::acl::AclOperation;

pub async fn handle_describe_client_quotas(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let refused = |code: i16, message: String| {
        DescribeClientQuotasResponse::default()
            .with_error_code(code)
            .with_error_message(Some(sb(message)))
            .with_entries(None)
    };
    if !authorize_cluster(broker, ctx, AclOperation::DescribeConfigs) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return refused(e.code(), e.to_string());
    }
    let components: Vec<(String, i8, Option<String>)> = req
        .components
        .iter()
        .map(|c| {
            let name = c._match.as_ref().map(|m| m.to_string());
            (c.entity_type.to_string(), c.match_type, name)
        })
        .collect();
    let filter = match QuotaFilter::new(&components, req.strict) {
        Ok(f) => f,
        Err((code, message)) => return refused(code, message),
    };
    let image = broker.replicas.image();
    let entries = image
        .client_quotas
        .iter()
        .filter(|(entity, _)| filter.matches(entity))
        .map(|(entity, values)| {
            EntryData::default()
                .with_entity(
                    entity
                        .iter()
                        .map(|(t, n)| {
                            EntityData::default()
                                .with_entity_type(sb(t.clone()))
                                .with_entity_name(n.clone().map(sb))
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .iter()
                        .map(|(k, v)| {
                            ValueData::default()
                                .with_key(sb(k.clone()))
                                .with_value(v.get())
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeClientQuotasResponse::default().with_entries(Some(entries))
}

pub async fn handle_alter_client_quotas(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    // Kafka's `AlterClientQuotasRequest.entries`: an entity is a map of its types, so a type
    // named twice keeps its last name; a removal has no value.
    let alterations: Vec<QuotaAlteration> = req
        .entries
        .iter()
        .map(|e| QuotaAlteration {
            entity: e
                .entity
                .iter()
                .map(|d| {
                    (
                        d.entity_type.to_string(),
                        d.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect(),
            ops: e
                .ops
                .iter()
                .map(|o| {
                    (
                        o.key.to_string(),
                        (!o.remove).then(|| QuotaValue::new(o.value)),
                    )
                })
                .collect(),
        })
        .collect();
    // ALTER_CONFIGS on the cluster; refused, every entry answers the error (Kafka's
    // `AlterClientQuotasRequest.getErrorResponse`, which keeps the request's entries).
    if !authorize_cluster(broker, ctx, AclOperation::AlterConfigs) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return every_entry(&req, e.code(), e.to_string());
    }
    let controller = broker.replicas.controller();
    match controller
        .alter_client_quotas(alterations, req.validate_only)
        .await
    {
        Ok(results) => {
            // Kafka answers once the change is in this broker's image.
            broker.replicas.wait_caught_up().await;
            alter_response(results)
        }
        Err(e) => every_entry(&req, e.code(), e.to_string()),
    }
}

fn request_entity(
    entity: &[kafka_protocol::messages::alter_client_quotas_request::EntityData],
) -> Vec<AlterEntityData> {
    entity
        .iter()
        .map(|d| {
            AlterEntityData::default()
                .with_entity_type(d.entity_type.clone())
                .with_entity_name(d.entity_name.clone())
        })
        .collect()
}

/// Every entry of the request answered with one error.
fn every_entry(
    req: &AlterClientQuotasRequest,
    code: i16,
    message: String,
) -> AlterClientQuotasResponse {
    let entries = req
        .entries
        .iter()
        .map(|en| {
            AlterEntryData::default()
                .with_entity(request_entity(&en.entity))
                .with_error_code(code)
                .with_error_message(Some(sb(message.clone())))
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// AlterClientQuotas' answer: per entity, its error code and message.
fn alter_response(results: Vec<(QuotaEntity, i16, Option<String>)>) -> AlterClientQuotasResponse {
    let entries = results
        .into_iter()
        .map(|(entity, code, message)| {
            let entity: BTreeMap<String, Option<String>> = entity;
            AlterEntryData::default()
                .with_entity(
                    entity
                        .into_iter()
                        .map(|(t, n)| {
                            AlterEntityData::default()
                                .with_entity_type(sb(t))
                                .with_entity_name(n.map(sb))
                        })
                        .collect(),
                )
                .with_error_code(code)
                .with_error_message(message.map(sb))
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// Records `bytes` against the client's quota of `manager`'s type (Kafka's
/// `maybeRecordAndGetThrottleTimeMs`). Returns the throttle time, 0 within the quota; the
/// caller counts and mutes it with [`throttle_larger`] (or [`throttle`]).
pub(crate) fn record(
    broker: &Broker,
    ctx: &RequestContext,
    manager: &crate::quota::ClientQuotaManager,
    bytes: usize,
) -> i32 {
    let quotas = broker.replicas.image().client_quotas.clone();
    let now = crate::cluster::replica_manager::now_ms();
    manager.record_and_get_throttle_ms(
        &quotas,
        &ctx.session.principal.name,
        ctx.client_id.as_deref().unwrap_or(""),
        bytes as f64,
        now,
    )
}

/// Counts a throttle against `manager` and mutes the connection for it after the answer
/// (Kafka's `RequestHandlerHelper.throttle`).
pub(crate) fn throttle(
    ctx: &RequestContext,
    manager: &crate::quota::ClientQuotaManager,
    throttle_ms: i32,
) {
    if throttle_ms > 0 {
        manager.throttle(throttle_ms);
        ctx.throttle.set(throttle_ms);
    }
}

/// A Produce's or Fetch's throttle from its byte-rate quota and its request quota, as
/// Kafka's `handleProduceRequest` and `handleFetchRequest` settle it: the answer carries the
/// larger and the connection is muted for it, and only the quota that gave it counts the
/// throttle (the request quota on a tie). Returns the larger.
pub(crate) fn throttle_larger(
    broker: &Broker,
    ctx: &RequestContext,
    bandwidth: &crate::quota::ClientQuotaManager,
    bandwidth_ms: i32,
    request_ms: i32,
) -> i32 {
    if bandwidth_ms > request_ms {
        throttle(ctx, bandwidth, bandwidth_ms);
    } else {
        throttle(ctx, &broker.quotas.request, request_ms);
    }
    bandwidth_ms.max(request_ms)
}
