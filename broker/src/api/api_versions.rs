//! ApiVersions: the table of APIs and versions this broker serves.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

use super::{RequestContext, SUPPORTED_APIS};
use crate::net::codec::{encode_response, CodecError};
use crate::server::Broker;

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

/// The feature clients read to choose their transaction protocol (Kafka's
/// `TransactionVersion.FEATURE_NAME`).
pub const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";
/// The epoch of the finalized features: they never change while Brook runs, and a client
/// re-reads them only when the epoch grows.
const FINALIZED_FEATURES_EPOCH: i64 = 1;

/// Answers ApiVersions. `transaction.version` is supported from 0 to 2 and finalized at 2,
/// Kafka 4.4's default, so kafka-clients 4.4 uses KIP-890 part 2: no AddPartitionsToTxn or
/// AddOffsetsToTxn (Produce v12+ and TxnOffsetCommit v5 add partitions implicitly) and
/// EndTxn v5, which bumps the epoch at every transaction. Clients that do not read the
/// feature keep transaction version 1, which the coordinator serves too.
pub async fn handle(
    _broker: &Broker,
    _ctx: &RequestContext,
    _req: ApiVersionsRequest,
) -> ApiVersionsResponse {
    let level = crate::txn::metadata::TRANSACTION_VERSION_2;
    ApiVersionsResponse::default()
        .with_api_keys(table())
        .with_supported_features(vec![SupportedFeatureKey::default()
            .with_name(super::sb(TRANSACTION_VERSION_FEATURE))
            .with_min_version(0)
            .with_max_version(level)])
        .with_finalized_features_epoch(FINALIZED_FEATURES_EPOCH)
        .with_finalized_features(vec![FinalizedFeatureKey::default()
            .with_name(super::sb(TRANSACTION_VERSION_FEATURE))
            .with_min_version_level(level)
            .with_max_version_level(level)])
}

/// The answer to an ApiVersions request of a version we do not know: error 35, v0 body.
pub fn unsupported_version(correlation_id: i32) -> Result<Bytes, CodecError> {
    let resp = ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(table());
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &resp)
}
