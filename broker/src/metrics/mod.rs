//! Prometheus metrics, served as `GET /metrics` on the admin listener (docs/METRICS.md lists
//! every metric and the Kafka metric it mirrors).
//!
//! Two kinds of value, each read from its one owner:
//! - **events** are counters kept where the event happens: requests and their errors here,
//!   client traffic in each `Partition`, ISR changes and truncations in the
//!   `ReplicaManager`'s [`ReplicationStats`](crate::cluster::replica_manager::ReplicationStats),
//!   leader elections in the active `Controller`;
//! - **states** (under-replicated partitions, groups by state, producer ids) are computed
//!   when scraped, by walking the state that already exists; no second copy is kept.
//!
//! The request hot path costs one array lookup by API key and version, one atomic add and one
//! histogram observation (a short uncontended lock), with no allocation: every label set is
//! created at start-up from `SUPPORTED_APIS`, so a client cannot create label values.

mod control;
pub mod response_errors;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::broker::Broker;
use response_errors::ResponseErrors;
// Kafka's error names live in `errors`, a module with no imports of its own, so that the
// fault engine and the transaction coordinator name an error without importing `metrics`.
use crate::errors::UNKNOWN_ERROR_CODE;
pub use crate::errors::{error_code_by_name, error_name};

/// An API the broker serves, as the request metrics need it: its key and the versions it
/// decodes. The ApiVersions table's rows (`api::ApiSupport`) implement it, so the metrics
/// name no handler module.
pub trait ServedApi {
    fn key(&self) -> ApiKey;
    fn decoded_versions(&self) -> RangeInclusive<i16>;
}

/// Slots in the per-API table, indexed by API key number; Kafka's keys stay well below it.
/// An API key at or above it is not counted (none is in `SUPPORTED_APIS`).
pub const API_KEY_SLOTS_MAX: usize = 128;

/// Upper bounds of the request latency histogram's buckets, in seconds: from a fast
/// in-memory answer to a long-polling fetch or a parked JoinGroup.
pub const REQUEST_DURATION_BUCKETS_SECONDS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// One API version's counters.
struct VersionSlot {
    requests: Counter,
    /// Responses that could not be encoded at this version (each closed its connection).
    encode_failures: Counter,
    duration: Histogram,
}

/// One API's versions, from the lowest it decodes to the highest it advertises.
struct ApiSlot {
    name: String,
    first_version: i16,
    versions: Vec<VersionSlot>,
}

/// Where an error count belongs: the API, its version and the error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct ErrorKey {
    api_key: i16,
    version: i16,
    error_code: i16,
}

/// Requests, errors and latency per API key and version (Kafka's `RequestMetrics`).
pub struct RequestMetrics {
    apis: Vec<Option<ApiSlot>>,
    /// Bounded by the served (API, version) pairs times the error codes Brook answers.
    errors: DashMap<ErrorKey, Counter>,
}

impl RequestMetrics {
    /// One slot per served API version, created now so that recording never allocates.
    pub fn new<A: ServedApi>(apis: &[A]) -> RequestMetrics {
        let mut table: Vec<Option<ApiSlot>> = (0..API_KEY_SLOTS_MAX).map(|_| None).collect();
        for a in apis {
            let Some(slot) = table.get_mut(a.key() as i16 as usize) else {
                continue;
            };
            let decoded = a.decoded_versions();
            let first_version = *decoded.start();
            let versions = decoded
                .map(|_| VersionSlot {
                    requests: Counter::default(),
                    encode_failures: Counter::default(),
                    duration: Histogram::new(REQUEST_DURATION_BUCKETS_SECONDS),
                })
                .collect();
            *slot = Some(ApiSlot {
                name: format!("{:?}", a.key()),
                first_version,
                versions,
            });
        }
        RequestMetrics {
            apis: table,
            errors: DashMap::new(),
        }
    }

    fn slot(&self, key: ApiKey, version: i16) -> Option<&VersionSlot> {
        let api = self.apis.get(key as i16 as usize)?.as_ref()?;
        let i = usize::try_from(version.checked_sub(api.first_version)?).ok()?;
        api.versions.get(i)
    }

    /// Counts one handled request and its time from frame read to answer written.
    pub fn record(&self, key: ApiKey, version: i16, elapsed: Duration) {
        if let Some(s) = self.slot(key, version) {
            s.requests.inc();
            s.duration.observe(elapsed.as_secs_f64());
        }
    }

