//! Per-group config overrides (Kafka 4.4's `GroupConfig`): set with IncrementalAlterConfigs
//! on a GROUP resource (`kafka-configs --entity-type groups`), stored in the metadata log
//! (`MetadataRecord::AlterGroupConfigs`), described by DescribeConfigs, and read by the
//! group coordinator where a group's timing is decided.
//!
//! [`validate`] runs on a group's whole resulting set of overrides, as Kafka's controller
//! runs `GroupConfig.validate` on it: known names, each value by its key's type and
//! validator, the broker's bounds for the keys that have them, and the cross-key rules.
//! Values in range when set can fall outside the broker's bounds after the broker's are
//! changed; [`clamped`] caps them, as Kafka's `GroupConfig.evaluate` does.

use std::collections::BTreeMap;

use crate::config::BrokerConfig;
use crate::config_def::{self, ConfigType, Validator};

/// Group keys Kafka defines as internal (`ConfigDef.defineInternal`): accepted and stored,
/// never described.
const INTERNAL_KEYS: &[(&str, ConfigType, Validator)] = &[
    (
        "consumer.assignor.offload.enable",
        ConfigType::Boolean,
        Validator::None,
    ),
    (
        "share.assignor.offload.enable",
        ConfigType::Boolean,
        Validator::None,
    ),
    (
        "streams.assignor.offload.enable",
        ConfigType::Boolean,
        Validator::None,
    ),
    (
        "streams.acceptable.recovery.lag",
        ConfigType::Long,
        Validator::AtLeast(0),
    ),
    (
        "streams.num.warmup.replicas",
        ConfigType::Int,
        Validator::AtLeast(0),
    ),
    (
        "streams.task.offset.interval.ms",
        ConfigType::Int,
        Validator::AtLeast(1),
    ),
];

/// A group key and the broker keys bounding it (`GroupConfig.validateValues`' calls to
/// `validateIntRange` and `validateIntMax`): (key, broker minimum, broker maximum).
const BOUNDED_KEYS: &[(&str, Option<&str>, &str)] = &[
    (
        "consumer.heartbeat.interval.ms",
        Some("group.consumer.min.heartbeat.interval.ms"),
        "group.consumer.max.heartbeat.interval.ms",
    ),
    (
        "consumer.session.timeout.ms",
        Some("group.consumer.min.session.timeout.ms"),
        "group.consumer.max.session.timeout.ms",
    ),
    (
        "consumer.assignment.interval.ms",
        Some("group.consumer.min.assignment.interval.ms"),
        "group.consumer.max.assignment.interval.ms",
    ),
    (
        "share.heartbeat.interval.ms",
        Some("group.share.min.heartbeat.interval.ms"),
        "group.share.max.heartbeat.interval.ms",
    ),
    (
        "share.session.timeout.ms",
        Some("group.share.min.session.timeout.ms"),
        "group.share.max.session.timeout.ms",
    ),
    (
        "share.record.lock.duration.ms",
        Some("group.share.min.record.lock.duration.ms"),
        "group.share.max.record.lock.duration.ms",
    ),
    (
        "share.delivery.count.limit",
        Some("group.share.min.delivery.count.limit"),
        "group.share.max.delivery.count.limit",
    ),
    (
        "share.partition.max.record.locks",
        Some("group.share.min.partition.max.record.locks"),
        "group.share.max.partition.max.record.locks",
    ),
    (
        "share.assignment.interval.ms",
        Some("group.share.min.assignment.interval.ms"),
        "group.share.max.assignment.interval.ms",
    ),
    (
        "streams.heartbeat.interval.ms",
        Some("group.streams.min.heartbeat.interval.ms"),
        "group.streams.max.heartbeat.interval.ms",
    ),
    (
        "streams.session.timeout.ms",
        Some("group.streams.min.session.timeout.ms"),
        "group.streams.max.session.timeout.ms",
    ),
    (
        "streams.num.standby.replicas",
        None,
        "group.streams.max.standby.replicas",
    ),
    (
        "streams.assignment.interval.ms",
        Some("group.streams.min.assignment.interval.ms"),
        "group.streams.max.assignment.interval.ms",
    ),
];

