//! The coordinator's settings, read from the broker config with Kafka's key names (Kafka's
//! `GroupCoordinatorConfig`).

use super::*;

/// The coordinator's settings, read from the broker config with Kafka's key names.
#[derive(Debug, Clone, Copy)]
pub struct GroupConfig {
    pub classic: ClassicLimits,
    pub consumer: ConsumerLimits,
    pub share: share::ShareLimits,
    /// `group.streams.*`.
    pub streams: streams::StreamsLimits,
    /// `offsets.topic.num.partitions`.
    pub offsets_partitions: i32,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes`, in ms.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`: how often expired offsets and empty groups
    /// are cleaned up.
    pub offsets_retention_check_interval_ms: u64,
    /// `offsets.topic.replication.factor`: used when a cluster creates the offsets topic.
    /// As in Kafka, creation fails while fewer brokers are alive.
    pub offsets_replication_factor: i16,
    /// `offsets.commit.timeout.ms`: how long a commit waits for the offsets partition's
    /// high watermark before it is answered COORDINATOR_NOT_AVAILABLE.
    pub offsets_commit_timeout_ms: i32,
    /// `group.consumer.migration.policy`.
    pub migration_policy: migration::MigrationPolicy,
}

impl GroupConfig {
    /// Reads the group keys from the broker config.
    pub fn from_broker(c: &BrokerConfig) -> Result<Self, ConfigError> {
        let get = |k: &str| -> Result<i64, ConfigError> {
            let v = c.values.get(k).cloned().unwrap_or_default();
            v.trim()
                .parse::<i64>()
                .map_err(|_| ConfigError::InvalidValue {
                    key: k.into(),
                    value: v.clone(),
                    reason: "not a number".into(),
                })
        };
        let positive_i32 = |k: &str| -> Result<i32, ConfigError> {
            let v = get(k)?;
            if v <= 0 || v > i32::MAX as i64 {
                return Err(ConfigError::InvalidValue {
                    key: k.into(),
                    value: v.to_string(),
                    reason: "must be a positive 32-bit number".into(),
                });
            }
            Ok(v as i32)
        };
        let positive_i64 = |k: &str| -> Result<i64, ConfigError> {
            let v = get(k)?;
            if v <= 0 {
                return Err(ConfigError::InvalidValue {
                    key: k.into(),
                    value: v.to_string(),
                    reason: "must be positive".into(),
                });
            }
            Ok(v)
        };
        let delay = get("group.initial.rebalance.delay.ms")?;
        if !(0..=i32::MAX as i64).contains(&delay) {
            return Err(ConfigError::InvalidValue {
                key: "group.initial.rebalance.delay.ms".into(),
                value: delay.to_string(),
                reason: "must be 0 or more".into(),
            });
        }
        let max_size = positive_i32("group.max.size")? as usize;
        // KIP-848 timing: the broker's own interval and timeout must sit within their bounds,
        // and the interval below the timeout. Kafka refuses to start otherwise.
        let bounded = |name: &str| -> Result<i32, ConfigError> {
            let key = |bound: &str| format!("group.consumer.{bound}{name}");
            let (value, min, max) = (
                positive_i32(&key(""))?,
                positive_i32(&key("min."))?,
                positive_i32(&key("max."))?,
            );
            let fail = |k: String, v: i32, reason: String| ConfigError::InvalidValue {
                key: k,
                value: v.to_string(),
                reason,
            };
            if max < min {
                return Err(fail(
                    key("max."),
                    max,
                    format!("must be greater than or equal to {} ({min})", key("min.")),
                ));
            }
            if !(min..=max).contains(&value) {
                return Err(fail(
                    key(""),
                    value,
                    format!(
                        "must be within {} ({min}) and {} ({max})",
                        key("min."),
                        key("max.")
                    ),
                ));
            }
            Ok(value)
        };
        let heartbeat_interval_ms = bounded("heartbeat.interval.ms")?;
        let session_timeout_ms = bounded("session.timeout.ms")?;
        if heartbeat_interval_ms >= session_timeout_ms {
            return Err(ConfigError::InvalidValue {
                key: "group.consumer.heartbeat.interval.ms".into(),
                value: heartbeat_interval_ms.to_string(),
                reason: "must be less than group.consumer.session.timeout.ms".into(),
            });
        }
        Ok(GroupConfig {
            classic: ClassicLimits {
                min_session_timeout_ms: positive_i32("group.min.session.timeout.ms")?,
                max_session_timeout_ms: positive_i32("group.max.session.timeout.ms")?,
                max_size,
                initial_rebalance_delay_ms: delay as i32,
            },
            consumer: ConsumerLimits {
                session_timeout_ms,
                heartbeat_interval_ms,
                max_size: positive_i32("group.consumer.max.size")? as usize,
            },
            share: share::ShareLimits {
                session_timeout_ms: positive_i32("group.share.session.timeout.ms")?,
                heartbeat_interval_ms: positive_i32("group.share.heartbeat.interval.ms")?,
                max_size: positive_i32("group.share.max.size")? as usize,
            },
            streams: streams::StreamsLimits {
                session_timeout_ms: positive_i32("group.streams.session.timeout.ms")?,
                heartbeat_interval_ms: positive_i32("group.streams.heartbeat.interval.ms")?,
                // Kafka refuses more than `group.streams.max.standby.replicas` (2).
                num_standby_replicas: get("group.streams.num.standby.replicas")?.clamp(0, 2) as i32,
                max_size: positive_i32("group.streams.max.size")? as usize,
            },
            offsets_partitions: positive_i32("offsets.topic.num.partitions")?,
            offset_metadata_max_bytes: positive_i32("offset.metadata.max.bytes")? as usize,
            offsets_retention_ms: positive_i32("offsets.retention.minutes")? as i64 * 60_000,
            offsets_retention_check_interval_ms: positive_i64(
                "offsets.retention.check.interval.ms",
            )? as u64,
            offsets_replication_factor: {
                let rf = positive_i32("offsets.topic.replication.factor")?;
                i16::try_from(rf).map_err(|_| ConfigError::InvalidValue {
                    key: "offsets.topic.replication.factor".into(),
                    value: rf.to_string(),
                    reason: "must fit a 16-bit number".into(),
                })?
            },
            offsets_commit_timeout_ms: positive_i32("offsets.commit.timeout.ms")?,
            migration_policy: {
                let key = "group.consumer.migration.policy";
                let v = c.values.get(key).cloned().unwrap_or_default();
                migration::MigrationPolicy::parse(&v).ok_or_else(|| ConfigError::InvalidValue {
                    key: key.into(),
                    value: v,
                    reason: "must be one of disabled, upgrade, downgrade, bidirectional".into(),
                })?
            },
        })
    }
}
