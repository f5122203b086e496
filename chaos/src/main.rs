//! `brook-chaos` (also `brook chaos`): see the crate documentation ([`brook_chaos`]).
#![forbid(unsafe_code)]
// Test functions may be long (a scenario reads top to bottom); the rest is held to clippy.toml's 70 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};

use brook_chaos::report;
use brook_chaos::run::{run, RunConfig};
use brook_chaos::schedule::Weights;
use brook_chaos::target::{BrookCluster, KafkaCluster, Target};
use brook_chaos::workload::{ClientSettings, WorkloadKind};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum TargetKind {
    /// A `brook cluster` (started by the run, or `--supervisor`).
    Brook,
    /// Apache Kafka 4.4 from `scripts/kafka-reference` (started by the run).
    Kafka,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Workload {
    /// Idempotent producers (or not: --idempotence), one send per record.
    Send,
    /// Transactional producers: a few records to several partitions per transaction, one
    /// transaction in four aborted; checks aborted and uncommitted reads, lost commits and
    /// partial transactions too.
    Txn,
    /// The `send` producers, and --share-consumers members of one share group (Kafka 4.4's
    /// VerifiableShareConsumer, a Java KafkaShareConsumer; needs `java` and --kafka-lib):
    /// checks that no accepted record is acknowledged again, every record is delivered and
    /// ends acknowledged or archived.
    Share,
}

#[derive(Parser, Debug)]
#[command(
    name = "brook chaos",
    about = "Drives a 3-node cluster with real clients under a seeded nemesis and checks the history for Jepsen's anomalies"
)]
struct Args {
    #[arg(long, value_enum, default_value = "brook")]
    target: TargetKind,
    /// What the producers do.
    #[arg(long, value_enum, default_value = "send")]
    workload: Workload,
    /// The schedule's seed (default: drawn from the clock, and printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Nemesis steps (about 70% of them kill a leader, with the default weights).
    #[arg(long, default_value_t = 20)]
    steps: usize,
    /// How often each kind of step is drawn, relative to the others: `kill-leader=60,isr-churn=15,...`
    /// (kinds: kill-leader, isr-churn, crash-point, pause, delay-replication,
    /// kill-txn-coordinator (needs --workload txn), kill-group-coordinator (needs
    /// --group-consumers), kill-share-coordinator (needs --workload share); one not named is
    /// never drawn). Default:
    /// kill-leader=35,isr-churn=20,crash-point=15,pause=15,delay-replication=15.
    #[arg(long, value_parser = Weights::parse)]
    weights: Option<Weights>,
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    #[arg(long, default_value_t = 2)]
    producers: usize,
    #[arg(long, default_value_t = 2)]
    consumers: usize,
    /// Members of a consumer group that commit offsets (checked for lost-offset-commit),
    /// and the joiner the group-coordinator kills rebalance with.
    #[arg(long, default_value_t = 0)]
    group_consumers: usize,
    /// Members of the share group (--workload share), each a Java process.
    #[arg(long, default_value_t = 3)]
    share_consumers: usize,
    /// The Kafka 4.4 jars the share consumers run from (default: $KAFKA_REFERENCE_LIB, else
    /// target/kafka-reference/lib, where `scripts/kafka-reference fetch` puts them).
    #[arg(long)]
    kafka_lib: Option<PathBuf>,
    /// Records a second, per producer.
    #[arg(long, default_value_t = 200)]
    rate: u32,
    /// The producers' acks: all, 1 or 0.
    #[arg(long, default_value = "all")]
    acks: String,
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    idempotence: bool,
    #[arg(long, default_value_t = 2)]
    min_insync_replicas: u32,
    /// The brokers' replica.lag.time.max.ms.
    #[arg(long, default_value_t = 3000)]
    replica_lag_ms: u64,
    /// After each step, how long the cluster may take to have every node up and every ISR
    /// full before the next step starts anyway.
    #[arg(long, default_value_t = 60)]
    settle_secs: u64,
    /// Stop applying steps after this many seconds (then heal, read back and check).
    #[arg(long)]
    time_limit_secs: Option<u64>,
    /// Only check the history of a JSON file a run wrote, again, and print the verdict.
    #[arg(long, value_name = "FILE")]
    check: Option<PathBuf>,
    /// Where the JSON history and verdict go (default: brook-chaos-<target>-<seed>.json).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The `brook` binary (default: `brook` next to this program).
    #[arg(long)]
    brook_bin: Option<PathBuf>,
    /// Use the running `brook cluster` whose supervisor listens here, instead of starting one.
    #[arg(long)]
    supervisor: Option<String>,
    /// Start the Brook cluster as `brook cluster --secure --sasl` does: SASL_SSL with
    /// SCRAM-SHA-512 for the clients and between brokers, mutual TLS on the controller
    /// listener; every client of the run uses the settings that cluster writes.
    #[arg(long, conflicts_with = "supervisor")]
    secure: bool,
    /// Keep the started Brook cluster's data here instead of a temp dir.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// `scripts/kafka-reference` (default: found from the current directory).
    #[arg(long, default_value = "scripts/kafka-reference")]
    kafka_script: PathBuf,
}

