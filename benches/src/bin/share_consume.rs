//! The share-group consume benchmark (issue 30): one topic of one partition, preloaded with
//! Kafka's own `ProducerPerformance`, consumed by 1, 4 and 16 `KafkaShareConsumer`s of one
//! share group with Kafka 4.4's own `ShareConsumerPerformance` (`kafka-share-consumer-perf-test`,
//! its `--threads` option), on one Brook node and on one Apache Kafka 4.4 node
//! (`scripts/kafka-reference start --nodes 1`), both with their defaults (the `group.share.*`
//! settings, RF 1). Throughput is the tool's own figures (records/s, MB/s); the cost is the
//! broker process's CPU seconds (utime + stime of `/proc/PID/stat`, before and after the
//! tool's run) per GB consumed.
//!
//!     scripts/kafka-reference fetch
//!     cargo build --release --bin brook && cargo build --bin share_consume
//!     target/debug/share_consume --brook-bin target/release/brook --reps 3
//!
//! (from a git worktree whose `target/` holds no jars: `KAFKA_REFERENCE_LIB=<lib>`, which
//! `scripts/kafka-reference` reads, and `--kafka-lib <lib>`). The harness only starts
//! processes and waits for them, so its own build does not matter; the broker's does.
//!
//! The tool's figures cover its whole run, the share group's join included, as both
//! systems' are; the broker's CPU is read around the tool's run only (not the preload).
//! A CI test of `--quick` is left out: the Kafka side alone takes about a minute (a JVM
//! node's start-up and three tool JVMs), and the tools' jars are fetched in the background
//! while `scripts/test` runs the cargo tests.
//!
//! Each round starts a fresh node per system, alternating which goes first (round 1 Brook
//! then Kafka, round 2 Kafka then Brook, ...), preloads the topic, and then for each consumer
//! count runs the tool once on a new share group whose `share.auto.offset.reset` is set to
//! `earliest` (IncrementalAlterConfigs on the group, as `kafka-configs --entity-type groups`
//! does), so every run consumes the whole topic from offset 0. The table gives the median of
//! the rounds and their spread (lowest to highest).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use brook_chaos::target::{BrookCluster, KafkaCluster, Target};
use brook_protocol_tests::wire::WireClient;
use clap::Parser;
use kafka_protocol::messages::incremental_alter_configs_request as iac;
use kafka_protocol::messages::IncrementalAlterConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

const TOPIC: &str = "share-consume";
/// `ConfigResource.Type.GROUP`.
const GROUP_RESOURCE_TYPE: i8 = 32;

#[derive(Parser, Debug)]
#[command(about = "Share-group consume throughput and broker CPU per GB, Brook next to Kafka 4.4")]
struct Args {
    #[arg(long, default_value = "target/release/brook")]
    brook_bin: PathBuf,
    #[arg(long, default_value = "scripts/kafka-reference")]
    kafka_script: PathBuf,
    /// The Kafka 4.4 jars (`scripts/kafka-reference fetch`), whose tools are the clients.
    #[arg(long, default_value = "target/kafka-reference/lib")]
    kafka_lib: PathBuf,
    /// `brook`, `kafka` or `both`.
    #[arg(long, default_value = "both")]
    system: String,
    /// Rounds; each runs both systems, the order turning round each time.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// The share consumers of each run (the tool's `--threads`).
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    consumers: Vec<u32>,
    /// Records preloaded, and consumed by each run.
    #[arg(long, default_value_t = 500_000)]
    records: u64,
    /// `ProducerPerformance --record-size`.
    #[arg(long, default_value_t = 1024)]
    record_bytes: u64,
    /// A bounded run for CI: 20 000 records, one round, 1 and 4 consumers.
    #[arg(long)]
    quick: bool,
    /// Writes every run's figures here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// One run of the tool: its own figures and the broker's CPU over it.
#[derive(Debug, Clone, Copy)]
struct Run {
    records: u64,
    mb: f64,
    mb_per_s: f64,
    records_per_s: f64,
    cpu_s: f64,
    /// The tool's JVM (all its consumers), for where the time goes: the same client on both.
    client_cpu_s: f64,
}

impl Run {
    /// Broker CPU seconds per GB (1024 MB, the tool's MB being MiB) consumed.
    fn cpu_s_per_gb(&self) -> f64 {
        self.cpu_s / (self.mb / 1024.0)
    }
}

/// What `scripts/kafka-reference` writes for one node, for Brook too: Kafka's defaults of 3
/// for the internal topics' replication would leave a single node without them.
const ONE_NODE: [(&str, &str); 5] = [
    ("offsets.topic.replication.factor", "1"),
    ("transaction.state.log.replication.factor", "1"),
    ("transaction.state.log.min.isr", "1"),
    ("share.coordinator.state.topic.replication.factor", "1"),
    ("share.coordinator.state.topic.min.isr", "1"),
];

fn start(system: &str, args: &Args) -> Result<Box<dyn Target>, String> {
    let one_node: Vec<(String, String)> = ONE_NODE
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match system {
        "brook" => BrookCluster::start(&args.brook_bin, 1, None, &one_node)
            .map(|c| Box::new(c) as Box<dyn Target>),
        _ => KafkaCluster::start_nodes(&args.kafka_script, 1, &[])
            .map(|c| Box::new(c) as Box<dyn Target>),
    }
}

/// `java -cp <lib>/* <class> <args>`, its stdout when it exits 0.
fn java_tool(lib: &Path, class: &str, tool_args: &[String]) -> Result<String, String> {
    let out = Command::new("java")
        .arg("-cp")
        .arg(format!("{}/*", lib.display()))
        .arg(class)
        .args(tool_args)
        .output()
        .map_err(|e| format!("java {class}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{class}: {}\n{stdout}\n{stderr}", out.status));
    }
    Ok(stdout)
}

