//! ApiVersions: the table of APIs and versions this broker serves.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

use super::{RequestContext, SUPPORTED_APIS};
use crate::broker::Broker;
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

/// The feature clients read to choose their transaction protocol (Kafka's
/// `TransactionVersion.FEATURE_NAME`).
pub const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";
/// The epoch of the finalized features: they never change while Brook runs, and a client
/// re-reads them only when the epoch grows.
const FINALIZED_FEATURES_EPOCH: i64 = 1;
/// Kafka 4.4's `MetadataVersion.latestProduction()`, 4.4-IV2.
pub const METADATA_VERSION_LEVEL: i16 = 33;

/// One feature: its name, the range of levels this broker supports, and the finalized level
/// (0: not finalized, left out of the finalized list as Kafka leaves out a level 0).
struct Feature {
    name: &'static str,
    supported: (i16, i16),
    finalized: i16,
}

/// The features of Kafka 4.4 (`Feature.PRODUCTION_FEATURES` and `metadata.version`) for
/// what Brook implements, at the levels a new 4.4 cluster finalizes:
/// - `metadata.version` 4.4-IV2: the only level Brook's records correspond to;
/// - `kraft.version` 0: Brook's quorum has static voters (`controller.quorum.voters`), so
///   KIP-853's level 1 is not supported, and Kafka leaves level 0 out of the finalized list;
/// - `transaction.version` 2 (KIP-890 part 2): kafka-clients 4.4 then sends no
///   AddPartitionsToTxn or AddOffsetsToTxn and uses EndTxn v5, which bumps the epoch at
///   every transaction; clients that do not read it keep version 1, also served;
/// - `group.version` 1: the KIP-848 consumer group protocol;
/// - `eligible.leader.replicas.version` 1: the controller keeps ELRs (KIP-966).
///
/// `share.version` and `streams.version` are left out: Brook serves neither kind of group.
const FEATURES: &[Feature] = &[
    Feature {
        name: "metadata.version",
        supported: (METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL),
        finalized: METADATA_VERSION_LEVEL,
    },
    Feature {
        name: "kraft.version",
        supported: (0, 0),
        finalized: 0,
    },
    Feature {
        name: TRANSACTION_VERSION_FEATURE,
        supported: (0, crate::txn::metadata::TRANSACTION_VERSION_2),
        finalized: crate::txn::metadata::TRANSACTION_VERSION_2,
    },
    Feature {
        name: "group.version",
        supported: (0, 1),
        finalized: 1,
    },
    Feature {
        name: "eligible.leader.replicas.version",
        supported: (0, 1),
        finalized: 1,
    },
];

/// Answers ApiVersions with the API table and [`FEATURES`] (Kafka's
/// `ApiVersionsResponse.createApiVersionsResponse`). From v5 a client names the cluster and
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
    let supported = FEATURES
        .iter()
        .map(|f| {
            SupportedFeatureKey::default()
                .with_name(super::sb(f.name))
                .with_min_version(f.supported.0)
                .with_max_version(f.supported.1)
        })
        .collect();
    let finalized = FEATURES
        .iter()
        .filter(|f| f.finalized > 0)
        .map(|f| {
            FinalizedFeatureKey::default()
                .with_name(super::sb(f.name))
                .with_min_version_level(f.finalized)
                .with_max_version_level(f.finalized)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_api_keys(table())
        .with_supported_features(supported)
        .with_finalized_features_epoch(FINALIZED_FEATURES_EPOCH)
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
