//! Feature, telemetry and config-resource cases: UpdateFeatures (validate only, so every
//! version meets the same levels), GetTelemetrySubscriptions and PushTelemetry (a fresh
//! client instance each), ListConfigResources (client-metrics subscriptions).

use kafka_protocol::messages::*;

use super::env::{s, Env};
use super::Meaning;

type R = Result<Meaning, String>;

/// A validate-only safe downgrade of `transaction.version` to 1, and an unknown feature.
pub fn update_features(env: &mut Env, v: i16) -> R {
    let any = env.any();
    // v0 says "downgrade" with `AllowDowngrade`, v1 with `UpgradeType` 2 (safe downgrade).
    let key = |name: &str, level: i16| {
        let k = update_features_request::FeatureUpdateKey::default()
            .with_feature(s(name))
            .with_max_version_level(level);
        if v == 0 {
            k.with_allow_downgrade(true)
        } else {
            k.with_upgrade_type(2)
        }
    };
    let mut codes = Vec::new();
    for (name, level) in [("transaction.version", 1), ("no.such.feature", 1)] {
        // v0 has no validate_only: it would apply the downgrade, so it asks for the level
        // in force (2), which changes nothing.
        let req = if v == 0 {
            let level = if name == "transaction.version" {
                2
            } else {
                level
            };
            UpdateFeaturesRequest::default().with_feature_updates(vec![key(name, level)])
        } else {
            UpdateFeaturesRequest::default()
                .with_feature_updates(vec![key(name, level)])
                .with_validate_only(true)
        };
        codes.push(env.call(any, v, &req)?.error_code);
    }
    Ok(format!("errors {codes:?}"))
}

/// A new client instance's subscription (none is set: no metrics, the default interval).
pub fn get_telemetry_subscriptions(env: &mut Env, v: i16) -> R {
    let any = env.any();
    let r = env.call(any, v, &GetTelemetrySubscriptionsRequest::default())?;
    Ok(format!(
        "error {} metrics {:?} interval {} compression {:?} new id {}",
        r.error_code,
        r.requested_metrics,
        r.push_interval_ms,
        r.accepted_compression_types,
        !r.client_instance_id.is_nil()
    ))
}

/// A terminating empty push from a fresh instance with its subscription id.
pub fn push_telemetry(env: &mut Env, v: i16) -> R {
    let any = env.any();
    let sub = env.call(any, 0, &GetTelemetrySubscriptionsRequest::default())?;
    let req = PushTelemetryRequest::default()
        .with_client_instance_id(sub.client_instance_id)
        .with_subscription_id(sub.subscription_id)
        .with_terminating(true);
    let r = env.call(any, v, &req)?;
    Ok(format!("error {}", r.error_code))
}

/// The client-metrics subscriptions (none in the matrix's cluster).
pub fn list_config_resources(env: &mut Env, v: i16) -> R {
    let any = env.any();
    // v0 names no types: it lists client-metrics subscriptions only.
    let types = if v == 0 { Vec::new() } else { vec![16] };
    let req = ListConfigResourcesRequest::default().with_resource_types(types);
    let r = env.call(any, v, &req)?;
    Ok(format!(
        "error {} resources {}",
        r.error_code,
        r.config_resources.len()
    ))
}
