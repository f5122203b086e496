//! The failover benchmark (issue 31): for Brook and the reference Apache Kafka 4.4 cluster
//! (`scripts/kafka-reference`), each with three combined broker+controller nodes and the chaos
//! tool's broker settings (`brook_chaos::run::RunConfig::broker_overrides`), the time from a
//! partition leader's SIGKILL or SIGTERM (controlled shutdown) to the first acknowledged
//! acks=all write on each partition it led, for a leader that is and one that is not the
//! active controller. The writes come from one librdkafka producer with the chaos tool's
//! settings (`brook_chaos::workload::producer_config`: acks=all, idempotence, 50 ms retry
//! backoff) sending one record to every partition each `--interval-ms`.
//!
//!     scripts/kafka-reference fetch
//!     cargo build --release --bin brook --bin failover
//!     target/release/failover --brook-bin target/release/brook --reps 3 --json target/failover.json
//!
//! Each round starts a fresh cluster per system, alternating which goes first (round 1 Brook
//! then Kafka, round 2 Kafka then Brook, ...), and runs every case on it: a new topic, its
//! leaders read from Metadata and the active controller from DescribeQuorum, writes until each
//! partition has acknowledged [`WARM_UP_ACKS`] and then for a random part of a second, the
//! signal, writes until each of the victim's
//! partitions has an acknowledgement after the victim is gone, then the victim restarted.
//! Per victim partition it reports `recovered_ms` (from the signal to the first acknowledged
//! write after the longest stretch without one: for SIGKILL the first write on the new leader)
//! and `outage_ms` (that stretch, from the signal or the last acknowledgement after it). On
//! Brook it also reads the supervisor's event stream (docs/EVENTS.md) for the timeline: when
//! the controller fenced the victim and when each new leader applied its election.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use brook_chaos::run::RunConfig;
use brook_chaos::schedule::Weights;
use brook_chaos::target::{signal, BrookCluster, KafkaCluster, Target};
use brook_chaos::workload::{producer_config, ClientSettings, WorkloadKind};
use brook_protocol_tests::rd::{self, RecProducer};
use brook_protocol_tests::wire::{topic_name, WireClient};
use clap::Parser;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::DescribeQuorumRequest;
use nix::sys::signal::Signal;
use rdkafka::producer::{BaseRecord, Producer};
use serde_json::{json, Value};

/// Acknowledged writes per partition before the signal: the producer knows every leader.
const WARM_UP_ACKS: usize = 20;
/// Bound on one case's wait for its victim's partitions to take writes again.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on a fresh topic's partitions all having a leader and a full ISR.
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// After the victim is gone, how long writes go on once every partition has recovered, so
/// that a later, longer stall would still be seen.
const TAIL: Duration = Duration::from_millis(500);
const REPLICATION_FACTOR: u32 = 3;
/// librdkafka's topic scan, which re-queries the leader of a partition whose leader is down.
const CLIENT_SCAN_PERIOD_MS: u64 = 1000;

#[derive(Parser, Debug)]
#[command(about = "Leader failover time, Brook next to Kafka 4.4")]
struct Args {
    /// brook, kafka or both.
    #[arg(long, default_value = "both")]
    system: String,
    /// Comma-separated cases: kill-leader, kill-controller, term-leader, term-controller.
    #[arg(
        long,
        default_value = "kill-leader,kill-controller,term-leader,term-controller"
    )]
    cases: String,
    /// Rounds (each: a fresh cluster per system, every case once).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    #[arg(long, default_value_t = 6)]
    partitions: i32,
    /// Between two records to the same partition.
    #[arg(long, default_value_t = 10)]
    interval_ms: u64,
    #[arg(long, env = "BROOK_BIN", default_value = "target/release/brook")]
    brook_bin: PathBuf,
    #[arg(long, default_value = "scripts/kafka-reference")]
    kafka_script: PathBuf,
    /// Brook's data directories and node logs go under here (kept), one per round; a temporary
    /// directory otherwise.
    #[arg(long)]
    brook_data: Option<PathBuf>,
    /// Writes every sample (and Brook's timelines) here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Case {
    term: bool,
    controller: bool,
}

impl Case {
    fn parse(s: &str) -> Result<Case, String> {
        let (sig, who) = s.split_once('-').ok_or_else(|| format!("bad case {s}"))?;
        let term = match sig {
            "kill" => false,
            "term" => true,
            _ => return Err(format!("bad case {s}: kill-... or term-...")),
        };
        let controller = match who {
            "leader" => false,
            "controller" => true,
            _ => return Err(format!("bad case {s}: ...-leader or ...-controller")),
        };
        Ok(Case { term, controller })
    }