    /// Counts a response that could not be encoded at `version`.
    pub fn record_encode_failure(&self, key: ApiKey, version: i16) {
        if let Some(s) = self.slot(key, version) {
            s.encode_failures.inc();
        }
    }

    /// Responses of `key` at `version` that could not be encoded so far.
    pub fn encode_failures(&self, key: ApiKey, version: i16) -> u64 {
        self.slot(key, version)
            .map_or(0, |s| s.encode_failures.get())
    }

    /// Counts the non-zero error codes of a response. Versions outside the served range are
    /// not counted, so the version label stays bounded.
    pub fn record_errors(&self, key: ApiKey, version: i16, resp: &dyn ResponseErrors) {
        if self.slot(key, version).is_none() {
            return;
        }
        resp.error_codes(&mut |code| {
            if code != 0 {
                self.record_error(key, version, code);
            }
        });
    }

    fn record_error(&self, key: ApiKey, version: i16, code: i16) {
        let error_code = match ResponseError::try_from_code(code) {
            Some(ResponseError::Unknown(_)) | None => UNKNOWN_ERROR_CODE,
            Some(_) => code,
        };
        let k = ErrorKey {
            api_key: key as i16,
            version,
            error_code,
        };
        // Errors are the rare path: a map lookup (and, the first time, an insert) is fine.
        if let Some(c) = self.errors.get(&k) {
            c.inc();
            return;
        }
        self.errors.entry(k).or_default().inc();
    }

    fn api_name(&self, key: i16) -> &str {
        usize::try_from(key)
            .ok()
            .and_then(|i| self.apis.get(i))
            .and_then(|a| a.as_ref())
            .map_or("unknown", |a| a.name.as_str())
    }
}

/// Keeps a gauge raised while it lives (a connection, a parked request).
pub struct GaugeGuard(Gauge);

impl GaugeGuard {
    /// Raises `gauge` by one until the guard is dropped.
    pub fn new(gauge: &Gauge) -> GaugeGuard {
        gauge.inc();
        GaugeGuard(gauge.clone())
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The broker-level metrics owned by the request layer.
pub struct BrokerMetrics {
    pub requests: RequestMetrics,
    /// Open client connections (Kafka's socket-server `connection-count`).
    pub connections: Gauge,
    /// acks=all Produce requests waiting for replication (Kafka's Produce purgatory).
    pub delayed_produces: Gauge,
    /// Fetch requests parked until data arrives or max_wait_ms (Kafka's Fetch purgatory).
    pub delayed_fetches: Gauge,
    /// SASL authentications by listener (Kafka's socket-server `successful-authentication-total`,
    /// `failed-authentication-total` and the re-authentication ones). Keys are the configured
    /// listener names, so they are bounded.
    pub authentications: DashMap<Arc<str>, AuthenticationCounters>,
}

impl BrokerMetrics {
    /// Metrics for the APIs in `apis`.
    pub fn new<A: ServedApi>(apis: &[A]) -> BrokerMetrics {
        BrokerMetrics {
            requests: RequestMetrics::new(apis),
            connections: Gauge::default(),
            delayed_produces: Gauge::default(),
            delayed_fetches: Gauge::default(),
            authentications: DashMap::new(),
        }
    }

    /// Counts one SASL authentication on `listener`; a re-authentication (KIP-368) is counted
    /// apart, as Kafka's `Selector` counts it.
    pub fn authentication(&self, listener: &Arc<str>, succeeded: bool, reauthentication: bool) {
        let c = self.authentications.entry(listener.clone()).or_default();
        let counter = match (succeeded, reauthentication) {
            (true, false) => &c.successful,
            (false, false) => &c.failed,
            (true, true) => &c.successful_reauthentication,
            (false, true) => &c.failed_reauthentication,
        };
        counter.inc();
    }
}

/// One listener's SASL authentication counters.
#[derive(Debug, Default)]
pub struct AuthenticationCounters {
    pub successful: Counter,
    pub failed: Counter,
    pub successful_reauthentication: Counter,
    pub failed_reauthentication: Counter,
}

/// Renders every metric in the Prometheus text format (version 0.0.4).
pub fn render(broker: Arc<Broker>) -> Result<String, fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape { broker }));
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)?;
    Ok(out)
}

/// The `Content-Type` of [`render`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// One scrape: reads every owner once.
struct Scrape {
    broker: Arc<Broker>,
}

