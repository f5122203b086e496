//! ApiVersions: the table of APIs and versions this broker serves.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

use super::{RequestContext, SUPPORTED_APIS};
use crate::broker::Broker;
use crate::features::{finalized_levels, FEATURES};
use crate::net::codec::{encode_response, CodecError};

fn table() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|a| {
            ApiVersion::default()
                .with_api_key(a.key as i16)
                .with_min_version(a.min)
                .with_max_version(a.max)
        })
        .collect()
}

/// Answers ApiVersions with the API table, the features this node supports and the levels
/// the metadata image finalizes, with the image's offset as their epoch (Kafka's
/// `ApiVersionsResponse.createApiVersionsResponse` fed by `KRaftMetadataCache.features`). From v5 a client names the cluster and
/// node it means to reach (KIP-1242); a connection that reached another cluster's node, or
/// another node, is answered REBOOTSTRAP_REQUIRED and nothing else, as Kafka's
/// `KafkaApis.handleApiVersionsRequest` does, so the client fetches metadata again.
pub async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ApiVersionsRequest,
) -> ApiVersionsResponse {
    if ctx.api_version >= 5 && misrouted(broker, &req) {
        return ApiVersionsResponse::default()
            .with_error_code(ResponseError::RebootstrapRequired.code());
    }
    let image = broker.replicas.image();
    let supported = FEATURES
        .iter()
        .map(|f| {
            SupportedFeatureKey::default()
                .with_name(super::sb(f.name))
                .with_min_version(f.supported.0)
                .with_max_version(f.supported.1)
        })
        .collect();
    // A level of 0 is left out, as Kafka leaves it out.
    let finalized = finalized_levels(&image)
        .into_iter()
        .filter(|(_, level)| *level > 0)
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(super::sb(name))
                .with_min_version_level(level)
                .with_max_version_level(level)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_api_keys(table())
        .with_supported_features(supported)
        .with_finalized_features_epoch(image.metadata_offset as i64)
        .with_finalized_features(finalized)
}

/// Whether a v5 request names a cluster id, and the cluster or node it names is not this one.
fn misrouted(broker: &Broker, req: &ApiVersionsRequest) -> bool {
    let Some(cluster_id) = &req.cluster_id else {
        return false;
    };
    cluster_id.as_str() != broker.replicas.cluster_id() || req.node_id != broker.config.node_id
}

/// The answer to an ApiVersions request of a version we do not know: error 35, v0 body.
pub fn unsupported_version(correlation_id: i32) -> Result<Bytes, CodecError> {
    let resp = ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(table());
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &resp)
}
