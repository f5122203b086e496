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
    /// Reads the group keys from the broker config, checked in the order Brook has always
    /// checked them: the classic group's rebalance delay and size, the consumer group's
    /// timing, the classic session bounds, then the consumer, share and streams families and
    /// the offsets keys (Kafka's `GroupCoordinatorConfig`).
    pub fn from_broker(c: &BrokerConfig) -> Result<Self, ConfigError> {
        let initial_rebalance_delay_ms = initial_rebalance_delay_ms(c)?;
        let max_size = positive_i32(c, "group.max.size")? as usize;
        let (heartbeat_interval_ms, session_timeout_ms) = consumer_timing(c)?;
        Ok(GroupConfig {
            classic: ClassicLimits {
                min_session_timeout_ms: positive_i32(c, "group.min.session.timeout.ms")?,
                max_session_timeout_ms: positive_i32(c, "group.max.session.timeout.ms")?,
                max_size,
                initial_rebalance_delay_ms,
            },
            consumer: ConsumerLimits {
                session_timeout_ms,
                heartbeat_interval_ms,
                max_size: positive_i32(c, "group.consumer.max.size")? as usize,
                assignment_interval_ms: assignment_interval_ms(c, "consumer")?,
            },
            share: share_limits(c)?,
            streams: streams_limits(c)?,
            offsets_partitions: positive_i32(c, "offsets.topic.num.partitions")?,
            offset_metadata_max_bytes: positive_i32(c, "offset.metadata.max.bytes")? as usize,
            offsets_retention_ms: positive_i32(c, "offsets.retention.minutes")? as i64 * 60_000,
            offsets_retention_check_interval_ms: positive_i64(
                c,
                "offsets.retention.check.interval.ms",
            )? as u64,
            offsets_replication_factor: offsets_replication_factor(c)?,
            offsets_commit_timeout_ms: positive_i32(c, "offsets.commit.timeout.ms")?,
            migration_policy: migration_policy(c)?,
        })
    }
}

/// The key's value as a number (shared with `share::SharePartitionManager::from_config`).
pub(crate) fn get(c: &BrokerConfig, k: &str) -> Result<i64, ConfigError> {
    let v = c.values.get(k).cloned().unwrap_or_default();
    v.trim()
        .parse::<i64>()
        .map_err(|_| ConfigError::InvalidValue {
            key: k.into(),
            value: v.clone(),
            reason: "not a number".into(),
        })
}

/// The key's value as a positive 32-bit number.
fn positive_i32(c: &BrokerConfig, k: &str) -> Result<i32, ConfigError> {
    let v = get(c, k)?;
    if v <= 0 || v > i32::MAX as i64 {
        return Err(ConfigError::InvalidValue {
            key: k.into(),
            value: v.to_string(),
            reason: "must be a positive 32-bit number".into(),
        });
    }
    Ok(v as i32)
}

/// The key's value as a positive 64-bit number.
fn positive_i64(c: &BrokerConfig, k: &str) -> Result<i64, ConfigError> {
    let v = get(c, k)?;
    if v <= 0 {
        return Err(ConfigError::InvalidValue {
            key: k.into(),
            value: v.to_string(),
            reason: "must be positive".into(),
        });
    }
    Ok(v)
}

/// `group.initial.rebalance.delay.ms` (classic groups): 0 or more.
fn initial_rebalance_delay_ms(c: &BrokerConfig) -> Result<i32, ConfigError> {
    non_negative_i32(c, "group.initial.rebalance.delay.ms")
}

/// A 32-bit value of 0 or more (a delay in milliseconds).
fn non_negative_i32(c: &BrokerConfig, k: &str) -> Result<i32, ConfigError> {
    let delay = get(c, k)?;
    if !(0..=i32::MAX as i64).contains(&delay) {
        return Err(ConfigError::InvalidValue {
            key: k.into(),
            value: delay.to_string(),
            reason: "must be 0 or more".into(),
        });
    }
    Ok(delay as i32)
}

