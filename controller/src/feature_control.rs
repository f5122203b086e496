//! UpdateFeatures on the active controller, as Kafka's `FeatureControlManager.updateFeatures`
//! decides it: each update checked in turn against the levels this node supports
//! (`QuorumFeatures.reasonNotSupported`; every Brook node runs the same binary, so this
//! node's range is every broker's and controller's) and the current level; the first error
//! fails the whole request, and a valid request becomes one `FeatureLevelRecord` per feature.
//!
//! Kafka's dependency check (`Feature.validateVersion`) has nothing to refuse here: every
//! supported level depends at most on a `metadata.version` below 4.4-IV2, the only one Brook
//! runs at.

use serde::{Deserialize, Serialize};

use crate::configuration_control::ElectionPolicy;
use crate::error::ControllerError;
use crate::features::{self, KRAFT_VERSION, METADATA_VERSION};
use crate::image::{MetadataImage, MetadataRecord};
use crate::request::{ControllerReply, ControllerResult};

/// Kafka's `FeatureUpdate.UpgradeType`, by its wire code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpgradeType {
    Unknown,
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
}

impl UpgradeType {
    /// Kafka's `UpgradeType.fromCode`: 1 upgrade, 2 safe downgrade, 3 unsafe downgrade.
    pub fn from_code(code: i8) -> Self {
        match code {
            1 => UpgradeType::Upgrade,
            2 => UpgradeType::SafeDowngrade,
            3 => UpgradeType::UnsafeDowngrade,
            _ => UpgradeType::Unknown,
        }
    }
}

/// One feature of an UpdateFeatures request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureUpdate {
    pub name: String,
    pub level: i16,
    pub upgrade_type: UpgradeType,
}

/// Kafka's `invalidUpdateVersion` message, as INVALID_UPDATE_VERSION.
fn invalid(name: &str, level: i16, reason: &str) -> ControllerError {
    ControllerError::InvalidFeatureUpdate(format!(
        "Invalid update version {level} for feature {name}. {reason}"
    ))
}

/// Kafka's `QuorumFeatures.reasonNotSupported` for this node (`VersionRange.toString`).
fn reason_not_supported(node_id: i32, name: &str, level: i16) -> Option<String> {
    let (min, max) = features::supported_range(name);
    if (min..=max).contains(&level) {
        return None;
    }
    let what = format!("Local controller {node_id}");
    Some(match (min, max) {
        (_, 0) => format!("{what} does not support this feature."),
        (min, max) if min == max => format!("{what} only supports versions {min}"),
        (min, max) => format!("{what} only supports versions {min}-{max}"),
    })
}

/// Kafka's `FeatureControlManager.updateFeature` for one feature: the record, or the error.
fn update_feature(
    image: &MetadataImage,
    node_id: i32,
    u: &FeatureUpdate,
) -> Result<Option<MetadataRecord>, ControllerError> {
    let (name, level) = (u.name.as_str(), u.level);
    if u.upgrade_type == UpgradeType::Unknown {
        return Err(invalid(
            name,
            level,
            "The controller does not support the given upgrade type.",
        ));
    }
    let current = image.feature_level(name);
    if level < 0 {
        return Err(invalid(
            name,
            level,
            "A feature version cannot be less than 0.",
        ));
    }
    if let Some(reason) = reason_not_supported(node_id, name, level) {
        return Err(invalid(name, level, &reason));
    }
    if level < current && u.upgrade_type == UpgradeType::Upgrade {
        return Err(invalid(
            name,
            level,
            "Can't downgrade the version of this feature without setting the upgrade type to \
             either safe or unsafe downgrade.",
        ));
    }
    if level > current && u.upgrade_type != UpgradeType::Upgrade {
        return Err(invalid(name, level, "Can't downgrade to a newer version."));
    }
    // `metadata.version` supports one level here, so only an update to that same level
    // reaches this point: Kafka records a no-op.
    if name == METADATA_VERSION || (name == KRAFT_VERSION && level == current) {
        return Ok(None);
    }
    // `kraft.version` goes up, never down (Kafka's `KafkaRaftClient.upgradeKRaftVersion`):
    // the voter changes of level 1 cannot be undone by a downgrade.
    if name == KRAFT_VERSION && level < current {
        return Err(invalid(
            name,
            level,
            "Unsupported downgrade of kraft.version: it can only be upgraded.",
        ));
    }
    Ok(Some(MetadataRecord::FeatureLevel {
        name: name.to_string(),
        level,
    }))
}