    fn name(self) -> String {
        let sig = if self.term { "term" } else { "kill" };
        let who = if self.controller {
            "controller"
        } else {
            "leader"
        };
        format!("{sig}-{who}")
    }
}

/// The chaos tool's run settings, for its broker overrides.
fn chaos_config(partitions: i32) -> RunConfig {
    RunConfig {
        seed: 0,
        steps: 0,
        weights: Weights::default(),
        schedule: None,
        clients: ClientSettings {
            workload: WorkloadKind::Send,
            partitions,
            producers: 1,
            consumers: 0,
            group_consumers: 0,
            share_consumers: 0,
            kafka_lib: Default::default(),
            rate: 100,
            acks: "all".into(),
            idempotence: true,
        },
        min_insync_replicas: 2,
        replication_factor: REPLICATION_FACTOR,
        replica_lag_ms: 3000,
        settle_secs: 60,
        time_limit_secs: None,
    }
}

enum Cluster {
    Brook(BrookCluster),
    Kafka(KafkaCluster),
}

impl Cluster {
    fn start(system: &str, round: usize, args: &Args) -> Result<Cluster, String> {
        let overrides = chaos_config(args.partitions).broker_overrides();
        let data = args
            .brook_data
            .as_ref()
            .map(|d| d.join(format!("round-{round}")));
        match system {
            "brook" => {
                BrookCluster::start(&args.brook_bin, 3, data, &overrides).map(Cluster::Brook)
            }
            _ => KafkaCluster::start(&args.kafka_script, &overrides).map(Cluster::Kafka),
        }
    }

    fn target(&mut self) -> &mut dyn Target {
        match self {
            Cluster::Brook(c) => c,
            Cluster::Kafka(c) => c,
        }
    }
}

/// The live nodes' client addresses, by node id.
fn addresses(t: &mut dyn Target) -> BTreeMap<i32, String> {
    let boot = t.bootstrap();
    let ids = t.node_ids();
    ids.into_iter()
        .zip(boot.split(',').map(str::to_string))
        .collect()
}

/// A connection to any node that answers.
fn any_node(t: &mut dyn Target) -> Result<WireClient, String> {
    for (_, a) in addresses(t) {
        if let Ok(c) = WireClient::try_connect(&a, Duration::from_secs(2)) {
            return Ok(c);
        }
    }
    Err("no node accepts connections".into())
}

/// Each partition's leader and ISR, when every partition has a leader and a full ISR.
fn full_leaders(t: &mut dyn Target, topic: &str) -> Option<BTreeMap<i32, i32>> {
    let mut c = any_node(t).ok()?;
    let req = WireClient::metadata_request(&[topic], false);
    let md = c.try_request(12, &req).ok()?;
    let mt = md.topics.first()?;
    let full = !mt.partitions.is_empty()
        && mt
            .partitions
            .iter()
            .all(|p| p.leader_id.0 >= 0 && p.isr_nodes.len() == REPLICATION_FACTOR as usize);
    let brokers_up = md.brokers.len() == REPLICATION_FACTOR as usize;
    (full && brokers_up).then(|| {
        mt.partitions
            .iter()
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect()
    })
}