/// Preloads [`TOPIC`] with Kafka's `ProducerPerformance` (the producer's defaults: acks=all,
/// batch.size 16384, linger.ms 5).
fn preload(bootstrap: &str, args: &Args) -> Result<(), String> {
    let tool_args: Vec<String> = [
        "--topic",
        TOPIC,
        "--num-records",
        &args.records.to_string(),
        "--record-size",
        &args.record_bytes.to_string(),
        "--throughput",
        "-1",
        "--producer-props",
        &format!("bootstrap.servers={bootstrap}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = java_tool(
        &args.kafka_lib,
        "org.apache.kafka.tools.ProducerPerformance",
        &tool_args,
    )?;
    eprintln!("  preload: {}", out.lines().last().unwrap_or(""));
    Ok(())
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// `share.auto.offset.reset=earliest` on `group` (the default, `latest`, would skip the
/// preloaded records), as `kafka-configs --entity-type groups --alter` sends it.
fn consume_from_earliest(c: &mut WireClient, group: &str) -> Result<(), String> {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        iac::AlterConfigsResource::default()
            .with_resource_type(GROUP_RESOURCE_TYPE)
            .with_resource_name(s(group))
            .with_configs(vec![iac::AlterableConfig::default()
                .with_name(s("share.auto.offset.reset"))
                .with_config_operation(0)
                .with_value(Some(s("earliest")))]),
    ]);
    let r = c.try_request(1, &req)?;
    match r.responses.first().map(|r| r.error_code) {
        Some(0) => Ok(()),
        other => Err(format!(
            "IncrementalAlterConfigs on group {group}: {other:?}"
        )),
    }
}

/// The process's user + system CPU seconds so far (`/proc/PID/stat` fields 14 and 15).
fn cpu_seconds(pid: u32, ticks_per_s: f64) -> Result<f64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // The command name (field 2) may hold spaces; the fields after its ')' are plain.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<f64, String> {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("/proc/{pid}/stat: no field {}", i + 3))
    };
    // `rest` starts at field 3 (state): utime is field 14, stime 15.
    Ok((field(11)? + field(12)?) / ticks_per_s)
}

/// User + system CPU seconds of this process's waited-for children (the tools; the brokers
/// are not waited for while they run).
fn children_cpu_seconds() -> Result<f64, String> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_CHILDREN).map_err(|e| format!("getrusage: {e}"))?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Ok(secs(u.user_time()) + secs(u.system_time()))
}

fn clock_ticks_per_s() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// The tool's summary line: `start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec,
/// data.consumed.in.nMsg, fetch.time.ms`.
fn parse_summary(stdout: &str) -> Result<(u64, f64, f64, f64), String> {
    if stdout.contains("WARNING: Exiting before consuming") {
        return Err(format!("the tool timed out:\n{stdout}"));
    }
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.split(", ").count() == 7)
        .ok_or_else(|| format!("no summary line in:\n{stdout}"))?;
    let f: Vec<&str> = line.split(", ").collect();
    let num = |i: usize| {
        f[i].trim()
            .parse::<f64>()
            .map_err(|e| format!("{line}: {e}"))
    };
    Ok((num(5)? as u64, num(2)?, num(3)?, num(4)?))
}

