//! Client telemetry (KIP-714), as Kafka's `ClientMetricsManager` with a receiver plugin that
//! keeps each client instance's last push: client-metrics subscriptions (config resources of
//! type CLIENT_METRICS, stored in the metadata image) decide which metrics a client sends and
//! how often; the last pushed metrics of each client instance are kept, bounded, for
//! `/metrics` and `/v1/client-metrics`.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use uuid::Uuid;

use brook_controller::image::MetadataImage;

/// Kafka's `ClientMetricsConfigs` keys.
pub const METRICS_CONFIG: &str = "metrics";
pub const INTERVAL_MS_CONFIG: &str = "interval.ms";
pub const MATCH_CONFIG: &str = "match";
/// Every key of a subscription, in Kafka's `configDef` order.
pub const CONFIG_KEYS: &[&str] = &[METRICS_CONFIG, INTERVAL_MS_CONFIG, MATCH_CONFIG];
/// Kafka's `ClientMetricsConfigs.DEFAULT_INTERVAL_MS`: 5 minutes.
pub const INTERVAL_MS_DEFAULT: i32 = 300_000;
const INTERVAL_MS_MIN: i32 = 100;
const INTERVAL_MS_MAX: i32 = 3_600_000;
/// The client selectors a `match` entry may name (Kafka's `ALLOWED_MATCH_PARAMS`).
const MATCH_PARAMS: &[&str] = &[
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
];
/// Kafka's `ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES`: zstd, lz4, gzip, snappy.
pub const ACCEPTED_COMPRESSION_TYPES: &[i8] = &[4, 3, 1, 2];
/// Bound on the client instances kept (Kafka's `CACHE_MAX_SIZE`); the least recently heard
/// from is dropped first.
pub const CLIENT_INSTANCES_MAX: usize = 16_384;
/// Bound on the metric points kept per client instance's last push.
pub const POINTS_PER_CLIENT_MAX: usize = 2_000;
/// Bound on the bytes of metric names and attributes kept across all client instances; past
/// it a push is acknowledged but its points are not kept.
pub const KEPT_BYTES_MAX: usize = 32 << 20;

/// One subscription's parsed configs.
struct Subscription {
    metrics: Vec<String>,
    interval_ms: i32,
    matches: Vec<(String, regex::Regex)>,
}

/// Kafka's `ClientMetricsConfigs.validate`: the error code and message a subscription's
/// resulting configs are refused with.
pub fn validate_subscription(
    name: &str,
    configs: &BTreeMap<String, String>,
) -> Result<(), (i16, String)> {
    use kafka_protocol::ResponseError as E;
    let invalid_request = |m: String| (E::InvalidRequest.code(), m);
    if name.is_empty() {
        return Err(invalid_request("Subscription name can't be empty".into()));
    }
    if let Some(k) = configs.keys().find(|k| !CONFIG_KEYS.contains(&k.as_str())) {
        return Err(invalid_request(format!(
            "Unknown client metrics configuration: {k}"
        )));
    }
    if let Some(v) = configs.get(INTERVAL_MS_CONFIG) {
        let ms: i32 = v.trim().parse().map_err(|_| {
            (
                E::InvalidConfig.code(),
                format!(
                    "Invalid value {v} for configuration interval.ms: Not a number of type INT"
                ),
            )
        })?;
        if !(INTERVAL_MS_MIN..=INTERVAL_MS_MAX).contains(&ms) {
            return Err(invalid_request(format!(
                "Invalid value {ms} for interval.ms, interval must be between 100 and 3600000 (1 hour)"
            )));
        }
    }
    parse_matches(configs.get(MATCH_CONFIG).map_or("", String::as_str))
        .map(|_| ())
        .map_err(|m| (E::InvalidConfig.code(), m))
}

/// Kafka's `parseMatchingPatterns`: `selector=regex` entries, comma separated.
fn parse_matches(list: &str) -> Result<Vec<(String, regex::Regex)>, String> {
    split_list(list)
        .map(|entry| {
            let illegal = || format!("Illegal client matching pattern: {entry}");
            let (param, pattern) = entry.split_once('=').ok_or_else(illegal)?;
            let param = param.trim();
            if pattern.contains('=') || !MATCH_PARAMS.contains(&param) {
                return Err(illegal());
            }
            // Java's `Matcher.matches`: the whole value.
            let re =
                regex::Regex::new(&format!("^(?:{})$", pattern.trim())).map_err(|_| illegal())?;
            Ok((param.to_string(), re))
        })
        .collect()
}

