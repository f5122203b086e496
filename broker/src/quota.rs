//! Client byte-rate quotas on the broker (Kafka's `ClientQuotaManager` with its
//! `DefaultQuotaCallback`): per (user principal, client-id) a sampled rate of produced or
//! fetched bytes, held to the quota the image's `ClientQuota`s resolve for it, and the
//! throttle time a request over it earns (Kafka's `QuotaUtils.throttleTime`).
//!
//! Kafka's KIP-219 throttling: the answer goes out at once, carrying `throttle_time_ms`, and
//! the connection is not read for that long afterwards (`connection` mutes it).
//!
//! The limits come from the applied image: each check compares the image's quota map with
//! the one the manager last derived its entities from, by pointer, and re-derives only on a
//! change, so a quota altered on any node applies to the next request. With no quota of the
//! manager's key anywhere, a check is that comparison and one branch (Kafka's
//! `quotasEnabled`).
//!
//! `controller_mutation_rate` is held by a token bucket instead of a sampled rate (Kafka's
//! `ControllerMutationQuotaManager` with its `TokenBucket`): partitions created or deleted
//! take tokens, which refill at the quota up to `controller.quota.window.num` windows of
//! `controller.quota.window.size.seconds` worth. Kafka holds it on the active controller,
//! which every broker forwards CreateTopics, CreatePartitions and DeleteTopics to; Brook
//! holds it on the broker that takes the request (`api::topics`), so a client spreading its
//! mutations over several brokers gets the quota once per broker.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use brook_controller::client_quota_control::{
    CONNECTION_CREATION_RATE, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, ENTITY_CLIENT_ID,
    ENTITY_IP, ENTITY_USER, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
};
use brook_controller::image::ClientQuotas;

/// Kafka's `ClientQuotaManager.InactiveSensorExpirationTimeSeconds`: a client's rate is
/// forgotten after an hour without requests.
pub const INACTIVE_SENSOR_EXPIRATION_MS: i64 = 3_600_000;

/// Rates held before idle ones are swept (at most once per new rate beyond it).
pub const SENSORS_SWEEP_AT: usize = 4096;

/// The quota types Brook enforces (Kafka's `QuotaType`, named as Kafka prints them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaType {
    Produce,
    Fetch,
    Request,
    ControllerMutation,
}

impl QuotaType {
    /// Kafka's `QuotaType.toString`, the `quota_type` label of the metrics.
    pub fn name(self) -> &'static str {
        match self {
            QuotaType::Produce => "Produce",
            QuotaType::Fetch => "Fetch",
            QuotaType::Request => "Request",
            QuotaType::ControllerMutation => "ControllerMutation",
        }
    }

    /// The quota key this type is held to.
    fn key(self) -> &'static str {
        match self {
            QuotaType::Produce => PRODUCER_BYTE_RATE,
            QuotaType::Fetch => CONSUMER_BYTE_RATE,
            QuotaType::Request => REQUEST_PERCENTAGE,
            QuotaType::ControllerMutation => CONTROLLER_MUTATION_RATE,
        }
    }
}

/// `quota.window.num` and `quota.window.size.seconds` (Kafka's `ClientQuotaManagerConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaWindow {
    pub samples: usize,
    pub window_ms: i64,
}

/// One sample of a rate (Kafka's `SampledStat.Sample` of a `WindowedSum`).
#[derive(Debug, Clone, Copy)]
struct Sample {
    value: f64,
    start_ms: i64,
    last_event_ms: i64,
}

impl Sample {
    fn new(now: i64) -> Sample {
        Sample {
            value: 0.0,
            start_ms: now,
            last_event_ms: now,
        }
    }
}

/// A sampled rate in units per second (Kafka's `Rate` over a `WindowedSum`): up to
/// `samples + 1` samples of `window_ms` each, the oldest reused as time moves on.
#[derive(Debug)]
struct SampledRate {
    samples: Vec<Sample>,
    current: usize,
}

impl SampledRate {
    fn new() -> SampledRate {
        SampledRate {
            samples: Vec::new(),
            current: 0,
        }
    }

