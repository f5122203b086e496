//! Feature flags as the broker serves them. The table of features this node supports and
//! the levels a new cluster starts with belong to the controller
//! ([`brook_controller::features`], re-exported here so that every `crate::features` path
//! names the one table); what is left here reads the broker's applied image.

pub use brook_controller::features::*;

/// Whether `name` is finalized at level 1 or more in the broker's current image: what
/// Kafka's `KafkaApis` checks before serving an API a feature gates
/// (`isConsumerGroupProtocolEnabled` for `group.version`, `isShareGroupProtocolEnabled` for
/// `share.version`), answering UNSUPPORTED_VERSION when it is not.
pub fn enabled(broker: &crate::broker::Broker, name: &str) -> bool {
    broker.replicas.image().feature_level(name) >= 1
}
