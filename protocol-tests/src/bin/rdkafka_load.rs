//! A load generator on librdkafka, for the side-by-side benchmarks (`benches/compare/run.py`):
//! several producer threads, each its own librdkafka producer with high batching, or one
//! consumer reading a topic from its start. It must not be the bottleneck: the record payload
//! is built once and every send borrows it, and delivery reports only add one latency sample
//! to a per-thread histogram.
//!
//! ```text
//! rdkafka_load produce --bootstrap HOST:PORT --topic T --records N [--record-size B]
//!     [--producers P] [--acks all|1|0] [--idempotence true|false] [--rate RECORDS_PER_S]
//!     [--config key=value]...
//! rdkafka_load consume --bootstrap HOST:PORT --topic T --records N [--config key=value]...
//! ```
//!
//! Prints one JSON object on stdout: records, bytes, seconds, MiB/s, records/s, and for
//! `produce` the delivery latency (send to delivery report) p50/p99/p99.9 in milliseconds and
//! the number of failed deliveries. `--rate 0` (the default) sends as fast as librdkafka
//! takes records; a rate paces every thread to its share, for latency below saturation.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use hdrhistogram::Histogram;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

/// Bound on waiting for the last deliveries after every record was handed to librdkafka.
const FLUSH_WAIT_SECS_MAX: u64 = 600;
/// Bound on a consume run with no new record.
const CONSUME_IDLE_SECS_MAX: u64 = 60;
/// The opaque of each producer's first record, sent and delivered before the clock starts so
/// that connecting, metadata and the producer id are not counted.
const WARM_UP: usize = usize::MAX;
/// Highest latency the histograms hold, in microseconds (one hour); above it, samples are
/// clamped.
const LATENCY_US_MAX: u64 = 3_600_000_000;

#[derive(Parser)]
#[command(about = "librdkafka load for the side-by-side benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Sends records from several producers and reports throughput and delivery latency.
    Produce(ProduceArgs),
    /// Reads records from the topic's start (no group) and reports throughput.
    Consume(CommonArgs),
}

#[derive(clap::Args)]
struct CommonArgs {
    #[arg(long)]
    bootstrap: String,
    #[arg(long)]
    topic: String,
    /// Records in total (over every producer).
    #[arg(long)]
    records: u64,
    /// Extra librdkafka properties (repeatable), applied last.
    #[arg(long = "config", value_name = "KEY=VALUE")]
    config: Vec<String>,
}

#[derive(clap::Args)]
struct ProduceArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    /// Producer threads, each with its own librdkafka producer (its own connections).
    #[arg(long, default_value_t = 1)]
    producers: u32,
    #[arg(long, value_enum, default_value_t = Acks::All)]
    acks: Acks,
    /// Idempotent producers; default: on with acks=all (librdkafka refuses it otherwise).
    #[arg(long, action = clap::ArgAction::Set)]
    idempotence: Option<bool>,
    /// Records per second over all producers; 0 sends as fast as librdkafka takes them.
    #[arg(long, default_value_t = 0)]
    rate: u64,
}

#[derive(Clone, Copy, ValueEnum)]
enum Acks {
    All,
    #[value(name = "1")]
    One,
    #[value(name = "0")]
    Zero,
}

impl Acks {
    fn as_str(self) -> &'static str {
        match self {
            Acks::All => "all",
            Acks::One => "1",
            Acks::Zero => "0",
        }
    }
}

/// Delivery reports: each record's opaque is its send time in microseconds since the run's
/// start.
struct LatencyContext {
    start: Instant,
    histogram: parking_lot::Mutex<Histogram<u64>>,
    failed: std::sync::atomic::AtomicU64,
}

impl ClientContext for LatencyContext {}

impl ProducerContext for LatencyContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sent_us: usize) {
        if sent_us == WARM_UP {
            return;
        }
        if result.is_err() {
            self.failed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        let now_us = self.start.elapsed().as_micros() as u64;
        let latency = now_us
            .saturating_sub(sent_us as u64)
            .clamp(1, LATENCY_US_MAX);
        // Only this producer's poll thread records; the lock is never contended.
        let _ = self.histogram.lock().record(latency);
    }
}