/// A config LIST value's entries.
fn split_list(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn subscriptions(image: &MetadataImage) -> Vec<Subscription> {
    image
        .client_metrics_configs
        .values()
        .map(|c| Subscription {
            metrics: split_list(c.get(METRICS_CONFIG).map_or("", String::as_str))
                .map(str::to_string)
                .collect(),
            interval_ms: c
                .get(INTERVAL_MS_CONFIG)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(INTERVAL_MS_DEFAULT),
            matches: parse_matches(c.get(MATCH_CONFIG).map_or("", String::as_str))
                .unwrap_or_default(),
        })
        .collect()
}

/// What identifies a client for `match` (Kafka's `ClientMetricsInstanceMetadata`).
#[derive(Debug, Clone, Default)]
pub struct ClientSelectors {
    pub client_instance_id: String,
    pub client_id: String,
    pub client_software_name: String,
    pub client_software_version: String,
    pub client_source_address: String,
    pub client_source_port: String,
}

impl ClientSelectors {
    fn get(&self, param: &str) -> &str {
        match param {
            "client_instance_id" => &self.client_instance_id,
            "client_id" => &self.client_id,
            "client_software_name" => &self.client_software_name,
            "client_software_version" => &self.client_software_version,
            "client_source_address" => &self.client_source_address,
            _ => &self.client_source_port,
        }
    }

    /// Kafka's `isMatch`: every selector of the subscription matches.
    fn matches(&self, s: &Subscription) -> bool {
        s.matches.iter().all(|(p, re)| re.is_match(self.get(p)))
    }
}

/// The metrics and push interval a client gets: the union of the subscriptions it matches,
/// `*` alone when one of them asks for every metric, the shortest interval (Kafka's
/// `createClientInstance`); no subscription: no metrics, the default interval.
pub fn evaluate(image: &MetadataImage, who: &ClientSelectors) -> (Vec<String>, i32) {
    let mut metrics = std::collections::BTreeSet::new();
    let mut interval = INTERVAL_MS_DEFAULT;
    for s in subscriptions(image).iter().filter(|s| who.matches(s)) {
        metrics.extend(s.metrics.iter().cloned());
        interval = interval.min(s.interval_ms);
    }
    if metrics.contains("*") {
        metrics.retain(|m| m == "*");
    }
    (metrics.into_iter().collect(), interval)
}

/// Kafka's `computeSubscriptionId`: CRC32C of the metrics list as Java prints a set and the
/// interval, XOR the instance id's hash (Java's `Uuid.hashCode`).
pub fn subscription_id(metrics: &[String], interval_ms: i32, id: Uuid) -> i32 {
    let text = format!("[{}]{interval_ms}", metrics.join(", "));
    let crc = crc32c::crc32c(text.as_bytes()) as i32;
    let (hi, lo) = id.as_u64_pair();
    let h = hi ^ lo;
    crc ^ ((h >> 32) as i32 ^ h as i32)
}

/// One metric point of a push.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MetricPoint {
    pub name: String,
    /// `key=value` attributes, comma separated.
    pub attributes: String,
    pub value: f64,
}

/// One client instance (Kafka's `ClientMetricsInstance`) and its last push.
#[derive(Debug, Clone)]
pub struct ClientInstance {
    pub selectors: ClientSelectors,
    pub subscription_id: i32,
    pub metrics: Vec<String>,
    pub push_interval_ms: i32,
    pub last_get_ms: Option<u64>,
    pub last_push_ms: Option<u64>,
    pub terminating: bool,
    pub pushes: u64,
    pub last_points: Vec<MetricPoint>,
    /// Kept bytes of `last_points` (names and attributes), for [`KEPT_BYTES_MAX`].
    kept_bytes: usize,
    last_heard_ms: u64,
}

/// Every client instance this node heard from, bounded by [`CLIENT_INSTANCES_MAX`].
#[derive(Default)]
pub struct ClientMetricsManager {
    instances: Mutex<HashMap<Uuid, ClientInstance>>,
}

/// What a telemetry request was answered.
pub type TelemetryOutcome = Result<(), (kafka_protocol::ResponseError, String)>;