impl fmt::Debug for Scrape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Scrape")
    }
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), fmt::Error> {
        encode_requests(&self.broker.metrics.requests, &mut enc)?;
        encode_partitions(&self.broker, &mut enc)?;
        encode_events(&self.broker, &mut enc)?;
        encode_gauges(&self.broker, &mut enc)?;
        encode_authentications(&self.broker, &mut enc)?;
        encode_quota_throttles(&self.broker, &mut enc)?;
        encode_client_telemetry(&self.broker, &mut enc)?;
        control::encode_controller(&self.broker, &mut enc)?;
        control::encode_faults(&self.broker, &mut enc)
    }
}

type Labels = Vec<(&'static str, String)>;

/// One metric family: a descriptor and a sample per label set.
fn family<V: Copy>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    rows: impl IntoIterator<Item = (Labels, V)>,
    write: fn(prometheus_client::encoding::MetricEncoder, V) -> Result<(), fmt::Error>,
) -> Result<(), fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in rows {
        write(m.encode_family(&labels)?, v)?;
    }
    Ok(())
}

fn counter_sample(m: prometheus_client::encoding::MetricEncoder, v: u64) -> Result<(), fmt::Error> {
    ConstCounter::new(v).encode(m)
}

fn gauge_sample(m: prometheus_client::encoding::MetricEncoder, v: i64) -> Result<(), fmt::Error> {
    ConstGauge::new(v).encode(m)
}

fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> Result<(), fmt::Error> {
    let c = ConstCounter::new(v);
    c.encode(enc.encode_descriptor(name, help, None, MetricType::Counter)?)
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> Result<(), fmt::Error> {
    let g = ConstGauge::new(v);
    g.encode(enc.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

/// Every served (API, version) slot with its labels, used or not: a series that is 0 until
/// something goes wrong must exist before it does, for a scrape to tell "none" from "unknown".
fn all_slots(r: &RequestMetrics) -> impl Iterator<Item = (Labels, &VersionSlot)> {
    r.apis.iter().flatten().flat_map(|api| {
        api.versions.iter().enumerate().map(move |(i, s)| {
            let v = api.first_version + i as i16;
            (slot_labels(&api.name, v), s)
        })
    })
}

fn slot_labels(name: &str, version: i16) -> Labels {
    vec![
        ("request", name.to_string()),
        ("version", version.to_string()),
    ]
}

/// The (API, version) slots that served at least one request, with their labels.
fn used_slots(r: &RequestMetrics) -> Vec<(Labels, &VersionSlot)> {
    let mut out = Vec::new();
    for api in r.apis.iter().flatten() {
        for (i, s) in api.versions.iter().enumerate() {
            if s.requests.get() > 0 {
                let v = api.first_version + i as i16;
                out.push((slot_labels(&api.name, v), s));
            }
        }
    }
    out
}

fn encode_requests(r: &RequestMetrics, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    let used = used_slots(r);
    family(
        enc,
        "brook_requests",
        "Requests handled, by API and version (Kafka: RequestMetrics RequestsPerSec).",
        MetricType::Counter,
        used.iter().map(|(l, s)| (l.clone(), s.requests.get())),
        counter_sample,
    )?;
    family(
        enc,
        "brook_response_encode_failures",
        "Responses that could not be encoded at the request's version, by API and version; each closed its connection. Always 0 unless Brook has a bug.",
        MetricType::Counter,
        all_slots(r).map(|(l, s)| (l, s.encode_failures.get())),
        counter_sample,
    )?;
    let mut errors: Vec<(ErrorKey, u64)> = r
        .errors
        .iter()
        .map(|e| (*e.key(), e.value().get()))
        .collect();
    errors.sort_unstable();
    family(
        enc,
        "brook_request_errors",
        "Error codes in responses, by API, version and Kafka error name (Kafka: RequestMetrics ErrorsPerSec).",
        MetricType::Counter,
        errors.into_iter().map(|(k, n)| {
            let labels = vec![
                ("request", r.api_name(k.api_key).to_string()),
                ("version", k.version.to_string()),
                ("error", error_name(k.error_code)),
            ];
            (labels, n)
        }),
        counter_sample,
    )?;
    let mut m = enc.encode_descriptor(
        "brook_request_duration_seconds",
        "Time from a request's frame being read to its answer being written (Kafka: RequestMetrics TotalTimeMs).",
        None,
        MetricType::Histogram,
    )?;
    for (labels, s) in &used {
        s.duration.encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

/// Per-topic traffic summed over this node's partitions, and the partition health counts.
fn encode_partitions(broker: &Broker, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    let partitions = broker.replicas.all_partitions();
    let mut topics: BTreeMap<&str, [u64; 3]> = BTreeMap::new();
    let (mut under_replicated, mut under_min_isr, mut producers) = (0i64, 0i64, 0i64);
    for p in &partitions {
        let t = topics.entry(p.topic.as_str()).or_default();
        let traffic = p.traffic.snapshot();
        for (sum, v) in t.iter_mut().zip(traffic) {
            *sum += v;
        }
        let health = p.replication_health();
        under_replicated += health.under_replicated as i64;
        under_min_isr += health.under_min_isr as i64;
        producers += p.producer_count() as i64;
    }
    let per_topic = |i: usize| {
        topics
            .iter()
            .map(move |(t, v)| (vec![("topic", t.to_string())], v[i]))
    };
    family(
        enc,
        "brook_topic_bytes_in",
        "Bytes of record batches appended by Produce, by topic (Kafka: BrokerTopicMetrics BytesInPerSec).",
        MetricType::Counter,
        per_topic(0),
        counter_sample,
    )?;
    family(
        enc,
        "brook_topic_records_in",
        "Records appended by Produce, by topic, from the batch headers (Kafka: BrokerTopicMetrics MessagesInPerSec).",
        MetricType::Counter,
        per_topic(1),
        counter_sample,
    )?;
    family(
        enc,
        "brook_topic_bytes_out",
        "Record bytes answered to consumer Fetch requests, by topic (Kafka: BrokerTopicMetrics BytesOutPerSec).",
        MetricType::Counter,
        per_topic(2),
        counter_sample,
    )?;
    gauge(
        enc,
        "brook_under_replicated_partitions",
        "Partitions this node leads whose ISR is smaller than their replica set (Kafka: ReplicaManager UnderReplicatedPartitions).",
        under_replicated,
    )?;
    gauge(
        enc,
        "brook_under_min_isr_partitions",
        "Partitions this node leads whose ISR is below the effective min.insync.replicas (Kafka: ReplicaManager UnderMinIsrPartitionCount).",
        under_min_isr,
    )?;
    gauge(
        enc,
        "brook_producer_ids",
        "Producer state entries over this node's partitions (Kafka: ReplicaManager ProducerIdCount).",
        producers,
    )?;
    gauge(
        enc,
        "brook_offline_partitions",
        "Partitions without a leader; reported by the active controller, 0 elsewhere (Kafka: KafkaController OfflinePartitionsCount).",
        offline_partitions(broker),
    )
}

/// Leaderless partitions in the committed image, on the active controller only (as Kafka).
fn offline_partitions(broker: &Broker) -> i64 {
    let c = broker.replicas.controller();
    if !c.is_active() {
        return 0;
    }
    let image = c.image().borrow().clone();
    image
        .topics
        .values()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.leader == brook_controller::image::NO_LEADER)
        .count() as i64
}

fn encode_events(broker: &Broker, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    let stats = &broker.replicas.stats;
    counter(
        enc,
        "brook_isr_shrinks",
        "ISR shrinks of partitions this node leads, counted when the controller commits them (Kafka: ReplicaManager IsrShrinksPerSec).",
        stats.isr_shrinks.get(),
    )?;
    counter(
        enc,
        "brook_isr_expands",
        "ISR expansions of partitions this node leads, counted when the controller commits them (Kafka: ReplicaManager IsrExpandsPerSec).",
        stats.isr_expands.get(),
    )?;
    counter(
        enc,
        "brook_follower_truncations",
        "Follower truncations to a leader's diverging epoch (no Kafka metric; Kafka logs them).",
        stats.follower_truncations.get(),
    )?;
    let elections = broker.replicas.controller().leader_elections();
    counter(
        enc,
        "brook_leader_elections",
        "Partition leader changes decided by this node as active controller (Kafka: ControllerStats LeaderElectionRateAndTimeMs).",
        elections,
    )
}

fn f64_gauge_sample(
    m: prometheus_client::encoding::MetricEncoder,
    v: f64,
) -> Result<(), fmt::Error> {
    ConstGauge::new(v).encode(m)
}

/// The last metrics each client instance pushed (KIP-714), one sample per point, labelled by
/// client instance id, the client's metric name and its attributes (Kafka hands them to its
/// telemetry receiver plugin instead).
fn encode_client_telemetry(broker: &Broker, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    let clients = broker.telemetry.snapshot();
    let rows = clients.iter().flat_map(|(id, c)| {
        c.last_points.iter().map(move |p| {
            let labels: Labels = vec![
                ("client_instance_id", id.to_string()),
                ("client_id", c.selectors.client_id.clone()),
                ("metric", p.name.clone()),
                ("attributes", p.attributes.clone()),
            ];
            (labels, p.value)
        })
    });
    family(
        enc,
        "brook_client_metric",
        "The last value each client instance pushed of each metric it is subscribed to (KIP-714 PushTelemetry).",
        MetricType::Gauge,
        rows,
        f64_gauge_sample,
    )?;
    family(
        enc,
        "brook_client_telemetry_pushes",
        "PushTelemetry requests accepted, by client instance (Kafka: client-metrics instance metrics).",
        MetricType::Counter,
        clients
            .iter()
            .map(|(id, c)| (vec![("client_instance_id", id.to_string())], c.pushes)),
        counter_sample,
    )
}

/// Kafka's socket-server `successful-authentication-total`, `failed-authentication-total`,
/// `successful-reauthentication-total` and `failed-reauthentication-total`, per listener:
/// the broker listeners' and the controller listener's (whose clients never re-authenticate).
fn encode_authentications(broker: &Broker, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    type Row = (String, [u64; 4]);
    let rows: Vec<Row> = broker
        .metrics
        .authentications
        .iter()
        .map(|e| {
            let c = e.value();
            let counts = [
                c.successful.get(),
                c.failed.get(),
                c.successful_reauthentication.get(),
                c.failed_reauthentication.get(),
            ];
            (e.key().to_string(), counts)
        })
        .chain(
            broker
                .replicas
                .controller()
                .controller_listener_authentications()
                .map(|(l, ok, failed)| (l.to_string(), [ok, failed, 0, 0])),
        )
        .collect();
    for (i, name, help) in [
        (
            0,
            "brook_successful_authentication",
            "SASL authentications that succeeded, by listener (Kafka: socket-server-metrics successful-authentication-total).",
        ),
        (
            1,
            "brook_failed_authentication",
            "SASL authentications that failed, by listener (Kafka: socket-server-metrics failed-authentication-total).",
        ),
        (
            2,
            "brook_successful_reauthentication",
            "SASL re-authentications (KIP-368) that succeeded, by listener (Kafka: socket-server-metrics successful-reauthentication-total).",
        ),
        (
            3,
            "brook_failed_reauthentication",
            "SASL re-authentications (KIP-368) that failed, by listener (Kafka: socket-server-metrics failed-reauthentication-total).",
        ),
    ] {
        let pick = |r: &Row| r.1[i];
        family(
            enc,
            name,
            help,
            MetricType::Counter,
            rows.iter().map(|r| (vec![("listener", r.0.clone())], pick(r))),
            counter_sample,
        )?;
    }
    Ok(())
}

/// Throttle time handed to clients over a quota, by quota type (Kafka's `throttle-time`
/// sensors of the `Produce`, `Fetch`, `Request` and `ControllerMutation` groups, summed over clients).
fn encode_quota_throttles(broker: &Broker, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    let q = &broker.quotas;
    let managers = [&q.produce, &q.fetch, &q.request, &q.controller_mutation];
    let rows: Vec<(&str, (u64, u64))> = managers
        .iter()
        .map(|m| (m.quota_type().name(), m.throttle_totals()))
        .collect();
    family(
        enc,
        "brook_quota_throttle_time_ms",
        "Throttle time given to clients over a quota, in ms, by quota type (Kafka: Produce/Fetch throttle-time per user/client-id).",
        MetricType::Counter,
        rows.iter()
            .map(|(t, (ms, _))| (vec![("quota_type", t.to_string())], *ms)),
        counter_sample,
    )?;
    family(
        enc,
        "brook_quota_throttled_requests",
        "Requests whose client was over a quota and was throttled, by quota type.",
        MetricType::Counter,
        rows.iter()
            .map(|(t, (_, n))| (vec![("quota_type", t.to_string())], *n)),
        counter_sample,
    )
}

fn encode_gauges(broker: &Broker, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    let m = &broker.metrics;
    gauge(
        enc,
        "brook_connections",
        "Open client connections (Kafka: socket-server-metrics connection-count).",
        m.connections.get(),
    )?;
    let purgatory = [
        ("Produce", m.delayed_produces.get()),
        ("Fetch", m.delayed_fetches.get()),
    ];
    family(
        enc,
        "brook_purgatory_size",
        "Requests parked: acks=all produces waiting for replication, fetches waiting for data (Kafka: DelayedOperationPurgatory PurgatorySize).",
        MetricType::Gauge,
        purgatory
            .into_iter()
            .map(|(op, v)| (vec![("operation", op.to_string())], v)),
        gauge_sample,
    )?;
    let sessions = &broker.fetch_sessions;
    gauge(
        enc,
        "brook_fetch_sessions",
        "Incremental fetch sessions (KIP-227) open on this node, consumers' and followers' (Kafka: FetchSessionCache NumIncrementalFetchSessions).",
        sessions.session_count() as i64,
    )?;
    gauge(
        enc,
        "brook_fetch_session_partitions",
        "Partitions held over all incremental fetch sessions (Kafka: FetchSessionCache NumIncrementalFetchPartitionsCached).",
        sessions.partition_count() as i64,
    )?;
    counter(
        enc,
        "brook_fetch_session_evictions",
        "Fetch sessions evicted from a full cache to make room for another (Kafka: FetchSessionCache IncrementalFetchSessionEvictionsPerSec).",
        sessions.eviction_count(),
    )?;
    let groups = broker.groups.counts();
    family(
        enc,
        "brook_groups",
        "Groups this node coordinates, by type and state (Kafka: group-coordinator-metrics group-count, classic-group-count, consumer-group-count).",
        MetricType::Gauge,
        groups
            .by_state
            .into_iter()
            .map(|((t, s), n)| (vec![("type", t.to_string()), ("state", s.to_string())], n as i64)),
        gauge_sample,
    )?;
    family(
        enc,
        "brook_group_rebalances",
        "Rebalances of the groups this node coordinates over their lifetime: classic generations, consumer group epochs (Kafka: group-coordinator-metrics group-rebalance-count, consumer-group-rebalance-count).",
        MetricType::Counter,
        groups
            .rebalances
            .into_iter()
            .map(|(t, n)| (vec![("type", t.to_string())], n)),
        counter_sample,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SUPPORTED_APIS;
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    use kafka_protocol::messages::ProduceResponse;

    fn produce_response(codes: &[i16]) -> ProduceResponse {
        let parts = codes
            .iter()
            .map(|&c| PartitionProduceResponse::default().with_error_code(c))
            .collect();
        ProduceResponse::default().with_responses(vec![
            TopicProduceResponse::default().with_partition_responses(parts)
        ])
    }

    fn errors(r: &RequestMetrics) -> Vec<(ErrorKey, u64)> {
        let mut v: Vec<_> = r
            .errors
            .iter()
            .map(|e| (*e.key(), e.value().get()))
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn error_names_map_back_to_their_codes() {
        assert_eq!(error_code_by_name("NOT_ENOUGH_REPLICAS"), Some(19));
        assert_eq!(error_code_by_name("not_leader_or_follower"), Some(6));
        assert_eq!(error_code_by_name("UNKNOWN_SERVER_ERROR"), Some(-1));
        assert_eq!(error_code_by_name("NONE"), Some(0));
        assert_eq!(error_code_by_name("NO_SUCH_ERROR"), None);
        assert_eq!(error_code_by_name("UNKNOWN"), None);
    }

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(56), "KAFKA_STORAGE_ERROR");
        assert_eq!(error_name(17), "INVALID_TOPIC_EXCEPTION");
        assert_eq!(error_name(UNKNOWN_ERROR_CODE), "UNKNOWN");
    }

    #[test]
    fn versions_outside_the_served_range_are_not_labels() {
        let r = RequestMetrics::new(SUPPORTED_APIS);
        r.record(ApiKey::Produce, 9, Duration::from_millis(1));
        r.record(ApiKey::Produce, 2, Duration::from_millis(1)); // below decode_min
        r.record(ApiKey::Produce, 999, Duration::from_millis(1));
        r.record_errors(ApiKey::Produce, 999, &produce_response(&[3]));
        let used = used_slots(&r);
        assert_eq!(used.len(), 1);
        assert_eq!(used[0].0[1], ("version", "9".to_string()));
        assert!(r.errors.is_empty());
    }

    #[test]
    fn every_non_zero_code_counts_and_unknown_codes_share_one_label() {
        let r = RequestMetrics::new(SUPPORTED_APIS);
        r.record_errors(
            ApiKey::Produce,
            9,
            &produce_response(&[0, 3, 3, 30000, 29999]),
        );
        let key = |error_code| ErrorKey {
            api_key: 0,
            version: 9,
            error_code,
        };
        assert_eq!(errors(&r), vec![(key(UNKNOWN_ERROR_CODE), 2), (key(3), 2)],);
    }
}