    /// `SampledStat.record`: into the current sample, or the next one if it is complete.
    fn record(&mut self, w: QuotaWindow, value: f64, now: i64) {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now));
        }
        if now - self.samples[self.current].start_ms >= w.window_ms {
            // One spare sample beyond `samples` (Kafka's "overlapping sample").
            self.current = (self.current + 1) % (w.samples + 1);
            if self.current >= self.samples.len() {
                self.samples.push(Sample::new(now));
            } else {
                self.samples[self.current] = Sample::new(now);
            }
        }
        let s = &mut self.samples[self.current];
        s.value += value;
        s.last_event_ms = now;
    }

    /// `SampledStat.purgeObsoleteSamples`: samples with no event within the whole window
    /// start over. A burst recorded in one sample therefore leaves the rate all at once, and a
    /// client held back by it may burst again then; Kafka 4.4 does the same (issue 33, the
    /// test `a_client_waiting_out_its_throttle_sees_kafkas_throttle_times`).
    fn purge(&mut self, w: QuotaWindow, now: i64) {
        let expire_age = w.samples as i64 * w.window_ms;
        for s in &mut self.samples {
            if now - s.last_event_ms >= expire_age {
                *s = Sample::new(now);
            }
        }
    }

    /// `Rate.windowSize`: the time the samples span, at least `samples - 1` full windows.
    fn window_size_ms(&mut self, w: QuotaWindow, now: i64) -> i64 {
        self.purge(w, now);
        let oldest = self.samples.iter().map(|s| s.start_ms).min().unwrap_or(now);
        let mut elapsed = now - oldest;
        let full = elapsed / w.window_ms;
        let min_full = w.samples as i64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * w.window_ms;
        }
        elapsed.max(1)
    }

    /// `Rate.measure`: the samples' sum per second.
    fn measure(&mut self, w: QuotaWindow, now: i64) -> (f64, i64) {
        let window = self.window_size_ms(w, now);
        let sum: f64 = self.samples.iter().map(|s| s.value).sum();
        (sum / (window as f64 / 1000.0), window)
    }

    /// `Sensor.checkQuotas` with `QuotaUtils.boundedThrottleTime`: 0 while the rate is within
    /// `limit`, else the delay that brings it back to `limit`, at most `bound_ms`.
    fn throttle_ms(&mut self, w: QuotaWindow, limit: f64, now: i64, bound_ms: i64) -> i64 {
        let (rate, window_ms) = self.measure(w, now);
        if rate <= limit {
            return 0;
        }
        let throttle_ms = ((rate - limit) / limit * window_ms as f64).round() as i64;
        throttle_ms.min(bound_ms)
    }
}

/// A rate held to an upper bound on its own, outside any client's quotas (Kafka's `Sensor`
/// with a `Rate` stat and a `Quota`): the connection creation rates of
/// `net::connection_quotas`.
#[derive(Debug)]
pub struct RateQuota {
    rate: SampledRate,
    last_record_ms: i64,
}

impl RateQuota {
    pub fn new(now: i64) -> RateQuota {
        RateQuota {
            rate: SampledRate::new(),
            last_record_ms: now,
        }
    }

    /// `Sensor.record(value, now)` with its quota check: records `value`, then answers how
    /// long to throttle (0: within `limit`), at most `bound_ms`.
    pub fn record_and_get_throttle_ms(
        &mut self,
        w: QuotaWindow,
        limit: f64,
        value: f64,
        now: i64,
        bound_ms: i64,
    ) -> i64 {
        self.rate.record(w, value, now);
        self.last_record_ms = now;
        self.rate.throttle_ms(w, limit, now, bound_ms)
    }

    /// `Sensor.record(-value, now, false)`: takes back a recorded value, unchecked.
    pub fn unrecord(&mut self, w: QuotaWindow, value: f64, now: i64) {
        self.rate.record(w, -value, now);
    }

    /// When a value was last recorded (idle rates are swept after
    /// [`INACTIVE_SENSOR_EXPIRATION_MS`]).
    pub fn last_record_ms(&self) -> i64 {
        self.last_record_ms
    }
}

/// Kafka's `TokenBucket` stat: `tokens` refill at the quota per second up to a burst of
/// `samples * window * quota`; a client may mutate while it has any left, and goes below
/// zero by the mutation that exhausts them.
#[derive(Debug, Default)]
struct TokenBucket {
    tokens: f64,
    last_update_ms: i64,
}

impl TokenBucket {
    /// `TokenBucket.refill`. A new bucket (last update 0) starts full, as Kafka's does.
    fn refill(&mut self, w: QuotaWindow, quota: f64, now: i64) -> f64 {
        let burst = w.samples as f64 * (w.window_ms as f64 / 1000.0) * quota;
        let elapsed_s = (now - self.last_update_ms).max(0) as f64 / 1000.0;
        self.tokens = burst.min(self.tokens + quota * elapsed_s);
        self.last_update_ms = now;
        burst
    }

    /// `TokenBucket.measure`: the tokens left now.
    fn measure(&mut self, w: QuotaWindow, quota: f64, now: i64) -> f64 {
        self.refill(w, quota, now);
        self.tokens
    }