impl ClientMetricsManager {
    /// Runs `f` on the instance `id`, created or re-evaluated against the current
    /// subscriptions first (a changed subscription starts the instance's timing over, as
    /// Kafka's re-created instance does).
    pub fn with_instance<T>(
        &self,
        image: &MetadataImage,
        id: Uuid,
        who: ClientSelectors,
        now_ms: u64,
        f: impl FnOnce(&mut ClientInstance) -> T,
    ) -> T {
        let (metrics, interval) = evaluate(image, &who);
        let sub_id = subscription_id(&metrics, interval, id);
        let mut all = self.instances.lock();
        if !all.contains_key(&id) && all.len() >= CLIENT_INSTANCES_MAX {
            if let Some(oldest) = all
                .iter()
                .min_by_key(|(_, c)| c.last_heard_ms)
                .map(|(k, _)| *k)
            {
                all.remove(&oldest);
            }
        }
        let c = all.entry(id).or_insert_with(|| ClientInstance {
            selectors: who,
            subscription_id: sub_id,
            metrics: metrics.clone(),
            push_interval_ms: interval,
            last_get_ms: None,
            last_push_ms: None,
            terminating: false,
            pushes: 0,
            last_points: Vec::new(),
            kept_bytes: 0,
            last_heard_ms: now_ms,
        });
        if c.subscription_id != sub_id {
            c.subscription_id = sub_id;
            c.metrics = metrics;
            c.push_interval_ms = interval;
            c.last_get_ms = None;
            c.last_push_ms = None;
        }
        c.last_heard_ms = now_ms;
        f(c)
    }

    /// Keeps `points` as the instance's last push, within [`KEPT_BYTES_MAX`] overall.
    pub fn keep_points(&self, id: Uuid, mut points: Vec<MetricPoint>) {
        points.truncate(POINTS_PER_CLIENT_MAX);
        let bytes: usize = points
            .iter()
            .map(|p| p.name.len() + p.attributes.len())
            .sum();
        let mut all = self.instances.lock();
        let others: usize = all
            .iter()
            .filter(|(k, _)| **k != id)
            .map(|(_, c)| c.kept_bytes)
            .sum();
        if let Some(c) = all.get_mut(&id) {
            if others + bytes <= KEPT_BYTES_MAX {
                c.last_points = points;
                c.kept_bytes = bytes;
            }
        }
    }

    /// A copy of every instance, by id.
    pub fn snapshot(&self) -> Vec<(Uuid, ClientInstance)> {
        let mut v: Vec<_> = self
            .instances
            .lock()
            .iter()
            .map(|(k, c)| (*k, c.clone()))
            .collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }
}

/// Kafka's `ClientMetricsInstance.maybeUpdateGetRequestTimestamp`.
pub fn may_get(c: &mut ClientInstance, now_ms: u64) -> bool {
    let last = c.last_get_ms.max(c.last_push_ms);
    if last.is_none_or(|t| now_ms.saturating_sub(t) >= c.push_interval_ms as u64) {
        c.last_get_ms = Some(now_ms);
        return true;
    }
    false
}

/// Kafka's `maybeUpdatePushRequestTimestamp`: a push right after a GetTelemetrySubscriptions
/// is accepted early, since clients jitter their interval.
pub fn may_push(c: &mut ClientInstance, now_ms: u64) -> bool {
    let after_get = match (c.last_get_ms, c.last_push_ms) {
        (Some(g), Some(p)) => g > p,
        (Some(_), None) => true,
        _ => false,
    };
    let ok = after_get
        || c.last_push_ms
            .is_none_or(|t| now_ms.saturating_sub(t) >= c.push_interval_ms as u64);
    if ok {
        c.last_push_ms = Some(now_ms);
    }
    ok
}

/// Decodes an OTLP `MetricsData` (opentelemetry-proto `metrics.proto`: resource metrics 1,
/// their scope metrics 2, their metrics 2): the gauge and sum points with their attributes;
/// `None` when the bytes are not that message.
pub fn decode_otlp(bytes: &[u8]) -> Option<Vec<MetricPoint>> {
    let mut out = Vec::new();
    for rm in proto::messages(bytes, 1)? {
        for sm in proto::messages(rm, 2)? {
            for m in proto::messages(sm, 2)? {
                proto::metric(m, &mut out)?;
                if out.len() >= POINTS_PER_CLIENT_MAX {
                    return Some(out);
                }
            }
        }
    }
    Some(out)
}