/// KIP-848 timing, `(heartbeat interval, session timeout)`: the broker's own interval and
/// timeout must sit within their bounds, and the interval below the timeout. Kafka refuses
/// to start otherwise.
fn consumer_timing(c: &BrokerConfig) -> Result<(i32, i32), ConfigError> {
    let heartbeat_interval_ms = consumer_bounded(c, "heartbeat.interval.ms")?;
    let session_timeout_ms = consumer_bounded(c, "session.timeout.ms")?;
    if heartbeat_interval_ms >= session_timeout_ms {
        return Err(ConfigError::InvalidValue {
            key: "group.consumer.heartbeat.interval.ms".into(),
            value: heartbeat_interval_ms.to_string(),
            reason: "must be less than group.consumer.session.timeout.ms".into(),
        });
    }
    Ok((heartbeat_interval_ms, session_timeout_ms))
}

/// `group.consumer.{name}`, within `group.consumer.min.{name}` and `group.consumer.max.{name}`.
fn consumer_bounded(c: &BrokerConfig, name: &str) -> Result<i32, ConfigError> {
    let key = |bound: &str| format!("group.consumer.{bound}{name}");
    let (value, min, max) = (
        positive_i32(c, &key(""))?,
        positive_i32(c, &key("min."))?,
        positive_i32(c, &key("max."))?,
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

/// `group.{family}.assignment.interval.ms` (KIP-1263), 0 or more and within
/// `group.{family}.min.assignment.interval.ms` and `group.{family}.max.assignment.interval.ms`,
/// as Kafka's `GroupCoordinatorConfig` requires.
fn assignment_interval_ms(c: &BrokerConfig, family: &str) -> Result<i32, ConfigError> {
    let key = |bound: &str| format!("group.{family}.{bound}assignment.interval.ms");
    // Kafka's default where the broker's file does not set the key.
    let with_default = |k: &str| -> Result<i32, ConfigError> {
        if c.values.contains_key(k) {
            return non_negative_i32(c, k);
        }
        Ok(crate::config_def::kafka_broker_key(k)
            .and_then(|d| d.default)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0))
    };
    let value = with_default(&key(""))?;
    let (min, max) = (with_default(&key("min."))?, with_default(&key("max."))?);
    if !(min..=max).contains(&value) {
        return Err(ConfigError::InvalidValue {
            key: key(""),
            value: value.to_string(),
            reason: format!(
                "must be within {} ({min}) and {} ({max})",
                key("min."),
                key("max.")
            ),
        });
    }
    Ok(value)
}

/// `group.share.*` (Kafka's `ShareGroupConfig` family).
fn share_limits(c: &BrokerConfig) -> Result<share::ShareLimits, ConfigError> {
    Ok(share::ShareLimits {
        session_timeout_ms: positive_i32(c, "group.share.session.timeout.ms")?,
        heartbeat_interval_ms: positive_i32(c, "group.share.heartbeat.interval.ms")?,
        max_size: positive_i32(c, "group.share.max.size")? as usize,
    })
}

/// `group.streams.*` (the streams family of Kafka's `GroupCoordinatorConfig`).
fn streams_limits(c: &BrokerConfig) -> Result<streams::StreamsLimits, ConfigError> {
    Ok(streams::StreamsLimits {
        session_timeout_ms: positive_i32(c, "group.streams.session.timeout.ms")?,
        heartbeat_interval_ms: positive_i32(c, "group.streams.heartbeat.interval.ms")?,
        // Kafka refuses more than `group.streams.max.standby.replicas` (2).
        num_standby_replicas: get(c, "group.streams.num.standby.replicas")?.clamp(0, 2) as i32,
        max_size: positive_i32(c, "group.streams.max.size")? as usize,
        initial_rebalance_delay_ms: non_negative_i32(
            c,
            "group.streams.initial.rebalance.delay.ms",
        )?,
    })
}

/// `offsets.topic.replication.factor`, which must fit a 16-bit number.
fn offsets_replication_factor(c: &BrokerConfig) -> Result<i16, ConfigError> {
    let rf = positive_i32(c, "offsets.topic.replication.factor")?;
    i16::try_from(rf).map_err(|_| ConfigError::InvalidValue {
        key: "offsets.topic.replication.factor".into(),
        value: rf.to_string(),
        reason: "must fit a 16-bit number".into(),
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
