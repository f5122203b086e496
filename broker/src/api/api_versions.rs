//! ApiVersions: the table of APIs and versions this broker serves.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::{RequestContext, SUPPORTED_APIS};
use crate::net::codec::{encode_response, CodecError};
use crate::server::Broker;

/// UNSUPPORTED_VERSION.
const UNSUPPORTED_VERSION: i16 = 35;

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

/// Answers ApiVersions. No finalized features are listed: in particular not
/// `transaction.version`, so clients stay on transaction protocol version 1.
pub async fn handle(
    _broker: &Broker,
    _ctx: &RequestContext,
    _req: ApiVersionsRequest,
) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_api_keys(table())
        .with_finalized_features_epoch(-1)
}

/// The answer to an ApiVersions request of a version we do not know: error 35, v0 body.
pub fn unsupported_version(correlation_id: i32) -> Result<Bytes, CodecError> {
    let resp = ApiVersionsResponse::default()
        .with_error_code(UNSUPPORTED_VERSION)
        .with_api_keys(table());
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &resp)
}