/// Session timeouts that must exceed their heartbeat intervals, with the broker keys that
/// supply each when the group does not override it (`validateSessionExceedsHeartbeat`).
const SESSION_HEARTBEAT_PAIRS: &[[(&str, &str); 2]] = &[
    [
        (
            "consumer.session.timeout.ms",
            "group.consumer.session.timeout.ms",
        ),
        (
            "consumer.heartbeat.interval.ms",
            "group.consumer.heartbeat.interval.ms",
        ),
    ],
    [
        ("share.session.timeout.ms", "group.share.session.timeout.ms"),
        (
            "share.heartbeat.interval.ms",
            "group.share.heartbeat.interval.ms",
        ),
    ],
    [
        (
            "streams.session.timeout.ms",
            "group.streams.session.timeout.ms",
        ),
        (
            "streams.heartbeat.interval.ms",
            "group.streams.heartbeat.interval.ms",
        ),
    ],
];

/// A broker key's value: as configured, else Kafka's default for it.
fn broker_int(broker: &BrokerConfig, key: &str) -> i64 {
    broker
        .values
        .get(key)
        .cloned()
        .or_else(|| config_def::kafka_broker_key(key).and_then(|k| k.default.map(String::from)))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn int(overrides: &BTreeMap<String, String>, key: &str) -> Option<i64> {
    overrides.get(key).and_then(|v| v.trim().parse().ok())
}

/// Kafka's `GroupConfig.validate` on a group's resulting overrides; the error is Kafka's
/// message, answered as INVALID_CONFIG.
pub fn validate(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> Result<(), String> {
    for (name, value) in overrides {
        let (ty, validator) = match config_def::GROUP_CONFIGS.iter().find(|k| k.name == name) {
            Some(k) => (k.ty, k.validator),
            None => match INTERNAL_KEYS.iter().find(|(n, _, _)| n == name) {
                Some((_, ty, validator)) => (*ty, *validator),
                None => return Err(format!("Unknown group config name: {name}")),
            },
        };
        config_def::validate(name, ty, validator, value)?;
    }
    if let Some(tags) = overrides.get("streams.rack.aware.assignment.tags") {
        let items: Vec<&str> = tags.split(',').map(str::trim).collect();
        let unique: std::collections::BTreeSet<&&str> = items.iter().collect();
        if !tags.trim().is_empty() && unique.len() != items.len() {
            return Err(
                "streams.rack.aware.assignment.tags must not contain duplicate tag keys.".into(),
            );
        }
    }
    validate_values(broker, overrides)
}

/// `GroupConfig.validateValues`: the broker's bounds, the registered streams assignor,
/// sessions above heartbeats, and the dead-letter topic's name.
fn validate_values(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<(), String> {
    for (key, min_key, max_key) in BOUNDED_KEYS {
        let Some(v) = int(overrides, key) else {
            continue;
        };
        let max = broker_int(broker, max_key);
        match min_key.map(|k| broker_int(broker, k)) {
            Some(min) if v < min || v > max => {
                return Err(format!(
                    "{key} must be in the range {min} to {max} inclusive."
                ))
            }
            None if v > max => return Err(format!("{key} must be less than or equal to {max}")),
            _ => {}
        }
    }
    if let Some(name) = overrides.get("streams.assignor.name") {
        let registered: Vec<String> = broker
            .values
            .get("group.streams.assignors")
            .map(String::as_str)
            .unwrap_or("sticky")
            .split(',')
            .map(|s| s.trim().to_string())
            .collect();
        if !registered.contains(name) {
            return Err(format!(
                "streams.assignor.name '{name}' is not a registered task assignor. Registered assignors are: [{}].",
                registered.join(", ")
            ));
        }
    }
    for [(session, session_default), (heartbeat, heartbeat_default)] in SESSION_HEARTBEAT_PAIRS {
        if !overrides.contains_key(*session) && !overrides.contains_key(*heartbeat) {
            continue;
        }
        let s = int(overrides, session).unwrap_or_else(|| broker_int(broker, session_default));
        let h = int(overrides, heartbeat).unwrap_or_else(|| broker_int(broker, heartbeat_default));
        if s <= h {
            return Err(format!("{session} must be greater than {heartbeat}"));
        }
    }
    let dlq = overrides.get("errors.deadletterqueue.topic.name");
    if dlq.is_some_and(|t| t.starts_with("__")) {
        return Err(
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'".into(),
        );
    }
    Ok(())
}

/// A group's override of a bounded key, clamped to the broker's current bounds (Kafka's
/// `GroupConfig.evaluate` clamps each, logging, when the broker's bounds no longer allow
/// it); `None` when the group does not set it.
pub fn clamped(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
    key: &str,
) -> Option<i64> {
    let v = int(overrides, key)?;
    let Some((_, min_key, max_key)) = BOUNDED_KEYS.iter().find(|(k, _, _)| *k == key) else {
        return Some(v);
    };
    let max = broker_int(broker, max_key);
    let min = min_key.map_or(i64::MIN, |k| broker_int(broker, k));
    Some(v.clamp(min, max.max(min)))
}

/// A group's session timeout and heartbeat interval (`prefix` is `consumer` or `share`): its
/// overrides, clamped ([`clamped`]), else the broker's values.
pub fn group_timing(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
    prefix: &str,
    (session_ms, heartbeat_ms): (i32, i32),
) -> (i32, i32) {
    let get =
        |key: String, default: i32| clamped(broker, overrides, &key).map_or(default, |v| v as i32);
    (
        get(format!("{prefix}.session.timeout.ms"), session_ms),
        get(format!("{prefix}.heartbeat.interval.ms"), heartbeat_ms),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pairs: &[(&str, &str)]) -> Result<(), String> {
        let broker = BrokerConfig::load(None, &[]).unwrap();
        let overrides = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        validate(&broker, &overrides)
    }

    #[test]
    fn group_configs_are_checked_as_kafkas_group_config_validate() {
        assert_eq!(check(&[("consumer.session.timeout.ms", "50000")]), Ok(()));
        assert_eq!(check(&[("streams.task.offset.interval.ms", "5")]), Ok(()));
        assert_eq!(
            check(&[("no.such.key", "1")]),
            Err("Unknown group config name: no.such.key".into())
        );
        assert_eq!(
            check(&[("consumer.session.timeout.ms", "40000")]),
            Err(
                "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.".into()
            )
        );
        assert_eq!(
            check(&[("streams.num.standby.replicas", "3")]),
            Err("streams.num.standby.replicas must be less than or equal to 2".into())
        );
        // The broker's default heartbeat (5000) against an overridden session timeout, and
        // both overridden: the session must be the longer.
        assert_eq!(
            check(&[
                ("share.session.timeout.ms", "45000"),
                ("share.heartbeat.interval.ms", "15000")
            ]),
            Ok(())
        );
        // ShareGroupAutoOffsetResetStrategy.Validator: `none` is a consumer strategy only.
        assert_eq!(
            check(&[("share.auto.offset.reset", "by_duration:PT1H")]),
            Ok(())
        );
        assert_eq!(
            check(&[("share.auto.offset.reset", "none")]),
            Err("Invalid value none for configuration share.auto.offset.reset: Invalid value `none` \
                 for configuration share.auto.offset.reset. The value must be either 'earliest', \
                 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
                .into())
        );
        assert!(check(&[("consumer.heartbeat.interval.ms", "x")])
            .unwrap_err()
            .starts_with("Invalid value x for configuration consumer.heartbeat.interval.ms"));
        assert_eq!(
            check(&[("errors.deadletterqueue.topic.name", "__dlq")]),
            Err(
                "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'".into()
            )
        );
        assert_eq!(
            check(&[("streams.assignor.name", "fancy")]),
            Err("streams.assignor.name 'fancy' is not a registered task assignor. Registered assignors are: [sticky].".into())
        );
        assert_eq!(
            check(&[("streams.rack.aware.assignment.tags", "a, b,a")]),
            Err("streams.rack.aware.assignment.tags must not contain duplicate tag keys.".into())
        );
    }

    #[test]
    fn group_timing_takes_overrides_capped_to_the_brokers_bounds() {
        let broker = BrokerConfig::load(None, &[]).unwrap();
        let o = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            group_timing(&broker, &o(&[]), "consumer", (45_000, 5000)),
            (45_000, 5000)
        );
        assert_eq!(
            group_timing(
                &broker,
                &o(&[
                    ("consumer.session.timeout.ms", "50000"),
                    ("consumer.heartbeat.interval.ms", "99999")
                ]),
                "consumer",
                (45_000, 5000)
            ),
            (50_000, 15_000)
        );
    }
}