    /// `TokenBucket.record`: takes `value` tokens.
    fn record(&mut self, w: QuotaWindow, quota: f64, value: f64, now: i64) -> f64 {
        let burst = self.refill(w, quota, now);
        self.tokens = burst.min(self.tokens - value);
        self.tokens
    }
}

/// `ControllerMutationQuotaManager.throttleTimeMs`: how long the bucket takes to refill
/// from `tokens` (below zero) back to zero.
fn bucket_throttle_ms(tokens: f64, quota: f64) -> i64 {
    (-tokens / quota * 1000.0).round() as i64
}

/// One client's rate (or, for controller mutations, token bucket) and when it was last used.
#[derive(Debug)]
struct Sensor {
    rate: SampledRate,
    bucket: TokenBucket,
    last_record_ms: i64,
}

/// The quota entities of one key, as Kafka's `DefaultQuotaCallback.overriddenQuotas`: user
/// (`None` in the outer option: no user part; `Some(None)`: the default user) and client-id
/// alike.
type Overrides = HashMap<(Option<Option<String>>, Option<Option<String>>), f64>;

/// Which entity kinds have a quota (Kafka's `QuotaTypes` bits).
const CLIENT_ID_QUOTA: u8 = 1;
const USER_QUOTA: u8 = 2;
const USER_CLIENT_ID_QUOTA: u8 = 4;

#[derive(Debug, Default)]
struct State {
    /// The image's quota map the overrides were derived from.
    source: Option<Arc<ClientQuotas>>,
    overrides: Overrides,
    enabled: u8,
    /// Rates by metric tags (user tag, client-id tag).
    sensors: HashMap<(String, String), Sensor>,
}

/// One quota type's manager (Kafka's `ClientQuotaManager`).
#[derive(Debug)]
pub struct ClientQuotaManager {
    quota_type: QuotaType,
    window: QuotaWindow,
    state: Mutex<State>,
    /// Throttle time handed out, in ms, and how many times (Kafka's `throttle-time`
    /// sensor, exported as counters).
    throttle_time_ms_total: AtomicU64,
    throttled_total: AtomicU64,
}

impl ClientQuotaManager {
    pub fn new(quota_type: QuotaType, window: QuotaWindow) -> ClientQuotaManager {
        ClientQuotaManager {
            quota_type,
            window,
            state: Mutex::new(State::default()),
            throttle_time_ms_total: AtomicU64::new(0),
            throttled_total: AtomicU64::new(0),
        }
    }

    pub fn quota_type(&self) -> QuotaType {
        self.quota_type
    }

    /// Kafka's `maybeRecordAndGetThrottleTimeMs`: records `value` for (user, client-id) and
    /// returns the throttle time in ms if the rate is now over the quota; 0 without quotas.
    pub fn record_and_get_throttle_ms(
        &self,
        quotas: &Arc<ClientQuotas>,
        user: &str,
        client_id: &str,
        value: f64,
        now: i64,
    ) -> i32 {
        let mut st = self.state.lock();
        st.refresh(self.quota_type, quotas);
        if st.enabled == 0 {
            return 0;
        }
        let tags = st.metric_tags(user, client_id);
        let Some(limit) = st.quota_limit(&tags) else {
            st.sensor(tags, now).rate.record(self.window, value, now);
            return 0;
        };
        let sensor = st.sensor(tags, now);
        sensor.rate.record(self.window, value, now);
        // Request time is bounded by one window (Kafka's `ClientRequestQuotaManager`
        // passes `quota.window.size.seconds` to `QuotaUtils.boundedThrottleTime`).
        let bound_ms = match self.quota_type {
            QuotaType::Request => self.window.window_ms,
            _ => i32::MAX as i64,
        };
        sensor.rate.throttle_ms(self.window, limit, now, bound_ms) as i32
    }

    /// Kafka's `unrecordQuotaSensor`: takes back a recorded value (a throttled fetch sends
    /// no records).
    pub fn unrecord(&self, user: &str, client_id: &str, value: f64, now: i64) {
        let mut st = self.state.lock();
        if st.enabled == 0 {
            return;
        }
        let tags = st.metric_tags(user, client_id);
        st.sensor(tags, now).rate.record(self.window, -value, now);
    }

