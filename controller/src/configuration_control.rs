//! What the controller's decisions read from configuration and features rather than from
//! the partition itself, as one [`ElectionPolicy`]: Kafka's `ConfigurationControlManager`
//! (`min.insync.replicas` and `unclean.leader.election.enable`, a topic override before the
//! broker's value) and `FeatureControlManager` (`eligible.leader.replicas.version`).

use std::collections::BTreeMap;

use crate::error::ControllerError;
use crate::image::{MetadataImage, MetadataRecord, PartitionRegistration, TopicImage};
use crate::request::{ControllerReply, ControllerResult};

/// Topic config key that enables unclean leader election.
pub const UNCLEAN_KEY: &str = "unclean.leader.election.enable";

/// What the decisions depend on besides the image: the controller's configuration and
/// finalized features (Kafka's `ConfigurationControlManager` and `FeatureControlManager`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionPolicy {
    /// Broker-level `unclean.leader.election.enable` (dynamic, then static); a topic
    /// override wins.
    pub default_unclean: bool,
    /// Broker-level `min.insync.replicas` (dynamic, then static); a topic override wins.
    pub default_min_isr: i32,
    /// Eligible leader replicas (KIP-966, `eligible.leader.replicas.version` 1).
    pub elr_enabled: bool,
    /// The deciding controller's node id, which feature decisions name (Kafka's
    /// `QuorumFeatures.nodeId`).
    pub node_id: i32,
}

impl ElectionPolicy {
    /// Whether unclean election is enabled for a topic.
    pub(super) fn unclean_for(&self, t: &TopicImage) -> bool {
        t.configs
            .get(UNCLEAN_KEY)
            .map(|v| v == "true")
            .unwrap_or(self.default_unclean)
    }

    /// Kafka's `getTopicEffectiveMinIsr`: the topic's `min.insync.replicas`, at most its
    /// replication factor ([`effective_min_isr`], which the partition uses too).
    pub(super) fn effective_min_isr(&self, t: &TopicImage, p: &PartitionRegistration) -> usize {
        let configured = t
            .configs
            .get("min.insync.replicas")
            .and_then(|v| v.parse::<i32>().ok())
            .unwrap_or(self.default_min_isr);
        usize::try_from(effective_min_isr(configured, p.replicas.len())).unwrap_or(0)
    }
}

/// The ISR size a partition with `replicas` replicas needs: `min.insync.replicas` capped by
/// the replication factor, as Kafka's `Partition.effectiveMinIsr` and the controller's
/// `ReplicationControlManager.getTopicEffectiveMinIsr` compute it. A topic asking for more
/// in-sync replicas than it has would otherwise never commit anything. Both the partition and
/// the controller call this, so they cannot disagree.
pub fn effective_min_isr(min_insync_replicas: i32, replicas: usize) -> i32 {
    let replicas = i32::try_from(replicas.max(1)).unwrap_or(i32::MAX);
    min_insync_replicas.min(replicas)
}

/// A topic's config overrides set (`Some`) or removed (`None`) (Kafka's
/// `ConfigurationControlManager.incrementalAlterConfigs`). The caller has validated keys and
/// values (`BrokerConfig::validate_topic_configs`); the controller stores them.
pub fn alter_configs(
    image: &MetadataImage,
    name: &str,
    configs: &BTreeMap<String, Option<String>>,
) -> Result<ControllerResult, ControllerError> {
    let t = image
        .topic_by_name(name)
        .ok_or_else(|| ControllerError::UnknownTopicOrPartition(name.to_string()))?;
    Ok((
        vec![MetadataRecord::AlterConfigs {
            id: t.id,
            configs: configs.clone(),
        }],
        ControllerReply::Done,
    ))
}

/// Dynamic broker configs of `resource` (a node id, or "" for the cluster default) set or
/// removed; the caller has validated them (`api::configs`).
pub fn alter_broker_configs(
    resource: &str,
    configs: &BTreeMap<String, Option<String>>,
) -> ControllerResult {
    (
        vec![MetadataRecord::AlterBrokerConfigs {
            resource: resource.to_string(),
            configs: configs.clone(),
        }],
        ControllerReply::Done,
    )
}

/// Config overrides of group `group` set or removed; the caller has validated the group's
/// resulting set (`group::overrides::validate`, Kafka's `GroupConfig.validate`).
pub fn alter_group_configs(
    group: &str,
    configs: &BTreeMap<String, Option<String>>,
) -> ControllerResult {
    (
        vec![MetadataRecord::AlterGroupConfigs {
            group: group.to_string(),
            configs: configs.clone(),
        }],
        ControllerReply::Done,
    )
}
