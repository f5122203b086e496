//! librdkafka helpers (through the `rdkafka` crate): a producer that records every delivery
//! report, a producer context that keeps the throttle times librdkafka's statistics report,
//! and an assign-only consumer that reads partitions to their end.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, DeliveryResult, Headers, Message, Timestamp};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, Statistics, TopicPartitionList};

/// The outcome of one produced record, as told by librdkafka's delivery report.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The index the test gave the record (delivery opaque).
    pub idx: usize,
    pub partition: i32,
    pub offset: i64,
    pub error: Option<String>,
    /// librdkafka's error code of a failed delivery.
    pub code: Option<RDKafkaErrorCode>,
    /// When the report was served (by a poll).
    pub at: Instant,
}

/// Where a producer's librdkafka log lines go: (level, facility, message).
pub type LogSink = Box<dyn Fn(RDKafkaLogLevel, &str, &str) + Send + Sync>;

/// A producer context that keeps every delivery report, and hands librdkafka's log lines to
/// `log` when one is set (nothing installs a `log` logger in these tests, so the `rdkafka`
/// crate's default would drop them).
#[derive(Default)]
pub struct Recorder {
    pub deliveries: Mutex<Vec<Delivery>>,
    pub log: Option<LogSink>,
}

impl ClientContext for Recorder {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        if let Some(sink) = &self.log {
            sink(level, fac, log_message);
        }
    }
}

impl ProducerContext for Recorder {
    type DeliveryOpaque = usize;
    fn delivery(&self, result: &DeliveryResult<'_>, idx: usize) {
        let d = match result {
            Ok(m) => Delivery {
                idx,
                partition: m.partition(),
                offset: m.offset(),
                error: None,
                code: None,
                at: Instant::now(),
            },
            Err((e, m)) => Delivery {
                idx,
                partition: m.partition(),
                offset: m.offset(),
                error: Some(e.to_string()),
                code: e.rdkafka_error_code(),
                at: Instant::now(),
            },
        };
        self.deliveries.lock().unwrap().push(d);
    }
}

pub type RecProducer = BaseProducer<Recorder>;

/// A producer context for quota runs (the client quota tests, the quota convergence
/// benchmark): the largest broker throttle time librdkafka's statistics report
/// (`brokers.*.throttle.max`, taken from the answers' `throttle_time_ms`), and the payload
/// bytes of acknowledged records. Clones share the counters.
#[derive(Default, Clone)]
pub struct ThrottleStats {
    pub throttle_ms_max: Arc<AtomicI64>,
    pub acked_bytes: Arc<AtomicU64>,
}

impl ClientContext for ThrottleStats {
    fn stats(&self, statistics: Statistics) {
        for b in statistics.brokers.values() {
            if let Some(t) = &b.throttle {
                self.throttle_ms_max.fetch_max(t.max, Ordering::Relaxed);
            }
        }
    }
}

impl ProducerContext for ThrottleStats {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Ok(m) = result {
            let bytes = m.payload().map_or(0, <[u8]>::len) as u64;
            self.acked_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }
}

/// A producer with default librdkafka settings plus `extra`.
pub fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> RecProducer {
    producer_with_log(bootstrap, extra, None)
}

/// [`producer`], with librdkafka's log lines (those its `log_level` and `debug` settings let
/// through) handed to `log`.
pub fn producer_with_log(
    bootstrap: &str,
    extra: &[(&str, &str)],
    log: Option<LogSink>,
) -> RecProducer {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", bootstrap);
    cfg.set("message.timeout.ms", "60000");
    for (k, v) in extra {
        cfg.set(*k, *v);
    }
    if log.is_some() {
        cfg.set_log_level(RDKafkaLogLevel::Debug);
    }
    cfg.create_with_context(Recorder {
        deliveries: Mutex::default(),
        log,
    })
    .expect("create rdkafka producer")
}

/// Sends one record, polling while the local queue is full (bounded).
pub fn send(p: &RecProducer, mut rec: BaseRecord<'_, [u8], [u8], usize>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match p.send(rec) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                if Instant::now() >= deadline {
                    panic!("producer queue still full after 60 s");
                }
                rec = r;
                p.poll(Duration::from_millis(10));
            }
            Err((e, _)) => panic!("produce: {e}"),
        }
    }
}

/// Delivery reports received so far.
pub fn delivered_count(p: &RecProducer) -> usize {
    p.context().deliveries.lock().unwrap().len()
}

/// Flushes (bounded) and returns the delivery reports sorted by record index.
pub fn flush(p: &RecProducer, expected: usize, timeout: Duration) -> Vec<Delivery> {
    if let Err(e) = p.flush(timeout) {
        let got = p.context().deliveries.lock().unwrap().len();
        panic!("producer flush failed after {timeout:?}: {e} ({got}/{expected} delivery reports)");
    }
    let mut d = p.context().deliveries.lock().unwrap().clone();
    d.sort_by_key(|d| d.idx);
    assert_eq!(d.len(), expected, "delivery report count");
    d
}

