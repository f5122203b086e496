//! The quota convergence benchmark (issue 33): a librdkafka producer sending as fast as it
//! can under a `producer_byte_rate` quota on its client id, second by second, on Brook and on
//! the reference Apache Kafka 4.4 cluster (`scripts/kafka-reference`), each three combined
//! nodes with Kafka's default quota window (`quota.window.num` 11 samples of
//! `quota.window.size.seconds` 1): how fast the acknowledged byte rate comes down to the quota
//! after the first window's burst, and how close to it it stays.
//!
//!     scripts/kafka-reference fetch
//!     cargo build --release --bin brook --bin quota_convergence
//!     target/release/quota_convergence --brook-bin target/release/brook --reps 2
//!
//! Each round starts a fresh cluster per system, alternating which goes first (round 1 Brook
//! then Kafka, round 2 Kafka then Brook, ...), sets the quota with AlterClientQuotas (as
//! `kafka-configs --entity-type clients --add-config producer_byte_rate=...` does), and runs
//! the producer for `--seconds` (after `--warm-up-seconds` of another client id sending under
//! no quota, if given). Acknowledged bytes are counted in the delivery callback;
//! the largest throttle time per second comes from librdkafka's statistics (`throttle.max`
//! of each broker), which it takes from the Produce answers' `throttle_time_ms`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use brook_chaos::target::{BrookCluster, KafkaCluster, Target};
use brook_protocol_tests::rd::ThrottleStats;
use brook_protocol_tests::wire::WireClient;
use clap::Parser;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::AlterClientQuotasRequest;
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::json;

const TOPIC: &str = "quota-convergence";
const CLIENT_ID: &str = "quota-bench";
/// `--warm-up-seconds`' producer, under no quota.
const WARM_UP_CLIENT_ID: &str = "quota-bench-warm-up";
const RECORD_BYTES: usize = 8 * 1024;