mod proto;

#[cfg(test)]
mod tests {
    use super::*;

    fn image(configs: &[(&str, &[(&str, &str)])]) -> MetadataImage {
        let mut img = MetadataImage::default();
        for (name, kvs) in configs {
            let kv = kvs.iter().map(|(k, v)| (k.to_string(), v.to_string()));
            img.client_metrics_configs
                .insert(name.to_string(), kv.collect());
        }
        img
    }

    #[test]
    fn subscriptions_validate_as_kafka() {
        let ok: BTreeMap<String, String> = [("interval.ms", "100"), ("match", "client_id=a.*")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(validate_subscription("s", &ok).is_ok());
        assert_eq!(validate_subscription("", &ok).unwrap_err().0, 42);
        let mut bad = ok.clone();
        bad.insert("interval.ms".into(), "3600001".into());
        assert_eq!(validate_subscription("s", &bad).unwrap_err().0, 42);
        bad.insert("interval.ms".into(), "100".into());
        bad.insert("match".into(), "client_id=a=b".into());
        assert_eq!(validate_subscription("s", &bad).unwrap_err().0, 40);
    }

    #[test]
    fn a_client_gets_the_union_of_what_it_matches() {
        let img = image(&[
            ("a", &[("metrics", "x.,y."), ("interval.ms", "2000")]),
            (
                "b",
                &[
                    ("metrics", "z."),
                    ("interval.ms", "1000"),
                    ("match", "client_id=p"),
                ],
            ),
        ]);
        let p = ClientSelectors {
            client_id: "p".into(),
            ..Default::default()
        };
        assert_eq!(
            evaluate(&img, &p),
            (vec!["x.".into(), "y.".into(), "z.".into()], 1000)
        );
        let q = ClientSelectors {
            client_id: "pq".into(),
            ..Default::default()
        };
        assert_eq!(evaluate(&img, &q), (vec!["x.".into(), "y.".into()], 2000));
        let all = image(&[("a", &[("metrics", "*,x.")])]);
        assert_eq!(evaluate(&all, &q).0, vec!["*".to_string()]);
        assert_eq!(
            evaluate(&MetadataImage::default(), &q),
            (vec![], INTERVAL_MS_DEFAULT)
        );
    }

    #[test]
    fn pushes_are_paced_by_the_interval() {
        let m = ClientMetricsManager::default();
        let img = image(&[("a", &[("metrics", "*"), ("interval.ms", "1000")])]);
        let id = Uuid::from_u128(7);
        let who = ClientSelectors::default();
        m.with_instance(&img, id, who.clone(), 0, |c| {
            assert!(may_get(c, 0));
            assert!(!may_get(c, 10), "again within the interval");
            assert!(may_push(c, 500), "right after a get");
            assert!(!may_push(c, 900));
            assert!(may_push(c, 1500));
        });
    }

    #[test]
    fn otlp_gauges_and_sums_decode_and_garbage_does_not() {
        // MetricsData > ResourceMetrics(1) > ScopeMetrics(2) > Metric(2){name 1, sum 7 >
        // NumberDataPoint(1){as_int 6, attribute 7 {key 1, value 2 {string 1}}}}.
        let mut point = vec![0x31];
        point.extend_from_slice(&42i64.to_le_bytes());
        point.extend_from_slice(&[0x3a, 0x08, 0x0a, 0x01, b'k', 0x12, 0x03, 0x0a, 0x01, b'v']);
        let mut sum = vec![0x0a, point.len() as u8];
        sum.extend(point);
        let mut metric = vec![0x0a, 0x01, b'm', 0x3a, sum.len() as u8];
        metric.extend(sum);
        let wrap = |field: u8, body: Vec<u8>| {
            let mut v = vec![(field << 3) | 2, body.len() as u8];
            v.extend(body);
            v
        };
        let data = wrap(1, wrap(2, wrap(2, metric)));
        let points = decode_otlp(&data).expect("decodes");
        assert_eq!(points.len(), 1);
        assert_eq!(
            (points[0].name.as_str(), points[0].attributes.as_str()),
            ("m", "k=v")
        );
        assert_eq!(points[0].value, 42.0);
        assert!(
            decode_otlp(&[0x0a, 0x05, 0x01]).is_none(),
            "a length past the end"
        );
        assert!(decode_otlp(&[0x0f]).is_none(), "an unknown wire type");
    }
}