/// Panics listing the first failures when any delivery failed.
pub fn assert_all_delivered(d: &[Delivery]) {
    let failed: Vec<&Delivery> = d.iter().filter(|d| d.error.is_some()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} records failed delivery; first: {:?}",
        failed.len(),
        d.len(),
        &failed[..failed.len().min(5)]
    );
}

/// A message read back, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Got {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp: Option<i64>,
    /// Headers in order, duplicates kept.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// A message read, owned.
pub fn got(m: &BorrowedMessage<'_>) -> Got {
    to_got(m)
}

fn to_got(m: &BorrowedMessage<'_>) -> Got {
    let headers = m
        .headers()
        .map(|h| {
            h.iter()
                .map(|h| (h.key.to_string(), h.value.map(|v| v.to_vec())))
                .collect()
        })
        .unwrap_or_default();
    Got {
        partition: m.partition(),
        offset: m.offset(),
        key: m.key().map(|k| k.to_vec()),
        value: m.payload().map(|v| v.to_vec()),
        timestamp: match m.timestamp() {
            Timestamp::CreateTime(t) | Timestamp::LogAppendTime(t) => Some(t),
            Timestamp::NotAvailable => None,
        },
        headers,
    }
}

/// An assign-only consumer (a group.id is set because librdkafka requires one, but nothing
/// subscribes or commits).
pub fn consumer(bootstrap: &str, extra: &[(&str, &str)]) -> BaseConsumer {
    let settings = [
        ("bootstrap.servers", bootstrap),
        ("group.id", "brook-protocol-tests-unused"),
        ("enable.auto.commit", "false"),
        ("enable.auto.offset.store", "false"),
        ("enable.partition.eof", "true"),
        ("auto.offset.reset", "error"),
    ];
    consumer_from(&settings, extra)
}

/// A member of consumer group `group`: manual commits, reading from the earliest offset when
/// the group has no committed offset, plus `extra`.
pub fn group_consumer(bootstrap: &str, group: &str, extra: &[(&str, &str)]) -> BaseConsumer {
    let settings = [
        ("bootstrap.servers", bootstrap),
        ("group.id", group),
        ("enable.auto.commit", "false"),
        ("auto.offset.reset", "earliest"),
        ("session.timeout.ms", "10000"),
        ("heartbeat.interval.ms", "300"),
    ];
    consumer_from(&settings, extra)
}

fn consumer_from(settings: &[(&str, &str)], extra: &[(&str, &str)]) -> BaseConsumer {
    let mut cfg = ClientConfig::new();
    for (k, v) in settings.iter().chain(extra) {
        cfg.set(*k, *v);
    }
    cfg.create().expect("create rdkafka consumer")
}

/// Reads each of `partitions` of `topic` from offset 0 until librdkafka reports the partition's
/// end (EOF at the high watermark / last stable offset). Call only once all produces are
/// acknowledged. Returns messages per partition in the order they were delivered.
pub fn read_to_end(
    bootstrap: &str,
    topic: &str,
    partitions: &[i32],
    timeout: Duration,
) -> BTreeMap<i32, Vec<Got>> {
    read_to_end_with(bootstrap, topic, partitions, &[], timeout)
}

/// [`read_to_end`] with consumer settings `extra` (for instance `isolation.level`; librdkafka's
/// default is read_committed, whose end is the last stable offset).
pub fn read_to_end_with(
    bootstrap: &str,
    topic: &str,
    partitions: &[i32],
    extra: &[(&str, &str)],
    timeout: Duration,
) -> BTreeMap<i32, Vec<Got>> {
    let c = consumer(bootstrap, extra);
    let mut tpl = TopicPartitionList::new();
    for p in partitions {
        tpl.add_partition_offset(topic, *p, Offset::Offset(0))
            .unwrap();
    }
    c.assign(&tpl).expect("assign");
    let mut out: BTreeMap<i32, Vec<Got>> = partitions.iter().map(|p| (*p, Vec::new())).collect();
    let mut at_end: HashSet<i32> = HashSet::new();
    let mut errors: Vec<String> = Vec::new();
    let deadline = Instant::now() + timeout;
    while at_end.len() < partitions.len() {
        if Instant::now() >= deadline {
            let counts: Vec<(i32, usize)> = out.iter().map(|(p, v)| (*p, v.len())).collect();
            panic!(
                "consumer did not reach the end of {topic} {partitions:?} within {timeout:?}; \
                 read so far {counts:?}, at end {at_end:?}; client errors (last 10): {:?}",
                &errors[errors.len().saturating_sub(10)..]
            );
        }
        match c.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => {
                assert_eq!(m.topic(), topic);
                let g = to_got(&m);
                at_end.remove(&g.partition);
                out.get_mut(&g.partition)
                    .expect("message of an unassigned partition")
                    .push(g);
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) if errors.len() < 1000 => errors.push(e.to_string()),
            Some(Err(_)) => {}
        }
    }
    out
}

/// Builds a record with a usize delivery opaque.
pub fn record<'a>(
    topic: &'a str,
    idx: usize,
    partition: Option<i32>,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
) -> BaseRecord<'a, [u8], [u8], usize> {
    let mut r = BaseRecord::with_opaque_to(topic, idx);
    r.partition = partition;
    r.key = key;
    r.payload = value;
    r
}