    /// Kafka's `getMaxValueInQuotaWindow`: the most a client may take in one request without
    /// being throttled, given nothing recorded yet; `None` without a quota.
    pub fn max_value_in_quota_window(
        &self,
        quotas: &Arc<ClientQuotas>,
        user: &str,
        client_id: &str,
    ) -> Option<f64> {
        let mut st = self.state.lock();
        st.refresh(self.quota_type, quotas);
        if st.enabled == 0 {
            return None;
        }
        let tags = st.metric_tags(user, client_id);
        let w = self.window;
        st.quota_limit(&tags)
            .map(|l| l * (w.samples as f64 - 1.0) * (w.window_ms as f64 / 1000.0))
    }

    /// The client's token bucket after taking `permits`: the tokens left and the quota, or
    /// `None` when no `controller_mutation_rate` applies to the client (Kafka's
    /// `UnboundedControllerMutationQuota`).
    fn take_tokens(
        &self,
        quotas: &Arc<ClientQuotas>,
        user: &str,
        client_id: &str,
        permits: f64,
        now: i64,
    ) -> Option<(f64, f64)> {
        let mut st = self.state.lock();
        st.refresh(self.quota_type, quotas);
        if st.enabled == 0 {
            return None;
        }
        let tags = st.metric_tags(user, client_id);
        let limit = st.quota_limit(&tags)?;
        let w = self.window;
        let bucket = &mut st.sensor(tags, now).bucket;
        let tokens = if permits == 0.0 {
            bucket.measure(w, limit, now)
        } else {
            bucket.record(w, limit, permits, now)
        };
        Some((tokens, limit))
    }

    /// Kafka's `ControllerMutationQuotaManager.newQuotaFor`: one request's quota, strict
    /// (mutations refused once the tokens are spent) or permissive (accepted, throttled).
    pub fn mutation_quota(
        &self,
        quotas: Arc<ClientQuotas>,
        user: &str,
        client_id: &str,
        strict: bool,
    ) -> ControllerMutationQuota<'_> {
        ControllerMutationQuota {
            manager: self,
            quotas,
            user: user.to_string(),
            client_id: client_id.to_string(),
            strict,
            kept: KeptThrottle::default(),
        }
    }

    /// Kafka's `throttle`: counts the throttle time (the channel is muted by the caller).
    pub fn throttle(&self, throttle_ms: i32) {
        if throttle_ms > 0 {
            self.throttle_time_ms_total
                .fetch_add(throttle_ms as u64, Ordering::Relaxed);
            self.throttled_total.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Total throttle time handed out (ms) and the number of throttled requests.
    pub fn throttle_totals(&self) -> (u64, u64) {
        (
            self.throttle_time_ms_total.load(Ordering::Relaxed),
            self.throttled_total.load(Ordering::Relaxed),
        )
    }
}

/// One request's controller mutation quota (Kafka's `StrictControllerMutationQuota` and
/// `PermissiveControllerMutationQuota`), asked once per topic the request mutates.
#[derive(Debug)]
pub struct ControllerMutationQuota<'a> {
    manager: &'a ClientQuotaManager,
    quotas: Arc<ClientQuotas>,
    user: String,
    client_id: String,
    strict: bool,
    kept: KeptThrottle,
}

/// A throttle time and when it was computed (Kafka's `AbstractControllerMutationQuota`
/// `lastThrottleTimeMs` and `lastRecordedTimeMs`): a request that goes on waiting on the
/// controller after it is told is throttled for what is left.
#[derive(Debug, Default, Clone, Copy)]
pub struct KeptThrottle {
    throttle_ms: i64,
    at_ms: i64,
}

impl KeptThrottle {
    /// Keeps `throttle_ms`, computed at `now`, in place of the one kept before.
    pub fn keep(&mut self, throttle_ms: i64, now: i64) {
        self.throttle_ms = throttle_ms;
        self.at_ms = now;
    }

    /// `AbstractControllerMutationQuota.throttleTime`: the kept throttle time less what has
    /// passed since.
    pub fn left_ms(&self, now: i64) -> i32 {
        let left = self.throttle_ms - (now - self.at_ms);
        left.clamp(0, i32::MAX as i64) as i32
    }
}