fn main() {
    let cli = Cli::parse();
    let report = match cli.command {
        Command::Produce(args) => produce(&args),
        Command::Consume(args) => consume(&args),
    };
    println!("{report}");
}

/// Stops the run with a message: the tool's answer to a refused setting or a broken run.
fn fail(message: String) -> ! {
    eprintln!("rdkafka_load: {message}");
    std::process::exit(1)
}

fn client_config(common: &CommonArgs, base: &[(&str, &str)]) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &common.bootstrap);
    for (k, v) in base {
        c.set(*k, *v);
    }
    for kv in &common.config {
        let Some((k, v)) = kv.split_once('=') else {
            fail(format!("--config wants KEY=VALUE, got {kv:?}"));
        };
        c.set(k, v);
    }
    c
}

fn new_histogram() -> Histogram<u64> {
    match Histogram::new_with_bounds(1, LATENCY_US_MAX, 3) {
        Ok(h) => h,
        Err(e) => fail(format!("histogram bounds: {e}")),
    }
}

fn produce(args: &ProduceArgs) -> serde_json::Value {
    let payload: Arc<Vec<u8>> = Arc::new(
        (0..args.record_size)
            .map(|i| b'A' + (i % 26) as u8)
            .collect(),
    );
    let per_thread = split(args.common.records, args.producers);
    let idempotence = args.idempotence.unwrap_or(matches!(args.acks, Acks::All));
    let epoch = Instant::now();
    // Every producer warms up, then all start together; the clock starts with them.
    let ready = Arc::new(std::sync::Barrier::new(per_thread.len() + 1));
    let threads: Vec<_> = per_thread
        .into_iter()
        .map(|records| {
            let config = client_config(
                &args.common,
                &[
                    ("acks", args.acks.as_str()),
                    (
                        "enable.idempotence",
                        if idempotence { "true" } else { "false" },
                    ),
                    ("linger.ms", "5"),
                    ("batch.num.messages", "10000"),
                    ("batch.size", "1000000"),
                    ("queue.buffering.max.messages", "1000000"),
                    ("queue.buffering.max.kbytes", "1048576"),
                    ("message.timeout.ms", "300000"),
                ],
            );
            let payload = Arc::clone(&payload);
            let topic = args.common.topic.clone();
            let rate = args.rate / u64::from(args.producers.max(1));
            let ready = Arc::clone(&ready);
            std::thread::spawn(move || {
                produce_thread(config, &topic, records, &payload, rate, epoch, &ready)
            })
        })
        .collect();
    ready.wait();
    let start = Instant::now();
    let mut histogram = new_histogram();
    let mut failed = 0;
    for t in threads {
        let (h, f) = match t.join() {
            Ok(r) => r,
            Err(_) => fail("a producer thread panicked".into()),
        };
        let _ = histogram.add(&h);
        failed += f;
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = args.common.records * args.record_size as u64;
    let ms = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
    serde_json::json!({
        "records": args.common.records,
        "bytes": bytes,
        "secs": secs,
        "mib_per_s": bytes as f64 / secs / (1024.0 * 1024.0),
        "records_per_s": args.common.records as f64 / secs,
        "latency_ms": {"p50": ms(0.5), "p99": ms(0.99), "p999": ms(0.999)},
        "failed": failed,
    })
}

/// `total` split over `parts` as evenly as possible.
fn split(total: u64, parts: u32) -> Vec<u64> {
    let parts = u64::from(parts.max(1));
    (0..parts)
        .map(|i| total / parts + u64::from(i < total % parts))
        .collect()
}

/// One producer: sends `records` records (paced to `rate` a second unless 0), then waits for
/// every delivery report; returns its latency histogram and its failed deliveries.
fn produce_thread(
    config: ClientConfig,
    topic: &str,
    records: u64,
    payload: &[u8],
    rate: u64,
    epoch: Instant,
    ready: &std::sync::Barrier,
) -> (Histogram<u64>, u64) {
    let context = LatencyContext {
        start: epoch,
        histogram: parking_lot::Mutex::new(new_histogram()),
        failed: Default::default(),
    };
    let producer: BaseProducer<LatencyContext> = match config.create_with_context(context) {
        Ok(p) => p,
        Err(e) => fail(format!("creating a producer: {e}")),
    };
    let warm_up = BaseRecord::<[u8], [u8], usize>::with_opaque_to(topic, WARM_UP).payload(payload);
    if let Err((e, _)) = producer.send(warm_up) {
        fail(format!("warm-up send: {e}"));
    }
    if let Err(e) = producer.flush(Duration::from_secs(FLUSH_WAIT_SECS_MAX)) {
        fail(format!("warm-up flush: {e}"));
    }
    ready.wait();
    let began = Instant::now();
    for i in 0..records {
        if rate > 0 {
            let due = began + Duration::from_secs_f64(i as f64 / rate as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                // Pacing to the asked rate; deliveries are served meanwhile.
                producer.poll(wait);
            }
        }
        send(&producer, topic, payload);
        if i % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    if let Err(e) = producer.flush(Duration::from_secs(FLUSH_WAIT_SECS_MAX)) {
        fail(format!("flush: {e}"));
    }
    let context = producer.context();
    let histogram = context.histogram.lock().clone();
    (
        histogram,
        context.failed.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// Hands one record to librdkafka, serving delivery reports while its queue is full.
fn send(producer: &BaseProducer<LatencyContext>, topic: &str, payload: &[u8]) {
    let mut record = BaseRecord::<[u8], [u8], usize>::with_opaque_to(
        topic,
        producer.context().start.elapsed().as_micros() as usize,
    )
    .payload(payload);
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                record = r;
                producer.poll(Duration::from_millis(1));
            }
            Err((e, _)) => fail(format!("send: {e}")),
        }
    }
}

fn consume(args: &CommonArgs) -> serde_json::Value {
    let consumer: BaseConsumer = match client_config(
        args,
        &[
            ("group.id", "rdkafka-load"),
            ("enable.auto.commit", "false"),
            ("fetch.max.bytes", "52428800"),
            ("max.partition.fetch.bytes", "10485760"),
        ],
    )
    .create()
    {
        Ok(c) => c,
        Err(e) => fail(format!("creating a consumer: {e}")),
    };
    let metadata = match consumer.fetch_metadata(Some(&args.topic), Duration::from_secs(30)) {
        Ok(m) => m,
        Err(e) => fail(format!("metadata: {e}")),
    };
    let mut assignment = TopicPartitionList::new();
    for t in metadata.topics() {
        for p in t.partitions() {
            let _ = assignment.add_partition_offset(t.name(), p.id(), Offset::Beginning);
        }
    }
    if let Err(e) = consumer.assign(&assignment) {
        fail(format!("assign: {e}"));
    }
    let (mut records, mut bytes) = (0u64, 0u64);
    let mut errors: HashMap<String, u64> = HashMap::new();
    let start = Instant::now();
    let mut last_record = Instant::now();
    while records < args.records {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                records += 1;
                bytes += m.payload_len() as u64;
                last_record = Instant::now();
            }
            Some(Err(e)) => *errors.entry(e.to_string()).or_default() += 1,
            None => {}
        }
        if last_record.elapsed() > Duration::from_secs(CONSUME_IDLE_SECS_MAX) {
            fail(format!(
                "no record for {CONSUME_IDLE_SECS_MAX} s after {records}"
            ));
        }
    }
    let secs = start.elapsed().as_secs_f64();
    serde_json::json!({
        "records": records,
        "bytes": bytes,
        "secs": secs,
        "mib_per_s": bytes as f64 / secs / (1024.0 * 1024.0),
        "records_per_s": records as f64 / secs,
        "errors": errors,
    })
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn records_split_evenly_over_producers() {
        assert_eq!(split(10, 3), vec![4, 3, 3]);
        assert_eq!(split(2, 4), vec![1, 1, 0, 0]);
        assert_eq!(split(5, 0), vec![5]);
    }
}
