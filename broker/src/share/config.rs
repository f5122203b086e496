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

/// Kafka's `ShareGroupAutoOffsetResetStrategy`: where a new share-partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoOffsetReset {
    /// The log start offset.
    Earliest,
    /// The high watermark (Kafka's default).
    Latest,
    /// The first offset whose timestamp is at or after now minus this many milliseconds.
    ByDurationMs(i64),
}

impl AutoOffsetReset {
    /// Kafka's `ShareGroupAutoOffsetResetStrategy.fromString` (through the client's
    /// `AutoOffsetResetStrategy.fromString`): `earliest`, `latest`, or
    /// `by_duration:<ISO-8601 duration>` not negative; `none` is not a share strategy.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "earliest" => Some(AutoOffsetReset::Earliest),
            "latest" => Some(AutoOffsetReset::Latest),
            v => {
                let duration = v.strip_prefix("by_duration:")?;
                iso8601_duration_ms(duration)
                    .filter(|ms| *ms >= 0)
                    .map(AutoOffsetReset::ByDurationMs)
            }
        }
    }
}

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

/// Java's `Duration.parse` in milliseconds: `[-+]P[nD][T[nH][nM][n[.f]S]]`, letters in either
/// case, each number optionally signed, at least one part; `None` when it does not parse.
pub fn iso8601_duration_ms(text: &str) -> Option<i64> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let rest = rest.strip_prefix(['P', 'p'])?;
    let (date, time) = match rest.find(['T', 't']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let mut total: i128 = 0;
    let mut parts = 0;
    if !date.is_empty() {
        let days = date.strip_suffix(['D', 'd'])?;
        total += parse_signed(days)? * 86_400_000;
        parts += 1;
    }
    if let Some(mut time) = time {
        if time.is_empty() {
            return None;
        }
        for (unit, ms) in [(['H', 'h'], 3_600_000i128), (['M', 'm'], 60_000)] {
            if let Some(i) = time.find(unit) {
                total += parse_signed(&time[..i])? * ms;
                time = &time[i + 1..];
                parts += 1;
            }
        }
        if !time.is_empty() {
            total += seconds_ms(time.strip_suffix(['S', 's'])?)?;
            parts += 1;
        }
    }
    if parts == 0 {
        return None;
    }
    let total = if negative { -total } else { total };
    i64::try_from(total).ok()
}

fn parse_signed(s: &str) -> Option<i128> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i128>().ok()
}

/// `n[.f]` seconds (up to 9 fraction digits), in milliseconds.
fn seconds_ms(s: &str) -> Option<i128> {
    let (whole, fraction) = match s.find(['.', ',']) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    };
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = parse_signed(whole)?;
    let nanos: i128 = format!("{fraction:0<9}").parse().ok()?;
    let nanos = if whole.starts_with('-') {
        -nanos
    } else {
        nanos
    };
    Some(secs * 1000 + nanos / 1_000_000)
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