impl ControllerMutationQuota<'_> {
    /// A strict quota whose client has no tokens left: the mutation is refused with
    /// THROTTLING_QUOTA_EXCEEDED and the time until the bucket is back at zero kept for the
    /// answer (Kafka's strict `record`, which checks before it takes). `None` otherwise.
    pub fn exceeded(&mut self, now: i64) -> Option<i32> {
        if !self.strict {
            return None;
        }
        let (tokens, quota) =
            self.manager
                .take_tokens(&self.quotas, &self.user, &self.client_id, 0.0, now)?;
        if tokens >= 0.0 {
            return None;
        }
        let throttle_ms = bucket_throttle_ms(tokens, quota);
        self.kept.keep(throttle_ms, now);
        Some(throttle_ms as i32)
    }

    /// Takes `permits` (partitions created or deleted) for a mutation the controller
    /// accepted. A permissive quota that this takes below zero keeps the throttle time.
    pub fn record(&mut self, permits: usize, now: i64) {
        let taken = self.manager.take_tokens(
            &self.quotas,
            &self.user,
            &self.client_id,
            permits as f64,
            now,
        );
        if let Some((tokens, quota)) = taken {
            if !self.strict && tokens < 0.0 {
                self.kept.keep(bucket_throttle_ms(tokens, quota), now);
            }
        }
    }

    /// `AbstractControllerMutationQuota.throttleTime`: the kept throttle time less what has
    /// passed since (the request may have waited on the controller meanwhile).
    pub fn throttle_time_ms(&self, now: i64) -> i32 {
        self.kept.left_ms(now)
    }
}

impl State {
    /// Re-derives the overrides when the image's quota map is another one (Kafka's
    /// `updateQuota` calls, one per changed entity, come to the same).
    fn refresh(&mut self, quota_type: QuotaType, quotas: &Arc<ClientQuotas>) {
        if self.source.as_ref().is_some_and(|s| Arc::ptr_eq(s, quotas)) {
            return;
        }
        self.overrides.clear();
        self.enabled = 0;
        for (entity, keys) in quotas.iter() {
            let Some(v) = keys.get(quota_type.key()) else {
                continue;
            };
            let user = entity.get(ENTITY_USER).cloned();
            let client = entity.get(ENTITY_CLIENT_ID).cloned();
            self.enabled |= match (&user, &client) {
                (Some(_), Some(_)) => USER_CLIENT_ID_QUOTA,
                (Some(_), None) => USER_QUOTA,
                (None, Some(_)) => CLIENT_ID_QUOTA,
                // An IP entity has no byte rates.
                (None, None) => continue,
            };
            self.overrides.insert((user, client), v.get());
        }
        self.source = Some(quotas.clone());
    }

    fn has(&self, user: Option<Option<&str>>, client: Option<Option<&str>>) -> bool {
        self.get(user, client).is_some()
    }

    fn get(&self, user: Option<Option<&str>>, client: Option<Option<&str>>) -> Option<f64> {
        let key = (
            user.map(|u| u.map(str::to_string)),
            client.map(|c| c.map(str::to_string)),
        );
        self.overrides.get(&key).copied()
    }

    /// `DefaultQuotaCallback.quotaMetricTags`: which (user, client-id) a rate is kept for,
    /// from the most specific entity with a quota.
    fn metric_tags(&self, user: &str, client_id: &str) -> (String, String) {
        let (u, c) = (Some(Some(user)), Some(Some(client_id)));
        let (du, dc) = (Some(None), Some(None));
        let both = (user.to_string(), client_id.to_string());
        let user_only = (user.to_string(), String::new());
        let client_only = (String::new(), client_id.to_string());
        match self.enabled {
            0 | CLIENT_ID_QUOTA => client_only,
            USER_QUOTA => user_only,
            USER_CLIENT_ID_QUOTA => both,
            _ if self.has(u, c) || self.has(u, dc) => both,
            _ if self.has(u, None) => user_only,
            _ if self.has(du, c) || self.has(du, dc) => both,
            _ if self.has(du, None) => user_only,
            _ => client_only,
        }
    }

    /// `DefaultQuotaCallback.quotaLimit`: the quota of the tags' entity, falling back to
    /// defaults in Kafka's order.
    fn quota_limit(&self, (user, client): &(String, String)) -> Option<f64> {
        let (u, c) = (Some(Some(user.as_str())), Some(Some(client.as_str())));
        let (du, dc) = (Some(None), Some(None));
        match (user.is_empty(), client.is_empty()) {
            (false, false) => self
                .get(u, c)
                .or_else(|| self.get(u, dc))
                .or_else(|| self.get(du, c))
                .or_else(|| self.get(du, dc)),
            (false, true) => self.get(u, None).or_else(|| self.get(du, None)),
            (true, false) => self.get(None, c).or_else(|| self.get(None, dc)),
            (true, true) => None,
        }
    }

    /// The rate for `tags`, new if none; idle rates are swept once there are many.
    fn sensor(&mut self, tags: (String, String), now: i64) -> &mut Sensor {
        if !self.sensors.contains_key(&tags) && self.sensors.len() >= SENSORS_SWEEP_AT {
            self.sensors
                .retain(|_, s| now - s.last_record_ms < INACTIVE_SENSOR_EXPIRATION_MS);
        }
        let s = self.sensors.entry(tags).or_insert_with(|| Sensor {
            rate: SampledRate::new(),
            bucket: TokenBucket::default(),
            last_record_ms: now,
        });
        s.last_record_ms = now;
        s
    }
}