fn brook_bin(args: &Args) -> PathBuf {
    args.brook_bin.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("brook")))
            .unwrap_or_else(|| PathBuf::from("brook"))
    })
}

/// `--check`: the verdict of a saved run's history, checked again.
fn recheck(path: &std::path::Path) -> ExitCode {
    match report::recheck(path) {
        Ok((reports, verdict)) => {
            print!("{}", report::anomalies_table(&reports, &verdict));
            if verdict.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("brook chaos: {e}");
            ExitCode::from(2)
        }
    }
}

/// The run the arguments ask for.
fn run_config(args: &Args, seed: u64) -> RunConfig {
    RunConfig {
        seed,
        steps: args.steps,
        weights: args.weights.unwrap_or_default(),
        schedule: None,
        clients: ClientSettings {
            workload: match args.workload {
                Workload::Send => WorkloadKind::Send,
                Workload::Txn => WorkloadKind::Txn,
                Workload::Share => WorkloadKind::Share,
            },
            partitions: args.partitions,
            producers: args.producers,
            consumers: args.consumers,
            group_consumers: args.group_consumers,
            share_consumers: args.share_consumers,
            kafka_lib: args
                .kafka_lib
                .clone()
                .unwrap_or_else(brook_chaos::share::default_kafka_lib),
            rate: args.rate,
            acks: args.acks.clone(),
            idempotence: args.idempotence,
        },
        min_insync_replicas: args.min_insync_replicas,
        replication_factor: 3,
        replica_lag_ms: args.replica_lag_ms,
        settle_secs: args.settle_secs,
        time_limit_secs: args.time_limit_secs,
    }
}

/// The cluster the run goes against: a Brook cluster started here (or attached to through
/// its supervisor), or a Kafka cluster from `scripts/kafka-reference`, with the run's
/// broker settings.
fn start_target(args: &Args, overrides: &[(String, String)]) -> Result<Box<dyn Target>, String> {
    match (args.target, &args.supervisor) {
        (TargetKind::Brook, Some(s)) => BrookCluster::attach(s).map(|c| Box::new(c) as _),
        (TargetKind::Brook, None) => {
            let bin = brook_bin(args);
            if !bin.exists() {
                return Err(format!(
                    "no broker binary at {} (cargo build --release --bin brook, or --brook-bin)",
                    bin.display()
                ));
            }
            let data = args.data_dir.clone();
            match args.secure {
                true => BrookCluster::start_secure(&bin, 3, data, overrides),
                false => BrookCluster::start(&bin, 3, data, overrides),
            }
            .map(|c| Box::new(c) as _)
        }
        (TargetKind::Kafka, _) if args.secure => {
            Err("--secure starts a Brook cluster; the Kafka target is PLAINTEXT".to_string())
        }
        (TargetKind::Kafka, _) => {
            KafkaCluster::start(&args.kafka_script, overrides).map(|c| Box::new(c) as _)
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(path) = &args.check {
        return recheck(path);
    }
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let cfg = run_config(&args, seed);
    if let Err(e) = cfg.validate() {
        eprintln!("brook chaos: {e}");
        return ExitCode::from(2);
    }
    eprintln!("brook chaos: seed {seed}, {} steps", cfg.steps);
    let target = start_target(&args, &cfg.broker_overrides());
    let mut target = match target {
        Ok(t) => t,
        Err(e) => {
            eprintln!("brook chaos: {e}");
            return ExitCode::from(2);
        }
    };
    let out = match run(target.as_mut(), &cfg) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("brook chaos: {e}");
            return ExitCode::from(2);
        }
    };
    if !out.verdict.ok {
        if let Some(dir) = target.keep_data() {
            eprintln!(
                "brook chaos: the nodes' data and logs are kept in {}",
                dir.display()
            );
        }
    }
    drop(target);
    let path = args
        .out
        .unwrap_or_else(|| PathBuf::from(format!("brook-chaos-{}-{seed}.json", out.target)));
    print!("{}", report::table(&out));
    match report::write_json(&out, &path) {
        Ok(()) => println!("history and verdict: {}", path.display()),
        Err(e) => eprintln!("brook chaos: {e}"),
    }
    println!("replay: {}", report::replay(&out));
    if out.verdict.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
