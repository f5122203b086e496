//! GetTelemetrySubscriptions and PushTelemetry (KIP-714), answered as Kafka's
//! `ClientMetricsManager.processGetTelemetrySubscriptionRequest` and
//! `processPushTelemetryRequest` answer them on a broker with a telemetry receiver: Brook's
//! receiver keeps each client instance's last push (`telemetry::ClientMetricsManager`).

use kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest,
    PushTelemetryResponse,
};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::telemetry::{self, ClientSelectors, ACCEPTED_COMPRESSION_TYPES};

/// `telemetry.max.bytes`' default (Kafka's `ServerConfigs.CLIENT_TELEMETRY_MAX_BYTES_DEFAULT`).
const TELEMETRY_MAX_BYTES_DEFAULT: i32 = 1_048_576;

fn telemetry_max_bytes(broker: &Broker) -> i32 {
    broker
        .config
        .values
        .get("telemetry.max.bytes")
        .and_then(|v| v.parse().ok())
        .unwrap_or(TELEMETRY_MAX_BYTES_DEFAULT)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The client as `match` sees it. Brook does not keep the software name and version of
/// ApiVersions v3+ per connection, so those two selectors match only an empty value.
fn selectors(ctx: &RequestContext, id: Uuid) -> ClientSelectors {
    ClientSelectors {
        client_instance_id: id.to_string(),
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_source_address: ctx
            .session
            .client_address
            .map(|a| a.to_string())
            .unwrap_or_default(),
        ..ClientSelectors::default()
    }
}

/// Answers GetTelemetrySubscriptions: the client's subscription (a new instance id when it
/// sent none), or THROTTLING_QUOTA_EXCEEDED when asked again within the push interval.
pub fn handle_get_telemetry_subscriptions(
    broker: &Broker,
    ctx: &RequestContext,
    req: GetTelemetrySubscriptionsRequest,
) -> GetTelemetrySubscriptionsResponse {
    let id = if req.client_instance_id.is_nil() {
        Uuid::new_v4()
    } else {
        req.client_instance_id
    };
    let image = broker.replicas.image();
    let now = now_ms();
    let answer = broker
        .telemetry
        .with_instance(&image, id, selectors(ctx, id), now, |c| {
            telemetry::may_get(c, now)
                .then(|| (c.subscription_id, c.metrics.clone(), c.push_interval_ms))
        });
    let Some((subscription_id, metrics, interval)) = answer else {
        return GetTelemetrySubscriptionsResponse::default()
            .with_error_code(ResponseError::ThrottlingQuotaExceeded.code());
    };
    GetTelemetrySubscriptionsResponse::default()
        .with_client_instance_id(id)
        .with_subscription_id(subscription_id)
        .with_requested_metrics(metrics.into_iter().map(sb).collect())
        .with_accepted_compression_types(ACCEPTED_COMPRESSION_TYPES.to_vec())
        .with_push_interval_ms(interval)
        .with_telemetry_max_bytes(telemetry_max_bytes(broker))
        .with_delta_temporality(true)
}

/// Kafka's `validatePushRequest`, in its order.
fn check_push(
    c: &mut telemetry::ClientInstance,
    req: &PushTelemetryRequest,
    now: u64,
    max_bytes: i32,
) -> Result<(), ResponseError> {
    if c.terminating {
        return Err(ResponseError::InvalidRequest);
    }
    if !telemetry::may_push(c, now) && !req.terminating {
        return Err(ResponseError::ThrottlingQuotaExceeded);
    }
    if req.subscription_id != c.subscription_id {
        return Err(ResponseError::UnknownSubscriptionId);
    }
    if !(0..=4).contains(&req.compression_type) {
        return Err(ResponseError::UnsupportedCompressionType);
    }
    if req.metrics.len() > max_bytes.max(0) as usize {
        return Err(ResponseError::TelemetryTooLarge);
    }
    Ok(())
}

/// The metrics payload, decompressed (bounded by `max_bytes`) and decoded.
fn decode_metrics(
    compression: i8,
    bytes: &[u8],
    max_bytes: usize,
) -> Option<Vec<telemetry::MetricPoint>> {
    use brook_storage::records::RecordBytes;
    let codec = brook_storage::Codec::from_id(u8::try_from(compression).ok()?)?;
    if codec == brook_storage::Codec::None {
        return telemetry::decode_otlp(bytes);
    }
    let mut s =
        brook_storage::decompress::RecordStream::open_bounded(codec, bytes, max_bytes).ok()?;
    let mut plain = Vec::new();
    while s.has_more().ok()? {
        plain.push(s.byte()?);
    }
    telemetry::decode_otlp(&plain)
}

/// Answers PushTelemetry: checked as Kafka checks it, then the metrics kept as the client
/// instance's last push (INVALID_RECORD when they cannot be read).
pub fn handle_push_telemetry(
    broker: &Broker,
    ctx: &RequestContext,
    req: PushTelemetryRequest,
) -> PushTelemetryResponse {
    let error = |e: ResponseError| PushTelemetryResponse::default().with_error_code(e.code());
    let id = req.client_instance_id;
    // Kafka's `Uuid.RESERVED`: the zero id and the metadata topic's id (1).
    if id.is_nil() || id.as_u128() == 1 {
        return error(ResponseError::InvalidRequest);
    }
    let image = broker.replicas.image();
    let now = now_ms();
    let max_bytes = telemetry_max_bytes(broker);
    let checked = broker
        .telemetry
        .with_instance(&image, id, selectors(ctx, id), now, |c| {
            let r = check_push(c, &req, now, max_bytes);
            c.terminating = req.terminating;
            if r.is_ok() {
                c.pushes += 1;
            }
            r
        });
    if let Err(e) = checked {
        return error(e);
    }
    if !req.metrics.is_empty() {
        // Decompressed, a push may be larger than on the wire: bounded at 16 times the limit.
        let bound = (max_bytes.max(0) as usize).saturating_mul(16);
        match decode_metrics(req.compression_type, &req.metrics, bound) {
            Some(points) => broker.telemetry.keep_points(id, points),
            None => return error(ResponseError::InvalidRecord),
        }
    }
    PushTelemetryResponse::default()
}
