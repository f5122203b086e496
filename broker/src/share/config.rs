//! A share group's settings on the partition leader: the broker's `group.share.*` defaults
//! with the group's own `share.*` overrides (Kafka 4.4's `ShareGroupConfigProvider` reading
//! `GroupConfigManager`, whose values `GroupConfig.evaluate` clamps to the broker's bounds).
//!
//! When each one takes effect mirrors Kafka's `SharePartition`:
//! - `share.auto.offset.reset` only when a share-partition is initialized
//!   (`startOffsetDuringInitialization`): a change does not move an existing one;
//! - `share.record.lock.duration.ms` at each acquisition (`scheduleAcquisitionLockTimeout`);
//! - `share.delivery.count.limit` at each release or lock timeout (`maxDeliveryCount`);
//! - `share.partition.max.record.locks` at each acquisition (`maxInFlightRecords`);
//! - `share.isolation.level` at each ShareFetch (`KafkaApis.handleFetchFromShareFetchRequest`).

use std::collections::BTreeMap;

use super::partition::ShareLimits;
use crate::cluster::partition::FetchIsolation;
use crate::group::overrides;
// In `config_def`, beside the `share.auto.offset.reset` validator that parses with it, so
// that `config_def` does not import `share`.
pub use crate::config_def::{iso8601_duration_ms, AutoOffsetReset};

/// One share group's settings, as a share-partition of the group reads them.
#[derive(Debug, Clone, Copy)]
pub struct ShareGroupSettings {
    pub limits: ShareLimits,
    pub auto_offset_reset: AutoOffsetReset,
    pub isolation: FetchIsolation,
    /// `share.renew.acknowledge.enable` (Kafka's `ShareGroupConfigProvider.isRenewAcknowledgeEnabled`:
    /// a group config only, true unless the group sets it false), read at each acknowledgement.
    pub renew_enabled: bool,
}

impl ShareGroupSettings {
    /// The broker's `defaults` with the group's `overrides` (each clamped to the broker's
    /// bounds as `GroupConfig.evaluate` does).
    pub fn resolve(
        broker: &crate::config::BrokerConfig,
        defaults: ShareLimits,
        overrides: &BTreeMap<String, String>,
    ) -> Self {
        let get = |key: &str| overrides::clamped(broker, overrides, key);
        let limits = ShareLimits {
            lock_duration_ms: get("share.record.lock.duration.ms")
                .unwrap_or(defaults.lock_duration_ms),
            delivery_count_limit: get("share.delivery.count.limit")
                .map_or(defaults.delivery_count_limit, |v| v.clamp(1, 32767) as i16),
            max_in_flight: get("share.partition.max.record.locks")
                .map_or(defaults.max_in_flight, |v| v.max(1)),
        };
        let auto_offset_reset = overrides
            .get("share.auto.offset.reset")
            .and_then(|v| AutoOffsetReset::parse(v))
            .unwrap_or(AutoOffsetReset::Latest);
        let isolation = match overrides.get("share.isolation.level").map(String::as_str) {
            Some("read_committed") => FetchIsolation::TxnCommitted,
            _ => FetchIsolation::HighWatermark,
        };
        let renew_enabled = !overrides
            .get("share.renew.acknowledge.enable")
            .is_some_and(|v| v.eq_ignore_ascii_case("false"));
        ShareGroupSettings {
            limits,
            auto_offset_reset,
            isolation,
            renew_enabled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_offset_reset_parses_as_kafkas_strategy() {
        assert_eq!(
            AutoOffsetReset::parse("earliest"),
            Some(AutoOffsetReset::Earliest)
        );
        assert_eq!(AutoOffsetReset::parse("none"), None);
        assert_eq!(AutoOffsetReset::parse("Latest"), None);
        assert_eq!(AutoOffsetReset::parse("by_duration"), None);
        assert_eq!(
            AutoOffsetReset::parse("by_duration:PT1H30M"),
            Some(AutoOffsetReset::ByDurationMs(5_400_000))
        );
        assert_eq!(
            AutoOffsetReset::parse("by_duration:P1DT0.5S"),
            Some(AutoOffsetReset::ByDurationMs(86_400_500))
        );
        assert_eq!(AutoOffsetReset::parse("by_duration:-PT1S"), None);
        assert_eq!(AutoOffsetReset::parse("by_duration:PT"), None);
        assert_eq!(AutoOffsetReset::parse("by_duration:P"), None);
        assert_eq!(iso8601_duration_ms("pt10s"), Some(10_000));
        assert_eq!(iso8601_duration_ms("PT-1M"), Some(-60_000));
    }
}