/// The broker's client quota managers (Kafka's `QuotaManagers.produce`, `.fetch`,
/// `.request` and `.controllerMutation`).
/// The `connection_creation_rate` an address is held to (Kafka's
/// `ConnectionQuotas.connectionRateForIp`): its own `ip` entity's, else the default `ip`
/// entity's, as an int; `None` when that is Kafka's default, `i32::MAX` (no quota).
pub fn ip_connection_creation_rate(quotas: &ClientQuotas, ip: std::net::IpAddr) -> Option<f64> {
    // Kafka resolves a named entity to an address; Brook's names are IP literals.
    let named = |name: &Option<String>| {
        name.as_deref()
            .is_some_and(|n| n.parse::<std::net::IpAddr>().ok() == Some(ip))
    };
    let default = |name: &Option<String>| name.is_none();
    let rate_of = |pick: &dyn Fn(&Option<String>) -> bool| {
        quotas
            .iter()
            .filter(|(e, _)| e.len() == 1 && e.get(ENTITY_IP).is_some_and(pick))
            .find_map(|(_, keys)| keys.get(CONNECTION_CREATION_RATE))
    };
    let rate = rate_of(&named).or_else(|| rate_of(&default))?.get() as i32;
    (rate != i32::MAX).then_some(f64::from(rate))
}

#[derive(Debug)]
pub struct QuotaManagers {
    pub produce: ClientQuotaManager,
    pub fetch: ClientQuotaManager,
    /// `request_percentage`: request time in percent of one thread (`api::request_quota`).
    pub request: ClientQuotaManager,
    pub controller_mutation: ClientQuotaManager,
}

