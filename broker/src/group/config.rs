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
        let keys = Keys(c);
        let delay = keys.non_negative_i32("group.initial.rebalance.delay.ms")?;
        let (heartbeat_interval_ms, session_timeout_ms) = consumer_timing(&keys)?;
        Ok(GroupConfig {
            classic: ClassicLimits {
                min_session_timeout_ms: keys.positive_i32("group.min.session.timeout.ms")?,
                max_session_timeout_ms: keys.positive_i32("group.max.session.timeout.ms")?,
                max_size: keys.positive_i32("group.max.size")? as usize,
                initial_rebalance_delay_ms: delay,
            },
            consumer: ConsumerLimits {
                session_timeout_ms,
                heartbeat_interval_ms,
                max_size: keys.positive_i32("group.consumer.max.size")? as usize,
            },
            share: share::ShareLimits {
                session_timeout_ms: keys.positive_i32("group.share.session.timeout.ms")?,
                heartbeat_interval_ms: keys.positive_i32("group.share.heartbeat.interval.ms")?,
                max_size: keys.positive_i32("group.share.max.size")? as usize,
            },
            streams: streams_limits(&keys)?,
            offsets_partitions: keys.positive_i32("offsets.topic.num.partitions")?,
            offset_metadata_max_bytes: keys.positive_i32("offset.metadata.max.bytes")? as usize,
            offsets_retention_ms: keys.positive_i32("offsets.retention.minutes")? as i64 * 60_000,
            offsets_retention_check_interval_ms: keys
                .positive_i64("offsets.retention.check.interval.ms")?
                as u64,
            offsets_replication_factor: {
                let rf = keys.positive_i32("offsets.topic.replication.factor")?;
                i16::try_from(rf).map_err(|_| ConfigError::InvalidValue {
                    key: "offsets.topic.replication.factor".into(),
                    value: rf.to_string(),
                    reason: "must fit a 16-bit number".into(),
                })?
            },
            offsets_commit_timeout_ms: keys.positive_i32("offsets.commit.timeout.ms")?,
            migration_policy: migration_policy(c)?,
        })
    }
}

/// The broker config's values, read as numbers with Kafka's range checks.
struct Keys<'a>(&'a BrokerConfig);

impl Keys<'_> {
    fn get(&self, k: &str) -> Result<i64, ConfigError> {
        let v = self.0.values.get(k).cloned().unwrap_or_default();
        v.trim()
            .parse::<i64>()
            .map_err(|_| ConfigError::InvalidValue {
                key: k.into(),
                value: v.clone(),
                reason: "not a number".into(),
            })
    }

    fn positive_i32(&self, k: &str) -> Result<i32, ConfigError> {
        self.i32_at_least(k, 1, "must be a positive 32-bit number")
    }

    fn non_negative_i32(&self, k: &str) -> Result<i32, ConfigError> {
        self.i32_at_least(k, 0, "must be 0 or more")
    }

    /// A 32-bit value of at least `min`, refused with `reason` otherwise.
    fn i32_at_least(&self, k: &str, min: i64, reason: &str) -> Result<i32, ConfigError> {
        let v = self.get(k)?;
        if !(min..=i32::MAX as i64).contains(&v) {
            return Err(ConfigError::InvalidValue {
                key: k.into(),
                value: v.to_string(),
                reason: reason.into(),
            });
        }
        Ok(v as i32)
    }

    fn positive_i64(&self, k: &str) -> Result<i64, ConfigError> {
        let v = self.get(k)?;
        if v <= 0 {
            return Err(ConfigError::InvalidValue {
                key: k.into(),
                value: v.to_string(),
                reason: "must be positive".into(),
            });
        }
        Ok(v)
    }

    /// A KIP-848 timing key (`name` after `group.consumer.`), within its `min.` and `max.`
    /// bounds, which must be in order: Kafka refuses to start otherwise.
    fn bounded(&self, name: &str) -> Result<i32, ConfigError> {
        let key = |bound: &str| format!("group.consumer.{bound}{name}");
        let (value, min, max) = (
            self.positive_i32(&key(""))?,
            self.positive_i32(&key("min."))?,
            self.positive_i32(&key("max."))?,
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
    }
}

/// KIP-848 timing: (heartbeat interval, session timeout), each within its bounds and the
/// interval below the timeout.
fn consumer_timing(keys: &Keys<'_>) -> Result<(i32, i32), ConfigError> {
    let heartbeat_interval_ms = keys.bounded("heartbeat.interval.ms")?;
    let session_timeout_ms = keys.bounded("session.timeout.ms")?;
    if heartbeat_interval_ms >= session_timeout_ms {
        return Err(ConfigError::InvalidValue {
            key: "group.consumer.heartbeat.interval.ms".into(),
            value: heartbeat_interval_ms.to_string(),
            reason: "must be less than group.consumer.session.timeout.ms".into(),
        });
    }
    Ok((heartbeat_interval_ms, session_timeout_ms))
}

/// `group.streams.*` (Kafka's `GroupCoordinatorConfig` streams keys).
fn streams_limits(keys: &Keys<'_>) -> Result<streams::StreamsLimits, ConfigError> {
    Ok(streams::StreamsLimits {
        session_timeout_ms: keys.positive_i32("group.streams.session.timeout.ms")?,
        heartbeat_interval_ms: keys.positive_i32("group.streams.heartbeat.interval.ms")?,
        // Kafka refuses more than `group.streams.max.standby.replicas` (2).
        num_standby_replicas: keys.get("group.streams.num.standby.replicas")?.clamp(0, 2) as i32,
        max_size: keys.positive_i32("group.streams.max.size")? as usize,
        initial_rebalance_delay_ms: keys
            .non_negative_i32("group.streams.initial.rebalance.delay.ms")?,
    })
}

/// `group.consumer.migration.policy`.
fn migration_policy(c: &BrokerConfig) -> Result<migration::MigrationPolicy, ConfigError> {
    let key = "group.consumer.migration.policy";
    let v = c.values.get(key).cloned().unwrap_or_default();
    migration::MigrationPolicy::parse(&v).ok_or_else(|| ConfigError::InvalidValue {
        key: key.into(),
        value: v,
        reason: "must be one of disabled, upgrade, downgrade, bidirectional".into(),
    })
}