/// Creates `topic` (retrying while a restarted node registers) and waits for its leaders.
fn create_topic(
    t: &mut dyn Target,
    topic: &str,
    partitions: i32,
) -> Result<BTreeMap<i32, i32>, String> {
    let deadline = Instant::now() + TOPIC_READY_TIMEOUT;
    let req = WireClient::create_topics_request(
        topic,
        partitions,
        REPLICATION_FACTOR as i16,
        &[],
        Duration::from_secs(10),
    );
    loop {
        let created = any_node(t)
            .and_then(|mut c| c.try_request(5, &req))
            .map(|r| r.topics.first().map_or(-1, |x| x.error_code));
        // 36: TOPIC_ALREADY_EXISTS (an earlier attempt's answer was lost).
        if matches!(created, Ok(0) | Ok(36)) {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!("create {topic}: {created:?}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    loop {
        if let Some(l) = full_leaders(t, topic) {
            return Ok(l);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{topic}: no full ISR within {TOPIC_READY_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The active controller, from DescribeQuorum (a broker forwards it to the controller).
fn active_controller(t: &mut dyn Target) -> Result<i32, String> {
    let mut req = DescribeQuorumRequest::default();
    let mut td = TopicData::default();
    td.topic_name = topic_name("__cluster_metadata");
    td.partitions = vec![PartitionData::default()];
    req.topics = vec![td];
    let resp = any_node(t)?.try_request(1, &req)?;
    let leader = resp
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.leader_id.0)
        .ok_or("DescribeQuorum without a partition")?;
    if leader < 0 {
        return Err("no active controller".into());
    }
    Ok(leader)
}

/// Which node to stop: the active controller, or the lowest-numbered other node leading a
/// partition.
fn victim(case: Case, controller: i32, leaders: &BTreeMap<i32, i32>) -> Result<i32, String> {
    let leads = |n: i32| leaders.values().any(|&l| l == n);
    let pick = if case.controller {
        Some(controller).filter(|&c| leads(c))
    } else {
        let mut others: Vec<i32> = leaders
            .values()
            .copied()
            .filter(|&l| l != controller)
            .collect();
        others.sort_unstable();
        others.first().copied()
    };
    pick.ok_or_else(|| format!("no victim for {} in {leaders:?}", case.name()))
}

/// Acknowledgement times per partition.
type Acks = BTreeMap<i32, Vec<Instant>>;

/// The producer and what it has seen.
struct Writer {
    producer: RecProducer,
    topic: String,
    partitions: i32,
    interval: Duration,
    next_send: Instant,
    sent: usize,
    acks: Acks,
    failed: usize,
}

impl Writer {
    fn new(bootstrap: &str, topic: &str, partitions: i32, interval_ms: u64) -> Writer {
        let mut config = producer_config("all", true);
        // `FAILOVER_RDKAFKA_DEBUG=eos,metadata,...`: librdkafka's debug lines on stderr, to
        // see where a client's share of a failover goes.
        let debug = std::env::var("FAILOVER_RDKAFKA_DEBUG").ok();
        if let Some(d) = &debug {
            config.push(("debug", d.clone()));
        }
        let settings: Vec<(&str, &str)> = config.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let log: Option<rd::LogSink> = debug.map(|_| {
            Box::new(|_level, fac: &str, message: &str| {
                eprintln!("{} rdkafka {fac}: {message}", unix_ms());
            }) as rd::LogSink
        });
        Writer {
            producer: rd::producer_with_log(bootstrap, &settings, log),
            topic: topic.to_string(),
            partitions,
            interval: Duration::from_millis(interval_ms),
            next_send: Instant::now(),
            sent: 0,
            acks: Acks::new(),
            failed: 0,
        }
    }

    /// Sends the records due, serves delivery reports, and files them.
    fn step(&mut self) {
        if Instant::now() >= self.next_send {
            for p in 0..self.partitions {
                let value = format!("{}", self.sent);
                let rec = BaseRecord::with_opaque_to(&self.topic, self.sent)
                    .partition(p)
                    .payload(value.as_bytes());
                rd::send(&self.producer, rec);
                self.sent += 1;
            }
            self.next_send += self.interval;
        }
        self.producer.poll(Duration::from_millis(1));
        let reports = std::mem::take(&mut *self.producer.context().deliveries.lock().unwrap());
        for d in reports {
            match d.error {
                None => self.acks.entry(d.partition).or_default().push(d.at),
                Some(_) => self.failed += 1,
            }
        }
    }

    fn acks_since(&self, p: i32, t: Instant) -> usize {
        self.acks
            .get(&p)
            .map_or(0, |v| v.iter().filter(|&&a| a >= t).count())
    }

    /// Writes until `done` holds or `timeout` passes; whether it held.
    fn run_until(&mut self, timeout: Duration, mut done: impl FnMut(&Writer) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            self.step();
            if done(self) {
                return true;
            }
        }
        false
    }
}

/// One victim partition's figures: from the signal to the first write after the longest
/// stretch without one, and that stretch.
fn recovery(acks: &[Instant], signalled: Instant) -> Option<(f64, f64)> {
    let before = acks.iter().rev().find(|&&a| a < signalled).copied();
    let after: Vec<Instant> = acks.iter().copied().filter(|&a| a >= signalled).collect();
    let mut prev = before.unwrap_or(signalled);
    let mut best: Option<(Instant, Instant)> = None;
    for a in after {
        let gap = a - prev.max(signalled);
        if best.is_none_or(|(s, e)| gap > e - s.max(signalled)) {
            best = Some((prev, a));
        }
        prev = a;
    }
    let (start, end) = best?;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Some((ms(end - signalled), ms(end - start.max(signalled))))
}

/// Milliseconds in `[0, CLIENT_SCAN_PERIOD_MS)`, from the clock's nanoseconds (no need for
/// more randomness than that here).
fn phase_delay_ms() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    u64::from(nanos) % CLIENT_SCAN_PERIOD_MS
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What one case measured.
struct Sample {
    victim: i32,
    controller: i32,
    /// Per victim partition: (partition, recovered_ms, outage_ms).
    partitions: Vec<(i32, f64, f64)>,
    failed: usize,
    signalled_unix_ms: u64,
}

/// Whether `pid` is a live process (a zombie is gone: it no longer serves).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// Signals the victim, writes until it is gone, then until each of its partitions has
/// taken a write since, then [`TAIL`] more. Returns when the signal went.
fn measure(w: &mut Writer, case: Case, pid: u32, led: &[i32]) -> Result<(Instant, u64), String> {
    let sig = if case.term {
        Signal::SIGTERM
    } else {
        Signal::SIGKILL
    };
    let at = Instant::now();
    let at_unix = unix_ms();
    signal(pid, sig)?;
    if !w.run_until(RECOVERY_TIMEOUT, |_| !alive(pid)) {
        return Err(format!("pid {pid} still runs after {RECOVERY_TIMEOUT:?}"));
    }
    let gone = Instant::now();
    let back = w.run_until(RECOVERY_TIMEOUT, |w| {
        led.iter().all(|&p| w.acks_since(p, gone) > 0)
    });
    if !back {
        return Err(format!(
            "{}: no write within {RECOVERY_TIMEOUT:?}",
            case.name()
        ));
    }
    w.run_until(TAIL, |_| false);
    Ok((at, at_unix))
}

/// The supervisor's buffered events (`GET /v1/events`, a server-sent event stream that stays
/// open): read until it has been quiet for a moment.
fn brook_events(supervisor: &str) -> Result<Vec<Value>, String> {
    let mut s = TcpStream::connect(supervisor).map_err(|e| format!("{supervisor}: {e}"))?;
    let req = format!(
        "GET /v1/events HTTP/1.1\r\nHost: {supervisor}\r\nAccept: text/event-stream\r\n\r\n"
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    let mut buf = [0u8; 64 << 10];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        body.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&body);
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .collect())
}

/// Brook's story of one case, in ms after the signal: the victim's exit, its fencing (or
/// controlled shutdown) by the controller, each new leader applying its election.
fn brook_timeline(supervisor: &str, topic: &str, victim: i32, at_unix: u64) -> Value {
    let events = match brook_events(supervisor) {
        Ok(e) => e,
        Err(e) => return json!({ "error": e }),
    };
    let rel = |e: &Value| e["time_ms"].as_u64().map(|t| t as i64 - at_unix as i64);
    let mut out = Vec::new();
    for e in &events {
        let Some(ms) = rel(e) else { continue };
        if ms < -100 {
            continue;
        }
        let kind = e["type"].as_str().unwrap_or("");
        let ours = match kind {
            "node_killed" | "node_exited" => e["node"].as_i64() == Some(victim as i64),
            "broker_fenced" => e["broker"].as_i64() == Some(victim as i64),
            "leader_elected" | "isr_shrink" | "isr_expand" => e["topic"].as_str() == Some(topic),
            _ => false,
        };
        if ours {
            out.push(json!({ "ms": ms, "node": e["node"], "type": kind,
                "partition": e["partition"], "leader": e["leader"], "isr": e["isr"] }));
        }
    }
    Value::Array(out)
}

/// One case on a running cluster: a fresh topic, the signal, the measurement, the restart.
fn run_case(c: &mut Cluster, case: Case, round: usize, args: &Args) -> Result<Value, String> {
    let topic = format!("failover-{}-{round}", case.name());
    let t = c.target();
    let leaders = create_topic(t, &topic, args.partitions)?;
    let controller = active_controller(t)?;
    let victim = victim(case, controller, &leaders)?;
    let led: Vec<i32> = leaders
        .iter()
        .filter(|(_, &l)| l == victim)
        .map(|(&p, _)| p)
        .collect();
    let pid = t.pid(victim)?.ok_or("victim not running")?;
    let mut w = Writer::new(&t.bootstrap(), &topic, args.partitions, args.interval_ms);
    let start = Instant::now();
    let warm = w.run_until(TOPIC_READY_TIMEOUT, |w| {
        (0..w.partitions).all(|p| w.acks_since(p, start) >= WARM_UP_ACKS)
    });
    if !warm {
        return Err(format!("{topic}: no steady writes before the signal"));
    }
    // librdkafka re-queries a leaderless partition on a 1 s timer that starts with the
    // producer; a signal at a fixed moment after the warm-up would meet that timer at the
    // same phase in every case of a system (and a different one per system). A delay drawn
    // uniformly over one period makes each case meet it at any phase.
    w.run_until(Duration::from_millis(phase_delay_ms()), |_| false);
    let (at, at_unix) = measure(&mut w, case, pid, &led)?;
    let sample = Sample {
        victim,
        controller,
        partitions: led
            .iter()
            .filter_map(|&p| {
                let (r, o) = recovery(w.acks.get(&p)?, at)?;
                Some((p, r, o))
            })
            .collect(),
        failed: w.failed,
        signalled_unix_ms: at_unix,
    };
    drop(w);
    let timeline = match c {
        Cluster::Brook(b) => brook_timeline(b.supervisor(), &topic, victim, at_unix),
        Cluster::Kafka(_) => Value::Null,
    };
    c.target().start(victim)?;
    Ok(sample.to_json(case, timeline))
}

impl Sample {
    fn to_json(&self, case: Case, timeline: Value) -> Value {
        json!({
            "case": case.name(),
            "victim": self.victim,
            "controller": self.controller,
            "partitions": self.partitions.iter()
                .map(|(p, r, o)| json!({ "partition": p, "recovered_ms": r, "outage_ms": o }))
                .collect::<Vec<_>>(),
            "failed_deliveries": self.failed,
            "signalled_unix_ms": self.signalled_unix_ms,
            "timeline": timeline,
        })
    }
}

/// One system's round: a fresh cluster, every case once.
fn run_round(
    system: &str,
    round: usize,
    cases: &[Case],
    args: &Args,
) -> Result<Vec<Value>, String> {
    let mut c = Cluster::start(system, round, args)?;
    let mut out = Vec::new();
    for &case in cases {
        let mut v = run_case(&mut c, case, round, args)?;
        v["system"] = json!(system);
        v["round"] = json!(round);
        eprintln!("{v}");
        out.push(v);
    }
    Ok(out)
}

fn median_max(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[n - 1])
}

/// The table: per case and system, median and max over every victim partition of every round.
fn print_table(samples: &[Value], cases: &[Case], systems: &[&str]) {
    println!("| case | system | samples | recovered ms median | max | outage ms median | max |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for case in cases {
        for system in systems {
            let figures = |key: &str| -> Vec<f64> {
                samples
                    .iter()
                    .filter(|s| s["case"] == case.name() && s["system"] == *system)
                    .flat_map(|s| s["partitions"].as_array().cloned().unwrap_or_default())
                    .filter_map(|p| p[key].as_f64())
                    .collect()
            };
            let r = figures("recovered_ms");
            let n = r.len();
            let (rm, rx) = median_max(r);
            let (om, ox) = median_max(figures("outage_ms"));
            println!(
                "| {} | {system} | {n} | {rm:.0} | {rx:.0} | {om:.0} | {ox:.0} |",
                case.name()
            );
        }
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let cases: Vec<Case> = match args.cases.split(',').map(Case::parse).collect() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("failover: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let systems: Vec<&str> = match args.system.as_str() {
        "both" => vec!["brook", "kafka"],
        "brook" => vec!["brook"],
        "kafka" => vec!["kafka"],
        other => {
            eprintln!("failover: --system brook, kafka or both, not {other}");
            return std::process::ExitCode::from(2);
        }
    };
    let mut samples = Vec::new();
    for round in 0..args.reps {
        let mut order = systems.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for system in order {
            match run_round(system, round, &cases, &args) {
                Ok(s) => samples.extend(s),
                Err(e) => {
                    eprintln!("failover: {system} round {round}: {e}");
                    return std::process::ExitCode::FAILURE;
                }
            }
        }
    }
    print_table(&samples, &cases, &systems);
    if let Some(path) = &args.json {
        if let Err(e) = std::fs::write(path, Value::Array(samples).to_string()) {
            eprintln!("failover: {}: {e}", path.display());
            return std::process::ExitCode::FAILURE;
        }
    }
    std::process::ExitCode::SUCCESS
}