#[derive(Parser, Debug)]
#[command(about = "A producer under producer_byte_rate, second by second, on Brook and Kafka 4.4")]
struct Args {
    #[arg(long, default_value = "target/release/brook")]
    brook_bin: PathBuf,
    #[arg(long, default_value = "scripts/kafka-reference")]
    kafka_script: PathBuf,
    /// Rounds; each runs both systems, the order turning round each time.
    #[arg(long, default_value_t = 2)]
    reps: usize,
    /// How long each producer sends.
    #[arg(long, default_value_t = 40)]
    seconds: u64,
    /// The quota, bytes per second.
    #[arg(long, default_value_t = 1024.0 * 1024.0)]
    quota_bytes_per_second: f64,
    /// Before the quota is set, another client id sends flat out for this long, so each
    /// cluster has its partitions led and its code warm when the measured producer starts
    /// (a node still slow to take records spreads the first window's burst over seconds).
    #[arg(long, default_value_t = 0)]
    warm_up_seconds: u64,
    /// Writes every round's per-second figures here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// One second of a run: bytes acknowledged in it, and the largest throttle reported in it.
#[derive(Debug, Clone, Copy)]
struct Second {
    acked_bytes: u64,
    throttle_ms_max: i64,
}

fn start(system: &str, args: &Args) -> Result<Box<dyn Target>, String> {
    let overrides = vec![("default.replication.factor".to_string(), "3".to_string())];
    match system {
        "brook" => BrookCluster::start(&args.brook_bin, 3, None, &overrides)
            .map(|c| Box::new(c) as Box<dyn Target>),
        _ => KafkaCluster::start(&args.kafka_script, &overrides)
            .map(|c| Box::new(c) as Box<dyn Target>),
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// `producer_byte_rate` for [`CLIENT_ID`], through any node (forwarded to the controller).
fn set_quota(c: &mut WireClient, bytes_per_second: f64) -> Result<(), String> {
    let entry = EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(s("client-id"))
            .with_entity_name(Some(s(CLIENT_ID)))])
        .with_ops(vec![OpData::default()
            .with_key(s("producer_byte_rate"))
            .with_value(bytes_per_second)]);
    let req = AlterClientQuotasRequest::default().with_entries(vec![entry]);
    let r = c.try_request(1, &req)?;
    match r.entries.first().map(|e| e.error_code) {
        Some(0) => Ok(()),
        other => Err(format!("AlterClientQuotas answered {other:?}")),
    }
}

/// Sends flat out as `client_id` for `seconds`, sampling the counters once a second.
fn produce(bootstrap: &str, client_id: &str, seconds: u64) -> Result<Vec<Second>, String> {
    let counters = ThrottleStats::default();
    let p: BaseProducer<ThrottleStats> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        .set("linger.ms", "5")
        .set("queue.buffering.max.kbytes", "1024")
        .set("statistics.interval.ms", "500")
        .create_with_context(counters.clone())
        .map_err(|e| e.to_string())?;
    let payload = vec![7u8; RECORD_BYTES];
    let mut out = Vec::new();
    let (mut acked_before, start) = (0u64, Instant::now());
    let mut next = start + Duration::from_secs(1);
    while out.len() < seconds as usize {
        let rec: BaseRecord<'_, [u8], [u8], ()> = BaseRecord::to(TOPIC).payload(&payload[..]);
        if p.send(rec).is_err() {
            // The local queue is full: the brokers are holding the producer back.
            p.poll(Duration::from_millis(5));
        }
        p.poll(Duration::ZERO);
        if Instant::now() >= next {
            let acked = counters.acked_bytes.load(Ordering::Relaxed);
            out.push(Second {
                acked_bytes: acked - acked_before,
                throttle_ms_max: counters.throttle_ms_max.swap(0, Ordering::Relaxed),
            });
            acked_before = acked;
            next += Duration::from_secs(1);
        }
    }
    let _ = p.flush(Duration::from_secs(30));
    Ok(out)
}

fn run(system: &str, args: &Args) -> Result<Vec<Second>, String> {
    let cluster = start(system, args)?;
    let boot = cluster.bootstrap();
    let first = boot.split(',').next().unwrap_or_default().to_string();
    let mut c =
        WireClient::try_connect(&first, Duration::from_secs(10)).map_err(|e| e.to_string())?;
    c.ensure_topic(TOPIC);
    if args.warm_up_seconds > 0 {
        produce(&boot, WARM_UP_CLIENT_ID, args.warm_up_seconds)?;
    }
    set_quota(&mut c, args.quota_bytes_per_second)?;
    produce(&boot, CLIENT_ID, args.seconds)
}

/// The mean of seconds `from..` as a fraction of the quota.
fn settled_ratio(run: &[Second], from: usize, quota: f64) -> f64 {
    let tail = &run[from.min(run.len())..];
    let bytes: u64 = tail.iter().map(|s| s.acked_bytes).sum();
    bytes as f64 / tail.len().max(1) as f64 / quota
}

fn print_table(runs: &BTreeMap<(usize, &'static str), Vec<Second>>, args: &Args) {
    let q = args.quota_bytes_per_second;
    let cols: Vec<_> = runs.keys().copied().collect();
    let head: Vec<String> = cols.iter().map(|(r, s)| format!("{s} r{r}")).collect();
    println!("| second | {} |", head.join(" | "));
    println!("|---:|{}", "---:|".repeat(cols.len()));
    for i in 0..args.seconds as usize {
        let cells: Vec<String> = cols
            .iter()
            .map(|k| match runs[k].get(i) {
                Some(s) => format!("{:.2} ({} ms)", s.acked_bytes as f64 / q, s.throttle_ms_max),
                None => "-".into(),
            })
            .collect();
        println!("| {} | {} |", i + 1, cells.join(" | "));
    }
    let from = args.seconds as usize / 2;
    for k in &cols {
        println!(
            "{} round {}: seconds {}..{} at {:.3} of the quota",
            k.1,
            k.0,
            from + 1,
            args.seconds,
            settled_ratio(&runs[k], from, q)
        );
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let mut runs = BTreeMap::new();
    for round in 1..=args.reps {
        let order: [&'static str; 2] = match round % 2 {
            1 => ["brook", "kafka"],
            _ => ["kafka", "brook"],
        };
        for system in order {
            eprintln!("round {round}: {system}");
            match run(system, &args) {
                Ok(r) => {
                    runs.insert((round, system), r);
                }
                Err(e) => {
                    eprintln!("round {round}: {system} failed: {e}");
                    return std::process::ExitCode::FAILURE;
                }
            }
        }
    }
    print_table(&runs, &args);
    if let Some(path) = &args.json {
        let v: Vec<_> = runs
            .iter()
            .map(|((round, system), r)| {
                json!({"round": round, "system": system,
                       "acked_bytes": r.iter().map(|s| s.acked_bytes).collect::<Vec<_>>(),
                       "throttle_ms_max": r.iter().map(|s| s.throttle_ms_max).collect::<Vec<_>>()})
            })
            .collect();
        if let Err(e) = std::fs::write(
            path,
            json!({"quota_bytes_per_second": args.quota_bytes_per_second, "runs": v}).to_string(),
        ) {
            eprintln!("{}: {e}", path.display());
        }
    }
    std::process::ExitCode::SUCCESS
}
