//! UpdateFeatures (`kafka-features upgrade|downgrade|disable`): checked for ALTER on the
//! cluster, then decided by the active controller (`controller::feature_control`), answered
//! as Kafka's `ControllerApis.handleUpdateFeatures` and `QuorumController.updateFeatures`
//! answer it. The finalized levels reach clients through ApiVersions.

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::ResponseError;

use super::auth_helper::{authorize_cluster, cluster_denied_message};
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::controller::feature_control::{FeatureUpdate, UpgradeType};
use crate::security::acl::AclOperation;

/// Kafka's `UpdateFeaturesRequest.FeatureUpdateItem`: v0's `AllowDowngrade` is a safe
/// downgrade, v1 names the upgrade type.
fn feature_updates(ctx: &RequestContext, req: &UpdateFeaturesRequest) -> Vec<FeatureUpdate> {
    req.feature_updates
        .iter()
        .map(|u| FeatureUpdate {
            name: u.feature.to_string(),
            level: u.max_version_level,
            upgrade_type: match ctx.api_version {
                0 if u.allow_downgrade => UpgradeType::SafeDowngrade,
                0 => UpgradeType::Upgrade,
                _ => UpgradeType::from_code(u.upgrade_type),
            },
        })
        .collect()
}

/// Answers UpdateFeatures. A refused request names the feature at fault in its top-level
/// message; a granted one lists every feature with NONE up to v1, and none from v2
/// (KIP-1022).
pub async fn handle_update_features(
    broker: &Broker,
    ctx: &RequestContext,
    req: UpdateFeaturesRequest,
) -> UpdateFeaturesResponse {
    if !authorize_cluster(broker, ctx, AclOperation::Alter) {
        return UpdateFeaturesResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(sb(cluster_denied_message(ctx))));
    }
    let updates = feature_updates(ctx, &req);
    let validate_only = ctx.api_version >= 1 && req.validate_only;
    let outcome = broker
        .replicas
        .controller()
        .update_features(updates, validate_only)
        .await;
    if let Err(e) = outcome {
        let message = match &e {
            crate::controller::ControllerError::InvalidFeatureUpdate(m) => format!(
                "The update failed for all features since the following feature had an \
                 error: {m}"
            ),
            other => other.to_string(),
        };
        return UpdateFeaturesResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(sb(message)));
    }
    if !validate_only {
        broker.replicas.wait_caught_up().await;
    }
    let results = if ctx.api_version <= 1 {
        // `Errors.NONE.message()`, which Kafka sets in each result.
        req.feature_updates
            .iter()
            .map(|u| {
                UpdatableFeatureResult::default()
                    .with_feature(u.feature.clone())
                    .with_error_message(Some(sb("NONE")))
            })
            .collect()
    } else {
        Vec::new()
    };
    UpdateFeaturesResponse::default().with_results(results)
}

/// Whether `name` is finalized at level 1 or more in the broker's current image: what
/// Kafka's `KafkaApis` checks before serving an API a feature gates
/// (`isConsumerGroupProtocolEnabled` for `group.version`, `isShareGroupProtocolEnabled` for
/// `share.version`), answering UNSUPPORTED_VERSION when it is not.
pub fn enabled(broker: &Broker, name: &str) -> bool {
    broker.replicas.image().feature_level(name) >= 1
}