/// One run of `ShareConsumerPerformance --threads n` on a new share group.
fn consume(
    target: &mut dyn Target,
    c: &mut WireClient,
    n: u32,
    args: &Args,
) -> Result<Run, String> {
    let group = format!("perf-share-{n}");
    consume_from_earliest(c, &group)?;
    let id = target.node_ids().first().copied().ok_or("no node")?;
    let pid = target.pid(id)?.ok_or("the node does not run")?;
    let ticks = clock_ticks_per_s();
    let tool_args: Vec<String> = [
        "--bootstrap-server",
        &target.bootstrap(),
        "--topic",
        TOPIC,
        "--group",
        &group,
        "--num-records",
        &args.records.to_string(),
        "--threads",
        &n.to_string(),
        "--timeout",
        "60000",
        "--hide-header",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let before = cpu_seconds(pid, ticks)?;
    let client_before = children_cpu_seconds()?;
    let out = java_tool(
        &args.kafka_lib,
        "org.apache.kafka.tools.ShareConsumerPerformance",
        &tool_args,
    )?;
    let cpu_s = cpu_seconds(pid, ticks)? - before;
    let client_cpu_s = children_cpu_seconds()? - client_before;
    let (records, mb, mb_per_s, records_per_s) = parse_summary(&out)?;
    Ok(Run {
        records,
        mb,
        mb_per_s,
        records_per_s,
        cpu_s,
        client_cpu_s,
    })
}

type Runs = BTreeMap<(u32, &'static str), Vec<Run>>;

fn round(nth: usize, system: &'static str, args: &Args, runs: &mut Runs) -> Result<(), String> {
    let mut target = start(system, args)?;
    let boot = target.bootstrap();
    let mut c =
        WireClient::try_connect(&boot, Duration::from_secs(10)).map_err(|e| e.to_string())?;
    c.ensure_topic(TOPIC);
    preload(&boot, args)?;
    // The first run after the preload pays a JVM's warm-up (Kafka's JIT): each round starts
    // at another consumer count, so that no count always pays it.
    let mut counts = args.consumers.clone();
    let turn = (nth - 1) % counts.len().max(1);
    counts.rotate_left(turn);
    for n in counts {
        let r = consume(target.as_mut(), &mut c, n, args)?;
        eprintln!(
            "  {system} {n} consumers: {:.0} records/s, {:.1} MB/s, {:.2} CPU s ({:.2} s/GB), \
             client {:.2} CPU s",
            r.records_per_s,
            r.mb_per_s,
            r.cpu_s,
            r.cpu_s_per_gb(),
            r.client_cpu_s
        );
        runs.entry((n, system)).or_default().push(r);
    }
    Ok(())
}

/// The median and the spread (lowest, highest) of `v`.
fn median_spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    let median = if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    };
    (median, v[0], v[v.len() - 1])
}

fn cell(runs: &[Run], f: impl Fn(&Run) -> f64, digits: usize) -> String {
    if runs.is_empty() {
        return "-".into();
    }
    let (m, lo, hi) = median_spread(runs.iter().map(f).collect());
    format!("{m:.digits$} ({lo:.digits$}–{hi:.digits$})")
}

fn print_table(runs: &Runs, args: &Args) {
    println!(
        "| consumers | system | records/s | MB/s | broker CPU s per GB | client CPU s per GB \
         | rounds |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for &n in &args.consumers {
        for system in ["brook", "kafka"] {
            let Some(r) = runs.get(&(n, system)) else {
                continue;
            };
            println!(
                "| {n} | {system} | {} | {} | {} | {} | {} |",
                cell(r, |r| r.records_per_s, 0),
                cell(r, |r| r.mb_per_s, 1),
                cell(r, Run::cpu_s_per_gb, 2),
                cell(r, |r| r.client_cpu_s / (r.mb / 1024.0), 2),
                r.len()
            );
        }
    }
}

fn write_json(path: &Path, runs: &Runs) {
    let v: Vec<_> = runs
        .iter()
        .flat_map(|((n, system), rs)| {
            rs.iter().map(move |r| {
                json!({"consumers": n, "system": system, "records": r.records, "mb": r.mb,
                       "mb_per_s": r.mb_per_s, "records_per_s": r.records_per_s,
                       "cpu_s": r.cpu_s, "client_cpu_s": r.client_cpu_s})
            })
        })
        .collect();
    if let Err(e) = std::fs::write(path, json!({ "runs": v }).to_string()) {
        eprintln!("{}: {e}", path.display());
    }
}

fn main() -> std::process::ExitCode {
    let mut args = Args::parse();
    if args.quick {
        (args.records, args.reps, args.consumers) = (20_000, 1, vec![1, 4]);
    }
    let mut runs = Runs::new();
    for r in 1..=args.reps {
        let order: [&'static str; 2] = match r % 2 {
            1 => ["brook", "kafka"],
            _ => ["kafka", "brook"],
        };
        for system in order
            .into_iter()
            .filter(|s| args.system == "both" || args.system == *s)
        {
            eprintln!("round {r}: {system}");
            if let Err(e) = round(r, system, &args, &mut runs) {
                eprintln!("round {r}: {system} failed: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    print_table(&runs, &args);
    if let Some(path) = &args.json {
        write_json(path, &runs);
    }
    std::process::ExitCode::SUCCESS
}