/// UpdateFeatures: every update valid, or the first error and no records; `validate_only`
/// records nothing either way. Turning ELR on also records the cluster-level
/// `min.insync.replicas` when none is set, with the static value (Kafka's
/// `ConfigurationControlManager.maybeGenerateElrSafetyRecords`), so the min ISR the ELR
/// rules read cannot change under them by a broker's restart with another value.
pub fn update_features(
    image: &MetadataImage,
    policy: &ElectionPolicy,
    updates: &[FeatureUpdate],
    validate_only: bool,
) -> Result<ControllerResult, ControllerError> {
    let mut records = Vec::with_capacity(updates.len() + 1);
    for u in updates {
        records.extend(update_feature(image, policy.node_id, u)?);
    }
    if validate_only {
        return Ok((Vec::new(), ControllerReply::Done));
    }
    let elr_on = updates
        .iter()
        .any(|u| u.name == features::ELR_VERSION && u.level > 0);
    let min_isr_set = image
        .broker_configs
        .get("")
        .is_some_and(|c| c.contains_key(MIN_ISR_KEY));
    if elr_on && !min_isr_set {
        records.push(MetadataRecord::AlterBrokerConfigs {
            resource: String::new(),
            configs: [(
                MIN_ISR_KEY.to_string(),
                Some(policy.default_min_isr.to_string()),
            )]
            .into(),
        });
    }
    Ok((records, ControllerReply::Done))
}

/// The broker key the ELR rules read.
const MIN_ISR_KEY: &str = "min.insync.replicas";

#[cfg(test)]
mod tests {
    use super::*;

    fn update(name: &str, level: i16, t: UpgradeType) -> Vec<FeatureUpdate> {
        vec![FeatureUpdate {
            name: name.into(),
            level,
            upgrade_type: t,
        }]
    }

    fn message(r: Result<ControllerResult, ControllerError>) -> String {
        match r {
            Err(ControllerError::InvalidFeatureUpdate(m)) => m,
            other => panic!("expected INVALID_UPDATE_VERSION, got {other:?}"),
        }
    }

    #[test]
    fn decides_as_kafka() {
        let img = MetadataImage::default();
        let tv = features::TRANSACTION_VERSION;
        let (records, _) = update_features(
            &img,
            &crate::fixtures::ELR,
            &update(tv, 1, UpgradeType::SafeDowngrade),
            false,
        )
        .unwrap();
        assert_eq!(
            records,
            vec![MetadataRecord::FeatureLevel {
                name: tv.into(),
                level: 1
            }]
        );
        let refused = update_features(
            &img,
            &crate::fixtures::ELR,
            &update(tv, 1, UpgradeType::Upgrade),
            false,
        );
        assert!(message(refused).contains("without setting the upgrade type"));
        let too_new = update_features(
            &img,
            &crate::fixtures::ELR,
            &update(tv, 3, UpgradeType::Upgrade),
            false,
        );
        assert_eq!(
            message(too_new),
            "Invalid update version 3 for feature transaction.version. Local controller 1 only \
             supports versions 0-2"
        );
        let unknown = update_features(
            &img,
            &crate::fixtures::ELR,
            &update("x", 1, UpgradeType::Upgrade),
            false,
        );
        assert!(message(unknown).ends_with("Local controller 1 does not support this feature."));
        let validate = update_features(
            &img,
            &crate::fixtures::ELR,
            &update(tv, 0, UpgradeType::UnsafeDowngrade),
            true,
        );
        assert!(validate.unwrap().0.is_empty());
    }

    #[test]
    fn kraft_version_goes_up_only() {
        let mut img = MetadataImage::default();
        let kv = features::KRAFT_VERSION;
        let policy = crate::fixtures::ELR;
        let (records, _) =
            update_features(&img, &policy, &update(kv, 1, UpgradeType::Upgrade), false).unwrap();
        assert_eq!(
            records,
            vec![MetadataRecord::FeatureLevel {
                name: kv.into(),
                level: 1
            }]
        );
        img.feature_levels.insert(kv.into(), 1);
        let down = update_features(
            &img,
            &policy,
            &update(kv, 0, UpgradeType::SafeDowngrade),
            false,
        );
        assert!(message(down).contains("can only be upgraded"));
        let same =
            update_features(&img, &policy, &update(kv, 1, UpgradeType::Upgrade), false).unwrap();
        assert!(same.0.is_empty());
    }

    #[test]
    fn turning_elr_on_records_the_cluster_min_isr() {
        let mut img = MetadataImage::default();
        img.feature_levels.insert(features::ELR_VERSION.into(), 0);
        let on = update(features::ELR_VERSION, 1, UpgradeType::Upgrade);
        let policy = crate::fixtures::ELR;
        let (records, _) = update_features(&img, &policy, &on, false).unwrap();
        assert_eq!(records.len(), 2, "{records:?}");
        assert!(
            matches!(&records[1], MetadataRecord::AlterBrokerConfigs { resource, configs }
            if resource.is_empty() && configs[MIN_ISR_KEY].as_deref() == Some("2"))
        );
        for r in &records {
            img.apply(r).unwrap();
        }
        let (records, _) = update_features(&img, &policy, &on, false).unwrap();
        assert_eq!(records.len(), 1, "already set: {records:?}");
    }
}