impl QuotaManagers {
    /// `window` is `quota.window.*`, `controller_window` is `controller.quota.window.*`.
    pub fn new(window: QuotaWindow, controller_window: QuotaWindow) -> QuotaManagers {
        QuotaManagers {
            produce: ClientQuotaManager::new(QuotaType::Produce, window),
            fetch: ClientQuotaManager::new(QuotaType::Fetch, window),
            request: ClientQuotaManager::new(QuotaType::Request, window),
            controller_mutation: ClientQuotaManager::new(
                QuotaType::ControllerMutation,
                controller_window,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use brook_controller::client_quota_control::{QuotaEntity, QuotaValue};

    const W: QuotaWindow = QuotaWindow {
        samples: 11,
        window_ms: 1000,
    };

    /// An entity as (type, name) pairs.
    type Entity<'a> = &'a [(&'a str, Option<&'a str>)];

    fn quotas(entries: &[(Entity, f64)]) -> Arc<ClientQuotas> {
        let mut q = ClientQuotas::new();
        for (entity, v) in entries {
            let e: QuotaEntity = entity
                .iter()
                .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                .collect();
            q.insert(
                e,
                BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), QuotaValue::new(*v))]),
            );
        }
        Arc::new(q)
    }

    #[test]
    fn no_quota_never_throttles() {
        let m = ClientQuotaManager::new(QuotaType::Produce, W);
        let q = quotas(&[]);
        assert_eq!(m.record_and_get_throttle_ms(&q, "u", "c", 1e12, 0), 0);
    }

    #[test]
    fn throttle_time_brings_the_rate_back_to_the_quota() {
        // A quota of 500 B/s, 400 B in each of ten 1 s windows, then 2500 B at once.
        let m = ClientQuotaManager::new(QuotaType::Produce, W);
        let q = quotas(&[(&[("client-id", Some("c"))], 500.0)]);
        let mut now = 0;
        for _ in 0..10 {
            assert_eq!(m.record_and_get_throttle_ms(&q, "u", "c", 400.0, now), 0);
            now += 1000;
        }
        let t = m.record_and_get_throttle_ms(&q, "u", "c", 2500.0, now);
        // sum 6500 over a 10 s window: 650 B/s, (650 - 500) / 500 * 10000 = 3000 ms.
        assert_eq!(t, 3000);
    }

    /// A producer that sends `request_bytes` under a 1 MiB/s `producer_byte_rate` and then
    /// waits exactly the throttle time it is given (at least `gap_ms`) before its next
    /// request, as librdkafka waits out a Produce answer's `throttle_time_ms`, for 60
    /// simulated seconds. Returns each throttled request's index and throttle time, and each
    /// second's acknowledged bytes as a multiple of the quota.
    fn waiting_producer(request_bytes: f64, gap_ms: i64) -> (Vec<(usize, i32)>, Vec<f64>) {
        const QUOTA: f64 = 1_048_576.0;
        let m = ClientQuotaManager::new(QuotaType::Produce, W);
        let q = quotas(&[(&[("client-id", Some("c"))], QUOTA)]);
        let (start, end) = (1_000_000, 1_000_000 + 60_000);
        let (mut throttled, mut acked) = (Vec::new(), vec![0.0; 60]);
        let (mut now, mut n) = (start, 0);
        while now < end {
            let t = m.record_and_get_throttle_ms(&q, "u", "c", request_bytes, now);
            acked[((now - start) / 1000) as usize] += request_bytes / QUOTA;
            if t > 0 {
                throttled.push((n, t));
            }
            n += 1;
            now += i64::from(t).max(gap_ms);
        }
        (throttled, acked)
    }

    /// `QuotaModel.java`'s "throttled" line: `index:ms` pairs.
    fn kafka_throttled(line: &str) -> Vec<(usize, i32)> {
        let pair = |p: &str| {
            let (i, t) = p.split_once(':').expect("index:ms");
            (i.parse().expect("index"), t.parse().expect("ms"))
        };
        line.split(',').map(pair).collect()
    }

    /// Seconds holding more than two quotas' worth, and the mean of seconds 21..59.
    fn bursts_and_tail(acked: &[f64]) -> (Vec<usize>, f64) {
        let bursts = (0..acked.len()).filter(|&s| acked[s] > 2.0).collect();
        (
            bursts,
            acked[21..].iter().sum::<f64>() / acked[21..].len() as f64,
        )
    }

    #[test]
    fn a_client_waiting_out_its_throttle_sees_kafkas_throttle_times() {
        // What Kafka 4.4's own ClientQuotaManager (Sensor, Rate over a WindowedSum,
        // QuotaUtils.throttleTime) answers the same producer on a simulated clock:
        // benches/compare/QuotaModel.java with the 4.4.0 jars, arguments
        // `1048576 REQUEST_BYTES GAP_MS 60`.
        let whole_quota = kafka_throttled(WHOLE);
        let (throttled, acked) = waiting_producer(1_048_576.0, 0);
        assert_eq!(throttled, whole_quota);
        // What Kafka 4.4 does with it: the first window's burst (11 quotas: an empty rate is
        // measured over at least `samples - 1` windows), then about one quota a second, and
        // again a burst whenever the sample holding the last one has had no event for
        // `samples` windows and is purged at once (SampledStat.purgeObsoleteSamples): the
        // rate then falls to what the spread-out samples hold over the window they span.
        let (bursts, tail) = bursts_and_tail(&acked);
        assert_eq!(bursts, [0, 15, 26, 39, 50]);
        assert_eq!((acked[0], acked[15], acked[26]), (11.0, 9.0, 7.0));
        assert!((tail - 0.9487).abs() < 1e-3, "{tail}");
        // Requests a little under the quota, 7 ms apart at the least: samples start off the
        // second.
        let (throttled, acked) = waiting_producer(1_000_000.0, 7);
        assert_eq!(throttled, kafka_throttled(UNEVEN));
        let (bursts, tail) = bursts_and_tail(&acked);
        assert_eq!(bursts, [0, 15, 29, 41, 55]);
        assert!((tail - 0.9782).abs() < 1e-3, "{tail}");
        // A client pacing itself at 1.2 quotas a second, 0.3 of one every 250 ms: several
        // events per sample, so the samples' ring turns over and a sample's last event is
        // not its start.
        let (throttled, acked) = waiting_producer(314_573.0, 250);
        assert_eq!(throttled, kafka_throttled(PACED));
        assert_eq!(bursts_and_tail(&acked).0, Vec::<usize>::new());
    }

    // QuotaModel.java's "throttled" lines for Kafka 4.4.0, arguments `1048576 1048576 0 60`,
    // `1048576 1000000 7 60` and `1048576 314573 250 60`.
    const WHOLE: &str = "\
             10:1000,11:2000,12:3000,13:4000,14:5000,23:1000,24:2000,25:2000,26:3000,27:3000,\
             34:1000,35:1000,36:2000,37:2000,38:2000,39:2000,40:3000,47:1000,48:2000,49:2000,\
             50:2000,51:2000,52:2000,58:1000,59:1000,60:2000,61:2000,62:2000,63:2000";
    const UNEVEN: &str = "\
             10:420,11:954,12:1954,13:2953,14:3954,15:4954,25:473,26:1954,27:1954,28:2953,\
             29:2954,30:3954,39:527,40:1954,41:1953,42:1954,43:2953,44:2954,52:581,53:1954,\
             54:1953,55:1954,56:1953,57:1954,58:2953,65:635,66:953,67:1954,68:1954";
    const PACED: &str = "\
             35:50,36:1100,37:1300,38:300,39:300,40:100,41:150,42:200,43:50,44:100,45:150,46:200,\
             47:50,48:100,49:150,50:200,51:50,52:100,53:150,54:200,55:50,56:100,57:150,58:200,\
             59:50,60:100,61:150,62:200,63:50,64:100,65:150,66:200,67:50,68:100,69:150,70:200,\
             71:50,73:950,74:300,75:1300,76:300,77:300,78:200,79:250,80:300,81:300,82:100,83:150,\
             84:200,85:50,86:100,87:150,88:200,89:50,90:100,91:150,92:200,93:50,94:100,95:150,\
             96:200,97:50,98:100,99:150,100:200,101:50,102:100,103:150,104:200,105:50,106:100,\
             107:150,108:200,109:750,110:300,111:300,112:300,113:1300,114:300,115:300,116:200,\
             117:250,118:300,119:300,120:200,121:250,122:300,123:300,124:100,125:150,126:200,\
             127:50,128:100,129:150,130:200,131:50,132:100,133:150,134:200,135:50,136:100,\
             137:150,138:200,139:50,140:100,141:150,142:200,143:50,144:100,145:550,146:300,\
             147:300,148:300,149:300,150:300,151:1300,152:300,153:300,154:200,155:250,156:300,\
             157:300,158:200,159:250,160:300,161:300,162:200,163:250,164:300,165:300,166:100,\
             167:150,168:200,169:50,170:100,171:150,172:200,173:50,174:100,175:150,176:200,\
             177:50,178:100,179:150,180:200,181:350,182:300,183:300,184:300,185:300,186:300,\
             187:300,188:300,189:1300,190:300,191:300,192:200,193:250,194:300,195:300,196:200,\
             197:250,198:300,199:300,200:200";

    fn mutation_quotas(rate: f64) -> Arc<ClientQuotas> {
        let mut q = ClientQuotas::new();
        let e: QuotaEntity = [("client-id".to_string(), Some("c".to_string()))]
            .into_iter()
            .collect();
        q.insert(
            e,
            BTreeMap::from([(CONTROLLER_MUTATION_RATE.to_string(), QuotaValue::new(rate))]),
        );
        Arc::new(q)
    }

    #[test]
    fn a_strict_mutation_quota_refuses_once_the_bucket_is_spent() {
        // 2 partitions/s, 2 windows of 1 s: a burst of 4 partitions.
        let w = QuotaWindow {
            samples: 2,
            window_ms: 1000,
        };
        let m = ClientQuotaManager::new(QuotaType::ControllerMutation, w);
        let q = mutation_quotas(2.0);
        let now = 1_000_000;
        let mut strict = m.mutation_quota(q.clone(), "u", "c", true);
        assert_eq!(strict.exceeded(now), None);
        strict.record(6, now);
        // The mutation that spends the bucket passes; -2 tokens take 1 s to refill.
        assert_eq!(strict.throttle_time_ms(now), 0);
        assert_eq!(strict.exceeded(now), Some(1000));
        assert_eq!(strict.throttle_time_ms(now + 300), 700);
        assert_eq!(strict.exceeded(now + 1000), None);
        // A permissive quota accepts and throttles.
        let mut permissive = m.mutation_quota(q, "u", "c", false);
        assert_eq!(permissive.exceeded(now + 1000), None);
        permissive.record(3, now + 1000);
        assert_eq!(permissive.throttle_time_ms(now + 1000), 1500);
    }

    #[test]
    fn user_client_quota_wins_over_defaults() {
        let st_quotas = quotas(&[
            (&[("user", None)], 1.0),
            (&[("user", Some("alice")), ("client-id", Some("app"))], 7.0),
            (&[("client-id", None)], 3.0),
        ]);
        let mut st = State::default();
        st.refresh(QuotaType::Produce, &st_quotas);
        let tags = st.metric_tags("alice", "app");
        assert_eq!(tags, ("alice".to_string(), "app".to_string()));
        assert_eq!(st.quota_limit(&tags), Some(7.0));
        let bob = st.metric_tags("bob", "app");
        assert_eq!(bob, ("bob".to_string(), String::new()));
        assert_eq!(st.quota_limit(&bob), Some(1.0));
    }
}
